/* 2-D convolution around the GEMM kernels (runtime/ops/ops_conv.c): the
 * gathers that turn images into GEMM operands and back.
 *
 * One program for every dtype (no build options): the im2col kernels move
 * bits, so they come in two widths, suffix 32 (f32) and 16 (f16 and bf16);
 * conv_bias_grad32 reads f32 and conv_bias_grad16 f16 or bf16 as its
 * argument bf16 says. The rest is f32. WG is conv_bias_grad's work-group
 * size (a power of two).
 *
 * Geometry (uint, checked on the host to fit): an image has c channels of
 * h x w pixels; the kernel kh x kw, stride sh x sw, padding ph x pw,
 * dilation dh x dw; the output oh x ow; cg = c / groups channels per group
 * and kk = cg kh kw rows of columns per group.
 *
 * Launches (dimension 0 rounded up to the local size, so each kernel checks
 * it):
 *   im2col     (ow, oh, kk * nb * groups): one element of the columns each
 *              (the GPU family; the CPU family's _planes variants below
 *              take a plane per work-item);
 *   col2im     (w, h, nb * c): one pixel of dx each, a gather in a fixed
 *              order (ki, then kj);
 *   sum_batch  (oc kk): one element of dw each;
 *   bias_grad  (WG * oc): a work-group per output channel. */
#define WG 64
#include "common.clh"
#include "group_reduce.clh"

/* cols[g g_st + i n_st + r r_st + oy ow + ox] = x[image i, channel g cg +
 * r / (kh kw), pixel (oy sh - ph + ki dh, ox sw - pw + kj dw)], 0 (bits)
 * outside the image, for the nb images from x's offset xo. */
#define IM2COL(SUF, E)                                                         \
__kernel void conv_im2col##SUF(__global const E *x, ulong xo, uint c, uint h,  \
                          uint w, uint cg, uint kh, uint kw, uint sh, uint sw, \
                          uint ph, uint pw, uint dh, uint dw, uint oh, uint ow, \
                          uint groups, __global E *cols, ulong co, ulong g_st, \
                          ulong n_st, ulong r_st) {                            \
  const uint ox = get_global_id(0);                                            \
  if (ox >= ow)                                                                \
    return;                                                                    \
  const uint oy = get_global_id(1);                                            \
  const uint kk = cg * kh * kw;                                                \
  const uint z = get_global_id(2);                                             \
  const uint r = z % kk, ig = z / kk;                                          \
  const uint g = ig % groups, i = ig / groups;                                 \
  const uint ci = r / (kh * kw), kr = r % (kh * kw);                           \
  const uint ki = kr / kw, kj = kr % kw;                                       \
  const long iy = (long)oy * sh - ph + (long)ki * dh;                          \
  const long ix = (long)ox * sw - pw + (long)kj * dw;                          \
  E v = 0;                                                                     \
  if (iy >= 0 && iy < h && ix >= 0 && ix < w)                                  \
    v = x[xo + (((ulong)i * c + (ulong)g * cg + ci) * h + (ulong)iy) * w +     \
          (ulong)ix];                                                          \
  cols[co + g * g_st + i * n_st + r * r_st + (ulong)oy * ow + ox] = v;         \
}
IM2COL(32, uint)
IM2COL(16, ushort)

/* dx[image i, channel ch, pixel (iy, ix)] = the sum over the kernel taps
 * (ki, kj) that reach it from an output position (oy, ox) of
 * cols[(i groups + g) kk oh ow + ((ch - g cg) kh kw + ki kw + kj) oh ow +
 * oy ow + ox] (f32, as the GEMM wrote them), for the nb images of the
 * chunk; dx is f32. */
__kernel void conv_col2im(__global const float *cols, ulong co, uint c, uint h,
                          uint w, uint cg, uint kh, uint kw, uint sh, uint sw,
                          uint ph, uint pw, uint dh, uint dw, uint oh, uint ow,
                          uint groups, __global float *dx, ulong xo) {
  const uint ix = get_global_id(0);
  if (ix >= w)
    return;
  const uint iy = get_global_id(1);
  const uint z = get_global_id(2);
  const uint ch = z % c, i = z / c;
  const uint g = ch / cg, ci = ch % cg;
  const ulong kk = (ulong)cg * kh * kw, ohw = (ulong)oh * ow;
  const ulong base =
      co + ((ulong)i * groups + g) * kk * ohw + (ulong)ci * kh * kw * ohw;
  float acc = 0.0f;
  for (uint ki = 0; ki < kh; ki++) {
    const long ty = (long)iy + ph - (long)ki * dh;
    if (ty < 0 || ty % sh != 0 || ty / sh >= oh)
      continue;
    const ulong oy = (ulong)(ty / sh);
    for (uint kj = 0; kj < kw; kj++) {
      const long tx = (long)ix + pw - (long)kj * dw;
      if (tx < 0 || tx % sw != 0 || tx / sw >= ow)
        continue;
      acc += cols[base + ((ulong)ki * kw + kj) * ohw + oy * ow +
                  (ulong)(tx / sw)];
    }
  }
  dx[xo + (((ulong)i * c + ch) * h + iy) * w + ix] = acc;
}

/* dw[j] = (accumulate ? dw[j] : 0) + the sum over the nb images of
 * part[i count + j], in image order: the weight gradient's per-image GEMM
 * results folded over the batch. */
__kernel void conv_sum_batch(__global const float *part, ulong po,
                             ulong count, uint nb, uint accumulate,
                             __global float *dw, ulong wo) {
  const ulong j = get_global_id(0);
  if (j >= count)
    return;
  float acc = accumulate ? dw[wo + j] : 0.0f;
  for (uint i = 0; i < nb; i++)
    acc += part[po + i * count + j];
  dw[wo + j] = acc;
}

/* ---- the CPU family: one work-item per image plane ------------------------
 * PoCL pays for every work-group it schedules, so its kernels each take a
 * whole plane (a channel of an image) and loop over it, with the valid
 * column span of each tap computed once instead of a test per element. */

/* The output columns ox whose input column ox s - p + k d lies in [0, w):
 * [*lo, *hi). */
void conv_span(uint w, uint s, uint p, uint k, uint d, uint ow, uint *lo,
               uint *hi) {
  const long off = (long)k * d - p; /* ix = ox s + off */
  const long first = off >= 0 ? 0 : (-off + s - 1) / s;
  const long end = (long)w - off <= 0 ? 0 : ((long)w - off + s - 1) / s;
  *lo = (uint)min(first, (long)ow);
  *hi = (uint)max((long)*lo, min(end, (long)ow));
}

/* conv_im2col's columns, one work-item per (channel cl of group g, image
 * i): the kh kw rows that plane feeds. Launch (cg, nb * groups). */
#define IM2COL_PLANES(SUF, E)                                                  \
__kernel void conv_im2col_planes##SUF(__global const E *x, ulong xo, uint c,   \
                                 uint h, uint w, uint cg, uint kh, uint kw,    \
                                 uint sh, uint sw, uint ph, uint pw, uint dh,  \
                                 uint dw, uint oh, uint ow, uint groups,       \
                                 __global E *cols, ulong co, ulong g_st,       \
                                 ulong n_st, ulong r_st) {                     \
  const uint cl = get_global_id(0);                                            \
  if (cl >= cg)                                                                \
    return;                                                                    \
  const uint ig = get_global_id(1);                                            \
  const uint g = ig % groups, i = ig / groups;                                 \
  __global const E *plane =                                                    \
      x + xo + ((ulong)i * c + (ulong)g * cg + cl) * h * w;                    \
  for (uint ki = 0; ki < kh; ki++)                                             \
    for (uint kj = 0; kj < kw; kj++) {                                         \
      const ulong r = ((ulong)cl * kh + ki) * kw + kj;                         \
      __global E *dst = cols + co + g * g_st + i * n_st + r * r_st;            \
      uint lo, hi;                                                             \
      conv_span(w, sw, pw, kj, dw, ow, &lo, &hi);                              \
      const long xoff = (long)kj * dw - pw;                                    \
      for (uint oy = 0; oy < oh; oy++, dst += ow) {                            \
        const long iy = (long)oy * sh - ph + (long)ki * dh;                    \
        if (iy < 0 || iy >= h) {                                               \
          for (uint ox = 0; ox < ow; ox++)                                     \
            dst[ox] = 0;                                                       \
          continue;                                                            \
        }                                                                      \
        __global const E *row = plane + (ulong)iy * w;                         \
        for (uint ox = 0; ox < lo; ox++)                                       \
          dst[ox] = 0;                                                         \
        if (sw == 1)                                                           \
          for (uint ox = lo; ox < hi; ox++)                                    \
            dst[ox] = row[(long)ox + xoff];                                    \
        else                                                                   \
          for (uint ox = lo; ox < hi; ox++)                                    \
            dst[ox] = row[(long)ox * sw + xoff];                               \
        for (uint ox = hi; ox < ow; ox++)                                      \
          dst[ox] = 0;                                                         \
      }                                                                        \
    }                                                                          \
}
IM2COL_PLANES(32, uint)
IM2COL_PLANES(16, ushort)

/* conv_col2im, one work-item per (channel ch, image i) plane of dx: the
 * plane is zeroed, then each tap's column row (ki, then kj, the order of
 * conv_col2im's sum, so both give the same bits) is added in. Launch (c,
 * nb). */
__kernel void conv_col2im_planes(__global const float *cols, ulong co, uint c,
                                 uint h, uint w, uint cg, uint kh, uint kw,
                                 uint sh, uint sw, uint ph, uint pw, uint dh,
                                 uint dw, uint oh, uint ow, uint groups,
                                 __global float *dx, ulong xo) {
  const uint ch = get_global_id(0);
  if (ch >= c)
    return;
  const uint i = get_global_id(1);
  const uint g = ch / cg, cl = ch % cg;
  const ulong kk = (ulong)cg * kh * kw, ohw = (ulong)oh * ow;
  __global float *plane = dx + xo + ((ulong)i * c + ch) * h * w;
  for (ulong e = 0; e < (ulong)h * w; e++)
    plane[e] = 0.0f;
  __global const float *base =
      cols + co + ((ulong)i * groups + g) * kk * ohw;
  for (uint ki = 0; ki < kh; ki++)
    for (uint kj = 0; kj < kw; kj++) {
      const ulong r = ((ulong)cl * kh + ki) * kw + kj;
      __global const float *src = base + r * ohw;
      uint lo, hi;
      conv_span(w, sw, pw, kj, dw, ow, &lo, &hi);
      const long xoff = (long)kj * dw - pw;
      for (uint oy = 0; oy < oh; oy++, src += ow) {
        const long iy = (long)oy * sh - ph + (long)ki * dh;
        if (iy < 0 || iy >= h)
          continue;
        __global float *row = plane + (ulong)iy * w;
        for (uint ox = lo; ox < hi; ox++)
          row[(long)ox * sw + xoff] += src[ox];
      }
    }
}

/* db[o] = the sum of dy over n images and ohw positions of channel o: each
 * work-item sums positions l, l + WG, ... of every image in order, then
 * the group's tree (group_reduce.clh) adds the WG partial sums. */
#define BIAS_GRAD(SUF, E, LOAD)                                                \
  __kernel __attribute__((reqd_work_group_size(WG, 1, 1))) void                \
  conv_bias_grad##SUF(__global const E *dy, ulong yo, uint oc, uint ohw,       \
                      uint n, uint bf16, __global float *db, ulong bo) {       \
    __local float buf[WG];                                                     \
    const uint l = get_local_id(0);                                            \
    const ulong o = get_group_id(0);                                           \
    float acc = 0.0f;                                                          \
    for (ulong i = 0; i < n; i++) {                                            \
      const ulong row = yo + (i * oc + o) * ohw;                               \
      for (uint p = l; p < ohw; p += WG)                                       \
        acc += LOAD(dy[row + p]);                                              \
    }                                                                          \
    acc = group_sum(buf, acc);                                                 \
    if (l == 0)                                                                \
      db[bo + o] = acc;                                                        \
  }
#define LOAD_F32(v) (v)
#define LOAD_16(v) (bf16 ? kiln_bf16_to_f32(v) : kiln_f16_to_f32(v))
BIAS_GRAD(32, float, LOAD_F32)
BIAS_GRAD(16, ushort, LOAD_16)
