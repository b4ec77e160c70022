/* 2-D convolution (kiln/kiln_ops_conv.h): forward with its epilogue,
 * backward to the input and to the weights and bias, against a float64
 * host reference on awkward shapes (1x1 images, primes, stride larger than
 * the kernel, dilation, rectangular kernels, 1 and 3 channels and counts
 * that are no multiple of any tile, batch 1, groups and depthwise, a
 * kernel as large as the padded image), every float dtype, both kernel
 * families on every test device, offsets with guard elements checked
 * untouched, several chunks of the batch (a lowered workspace limit); the
 * gradients also by finite differences of the device's forward; and every
 * bad argument refused with a message naming it.
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

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "harness.h"
#include "op_test_util.h"
#include "ops/ops_gemm.h"

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

static size_t out_dim(size_t in, size_t k, size_t s, size_t p, size_t d) {
  return (in + 2 * p - d * (k - 1) - 1) / s + 1;
}

struct shape {
  size_t oh, ow, cg, ocg, kk, xn, wn, yn;
};

static struct shape shape_of(const struct ccase *t) {
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

static kiln_conv2d_params params_of(const struct ccase *t) {
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

static double gelu(double v) {
  return 0.5 * v * (1.0 + tanh(0.7978845608028654 * (v + 0.044715 * v * v * v)));
}

static double act_ref(kiln_activation a, double v) {
  return a == KILN_ACT_RELU ? (v < 0 ? 0 : v) : a == KILN_ACT_GELU ? gelu(v) : v;
}

/* Buffers of the operands with `pad` guard elements on each side. */
enum { PAD = 5 };

static kiln_buffer *guarded(kiln_context *ctx, kiln_queue *q, kiln_dtype dt,
                            const void *data, size_t count, void **all,
                            uint32_t seed) {
  *all = util_random(dt, count + 2 * PAD, -3, 3, seed);
  size_t es = kiln_dtype_size(dt);
  if (data != NULL && count > 0)
    memcpy((char *)*all + PAD * es, data, count * es);
  return util_upload(ctx, q, dt, *all, count + 2 * PAD);
}

/* Download a guarded output, check its guards against what was uploaded,
 * and return its count elements as doubles. */
static double *fetch(kiln_queue *q, kiln_buffer *b, kiln_dtype dt,
                     const void *before, size_t count, const char *what) {
  void *after = util_download(q, b, dt, count + 2 * PAD);
  util_check_guard(dt, before, after, PAD, count, count + 2 * PAD, what);
  double *d = malloc((count ? count : 1) * sizeof *d);
  assert_non_null(d);
  for (size_t i = 0; i < count; i++)
    d[i] = util_get(dt, after, PAD + i);
  free(after);
  return d;
}

static double *host_doubles(kiln_dtype dt, const void *p, size_t count) {
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
static void run_case(kiln_context *ctx, kiln_queue *q, const struct ccase *t,
                     kiln_dtype dt, const char *family) {
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

/* Every case and dtype on the device's own family, then the other family
 * forced through its profile. */
static void run_cases(const struct ccase *cs, size_t count) {
  size_t ndt;
  const kiln_dtype *dts = util_float_dtypes(&ndt);
  FOR_EACH_TEST_DEVICE(dev) {
    for (int other = 0; other < 2; other++) {
      kiln_context *ctx;
      kiln_queue *q;
      kiln_test_open_family(dev, other, &ctx, &q);
      for (size_t i = 0; i < count; i++)
        for (size_t d = 0; d < ndt; d++)
          run_case(ctx, q, &cs[i], dts[d], other ? "other family" : "own family");
      kiln_test_close(ctx, q);
    }
  }
}

static void test_shapes(void **state) {
  (void)state;
  run_cases(cases, NCASES);
}

/* One image per chunk (the workspace limit lowered to nothing), so the
 * forward and data passes loop over chunks and the weight gradient
 * accumulates across them. */
static void test_chunks(void **state) {
  (void)state;
  static const struct ccase chunked[] = {
      CC(3, 3, 7, 11, 5, 3, 3, .ph = 1, .pw = 1, .bias = true,
         .act = KILN_ACT_RELU),
      CC(4, 4, 6, 5, 8, 2, 3, .groups = 4, .pw = 1, .beta = 0.5f),
  };
  kiln__conv_set_workspace_limit(1);
  run_cases(chunked, sizeof chunked / sizeof chunked[0]);
  kiln__conv_set_workspace_limit(0);
}

/* An empty batch: y and dx have nothing to write, and the weight and bias
 * gradients of an empty sum are zeros (their guards untouched). c 0 with
 * a bias: y = act(bias). */
static void empty_body(kiln_context *ctx, kiln_queue *q) {
  const kiln_conv2d_params p = {1, 1, 1, 1, 1, 1, 1};
  void *dw_all, *db_all, *x_all;
  kiln_buffer *xb = guarded(ctx, q, KILN_F32, NULL, 0, &x_all, 1);
  kiln_buffer *dwb = guarded(ctx, q, KILN_F32, NULL, 2 * 3 * 9, &dw_all, 2);
  kiln_buffer *dbb = guarded(ctx, q, KILN_F32, NULL, 2, &db_all, 3);
  assert_kiln_ok(kiln_conv2d_backward_weights(
      q, IMG(xb, 0, 3, 4, 4, KILN_F32), IMG(xb, 0, 2, 4, 4, KILN_F32),
      IMG(dwb, 2, 3, 3, 3, KILN_F32), range_of(dbb, PAD, 2, KILN_F32), &p, 0,
      NULL, NULL));
  double *dw = fetch(q, dwb, KILN_F32, dw_all, 2 * 3 * 9, "empty dw");
  double *db = fetch(q, dbb, KILN_F32, db_all, 2, "empty db");
  for (size_t i = 0; i < 2 * 3 * 9; i++)
    assert_true(dw[i] == 0.0);
  assert_true(db[0] == 0.0 && db[1] == 0.0);
  /* Forward of an empty batch: a no-op whose event completes. */
  kiln_event *ev = NULL;
  assert_kiln_ok(kiln_conv2d(q, IMG(xb, 0, 3, 4, 4, KILN_F32),
                             IMG(dwb, 2, 3, 3, 3, KILN_F32),
                             IMG(xb, 0, 2, 4, 4, KILN_F32), &p, NULL, 0, NULL,
                             &ev));
  assert_kiln_ok(kiln_event_wait(ev));
  kiln_event_release(ev);
  /* No input channels: y = relu(bias). */
  void *y_all;
  float bias_h[2] = {-1.5f, 2.25f};
  kiln_buffer *yb = guarded(ctx, q, KILN_F32, NULL, 2 * 2 * 4 * 4, &y_all, 4);
  kiln_buffer *bb = util_upload(ctx, q, KILN_F32, bias_h, 2);
  kiln_epilogue e = KILN_EPILOGUE_INIT;
  e.bias = range_of(bb, 0, 2, KILN_F32);
  e.activation = KILN_ACT_RELU;
  assert_kiln_ok(kiln_conv2d(q, IMG(xb, 2, 0, 4, 4, KILN_F32),
                             IMG(dwb, 2, 0, 3, 3, KILN_F32),
                             IMG(yb, 2, 2, 4, 4, KILN_F32), &p, &e, 0, NULL,
                             NULL));
  double *y = fetch(q, yb, KILN_F32, y_all, 2 * 2 * 4 * 4, "c 0 y");
  for (size_t i = 0; i < 2 * 2 * 4 * 4; i++)
    assert_true(y[i] == ((i / 16) % 2 ? 2.25 : 0.0));
  free(dw), free(db), free(y), free(dw_all), free(db_all), free(x_all);
  free(y_all);
  kiln_buffer *bufs[] = {xb, dwb, dbb, yb, bb};
  for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
    assert_kiln_ok(kiln_buffer_destroy(bufs[i]));
}

static void test_empty(void **state) {
  (void)state;
  util_each_device(empty_body);
}

/* ---- finite differences ---------------------------------------------------- */

/* L(x, w) = sum dy . conv(x, w), from the device's forward in f32. L is
 * linear in x and in w, so a central difference with step 1 is the
 * gradient exactly, up to the forward's rounding. */
static double loss(kiln_queue *q, const struct ccase *t, const struct shape *s,
                   kiln_buffer *xb, kiln_buffer *wb, kiln_buffer *yb,
                   const double *dy) {
  const kiln_conv2d_params p = params_of(t);
  assert_kiln_ok(kiln_conv2d(q, IMG(xb, t->n, t->c, t->h, t->w, KILN_F32),
                             IMG(wb, t->oc, s->cg, t->kh, t->kw, KILN_F32),
                             IMG(yb, t->n, t->oc, s->oh, s->ow, KILN_F32), &p,
                             NULL, 0, NULL, NULL));
  float *y = util_download(q, yb, KILN_F32, s->yn + 2 * PAD);
  double l = 0;
  for (size_t i = 0; i < s->yn; i++)
    l += dy[i] * y[PAD + i];
  free(y);
  return l;
}

/* Perturb element i of the guarded f32 host array h (uploaded to b) by
 * +-1 and return (L+ - L-) / 2. */
static double central(kiln_queue *q, float *h, size_t count, size_t i,
                      kiln_buffer *b, const struct ccase *t,
                      const struct shape *s, kiln_buffer *xb, kiln_buffer *wb,
                      kiln_buffer *yb, const double *dy) {
  const float v = h[PAD + i];
  double l[2];
  for (int k = 0; k < 2; k++) {
    h[PAD + i] = v + (k ? -1.0f : 1.0f);
    assert_kiln_ok(kiln_buffer_write_sync(
        q, h, range_of(b, 0, count + 2 * PAD, KILN_F32)));
    l[k] = loss(q, t, s, xb, wb, yb, dy);
  }
  h[PAD + i] = v;
  assert_kiln_ok(kiln_buffer_write_sync(
      q, h, range_of(b, 0, count + 2 * PAD, KILN_F32)));
  return (l[0] - l[1]) / 2;
}

static void fd_case(kiln_context *ctx, kiln_queue *q, const struct ccase *t) {
  const struct shape s = shape_of(t);
  const kiln_conv2d_params p = params_of(t);
  void *x_all, *w_all, *y_all, *dy_all, *dx_all, *dw_all;
  void *dyh = util_random(KILN_F32, s.yn, -1, 1, 5);
  kiln_buffer *xb = guarded(ctx, q, KILN_F32, NULL, s.xn, &x_all, 1);
  kiln_buffer *wb = guarded(ctx, q, KILN_F32, NULL, s.wn, &w_all, 2);
  kiln_buffer *yb = guarded(ctx, q, KILN_F32, NULL, s.yn, &y_all, 3);
  kiln_buffer *dyb = guarded(ctx, q, KILN_F32, dyh, s.yn, &dy_all, 4);
  kiln_buffer *dxb = guarded(ctx, q, KILN_F32, NULL, s.xn, &dx_all, 6);
  kiln_buffer *dwb = guarded(ctx, q, KILN_F32, NULL, s.wn, &dw_all, 7);
  double *dy = host_doubles(KILN_F32, dyh, s.yn);
  assert_kiln_ok(kiln_conv2d_backward_data(
      q, IMG(dyb, t->n, t->oc, s.oh, s.ow, KILN_F32),
      IMG(wb, t->oc, s.cg, t->kh, t->kw, KILN_F32),
      IMG(dxb, t->n, t->c, t->h, t->w, KILN_F32), &p, 0, NULL, NULL));
  assert_kiln_ok(kiln_conv2d_backward_weights(
      q, IMG(xb, t->n, t->c, t->h, t->w, KILN_F32),
      IMG(dyb, t->n, t->oc, s.oh, s.ow, KILN_F32),
      IMG(dwb, t->oc, s.cg, t->kh, t->kw, KILN_F32), NULL, &p, 0, NULL,
      NULL));
  double *dx = fetch(q, dxb, KILN_F32, dx_all, s.xn, "fd dx");
  double *dw = fetch(q, dwb, KILN_F32, dw_all, s.wn, "fd dw");
  /* Each forward output has error <= 2 (k + 10) u S_j with S_j <= 16 k
   * (|x| < 4 after a step, |w| < 4); L sums |dy| <= 1 of them per output,
   * and the difference of two such sums is halved. */
  const double tol = 2.0 * ((double)s.kk + 10) * U * 16.0 * (double)s.kk *
                     (double)s.yn + 1e-6;
  for (size_t i = 0; i < s.xn; i++)
    UTIL_CLOSE(dx[i],
               central(q, (float *)x_all, s.xn, i, xb, t, &s, xb, wb, yb, dy),
               tol, "finite differences: dx[%zu]", i);
  for (size_t i = 0; i < s.wn; i++)
    UTIL_CLOSE(dw[i],
               central(q, (float *)w_all, s.wn, i, wb, t, &s, xb, wb, yb, dy),
               tol, "finite differences: dw[%zu]", i);
  free(dyh), free(x_all), free(w_all), free(y_all), free(dy_all);
  free(dx_all), free(dw_all), free(dy), free(dx), free(dw);
  kiln_buffer *bufs[] = {xb, wb, yb, dyb, dxb, dwb};
  for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
    assert_kiln_ok(kiln_buffer_destroy(bufs[i]));
}

static void fd_body(kiln_context *ctx, kiln_queue *q) {
  static const struct ccase fd[] = {
      CC(2, 2, 4, 5, 3, 3, 2, .sw = 2, .ph = 1),
      CC(1, 4, 4, 4, 2, 2, 2, .groups = 2, .dh = 2, .pw = 1),
  };
  for (size_t i = 0; i < sizeof fd / sizeof fd[0]; i++)
    fd_case(ctx, q, &fd[i]);
}

static void test_finite_differences(void **state) {
  (void)state;
  util_each_device(fd_body);
}

/* ---- bad arguments ---------------------------------------------------------- */

static void test_bad_arguments(void **state) {
  (void)state;
  struct util_bad_env env = util_bad_env_open();
  kiln_queue *q = env.q;
  kiln_buffer *b = util_buffer(env.ctx, 16384, 0), *b2 = util_buffer(env.ctx, 16384, 0);
  kiln_buffer *b3 = util_buffer(env.ctx, 16384, 0);
  const kiln_conv2d_params p = KILN_CONV2D_PARAMS_INIT;
  /* x 2x3x5x5, w 4x3x3x3, y 2x4x3x3. */
  kiln_image x = {b, 0, 2, 3, 5, 5, KILN_F32, KILN_NCHW};
  kiln_image w = {b2, 0, 4, 3, 3, 3, KILN_F32, KILN_NCHW};
  kiln_image y = {b3, 0, 2, 4, 3, 3, KILN_F32, KILN_NCHW};
  kiln_image t;
  kiln_conv2d_params bp;
  assert_kiln_ok(kiln_conv2d(q, &x, &w, &y, &p, NULL, 0, NULL, NULL));

  assert_kiln_error(kiln_conv2d(NULL, &x, &w, &y, &p, NULL, 0, NULL, NULL),
                    KILN_ERR_NULL_POINTER, "queue");
  assert_kiln_error(kiln_conv2d(q, NULL, &w, &y, &p, NULL, 0, NULL, NULL),
                    KILN_ERR_NULL_POINTER, "x");
  t = x;
  t.buffer = NULL;
  assert_kiln_error(kiln_conv2d(q, &t, &w, &y, &p, NULL, 0, NULL, NULL),
                    KILN_ERR_NULL_POINTER, "x.buffer");
  t = x;
  t.layout = KILN_NHWC;
  assert_kiln_error(kiln_conv2d(q, &t, &w, &y, &p, NULL, 0, NULL, NULL),
                    KILN_ERR_INVALID_ARGUMENT, "x.layout");
  t = y;
  t.dtype = KILN_BF16;
  assert_kiln_error(kiln_conv2d(q, &x, &w, &t, &p, NULL, 0, NULL, NULL),
                    KILN_ERR_INVALID_ARGUMENT, "y.dtype");
  t = w;
  t.dtype = KILN_BF16;
  assert_kiln_error(kiln_conv2d(q, &x, &t, &y, &p, NULL, 0, NULL, NULL),
                    KILN_ERR_SHAPE_MISMATCH, "w dtype");
  t = x;
  t.dtype = (kiln_dtype)99;
  assert_kiln_error(kiln_conv2d(q, &t, &w, &y, &p, NULL, 0, NULL, NULL),
                    KILN_ERR_INVALID_ARGUMENT, "x.dtype");
  bp = p;
  bp.stride_h = 0;
  assert_kiln_error(kiln_conv2d(q, &x, &w, &y, &bp, NULL, 0, NULL, NULL),
                    KILN_ERR_INVALID_ARGUMENT, "params.stride_h");
  bp = p;
  bp.dilation_w = 0;
  assert_kiln_error(kiln_conv2d(q, &x, &w, &y, &bp, NULL, 0, NULL, NULL),
                    KILN_ERR_INVALID_ARGUMENT, "params.dilation_w");
  bp = p;
  bp.groups = 2; /* 3 input channels */
  assert_kiln_error(kiln_conv2d(q, &x, &w, &y, &bp, NULL, 0, NULL, NULL),
                    KILN_ERR_SHAPE_MISMATCH, "params.groups");
  bp.groups = 3; /* divides c but not oc 4 */
  assert_kiln_error(kiln_conv2d(q, &x, &w, &y, &bp, NULL, 0, NULL, NULL),
                    KILN_ERR_SHAPE_MISMATCH, "w.n");
  t = w;
  t.c = 2;
  assert_kiln_error(kiln_conv2d(q, &x, &t, &y, &p, NULL, 0, NULL, NULL),
                    KILN_ERR_SHAPE_MISMATCH, "w.c");
  t = w;
  t.h = 6; /* larger than the 5-row image, no padding */
  assert_kiln_error(kiln_conv2d(q, &x, &t, &y, &p, NULL, 0, NULL, NULL),
                    KILN_ERR_SHAPE_MISMATCH, "exceeds the padded image");
  bp = p;
  bp.dilation_h = 3; /* dilated extent 7 > 5 */
  assert_kiln_error(kiln_conv2d(q, &x, &w, &y, &bp, NULL, 0, NULL, NULL),
                    KILN_ERR_SHAPE_MISMATCH, "exceeds the padded image");
  t = w;
  t.w = 0;
  assert_kiln_error(kiln_conv2d(q, &x, &t, &y, &p, NULL, 0, NULL, NULL),
                    KILN_ERR_INVALID_SIZE, "kernel width");
  t = y;
  t.h = 4;
  assert_kiln_error(kiln_conv2d(q, &x, &w, &t, &p, NULL, 0, NULL, NULL),
                    KILN_ERR_SHAPE_MISMATCH, "y.h");
  t = y;
  t.c = 5;
  assert_kiln_error(kiln_conv2d(q, &x, &w, &t, &p, NULL, 0, NULL, NULL),
                    KILN_ERR_SHAPE_MISMATCH, "y.c");
  t = y;
  t.n = 1;
  assert_kiln_error(kiln_conv2d(q, &x, &w, &t, &p, NULL, 0, NULL, NULL),
                    KILN_ERR_SHAPE_MISMATCH, "y.n");
  t = x;
  t.n = SIZE_MAX;
  assert_kiln_error(kiln_conv2d(q, &t, &w, &y, &p, NULL, 0, NULL, NULL),
                    KILN_ERR_INVALID_SIZE, "x.n");
  t = x;
  t.offset = 4000; /* 150 elements from 4000 > 4096 */
  assert_kiln_error(kiln_conv2d(q, &t, &w, &y, &p, NULL, 0, NULL, NULL),
                    KILN_ERR_OUT_OF_RANGE, "x");
  t = y;
  t.buffer = b;
  t.offset = 100; /* overlaps x */
  assert_kiln_error(kiln_conv2d(q, &x, &w, &t, &p, NULL, 0, NULL, NULL),
                    KILN_ERR_INVALID_ARGUMENT, "overlap");
  t = x;
  t.buffer = env.ob;
  t.offset = 0;
  t.n = 1;
  t.c = 1;
  t.h = 3;
  t.w = 3;
  assert_kiln_error(
      kiln_conv2d(q, &t, &(kiln_image){b2, 0, 1, 1, 1, 1, KILN_F32, 0},
                  &(kiln_image){b3, 0, 1, 1, 3, 3, KILN_F32, 0}, &p, NULL, 0,
                  NULL, NULL),
      KILN_ERR_WRONG_CONTEXT, "x");
  kiln_epilogue e = KILN_EPILOGUE_INIT;
  e.bias = range_of(b, 2000, 3, KILN_F32);
  assert_kiln_error(kiln_conv2d(q, &x, &w, &y, &p, &e, 0, NULL, NULL),
                    KILN_ERR_SHAPE_MISMATCH, "epilogue.bias.count");
  e.bias = range_of(b, 2000, 4, KILN_F16);
  assert_kiln_error(kiln_conv2d(q, &x, &w, &y, &p, &e, 0, NULL, NULL),
                    KILN_ERR_INVALID_ARGUMENT, "epilogue.bias dtype");
  e.bias = range_of(NULL, 2000, 4, KILN_F32);
  assert_kiln_error(kiln_conv2d(q, &x, &w, &y, &p, &e, 0, NULL, NULL),
                    KILN_ERR_NULL_POINTER, "epilogue.bias");
  e.bias = range_of(b3, 10, 4, KILN_F32); /* inside y */
  assert_kiln_error(kiln_conv2d(q, &x, &w, &y, &p, &e, 0, NULL, NULL),
                    KILN_ERR_INVALID_ARGUMENT, "epilogue.bias");
  e.bias = NULL;
  e.activation = (kiln_activation)1000;
  assert_kiln_error(kiln_conv2d(q, &x, &w, &y, &p, &e, 0, NULL, NULL),
                    KILN_ERR_INVALID_ARGUMENT, "epilogue.activation");

  /* Backward to the input: dy (y's shape), w, dx (x's shape). */
  assert_kiln_ok(kiln_conv2d_backward_data(q, &y, &w, &x, &p, 0, NULL, NULL));
  assert_kiln_error(
      kiln_conv2d_backward_data(NULL, &y, &w, &x, &p, 0, NULL, NULL),
      KILN_ERR_NULL_POINTER, "queue");
  assert_kiln_error(
      kiln_conv2d_backward_data(q, &y, NULL, &x, &p, 0, NULL, NULL),
      KILN_ERR_NULL_POINTER, "w");
  t = x;
  t.dtype = KILN_F16;
  assert_kiln_error(kiln_conv2d_backward_data(q, &y, &w, &t, &p, 0, NULL, NULL),
                    KILN_ERR_INVALID_ARGUMENT, "dx.dtype");
  t = w;
  t.dtype = KILN_F16;
  assert_kiln_error(kiln_conv2d_backward_data(q, &y, &t, &x, &p, 0, NULL, NULL),
                    KILN_ERR_SHAPE_MISMATCH, "w dtype");
  t = y;
  t.w = 2;
  assert_kiln_error(kiln_conv2d_backward_data(q, &t, &w, &x, &p, 0, NULL, NULL),
                    KILN_ERR_SHAPE_MISMATCH, "dy.w");
  bp = p;
  bp.groups = 0;
  assert_kiln_error(
      kiln_conv2d_backward_data(q, &y, &w, &x, &bp, 0, NULL, NULL),
      KILN_ERR_INVALID_ARGUMENT, "params.groups");
  t = x;
  t.buffer = b3; /* dx over dy */
  assert_kiln_error(kiln_conv2d_backward_data(q, &y, &w, &t, &p, 0, NULL, NULL),
                    KILN_ERR_INVALID_ARGUMENT, "overlap");

  /* Backward to the weights: x, dy, dw, db. */
  kiln_range db = {b, 3000, 4, KILN_F32};
  assert_kiln_ok(
      kiln_conv2d_backward_weights(q, &x, &y, &w, &db, &p, 0, NULL, NULL));
  assert_kiln_error(
      kiln_conv2d_backward_weights(NULL, &x, &y, &w, &db, &p, 0, NULL, NULL),
      KILN_ERR_NULL_POINTER, "queue");
  assert_kiln_error(
      kiln_conv2d_backward_weights(q, &x, NULL, &w, &db, &p, 0, NULL, NULL),
      KILN_ERR_NULL_POINTER, "dy");
  t = y;
  t.dtype = KILN_BF16;
  assert_kiln_error(
      kiln_conv2d_backward_weights(q, &x, &t, &w, &db, &p, 0, NULL, NULL),
      KILN_ERR_SHAPE_MISMATCH, "dy dtype");
  t = w;
  t.dtype = KILN_BF16;
  assert_kiln_error(
      kiln_conv2d_backward_weights(q, &x, &y, &t, &db, &p, 0, NULL, NULL),
      KILN_ERR_INVALID_ARGUMENT, "dw.dtype");
  db.count = 5;
  assert_kiln_error(
      kiln_conv2d_backward_weights(q, &x, &y, &w, &db, &p, 0, NULL, NULL),
      KILN_ERR_SHAPE_MISMATCH, "db.count");
  db.count = 4;
  db.dtype = KILN_F16;
  assert_kiln_error(
      kiln_conv2d_backward_weights(q, &x, &y, &w, &db, &p, 0, NULL, NULL),
      KILN_ERR_INVALID_ARGUMENT, "db.dtype");
  db.dtype = KILN_F32;
  db.buffer = NULL;
  assert_kiln_error(
      kiln_conv2d_backward_weights(q, &x, &y, &w, &db, &p, 0, NULL, NULL),
      KILN_ERR_NULL_POINTER, "db.buffer");
  db.buffer = b2; /* inside dw */
  db.offset = 4;
  assert_kiln_error(
      kiln_conv2d_backward_weights(q, &x, &y, &w, &db, &p, 0, NULL, NULL),
      KILN_ERR_INVALID_ARGUMENT, "db");
  t = w;
  t.h = 9;
  assert_kiln_error(
      kiln_conv2d_backward_weights(q, &x, &y, &t, NULL, &p, 0, NULL, NULL),
      KILN_ERR_SHAPE_MISMATCH, "exceeds the padded image");

  assert_kiln_ok(kiln_buffer_destroy(b));
  assert_kiln_ok(kiln_buffer_destroy(b2));
  assert_kiln_ok(kiln_buffer_destroy(b3));
  util_bad_env_close(&env);
}

#ifndef KILN_OP_TEST_NO_MAIN
int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_shapes),
      cmocka_unit_test(test_chunks),
      cmocka_unit_test(test_empty),
      cmocka_unit_test(test_finite_differences),
      cmocka_unit_test(test_bad_arguments),
  };
  return KILN_TEST_RUN("op_conv", tests, true);
}
#endif
