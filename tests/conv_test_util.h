/* What the convolution tests (test_op_conv.c, test_space_conv.c) share:
 * the cases (awkward shapes), the float64 host reference of the forward
 * pass and both gradients, guarded operands, and run_case, which checks
 * one case in one dtype on a queue. Header-only.
 *
 * Tolerance. Every output is a sum of k products of storage values (x and
 * w rounded on the host first, so the reference sees exactly what the
 * device loads) accumulated in f32 with fused multiply-adds, as the GEMM
 * does: each product passes through at most k + 2 roundings plus one per
 * chunk of k or of the batch (the GEMM test's argument), so |got - ref| <=
 * 2 (k + 8 + chunks) u S with S the sum of |terms| (and |beta y| and
 * |bias|), u = 2^-24. k is c/groups kh kw for the forward pass, n oh ow for
 * the weight gradient, and oc/groups plus kh kw (a GEMM over oc/groups,
 * then col2im's sum of at most kh kw columns) for the input gradient, or
 * oc/groups kh kw where the GPU family's implicit GEMM sums every tap in
 * one pass (the bound below takes the larger, their sum). A
 * wrong index or a lost term is off by about one |term|, far above this
 * for the sizes tested. GELU adds 16 u (|x| + 1) (test_op_gemm.c). */
#ifndef KILN_CONV_TEST_UTIL_H
#define KILN_CONV_TEST_UTIL_H

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "harness.h"
#include "op_test_util.h"

struct ccase {
  size_t n, c, h, w, oc, kh, kw;
  size_t sh, sw, ph, pw, dh, dw, groups;
  bool bias;
  kiln_activation act;
  float alpha, beta;
};

/* n, c, h, w, oc, kh, kw, then designated extras; a stride, dilation,
 * groups or alpha left 0 means 1. */
#define CC(n_, c_, h_, w_, oc_, kh_, kw_, ...)                                 \
  {.n = n_, .c = c_, .h = h_, .w = w_, .oc = oc_, .kh = kh_, .kw = kw_,        \
   __VA_ARGS__}
#define ONE(v) ((v) ? (v) : 1)

static const struct ccase cases[] = {
    /* 1x1 image and kernel, batch 1, one channel. */
    CC(1, 1, 1, 1, 1, 1, 1, .ph = 0),
    /* 1x1 image, 3x3 kernel, padding 1: one output from the centre tap. */
    CC(1, 1, 1, 1, 2, 3, 3, .ph = 1, .pw = 1, .bias = true),
    /* Primes, 3 channels, padding 1 (the CNN's first layer shape). */
    CC(2, 3, 7, 11, 5, 3, 3, .ph = 1, .pw = 1, .bias = true,
       .act = KILN_ACT_RELU),
    /* Stride larger than the kernel, rectangular strides. */
    CC(3, 2, 13, 9, 4, 2, 2, .sh = 3, .sw = 4, .bias = true),
    /* Dilation with uneven padding, a rectangular kernel. */
    CC(2, 3, 10, 12, 6, 3, 2, .dh = 2, .dw = 3, .ph = 1, .pw = 2,
       .act = KILN_ACT_GELU, .bias = true),
    /* Groups (3 of 2 input, 3 output channels), a 3x1 kernel, alpha and
     * beta. */
    CC(2, 6, 8, 7, 9, 3, 1, .groups = 3, .ph = 1, .alpha = 0.5f,
       .beta = -1.25f, .bias = true),
    /* Depthwise, stride 2, padding 1. */
    CC(2, 5, 9, 9, 5, 3, 3, .groups = 5, .sh = 2, .sw = 2, .ph = 1, .pw = 1,
       .bias = true, .act = KILN_ACT_RELU),
    /* Depthwise with a channel multiplier of 2. */
    CC(1, 4, 6, 5, 8, 2, 3, .groups = 4, .pw = 1),
    /* 1 -> 32 channels on 28x28, as the CNN's first layer. */
    CC(2, 1, 28, 28, 32, 3, 3, .ph = 1, .pw = 1, .bias = true,
       .act = KILN_ACT_RELU),
    /* Channels that are no multiple of any tile: k = 297, 67 outputs. */
    CC(1, 33, 5, 6, 67, 3, 3, .ph = 1, .pw = 1, .bias = true),
    /* The kernel exactly the padded image: one output position. */
    CC(2, 2, 3, 4, 3, 5, 6, .ph = 1, .pw = 1),
};
#define NCASES (sizeof cases / sizeof cases[0])

static inline size_t out_dim(size_t in, size_t k, size_t s, size_t p,
                             size_t d) {
  return (in + 2 * p - d * (k - 1) - 1) / s + 1;
}

struct shape {
  size_t oh, ow, cg, ocg, kk, xn, wn, yn;
};

static inline struct shape shape_of(const struct ccase *t) {
  struct shape s;
  s.oh = out_dim(t->h, t->kh, ONE(t->sh), t->ph, ONE(t->dh));
  s.ow = out_dim(t->w, t->kw, ONE(t->sw), t->pw, ONE(t->dw));
  s.cg = t->c / ONE(t->groups);
  s.ocg = t->oc / ONE(t->groups);
  s.kk = s.cg * t->kh * t->kw;
  s.xn = t->n * t->c * t->h * t->w;
  s.wn = t->oc * s.cg * t->kh * t->kw;
  s.yn = t->n * t->oc * s.oh * s.ow;
  return s;
}

static inline kiln_conv2d_params params_of(const struct ccase *t) {
  return (kiln_conv2d_params){ONE(t->sh), ONE(t->sw), t->ph,   t->pw,
                              ONE(t->dh), ONE(t->dw), ONE(t->groups)};
}

/* Calls f(image, o, oy, ox, ci (global channel), iy, ix, widx) for every
 * tap that lands inside the image: the convolution's index map, shared by
 * the three references. */
#define FOR_TAPS(t, s, BODY)                                                   \
  for (size_t i = 0; i < (t)->n; i++)                                          \
    for (size_t o = 0; o < (t)->oc; o++)                                       \
      for (size_t oy = 0; oy < (s).oh; oy++)                                   \
        for (size_t ox = 0; ox < (s).ow; ox++)                                 \
          for (size_t cl = 0; cl < (s).cg; cl++)                               \
            for (size_t ki = 0; ki < (t)->kh; ki++)                            \
              for (size_t kj = 0; kj < (t)->kw; kj++) {                        \
                long iy_ = (long)(oy * ONE((t)->sh) + ki * ONE((t)->dh)) - (long)(t)->ph; \
                long ix_ = (long)(ox * ONE((t)->sw) + kj * ONE((t)->dw)) - (long)(t)->pw; \
                if (iy_ < 0 || ix_ < 0 || iy_ >= (long)(t)->h ||               \
                    ix_ >= (long)(t)->w)                                       \
                  continue;                                                    \
                size_t ci = (o / (s).ocg) * (s).cg + cl;                       \
                size_t xi = ((i * (t)->c + ci) * (t)->h + (size_t)iy_) *       \
                                (t)->w +                                       \
                            (size_t)ix_;                                       \
                size_t wi = ((o * (s).cg + cl) * (t)->kh + ki) * (t)->kw + kj; \
                size_t yi = ((i * (t)->oc + o) * (s).oh + oy) * (s).ow + ox;   \
                BODY;                                                          \
              }

static inline double gelu(double v) {
  return 0.5 * v * (1.0 + tanh(0.7978845608028654 * (v + 0.044715 * v * v * v)));
}

static inline double act_ref(kiln_activation a, double v) {
  return a == KILN_ACT_RELU ? (v < 0 ? 0 : v) : a == KILN_ACT_GELU ? gelu(v) : v;
}

/* Buffers of the operands with `pad` guard elements on each side. */
enum { PAD = 5 };

static inline kiln_buffer *guarded(kiln_context *ctx, kiln_queue *q,
                                   kiln_dtype dt, const void *data,
                                   size_t count, void **all, uint32_t seed) {
  *all = util_random(dt, count + 2 * PAD, -3, 3, seed);
  size_t es = kiln_dtype_size(dt);
  if (data != NULL && count > 0)
    memcpy((char *)*all + PAD * es, data, count * es);
  return util_upload(ctx, q, dt, *all, count + 2 * PAD);
}

/* Download a guarded output, check its guards against what was uploaded,
 * and return its count elements as doubles. */
static inline double *fetch(kiln_queue *q, kiln_buffer *b, kiln_dtype dt,
                            const void *before, size_t count,
                            const char *what) {
  void *after = util_download(q, b, dt, count + 2 * PAD);
  util_check_guard(dt, before, after, PAD, count, count + 2 * PAD, what);
  double *d = malloc((count ? count : 1) * sizeof *d);
  assert_non_null(d);
  for (size_t i = 0; i < count; i++)
    d[i] = util_get(dt, after, PAD + i);
  free(after);
  return d;
}

static inline double *host_doubles(kiln_dtype dt, const void *p, size_t count) {
  double *d = calloc(count ? count : 1, sizeof *d);
  assert_non_null(d);
  for (size_t i = 0; i < count; i++)
    d[i] = util_get(dt, p, i);
  return d;
}

#define IMG(buf, n_, c_, h_, w_, dt)                                           \
  (&(kiln_image){.buffer = (buf), .offset = PAD, .n = (n_), .c = (c_),         \
                 .h = (h_), .w = (w_), .dtype = (dt)})

static const double U = 0x1p-24;

/* Forward, backward to the input, backward to the weights and bias of case
 * t in dtype dt on q, each against the float64 reference. */
static inline void run_case(kiln_context *ctx, kiln_queue *q,
                            const struct ccase *t, kiln_dtype dt,
                            const char *family) {
  const struct shape s = shape_of(t);
  const kiln_conv2d_params p = params_of(t);
  char where[120];
  int len = snprintf(where, sizeof where,
           "%s %s n%zu c%zu %zux%zu oc%zu k%zux%zu s%zu,%zu p%zu,%zu d%zu,%zu "
           "g%zu",
           family, kiln_dtype_name(dt), t->n, t->c, t->h, t->w, t->oc, t->kh,
           t->kw, ONE(t->sh), ONE(t->sw), t->ph, t->pw, ONE(t->dh), ONE(t->dw),
           ONE(t->groups));
  assert_true(len > 0);
  void *xh = util_random(dt, s.xn, -1, 1, 11), *wh = util_random(dt, s.wn, -1, 1, 12);
  void *dyh = util_random(dt, s.yn, -1, 1, 13);
  float *bh = util_random(KILN_F32, t->oc, -1, 1, 14);
  double *x = host_doubles(dt, xh, s.xn), *w = host_doubles(dt, wh, s.wn);
  double *dy = host_doubles(dt, dyh, s.yn);
  void *x_all, *w_all, *dy_all, *b_all, *y_all, *dx_all, *dw_all, *db_all;
  kiln_buffer *xb = guarded(ctx, q, dt, xh, s.xn, &x_all, 21);
  kiln_buffer *wb = guarded(ctx, q, dt, wh, s.wn, &w_all, 22);
  kiln_buffer *dyb = guarded(ctx, q, dt, dyh, s.yn, &dy_all, 23);
  kiln_buffer *bb = guarded(ctx, q, KILN_F32, bh, t->oc, &b_all, 24);
  kiln_buffer *yb = guarded(ctx, q, KILN_F32, NULL, s.yn, &y_all, 25);
  kiln_buffer *dxb = guarded(ctx, q, KILN_F32, NULL, s.xn, &dx_all, 26);
  kiln_buffer *dwb = guarded(ctx, q, KILN_F32, NULL, s.wn, &dw_all, 27);
  kiln_buffer *dbb = guarded(ctx, q, KILN_F32, NULL, t->oc, &db_all, 28);
  double *y0 = host_doubles(KILN_F32, (float *)y_all + PAD, s.yn);

  /* ---- forward ---- */
  kiln_range bias = {bb, PAD, t->oc, KILN_F32};
  const double alpha = ONE(t->alpha);
  kiln_epilogue e = {(float)alpha, t->beta, t->bias ? &bias : NULL, t->act};
  kiln_event *done = NULL;
  assert_kiln_ok(kiln_conv2d(q, IMG(xb, t->n, t->c, t->h, t->w, dt),
                             IMG(wb, t->oc, s.cg, t->kh, t->kw, dt),
                             IMG(yb, t->n, t->oc, s.oh, s.ow, KILN_F32), &p,
                             &e, 0, NULL, &done));
  assert_kiln_ok(kiln_event_wait(done));
  kiln_event_release(done);
  double *y = fetch(q, yb, KILN_F32, y_all, s.yn, where);
  double *acc = calloc(s.yn, sizeof *acc), *mag = calloc(s.yn, sizeof *mag);
  assert_true(acc && mag);
  FOR_TAPS(t, s, {
    acc[yi] += x[xi] * w[wi];
    mag[yi] += fabs(x[xi] * w[wi]);
  });
  for (size_t j = 0; j < s.yn; j++) {
    const size_t o = j / (s.oh * s.ow) % t->oc;
    double pre = alpha * acc[j] + t->beta * y0[j] +
                 (t->bias ? (double)bh[o] : 0.0);
    double S = fabs(alpha) * mag[j] + fabs(t->beta * y0[j]) +
               (t->bias ? fabs((double)bh[o]) : 0.0);
    double tol = 2.0 * ((double)s.kk + 8 + 2) * U * S + FLT_MIN;
    if (t->act == KILN_ACT_GELU)
      tol = 1.13 * tol + 16 * U * (fabs(pre) + 1);
    UTIL_CLOSE(y[j], act_ref(t->act, pre), tol, "%s: y[%zu]", where, j);
  }

  /* ---- backward to the input ---- */
  assert_kiln_ok(kiln_conv2d_backward_data(
      q, IMG(dyb, t->n, t->oc, s.oh, s.ow, dt),
      IMG(wb, t->oc, s.cg, t->kh, t->kw, dt),
      IMG(dxb, t->n, t->c, t->h, t->w, KILN_F32), &p, 0, NULL, NULL));
  double *dx = fetch(q, dxb, KILN_F32, dx_all, s.xn, where);
  double *dxr = calloc(s.xn ? s.xn : 1, sizeof *dxr);
  double *dxm = calloc(s.xn ? s.xn : 1, sizeof *dxm);
  assert_true(dxr && dxm);
  FOR_TAPS(t, s, {
    dxr[xi] += dy[yi] * w[wi];
    dxm[xi] += fabs(dy[yi] * w[wi]);
  });
  const double kd = (double)(s.ocg * t->kh * t->kw + t->kh * t->kw);
  for (size_t j = 0; j < s.xn; j++)
    UTIL_CLOSE(dx[j], dxr[j], 2.0 * (kd + 10) * U * dxm[j] + FLT_MIN,
               "%s: dx[%zu]", where, j);

  /* ---- backward to the weights and bias ---- */
  assert_kiln_ok(kiln_conv2d_backward_weights(
      q, IMG(xb, t->n, t->c, t->h, t->w, dt),
      IMG(dyb, t->n, t->oc, s.oh, s.ow, dt),
      IMG(dwb, t->oc, s.cg, t->kh, t->kw, KILN_F32),
      range_of(dbb, PAD, t->oc, KILN_F32), &p, 0, NULL, NULL));
  double *dw = fetch(q, dwb, KILN_F32, dw_all, s.wn, where);
  double *db = fetch(q, dbb, KILN_F32, db_all, t->oc, where);
  double *dwr = calloc(s.wn, sizeof *dwr), *dwm = calloc(s.wn, sizeof *dwm);
  assert_true(dwr && dwm);
  FOR_TAPS(t, s, {
    dwr[wi] += dy[yi] * x[xi];
    dwm[wi] += fabs(dy[yi] * x[xi]);
  });
  const double kw = (double)(t->n * s.oh * s.ow) + (double)t->n;
  for (size_t j = 0; j < s.wn; j++)
    UTIL_CLOSE(dw[j], dwr[j], 2.0 * (kw + 8) * U * dwm[j] + FLT_MIN,
               "%s: dw[%zu]", where, j);
  for (size_t o = 0; o < t->oc; o++) {
    double r = 0, m = 0;
    for (size_t i = 0; i < t->n; i++)
      for (size_t j = 0; j < s.oh * s.ow; j++) {
        double v = dy[(i * t->oc + o) * s.oh * s.ow + j];
        r += v;
        m += fabs(v);
      }
    UTIL_CLOSE(db[o], r, 2.0 * (double)(t->n * s.oh * s.ow + 8) * U * m +
                             FLT_MIN,
               "%s: db[%zu]", where, o);
  }

  free(xh), free(wh), free(dyh), free(bh), free(x), free(w), free(dy);
  free(x_all), free(w_all), free(dy_all), free(b_all), free(y_all);
  free(dx_all), free(dw_all), free(db_all), free(y0), free(y), free(acc);
  free(mag), free(dx), free(dxr), free(dxm), free(dw), free(db), free(dwr);
  free(dwm);
  kiln_buffer *bufs[] = {xb, wb, dyb, bb, yb, dxb, dwb, dbb};
  for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
    assert_kiln_ok(kiln_buffer_destroy(bufs[i]));
}

#endif
