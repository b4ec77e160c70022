/* Softmax cross-entropy (forward, backward) and accuracy against float64
 * host references on awkward shapes, every float dtype, u32 and i32 labels,
 * offsets with guard elements, in place where allowed, both kernel
 * families; the backward op also against float64 finite differences of the
 * loss; logits of +-1e4; bad labels; bad input. (Softmax and layernorm
 * backward: test_op_train_rows_backward.c.)
 *
 * Error bounds (u = 2^-24, n = cols, d = x - max):
 * - loss = (max - x_l) + log(sum exp d): the subtraction rounds once
 *   (u |max - x_l|); each exp term errs relatively by (|d| + 4) u, which
 *   weighted by exp(d) / sum stays below (1/e + 4) u per term, so the sum
 *   errs by at most (1.5 n + 8) u relatively and log(sum) absolutely by
 *   that plus u |log sum|: tol = (1.5 n + 8) u + 2 u (|max - x_l| + |loss|).
 *   The mean adds Kahan summation's 2u and the division's u.
 * - dlogits = (exp(d) / sum - onehot) scale: relative (|d| + 1.5 n + 12) u
 *   on the softmax term, plus u for the subtraction, times |scale|, plus
 *   u |dlogits| for the product.
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

/* Reference loss of one row of stored logits, in double. */
static double ref_loss(kiln_dtype dt, const void *x, size_t off, size_t cols,
                       uint32_t label, double *tol) {
  double m = -INFINITY, s = 0;
  for (size_t c = 0; c < cols; c++)
    m = fmax(m, util_get(dt, x, off + c));
  for (size_t c = 0; c < cols; c++)
    s += exp(util_get(dt, x, off + c) - m);
  if (label >= cols) {
    *tol = 0;
    return NAN;
  }
  double a = m - util_get(dt, x, off + label), loss = a + log(s);
  *tol = (1.5 * (double)cols + 8) * U + 2 * U * (fabs(a) + fabs(loss));
  return loss;
}

static void ce_case(kiln_context *ctx, kiln_queue *q, const char *profile,
                    kiln_dtype dt, kiln_dtype ldt, size_t rows, size_t cols,
                    void *x, uint32_t *labels) {
  size_t count = rows * cols, total = XOFF + count + 3;
  kiln_buffer *xb = util_upload(ctx, q, dt, x, total);
  kiln_buffer *lb = util_upload(ctx, q, ldt, labels, LOFF + rows);
  float *l0 = util_random(KILN_F32, YOFF + rows + 3, -1, 1, 5);
  kiln_buffer *lossb = util_upload(ctx, q, KILN_F32, l0, YOFF + rows + 3);
  float m0[3] = {7, 7, 7};
  kiln_buffer *meanb = util_upload(ctx, q, KILN_F32, m0, 3);
  char what[80];
  snprintf(what, sizeof what, "%s ce %s labels %s %zux%zu", profile,
           kiln_dtype_name(dt), kiln_dtype_name(ldt), rows, cols);
  for (int variant = 0; variant < 3; variant++) {
    /* 0: loss and mean; 1: mean only (workspace); 2: loss only. */
    assert_kiln_ok(kiln_softmax_cross_entropy(
        q, MATRIX(xb, XOFF, rows, cols, dt), RANGE(lb, LOFF, rows, ldt),
        variant == 1 ? NULL : RANGE(lossb, YOFF, rows, KILN_F32),
        variant == 2 ? NULL : RANGE(meanb, 1, 1, KILN_F32), 0, NULL, NULL));
    float *loss = util_download(q, lossb, KILN_F32, YOFF + rows + 3);
    float *mean = util_download(q, meanb, KILN_F32, 3);
    double sum = 0, tsum = 0;
    for (size_t r = 0; r < rows; r++) {
      double tol,
          want = ref_loss(dt, x, XOFF + r * cols, cols, labels[LOFF + r], &tol);
      sum += want;
      tsum += tol;
      if (variant != 1)
        UTIL_CLOSE(loss[YOFF + r], want, tol, "%s row %zu", what, r);
    }
    if (variant != 2)
      UTIL_CLOSE(mean[1], sum / (double)rows,
                 tsum / (double)rows + 4 * U * fabs(sum / (double)rows),
                 "%s mean", what);
    assert_true(mean[0] == 7 && mean[2] == 7);
    util_check_guard(KILN_F32, l0, loss, YOFF, rows, YOFF + rows + 3, what);
    free(loss);
    free(mean);
  }
  /* Backward, into a fresh buffer and in place. */
  const float scale = 1.0f / (float)rows;
  void *d0 = util_random(dt, total, -1, 1, 6);
  kiln_buffer *db = util_upload(ctx, q, dt, d0, total);
  for (int inplace = 0; inplace < 2; inplace++) {
    kiln_buffer *out = inplace ? xb : db;
    assert_kiln_ok(kiln_softmax_cross_entropy_backward(
        q, MATRIX(xb, XOFF, rows, cols, dt), RANGE(lb, LOFF, rows, ldt),
        MATRIX(out, XOFF, rows, cols, dt), scale, 0, NULL, NULL));
    void *g = util_download(q, out, dt, total);
    for (size_t r = 0; r < rows; r++) {
      const size_t o = XOFF + r * cols;
      double m = -INFINITY, s = 0;
      for (size_t c = 0; c < cols; c++)
        m = fmax(m, util_get(dt, x, o + c));
      for (size_t c = 0; c < cols; c++)
        s += exp(util_get(dt, x, o + c) - m);
      for (size_t c = 0; c < cols; c++) {
        double d = util_get(dt, x, o + c) - m, sm = exp(d) / s;
        double want = (sm - (c == labels[LOFF + r])) * scale;
        double tol =
            scale * (sm * (fabs(d) + 1.5 * (double)cols + 12) * U + U) +
            U * fabs(want) + util_storage_tol(dt, want);
        UTIL_CLOSE(util_get(dt, g, o + c), want, tol, "%s backward%s %zu,%zu",
                   what, inplace ? " in place" : "", r, c);
      }
    }
    util_check_guard(dt, inplace ? x : d0, g, XOFF, count, total, what);
    free(g);
  }
  free(d0);
  free(l0);
  assert_kiln_ok(kiln_buffer_destroy(db));
  assert_kiln_ok(kiln_buffer_destroy(xb));
  assert_kiln_ok(kiln_buffer_destroy(lb));
  assert_kiln_ok(kiln_buffer_destroy(lossb));
  assert_kiln_ok(kiln_buffer_destroy(meanb));
}

static void ce_body(kiln_context *ctx, kiln_queue *q, const char *profile) {
  size_t ndt;
  const kiln_dtype *dts = util_float_dtypes(&ndt);
  for (size_t d = 0; d < ndt; d++)
    for (size_t si = 0; si < NSHAPES; si++) {
      size_t rows = shapes[si][0], cols = shapes[si][1];
      size_t total = XOFF + rows * cols + 3;
      kiln_dtype ldt = si % 2 ? KILN_I32 : KILN_U32;
      void *x = util_random(dts[d], total, -6, 6, 31 + (uint32_t)si);
      uint32_t *labels = train_labels(ldt, LOFF + rows, cols, 32);
      ce_case(ctx, q, profile, dts[d], ldt, rows, cols, x, labels);
      /* Logits of +-1e4: a naive exp overflows, log(softmax) underflows. */
      for (size_t i = 0; i < total; i++)
        util_set(dts[d], x, i, util_get(dts[d], x, i) < 0 ? -1e4 : 1e4 + i % 3);
      ce_case(ctx, q, profile, dts[d], ldt, rows, cols, x, labels);
      free(x);
      free(labels);
    }
}

static void test_cross_entropy(void **state) {
  (void)state;
  train_each_profile(ce_body);
}

/* Sum over rows of scale * loss, the function ce_backward differentiates. */
static size_t g_rows, g_cols;
static const uint32_t *g_labels;
static double ce_total(const double *x) {
  double t = 0;
  for (size_t r = 0; r < g_rows; r++) {
    double m = -INFINITY, s = 0;
    for (size_t c = 0; c < g_cols; c++)
      m = fmax(m, x[r * g_cols + c]);
    for (size_t c = 0; c < g_cols; c++)
      s += exp(x[r * g_cols + c] - m);
    t += m + log(s) - x[r * g_cols + g_labels[r]];
  }
  return t / (double)g_rows;
}


/* Labels out of range: NaN loss and mean, a NaN gradient row; the other
 * rows unaffected. Then the backward op against finite differences. */
static void ce_bad_label_body(kiln_context *ctx, kiln_queue *q,
                              const char *profile) {
  float x[12];
  kiln_test_fill_random(x, 12, -2, 2, 3);
  int32_t labels[3] = {1, -1, 4};
  kiln_buffer *xb = util_upload(ctx, q, KILN_F32, x, 12);
  kiln_buffer *lb = util_upload(ctx, q, KILN_I32, labels, 3);
  kiln_buffer *ob = util_buffer(ctx, 16 * 4, 0);
  assert_kiln_ok(kiln_softmax_cross_entropy(
      q, MATRIX(xb, 0, 3, 4, KILN_F32), RANGE(lb, 0, 3, KILN_I32),
      RANGE(ob, 0, 3, KILN_F32), RANGE(ob, 3, 1, KILN_F32), 0, NULL, NULL));
  float out[16];
  assert_kiln_ok(kiln_buffer_read_sync(q, &(kiln_range){ob, 0, 4, KILN_F32}, out));
  assert_true(isfinite(out[0]) && isnan(out[1]) && isnan(out[2]) &&
              isnan(out[3]));
  assert_kiln_ok(kiln_softmax_cross_entropy_backward(
      q, MATRIX(xb, 0, 3, 4, KILN_F32), RANGE(lb, 0, 3, KILN_I32),
      MATRIX(ob, 0, 3, 4, KILN_F32), 0.5f, 0, NULL, NULL));
  assert_kiln_ok(kiln_buffer_read_sync(q, bytes_of(ob, 0, 48), out));
  for (int c = 0; c < 4; c++)
    assert_true(isfinite(out[c]) && isnan(out[4 + c]) && isnan(out[8 + c]));
  assert_kiln_ok(kiln_buffer_destroy(xb));
  assert_kiln_ok(kiln_buffer_destroy(lb));
  assert_kiln_ok(kiln_buffer_destroy(ob));

  /* Finite differences, f32 (the float64 quotient is the reference). */
  enum { R = 5, C = 7 };
  float xf[R * C];
  double xd[R * C], fd[R * C];
  uint32_t lab[R] = {0, 6, 3, 3, 1};
  kiln_test_fill_random(xf, R * C, -3, 3, 44);
  for (int i = 0; i < R * C; i++)
    xd[i] = xf[i];
  g_rows = R;
  g_cols = C;
  g_labels = lab;
  train_fd_grad(ce_total, xd, R * C, fd);
  xb = util_upload(ctx, q, KILN_F32, xf, R * C);
  lb = util_upload(ctx, q, KILN_U32, lab, R);
  assert_kiln_ok(kiln_softmax_cross_entropy_backward(
      q, MATRIX(xb, 0, R, C, KILN_F32), RANGE(lb, 0, R, KILN_U32),
      MATRIX(xb, 0, R, C, KILN_F32), 1.0f / R, 0, NULL, NULL));
  float g[R * C];
  assert_kiln_ok(kiln_buffer_read_sync(q, &(kiln_range){xb, 0, R * C, KILN_F32}, g));
  for (int i = 0; i < R * C; i++)
    UTIL_CLOSE(g[i], fd[i], 1e-6 * (1 + fabs(fd[i])), "%s ce fd at %d", profile,
               i);
  assert_kiln_ok(kiln_buffer_destroy(xb));
  assert_kiln_ok(kiln_buffer_destroy(lb));
}

static void test_cross_entropy_labels_and_fd(void **state) {
  (void)state;
  train_each_profile(ce_bad_label_body);
}

static uint32_t ref_argmax(kiln_dtype dt, const void *x, size_t off,
                           size_t cols) {
  uint32_t best = UINT32_MAX;
  for (size_t c = 0; c < cols; c++) {
    double v = util_get(dt, x, off + c);
    if (!isnan(v) && (best == UINT32_MAX || v > util_get(dt, x, off + best)))
      best = (uint32_t)c;
  }
  return best == UINT32_MAX ? 0 : best;
}

static void accuracy_body(kiln_context *ctx, kiln_queue *q,
                          const char *profile) {
  size_t ndt;
  const kiln_dtype *dts = util_float_dtypes(&ndt);
  for (size_t d = 0; d < ndt; d++)
    for (size_t si = 0; si < NSHAPES; si++) {
      kiln_dtype dt = dts[d];
      size_t rows = shapes[si][0], cols = shapes[si][1];
      size_t total = XOFF + rows * cols + 3;
      /* Few distinct values, so rows have ties; some NaN and whole-NaN
       * rows. */
      void *x = util_random(dt, total, 0, 4, 51 + (uint32_t)si);
      for (size_t i = 0; i < total; i++)
        util_set(dt, x, i, floor(util_get(dt, x, i)));
      for (size_t i = 0; i < total; i += 7)
        util_set(dt, x, i, NAN);
      if (rows > 2)
        for (size_t c = 0; c < cols; c++)
          util_set(dt, x, XOFF + 2 * cols + c, NAN);
      uint32_t *labels = train_labels(KILN_U32, LOFF + rows, cols, 52);
      uint32_t hits = 0;
      for (size_t r = 0; r < rows; r++) {
        if (r % 3 == 0) /* make some rows right */
          labels[LOFF + r] = ref_argmax(dt, x, XOFF + r * cols, cols);
        if (r % 11 == 5)
          labels[LOFF + r] = (uint32_t)cols; /* out of range */
        hits += labels[LOFF + r] == ref_argmax(dt, x, XOFF + r * cols, cols);
      }
      kiln_buffer *xb = util_upload(ctx, q, dt, x, total);
      kiln_buffer *lb = util_upload(ctx, q, KILN_U32, labels, LOFF + rows);
      uint32_t c0[3] = {9, 1000, 9};
      kiln_buffer *cb = util_upload(ctx, q, KILN_U32, c0, 3);
      assert_kiln_ok(kiln_accuracy_count(
          q, MATRIX(xb, XOFF, rows, cols, dt), RANGE(lb, LOFF, rows, KILN_U32),
          RANGE(cb, 1, 1, KILN_U32), true, 0, NULL, NULL));
      assert_kiln_ok(kiln_accuracy_count(
          q, MATRIX(xb, XOFF, rows, cols, dt), RANGE(lb, LOFF, rows, KILN_U32),
          RANGE(cb, 1, 1, KILN_U32), true, 0, NULL, NULL));
      uint32_t c[3];
      assert_kiln_ok(kiln_buffer_read_sync(q, &(kiln_range){cb, 0, 3, KILN_U32}, c));
      if (c[1] != 1000 + 2 * hits)
        fail_msg("%s accuracy %s %zux%zu: %u, want %u", profile,
                 kiln_dtype_name(dt), rows, cols, c[1], 1000 + 2 * hits);
      assert_kiln_ok(kiln_accuracy_count(
          q, MATRIX(xb, XOFF, rows, cols, dt), RANGE(lb, LOFF, rows, KILN_U32),
          RANGE(cb, 1, 1, KILN_U32), false, 0, NULL, NULL));
      assert_kiln_ok(kiln_buffer_read_sync(q, bytes_of(cb, 0, sizeof c), c));
      assert_int_equal(c[1], hits);
      assert_true(c[0] == 9 && c[2] == 9);
      free(x);
      free(labels);
      assert_kiln_ok(kiln_buffer_destroy(xb));
      assert_kiln_ok(kiln_buffer_destroy(lb));
      assert_kiln_ok(kiln_buffer_destroy(cb));
    }
}

static void test_accuracy(void **state) {
  (void)state;
  train_each_profile(accuracy_body);
}

static void test_bad_arguments(void **state) {
  (void)state;
  struct util_bad_env env = util_bad_env_open();
  kiln_queue *q = env.q;
  kiln_buffer *b = env.b, *ob = env.ob;
  kiln_buffer *c = util_buffer(env.ctx, 64, 0);
  kiln_buffer *l = util_buffer(env.ctx, 64, 0);
  /* cross-entropy */
  assert_kiln_error(
      kiln_softmax_cross_entropy(NULL, MATRIX(b, 0, 2, 2, KILN_F32),
                                 RANGE(l, 0, 2, KILN_U32),
                                 RANGE(c, 0, 2, KILN_F32), NULL, 0, NULL, NULL),
      KILN_ERR_NULL_POINTER, "kiln_softmax_cross_entropy: queue is NULL");
  assert_kiln_error(kiln_softmax_cross_entropy(q, MATRIX(b, 0, 2, 2, KILN_F32),
                                               RANGE(l, 0, 2, KILN_F32),
                                               RANGE(c, 0, 2, KILN_F32), NULL,
                                               0, NULL, NULL),
                    KILN_ERR_INVALID_ARGUMENT, "labels dtype f32");
  assert_kiln_error(kiln_softmax_cross_entropy(q, MATRIX(b, 0, 2, 2, KILN_F32),
                                               RANGE(l, 0, 2, KILN_U32), NULL,
                                               NULL, 0, NULL, NULL),
                    KILN_ERR_NULL_POINTER, "loss and mean are both NULL");
  assert_kiln_error(kiln_softmax_cross_entropy(q, MATRIX(b, 0, 2, 0, KILN_F32),
                                               RANGE(l, 0, 2, KILN_U32),
                                               RANGE(c, 0, 2, KILN_F32), NULL,
                                               0, NULL, NULL),
                    KILN_ERR_INVALID_SIZE, "cols is 0");
  assert_kiln_error(
      kiln_softmax_cross_entropy(q, MATRIX(b, 0, 1, 1u << 31, KILN_F32),
                                 RANGE(l, 0, 1, KILN_U32),
                                 RANGE(c, 0, 1, KILN_F32), NULL, 0, NULL, NULL),
      KILN_ERR_INVALID_SIZE, "exceeds INT32_MAX");
  assert_kiln_error(kiln_softmax_cross_entropy(q, MATRIX(b, 0, 2, 2, KILN_F32),
                                               RANGE(l, 15, 2, KILN_U32),
                                               RANGE(c, 0, 2, KILN_F32), NULL,
                                               0, NULL, NULL),
                    KILN_ERR_OUT_OF_RANGE, "labels range");
  assert_kiln_error(kiln_softmax_cross_entropy(q, MATRIX(b, 0, 2, 2, KILN_F32),
                                               RANGE(l, 0, 2, KILN_U32),
                                               RANGE(b, 2, 2, KILN_F32), NULL,
                                               0, NULL, NULL),
                    KILN_ERR_INVALID_ARGUMENT, "overlap");
  assert_kiln_error(kiln_softmax_cross_entropy(
                        q, MATRIX(b, 0, 2, 2, KILN_F32),
                        RANGE(l, 0, 2, KILN_U32), RANGE(c, 0, 2, KILN_F32),
                        RANGE(ob, 0, 1, KILN_F32), 0, NULL, NULL),
                    KILN_ERR_WRONG_CONTEXT, "mean belongs");
  assert_kiln_error(kiln_softmax_cross_entropy_backward(
                        NULL, MATRIX(b, 0, 2, 2, KILN_F32),
                        RANGE(l, 0, 2, KILN_U32), MATRIX(c, 0, 2, 2, KILN_F32),
                        1, 0, NULL, NULL),
                    KILN_ERR_NULL_POINTER, "queue is NULL");
  assert_kiln_error(kiln_softmax_cross_entropy_backward(
                        q, MATRIX(b, 0, 2, 2, KILN_F32),
                        RANGE(l, 0, 2, KILN_U32), MATRIX(c, 0, 2, 2, KILN_F32),
                        NAN, 0, NULL, NULL),
                    KILN_ERR_INVALID_ARGUMENT, "scale nan must be finite");
  assert_kiln_error(kiln_softmax_cross_entropy_backward(
                        q, MATRIX(b, 0, 2, 2, KILN_F32),
                        RANGE(l, 0, 2, KILN_U32), MATRIX(b, 1, 2, 2, KILN_F32),
                        1, 0, NULL, NULL),
                    KILN_ERR_INVALID_ARGUMENT, "overlap");
  assert_kiln_error(kiln_softmax_cross_entropy_backward(
                        q, MATRIX(b, 0, 2, 2, KILN_F32),
                        RANGE(l, 0, 2, KILN_U32), NULL, 1, 0, NULL, NULL),
                    KILN_ERR_NULL_POINTER, "dlogits is NULL");
  /* accuracy */
  assert_kiln_error(kiln_accuracy_count(NULL, MATRIX(b, 0, 2, 2, KILN_F32),
                                        RANGE(l, 0, 2, KILN_U32),
                                        RANGE(c, 0, 1, KILN_U32), false, 0,
                                        NULL, NULL),
                    KILN_ERR_NULL_POINTER, "queue is NULL");
  assert_kiln_error(kiln_accuracy_count(q, MATRIX(b, 0, 2, 2, KILN_F32),
                                        RANGE(l, 0, 2, KILN_U32), NULL, false,
                                        0, NULL, NULL),
                    KILN_ERR_NULL_POINTER, "count is NULL");
  assert_kiln_error(kiln_accuracy_count(q, MATRIX(b, 0, 2, 2, KILN_F32),
                                        RANGE(l, 0, 2, KILN_U32),
                                        RANGE(l, 1, 1, KILN_U32), false, 0,
                                        NULL, NULL),
                    KILN_ERR_INVALID_ARGUMENT, "overlap");
  assert_kiln_error(kiln_accuracy_count(q, MATRIX(b, 0, SIZE_MAX, 2, KILN_F32),
                                        RANGE(l, 0, SIZE_MAX, KILN_U32),
                                        RANGE(c, 0, 1, KILN_U32), false, 0,
                                        NULL, NULL),
                    KILN_ERR_INVALID_SIZE, "overflows");
  assert_kiln_error(kiln_accuracy_count(q, MATRIX(b, 0, 2, 2, (kiln_dtype)42),
                                        RANGE(l, 0, 2, KILN_U32),
                                        RANGE(c, 0, 1, KILN_U32), false, 0,
                                        NULL, NULL),
                    KILN_ERR_INVALID_ARGUMENT, "dtype 42");
  /* Operands that disagree with the logits, and the outputs' own types. */
  kiln_matrix z = {.buffer = b, .rows = 2, .cols = 3, .dtype = KILN_F32};
  assert_kiln_error(
      kiln_softmax_cross_entropy(q, &z, RANGE(l, 0, 3, KILN_U32),
                                 RANGE(c, 0, 2, KILN_F32), NULL, 0, NULL, NULL),
      KILN_ERR_SHAPE_MISMATCH, "labels has 3 elements but logits' rows is 2");
  assert_kiln_error(kiln_softmax_cross_entropy(q, &z, RANGE(l, 0, 2, KILN_U32),
                                               RANGE(c, 0, 3, KILN_F32), NULL,
                                               0, NULL, NULL),
                    KILN_ERR_SHAPE_MISMATCH, "loss has 3 elements");
  assert_kiln_error(kiln_softmax_cross_entropy(q, &z, RANGE(l, 0, 2, KILN_U32),
                                               RANGE(c, 0, 2, KILN_BF16), NULL,
                                               0, NULL, NULL),
                    KILN_ERR_INVALID_ARGUMENT, "loss dtype bf16");
  assert_kiln_error(kiln_softmax_cross_entropy(q, &z, RANGE(l, 0, 2, KILN_U32),
                                               NULL, RANGE(c, 0, 2, KILN_F32),
                                               0, NULL, NULL),
                    KILN_ERR_SHAPE_MISMATCH, "mean has 2 elements");
  assert_kiln_error(kiln_softmax_cross_entropy(q, &z, RANGE(l, 0, 2, KILN_U32),
                                               NULL, RANGE(c, 0, 1, KILN_F16),
                                               0, NULL, NULL),
                    KILN_ERR_INVALID_ARGUMENT, "mean dtype f16");
  assert_kiln_error(kiln_softmax_cross_entropy_backward(
                        q, &z, RANGE(l, 0, 2, KILN_I32),
                        MATRIX(c, 0, 3, 2, KILN_F32), 1, 0, NULL, NULL),
                    KILN_ERR_SHAPE_MISMATCH,
                    "dlogits is 3x2 but logits is 2x3");
  assert_kiln_error(kiln_softmax_cross_entropy_backward(
                        q, &z, RANGE(l, 0, 2, KILN_I32),
                        MATRIX(c, 0, 2, 3, KILN_F16), 1, 0, NULL, NULL),
                    KILN_ERR_SHAPE_MISMATCH, "dlogits dtype f16 differs");
  assert_kiln_error(kiln_accuracy_count(q, &z, RANGE(l, 0, 1, KILN_U32),
                                        RANGE(c, 0, 1, KILN_U32), false, 0,
                                        NULL, NULL),
                    KILN_ERR_SHAPE_MISMATCH, "labels has 1 elements");
  assert_kiln_error(kiln_accuracy_count(q, &z, RANGE(l, 0, 2, KILN_U32),
                                        RANGE(c, 0, 1, KILN_I32), false, 0,
                                        NULL, NULL),
                    KILN_ERR_INVALID_ARGUMENT, "count dtype i32");
  assert_kiln_error(kiln_accuracy_count(q, &z, RANGE(l, 0, 2, KILN_U32),
                                        RANGE(c, 0, 2, KILN_U32), false, 0,
                                        NULL, NULL),
                    KILN_ERR_SHAPE_MISMATCH, "count has 2 elements");
  assert_kiln_ok(kiln_buffer_destroy(c));
  assert_kiln_ok(kiln_buffer_destroy(l));
  util_bad_env_close(&env);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_cross_entropy),
      cmocka_unit_test(test_cross_entropy_labels_and_fd),
      cmocka_unit_test(test_accuracy),
      cmocka_unit_test(test_bad_arguments),
  };
  return KILN_TEST_RUN("op_train_loss", tests, true);
}
