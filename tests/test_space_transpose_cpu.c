/* The CPU-family transpose's parameter space (runtime/tune/space_cpu.c):
 * validation refuses, with its reason, a tile the kernel cannot run, a
 * switch (NT, ORDER) that is neither 0 nor 1 or a vector width (VW) other
 * than 8 and 16, and the tuning API says so
 * too; every value of every knob gives test_op_transpose.c's exact results (sizes around every tile, 1, primes,
 * leading dimensions, offsets, 32- and 16-bit elements, guards around y)
 * with the CPU family (forced through the profile on a GPU-family device;
 * space_test_util.h). */
#define KILN_OP_TEST_NO_MAIN
#pragma GCC diagnostic ignored "-Wunused-function"
#include "test_op_transpose.c"

#include "space_test_util.h"

static const struct kiln__space *sp = &kiln__transpose_cpu_space;

static kiln_status transpose_8x8(kiln_queue *q, kiln_buffer *x,
                                 kiln_buffer *y) {
  return kiln_transpose(q, matrix_ld(x, 0, 8, 8, 8, KILN_F32),
                        matrix_ld(y, 0, 8, 8, 8, KILN_F32), 0, NULL, NULL);
}

static void test_validation(void **state) {
  (void)state;
  const kiln_device_info *info = space_gpu_like_info();
  struct kiln__point p = {{1, 1, 64, 16}}; /* NT, ORDER, TILE, VW */
  char why[256];
  assert_true(kiln__space_check(sp, &p, info, true, why, sizeof why));
  p.v[2] = 24; /* outside the space, and not a whole number of blocks */
  SPACE_REJECTS(sp, p, info, true, "TILE 24 is not one of the values");
  SPACE_REJECTS(sp, p, info, false, "TILE 24 is not a multiple of 16");
  p.v[2] = 0;
  SPACE_REJECTS(sp, p, info, false, "TILE is 0");
  p.v[2] = 2048; /* a multiple of 16 beyond the listed values: a default */
  assert_true(kiln__space_check(sp, &p, info, false, why, sizeof why));
  p.v[0] = 2; /* the switches are 0 or 1 */
  SPACE_REJECTS(sp, p, info, false, "NT 2 is neither 0 nor 1");
  p.v[0] = 0;
  p.v[1] = 3;
  SPACE_REJECTS(sp, p, info, false, "ORDER 3 is neither 0 nor 1");
  p.v[1] = 0; /* 0 is a value of both switches */
  assert_true(kiln__space_check(sp, &p, info, false, why, sizeof why));
  p.v[3] = 4;
  SPACE_REJECTS(sp, p, info, false, "VW 4 is neither 8 nor 16");
  p.v[3] = 8;
  assert_true(kiln__space_check(sp, &p, info, false, why, sizeof why));
  char text[64];
  kiln__space_format(sp, &p, text, sizeof text);
  assert_string_equal(text, "NT=0 ORDER=0 TILE=2048 VW=8");
  struct kiln__point back = {{9, 9, 9, 9}};
  assert_true(kiln__space_parse(sp, "TILE=2048 VW=8 ORDER=0 NT=0", &back,
                                why, sizeof why));
  assert_memory_equal(&p, &back, sizeof p);
  assert_false(
      kiln__space_parse(sp, "NT=1 TILE=64 VW=8", &back, why, sizeof why));
  assert_non_null(strstr(why, "ORDER is missing"));
  /* The API; the override TILE 24 is refused before launch. */
  struct kiln__point broken = {{1, 1, 24, 16}};
  space_check_api(sp, "NT=1 ORDER=1 TILE=32 VW=16", NULL, NULL, &broken,
                  transpose_8x8);
}

SPACE_TEST_MAIN("space_transpose_cpu", NULL, shapes_on_device)
