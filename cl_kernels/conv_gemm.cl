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
 * gathered here, VWN consecutive positions per work-item and load,
 * columns fastest so that neighbouring work-items read neighbouring pixels
 * of a row at stride 1; the tile's positions are decomposed once per
 * work-group into a __local table, so a load divides only its tap r.
 * The third dimension of the range runs over images x groups (entry bt =
 * image * groups + g); the host passes the GEMM arguments of one group
 * (gemm_store.clh's GEMM_ARGS: m = ocg, n = P, k = kk, a_batch the weights'
 * group stride ocg kk, b_batch and c_batch the image strides c h w and oc P,
 * bias per row) and the geometry in a uint16 (conv_gemm.clh). The epilogue
 * (alpha, beta, bias, activation) is store_c's.
 *
 * The knobs are gemm_gpu.cl's; the conv2d space (runtime/tune/
 * space_conv.c) tunes MWG, NWG, KWG, MDIMC, NDIMC and VWN and fixes the
 * others (both operands staged, VWM 1: a row of the weights is kk long,
 * rarely a multiple of a vector). */
#include "conv_gemm.clh"

#define GEMM_TILED conv_gemm
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
/* The tile's NWG output positions p = j0 + col, once per work-group: the
 * image row and column of their tap (0, 0), oy sh - ph and ox sw - pw, or
 * CONV_NONE past B's last column (every tap of it then falls outside). So
 * a stage's gather divides only r, once per VWN elements. */
#define GEMM_PROLOGUE                                                          \
  __local int conv_y0[NWG], conv_x0[NWG];                                      \
  for (uint i_ = lid; i_ < NWG; i_ += WGS) {                                   \
    const uint p_ = j0 + i_, oy_ = p_ / CONV_OW, ox_ = p_ - oy_ * CONV_OW;     \
    conv_y0[i_] = p_ < n ? (int)(oy_ * CONV_SH) - (int)CONV_PH : CONV_NONE;    \
    conv_x0[i_] = p_ < n ? (int)(ox_ * CONV_SW) - (int)CONV_PW : CONV_NONE;    \
  }                                                                            \
  barrier(CLK_LOCAL_MEM_FENCE);
/* B's KWG x NWG elements of the stage from step p0: VWN consecutive
 * positions of one tap r per work-item and load, 0 in the padding and
 * past B's edges. */
#define GEMM_STAGE_B(TILE, p0)                                                 \
  for (uint l_ = 0; l_ < (NWG * KWG) / (VWN * WGS); l_++) {                    \
    const uint e_ = lid + l_ * WGS;                                            \
    const uint col_ = (e_ % (NWG / VWN)) * VWN, kk_ = e_ / (NWG / VWN);        \
    const uint r_ = (p0) + kk_, khw_ = CONV_KH * CONV_KW, ci_ = r_ / khw_;     \
    const uint rk_ = r_ - ci_ * khw_, ky_ = rk_ / CONV_KW;                     \
    const int dy_ = (int)(ky_ * CONV_DH),                                      \
              dx_ = (int)((rk_ - ky_ * CONV_KW) * CONV_DW);                    \
    __global const T *plane_ = b + (ulong)ci_ * CONV_H * CONV_W;               \
    for (uint t_ = 0; t_ < VWN; t_++) {                                        \
      const int iy_ = conv_y0[col_ + t_] + dy_, ix_ = conv_x0[col_ + t_] + dx_; \
      TILE[kk_][col_ + t_] =                                                   \
          r_ < k && iy_ >= 0 && ix_ >= 0 && (uint)iy_ < CONV_H &&              \
                  (uint)ix_ < CONV_W                                           \
              ? LOADF(plane_, (ulong)iy_ * CONV_W + (uint)ix_)                 \
              : 0.0f;                                                          \
    }                                                                          \
  }

#include "gemm_gpu.cl"

#if !SA || !SB
#error "the implicit convolution stages both operands (SA = SB = 1)"
#endif
