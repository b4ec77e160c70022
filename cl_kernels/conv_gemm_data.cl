/* Implicit GEMM convolution, GPU family, backward to the input:
 * kiln_conv2d_backward_data as gemm_gpu.cl's tiled kernel (included below)
 * with both operands gathered through the convolution's index map, so no
 * column buffer and no col2im. Per image i and group g (cg, ocg, kh, kw,
 * P = oh ow as in conv_gemm.cl, Q = h w input positions):
 *   dX_g(i) [cg x Q] = A [cg x K] B [K x Q],  K = ocg kh kw,
 *   A[ci][r] = w[g ocg + o][ci][ky][kx],
 *   B[r][q]  = dy[i][g ocg + o][oy][ox] where iy + ph - ky dh = oy sh and
 *              ix + pw - kx dw = ox sw with 0 <= oy < oh, 0 <= ox < ow,
 *              else 0,
 * r = (o kh + ky) kw + kx, q = iy w + ix. Every element of dx is written
 * (beta 0). The arguments are those of conv_gemm.cl with these roles (m =
 * cg, n = Q, k = K; a_batch the weights' group stride ocg cg kh kw, b_batch
 * and c_batch the image strides oc P and c Q) and the same uint16 of
 * geometry (conv_gemm.clh). The knobs are the conv2d space's (tune/
 * space_conv.c), tuned on the forward pass. */
#include "conv_gemm.clh"

#define GEMM_TILED conv_gemm_data
/* Entry bt_ = image * groups + g: the group's weights, the image's group
 * of dy's channels and of dx's. */
#define GEMM_BATCH(bt_)                                                        \
  {                                                                            \
    const ulong g_ = (bt_) % CONV_GROUPS, img_ = (bt_) / CONV_GROUPS;          \
    const ulong ocg_ = k / (CONV_KH * CONV_KW);                                \
    a += a_off + g_ * a_batch;                                                 \
    b += b_off + img_ * b_batch + g_ * ocg_ * CONV_OH * CONV_OW;               \
    c += c_off + img_ * c_batch + g_ * m * (ulong)n;                           \
  }
/* The tile's NWG input positions q = j0 + col, once per work-group: iy + ph
 * and ix + pw, or CONV_NONE past the last. */
#define GEMM_PROLOGUE                                                          \
  __local int conv_y0[NWG], conv_x0[NWG];                                      \
  for (uint i_ = lid; i_ < NWG; i_ += WGS) {                                   \
    const uint q_ = j0 + i_, iy_ = q_ / CONV_W, ix_ = q_ - iy_ * CONV_W;       \
    conv_y0[i_] = q_ < n ? (int)(iy_ + CONV_PH) : CONV_NONE;                   \
    conv_x0[i_] = q_ < n ? (int)(ix_ + CONV_PW) : CONV_NONE;                   \
  }                                                                            \
  barrier(CLK_LOCAL_MEM_FENCE);
/* A's MWG x KWG elements of the stage: the weight of tap r and input
 * channel ci = i0 + row, rows fastest. */
#define GEMM_STAGE_A(TILE, p0)                                                 \
  for (uint l_ = 0; l_ < (MWG * KWG) / WGS; l_++) {                            \
    const uint e_ = lid + l_ * WGS, row_ = e_ % MWG, kk_ = e_ / MWG;           \
    const uint r_ = (p0) + kk_, ci_ = i0 + row_, khw_ = CONV_KH * CONV_KW;     \
    const uint o_ = r_ / khw_;                                                 \
    TILE[kk_][row_] =                                                          \
        r_ < k && ci_ < m                                                      \
            ? LOADF(a, ((ulong)o_ * m + ci_) * khw_ + (r_ - o_ * khw_))        \
            : 0.0f;                                                            \
  }
/* B's KWG x NWG elements: VWN consecutive input positions of one tap r per
 * work-item and load; a position that no output position reaches through
 * tap r (off the stride's grid, or outside dy) is 0. Stride 1, the common
 * case, divides nothing per element. */
#define GEMM_STAGE_B(TILE, p0)                                                 \
  for (uint l_ = 0; l_ < (NWG * KWG) / (VWN * WGS); l_++) {                    \
    const uint e_ = lid + l_ * WGS;                                            \
    const uint col_ = (e_ % (NWG / VWN)) * VWN, kk_ = e_ / (NWG / VWN);        \
    const uint r_ = (p0) + kk_, khw_ = CONV_KH * CONV_KW, o_ = r_ / khw_;      \
    const uint rk_ = r_ - o_ * khw_, ky_ = rk_ / CONV_KW;                      \
    const int dy_ = (int)(ky_ * CONV_DH),                                      \
              dx_ = (int)((rk_ - ky_ * CONV_KW) * CONV_DW);                    \
    __global const T *plane_ = b + (ulong)o_ * CONV_OH * CONV_OW;              \
    for (uint t_ = 0; t_ < VWN; t_++) {                                        \
      const int ty_ = conv_y0[col_ + t_] - dy_, tx_ = conv_x0[col_ + t_] - dx_; \
      const uint oy_ = CONV_SH == 1 ? (uint)ty_ : (uint)ty_ / CONV_SH;         \
      const uint ox_ = CONV_SW == 1 ? (uint)tx_ : (uint)tx_ / CONV_SW;         \
      TILE[kk_][col_ + t_] =                                                   \
          r_ < k && ty_ >= 0 && tx_ >= 0 && oy_ * CONV_SH == (uint)ty_ &&      \
                  ox_ * CONV_SW == (uint)tx_ && oy_ < CONV_OH &&               \
                  ox_ < CONV_OW                                                \
              ? LOADF(plane_, (ulong)oy_ * CONV_OW + ox_)                      \
              : 0.0f;                                                          \
    }                                                                          \
  }

#include "gemm_gpu.cl"

#if !SA || !SB || VWM != 1
#error "the implicit convolution stages both operands (SA = SB = 1, VWM 1)"
#endif
