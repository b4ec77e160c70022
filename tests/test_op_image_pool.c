/* Pooling (kiln_pool2d, kiln_pool2d_backward of kiln/kiln_ops_image.h)
 * against float64 host references on awkward shapes (1x1 images, primes,
 * stride above the window, channels 1 and 3, batch 1), every float dtype,
 * offsets with guard elements, both kernel families; the reference's
 * gradient against float64 finite differences of its forward function;
 * max-pooling ties and NaN; bad input. Batch normalisation is
 * test_op_image_bn.c.
 *
 * Error bounds (u = 2^-24; the references read the stored, rounded inputs,
 * so only the kernels' f32 arithmetic and the final store differ):
 * - max pooling forward: exact. Max backward: a sum of at most
 *   cover = ceil(kh / sh) ceil(kw / sw) gradients, (cover + 1) u sum|dy|.
 * - mean pooling: a sum of kh kw terms then a division, (kh kw + 2) u
 *   sum|x| / divisor; backward (cover + 2) u sum|dy| / divisor.
 * f16/bf16 outputs add the store's rounding (util_storage_tol). */
#include "image_test_util.h"

#define U IMG_U
#define doubles img_doubles

/* ---- host references ---------------------------------------------------- */

struct pool_case {
  size_t n, c, h, w, kh, kw, sh, sw, ph, pw;
};

static size_t out_dim(size_t n, size_t k, size_t s, size_t p) {
  return (n + 2 * p - k) / s + 1;
}

/* The clipped window of output (oh, ow). */
static void ref_window(const struct pool_case *pc, size_t oh, size_t ow,
                       long *h0, long *h1, long *w0, long *w1) {
  long hs = (long)(oh * pc->sh) - (long)pc->ph;
  long ws = (long)(ow * pc->sw) - (long)pc->pw;
  *h0 = hs < 0 ? 0 : hs;
  *w0 = ws < 0 ? 0 : ws;
  *h1 = hs + (long)pc->kh < (long)pc->h ? hs + (long)pc->kh : (long)pc->h;
  *w1 = ws + (long)pc->kw < (long)pc->w ? ws + (long)pc->kw : (long)pc->w;
}

/* Forward (y) and, when dy is not NULL, backward (dx) of the pooling, in
 * double, on plane-major NCHW arrays. Max: the first maximum in scan order;
 * the first NaN wins. */
static void ref_pool(kiln_pool_op op, bool exclude, const struct pool_case *pc,
                     const double *x, double *y, const double *dy,
                     double *dx) {
  size_t oh_n = out_dim(pc->h, pc->kh, pc->sh, pc->ph);
  size_t ow_n = out_dim(pc->w, pc->kw, pc->sw, pc->pw);
  size_t planes = pc->n * pc->c, hw = pc->h * pc->w;
  if (dx != NULL)
    memset(dx, 0, planes * hw * sizeof *dx);
  for (size_t p = 0; p < planes; p++)
    for (size_t oh = 0; oh < oh_n; oh++)
      for (size_t ow = 0; ow < ow_n; ow++) {
        long h0, h1, w0, w1;
        ref_window(pc, oh, ow, &h0, &h1, &w0, &w1);
        const double *xp = x + p * hw;
        size_t o = (p * oh_n + oh) * ow_n + ow;
        if (op == KILN_POOL_MAX) {
          size_t best = (size_t)(h0 * (long)pc->w + w0);
          for (long ih = h0; ih < h1; ih++)
            for (long iw = w0; iw < w1; iw++) {
              size_t e = (size_t)(ih * (long)pc->w + iw);
              if (xp[e] > xp[best] || (isnan(xp[e]) && !isnan(xp[best])))
                best = e;
            }
          if (y != NULL)
            y[o] = xp[best];
          if (dx != NULL)
            dx[p * hw + best] += dy[o];
        } else {
          double div = exclude ? (double)((h1 - h0) * (w1 - w0))
                               : (double)(pc->kh * pc->kw);
          double s = 0;
          for (long ih = h0; ih < h1; ih++)
            for (long iw = w0; iw < w1; iw++) {
              size_t e = (size_t)(ih * (long)pc->w + iw);
              s += xp[e];
              if (dx != NULL)
                dx[p * hw + e] += dy[o] / div;
            }
          if (y != NULL)
            y[o] = s / div;
        }
      }
}

/* ---- finite differences of the reference --------------------------------- */

static const struct pool_case *g_pc;
static kiln_pool_op g_op;
static bool g_exclude;
static const double *g_w; /* weights of the scalar loss sum w . f(x) */

static double pool_loss(const double *x) {
  size_t oc = g_pc->n * g_pc->c *
              out_dim(g_pc->h, g_pc->kh, g_pc->sh, g_pc->ph) *
              out_dim(g_pc->w, g_pc->kw, g_pc->sw, g_pc->pw);
  double *y = doubles(oc), t = 0;
  ref_pool(g_op, g_exclude, g_pc, x, y, NULL, NULL);
  for (size_t i = 0; i < oc; i++)
    t += g_w[i] * y[i];
  free(y);
  return t;
}

/* The reference's backward pass is the gradient of its forward one. */
static void test_reference_gradients(void **state) {
  (void)state;
  static const struct pool_case pcs[] = {
      {2, 2, 5, 6, 3, 2, 2, 1, 1, 1}, {1, 1, 4, 4, 2, 2, 0, 0, 0, 0},
      {1, 3, 7, 3, 3, 3, 4, 5, 1, 0}};
  for (size_t i = 0; i < sizeof pcs / sizeof pcs[0]; i++)
    for (int mode = 0; mode < 3; mode++) {
      const struct pool_case *pc = &pcs[i];
      struct pool_case p = *pc;
      p.sh = p.sh ? p.sh : p.kh;
      p.sw = p.sw ? p.sw : p.kw;
      size_t count = p.n * p.c * p.h * p.w;
      size_t oc = p.n * p.c * out_dim(p.h, p.kh, p.sh, p.ph) *
                  out_dim(p.w, p.kw, p.sw, p.pw);
      double *x = doubles(count), *w = doubles(oc), *g = doubles(count);
      double *dx = doubles(count);
      float *f = malloc(count * sizeof *f + oc * sizeof *f);
      assert_non_null(f);
      /* distinct values, so max pooling's argmax is stable under the step */
      for (size_t k = 0; k < count; k++)
        x[k] = (double)((k * 7919) % (count + 13)) / (double)count - 0.4;
      kiln_test_fill_random(f, oc, -1, 1, 7 + (uint32_t)i);
      for (size_t k = 0; k < oc; k++)
        w[k] = f[k];
      g_pc = &p;
      g_op = mode == 0 ? KILN_POOL_MAX : KILN_POOL_MEAN;
      g_exclude = mode == 2;
      g_w = w;
      ref_pool(g_op, g_exclude, &p, x, NULL, w, dx);
      train_fd_grad(pool_loss, x, count, g);
      expect_close_arrays("pool reference gradient", dx, g, count, 1e-6);
      free(x);
      free(w);
      free(g);
      free(dx);
      free(f);
    }
}

/* ---- device tests: pooling ---------------------------------------------------- */

static const struct pool_case pool_cases[] = {
    {1, 1, 1, 1, 1, 1, 0, 0, 0, 0},  /* 1x1 image, 1x1 window */
    {2, 3, 7, 5, 3, 3, 2, 2, 1, 1},  /* overlapping windows, padding */
    {1, 3, 13, 11, 2, 3, 3, 2, 1, 1}, /* primes */
    {3, 1, 8, 8, 2, 2, 0, 0, 0, 0},  /* the CNN's 2x2 */
    {1, 2, 11, 7, 3, 2, 5, 4, 0, 1}, /* stride above the window */
    {2, 1, 5, 5, 5, 5, 1, 1, 2, 2},  /* window as large as the image */
    {1, 3, 1, 9, 1, 4, 1, 3, 0, 2},  /* one row */
    /* 2x2 stride 2 on odd sides: the CPU family's four outputs a row in
     * vector lanes and one after; a last row and column in no window */
    {2, 3, 7, 11, 2, 2, 0, 0, 0, 0},
};
static void pool_body(kiln_context *ctx, kiln_queue *q, const char *profile) {
  size_t ndt;
  const kiln_dtype *dts = util_float_dtypes(&ndt);
  for (size_t d = 0; d < ndt; d++)
    for (size_t ci = 0; ci < sizeof pool_cases / sizeof pool_cases[0]; ci++)
      for (int mode = 0; mode < 3; mode++) {
        kiln_dtype dt = dts[d];
        struct pool_case p = pool_cases[ci];
        kiln_pool2d_params prm = {p.kh, p.kw, p.sh, p.sw, p.ph, p.pw,
                                  mode == 2};
        p.sh = p.sh ? p.sh : p.kh;
        p.sw = p.sw ? p.sw : p.kw;
        kiln_pool_op op = mode == 0 ? KILN_POOL_MAX : KILN_POOL_MEAN;
        size_t oh = out_dim(p.h, p.kh, p.sh, p.ph);
        size_t ow = out_dim(p.w, p.kw, p.sw, p.pw);
        size_t count = p.n * p.c * p.h * p.w, oc = p.n * p.c * oh * ow;
        double *x, *dy;
        void *yraw, *dxraw;
        uint32_t seed = 100 + (uint32_t)(ci * 3 + (size_t)mode);
        kiln_buffer *xb = upload_at(ctx, q, dt, XOFF, count, -2, 2, seed, &x,
                                    NULL);
        kiln_buffer *yb = upload_at(ctx, q, dt, YOFF, oc, -1, 1, seed + 1,
                                    NULL, &yraw);
        kiln_buffer *gb = upload_at(ctx, q, dt, XOFF, oc, -1, 1, seed + 2, &dy,
                                    NULL);
        kiln_buffer *dxb = upload_at(ctx, q, dt, YOFF, count, -1, 1, seed + 3,
                                     NULL, &dxraw);
        kiln_image xi = image_at(xb, XOFF, p.n, p.c, p.h, p.w, dt);
        kiln_image yi = image_at(yb, YOFF, p.n, p.c, oh, ow, dt);
        kiln_image gi = image_at(gb, XOFF, p.n, p.c, oh, ow, dt);
        kiln_image dxi = image_at(dxb, YOFF, p.n, p.c, p.h, p.w, dt);
        assert_kiln_ok(kiln_pool2d(q, op, &xi, &yi, &prm, 0, NULL, NULL));
        /* mean pooling reads only x's shape: give it none */
        assert_kiln_ok(kiln_pool2d_backward(q, op, mode == 1 ? NULL : &xi, &gi,
                                            &dxi, &prm, 0, NULL, NULL));
        char what[120];
        snprintf(what, sizeof what, "%s pool %d %s case %zu", profile, mode,
                 kiln_dtype_name(dt), ci);
        double *y = img_download(q, GUARD, yb, dt, YOFF, oc, yraw, what);
        double *dx = img_download(q, GUARD, dxb, dt, YOFF, count, dxraw, what);
        double *ry = doubles(oc), *rdx = doubles(count);
        ref_pool(op, mode == 2, &p, x, ry, dy, rdx);
        double div = (double)(p.kh * p.kw);
        double cover = (double)(((p.kh + p.sh - 1) / p.sh) *
                                ((p.kw + p.sw - 1) / p.sw));
        for (size_t i = 0; i < oc; i++)
          UTIL_CLOSE(y[i], ry[i],
                     pool_tol_y(op == KILN_POOL_MAX, div, 2, dt, ry[i]),
                     "%s y[%zu]", what, i);
        for (size_t i = 0; i < count; i++)
          UTIL_CLOSE(dx[i], rdx[i], pool_tol_dx(cover, 1, dt, rdx[i]),
                     "%s dx[%zu]", what, i);
        free(x);
        free(dy);
        free(y);
        free(dx);
        free(ry);
        free(rdx);
        free(yraw);
        free(dxraw);
        kiln_buffer_destroy(xb);
        kiln_buffer_destroy(yb);
        kiln_buffer_destroy(gb);
        kiln_buffer_destroy(dxb);
      }
}

static void test_pool(void **state) {
  (void)state;
  train_each_profile(pool_body);
}

/* Ties resolve to the first element in scan order, forward and backward;
 * a NaN in a window is its maximum. */
static void ties_body(kiln_context *ctx, kiln_queue *q, const char *profile) {
  /* 1 x 1 x 4 x 5: every element 1 but a 3 at (2, 3) and a NaN at (0, 4). */
  float x[20], y[12], dx[20], ones[12];
  for (int i = 0; i < 20; i++)
    x[i] = 1;
  x[2 * 5 + 3] = 3;
  x[4] = NAN;
  for (int i = 0; i < 12; i++)
    ones[i] = (float)(i + 1);
  kiln_buffer *xb = util_upload(ctx, q, KILN_F32, x, 20);
  kiln_buffer *yb = util_buffer(ctx, 12 * 4, 0);
  kiln_buffer *gb = util_upload(ctx, q, KILN_F32, ones, 12);
  kiln_buffer *dxb = util_buffer(ctx, 20 * 4, 0);
  /* 2x2 windows, stride 1: 3 x 4 outputs, overlapping */
  kiln_pool2d_params p = {.kernel_h = 2, .kernel_w = 2, .stride_h = 1,
                          .stride_w = 1};
  kiln_image xi = image_at(xb, 0, 1, 1, 4, 5, KILN_F32);
  kiln_image yi = image_at(yb, 0, 1, 1, 3, 4, KILN_F32);
  kiln_image gi = image_at(gb, 0, 1, 1, 3, 4, KILN_F32);
  kiln_image dxi = image_at(dxb, 0, 1, 1, 4, 5, KILN_F32);
  assert_kiln_ok(kiln_pool2d(q, KILN_POOL_MAX, &xi, &yi, &p, 0, NULL, NULL));
  assert_kiln_ok(kiln_pool2d_backward(q, KILN_POOL_MAX, &xi, &gi, &dxi, &p, 0,
                                      NULL, NULL));
  assert_kiln_ok(kiln_buffer_read_sync(q, RANGE(yb, 0, 12, KILN_F32), y));
  assert_kiln_ok(kiln_buffer_read_sync(q, RANGE(dxb, 0, 20, KILN_F32), dx));
  /* expected: the first 1 of each window gets its dy unless a 3 or NaN is in
   * the window */
  struct pool_case pc = {1, 1, 4, 5, 2, 2, 1, 1, 0, 0};
  double xd[20], yd[12], gd[12], dxd[20];
  for (int i = 0; i < 20; i++)
    xd[i] = x[i];
  for (int i = 0; i < 12; i++)
    gd[i] = ones[i];
  ref_pool(KILN_POOL_MAX, false, &pc, xd, yd, gd, dxd);
  assert_true(isnan(y[3]));   /* window (0, 3) holds the NaN */
  assert_true(y[2 * 4 + 0] == 1); /* window (2, 0): rows 2-3, cols 0-1 */
  assert_true(y[1 * 4 + 2] == 3); /* window (1, 2) holds the 3 */
  assert_true(dxd[0] == 1); /* window (0, 0): its first element */
  for (int i = 0; i < 12; i++)
    UTIL_CLOSE(y[i], yd[i], 0, "%s ties y[%d]", profile, i);
  for (int i = 0; i < 20; i++)
    UTIL_CLOSE(dx[i], dxd[i], 0, "%s ties dx[%d]", profile, i);
  kiln_buffer_destroy(xb);
  kiln_buffer_destroy(yb);
  kiln_buffer_destroy(gb);
  kiln_buffer_destroy(dxb);
}

static void test_pool_ties(void **state) {
  (void)state;
  train_each_profile(ties_body);
}

/* The same rules through 2x2 stride 2 windows (the CPU family's vector
 * lanes and the element after them): 1 x 1 x 4 x 10, ten windows holding
 * ties, NaNs at every position of a window, a NaN after a larger value,
 * two NaNs, -inf; max and mean, forward and backward, exactly as the
 * reference. */
static void ties_2x2_body(kiln_context *ctx, kiln_queue *q,
                          const char *profile) {
  const float inf = INFINITY;
  /* window w covers rows 2 (w / 5) .. + 1, columns 2 (w % 5) .. + 1 */
  const float x[40] = {
      1, 1,    NAN, 2, 5, 1,    -inf, -inf, 3, NAN,
      1, 1,    2,   7, 9, NAN,  -inf, -inf, 3, 3,
      NAN, NAN, 4,  4, 0, -0.0f, 1,   NAN,  2, 2,
      0, 0,    4,   4, 0, 0,    2,    1,    2, NAN};
  float y[10], dx[40], dy[10];
  for (int i = 0; i < 10; i++)
    dy[i] = (float)(i + 1) * 0.75f;
  kiln_buffer *xb = util_upload(ctx, q, KILN_F32, x, 40);
  kiln_buffer *yb = util_buffer(ctx, 10 * 4, 0);
  kiln_buffer *gb = util_upload(ctx, q, KILN_F32, dy, 10);
  kiln_buffer *dxb = util_buffer(ctx, 40 * 4, 0);
  kiln_pool2d_params p = {.kernel_h = 2, .kernel_w = 2};
  kiln_image xi = image_at(xb, 0, 1, 1, 4, 10, KILN_F32);
  kiln_image yi = image_at(yb, 0, 1, 1, 2, 5, KILN_F32);
  kiln_image gi = image_at(gb, 0, 1, 1, 2, 5, KILN_F32);
  kiln_image dxi = image_at(dxb, 0, 1, 1, 4, 10, KILN_F32);
  struct pool_case pc = {1, 1, 4, 10, 2, 2, 2, 2, 0, 0};
  double xd[40], yd[10], gd[10], dxd[40];
  for (int i = 0; i < 40; i++)
    xd[i] = x[i];
  for (int i = 0; i < 10; i++)
    gd[i] = dy[i];
  for (int mode = 0; mode < 2; mode++) {
    kiln_pool_op op = mode == 0 ? KILN_POOL_MAX : KILN_POOL_MEAN;
    assert_kiln_ok(kiln_pool2d(q, op, &xi, &yi, &p, 0, NULL, NULL));
    assert_kiln_ok(
        kiln_pool2d_backward(q, op, &xi, &gi, &dxi, &p, 0, NULL, NULL));
    assert_kiln_ok(kiln_buffer_read_sync(q, RANGE(yb, 0, 10, KILN_F32), y));
    assert_kiln_ok(kiln_buffer_read_sync(q, RANGE(dxb, 0, 40, KILN_F32), dx));
    ref_pool(op, false, &pc, xd, yd, gd, dxd);
    for (int i = 0; i < 10; i++)
      UTIL_CLOSE(y[i], yd[i], 0, "%s 2x2 op %d y[%d]", profile, mode, i);
    for (int i = 0; i < 40; i++)
      UTIL_CLOSE(dx[i], dxd[i], 0, "%s 2x2 op %d dx[%d]", profile, mode, i);
  }
  assert_true(isnan(yd[1]) && isnan(yd[4]) && yd[3] == -inf);
  kiln_buffer_destroy(xb);
  kiln_buffer_destroy(yb);
  kiln_buffer_destroy(gb);
  kiln_buffer_destroy(dxb);
}

static void test_pool_ties_2x2(void **state) {
  (void)state;
  train_each_profile(ties_2x2_body);
}

/* ---- bad input ---------------------------------------------------------------- */

static void test_bad_args(void **state) {
  (void)state;
  if (kiln_test_device_count() == 0)
    KILN_TEST_SKIP("no device");
  struct util_bad_env e = util_bad_env_open();
  kiln_queue *q = e.q;
  kiln_buffer *big = util_buffer(e.ctx, 4096, 0);
  kiln_image x = image_at(big, 0, 1, 2, 4, 4, KILN_F32);   /* 32 floats */
  kiln_image y = image_at(big, 64, 1, 2, 2, 2, KILN_F32);  /* 8 floats */
  kiln_pool2d_params p = {.kernel_h = 2, .kernel_w = 2};
  const int SM = KILN_ERR_SHAPE_MISMATCH, IA = KILN_ERR_INVALID_ARGUMENT;
  assert_kiln_ok(kiln_pool2d(q, KILN_POOL_MAX, &x, &y, &p, 0, NULL, NULL));
  assert_kiln_error(kiln_pool2d(NULL, KILN_POOL_MAX, &x, &y, &p, 0, NULL, NULL),
                    KILN_ERR_NULL_POINTER, "queue");
  assert_kiln_error(kiln_pool2d(q, (kiln_pool_op)7, &x, &y, &p, 0, NULL, NULL),
                    IA, "op");
  assert_kiln_error(kiln_pool2d(q, KILN_POOL_MAX, &x, &y, NULL, 0, NULL, NULL),
                    KILN_ERR_NULL_POINTER, "params");
  assert_kiln_error(kiln_pool2d(q, KILN_POOL_MAX, NULL, &y, &p, 0, NULL, NULL),
                    KILN_ERR_NULL_POINTER, "x");
  kiln_pool2d_params bad = p;
  bad.kernel_w = 0;
  assert_kiln_error(kiln_pool2d(q, KILN_POOL_MAX, &x, &y, &bad, 0, NULL, NULL),
                    IA, "params->kernel_w");
  bad = p;
  bad.pad_h = 2; /* above half of 2 */
  assert_kiln_error(kiln_pool2d(q, KILN_POOL_MEAN, &x, &y, &bad, 0, NULL, NULL),
                    IA, "params->pad_h");
  bad = (kiln_pool2d_params){.kernel_h = 7, .kernel_w = 2, .pad_h = 1};
  assert_kiln_error(kiln_pool2d(q, KILN_POOL_MAX, &x, &y, &bad, 0, NULL, NULL),
                    SM, "params->kernel_h 7 exceeds x's padded h 6");
  kiln_image y3 = y;
  y3.h = 3;
  assert_kiln_error(kiln_pool2d(q, KILN_POOL_MAX, &x, &y3, &p, 0, NULL, NULL),
                    SM, "y is 1 x 2 x 3 x 2");
  kiln_image yc = y;
  yc.c = 1;
  assert_kiln_error(kiln_pool2d(q, KILN_POOL_MAX, &x, &yc, &p, 0, NULL, NULL),
                    SM, "y is 1 x 1 x 2 x 2");
  kiln_image yd = y;
  yd.dtype = KILN_BF16;
  assert_kiln_error(kiln_pool2d(q, KILN_POOL_MAX, &x, &yd, &p, 0, NULL, NULL),
                    SM, "y dtype bf16 differs from x dtype f32");
  kiln_image xn = x;
  xn.layout = KILN_NHWC;
  assert_kiln_error(kiln_pool2d(q, KILN_POOL_MAX, &xn, &y, &p, 0, NULL, NULL),
                    IA, "x->layout");
  kiln_image xi = x;
  xi.dtype = KILN_I32;
  assert_kiln_error(kiln_pool2d(q, KILN_POOL_MAX, &xi, &y, &p, 0, NULL, NULL),
                    IA, "x dtype");
  kiln_image yo = y;
  yo.offset = 30; /* overlaps x */
  assert_kiln_error(kiln_pool2d(q, KILN_POOL_MAX, &x, &yo, &p, 0, NULL, NULL),
                    IA, "overlap");
  kiln_image xf = image_at(big, 0, 1, 2, 40, 40, KILN_F32);
  kiln_image yf = image_at(big, 0, 1, 2, 20, 20, KILN_F32);
  assert_kiln_error(kiln_pool2d(q, KILN_POOL_MAX, &xf, &yf, &p, 0, NULL, NULL),
                    KILN_ERR_OUT_OF_RANGE, "x");
  kiln_image xo = image_at(e.ob, 0, 1, 2, 2, 2, KILN_F32);
  kiln_image yy = image_at(big, 64, 1, 2, 1, 1, KILN_F32);
  assert_kiln_error(kiln_pool2d(q, KILN_POOL_MAX, &xo, &yy, &p, 0, NULL, NULL),
                    KILN_ERR_WRONG_CONTEXT, "x");
  /* backward: max needs x; dx's and dy's shapes */
  kiln_image dx = image_at(big, 128, 1, 2, 4, 4, KILN_F32);
  assert_kiln_ok(kiln_pool2d_backward(q, KILN_POOL_MEAN, NULL, &y, &dx, &p, 0,
                                      NULL, NULL));
  assert_kiln_error(kiln_pool2d_backward(q, KILN_POOL_MAX, NULL, &y, &dx, &p,
                                         0, NULL, NULL),
                    KILN_ERR_NULL_POINTER, "x");
  assert_kiln_error(kiln_pool2d_backward(q, KILN_POOL_MAX, &x, &y3, &dx, &p, 0,
                                         NULL, NULL),
                    SM, "dy is 1 x 2 x 3 x 2");
  kiln_image dxs = dx;
  dxs.w = 5;
  assert_kiln_error(kiln_pool2d_backward(q, KILN_POOL_MAX, &x, &y, &dxs, &p, 0,
                                         NULL, NULL),
                    SM, "dx is 1 x 2 x 4 x 5 but x is 1 x 2 x 4 x 4");
  assert_kiln_ok(kiln_buffer_destroy(big));
  util_bad_env_close(&e);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_reference_gradients),
      cmocka_unit_test(test_pool),
      cmocka_unit_test(test_pool_ties),
      cmocka_unit_test(test_pool_ties_2x2),
      cmocka_unit_test(test_bad_args),
  };
  return KILN_TEST_RUN("op_image_pool", tests, false);
}
