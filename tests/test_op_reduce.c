/* Reductions (kiln_reduce, kiln_dot, kiln_reduce_rows, kiln_reduce_cols)
 * against double-precision host references, for f32, f16 and bf16 inputs,
 * at sizes 0, 1, primes, non-multiples of the 16-wide vectors and of the
 * segment split, 2^24 for sum/dot/nrm2; awkward matrix shapes; offsets;
 * overflow-safe nrm2; NaN rules; first-index argmax; bit-for-bit
 * determinism; bad input.
 *
 * Error bounds (u = 2^-24, the unit roundoff of the f32 accumulation; the
 * inputs are exact in f32 whatever their storage). A recursive sum of terms
 * through at most d additions errs by at most d u sum|x| (Higham, Accuracy
 * and Stability, 4.2). Here an element passes through its lane's running
 * sum (at most n/64 additions: four 16-wide accumulators on the CPU family,
 * at most n/64 per work-item of a 64+ wide group on the GPU family), then a
 * lane or tree combine (at most 12 levels), the scalar tail (at most 31) and
 * the segments in order (at most 4 x compute units x 16, under 2^12 on any
 * profile we ship): d <= n/16 + 2^13 bounds both families. So:
 * - sum: d u sum|x|; mean: that / n plus 1/2 ulp for the division;
 * - dot: (d + 1) u sum|x y| (one more rounding per product unless fused);
 * - nrm2: each scaled square has relative error <= 2u (scaling by powers
 *   of two is exact), the sum (d + 2) u relative, the square root halves it
 *   and adds 1/2 ulp: (d/2 + 3) u relative;
 * - min, max, argmax: exact (they select an element). */
#include <stdio.h>

#include "harness.h"
#include "op_test_util.h"

#define ROFF 2 /* result offset */

static double depth(size_t n) { return (double)n / 16 + 8192; }

struct ref {
  double v;   /* value */
  size_t idx; /* argmax */
  double tol;
};

/* The reference for op over x[0..n) step `stride` (columns use stride =
 * cols), with y for dot (same stride). */
static struct ref reference(int op, kiln_dtype dt, const void *x,
                            const void *y, size_t start, size_t n,
                            size_t stride) {
  const double u = ldexp(1.0, -24);
  struct ref r = {0, 0, 0};
  double sum = 0, sabs = 0, sq = 0, mn = NAN, mx = NAN, best = 0;
  bool have = false;
  for (size_t k = 0; k < n; k++) {
    double v = util_get(dt, x, start + k * stride);
    if (op == 6) {
      double w = util_get(dt, y, start + k * stride);
      sum += v * w;
      sabs += fabs(v * w);
      continue;
    }
    sum += v;
    sabs += fabs(v);
    sq += v * v;
    if (!isnan(v)) {
      mn = isnan(mn) ? v : fmin(mn, v);
      mx = isnan(mx) ? v : fmax(mx, v);
      if (!have || v > best) {
        best = v;
        r.idx = k;
        have = true;
      }
    }
  }
  double d = depth(n);
  switch (op) {
  case KILN_REDUCE_SUM:
    r.v = sum;
    r.tol = d * u * sabs;
    break;
  case KILN_REDUCE_MEAN:
    r.v = sum / (double)n;
    r.tol = d * u * sabs / (double)n + u * fabs(r.v);
    break;
  case KILN_REDUCE_MIN:
    r.v = mn;
    break;
  case KILN_REDUCE_MAX:
    r.v = mx;
    break;
  case KILN_REDUCE_NRM2:
    r.v = sqrt(sq);
    r.tol = (d / 2 + 3) * u * r.v;
    break;
  case 6:
    r.v = sum;
    r.tol = (d + 1) * u * sabs;
    break;
  }
  return r;
}

static const char *const names[] = {"sum", "min", "max", "mean", "nrm2",
                                    "argmax", "dot"};

/* Check result word `got` (f32 bits or u32 index) against r. */
static void check_result(int op, uint32_t got, const struct ref *r,
                         const char *what) {
  if (op == KILN_REDUCE_ARGMAX) {
    if (got != r->idx)
      fail_msg("%s: argmax %u, want %zu", what, got, r->idx);
    return;
  }
  UTIL_CLOSE(util_bits_to_f32(got), r->v, r->tol, "%s", what);
}

/* Values on a grid of 1/8 so ties occur and argmax must pick the first. */
static void *tie_data(kiln_dtype dt, size_t n, uint32_t seed) {
  void *p = util_random(dt, n, -4, 4, seed);
  for (size_t i = 0; i < n; i++)
    util_set(dt, p, i, floor(util_get(dt, p, i) * 8) / 8);
  return p;
}

/* The vectors' offset: test_space_reduce.c also runs the checks at offsets
 * aligned to the GPU family's vectors. */
static size_t vector_xoff = 3;

static void vector_on_device(kiln_context *ctx, kiln_queue *q) {
  static const size_t sizes[] = {0, 1, 3, 17, 31, 33, 127, 1021, 4099, 65537};
  size_t ndt;
  const kiln_dtype *dts = util_float_dtypes(&ndt);
  const size_t maxn = 65537, xoff = vector_xoff;
  kiln_buffer *rb = util_buffer(ctx, 8 * 4, 0);
  for (size_t d = 0; d < ndt; d++) {
    kiln_dtype dt = dts[d];
    void *x = tie_data(dt, xoff + maxn, 31);
    void *y = util_random(dt, xoff + maxn, -2, 2, 32);
    kiln_buffer *xb = util_upload(ctx, q, dt, x, xoff + maxn);
    kiln_buffer *yb = util_upload(ctx, q, dt, y, xoff + maxn);
    for (int op = 0; op <= 6; op++) {
      for (size_t si = 0; si < sizeof sizes / sizeof *sizes; si++) {
        size_t n = sizes[si];
        uint32_t init[8];
        for (int i = 0; i < 8; i++)
          init[i] = 0xdeadbeefu;
        assert_kiln_ok(kiln_buffer_write_sync(q, init, &(kiln_range){rb, 0, 8, KILN_U32}));
        kiln_event *ev = NULL;
        if (op == 6)
          assert_kiln_ok(
              kiln_dot(q, range_of(xb, xoff, n, dt), range_of(yb, xoff, n, dt),
                       range_of(rb, ROFF, 1, KILN_F32), 0, NULL, &ev));
        else
          assert_kiln_ok(kiln_reduce(
              q, (kiln_reduce_op)op, range_of(xb, xoff, n, dt),
              range_of(rb, ROFF, 1, util_result_dtype(op)), 0, NULL, &ev));
        assert_kiln_ok(kiln_event_wait(ev));
        kiln_event_release(ev);
        uint32_t out[8];
        assert_kiln_ok(kiln_buffer_read_sync(q, &(kiln_range){rb, 0, 8, KILN_U32}, out));
        for (int i = 0; i < 8; i++)
          if (i != ROFF || n == 0)
            assert_int_equal(out[i], 0xdeadbeefu); /* nothing else written */
        if (n == 0)
          continue;
        struct ref r = reference(op, dt, x, y, xoff, n, 1);
        char what[64];
        snprintf(what, sizeof what, "%s %s n=%zu", names[op],
                 kiln_dtype_name(dt), n);
        check_result(op, out[ROFF], &r, what);
      }
    }
    assert_kiln_ok(kiln_buffer_destroy(xb));
    assert_kiln_ok(kiln_buffer_destroy(yb));
    free(x);
    free(y);
  }
  assert_kiln_ok(kiln_buffer_destroy(rb));
}

static void test_vector(void **state) {
  (void)state;
  util_each_device(vector_on_device);
}

/* 2^24 f32 elements for sum, dot and nrm2: the benchmark size. */
static void large_on_device(kiln_context *ctx, kiln_queue *q) {
  size_t n = (size_t)1 << 24;
  float *x = malloc(n * sizeof *x);
  assert_non_null(x);
  kiln_test_fill_random(x, n, -1, 1, 77);
  kiln_buffer *xb = util_upload(ctx, q, KILN_F32, x, n);
  kiln_buffer *rb = util_buffer(ctx, 16, 0);
  int ops[] = {KILN_REDUCE_SUM, 6, KILN_REDUCE_NRM2};
  for (int i = 0; i < 3; i++) {
    if (ops[i] == 6)
      assert_kiln_ok(kiln_dot(q, range_of(xb, 0, n, KILN_F32),
                              range_of(xb, 0, n, KILN_F32),
                              range_of(rb, 0, 1, KILN_F32), 0, NULL, NULL));
    else
      assert_kiln_ok(kiln_reduce(
          q, (kiln_reduce_op)ops[i], range_of(xb, 0, n, KILN_F32),
          range_of(rb, 0, 1, util_result_dtype(ops[i])), 0, NULL, NULL));
    uint32_t got;
    assert_kiln_ok(kiln_buffer_read_sync(q, &(kiln_range){rb, 0, 1, KILN_U32}, &got));
    struct ref r = reference(ops[i], KILN_F32, x, x, 0, n, 1);
    check_result(ops[i], got, &r, names[ops[i]]);
  }
  assert_kiln_ok(kiln_buffer_destroy(xb));
  assert_kiln_ok(kiln_buffer_destroy(rb));
  free(x);
}

static void test_large(void **state) {
  (void)state;
  util_each_device(large_on_device);
}

/* nrm2 must neither overflow (1e30^2 is beyond f32) nor underflow (1e-30^2
 * is below it); NaN and inf propagate; min/max/argmax skip NaN. */
static void special_on_device(kiln_context *ctx, kiln_queue *q) {
  const size_t n = 1000;
  float *x = malloc(n * sizeof *x);
  kiln_buffer *xb = NULL, *rb = NULL;
  assert_kiln_ok(kiln_buffer_create(ctx, n * 4, 0, &xb));
  assert_kiln_ok(kiln_buffer_create(ctx, 16, 0, &rb));
  const double scales[] = {1e30, 1e-30, 1e36, 1e-40};
  for (int s = 0; s < 4; s++) {
    kiln_test_fill_random(x, n, -1, 1, 5);
    double sq = 0;
    for (size_t i = 0; i < n; i++) {
      x[i] = (float)(x[i] * scales[s]);
      sq += (double)x[i] * x[i];
    }
    if (s == 2) { /* near FLT_MAX, the result still representable */
      x[17] = 3e38f;
      sq = 0;
      for (size_t i = 0; i < n; i++)
        sq += (double)x[i] * x[i];
    }
    assert_kiln_ok(kiln_buffer_write_sync(q, x, bytes_of(xb, 0, n * 4)));
    assert_kiln_ok(kiln_reduce(q, KILN_REDUCE_NRM2,
                               range_of(xb, 0, n, KILN_F32),
                               range_of(rb, 0, 1, KILN_F32), 0, NULL, NULL));
    float got;
    assert_kiln_ok(kiln_buffer_read_sync(q, &(kiln_range){rb, 0, 1, KILN_U32}, &got));
    double want = sqrt(sq);
    /* Subnormal inputs (1e-40) may be flushed by devices without
     * CL_FP_DENORM: then 0 is the honest answer. */
    if (s == 3 && got == 0.0f)
      continue;
    UTIL_CLOSE(got, want,
               (depth(n) / 2 + 3) * ldexp(1.0, -24) * want +
                   (s == 3 ? 1e-44 * sqrt((double)n) : 0),
               "nrm2 at scale %g", scales[s]);
  }
  /* Blocks of different scales in one vector (the CPU family scales per
   * block of 1024): zeros then tiny values (a zero partial must not
   * flush the tiny ones), then ordinary, huge and tiny again. */
  {
    const size_t m = 5000;
    float *z = malloc(m * sizeof *z);
    kiln_buffer *zb = util_buffer(ctx, m * 4, 0);
    const double parts[][2] = {{0, 0}, {1e-30, 1e-30}, {1, 1e30}};
    for (int c = 0; c < 3; c++) {
      kiln_test_fill_random(z, m, 0.5f, 1, 11 + (uint32_t)c);
      double sq = 0;
      for (size_t i = 0; i < m; i++) {
        double scale = i < 1100   ? parts[c][0]
                       : i < 2300 ? parts[c][1]
                       : i < 4000 ? 1.0
                                  : 1e-35;
        z[i] = (float)(z[i] * scale);
        sq += (double)z[i] * z[i];
      }
      assert_kiln_ok(kiln_buffer_write_sync(q, z, bytes_of(zb, 0, m * 4)));
      assert_kiln_ok(kiln_reduce(q, KILN_REDUCE_NRM2,
                                 range_of(zb, 0, m, KILN_F32),
                                 range_of(rb, 0, 1, KILN_F32), 0, NULL, NULL));
      float got;
      assert_kiln_ok(kiln_buffer_read_sync(q, &(kiln_range){rb, 0, 1, KILN_U32}, &got));
      UTIL_CLOSE(got, sqrt(sq), (depth(m) / 2 + 3) * ldexp(1.0, -24) * sqrt(sq),
                 "nrm2 of mixed scales, case %d", c);
      /* Only zeros and tiny values: the result is tiny, not 0. */
      assert_kiln_ok(kiln_reduce(q, KILN_REDUCE_NRM2,
                                 range_of(zb, 0, 2300, KILN_F32),
                                 range_of(rb, 0, 1, KILN_F32), 0, NULL, NULL));
      assert_kiln_ok(kiln_buffer_read_sync(q, bytes_of(rb, 0, 4), &got));
      double sq2 = 0;
      for (size_t i = 0; i < 2300; i++)
        sq2 += (double)z[i] * z[i];
      UTIL_CLOSE(got, sqrt(sq2),
                 (depth(2300) / 2 + 3) * ldexp(1.0, -24) * sqrt(sq2),
                 "nrm2 of the first 2300, case %d", c);
    }
    assert_kiln_ok(kiln_buffer_destroy(zb));
    free(z);
  }
  float v[6] = {NAN, 2.0f, -1.0f, NAN, 2.0f, 0.5f};
  assert_kiln_ok(kiln_buffer_write_sync(q, v, &(kiln_range){xb, 0, 6, KILN_F32}));
  float r[4];
  uint32_t idx;
  assert_kiln_ok(kiln_reduce(q, KILN_REDUCE_MIN, range_of(xb, 0, 6, KILN_F32),
                             range_of(rb, 0, 1, KILN_F32), 0, NULL, NULL));
  assert_kiln_ok(kiln_reduce(q, KILN_REDUCE_MAX, range_of(xb, 0, 6, KILN_F32),
                             range_of(rb, 1, 1, KILN_F32), 0, NULL, NULL));
  assert_kiln_ok(kiln_reduce(q, KILN_REDUCE_SUM, range_of(xb, 0, 6, KILN_F32),
                             range_of(rb, 2, 1, KILN_F32), 0, NULL, NULL));
  assert_kiln_ok(kiln_reduce(q, KILN_REDUCE_NRM2, range_of(xb, 0, 6, KILN_F32),
                             range_of(rb, 3, 1, KILN_F32), 0, NULL, NULL));
  assert_kiln_ok(kiln_buffer_read_sync(q, bytes_of(rb, 0, sizeof r), r));
  assert_true(r[0] == -1.0f);
  assert_true(r[1] == 2.0f);
  assert_true(isnan(r[2]));
  assert_true(isnan(r[3]));
  assert_kiln_ok(kiln_reduce(q, KILN_REDUCE_ARGMAX,
                             range_of(xb, 0, 6, KILN_F32),
                             range_of(rb, 0, 1, KILN_U32), 0, NULL, NULL));
  assert_kiln_ok(kiln_buffer_read_sync(q, bytes_of(rb, 0, 4), &idx));
  assert_int_equal(idx, 1); /* first of the two 2.0s, NaN skipped */
  float allnan[3] = {NAN, NAN, NAN}, inf[3] = {1.0f, INFINITY, -2.0f};
  assert_kiln_ok(kiln_buffer_write_sync(q, allnan, bytes_of(xb, 0, sizeof allnan)));
  assert_kiln_ok(kiln_reduce(q, KILN_REDUCE_ARGMAX,
                             range_of(xb, 0, 3, KILN_F32),
                             range_of(rb, 0, 1, KILN_U32), 0, NULL, NULL));
  assert_kiln_ok(kiln_reduce(q, KILN_REDUCE_MAX, range_of(xb, 0, 3, KILN_F32),
                             range_of(rb, 1, 1, KILN_F32), 0, NULL, NULL));
  assert_kiln_ok(kiln_buffer_read_sync(q, bytes_of(rb, 0, 8), r));
  assert_int_equal(util_f32_to_bits(r[0]), 0);
  assert_true(isnan(r[1]));
  assert_kiln_ok(kiln_buffer_write_sync(q, inf, bytes_of(xb, 0, sizeof inf)));
  assert_kiln_ok(kiln_reduce(q, KILN_REDUCE_NRM2, range_of(xb, 0, 3, KILN_F32),
                             range_of(rb, 0, 1, KILN_F32), 0, NULL, NULL));
  assert_kiln_ok(kiln_reduce(q, KILN_REDUCE_ARGMAX,
                             range_of(xb, 0, 3, KILN_F32),
                             range_of(rb, 1, 1, KILN_U32), 0, NULL, NULL));
  assert_kiln_ok(kiln_buffer_read_sync(q, bytes_of(rb, 0, 8), r));
  assert_true(isinf(r[0]) && r[0] > 0);
  assert_int_equal(util_f32_to_bits(r[1]), 1);
  assert_kiln_ok(kiln_buffer_destroy(xb));
  assert_kiln_ok(kiln_buffer_destroy(rb));
  free(x);
}

static void test_special(void **state) {
  (void)state;
  util_each_device(special_on_device);
}

static void matrix_on_device(kiln_context *ctx, kiln_queue *q) {
  static const size_t shapes[][2] = {{1, 1},   {3, 17},    {17, 3},
                                     {1, 4099}, {127, 33}, {33, 127},
                                     {5, 65537}, {20000, 3}, {2, 20000},
                                     {64, 1021}};
  size_t ndt;
  const kiln_dtype *dts = util_float_dtypes(&ndt);
  const size_t xoff = 5;
  for (size_t d = 0; d < ndt; d++) {
    kiln_dtype dt = dts[d];
    for (size_t si = 0; si < sizeof shapes / sizeof *shapes; si++) {
      size_t rows = shapes[si][0], cols = shapes[si][1];
      size_t count = rows * cols;
      void *x = tie_data(dt, xoff + count, 40 + (uint32_t)si);
      kiln_buffer *xb = util_upload(ctx, q, dt, x, xoff + count);
      size_t outs = (rows > cols ? rows : cols) + ROFF;
      kiln_buffer *rb = util_buffer(ctx, outs * 4, 0);
      for (int op = 0; op <= KILN_REDUCE_ARGMAX; op++) {
        for (int by_rows = 0; by_rows < 2; by_rows++) {
          if (by_rows)
            assert_kiln_ok(kiln_reduce_rows(
                q, (kiln_reduce_op)op, matrix_of(xb, xoff, rows, cols, dt),
                range_of(rb, ROFF, rows, util_result_dtype(op)), 0, NULL,
                NULL));
          else
            assert_kiln_ok(kiln_reduce_cols(
                q, (kiln_reduce_op)op, matrix_of(xb, xoff, rows, cols, dt),
                range_of(rb, ROFF, cols, util_result_dtype(op)), 0, NULL,
                NULL));
          uint32_t *out = util_download(q, rb, KILN_U32, outs);
          size_t nout = by_rows ? rows : cols;
          for (size_t o = 0; o < nout; o++) {
            struct ref r =
                by_rows ? reference(op, dt, x, NULL, xoff + o * cols, cols, 1)
                        : reference(op, dt, x, NULL, xoff + o, rows, cols);
            char what[96];
            snprintf(what, sizeof what, "%s_%s %s %zux%zu output %zu",
                     by_rows ? "rows" : "cols", names[op], kiln_dtype_name(dt),
                     rows, cols, o);
            check_result(op, out[ROFF + o], &r, what);
          }
          free(out);
        }
      }
      assert_kiln_ok(kiln_buffer_destroy(xb));
      assert_kiln_ok(kiln_buffer_destroy(rb));
      free(x);
    }
  }
}

static void test_matrix(void **state) {
  (void)state;
  util_each_device(matrix_on_device);
}

/* Same device, same sizes: same bits, for vector and matrix forms. */
static void deterministic_on_device(kiln_context *ctx, kiln_queue *q) {
  const size_t n = 300007;
  float *x = malloc(n * sizeof *x);
  kiln_test_fill_random(x, n, -1000, 1000, 9);
  kiln_buffer *xb = util_upload(ctx, q, KILN_F32, x, n);
  kiln_buffer *rb = util_buffer(ctx, 4 * 1000, 0);
  for (int op = KILN_REDUCE_SUM; op <= 6; op++) {
    uint32_t first[3][1000], again[1000];
    for (int run = 0; run < 3; run++) {
      uint32_t *dst = run ? again : first[0];
      if (op == 6)
        assert_kiln_ok(kiln_dot(q, range_of(xb, 0, n, KILN_F32),
                                range_of(xb, 0, n, KILN_F32),
                                range_of(rb, 0, 1, KILN_F32), 0, NULL, NULL));
      else
        assert_kiln_ok(kiln_reduce(
            q, (kiln_reduce_op)op, range_of(xb, 0, n, KILN_F32),
            range_of(rb, 0, 1, util_result_dtype(op)), 0, NULL, NULL));
      assert_kiln_ok(kiln_buffer_read_sync(q, bytes_of(rb, 0, 4), dst));
      if (run)
        assert_int_equal(again[0], first[0][0]);
    }
    if (op == 6)
      continue;
    for (int run = 0; run < 2; run++) {
      uint32_t *dst = run ? again : first[1];
      assert_kiln_ok(kiln_reduce_cols(
          q, (kiln_reduce_op)op, matrix_of(xb, 7, 300, 1000, KILN_F32),
          range_of(rb, 0, 1000, util_result_dtype(op)), 0, NULL, NULL));
      assert_kiln_ok(kiln_buffer_read_sync(q, bytes_of(rb, 0, 4000), dst));
      if (run)
        assert_memory_equal(again, first[1], 4000);
    }
    for (int run = 0; run < 2; run++) {
      uint32_t *dst = run ? again : first[2];
      assert_kiln_ok(kiln_reduce_rows(
          q, (kiln_reduce_op)op, matrix_of(xb, 7, 3, 100000, KILN_F32),
          range_of(rb, 0, 3, util_result_dtype(op)), 0, NULL, NULL));
      assert_kiln_ok(kiln_buffer_read_sync(q, bytes_of(rb, 0, 12), dst));
      if (run)
        assert_memory_equal(again, first[2], 12);
    }
  }
  assert_kiln_ok(kiln_buffer_destroy(xb));
  assert_kiln_ok(kiln_buffer_destroy(rb));
  free(x);
}

static void test_deterministic(void **state) {
  (void)state;
  util_each_device(deterministic_on_device);
}

static void zero_size_on_device(kiln_context *ctx, kiln_queue *q) {
  kiln_buffer *b = util_buffer(ctx, 16, 0);
  kiln_event *e[4] = {NULL, NULL, NULL, NULL};
  assert_kiln_ok(kiln_reduce(q, KILN_REDUCE_SUM, range_of(b, 4, 0, KILN_F32),
                             range_of(b, 4, 1, KILN_F32), 0, NULL, &e[0]));
  assert_kiln_ok(kiln_dot(q, range_of(b, 0, 0, KILN_BF16),
                          range_of(b, 0, 0, KILN_BF16),
                          range_of(b, 0, 1, KILN_F32), 1, &e[0], &e[1]));
  assert_kiln_ok(
      kiln_reduce_rows(q, KILN_REDUCE_MAX, matrix_of(b, 0, 0, 5, KILN_F16),
                       range_of(b, 0, 0, KILN_F32), 1, &e[1], &e[2]));
  assert_kiln_ok(kiln_reduce_cols(q, KILN_REDUCE_ARGMAX,
                                  matrix_of(b, 0, 7, 0, KILN_F32),
                                  range_of(b, 0, 0, KILN_U32), 0, NULL, &e[3]));
  assert_kiln_ok(kiln_event_wait_all(4, e));
  for (int i = 0; i < 4; i++)
    kiln_event_release(e[i]);
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
  kiln_buffer *r = util_buffer(env.ctx, 8, 0);
  kiln_buffer *ro = util_buffer(env.ctx, 8, KILN_MEM_READ_ONLY);

  assert_kiln_error(kiln_reduce(NULL, KILN_REDUCE_SUM,
                                range_of(b, 0, 4, KILN_F32),
                                range_of(r, 0, 1, KILN_F32), 0, NULL, NULL),
                    KILN_ERR_NULL_POINTER, "kiln_reduce: queue is NULL");
  assert_kiln_error(kiln_reduce(q, (kiln_reduce_op)6,
                                range_of(b, 0, 4, KILN_F32),
                                range_of(r, 0, 1, KILN_F32), 0, NULL, NULL),
                    KILN_ERR_INVALID_ARGUMENT, "op 6 is not a kiln_reduce_op");
  assert_kiln_error(kiln_reduce(q, KILN_REDUCE_SUM, range_of(b, 0, 4, KILN_I32),
                                range_of(r, 0, 1, KILN_F32), 0, NULL, NULL),
                    KILN_ERR_INVALID_ARGUMENT, "dtype i32");
  assert_kiln_error(kiln_reduce(q, KILN_REDUCE_SUM,
                                range_of(NULL, 0, 4, KILN_F32),
                                range_of(r, 0, 1, KILN_F32), 0, NULL, NULL),
                    KILN_ERR_NULL_POINTER, "x is NULL");
  assert_kiln_error(kiln_reduce(q, KILN_REDUCE_SUM, range_of(b, 0, 4, KILN_F32),
                                range_of(NULL, 0, 1, KILN_F32), 0, NULL, NULL),
                    KILN_ERR_NULL_POINTER, "result is NULL");
  assert_kiln_error(kiln_reduce(q, KILN_REDUCE_SUM, range_of(b, 0, 4, KILN_F32),
                                range_of(r, 2, 1, KILN_F32), 0, NULL, NULL),
                    KILN_ERR_OUT_OF_RANGE, "result range [offset 2, +1");
  assert_kiln_error(
      kiln_reduce(q, KILN_REDUCE_SUM, range_of(b, 0, 17, KILN_F32),
                  range_of(r, 0, 1, KILN_F32), 0, NULL, NULL),
      KILN_ERR_OUT_OF_RANGE, "x range [offset 0, +17 elements of f32)");
  assert_kiln_error(kiln_reduce(q, KILN_REDUCE_SUM,
                                range_of(b, SIZE_MAX, 4, KILN_F32),
                                range_of(r, 0, 1, KILN_F32), 0, NULL, NULL),
                    KILN_ERR_INVALID_SIZE, "x.offset");
  assert_kiln_status(kiln_reduce(q, KILN_REDUCE_SUM,
                                 range_of(ob, 0, 4, KILN_F32),
                                 range_of(r, 0, 1, KILN_F32), 0, NULL, NULL),
                     KILN_ERR_WRONG_CONTEXT);
  assert_kiln_error(kiln_reduce(q, KILN_REDUCE_SUM, range_of(b, 0, 4, KILN_F32),
                                range_of(ro, 0, 1, KILN_F32), 0, NULL, NULL),
                    KILN_ERR_INVALID_ARGUMENT, "result is written");
  assert_kiln_error(kiln_reduce(q, KILN_REDUCE_SUM, range_of(b, 0, 4, KILN_F32),
                                range_of(b, 2, 1, KILN_F32), 0, NULL, NULL),
                    KILN_ERR_INVALID_ARGUMENT, "overlap");

  assert_kiln_error(kiln_dot(q, range_of(b, 0, 4, KILN_F32),
                             range_of(NULL, 0, 4, KILN_F32),
                             range_of(r, 0, 1, KILN_F32), 0, NULL, NULL),
                    KILN_ERR_NULL_POINTER, "kiln_dot: y is NULL");
  assert_kiln_status(kiln_dot(q, range_of(b, 0, 4, KILN_F32),
                              range_of(ob, 0, 4, KILN_F32),
                              range_of(r, 0, 1, KILN_F32), 0, NULL, NULL),
                     KILN_ERR_WRONG_CONTEXT);
  assert_kiln_status(kiln_dot(q, range_of(b, 0, 4, KILN_U32),
                              range_of(b, 0, 4, KILN_U32),
                              range_of(r, 0, 1, KILN_F32), 0, NULL, NULL),
                     KILN_ERR_INVALID_ARGUMENT);
  assert_kiln_status(kiln_dot(NULL, range_of(b, 0, 4, KILN_F32),
                              range_of(b, 0, 4, KILN_F32),
                              range_of(r, 0, 1, KILN_F32), 0, NULL, NULL),
                     KILN_ERR_NULL_POINTER);

  assert_kiln_error(
      kiln_reduce_rows(q, KILN_REDUCE_SUM, matrix_of(b, 0, 3, 0, KILN_F32),
                       range_of(r, 0, 3, KILN_F32), 0, NULL, NULL),
      KILN_ERR_INVALID_SIZE, "cols is 0 with rows 3");
  assert_kiln_error(
      kiln_reduce_rows(q, KILN_REDUCE_SUM,
                       matrix_of(b, 0, SIZE_MAX, 3, KILN_F32),
                       range_of(r, 0, SIZE_MAX, KILN_F32), 0, NULL, NULL),
      KILN_ERR_INVALID_SIZE, "rows 18446744073709551615 x cols 3 overflows");
  assert_kiln_error(
      kiln_reduce_rows(q, KILN_REDUCE_SUM, matrix_of(b, 0, 3, 5, KILN_F32),
                       range_of(r, 0, 3, KILN_F32), 0, NULL, NULL),
      KILN_ERR_OUT_OF_RANGE, "result range [offset 0, +3 elements of f32)");
  assert_kiln_error(
      kiln_reduce_rows(q, KILN_REDUCE_SUM, matrix_of(b, 0, 2, 9, KILN_F32),
                       range_of(r, 0, 2, KILN_F32), 0, NULL, NULL),
      KILN_ERR_OUT_OF_RANGE, "x range");
  assert_kiln_error(
      kiln_reduce_cols(q, KILN_REDUCE_ARGMAX, matrix_of(b, 0, 0, 2, KILN_F32),
                       range_of(r, 0, 2, KILN_U32), 0, NULL, NULL),
      KILN_ERR_INVALID_SIZE, "rows is 0 with cols 2");
  assert_kiln_error(
      kiln_reduce_cols(q, KILN_REDUCE_ARGMAX,
                       matrix_of(b, 0, (size_t)UINT32_MAX + 1, 1, KILN_F32),
                       range_of(r, 0, 1, KILN_U32), 0, NULL, NULL),
      KILN_ERR_INVALID_SIZE, "indexes are u32");
  assert_kiln_status(
      kiln_reduce_cols(q, (kiln_reduce_op)-1, matrix_of(b, 0, 2, 2, KILN_F32),
                       range_of(r, 0, 2, KILN_F32), 0, NULL, NULL),
      KILN_ERR_INVALID_ARGUMENT);
  assert_kiln_error(
      kiln_reduce_cols(q, KILN_REDUCE_MIN, matrix_of(b, 0, 2, 2, KILN_BF16),
                       range_of(ob, 0, 2, KILN_F32), 0, NULL, NULL),
      KILN_ERR_WRONG_CONTEXT, "kiln_reduce_cols: result belongs");

  /* Results that are not what the op writes; operands that disagree;
   * matrices a row op does not take. */
  assert_kiln_error(kiln_reduce(q, KILN_REDUCE_SUM, range_of(b, 0, 4, KILN_F32),
                                range_of(r, 0, 2, KILN_F32), 0, NULL, NULL),
                    KILN_ERR_SHAPE_MISMATCH,
                    "result holds 2 elements of f32 but a reduction needs 1 "
                    "of f32");
  assert_kiln_error(kiln_reduce(q, KILN_REDUCE_ARGMAX,
                                range_of(b, 0, 4, KILN_F32),
                                range_of(r, 0, 1, KILN_F32), 0, NULL, NULL),
                    KILN_ERR_SHAPE_MISMATCH, "but ARGMAX needs 1 of u32");
  assert_kiln_error(kiln_reduce(q, KILN_REDUCE_SUM, range_of(b, 0, 4, KILN_F32),
                                NULL, 0, NULL, NULL),
                    KILN_ERR_NULL_POINTER, "kiln_reduce: result is NULL");
  assert_kiln_error(kiln_dot(q, range_of(b, 0, 4, KILN_F32),
                             range_of(b, 4, 4, KILN_F16),
                             range_of(r, 0, 1, KILN_F32), 0, NULL, NULL),
                    KILN_ERR_SHAPE_MISMATCH,
                    "x (4 elements of f32) and y (4 elements of f16)");
  assert_kiln_error(kiln_reduce_rows(q, KILN_REDUCE_SUM,
                                     matrix_of(b, 0, 3, 5, KILN_F32),
                                     range_of(r, 0, 2, KILN_F32), 0, NULL,
                                     NULL),
                    KILN_ERR_SHAPE_MISMATCH,
                    "result holds 2 elements of f32 but one result per row "
                    "of x needs 3 of f32");
  assert_kiln_error(kiln_reduce_cols(q, KILN_REDUCE_ARGMAX,
                                     matrix_of(b, 0, 3, 2, KILN_F32),
                                     range_of(r, 0, 2, KILN_F32), 0, NULL,
                                     NULL),
                    KILN_ERR_SHAPE_MISMATCH, "needs 2 of u32");
  kiln_matrix m = {.buffer = b, .rows = 2, .cols = 3, .dtype = KILN_F32};
  m.trans = KILN_TRANS;
  assert_kiln_error(kiln_reduce_rows(q, KILN_REDUCE_SUM, &m,
                                     range_of(r, 0, 2, KILN_F32), 0, NULL,
                                     NULL),
                    KILN_ERR_INVALID_ARGUMENT,
                    "kiln_reduce_rows: x.trans is KILN_TRANS (row ops take");
  m.trans = KILN_NO_TRANS;
  m.ld = 2;
  assert_kiln_error(kiln_reduce_rows(q, KILN_REDUCE_SUM, &m,
                                     range_of(r, 0, 2, KILN_F32), 0, NULL,
                                     NULL),
                    KILN_ERR_INVALID_ARGUMENT, "x.ld 2 is less than 3");
  m.ld = 4;
  assert_kiln_error(kiln_reduce_cols(q, KILN_REDUCE_SUM, &m,
                                     range_of(r, 0, 3, KILN_F32), 0, NULL,
                                     NULL),
                    KILN_ERR_INVALID_ARGUMENT, "x.ld 4 is not x's 3 columns");
  m.ld = 0;
  m.layout = KILN_COL_MAJOR;
  assert_kiln_error(kiln_reduce_cols(q, KILN_REDUCE_SUM, &m,
                                     range_of(r, 0, 3, KILN_F32), 0, NULL,
                                     NULL),
                    KILN_ERR_INVALID_ARGUMENT, "x.layout is KILN_COL_MAJOR");
  m.layout = KILN_ROW_MAJOR;
  m.batch_stride = 6;
  assert_kiln_error(kiln_reduce_rows(q, KILN_REDUCE_SUM, &m,
                                     range_of(r, 0, 2, KILN_F32), 0, NULL,
                                     NULL),
                    KILN_ERR_INVALID_ARGUMENT, "x.batch_stride 6 is not 0");
  /* ld == cols is contiguous, the same as 0. */
  m.batch_stride = 0;
  m.ld = 3;
  assert_kiln_ok(kiln_reduce_rows(q, KILN_REDUCE_SUM, &m,
                                  range_of(r, 0, 2, KILN_F32), 0, NULL, NULL));
  assert_kiln_ok(kiln_buffer_destroy(r));
  assert_kiln_ok(kiln_buffer_destroy(ro));
  util_bad_env_close(&env);
}

/* test_space_reduce.c runs the checks above with its own main. */
#ifndef KILN_OP_TEST_NO_MAIN
int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_vector),       cmocka_unit_test(test_large),
      cmocka_unit_test(test_special),      cmocka_unit_test(test_matrix),
      cmocka_unit_test(test_deterministic), cmocka_unit_test(test_zero_size),
      cmocka_unit_test(test_bad_arguments),
  };
  return KILN_TEST_RUN("op_reduce", tests, true);
}
#endif
