/* GEMM, GPU family: C = alpha * op(A) * op(B) + beta * C for GPUs, where
 * many work-items share __local tiles.
 *
 * A work-group of TS x TS work-items computes a BM x BM tile of C (BM =
 * TS * RB). For every TS steps of k it stages a BM x TS tile of op(A) and a
 * TS x BM tile of op(B) in __local memory (each work-item loads RB elements
 * of each, converting f16/bf16 to f32), then each work-item accumulates its
 * RB x RB outputs, rows ty + r*TS and columns tx + c*TS, so that a warp's
 * reads of the B tile are consecutive and its reads of the A tile are
 * broadcasts. The tiles are padded by one column against bank conflicts.
 * Elements outside the matrices load as zero, so any m, n, k works.
 *
 * The matrices come with general strides: element (r, c) of op(A) is at
 * a[a_off + r * a_rs + c * a_cs], which covers both layouts and both
 * transposes (runtime/ops/ops_gemm.c reduces column-major C to row-major by
 * swapping the operands). The load mapping follows whichever stride is 1,
 * so that consecutive work-items read consecutive addresses.
 *
 * Macros: TS (work-group edge), RB (outputs per work-item per edge).
 */
#include "common.clh"
#include "gemm_epilogue.clh"

#ifndef TS
#define TS 8
#endif
#ifndef RB
#define RB 2
#endif
#define BM (TS * RB)

#define LOAD_F32(p, i) ((p)[i])
#define LOAD_F16(p, i) vload_half(i, p)
#define LOAD_BF16(p, i) kiln_bf16_to_f32((p)[i])

#define GPU_GEMM(NAME, SRC_T, LOADF)                                           \
  __kernel __attribute__((reqd_work_group_size(TS, TS, 1))) void NAME(         \
      uint m, uint n, uint k, float alpha, float beta, uint read_c,            \
      __global const SRC_T *a, ulong a_off, ulong a_batch, ulong a_rs,         \
      ulong a_cs, __global const SRC_T *b, ulong b_off, ulong b_batch,         \
      ulong b_rs, ulong b_cs, __global float *c, ulong c_off, ulong c_batch,   \
      ulong ldc, uint act, uint use_bias, __global const float *bias,          \
      ulong bias_off, ulong bias_rs, ulong bias_cs) {                          \
    __local float a_tile[TS][BM + 1]; /* [kk][row] */                            \
    __local float b_tile[TS][BM + 1]; /* [kk][col] */                            \
    const uint tx = get_local_id(0), ty = get_local_id(1);                     \
    const uint lid = ty * TS + tx;                                             \
    const uint i0 = get_group_id(1) * BM, j0 = get_group_id(0) * BM;           \
    const ulong bt = get_global_id(2);                                         \
    a += a_off + bt * a_batch;                                                 \
    b += b_off + bt * b_batch;                                                 \
    c += c_off + bt * c_batch;                                                 \
    /* Rows of A run along consecutive work-items when A's rows are unit      \
     * stride (A transposed), else its k steps do; likewise for B. */          \
    const bool a_rows_fast = a_rs == 1 && a_cs != 1;                           \
    const bool b_cols_fast = b_cs == 1;                                        \
    float acc[RB][RB];                                                         \
    for (uint r = 0; r < RB; r++)                                              \
      for (uint q = 0; q < RB; q++)                                            \
        acc[r][q] = 0.0f;                                                      \
    for (uint p0 = 0; p0 < k; p0 += TS) {                                      \
      for (uint l = 0; l < RB; l++) {                                          \
        const uint e = lid + l * TS * TS;                                      \
        const uint ar = a_rows_fast ? e % BM : e / TS;                         \
        const uint ak = a_rows_fast ? e / BM : e % TS;                         \
        const uint gi = i0 + ar, gp = p0 + ak;                                 \
        a_tile[ak][ar] = gi < m && gp < k ? LOADF(a, gi * a_rs + gp * a_cs) : 0.0f;\
        const uint bc = b_cols_fast ? e % BM : e / TS;                         \
        const uint bk = b_cols_fast ? e / BM : e % TS;                         \
        const uint gj = j0 + bc, gq = p0 + bk;                                 \
        b_tile[bk][bc] = gj < n && gq < k ? LOADF(b, gq * b_rs + gj * b_cs) : 0.0f;\
      }                                                                        \
      barrier(CLK_LOCAL_MEM_FENCE);                                            \
      for (uint kk = 0; kk < TS; kk++) {                                       \
        float av[RB], bv[RB];                                                  \
        for (uint r = 0; r < RB; r++)                                          \
          av[r] = a_tile[kk][ty + r * TS];                                         \
        for (uint q = 0; q < RB; q++)                                          \
          bv[q] = b_tile[kk][tx + q * TS];                                         \
        for (uint r = 0; r < RB; r++)                                          \
          for (uint q = 0; q < RB; q++)                                        \
            acc[r][q] = fma(av[r], bv[q], acc[r][q]);                          \
      }                                                                        \
      barrier(CLK_LOCAL_MEM_FENCE);                                            \
    }                                                                          \
    for (uint r = 0; r < RB; r++) {                                            \
      const uint gi = i0 + ty + r * TS;                                        \
      for (uint q = 0; q < RB; q++) {                                          \
        const uint gj = j0 + tx + q * TS;                                      \
        if (gi < m && gj < n) {                                                \
          __global float *cp = c + (ulong)gi * ldc + gj;                       \
          float v = alpha * acc[r][q];                                         \
          /* beta == 0 never reads C: NaNs there must not leak. */            \
          v = read_c ? fma(beta, *cp, v) : v;                                  \
          if (use_bias)                                                        \
            v += bias[bias_off + gi * bias_rs + gj * bias_cs];                 \
          *cp = gemm_act(v, act);                                              \
        }                                                                      \
      }                                                                        \
    }                                                                          \
  }

GPU_GEMM(gemm_gpu_f32, float, LOAD_F32)
GPU_GEMM(gemm_gpu_f16, half, LOAD_F16)
GPU_GEMM(gemm_gpu_bf16, ushort, LOAD_BF16)

#include "gemm_scale.clh"
