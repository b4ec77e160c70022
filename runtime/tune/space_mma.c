/* GEMM on the GPU's matrix units: the parameter space of cl_kernels/
 * gemm_mma.cl (a small space, space.c's machinery), and whether a context
 * runs that kernel at all. The kernel has four forms: NVIDIA's tensor
 * cores (inline PTX mma.sync m16n8k16 and ldmatrix, warps of 32), AMD's
 * matrix cores, the MFMA 16x16x16 builtins of CDNA2 and CDNA3 (wavefronts
 * of 64) and the WMMA 16x16x16 builtins of RDNA3 (wave32), and Intel's
 * XMX, the DPAS builtins of cl_intel_subgroup_matrix_multiply_accumulate
 * (sub-groups of 8 or 16), chosen by the context's profile (the build
 * options of backends/amd.c and intel.c define KILN_AMD_GPU and
 * KILN_INTEL_GPU, which select their forms) and by the GPU (AMD's: the
 * kernel by the compiler's gfx macros, this module by the device's name;
 * Intel's sub-group size: this module by the device's smallest, passed to
 * the kernel as KILN_INTEL_SG). One space serves all four; the
 * work-group's lanes follow the form.
 *
 * The GPU family's GEMM (ops_gemm_gpu.c) runs f16 and bf16 operands on
 * gemm_mma instead of gemm_gpu only where all of these hold, checked once
 * per context, dtype and tuning change (variant.c), the first failing one
 * being the reason kiln_tuning_get_info and `kiln info` show:
 *   - the operands are f16 or bf16 (the units take no f32 here);
 *   - the context runs AMD's or Intel's profile (context_form), or the
 *     device is NVIDIA's (vendor id 0x10de): no other compiler is handed
 *     the inline PTX (one that crashed on it would take the process
 *     along), and where AMD's profile is forced on another device the
 *     kernel stops at an #error, before any builtin;
 *   - for Intel's form, the device reports
 *     cl_intel_subgroup_matrix_multiply_accumulate and a smallest
 *     sub-group size of 8 or 16 (CL_DEVICE_SUB_GROUP_SIZES_INTEL), the
 *     two the builtins take;
 *   - the compile probe (gemm_mma.cl with KILN_MMA_PROBE: one ldmatrix and
 *     one mma.sync, or one MFMA, WMMA or DPAS, of the dtype, written as the
 *     kernel writes them) builds on the device: NVIDIA GPUs before sm_80,
 *     AMD GPUs other than gfx90a, gfx94x and RDNA3 (an #error in the
 *     kernel), and drivers without the instructions fail here;
 *   - the point comes from kiln tune's correctness gate: a tuning file or a
 *     database row (which kiln tune writes only after its gate passed on
 *     the device), or kiln_tuning_set (what kiln tune gates a candidate
 *     through). The profile's default alone is never run: it is only the
 *     tuner's first candidate.
 * Otherwise gemm_gpu runs, as it did before this kernel existed.
 *
 * The emulation (KILN_MMA_EMULATE, gemm_mma.cl) is for the test suite
 * only: it is turned on by kiln__gemm_mma_emulate, an internal function
 * that the shared library does not export (tests/abi/kiln.symbols lists
 * every exported symbol; the abi_symbols test fails on a new one), and by
 * nothing else: no knob of the space, no environment variable, no tuning
 * file or database row can name it, and kiln_tuning_build never builds it.
 * It emulates the form of the context's profile: AMD's MFMA (or WMMA, with
 * kiln__gemm_mma_emulate_wmma) where the tests force AMD's profile,
 * Intel's DPAS (sub-groups of 16, or 8 with kiln__gemm_mma_emulate_dpas)
 * where they force Intel's, NVIDIA's otherwise.
 */
#include "tune.h"

#include <stdio.h>
#include <string.h>

#define NVIDIA_VENDOR_ID 0x10deu

static _Atomic bool emulate;

static _Atomic bool emulate_wmma;

static _Atomic unsigned emulate_dpas = 16;

#define DPAS_EXTENSION "cl_intel_subgroup_matrix_multiply_accumulate"

/* The kernel's forms (gemm_mma.cl's MMA_AMD and MMA_INTEL): its lanes per
 * warp (DPAS: validation's, see below), columns per fragment and
 * accumulators per lane and fragment. */
enum form { FORM_PTX, FORM_MFMA, FORM_WMMA, FORM_DPAS };
/* max_acc: the most accumulators a lane may hold; max_acc_bk: for WMMA,
 * the most accumulators x BK (0: no such limit). clang 15 gives gfx1100
 * 128 VGPRs, which hold WMMA's 16-element A and B fragments besides the
 * accumulators: over 16 x 64 warp tiles' 32 accumulators with BK 16, 16
 * with BK 32 or 8 with BK 64 some points spill (tests/check_mma_amd.sh;
 * by hand over BK, STAGES and warp tiles at 64 x 64 blocks). MFMA's
 * accumulators go to the separate AGPRs. DPAS: validation sees the device,
 * not its sub-group size, so it takes 16 lanes (Xe-HPC, Xe2), the more
 * work-items per warp; a lane's 16 x 16 fragment is 16 accumulators,
 * whatever the lanes, so at most 32 holds a warp's accumulators to
 * WM x WN x 4 bytes <= 2 KiB, half the 4 KiB register file of an Xe-LP or
 * Xe-HPG hardware thread (128 registers of 32 bytes; Xe-HPC's and Xe2's
 * hold 8 KiB), the other half for A's and B's operands: an estimate from
 * the architecture, not yet measured on one. */
static const struct {
  unsigned lanes, frag_n, acc_n, max_acc, max_acc_bk;
  const char *what; /* the probe's instructions */
} forms[] = {
    [FORM_PTX] = {32, 8, 4, 128, 0,
                  "inline PTX ldmatrix and mma.sync m16n8k16"},
    [FORM_MFMA] = {64, 16, 4, 128, 0, "AMD's MFMA 16x16x16, CDNA2 and CDNA3"},
    [FORM_WMMA] = {32, 16, 8, 32, 512, "AMD's WMMA 16x16x16, RDNA3"},
    [FORM_DPAS] = {16, 16, 16, 32, 0,
                   "Intel's DPAS (" DPAS_EXTENSION ")"},
};

/* RDNA3 by the device's name (ROCm's "gfx1100" and the like: the gfx11
 * targets the kernel takes WMMA on). */
static bool rdna3(const char *name) {
  return name != NULL &&
         (strncmp(name, "gfx110", 6) == 0 || strncmp(name, "gfx115", 6) == 0);
}

/* Validation sees the device, not the context: its matched profile (a
 * context that forces AMD's profile elsewhere stops at the probe; the
 * emulation's forms have the shape of the PTX form's, MFMA's lanes
 * aside). */
static enum form device_form(const kiln_device_info *info) {
  if (info->profile != NULL && strcmp(info->profile, "intel") == 0)
    return FORM_DPAS;
  if (info->profile == NULL || strcmp(info->profile, "amd") != 0)
    return FORM_PTX;
  return rdna3(info->name) ? FORM_WMMA : FORM_MFMA;
}

/* The context's form: AMD's where it runs AMD's profile (the emulated one
 * the tests chose, where they emulate), Intel's where it runs Intel's,
 * NVIDIA's otherwise. */
static enum form context_form(const kiln_context *ctx) {
  if (ctx->backend != NULL && strcmp(ctx->backend->name, "intel") == 0)
    return FORM_DPAS;
  if (ctx->backend == NULL || strcmp(ctx->backend->name, "amd") != 0)
    return FORM_PTX;
  if (atomic_load(&emulate))
    return atomic_load(&emulate_wmma) ? FORM_WMMA : FORM_MFMA;
  return rdna3(ctx->device->info.name) ? FORM_WMMA : FORM_MFMA;
}

/* Intel's sub-group size for DPAS: the device's smallest (the builtins
 * run in sub-groups of exactly that size, 8 or 16), or the emulated one;
 * 0 where the device reports neither. */
static unsigned dpas_lanes(const kiln_context *ctx) {
  if (atomic_load(&emulate))
    return atomic_load(&emulate_dpas);
  size_t sizes[16], bytes = 0;
  const cl_device_id id = ctx->device->id;
  if (id == NULL ||
      clGetDeviceInfo(id, CL_DEVICE_SUB_GROUP_SIZES_INTEL, sizeof sizes,
                      sizes, &bytes) != CL_SUCCESS ||
      bytes < sizeof sizes[0] || bytes > sizeof sizes)
    return 0;
  size_t least = sizes[0];
  for (size_t i = 1; i < bytes / sizeof sizes[0]; i++)
    least = sizes[i] < least ? sizes[i] : least;
  return least == 8 || least == 16 ? (unsigned)least : 0;
}

unsigned kiln__gemm_mma_lanes(const kiln_context *ctx) {
  const enum form f = context_form(ctx);
  return f == FORM_DPAS ? dpas_lanes(ctx) : forms[f].lanes;
}

void kiln__gemm_mma_form_options(const kiln_context *ctx, char *buf,
                                 size_t size) {
  const enum form f = context_form(ctx);
  size_t used = strlen(buf);
  if (atomic_load(&emulate) && used < size)
    used += (size_t)snprintf(buf + used, size - used,
                             " -DKILN_MMA_EMULATE=%d",
                             f == FORM_WMMA   ? 2
                             : f == FORM_DPAS ? 3
                                              : 1);
  if (f == FORM_DPAS && used < size)
    snprintf(buf + used, size - used, " -DKILN_INTEL_SG=%u", dpas_lanes(ctx));
}

void kiln__gemm_mma_emulate_dpas(unsigned sub_group) {
  atomic_store(&emulate_dpas, sub_group);
  kiln__variants_stale();
}

void kiln__gemm_mma_emulate_wmma(bool on) {
  atomic_store(&emulate_wmma, on);
  kiln__variants_stale();
}

void kiln__gemm_mma_emulate(bool on) {
  atomic_store(&emulate, on);
  kiln__variants_stale();
}

/* The kernel's rules (its #error line) and the device's limits. */
static bool mma_check(const struct kiln__point *p,
                      const kiln_device_info *info, char *reason,
                      size_t size) {
  const unsigned bm = p->v[KILN__MMA_BM], bn = p->v[KILN__MMA_BN],
                 bk = p->v[KILN__MMA_BK], wm = p->v[KILN__MMA_WM],
                 wn = p->v[KILN__MMA_WN], st = p->v[KILN__MMA_STAGES];
  if (bm % wm || bn % wn) {
    snprintf(reason, size,
             "BM %u and BN %u must be multiples of WM %u and WN %u", bm, bn,
             wm, wn);
    return false;
  }
  if (wm % 16 || wn % 16 || bk % 16 || st < 1 || st > 2) {
    snprintf(reason, size,
             "WM %u, WN %u and BK %u must be multiples of 16 and STAGES %u 1 "
             "or 2",
             wm, wn, bk, st);
    return false;
  }
  /* Accumulators per lane: (WM / 16) x (WN / N) fragments of A each, N
   * the fragment's columns and A its accumulators per lane (8 and 4 for
   * mma.sync, 16 and 4 for MFMA, 16 and 8 for WMMA). */
  const enum form f = device_form(info);
  const unsigned lanes = forms[f].lanes, frag_n = forms[f].frag_n,
                 acc_n = forms[f].acc_n;
  const unsigned regs = (wm / 16) * (wn / frag_n) * acc_n;
  if (forms[f].max_acc_bk != 0 && regs * bk > forms[f].max_acc_bk) {
    snprintf(reason, size,
             "%u accumulators per lane with BK %u exceed WMMA's registers "
             "(accumulators x BK at most %u)",
             regs, bk, forms[f].max_acc_bk);
    return false;
  }
  if (regs > forms[f].max_acc) {
    snprintf(reason, size,
             "%u accumulators per lane (WM / 16 x WN / %u x %u) exceed %u: "
             "they would spill out of registers",
             regs, frag_n, acc_n, forms[f].max_acc);
    return false;
  }
  const size_t warps = (size_t)(bm / wm) * (bn / wn), items = lanes * warps;
  if (items > info->max_work_group_size ||
      info->max_work_item_sizes[0] < lanes ||
      warps > info->max_work_item_sizes[1]) {
    snprintf(reason, size,
             "work-groups of %u x %zu work-items (a warp per WM x WN tile) "
             "exceed the device's %zu (%zu x %zu)",
             lanes, warps, info->max_work_group_size,
             info->max_work_item_sizes[0], info->max_work_item_sizes[1]);
    return false;
  }
  const size_t local = (size_t)st * (bm + bn) * (bk + 8) * 2;
  if (local > info->local_mem_bytes) {
    snprintf(reason, size,
             "%zu bytes of __local stages (STAGES x (BM + BN) x (BK + 8) x "
             "2) exceed the device's %llu",
             local, (unsigned long long)info->local_mem_bytes);
    return false;
  }
  return true;
}

/* 64 x 64 blocks of four 32 x 32 warp tiles (eight 32 x 16 ones for WMMA
 * and DPAS, whose registers hold fewer accumulators), k 32 at a time,
 * double buffered: 20 KiB of __local memory, 128, 256 or 256 work-items
 * (DPAS: 64 or 128). */
static void mma_defaults(const kiln_context *ctx, struct kiln__point *p) {
  p->v[KILN__MMA_BM] = 64;
  p->v[KILN__MMA_BN] = 64;
  p->v[KILN__MMA_BK] = 32;
  p->v[KILN__MMA_WM] = 32;
  const enum form f = context_form(ctx);
  p->v[KILN__MMA_WN] = f == FORM_WMMA || f == FORM_DPAS ? 16 : 32;
  p->v[KILN__MMA_STAGES] = 2;
}

/* The knobs and the dtype (f16 gives DT 1; every other dtype bf16's DT 2,
 * so that the f32 build the small spaces' machinery asks for is a program
 * that exists); the context's form adds its own
 * (kiln__gemm_mma_form_options). */
static void mma_options(const struct kiln__point *p, kiln_dtype dtype,
                        char *buf, size_t size) {
  buf[0] = '\0';
  kiln__space_options(&kiln__gemm_mma_space, p, buf, size);
  const size_t used = strlen(buf);
  snprintf(buf + used, size - used, " -DDT=%d", dtype == KILN_F16 ? 1 : 2);
}

const struct kiln__space kiln__gemm_mma_space = {
    .name = "gemm_mma",
    .family = KILN_FAMILY_GPU,
    .count = 6,
    .knob = {{"BM", "rows of C per work-group", 3, {32, 64, 128}},
             {"BN", "columns of C per work-group", 3, {32, 64, 128}},
             {"BK", "steps of k per __local stage", 3, {16, 32, 64}},
             {"WM", "rows of C per warp", 3, {16, 32, 64}},
             {"WN", "columns of C per warp", 3, {16, 32, 64}},
             {"STAGES", "__local stages (2: double buffered)", 2, {1, 2}}},
    .check = mma_check,
    .defaults = mma_defaults,
    .program = "gemm_mma",
    .options = mma_options,
};

bool kiln__gemm_mma_usable(kiln_context *ctx, kiln_dtype dtype,
                           const char *source, char *why, size_t size) {
  if (dtype != KILN_F16 && dtype != KILN_BF16) {
    snprintf(why, size, "%s operands: the matrix units take f16 and bf16",
             kiln_dtype_name(dtype));
    return false;
  }
  if (atomic_load(&emulate)) {
    why[0] = '\0';
    return true;
  }
  if (kiln__ops_tuning(ctx)->family != KILN_FAMILY_GPU) {
    snprintf(why, size, "the device runs the CPU family's kernels");
    return false;
  }
  const enum form f = context_form(ctx);
  if (f == FORM_PTX && ctx->device->info.vendor_id != NVIDIA_VENDOR_ID) {
    snprintf(why, size,
             "not an NVIDIA device (vendor id 0x%x) nor one AMD's or "
             "Intel's profile runs: the kernel is NVIDIA's inline PTX, AMD's "
             "MFMA or WMMA builtins or Intel's DPAS builtins, which only "
             "their compilers take",
             (unsigned)ctx->device->info.vendor_id);
    return false;
  }
  if (f == FORM_DPAS &&
      !kiln__has_extension(ctx->device->info.extensions, DPAS_EXTENSION)) {
    snprintf(why, size,
             "Intel's DPAS needs " DPAS_EXTENSION
             ", which the device does not report: the compile probe was not "
             "built");
    return false;
  }
  if (f == FORM_DPAS && dpas_lanes(ctx) == 0) {
    snprintf(why, size,
             "Intel's DPAS runs in sub-groups of 8 or 16, which the device "
             "does not report as its smallest "
             "(CL_DEVICE_SUB_GROUP_SIZES_INTEL): the compile probe was not "
             "built");
    return false;
  }
  char options[64] = "";
  snprintf(options, sizeof options, "-DKILN_MMA_PROBE=1 -DDT=%d",
           dtype == KILN_F16 ? 1 : 2);
  kiln__gemm_mma_form_options(ctx, options, sizeof options);
  cl_program program; /* owned by ctx's memo */
  if (kiln__op_program(ctx, "gemm_mma", options, &program) != KILN_OK) {
    snprintf(why, size, "the compile probe (%s %s) did not build: %.300s",
             forms[f].what, kiln_dtype_name(dtype), kiln_last_error());
    return false;
  }
  if (strcmp(source, "profile") == 0) {
    snprintf(why, size,
             "the probe builds, but no point has passed kiln tune's "
             "correctness gate on this device (kiln tune --op gemm_mma)");
    return false;
  }
  why[0] = '\0';
  return true;
}

/* ---- the space, for the tuning API (tune_api.c) ----------------------- */

/* Where ops run the kernel (kiln_tuning_info's used): f16's verdict, and
 * bf16's when it differs (they differ only in the probe). Decided here as
 * variant.c decides (kiln__gemm_mma_usable with the point's source), not
 * read from the variants: the variants call this module. */
static void mma_used(const struct kiln__tuning_space *self,
                     const kiln_context *ctx, char *text, size_t size) {
  struct kiln__point p;
  const char *source = "profile";
  if (kiln__space_params(ctx, self->small, &p, &source) != KILN_OK) {
    snprintf(text, size, "no: %.400s", kiln_last_error());
    return;
  }
  char f16[400], bf16[400];
  kiln_context *c = (kiln_context *)ctx; /* the probe's program: a cache */
  const bool on16 = kiln__gemm_mma_usable(c, KILN_F16, source, f16, sizeof f16);
  const bool onb16 =
      kiln__gemm_mma_usable(c, KILN_BF16, source, bf16, sizeof bf16);
  if (on16 && onb16)
    snprintf(text, size, "yes, for f16 and bf16 GEMM");
  else if (strcmp(f16, bf16) == 0)
    snprintf(text, size, "no: %s", f16);
  else
    snprintf(text, size, "f16: %.200s; bf16: %.200s", on16 ? "yes" : f16,
             onb16 ? "yes" : bf16);
}

/* A build only where the kernel can run: elsewhere the inline PTX would be
 * handed to a compiler that does not take it. kiln__space_build's, with
 * the options of the context's form. */
static kiln_status mma_build(const struct kiln__tuning_space *self,
                             kiln_context *ctx, const char *params) {
  char why[400];
  if (!kiln__gemm_mma_usable(ctx, KILN_BF16, "set", why, sizeof why))
    return kiln__fail(KILN_ERR_UNSUPPORTED, "gemm_mma: %s", why);
  struct kiln__point p;
  if (!kiln__space_parse(self->small, params, &p, why, sizeof why))
    return kiln__fail(KILN_ERR_INVALID_ARGUMENT, "%s params: %s", self->op,
                      why);
  char options[320];
  mma_options(&p, KILN_F32, options, sizeof options);
  kiln__gemm_mma_form_options(ctx, options, sizeof options);
  cl_program program; /* owned by ctx's memo, as a launch's would be */
  return kiln__op_program(ctx, self->small->program, options, &program);
}

const struct kiln__tuning_space kiln__gemm_mma_tuning_space = {
    .op = "gemm_mma",
    .summary = "the GPU family's f16 and bf16 GEMM on the matrix units: "
               "NVIDIA's mma.sync, AMD's MFMA and WMMA, Intel's DPAS "
               "(cl_kernels/gemm_mma.cl)",
    .knobs = 6,
    .small = &kiln__gemm_mma_space,
    .knob = kiln__space_knob,
    .check = kiln__space_check_params,
    .in_effect = kiln__space_in_effect,
    .build = mma_build,
    .used = mma_used,
};
