/* The conv2d space (runtime/tune/space_conv.c: the implicit GEMM
 * convolution of the GPU family, cl_kernels/conv_gemm.cl): validation
 * refuses, with gemm_gpu's reasons, the points the kernel or a device
 * cannot run, and the tuning API says so too; a seeded sample holding
 * every value of every knob gives test_op_conv.c's results (every case of
 * conv_test_util.h: 1x1 images, primes, stride, padding, dilation, groups,
 * depthwise, a 28x28 layer, channels past every tile; f32, f16, bf16;
 * bias, ReLU, GELU, alpha and beta; guards) with the GPU family forced on a
 * CPU device
 * (space_test_util.h); and the GPU family's im2col path, which the
 * implicit kernel replaced but which stays the fallback, still gives them
 * (kiln__conv_set_implicit). */
#include "conv_test_util.h"
#include "ops/ops_conv_gpu.h"
#include "space_test_util.h"

static const struct kiln__space *sp = &kiln__conv_space;

/* A 1 x 1 x 4 x 4 image (a) through a 3 x 3 kernel (b, after it) into
 * 2 x 2 (b). */
static kiln_status conv_4x4(kiln_queue *q, kiln_buffer *a, kiln_buffer *b) {
  const kiln_conv2d_params p = KILN_CONV2D_PARAMS_INIT;
  return kiln_conv2d(
      q, &(kiln_image){.buffer = a, .n = 1, .c = 1, .h = 4, .w = 4},
      &(kiln_image){.buffer = a, .offset = 16, .n = 1, .c = 1, .h = 3, .w = 3},
      &(kiln_image){.buffer = b, .n = 1, .c = 1, .h = 2, .w = 2}, &p, NULL, 0,
      NULL, NULL);
}

static void test_validation(void **state) {
  (void)state;
  const kiln_device_info *gpu = space_gpu_like_info();
  /* MWG NWG KWG MDIMC NDIMC VWN */
  struct kiln__point p = {{64, 64, 16, 16, 16, 4}};
  char why[256];
  assert_true(kiln__space_check(sp, &p, gpu, true, why, sizeof why));
  p.v[KILN__CONV_VWN] = 3;
  SPACE_REJECTS(sp, p, gpu, true, "VWN 3 is not one of the values");
  p = (struct kiln__point){{16, 64, 16, 32, 16, 1}};
  SPACE_REJECTS(sp, p, gpu, true, "must be multiples of MDIMC 32");
  p = (struct kiln__point){{128, 128, 16, 8, 8, 1}}; /* 16 x 16 outputs */
  SPACE_REJECTS(sp, p, gpu, true, "256 outputs per work-item");
  p = (struct kiln__point){{32, 16, 8, 16, 16, 8}}; /* 16 x 8 / 8 loads */
  SPACE_REJECTS(sp, p, gpu, true, "staged B");
  p = (struct kiln__point){{64, 64, 16, 32, 32, 1}};
  assert_true(kiln__space_check(sp, &p, gpu, true, why, sizeof why));
  kiln_device_info small = *gpu;
  small.max_work_group_size = 256;
  SPACE_REJECTS(sp, p, &small, true, "1024 work-items");
  small = *gpu;
  small.local_mem_bytes = 8 << 10; /* 2 x 32 x 129 floats: 33024 bytes */
  p = (struct kiln__point){{128, 128, 32, 16, 16, 1}};
  SPACE_REJECTS(sp, p, &small, true, "bytes of __local stages");
  /* Text forms. */
  p = (struct kiln__point){{32, 64, 8, 8, 16, 2}};
  char text[100];
  kiln__space_format(sp, &p, text, sizeof text);
  assert_string_equal(text, "MWG=32 NWG=64 KWG=8 MDIMC=8 NDIMC=16 VWN=2");
  /* The API; the override MWG 16 with MDIMC 32 is refused before launch. */
  struct kiln__point broken = {{16, 64, 16, 32, 16, 1}};
  space_check_api(sp, "MWG=32 NWG=64 KWG=8 MDIMC=8 NDIMC=16 VWN=2", NULL,
                  NULL, &broken, conv_4x4);
}

/* Every case of conv_test_util.h in every float dtype on ctx (the GPU
 * family, the point under test), forward and both gradients. */
static void cases_on(kiln_context *ctx, kiln_queue *q) {
  size_t ndt;
  const kiln_dtype *dts = util_float_dtypes(&ndt);
  for (size_t i = 0; i < NCASES; i++)
    for (size_t d = 0; d < ndt; d++)
      run_case(ctx, q, &cases[i], dts[d], "conv2d point");
}

/* The GPU family's im2col path, with the profile's point. */
static void test_im2col_fallback(void **state) {
  (void)state;
  unsigned shard, shards;
  space_shard(&shard, &shards);
  if (shard != 0)
    return;
  kiln__conv_set_implicit(false);
  FOR_EACH_TEST_DEVICE(d) {
    kiln_context *ctx = NULL;
    kiln_queue *q = NULL;
    space_open(sp, d, &ctx, &q);
    cases_on(ctx, q);
    kiln_test_close(ctx, q);
  }
  kiln__conv_set_implicit(true);
}

static void test_sample(void **state) {
  (void)state;
  space_run_sample(sp, NULL, cases_on);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_validation),
      cmocka_unit_test(test_sample),
      cmocka_unit_test(test_im2col_fallback),
  };
  return KILN_TEST_RUN("space_conv", tests, true);
}
