/* kiln_gather_rows and kiln_scatter_add_rows against host references:
 * every dtype, u32 and i32 indices, repeated and out-of-range indices,
 * awkward shapes and offsets with guards, both kernel families; the
 * scatter-add's float64 bound and its bits identical across runs (and
 * equal to the host's f32 sum in row order); bad input.
 *
 * Bound: scatter-add sums k rows onto a table value in f32 in row order:
 * within k u (|t| + sum |x|), plus the storage rounding for f16/bf16. */
#include "train_test_util.h"

static const size_t shapes[][3] = {/* rows, cols, table_rows */
                                   {1, 1, 1},      {5, 3, 2},     {17, 33, 4},
                                   {64, 1, 7},     {300, 65, 50}, {7, 1021, 3},
                                   {1000, 8, 1000}};
#define NSHAPES (sizeof shapes / sizeof shapes[0])
#define TOFF 2
#define IOFF 1
#define YOFF 3

/* Indices in [0, table_rows], table_rows (one past) and -1 included as the
 * out-of-range ones, with repeats. */
static uint32_t *make_indices(size_t rows, size_t table_rows, bool bad,
                              uint32_t seed) {
  uint32_t *ix = train_labels(KILN_U32, IOFF + rows, table_rows, seed);
  if (bad)
    for (size_t r = 0; r < rows; r += 5)
      ix[IOFF + r] = r % 10 ? (uint32_t)table_rows : UINT32_MAX;
  return ix;
}

static void gather_body(kiln_context *ctx, kiln_queue *q, const char *profile) {
  const kiln_dtype dts[] = {KILN_F32, KILN_F16, KILN_BF16, KILN_I32, KILN_U32};
  for (size_t d = 0; d < 5; d++)
    for (size_t si = 0; si < NSHAPES; si++) {
      kiln_dtype dt = dts[d];
      size_t rows = shapes[si][0], cols = shapes[si][1], tr = shapes[si][2];
      size_t es = kiln_dtype_size(dt), count = rows * cols;
      size_t ttotal = TOFF + tr * cols + 2, total = YOFF + count + 2;
      kiln_dtype idt = si % 2 ? KILN_I32 : KILN_U32;
      uint32_t *ix = make_indices(rows, tr, true, 11 + (uint32_t)si);
      uint8_t *t = malloc(ttotal * es), *y0 = malloc(total * es);
      for (size_t i = 0; i < ttotal * es; i++)
        t[i] = (uint8_t)(i * 7 + 3);
      memset(y0, 0x5a, total * es);
      kiln_buffer *tb = util_upload(ctx, q, dt, t, ttotal);
      kiln_buffer *ib = util_upload(ctx, q, idt, ix, IOFF + rows);
      kiln_buffer *yb = util_upload(ctx, q, dt, y0, total);
      assert_kiln_ok(kiln_gather_rows(q, dt, rows, cols, tb, TOFF, tr, idt, ib,
                                      IOFF, yb, YOFF, 0, NULL, NULL));
      uint8_t *y = util_download(q, yb, dt, total);
      for (size_t r = 0; r < rows; r++) {
        uint32_t k = ix[IOFF + r];
        for (size_t c = 0; c < cols; c++) {
          const uint8_t *got = y + (YOFF + r * cols + c) * es;
          uint8_t want[4];
          if (k < tr)
            memcpy(want, t + (TOFF + k * cols + c) * es, es);
          else
            memset(want, 0xff, es);
          if (memcmp(got, want, es) != 0)
            fail_msg("%s gather %s %zux%zu row %zu (index %u) col %zu", profile,
                     kiln_dtype_name(dt), rows, cols, r, k, c);
        }
      }
      util_check_guard(dt, y0, y, YOFF, count, total, "gather");
      free(y);
      free(t);
      free(y0);
      free(ix);
      assert_kiln_ok(kiln_buffer_destroy(tb));
      assert_kiln_ok(kiln_buffer_destroy(ib));
      assert_kiln_ok(kiln_buffer_destroy(yb));
    }
}

static void test_gather(void **state) {
  (void)state;
  train_each_profile(gather_body);
}

static void scatter_body(kiln_context *ctx, kiln_queue *q,
                         const char *profile) {
  const double u = 0x1p-24;
  size_t ndt;
  const kiln_dtype *dts = util_float_dtypes(&ndt);
  for (size_t d = 0; d < ndt; d++)
    for (size_t si = 0; si < NSHAPES; si++) {
      kiln_dtype dt = dts[d];
      size_t rows = shapes[si][0], cols = shapes[si][1], tr = shapes[si][2];
      size_t es = kiln_dtype_size(dt), count = rows * cols;
      size_t ttotal = TOFF + tr * cols + 2, total = YOFF + count + 2;
      kiln_dtype idt = si % 2 ? KILN_U32 : KILN_I32;
      uint32_t *ix = make_indices(rows, tr, si % 3 == 1, 21 + (uint32_t)si);
      void *t0 = util_random(dt, ttotal, -1, 1, 22);
      void *x = util_random(dt, total, -3, 3, 23 + (uint32_t)si);
      kiln_buffer *xb = util_upload(ctx, q, dt, x, total);
      kiln_buffer *ib = util_upload(ctx, q, idt, ix, IOFF + rows);
      void *first = NULL;
      for (int run = 0; run < 3; run++) {
        kiln_buffer *tb = util_upload(ctx, q, dt, t0, ttotal);
        assert_kiln_ok(kiln_scatter_add_rows(q, dt, rows, cols, xb, YOFF, idt,
                                             ib, IOFF, tb, TOFF, tr, 0, NULL,
                                             NULL));
        void *t = util_download(q, tb, dt, ttotal);
        assert_kiln_ok(kiln_buffer_destroy(tb));
        if (run > 0) {
          /* Bit-identical across runs, repeated indices and all. */
          assert_memory_equal(first, t, ttotal * es);
          free(t);
          continue;
        }
        first = t;
        for (size_t k = 0; k < tr; k++)
          for (size_t c = 0; c < cols; c++) {
            double tv = util_get(dt, t0, TOFF + k * cols + c), ref = tv;
            double mag = fabs(tv), hits = 0;
            float f32 = (float)tv; /* the kernel's own order, in f32 */
            for (size_t r = 0; r < rows; r++)
              if (ix[IOFF + r] == k) {
                double xv = util_get(dt, x, YOFF + r * cols + c);
                ref += xv;
                mag += fabs(xv);
                hits++;
                f32 += (float)xv;
              }
            double got = util_get(dt, t, TOFF + k * cols + c);
            UTIL_CLOSE(got, ref, hits * u * mag + util_storage_tol(dt, ref),
                       "%s scatter %s %zux%zu table row %zu col %zu", profile,
                       kiln_dtype_name(dt), rows, cols, k, c);
            uint32_t tmp;
            util_set(dt, &tmp, 0, f32);
            if (got != util_get(dt, &tmp, 0))
              fail_msg("%s scatter %s: table %zu,%zu is %.9g, the row-order "
                       "f32 sum is %.9g",
                       profile, kiln_dtype_name(dt), k, c, got,
                       util_get(dt, &tmp, 0));
          }
        util_check_guard(dt, t0, t, TOFF, tr * cols, ttotal, "scatter");
      }
      free(first);
      free(t0);
      free(x);
      free(ix);
      assert_kiln_ok(kiln_buffer_destroy(xb));
      assert_kiln_ok(kiln_buffer_destroy(ib));
    }
}

static void test_scatter_add(void **state) {
  (void)state;
  train_each_profile(scatter_body);
}

static void test_bad_arguments(void **state) {
  (void)state;
  struct util_bad_env env = util_bad_env_open();
  kiln_queue *q = env.q;
  kiln_buffer *b = env.b, *ob = env.ob;
  kiln_buffer *c = util_buffer(env.ctx, 64, 0),
              *ix = util_buffer(env.ctx, 64, 0);
  assert_kiln_error(kiln_gather_rows(NULL, KILN_F32, 2, 2, b, 0, 4, KILN_U32,
                                     ix, 0, c, 0, 0, NULL, NULL),
                    KILN_ERR_NULL_POINTER, "kiln_gather_rows: queue is NULL");
  assert_kiln_error(kiln_gather_rows(q, KILN_F32, 2, 2, b, 0, 4, KILN_F16, ix,
                                     0, c, 0, 0, NULL, NULL),
                    KILN_ERR_INVALID_ARGUMENT, "index_dtype f16");
  assert_kiln_error(kiln_gather_rows(q, KILN_F32, 2, 2, b, 0, 40, KILN_U32, ix,
                                     0, c, 0, 0, NULL, NULL),
                    KILN_ERR_OUT_OF_RANGE, "table range");
  assert_kiln_error(kiln_gather_rows(q, KILN_F32, 2, 2, b, 0, 4, KILN_U32, ix,
                                     0, b, 4, 0, NULL, NULL),
                    KILN_ERR_INVALID_ARGUMENT, "overlap");
  assert_kiln_error(kiln_gather_rows(q, KILN_F32, 2, 2, b, 0, 4, KILN_U32, ob,
                                     0, c, 0, 0, NULL, NULL),
                    KILN_ERR_WRONG_CONTEXT, "indices belongs");
  assert_kiln_error(kiln_gather_rows(q, KILN_F32, 2, 2, b, 0, 1u << 31,
                                     KILN_U32, ix, 0, c, 0, 0, NULL, NULL),
                    KILN_ERR_INVALID_SIZE, "INT32_MAX");
  assert_kiln_error(kiln_gather_rows(q, KILN_F32, 2, 2, b, 0, 4, KILN_U32, ix,
                                     0, NULL, 0, 0, NULL, NULL),
                    KILN_ERR_NULL_POINTER, "y is NULL");
  assert_kiln_error(kiln_scatter_add_rows(NULL, KILN_F32, 2, 2, c, 0, KILN_U32,
                                          ix, 0, b, 0, 4, 0, NULL, NULL),
                    KILN_ERR_NULL_POINTER,
                    "kiln_scatter_add_rows: queue is NULL");
  assert_kiln_error(kiln_scatter_add_rows(q, KILN_I32, 2, 2, c, 0, KILN_U32, ix,
                                          0, b, 0, 4, 0, NULL, NULL),
                    KILN_ERR_INVALID_ARGUMENT, "dtype i32");
  assert_kiln_error(kiln_scatter_add_rows(q, KILN_F32, 2, 2, b, 4, KILN_U32, ix,
                                          0, b, 0, 4, 0, NULL, NULL),
                    KILN_ERR_INVALID_ARGUMENT, "overlap");
  assert_kiln_error(kiln_scatter_add_rows(q, KILN_F32, SIZE_MAX, 2, c, 0,
                                          KILN_U32, ix, 0, b, 0, 4, 0, NULL,
                                          NULL),
                    KILN_ERR_INVALID_SIZE, "overflows");
  assert_kiln_error(kiln_scatter_add_rows(q, KILN_F32, 2, 2, NULL, 0, KILN_U32,
                                          ix, 0, b, 0, 4, 0, NULL, NULL),
                    KILN_ERR_NULL_POINTER, "x is NULL");
  assert_kiln_ok(kiln_buffer_destroy(c));
  assert_kiln_ok(kiln_buffer_destroy(ix));
  util_bad_env_close(&env);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_gather),
      cmocka_unit_test(test_scatter_add),
      cmocka_unit_test(test_bad_arguments),
  };
  return KILN_TEST_RUN("op_train_index", tests, true);
}
