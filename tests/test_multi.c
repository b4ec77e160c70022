/* Several devices in one process (kiln_multi.h): the device set, the split
 * by weight, split GEMM, maps and reductions against float64 host
 * references and against the same work on one device, and peer copies.
 * Meson runs it with POCL_DEVICES="pthread pthread" (two PoCL devices);
 * the set takes KILN_TEST_DEVICE's devices, default "all".
 *
 * Tolerances: a GEMM entry is a k-term f32 dot product accumulated with
 * fused multiply-adds: within k 2^-24 sum|a b| of the exact value (Higham
 * 3.5). exp in OpenCL is within 3 ulp (4 ulp allowed here: 2^-21
 * relative); add is correctly rounded (2^-24 relative). A sum of n f32
 * terms in any grouping is within (n - 1) 2^-24 sum|x|. A part goes whole
 * to one device, so GEMM entries and correctly rounded maps equal one
 * device's bits exactly, and a reduction equals the same per-part
 * reductions combined in the same order (bit for bit). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "harness.h"

static kiln_device_set *set;
static size_t ndev;

static uint32_t rng = 12345;
static float rnd(void) {
  rng = rng * 1664525u + 1013904223u;
  return (float)((rng >> 8) & 0xffff) / 32768.0f - 1.0f;
}

static int open_set(void **state) {
  (void)state;
  const char *sel = getenv("KILN_TEST_DEVICE");
  kiln_status s = kiln_device_set_create(sel ? sel : "all", NULL, &set);
  if (s != KILN_OK) {
    print_message("no device set: %s\n", kiln_last_error());
    return -1;
  }
  ndev = kiln_device_set_get_count(set);
  print_message("# device set of %zu device(s)\n", ndev);
  return 0;
}

static int close_set(void **state) {
  (void)state;
  return kiln_device_set_destroy(set) == KILN_OK ? 0 : -1;
}

/* Weights that put everything on device 0. */
static void all_on_first(void) {
  double w[64] = {1.0};
  assert_kiln_ok(kiln_device_set_weights(set, ndev, w));
}

static void test_set_and_split(void **state) {
  (void)state;
  const char *want = getenv("KILN_TEST_EXPECT_DEVICES");
  if (want != NULL)
    assert_true(ndev >= (size_t)atoi(want));
  for (size_t i = 0; i < ndev; i++) {
    assert_non_null(kiln_device_set_get_context(set, i));
    assert_non_null(kiln_device_set_get_queue(set, i));
  }
  assert_null(kiln_device_set_get_context(set, 1000));
  assert_null(kiln_device_set_get_queue(set, 1000));
  assert_int_equal(kiln_device_set_get_count(NULL), 0);

  size_t parts[64], sum = 0;
  assert_kiln_ok(kiln_device_set_weights(set, 0, NULL));
  assert_kiln_ok(kiln_device_set_split(set, 1001, ndev, parts));
  for (size_t i = 0; i < ndev; i++) {
    sum += parts[i];
    assert_true(parts[i] >= 1001 / ndev && parts[i] <= 1001 / ndev + 1);
  }
  assert_int_equal(sum, 1001);
  /* Weights 1, 3, 0, 0...: a quarter and three quarters, nothing after. */
  if (ndev >= 2) {
    double w[64] = {1.0, 3.0};
    assert_kiln_ok(kiln_device_set_weights(set, ndev, w));
    assert_kiln_ok(kiln_device_set_split(set, 10, ndev, parts));
    assert_int_equal(parts[0], 3); /* 2.5 and 7.5: the tie goes to 0 */
    assert_int_equal(parts[1], 7);
    for (size_t i = 2; i < ndev; i++)
      assert_int_equal(parts[i], 0);
  }
  /* Calibration measures positive throughputs and the split still adds up. */
  assert_kiln_ok(kiln_device_set_calibrate(set));
  assert_kiln_ok(kiln_device_set_split(set, 77, ndev, parts));
  sum = 0;
  for (size_t i = 0; i < ndev; i++)
    sum += parts[i];
  assert_int_equal(sum, 77);
  assert_kiln_ok(kiln_device_set_weights(set, 0, NULL));
}

static void test_gemm(void **state) {
  (void)state;
  /* 7 entries of a 19 x 23 by 23 x 13 product, B shared, row- and
   * column-major, one operand transposed. */
  enum { M = 19, N = 13, K = 23, BATCH = 7 };
  size_t sa = M * K + 5, sc = M * N + 3;
  float *a = malloc(sa * BATCH * 4), *b = malloc(K * N * 4);
  float *c = malloc(sc * BATCH * 4), *c1 = malloc(sc * BATCH * 4);
  float *cin = malloc(sc * BATCH * 4);
  for (size_t i = 0; i < sa * BATCH; i++)
    a[i] = rnd();
  for (size_t i = 0; i < K * N; i++)
    b[i] = rnd();
  for (int layout = 0; layout < 2; layout++) {
    kiln_trans ta = layout ? KILN_TRANS : KILN_NO_TRANS;
    /* Row-major A is m x k with lda K; column-major transposed A is k x m
     * stored column-major with lda K: both hold (i, p) at i * K + p. */
    size_t lda = K, ldb = layout ? K : N, ldc = layout ? M : N;
    for (size_t i = 0; i < sc * BATCH; i++)
      cin[i] = c[i] = c1[i] = rnd();
    assert_kiln_ok(kiln_device_set_weights(set, 0, NULL));
    /* As stored: A m x k (row-major) or k x m (column-major, used
     * transposed), B k x n, C m x n. */
    kiln_matrix ma = {.rows = layout ? K : M,
                      .cols = layout ? M : K,
                      .ld = lda,
                      .batch_stride = sa,
                      .dtype = KILN_F32,
                      .layout = (kiln_layout)layout,
                      .trans = ta};
    kiln_matrix mb = {.rows = K,
                      .cols = N,
                      .ld = ldb,
                      .dtype = KILN_F32,
                      .layout = (kiln_layout)layout};
    kiln_matrix mc = {.rows = M,
                      .cols = N,
                      .ld = ldc,
                      .batch_stride = sc,
                      .dtype = KILN_F32,
                      .layout = (kiln_layout)layout};
    assert_kiln_ok(kiln_multi_gemm_batched(set, BATCH, &ma, a, &mb, b, &mc, c,
                                           1.5f, 0.5f));
    all_on_first();
    assert_kiln_ok(kiln_multi_gemm_batched(set, BATCH, &ma, a, &mb, b, &mc, c1,
                                           1.5f, 0.5f));
    /* Each entry ran whole on one device of the same kind: the same bits. */
    assert_memory_equal(c, c1, sc * BATCH * 4);
    size_t bad = 0;
    for (size_t e = 0; e < BATCH; e++)
      for (size_t i = 0; i < M; i++)
        for (size_t j = 0; j < N; j++) {
          double acc = 0, mag = 0;
          for (size_t p = 0; p < K; p++) {
            /* B is k x n: row-major (p, j) at p * N + j; column-major at
             * j * K + p. */
            double prod = (double)a[e * sa + i * K + p] *
                          (layout ? b[j * K + p] : b[p * N + j]);
            acc += prod;
            mag += fabs(prod);
          }
          size_t at = e * sc + (layout ? j * M + i : i * N + j);
          double want = 1.5 * acc + 0.5 * cin[at];
          double tol = (K + 2) * 0x1p-24 * (1.5 * mag + 0.5 * fabs(cin[at]));
          bad += fabs(c[at] - want) > tol;
        }
    assert_int_equal(bad, 0);
    /* Padding between entries is never written. */
    for (size_t e = 0; e < BATCH; e++)
      for (size_t i = M * N; i < sc; i++)
        assert_true(c[e * sc + i] == cin[e * sc + i]);
  }
  free(a);
  free(b);
  free(c);
  free(c1);
  free(cin);
  assert_kiln_ok(kiln_device_set_weights(set, 0, NULL));
}

static void test_maps(void **state) {
  (void)state;
  size_t n = 100003;
  float *x = malloc(n * 4), *y = malloc(n * 4), *y1 = malloc(n * 4);
  float *z = malloc(n * 4);
  for (size_t i = 0; i < n; i++) {
    x[i] = rnd() * 8;
    z[i] = rnd();
  }
  assert_kiln_ok(kiln_device_set_weights(set, 0, NULL));
  assert_kiln_ok(kiln_multi_unary(set, KILN_UNARY_EXP, n, x, y));
  size_t bad = 0;
  for (size_t i = 0; i < n; i++) {
    double want = exp((double)x[i]);
    bad += fabs(y[i] - want) > 0x1p-21 * want;
  }
  assert_int_equal(bad, 0);
  /* In place: y = y + z, correctly rounded, so the same bits whatever the
   * split (exp may differ in the last bits between a kernel's vector body
   * and its scalar tail, which move with the split). */
  memcpy(y1, y, n * 4);
  assert_kiln_ok(kiln_multi_binary(set, KILN_BINARY_ADD, n, y, z, y));
  for (size_t i = 0; i < n; i++) {
    double want = (double)y1[i] + z[i];
    bad += fabs(y[i] - want) > 0x1p-24 * fabs(want);
  }
  assert_int_equal(bad, 0);
  all_on_first();
  assert_kiln_ok(kiln_multi_binary(set, KILN_BINARY_ADD, n, y1, z, y1));
  assert_memory_equal(y, y1, n * 4);
  assert_kiln_ok(kiln_device_set_weights(set, 0, NULL));
  free(x);
  free(y);
  free(y1);
  free(z);
}

static void test_reduce(void **state) {
  (void)state;
  size_t n = 1000003;
  float *x = malloc(n * 4);
  double exact = 0, mag = 0;
  for (size_t i = 0; i < n; i++) {
    x[i] = rnd();
    exact += x[i];
    mag += fabs(x[i]);
  }
  assert_kiln_ok(kiln_device_set_weights(set, 0, NULL));
  float s1, s2, mx;
  assert_kiln_ok(kiln_multi_reduce(set, KILN_REDUCE_SUM, n, x, &s1));
  assert_kiln_ok(kiln_multi_reduce(set, KILN_REDUCE_SUM, n, x, &s2));
  assert_memory_equal(&s1, &s2, 4); /* fixed split: the same bits */
  assert_true(fabs(s1 - exact) <= (double)(n - 1) * 0x1p-24 * mag);
  assert_kiln_ok(kiln_multi_reduce(set, KILN_REDUCE_MAX, n, x, &mx));
  float host_max = x[0];
  for (size_t i = 1; i < n; i++)
    host_max = fmaxf(host_max, x[i]);
  assert_true(mx == host_max);

  /* The same parts reduced one after the other on device 0, combined in
   * the same order: the same bits. */
  size_t parts[64];
  assert_kiln_ok(kiln_device_set_split(set, n, ndev, parts));
  kiln_queue *q = kiln_device_set_get_queue(set, 0);
  kiln_context *ctx = kiln_device_set_get_context(set, 0);
  double acc = 0;
  size_t first = 0;
  for (size_t d = 0; d < ndev; d++) {
    kiln_buffer *bx = NULL, *br = NULL;
    float part;
    assert_kiln_ok(kiln_buffer_create(ctx, parts[d] * 4, 0, &bx));
    assert_kiln_ok(kiln_buffer_create(ctx, 4, 0, &br));
    assert_kiln_ok(kiln_buffer_write_sync(
        q, x + first, &(kiln_range){bx, 0, parts[d], KILN_F32}));
    assert_kiln_ok(kiln_reduce(q, KILN_REDUCE_SUM,
                               range_of(bx, 0, parts[d], KILN_F32),
                               range_of(br, 0, 1, KILN_F32), 0, NULL, NULL));
    assert_kiln_ok(
        kiln_buffer_read_sync(q, &(kiln_range){br, 0, 1, KILN_F32}, &part));
    acc += part;
    first += parts[d];
    assert_kiln_ok(kiln_buffer_destroy(bx));
    assert_kiln_ok(kiln_buffer_destroy(br));
  }
  float combined = (float)acc;
  assert_memory_equal(&s1, &combined, 4);
  free(x);
}

static void test_peer_copy(void **state) {
  (void)state;
  size_t other = ndev > 1 ? 1 : 0, size = 40996, n = size / 4;
  kiln_queue *q0 = kiln_device_set_get_queue(set, 0);
  kiln_queue *q1 = kiln_device_set_get_queue(set, other);
  kiln_buffer *src = NULL, *dst = NULL;
  unsigned char *h = malloc(size + 64), *back = malloc(size + 64);
  for (size_t i = 0; i < size + 64; i++)
    h[i] = (unsigned char)(i * 31 + 7);
  assert_kiln_ok(kiln_buffer_create(kiln_device_set_get_context(set, 0),
                                    size + 64, 0, &src));
  assert_kiln_ok(kiln_buffer_create(kiln_device_set_get_context(set, other),
                                    size + 64, 0, &dst));
  assert_kiln_ok(
      kiln_buffer_write_sync(q0, h, &(kiln_range){src, 0, n + 16, KILN_U32}));
  memset(back, 0, size + 64);
  assert_kiln_ok(kiln_buffer_write_sync(
      q1, back, &(kiln_range){dst, 0, n + 16, KILN_U32}));
  /* 1000-byte chunks: 41 of them, the last partial; offsets differ. */
  /* u32 elements: 1000-byte chunks, 41 of them, the last partial; offsets
   * differ. */
  kiln_range whole = {src, 4, n, KILN_U32}, there = {dst, 12, n, KILN_U32};
  kiln_event *done = NULL;
  kiln_event_state done_state = KILN_EVENT_QUEUED;
  assert_kiln_ok(kiln_peer_copy(q0, q1, &whole, &there, 1000, 0, NULL, &done));
  assert_kiln_ok(kiln_event_get_state(done, &done_state));
  assert_int_equal(done_state, KILN_EVENT_COMPLETE);
  assert_kiln_ok(
      kiln_buffer_read_sync(q1, &(kiln_range){dst, 0, n + 16, KILN_U32}, back));
  assert_memory_equal(back + 48, h + 16, size);
  for (size_t i = 0; i < 48; i++)
    assert_int_equal(back[i], 0);
  /* It waits for its wait list: here the event of the copy before. */
  kiln_range one = {src, 0, 1, KILN_U32}, one_there = {dst, 0, 1, KILN_U32};
  assert_kiln_ok(kiln_peer_copy(q0, q1, &one, &one_there, 0, 1, &done, NULL));
  kiln_event_release(done);
  one.count = one_there.count = 0;
  assert_kiln_ok(kiln_peer_copy(q0, q1, &one, &one_there, 0, 0, NULL, NULL));
  kiln_range past = {src, 16, n + 1, KILN_U32};
  there.count = n + 1;
  assert_kiln_status(kiln_peer_copy(q0, q1, &past, &there, 0, 0, NULL, NULL),
                     KILN_ERR_OUT_OF_RANGE);
  assert_kiln_status(kiln_peer_copy(q0, q1, &one, &there, 0, 0, NULL, NULL),
                     KILN_ERR_SHAPE_MISMATCH);
  assert_kiln_status(
      kiln_peer_copy(NULL, q1, &one, &one_there, 0, 0, NULL, NULL),
      KILN_ERR_NULL_POINTER);
  if (other != 0)
    assert_kiln_status(
        kiln_peer_copy(q1, q1, &one, &one_there, 0, 0, NULL, NULL),
        KILN_ERR_WRONG_CONTEXT);
  assert_kiln_ok(kiln_buffer_destroy(src));
  assert_kiln_ok(kiln_buffer_destroy(dst));
  free(h);
  free(back);
}

static void test_bad_input(void **state) {
  (void)state;
  kiln_device_set *none = NULL;
  float x[4] = {0}, r;
  size_t parts[64];
  double w[64] = {0};
  assert_kiln_status(kiln_device_set_create(NULL, NULL, NULL),
                     KILN_ERR_NULL_POINTER);
  assert_kiln_status(kiln_device_set_create("name:no-such-device-xyz", NULL,
                                            &none),
                     KILN_ERR_NO_DEVICE);
  assert_null(none);
  assert_kiln_ok(kiln_device_set_destroy(NULL));
  assert_kiln_status(kiln_device_set_weights(NULL, 0, NULL),
                     KILN_ERR_NULL_POINTER);
  assert_kiln_status(kiln_device_set_weights(set, 3, NULL),
                     KILN_ERR_NULL_POINTER);
  assert_kiln_status(kiln_device_set_weights(set, ndev, w),
                     KILN_ERR_INVALID_ARGUMENT); /* all zero */
  w[0] = -1;
  assert_kiln_status(kiln_device_set_weights(set, ndev, w),
                     KILN_ERR_INVALID_ARGUMENT);
  assert_kiln_status(kiln_device_set_weights(set, 1000, w),
                     KILN_ERR_SHAPE_MISMATCH);
  assert_kiln_status(kiln_device_set_split(set, 10, 1000, parts),
                     KILN_ERR_SHAPE_MISMATCH);
  assert_kiln_status(kiln_device_set_split(set, 10, ndev, NULL),
                     KILN_ERR_NULL_POINTER);
  assert_kiln_status(kiln_device_set_calibrate(NULL), KILN_ERR_NULL_POINTER);
  kiln_matrix one = {.rows = 1, .cols = 1, .dtype = KILN_F32};
  assert_kiln_status(
      kiln_multi_gemm_batched(NULL, 1, &one, x, &one, x, &one, x, 1, 0),
      KILN_ERR_NULL_POINTER);
  assert_kiln_status(
      kiln_multi_gemm_batched(set, 1, &one, x, &one, NULL, &one, x, 1, 0),
      KILN_ERR_NULL_POINTER);
  assert_last_error_contains("b_host is NULL");
  kiln_matrix bad = one;
  bad.layout = (kiln_layout)99;
  assert_kiln_status(
      kiln_multi_gemm_batched(set, 1, &bad, x, &one, x, &one, x, 1, 0),
      KILN_ERR_INVALID_ARGUMENT);
  bad = one;
  bad.dtype = KILN_F16;
  assert_kiln_status(
      kiln_multi_gemm_batched(set, 1, &one, x, &bad, x, &one, x, 1, 0),
      KILN_ERR_INVALID_ARGUMENT);
  assert_last_error_contains("b dtype f16 is not f32");
  bad = one;
  bad.cols = 2;
  assert_kiln_status(
      kiln_multi_gemm_batched(set, 1, &one, x, &bad, x, &one, x, 1, 0),
      KILN_ERR_SHAPE_MISMATCH);
  /* lda below its minimum: refused by the op, nothing written. */
  kiln_matrix ma = {
      .rows = 2, .cols = 2, .ld = 1, .batch_stride = 4, .dtype = KILN_F32};
  kiln_matrix mb = {.rows = 2, .cols = 1, .batch_stride = 2, .dtype = KILN_F32};
  kiln_matrix mc = {.rows = 2, .cols = 1, .batch_stride = 2, .dtype = KILN_F32};
  assert_kiln_status(
      kiln_multi_gemm_batched(set, 1, &ma, x, &mb, x, &mc, x, 1, 0),
      KILN_ERR_INVALID_ARGUMENT);
  assert_kiln_status(kiln_multi_unary(set, KILN_UNARY_EXP, 4, NULL, x),
                     KILN_ERR_NULL_POINTER);
  assert_kiln_status(kiln_multi_unary(set, (kiln_unary_op)99, 4, x, x),
                     KILN_ERR_INVALID_ARGUMENT);
  assert_kiln_status(kiln_multi_binary(set, KILN_BINARY_ADD, SIZE_MAX, x, x,
                                       x),
                     KILN_ERR_INVALID_SIZE);
  assert_kiln_status(kiln_multi_binary(set, KILN_BINARY_ADD, 4, x, NULL, x),
                     KILN_ERR_NULL_POINTER);
  assert_kiln_status(kiln_multi_reduce(set, KILN_REDUCE_ARGMAX, 4, x, &r),
                     KILN_ERR_INVALID_ARGUMENT);
  assert_kiln_status(kiln_multi_reduce(set, KILN_REDUCE_SUM, 0, x, &r),
                     KILN_ERR_INVALID_SIZE);
  assert_kiln_status(kiln_multi_reduce(NULL, KILN_REDUCE_SUM, 4, x, &r),
                     KILN_ERR_NULL_POINTER);
  assert_kiln_ok(kiln_device_set_weights(set, 0, NULL));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_set_and_split), cmocka_unit_test(test_gemm),
      cmocka_unit_test(test_maps),          cmocka_unit_test(test_reduce),
      cmocka_unit_test(test_peer_copy),     cmocka_unit_test(test_bad_input),
  };
  return cmocka_run_group_tests_name("multi", tests, open_set, close_set);
}
