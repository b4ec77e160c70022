/* GEMM with few rows (a matrix-vector product, or a handful of rows), CPU
 * family: the operands are read where they lie, with no packing.
 *
 * Why: the packed kernel (gemm_cpu.cl) copies all of op(B) into its
 * workspace at every call. With m rows that costs as much as 1 / (2 m) of
 * the multiply itself per element of B only in the best case; at m = 1
 * (inference of one example) the copy is the whole cost: a 1 x 784 x 1024
 * layer took ~1 ms, the time of copying the weights, where reading them
 * once takes a fraction of that. Here each work-item owns a block of output
 * columns and loops over k, reading its part of B exactly once per block of
 * rows (and the few rows of A from cache).
 *
 * The host (runtime/ops/ops_gemm_skinny.c) hands over the canonical form of
 * ops_gemm.c (C(i, j) at i * crs + j * ccs; a small n is turned into a small
 * m by computing C^T = B^T A^T, hence C's two strides) and picks one of two
 * kernels by which stride of op(B) is 1:
 *   gemm_skinny_k  B(p, j) contiguous along k (B transposed in row-major, the
 *                  nn.Linear layout): each output is a dot product, done 16
 *                  lanes of k at a time, KR rows x KJ columns of C at once,
 *                  lanes summed at the end;
 *   gemm_skinny_n  B(p, j) contiguous along n: each step of k broadcasts one
 *                  element of A per row against NV vectors of 16 columns.
 * Work-groups are one work-item, as in gemm_cpu.cl: PoCL would otherwise
 * vectorise across work-items and break the per-item vectors.
 *
 * Epilogue: alpha, beta (a beta of 0 never reads C), bias and activation
 * (gemm_epilogue.clh) on each final value, as the packed kernel does.
 *
 * Macros (ops_gemm_skinny.c): DT (common.clh: 0 f32, 1 f16, 2 bf16), WIDE
 * (1 where the device has 16-float registers, AVX-512: larger blocks). */
#include "common.clh"
#include "gemm_epilogue.clh"

#ifndef WIDE
#define WIDE 1
#endif
#if WIDE
#define KR 4 /* rows of C per block, gemm_skinny_k */
#define KJ 4 /* columns of C per block, gemm_skinny_k */
#define NRW 8 /* rows of C per block, gemm_skinny_n */
#define NV 2  /* 16-column vectors per row, gemm_skinny_n */
#else
#define KR 2
#define KJ 2
#define NRW 4
#define NV 1
#endif

/* 16 elements of x at p, p + s, ..., p + 15 s as floats. */
#define GATHER16(x, s)                                                         \
  ((float16)(LOAD(x, 0), LOAD(x, (s)), LOAD(x, 2 * (s)), LOAD(x, 3 * (s)),    \
             LOAD(x, 4 * (s)), LOAD(x, 5 * (s)), LOAD(x, 6 * (s)),             \
             LOAD(x, 7 * (s)), LOAD(x, 8 * (s)), LOAD(x, 9 * (s)),             \
             LOAD(x, 10 * (s)), LOAD(x, 11 * (s)), LOAD(x, 12 * (s)),          \
             LOAD(x, 13 * (s)), LOAD(x, 14 * (s)), LOAD(x, 15 * (s))))

/* Where the results go, and what happens to them on the way. */
struct skinny_out {
  float alpha, beta;
  uint read_c, act, use_bias;
  __global float *c;
  ulong crs, ccs;
  __global const float *bias;
  ulong bias_rs, bias_cs;
};

/* C(i, j) = act(alpha * s + beta * C(i, j) + bias(i, j)). */
__attribute__((always_inline)) static void
put(const struct skinny_out *o, uint i, uint j, float s) {
  __global float *q = o->c + (ulong)i * o->crs + (ulong)j * o->ccs;
  float v = o->alpha * s;
  if (o->read_c)
    v = fma(o->beta, *q, v);
  if (o->use_bias)
    v += o->bias[(ulong)i * o->bias_rs + (ulong)j * o->bias_cs];
  *q = gemm_act(v, o->act);
}

/* ---- B contiguous along k ------------------------------------------------ */

/* The k loop of k_block over vector steps, with A's rows read by LOADA. */
#define K_STEPS(LOADA)                                                         \
  for (; p + 16 <= k; p += 16) {                                               \
    float16 bv[KJ];                                                            \
    _Pragma("unroll") for (uint cc = 0; cc < KJ; cc++) bv[cc] =                \
        LOAD16(bp[cc] + p);                                                    \
    _Pragma("unroll") for (uint r = 0; r < rr; r++) {                          \
      const float16 av = LOADA;                                                \
      _Pragma("unroll") for (uint cc = 0; cc < KJ; cc++) acc[r][cc] =          \
          fma(av, bv[cc], acc[r][cc]);                                         \
    }                                                                          \
  }

/* Rows i .. i + rr - 1 and columns j .. j + KJ - 1 of C (columns from jn on
 * are computed on column jn - 1 again and not stored). rr is a constant at
 * each call, so the loops over rows and columns unroll and the
 * accumulators stay in registers. */
__attribute__((always_inline)) static void
k_block(const uint rr, uint k, __global const T *a, ulong ars, ulong acs,
        __global const T *b, ulong bcs, uint i, uint j, uint jn,
        const struct skinny_out *o) {
  __global const T *ap[KR], *bp[KJ];
  float16 acc[KR][KJ];
#pragma unroll
  for (uint r = 0; r < rr; r++) {
    ap[r] = a + (ulong)(i + r) * ars;
#pragma unroll
    for (uint cc = 0; cc < KJ; cc++)
      acc[r][cc] = (float16)0.0f;
  }
#pragma unroll
  for (uint cc = 0; cc < KJ; cc++)
    bp[cc] = b + (ulong)min(j + cc, jn - 1) * bcs;
  uint p = 0;
  if (acs == 1) {
    K_STEPS(LOAD16(ap[r] + p))
  } else {
    K_STEPS(GATHER16(ap[r] + (ulong)p * acs, acs))
  }
  float s[KR][KJ];
#pragma unroll
  for (uint r = 0; r < rr; r++)
#pragma unroll
    for (uint cc = 0; cc < KJ; cc++)
      /* Lane by lane (common.clh's fixed pairwise tree). Halving the
       * vector with .lo/.hi compiles to the same few shuffles, but
       * Oclgrind's uninitialised-value check takes the halves of an
       * unoptimised swizzle for uninitialised. */
      s[r][cc] = KILN_HTREE16(acc[r][cc], KILN_ADD);
  for (; p < k; p++) /* k % 16 steps left */
#pragma unroll
    for (uint r = 0; r < rr; r++) {
      const float av = LOAD(ap[r], (ulong)p * acs);
#pragma unroll
      for (uint cc = 0; cc < KJ; cc++)
        s[r][cc] = fma(av, LOAD(bp[cc], p), s[r][cc]);
    }
#pragma unroll
  for (uint r = 0; r < rr; r++)
#pragma unroll
    for (uint cc = 0; cc < KJ; cc++)
      if (j + cc < jn)
        put(o, i + r, j + cc, s[r][cc]);
}

/* The arguments of both kernels: sizes; nb, the columns of C per
 * work-item; the scalars; A with its offset, batch stride and strides; B
 * with its offset, batch stride and the stride that is not 1; C with its
 * offset, batch stride and strides; the epilogue (bias at bias_off + i *
 * bias_rs + j * bias_cs). One batch entry per index of dimension 2. */
#define SKINNY_ARGS                                                            \
  uint m, uint n, uint k, uint nb, float alpha, float beta, uint read_c,       \
      __global const T *a, ulong a_off, ulong a_bs, ulong ars, ulong acs,      \
      __global const T *b, ulong b_off, ulong b_bs, ulong bstride,             \
      __global float *c, ulong c_off, ulong c_bs, ulong crs, ulong ccs,        \
      uint act, uint use_bias, __global const float *bias, ulong bias_off,     \
      ulong bias_rs, ulong bias_cs

#define SKINNY_SETUP                                                           \
  const uint j0 = get_global_id(0) * nb, j1 = min(j0 + nb, n);                 \
  const ulong batch = get_global_id(2);                                        \
  a += a_off + batch * a_bs;                                                   \
  b += b_off + batch * b_bs;                                                   \
  const struct skinny_out o = {alpha, beta,   read_c,  act,     use_bias,      \
                               c + c_off + batch * c_bs, crs, ccs,             \
                               bias + bias_off, bias_rs, bias_cs};

/* B(p, j) at b[p + j * bstride]. */
__kernel __attribute__((reqd_work_group_size(1, 1, 1))) void
gemm_skinny_k(SKINNY_ARGS) {
  SKINNY_SETUP
  for (uint j = j0; j < j1; j += KJ)
    for (uint i = 0; i < m;) {
      const uint left = m - i;
      if (left >= KR) {
        k_block(KR, k, a, ars, acs, b, bstride, i, j, j1, &o);
        i += KR;
#if KR > 2
      } else if (left >= 2) {
        k_block(2, k, a, ars, acs, b, bstride, i, j, j1, &o);
        i += 2;
#endif
      } else {
        k_block(1, k, a, ars, acs, b, bstride, i, j, j1, &o);
        i += 1;
      }
    }
}

/* ---- B contiguous along n ------------------------------------------------ */

/* Rows i .. i + rr - 1 and the 16 NV columns from j of C; cols < 16 NV at
 * the right edge (B read element by element there, zeros beyond n). */
__attribute__((always_inline)) static void
n_block(const uint rr, uint k, __global const T *a, ulong ars, ulong acs,
        __global const T *b, ulong brs, uint i, uint j, uint cols,
        const struct skinny_out *o) {
  float16 acc[NRW][NV];
#pragma unroll
  for (uint r = 0; r < rr; r++)
#pragma unroll
    for (uint v = 0; v < NV; v++)
      acc[r][v] = (float16)0.0f;
  __global const T *bq = b + j;
  for (uint p = 0; p < k; p++, bq += brs) {
    float16 bv[NV];
    if (cols == 16 * NV) {
#pragma unroll
      for (uint v = 0; v < NV; v++)
        bv[v] = LOAD16(bq + 16 * v);
    } else {
      float t[16 * NV];
      for (uint e = 0; e < 16 * NV; e++)
        t[e] = e < cols ? LOAD(bq, e) : 0.0f;
#pragma unroll
      for (uint v = 0; v < NV; v++)
        bv[v] = vload16(v, t);
    }
#pragma unroll
    for (uint r = 0; r < rr; r++) {
      const float16 av = (float16)LOAD(a, (ulong)(i + r) * ars + (ulong)p * acs);
#pragma unroll
      for (uint v = 0; v < NV; v++)
        acc[r][v] = fma(av, bv[v], acc[r][v]);
    }
  }
#pragma unroll
  for (uint r = 0; r < rr; r++) {
    float t[16 * NV];
#pragma unroll
    for (uint v = 0; v < NV; v++)
      vstore16(acc[r][v], v, t);
    for (uint e = 0; e < cols; e++)
      put(o, i + r, j + e, t[e]);
  }
}

/* B(p, j) at b[p * bstride + j]. nb is a multiple of 16 NV. */
__kernel __attribute__((reqd_work_group_size(1, 1, 1))) void
gemm_skinny_n(SKINNY_ARGS) {
  SKINNY_SETUP
  for (uint j = j0; j < j1; j += 16 * NV) {
    const uint cols = min((uint)(16 * NV), j1 - j);
    for (uint i = 0; i < m;) {
      const uint left = m - i;
      if (left >= NRW) {
        n_block(NRW, k, a, ars, acs, b, bstride, i, j, cols, &o);
        i += NRW;
      } else if (left >= 4) {
        n_block(4, k, a, ars, acs, b, bstride, i, j, cols, &o);
        i += 4;
      } else if (left >= 2) {
        n_block(2, k, a, ars, acs, b, bstride, i, j, cols, &o);
        i += 2;
      } else {
        n_block(1, k, a, ars, acs, b, bstride, i, j, cols, &o);
        i += 1;
      }
    }
  }
}
