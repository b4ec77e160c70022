/* kiln_binary_broadcast and kiln_unary_backward against float64 host
 * references: every binary op with a row and a column vector, every float
 * dtype, awkward shapes, offsets with guard elements, in place; activation
 * gradients against float64 finite differences of the activation, from x
 * and from y; both kernel families on every device; bad input.
 *
 * Error bounds (u = 2^-24): a broadcast op is one f32 operation on exact
 * inputs, correctly rounded (division within 2.5 ulp where OpenCL allows
 * it): 3u |want|. A gradient multiplies dy by f'(v) computed from exp or
 * tanh (a few ulp each) and a handful of roundings; the float64 central
 * difference errs by about 1e-10; so 64u (|dy| (1 + |x|)) covers both. f16
 * and bf16 add the store's rounding (util_storage_tol). */
#include "train_test_util.h"

static const size_t shapes[][2] = {{1, 1},    {1, 17},   {17, 1}, {3, 1021},
                                   {64, 127}, {300, 33}, {7, 257}};
#define NSHAPES (sizeof shapes / sizeof shapes[0])
#define AOFF 3
#define BOFF 2
#define YOFF 5

static double ref_binary(kiln_binary_op op, double a, double b) {
  switch (op) {
  case KILN_BINARY_ADD:
    return (float)(a + b);
  case KILN_BINARY_SUB:
    return (float)(a - b);
  case KILN_BINARY_MUL:
    return (float)(a * b);
  case KILN_BINARY_DIV:
    return (float)(a / b);
  case KILN_BINARY_MAX:
    return fmax(a, b);
  case KILN_BINARY_MIN:
    return fmin(a, b);
  }
  return NAN;
}

static void broadcast_body(kiln_context *ctx, kiln_queue *q,
                           const char *profile) {
  const double u = ldexp(1.0, -24);
  size_t ndt;
  const kiln_dtype *dts = util_float_dtypes(&ndt);
  for (size_t d = 0; d < ndt; d++) {
    kiln_dtype dt = dts[d];
    for (size_t si = 0; si < NSHAPES; si++) {
      size_t rows = shapes[si][0], cols = shapes[si][1], count = rows * cols;
      size_t total = YOFF + count + 3, btotal = BOFF + rows + cols + 3;
      void *a = util_random(dt, total, -4, 4, 7 + (uint32_t)si);
      /* b away from 0 so division stays tame. */
      void *b = util_random(dt, btotal, 0.5, 3, 8 + (uint32_t)si);
      void *y0 = util_random(dt, total, -1, 1, 9);
      kiln_buffer *ab = util_upload(ctx, q, dt, a, total);
      kiln_buffer *bb = util_upload(ctx, q, dt, b, btotal);
      for (int op = KILN_BINARY_ADD; op <= KILN_BINARY_MIN; op++) {
        for (int bc = 0; bc < 2; bc++) {
          kiln_buffer *yb = util_upload(ctx, q, dt, y0, total);
          assert_kiln_ok(kiln_binary_broadcast(
              q, (kiln_binary_op)op, (kiln_broadcast)bc,
              MATRIX(ab, AOFF, rows, cols, dt),
              RANGE(bb, BOFF, BCAST_COUNT((kiln_broadcast)bc, rows, cols), dt),
              MATRIX(yb, YOFF, rows, cols, dt), 0, NULL, NULL));
          void *y = util_download(q, yb, dt, total);
          char what[80];
          snprintf(what, sizeof what, "%s broadcast %s op %d %s %zux%zu",
                   profile, bc ? "col" : "row", op, kiln_dtype_name(dt), rows,
                   cols);
          for (size_t r = 0; r < rows; r++)
            for (size_t c = 0; c < cols; c++) {
              double av = util_get(dt, a, AOFF + r * cols + c);
              double bv = util_get(dt, b, BOFF + (bc ? r : c));
              double want = ref_binary((kiln_binary_op)op, av, bv);
              UTIL_CLOSE(util_get(dt, y, YOFF + r * cols + c), want,
                         3 * u * fabs(want) + util_storage_tol(dt, want),
                         "%s at %zu,%zu", what, r, c);
            }
          util_check_guard(dt, y0, y, YOFF, count, total, what);
          free(y);
          assert_kiln_ok(kiln_buffer_destroy(yb));
        }
      }
      /* In place, a bias add: a += b row-wise. */
      assert_kiln_ok(kiln_binary_broadcast(
          q, KILN_BINARY_ADD, KILN_BROADCAST_ROW,
          MATRIX(ab, AOFF, rows, cols, dt), RANGE(bb, BOFF, cols, dt),
          MATRIX(ab, AOFF, rows, cols, dt), 0, NULL, NULL));
      void *y = util_download(q, ab, dt, total);
      for (size_t i = 0; i < count; i++) {
        double want = (float)(util_get(dt, a, AOFF + i) +
                              util_get(dt, b, BOFF + i % cols));
        UTIL_CLOSE(util_get(dt, y, AOFF + i), want,
                   3 * u * fabs(want) + util_storage_tol(dt, want),
                   "%s in place %s %zux%zu at %zu", profile,
                   kiln_dtype_name(dt), rows, cols, i);
      }
      util_check_guard(dt, a, y, AOFF, count, total, "in place");
      free(y);
      assert_kiln_ok(kiln_buffer_destroy(ab));
      assert_kiln_ok(kiln_buffer_destroy(bb));
      free(a);
      free(b);
      free(y0);
    }
  }
}

static void test_broadcast(void **state) {
  (void)state;
  train_each_profile(broadcast_body);
}

/* The activations in float64, as kiln_unary defines them. */
static double f_relu(double x) { return x > 0 ? x : 0; }
static double f_gelu(double x) {
  return 0.5 * x * (1 + tanh(sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
}
static double f_sigmoid(double x) { return 1 / (1 + exp(-x)); }
static double f_tanh(double x) { return tanh(x); }

static const struct {
  kiln_unary_op op;
  double (*f)(double);
  bool from_y;
} acts[] = {
    {KILN_UNARY_RELU, f_relu, true},
    {KILN_UNARY_GELU, f_gelu, false},
    {KILN_UNARY_SIGMOID, f_sigmoid, true},
    {KILN_UNARY_TANH, f_tanh, true},
};

static void grad_body(kiln_context *ctx, kiln_queue *q, const char *profile) {
  const double u = ldexp(1.0, -24);
  const size_t sizes[] = {1, 17, 1000, 4099};
  size_t ndt;
  const kiln_dtype *dts = util_float_dtypes(&ndt);
  for (size_t d = 0; d < ndt; d++) {
    kiln_dtype dt = dts[d];
    for (size_t si = 0; si < sizeof sizes / sizeof *sizes; si++) {
      size_t n = sizes[si], total = YOFF + n + 4;
      void *x = util_random(dt, total, -6, 6, 21 + (uint32_t)si);
      void *dy = util_random(dt, total, -2, 2, 22 + (uint32_t)si);
      void *dx0 = util_random(dt, total, -1, 1, 23);
      kiln_buffer *dyb = util_upload(ctx, q, dt, dy, total);
      for (size_t ai = 0; ai < sizeof acts / sizeof *acts; ai++) {
        for (int from = 0; from < (acts[ai].from_y ? 2 : 1); from++) {
          /* From y: the stored input is y = f(x) rounded to dt. */
          void *xy = malloc(total * 4);
          for (size_t i = 0; i < total; i++)
            util_set(dt, xy, i,
                     from ? acts[ai].f(util_get(dt, x, i))
                          : util_get(dt, x, i));
          kiln_buffer *xyb = util_upload(ctx, q, dt, xy, total);
          kiln_buffer *dxb = util_upload(ctx, q, dt, dx0, total);
          assert_kiln_ok(kiln_unary_backward(
              q, acts[ai].op, (kiln_grad_from)from, RANGE(xyb, AOFF, n, dt),
              RANGE(dyb, BOFF, n, dt), RANGE(dxb, YOFF, n, dt), 0, NULL, NULL));
          void *dx = util_download(q, dxb, dt, total);
          char what[80];
          snprintf(what, sizeof what, "%s grad op %d from %s %s n %zu", profile,
                   (int)acts[ai].op, from ? "y" : "x", kiln_dtype_name(dt), n);
          for (size_t i = 0; i < n; i++) {
            double xv = util_get(dt, x, AOFF + i),
                   v = util_get(dt, xy, AOFF + i);
            double g = util_get(dt, dy, BOFF + i), deriv;
            if (acts[ai].op == KILN_UNARY_RELU)
              deriv = v > 0 ? 1 : 0; /* the kink: no difference quotient */
            else if (!from)
              deriv = train_fd(acts[ai].f, xv);
            else /* from the stored y, the y-form exactly */
              deriv =
                  acts[ai].op == KILN_UNARY_SIGMOID ? v * (1 - v) : 1 - v * v;
            double want = g * deriv;
            double tol = 64 * u * fabs(g) * (1 + fabs(xv)) + 1e-9 * fabs(g) +
                         util_storage_tol(dt, want);
            UTIL_CLOSE(util_get(dt, dx, YOFF + i), want, tol, "%s at %zu", what,
                       i);
            /* The y-forms agree with the difference quotient of f at x up
             * to the rounding of y. */
            if (from && acts[ai].op != KILN_UNARY_RELU)
              UTIL_CLOSE(deriv, train_fd(acts[ai].f, xv),
                         4 * util_eps(dt) + 1e-8, "%s y-form at %zu", what, i);
          }
          util_check_guard(dt, dx0, dx, YOFF, n, total, what);
          free(dx);
          free(xy);
          assert_kiln_ok(kiln_buffer_destroy(xyb));
          assert_kiln_ok(kiln_buffer_destroy(dxb));
        }
      }
      /* In place on dy. */
      kiln_buffer *xb = util_upload(ctx, q, dt, x, total);
      assert_kiln_ok(kiln_unary_backward(
          q, KILN_UNARY_TANH, KILN_GRAD_FROM_X, RANGE(xb, BOFF, n, dt),
          RANGE(dyb, BOFF, n, dt), RANGE(dyb, BOFF, n, dt), 0, NULL, NULL));
      void *out = util_download(q, dyb, dt, total);
      for (size_t i = 0; i < n; i++) {
        double t = tanh(util_get(dt, x, BOFF + i)),
               g = util_get(dt, dy, BOFF + i);
        double want = g * (1 - t * t);
        UTIL_CLOSE(util_get(dt, out, BOFF + i), want,
                   64 * u * fabs(g) + util_storage_tol(dt, want),
                   "%s in place %s at %zu", profile, kiln_dtype_name(dt), i);
      }
      free(out);
      assert_kiln_ok(kiln_buffer_destroy(xb));
      assert_kiln_ok(kiln_buffer_destroy(dyb));
      free(x);
      free(dy);
      free(dx0);
    }
  }
  /* relu selects: an infinite dy where x <= 0 still gives 0. */
  float xs[4] = {-1, 0, 2, NAN}, gs[4] = {INFINITY, NAN, 3, 5}, out[4];
  kiln_buffer *xb = util_upload(ctx, q, KILN_F32, xs, 4);
  kiln_buffer *gb = util_upload(ctx, q, KILN_F32, gs, 4);
  assert_kiln_ok(kiln_unary_backward(
      q, KILN_UNARY_RELU, KILN_GRAD_FROM_X, RANGE(xb, 0, 4, KILN_F32),
      RANGE(gb, 0, 4, KILN_F32), RANGE(gb, 0, 4, KILN_F32), 0, NULL, NULL));
  assert_kiln_ok(kiln_buffer_read_sync(q, bytes_of(gb, 0, sizeof out), out));
  assert_true(out[0] == 0 && out[1] == 0 && out[2] == 3 && out[3] == 0);
  assert_kiln_ok(kiln_buffer_destroy(xb));
  assert_kiln_ok(kiln_buffer_destroy(gb));
}

static void test_unary_backward(void **state) {
  (void)state;
  train_each_profile(grad_body);
}

static void zero_body(kiln_context *ctx, kiln_queue *q, const char *profile) {
  (void)profile;
  kiln_buffer *b = util_buffer(ctx, 16, 0);
  kiln_event *e = NULL, *e2 = NULL;
  assert_kiln_ok(kiln_binary_broadcast(
      q, KILN_BINARY_MUL, KILN_BROADCAST_COL, MATRIX(b, 0, 0, 5, KILN_F16),
      RANGE(b, 8, 0, KILN_F16), MATRIX(b, 0, 0, 5, KILN_F16), 0, NULL, &e));
  assert_kiln_ok(kiln_unary_backward(
      q, KILN_UNARY_GELU, KILN_GRAD_FROM_X, RANGE(b, 0, 0, KILN_BF16),
      RANGE(b, 0, 0, KILN_BF16), RANGE(b, 0, 0, KILN_BF16), 1, &e, &e2));
  assert_kiln_ok(kiln_event_wait(e2));
  kiln_event_release(e);
  kiln_event_release(e2);
  assert_kiln_ok(kiln_buffer_destroy(b));
}

static void test_zero_size(void **state) {
  (void)state;
  train_each_profile(zero_body);
}

static void test_bad_arguments(void **state) {
  (void)state;
  struct util_bad_env env = util_bad_env_open();
  kiln_queue *q = env.q;
  kiln_buffer *b = env.b, *ob = env.ob;
  kiln_buffer *c = util_buffer(env.ctx, 64, 0);
  assert_kiln_error(kiln_binary_broadcast(
                        NULL, KILN_BINARY_ADD, KILN_BROADCAST_ROW,
                        MATRIX(b, 0, 2, 2, KILN_F32), RANGE(c, 0, 2, KILN_F32),
                        MATRIX(c, 4, 2, 2, KILN_F32), 0, NULL, NULL),
                    KILN_ERR_NULL_POINTER,
                    "kiln_binary_broadcast: queue is NULL");
  assert_kiln_error(kiln_binary_broadcast(
                        q, (kiln_binary_op)99, KILN_BROADCAST_ROW,
                        MATRIX(b, 0, 2, 2, KILN_F32), RANGE(c, 0, 2, KILN_F32),
                        MATRIX(c, 4, 2, 2, KILN_F32), 0, NULL, NULL),
                    KILN_ERR_INVALID_ARGUMENT, "op 99");
  assert_kiln_error(kiln_binary_broadcast(
                        q, KILN_BINARY_ADD, (kiln_broadcast)7,
                        MATRIX(b, 0, 2, 2, KILN_F32), RANGE(c, 0, 2, KILN_F32),
                        MATRIX(c, 4, 2, 2, KILN_F32), 0, NULL, NULL),
                    KILN_ERR_INVALID_ARGUMENT, "broadcast 7");
  assert_kiln_error(kiln_binary_broadcast(
                        q, KILN_BINARY_ADD, KILN_BROADCAST_ROW,
                        MATRIX(b, 0, 2, 2, KILN_I32), RANGE(c, 0, 2, KILN_I32),
                        MATRIX(c, 4, 2, 2, KILN_I32), 0, NULL, NULL),
                    KILN_ERR_INVALID_ARGUMENT, "dtype i32");
  assert_kiln_error(kiln_binary_broadcast(
                        q, KILN_BINARY_ADD, KILN_BROADCAST_COL,
                        MATRIX(b, 0, 2, 2, KILN_F32), RANGE(c, 15, 2, KILN_F32),
                        MATRIX(c, 4, 2, 2, KILN_F32), 0, NULL, NULL),
                    KILN_ERR_OUT_OF_RANGE, "b range [offset 15, +2");
  assert_kiln_error(kiln_binary_broadcast(
                        q, KILN_BINARY_ADD, KILN_BROADCAST_ROW,
                        MATRIX(b, 0, 2, 2, KILN_F32), RANGE(c, 0, 2, KILN_F32),
                        MATRIX(c, 1, 2, 2, KILN_F32), 0, NULL, NULL),
                    KILN_ERR_INVALID_ARGUMENT, "overlap");
  assert_kiln_error(
      kiln_binary_broadcast(q, KILN_BINARY_ADD, KILN_BROADCAST_ROW,
                            MATRIX(b, 0, SIZE_MAX, 2, KILN_F32),
                            RANGE(c, 0, 2, KILN_F32),
                            MATRIX(c, 4, SIZE_MAX, 2, KILN_F32), 0, NULL, NULL),
      KILN_ERR_INVALID_SIZE, "overflows");
  assert_kiln_error(kiln_binary_broadcast(
                        q, KILN_BINARY_ADD, KILN_BROADCAST_ROW,
                        MATRIX(b, 0, 2, 2, KILN_F32), RANGE(ob, 0, 2, KILN_F32),
                        MATRIX(c, 4, 2, 2, KILN_F32), 0, NULL, NULL),
                    KILN_ERR_WRONG_CONTEXT,
                    "b belongs to a different context");
  assert_kiln_error(
      kiln_binary_broadcast(q, KILN_BINARY_ADD, KILN_BROADCAST_ROW,
                            MATRIX(b, 0, 2, 2, KILN_F32), NULL,
                            MATRIX(c, 4, 2, 2, KILN_F32), 0, NULL, NULL),
      KILN_ERR_NULL_POINTER, "b is NULL");

  assert_kiln_error(
      kiln_unary_backward(NULL, KILN_UNARY_RELU, KILN_GRAD_FROM_X,
                          RANGE(b, 0, 4, KILN_F32), RANGE(b, 0, 4, KILN_F32),
                          RANGE(c, 0, 4, KILN_F32), 0, NULL, NULL),
      KILN_ERR_NULL_POINTER, "kiln_unary_backward: queue is NULL");
  assert_kiln_error(
      kiln_unary_backward(q, KILN_UNARY_EXP, KILN_GRAD_FROM_X,
                          RANGE(b, 0, 4, KILN_F32), RANGE(b, 0, 4, KILN_F32),
                          RANGE(c, 0, 4, KILN_F32), 0, NULL, NULL),
      KILN_ERR_INVALID_ARGUMENT, "has no gradient here");
  assert_kiln_error(
      kiln_unary_backward(q, KILN_UNARY_GELU, KILN_GRAD_FROM_Y,
                          RANGE(b, 0, 4, KILN_F32), RANGE(b, 0, 4, KILN_F32),
                          RANGE(c, 0, 4, KILN_F32), 0, NULL, NULL),
      KILN_ERR_INVALID_ARGUMENT, "needs x");
  assert_kiln_error(
      kiln_unary_backward(q, KILN_UNARY_TANH, (kiln_grad_from)5,
                          RANGE(b, 0, 4, KILN_F32), RANGE(b, 0, 4, KILN_F32),
                          RANGE(c, 0, 4, KILN_F32), 0, NULL, NULL),
      KILN_ERR_INVALID_ARGUMENT, "from 5");
  assert_kiln_error(
      kiln_unary_backward(q, KILN_UNARY_TANH, KILN_GRAD_FROM_X,
                          RANGE(b, 0, 4, KILN_F32), RANGE(b, 0, 4, KILN_F32),
                          RANGE(b, 1, 4, KILN_F32), 0, NULL, NULL),
      KILN_ERR_INVALID_ARGUMENT, "overlap");
  assert_kiln_error(kiln_unary_backward(q, KILN_UNARY_TANH, KILN_GRAD_FROM_X,
                                        NULL, RANGE(b, 0, 4, KILN_F32),
                                        RANGE(c, 0, 4, KILN_F32), 0, NULL,
                                        NULL),
                    KILN_ERR_NULL_POINTER, "xy is NULL");
  assert_kiln_error(
      kiln_unary_backward(q, KILN_UNARY_TANH, KILN_GRAD_FROM_X,
                          RANGE(b, 0, 40, KILN_F32), RANGE(b, 0, 40, KILN_F32),
                          RANGE(c, 0, 40, KILN_F32), 0, NULL, NULL),
      KILN_ERR_OUT_OF_RANGE, "xy range");

  /* Operands that disagree: the vector's length and dtype, y's shape and
   * dtype, and matrices the training ops do not take. */
  kiln_matrix a = {.buffer = b, .rows = 2, .cols = 3, .dtype = KILN_F32};
  kiln_matrix y = a;
  y.buffer = c;
  assert_kiln_error(
      kiln_binary_broadcast(q, KILN_BINARY_ADD, KILN_BROADCAST_ROW, &a,
                            RANGE(c, 8, 2, KILN_F32), &y, 0, NULL, NULL),
      KILN_ERR_SHAPE_MISMATCH, "b has 2 elements but a's cols is 3");
  assert_kiln_error(
      kiln_binary_broadcast(q, KILN_BINARY_ADD, KILN_BROADCAST_COL, &a,
                            RANGE(c, 8, 3, KILN_F32), &y, 0, NULL, NULL),
      KILN_ERR_SHAPE_MISMATCH, "b has 3 elements but a's rows is 2");
  assert_kiln_error(
      kiln_binary_broadcast(q, KILN_BINARY_ADD, KILN_BROADCAST_ROW, &a,
                            RANGE(c, 8, 3, KILN_F16), &y, 0, NULL, NULL),
      KILN_ERR_SHAPE_MISMATCH, "b dtype f16 differs from a dtype f32");
  assert_kiln_error(
      kiln_binary_broadcast(q, KILN_BINARY_ADD, KILN_BROADCAST_ROW, &a,
                            RANGE(c, 8, 3, KILN_F32),
                            MATRIX(c, 0, 3, 2, KILN_F32), 0, NULL, NULL),
      KILN_ERR_SHAPE_MISMATCH, "y is 3x2 but a is 2x3");
  assert_kiln_error(
      kiln_binary_broadcast(q, KILN_BINARY_ADD, KILN_BROADCAST_ROW, &a,
                            RANGE(c, 8, 3, KILN_F32),
                            MATRIX(c, 0, 2, 3, KILN_BF16), 0, NULL, NULL),
      KILN_ERR_SHAPE_MISMATCH, "y dtype bf16 differs");
  kiln_matrix odd = a;
  odd.trans = KILN_TRANS;
  assert_kiln_error(
      kiln_binary_broadcast(q, KILN_BINARY_ADD, KILN_BROADCAST_ROW, &odd,
                            RANGE(c, 8, 3, KILN_F32), &y, 0, NULL, NULL),
      KILN_ERR_INVALID_ARGUMENT, "a must be row-major");
  odd = a;
  odd.ld = 4;
  assert_kiln_error(
      kiln_binary_broadcast(q, KILN_BINARY_ADD, KILN_BROADCAST_ROW, &a,
                            RANGE(c, 8, 3, KILN_F32), &odd, 0, NULL, NULL),
      KILN_ERR_INVALID_ARGUMENT, "y->ld 4");
  odd = a;
  odd.batch_stride = 6;
  assert_kiln_error(
      kiln_binary_broadcast(q, KILN_BINARY_ADD, KILN_BROADCAST_ROW, &odd,
                            RANGE(c, 8, 3, KILN_F32), &y, 0, NULL, NULL),
      KILN_ERR_INVALID_ARGUMENT, "a->batch_stride 6");
  odd.batch_stride = 0;
  odd.ld = 3; /* ld = cols is packed: accepted */
  assert_kiln_ok(kiln_binary_broadcast(q, KILN_BINARY_ADD, KILN_BROADCAST_ROW,
                                       &odd, RANGE(c, 8, 3, KILN_F32), &y, 0,
                                       NULL, NULL));
  assert_kiln_error(
      kiln_unary_backward(q, KILN_UNARY_TANH, KILN_GRAD_FROM_X,
                          RANGE(b, 0, 4, KILN_F32), RANGE(b, 0, 3, KILN_F32),
                          RANGE(c, 0, 4, KILN_F32), 0, NULL, NULL),
      KILN_ERR_SHAPE_MISMATCH, "dy has 3 elements but xy's count is 4");
  assert_kiln_error(
      kiln_unary_backward(q, KILN_UNARY_TANH, KILN_GRAD_FROM_X,
                          RANGE(b, 0, 4, KILN_F32), RANGE(b, 0, 4, KILN_F32),
                          RANGE(c, 0, 4, KILN_F16), 0, NULL, NULL),
      KILN_ERR_SHAPE_MISMATCH, "dx dtype f16 differs from xy dtype f32");
  assert_kiln_ok(kiln_buffer_destroy(c));
  util_bad_env_close(&env);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_broadcast),
      cmocka_unit_test(test_unary_backward),
      cmocka_unit_test(test_zero_size),
      cmocka_unit_test(test_bad_arguments),
  };
  return KILN_TEST_RUN("op_train_elementwise", tests, true);
}
