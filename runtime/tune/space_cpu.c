/* The CPU family's spaces: the parameter spaces of the kernels that
 * CPU-family devices (PoCL) run for GEMM (cl_kernels/gemm_cpu.cl and the
 * host's blocking of C in runtime/ops/ops_gemm.c) and transpose
 * (transpose.cl's transpose_cpu_*), as data for the machinery in space.c.
 * They are spaces of their own, "gemm_cpu" and "transpose_cpu", beside the
 * GPU family's "gemm" and "transpose": a knob's meaning and values differ
 * per family and the tuning API lists knobs without a device, so a tuning
 * file's line names the family's kernel it tunes. */
#include "tune.h"

#include <stdio.h>

/* ---- GEMM ------------------------------------------------------------------ */

/* The kernel's rules (gemm_cpu.cl's #errors): MR 1 to 8 rows, NR one or
 * two vectors of VW floats, VW an OpenCL vector width of 4, 8 or 16. KC,
 * MB and NB are any positive numbers (KC steps per pass and blocks of MB x
 * NB register tiles per work-item, shrunk to the problem by ops_gemm.c). */
static bool gemm_cpu_check(const struct kiln__point *p,
                           const kiln_device_info *info, char *reason,
                           size_t size) {
  (void)info;
  const unsigned mr = p->v[KILN__GEMM_CPU_MR], nr = p->v[KILN__GEMM_CPU_NR],
                 vw = p->v[KILN__GEMM_CPU_VW];
  if (mr > 8) {
    snprintf(reason, size, "MR %u: the kernel keeps 1 to 8 rows", mr);
    return false;
  }
  if (vw != 4 && vw != 8 && vw != 16) {
    snprintf(reason, size, "VW %u is not a float vector width of 4, 8 or 16",
             vw);
    return false;
  }
  if (nr != vw && nr != 2 * vw) {
    snprintf(reason, size, "NR %u is neither VW %u nor 2 x VW", nr, vw);
    return false;
  }
  return true;
}

void kiln__gemm_cpu_point(unsigned vw, unsigned mr, unsigned nr, unsigned kc,
                          struct kiln__point *p) {
  /* OpenCL has float vectors of 4, 8 and 16; anything else (0 from a
   * driver that does not say) falls back to 4, SSE's width. */
  vw = vw >= 16 ? 16 : vw >= 8 ? 8 : 4;
  p->v[KILN__GEMM_CPU_VW] = vw;
  nr = kiln__ops_tune(nr, 2 * vw);
  p->v[KILN__GEMM_CPU_NR] = nr == vw ? vw : 2 * vw; /* one or two vectors */
  mr = kiln__ops_tune(mr, vw >= 16 ? 8 : 6);
  p->v[KILN__GEMM_CPU_MR] = mr > 8 ? 8 : mr;
  p->v[KILN__GEMM_CPU_KC] = kiln__ops_tune(kc, 256);
  /* 16 x 16 register tiles per block keep a B micro-panel in L1 across the
   * block's rows and the block's A panels in L2. */
  p->v[KILN__GEMM_CPU_MB] = 16;
  p->v[KILN__GEMM_CPU_NB] = 16;
}

/* The profile's tile, or the one derived from the device's preferred float
 * vector width (backends/backend.h), as GEMM ran before it had a space. */
static void gemm_cpu_defaults(const kiln_context *ctx, struct kiln__point *p) {
  const struct kiln_tuning *t = kiln__ops_tuning(ctx);
  kiln__gemm_cpu_point(ctx->device->info.vector_width_float, t->gemm_mr,
                       t->gemm_nr, t->gemm_kc, p);
}

/* One program per point serves every dtype (its pack kernels are per
 * dtype); MB and NB are the host's, not the kernel's. */
static void gemm_cpu_options(const struct kiln__point *p, kiln_dtype dtype,
                             char *buf, size_t size) {
  (void)dtype;
  snprintf(buf, size, "-DMR=%u -DNR=%u -DVW=%u -DKC=%u",
           p->v[KILN__GEMM_CPU_MR], p->v[KILN__GEMM_CPU_NR],
           p->v[KILN__GEMM_CPU_VW], p->v[KILN__GEMM_CPU_KC]);
}

const struct kiln__space kiln__gemm_cpu_space = {
    .name = "gemm_cpu",
    .family = KILN_FAMILY_CPU,
    .count = 6,
    .knob = {{"VW", "floats per accumulator vector", 3, {4, 8, 16}},
             {"MR", "rows of the register tile", 8, {1, 2, 3, 4, 5, 6, 7, 8}},
             {"NR", "columns of the register tile (VW or 2 x VW)", 4,
              {4, 8, 16, 32}},
             {"KC", "steps of k per pass over a tile (L1 blocking of B)", 5,
              {64, 128, 256, 512, 1024}},
             {"MB", "register tiles per work-item's block of C, down m", 4,
              {4, 8, 16, 32}},
             {"NB", "register tiles per work-item's block of C, across n", 4,
              {4, 8, 16, 32}}},
    .check = gemm_cpu_check,
    .defaults = gemm_cpu_defaults,
    .program = "gemm_cpu",
    .options = gemm_cpu_options,
};

const struct kiln__tuning_space kiln__gemm_cpu_tuning_space =
    KILN__SMALL_TUNING_SPACE(
        "gemm_cpu", kiln__gemm_cpu_space, 6,
        "the CPU-family GEMM kernel (cl_kernels/gemm_cpu.cl)");

/* ---- transpose --------------------------------------------------------------- */

enum {
  TR_NT = KILN__TRANSPOSE_CPU_NT,
  TR_ORDER = KILN__TRANSPOSE_CPU_ORDER,
  TR_TILE = KILN__TRANSPOSE_CPU_TILE,
  TR_VW = KILN__TRANSPOSE_CPU_VW
};

/* The kernel moves 16 x 16 blocks: TILE is a multiple of 16. NT and ORDER
 * are switches; VW is 8 or 16. */
static bool transpose_cpu_check(const struct kiln__point *p,
                                const kiln_device_info *info, char *reason,
                                size_t size) {
  (void)info;
  if (p->v[TR_TILE] % 16) {
    snprintf(reason, size, "TILE %u is not a multiple of 16, the kernel's "
             "register block", p->v[TR_TILE]);
    return false;
  }
  if (p->v[TR_NT] > 1 || p->v[TR_ORDER] > 1) {
    const bool nt = p->v[TR_NT] > 1;
    snprintf(reason, size, "%s %u is neither 0 nor 1", nt ? "NT" : "ORDER",
             p->v[nt ? TR_NT : TR_ORDER]);
    return false;
  }
  if (p->v[TR_VW] != 8 && p->v[TR_VW] != 16) {
    snprintf(reason, size, "VW %u is neither 8 nor 16", p->v[TR_VW]);
    return false;
  }
  return true;
}

/* The profile's tile (default 128), rounded down to the block; plain
 * stores, blocks column by column. */
static void transpose_cpu_defaults(const kiln_context *ctx,
                                   struct kiln__point *p) {
  const unsigned tile =
      kiln__ops_tune(kiln__ops_tuning(ctx)->transpose_tile, 128);
  p->v[TR_TILE] = tile < 16 ? 16 : tile / 16 * 16;
  p->v[TR_NT] = 0;
  p->v[TR_ORDER] = 0;
  p->v[TR_VW] = 8;
}

static void transpose_cpu_options(const struct kiln__point *p,
                                  kiln_dtype dtype, char *buf, size_t size) {
  (void)dtype;
  buf[0] = '\0';
  kiln__space_options(&kiln__transpose_cpu_space, p, buf, size);
}

const struct kiln__space kiln__transpose_cpu_space = {
    .name = "transpose_cpu",
    .family = KILN_FAMILY_CPU,
    .count = 4,
    .knob = {{"NT", "streaming (non-temporal) stores of y: 0 or 1", 2,
              {0, 1}},
             {"ORDER",
              "a tile's 16 x 16 blocks column by column (0) or row by row (1)",
              2,
              {0, 1}},
             {"TILE", "edge of the square tile one work-item moves", 5,
              {16, 32, 64, 128, 256}},
             {"VW",
              "vectors of the in-register transpose: four 8 x 8 (8) or one "
              "16 x 16 (16: for 32 vector registers, AVX-512)",
              2,
              {8, 16}}},
    .check = transpose_cpu_check,
    .defaults = transpose_cpu_defaults,
    .program = "transpose",
    .options = transpose_cpu_options,
};

const struct kiln__tuning_space kiln__transpose_cpu_tuning_space =
    KILN__SMALL_TUNING_SPACE(
        "transpose_cpu", kiln__transpose_cpu_space, 4,
        "the CPU-family transpose kernels (cl_kernels/transpose.cl)");
