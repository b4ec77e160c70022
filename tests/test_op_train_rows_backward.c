/* Softmax backward and layernorm backward against float64 host references
 * on awkward shapes, every float dtype, offsets with guard elements, both
 * kernel families, and against float64 finite differences of the forward
 * function; bad input. (Cross-entropy and accuracy: test_op_train_loss.c.)
 *
 * Error bounds (u = 2^-24, n = cols):
 * - softmax backward: dot = sum dy y in f32 (n u sum |dy y|), then
 *   y (dy - dot): |y| (n + 4) u (|dy| + sum |dy y|).
 * - layernorm backward: the statistics as in the forward op ((n/2 + 4) u
 *   relative on rstd), the two row means of g and g xhat within n u of
 *   their absolute sums: |dx| error <= (2n + 20) u rstd (|g| + mean|g| +
 *   |xhat| mean|g xhat|); dscale, dbias within (rows + n + 10) u of the
 *   sums of |dy xhat| and |dy|.
 * f16/bf16 outputs add the store's rounding (util_storage_tol); the
 * finite-difference comparisons add 1e-6 relative for the difference
 * quotient. */
#include "train_test_util.h"

static const size_t shapes[][2] = {{1, 1},    {1, 10},   {256, 10}, {17, 3},
                                   {5, 1021}, {300, 33}, {2, 4099}};
#define NSHAPES (sizeof shapes / sizeof shapes[0])
#define XOFF 3
#define LOFF 2
#define YOFF 5
static const double U = 0x1p-24;

/* The shape the finite-difference functions below see. */
static size_t g_rows, g_cols;

/* softmax backward: L = sum dy . softmax(x), differentiated at x. */
static const double *g_dy;
static double softmax_dot(const double *x) {
  double t = 0;
  for (size_t r = 0; r < g_rows; r++) {
    double m = -INFINITY, s = 0;
    for (size_t c = 0; c < g_cols; c++)
      m = fmax(m, x[r * g_cols + c]);
    for (size_t c = 0; c < g_cols; c++)
      s += exp(x[r * g_cols + c] - m);
    for (size_t c = 0; c < g_cols; c++)
      t += g_dy[r * g_cols + c] * exp(x[r * g_cols + c] - m) / s;
  }
  return t;
}

/* A host array of n doubles (gcc 12 at -O2 cannot see that rows * cols
 * here is small, and warns about a plain malloc(count * 8)). */
static double *doubles(size_t n) {
  double *p = malloc((n ? n : 1) * sizeof *p);
  assert_non_null(p);
  return p;
}

static void softmax_bwd_body(kiln_context *ctx, kiln_queue *q,
                             const char *profile) {
  size_t ndt;
  const kiln_dtype *dts = util_float_dtypes(&ndt);
  for (size_t d = 0; d < ndt; d++)
    for (size_t si = 0; si < NSHAPES; si++) {
      kiln_dtype dt = dts[d];
      size_t rows = shapes[si][0], cols = shapes[si][1], count = rows * cols;
      size_t total = YOFF + count + 3;
      void *x = util_random(dt, total, -3, 3, 61 + (uint32_t)si);
      void *dy = util_random(dt, total, -1, 1, 62 + (uint32_t)si);
      void *dx0 = util_random(dt, total, -1, 1, 63);
      kiln_buffer *xb = util_upload(ctx, q, dt, x, total);
      kiln_buffer *yb = util_upload(ctx, q, dt, x, total);
      kiln_buffer *gb = util_upload(ctx, q, dt, dy, total);
      kiln_buffer *dxb = util_upload(ctx, q, dt, dx0, total);
      assert_kiln_ok(kiln_softmax_rows(q, matrix_of(xb, XOFF, rows, cols, dt),
                                       matrix_of(yb, XOFF, rows, cols, dt), 0,
                                       NULL, NULL));
      void *y = util_download(q, yb, dt, total);
      assert_kiln_ok(kiln_softmax_rows_backward(
          q, MATRIX(yb, XOFF, rows, cols, dt), MATRIX(gb, LOFF, rows, cols, dt),
          MATRIX(dxb, YOFF, rows, cols, dt), 0, NULL, NULL));
      void *dx = util_download(q, dxb, dt, total);
      char what[80];
      snprintf(what, sizeof what, "%s softmax backward %s %zux%zu", profile,
               kiln_dtype_name(dt), rows, cols);
      double *xd = doubles(count), *dyd = doubles(count);
      double *fd = doubles(count);
      for (size_t i = 0; i < count; i++) {
        xd[i] = util_get(dt, x, XOFF + i);
        dyd[i] = util_get(dt, dy, LOFF + i);
      }
      bool small = count <= 2000;
      if (small) {
        g_rows = rows;
        g_cols = cols;
        g_dy = dyd;
        train_fd_grad(softmax_dot, xd, count, fd);
      }
      for (size_t r = 0; r < rows; r++) {
        double dot = 0, adot = 0;
        for (size_t c = 0; c < cols; c++) {
          double yv = util_get(dt, y, XOFF + r * cols + c);
          dot += dyd[r * cols + c] * yv;
          adot += fabs(dyd[r * cols + c] * yv);
        }
        for (size_t c = 0; c < cols; c++) {
          size_t i = r * cols + c;
          double yv = util_get(dt, y, XOFF + i);
          double want = yv * (dyd[i] - dot);
          double tol =
              fabs(yv) * ((double)cols + 4) * U * (fabs(dyd[i]) + adot) +
              util_storage_tol(dt, want);
          UTIL_CLOSE(util_get(dt, dx, YOFF + i), want, tol, "%s at %zu", what,
                     i);
          /* Against the derivative of the exact softmax, for f32 (the
           * stored y of f16/bf16 is itself rounded). */
          if (small && dt == KILN_F32)
            UTIL_CLOSE(util_get(dt, dx, YOFF + i), fd[i],
                       tol + 1e-6 * (fabs(fd[i]) + adot) +
                           ((double)cols + 8) * U * fabs(yv) * adot,
                       "%s fd at %zu", what, i);
        }
      }
      util_check_guard(dt, dx0, dx, YOFF, count, total, what);
      /* In place over dy. */
      assert_kiln_ok(kiln_softmax_rows_backward(
          q, MATRIX(yb, XOFF, rows, cols, dt), MATRIX(gb, LOFF, rows, cols, dt),
          MATRIX(gb, LOFF, rows, cols, dt), 0, NULL, NULL));
      void *dx2 = util_download(q, gb, dt, total);
      for (size_t i = 0; i < count; i++)
        UTIL_CLOSE(util_get(dt, dx2, LOFF + i), util_get(dt, dx, YOFF + i), 0,
                   "%s in place at %zu", what, i);
      free(dx2);
      free(xd);
      free(dyd);
      free(fd);
      free(x);
      free(dy);
      free(dx0);
      free(y);
      free(dx);
      assert_kiln_ok(kiln_buffer_destroy(xb));
      assert_kiln_ok(kiln_buffer_destroy(yb));
      assert_kiln_ok(kiln_buffer_destroy(gb));
      assert_kiln_ok(kiln_buffer_destroy(dxb));
    }
}

static void test_softmax_backward(void **state) {
  (void)state;
  train_each_profile(softmax_bwd_body);
}

/* layernorm: L = sum dy . (xhat scale + bias) with xhat from x and eps. */
static double g_eps;
static const double *g_scale;
static double ln_loss_x(const double *x) {
  double t = 0;
  for (size_t r = 0; r < g_rows; r++) {
    double s = 0, v = 0;
    for (size_t c = 0; c < g_cols; c++)
      s += x[r * g_cols + c];
    double mean = s / (double)g_cols;
    for (size_t c = 0; c < g_cols; c++)
      v += (x[r * g_cols + c] - mean) * (x[r * g_cols + c] - mean);
    double rstd = 1 / sqrt(v / (double)g_cols + g_eps);
    for (size_t c = 0; c < g_cols; c++)
      t += g_dy[r * g_cols + c] * (x[r * g_cols + c] - mean) * rstd *
           (g_scale ? g_scale[c] : 1);
  }
  return t;
}

static void layernorm_bwd_body(kiln_context *ctx, kiln_queue *q,
                               const char *profile) {
  const float eps = 1e-5f;
  size_t ndt;
  const kiln_dtype *dts = util_float_dtypes(&ndt);
  for (size_t d = 0; d < ndt; d++)
    for (size_t si = 0; si < NSHAPES; si++) {
      kiln_dtype dt = dts[d];
      size_t rows = shapes[si][0], cols = shapes[si][1], count = rows * cols;
      size_t total = YOFF + count + 3;
      if (cols == 1)
        continue; /* xhat is 0: nothing to differentiate but dbias */
      void *x = util_random(dt, total, 3, 7, 71 + (uint32_t)si);
      void *dy = util_random(dt, total, -1, 1, 72 + (uint32_t)si);
      void *sc = util_random(dt, cols + 2, 0.5, 1.5, 73);
      void *dx0 = util_random(dt, total, -1, 1, 74);
      float *v0 = util_random(KILN_F32, 2 * cols + 6, -1, 1, 75);
      kiln_buffer *xb = util_upload(ctx, q, dt, x, total);
      kiln_buffer *gb = util_upload(ctx, q, dt, dy, total);
      kiln_buffer *sb = util_upload(ctx, q, dt, sc, cols + 2);
      kiln_buffer *dxb = util_upload(ctx, q, dt, dx0, total);
      kiln_buffer *vb = util_upload(ctx, q, KILN_F32, v0, 2 * cols + 6);
      for (int has_scale = 0; has_scale < 2; has_scale++) {
        assert_kiln_ok(kiln_layernorm_rows_backward(
            q, MATRIX(xb, XOFF, rows, cols, dt),
            has_scale ? RANGE(sb, 1, cols, dt) : NULL,
            MATRIX(gb, LOFF, rows, cols, dt), MATRIX(dxb, YOFF, rows, cols, dt),
            RANGE(vb, 1, cols, KILN_F32), RANGE(vb, cols + 4, cols, KILN_F32),
            eps, 0, NULL, NULL));
        void *dx = util_download(q, dxb, dt, total);
        float *v = util_download(q, vb, KILN_F32, 2 * cols + 6);
        char what[80];
        snprintf(what, sizeof what, "%s layernorm backward %s %zux%zu%s",
                 profile, kiln_dtype_name(dt), rows, cols,
                 has_scale ? " scale" : "");
        /* Bounds gcc cannot see through the shape table (it warns about a
         * wrapped size otherwise). */
        if (count == 0 || count > 1u << 20)
          fail_msg("shape %zu x %zu", rows, cols);
        double *xd = malloc(count * 8), *dyd = malloc(count * 8);
        double *scd = malloc(cols * 8), *fd = malloc(count * 8);
        for (size_t i = 0; i < count; i++) {
          xd[i] = util_get(dt, x, XOFF + i);
          dyd[i] = util_get(dt, dy, LOFF + i);
        }
        for (size_t c = 0; c < cols; c++)
          scd[c] = has_scale ? util_get(dt, sc, 1 + c) : 1;
        bool small = count <= 2000;
        g_rows = rows;
        g_cols = cols;
        g_dy = dyd;
        g_eps = eps;
        g_scale = scd;
        if (small)
          train_fd_grad(ln_loss_x, xd, count, fd);
        double *ds = calloc(cols, 8), *dbs = calloc(cols, 8);
        double *dsa = calloc(cols, 8), *dba = calloc(cols, 8);
        double *dsd = calloc(cols, 8);
        const double n = (double)cols;
        for (size_t r = 0; r < rows; r++) {
          const double *xr = xd + r * cols, *gr = dyd + r * cols;
          double s = 0, var = 0, sg = 0, sgx = 0, ag = 0, agx = 0;
          for (size_t c = 0; c < cols; c++)
            s += xr[c];
          double mean = s / n;
          for (size_t c = 0; c < cols; c++)
            var += (xr[c] - mean) * (xr[c] - mean);
          double rstd = 1 / sqrt(var / n + eps), sx = 0;
          for (size_t c = 0; c < cols; c++)
            sx += fabs(xr[c]);
          /* The f32 mean's error (n u mean|x|) moves every xhat by
           * delta rstd. */
          double delta = n * U * sx / n;
          for (size_t c = 0; c < cols; c++) {
            double xh = (xr[c] - mean) * rstd, g = gr[c] * scd[c];
            sg += g;
            sgx += g * xh;
            ag += fabs(g);
            agx += fabs(g * xh);
            ds[c] += gr[c] * xh;
            dbs[c] += gr[c];
            dsa[c] += fabs(gr[c] * xh);
            dsd[c] += fabs(gr[c]) * delta * rstd;
            dba[c] += fabs(gr[c]);
          }
          for (size_t c = 0; c < cols; c++) {
            double xh = (xr[c] - mean) * rstd, g = gr[c] * scd[c];
            double want = rstd * (g - sg / n - xh * sgx / n);
            double tol = (2 * n + 20) * U * rstd *
                             (fabs(g) + ag / n + fabs(xh) * agx / n) +
                         util_storage_tol(dt, want);
            size_t i = r * cols + c;
            UTIL_CLOSE(util_get(dt, dx, YOFF + i), want, tol, "%s dx %zu,%zu",
                       what, r, c);
            if (small)
              UTIL_CLOSE(want, fd[i], 1e-6 * (1 + fabs(fd[i])) * rstd,
                         "%s formula vs fd at %zu,%zu", what, r, c);
          }
        }
        for (size_t c = 0; c < cols; c++) {
          double tol = ((double)rows + n + 10) * U;
          UTIL_CLOSE(v[1 + c], ds[c], tol * dsa[c] + dsd[c] + FLT_MIN,
                     "%s dscale %zu", what, c);
          UTIL_CLOSE(v[cols + 4 + c], dbs[c], tol * dba[c] + FLT_MIN,
                     "%s dbias %zu", what, c);
        }
        /* The guards of the f32 vectors: 0, cols+1..cols+3, the end. */
        assert_true(v[0] == v0[0] && v[cols + 1] == v0[cols + 1] &&
                    v[cols + 3] == v0[cols + 3] &&
                    v[2 * cols + 5] == v0[2 * cols + 5]);
        util_check_guard(dt, dx0, dx, YOFF, count, total, what);
        free(xd);
        free(dyd);
        free(scd);
        free(fd);
        free(ds);
        free(dbs);
        free(dsa);
        free(dsd);
        free(dba);
        free(dx);
        free(v);
      }
      /* dx only, in place over dy, and sums only: the same numbers. */
      void *dxa = util_download(q, dxb, dt, total);
      assert_kiln_ok(kiln_layernorm_rows_backward(
          q, MATRIX(xb, XOFF, rows, cols, dt), RANGE(sb, 1, cols, dt),
          MATRIX(gb, LOFF, rows, cols, dt), MATRIX(gb, LOFF, rows, cols, dt),
          NULL, NULL, eps, 0, NULL, NULL));
      void *dxi = util_download(q, gb, dt, total);
      for (size_t i = 0; i < count; i++)
        UTIL_CLOSE(util_get(dt, dxi, LOFF + i), util_get(dt, dxa, YOFF + i), 0,
                   "%s in place at %zu", profile, i);
      /* In place with the sums too: dscale and dbias must read dy before
       * dx overwrites it (they once read the overwritten values). */
      assert_kiln_ok(kiln_buffer_write_sync(q, dy, RANGE(gb, 0, total, dt)));
      float *vs = util_download(q, vb, KILN_F32, 2 * cols + 6);
      assert_kiln_ok(kiln_layernorm_rows_backward(
          q, MATRIX(xb, XOFF, rows, cols, dt), RANGE(sb, 1, cols, dt),
          MATRIX(gb, LOFF, rows, cols, dt), MATRIX(gb, LOFF, rows, cols, dt),
          RANGE(vb, 1, cols, KILN_F32), RANGE(vb, cols + 4, cols, KILN_F32),
          eps, 0, NULL, NULL));
      float *vi = util_download(q, vb, KILN_F32, 2 * cols + 6);
      void *dxs = util_download(q, gb, dt, total);
      for (size_t c = 0; c < cols; c++) {
        UTIL_CLOSE(vi[1 + c], vs[1 + c], 0, "%s in place dscale %zu", profile,
                   c);
        UTIL_CLOSE(vi[cols + 4 + c], vs[cols + 4 + c], 0,
                   "%s in place dbias %zu", profile, c);
      }
      for (size_t i = 0; i < count; i++)
        UTIL_CLOSE(util_get(dt, dxs, LOFF + i), util_get(dt, dxa, YOFF + i), 0,
                   "%s in place with sums at %zu", profile, i);
      free(vs);
      free(vi);
      free(dxs);
      free(dxa);
      free(dxi);
      free(x);
      free(dy);
      free(sc);
      free(dx0);
      free(v0);
      assert_kiln_ok(kiln_buffer_destroy(xb));
      assert_kiln_ok(kiln_buffer_destroy(gb));
      assert_kiln_ok(kiln_buffer_destroy(sb));
      assert_kiln_ok(kiln_buffer_destroy(dxb));
      assert_kiln_ok(kiln_buffer_destroy(vb));
    }
}

static void test_layernorm_backward(void **state) {
  (void)state;
  train_each_profile(layernorm_bwd_body);
}

static void test_bad_arguments(void **state) {
  (void)state;
  struct util_bad_env env = util_bad_env_open();
  kiln_queue *q = env.q;
  kiln_buffer *b = env.b, *ob = env.ob;
  kiln_buffer *c = util_buffer(env.ctx, 64, 0);
  /* softmax backward */
  assert_kiln_error(
      kiln_softmax_rows_backward(NULL, MATRIX(b, 0, 2, 2, KILN_F32),
                                 MATRIX(b, 0, 2, 2, KILN_F32),
                                 MATRIX(c, 0, 2, 2, KILN_F32), 0, NULL, NULL),
      KILN_ERR_NULL_POINTER, "queue is NULL");
  assert_kiln_error(kiln_softmax_rows_backward(q, MATRIX(b, 0, 2, 2, KILN_F32),
                                               MATRIX(b, 0, 2, 2, KILN_F32),
                                               NULL, 0, NULL, NULL),
                    KILN_ERR_NULL_POINTER, "dx is NULL");
  assert_kiln_error(kiln_softmax_rows_backward(q, MATRIX(b, 0, 2, 2, KILN_F32),
                                               MATRIX(c, 0, 2, 2, KILN_F32),
                                               MATRIX(c, 2, 2, 2, KILN_F32), 0,
                                               NULL, NULL),
                    KILN_ERR_INVALID_ARGUMENT, "overlap");
  assert_kiln_error(kiln_softmax_rows_backward(q, MATRIX(b, 0, 5, 5, KILN_F32),
                                               MATRIX(b, 0, 5, 5, KILN_F32),
                                               MATRIX(c, 0, 5, 5, KILN_F32), 0,
                                               NULL, NULL),
                    KILN_ERR_OUT_OF_RANGE, "y range");
  /* layernorm backward */
  assert_kiln_error(
      kiln_layernorm_rows_backward(NULL, MATRIX(b, 0, 2, 2, KILN_F32), NULL,
                                   MATRIX(b, 0, 2, 2, KILN_F32),
                                   MATRIX(c, 0, 2, 2, KILN_F32), NULL, NULL,
                                   1e-5f, 0, NULL, NULL),
      KILN_ERR_NULL_POINTER, "queue is NULL");
  assert_kiln_error(
      kiln_layernorm_rows_backward(
          q, MATRIX(b, 0, 2, 2, KILN_F32), NULL, MATRIX(b, 0, 2, 2, KILN_F32),
          MATRIX(c, 0, 2, 2, KILN_F32), NULL, NULL, -1, 0, NULL, NULL),
      KILN_ERR_INVALID_ARGUMENT, "eps -1");
  assert_kiln_error(kiln_layernorm_rows_backward(
                        q, MATRIX(b, 0, 2, 2, KILN_F32), NULL,
                        MATRIX(b, 0, 2, 2, KILN_F32),
                        MATRIX(c, 0, 2, 2, KILN_F32), RANGE(c, 2, 2, KILN_F32),
                        NULL, 1e-5f, 0, NULL, NULL),
                    KILN_ERR_INVALID_ARGUMENT, "overlap");
  assert_kiln_error(kiln_layernorm_rows_backward(
                        q, MATRIX(b, 0, 2, 2, KILN_F32), NULL,
                        MATRIX(b, 0, 2, 2, KILN_F32), NULL,
                        RANGE(c, 15, 2, KILN_F32), NULL, 1e-5f, 0, NULL, NULL),
                    KILN_ERR_OUT_OF_RANGE, "dscale range");
  assert_kiln_error(kiln_layernorm_rows_backward(
                        q, MATRIX(b, 0, 2, 2, KILN_F32),
                        RANGE(ob, 0, 2, KILN_F32), MATRIX(b, 0, 2, 2, KILN_F32),
                        MATRIX(c, 0, 2, 2, KILN_F32), NULL, NULL, 1e-5f, 0,
                        NULL, NULL),
                    KILN_ERR_WRONG_CONTEXT, "scale belongs");
  assert_kiln_error(
      kiln_layernorm_rows_backward(q, MATRIX(b, 0, 2, 2, KILN_F32), NULL, NULL,
                                   MATRIX(c, 0, 2, 2, KILN_F32), NULL, NULL,
                                   1e-5f, 0, NULL, NULL),
      KILN_ERR_NULL_POINTER, "dy is NULL");
  /* Operands that disagree with x (or y): shape, dtype, vector lengths. */
  kiln_matrix x = {.buffer = b, .rows = 2, .cols = 3, .dtype = KILN_F32};
  assert_kiln_error(
      kiln_softmax_rows_backward(q, &x, MATRIX(b, 0, 3, 2, KILN_F32),
                                 MATRIX(c, 0, 2, 3, KILN_F32), 0, NULL, NULL),
      KILN_ERR_SHAPE_MISMATCH, "dy is 3x2 but y is 2x3");
  assert_kiln_error(kiln_softmax_rows_backward(q, &x, &x,
                                               MATRIX(c, 0, 2, 3, KILN_BF16), 0,
                                               NULL, NULL),
                    KILN_ERR_SHAPE_MISMATCH, "dx dtype bf16 differs");
  assert_kiln_error(
      kiln_layernorm_rows_backward(q, &x, RANGE(c, 8, 2, KILN_F32), &x,
                                   MATRIX(c, 0, 2, 3, KILN_F32), NULL, NULL,
                                   1e-5f, 0, NULL, NULL),
      KILN_ERR_SHAPE_MISMATCH, "scale has 2 elements but x's cols is 3");
  assert_kiln_error(
      kiln_layernorm_rows_backward(q, &x, RANGE(c, 8, 3, KILN_F16), &x,
                                   MATRIX(c, 0, 2, 3, KILN_F32), NULL, NULL,
                                   1e-5f, 0, NULL, NULL),
      KILN_ERR_SHAPE_MISMATCH, "scale dtype f16 differs");
  assert_kiln_error(
      kiln_layernorm_rows_backward(q, &x, NULL, MATRIX(b, 0, 2, 3, KILN_F16),
                                   MATRIX(c, 0, 2, 3, KILN_F32), NULL, NULL,
                                   1e-5f, 0, NULL, NULL),
      KILN_ERR_SHAPE_MISMATCH, "dy dtype f16 differs");
  assert_kiln_error(kiln_layernorm_rows_backward(q, &x, NULL, &x, NULL,
                                                 RANGE(c, 0, 3, KILN_F16), NULL,
                                                 1e-5f, 0, NULL, NULL),
                    KILN_ERR_INVALID_ARGUMENT, "dscale dtype f16");
  assert_kiln_error(kiln_layernorm_rows_backward(q, &x, NULL, &x, NULL, NULL,
                                                 RANGE(c, 0, 4, KILN_F32),
                                                 1e-5f, 0, NULL, NULL),
                    KILN_ERR_SHAPE_MISMATCH, "dbias has 4 elements");
  assert_kiln_error(kiln_layernorm_rows_backward(q, &x, NULL, &x, NULL, NULL,
                                                 RANGE(NULL, 0, 3, KILN_F32),
                                                 1e-5f, 0, NULL, NULL),
                    KILN_ERR_NULL_POINTER, "dbias->buffer is NULL");
  assert_kiln_ok(kiln_buffer_destroy(c));
  util_bad_env_close(&env);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_softmax_backward),
      cmocka_unit_test(test_layernorm_backward),
      cmocka_unit_test(test_bad_arguments),
  };
  return KILN_TEST_RUN("op_train_rows_backward", tests, true);
}
