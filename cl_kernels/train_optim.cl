/* Training ops, optimizer side: fused SGD-with-momentum and AdamW steps over
 * f32 weights and state, the global gradient norm (per-range partial sums
 * of squares, then one fixed-order total), clipping by that norm, and the
 * non-finite check.
 *
 * Build options:
 *   -DGT=n  storage type of the gradients (the ranges of the norm, clip and
 *           check kernels): 0 f32, 1 f16, 2 bf16
 * Launches: one work-item per element (FOR_ELEMENT), except sumsq_partial
 * (one per chunk) and the single-item kernels. Offsets and counts are in
 * elements of the buffer's type; typed access goes through byte pointers
 * (uchar), so one kernel serves a pointer of any storage type. */
#ifndef GT
#define GT 0
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
#define GSIZE (GT == 0 ? 4 : 2) /* bytes per gradient element */

/* The step kernels come in variants by name rather than by flags tested
 * per element: a branch in the body (momentum or not, a copy or not, the
 * copy's type) kept PoCL from vectorising across work-items, making SGD
 * with momentum ten times slower than AdamW. Names: sgd_<m>_<c> and
 * adamw_<c>, m = plain (no velocity) or mom (Nesterov by a select on the
 * nesterov argument), c = nc (no copy) or the copy's type f32, f16, bf16.
 *
 * The skip flag selects the old values rather than returning early: a
 * branch on memory around the body makes Mesa's rusticl warn that it
 * treats the kernel arguments read inside as uniform. Every element is
 * read and written either way. skip is always a valid buffer. */
#define COPY_nc(p, i, v) ((void)0)
#define COPY_f32(p, i, v) STORE_0(p, i, v)
#define COPY_f16(p, i, v) STORE_1(p, i, v)
#define COPY_bf16(p, i, v) STORE_2(p, i, v)
#define COPY_SIZE_nc 4
#define COPY_SIZE_f32 4
#define COPY_SIZE_f16 2
#define COPY_SIZE_bf16 2

/* torch.optim.SGD (dampening 0): g += wd w; v = momentum v + g;
 * g = nesterov ? g + momentum v : v; w -= lr g. */
#define SGD_plain(vp, i, gv, run, mu, nest) ((void)0)
#define SGD_mom(vp, i, gv, run, mu, nest)                                      \
  do {                                                                         \
    float v0_ = vp[i];                                                         \
    float v_ = mu * v0_ + gv;                                                  \
    vp[i] = run ? v_ : v0_;                                                    \
    gv = nest ? gv + mu * v_ : v_;                                             \
  } while (0)

#define SGD(M, C)                                                              \
  __kernel void sgd_##M##_##C(                                                 \
      __global float *w, ulong wo, __global const uchar *g, ulong go,          \
      __global float *vel, ulong vo, __global uchar *wc, ulong co,             \
      __global const uint *skip, ulong so, int has_skip, int nesterov,         \
      float lr, float momentum, float wd, float gscale, ulong n) {             \
    __global float *wp = w + wo, *vp = vel + vo;                               \
    __global const uchar *gp = g + go * GSIZE;                                 \
    __global uchar *cp = wc + co * COPY_SIZE_##C;                              \
    const bool nest = nesterov != 0;                                           \
    const float a = lr, mu = momentum, d = wd, s = gscale;                     \
    const bool run = !(has_skip && skip[so] != 0);                             \
    FOR_ELEMENT(i, n, {                                                        \
      float w0 = wp[i];                                                        \
      float gv = GLOAD(gp, i) * s + d * w0;                                    \
      SGD_##M(vp, i, gv, run, mu, nest);                                       \
      float wv = run ? w0 - a * gv : w0;                                       \
      wp[i] = wv;                                                              \
      COPY_##C(cp, i, wv);                                                     \
    })                                                                         \
  }

/* torch.optim.AdamW: w *= 1 - lr wd; m += (1 - beta1) (g - m);
 * v = beta2 v + (1 - beta2) g^2; w -= step_size m / (sqrt(v) / bc2 + eps),
 * with step_size = lr / (1 - beta1^t) and bc2 = sqrt(1 - beta2^t) from the
 * host. */
#define ADAMW(C)                                                               \
  __kernel void adamw_##C(                                                     \
      __global float *w, ulong wo, __global const uchar *g, ulong go,          \
      __global float *m, ulong mo, __global float *v, ulong vo,                \
      __global uchar *wc, ulong co, __global const uint *skip, ulong so,       \
      int has_skip, float decay, float one_minus_beta1, float beta2,           \
      float one_minus_beta2, float eps, float step_size, float bc2,            \
      float gscale, ulong n) {                                                 \
    __global float *wp = w + wo, *mp = m + mo, *vp = v + vo;                   \
    __global const uchar *gp = g + go * GSIZE;                                 \
    __global uchar *cp = wc + co * COPY_SIZE_##C;                              \
    const float dc = decay, ob1 = one_minus_beta1, b2 = beta2;                 \
    const float ob2 = one_minus_beta2, e = eps, st = step_size, b = bc2;       \
    const float s = gscale;                                                    \
    const bool run = !(has_skip && skip[so] != 0);                             \
    FOR_ELEMENT(i, n, {                                                        \
      float gv = GLOAD(gp, i) * s;                                             \
      float w0 = wp[i];                                                        \
      float m0 = mp[i];                                                        \
      float v0 = vp[i];                                                        \
      float mv = m0 + ob1 * (gv - m0);                                         \
      float vv = b2 * v0 + ob2 * (gv * gv);                                    \
      mp[i] = run ? mv : m0;                                                   \
      vp[i] = run ? vv : v0;                                                   \
      float wv = run ? w0 * dc - st * (mv / (sqrt(vv) / b + e)) : w0;          \
      wp[i] = wv;                                                              \
      COPY_##C(cp, i, wv);                                                     \
    })                                                                         \
  }

SGD(plain, nc)
SGD(plain, f32)
SGD(plain, f16)
SGD(plain, bf16)
SGD(mom, nc)
SGD(mom, f32)
SGD(mom, f16)
SGD(mom, bf16)
ADAMW(nc)
ADAMW(f32)
ADAMW(f16)
ADAMW(bf16)

/* Partial sums of squares of a range, 64 per chunk: work-item t (t / 64
 * the chunk, t % 64 the lane) sums x^2 over the chunk's elements lane,
 * lane + 64, ... in order into part[po + t]. Neighbouring work-items read
 * neighbouring elements (PoCL vectorises, GPUs coalesce), and the split
 * depends only on n, never on the device. */
__kernel void sumsq_partial(__global const uchar *x, ulong xo, ulong n,
                            ulong chunk, ulong chunks, __global float *part,
                            ulong po) {
  size_t t = get_global_id(0);
  if (t >= chunks * 64)
    return;
  ulong b = (t / 64) * chunk + t % 64;
  float s = 0.0f;
  /* The same trip count for every work-item (chunk is a multiple of 64),
   * the tail masked: a per-item bound kept PoCL from vectorising. */
  for (ulong j = 0; j < chunk; j += 64) {
    ulong k = b + j;
    float v = GLOAD(x, xo + min(k, n - 1));
    v = k < n ? v : 0.0f;
    s = fma(v, v, s);
  }
  part[po + t] = s;
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
