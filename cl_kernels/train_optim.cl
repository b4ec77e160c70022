/* Training ops, optimizer side: fused SGD-with-momentum and AdamW steps over
 * f32 weights and state, the global gradient norm (per-range partial sums
 * of squares, then one fixed-order total), clipping by that norm, and the
 * non-finite check.
 *
 * Build options:
 *   -DGT=n  storage type of the gradients (the ranges of the norm, clip and
 *           check kernels): 0 f32, 1 f16, 2 bf16
 *   -DCT=n  storage type of the optimizer steps' weight copy (same codes)
 * Launches: one work-item per element (FOR_ELEMENT), except sumsq_partial
 * (one per chunk) and the single-item kernels. Offsets and counts are in
 * elements of the buffer's type; typed access goes through byte pointers
 * (uchar), so one kernel serves a pointer of any storage type. */
#ifndef GT
#define GT 0
#endif
#ifndef CT
#define CT 0
#endif
#include "common.clh"

#define LOAD_0(p, i) (((__global const float *)(p))[i])
#define LOAD_1(p, i) kiln_f16_to_f32(((__global const ushort *)(p))[i])
#define LOAD_2(p, i) kiln_bf16_to_f32(((__global const ushort *)(p))[i])
#define STORE_0(p, i, v) (((__global float *)(p))[i] = (v))
#define STORE_1(p, i, v) (((__global ushort *)(p))[i] = kiln_f32_to_f16(v))
#define STORE_2(p, i, v) (((__global ushort *)(p))[i] = kiln_f32_to_bf16(v))
#define CAT_(a, b) a##b
#define CAT(a, b) CAT_(a, b)
#define GLOAD(p, i) CAT(LOAD_, GT)(p, i)
#define GSTORE(p, i, v) CAT(STORE_, GT)(p, i, v)
#define CSTORE(p, i, v) CAT(STORE_, CT)(p, i, v)

/* flags of the optimizer steps */
#define HAS_VELOCITY 1
#define NESTEROV 2
#define HAS_COPY 4
#define HAS_SKIP 8

/* torch.optim.SGD (dampening 0): g += wd w; v = momentum v + g;
 * g = nesterov ? g + momentum v : v; w -= lr g. */
__kernel void sgd_step(__global float *w, ulong wo, __global const uchar *g,
                       ulong go, __global float *vel, ulong vo,
                       __global uchar *wc, ulong co,
                       __global const uint *skip, ulong so, int flags,
                       float lr, float momentum, float wd, float gscale,
                       ulong n) {
  if ((flags & HAS_SKIP) && skip[so] != 0)
    return;
  FOR_ELEMENT(i, n, {
    float wv = w[wo + i];
    float gv = GLOAD(g, go + i) * gscale + wd * wv;
    if (flags & HAS_VELOCITY) {
      float v = momentum * vel[vo + i] + gv;
      vel[vo + i] = v;
      gv = (flags & NESTEROV) ? gv + momentum * v : v;
    }
    wv = wv - lr * gv;
    w[wo + i] = wv;
    if (flags & HAS_COPY)
      CSTORE(wc, co + i, wv);
  })
}

/* torch.optim.AdamW: w *= 1 - lr wd; m += (1 - beta1) (g - m);
 * v = beta2 v + (1 - beta2) g^2; w -= step_size m / (sqrt(v) / bc2 + eps),
 * with step_size = lr / (1 - beta1^t) and bc2 = sqrt(1 - beta2^t) from the
 * host. */
__kernel void adamw_step(__global float *w, ulong wo, __global const uchar *g,
                         ulong go, __global float *m, ulong mo,
                         __global float *v, ulong vo, __global uchar *wc,
                         ulong co, __global const uint *skip, ulong so,
                         int flags, float decay, float one_minus_beta1,
                         float beta2, float one_minus_beta2, float eps,
                         float step_size, float bc2, float gscale, ulong n) {
  if ((flags & HAS_SKIP) && skip[so] != 0)
    return;
  FOR_ELEMENT(i, n, {
    float gv = GLOAD(g, go + i) * gscale;
    float wv = w[wo + i] * decay;
    float mv = m[mo + i];
    mv = mv + one_minus_beta1 * (gv - mv);
    float vv = beta2 * v[vo + i] + one_minus_beta2 * (gv * gv);
    m[mo + i] = mv;
    v[vo + i] = vv;
    wv = wv - step_size * (mv / (sqrt(vv) / bc2 + eps));
    w[wo + i] = wv;
    if (flags & HAS_COPY)
      CSTORE(wc, co + i, wv);
  })
}

/* part[po + i] = sum of x^2 over elements [i chunk, (i + 1) chunk) of the
 * range, in index order. */
__kernel void sumsq_partial(__global const uchar *x, ulong xo, ulong n,
                            ulong chunk, __global float *part, ulong po) {
  size_t i = get_global_id(0);
  ulong b = i * chunk;
  if (b >= n)
    return;
  ulong e = min(b + chunk, n);
  float s = 0.0f;
  for (ulong k = b; k < e; k++) {
    float v = GLOAD(x, xo + k);
    s = fma(v, v, s);
  }
  part[po + i] = s;
}

/* out[oo] = sqrt of the sum of the np partials, in order. */
__kernel void norm_final(__global const float *part, ulong np,
                         __global float *out, ulong oo) {
  float s = 0.0f;
  for (ulong i = 0; i < np; i++)
    s += part[i];
  out[oo] = sqrt(s);
}

/* x *= max_norm / (norm + 1e-6) when that is below 1 and norm is finite. */
__kernel void clip_scale(__global uchar *x, ulong xo, ulong n,
                         __global const float *norm, ulong no,
                         float max_norm) {
  float nv = norm[no];
  float coef = max_norm / (nv + 1e-6f);
  if (!isfinite(nv) || !(coef < 1.0f))
    return;
  FOR_ELEMENT(i, n, GSTORE(x, xo + i, GLOAD(x, xo + i) * coef))
}

__kernel void flag_zero(__global uint *flag, ulong fo) { flag[fo] = 0; }

/* flag[fo] |= 1 for a non-finite element (an integer atomic, so racing
 * work-items agree). */
__kernel void nonfinite_check(__global const uchar *x, ulong xo, ulong n,
                              __global uint *flag, ulong fo) {
  FOR_ELEMENT(i, n, {
    if (!isfinite(GLOAD(x, xo + i)))
      atomic_or(flag + fo, 1u);
  })
}
