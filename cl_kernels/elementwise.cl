/* Elementwise ops: unary maps, binary maps (tensor or scalar right operand),
 * axpy, scale, fill.
 *
 * Build options:
 *   -DDT=n    storage type of x, y (see common.clh): 0 f32, 1 f16, 2 bf16.
 *             Arithmetic is f32 whatever the storage.
 *   -DVEC=16  CPU family: each work-item handles 16 consecutive elements
 *             with vector loads and stores (interleaved timings on PoCL put
 *             it at or above one element per item, which PoCL vectorises
 *             across the group itself); default 1, one element per
 *             work-item, consecutive items on consecutive addresses (GPU).
 * Launch: ceil(n / VEC) work-items rounded up to the local size.
 * FOR_ELEMENTS (common.clh) checks the bounds in the last work-group only. Offsets and n are
 * in elements. Every op macro below works on float and float16 alike. */
#ifndef DT
#define DT 0
#endif
#include "common.clh"


/* 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))). tanh saturates to +-1
 * for large |x|, so the tanh form never overflows. */
#define OP_gelu(x)                                                             \
  (0.5f * (x) *                                                                \
   (1.0f + tanh(0.7978845608028654f * fma(0.044715f * (x), (x) * (x), (x)))))
/* exp of a non-positive argument only, so neither branch overflows; the
 * compiler shares the repeated exp. */
#define OP_sigmoid(x)                                                          \
  ((x) >= 0.0f ? 1.0f / (1.0f + exp(-fabs(x)))                                 \
               : exp(-fabs(x)) * (1.0f / (1.0f + exp(-fabs(x)))))
/* NaN < 0 is false, so NaN passes through; -0 stays -0. */
#define OP_relu(x) ((x) < 0.0f ? 0.0f : (x))
#define OP_neg(x) (-(x))
#define OP_abs(x) fabs(x)
#define OP_exp(x) exp(x)
#define OP_log(x) log(x)
#define OP_sqrt(x) sqrt(x)
#define OP_tanh(x) tanh(x)

#define OP_add(a, b) ((a) + (b))
#define OP_sub(a, b) ((a) - (b))
#define OP_mul(a, b) ((a) * (b))
#define OP_div(a, b) ((a) / (b))
#define OP_max(a, b) fmax((a), (b))
#define OP_min(a, b) fmin((a), (b))

#define UNARY(op)                                                              \
  __kernel void unary_##op(__global const T *x, ulong xo, __global T *y,       \
                           ulong yo, ulong n) {                                \
    __global const T *p = x + xo;                                              \
    __global T *q = y + yo;                                                    \
    FOR_ELEMENTS(i, n, { float16 v = LOAD16(p + i); STORE16(q + i, OP_##op(v)); }, \
                 { float v = LOAD(p, i); STORE(q, i, OP_##op(v)); })            \
  }

#define BINARY(op)                                                             \
  __kernel void binary_##op(__global const T *a, ulong ao,                     \
                            __global const T *b, ulong bo, __global T *y,      \
                            ulong yo, ulong n) {                               \
    __global const T *p = a + ao, *r = b + bo;                                 \
    __global T *q = y + yo;                                                    \
    FOR_ELEMENTS(i, n, STORE16(q + i, OP_##op(LOAD16(p + i), LOAD16(r + i))),  \
                 STORE(q, i, OP_##op(LOAD(p, i), LOAD(r, i))))                 \
  }                                                                            \
  __kernel void binary_scalar_##op(__global const T *a, ulong ao, float s,     \
                                   __global T *y, ulong yo, ulong n) {         \
    __global const T *p = a + ao;                                              \
    __global T *q = y + yo;                                                    \
    FOR_ELEMENTS(i, n, STORE16(q + i, OP_##op(LOAD16(p + i), (float16)s)),     \
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
  FOR_ELEMENTS(i, n,
               STORE16(q + i, fma((float16)alpha, LOAD16(p + i), LOAD16(q + i))),
               STORE(q, i, fma(alpha, LOAD(p, i), LOAD(q, i))))
}

__kernel void scale(float alpha, __global T *x, ulong xo, ulong n) {
  __global T *q = x + xo;
  FOR_ELEMENTS(i, n, STORE16(q + i, alpha * LOAD16(q + i)),
               STORE(q, i, alpha * LOAD(q, i)))
}

/* Fill with a bit pattern the host already converted to the storage type,
 * so no half arithmetic is needed on the device. */
__kernel void fill32(uint value, __global uint *y, ulong yo, ulong n) {
  __global uint *q = y + yo;
  FOR_ELEMENTS(i, n, vstore16((uint16)value, 0, q + i), q[i] = value)
}

__kernel void fill16(ushort value, __global ushort *y, ulong yo, ulong n) {
  __global ushort *q = y + yo;
  FOR_ELEMENTS(i, n, vstore16((ushort16)value, 0, q + i), q[i] = value)
}
