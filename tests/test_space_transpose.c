/* The GPU-family transpose's parameter space (runtime/ops/ops_transpose.c):
 * validation refuses, with its reason, each kind of point that the kernel
 * or a device cannot run, and the tuning API says so too; a seeded sample
 * holding every value of every knob gives test_op_transpose.c's exact
 * results (sizes around every tile, 1, primes, leading dimensions, offsets,
 * 32- and 16-bit elements, guards around y) with the GPU family forced on a
 * CPU device (space_test_util.h). */
#define KILN_OP_TEST_NO_MAIN
#pragma GCC diagnostic ignored "-Wunused-function"
#include "test_op_transpose.c"

#include "space_test_util.h"

static const struct kiln__space *sp = &kiln__transpose_space;

static kiln_status transpose_8x8(kiln_queue *q, kiln_buffer *x,
                                 kiln_buffer *y) {
  return kiln_transpose(q, matrix_ld(x, 0, 8, 8, 8, KILN_F32),
                        matrix_ld(y, 0, 8, 8, 8, KILN_F32), 0, NULL, NULL);
}

static void test_validation(void **state) {
  (void)state;
  const kiln_device_info *gpu = space_gpu_like_info();
  struct kiln__point p = {{32, 1, 4}};
  char why[256];
  assert_true(kiln__space_check(sp, &p, gpu, true, why, sizeof why));
  p.v[2] = 3; /* WPT 3: outside the space, and it does not divide 32 */
  SPACE_REJECTS(sp, p, gpu, true, "WPT 3 is not one of the values");
  SPACE_REJECTS(sp, p, gpu, false, "WPT 3 does not divide TILE 32");
  p = (struct kiln__point){{8, 1, 8}};
  assert_true(kiln__space_check(sp, &p, gpu, true, why, sizeof why));
  p = (struct kiln__point){{64, 1, 2}}; /* 64 x 32 = 2048 items */
  SPACE_REJECTS(sp, p, gpu, true, "64 x 32 work-items");
  kiln_device_info small = *gpu;
  small.local_mem_bytes = 16 << 10;
  p = (struct kiln__point){{64, 1, 8}}; /* 64 x 65 x 4 = 16640 bytes */
  SPACE_REJECTS(sp, p, &small, true, "16640 bytes of __local tile");
  p.v[1] = 0; /* PAD 0: 16384 bytes fit */
  assert_true(kiln__space_check(sp, &p, &small, true, why, sizeof why));
  p = (struct kiln__point){{0, 1, 1}};
  SPACE_REJECTS(sp, p, gpu, false, "TILE is 0");
  /* Text forms. */
  p = (struct kiln__point){{16, 0, 2}};
  char text[100];
  kiln__space_format(sp, &p, text, sizeof text);
  assert_string_equal(text, "TILE=16 PAD=0 WPT=2");
  struct kiln__point back = {{0}};
  assert_true(kiln__space_parse(sp, "WPT=2,TILE=16 PAD=0", &back, why,
                                sizeof why));
  assert_memory_equal(&p, &back, sizeof p);
  assert_false(kiln__space_parse(sp, "TILE=16 PAD=0", &back, why, sizeof why));
  assert_non_null(strstr(why, "WPT is missing"));
  /* The API; the override WPT 3 is refused before launch. */
  struct kiln__point broken = {{32, 1, 3}};
  space_check_api(sp, "TILE=16 PAD=0 WPT=2",
                  NULL, NULL, &broken, transpose_8x8);
}

SPACE_TEST_MAIN("space_transpose", NULL, shapes_on_device)
