/* Elementwise ops: unary maps, binary maps (tensor or scalar right operand),
 * axpy, scale, fill.
 *
 * Build options:
 *   -DDT=n    storage type of x, y (see common.clh): 0 f32, 1 f16, 2 bf16.
 *             Arithmetic is f32 whatever the storage.
 *   -DVEC=16  CPU family: each work-item handles 16 consecutive elements
 *             with vector loads and stores (interleaved timings on PoCL put
 *             it at or above one element per item, which PoCL vectorises
 *             across the group itself).
 *   -DWG=n -DWPT=n -DVW=n  GPU family, a point of the space in
 *             runtime/ops/ops_elementwise.c: work-groups of WG items, each
 *             taking WPT vectors of VW consecutive elements, the vectors
 *             of a group's items side by side (coalesced). WPT = VW = 1 is
 *             one element per work-item, the kernel before it had a space.
 * Launch: CPU, ceil(n / 16) work-items; GPU, ceil(n / (WG WPT VW)) groups of
 * WG. Every group but the last runs without bounds checks (FOR_ELEMENTS).
 * Offsets and n are in elements, and any offset works: the GPU family uses
 * aligned vector accesses only when every pointer of the call is aligned to
 * a whole vector (vec_access.clh). Every op macro below works on float and
 * float vectors alike. */
#ifndef DT
#define DT 0
#endif
#include "common.clh"

#ifdef VW
#include "vec_access.clh"
#if WPT == 1 && VW == 1
/* The space's default point: exactly the kernel before the space. */
#define FOR_VECTORS(i, n, VSTMT, STMT) FOR_ELEMENT(i, n, STMT)
#else
#define FOR_VECTORS(i, n, VSTMT, STMT)                                         \
  const size_t b_ = get_group_id(0) * (size_t)(WG * WPT * VW) +                \
                    get_local_id(0) * VW;                                      \
  if (get_group_id(0) + 1 < get_num_groups(0)) {                               \
    for (uint j_ = 0; j_ < WPT; j_++) {                                        \
      size_t i = b_ + j_ * (size_t)(WG * VW);                                  \
      VSTMT;                                                                   \
    }                                                                          \
  } else {                                                                     \
    for (uint j_ = 0; j_ < WPT; j_++) {                                        \
      size_t i = b_ + j_ * (size_t)(WG * VW);                                  \
      if (i + VW <= (n)) {                                                     \
        VSTMT;                                                                 \
      } else {                                                                 \
        for (; i < (n); i++) {                                                 \
          STMT;                                                                \
        }                                                                      \
      }                                                                        \
    }                                                                          \
  }
#endif
#undef FOR_ELEMENTS
#define FOR_ELEMENTS(i, n, VSTMT, STMT) FOR_VECTORS(i, n, VSTMT, STMT)
#define VLOAD_DECL(v, p) LOADV_DECL(v, p, al_)
#define VSTORE(p, v) STOREV(p, v, al_)
/* VW raw words of type TY (uint, ushort) set to v at q. */
#if VW == 1
#define VFILL(TY, q, v) (*(q) = (v))
#else
#define VFILL(TY, q, v)                                                        \
  do {                                                                         \
    if (al_)                                                                   \
      *(__global KILN_CAT(TY, VW) *)(q) = (KILN_CAT(TY, VW))(v);               \
    else                                                                       \
      KILN_CAT(vstore, VW)((KILN_CAT(TY, VW))(v), 0, (q));                     \
  } while (0)
#endif
#else /* CPU family: 16 elements per work-item (or one, VEC 1) */
#define ALIGNED(p) true
#define VF float16
#define VLOAD_DECL(v, p) const float16 v = LOAD16(p);
#define VSTORE(p, v) STORE16(p, v)
#define VFILL(TY, q, v) vstore16((TY##16)(v), 0, (q))
#endif

#define OP_gelu(x) KILN_GELU(x) /* common.clh, shared with the GEMM epilogue */
/* exp of a non-positive argument only, so neither branch overflows; the
 * compiler shares the repeated exp. */
#define OP_sigmoid(x)                                                          \
  ((x) >= 0.0f ? 1.0f / (1.0f + exp(-fabs(x)))                                 \
               : exp(-fabs(x)) * (1.0f / (1.0f + exp(-fabs(x)))))
#define OP_relu(x) KILN_RELU(x)
#define OP_neg(x) (-(x))
#define OP_abs(x) fabs(x)
#define OP_exp(x) exp(x)
#define OP_log(x) log(x)
#define OP_sqrt(x) sqrt(x)
#define OP_tanh(x) tanh(x)

/* al_: every pointer of the call is aligned to a whole vector. */
#define UNARY(op)                                                              \
  __kernel void unary_##op(__global const T *x, ulong xo, __global T *y,       \
                           ulong yo, ulong n) {                                \
    __global const T *p = x + xo;                                              \
    __global T *q = y + yo;                                                    \
    const bool al_ __attribute__((unused)) = ALIGNED(p) && ALIGNED(q);         \
    FOR_ELEMENTS(i, n,                                                         \
                 { VLOAD_DECL(a_, p + i) VF v = OP_##op(a_); VSTORE(q + i, v); }, \
                 { float v = LOAD(p, i); STORE(q, i, OP_##op(v)); })           \
  }

#define BINARY(op)                                                             \
  __kernel void binary_##op(__global const T *a, ulong ao,                     \
                            __global const T *b, ulong bo, __global T *y,      \
                            ulong yo, ulong n) {                               \
    __global const T *p = a + ao, *r = b + bo;                                 \
    __global T *q = y + yo;                                                    \
    const bool al_ __attribute__((unused)) =                                   \
        ALIGNED(p) && ALIGNED(r) && ALIGNED(q);                                \
    FOR_ELEMENTS(i, n,                                                         \
                 { VLOAD_DECL(a_, p + i) VLOAD_DECL(b_, r + i)                 \
                   VF v = OP_##op(a_, b_);                                     \
                   VSTORE(q + i, v); },                                        \
                 STORE(q, i, OP_##op(LOAD(p, i), LOAD(r, i))))                 \
  }                                                                            \
  __kernel void binary_scalar_##op(__global const T *a, ulong ao, float s,     \
                                   __global T *y, ulong yo, ulong n) {         \
    __global const T *p = a + ao;                                              \
    __global T *q = y + yo;                                                    \
    const bool al_ __attribute__((unused)) = ALIGNED(p) && ALIGNED(q);         \
    FOR_ELEMENTS(i, n,                                                         \
                 { VLOAD_DECL(a_, p + i) VF v = OP_##op(a_, (VF)s);            \
                   VSTORE(q + i, v); },                                        \
                 STORE(q, i, OP_##op(LOAD(p, i), s)))                          \
  }

UNARY(neg)
UNARY(abs)
UNARY(exp)
UNARY(log)
UNARY(sqrt)
UNARY(relu)
UNARY(gelu)
UNARY(sigmoid)
UNARY(tanh)

BINARY(add)
BINARY(sub)
BINARY(mul)
BINARY(div)
BINARY(max)
BINARY(min)

/* y = alpha x + y with one rounding (fma), like an FMA-based BLAS. */
__kernel void axpy(float alpha, __global const T *restrict x, ulong xo,
                   __global T *restrict y, ulong yo, ulong n) {
  __global const T *p = x + xo;
  __global T *q = y + yo;
  const bool al_ __attribute__((unused)) = ALIGNED(p) && ALIGNED(q);
  FOR_ELEMENTS(i, n,
               { VLOAD_DECL(a_, p + i) VLOAD_DECL(b_, q + i)
                 VF v = fma((VF)alpha, a_, b_);
                 VSTORE(q + i, v); },
               STORE(q, i, fma(alpha, LOAD(p, i), LOAD(q, i))))
}

__kernel void scale(float alpha, __global T *x, ulong xo, ulong n) {
  __global T *q = x + xo;
  const bool al_ __attribute__((unused)) = ALIGNED(q);
  FOR_ELEMENTS(i, n, { VLOAD_DECL(a_, q + i) VF v = alpha * a_;
                       VSTORE(q + i, v); },
               STORE(q, i, alpha * LOAD(q, i)))
}

/* Fill with a bit pattern the host already converted to the storage type,
 * so no half arithmetic is needed on the device. */
__kernel void fill32(uint value, __global uint *y, ulong yo, ulong n) {
  __global uint *q = y + yo;
  const bool al_ __attribute__((unused)) = ALIGNED(q);
  FOR_ELEMENTS(i, n, VFILL(uint, q + i, value), q[i] = value)
}

__kernel void fill16(ushort value, __global ushort *y, ulong yo, ulong n) {
  __global ushort *q = y + yo;
  const bool al_ __attribute__((unused)) = ALIGNED(q);
  FOR_ELEMENTS(i, n, VFILL(ushort, q + i, value), q[i] = value)
}
