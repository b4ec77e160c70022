/* Image ops of kiln_ops_image.h on NCHW batches: 2-D max and mean pooling
 * (forward: one work-item per output element; backward: one per input
 * element, gathering from the windows that cover it, or one per window
 * where windows do not overlap, so no atomics) and batch normalisation
 * (per-channel partial sums by work-groups, a fixed-order combine per
 * channel, then an elementwise pass). The CPU family has its own variants
 * (the sections "on the CPU family" below: a row, plane or piece of a
 * plane per work-item, explicit vectors), which give the same values
 * (pooling) or sum the same terms in another fixed order (statistics).
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

/* v replaces the running maximum m in a scan: it is larger, or it is the
 * first NaN. NaN tests as x != x: PoCL 3.1's isnan() made a 2x2 max-pool
 * kernel about 40 times slower (a call per test, no vectorisation). */
#define POOL_BEATS(v, m) ((v) > (m) || ((v) != (v) && (m) == (m)))

/* The position (row * W + col) of the window's maximum in plane p: the
 * first maximum in scan order; a NaN is the maximum (the first NaN). */
long window_argmax(__global const T *p, ulong W, long h0, long h1, long w0,
                   long w1) {
  long best = h0 * (long)W + w0;
  float m = LOAD(p, best);
  for (long ih = h0; ih < h1; ih++)
    for (long iw = w0; iw < w1; iw++) {
      float v = LOAD(p, ih * (long)W + iw);
      if (POOL_BEATS(v, m)) {
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
      int take = ok && (!seen || POOL_BEATS(v, m));
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

/* The arguments of every backward pooling kernel: x, dy and dx with their
 * offsets, the mode, the work-item count and the geometry. */
#define POOL_BACKWARD_ARGS                                                     \
  __global const T *x, ulong xo, __global const T *dy, ulong go,               \
      __global T *dx, ulong dxo, int is_max, int exclude, ulong total,         \
      POOL_ARGS

/* The arguments of both forward pooling kernels. */
#define POOL_FORWARD_ARGS                                                      \
  __global const T *x, ulong xo, __global T *y, ulong yo, int is_max,          \
      int exclude, ulong total, POOL_ARGS

__kernel void pool_forward(POOL_FORWARD_ARGS) {
  FOR_ELEMENT(o, total,
              pool_one(x + xo, y + yo, o, is_max, exclude, POOL_PASS))
}

/* dx for one input element: the windows covering (ih, iw) are outputs oh in
 * [oh0, oh1] and ow in [ow0, ow1]; visited in increasing (oh, ow). */
__kernel void pool_backward(POOL_BACKWARD_ARGS) {
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
__kernel void pool_backward_tiled(POOL_BACKWARD_ARGS) {
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

/* ---- pooling on the CPU family: a row or a plane per work-item ----------
 * PoCL runs a work-group's items one after the other; the element-per-item
 * kernels above pay 64-bit divisions and a window scan per element (on
 * PoCL with 2 threads the CNN's 2x2 max pooling of 128 x 64 x 24 x 24 took
 * longer than its 32 -> 64 convolution). These take an output row or a
 * plane each and walk it with running indices. */

/* The 2x2 stride 2 unpadded window, the pooling of most CNNs. */
#define POOL_IS_2X2                                                            \
  (KH == 2 && KW == 2 && SH == 2 && SW == 2 && PH == 0 && PW == 0)

/* m = v where v is a new maximum in scan order (window_argmax's test);
 * scalars or vectors. */
#define POOL_TAKE(m, v) ((m) = POOL_BEATS((v), (m)) ? (v) : (m))

/* y's output row r (plane r / OH, row r % OH): pool_one's values, from the
 * clipped windows scanned in the same order (window_argmax's comparisons;
 * the mean's sum over the window's elements in scan order). 2x2 windows of
 * stride 2 take four outputs at a time in float4 lanes (f32; PoCL turns
 * the per-element form into gathers across work-items). */
__kernel void pool_forward_rows(POOL_FORWARD_ARGS) {
  size_t r = get_global_id(0);
  if (r >= total)
    return;
  ulong oh = r % OH, plane = r / OH;
  __global const T *p = x + xo + plane * H * W;
  __global T *yr = y + yo + r * OW;
  if (POOL_IS_2X2) {
    __global const T *r0 = p + 2 * oh * W, *r1 = r0 + W;
    uint ow = 0;
#if DT == 0
    for (; ow + 4 <= (uint)OW; ow += 4) {
      float8 u = vload8(0, r0 + 2 * ow), l = vload8(0, r1 + 2 * ow);
      float4 m = u.even;
      POOL_TAKE(m, u.odd);
      POOL_TAKE(m, l.even);
      POOL_TAKE(m, l.odd);
      vstore4(is_max ? m : ((u.even + u.odd + l.even) + l.odd) / 4.0f, 0,
              yr + ow);
    }
#endif
    for (; ow < (uint)OW; ow++) {
      float a = LOAD(r0, 2 * ow), b = LOAD(r0, 2 * ow + 1);
      float c = LOAD(r1, 2 * ow), d = LOAD(r1, 2 * ow + 1), m = a;
      POOL_TAKE(m, b);
      POOL_TAKE(m, c);
      POOL_TAKE(m, d);
      STORE(yr, ow, is_max ? m : (((a + b) + c) + d) / 4.0f);
    }
    return;
  }
  for (ulong ow = 0; ow < OW; ow++) {
    POOL_WINDOW(oh, ow)
    float m = LOAD(p, h0 * (long)W + w0), s = 0.0f;
    for (long ih = h0; ih < h1; ih++) {
      __global const T *row = p + ih * (long)W;
      for (long iw = w0; iw < w1; iw++) {
        float v = LOAD(row, iw);
        m = POOL_BEATS(v, m) ? v : m;
        s += v;
      }
    }
    STORE(yr, ow, is_max ? m : s / POOL_DIVISOR(exclude));
  }
}

/* dx of plane pl (one work-item each): the plane zeroed, then each output's
 * share added in increasing (oh, ow) (max: dy at the window's argmax; mean:
 * dy / divisor at every element of the window). Each element so receives
 * 0 + the covering windows' shares in increasing output position, the sum
 * pool_backward gathers in the same order: the same bits. */
__kernel void pool_backward_planes(POOL_BACKWARD_ARGS) {
  size_t pl = get_global_id(0);
  if (pl >= total)
    return;
  __global const T *p = x + xo + pl * H * W;
  __global const T *g = dy + go + pl * OH * OW;
  __global T *d = dx + dxo + pl * H * W;
  for (ulong e = 0; e < H * W; e++)
    STORE(d, e, 0.0f);
  for (ulong oh = 0; oh < OH; oh++)
    for (ulong ow = 0; ow < OW; ow++) {
      POOL_WINDOW(oh, ow)
      float gv = LOAD(g, oh * OW + ow);
      if (is_max) {
        long e = window_argmax(p, W, h0, h1, w0, w1);
        STORE(d, e, LOAD(d, e) + gv);
      } else {
        float share = gv / POOL_DIVISOR(exclude);
        for (long ih = h0; ih < h1; ih++)
          for (long iw = w0; iw < w1; iw++) {
            long e = ih * (long)W + iw;
            STORE(d, e, LOAD(d, e) + share);
          }
      }
    }
}

/* pool_backward_planes for 2x2 stride 2 unpadded windows (POOL_IS_2X2),
 * an output row r (plane r / OH, row r % OH) per work-item: dx's rows 2 oh
 * and 2 oh + 1 (and, for the last output row of an odd H, row H - 1),
 * each element written once: the share of the one window that covers it
 * (max: dy at the argmax, 0 at the other three; mean: dy / 4), or 0 (a
 * last odd row or column): the values pool_backward gathers. */
__kernel void pool_backward_2x2(POOL_BACKWARD_ARGS) {
  size_t r = get_global_id(0);
  if (r >= total)
    return;
  ulong oh = r % OH, plane = r / OH;
  __global const T *p0 = x + xo + plane * H * W + 2 * oh * W, *p1 = p0 + W;
  __global T *d0 = dx + dxo + plane * H * W + 2 * oh * W, *d1 = d0 + W;
  __global const T *g = dy + go + r * OW;
  uint ow = 0;
#if DT == 0
  for (; ow + 4 <= (uint)OW; ow += 4) {
    float4 gv = vload4(0, g + ow);
    float8 u = vload8(0, p0 + 2 * ow), l = vload8(0, p1 + 2 * ow);
    float4 m = u.even;
    int4 tb = POOL_BEATS(u.odd, m);
    m = tb ? u.odd : m;
    int4 tc = POOL_BEATS(l.even, m);
    m = tc ? l.even : m;
    int4 td = POOL_BEATS(l.odd, m);
    float4 z = 0.0f, share = gv / 4.0f;
    float8 o0, o1;
    o0.even = is_max ? (tb | tc | td ? z : gv) : share;
    o0.odd = is_max ? (tb & ~tc & ~td ? gv : z) : share;
    o1.even = is_max ? (tc & ~td ? gv : z) : share;
    o1.odd = is_max ? (td ? gv : z) : share;
    vstore8(o0, 0, d0 + 2 * ow);
    vstore8(o1, 0, d1 + 2 * ow);
  }
#endif
  for (; ow < (uint)OW; ow++) {
    float gv = LOAD(g, ow), m = LOAD(p0, 2 * ow), v = LOAD(p0, 2 * ow + 1);
    int best = 0;
    if (POOL_BEATS(v, m))
      m = v, best = 1;
    v = LOAD(p1, 2 * ow);
    if (POOL_BEATS(v, m))
      m = v, best = 2;
    v = LOAD(p1, 2 * ow + 1);
    if (POOL_BEATS(v, m))
      best = 3;
    float share = gv / 4.0f;
    STORE(d0, 2 * ow, is_max ? (best == 0 ? gv : 0.0f) : share);
    STORE(d0, 2 * ow + 1, is_max ? (best == 1 ? gv : 0.0f) : share);
    STORE(d1, 2 * ow, is_max ? (best == 2 ? gv : 0.0f) : share);
    STORE(d1, 2 * ow + 1, is_max ? (best == 3 ? gv : 0.0f) : share);
  }
  if (W % 2 != 0) {
    STORE(d0, W - 1, 0.0f);
    STORE(d1, W - 1, 0.0f);
  }
  if (H % 2 != 0 && oh + 1 == OH)
    for (ulong e = 0; e < W; e++)
      STORE(d1 + W, e, 0.0f);
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

/* ---- batch normalisation on the CPU family: a piece of a plane each -------
 * PoCL runs a work-group's items one after the other, so the kernels above
 * leave it scalar loops (bn_partial) or per-item index arithmetic (bn_apply,
 * bn_dx). These take pieces of span elements of a plane (pieces per plane
 * = ceil(HW / span), span a multiple of 16) and walk them 16 lanes at a
 * time (LOAD16/STORE16, common.clh), then element by element for the
 * rest. Item i: plane i / pieces, piece i % pieces. */

/* The prologue of a *_planes kernel with arguments total, pieces, span, C
 * and HW: item i (returning past total), its plane's start base, its
 * piece's elements [lo, hi) and its channel ch; kiln_tmp16_ for STORE16. */
#define BN_PIECE                                                               \
  float kiln_tmp16_[16] __attribute__((unused));                               \
  size_t i = get_global_id(0);                                                 \
  if (i >= total)                                                              \
    return;                                                                    \
  ulong base = i / pieces * HW, lo = i % pieces * span;                        \
  ulong hi = min(lo + span, HW), ch = (i / pieces) % C;

/* The 16 lanes of v added in a fixed tree (lane k and k + 8, then k and
 * k + 4, ...). Written with scalar lanes, not .lo/.hi halves: Oclgrind's
 * uninitialised-value plugin takes the results of vector shuffles for
 * uninitialised (run.sh lists the same for transpose_cpu). */
float bn_hsum(float16 v) {
  float a0 = v.s0 + v.s8, a1 = v.s1 + v.s9, a2 = v.s2 + v.sa,
        a3 = v.s3 + v.sb, a4 = v.s4 + v.sc, a5 = v.s5 + v.sd,
        a6 = v.s6 + v.se, a7 = v.s7 + v.sf;
  float b0 = a0 + a4, b1 = a1 + a5, b2 = a2 + a6, b3 = a3 + a7;
  return (b0 + b2) + (b1 + b3);
}

/* bn_partial's two sums over item i's piece (plane i / pieces of channel
 * (i / pieces) % C), into parts[2 p], parts[2 p + 1] with p = (ch N + n)
 * pieces + piece: channel ch's N pieces parts in (image, piece) order, as
 * bn_finish_forward and bn_finish_backward read them (P = N pieces). */
__kernel void bn_partial_planes(__global const T *x, ulong xo,
                                __global const T *dy, ulong go,
                                __global const float *stats, ulong so,
                                int backward, __global float *parts, ulong C,
                                ulong N, ulong HW, ulong pieces, ulong span) {
  const ulong total = N * C * pieces;
  BN_PIECE
  ulong n = i / pieces / C;
  float shift = 0.0f, mean = 0.0f, rstd = 0.0f;
  if (!backward)
    shift = LOAD(x + xo, ch * HW);
  else {
    mean = stats[so + ch];
    rstd = stats[so + C + ch];
  }
  __global const T *xp = x + xo + base;
  __global const T *gp = dy + go + base;
  float16 a1 = 0.0f, a2 = 0.0f;
  ulong e = lo;
  for (; e + 16 <= hi; e += 16) {
    float16 v = LOAD16(xp + e);
    if (!backward) {
      v -= shift;
      a1 += v;
      a2 = fma(v, v, a2);
    } else {
      float16 g = LOAD16(gp + e);
      a1 += g;
      a2 = fma(g, (v - mean) * rstd, a2);
    }
  }
  float s1 = bn_hsum(a1), s2 = bn_hsum(a2);
  for (; e < hi; e++) {
    float v = LOAD(xp, e);
    if (!backward) {
      float a = v - shift;
      s1 += a;
      s2 = fma(a, a, s2);
    } else {
      float g = LOAD(gp, e);
      s1 += g;
      s2 = fma(g, (v - mean) * rstd, s2);
    }
  }
  ulong p = (ch * N + n) * pieces + i % pieces;
  parts[2 * p] = s1;
  parts[2 * p + 1] = s2;
}

/* bn_apply over item i's piece. */
__kernel void bn_apply_planes(__global const T *x, ulong xo, __global T *y,
                              ulong yo, __global const float *mean, ulong mo,
                              __global const float *sd, ulong sdo,
                              int from_var, float eps,
                              __global const float *gamma, ulong gmo,
                              int has_gamma, __global const float *beta,
                              ulong bo, int has_beta, ulong C, ulong HW,
                              ulong total, ulong pieces, ulong span) {
  BN_PIECE
  float rstd = from_var ? 1.0f / sqrt(sd[sdo + ch] + eps) : sd[sdo + ch];
  float scale = has_gamma ? gamma[gmo + ch] * rstd : rstd;
  float shift = has_beta ? beta[bo + ch] : 0.0f, mu = mean[mo + ch];
  __global const T *xp = x + xo + base;
  __global T *yp = y + yo + base;
  ulong e = lo;
  for (; e + 16 <= hi; e += 16)
    STORE16(yp + e, fma(LOAD16(xp + e) - mu, scale, shift));
  for (; e < hi; e++)
    STORE(yp, e, fma(LOAD(xp, e) - mu, scale, shift));
}

/* bn_dx over item i's piece. */
__kernel void bn_dx_planes(__global const T *x, ulong xo, __global const T *dy,
                           ulong go, __global T *dx, ulong dxo,
                           __global const float *stats, ulong so,
                           __global const float *sums, ulong wo,
                           __global const float *gamma, ulong gmo,
                           int has_gamma, float inv_m, ulong C, ulong HW,
                           ulong total, ulong pieces, ulong span) {
  BN_PIECE
  float mean = stats[so + ch], rstd = stats[so + C + ch];
  float k = has_gamma ? gamma[gmo + ch] * rstd : rstd;
  float db = sums[wo + ch] * inv_m, dg = sums[wo + C + ch] * inv_m;
  __global const T *xp = x + xo + base;
  __global const T *gp = dy + go + base;
  __global T *dp = dx + dxo + base;
  ulong e = lo;
  for (; e + 16 <= hi; e += 16)
    STORE16(dp + e, k * (LOAD16(gp + e) - db -
                         (LOAD16(xp + e) - mean) * rstd * dg));
  for (; e < hi; e++)
    STORE(dp, e, k * (LOAD(gp, e) - db - (LOAD(xp, e) - mean) * rstd * dg));
}
