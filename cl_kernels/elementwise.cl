/* Elementwise ops: unary maps, binary maps (tensor or scalar right operand),
 * axpy, scale, fill.
 *
 * Build options:
 *   -DDT=n   storage type of x, y (see common.clh): 0 f32, 1 f16, 2 bf16.
 *            Arithmetic is f32 whatever the storage.
 * Launch: one work-item per element over a range rounded up to the local
 * size; FOR_ELEMENT (common.clh) checks i < n in the last group only. The
 * same kernels serve both kernel families: on a CPU (PoCL) the compiler vectorises the loop over a
 * work-group's items, which matched an OpenMP loop in our measurements; on a
 * GPU consecutive items touch consecutive addresses. Offsets and n are in
 * elements. */
#ifndef DT
#define DT 0
#endif
#include "common.clh"

/* 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))). tanh saturates to +-1
 * for large |x|, so the tanh form never overflows. */
float kiln_gelu(float x) {
  const float k = 0.7978845608028654f; /* sqrt(2 / pi) */
  float inner = k * fma(0.044715f * x, x * x, x);
  return 0.5f * x * (1.0f + tanh(inner));
}

/* exp of a non-positive argument only, so neither branch overflows. */
float kiln_sigmoid(float x) {
  float e = exp(-fabs(x));
  float r = 1.0f / (1.0f + e);
  return x >= 0.0f ? r : e * r;
}

/* NaN < 0 is false, so NaN passes through; -0 stays -0. */
float kiln_relu(float x) { return x < 0.0f ? 0.0f : x; }

#define OP_neg(x) (-(x))
#define OP_abs(x) fabs(x)
#define OP_exp(x) exp(x)
#define OP_log(x) log(x)
#define OP_sqrt(x) sqrt(x)
#define OP_relu(x) kiln_relu(x)
#define OP_gelu(x) kiln_gelu(x)
#define OP_sigmoid(x) kiln_sigmoid(x)
#define OP_tanh(x) tanh(x)

#define OP_add(a, b) ((a) + (b))
#define OP_sub(a, b) ((a) - (b))
#define OP_mul(a, b) ((a) * (b))
#define OP_div(a, b) ((a) / (b))
#define OP_max(a, b) fmax((a), (b))
#define OP_min(a, b) fmin((a), (b))

#define UNARY(op)                                                             \
  __kernel void unary_##op(__global const T *x, ulong xo, __global T *y,      \
                           ulong yo, ulong n) {                               \
    FOR_ELEMENT(i, n, STORE(y + yo, i, OP_##op(LOAD(x + xo, i))))           \
  }

#define BINARY(op)                                                            \
  __kernel void binary_##op(__global const T *a, ulong ao,                    \
                            __global const T *b, ulong bo, __global T *y,     \
                            ulong yo, ulong n) {                              \
    FOR_ELEMENT(i, n,                                                         \
                STORE(y + yo, i, OP_##op(LOAD(a + ao, i), LOAD(b + bo, i))))  \
  }                                                                           \
  __kernel void binary_scalar_##op(__global const T *a, ulong ao, float s,    \
                                   __global T *y, ulong yo, ulong n) {        \
    FOR_ELEMENT(i, n, STORE(y + yo, i, OP_##op(LOAD(a + ao, i), s)))        \
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
  FOR_ELEMENT(i, n,
              STORE(y + yo, i, fma(alpha, LOAD(x + xo, i), LOAD(y + yo, i))))
}

__kernel void scale(float alpha, __global T *x, ulong xo, ulong n) {
  FOR_ELEMENT(i, n, STORE(x + xo, i, alpha * LOAD(x + xo, i)))
}

/* Fill with a bit pattern the host already converted to the storage type,
 * so no half arithmetic is needed on the device. */
__kernel void fill32(uint value, __global uint *y, ulong yo, ulong n) {
  FOR_ELEMENT(i, n, y[yo + i] = value)
}

__kernel void fill16(ushort value, __global ushort *y, ulong yo, ulong n) {
  FOR_ELEMENT(i, n, y[yo + i] = value)
}
