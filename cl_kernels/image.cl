/* Image ops of kiln_ops_image.h on NCHW batches: 2-D max and mean pooling
 * (forward: one work-item per output element; backward: one per input
 * element, gathering from the windows that cover it, so no atomics) and
 * batch normalisation (per-channel partial sums by work-groups, a fixed-order
 * combine per channel, then an elementwise pass). The same kernels serve
 * both kernel families.
 *
 * Build options:
 *   -DDT=n   storage type of the images (common.clh): 0 f32, 1 f16, 2 bf16;
 *            per-channel vectors and partial sums are f32
 *   -DWG=n   work-group size of bn_partial, a power of two
 *   -DFAMILY=n  how bn_partial's items split a part: 0 GPU (strided), 1 CPU
 *            (contiguous spans); the other kernels are the same on both
 * A plane is one image's channel: h * w elements, plane index n * c + ch. */
#ifndef DT
#define DT 0
#endif
#ifndef WG
#define WG 64
#endif
#ifndef FAMILY
#define FAMILY 1
#endif
#include "common.clh"
#include "group_reduce.clh"

/* ---- pooling ------------------------------------------------------------- */

/* The geometry every pooling kernel takes, as ulong arguments in this
 * order: H, W (input), OH, OW (output), KH, KW, SH, SW, PH, PW. */
#define POOL_ARGS                                                              \
  ulong H, ulong W, ulong OH, ulong OW, ulong KH, ulong KW, ulong SH,          \
      ulong SW, ulong PH, ulong PW

/* The window of output (oh, ow) clipped to the image: rows [h0, h1),
 * columns [w0, w1). Never empty: padding is at most half the kernel. */
#define POOL_WINDOW(oh, ow)                                                    \
  long hs_ = (long)((oh) * SH) - (long)PH, ws_ = (long)((ow) * SW) - (long)PW; \
  long h0 = max(hs_, 0L), w0 = max(ws_, 0L);                                   \
  long h1 = min(hs_ + (long)KH, (long)H), w1 = min(ws_ + (long)KW, (long)W);

/* The position (row * W + col) of the window's maximum in plane p: the
 * first maximum in scan order; a NaN is the maximum (the first NaN). */
long window_argmax(__global const T *p, ulong W, long h0, long h1, long w0,
                   long w1) {
  long best = h0 * (long)W + w0;
  float m = LOAD(p, best);
  for (long ih = h0; ih < h1; ih++)
    for (long iw = w0; iw < w1; iw++) {
      float v = LOAD(p, ih * (long)W + iw);
      if (v > m || (isnan(v) && !isnan(m))) {
        m = v;
        best = ih * (long)W + iw;
      }
    }
  return best;
}

/* Mean pooling's divisor for the clipped window [h0, h1) x [w0, w1). */
#define POOL_DIVISOR(exclude)                                                  \
  ((exclude) ? (float)((h1 - h0) * (w1 - w0)) : (float)(KH * KW))

/* y[o] for output o: loops of the kernel's full size (the same for every
 * work-item, so PoCL can run a group's items as vector lanes), positions
 * outside the image masked rather than skipped; the same comparisons in the
 * same order as window_argmax. */
void pool_one(__global const T *x, __global T *y, size_t o, int is_max,
              int exclude, POOL_ARGS) {
  ulong ow = o % OW, t = o / OW, oh = t % OH, plane = t / OH;
  __global const T *p = x + plane * H * W;
  long hs = (long)(oh * SH) - (long)PH, ws = (long)(ow * SW) - (long)PW;
  float m = -INFINITY, s = 0.0f;
  int seen = 0, cnt = 0;
  for (long kh = 0; kh < (long)KH; kh++) {
    long ih = hs + kh;
    int okh = ih >= 0 && ih < (long)H;
    long ihc = clamp(ih, 0L, (long)H - 1);
    for (long kw = 0; kw < (long)KW; kw++) {
      long iw = ws + kw;
      int ok = okh && iw >= 0 && iw < (long)W;
      float v = LOAD(p, ihc * (long)W + clamp(iw, 0L, (long)W - 1));
      int take = ok && (!seen || v > m || (isnan(v) && !isnan(m)));
      m = take ? v : m;
      seen |= ok;
      s += ok ? v : 0.0f;
      cnt += ok;
    }
  }
  float div = exclude ? (float)cnt : (float)(KH * KW);
  STORE(y, o, is_max ? m : s / div);
}

#define POOL_PASS H, W, OH, OW, KH, KW, SH, SW, PH, PW

__kernel void pool_forward(__global const T *x, ulong xo, __global T *y,
                           ulong yo, int is_max, int exclude, ulong total,
                           POOL_ARGS) {
  FOR_ELEMENT(o, total,
              pool_one(x + xo, y + yo, o, is_max, exclude, POOL_PASS))
}

/* dx for one input element: the windows covering (ih, iw) are outputs oh in
 * [oh0, oh1] and ow in [ow0, ow1]; visited in increasing (oh, ow). */
__kernel void pool_backward(__global const T *x, ulong xo, __global const T *dy,
                            ulong go, __global T *dx, ulong dxo, int is_max,
                            int exclude, ulong total, POOL_ARGS) {
  size_t i = get_global_id(0);
  if (i >= total)
    return;
  ulong iw = i % W, t = i / W, ih = t % H, plane = t / H;
  __global const T *p = x + xo + plane * H * W;
  __global const T *g = dy + go + plane * OH * OW;
  long lo_h = (long)(ih + PH) - (long)KH, lo_w = (long)(iw + PW) - (long)KW;
  ulong oh0 = lo_h < 0 ? 0 : (ulong)lo_h / SH + 1;
  ulong ow0 = lo_w < 0 ? 0 : (ulong)lo_w / SW + 1;
  ulong oh1 = min((ih + PH) / SH, OH - 1), ow1 = min((iw + PW) / SW, OW - 1);
  long self = (long)(ih * W + iw);
  float s = 0.0f;
  for (ulong oh = oh0; oh <= oh1; oh++)
    for (ulong ow = ow0; ow <= ow1; ow++) {
      POOL_WINDOW(oh, ow)
      float gv = LOAD(g, oh * OW + ow);
      if (is_max) {
        if (window_argmax(p, W, h0, h1, w0, w1) == self)
          s += gv;
      } else {
        s += gv / POOL_DIVISOR(exclude);
      }
    }
  STORE(dx + dxo, i, s);
}

/* The backward pass when windows do not overlap (stride >= kernel in both
 * dimensions): one work-item per output writes its window's part of dx (max:
 * dy at the argmax, 0 elsewhere; mean: dy / divisor), the same values the
 * gather above gives, with a read of the window instead of one per covering
 * window and element. Elements outside every window are zeroed first
 * (image_zero) unless the windows tile the image. */
__kernel void pool_backward_tiled(__global const T *x, ulong xo,
                                  __global const T *dy, ulong go,
                                  __global T *dx, ulong dxo, int is_max,
                                  int exclude, ulong total, POOL_ARGS) {
  size_t o = get_global_id(0);
  if (o >= total)
    return;
  ulong ow = o % OW, t = o / OW, oh = t % OH, plane = t / OH;
  __global const T *p = x + xo + plane * H * W;
  __global T *d = dx + dxo + plane * H * W;
  POOL_WINDOW(oh, ow)
  float gv = LOAD(dy + go, o);
  long best = is_max ? window_argmax(p, W, h0, h1, w0, w1) : -1;
  float share = is_max ? 0.0f : gv / POOL_DIVISOR(exclude);
  for (long ih = h0; ih < h1; ih++)
    for (long iw = w0; iw < w1; iw++) {
      long e = ih * (long)W + iw;
      STORE(d, e, e == best ? gv : share);
    }
}

__kernel void image_zero(__global T *y, ulong yo, ulong total) {
  size_t i = get_global_id(0);
  if (i < total)
    STORE(y + yo, i, 0.0f);
}

/* ---- batch normalisation ------------------------------------------------- */
/* A channel's m = n * hw elements are visited as j = 0 .. m-1, element j at
 * plane (j / hw) * c + ch, position j % hw. Work-group g of bn_partial sums
 * part g % parts of channel g / parts, each of its WG items some of the
 * part's elements, then a fixed tree over the group; parts[2g], parts[2g + 1]
 * receive its two sums. Which elements an item takes depends on the family:
 * GPU (FAMILY 0): j = part * WG + lane + k * parts * WG, so that neighbouring
 * items read neighbouring elements; CPU (FAMILY 1): one contiguous span of
 * ceil(m / (parts * WG)) elements per item, which PoCL runs as a sequential
 * loop (the strided form would make each item of a group stream every cache
 * line of the part). */

/* Forward (backward 0): sums of x - s and (x - s)^2, s = the channel's
 * first element. Backward (1): sums of dy and dy * xhat, with the saved
 * mean at stats[so + ch] and rstd at stats[so + c + ch]. */
__kernel void bn_partial(__global const T *x, ulong xo, __global const T *dy,
                         ulong go, __global const float *stats, ulong so,
                         int backward, __global float *parts, ulong C, ulong N,
                         ulong HW, ulong P) {
  __local float buf[WG];
  size_t grp = get_group_id(0), lane = get_local_id(0);
  ulong ch = grp / P, part = grp % P, m = N * HW;
#if FAMILY == 1
  ulong span = (m + P * WG - 1) / (P * WG);
  ulong j = (part * WG + lane) * span, end = min(j + span, m), step = 1;
#else
  ulong j = part * WG + lane, end = m, step = P * WG;
#endif
  ulong n = j / HW, q = j % HW, dn = step / HW, dq = step % HW;
  float shift = 0.0f, mean = 0.0f, rstd = 0.0f;
  if (!backward)
    shift = LOAD(x + xo, ch * HW);
  else {
    mean = stats[so + ch];
    rstd = stats[so + C + ch];
  }
  float s1 = 0.0f, s2 = 0.0f;
  for (; j < end; j += step) {
    ulong e = (n * C + ch) * HW + q;
    float v = LOAD(x + xo, e);
    if (!backward) {
      float a = v - shift;
      s1 += a;
      s2 = fma(a, a, s2);
    } else {
      float gv = LOAD(dy + go, e);
      s1 += gv;
      s2 = fma(gv, (v - mean) * rstd, s2);
    }
    n += dn;
    q += dq;
    if (q >= HW) {
      q -= HW;
      n++;
    }
  }
  s1 = group_sum(buf, s1);
  s2 = group_sum(buf, s2);
  if (lane == 0) {
    parts[2 * grp] = s1;
    parts[2 * grp + 1] = s2;
  }
}

/* The P parts of channel ch, both sums, added in order. */
float2 sum_parts(__global const float *parts, ulong ch, ulong P) {
  float2 s = (float2)(0.0f, 0.0f);
  for (ulong k = 0; k < P; k++)
    s += vload2(ch * P + k, parts);
  return s;
}

/* One work-item per channel: the parts summed in order, then the mean and
 * rstd into stats (mean at [so + ch], rstd at [so + C + ch]) and, with
 * has_running, the running statistics updated. */
__kernel void bn_finish_forward(__global const T *x, ulong xo,
                                __global const float *parts, ulong C,
                                ulong HW, ulong P, float m, float eps,
                                float momentum, int has_running,
                                __global float *rmean, ulong rmo,
                                __global float *rvar, ulong rvo,
                                __global float *stats, ulong so) {
  size_t ch = get_global_id(0);
  if (ch >= C)
    return;
  float2 s = sum_parts(parts, ch, P);
  float s1 = s.x, s2 = s.y;
  float d = s1 / m;
  float var = fmax(s2 / m - d * d, 0.0f);
  float mean = LOAD(x + xo, ch * HW) + d;
  stats[so + ch] = mean;
  stats[so + C + ch] = 1.0f / sqrt(var + eps);
  if (has_running) {
    rmean[rmo + ch] = fma(momentum, mean, (1.0f - momentum) * rmean[rmo + ch]);
    float unbiased = var * (m / (m - 1.0f));
    rvar[rvo + ch] = fma(momentum, unbiased, (1.0f - momentum) * rvar[rvo + ch]);
  }
}

/* One work-item per channel: dbeta = sum dy and dgamma = sum dy * xhat from
 * the parts, into sums ([wo + ch] and [wo + C + ch]) and, when wanted, the caller's
 * outputs. */
__kernel void bn_finish_backward(__global const float *parts, ulong C, ulong P,
                                 __global float *sums, ulong wo,
                                 __global float *dgamma,
                                 ulong dgo, int has_dgamma,
                                 __global float *dbeta, ulong dbo,
                                 int has_dbeta) {
  size_t ch = get_global_id(0);
  if (ch >= C)
    return;
  float2 s = sum_parts(parts, ch, P);
  float s1 = s.x, s2 = s.y;
  sums[wo + ch] = s1;
  sums[wo + C + ch] = s2;
  if (has_dbeta)
    dbeta[dbo + ch] = s1;
  if (has_dgamma)
    dgamma[dgo + ch] = s2;
}

/* Run STMT for position q of the row (plane) when q < HW, over a 2-D range
 * whose dimension 0 is rounded up to whole groups: as FOR_ELEMENT
 * (common.clh), a group-uniform branch so that PoCL can vectorise the
 * groups that need no check. */
#define FOR_POSITION(q, HW, STMT)                                              \
  size_t q = get_global_id(0);                                                 \
  if (get_group_id(0) + 1 < get_num_groups(0)) {                               \
    STMT;                                                                      \
  } else if (q < (HW)) {                                                       \
    STMT;                                                                      \
  }

/* y = (x - mean) * rstd * gamma + beta over a 2-D range: dimension 0 the
 * plane's HW positions, dimension 1 the planes. rstd is read from
 * sd[sdo + ch], or (from_var) computed as 1 / sqrt(sd[sdo + ch] + eps). The
 * channel's values are the same for the whole row, computed before it. */
__kernel void bn_apply(__global const T *x, ulong xo, __global T *y, ulong yo,
                       __global const float *mean, ulong mo,
                       __global const float *sd, ulong sdo, int from_var,
                       float eps, __global const float *gamma, ulong gmo,
                       int has_gamma, __global const float *beta, ulong bo,
                       int has_beta, ulong C, ulong HW) {
  size_t plane = get_global_id(1);
  ulong ch = plane % C;
  float rstd = from_var ? 1.0f / sqrt(sd[sdo + ch] + eps) : sd[sdo + ch];
  float scale = has_gamma ? gamma[gmo + ch] * rstd : rstd;
  float shift = has_beta ? beta[bo + ch] : 0.0f, mu = mean[mo + ch];
  __global const T *xp = x + xo + plane * HW;
  __global T *yp = y + yo + plane * HW;
  FOR_POSITION(q, HW, STORE(yp, q, fma(LOAD(xp, q) - mu, scale, shift)))
}

/* dx = gamma * rstd * (dy - dbeta / m - xhat * dgamma / m), with dbeta and
 * dgamma in sums ([wo + ch], [wo + C + ch]) and the saved mean and rstd in
 * stats; the same 2-D range as bn_apply. */
__kernel void bn_dx(__global const T *x, ulong xo, __global const T *dy,
                    ulong go, __global T *dx, ulong dxo,
                    __global const float *stats, ulong so,
                    __global const float *sums, ulong wo,
                    __global const float *gamma, ulong gmo, int has_gamma,
                    float inv_m, ulong C, ulong HW) {
  size_t plane = get_global_id(1);
  ulong ch = plane % C;
  float mean = stats[so + ch], rstd = stats[so + C + ch];
  float k = has_gamma ? gamma[gmo + ch] * rstd : rstd;
  float db = sums[wo + ch] * inv_m, dg = sums[wo + C + ch] * inv_m;
  __global const T *xp = x + xo + plane * HW;
  __global const T *gp = dy + go + plane * HW;
  __global T *dp = dx + dxo + plane * HW;
  FOR_POSITION(q, HW,
               STORE(dp, q,
                     k * (LOAD(gp, q) - db -
                          (LOAD(xp, q) - mean) * rstd * dg)))
}
