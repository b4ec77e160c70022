/* kiln_softmax_rows and kiln_layernorm_rows against double-precision host
 * references for f32, f16 and bf16, on awkward shapes, at offsets, in
 * place; softmax stability on large inputs; layernorm with and without
 * scale and bias; bad input.
 *
 * Error bounds (u = 2^-24; d = x - max, n = cols):
 * - softmax: x - max rounds once (relative error u |d| after exp), exp adds
 *   3 ulp (6u), the row sum at most n u relative (each term also carrying its
 *   exp error), 1/sum 2.5 ulp and the product 1/2 ulp: relative
 *   (max|d| + n + 20) u.
 * - layernorm: the mean errs by at most n u mean|x| (delta), the variance
 *   relatively by about (n + 2) u (delta enters only to second order, since
 *   deviations sum to zero), so 1/sqrt(var + eps) by (n/2 + 4) u; the output
 *   (x - mean) rstd scale + bias then errs by at most
 *   rstd |scale| delta + (n/2 + 10) u |(x - mean) rstd scale| + u |y|.
 * f16/bf16 outputs add the store's rounding (up to one storage ulp after an
 * f32 error) and half a subnormal step below the smallest normal. */
#include <stdio.h>

#include "harness.h"
#include "op_test_util.h"

static const size_t shapes[][2] = {{1, 1},   {3, 17},   {17, 3},  {5, 1021},
                                   {64, 127}, {2, 4099}, {300, 33}, {1, 16}};
#define NSHAPES (sizeof shapes / sizeof shapes[0])
#define XOFF 3
#define YOFF 5

static void check_softmax(kiln_dtype dt, const void *x, size_t xoff,
                          const void *y, size_t yoff, size_t rows, size_t cols,
                          const char *what) {
  const double u = ldexp(1.0, -24);
  for (size_t r = 0; r < rows; r++) {
    double m = -INFINITY, s = 0, dmax = 0;
    for (size_t c = 0; c < cols; c++)
      m = fmax(m, util_get(dt, x, xoff + r * cols + c));
    for (size_t c = 0; c < cols; c++) {
      double d = util_get(dt, x, xoff + r * cols + c) - m;
      s += exp(d);
      dmax = fmax(dmax, fabs(d));
    }
    for (size_t c = 0; c < cols; c++) {
      double want = exp(util_get(dt, x, xoff + r * cols + c) - m) / s;
      double tol =
          (dmax + (double)cols + 20) * u * want + util_storage_tol(dt, want);
      UTIL_CLOSE(util_get(dt, y, yoff + r * cols + c), want, tol,
                 "%s row %zu col %zu", what, r, c);
    }
  }
}

static void check_layernorm(kiln_dtype dt, const void *x, size_t xoff,
                            const void *g, const void *b, float eps,
                            const void *y, size_t yoff, size_t rows,
                            size_t cols, const char *what) {
  const double u = ldexp(1.0, -24), n = (double)cols;
  for (size_t r = 0; r < rows; r++) {
    double s = 0, sa = 0, v = 0;
    for (size_t c = 0; c < cols; c++) {
      double xv = util_get(dt, x, xoff + r * cols + c);
      s += xv;
      sa += fabs(xv);
    }
    double mean = s / n;
    for (size_t c = 0; c < cols; c++) {
      double dv = util_get(dt, x, xoff + r * cols + c) - mean;
      v += dv * dv;
    }
    double rstd = 1 / sqrt(v / n + eps), delta = n * u * sa / n;
    for (size_t c = 0; c < cols; c++) {
      double gv = g ? util_get(dt, g, c) : 1, bv = b ? util_get(dt, b, c) : 0;
      double core = (util_get(dt, x, xoff + r * cols + c) - mean) * rstd * gv;
      double want = core + bv;
      double tol = rstd * fabs(gv) * delta + (n / 2 + 10) * u * fabs(core) +
                   u * fabs(want) + util_storage_tol(dt, want);
      UTIL_CLOSE(util_get(dt, y, yoff + r * cols + c), want, tol,
                 "%s row %zu col %zu", what, r, c);
    }
  }
}

static void softmax_on_device(kiln_context *ctx, kiln_queue *q) {
  size_t ndt;
  const kiln_dtype *dts = util_float_dtypes(&ndt);
  for (size_t d = 0; d < ndt; d++) {
    kiln_dtype dt = dts[d];
    for (size_t si = 0; si < NSHAPES; si++) {
      size_t rows = shapes[si][0], cols = shapes[si][1], count = rows * cols;
      size_t total = YOFF + count + 3;
      void *x = util_random(dt, total, -8, 8, 3 + (uint32_t)si);
      void *y0 = util_random(dt, total, -1, 1, 4);
      kiln_buffer *xb = util_upload(ctx, q, dt, x, total);
      kiln_buffer *yb = util_upload(ctx, q, dt, y0, total);
      assert_kiln_ok(kiln_softmax_rows(q, dt, rows, cols, xb, XOFF, yb, YOFF, 0,
                                       NULL, NULL));
      void *y = util_download(q, yb, dt, total);
      char what[64];
      snprintf(what, sizeof what, "softmax %s %zux%zu", kiln_dtype_name(dt),
               rows, cols);
      check_softmax(dt, x, XOFF, y, YOFF, rows, cols, what);
      util_check_guard(dt, y0, y, YOFF, count, total, what);
      free(y);
      /* In place. */
      assert_kiln_ok(kiln_softmax_rows(q, dt, rows, cols, xb, XOFF, xb, XOFF, 0,
                                       NULL, NULL));
      y = util_download(q, xb, dt, total);
      check_softmax(dt, x, XOFF, y, XOFF, rows, cols, "in place");
      free(y);
      assert_kiln_ok(kiln_buffer_destroy(xb));
      assert_kiln_ok(kiln_buffer_destroy(yb));
      free(x);
      free(y0);
    }
  }
  /* Large inputs: exp(1000) overflows, exp(x - max) does not. */
  float big[40];
  for (int i = 0; i < 40; i++)
    big[i] = 1000.0f + (float)(i % 7);
  kiln_buffer *bb = util_upload(ctx, q, KILN_F32, big, 40);
  assert_kiln_ok(
      kiln_softmax_rows(q, KILN_F32, 2, 20, bb, 0, bb, 0, 0, NULL, NULL));
  float *out = util_download(q, bb, KILN_F32, 40);
  check_softmax(KILN_F32, big, 0, out, 0, 2, 20, "large inputs");
  free(out);
  assert_kiln_ok(kiln_buffer_destroy(bb));
}

static void test_softmax(void **state) {
  (void)state;
  util_each_device(softmax_on_device);
}

static void layernorm_on_device(kiln_context *ctx, kiln_queue *q) {
  size_t ndt;
  const kiln_dtype *dts = util_float_dtypes(&ndt);
  const float eps = 1e-5f;
  for (size_t d = 0; d < ndt; d++) {
    kiln_dtype dt = dts[d];
    for (size_t si = 0; si < NSHAPES; si++) {
      size_t rows = shapes[si][0], cols = shapes[si][1], count = rows * cols;
      size_t total = YOFF + count + 3;
      /* An offset mean (5) with spread 2: the two-pass variance matters. */
      void *x = util_random(dt, total, 3, 7, 13 + (uint32_t)si);
      void *g = util_random(dt, cols + 2, 0.5, 1.5, 14);
      void *b = util_random(dt, cols + 2, -1, 1, 15);
      void *y0 = util_random(dt, total, -1, 1, 16);
      kiln_buffer *xb = util_upload(ctx, q, dt, x, total);
      kiln_buffer *gb = util_upload(ctx, q, dt, g, cols + 2);
      kiln_buffer *bb = util_upload(ctx, q, dt, b, cols + 2);
      kiln_buffer *yb = util_upload(ctx, q, dt, y0, total);
      for (int variant = 0; variant < 4; variant++) {
        bool has_g = variant & 1, has_b = variant & 2;
        assert_kiln_ok(kiln_layernorm_rows(
            q, dt, rows, cols, xb, XOFF, has_g ? gb : NULL, 2,
            has_b ? bb : NULL, 1, eps, yb, YOFF, 0, NULL, NULL));
        void *y = util_download(q, yb, dt, total);
        char what[80];
        snprintf(what, sizeof what, "layernorm %s %zux%zu%s%s",
                 kiln_dtype_name(dt), rows, cols, has_g ? " scale" : "",
                 has_b ? " bias" : "");
        size_t es = kiln_dtype_size(dt);
        check_layernorm(dt, x, XOFF, has_g ? (char *)g + 2 * es : NULL,
                        has_b ? (char *)b + 1 * es : NULL, eps, y, YOFF, rows,
                        cols, what);
        util_check_guard(dt, y0, y, YOFF, count, total, what);
        free(y);
      }
      assert_kiln_ok(kiln_layernorm_rows(q, dt, rows, cols, xb, XOFF, gb, 0, bb,
                                         0, eps, xb, XOFF, 0, NULL, NULL));
      void *y = util_download(q, xb, dt, total);
      check_layernorm(dt, x, XOFF, g, b, eps, y, XOFF, rows, cols,
                      "layernorm in place");
      free(y);
      assert_kiln_ok(kiln_buffer_destroy(xb));
      assert_kiln_ok(kiln_buffer_destroy(gb));
      assert_kiln_ok(kiln_buffer_destroy(bb));
      assert_kiln_ok(kiln_buffer_destroy(yb));
      free(x);
      free(g);
      free(b);
      free(y0);
    }
  }
}

static void test_layernorm(void **state) {
  (void)state;
  util_each_device(layernorm_on_device);
}

static void zero_size_on_device(kiln_context *ctx, kiln_queue *q) {
  kiln_buffer *b = util_buffer(ctx, 16, 0);
  kiln_event *e = NULL, *e2 = NULL;
  assert_kiln_ok(kiln_softmax_rows(q, KILN_F32, 0, 9, b, 0, b, 0, 0, NULL, &e));
  assert_kiln_ok(kiln_layernorm_rows(q, KILN_BF16, 0, 0, b, 0, NULL, 0, NULL, 0,
                                     1e-5f, b, 0, 1, &e, &e2));
  assert_kiln_ok(kiln_event_wait(e2));
  kiln_event_release(e);
  kiln_event_release(e2);
  assert_kiln_ok(kiln_buffer_destroy(b));
}

static void test_zero_size(void **state) {
  (void)state;
  util_each_device(zero_size_on_device);
}

static void test_bad_arguments(void **state) {
  (void)state;
  struct util_bad_env env = util_bad_env_open();
  kiln_queue *q = env.q;
  kiln_buffer *b = env.b, *ob = env.ob;
  kiln_buffer *c = util_buffer(env.ctx, 64, 0);
  assert_kiln_error(
      kiln_softmax_rows(NULL, KILN_F32, 2, 2, b, 0, c, 0, 0, NULL, NULL),
      KILN_ERR_NULL_POINTER, "kiln_softmax_rows: queue is NULL");
  assert_kiln_error(
      kiln_softmax_rows(q, KILN_I32, 2, 2, b, 0, c, 0, 0, NULL, NULL),
      KILN_ERR_INVALID_ARGUMENT, "dtype i32");
  assert_kiln_error(
      kiln_softmax_rows(q, KILN_F32, 2, 0, b, 0, c, 0, 0, NULL, NULL),
      KILN_ERR_INVALID_SIZE, "cols is 0 with rows 2");
  assert_kiln_error(
      kiln_softmax_rows(q, KILN_F32, 4, 5, b, 0, c, 0, 0, NULL, NULL),
      KILN_ERR_OUT_OF_RANGE, "x range [offset 0, +20 elements of f32)");
  assert_kiln_error(
      kiln_softmax_rows(q, KILN_F32, SIZE_MAX, 2, b, 0, c, 0, 0, NULL, NULL),
      KILN_ERR_INVALID_SIZE, "overflows");
  assert_kiln_status(
      kiln_softmax_rows(q, KILN_F32, 2, 2, b, 0, ob, 0, 0, NULL, NULL),
      KILN_ERR_WRONG_CONTEXT);
  assert_kiln_error(
      kiln_softmax_rows(q, KILN_F32, 2, 2, b, 0, NULL, 0, 0, NULL, NULL),
      KILN_ERR_NULL_POINTER, "y is NULL");
  assert_kiln_error(
      kiln_softmax_rows(q, KILN_F32, 2, 2, b, 0, b, 1, 0, NULL, NULL),
      KILN_ERR_INVALID_ARGUMENT, "overlap");

  assert_kiln_error(kiln_layernorm_rows(q, KILN_F32, 2, 4, b, 0, NULL, 0, NULL,
                                        0, -1.0f, c, 0, 0, NULL, NULL),
                    KILN_ERR_INVALID_ARGUMENT,
                    "eps -1 must be finite and >= 0");
  assert_kiln_status(kiln_layernorm_rows(q, KILN_F32, 2, 4, b, 0, NULL, 0, NULL,
                                         0, NAN, c, 0, 0, NULL, NULL),
                     KILN_ERR_INVALID_ARGUMENT);
  assert_kiln_error(kiln_layernorm_rows(q, KILN_F32, 2, 4, b, 0, c, 14, NULL, 0,
                                        1e-5f, c, 0, 0, NULL, NULL),
                    KILN_ERR_OUT_OF_RANGE,
                    "scale range [offset 14, +4 elements of f32)");
  assert_kiln_error(kiln_layernorm_rows(q, KILN_F32, 2, 4, b, 0, NULL, 0, ob, 0,
                                        1e-5f, c, 0, 0, NULL, NULL),
                    KILN_ERR_WRONG_CONTEXT,
                    "bias belongs to a different context");
  assert_kiln_status(kiln_layernorm_rows(q, KILN_F32, 2, 4, b, 0, c, 0, NULL, 0,
                                         1e-5f, c, 9, 0, NULL, NULL),
                     KILN_ERR_OUT_OF_RANGE);
  assert_kiln_error(kiln_layernorm_rows(q, KILN_F32, 1, 4, b, 0, c, 2, NULL, 0,
                                        1e-5f, c, 0, 0, NULL, NULL),
                    KILN_ERR_INVALID_ARGUMENT, "scale bytes");
  assert_kiln_error(kiln_layernorm_rows(q, KILN_BF16, 2, 4, NULL, 0, NULL, 0,
                                        NULL, 0, 1e-5f, c, 0, 0, NULL, NULL),
                    KILN_ERR_NULL_POINTER, "kiln_layernorm_rows: x is NULL");
  assert_kiln_ok(kiln_buffer_destroy(c));
  util_bad_env_close(&env);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_softmax),
      cmocka_unit_test(test_layernorm),
      cmocka_unit_test(test_zero_size),
      cmocka_unit_test(test_bad_arguments),
  };
  return KILN_TEST_RUN("op_rows", tests, true);
}
