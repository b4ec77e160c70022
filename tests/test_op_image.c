/* Pooling and batch normalisation (kiln/kiln_ops_image.h) against float64
 * host references on awkward shapes (1x1 images, primes, stride above the
 * window, channels 1 and 3, batch 1), every float dtype, offsets with guard
 * elements, both kernel families; the references' gradients against float64
 * finite differences of their forward functions; max-pooling ties and NaN;
 * batch normalisation's running statistics after two steps against the
 * textbook formula; determinism; bad input.
 *
 * Error bounds (u = 2^-24; the references read the stored, rounded inputs,
 * so only the kernels' f32 arithmetic and the final store differ):
 * - max pooling forward: exact. Max backward: a sum of at most
 *   cover = ceil(kh / sh) ceil(kw / sw) gradients, (cover + 1) u sum|dy|.
 * - mean pooling: a sum of kh kw terms then a division, (kh kw + 2) u
 *   sum|x| / divisor; backward (cover + 2) u sum|dy| / divisor.
 * - batch statistics: sums over a channel's m elements in some order of
 *   pairwise and sequential steps, each within m u sum|a| (a = x - s, the
 *   shift); so the mean within m u mean|a| + u |mean|, the variance within
 *   3 m u mean(a^2) + 2 |d| err(d) (d = mean - s), rstd within err(var) /
 *   (2 (var + eps)) + 4 u relative, y within |gamma| (rstd err(mean) +
 *   |x - mean| err(rstd)) + 4 u (|y| + |beta|).
 * - backward: dbeta and dgamma within m u sum|dy| and m u sum|dy xhat| (+ a
 *   few u of the rounding of xhat); dx within |gamma| rstd (err(dbeta) / m +
 *   |xhat| err(dgamma) / m) + 6 u |gamma rstd| (|dy| + mean|dy| + |xhat|
 *   mean|dy xhat|).
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

/* y = (x - mean) rstd gamma + beta (gamma, beta NULL: 1, 0). */
static void ref_bn_apply(size_t n, size_t c, size_t hw, const double *x,
                         const double *mean, const double *rstd,
                         const double *gamma, const double *beta, double *y) {
  for (size_t i = 0; i < n; i++)
    for (size_t ch = 0; ch < c; ch++)
      for (size_t e = 0; e < hw; e++) {
        size_t k = (i * c + ch) * hw + e;
        y[k] = (x[k] - mean[ch]) * rstd[ch] * (gamma ? gamma[ch] : 1) +
               (beta ? beta[ch] : 0);
      }
}

/* The backward formula of kiln_batchnorm_backward, given mean and rstd. */
static void ref_bn_backward(size_t n, size_t c, size_t hw, const double *x,
                            const double *gamma, const double *mean,
                            const double *rstd, const double *dy, double *dx,
                            double *dg, double *db) {
  double m = (double)(n * hw);
  for (size_t ch = 0; ch < c; ch++) {
    double sb = 0, sg = 0;
    for (size_t i = 0; i < n; i++)
      for (size_t e = 0; e < hw; e++) {
        size_t k = (i * c + ch) * hw + e;
        sb += dy[k];
        sg += dy[k] * (x[k] - mean[ch]) * rstd[ch];
      }
    dg[ch] = sg;
    db[ch] = sb;
    for (size_t i = 0; i < n; i++)
      for (size_t e = 0; e < hw; e++) {
        size_t k = (i * c + ch) * hw + e;
        double xh = (x[k] - mean[ch]) * rstd[ch];
        dx[k] = (gamma ? gamma[ch] : 1) * rstd[ch] *
                (dy[k] - sb / m - xh * sg / m);
      }
  }
}

/* ---- finite differences of the references --------------------------------- */

static const struct pool_case *g_pc;
static kiln_pool_op g_op;
static bool g_exclude;
static const double *g_w; /* weights of the scalar loss sum w . f(x) */
static size_t g_n, g_c, g_hw;
static double g_eps;
static const double *g_gamma, *g_beta;

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

/* sum w . batchnorm_train(x; gamma, beta): the loss differentiated in x, and
 * in gamma and beta through the globals. */
static const double *g_x;
static double bn_loss_at(const double *x, const double *gamma,
                         const double *beta) {
  size_t count = g_n * g_c * g_hw;
  double *mean = doubles(g_c), *var = doubles(g_c), *rstd = doubles(g_c);
  double *y = doubles(count), t = 0;
  bn_stats(g_n, g_c, g_hw, x, mean, var);
  for (size_t ch = 0; ch < g_c; ch++)
    rstd[ch] = 1 / sqrt(var[ch] + g_eps);
  ref_bn_apply(g_n, g_c, g_hw, x, mean, rstd, gamma, beta, y);
  for (size_t i = 0; i < count; i++)
    t += g_w[i] * y[i];
  free(mean);
  free(var);
  free(rstd);
  free(y);
  return t;
}
static double bn_loss_x(const double *x) {
  return bn_loss_at(x, g_gamma, g_beta);
}
static double bn_loss_gamma(const double *gamma) {
  return bn_loss_at(g_x, gamma, g_beta);
}
static double bn_loss_beta(const double *beta) {
  return bn_loss_at(g_x, g_gamma, beta);
}

static void expect_close_arrays(const char *what, const double *got,
                                const double *want, size_t n, double rel) {
  double scale = 0;
  for (size_t i = 0; i < n; i++)
    scale = fmax(scale, fabs(want[i]));
  for (size_t i = 0; i < n; i++)
    UTIL_CLOSE(got[i], want[i], rel * (1 + scale), "%s [%zu]", what, i);
}

/* The references' backward passes are the gradients of their forward ones. */
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
  /* batch normalisation: dx, dgamma, dbeta */
  g_n = 3;
  g_c = 2;
  g_hw = 5;
  g_eps = 1e-3;
  size_t count = g_n * g_c * g_hw;
  double *x = doubles(count), *w = doubles(count), *gx = doubles(count);
  double *dx = doubles(count), gamma[2] = {1.5, -0.7}, beta[2] = {0.3, 0.1};
  double mean[2], var[2], rstd[2], dg[2], db[2], fg[2], fb[2];
  float *f = malloc(2 * count * sizeof *f);
  assert_non_null(f);
  kiln_test_fill_random(f, 2 * count, -1, 1, 99);
  for (size_t k = 0; k < count; k++) {
    x[k] = 2 + f[k];
    w[k] = f[count + k];
  }
  g_w = w;
  g_gamma = gamma;
  g_beta = beta;
  g_x = x;
  bn_stats(g_n, g_c, g_hw, x, mean, var);
  for (int ch = 0; ch < 2; ch++)
    rstd[ch] = 1 / sqrt(var[ch] + g_eps);
  ref_bn_backward(g_n, g_c, g_hw, x, gamma, mean, rstd, w, dx, dg, db);
  train_fd_grad(bn_loss_x, x, count, gx);
  expect_close_arrays("batchnorm reference dx", dx, gx, count, 1e-6);
  train_fd_grad(bn_loss_gamma, gamma, 2, fg);
  expect_close_arrays("batchnorm reference dgamma", dg, fg, 2, 1e-6);
  train_fd_grad(bn_loss_beta, beta, 2, fb);
  expect_close_arrays("batchnorm reference dbeta", db, fb, 2, 1e-6);
  free(x);
  free(w);
  free(gx);
  free(dx);
  free(f);
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
#define XOFF 3
#define YOFF 5
#define GUARD 4

/* Upload n doubles as dt, at offset off with GUARD random guard elements
 * after; *stored receives the values as stored (rounded), *raw the whole
 * host image for the guard check later. */
static kiln_buffer *upload_at(kiln_context *ctx, kiln_queue *q, kiln_dtype dt,
                              size_t off, size_t n, double lo, double hi,
                              uint32_t seed, double **stored, void **raw) {
  size_t total = off + n + GUARD;
  void *h = util_random(dt, total, lo, hi, seed);
  if (stored != NULL) {
    *stored = doubles(n);
    for (size_t i = 0; i < n; i++)
      (*stored)[i] = util_get(dt, h, off + i);
  }
  kiln_buffer *b = util_upload(ctx, q, dt, h, total);
  if (raw != NULL)
    *raw = h;
  else
    free(h);
  return b;
}

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

/* ---- device tests: batch normalisation ---------------------------------------- */

static const size_t bn_shapes[][4] = {
    {2, 3, 5, 7}, {1, 1, 1, 2},  {4, 1, 1, 1},   {3, 5, 9, 13},
    {1, 2, 17, 19}, {16, 2, 33, 35}, {8, 3, 32, 32},
    {2, 3, 47, 53}, /* planes of two pieces on the CPU family (image.cl) */
};
#define NBN (sizeof bn_shapes / sizeof bn_shapes[0])
#define VOFF 2

static void f32_to_doubles(const float *f, double *d, size_t n) {
  for (size_t i = 0; i < n; i++)
    d[i] = f[i];
}

static void bn_train_body(kiln_context *ctx, kiln_queue *q,
                          const char *profile) {
  size_t ndt;
  const kiln_dtype *dts = util_float_dtypes(&ndt);
  for (size_t d = 0; d < ndt; d++)
    for (size_t si = 0; si < NBN; si++) {
      kiln_dtype dt = dts[d];
      size_t n = bn_shapes[si][0], c = bn_shapes[si][1];
      size_t hw = bn_shapes[si][2] * bn_shapes[si][3], count = n * c * hw;
      size_t m = n * hw;
      bool affine = si % 2 == 0;
      kiln_batchnorm_params prm = KILN_BATCHNORM_PARAMS_INIT;
      prm.momentum = 0.25f;
      uint32_t seed = 300 + (uint32_t)si;
      float *vec = malloc(4 * c * sizeof *vec);
      assert_non_null(vec);
      kiln_test_fill_random(vec, 4 * c, 0.5f, 1.5f, seed);
      /* gamma, beta, running mean, running var: VOFF guards in front */
      kiln_buffer *vb = util_buffer(ctx, (VOFF + 6 * c + GUARD) * 4, 0);
      float *vinit = calloc(VOFF + 6 * c + GUARD, 4);
      assert_non_null(vinit);
      memcpy(vinit + VOFF, vec, 4 * c * sizeof *vec);
      for (size_t i = 0; i < 6 * c + VOFF + GUARD; i++)
        if (i < VOFF || i >= VOFF + 4 * c)
          vinit[i] = -7.0f;
      assert_kiln_ok(kiln_buffer_write_sync(
          q, vinit, RANGE(vb, 0, VOFF + 6 * c + GUARD, KILN_F32)));
      const kiln_range *gamma = affine ? RANGE(vb, VOFF, c, KILN_F32) : NULL;
      const kiln_range *beta = affine ? RANGE(vb, VOFF + c, c, KILN_F32) : NULL;
      const kiln_range *rm = RANGE(vb, VOFF + 2 * c, c, KILN_F32);
      const kiln_range *rv = RANGE(vb, VOFF + 3 * c, c, KILN_F32);
      const kiln_range *saved = RANGE(vb, VOFF + 4 * c, 2 * c, KILN_F32);
      double rmean[64], rvar[64], g[64], b[64], tol_rm[64] = {0},
          tol_rv[64] = {0};
      f32_to_doubles(vec, g, c);
      f32_to_doubles(vec + c, b, c);
      f32_to_doubles(vec + 2 * c, rmean, c);
      f32_to_doubles(vec + 3 * c, rvar, c);
      char what[120];
      for (int step = 0; step < 2; step++) {
        double *x;
        void *yraw;
        /* a mean far from 0 tests the shifted sums */
        kiln_buffer *xb = upload_at(ctx, q, dt, XOFF, count, 2.5 + step,
                                    4.5 + 3 * step, seed + 10 * (uint32_t)step,
                                    &x, NULL);
        kiln_buffer *yb = upload_at(ctx, q, dt, YOFF, count, -1, 1, seed + 1,
                                    NULL, &yraw);
        kiln_image xi = image_at(xb, XOFF, n, c, bn_shapes[si][2],
                                 bn_shapes[si][3], dt);
        kiln_image yi = xi;
        yi.buffer = yb;
        yi.offset = YOFF;
        assert_kiln_ok(kiln_batchnorm_train(q, &xi, gamma, beta, &yi, rm, rv,
                                            saved, &prm, 0, NULL, NULL));
        snprintf(what, sizeof what, "%s batchnorm %s %zux%zux%zux%zu step %d",
                 profile, kiln_dtype_name(dt), n, c, bn_shapes[si][2],
                 bn_shapes[si][3], step);
        double *y = img_download(q, GUARD, yb, dt, YOFF, count, yraw, what);
        float *v = util_download(q, vb, KILN_F32, VOFF + 6 * c + GUARD);
        util_check_guard(KILN_F32, vinit, v, VOFF + 2 * c, 4 * c,
                         VOFF + 6 * c + GUARD, what);
        double mean[64], var[64], rstd[64];
        bn_stats(n, c, hw, x, mean, var);
        double *ry = doubles(count);
        for (size_t ch = 0; ch < c; ch++) {
          rstd[ch] = 1 / sqrt(var[ch] + prm.eps);
          struct bn_tol t =
              bn_tolerance(n, c, hw, x, ch, mean[ch], var[ch], prm.eps);
          /* textbook running statistics, unbiased variance */
          rmean[ch] = (1 - prm.momentum) * rmean[ch] + prm.momentum * mean[ch];
          rvar[ch] = (1 - prm.momentum) * rvar[ch] +
                     prm.momentum * var[ch] * (double)m / (double)(m - 1);
          UTIL_CLOSE(v[VOFF + 4 * c + ch], mean[ch], t.mean,
                     "%s saved mean[%zu]", what, ch);
          UTIL_CLOSE(v[VOFF + 5 * c + ch], rstd[ch],
                     t.rstd_rel * rstd[ch] + 2 * U * rstd[ch],
                     "%s saved rstd[%zu]", what, ch);
          /* step 2's running values carry step 1's errors, scaled by
           * 1 - momentum, plus the f32 rounding of each update */
          tol_rm[ch] = (1 - prm.momentum) * tol_rm[ch] +
                       prm.momentum * t.mean + 4 * U * (fabs(rmean[ch]) + 8);
          tol_rv[ch] = (1 - prm.momentum) * tol_rv[ch] +
                       prm.momentum * t.var * (double)m / (double)(m - 1) +
                       4 * U * (fabs(rvar[ch]) + 8);
          UTIL_CLOSE(v[VOFF + 2 * c + ch], rmean[ch], tol_rm[ch],
                     "%s running_mean[%zu]", what, ch);
          UTIL_CLOSE(v[VOFF + 3 * c + ch], rvar[ch], tol_rv[ch],
                     "%s running_var[%zu]", what, ch);
        }
        ref_bn_apply(n, c, hw, x, mean, rstd, affine ? g : NULL,
                     affine ? b : NULL, ry);
        for (size_t i = 0; i < count; i++) {
          size_t ch = (i / hw) % c;
          struct bn_tol t =
              bn_tolerance(n, c, hw, x, ch, mean[ch], var[ch], prm.eps);
          double ga = affine ? fabs(g[ch]) : 1, be = affine ? fabs(b[ch]) : 0;
          UTIL_CLOSE(y[i], ry[i],
                     bn_tol_y(&t, ga, be, rstd[ch], x[i], mean[ch], ry[i], dt),
                     "%s y[%zu]", what, i);
        }
        free(x);
        free(y);
        free(ry);
        free(v);
        free(yraw);
        kiln_buffer_destroy(xb);
        kiln_buffer_destroy(yb);
      }
      free(vec);
      free(vinit);
      kiln_buffer_destroy(vb);
    }
}

static void test_bn_train(void **state) {
  (void)state;
  train_each_profile(bn_train_body);
}

/* Inference with the running statistics, in place, without affine. */
static void bn_inference_body(kiln_context *ctx, kiln_queue *q,
                              const char *profile) {
  size_t ndt;
  const kiln_dtype *dts = util_float_dtypes(&ndt);
  for (size_t d = 0; d < ndt; d++)
    for (size_t si = 0; si < NBN; si++)
      for (int affine = 0; affine < 2; affine++) {
        kiln_dtype dt = dts[d];
        size_t n = bn_shapes[si][0], c = bn_shapes[si][1];
        size_t hw = bn_shapes[si][2] * bn_shapes[si][3], count = n * c * hw;
        float vec[4 * 8];
        kiln_test_fill_random(vec, 4 * c, 0.5f, 1.5f, 400 + (uint32_t)si);
        kiln_buffer *vb = util_upload(ctx, q, KILN_F32, vec, 4 * c);
        double *x;
        void *raw;
        kiln_buffer *xb = upload_at(ctx, q, dt, XOFF, count, -3, 3,
                                    410 + (uint32_t)si, &x, &raw);
        kiln_image xi = image_at(xb, XOFF, n, c, bn_shapes[si][2],
                                 bn_shapes[si][3], dt);
        kiln_batchnorm_params prm = {1e-3f, 0.5f};
        assert_kiln_ok(kiln_batchnorm_inference(
            q, &xi, affine ? RANGE(vb, 0, c, KILN_F32) : NULL,
            affine ? RANGE(vb, c, c, KILN_F32) : NULL,
            RANGE(vb, 2 * c, c, KILN_F32), RANGE(vb, 3 * c, c, KILN_F32), &xi,
            &prm, 0, NULL, NULL));
        char what[120];
        snprintf(what, sizeof what, "%s batchnorm inference %s shape %zu",
                 profile, kiln_dtype_name(dt), si);
        double *y = img_download(q, GUARD, xb, dt, XOFF, count, raw, what);
        double g[8], b[8], mean[8], rstd[8];
        for (size_t ch = 0; ch < c; ch++) {
          g[ch] = vec[ch];
          b[ch] = vec[c + ch];
          mean[ch] = vec[2 * c + ch];
          rstd[ch] = 1 / sqrt((double)vec[3 * c + ch] + (double)prm.eps);
        }
        double *ry = doubles(count);
        ref_bn_apply(n, c, hw, x, mean, rstd, affine ? g : NULL,
                     affine ? b : NULL, ry);
        for (size_t i = 0; i < count; i++) {
          size_t ch = (i / hw) % c;
          double tol = 8 * U * (fabs(x[i]) + fabs(mean[ch])) * rstd[ch] * 1.5 +
                       8 * U * (fabs(ry[i]) + 1.5) +
                       util_storage_tol(dt, ry[i]);
          UTIL_CLOSE(y[i], ry[i], tol, "%s y[%zu]", what, i);
        }
        free(x);
        free(y);
        free(ry);
        free(raw);
        kiln_buffer_destroy(xb);
        kiln_buffer_destroy(vb);
      }
}

static void test_bn_inference(void **state) {
  (void)state;
  train_each_profile(bn_inference_body);
}

/* Backward against the formula, given the forward's saved statistics; the
 * variants: without gamma, without dx, in place on dy. */
static void bn_backward_body(kiln_context *ctx, kiln_queue *q,
                             const char *profile) {
  size_t ndt;
  const kiln_dtype *dts = util_float_dtypes(&ndt);
  for (size_t d = 0; d < ndt; d++)
    for (size_t si = 0; si < NBN; si++)
      for (int variant = 0; variant < 3; variant++) {
        kiln_dtype dt = dts[d];
        size_t n = bn_shapes[si][0], c = bn_shapes[si][1];
        size_t hw = bn_shapes[si][2] * bn_shapes[si][3], count = n * c * hw;
        double m = (double)(n * hw);
        bool affine = variant != 1, in_place = variant == 2;
        float vec[8 + 2 * 8 + 2 * 8 + GUARD];
        kiln_test_fill_random(vec, c, -1.5f, 1.5f, 500 + (uint32_t)si);
        for (size_t i = c; i < 5 * c + GUARD; i++)
          vec[i] = -9.0f;
        /* gamma [0, c), saved [c, 3c), dgamma [3c, 4c), dbeta [4c, 5c) */
        kiln_buffer *vb = util_upload(ctx, q, KILN_F32, vec, 5 * c + GUARD);
        double *x, *dy;
        void *graw, *dxraw = NULL;
        kiln_buffer *xb = upload_at(ctx, q, dt, XOFF, count, -1, 3,
                                    510 + (uint32_t)si, &x, NULL);
        kiln_buffer *gb = upload_at(ctx, q, dt, YOFF, count, -1, 1,
                                    520 + (uint32_t)si, &dy, &graw);
        kiln_buffer *dxb = in_place ? gb
                                    : upload_at(ctx, q, dt, YOFF, count, -1, 1,
                                                530, NULL, &dxraw);
        kiln_image xi = image_at(xb, XOFF, n, c, bn_shapes[si][2],
                                 bn_shapes[si][3], dt);
        kiln_image gi = image_at(gb, YOFF, n, c, bn_shapes[si][2],
                                 bn_shapes[si][3], dt);
        kiln_image dxi = gi;
        dxi.buffer = dxb;
        kiln_batchnorm_params prm = KILN_BATCHNORM_PARAMS_INIT;
        kiln_buffer *yb = util_buffer(ctx, (XOFF + count) * 4, 0);
        kiln_image yi = xi;
        yi.buffer = yb;
        yi.dtype = dt;
        const kiln_range *gamma = affine ? RANGE(vb, 0, c, KILN_F32) : NULL;
        const kiln_range *saved = RANGE(vb, c, 2 * c, KILN_F32);
        assert_kiln_ok(kiln_batchnorm_train(q, &xi, NULL, NULL, &yi, NULL,
                                            NULL, saved, &prm, 0, NULL, NULL));
        assert_kiln_ok(kiln_batchnorm_backward(
            q, &xi, gamma, saved, &gi, variant == 1 ? NULL : &dxi,
            RANGE(vb, 3 * c, c, KILN_F32), RANGE(vb, 4 * c, c, KILN_F32), 0,
            NULL, NULL));
        char what[120];
        snprintf(what, sizeof what, "%s batchnorm backward %s shape %zu v%d",
                 profile, kiln_dtype_name(dt), si, variant);
        float *v = util_download(q, vb, KILN_F32, 5 * c + GUARD);
        for (size_t i = 5 * c; i < 5 * c + GUARD; i++)
          assert_true(v[i] == -9.0f);
        double g[8], mean[8], rstd[8], rdg[8], rdb[8];
        for (size_t ch = 0; ch < c; ch++) {
          g[ch] = vec[ch];
          mean[ch] = v[c + ch];
          rstd[ch] = v[2 * c + ch];
        }
        double *rdx = doubles(count);
        ref_bn_backward(n, c, hw, x, affine ? g : NULL, mean, rstd, dy, rdx,
                        rdg, rdb);
        double sdy[8] = {0}, sdyx[8] = {0};
        for (size_t i = 0; i < count; i++) {
          size_t ch = (i / hw) % c;
          sdy[ch] += fabs(dy[i]);
          sdyx[ch] += fabs(dy[i] * (x[i] - mean[ch]) * rstd[ch]);
        }
        for (size_t ch = 0; ch < c; ch++) {
          UTIL_CLOSE(v[4 * c + ch], rdb[ch], bn_tol_dbeta(m, sdy[ch]),
                     "%s dbeta[%zu]", what, ch);
          UTIL_CLOSE(v[3 * c + ch], rdg[ch], bn_tol_dgamma(m, sdyx[ch]),
                     "%s dgamma[%zu]", what, ch);
        }
        if (variant != 1) {
          double *dx = img_download(q, GUARD, dxb, dt, YOFF, count,
                                   in_place ? graw : dxraw, what);
          for (size_t i = 0; i < count; i++) {
            size_t ch = (i / hw) % c;
            double k = fabs((affine ? g[ch] : 1) * rstd[ch]);
            double xh = fabs((x[i] - mean[ch]) * rstd[ch]);
            UTIL_CLOSE(dx[i], rdx[i],
                       bn_tol_dx(m, sdy[ch], sdyx[ch], k, xh, dy[i], rdx[i],
                                 dt),
                       "%s dx[%zu]", what, i);
          }
          free(dx);
        }
        free(x);
        free(dy);
        free(v);
        free(rdx);
        free(graw);
        free(dxraw);
        kiln_buffer_destroy(xb);
        kiln_buffer_destroy(gb);
        if (!in_place)
          kiln_buffer_destroy(dxb);
        kiln_buffer_destroy(vb);
        kiln_buffer_destroy(yb);
      }
}

static void test_bn_backward(void **state) {
  (void)state;
  train_each_profile(bn_backward_body);
}

/* Two runs give the same bits (fixed-order sums). */
static void determinism_body(kiln_context *ctx, kiln_queue *q,
                             const char *profile) {
  (void)profile;
  size_t n = 16, c = 3, h = 31, w = 29, count = n * c * h * w;
  float *x = malloc(count * sizeof *x);
  assert_non_null(x);
  kiln_test_fill_random(x, count, -2, 5, 77);
  kiln_buffer *xb = util_upload(ctx, q, KILN_F32, x, count);
  kiln_buffer *yb = util_buffer(ctx, count * 4, 0);
  kiln_buffer *sb = util_buffer(ctx, 4 * c * 4, 0);
  kiln_image xi = image_at(xb, 0, n, c, h, w, KILN_F32);
  kiln_image yi = image_at(yb, 0, n, c, h, w, KILN_F32);
  kiln_batchnorm_params prm = KILN_BATCHNORM_PARAMS_INIT;
  float first[12], again[12];
  for (int run = 0; run < 2; run++) {
    assert_kiln_ok(kiln_batchnorm_train(q, &xi, NULL, NULL, &yi, NULL, NULL,
                                        RANGE(sb, 0, 2 * c, KILN_F32), &prm, 0,
                                        NULL, NULL));
    assert_kiln_ok(kiln_batchnorm_backward(
        q, &xi, NULL, RANGE(sb, 0, 2 * c, KILN_F32), &xi, NULL,
        RANGE(sb, 2 * c, c, KILN_F32), RANGE(sb, 3 * c, c, KILN_F32), 0, NULL,
        NULL));
    assert_kiln_ok(kiln_buffer_read_sync(q, RANGE(sb, 0, 4 * c, KILN_F32),
                                         run == 0 ? first : again));
  }
  assert_memory_equal(first, again, sizeof first);
  free(x);
  kiln_buffer_destroy(xb);
  kiln_buffer_destroy(yb);
  kiln_buffer_destroy(sb);
}

static void test_determinism(void **state) {
  (void)state;
  train_each_profile(determinism_body);
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

  /* batch normalisation */
  kiln_range g = {big, 256, 2, KILN_F32}, b = {big, 258, 2, KILN_F32};
  kiln_range rm = {big, 260, 2, KILN_F32}, rv = {big, 262, 2, KILN_F32};
  kiln_range sv = {big, 264, 4, KILN_F32};
  kiln_image by = image_at(big, 300, 1, 2, 4, 4, KILN_F32);
  kiln_batchnorm_params bp = KILN_BATCHNORM_PARAMS_INIT;
  assert_kiln_ok(kiln_batchnorm_train(q, &x, &g, &b, &by, &rm, &rv, &sv, &bp,
                                      0, NULL, NULL));
  kiln_range g3 = g;
  g3.count = 3;
  assert_kiln_error(kiln_batchnorm_train(q, &x, &g3, &b, &by, &rm, &rv, &sv,
                                         &bp, 0, NULL, NULL),
                    SM, "gamma has 3 elements but x's channels is 2");
  kiln_range bh = b;
  bh.dtype = KILN_F16;
  assert_kiln_error(kiln_batchnorm_train(q, &x, &g, &bh, &by, &rm, &rv, &sv,
                                         &bp, 0, NULL, NULL),
                    IA, "beta dtype");
  kiln_range rv1 = rv;
  rv1.count = 1;
  assert_kiln_error(kiln_batchnorm_train(q, &x, &g, &b, &by, &rm, &rv1, &sv,
                                         &bp, 0, NULL, NULL),
                    SM, "running_var has 1 elements");
  assert_kiln_error(kiln_batchnorm_train(q, &x, &g, &b, &by, &rm, NULL, &sv,
                                         &bp, 0, NULL, NULL),
                    KILN_ERR_NULL_POINTER, "running_var is NULL");
  kiln_range sv2 = sv;
  sv2.count = 2;
  assert_kiln_error(kiln_batchnorm_train(q, &x, &g, &b, &by, &rm, &rv, &sv2,
                                         &bp, 0, NULL, NULL),
                    SM, "saved has 2 elements but 2 * x's channels is 4");
  kiln_batchnorm_params bad_bp = {-1, 0.1f};
  assert_kiln_error(kiln_batchnorm_train(q, &x, &g, &b, &by, &rm, &rv, &sv,
                                         &bad_bp, 0, NULL, NULL),
                    IA, "params->eps");
  bad_bp = (kiln_batchnorm_params){1e-5f, 1.5f};
  assert_kiln_error(kiln_batchnorm_train(q, &x, &g, &b, &by, &rm, &rv, &sv,
                                         &bad_bp, 0, NULL, NULL),
                    IA, "params->momentum");
  kiln_image one = image_at(big, 0, 1, 2, 1, 1, KILN_F32);
  kiln_image one_y = image_at(big, 300, 1, 2, 1, 1, KILN_F32);
  assert_kiln_error(kiln_batchnorm_train(q, &one, &g, &b, &one_y, &rm, &rv,
                                         &sv, &bp, 0, NULL, NULL),
                    KILN_ERR_INVALID_SIZE, "at least 2");
  kiln_image byd = by;
  byd.dtype = KILN_F16;
  assert_kiln_error(kiln_batchnorm_train(q, &x, &g, &b, &byd, &rm, &rv, &sv,
                                         &bp, 0, NULL, NULL),
                    SM, "y dtype f16 differs from x dtype f32");
  kiln_range rmo = {big, 300, 2, KILN_F32}; /* inside y */
  assert_kiln_error(kiln_batchnorm_train(q, &x, &g, &b, &by, &rmo, &rv, &sv,
                                         &bp, 0, NULL, NULL),
                    KILN_ERR_INVALID_ARGUMENT, "overlap");
  assert_kiln_error(kiln_batchnorm_inference(q, &x, &g, &b, NULL, &rv, &by,
                                             &bp, 0, NULL, NULL),
                    KILN_ERR_NULL_POINTER, "running_mean");
  assert_kiln_error(kiln_batchnorm_inference(q, &x, &g, &b, &rm, &rv1, &by,
                                             &bp, 0, NULL, NULL),
                    SM, "running_var has 1 elements");
  assert_kiln_ok(kiln_batchnorm_inference(q, &x, &g, &b, &rm, &rv, &x, &bp, 0,
                                          NULL, NULL));
  kiln_range dg = {big, 270, 2, KILN_F32}, db = {big, 272, 2, KILN_F32};
  assert_kiln_ok(kiln_batchnorm_backward(q, &x, &g, &sv, &by, &by, &dg, &db, 0,
                                         NULL, NULL));
  assert_kiln_error(kiln_batchnorm_backward(q, &x, &g, &sv, &by, NULL, NULL,
                                            NULL, 0, NULL, NULL),
                    KILN_ERR_NULL_POINTER, "all NULL");
  assert_kiln_error(kiln_batchnorm_backward(q, &x, &g, NULL, &by, &by, &dg, &db,
                                            0, NULL, NULL),
                    KILN_ERR_NULL_POINTER, "saved");
  kiln_range dg3 = dg;
  dg3.count = 3;
  assert_kiln_error(kiln_batchnorm_backward(q, &x, &g, &sv, &by, &by, &dg3, &db,
                                            0, NULL, NULL),
                    SM, "dgamma has 3 elements");
  kiln_image dyc = by;
  dyc.c = 1;
  assert_kiln_error(kiln_batchnorm_backward(q, &x, &g, &sv, &dyc, &by, &dg, &db,
                                            0, NULL, NULL),
                    SM, "dy is 1 x 1 x 4 x 4 but x is 1 x 2 x 4 x 4");
  assert_kiln_ok(kiln_buffer_destroy(big));
  util_bad_env_close(&e);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_reference_gradients),
      cmocka_unit_test(test_pool),
      cmocka_unit_test(test_pool_ties),
      cmocka_unit_test(test_pool_ties_2x2),
      cmocka_unit_test(test_bn_train),
      cmocka_unit_test(test_bn_inference),
      cmocka_unit_test(test_bn_backward),
      cmocka_unit_test(test_determinism),
      cmocka_unit_test(test_bad_args),
  };
  return KILN_TEST_RUN("op_image", tests, false);
}
