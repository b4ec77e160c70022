/* The conv2d space: the parameters of the GPU family's implicit GEMM
 * convolution (cl_kernels/conv_gemm.cl, which is gemm_gpu.cl's tiled
 * kernel with B read through the convolution's index map; launched by
 * runtime/ops/ops_conv_gpu.c). A small space (space.c's machinery) of
 * gemm_gpu's tiling knobs, MWG, NWG, KWG, MDIMC, NDIMC and VWN, with the
 * others fixed: both operands staged (conv_gemm.cl gathers B into its
 * __local stage), VWM 1 (a row of the weights is cg kh kw long, rarely a
 * multiple of a vector), padded tiles, one stage, no unrolling, strided
 * outputs. A point runs where gemm_gpu's own check accepts it with those
 * fixed values (kiln__gemm_gpu_check: the kernel's rules, the device's
 * work-group and __local limits), so every point the space holds is one
 * the GEMM kernel's rules allow.
 *
 * The default is the tiling of the context's GEMM (kiln__gemm_gpu_source:
 * the tuning file's gemm line when there is one, else the profile's row;
 * a test's GEMM override too), so a
 * convolution runs on the tiles GEMM runs until conv2d is tuned itself;
 * VWN is lowered, then the tile shrunk, until the fixed knobs fit. */
#include "tune.h"

#include <stdio.h>
#include <string.h>

/* p as a point of gemm_gpu's space: the tiling knobs, the fixed others. */
static struct kiln__gemm_gpu_params as_gemm(const struct kiln__point *p) {
  return (struct kiln__gemm_gpu_params){
      .mwg = p->v[KILN__CONV_MWG], .nwg = p->v[KILN__CONV_NWG], .kwg = p->v[KILN__CONV_KWG],
      .mdimc = p->v[KILN__CONV_MDIMC], .ndimc = p->v[KILN__CONV_NDIMC], .vwm = 1,
      .vwn = p->v[KILN__CONV_VWN], .sa = 1, .sb = 1, .pada = 1, .padb = 1, .db = 0,
      .kwi = 1, .strm = 1, .strn = 1, .dwg = 1, .dwi = 1, .sw = 0};
}

static bool conv_check(const struct kiln__point *p,
                       const kiln_device_info *info, char *reason,
                       size_t size) {
  const struct kiln__gemm_gpu_params g = as_gemm(p);
  return kiln__gemm_gpu_check(&g, info, false, reason, size);
}

static void conv_defaults(const kiln_context *ctx, struct kiln__point *p) {
  struct kiln__gemm_gpu_params g;
  const char *source;
  if (kiln__gemm_gpu_source(ctx, &g, &source) != KILN_OK)
    g = (struct kiln__gemm_gpu_params){.mwg = 16, .nwg = 16, .kwg = 8,
                                       .mdimc = 8, .ndimc = 8, .vwn = 1};
  p->v[KILN__CONV_MWG] = g.mwg;
  p->v[KILN__CONV_NWG] = g.nwg;
  p->v[KILN__CONV_KWG] = g.kwg;
  p->v[KILN__CONV_MDIMC] = g.mdimc;
  p->v[KILN__CONV_NDIMC] = g.ndimc;
  p->v[KILN__CONV_VWN] = g.vwn;
  char reason[256]; /* unread; sized for the check's messages */
  const kiln_device_info *info = &ctx->device->info;
  while (p->v[KILN__CONV_VWN] > 1 && !conv_check(p, info, reason, sizeof reason))
    p->v[KILN__CONV_VWN] /= 2;
  /* The GEMM's tile with VWM 1 and both operands staged fits wherever the
   * GEMM's did, except on a device smaller than any known: halve it. */
  while (!conv_check(p, info, reason, sizeof reason) && p->v[KILN__CONV_MDIMC] > 1) {
    for (int i = KILN__CONV_MWG; i <= KILN__CONV_NDIMC; i++)
      p->v[i] = p->v[i] > 1 ? p->v[i] / 2 : 1;
  }
}

static void conv_options(const struct kiln__point *p, kiln_dtype dtype,
                         char *buf, size_t size) {
  snprintf(buf, size,
           "-DDT=%d -DMWG=%u -DNWG=%u -DKWG=%u -DMDIMC=%u -DNDIMC=%u "
           "-DVWM=1 -DVWN=%u -DSA=1 -DSB=1 -DPADA=1 -DPADB=1 -DDB=0 -DKWI=1 "
           "-DSTRM=1 -DSTRN=1",
           dtype == KILN_F16 ? 1 : dtype == KILN_BF16 ? 2 : 0,
           p->v[KILN__CONV_MWG], p->v[KILN__CONV_NWG], p->v[KILN__CONV_KWG], p->v[KILN__CONV_MDIMC],
           p->v[KILN__CONV_NDIMC], p->v[KILN__CONV_VWN]);
}

const struct kiln__space kiln__conv_space = {
    .name = "conv2d",
    .family = KILN_FAMILY_GPU,
    .count = 6,
    .knob = {{"MWG", "output channels per work-group tile", 4,
              {16, 32, 64, 128}},
             {"NWG", "output positions per work-group tile", 4,
              {16, 32, 64, 128}},
             {"KWG", "taps (input channel, ky, kx) per __local stage", 3,
              {8, 16, 32}},
             {"MDIMC", "work-items along the tile's output channels", 3,
              {8, 16, 32}},
             {"NDIMC", "work-items along the tile's positions", 3,
              {8, 16, 32}},
             {"VWN", "consecutive positions one work-item gathers per load",
              4, {1, 2, 4, 8}}},
    .check = conv_check,
    .defaults = conv_defaults,
    .program = "conv_gemm",
    .options = conv_options,
};

const struct kiln__tuning_space kiln__conv_tuning_space =
    KILN__SMALL_TUNING_SPACE(
        "conv2d", kiln__conv_space, 6,
        "the GPU-family implicit GEMM convolution (cl_kernels/conv_gemm.cl)");
