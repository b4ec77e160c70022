/* Training ops, elementwise: binary ops with a broadcast row or column
 * vector, and activation gradients dx = dy * f'(x).
 *
 * Build options:
 *   -DDT=n  storage type of every operand (common.clh): 0 f32, 1 f16,
 *           2 bf16; arithmetic in f32.
 * Launches: the broadcast kernels take a 2-D range, dimension 0 the columns
 * (rounded up to the local size, which is 1 in dimension 1) and dimension 1
 * the rows, so neighbouring work-items touch neighbouring elements (PoCL
 * vectorises across them) and no work-item divides. The gradient kernels
 * take one work-item per element. Offsets, rows, cols and n are in
 * elements. */
#ifndef DT
#define DT 0
#endif
#include "common.clh"

/* Run STMT for column c = get_global_id(0) < cols of row r; as FOR_ELEMENT,
 * only the last group along the columns checks the bound. */
#define FOR_COLUMN(c, cols, STMT)                                              \
  size_t c = get_global_id(0);                                                 \
  if (get_group_id(0) + 1 < get_num_groups(0)) {                               \
    STMT;                                                                      \
  } else if (c < (cols)) {                                                     \
    STMT;                                                                      \
  }

/* row: y[r][c] = a[r][c] op b[c]; col: y[r][c] = a[r][c] op b[r]. */
#define BROADCAST(op)                                                          \
  __kernel void bcast_row_##op(__global const T *a, ulong ao,                  \
                               __global const T *b, ulong bo, __global T *y,   \
                               ulong yo, ulong cols) {                         \
    size_t r = get_global_id(1);                                               \
    __global const T *p = a + ao + r * cols, *v = b + bo;                      \
    __global T *q = y + yo + r * cols;                                         \
    FOR_COLUMN(c, cols, STORE(q, c, OP_##op(LOAD(p, c), LOAD(v, c))))          \
  }                                                                            \
  __kernel void bcast_col_##op(__global const T *a, ulong ao,                  \
                               __global const T *b, ulong bo, __global T *y,   \
                               ulong yo, ulong cols) {                         \
    size_t r = get_global_id(1);                                               \
    __global const T *p = a + ao + r * cols;                                   \
    __global T *q = y + yo + r * cols;                                         \
    float s = LOAD(b + bo, r);                                                 \
    FOR_COLUMN(c, cols, STORE(q, c, OP_##op(LOAD(p, c), s)))                   \
  }

BROADCAST(add)
BROADCAST(sub)
BROADCAST(mul)
BROADCAST(div)
BROADCAST(max)
BROADCAST(min)

/* Derivatives, as a function of x (_x) or of y = f(x) (_y). */
/* gelu, tanh form: with u = k (x + c x^3) and t = tanh(u),
 * d/dx 0.5 x (1 + t) = 0.5 (1 + t) + 0.5 x (1 - t^2) k (1 + 3 c x^2). */
float d_gelu_x(float x) {
  const float k = 0.7978845608028654f, c = 0.044715f;
  float x2 = x * x;
  float t = tanh(k * fma(c * x, x2, x));
  return fma(0.5f * x * k * fma(3.0f * c, x2, 1.0f), fma(-t, t, 1.0f),
             0.5f * (1.0f + t));
}
/* sigmoid: s (1 - s), s computed as kiln_unary does (no overflow). */
float d_sigmoid_y(float s) { return s * (1.0f - s); }
float d_sigmoid_x(float x) {
  float e = exp(-fabs(x));
  float s = x >= 0.0f ? 1.0f / (1.0f + e) : e / (1.0f + e);
  return d_sigmoid_y(s);
}
float d_tanh_y(float t) { return fma(-t, t, 1.0f); }
float d_tanh_x(float x) { return d_tanh_y(tanh(x)); }
/* dx from the stored value v (x or y) and dy. relu selects rather than
 * multiplies, so a non-finite dy where x <= 0 still gives 0 (PyTorch's
 * threshold_backward); x > 0 and y > 0 agree, and NaN gives 0. */
#define G_relu_x(v, d) ((v) > 0.0f ? (d) : 0.0f)
#define G_relu_y(v, d) ((v) > 0.0f ? (d) : 0.0f)
#define G_gelu_x(v, d) ((d) * d_gelu_x(v))
#define G_sigmoid_x(v, d) ((d) * d_sigmoid_x(v))
#define G_sigmoid_y(v, d) ((d) * d_sigmoid_y(v))
#define G_tanh_x(v, d) ((d) * d_tanh_x(v))
#define G_tanh_y(v, d) ((d) * d_tanh_y(v))

#define GRAD(name)                                                             \
  __kernel void grad_##name(__global const T *xy, ulong xo,                    \
                            __global const T *dy, ulong go, __global T *dx,    \
                            ulong dxo, ulong n) {                              \
    __global const T *p = xy + xo, *g = dy + go;                               \
    __global T *q = dx + dxo;                                                  \
    FOR_ELEMENT(i, n, STORE(q, i, G_##name(LOAD(p, i), LOAD(g, i))))          \
  }

GRAD(relu_x)
GRAD(relu_y)
GRAD(gelu_x)
GRAD(sigmoid_x)
GRAD(sigmoid_y)
GRAD(tanh_x)
GRAD(tanh_y)
