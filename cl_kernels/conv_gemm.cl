/* Implicit GEMM convolution, GPU family: kiln_conv2d's forward pass as
 * gemm_gpu.cl's tiled kernel (its work-group tiles, __local stages and
 * register blocking, included below) whose B operand is read through the
 * convolution's index map instead of from im2col columns, so no column
 * buffer is written or read.
 *
 * Per image i and group g (cg = c / groups input channels, ocg = oc / groups
 * output channels, kk = cg kh kw, P = oh ow positions):
 *   Y_g(i) [ocg x P] = W_g [ocg x kk] B [kk x P],
 *   B[r][p] = x[i][g cg + ci][oy sh - ph + ky dh][ox sw - pw + kx dw]
 * with r = (ci kh + ky) kw + kx and p = oy ow + ox, 0 where the tap falls in
 * the padding: the element im2col would have written (conv.cl). A's
 * stages (the weights, row-major ocg x kk) are gemm_gpu's; B's stages are
 * gathered here, VWN consecutive positions per work-item and load (one
 * division of r and of p per VWN elements), columns fastest so that
 * neighbouring work-items read neighbouring pixels of a row at stride 1.
 * The third dimension of the range runs over images x groups (entry bt =
 * image * groups + g); the host passes the GEMM arguments of one group
 * (gemm_store.clh's GEMM_ARGS: m = ocg, n = P, k = kk, a_batch the weights'
 * group stride ocg kk, b_batch and c_batch the image strides c h w and oc P,
 * bias per row) and the geometry in a uint16 (CONV_* below). The epilogue
 * (alpha, beta, bias, activation) is store_c's.
 *
 * The knobs are gemm_gpu.cl's; the conv2d space (runtime/tune/
 * space_conv.c) tunes MWG, NWG, KWG, MDIMC, NDIMC and VWN and fixes the
 * others (both operands staged, VWM 1: a row of the weights is kk long,
 * rarely a multiple of a vector). */
#ifndef SA
#define SA 1
#endif
#ifndef SB
#define SB 1
#endif
#if !SA || !SB
#error "the implicit convolution stages both operands (SA = SB = 1)"
#endif

/* The geometry: conv.s0 .. conv.sb (uint16 components). */
#define CONV_H conv.s0
#define CONV_W conv.s1
#define CONV_KH conv.s2
#define CONV_KW conv.s3
#define CONV_SH conv.s4
#define CONV_SW conv.s5
#define CONV_PH conv.s6
#define CONV_PW conv.s7
#define CONV_DH conv.s8
#define CONV_DW conv.s9
#define CONV_OW conv.sa
#define CONV_GROUPS conv.sb

#ifndef DT
#define DT 0
#endif
#include "common.clh"

/* Below: B's elements of one stage load. */
void conv_gather(__global const T *x, uint r, uint p, uint n, uint k,
                 uint16 conv, __local float *dst);

#define GEMM_TILED conv_gemm
#define GEMM_TILED_ONLY 1
#define GEMM_TILED_ARGS GEMM_ARGS, uint16 conv
/* Entry bt_ = image * groups + g: the group's weights and bias rows, the
 * image's group of channels and its group of output channels. */
#define GEMM_BATCH(bt_)                                                        \
  {                                                                            \
    const ulong g_ = (bt_) % CONV_GROUPS, img_ = (bt_) / CONV_GROUPS;          \
    const ulong hw_ = (ulong)CONV_H * CONV_W;                                  \
    a += a_off + g_ * a_batch;                                                 \
    b += b_off + img_ * b_batch + g_ * (k / (CONV_KH * CONV_KW)) * hw_;        \
    c += c_off + img_ * c_batch + g_ * m * (ulong)n;                           \
    bias_off += g_ * m;                                                        \
  }
#define GEMM_STAGE_B(TILE, p0)                                                 \
  for (uint l_ = 0; l_ < (NWG * KWG) / (VWN * WGS); l_++) {                    \
    const uint e_ = lid + l_ * WGS;                                            \
    const uint col_ = (e_ % (NWG / VWN)) * VWN, kk_ = e_ / (NWG / VWN);        \
    conv_gather(b, (p0) + kk_, j0 + col_, n, k, conv, &TILE[kk_][col_]);      \
  }

#include "gemm_gpu.cl"

/* dst[0 .. VWN-1] = B[r][p .. p + VWN - 1], 0 past B's edges and in the
 * padding. */
void conv_gather(__global const T *x, uint r, uint p, uint n, uint k,
                 uint16 conv, __local float *dst) {
  if (r >= k) {
    for (uint t = 0; t < VWN; t++)
      dst[t] = 0.0f;
    return;
  }
  const uint khw = CONV_KH * CONV_KW, ci = r / khw, rk = r - ci * khw;
  const uint ky = rk / CONV_KW, kx = rk - ky * CONV_KW;
  __global const T *plane = x + (ulong)ci * CONV_H * CONV_W;
  uint oy = p / CONV_OW, ox = p - oy * CONV_OW;
  for (uint t = 0; t < VWN; t++) {
    const int iy = (int)(oy * CONV_SH + ky * CONV_DH) - (int)CONV_PH;
    const int ix = (int)(ox * CONV_SW + kx * CONV_DW) - (int)CONV_PW;
    dst[t] = p + t < n && iy >= 0 && ix >= 0 && (uint)iy < CONV_H &&
                     (uint)ix < CONV_W
                 ? LOADF(plane, (ulong)iy * CONV_W + (uint)ix)
                 : 0.0f;
    if (++ox == CONV_OW) {
      ox = 0;
      oy++;
    }
  }
}
