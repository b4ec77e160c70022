/* The GPU-family elementwise kernels' parameter space (runtime/ops/
 * ops_elementwise.c): validation refuses, with its reason, each kind of
 * point that a device cannot run, and the tuning API says so too; a seeded
 * sample holding every value of every knob passes test_op_elementwise.c's
 * checks (unary, binary and scalar maps, axpy, scale, fill; f32, f16 and
 * bf16; sizes 0, 1, primes, past whole groups of the largest point;
 * guards around the range) with the GPU family forced on a CPU device
 * (space_test_util.h), at offsets off the vectors' alignment for half the
 * points and on it (aligned vector accesses) for the other half. */
#define KILN_OP_TEST_NO_MAIN
#pragma GCC diagnostic ignored "-Wunused-function"
#include "test_op_elementwise.c"

#include "space_test_util.h"

static const struct kiln__space *sp = &kiln__elementwise_space;

static kiln_status axpy_17(kiln_queue *q, kiln_buffer *x, kiln_buffer *y) {
  return kiln_axpy(q, range_of(x, 0, 17, KILN_F32),
                   range_of(y, 0, 17, KILN_F32), 1.0f, 0, NULL, NULL);
}

static void test_validation(void **state) {
  (void)state;
  const kiln_device_info *gpu = space_gpu_like_info();
  struct kiln__point p = {{256, 4, 4}};
  char why[256];
  assert_true(kiln__space_check(sp, &p, gpu, true, why, sizeof why));
  kiln_device_info small = *gpu;
  small.max_work_group_size = 128;
  SPACE_REJECTS(sp, p, &small, true, "work-groups of 256 work-items exceed");
  small = *gpu;
  small.max_work_item_sizes[0] = 64;
  SPACE_REJECTS(sp, p, &small, true, "exceed the device's 64");
  p.v[0] = 96;
  SPACE_REJECTS(sp, p, gpu, true, "WG 96 is not one of the values");
  SPACE_REJECTS(sp, p, gpu, false, "WG 96 is not a power of two");
  p = (struct kiln__point){{64, 0, 2}};
  SPACE_REJECTS(sp, p, gpu, false, "WPT is 0");
  struct kiln__point broken = {{100, 1, 1}};
  space_check_api(sp, "WG=64 WPT=2 VW=8", NULL, NULL, &broken, axpy_17);
}

/* Odd points at offsets that are multiples of every vector width. */
static void prepare(size_t index) {
  xoff_ = index % 2 ? 8 : 3;
  yoff_ = index % 2 ? 16 : 5;
}

static void checks(kiln_context *ctx, kiln_queue *q) {
  unary_on_device(ctx, q);
  unary_special_on_device(ctx, q);
  binary_on_device(ctx, q);
  axpy_scale_fill_on_device(ctx, q);
  zero_size_on_device(ctx, q);
}

SPACE_TEST_MAIN("space_elementwise", prepare, checks)
