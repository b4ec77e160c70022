/* GEMM, GPU family: the parameter space of cl_kernels/gemm_gpu.cl, its
 * validation and the parameters in effect (the launch: runtime/ops/
 * ops_gemm_gpu.c).
 *
 * The space is data (gemm_gpu_knobs below): each knob's build macro, what
 * it means and the values a tuner may try. A point of the space is valid
 * when it meets the kernel's structural rules (gemm_gpu_check_space) and
 * runs on a given device when, besides, its work-groups and __local stages
 * fit the device (kiln__gemm_gpu_check). Every check gives its reason, so a
 * tuner can count and explain what it skipped and a rejected override never
 * reaches the driver.
 *
 * Parameters in effect, first that applies: a test's override
 * (kiln__gemm_set_gpu_params); kiln_tuning_set's, the device's tuning
 * file's or kiln's tuning database's (tuning_file.c), when they are a point
 * of the space that the device runs (a file's or a row's that is not is
 * dropped with the reason); else the profile's row in backends/
 * (gemm_tile x gemm_block, as before the space existed: KWG = MDIMC = NDIMC
 * = tile, MWG = NWG = tile * block, strided outputs, padded staged tiles),
 * shrunk until the device accepts it.
 */
#include "tune.h"

#include <stdio.h>
#include <string.h>

#define F(name) offsetof(struct kiln__gemm_gpu_params, name)

/* The knobs, in the order of the build options. Values are those a tuner
 * tries; the profile's defaults may lie outside them (the historic 8 x 8
 * tile of 2 x 2 outputs does). */
const struct kiln__gemm_knob kiln__gemm_gpu_knobs[KILN__GEMM_GPU_KNOBS] = {
    {"MWG", F(mwg), "rows of C per work-group tile", 4, {16, 32, 64, 128}},
    {"NWG", F(nwg), "columns of C per work-group tile", 4, {16, 32, 64, 128}},
    {"KWG", F(kwg), "steps of k per __local stage", 3, {8, 16, 32}},
    {"MDIMC", F(mdimc), "work-items along the tile's rows", 3, {8, 16, 32}},
    {"NDIMC", F(ndimc), "work-items along the tile's columns", 3, {8, 16, 32}},
    {"VWM", F(vwm), "vector width of A's staged global loads", 4,
     {1, 2, 4, 8}},
    {"VWN", F(vwn), "vector width of B's staged global loads", 4,
     {1, 2, 4, 8}},
    {"SA", F(sa), "stage A in __local memory", 2, {0, 1}},
    {"SB", F(sb), "stage B in __local memory", 2, {0, 1}},
    {"PADA", F(pada), "floats of padding per __local row of A", 2, {0, 1}},
    {"PADB", F(padb), "floats of padding per __local row of B", 2, {0, 1}},
    {"DB", F(db), "double-buffered __local stages", 2, {0, 1}},
    {"KWI", F(kwi), "unrolling of the k loop within a stage", 4, {1, 2, 4, 8}},
    {"STRM", F(strm), "a work-item's rows MDIMC apart (1) or adjacent (0)", 2,
     {0, 1}},
    {"STRN", F(strn), "a work-item's columns NDIMC apart (1) or adjacent (0)",
     2, {0, 1}},
    {"DWG", F(dwg), "direct kernel: work-group edge", 2, {8, 16}},
    {"DWI", F(dwi), "direct kernel: outputs per work-item edge", 3, {1, 2, 4}},
    {"SWITCH", F(sw),
     "direct kernel below m*n*k = SWITCH^3 (0: tiled kernel always)", 5,
     {0, 64, 128, 256, 512}},
};

unsigned kiln__gemm_gpu_get(const struct kiln__gemm_gpu_params *p,
                            size_t knob) {
  unsigned v;
  memcpy(&v, (const char *)p + kiln__gemm_gpu_knobs[knob].offset, sizeof v);
  return v;
}

void kiln__gemm_gpu_put(struct kiln__gemm_gpu_params *p, size_t knob,
                        unsigned value) {
  memcpy((char *)p + kiln__gemm_gpu_knobs[knob].offset, &value, sizeof value);
}

/* The rules of the kernel itself, whatever the device (the #error lines of
 * gemm_gpu.cl, checked here first so that a candidate never fails to build
 * for them). Non-zero sizes are assumed (checked by the callers). */
static bool check_structure(const struct kiln__gemm_gpu_params *p,
                            char *reason, size_t size) {
  const unsigned wgs = p->mdimc * p->ndimc;
  if (p->mwg % p->mdimc || p->nwg % p->ndimc) {
    snprintf(reason, size,
             "MWG %u and NWG %u must be multiples of MDIMC %u and NDIMC %u",
             p->mwg, p->nwg, p->mdimc, p->ndimc);
    return false;
  }
  const unsigned outputs = (p->mwg / p->mdimc) * (p->nwg / p->ndimc);
  if (outputs > 64) {
    snprintf(reason, size,
             "%u outputs per work-item (MWG/MDIMC x NWG/NDIMC) exceed 64: the "
             "accumulators would spill out of registers on every GPU",
             outputs);
    return false;
  }
  if (p->kwg % p->kwi) {
    snprintf(reason, size, "KWG %u is not a multiple of KWI %u", p->kwg,
             p->kwi);
    return false;
  }
  if (p->sa && (p->mwg % p->vwm || p->kwg % p->vwm ||
                (p->mwg * p->kwg) % (p->vwm * wgs))) {
    snprintf(reason, size,
             "staged A: MWG %u and KWG %u must be multiples of VWM %u and the "
             "MWG x KWG / VWM loads a multiple of the %u work-items",
             p->mwg, p->kwg, p->vwm, wgs);
    return false;
  }
  if (p->sb && (p->nwg % p->vwn || p->kwg % p->vwn ||
                (p->nwg * p->kwg) % (p->vwn * wgs))) {
    snprintf(reason, size,
             "staged B: NWG %u and KWG %u must be multiples of VWN %u and the "
             "NWG x KWG / VWN loads a multiple of the %u work-items",
             p->nwg, p->kwg, p->vwn, wgs);
    return false;
  }
  return true;
}

/* Every knob holds one of its values. */
static bool check_values(const struct kiln__gemm_gpu_params *p, char *reason,
                         size_t size) {
  for (size_t i = 0; i < KILN__GEMM_GPU_KNOBS; i++) {
    const struct kiln__gemm_knob *kn = &kiln__gemm_gpu_knobs[i];
    const unsigned v = kiln__gemm_gpu_get(p, i);
    bool found = false;
    for (unsigned j = 0; j < kn->count; j++)
      found = found || kn->values[j] == v;
    if (!found) {
      snprintf(reason, size, "%s %u is not one of the values of the space", kn->name,
               v);
      return false;
    }
  }
  return true;
}

size_t kiln__gemm_gpu_local_bytes(const struct kiln__gemm_gpu_params *p) {
  const size_t stages = p->db ? 2 : 1;
  size_t floats = 0;
  if (p->sa)
    floats += (size_t)p->kwg * (p->mwg + p->pada);
  if (p->sb)
    floats += (size_t)p->kwg * (p->nwg + p->padb);
  return stages * floats * sizeof(float);
}

bool kiln__gemm_gpu_check(const struct kiln__gemm_gpu_params *p,
                          const kiln_device_info *info, bool in_space,
                          char *reason, size_t size) {
  for (size_t i = 0; i < KILN__GEMM_GPU_KNOBS; i++)
    if (kiln__gemm_gpu_get(p, i) == 0 &&
        strcmp(kiln__gemm_gpu_knobs[i].name, "SA") != 0 &&
        strcmp(kiln__gemm_gpu_knobs[i].name, "SB") != 0 &&
        strncmp(kiln__gemm_gpu_knobs[i].name, "PAD", 3) != 0 &&
        strcmp(kiln__gemm_gpu_knobs[i].name, "DB") != 0 &&
        strncmp(kiln__gemm_gpu_knobs[i].name, "STR", 3) != 0 &&
        strcmp(kiln__gemm_gpu_knobs[i].name, "SWITCH") != 0) {
      snprintf(reason, size, "%s is 0", kiln__gemm_gpu_knobs[i].name);
      return false;
    }
  if (in_space && !check_values(p, reason, size))
    return false;
  if (!check_structure(p, reason, size))
    return false;
  const size_t wgs = (size_t)p->mdimc * p->ndimc;
  if (wgs > info->max_work_group_size) {
    snprintf(reason, size,
             "work-groups of %zu work-items (MDIMC x NDIMC) exceed the "
             "device's %zu",
             wgs, info->max_work_group_size);
    return false;
  }
  if (p->ndimc > info->max_work_item_sizes[0] ||
      p->mdimc > info->max_work_item_sizes[1]) {
    snprintf(reason, size,
             "NDIMC %u or MDIMC %u exceeds the device's work-item sizes %zu "
             "x %zu",
             p->ndimc, p->mdimc, info->max_work_item_sizes[0],
             info->max_work_item_sizes[1]);
    return false;
  }
  const size_t local = kiln__gemm_gpu_local_bytes(p);
  if (local > info->local_mem_bytes) {
    snprintf(reason, size,
             "%zu bytes of __local stages exceed the device's %llu", local,
             (unsigned long long)info->local_mem_bytes);
    return false;
  }
  const size_t dwgs = (size_t)p->dwg * p->dwg;
  if (dwgs > info->max_work_group_size || p->dwg > info->max_work_item_sizes[0] ||
      p->dwg > info->max_work_item_sizes[1]) {
    snprintf(reason, size,
             "the direct kernel's %u x %u work-groups exceed the device's "
             "limits",
             p->dwg, p->dwg);
    return false;
  }
  return true;
}

int kiln__gemm_gpu_format(const struct kiln__gemm_gpu_params *p, char *buf,
                          size_t size) {
  size_t used = 0;
  int n = 0;
  for (size_t i = 0; i < KILN__GEMM_GPU_KNOBS; i++) {
    n = snprintf(buf + used, used < size ? size - used : 0, "%s%s=%u",
                 i ? " " : "", kiln__gemm_gpu_knobs[i].name,
                 kiln__gemm_gpu_get(p, i));
    if (n < 0)
      return n;
    used += (size_t)n;
  }
  return (int)used;
}

bool kiln__gemm_gpu_parse(const char *text, struct kiln__gemm_gpu_params *p,
                          char *reason, size_t size) {
  const char *names[KILN__GEMM_GPU_KNOBS];
  unsigned values[KILN__GEMM_GPU_KNOBS];
  for (size_t i = 0; i < KILN__GEMM_GPU_KNOBS; i++)
    names[i] = kiln__gemm_gpu_knobs[i].name;
  if (!kiln__knobs_parse(text, "GEMM", names, KILN__GEMM_GPU_KNOBS, values,
                         reason, size))
    return false;
  for (size_t i = 0; i < KILN__GEMM_GPU_KNOBS; i++)
    kiln__gemm_gpu_put(p, i, values[i]);
  return true;
}

/* ---- parameters in effect ------------------------------------------------ */

/* A test's override: set flag and value under no lock, since tests set it
 * between GEMMs on one thread; atomic only so that it is not a data race. */
static _Atomic bool override_set;
static struct kiln__gemm_gpu_params override_params;

void kiln__gemm_set_gpu_params(const struct kiln__gemm_gpu_params *p) {
  atomic_store(&override_set, false);
  if (p != NULL) {
    override_params = *p;
    atomic_store(&override_set, true);
  }
  kiln__variants_stale();
}

/* The profile's row as a point of the space, shrunk until it fits. */
static void profile_params(const kiln_context *ctx,
                           struct kiln__gemm_gpu_params *p) {
  const struct kiln_tuning *t = kiln__ops_tuning(ctx);
  const kiln_device_info *info = &ctx->device->info;
  unsigned ts = kiln__ops_tune(t->gemm_tile, 8);
  const unsigned rb = kiln__ops_tune(t->gemm_block, 2);
  char reason[8];
  for (;;) {
    *p = (struct kiln__gemm_gpu_params){
        .mwg = ts * rb, .nwg = ts * rb, .kwg = ts,  .mdimc = ts, .ndimc = ts,
        .vwm = 1,       .vwn = 1,       .sa = 1,    .sb = 1,     .pada = 1,
        .padb = 1,      .db = 0,        .kwi = 1,   .strm = 1,   .strn = 1,
        .dwg = 8,       .dwi = 2,       .sw = 0};
    if (ts == 1 || kiln__gemm_gpu_check(p, info, false, reason, sizeof reason))
      break;
    ts /= 2;
  }
  /* A device too small for 8 x 8 direct groups (none known) gets 1 x 1. */
  if (!kiln__gemm_gpu_check(p, info, false, reason, sizeof reason))
    p->dwg = 1;
}

kiln_status kiln__gemm_gpu_source(const kiln_context *ctx,
                                  struct kiln__gemm_gpu_params *p,
                                  const char **source) {
  *source = "profile";
  if (atomic_load(&override_set)) {
    *source = "test override";
    *p = override_params;
    char reason[200];
    if (!kiln__gemm_gpu_check(p, &ctx->device->info, false, reason,
                              sizeof reason))
      return kiln__fail(KILN_ERR_UNSUPPORTED,
                        "GEMM parameters rejected for %s: %s",
                        ctx->device->info.name, reason);
    return KILN_OK;
  }
  char text[KILN_TUNING_TEXT_CAPACITY], reason[256];
  const char *from = NULL;
  /* A rejected file line gives way to the database row, and that to the
   * profile (kiln_tuning_set checks before it records: never rejected). */
  while (kiln__tuning_lookup(ctx, "gemm", text, sizeof text, &from)) {
    if (kiln__gemm_gpu_parse(text, p, reason, sizeof reason) &&
        kiln__gemm_gpu_check(p, &ctx->device->info, true, reason,
                             sizeof reason)) {
      *source = from;
      return KILN_OK;
    }
    kiln__tuning_reject(ctx, "gemm", reason);
  }
  profile_params(ctx, p);
  return KILN_OK;
}

void kiln__gemm_gpu_options(const struct kiln__gemm_gpu_params *p,
                            kiln_dtype dtype, char *buf, size_t size) {
  size_t used = 0;
  for (size_t i = 0; i < KILN__GEMM_GPU_KNOBS && used < size; i++) {
    /* SWITCH is the host's: the program does not depend on it. */
    if (strcmp(kiln__gemm_gpu_knobs[i].name, "SWITCH") == 0)
      continue;
    int n = snprintf(buf + used, size - used, "%s-D%s=%u", used ? " " : "",
                     kiln__gemm_gpu_knobs[i].name, kiln__gemm_gpu_get(p, i));
    if (n < 0)
      break;
    used += (size_t)n;
  }
  if (used < size)
    snprintf(buf + used, size - used, " -DDT=%d", (int)dtype);
}

/* ---- the space, for the tuning API (tune_api.c) ----------------------- */

static void space_knob(const struct kiln__tuning_space *self, size_t index,
                       kiln_tuning_knob *out) {
  (void)self;
  const struct kiln__gemm_knob *k = &kiln__gemm_gpu_knobs[index];
  out->name = k->name;
  out->what = k->what;
  out->count = k->count;
  memcpy(out->values, k->values, k->count * sizeof k->values[0]);
}

static kiln_status space_check(const struct kiln__tuning_space *self,
                               const kiln_context *ctx, const char *params,
                               char *why, size_t size) {
  (void)self;
  struct kiln__gemm_gpu_params p;
  if (!kiln__gemm_gpu_parse(params, &p, why, size))
    return KILN_ERR_INVALID_ARGUMENT;
  /* Outside the listed values is a malformed point; beyond the kernel's
   * rules or the device's limits, one this device cannot run. */
  char device_why[512];
  if (kiln__gemm_gpu_check(&p, &ctx->device->info, true, why, size))
    return KILN_OK;
  return kiln__gemm_gpu_check(&p, &ctx->device->info, false, device_why,
                              sizeof device_why)
             ? KILN_ERR_INVALID_ARGUMENT
             : KILN_ERR_UNSUPPORTED;
}

static kiln_status space_in_effect(const struct kiln__tuning_space *self,
                                   const kiln_context *ctx, char *params,
                                   size_t size, const char **source) {
  (void)self;
  struct kiln__gemm_gpu_params p;
  kiln_status s = kiln__gemm_gpu_source(ctx, &p, source);
  if (s != KILN_OK)
    return s;
  /* The CPU family runs its own kernel, of the gemm_cpu space. */
  if (kiln__ops_tuning(ctx)->family == KILN_FAMILY_CPU) {
    *source = "profile (CPU family)";
    params[0] = '\0';
  } else {
    kiln__gemm_gpu_format(&p, params, size);
  }
  return KILN_OK;
}

static kiln_status space_build(const struct kiln__tuning_space *self,
                               kiln_context *ctx, const char *params) {
  (void)self;
  struct kiln__gemm_gpu_params p;
  char why[256], options[320];
  if (!kiln__gemm_gpu_parse(params, &p, why, sizeof why))
    return kiln__fail(KILN_ERR_INVALID_ARGUMENT, "gemm params: %s", why);
  /* Every dtype's program, as a launch would build one of them. */
  static const kiln_dtype dtypes[] = {KILN_F32, KILN_F16, KILN_BF16};
  kiln_status s = KILN_OK;
  for (size_t i = 0; i < 3 && s == KILN_OK; i++) {
    kiln__gemm_gpu_options(&p, dtypes[i], options, sizeof options);
    cl_program program; /* owned by ctx's memo, as a launch's would be */
    s = kiln__op_program(ctx, "gemm_gpu", options, &program);
  }
  return s;
}

const struct kiln__tuning_space kiln__gemm_tuning_space = {
    .op = "gemm",
    .summary = "the GPU-family GEMM kernel (cl_kernels/gemm_gpu.cl)",
    .knobs = KILN__GEMM_GPU_KNOBS,
    .knob = space_knob,
    .check = space_check,
    .in_effect = space_in_effect,
    .build = space_build,
};
