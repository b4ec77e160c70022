/* Elementwise ops (kiln_unary, kiln_binary, kiln_binary_scalar, kiln_axpy,
 * kiln_scale, kiln_fill) against host references in double, for f32, f16
 * and bf16 storage, at sizes 0, 1, primes and non-multiples of the
 * work-group size, at offsets into larger buffers whose other elements must
 * stay untouched; zero-size ops that still complete their event; bad input
 * for every entry point.
 *
 * Tolerances, with ulp = 2 u (u the unit roundoff: 2^-24 for f32):
 * - neg, abs, relu, max, min, fill: exact.
 * - add, sub, mul: one IEEE rounding in f32, <= 1/2 ulp.
 * - div: OpenCL 1.2 allows 2.5 ulp for single-precision division.
 * - exp, log, sqrt: OpenCL allows 3 ulp; tanh 5 ulp.
 * - sigmoid = 1/(1+e) or e/(1+e) with e = exp(-|x|): 3 ulp from exp (scaled
 *   by e/(1+e) <= 1), 2.5 from the division, 1/2 from the addition and 1/2
 *   from the product: under 7 ulp, we allow 8.
 * - gelu = 0.5 x (1 + tanh(z)): for negative x, 1 + tanh(z) cancels, so the
 *   error is absolute, about 0.5 |x| times tanh's 5 ulp of 1, plus relative
 *   terms from z; we allow 16 u (|gelu| + |x|).
 * - axpy: one rounding of an fma, 1/2 ulp; scale: one product, 1/2 ulp.
 * f16 and bf16 add the final store's rounding, 1/2 ulp of the storage
 * format, which an f32 error can push to a full ulp, and below the format's
 * smallest normal the error is absolute (half its subnormal step); f32
 * results may flush denormals (OpenCL allows it without CL_FP_DENORM), so
 * FLT_MIN is allowed absolutely. */
#include <stdio.h>

#include "harness.h"
#include "op_test_util.h"

/* 70001: whole work-groups of the GPU family's largest (1024 items of 8
 * vectors of 8) before the cut one. */
static const size_t sizes[] = {0, 1, 3, 17, 127, 1021, 4099, 70001};
#define NSIZES (sizeof sizes / sizeof sizes[0])
#define MAXN 70001
/* Element offsets into the larger buffers (XOFF < YOFF): test_space_
 * elementwise.c also runs the checks at offsets aligned to the GPU
 * family's vectors. */
static size_t xoff_ = 3, yoff_ = 5;
#define XOFF xoff_
#define YOFF yoff_
#define GUARD 7 /* elements after the range that must stay untouched */

struct unary_case {
  kiln_unary_op op;
  const char *name;
  double lo, hi;
};
static const struct unary_case unary_cases[] = {
    {KILN_UNARY_NEG, "neg", -10, 10},     {KILN_UNARY_ABS, "abs", -10, 10},
    {KILN_UNARY_EXP, "exp", -10, 10},     {KILN_UNARY_LOG, "log", 1e-3, 1e3},
    {KILN_UNARY_SQRT, "sqrt", 0, 1e4},    {KILN_UNARY_RELU, "relu", -10, 10},
    {KILN_UNARY_GELU, "gelu", -10, 10},   {KILN_UNARY_SIGMOID, "sigmoid", -20, 20},
    {KILN_UNARY_TANH, "tanh", -10, 10},
};

static double unary_ref(kiln_unary_op op, double x) {
  switch (op) {
  case KILN_UNARY_NEG:
    return -x;
  case KILN_UNARY_ABS:
    return fabs(x);
  case KILN_UNARY_EXP:
    return exp(x);
  case KILN_UNARY_LOG:
    return log(x);
  case KILN_UNARY_SQRT:
    return sqrt(x);
  case KILN_UNARY_RELU:
    return x < 0 ? 0 : x;
  case KILN_UNARY_GELU:
    return 0.5 * x * (1 + tanh(sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
  case KILN_UNARY_SIGMOID:
    return 1 / (1 + exp(-x));
  case KILN_UNARY_TANH:
    return tanh(x);
  }
  return NAN;
}

static double unary_tol(kiln_unary_op op, kiln_dtype dt, double x, double r) {
  const double u = ldexp(1.0, -24), ulp = 2 * u;
  double t = util_storage_tol(dt, r);
  switch (op) {
  case KILN_UNARY_EXP:
  case KILN_UNARY_LOG:
  case KILN_UNARY_SQRT:
    return t + 3 * ulp * fabs(r);
  case KILN_UNARY_TANH:
    return t + 5 * ulp * fabs(r);
  case KILN_UNARY_SIGMOID:
    return t + 8 * ulp * fabs(r);
  case KILN_UNARY_GELU:
    return t + 16 * u * (fabs(r) + fabs(x));
  default:
    return t; /* exact in f32; one rounding in the storage format */
  }
}

/* The buffers hold YOFF + MAXN + GUARD elements (XOFF < YOFF): the op works
 * on [off, off + n); util_check_guard sees that the rest came back
 * unchanged. */

static void unary_on_device(kiln_context *ctx, kiln_queue *q) {
  size_t ndt;
  const kiln_dtype *dts = util_float_dtypes(&ndt);
  for (size_t d = 0; d < ndt; d++) {
    kiln_dtype dt = dts[d];
    for (size_t c = 0; c < sizeof unary_cases / sizeof *unary_cases; c++) {
      const struct unary_case *uc = &unary_cases[c];
      size_t total = YOFF + MAXN + GUARD;
      void *x = util_random(dt, total, uc->lo, uc->hi, 11 + (uint32_t)c);
      void *y0 = util_random(dt, total, -1, 1, 99);
      kiln_buffer *xb = util_upload(ctx, q, dt, x, total);
      kiln_buffer *yb = util_upload(ctx, q, dt, y0, total);
      for (size_t si = 0; si < NSIZES; si++) {
        size_t n = sizes[si];
        assert_kiln_ok(
            kiln_buffer_write_sync(q, y0, bytes_of(yb, 0, total * kiln_dtype_size(dt))));
        assert_kiln_ok(kiln_unary(q, uc->op, range_of(xb, XOFF, n, dt),
                                  range_of(yb, YOFF, n, dt), 0, NULL, NULL));
        void *y = util_download(q, yb, dt, total);
        for (size_t i = 0; i < n; i++) {
          double xv = util_get(dt, x, XOFF + i);
          double r = unary_ref(uc->op, xv);
          UTIL_CLOSE(util_get(dt, y, YOFF + i), r, unary_tol(uc->op, dt, xv, r),
                     "%s %s n=%zu i=%zu x=%.9g", uc->name, kiln_dtype_name(dt),
                     n, i, xv);
        }
        util_check_guard(dt, y0, y, YOFF, n, total, uc->name);
        free(y);
      }
      /* In place: x and y the very same range. */
      assert_kiln_ok(kiln_unary(q, uc->op, range_of(xb, XOFF, 17, dt),
                                range_of(xb, XOFF, 17, dt), 0, NULL, NULL));
      void *xi = util_download(q, xb, dt, total);
      for (size_t i = 0; i < 17; i++) {
        double xv = util_get(dt, x, XOFF + i);
        double r = unary_ref(uc->op, xv);
        UTIL_CLOSE(util_get(dt, xi, XOFF + i), r, unary_tol(uc->op, dt, xv, r),
                   "in-place %s %s i=%zu", uc->name, kiln_dtype_name(dt), i);
      }
      free(xi);
      assert_kiln_ok(kiln_buffer_destroy(xb));
      assert_kiln_ok(kiln_buffer_destroy(yb));
      free(x);
      free(y0);
    }
  }
}

static void test_unary(void **state) {
  (void)state;
  util_each_device(unary_on_device);
}

/* IEEE special values through f32: log(0) = -inf, log(-1) = NaN, sqrt(-1)
 * = NaN, relu(NaN) = NaN, relu(-0) = -0, sigmoid at +-100 without NaN. */
static void unary_special_on_device(kiln_context *ctx, kiln_queue *q) {
  float x[] = {0.0f, -1.0f, NAN, -0.0f, 100.0f, -100.0f, INFINITY};
  size_t n = sizeof x / sizeof *x;
  kiln_buffer *xb = util_upload(ctx, q, KILN_F32, x, n);
  kiln_buffer *yb = util_upload(ctx, q, KILN_F32, x, n);
  float y[7];
  assert_kiln_ok(kiln_unary(q, KILN_UNARY_LOG, range_of(xb, 0, n, KILN_F32),
                            range_of(yb, 0, n, KILN_F32), 0, NULL, NULL));
  assert_kiln_ok(kiln_buffer_read_sync(q, bytes_of(yb, 0, sizeof y), y));
  assert_true(isinf(y[0]) && y[0] < 0);
  assert_true(isnan(y[1]));
  assert_true(isinf(y[6]) && y[6] > 0);
  assert_kiln_ok(kiln_unary(q, KILN_UNARY_SQRT, range_of(xb, 0, n, KILN_F32),
                            range_of(yb, 0, n, KILN_F32), 0, NULL, NULL));
  assert_kiln_ok(kiln_buffer_read_sync(q, bytes_of(yb, 0, sizeof y), y));
  assert_true(isnan(y[1]));
  assert_true(y[0] == 0.0f);
  assert_kiln_ok(kiln_unary(q, KILN_UNARY_RELU, range_of(xb, 0, n, KILN_F32),
                            range_of(yb, 0, n, KILN_F32), 0, NULL, NULL));
  assert_kiln_ok(kiln_buffer_read_sync(q, bytes_of(yb, 0, sizeof y), y));
  assert_true(isnan(y[2]));
  assert_true(y[3] == 0.0f && signbit(y[3]));
  assert_true(y[1] == 0.0f);
  assert_kiln_ok(kiln_unary(q, KILN_UNARY_SIGMOID, range_of(xb, 0, n, KILN_F32),
                            range_of(yb, 0, n, KILN_F32), 0, NULL, NULL));
  assert_kiln_ok(kiln_buffer_read_sync(q, bytes_of(yb, 0, sizeof y), y));
  assert_true(y[4] == 1.0f);
  assert_true(y[5] >= 0.0f && y[5] < 1e-40f);
  assert_true(y[6] == 1.0f);
  assert_kiln_ok(kiln_unary(q, KILN_UNARY_GELU, range_of(xb, 0, n, KILN_F32),
                            range_of(yb, 0, n, KILN_F32), 0, NULL, NULL));
  assert_kiln_ok(kiln_buffer_read_sync(q, bytes_of(yb, 0, sizeof y), y));
  assert_true(y[4] == 100.0f);
  if (!(fabsf(y[5]) <= 1e-4f)) /* 16 u |x|: see the header */
    fail_msg("gelu(-100) = %g", y[5]);
  assert_kiln_ok(kiln_buffer_destroy(xb));
  assert_kiln_ok(kiln_buffer_destroy(yb));
}

static void test_unary_special(void **state) {
  (void)state;
  util_each_device(unary_special_on_device);
}

static double binary_ref(kiln_binary_op op, double a, double b) {
  switch (op) {
  case KILN_BINARY_ADD:
    return a + b;
  case KILN_BINARY_SUB:
    return a - b;
  case KILN_BINARY_MUL:
    return a * b;
  case KILN_BINARY_DIV:
    return a / b;
  case KILN_BINARY_MAX:
    return fmax(a, b);
  case KILN_BINARY_MIN:
    return fmin(a, b);
  }
  return NAN;
}

static double binary_tol(kiln_binary_op op, kiln_dtype dt, double r) {
  const double ulp = ldexp(1.0, -23);
  double t = util_storage_tol(dt, r);
  if (op == KILN_BINARY_DIV)
    return t + 2.5 * ulp * fabs(r);
  if (op == KILN_BINARY_MAX || op == KILN_BINARY_MIN)
    return t;
  return t + 0.5 * ulp * fabs(r);
}

static void binary_on_device(kiln_context *ctx, kiln_queue *q) {
  static const char *const names[] = {"add", "sub", "mul", "div", "max", "min"};
  size_t ndt;
  const kiln_dtype *dts = util_float_dtypes(&ndt);
  for (size_t d = 0; d < ndt; d++) {
    kiln_dtype dt = dts[d];
    size_t total = YOFF + MAXN + GUARD;
    void *a = util_random(dt, total, -10, 10, 5);
    void *b = util_random(dt, total, 0.5, 10, 6); /* no division by ~0 */
    void *y0 = util_random(dt, total, -1, 1, 7);
    kiln_buffer *ab = util_upload(ctx, q, dt, a, total);
    kiln_buffer *bb = util_upload(ctx, q, dt, b, total);
    kiln_buffer *yb = util_upload(ctx, q, dt, y0, total);
    for (int op = KILN_BINARY_ADD; op <= KILN_BINARY_MIN; op++) {
      for (size_t si = 0; si < NSIZES; si++) {
        size_t n = sizes[si];
        float s = -2.75f;
        for (int scalar = 0; scalar < 2; scalar++) {
          assert_kiln_ok(kiln_buffer_write_sync(q, y0, &(kiln_range){yb, 0, total, dt}));
          if (scalar)
            assert_kiln_ok(kiln_binary_scalar(
                q, (kiln_binary_op)op, range_of(ab, XOFF, n, dt),
                range_of(yb, YOFF, n, dt), s, 0, NULL, NULL));
          else
            assert_kiln_ok(
                kiln_binary(q, (kiln_binary_op)op, range_of(ab, XOFF, n, dt),
                            range_of(bb, 1, n, dt), range_of(yb, YOFF, n, dt),
                            0, NULL, NULL));
          void *y = util_download(q, yb, dt, total);
          for (size_t i = 0; i < n; i++) {
            double av = util_get(dt, a, XOFF + i);
            double bv = scalar ? s : util_get(dt, b, 1 + i);
            double r = binary_ref((kiln_binary_op)op, av, bv);
            UTIL_CLOSE(util_get(dt, y, YOFF + i), r,
                       binary_tol((kiln_binary_op)op, dt, r),
                       "%s%s %s n=%zu i=%zu", names[op],
                       scalar ? " scalar" : "", kiln_dtype_name(dt), n, i);
          }
          util_check_guard(dt, y0, y, YOFF, n, total, names[op]);
          free(y);
        }
      }
    }
    /* max/min ignore a NaN operand (fmax/fmin). */
    if (dt == KILN_F32) {
      float nan2[2] = {NAN, 1.0f}, one2[2] = {2.0f, NAN}, out[2];
      kiln_buffer *pb = util_upload(ctx, q, dt, nan2, 2);
      kiln_buffer *qb = util_upload(ctx, q, dt, one2, 2);
      assert_kiln_ok(kiln_binary(q, KILN_BINARY_MAX, range_of(pb, 0, 2, dt),
                                 range_of(qb, 0, 2, dt), range_of(pb, 0, 2, dt),
                                 0, NULL, NULL));
      assert_kiln_ok(kiln_buffer_read_sync(q, &(kiln_range){pb, 0, 2, KILN_F32}, out));
      assert_true(out[0] == 2.0f && out[1] == 1.0f);
      assert_kiln_ok(kiln_buffer_destroy(pb));
      assert_kiln_ok(kiln_buffer_destroy(qb));
    }
    assert_kiln_ok(kiln_buffer_destroy(ab));
    assert_kiln_ok(kiln_buffer_destroy(bb));
    assert_kiln_ok(kiln_buffer_destroy(yb));
    free(a);
    free(b);
    free(y0);
  }
}

static void test_binary(void **state) {
  (void)state;
  util_each_device(binary_on_device);
}

static void axpy_scale_fill_on_device(kiln_context *ctx, kiln_queue *q) {
  const double ulp = ldexp(1.0, -23);
  size_t ndt;
  const kiln_dtype *dts = util_float_dtypes(&ndt);
  for (size_t d = 0; d < ndt; d++) {
    kiln_dtype dt = dts[d];
    size_t total = YOFF + MAXN + GUARD;
    void *x = util_random(dt, total, -4, 4, 21);
    void *y0 = util_random(dt, total, -4, 4, 22);
    kiln_buffer *xb = util_upload(ctx, q, dt, x, total);
    kiln_buffer *yb = util_upload(ctx, q, dt, y0, total);
    for (size_t si = 0; si < NSIZES; si++) {
      size_t n = sizes[si];
      const float alpha = 1.5f;
      assert_kiln_ok(kiln_buffer_write_sync(q, y0, bytes_of(yb, 0, total * kiln_dtype_size(dt))));
      assert_kiln_ok(kiln_axpy(q, range_of(xb, XOFF, n, dt),
                               range_of(yb, YOFF, n, dt), alpha, 0, NULL,
                               NULL));
      void *y = util_download(q, yb, dt, total);
      for (size_t i = 0; i < n; i++) {
        double r =
            alpha * util_get(dt, x, XOFF + i) + util_get(dt, y0, YOFF + i);
        UTIL_CLOSE(util_get(dt, y, YOFF + i), r,
                   util_storage_tol(dt, r) + 0.5 * ulp * fabs(r),
                   "axpy %s n=%zu i=%zu", kiln_dtype_name(dt), n, i);
      }
      util_check_guard(dt, y0, y, YOFF, n, total, "axpy");
      free(y);

      assert_kiln_ok(kiln_buffer_write_sync(q, y0, bytes_of(yb, 0, total * kiln_dtype_size(dt))));
      assert_kiln_ok(
          kiln_scale(q, range_of(yb, YOFF, n, dt), -0.75f, 0, NULL, NULL));
      y = util_download(q, yb, dt, total);
      for (size_t i = 0; i < n; i++) {
        double r = -0.75 * util_get(dt, y0, YOFF + i);
        UTIL_CLOSE(util_get(dt, y, YOFF + i), r,
                   util_storage_tol(dt, r) + 0.5 * ulp * fabs(r),
                   "scale %s n=%zu i=%zu", kiln_dtype_name(dt), n, i);
      }
      util_check_guard(dt, y0, y, YOFF, n, total, "scale");
      free(y);

      /* The value is one element of dt, stored bit for bit: 0.1 rounded
       * to dt on the host. */
      assert_kiln_ok(kiln_buffer_write_sync(q, y0, bytes_of(yb, 0, total * kiln_dtype_size(dt))));
      void *want = malloc(kiln_dtype_size(dt));
      util_set(dt, want, 0, (float)0.1);
      assert_kiln_ok(
          kiln_fill(q, range_of(yb, YOFF, n, dt), want, 0, NULL, NULL));
      y = util_download(q, yb, dt, total);
      for (size_t i = 0; i < n; i++)
        assert_memory_equal((char *)y + (YOFF + i) * kiln_dtype_size(dt), want,
                            kiln_dtype_size(dt));
      free(want);
      util_check_guard(dt, y0, y, YOFF, n, total, "fill");
      free(y);
    }
    assert_kiln_ok(kiln_buffer_destroy(xb));
    assert_kiln_ok(kiln_buffer_destroy(yb));
    free(x);
    free(y0);
  }
  /* Integer fills. */
  kiln_buffer *ib = util_buffer(ctx, 64, 0);
  int32_t iv[16];
  assert_kiln_ok(kiln_fill(q, range_of(ib, 0, 16, KILN_I32), &(int32_t){-7}, 0,
                           NULL, NULL));
  assert_kiln_ok(kiln_buffer_read_sync(q, bytes_of(ib, 0, sizeof iv), iv));
  for (int i = 0; i < 16; i++)
    assert_int_equal(iv[i], -7);
  assert_kiln_ok(kiln_fill(q, range_of(ib, 1, 15, KILN_U32),
                           &(uint32_t){UINT32_MAX}, 0, NULL, NULL));
  assert_kiln_ok(kiln_buffer_read_sync(q, bytes_of(ib, 0, sizeof iv), iv));
  assert_int_equal(iv[0], -7);
  for (int i = 1; i < 16; i++)
    assert_int_equal((uint32_t)iv[i], UINT32_MAX);
  /* Bits no float argument carries: a signalling NaN's payload in f32, a
   * negative zero and a NaN payload in f16. */
  const uint32_t snan = 0x7fa00001u;
  assert_kiln_ok(
      kiln_fill(q, range_of(ib, 2, 3, KILN_F32), &snan, 0, NULL, NULL));
  const uint16_t nz = 0x8000u, hnan = 0x7e01u;
  assert_kiln_ok(
      kiln_fill(q, range_of(ib, 20, 2, KILN_F16), &nz, 0, NULL, NULL));
  assert_kiln_ok(
      kiln_fill(q, range_of(ib, 22, 3, KILN_F16), &hnan, 0, NULL, NULL));
  assert_kiln_ok(kiln_buffer_read_sync(q, bytes_of(ib, 0, sizeof iv), iv));
  uint16_t hv[32];
  memcpy(hv, iv, sizeof hv);
  assert_int_equal((uint32_t)iv[1], UINT32_MAX);
  for (int i = 2; i < 5; i++)
    assert_int_equal((uint32_t)iv[i], snan);
  assert_int_equal((uint32_t)iv[5], UINT32_MAX);
  assert_int_equal(hv[20], nz);
  assert_int_equal(hv[21], nz);
  for (int i = 22; i < 25; i++)
    assert_int_equal(hv[i], hnan);
  assert_int_equal(hv[25], 0xffffu);
  assert_kiln_ok(kiln_buffer_destroy(ib));
}

static void test_axpy_scale_fill(void **state) {
  (void)state;
  util_each_device(axpy_scale_fill_on_device);
}

/* 2^24 elements once, f32 axpy: the size the benchmarks use. */
static void axpy_large_on_device(kiln_context *ctx, kiln_queue *q) {
  size_t n = (size_t)1 << 24;
  float *x = malloc(n * sizeof *x), *y = malloc(n * sizeof *y);
  assert_non_null(x);
  assert_non_null(y);
  for (size_t i = 0; i < n; i++) {
    x[i] = (float)(i % 1000);
    y[i] = 1.0f;
  }
  kiln_buffer *xb = util_upload(ctx, q, KILN_F32, x, n);
  kiln_buffer *yb = util_upload(ctx, q, KILN_F32, y, n);
  assert_kiln_ok(kiln_axpy(q, range_of(xb, 0, n, KILN_F32),
                           range_of(yb, 0, n, KILN_F32), 2.0f, 0, NULL, NULL));
  assert_kiln_ok(kiln_buffer_read_sync(q, bytes_of(yb, 0, n * sizeof *y), y));
  for (size_t i = 0; i < n; i++)
    if (y[i] != 2.0f * (float)(i % 1000) + 1.0f) /* exact: small integers */
      fail_msg("axpy 2^24: y[%zu] = %g", i, y[i]);
  assert_kiln_ok(kiln_buffer_destroy(xb));
  assert_kiln_ok(kiln_buffer_destroy(yb));
  free(x);
  free(y);
}

static void test_axpy_large(void **state) {
  (void)state;
  util_each_device(axpy_large_on_device);
}

/* n = 0 enqueues nothing, yet the out event completes, after the wait
 * list. */
static void zero_size_on_device(kiln_context *ctx, kiln_queue *q) {
  kiln_buffer *b = util_buffer(ctx, 16, 0);
  kiln_event *e1 = NULL, *e2 = NULL, *e3 = NULL;
  assert_kiln_ok(kiln_unary(q, KILN_UNARY_EXP, range_of(b, 0, 0, KILN_F32),
                            range_of(b, 0, 0, KILN_F32), 0, NULL, &e1));
  assert_non_null(e1);
  assert_kiln_ok(kiln_event_wait(e1));
  assert_kiln_ok(kiln_axpy(q, range_of(b, 8, 0, KILN_BF16),
                           range_of(b, 0, 0, KILN_BF16), 1.0f, 1, &e1, &e2));
  assert_kiln_ok(kiln_event_wait(e2));
  kiln_event_state st;
  assert_kiln_ok(kiln_event_get_state(e2, &st));
  assert_int_equal(st, KILN_EVENT_COMPLETE);
  /* A wait list and no out event. */
  assert_kiln_ok(kiln_fill(q, range_of(b, 8, 0, KILN_F16), &(uint16_t){0x3c00},
                           1, &e2, NULL));
  /* Offset == element count is a valid empty range. */
  assert_kiln_ok(
      kiln_scale(q, range_of(b, 4, 0, KILN_F32), 2.0f, 0, NULL, &e3));
  assert_kiln_ok(kiln_event_wait(e3));
  kiln_event_release(e1);
  kiln_event_release(e2);
  kiln_event_release(e3);
  assert_kiln_ok(kiln_queue_finish(q));
  assert_kiln_ok(kiln_buffer_destroy(b));
}

static void test_zero_size(void **state) {
  (void)state;
  util_each_device(zero_size_on_device);
}

/* Out events and wait lists chain ops without host waits. */
static void events_chain_on_device(kiln_context *ctx, kiln_queue *q) {
  kiln_buffer *b = util_buffer(ctx, 4 * 100, 0);
  kiln_event *e1 = NULL, *e2 = NULL;
  assert_kiln_ok(kiln_fill(q, range_of(b, 0, 100, KILN_F32), &(float){2.0f}, 0,
                           NULL, &e1));
  assert_kiln_ok(
      kiln_scale(q, range_of(b, 0, 100, KILN_F32), 3.0f, 1, &e1, &e2));
  assert_kiln_ok(kiln_event_wait(e2));
  float out[100];
  assert_kiln_ok(kiln_buffer_read_sync(q, &(kiln_range){b, 0, 100, KILN_F32}, out));
  for (int i = 0; i < 100; i++)
    assert_true(out[i] == 6.0f);
  kiln_event_release(e1);
  kiln_event_release(e2);
  assert_kiln_ok(kiln_buffer_destroy(b));
}

static void test_events_chain(void **state) {
  (void)state;
  util_each_device(events_chain_on_device);
}

static void test_bad_arguments(void **state) {
  (void)state;
  struct util_bad_env env = util_bad_env_open();
  kiln_queue *q = env.q, *oq = env.oq;
  kiln_buffer *b = env.b, *ob = env.ob; /* 16 f32, 32 f16 */
  kiln_buffer *ro = util_buffer(env.ctx, 64, KILN_MEM_READ_ONLY);
  kiln_buffer *wo = util_buffer(env.ctx, 64, KILN_MEM_WRITE_ONLY);
  kiln_event *ev = (kiln_event *)(uintptr_t)1;

  assert_kiln_error(kiln_unary(NULL, KILN_UNARY_EXP,
                               range_of(b, 0, 4, KILN_F32),
                               range_of(b, 0, 4, KILN_F32), 0, NULL, &ev),
                    KILN_ERR_NULL_POINTER, "kiln_unary: queue is NULL");
  assert_ptr_equal(ev, (kiln_event *)(uintptr_t)1);
  assert_kiln_error(kiln_unary(q, KILN_UNARY_EXP,
                               range_of(NULL, 0, 4, KILN_F32),
                               range_of(b, 0, 4, KILN_F32), 0, NULL, NULL),
                    KILN_ERR_NULL_POINTER, "kiln_unary: x is NULL");
  assert_kiln_error(kiln_unary(q, KILN_UNARY_EXP, range_of(b, 0, 4, KILN_F32),
                               range_of(NULL, 0, 4, KILN_F32), 0, NULL, NULL),
                    KILN_ERR_NULL_POINTER, "y is NULL");
  assert_kiln_error(kiln_unary(q, (kiln_unary_op)99,
                               range_of(b, 0, 4, KILN_F32),
                               range_of(b, 0, 4, KILN_F32), 0, NULL, NULL),
                    KILN_ERR_INVALID_ARGUMENT, "op 99");
  assert_kiln_error(kiln_unary(q, KILN_UNARY_EXP, range_of(b, 0, 4, KILN_I32),
                               range_of(b, 0, 4, KILN_I32), 0, NULL, NULL),
                    KILN_ERR_INVALID_ARGUMENT, "dtype i32 is not supported");
  assert_kiln_error(
      kiln_unary(q, KILN_UNARY_EXP, range_of(b, 0, 4, (kiln_dtype)42),
                 range_of(b, 0, 4, (kiln_dtype)42), 0, NULL, NULL),
      KILN_ERR_INVALID_ARGUMENT, "dtype 42 is not a kiln_dtype");
  assert_kiln_error(kiln_unary(q, KILN_UNARY_EXP, range_of(ob, 0, 4, KILN_F32),
                               range_of(b, 0, 4, KILN_F32), 0, NULL, NULL),
                    KILN_ERR_WRONG_CONTEXT, "x belongs to a different context");
  /* 16 f32 elements: [13, 17) is out; 32 f16 elements: [13, 17) is in. */
  assert_kiln_error(kiln_unary(q, KILN_UNARY_EXP, range_of(b, 13, 4, KILN_F32),
                               range_of(b, 0, 4, KILN_F32), 0, NULL, NULL),
                    KILN_ERR_OUT_OF_RANGE,
                    "x range [offset 13, +4 elements of f32) exceeds");
  assert_kiln_ok(kiln_unary(q, KILN_UNARY_EXP, range_of(b, 13, 4, KILN_F16),
                            range_of(b, 13, 4, KILN_F16), 0, NULL, NULL));
  assert_kiln_error(kiln_unary(q, KILN_UNARY_EXP, range_of(b, 17, 0, KILN_F32),
                               range_of(b, 0, 0, KILN_F32), 0, NULL, NULL),
                    KILN_ERR_OUT_OF_RANGE, "x.offset 17 is beyond");
  assert_kiln_error(kiln_unary(q, KILN_UNARY_EXP, range_of(b, 0, 4, KILN_F32),
                               range_of(b, SIZE_MAX - 1, 4, KILN_F32), 0, NULL,
                               NULL),
                    KILN_ERR_INVALID_SIZE, "y.offset");
  assert_kiln_status(
      kiln_unary(q, KILN_UNARY_EXP, range_of(b, 0, SIZE_MAX / 2, KILN_F32),
                 range_of(b, 0, SIZE_MAX / 2, KILN_F32), 0, NULL, NULL),
      KILN_ERR_INVALID_SIZE);
  assert_kiln_error(kiln_unary(q, KILN_UNARY_EXP, range_of(b, 0, 4, KILN_F32),
                               range_of(ro, 0, 4, KILN_F32), 0, NULL, NULL),
                    KILN_ERR_INVALID_ARGUMENT,
                    "y is written by the op but was created "
                    "KILN_MEM_READ_ONLY");
  assert_kiln_error(kiln_unary(q, KILN_UNARY_EXP, range_of(wo, 0, 4, KILN_F32),
                               range_of(b, 0, 4, KILN_F32), 0, NULL, NULL),
                    KILN_ERR_INVALID_ARGUMENT, "x is read by the op");
  assert_kiln_error(kiln_unary(q, KILN_UNARY_EXP, range_of(b, 0, 4, KILN_F32),
                               range_of(b, 2, 4, KILN_F32), 0, NULL, NULL),
                    KILN_ERR_INVALID_ARGUMENT, "overlap");
  /* A wait-list event from another context. */
  kiln_event *oe = NULL;
  assert_kiln_ok(kiln_fill(oq, range_of(ob, 0, 4, KILN_F32), &(float){0.0f}, 0,
                           NULL, &oe));
  assert_int_not_equal(kiln_unary(q, KILN_UNARY_EXP,
                                  range_of(b, 0, 4, KILN_F32),
                                  range_of(b, 0, 4, KILN_F32), 1, &oe, NULL),
                       KILN_OK);
  assert_kiln_status(kiln_unary(q, KILN_UNARY_EXP, range_of(b, 0, 4, KILN_F32),
                                range_of(b, 0, 4, KILN_F32), 1, NULL, NULL),
                     KILN_ERR_NULL_POINTER);
  kiln_event_release(oe);

  assert_kiln_error(kiln_binary(q, (kiln_binary_op)6,
                                range_of(b, 0, 4, KILN_F32),
                                range_of(b, 0, 4, KILN_F32),
                                range_of(b, 0, 4, KILN_F32), 0, NULL, NULL),
                    KILN_ERR_INVALID_ARGUMENT, "kiln_binary: op 6");
  assert_kiln_error(kiln_binary(q, KILN_BINARY_ADD, range_of(b, 0, 4, KILN_F32),
                                range_of(NULL, 0, 4, KILN_F32),
                                range_of(b, 0, 4, KILN_F32), 0, NULL, NULL),
                    KILN_ERR_NULL_POINTER, "kiln_binary: b is NULL");
  assert_kiln_error(kiln_binary(q, KILN_BINARY_ADD, range_of(b, 0, 4, KILN_F32),
                                range_of(b, 14, 4, KILN_F32),
                                range_of(b, 0, 4, KILN_F32), 0, NULL, NULL),
                    KILN_ERR_OUT_OF_RANGE, "b range");
  assert_kiln_error(kiln_binary(q, KILN_BINARY_ADD, range_of(b, 0, 4, KILN_F32),
                                range_of(b, 4, 4, KILN_F32),
                                range_of(b, 6, 4, KILN_F32), 0, NULL, NULL),
                    KILN_ERR_INVALID_ARGUMENT, "b bytes");
  assert_kiln_error(
      kiln_binary_scalar(q, KILN_BINARY_ADD, range_of(b, 0, 4, KILN_U32),
                         range_of(b, 0, 4, KILN_U32), 1.0f, 0, NULL, NULL),
      KILN_ERR_INVALID_ARGUMENT, "kiln_binary_scalar: a.dtype u32");
  assert_kiln_error(
      kiln_binary_scalar(q, KILN_BINARY_ADD, range_of(b, 0, 4, KILN_F32),
                         range_of(ob, 0, 4, KILN_F32), 1.0f, 0, NULL, NULL),
      KILN_ERR_WRONG_CONTEXT, "y belongs to a different context");
  assert_kiln_error(kiln_axpy(q, range_of(b, 0, 4, KILN_F32),
                              range_of(b, 0, 4, KILN_F32), 1.0f, 0, NULL, NULL),
                    KILN_ERR_INVALID_ARGUMENT,
                    "kiln_axpy: x bytes [0, 16) and y bytes [0, 16)");
  assert_kiln_error(kiln_axpy(q, range_of(b, 0, 4, KILN_F32),
                              range_of(wo, 0, 4, KILN_F32), 1.0f, 0, NULL,
                              NULL),
                    KILN_ERR_INVALID_ARGUMENT, "y is read by the op");
  assert_kiln_error(kiln_axpy(q, range_of(NULL, 0, 4, KILN_F32),
                              range_of(b, 0, 4, KILN_F32), 1.0f, 0, NULL, NULL),
                    KILN_ERR_NULL_POINTER, "kiln_axpy: x is NULL");
  assert_kiln_error(
      kiln_scale(q, range_of(b, 0, 17, KILN_F32), 1.0f, 0, NULL, NULL),
      KILN_ERR_OUT_OF_RANGE, "kiln_scale: x range");
  assert_kiln_status(
      kiln_scale(NULL, range_of(b, 0, 1, KILN_F32), 1.0f, 0, NULL, NULL),
      KILN_ERR_NULL_POINTER);
  const float one = 1.0f;
  assert_kiln_error(
      kiln_fill(q, range_of(b, 0, 4, KILN_F32), NULL, 0, NULL, NULL),
      KILN_ERR_NULL_POINTER, "kiln_fill: value is NULL");
  assert_kiln_error(kiln_fill(q, NULL, &one, 0, NULL, NULL),
                    KILN_ERR_NULL_POINTER, "kiln_fill: y is NULL");
  assert_kiln_error(
      kiln_fill(q, range_of(b, 0, 4, (kiln_dtype)9), &one, 0, NULL, NULL),
      KILN_ERR_INVALID_ARGUMENT, "y.dtype 9 is not a kiln_dtype");
  assert_kiln_error(
      kiln_fill(q, range_of(NULL, 0, 4, KILN_F32), &one, 0, NULL, NULL),
      KILN_ERR_NULL_POINTER, "kiln_fill: y is NULL");
  assert_kiln_status(
      kiln_fill(q, range_of(ro, 0, 4, KILN_F32), &one, 0, NULL, NULL),
      KILN_ERR_INVALID_ARGUMENT);

  /* Descriptors: NULL, and operands that disagree in count or dtype. */
  const kiln_range *x4 = range_of(b, 0, 4, KILN_F32);
  assert_kiln_error(kiln_unary(q, KILN_UNARY_EXP, NULL, x4, 0, NULL, NULL),
                    KILN_ERR_NULL_POINTER, "kiln_unary: x is NULL");
  assert_kiln_error(kiln_unary(q, KILN_UNARY_EXP, x4, NULL, 0, NULL, NULL),
                    KILN_ERR_NULL_POINTER, "kiln_unary: y is NULL");
  assert_kiln_error(kiln_unary(q, KILN_UNARY_EXP, x4,
                               range_of(b, 8, 3, KILN_F32), 0, NULL, NULL),
                    KILN_ERR_SHAPE_MISMATCH,
                    "kiln_unary: x (4 elements of f32) and y (3 elements of "
                    "f32) disagree");
  assert_kiln_error(kiln_unary(q, KILN_UNARY_EXP, x4,
                               range_of(b, 16, 4, KILN_F16), 0, NULL, NULL),
                    KILN_ERR_SHAPE_MISMATCH,
                    "y (4 elements of f16) disagree");
  assert_kiln_error(kiln_binary(q, KILN_BINARY_ADD, x4,
                                range_of(b, 4, 5, KILN_F32),
                                range_of(b, 8, 4, KILN_F32), 0, NULL, NULL),
                    KILN_ERR_SHAPE_MISMATCH,
                    "a (4 elements of f32) and b (5 elements of f32)");
  assert_kiln_error(kiln_binary(q, KILN_BINARY_ADD, x4, x4,
                                range_of(b, 8, 4, KILN_BF16), 0, NULL, NULL),
                    KILN_ERR_SHAPE_MISMATCH, "and y (4 elements of bf16)");
  assert_kiln_error(kiln_binary_scalar(q, KILN_BINARY_MUL, x4,
                                       range_of(b, 8, 2, KILN_F32), 2.0f, 0,
                                       NULL, NULL),
                    KILN_ERR_SHAPE_MISMATCH, "kiln_binary_scalar: a (4");
  assert_kiln_error(kiln_axpy(q, x4, range_of(b, 8, 8, KILN_F32), 1.0f, 0,
                              NULL, NULL),
                    KILN_ERR_SHAPE_MISMATCH, "kiln_axpy: x (4");
  assert_kiln_error(kiln_scale(q, NULL, 1.0f, 0, NULL, NULL),
                    KILN_ERR_NULL_POINTER, "kiln_scale: x is NULL");

  assert_kiln_ok(kiln_buffer_destroy(ro));
  assert_kiln_ok(kiln_buffer_destroy(wo));
  util_bad_env_close(&env);
}

/* test_space_elementwise.c runs the checks above with its own main. */
#ifndef KILN_OP_TEST_NO_MAIN
int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_unary),
      cmocka_unit_test(test_unary_special),
      cmocka_unit_test(test_binary),
      cmocka_unit_test(test_axpy_scale_fill),
      cmocka_unit_test(test_axpy_large),
      cmocka_unit_test(test_zero_size),
      cmocka_unit_test(test_events_chain),
      cmocka_unit_test(test_bad_arguments),
  };
  return KILN_TEST_RUN("op_elementwise", tests, true);
}
#endif
