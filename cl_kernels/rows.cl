/* Row-wise ops on a row-major rows x cols matrix: softmax and layernorm.
 *
 * Build options:
 *   -DDT=n      storage type (common.clh): 0 f32, 1 f16, 2 bf16; math in f32
 *   -DFAMILY=n  1 CPU: one work-item per row, passes over the row with
 *               16-wide vectors (a row of a few thousand floats stays in L1
 *               between passes); 0 GPU: one work-group per row, items
 *               striding through it, __local trees for the row statistics
 *   -DWG=n      GPU family: work-group size, a power of two
 *
 * softmax_rows: y = exp(x - max) / sum exp(x - max), the max making every
 * exponent <= 0 so nothing overflows. f16/bf16 outputs recompute exp in the
 * last pass rather than store it, so they are rounded once; the CPU
 * family's f32 output keeps exp in y (the same bits, half the exps).
 * layernorm_rows: mean, then the variance as the mean of squared
 * deviations (two passes, no cancellation), then
 * y = (x - mean) / sqrt(var + eps) * scale + bias.
 * Each row is read before any of it is written, by the same work-item or
 * group, so x and y may be the same range. */
#ifndef DT
#define DT 0
#endif
#ifndef FAMILY
#define FAMILY 1
#endif
#ifndef WG
#define WG 256
#endif
#include "common.clh"

#if FAMILY == 1

__kernel void softmax_rows(__global const T *x, ulong xo, __global T *y,
                           ulong yo, ulong rows, ulong cols) {
  size_t r = get_global_id(0);
  if (r >= rows)
    return;
  __global const T *p = x + xo + r * cols;
  __global T *q = y + yo + r * cols;
  float kiln_tmp16_[16] __attribute__((unused));
  ulong k;
  float16 m16 = -INFINITY;
  for (k = 0; k + 16 <= cols; k += 16)
    m16 = fmax(m16, LOAD16(p + k));
  float m = KILN_HTREE16(m16, fmax);
  for (; k < cols; k++)
    m = fmax(m, LOAD(p, k));
  float16 s16 = 0.0f;
#if DT == 0
  /* f32 storage: each exp goes to y as it is summed and is scaled there in
   * the last pass. y holds exactly the float exp returned, so the results
   * are the bits recomputing it would give, for half the exps (softmax of
   * 4096 x 1024 on PoCL spent most of its time in them). In place is fine:
   * x[k] is read before y[k] is written, and x is not read again. */
  for (k = 0; k + 16 <= cols; k += 16) {
    float16 e = exp(LOAD16(p + k) - m);
    s16 += e;
    STORE16(q + k, e);
  }
  float s = KILN_HTREE16(s16, KILN_ADD);
  for (; k < cols; k++) {
    float e = exp(LOAD(p, k) - m);
    s += e;
    STORE(q, k, e);
  }
  float inv = 1.0f / s;
  for (k = 0; k + 16 <= cols; k += 16)
    STORE16(q + k, LOAD16(q + k) * inv);
  for (; k < cols; k++)
    STORE(q, k, LOAD(q, k) * inv);
#else
  for (k = 0; k + 16 <= cols; k += 16)
    s16 += exp(LOAD16(p + k) - m);
  float s = KILN_HTREE16(s16, KILN_ADD);
  for (; k < cols; k++)
    s += exp(LOAD(p, k) - m);
  float inv = 1.0f / s;
  for (k = 0; k + 16 <= cols; k += 16)
    STORE16(q + k, exp(LOAD16(p + k) - m) * inv);
  for (; k < cols; k++)
    STORE(q, k, exp(LOAD(p, k) - m) * inv);
#endif
}

__kernel void layernorm_rows(__global const T *x, ulong xo,
                             __global const T *scale, ulong so,
                             __global const T *bias, ulong bo, int has_scale,
                             int has_bias, float eps, __global T *y, ulong yo,
                             ulong rows, ulong cols) {
  size_t r = get_global_id(0);
  if (r >= rows)
    return;
  __global const T *p = x + xo + r * cols;
  __global T *q = y + yo + r * cols;
  __global const T *g = scale + so;
  __global const T *b = bias + bo;
  float kiln_tmp16_[16] __attribute__((unused));
  ulong k;
  float16 s16 = 0.0f;
  for (k = 0; k + 16 <= cols; k += 16)
    s16 += LOAD16(p + k);
  float s = KILN_HTREE16(s16, KILN_ADD);
  for (; k < cols; k++)
    s += LOAD(p, k);
  float mean = s / (float)cols;
  float16 v16 = 0.0f;
  for (k = 0; k + 16 <= cols; k += 16) {
    float16 d = LOAD16(p + k) - mean;
    v16 = fma(d, d, v16);
  }
  float v = KILN_HTREE16(v16, KILN_ADD);
  for (; k < cols; k++) {
    float d = LOAD(p, k) - mean;
    v = fma(d, d, v);
  }
  float rstd = 1.0f / sqrt(v / (float)cols + eps);
  for (k = 0; k + 16 <= cols; k += 16) {
    float16 o = (LOAD16(p + k) - mean) * rstd;
    if (has_scale)
      o *= LOAD16(g + k);
    if (has_bias)
      o += LOAD16(b + k);
    STORE16(q + k, o);
  }
  for (; k < cols; k++) {
    float o = (LOAD(p, k) - mean) * rstd;
    if (has_scale)
      o *= LOAD(g, k);
    if (has_bias)
      o += LOAD(b, k);
    STORE(q, k, o);
  }
}

#else /* GPU family */

#include "group_reduce.clh"

__kernel void softmax_rows(__global const T *x, ulong xo, __global T *y,
                           ulong yo, ulong rows, ulong cols) {
  __local float buf[WG];
  size_t r = get_group_id(0), l = get_local_id(0);
  __global const T *p = x + xo + r * cols;
  __global T *q = y + yo + r * cols;
  float m = -INFINITY;
  for (ulong k = l; k < cols; k += WG)
    m = fmax(m, LOAD(p, k));
  m = group_max(buf, m);
  float s = 0.0f;
  for (ulong k = l; k < cols; k += WG)
    s += exp(LOAD(p, k) - m);
  float inv = 1.0f / group_sum(buf, s);
  for (ulong k = l; k < cols; k += WG)
    STORE(q, k, exp(LOAD(p, k) - m) * inv);
}

__kernel void layernorm_rows(__global const T *x, ulong xo,
                             __global const T *scale, ulong so,
                             __global const T *bias, ulong bo, int has_scale,
                             int has_bias, float eps, __global T *y, ulong yo,
                             ulong rows, ulong cols) {
  __local float buf[WG];
  size_t r = get_group_id(0), l = get_local_id(0);
  __global const T *p = x + xo + r * cols;
  __global T *q = y + yo + r * cols;
  __global const T *g = scale + so;
  __global const T *b = bias + bo;
  float s = 0.0f;
  for (ulong k = l; k < cols; k += WG)
    s += LOAD(p, k);
  float mean = group_sum(buf, s) / (float)cols;
  float v = 0.0f;
  for (ulong k = l; k < cols; k += WG) {
    float d = LOAD(p, k) - mean;
    v = fma(d, d, v);
  }
  float rstd = 1.0f / sqrt(group_sum(buf, v) / (float)cols + eps);
  for (ulong k = l; k < cols; k += WG) {
    float o = (LOAD(p, k) - mean) * rstd;
    if (has_scale)
      o *= LOAD(g, k);
    if (has_bias)
      o += LOAD(b, k);
    STORE(q, k, o);
  }
}

#endif
