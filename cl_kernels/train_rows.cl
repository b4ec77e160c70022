/* Training ops over the rows of a row-major rows x cols matrix: softmax
 * cross-entropy forward and backward, accuracy, softmax backward, layernorm
 * backward; and the small kernels around them (a fixed-order mean, a u32
 * zero, layernorm's column sums).
 *
 * Build options:
 *   -DDT=n      storage type of the matrices (common.clh): 0 f32, 1 f16,
 *               2 bf16; math in f32
 *   -DFAMILY=n  1 CPU: one work-item per row, passes over the row
 *               (launch: rows rounded up to WG); 0 GPU: one work-group of WG
 *               items per row, striding through it, with __local trees for
 *               the row's max and sums (launch: rows x WG items)
 *   -DWG=n      work-group size, a power of two
 * Labels are read as uint: an i32 label below 0 becomes 2^31 or more, which
 * is out of range like any label >= cols (cols <= INT32_MAX, checked on the
 * host).
 *
 * Each row is read in full before any of it is written, and every element
 * is written by the work-item that last read it, so the ops that allow it
 * may run in place. */
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
#define ROW_START(rows)                                                        \
  size_t r = get_global_id(0);                                                 \
  if (r >= (rows))                                                             \
    return;                                                                    \
  const size_t lane = 0;
#define LANES 1
#define ROW_SUM(v) (v)
#define ROW_MAX(v) (v)
#define ROW_LEADER 1
#else
#define ROW_START(rows)                                                        \
  __local float buf_[WG];                                                      \
  __local uint ibuf_[WG];                                                      \
  (void)ibuf_;                                                                 \
  size_t r = get_group_id(0);                                                  \
  const size_t lane = get_local_id(0);
#define LANES WG
#define ROW_SUM(v) group_sum(buf_, (v))
#define ROW_MAX(v) group_max(buf_, (v))
#define ROW_LEADER (lane == 0)

/* Combine one value per item across the group (tree, fixed order) and
 * return the result to every item. */
#define GROUP_REDUCE(name, f)                                                  \
  float name(__local float *buf, float v) {                                    \
    size_t l = get_local_id(0);                                                \
    buf[l] = v;                                                                \
    for (uint h = WG / 2; h > 0; h /= 2) {                                     \
      barrier(CLK_LOCAL_MEM_FENCE);                                            \
      if (l < h)                                                               \
        buf[l] = f(buf[l], buf[l + h]);                                        \
    }                                                                          \
    barrier(CLK_LOCAL_MEM_FENCE);                                              \
    float res = buf[0];                                                        \
    barrier(CLK_LOCAL_MEM_FENCE);                                              \
    return res;                                                                \
  }
GROUP_REDUCE(group_max, fmax)
GROUP_REDUCE(group_sum, KILN_ADD)
#endif

/* The row's maximum (NaN ignored) and sum of exp(x - max). */
#define ROW_MAX_SUMEXP(p, cols, m, s)                                          \
  float m = -INFINITY;                                                         \
  for (ulong k = lane; k < (cols); k += LANES)                                 \
    m = fmax(m, LOAD(p, k));                                                   \
  m = ROW_MAX(m);                                                              \
  float s = 0.0f;                                                              \
  for (ulong k = lane; k < (cols); k += LANES)                                 \
    s += exp(LOAD(p, k) - m);                                                  \
  s = ROW_SUM(s);

/* loss[r] = (max - x[label]) + log(sum exp(x - max)): the subtraction first,
 * so logits of 1e4 keep the loss's low digits. */
__kernel void ce_forward(__global const T *x, ulong xo,
                         __global const uint *labels, ulong lo,
                         __global float *loss, ulong so, ulong rows,
                         ulong cols) {
  ROW_START(rows)
  __global const T *p = x + xo + r * cols;
  ROW_MAX_SUMEXP(p, cols, m, s)
  uint l = labels[lo + r];
  if (ROW_LEADER)
    loss[so + r] = l < cols ? (m - LOAD(p, l)) + log(s) : NAN;
}

/* dx = (softmax(x) - onehot(label)) * scale; a bad label gives NaN. */
__kernel void ce_backward(__global const T *x, ulong xo,
                          __global const uint *labels, ulong lo, float scale,
                          __global T *dx, ulong dxo, ulong rows, ulong cols) {
  ROW_START(rows)
  __global const T *p = x + xo + r * cols;
  __global T *q = dx + dxo + r * cols;
  ROW_MAX_SUMEXP(p, cols, m, s)
  float inv = 1.0f / s;
  uint l = labels[lo + r];
  float bad = l < cols ? 0.0f : NAN;
  for (ulong k = lane; k < cols; k += LANES) {
    float sm = exp(LOAD(p, k) - m) * inv;
    STORE(q, k, ((sm - (k == l ? 1.0f : 0.0f)) + bad) * scale);
  }
}

/* out[oo] = the mean of v[vo .. vo + n), summed by one work-item in index
 * order with Kahan's compensation (no reassociation: no fast-math). */
__kernel void mean_f32(__global const float *v, ulong vo, ulong n,
                       __global float *out, ulong oo) {
  float s = 0.0f, c = 0.0f;
  for (ulong i = 0; i < n; i++) {
    float y = v[vo + i] - c;
    float t = s + y;
    c = (t - s) - y;
    s = t;
  }
  out[oo] = s / (float)n;
}

__kernel void zero_u32(__global uint *p, ulong o) { p[o] = 0; }

/* One count per row whose first maximum (NaN ignored; all NaN: column 0)
 * is its label. Integer atomics: the total does not depend on the order. */
__kernel void accuracy(__global const T *x, ulong xo,
                       __global const uint *labels, ulong lo,
                       __global uint *count, ulong co, ulong rows,
                       ulong cols) {
  ROW_START(rows)
  __global const T *p = x + xo + r * cols;
  float best = -INFINITY;
  uint idx = UINT_MAX;
  for (ulong k = lane; k < cols; k += LANES) {
    float v = LOAD(p, k);
    if (v > best || (idx == UINT_MAX && v == v)) {
      best = v;
      idx = (uint)k;
    }
  }
#if FAMILY == 0
  buf_[lane] = best;
  ibuf_[lane] = idx;
  for (uint h = WG / 2; h > 0; h /= 2) {
    barrier(CLK_LOCAL_MEM_FENCE);
    if (lane < h) {
      float ov = buf_[lane + h];
      uint oi = ibuf_[lane + h];
      /* Larger wins; on a tie (or a side with nothing) the smaller index. */
      if (oi != UINT_MAX &&
          (ibuf_[lane] == UINT_MAX || ov > buf_[lane] ||
           (ov == buf_[lane] && oi < ibuf_[lane]))) {
        buf_[lane] = ov;
        ibuf_[lane] = oi;
      }
    }
  }
  barrier(CLK_LOCAL_MEM_FENCE);
  idx = ibuf_[0];
#endif
  if (idx == UINT_MAX)
    idx = 0;
  if (ROW_LEADER && labels[lo + r] == idx)
    atomic_inc(count + co);
}

/* Softmax backward from y: dx = y * (dy - sum(dy * y)). */
__kernel void softmax_backward(__global const T *y, ulong yo,
                               __global const T *dy, ulong go, __global T *dx,
                               ulong dxo, ulong rows, ulong cols) {
  ROW_START(rows)
  __global const T *p = y + yo + r * cols, *g = dy + go + r * cols;
  __global T *q = dx + dxo + r * cols;
  float d = 0.0f;
  for (ulong k = lane; k < cols; k += LANES)
    d = fma(LOAD(g, k), LOAD(p, k), d);
  d = ROW_SUM(d);
  for (ulong k = lane; k < cols; k += LANES) {
    float yv = LOAD(p, k);
    STORE(q, k, yv * (LOAD(g, k) - d));
  }
}

/* Layernorm backward, the row part: the row's mean and rstd as in the
 * forward op (stored to stats[2r], stats[2r+1] when has_stats), then, when
 * has_dx, dx = rstd (g - mean(g) - xhat mean(g xhat)) with g = dy scale. */
__kernel void layernorm_backward_rows(
    __global const T *x, ulong xo, __global const T *scale, ulong so,
    int has_scale, float eps, __global const T *dy, ulong go, __global T *dx,
    ulong dxo, int has_dx, __global float *stats, int has_stats, ulong rows,
    ulong cols) {
  ROW_START(rows)
  __global const T *p = x + xo + r * cols, *g = dy + go + r * cols;
  __global const T *sc = scale + so;
  __global T *q = dx + dxo + r * cols;
  float n = (float)cols;
  float s = 0.0f;
  for (ulong k = lane; k < cols; k += LANES)
    s += LOAD(p, k);
  float mean = ROW_SUM(s) / n;
  float v = 0.0f;
  for (ulong k = lane; k < cols; k += LANES) {
    float d = LOAD(p, k) - mean;
    v = fma(d, d, v);
  }
  float rstd = 1.0f / sqrt(ROW_SUM(v) / n + eps);
  if (has_stats && ROW_LEADER) {
    stats[2 * r] = mean;
    stats[2 * r + 1] = rstd;
  }
  if (!has_dx)
    return;
  float sg = 0.0f, sgx = 0.0f;
  for (ulong k = lane; k < cols; k += LANES) {
    float gk = LOAD(g, k) * (has_scale ? LOAD(sc, k) : 1.0f);
    sg += gk;
    sgx = fma(gk, (LOAD(p, k) - mean) * rstd, sgx);
  }
  sg = ROW_SUM(sg) / n;
  sgx = ROW_SUM(sgx) / n;
  for (ulong k = lane; k < cols; k += LANES) {
    float xh = (LOAD(p, k) - mean) * rstd;
    float gk = LOAD(g, k) * (has_scale ? LOAD(sc, k) : 1.0f);
    STORE(q, k, rstd * (gk - sg - xh * sgx));
  }
}

/* Layernorm backward, the column part: one work-item per column c sums
 * over the rows in order dscale[c] = sum dy xhat and dbias[c] = sum dy,
 * with the rows' statistics from the row part. */
__kernel void layernorm_backward_cols(__global const T *x, ulong xo,
                                      __global const T *dy, ulong go,
                                      __global const float *stats,
                                      __global float *dscale, ulong dso,
                                      int has_dscale, __global float *dbias,
                                      ulong dbo, int has_dbias, ulong rows,
                                      ulong cols) {
  size_t c = get_global_id(0);
  if (c >= cols)
    return;
  float ds = 0.0f, db = 0.0f;
  for (ulong r = 0; r < rows; r++) {
    float gv = LOAD(dy + go, r * cols + c);
    float xh = (LOAD(x + xo, r * cols + c) - stats[2 * r]) * stats[2 * r + 1];
    ds = fma(gv, xh, ds);
    db += gv;
  }
  if (has_dscale)
    dscale[dso + c] = ds;
  if (has_dbias)
    dbias[dbo + c] = db;
}
