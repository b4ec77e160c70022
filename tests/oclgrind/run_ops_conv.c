/* The convolution (kiln/kiln_ops_conv.h) for run_ops.c's group "conv": the
 * forward pass with its epilogue and both gradients, once each on small
 * awkward shapes (padding, stride, dilation, groups, several chunks of the
 * batch) at odd offsets in sentinel-framed buffers, against a float64 host
 * reference, so that Oclgrind sees every kernel of cl_kernels/conv.cl and
 * the GEMM paths they feed. The thorough checks are tests/test_op_conv.c. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "run_ops_conv.h"
#include "ops/ops_conv_gpu.h"

struct geo {
  size_t n, c, h, w, oc, kh, kw;
  kiln_conv2d_params p;
  size_t oh, ow, cg, xn, wn, yn;
};

static struct geo geo(size_t n, size_t c, size_t h, size_t w, size_t oc,
                      size_t kh, size_t kw, kiln_conv2d_params p) {
  struct geo g = {n, c, h, w, oc, kh, kw, p, 0, 0, 0, 0, 0, 0};
  g.oh = (h + 2 * p.pad_h - p.dilation_h * (kh - 1) - 1) / p.stride_h + 1;
  g.ow = (w + 2 * p.pad_w - p.dilation_w * (kw - 1) - 1) / p.stride_w + 1;
  g.cg = c / p.groups;
  g.xn = n * c * h * w;
  g.wn = oc * g.cg * kh * kw;
  g.yn = n * oc * g.oh * g.ow;
  return g;
}

/* The three references at once from the index map: y = conv(x, w), dx
 * from dy and w, dw from dy and x (arrays of the counts above, zeroed). */
static void reference(const struct geo *g, const void *x, const void *w,
                      const void *dy, kiln_dtype dt, double *y, double *dx,
                      double *dw) {
  const size_t ocg = g->oc / g->p.groups;
  for (size_t i = 0; i < g->n; i++)
    for (size_t o = 0; o < g->oc; o++)
      for (size_t oy = 0; oy < g->oh; oy++)
        for (size_t ox = 0; ox < g->ow; ox++)
          for (size_t cl = 0; cl < g->cg; cl++)
            for (size_t ki = 0; ki < g->kh; ki++)
              for (size_t kj = 0; kj < g->kw; kj++) {
                long iy = (long)(oy * g->p.stride_h + ki * g->p.dilation_h) -
                          (long)g->p.pad_h;
                long ix = (long)(ox * g->p.stride_w + kj * g->p.dilation_w) -
                          (long)g->p.pad_w;
                if (iy < 0 || ix < 0 || iy >= (long)g->h || ix >= (long)g->w)
                  continue;
                size_t ci = o / ocg * g->cg + cl;
                size_t xi = ((i * g->c + ci) * g->h + (size_t)iy) * g->w +
                            (size_t)ix;
                size_t wi = ((o * g->cg + cl) * g->kh + ki) * g->kw + kj;
                size_t yi = ((i * g->oc + o) * g->oh + oy) * g->ow + ox;
                y[yi] += load(dt, x, xi) * load(dt, w, wi);
                dx[xi] += load(dt, dy, yi) * load(dt, w, wi);
                dw[wi] += load(dt, dy, yi) * load(dt, x, xi);
              }
}

#define IMAGE(b, off, n_, c_, h_, w_, dt)                                      \
  (&(kiln_image){.buffer = (b), .offset = (off), .n = (n_), .c = (c_),         \
                 .h = (h_), .w = (w_), .dtype = (dt)})

static void run_one(const char *what, kiln_dtype dt, struct geo g, bool bias) {
  void *xh, *wh, *dyh, *bh;
  kiln_buffer *x = input(dt, 3, g.xn, 401, &xh), *w = input(dt, 1, g.wn, 402, &wh);
  kiln_buffer *dy = input(dt, 2, g.yn, 403, &dyh);
  kiln_buffer *b = input(KILN_F32, 1, g.oc, 404, &bh);
  kiln_buffer *y = output(KILN_F32, g.yn), *dx = output(KILN_F32, g.xn);
  kiln_buffer *dw = output(KILN_F32, g.wn), *db = output(KILN_F32, g.oc);
  double *yr = calloc(g.yn, 8), *dxr = calloc(g.xn, 8), *dwr = calloc(g.wn, 8);
  double *dbr = calloc(g.oc, 8);
  reference(&g, xh, wh, dyh, dt, yr, dxr, dwr);
  for (size_t j = 0; j < g.yn; j++) {
    size_t o = j / (g.oh * g.ow) % g.oc;
    if (bias)
      yr[j] += load(KILN_F32, bh, o);
    yr[j] = yr[j] < 0 ? 0 : yr[j];
    dbr[o] += load(dt, dyh, j);
  }
  kiln_epilogue e = KILN_EPILOGUE_INIT;
  e.bias = bias ? &(kiln_range){b, 1, g.oc, KILN_F32} : NULL;
  e.activation = KILN_ACT_RELU;
  char name[96];
  CHECK_OK(kiln_conv2d(q, IMAGE(x, 3, g.n, g.c, g.h, g.w, dt),
                       IMAGE(w, 1, g.oc, g.cg, g.kh, g.kw, dt),
                       IMAGE(y, 0, g.n, g.oc, g.oh, g.ow, KILN_F32), &g.p, &e,
                       0, NULL, NULL));
  CHECK_OK(kiln_conv2d_backward_data(
      q, IMAGE(dy, 2, g.n, g.oc, g.oh, g.ow, dt),
      IMAGE(w, 1, g.oc, g.cg, g.kh, g.kw, dt),
      IMAGE(dx, 0, g.n, g.c, g.h, g.w, KILN_F32), &g.p, 0, NULL, NULL));
  CHECK_OK(kiln_conv2d_backward_weights(
      q, IMAGE(x, 3, g.n, g.c, g.h, g.w, dt),
      IMAGE(dy, 2, g.n, g.oc, g.oh, g.ow, dt),
      IMAGE(dw, 0, g.oc, g.cg, g.kh, g.kw, KILN_F32),
      &(kiln_range){db, 0, g.oc, KILN_F32}, &g.p, 0, NULL, NULL));
  void *got = download(y, KILN_F32, 0, g.yn);
  snprintf(name, sizeof name, "conv2d %s %s", what, kiln_dtype_name(dt));
  expect(name, KILN_F32, got, yr, g.yn, 1e-4);
  free(got);
  got = download(dx, KILN_F32, 0, g.xn);
  snprintf(name, sizeof name, "conv2d_backward_data %s %s", what,
           kiln_dtype_name(dt));
  expect(name, KILN_F32, got, dxr, g.xn, 1e-4);
  free(got);
  got = download(dw, KILN_F32, 0, g.wn);
  snprintf(name, sizeof name, "conv2d_backward_weights %s %s", what,
           kiln_dtype_name(dt));
  expect(name, KILN_F32, got, dwr, g.wn, 1e-3);
  free(got);
  got = download(db, KILN_F32, 0, g.oc);
  snprintf(name, sizeof name, "conv2d bias gradient %s %s", what,
           kiln_dtype_name(dt));
  expect(name, KILN_F32, got, dbr, g.oc, 1e-3);
  free(got);
  free(xh), free(wh), free(dyh), free(bh), free(yr), free(dxr), free(dwr);
  free(dbr);
  kiln_buffer *all[] = {x, w, dy, b, y, dx, dw, db};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
    kiln_buffer_destroy(all[i]);
}

void run_conv(void) {
  kiln_conv2d_params p = KILN_CONV2D_PARAMS_INIT;
  p.pad_h = p.pad_w = 1;
  run_one("3x3 pad 1", KILN_F32, geo(2, 3, 7, 5, 4, 3, 3, p), true);
  kiln_conv2d_params s = {2, 3, 1, 0, 2, 1, 2}; /* stride, dilation, groups */
  run_one("strided dilated groups", KILN_BF16, geo(1, 4, 9, 10, 6, 2, 3, s),
          false);
  kiln_conv2d_params d = {1, 1, 1, 1, 1, 1, 3}; /* depthwise */
  run_one("depthwise", KILN_F16, geo(2, 3, 5, 6, 3, 3, 3, d), true);
  /* The GPU family's implicit GEMM (conv_gemm.cl) on a point other than
   * the profile's: two positions gathered per load, a tile of 32 channels,
   * 16 positions. */
  static const char point[] = "MWG=32 NWG=16 KWG=8 MDIMC=8 NDIMC=8 VWN=2";
  kiln_tuning_info info;
  CHECK_OK(kiln_tuning_get_info(ctx, "conv2d", &info));
  if (info.params[0] == '\0') {
    printf("skip conv2d point: the CPU family runs im2col\n");
    return;
  }
  CHECK_OK(kiln_tuning_set(ctx, "conv2d", point));
  printf("# conv2d point: %s\n", point);
  run_one("3x3 pad 1, conv2d point", KILN_F32, geo(2, 3, 7, 5, 4, 3, 3, p),
          true);
  run_one("strided dilated groups, conv2d point", KILN_BF16,
          geo(1, 4, 9, 10, 6, 2, 3, s), false);
  CHECK_OK(kiln_tuning_set(ctx, "conv2d", NULL));
  /* The GPU family's im2col path, the fallback (conv_im2col and
   * conv_col2im with gemm_gpu). */
  kiln__conv_set_implicit(false);
  printf("# conv: the GPU family's im2col path\n");
  run_one("3x3 pad 1, im2col", KILN_F32, geo(2, 3, 7, 5, 4, 3, 3, p), true);
  kiln__conv_set_implicit(true);
}
