/* GEMM, CPU family: for OpenCL on CPUs (PoCL), where a work-item is a thread
 * of plain scalar-plus-SIMD code and __local memory is ordinary memory.
 *
 * Shape of the computation (the BLIS/GotoBLAS scheme, in OpenCL):
 *   1. gemm_pack_a_<dt> copies op(A) into row panels of MR rows, k-major
 *      (panel p, step kk holds op(A)[p*MR .. p*MR+MR-1][kk]), converting to
 *      f32 and padding the last panel with zeros; gemm_pack_b_<dt> copies
 *      op(B) into column panels of NR columns (step kk holds
 *      op(B)[kk][q*NR .. q*NR+NR-1]). Both live in the queue's workspace.
 *   2. gemm_cpu: each work-item owns an MB x NB block of C and walks it in
 *      MR x NR register tiles, KC steps of k at a time, so that one B
 *      micro-panel (KC x NR floats) stays in L1 while the A block (MB x KC)
 *      stays in L2. The tile's accumulators are MR*NV vectors of VW floats;
 *      every step is one broadcast of an A element and NV fma() per row.
 *      PoCL 3.1 never fuses a*b+c into an FMA instruction, so fma() is
 *      written out: it doubles the speed.
 * Work-groups are one work-item (reqd_work_group_size(1,1,1)): PoCL would
 * otherwise vectorise across work-items and break the register tile.
 *
 * Macros (set by runtime/ops/ops_gemm.c from the profile):
 *   MR  rows of the register tile (1..8)
 *   NR  columns of the register tile: VW or 2 * VW
 *   VW  float vector width of the accumulators (4, 8 or 16)
 *   KC  steps of k per pass over a tile (L1 blocking)
 */
#include "common.clh"
#include "gemm_epilogue.clh"

/* Eight bf16 at once: widening is a shift (common.clh has 1 and 16). */
float8 gemm_bf16_to_f32_8(ushort8 h) {
  return as_float8(convert_uint8(h) << (uint8)16);
}

#ifndef MR
#define MR 6
#endif
#ifndef VW
#define VW 8
#endif
#ifndef NR
#define NR 16
#endif
#ifndef KC
#define KC 256
#endif
#define NV (NR / VW)
#if NV != 1 && NV != 2
#error "NR must be VW or 2 * VW"
#endif

#define GEMM_CAT_(a, b) a##b
#define GEMM_CAT(a, b) GEMM_CAT_(a, b)
#define VT GEMM_CAT(float, VW)
#define VLOAD GEMM_CAT(vload, VW)
#define VSTORE GEMM_CAT(vstore, VW)

/* X(r) for r = 0 .. MR-1. */
#if MR == 1
#define FOR_ROWS(X) X(0)
#elif MR == 2
#define FOR_ROWS(X) X(0) X(1)
#elif MR == 3
#define FOR_ROWS(X) X(0) X(1) X(2)
#elif MR == 4
#define FOR_ROWS(X) X(0) X(1) X(2) X(3)
#elif MR == 5
#define FOR_ROWS(X) X(0) X(1) X(2) X(3) X(4)
#elif MR == 6
#define FOR_ROWS(X) X(0) X(1) X(2) X(3) X(4) X(5)
#elif MR == 7
#define FOR_ROWS(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6)
#elif MR == 8
#define FOR_ROWS(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7)
#else
#error "MR must be 1 to 8"
#endif

/* ---- packing ------------------------------------------------------------ */

/* Panels and steps of k one packing work-item copies (runtime/ops/
 * ops_gemm.c's PACK_PANELS and PACK_STEPS): runs of the source long enough
 * for the hardware prefetchers, since packing is bound by its reads (a
 * step of 4 panels of B as stored is one run of 4 NR elements; a panel of
 * A as stored, MR runs of 256 steps). On PoCL at 1024^3 this took packing
 * from 8-9% of an SGEMM's time to 6-7% (one panel and 64 steps before;
 * perf's shares). */
#define PACK_STEPS 256
#define PACK_PANELS 4

/* Pack PACK_PANELS panels, each of W consecutive "panel-direction" indices
 * (rows of op(A), or columns of op(B)), over steps [k0, k0 + PACK_STEPS)
 * of k. Source element (panel index t, step kk) is at src[off + t * st +
 * (k_base + kk) * sk]. Indices t >= tn are zero padding.
 *   st == 1: the W elements of one step are contiguous (B not transposed,
 *            A transposed): vector loads of 8 along the step, the
 *            work-item's panels side by side when all are whole.
 *   sk == 1: each of the W lines runs contiguously along k (A not
 *            transposed, B transposed): W independent streams, read 8 steps
 *            at a time and scattered into the 8 steps' rows.
 * Anything else, and the zero-padded last panel, goes element by element.
 * LOADF(p, i) loads element i of p as a float; LOAD8(p) 8 elements from p
 * as a float8. */
#define PACK_KERNEL(NAME, W, SRC_T, LOADF, LOAD8)                              \
  __kernel __attribute__((reqd_work_group_size(1, 1, 1))) void NAME(           \
      __global const SRC_T *src, ulong off, ulong src_batch, ulong st,         \
      ulong sk, uint tn, uint kn, uint k_base, __global float *ws,             \
      ulong dst_off, ulong dst_batch) {                                        \
    const uint p0 = get_global_id(0) * PACK_PANELS;                            \
    const uint p1 = min(p0 + PACK_PANELS, (tn + (W) - 1) / (W));               \
    const uint k0 = get_global_id(1) * PACK_STEPS;                             \
    const uint k1 = min(k0 + PACK_STEPS, kn);                                  \
    const ulong batch = get_global_id(2);                                      \
    src += off + batch * src_batch;                                            \
    ws += dst_off + batch * dst_batch;                                         \
    if (st == 1 && p1 * (W) <= tn && (W) % 8 == 0) {                           \
      /* Whole panels side by side along each step: one run of the step's     \
       * p1 - p0 panels at a time. */                                          \
      for (uint kk = k0; kk < k1; kk++) {                                      \
        __global const SRC_T *s =                                              \
            src + (ulong)p0 * (W) + (ulong)(k_base + kk) * sk;                 \
        for (uint q = p0; q < p1; q++, s += (W)) {                             \
          __global float *dst = ws + ((ulong)q * kn + kk) * (W);               \
          for (uint t = 0; t < (W); t += 8)                                    \
            vstore8(LOAD8(s + t), 0, dst + t);                                 \
        }                                                                      \
      }                                                                        \
      return;                                                                  \
    }                                                                          \
    for (uint panel = p0; panel < p1; panel++) {                               \
      const uint t0 = panel * (W);                                             \
      __global const SRC_T *sp = src + (ulong)t0 * st;                         \
      __global float *dst = ws + ((ulong)panel * kn + k0) * (W);               \
      PACK_PANEL(W, SRC_T, LOADF, LOAD8, sp, dst)                              \
    }                                                                          \
  }

/* One panel (its first index t0, its source sp, its destination dst) of
 * PACK_KERNEL, over steps [k0, k1). */
#define PACK_PANEL(W, SRC_T, LOADF, LOAD8, sp, dst)                            \
  const bool full = t0 + (W) <= tn;                                            \
  if (full && st == 1) {                                                       \
    for (uint kk = k0; kk < k1; kk++, dst += (W)) {                            \
      __global const SRC_T *s = sp + (ulong)(k_base + kk) * sk;                \
      for (uint t = 0; t < (W); t++)                                           \
        dst[t] = LOADF(s, t);                                                  \
    }                                                                          \
  } else if (full && sk == 1) {                                                \
    uint kk = k0;                                                              \
    for (; kk + 8 <= k1; kk += 8, dst += 8 * (W)) {                            \
      for (uint t = 0; t < (W); t++) {                                         \
        const float8 v = LOAD8(sp + (ulong)t * st + k_base + kk);              \
        dst[0 * (W) + t] = v.s0;                                               \
        dst[1 * (W) + t] = v.s1;                                               \
        dst[2 * (W) + t] = v.s2;                                               \
        dst[3 * (W) + t] = v.s3;                                               \
        dst[4 * (W) + t] = v.s4;                                               \
        dst[5 * (W) + t] = v.s5;                                               \
        dst[6 * (W) + t] = v.s6;                                               \
        dst[7 * (W) + t] = v.s7;                                               \
      }                                                                        \
    }                                                                          \
    for (; kk < k1; kk++, dst += (W))                                          \
      for (uint t = 0; t < (W); t++)                                           \
        dst[t] = LOADF(sp, (ulong)t * st + k_base + kk);                       \
  } else {                                                                     \
    for (uint kk = k0; kk < k1; kk++, dst += (W))                              \
      for (uint t = 0; t < (W); t++)                                           \
        dst[t] = t0 + t < tn                                                   \
                     ? LOADF(sp, (ulong)t * st + (ulong)(k_base + kk) * sk)    \
                     : 0.0f;                                                   \
  }

/* Arguments of the packing kernels: the source matrix, its element offset
 * and batch stride, and its strides st (along the panel direction) and sk
 * (along k); tn the extent in the panel direction (m for A, n for B); kn the
 * steps packed and k_base the first of them (long k is packed in chunks);
 * the workspace, the element offset of the packed chunk and the batch
 * stride of packed chunks. */
#define F32_LOADF(p, i) ((p)[i])
#define F32_LOAD8(p) vload8(0, p)
#define F16_LOADF(p, i) vload_half(i, p)
#define F16_LOAD8(p) vload_half8(0, p)
#define BF16_LOADF(p, i) kiln_bf16_to_f32((p)[i])
#define BF16_LOAD8(p) gemm_bf16_to_f32_8(vload8(0, p))

PACK_KERNEL(gemm_pack_a_f32, MR, float, F32_LOADF, F32_LOAD8)
PACK_KERNEL(gemm_pack_a_f16, MR, half, F16_LOADF, F16_LOAD8)
PACK_KERNEL(gemm_pack_a_bf16, MR, ushort, BF16_LOADF, BF16_LOAD8)
PACK_KERNEL(gemm_pack_b_f32, NR, float, F32_LOADF, F32_LOAD8)
PACK_KERNEL(gemm_pack_b_f16, NR, half, F16_LOADF, F16_LOAD8)
PACK_KERNEL(gemm_pack_b_bf16, NR, ushort, BF16_LOADF, BF16_LOAD8)

/* ---- the register-tile kernel ------------------------------------------- */

/* C[i][j] (row-major, ldc) = alpha * sum_kk Ap * Bp + beta * C over the
 * block of C that this work-item owns. k is the number of packed steps
 * (one host chunk of the full k). The panels of A are read from pa (the
 * workspace, or a kiln_packed's buffer) from a_off, a_ks steps per panel
 * (k for panels packed per chunk, the full k of a kiln_packed, whose
 * a_off then points at the chunk's first step); B's likewise. read_c:
 * whether the first pass reads C (beta != 0); a beta of 0 never reads C,
 * so NaNs there do not leak. Later
 * passes over KC steps (and later host chunks, which pass beta = 1) add to
 * what the earlier ones stored.
 * Epilogue (kiln_matmul's kiln_epilogue): when epi is set (the host's last
 * chunk of k, with a bias or an activation), the last KC pass adds
 * bias[bias_off + i * bias_rs + j * bias_cs] and applies act
 * (gemm_epilogue.clh) to each final value; earlier passes and chunks store
 * plain partial sums, so the activation sees the whole sum exactly once. */
/* clang reports a loop hint it could not follow (below: LLVM 15 cannot
 * unroll the k loop 4 times) at the kernel's first line, as -Wpass-failed,
 * and PoCL's clang prints "1 warning generated." to the application's
 * stderr. Off for this kernel only. */
#ifdef __clang__
#pragma clang diagnostic push
#pragma clang diagnostic ignored "-Wpass-failed"
#endif
__kernel __attribute__((reqd_work_group_size(1, 1, 1))) void
gemm_cpu(uint m, uint n, uint k, uint mb, uint nb, float alpha, float beta,
         uint read_c, __global const float *pa, ulong a_off, ulong a_batch,
         ulong a_ks, __global const float *pb, ulong b_off, ulong b_batch,
         ulong b_ks, __global float *c, ulong c_off, ulong c_batch, ulong ldc,
         uint epi, uint act, uint use_bias, __global const float *bias,
         ulong bias_off, ulong bias_rs, ulong bias_cs) {
  const uint i0 = get_global_id(1) * mb;
  const uint j0 = get_global_id(0) * nb;
  const uint batch = get_global_id(2);
  const uint i1 = min(i0 + mb, m), j1 = min(j0 + nb, n);
  __global const float *ap = pa + a_off + batch * a_batch;
  __global const float *bp = pb + b_off + batch * b_batch;
  c += c_off + batch * c_batch;
  for (uint pc = 0; pc < k || pc == 0; pc += KC) {
    const uint kc = min((uint)KC, k - pc);
    const bool first = pc == 0;
    const bool load_c = !first || read_c != 0;
    const float cscale = first ? beta : 1.0f;
    const bool epi_now = epi != 0 && pc + KC >= k;
    for (uint j = j0; j < j1; j += NR) {
      __global const VT *bpanel =
          (__global const VT *)(bp + ((ulong)(j / NR) * b_ks + pc) * NR);
      for (uint i = i0; i < i1; i += MR) {
        __global const float *aq = ap + ((ulong)(i / MR) * a_ks + pc) * MR;
        __global const VT *bq = bpanel;
#define DECL(r) VT acc##r##_0 = (VT)0.0f, acc##r##_1 = (VT)0.0f;
        FOR_ROWS(DECL)
#undef DECL
        /* Unrolled 4 times, not fully: kc is at most KC, and compilers that
         * see that bound unroll all of it, which takes rusticl minutes to
         * compile and gains nothing. LLVM 15 (PoCL 3.1, rusticl) keeps the
         * loop rolled instead and warns that it could not unroll it, which
         * PoCL's clang prints to the application's stderr: that warning is
         * off for this kernel (above it), the hint stays, since it is what
         * stops the full unroll. */
#pragma unroll 4
        for (uint p = 0; p < kc; p++) {
#if NV > 1
          const VT b0 = bq[0], b1 = bq[1];
#define STEP(r)                                                                \
  {                                                                            \
    const VT av = (VT)aq[r];                                                   \
    acc##r##_0 = fma(av, b0, acc##r##_0);                                      \
    acc##r##_1 = fma(av, b1, acc##r##_1);                                      \
  }
#else
          const VT b0 = bq[0];
#define STEP(r)                                                                \
  {                                                                            \
    acc##r##_0 = fma((VT)aq[r], b0, acc##r##_0);                               \
  }
#endif
          FOR_ROWS(STEP)
#undef STEP
          aq += MR;
          bq += NV;
        }
        const uint rows = min((uint)MR, m - i), cols = min((uint)NR, n - j);
        __global float *ct = c + (ulong)i * ldc + j;
        if (cols == NR && !epi_now) {
          /* Full-width tile: vector read-modify-write of each row. */
#if NV > 1
#define STORE(r)                                                               \
  if (r < rows) {                                                              \
    __global float *q = ct + (ulong)r * ldc;                                   \
    VT v0 = (VT)alpha * acc##r##_0, v1 = (VT)alpha * acc##r##_1;               \
    if (load_c) {                                                              \
      v0 = fma((VT)cscale, VLOAD(0, q), v0);                                   \
      v1 = fma((VT)cscale, VLOAD(1, q), v1);                                   \
    }                                                                          \
    VSTORE(v0, 0, q);                                                          \
    VSTORE(v1, 1, q);                                                          \
  }
#else
#define STORE(r)                                                               \
  if (r < rows) {                                                              \
    __global float *q = ct + (ulong)r * ldc;                                   \
    VT v0 = (VT)alpha * acc##r##_0;                                            \
    if (load_c)                                                                \
      v0 = fma((VT)cscale, VLOAD(0, q), v0);                                   \
    VSTORE(v0, 0, q);                                                          \
  }
#endif
          FOR_ROWS(STORE)
#undef STORE
        } else {
          /* The right edge, or the epilogue (once per output, so the
           * scalar path costs nothing next to the k loop): spill the tile
           * and store what lies inside C. */
          float t[MR * NR];
#if NV > 1
#define SPILL(r)                                                               \
  VSTORE(acc##r##_0, 0, t + r * NR);                                           \
  VSTORE(acc##r##_1, 1, t + r * NR);
#else
#define SPILL(r) VSTORE(acc##r##_0, 0, t + r * NR);
#endif
          FOR_ROWS(SPILL)
#undef SPILL
          for (uint r = 0; r < rows; r++)
            for (uint cc = 0; cc < cols; cc++) {
              __global float *q = ct + (ulong)r * ldc + cc;
              float v = alpha * t[r * NR + cc];
              v = load_c ? fma(cscale, *q, v) : v;
              if (epi_now) {
                if (use_bias)
                  v += bias[bias_off + (ulong)(i + r) * bias_rs +
                            (ulong)(j + cc) * bias_cs];
                v = gemm_act(v, act);
              }
              *q = v;
            }
        }
      }
    }
  }
}
#ifdef __clang__
#pragma clang diagnostic pop
#endif

#include "gemm_scale.clh"
