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
 * The cases, the float64 reference and its tolerance (derived there) are
 * conv_test_util.h, shared with test_space_conv.c. */

#include "conv_test_util.h"
#include "ops/ops_gemm.h"

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
