/* kiln_scan: inclusive and exclusive prefix sums over f32, i32 and u32
 * against host references, at sizes from 0 to past several chunks (the CPU
 * family's default chunk is 8192, the GPU family's 4096), at offsets, in
 * place; integer wrap-around; f32 determinism; bad input.
 *
 * Integer sums are exact modulo 2^32. For f32, element i of the result is a
 * sum of at most i + 1 terms computed through at most i + 1 additions in
 * some fixed order (within its chunk, then the chunk carries), so its error
 * is at most (i + 1) u sum_{j<=i} |x_j| with u = 2^-24 (Higham 4.2); the
 * GPU family's tree within a pass only shortens the chains. */
#include <stdio.h>

#include "harness.h"
#include "op_test_util.h"

static const size_t sizes[] = {0, 1, 3, 17, 127, 1021, 4097, 8192, 8193,
                               100003};
#define NSIZES (sizeof sizes / sizeof sizes[0])
#define MAXN 100003
#define XOFF 3
#define YOFF 6

static void check(kiln_dtype dt, kiln_scan_kind kind, const void *x,
                  const void *y, size_t n, const char *what) {
  const double u = ldexp(1.0, -24);
  double run = 0, abs_run = 0;
  uint32_t irun = 0;
  for (size_t i = 0; i < n; i++) {
    if (dt == KILN_F32) {
      double v = ((const float *)x)[XOFF + i];
      double want = kind == KILN_SCAN_EXCLUSIVE ? run : run + v;
      run += v;
      abs_run += fabs(v);
      UTIL_CLOSE(((const float *)y)[YOFF + i], want,
                 (double)(i + 1) * u * abs_run, "%s i=%zu", what, i);
    } else {
      uint32_t v = ((const uint32_t *)x)[XOFF + i];
      uint32_t want = kind == KILN_SCAN_EXCLUSIVE ? irun : irun + v;
      irun += v;
      uint32_t got = ((const uint32_t *)y)[YOFF + i];
      if (got != want)
        fail_msg("%s i=%zu: got %u, want %u", what, i, got, want);
    }
  }
}

static void *make_input(kiln_dtype dt, size_t count, uint32_t seed) {
  if (dt == KILN_F32)
    return util_random(dt, count, -10, 10, seed);
  uint32_t *p = malloc(count * 4);
  assert_non_null(p);
  uint32_t s = seed;
  for (size_t i = 0; i < count; i++) {
    s = s * 1664525u + 1013904223u;
    /* Large values so sums wrap modulo 2^32 (and i32 overflows). */
    p[i] = dt == KILN_I32 ? s : s >> 4;
  }
  return p;
}

static void scan_on_device(kiln_context *ctx, kiln_queue *q) {
  const kiln_dtype dts[] = {KILN_F32, KILN_I32, KILN_U32};
  for (size_t d = 0; d < 3; d++) {
    kiln_dtype dt = dts[d];
    size_t total = YOFF + MAXN + 4;
    void *x = make_input(dt, total, 17 + (uint32_t)d);
    void *y0 = make_input(dt, total, 99);
    kiln_buffer *xb = util_upload(ctx, q, dt, x, total);
    kiln_buffer *yb = util_upload(ctx, q, dt, y0, total);
    for (int kind = 0; kind < 2; kind++) {
      for (size_t si = 0; si < NSIZES; si++) {
        size_t n = sizes[si];
        assert_kiln_ok(kiln_buffer_write_sync(q, y0, bytes_of(yb, 0, total * 4)));
        assert_kiln_ok(kiln_scan(q, (kiln_scan_kind)kind,
                                 range_of(xb, XOFF, n, dt),
                                 range_of(yb, YOFF, n, dt), 0, NULL, NULL));
        uint32_t *y = util_download(q, yb, KILN_U32, total);
        char what[64];
        snprintf(what, sizeof what, "%s %s n=%zu",
                 kind ? "exclusive" : "inclusive", kiln_dtype_name(dt), n);
        check(dt, (kiln_scan_kind)kind, x, y, n, what);
        util_check_guard(dt, y0, y, YOFF, n, total, what);
        free(y);
      }
    }
    /* In place: x and y the same range. */
    for (int kind = 0; kind < 2; kind++) {
      size_t n = 20000;
      kiln_buffer *ib = util_upload(ctx, q, dt, x, total);
      assert_kiln_ok(kiln_scan(q, (kiln_scan_kind)kind,
                               range_of(ib, XOFF, n, dt),
                               range_of(ib, XOFF, n, dt), 0, NULL, NULL));
      uint32_t *got = util_download(q, ib, KILN_U32, total);
      /* check() reads y at YOFF: shift the result there. */
      uint32_t *shifted = calloc(total, 4);
      memcpy(shifted + YOFF, got + XOFF, n * 4);
      check(dt, (kiln_scan_kind)kind, x, shifted, n, "in place");
      free(shifted);
      free(got);
      assert_kiln_ok(kiln_buffer_destroy(ib));
    }
    assert_kiln_ok(kiln_buffer_destroy(xb));
    assert_kiln_ok(kiln_buffer_destroy(yb));
    free(x);
    free(y0);
  }
}

static void test_scan(void **state) {
  (void)state;
  util_each_device(scan_on_device);
}

static void deterministic_on_device(kiln_context *ctx, kiln_queue *q) {
  const size_t n = 1 << 20;
  void *x = util_random(KILN_F32, n, -1, 1, 5);
  kiln_buffer *xb = util_upload(ctx, q, KILN_F32, x, n);
  kiln_buffer *yb = util_buffer(ctx, n * 4, 0);
  assert_kiln_ok(kiln_scan(q, KILN_SCAN_INCLUSIVE, range_of(xb, 0, n, KILN_F32),
                           range_of(yb, 0, n, KILN_F32), 0, NULL, NULL));
  void *a = util_download(q, yb, KILN_F32, n);
  assert_kiln_ok(kiln_scan(q, KILN_SCAN_INCLUSIVE, range_of(xb, 0, n, KILN_F32),
                           range_of(yb, 0, n, KILN_F32), 0, NULL, NULL));
  void *b = util_download(q, yb, KILN_F32, n);
  assert_memory_equal(a, b, n * 4);
  free(a);
  free(b);
  free(x);
  assert_kiln_ok(kiln_buffer_destroy(xb));
  assert_kiln_ok(kiln_buffer_destroy(yb));
}

static void test_deterministic(void **state) {
  (void)state;
  util_each_device(deterministic_on_device);
}

static void zero_size_on_device(kiln_context *ctx, kiln_queue *q) {
  kiln_buffer *b = util_buffer(ctx, 16, 0);
  kiln_event *e = NULL, *e2 = NULL;
  assert_kiln_ok(kiln_scan(q, KILN_SCAN_EXCLUSIVE, range_of(b, 0, 0, KILN_U32),
                           range_of(b, 4, 0, KILN_U32), 0, NULL, &e));
  assert_kiln_ok(kiln_scan(q, KILN_SCAN_INCLUSIVE, range_of(b, 4, 0, KILN_F32),
                           range_of(b, 0, 0, KILN_F32), 1, &e, &e2));
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
  assert_kiln_error(kiln_scan(NULL, KILN_SCAN_INCLUSIVE,
                              range_of(b, 0, 4, KILN_F32),
                              range_of(b, 0, 4, KILN_F32), 0, NULL, NULL),
                    KILN_ERR_NULL_POINTER, "kiln_scan: queue is NULL");
  assert_kiln_error(kiln_scan(q, (kiln_scan_kind)2, range_of(b, 0, 4, KILN_F32),
                              range_of(b, 0, 4, KILN_F32), 0, NULL, NULL),
                    KILN_ERR_INVALID_ARGUMENT, "kind 2");
  assert_kiln_error(kiln_scan(q, KILN_SCAN_INCLUSIVE,
                              range_of(b, 0, 4, KILN_F16),
                              range_of(b, 0, 4, KILN_F16), 0, NULL, NULL),
                    KILN_ERR_INVALID_ARGUMENT,
                    "dtype f16 is not supported by this op (it takes "
                    "f32, i32, u32)");
  assert_kiln_error(kiln_scan(q, KILN_SCAN_INCLUSIVE,
                              range_of(NULL, 0, 4, KILN_I32),
                              range_of(b, 0, 4, KILN_I32), 0, NULL, NULL),
                    KILN_ERR_NULL_POINTER, "x is NULL");
  assert_kiln_error(kiln_scan(q, KILN_SCAN_INCLUSIVE,
                              range_of(b, 0, 4, KILN_I32),
                              range_of(NULL, 0, 4, KILN_I32), 0, NULL, NULL),
                    KILN_ERR_NULL_POINTER, "y is NULL");
  assert_kiln_error(
      kiln_scan(q, KILN_SCAN_INCLUSIVE, range_of(b, 7, 10, KILN_U32),
                range_of(ob, 0, 10, KILN_U32), 0, NULL, NULL),
      KILN_ERR_OUT_OF_RANGE, "x range [offset 7, +10 elements of u32)");
  assert_kiln_error(kiln_scan(q, KILN_SCAN_INCLUSIVE,
                              range_of(b, 0, 4, KILN_U32),
                              range_of(ob, 0, 4, KILN_U32), 0, NULL, NULL),
                    KILN_ERR_WRONG_CONTEXT, "y belongs to a different context");
  assert_kiln_error(kiln_scan(q, KILN_SCAN_INCLUSIVE,
                              range_of(b, 0, 4, KILN_U32),
                              range_of(b, 1, 4, KILN_U32), 0, NULL, NULL),
                    KILN_ERR_INVALID_ARGUMENT, "overlap");
  assert_kiln_status(
      kiln_scan(q, KILN_SCAN_INCLUSIVE, range_of(b, 0, SIZE_MAX, KILN_U32),
                range_of(b, 0, SIZE_MAX, KILN_U32), 0, NULL, NULL),
      KILN_ERR_INVALID_SIZE);
  /* x and y of one count and dtype. */
  assert_kiln_error(kiln_scan(q, KILN_SCAN_INCLUSIVE,
                              range_of(b, 0, 4, KILN_I32),
                              range_of(b, 4, 4, KILN_U32), 0, NULL, NULL),
                    KILN_ERR_SHAPE_MISMATCH,
                    "x (4 elements of i32) and y (4 elements of u32)");
  assert_kiln_error(kiln_scan(q, KILN_SCAN_EXCLUSIVE,
                              range_of(b, 0, 4, KILN_F32),
                              range_of(b, 4, 6, KILN_F32), 0, NULL, NULL),
                    KILN_ERR_SHAPE_MISMATCH, "y (6 elements of f32)");
  util_bad_env_close(&env);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_scan),
      cmocka_unit_test(test_deterministic),
      cmocka_unit_test(test_zero_size),
      cmocka_unit_test(test_bad_arguments),
  };
  return KILN_TEST_RUN("op_scan", tests, true);
}
