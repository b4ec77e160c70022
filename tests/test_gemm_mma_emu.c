/* The matrix-unit GEMM (cl_kernels/gemm_mma.cl, runtime/tune/space_mma.c)
 * without a GPU:
 *   - validation of its space refuses, with its reason, each kind of point
 *     the kernel or a device cannot run, and the tuning API and an
 *     override that does not fit behave as for every space;
 *   - where nothing turns the emulation on, a device that is not NVIDIA's
 *     never runs the kernel (nor has kiln cache warm build it), says why
 *     (kiln_tuning_info's used), and its f16 and bf16 GEMMs stay right on
 *     the general-core kernel;
 *   - the kernel built with KILN_MMA_EMULATE (ldmatrix and mma.sync
 *     m16n8k16 in plain OpenCL C, same fragment layout) passes the GEMM
 *     checks of test_op_gemm.c (float64 reference, tolerance derived
 *     there) for f16 and bf16 on three points of the space: m, n and k of
 *     1, primes and non-multiples of every tile, both layouts, every
 *     transpose, operands described in the other layout, offsets and padded
 *     leading dimensions with guards around them (run_case checks every
 *     element outside C), batches, beta over NaN and the epilogue. The GPU
 *     family is forced through the profile on CPU devices, as in
 *     test_gemm_space.c; f32 operands still run gemm_gpu;
 *   - the same for AMD's MFMA and WMMA forms and Intel's DPAS form (8 and
 *     16 lanes), emulated, on contexts with the vendor's profile forced. */
#include "gemm_test_util.h"
#include "space_test_util.h"

static struct kiln__point point(unsigned bm, unsigned bn, unsigned bk,
                                unsigned wm, unsigned wn, unsigned stages) {
  struct kiln__point p = {{0}};
  p.v[KILN__MMA_BM] = bm;
  p.v[KILN__MMA_BN] = bn;
  p.v[KILN__MMA_BK] = bk;
  p.v[KILN__MMA_WM] = wm;
  p.v[KILN__MMA_WN] = wn;
  p.v[KILN__MMA_STAGES] = stages;
  return p;
}

static void test_validation(void **state) {
  (void)state;
  char why[256];
  struct kiln__point p = point(64, 64, 32, 32, 32, 2);
  assert_true(kiln__space_check(&kiln__gemm_mma_space, &p,
                                space_gpu_like_info(), true, why,
                                sizeof why));
  p = point(32, 64, 32, 64, 32, 2);
  SPACE_REJECTS(&kiln__gemm_mma_space, p, space_gpu_like_info(), true, "must be multiples of WM 64");
  /* 4 x 16 x 4 accumulators (WN 128 is outside the listed values, which
   * stop at 128 accumulators). */
  p = point(128, 128, 64, 64, 128, 2);
  SPACE_REJECTS(&kiln__gemm_mma_space, p, space_gpu_like_info(), false, "256 accumulators");
  /* Not a listed value: outside the space. */
  p = point(64, 64, 24, 32, 32, 2);
  SPACE_REJECTS(&kiln__gemm_mma_space, p, space_gpu_like_info(), true, "BK 24");
  /* 2 x (128 + 128) x (64 + 8) x 2 bytes: 72 KiB. */
  p = point(128, 128, 64, 32, 64, 2);
  SPACE_REJECTS(&kiln__gemm_mma_space, p, space_gpu_like_info(), true, "bytes of __local stages");
  /* 128 / 16 x 128 / 16 warps = 2048 work-items. */
  p = point(128, 128, 16, 16, 16, 1);
  SPACE_REJECTS(&kiln__gemm_mma_space, p, space_gpu_like_info(), true, "work-groups of 32 x 64");
  /* A device of AMD's profile: wavefronts of 64 lanes, ROCm's 256
   * work-items (four wavefronts). */
  kiln_device_info amd = *space_gpu_like_info();
  amd.profile = "amd";
  amd.max_work_group_size = 256;
  p = point(64, 64, 32, 32, 32, 2);
  assert_true(kiln__space_check(&kiln__gemm_mma_space, &p, &amd, true, why,
                                sizeof why));
  p = point(128, 64, 32, 32, 32, 2);
  SPACE_REJECTS(&kiln__gemm_mma_space, p, &amd, true, "work-groups of 64 x 8");
  /* RDNA3 (WMMA, wave32, 8 accumulators a fragment): accumulators x BK at
   * most 512. */
  amd.name = "gfx1100";
  p = point(64, 64, 32, 32, 16, 2);
  assert_true(kiln__space_check(&kiln__gemm_mma_space, &p, &amd, true, why,
                                sizeof why));
  p = point(64, 64, 32, 32, 32, 2);
  SPACE_REJECTS(&kiln__gemm_mma_space, p, &amd, true,
                "32 accumulators per lane with BK 32 exceed WMMA's");
  p = point(64, 64, 16, 32, 64, 2);
  SPACE_REJECTS(&kiln__gemm_mma_space, p, &amd, true, "64 accumulators");
  /* Intel's profile (DPAS): validated for sub-groups of 16 lanes, the
   * accumulators of a warp at most 2 KiB (WM x WN <= 512). */
  kiln_device_info intel = *space_gpu_like_info();
  intel.profile = "intel";
  intel.max_work_group_size = 256;
  p = point(64, 64, 32, 32, 16, 2);
  assert_true(kiln__space_check(&kiln__gemm_mma_space, &p, &intel, true, why,
                                sizeof why));
  p = point(64, 64, 32, 32, 32, 2);
  SPACE_REJECTS(&kiln__gemm_mma_space, p, &intel, true,
                "64 accumulators per lane (WM / 16 x WN / 16 x 16) exceed 32");
  p = point(128, 64, 32, 16, 16, 2);
  SPACE_REJECTS(&kiln__gemm_mma_space, p, &intel, true,
                "work-groups of 16 x 32");
  assert_kiln_ok(kiln_tuning_get_knob("gemm_mma", 5, &(kiln_tuning_knob){0}));
}

/* gemm_mma's verdict on ctx for dtype. */
static const char *verdict(kiln_context *ctx, kiln_dtype dtype) {
  const struct kiln__variant *v = NULL;
  assert_kiln_ok(kiln__variant_get(ctx, KILN__TUNED_GEMM_MMA, dtype, &v));
  return v->off;
}

static const struct gcase cases[] = {
    GC(ROW, N, N, 1, 1, 1, 1.0f, 0.0f, KILN_BF16),
    GC(COL, T, N, 1, 1, 1, 1.0f, 0.0f, KILN_F16),
    GC(ROW, N, N, 37, 45, 29, 1.0f, 0.5f, KILN_BF16, PADS(3, 5, 7, 1, 2, 3),
       EPI(RELU, true, 2)),
    GC(ROW, T, T, 61, 19, 131, -1.0f, 0.0f, KILN_F16, PADS(1, 2, 0, 5, 0, 1)),
    GC(COL, N, T, 67, 70, 41, 0.5f, 1.0f, KILN_BF16, PADS(4, 7, 2, 0, 8, 0),
       EPI(GELU, true, 0)),
    GC(COL, T, T, 130, 33, 70, 1.0f, 0.0f, KILN_F16, PADS(2, 0, 1, 3, 1, 0)),
    GC(ROW, T, N, 5, 131, 17, 1.0f, 0.0f, KILN_BF16, PADS(0, 3, 0, 0, 0, 7)),
    GC(COL, N, N, 131, 3, 33, 2.0f, 0.0f, KILN_F16),
    /* Operands described in the layout other than C's; a batch with gaps
     * and a shared B. */
    GC(ROW, N, T, 23, 29, 47, 1.0f, 0.0f, KILN_F16, .mix = true),
    GC(COL, N, N, 19, 17, 23, 1.0f, 0.5f, KILN_BF16, PADS(1, 1, 1, 2, 2, 2),
       BATCH(3, 5), .share_b = true),
    /* Aligned operands (offsets, leading dimensions and batch strides
     * multiples of 8 or 4): the staging's vector path (ops_gemm_gpu.c's
     * mma_vec), along k and along the rows, vectors crossing every edge.
     * Whole tiles, A along k and B along its columns, 8 wide: */
    GC(ROW, N, N, 40, 48, 64, 1.0f, 0.0f, KILN_BF16),
    /* 8 wide, k 29 and n 45 crossing: */
    GC(ROW, N, N, 37, 45, 29, 1.0f, 0.5f, KILN_F16, PADS(3, 3, 0, 8, 16, 0),
       EPI(RELU, true, 2)),
    /* A along its rows, 8 wide, m 45 crossing: */
    GC(ROW, T, N, 45, 37, 30, 1.0f, 0.0f, KILN_BF16, PADS(3, 3, 0, 16, 8, 0)),
    /* 4 wide along k (offsets 4 and 12, leading dimensions 24 and 28): */
    GC(COL, T, N, 33, 70, 21, 1.0f, 0.0f, KILN_F16, PADS(3, 7, 0, 4, 12, 0)),
    /* m, n, k of 1 in a vector; a batch with 576-element strides for A and
     * a shared B: */
    GC(ROW, N, N, 1, 1, 1, 1.0f, 0.0f, KILN_BF16, PADS(7, 7, 0, 8, 8, 0)),
    GC(COL, N, N, 19, 17, 24, 1.0f, 0.5f, KILN_BF16, PADS(5, 0, 1, 0, 8, 2),
       BATCH(3, 5), .share_b = true),
};

/* kiln cache warm's list (kiln__ops_warm_gemm): count gemm_mma's. */
static void count_mma(void *user, const char *source, const char *options) {
  (void)options;
  if (strcmp(source, "gemm_mma") == 0)
    (*(int *)user)++;
}

static int warmed_mma(kiln_context *ctx) {
  int count = 0;
  kiln__ops_warm_gemm(ctx, count_mma, &count);
  return count;
}

/* Small, mixed and the default point: one and two stages, one and several
 * warps per dimension, BK 16 to 64; each within 32 KiB of __local memory
 * (STAGES x (BM + BN) x (BK + 8) x 2 bytes), what llvmpipe (rusticl)
 * offers, so every point runs on every test device. */
static struct kiln__point emulated_point(size_t s) {
  switch (s) {
  case 0:
    return point(32, 32, 16, 16, 16, 1);
  case 1:
    return point(128, 32, 64, 64, 16, 1);
  default:
    return point(64, 64, 32, 32, 32, 2);
  }
}

/* With the emulation on ctx: the kernel runs for f16 and bf16, and passes
 * every case on the points from first to the last of the three. */
static void run_emulated(kiln_context *ctx, kiln_queue *q, size_t d,
                         const char *form, size_t first) {
  kiln_tuning_info *info = calloc(1, sizeof *info);
  assert_non_null(info);
  kiln__gemm_mma_emulate(true);
  assert_kiln_ok(kiln_tuning_get_info(ctx, "gemm_mma", info));
  assert_string_equal(info->used, "yes, for f16 and bf16 GEMM");
  /* kiln cache warm builds the kernel for f16 and bf16 where it runs. */
  assert_int_equal(warmed_mma(ctx), 2);
  for (size_t s = first; s < 3; s++) {
    const struct kiln__point p = emulated_point(s);
    kiln__space_set_override(&kiln__gemm_mma_space, &p);
    assert_string_equal(verdict(ctx, KILN_F16), "");
    assert_string_equal(verdict(ctx, KILN_BF16), "");
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
      char tag[96];
      snprintf(tag, sizeof tag, "device %zu emulated %s point %zu case %zu", d,
               form, s, i);
      run_case(ctx, q, &cases[i], tag);
    }
  }
  kiln__space_set_override(&kiln__gemm_mma_space, NULL);
  kiln__gemm_mma_emulate(false);
  free(info);
}

static void test_emulated(void **state) {
  (void)state;
  FOR_EACH_TEST_DEVICE(d) {
    kiln_context *ctx = NULL;
    kiln_queue *q = NULL;
    space_open(&kiln__gemm_mma_space, d, &ctx, &q);
    const bool nvidia = ctx->device->info.vendor_id == 0x10de;
    /* Without the emulation: a device that is not NVIDIA's never runs
     * the kernel and says why; f32 never does. */
    kiln_tuning_info *info = calloc(1, sizeof *info);
    assert_non_null(info);
    assert_kiln_ok(kiln_tuning_get_info(ctx, "gemm_mma", info));
    fprintf(stderr, "# device %zu gemm_mma used: %s\n", d, info->used);
    if (!nvidia) {
      assert_non_null(strstr(info->used, "no: not an NVIDIA device"));
      assert_non_null(strstr(verdict(ctx, KILN_BF16), "not an NVIDIA"));
      run_case(ctx, q, &cases[2], "gemm_gpu for bf16 (no matrix units)");
    }
    assert_non_null(strstr(verdict(ctx, KILN_F32), "f32 operands"));
    if (!nvidia)
      assert_int_equal(warmed_mma(ctx), 0);
    free(info);
    run_emulated(ctx, q, d, "mma.sync", 0);
    kiln_test_close(ctx, q);
  }
}

/* A context of device d with profile forced, its queue, and in info
 * gemm_mma's verdict there with the first emulated point as if gated (the
 * override, which the caller clears), so that the probe decides. */
static void open_forced(size_t d, const char *profile, kiln_context **ctx,
                        kiln_queue **q, kiln_tuning_info *info) {
  const kiln_context_options opts = {.profile = profile};
  assert_kiln_ok(kiln_context_create(kiln_test_device(d), &opts, ctx));
  assert_kiln_ok(kiln_queue_create(*ctx, KILN_QUEUE_PROFILING, q));
  const struct kiln__point p = emulated_point(0);
  kiln__space_set_override(&kiln__gemm_mma_space, &p);
  assert_kiln_ok(kiln_tuning_get_info(*ctx, "gemm_mma", info));
  fprintf(stderr, "# device %zu gemm_mma used (%s profile): %s\n", d,
          profile, info->used);
}

/* AMD's forms, MFMA 16x16x16 (wavefronts of 64) and WMMA 16x16x16
 * (wave32), on contexts with AMD's profile forced (its build options select
 * them). Without the emulation the compile probe fails on a device that is
 * not an AMD GPU with either (the kernel's #error), says so, and GEMMs stay
 * right on gemm_gpu; with it, each form's fragment loads and index
 * arithmetic, the shared staging and epilogue pass the cases on the same
 * three points (work-groups of 64 or 32 x 4, x 2 and x 4). */
static void test_emulated_amd(void **state) {
  (void)state;
  FOR_EACH_TEST_DEVICE(d) {
    kiln_context *ctx = NULL;
    kiln_queue *q = NULL;
    kiln_tuning_info *info = calloc(1, sizeof *info);
    assert_non_null(info);
    open_forced(d, "amd", &ctx, &q, info);
    if (strstr(kiln_context_get_device_info(ctx)->name, "gfx") == NULL) {
      assert_int_equal(kiln__gemm_mma_lanes(ctx), 64);
      assert_non_null(strstr(info->used, "AMD's MFMA 16x16x16"));
      assert_non_null(strstr(verdict(ctx, KILN_F16), "or WMMA (RDNA3)"));
      assert_int_equal(warmed_mma(ctx), 0);
      run_case(ctx, q, &cases[3], "gemm_gpu for f16 (amd profile, no MFMA)");
    }
    kiln__space_set_override(&kiln__gemm_mma_space, NULL);
    free(info);
    kiln__gemm_mma_emulate(true);
    assert_int_equal(kiln__gemm_mma_lanes(ctx), 64);
    run_emulated(ctx, q, d, "MFMA", 0);
    kiln__gemm_mma_emulate_wmma(true);
    kiln__gemm_mma_emulate(true);
    assert_int_equal(kiln__gemm_mma_lanes(ctx), 32);
    run_emulated(ctx, q, d, "WMMA", 0);
    kiln__gemm_mma_emulate_wmma(false);
    kiln_test_close(ctx, q);
  }
}

/* Intel's form, DPAS through cl_intel_subgroup_matrix_multiply_accumulate
 * (sub-groups of 8 or 16 lanes), on contexts with Intel's profile forced
 * (its build options select it). Without the emulation a device that does
 * not report the extension never runs the kernel and says so, and GEMMs
 * stay right on gemm_gpu; with it, DPAS's layouts for sub-groups of 8 and
 * of 16 lanes, with the kernel's fragment loads, output coordinates and the
 * shared staging and epilogue, pass the cases on the three points (lanes
 * exchanged through __local memory between barriers: PoCL's sub-groups are
 * not Intel's, and the emulation needs none). */
static void test_emulated_intel(void **state) {
  (void)state;
  FOR_EACH_TEST_DEVICE(d) {
    kiln_context *ctx = NULL;
    kiln_queue *q = NULL;
    kiln_tuning_info *info = calloc(1, sizeof *info);
    assert_non_null(info);
    open_forced(d, "intel", &ctx, &q, info);
    if (strstr(kiln_context_get_device_info(ctx)->extensions,
               "cl_intel_subgroup_matrix_multiply_accumulate") == NULL) {
      assert_string_equal(info->used,
                          "no: Intel's DPAS needs cl_intel_subgroup_matrix_"
                          "multiply_accumulate, which the device does not "
                          "report: the compile probe was not built");
      assert_non_null(
          strstr(verdict(ctx, KILN_F16), "the device does not report"));
      assert_int_equal(warmed_mma(ctx), 0);
      run_case(ctx, q, &cases[4], "gemm_gpu for bf16 (intel profile, no DPAS)");
    }
    kiln__space_set_override(&kiln__gemm_mma_space, NULL);
    free(info);
    /* 16 lanes on the three points; 8 (whose layout differs in A's lanes
     * and the warp's width alone) on the default point, several warps each
     * way, double buffered, to hold the test's time. */
    static const unsigned lanes[] = {16, 8};
    for (size_t i = 0; i < 2; i++) {
      kiln__gemm_mma_emulate_dpas(lanes[i]);
      kiln__gemm_mma_emulate(true);
      assert_int_equal(kiln__gemm_mma_lanes(ctx), lanes[i]);
      run_emulated(ctx, q, d, lanes[i] == 8 ? "DPAS x8" : "DPAS x16",
                   lanes[i] == 8 ? 2 : 0);
    }
    kiln__gemm_mma_emulate_dpas(16);
    kiln_test_close(ctx, q);
  }
}

/* An 8 x 8 x 8 bf16 GEMM: A and B in a (64 elements each), C in b. */
static kiln_status gemm_8x8(kiln_queue *q, kiln_buffer *a, kiln_buffer *b) {
  const kiln_matrix ma = {.buffer = a, .rows = 8, .cols = 8, .dtype = KILN_BF16};
  const kiln_matrix mb = {.buffer = a, .offset = 64, .rows = 8, .cols = 8,
                          .dtype = KILN_BF16};
  const kiln_matrix mc = {.buffer = b, .rows = 8, .cols = 8, .dtype = KILN_F32};
  return kiln_matmul(q, 1, &ma, &mb, &mc, NULL, 0, NULL, NULL);
}

/* The tuning API's view of the space; an override the device cannot run
 * fails a bf16 GEMM before launch, naming the space. */
static void test_api(void **state) {
  (void)state;
  const struct kiln__point broken = point(32, 64, 32, 64, 32, 2);
  space_check_api(&kiln__gemm_mma_space,
                  "BM=32 BN=64 BK=16 WM=16 WN=32 STAGES=1", NULL, NULL,
                  &broken, gemm_8x8);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_validation),
      cmocka_unit_test(test_api),
      cmocka_unit_test(test_emulated),
      cmocka_unit_test(test_emulated_amd),
      cmocka_unit_test(test_emulated_intel),
  };
  (void)run_all;
  (void)run_cpu_family;
  (void)space_run_sample;
  const char *filter = getenv("KILN_TEST_FILTER");
  if (filter != NULL && filter[0] != '\0')
    cmocka_set_test_filter(filter);
  /* tests/meson.build runs Intel's form as a test of its own (each builds
   * a dozen programs on PoCL: minutes with a cold cache). */
  const char *skip = getenv("KILN_TEST_SKIP");
  if (skip != NULL && skip[0] != '\0')
    cmocka_set_skip_filter(skip);
  return KILN_TEST_RUN("gemm_mma_emu", tests, true);
}
