/* 2-D convolution around the GEMM kernels (runtime/ops/ops_conv.c): the
 * gathers that turn images into GEMM operands and back.
 *
 * Build options:
 *   -DDT=n   storage type of the images read (common.clh). im2col and
 *            gather_rows move bits (uint for f32, ushort for f16/bf16);
 *            bias_grad converts to f32.
 *   -DWG=n   work-group size of bias_grad (a power of two).
 *
 * Geometry (uint, checked on the host to fit): an image has c channels of
 * h x w pixels; the kernel kh x kw, stride sh x sw, padding ph x pw,
 * dilation dh x dw; the output oh x ow; cg = c / groups channels per group
 * and kk = cg kh kw rows of columns per group.
 *
 * Launches (dimension 0 rounded up to the local size, so each kernel checks
 * it):
 *   im2col     (ow, oh, kk * nb * groups): one element of the columns each;
 *   col2im     (w, h, nb * c): one pixel of dx each, a gather in a fixed
 *              order (ki, then kj);
 *   gather_dy  (ohw, nb, oc): one element each;
 *   bias_grad  (WG * oc): a work-group per output channel. */
#ifndef DT
#define DT 0
#endif
#ifndef WG
#define WG 64
#endif
#include "common.clh"
#include "group_reduce.clh"

#if DT == 0
#define E uint
#else
#define E ushort
#endif

/* cols[g g_st + i n_st + r r_st + oy ow + ox] = x[image i, channel g cg +
 * r / (kh kw), pixel (oy sh - ph + ki dh, ox sw - pw + kj dw)], 0 (bits)
 * outside the image, for the nb images from x's offset xo. */
__kernel void conv_im2col(__global const E *x, ulong xo, uint c, uint h,
                          uint w, uint cg, uint kh, uint kw, uint sh, uint sw,
                          uint ph, uint pw, uint dh, uint dw, uint oh, uint ow,
                          uint groups, __global E *cols, ulong co, ulong g_st,
                          ulong n_st, ulong r_st) {
  const uint ox = get_global_id(0);
  if (ox >= ow)
    return;
  const uint oy = get_global_id(1);
  const uint kk = cg * kh * kw;
  const uint z = get_global_id(2);
  const uint r = z % kk, ig = z / kk;
  const uint g = ig % groups, i = ig / groups;
  const uint ci = r / (kh * kw), kr = r % (kh * kw);
  const uint ki = kr / kw, kj = kr % kw;
  const long iy = (long)oy * sh - ph + (long)ki * dh;
  const long ix = (long)ox * sw - pw + (long)kj * dw;
  E v = 0;
  if (iy >= 0 && iy < h && ix >= 0 && ix < w)
    v = x[xo + (((ulong)i * c + (ulong)g * cg + ci) * h + (ulong)iy) * w +
          (ulong)ix];
  cols[co + g * g_st + i * n_st + r * r_st + (ulong)oy * ow + ox] = v;
}

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

/* dyt[o, i, p] = dy[image i, channel o, position p] for the nb images from
 * dy's offset: the batch moved next to the positions, so that the weight
 * gradient's GEMM runs k over both. */
__kernel void conv_gather_dy(__global const E *dy, ulong yo, uint oc,
                             uint ohw, uint nb, __global E *dyt, ulong to) {
  const uint p = get_global_id(0);
  if (p >= ohw)
    return;
  const ulong i = get_global_id(1), o = get_global_id(2);
  dyt[to + (o * nb + i) * ohw + p] = dy[yo + (i * oc + o) * ohw + p];
}

/* db[o] = the sum of dy over n images and ohw positions of channel o: each
 * work-item sums positions l, l + WG, ... of every image in order, then
 * the group's tree (group_reduce.clh) adds the WG partial sums. */
__kernel __attribute__((reqd_work_group_size(WG, 1, 1))) void
conv_bias_grad(__global const T *dy, ulong yo, uint oc, uint ohw, uint n,
               __global float *db, ulong bo) {
  __local float buf[WG];
  const uint l = get_local_id(0);
  const ulong o = get_group_id(0);
  float acc = 0.0f;
  for (ulong i = 0; i < n; i++) {
    const ulong row = yo + (i * oc + o) * ohw;
    for (uint p = l; p < ohw; p += WG)
      acc += LOAD(dy, row + p);
  }
  acc = group_sum(buf, acc);
  if (l == 0)
    db[bo + o] = acc;
}
