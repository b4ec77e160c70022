/* Transpose: exact results for sizes around every tile edge, leading
 * dimensions and offsets, 32- and 16-bit elements, on both kernel families
 * of every test device; elements outside y untouched; every bad argument
 * refused with a message naming it. */
#include <stdio.h>
#include <stdlib.h>

#include "harness.h"
#include "core/internal.h"
#include "op_test_util.h"

struct tcase {
  size_t rows, cols;
  size_t ldx_pad, ldy_pad, x_off, y_off;
  kiln_dtype dtype;
};

static void run_case(kiln_context *ctx, kiln_queue *q, const struct tcase *tc,
                     const char *profile) {
  const size_t rows = tc->rows, cols = tc->cols;
  const size_t ldx = cols + tc->ldx_pad, ldy = rows + tc->ldy_pad;
  const size_t es = kiln_dtype_size(tc->dtype);
  const size_t x_count = tc->x_off + (rows ? (rows - 1) * ldx + cols : 0) + 5;
  const size_t y_count = tc->y_off + (cols ? (cols - 1) * ldy + rows : 0) + 5;
  unsigned char *x = malloc(x_count * es), *y0 = malloc(y_count * es);
  unsigned char *y = malloc(y_count * es);
  assert_non_null(x);
  assert_non_null(y0);
  assert_non_null(y);
  /* Distinct bit patterns everywhere (a NaN payload must survive too). */
  for (size_t i = 0; i < x_count * es; i++)
    x[i] = (unsigned char)(i * 7u + 3u + (i >> 8));
  for (size_t i = 0; i < y_count * es; i++)
    y0[i] = (unsigned char)(i * 13u + 1u);
  kiln_buffer *dx = NULL, *dy = NULL;
  assert_kiln_ok(kiln_buffer_create(ctx, x_count * es, 0, &dx));
  assert_kiln_ok(kiln_buffer_create(ctx, y_count * es, 0, &dy));
  assert_kiln_ok(kiln_buffer_write_sync(q, x, &(kiln_range){dx, 0, x_count, tc->dtype}));
  assert_kiln_ok(kiln_buffer_write_sync(q, y0, &(kiln_range){dy, 0, y_count, tc->dtype}));
  kiln_event *ev = NULL;
  assert_kiln_ok(kiln_transpose(
      q, matrix_ld(dx, tc->x_off, rows, cols, ldx, tc->dtype),
      matrix_ld(dy, tc->y_off, cols, rows, ldy, tc->dtype), 0, NULL, &ev));
  assert_non_null(ev);
  assert_kiln_ok(kiln_event_wait(ev));
  kiln_event_release(ev);
  assert_kiln_ok(kiln_buffer_read_sync(q, &(kiln_range){dy, 0, y_count, tc->dtype}, y));

  unsigned char *want = malloc(y_count * es);
  assert_non_null(want);
  memcpy(want, y0, y_count * es);
  for (size_t r = 0; r < rows; r++)
    for (size_t c = 0; c < cols; c++)
      memcpy(want + (tc->y_off + c * ldy + r) * es,
             x + (tc->x_off + r * ldx + c) * es, es);
  for (size_t i = 0; i < y_count; i++)
    if (memcmp(want + i * es, y + i * es, es) != 0)
      fail_msg("profile %s: %zu x %zu %s (ldx %zu, ldy %zu, offsets %zu, "
               "%zu): y element %zu differs",
               profile, rows, cols, kiln_dtype_name(tc->dtype), ldx, ldy,
               tc->x_off, tc->y_off, i);
  /* The same memory described column-major: x is then cols x rows and y
   * rows x cols, and the transpose moves the same elements. */
  const kiln_matrix cx = {dx, tc->x_off, cols,           rows,         ldx,
                          0,  tc->dtype, KILN_COL_MAJOR, KILN_NO_TRANS, NULL};
  const kiln_matrix cy = {dy, tc->y_off, rows,           cols,         ldy,
                          0,  tc->dtype, KILN_COL_MAJOR, KILN_NO_TRANS, NULL};
  assert_kiln_ok(kiln_buffer_write_sync(q, y0, bytes_of(dy, 0, y_count * es)));
  assert_kiln_ok(kiln_transpose(q, &cx, &cy, 0, NULL, NULL));
  assert_kiln_ok(kiln_buffer_read_sync(q, bytes_of(dy, 0, y_count * es), y));
  if (memcmp(want, y, y_count * es) != 0)
    fail_msg("profile %s: %zu x %zu %s column-major differs", profile, rows,
             cols, kiln_dtype_name(tc->dtype));
  free(want);
  free(x);
  free(y0);
  free(y);
  assert_kiln_ok(kiln_buffer_destroy(dx));
  assert_kiln_ok(kiln_buffer_destroy(dy));
}

/* Sizes: 1, primes, both sides of the 8 x 8 register block, the GPU tiles
 * (8 to 64) and the CPU tiles (16 to 256), long thin shapes. */
static const struct tcase shape_cases[] = {
      {1, 1, 0, 0, 0, 0, KILN_F32},
      {3, 17, 0, 0, 0, 0, KILN_F32},
      {17, 3, 0, 0, 0, 0, KILN_F32},
      {8, 8, 0, 0, 0, 0, KILN_F32},
      {9, 7, 0, 0, 0, 0, KILN_F32},
      {64, 64, 0, 0, 0, 0, KILN_F32},
      {65, 63, 0, 0, 0, 0, KILN_F32},
      {127, 129, 0, 0, 0, 0, KILN_F32},
      {1, 1000, 0, 0, 0, 0, KILN_F32},
      {1000, 1, 0, 0, 0, 0, KILN_F32},
      {5, 300, 0, 0, 0, 0, KILN_F32},
      {1021, 997, 0, 0, 0, 0, KILN_F32},
      {256, 256, 0, 0, 0, 0, KILN_F32},
      /* Leading dimensions and offsets. */
      {45, 37, 3, 5, 1, 2, KILN_F32},
      {64, 72, 8, 1, 7, 9, KILN_F32},
      {33, 66, 1, 0, 0, 5, KILN_I32},
      /* y on whole vectors of 8 or 16 (the CPU kernel's streaming stores,
       * NT=1, with VW 8 or 16), and y's leading dimension or offset off
       * them. */
      {48, 40, 0, 8, 0, 8, KILN_F32},
      {48, 40, 0, 16, 0, 16, KILN_F32},
      {48, 40, 0, 8, 0, 3, KILN_F32},
      {1030, 20, 0, 2, 5, 16, KILN_F32},
      {1034, 20, 0, 6, 5, 16, KILN_F32},
      /* 16-bit elements. */
      {127, 129, 0, 0, 0, 0, KILN_F16},
      {64, 64, 2, 3, 1, 1, KILN_BF16},
      {9, 7, 0, 0, 3, 0, KILN_F16},
      {200, 136, 0, 0, 0, 0, KILN_BF16},
      {70, 90, 0, 0, 0, 0, KILN_U32},
};

static void shapes_on_device(kiln_context *ctx, kiln_queue *q) {
  for (size_t i = 0; i < sizeof shape_cases / sizeof shape_cases[0]; i++)
    run_case(ctx, q, &shape_cases[i], kiln_context_get_profile(ctx));
}

static void test_shapes(void **state) {
  (void)state;
  FOR_EACH_TEST_DEVICE(d) {
    for (int pass = 0; pass < 2; pass++) {
      kiln_context *ctx = NULL;
      kiln_queue *q = NULL;
      kiln_test_open_family(d, pass == 1, &ctx, &q);
      shapes_on_device(ctx, q);
      kiln_test_close(ctx, q);
    }
  }
}

/* Transposing twice gives back the original, through sub-ranges of one
 * buffer pair, and a 0 x n transpose is a no-op whose event completes. */
static void test_round_trip_and_empty(void **state) {
  (void)state;
  FOR_EACH_TEST_DEVICE(d) {
    kiln_context *ctx = NULL;
    kiln_queue *q = NULL;
    kiln_test_open(d, &ctx, &q);
    const size_t r = 300, c = 77, n = r * c;
    float *h = malloc(n * 4), *back = malloc(n * 4);
    assert_non_null(h);
    assert_non_null(back);
    kiln_test_fill_random(h, n, -5.0f, 5.0f, 99);
    kiln_buffer *a = NULL, *b = NULL;
    assert_kiln_ok(kiln_buffer_create(ctx, n * 4, 0, &a));
    assert_kiln_ok(kiln_buffer_create(ctx, n * 4, 0, &b));
    assert_kiln_ok(kiln_buffer_write_sync(q, h, &(kiln_range){a, 0, n, KILN_F32}));
    kiln_event *e1 = NULL, *e2 = NULL;
    assert_kiln_ok(kiln_transpose(q, matrix_ld(a, 0, r, c, c, KILN_F32),
                                  matrix_ld(b, 0, c, r, r, KILN_F32), 0, NULL,
                                  &e1));
    assert_kiln_ok(kiln_transpose(q, matrix_ld(b, 0, c, r, r, KILN_F32),
                                  matrix_ld(a, 0, r, c, c, KILN_F32), 1, &e1,
                                  &e2));
    assert_kiln_ok(kiln_event_wait(e2));
    assert_kiln_ok(kiln_buffer_read_sync(q, &(kiln_range){a, 0, n, KILN_F32}, back));
    assert_memory_equal(h, back, n * 4);
    kiln_event_release(e1);
    kiln_event_release(e2);

    kiln_event *e3 = NULL;
    assert_kiln_ok(kiln_transpose(q, matrix_ld(a, 0, 0, 5, 5, KILN_F32),
                                  matrix_ld(b, 0, 5, 0, 1, KILN_F32), 0, NULL,
                                  &e3));
    assert_non_null(e3);
    assert_kiln_ok(kiln_event_wait(e3));
    kiln_event_release(e3);
    free(h);
    free(back);
    assert_kiln_ok(kiln_buffer_destroy(a));
    assert_kiln_ok(kiln_buffer_destroy(b));
    kiln_test_close(ctx, q);
  }
}

static void test_bad_input(void **state) {
  (void)state;
  kiln_context *ctx = NULL;
  kiln_queue *q = NULL;
  kiln_test_open(0, &ctx, &q);
  kiln_buffer *x = NULL, *y = NULL;
  assert_kiln_ok(kiln_buffer_create(ctx, 64 * 4, 0, &x));
  assert_kiln_ok(kiln_buffer_create(ctx, 64 * 4, 0, &y));
  kiln_event *ev = NULL;
/* y (cols x rows, ldy) = x^T (rows x cols, ldx), row-major. */
#define TR(qq, dt, r, c, xb, xo, ldx, yb, yo, ldy)                             \
  kiln_transpose(qq, matrix_ld(xb, xo, r, c, ldx, dt),                         \
                 matrix_ld(yb, yo, c, r, ldy, dt), 0, NULL, &ev)
  assert_kiln_error(TR(NULL, KILN_F32, 8, 8, x, 0, 8, y, 0, 8),
                    KILN_ERR_NULL_POINTER, "kiln_transpose: queue is NULL");
  assert_kiln_error(TR(q, KILN_F32, 8, 8, NULL, 0, 8, y, 0, 8),
                    KILN_ERR_NULL_POINTER, "kiln_transpose: x is NULL");
  assert_kiln_error(TR(q, KILN_F32, 8, 8, x, 0, 8, NULL, 0, 8),
                    KILN_ERR_NULL_POINTER, "kiln_transpose: y is NULL");
  assert_kiln_error(TR(q, (kiln_dtype)7, 8, 8, x, 0, 8, y, 0, 8),
                    KILN_ERR_INVALID_ARGUMENT, "dtype 7 is not a kiln_dtype");
  /* Leading dimensions shorter than a row. */
  assert_kiln_error(TR(q, KILN_F32, 4, 8, x, 0, 7, y, 0, 4),
                    KILN_ERR_INVALID_ARGUMENT, "x.ld 7 is less than 8");
  assert_kiln_error(TR(q, KILN_F32, 4, 8, x, 0, 8, y, 0, 3),
                    KILN_ERR_INVALID_ARGUMENT, "y.ld 3 is less than 4");
  /* ld 0 is packed: an empty matrix is a no-op. */
  assert_kiln_ok(TR(q, KILN_F32, 0, 0, x, 0, 0, y, 0, 0));
  kiln_event_release(ev);
  ev = NULL;
  /* Descriptors: NULL, fields transpose does not take, disagreements. */
  const kiln_matrix mx = {.buffer = x, .rows = 4, .cols = 8, .dtype = KILN_F32};
  const kiln_matrix my = {.buffer = y, .rows = 8, .cols = 4, .dtype = KILN_F32};
  kiln_matrix bad = mx;
  assert_kiln_error(kiln_transpose(q, NULL, &my, 0, NULL, &ev),
                    KILN_ERR_NULL_POINTER, "kiln_transpose: x is NULL");
  assert_kiln_error(kiln_transpose(q, &mx, NULL, 0, NULL, &ev),
                    KILN_ERR_NULL_POINTER, "kiln_transpose: y is NULL");
  bad.trans = KILN_TRANS;
  assert_kiln_error(kiln_transpose(q, &bad, &my, 0, NULL, &ev),
                    KILN_ERR_INVALID_ARGUMENT, "x.trans is KILN_TRANS");
  bad = mx;
  bad.batch_stride = 32;
  assert_kiln_error(kiln_transpose(q, &bad, &my, 0, NULL, &ev),
                    KILN_ERR_INVALID_ARGUMENT, "x.batch_stride 32 is not 0");
  bad = mx;
  bad.layout = KILN_COL_MAJOR;
  bad.rows = 8;
  bad.cols = 4;
  assert_kiln_error(kiln_transpose(q, &bad, &my, 0, NULL, &ev),
                    KILN_ERR_INVALID_ARGUMENT, "different layouts");
  bad.layout = (kiln_layout)5;
  assert_kiln_error(kiln_transpose(q, &bad, &my, 0, NULL, &ev),
                    KILN_ERR_INVALID_ARGUMENT, "x.layout 5 is not a valid");
  assert_kiln_error(kiln_transpose(q, &mx, &mx, 0, NULL, &ev),
                    KILN_ERR_SHAPE_MISMATCH,
                    "y (4 x 8 f32) is not x (4 x 8 f32) transposed");
  bad = my;
  bad.dtype = KILN_I32;
  assert_kiln_error(kiln_transpose(q, &mx, &bad, 0, NULL, &ev),
                    KILN_ERR_SHAPE_MISMATCH, "y (8 x 4 i32) is not x");
  /* Out of range: 64 floats each. */
  assert_kiln_error(TR(q, KILN_F32, 8, 8, x, 1, 8, y, 0, 8),
                    KILN_ERR_OUT_OF_RANGE,
                    "x range [offset 1, +64 elements of f32)");
  assert_kiln_error(TR(q, KILN_F32, 8, 8, x, 0, 8, y, 0, 9),
                    KILN_ERR_OUT_OF_RANGE, "y range");
  assert_kiln_error(TR(q, KILN_F32, 8, 8, x, 70, 8, y, 0, 8),
                    KILN_ERR_OUT_OF_RANGE, "x.offset 70 is beyond");
  /* 16-bit elements: 128 fit in 256 bytes. */
  assert_kiln_ok(TR(q, KILN_F16, 8, 16, x, 0, 16, y, 0, 8));
  kiln_event_release(ev);
  ev = NULL;
  assert_kiln_status(TR(q, KILN_F16, 8, 17, x, 0, 17, y, 0, 8),
                     KILN_ERR_OUT_OF_RANGE);
  /* Sizes past what the kernels index; overflowing extents. */
  assert_kiln_error(TR(q, KILN_F32, (size_t)UINT32_MAX + 1, 1, x, 0, 1, y, 0,
                       (size_t)UINT32_MAX + 1),
                    KILN_ERR_INVALID_SIZE,
                    "rows 4294967296 exceeds UINT32_MAX");
  assert_kiln_error(TR(q, KILN_F32, 4, 4, x, 0, SIZE_MAX / 2, y, 0, 4),
                    KILN_ERR_INVALID_SIZE, "overflows size_t");
  /* In place is refused. */
  assert_kiln_error(TR(q, KILN_F32, 4, 4, x, 0, 4, x, 8, 4),
                    KILN_ERR_INVALID_ARGUMENT, "x and y overlap");
  assert_null(ev); /* unchanged by every failure */
#undef TR

  kiln_context *other = NULL;
  kiln_test_open(0, &other, NULL);
  kiln_buffer *foreign = util_buffer(other, 256, 0);
  assert_kiln_error(kiln_transpose(q, matrix_ld(x, 0, 8, 8, 8, KILN_F32),
                                   matrix_ld(foreign, 0, 8, 8, 8, KILN_F32), 0,
                                   NULL, NULL),
                    KILN_ERR_WRONG_CONTEXT, "y belongs to a different context");
  assert_kiln_ok(kiln_buffer_destroy(foreign));
  assert_kiln_ok(kiln_context_destroy(other));
  assert_kiln_ok(kiln_buffer_destroy(x));
  assert_kiln_ok(kiln_buffer_destroy(y));
  kiln_test_close(ctx, q);
}

/* test_space_transpose.c runs the checks above with its own main. */
#ifndef KILN_OP_TEST_NO_MAIN
int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_bad_input),
      cmocka_unit_test(test_shapes),
      cmocka_unit_test(test_round_trip_and_empty),
  };
  return KILN_TEST_RUN("op_transpose", tests, true);
}
#endif
