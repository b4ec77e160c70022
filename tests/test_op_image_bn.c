/* Batch normalisation (kiln_batchnorm_train, kiln_batchnorm_inference,
 * kiln_batchnorm_backward of kiln/kiln_ops_image.h) against float64 host
 * references on awkward shapes (1x1 images, primes, channels 1 and 3,
 * batch 1), every float dtype, offsets with guard elements, both kernel
 * families; the reference's gradients against float64 finite differences
 * of its forward function; the running statistics after two steps against
 * the textbook formula; determinism; bad input. Pooling is
 * test_op_image_pool.c.
 *
 * Error bounds (u = 2^-24; the references read the stored, rounded inputs,
 * so only the kernels' f32 arithmetic and the final store differ):
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

static const double *g_w; /* weights of the scalar loss sum w . f(x) */
static size_t g_n, g_c, g_hw;
static double g_eps;
static const double *g_gamma, *g_beta;

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

/* The reference's backward pass (dx, dgamma, dbeta) is the gradient of its
 * forward one. */
static void test_reference_gradients(void **state) {
  (void)state;
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
  kiln_image x = image_at(big, 0, 1, 2, 4, 4, KILN_F32); /* 32 floats */
  const int SM = KILN_ERR_SHAPE_MISMATCH, IA = KILN_ERR_INVALID_ARGUMENT;
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
                    SM, "dy is 1 x 1 x 4 x 4 but x is 1 x 2 x 4 x 4");  assert_kiln_ok(kiln_buffer_destroy(big));
  util_bad_env_close(&e);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_reference_gradients),
      cmocka_unit_test(test_bn_train),
      cmocka_unit_test(test_bn_inference),
      cmocka_unit_test(test_bn_backward),
      cmocka_unit_test(test_determinism),
      cmocka_unit_test(test_bad_args),
  };
  return KILN_TEST_RUN("op_image_bn", tests, false);
}
