/* The GPU-family reductions' parameter space (runtime/ops/ops_reduce.c):
 * validation refuses, with its reason, each kind of point that a device
 * cannot run, and the tuning API says so too; a seeded sample holding every
 * value of every knob passes test_op_reduce.c's checks (sum, min, max,
 * mean, nrm2, argmax and dot of vectors; every op over rows and columns of
 * awkward shapes; NaN, overflow and tie rules; f32, f16 and bf16) with the
 * GPU family forced on a CPU device (space_test_util.h), at vector offsets
 * off the vectors' alignment for half the points and on it for the other
 * half; and every op over a vector long enough that every point's vector
 * passes run (segments of at least 65536 elements). */
#define KILN_OP_TEST_NO_MAIN
#pragma GCC diagnostic ignored "-Wunused-function"
#include "test_op_reduce.c"

#include "space_test_util.h"

static const struct kiln__space *sp = &kiln__reduce_space;

static kiln_status sum_17(kiln_queue *q, kiln_buffer *x, kiln_buffer *r) {
  return kiln_reduce(q, KILN_REDUCE_SUM, range_of(x, 0, 17, KILN_F32),
                     range_of(r, 0, 1, KILN_F32), 0, NULL, NULL);
}

static void test_validation(void **state) {
  (void)state;
  const kiln_device_info *gpu = space_gpu_like_info();
  struct kiln__point p = {{256, 2, 4, 8}};
  char why[256];
  assert_true(kiln__space_check(sp, &p, gpu, true, why, sizeof why));
  kiln_device_info small = *gpu;
  small.max_work_group_size = 128;
  SPACE_REJECTS(sp, p, &small, true, "work-groups of 256 work-items exceed");
  small = *gpu;
  small.local_mem_bytes = 1024; /* 256 states of 8 bytes */
  SPACE_REJECTS(sp, p, &small, true, "__local tree of 2048 bytes");
  p.v[0] = 48;
  SPACE_REJECTS(sp, p, gpu, false, "WG 48 is not a power of two");
  p = (struct kiln__point){{256, 2, 4, 0}};
  SPACE_REJECTS(sp, p, gpu, false, "PARTS is 0");
  p = (struct kiln__point){{256, 2, 3, 4}};
  SPACE_REJECTS(sp, p, gpu, true, "VW 3 is not one of the values");
  struct kiln__point broken = {{100, 1, 1, 4}};
  space_check_api(sp, "WG=64 WPT=2 VW=4 PARTS=8", NULL, NULL, &broken,
                  sum_17);
}

/* Odd points at vector offsets that are multiples of every vector width. */
static void prepare(size_t index) { vector_xoff = index % 2 ? 8 : 3; }

/* Every op over 2^22 + 5 elements of each dtype (at most 64 segments on a
 * 2-core CPU: at least 65536 elements each). */
static void long_on_device(kiln_context *ctx, kiln_queue *q) {
  const size_t n = ((size_t)1 << 22) + 5, off = vector_xoff;
  size_t ndt;
  const kiln_dtype *dts = util_float_dtypes(&ndt);
  kiln_buffer *rb = util_buffer(ctx, 16, 0);
  for (size_t d = 0; d < ndt; d++) {
    const kiln_dtype dt = dts[d];
    void *x = tie_data(dt, off + n, 51), *y = util_random(dt, off + n, -2, 2, 52);
    kiln_buffer *xb = util_upload(ctx, q, dt, x, off + n);
    kiln_buffer *yb = util_upload(ctx, q, dt, y, off + n);
    for (int op = 0; op <= 6; op++) {
      if (op == 6)
        assert_kiln_ok(kiln_dot(q, range_of(xb, off, n, dt),
                                range_of(yb, off, n, dt),
                                range_of(rb, 1, 1, KILN_F32), 0, NULL, NULL));
      else
        assert_kiln_ok(kiln_reduce(
            q, (kiln_reduce_op)op, range_of(xb, off, n, dt),
            range_of(rb, 1, 1, util_result_dtype(op)), 0, NULL, NULL));
      uint32_t out[4];
      assert_kiln_ok(kiln_buffer_read_sync(q, &(kiln_range){rb, 0, 4, KILN_U32}, out));
      const struct ref r = reference(op, dt, x, y, off, n, 1);
      char what[64];
      snprintf(what, sizeof what, "%s %s n=%zu offset %zu", names[op],
               kiln_dtype_name(dt), n, off);
      check_result(op, out[1], &r, what);
    }
    assert_kiln_ok(kiln_buffer_destroy(xb));
    assert_kiln_ok(kiln_buffer_destroy(yb));
    free(x);
    free(y);
  }
  assert_kiln_ok(kiln_buffer_destroy(rb));
}

static void checks(kiln_context *ctx, kiln_queue *q) {
  vector_on_device(ctx, q);
  special_on_device(ctx, q);
  matrix_on_device(ctx, q);
  long_on_device(ctx, q);
}

SPACE_TEST_MAIN("space_reduce", prepare, checks)
