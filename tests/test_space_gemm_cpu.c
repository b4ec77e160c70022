/* The CPU-family GEMM's parameter space (runtime/tune/space_cpu.c: the
 * register tile VW, MR, NR, the k block KC and the blocks of C MB x NB):
 *   - validation refuses, with its reason, each kind of point that the
 *     kernel cannot run, the text form round-trips, and the tuning API
 *     refuses such points and an override of one before launch;
 *   - a seeded sample of the space holding every value of every knob passes
 *     the GEMM correctness checks of gemm_test_util.h (awkward sizes, both
 *     layouts, transposes, offsets, every dtype, batches, the epilogue, k
 *     past every KC, the packed kernel forced), with the CPU family (forced
 *     through the profile on a GPU-family device; space_test_util.h).
 * The sample is small on purpose; kiln tune's gate checks every candidate
 * it times anyway. */
#pragma GCC diagnostic ignored "-Wunused-function" /* run_all */
#include "gemm_test_util.h"
#include "space_test_util.h"

static const struct kiln__space *sp = &kiln__gemm_cpu_space;

enum { VW, MR, NR, KC, MB, NB };

static kiln_status gemm_8x8(kiln_queue *q, kiln_buffer *a, kiln_buffer *c) {
  return kiln_matmul(q, 1, matrix_of(a, 0, 8, 4, KILN_F32),
                     matrix_of(a, 32, 4, 8, KILN_F32),
                     matrix_of(c, 0, 8, 8, KILN_F32), NULL, 0, NULL, NULL);
}

static void test_validation(void **state) {
  (void)state;
  const kiln_device_info *info = space_gpu_like_info();
  char why[256];
  struct kiln__point p = {{8, 6, 16, 256, 16, 16}};
  assert_true(kiln__space_check(sp, &p, info, true, why, sizeof why));
  p.v[NR] = 32; /* four vectors of 8 per row */
  SPACE_REJECTS(sp, p, info, true, "NR 32 is neither VW 8 nor 2 x VW");
  p.v[NR] = 8; /* one vector */
  assert_true(kiln__space_check(sp, &p, info, true, why, sizeof why));
  p.v[MR] = 9;
  SPACE_REJECTS(sp, p, info, true, "MR 9 is not one of the values");
  SPACE_REJECTS(sp, p, info, false, "MR 9: the kernel keeps 1 to 8 rows");
  p = (struct kiln__point){{2, 6, 4, 256, 16, 16}};
  SPACE_REJECTS(sp, p, info, false, "VW 2 is not a float vector width");
  p = (struct kiln__point){{16, 8, 32, 40, 3, 5}}; /* KC, MB, NB: any */
  assert_true(kiln__space_check(sp, &p, info, false, why, sizeof why));
  SPACE_REJECTS(sp, p, info, true, "KC 40 is not one of the values");
  p.v[MB] = 0;
  SPACE_REJECTS(sp, p, info, false, "MB is 0");
  /* Text forms. */
  p = (struct kiln__point){{4, 3, 8, 64, 32, 4}};
  char text[200];
  kiln__space_format(sp, &p, text, sizeof text);
  assert_string_equal(text, "VW=4 MR=3 NR=8 KC=64 MB=32 NB=4");
  struct kiln__point back = {{0}};
  assert_true(kiln__space_parse(sp, "NB=4,MB=32 KC=64 NR=8 MR=3 VW=4", &back,
                                why, sizeof why));
  assert_memory_equal(&p, &back, sizeof p);
  /* The defaults: derived from the vector width (backends/backend.h). */
  kiln__gemm_cpu_point(8, 0, 0, 0, &p);
  kiln__space_format(sp, &p, text, sizeof text);
  assert_string_equal(text, "VW=8 MR=6 NR=16 KC=256 MB=16 NB=16");
  kiln__gemm_cpu_point(0, 0, 0, 0, &p); /* a driver that does not say */
  assert_int_equal(p.v[VW], 4);
  /* The API; the override NR 32 of 4-float vectors is refused before
   * launch, on the unpacked kernel's path too (8 x 8 x 4 is skinny). */
  struct kiln__point broken = {{4, 6, 32, 256, 16, 16}};
  space_check_api(sp, "VW=8 MR=4 NR=8 KC=128 MB=8 NB=32",
                  "VW=4 MR=6 NR=32 KC=256 MB=16 NB=16", "NR 32 is neither",
                  &broken, gemm_8x8);
}

/* Around every tile (MR up to 8, NR up to 32, blocks of 4 to 32 tiles), k
 * past KC 1024, batches with a shared operand, 16-bit operands, the
 * epilogue; the packed kernel (the tile's) forced for every shape. */
static const struct gcase cases[] = {
    GC(ROW, N, N, 37, 45, 150, 1.0f, 0.0f, KILN_F32),
    GC(COL, T, T, 29, 70, 33, -1.0f, 0.5f, KILN_F32, PADS(1, 2, 3, 4, 5, 6)),
    GC(ROW, T, N, 17, 33, 64, 1.0f, 0.0f, KILN_F16),
    GC(ROW, N, T, 9, 40, 23, 1.0f, 1.0f, KILN_BF16, PADS(0, 0, 0, 0, 0, 0),
       BATCH(3, 2)),
    GC(ROW, N, N, 3, 5, 1100, 1.0f, 0.0f, KILN_F32, EPI(RELU, true, 1)),
    GC(COL, N, T, 130, 300, 19, 0.5f, 0.0f, KILN_F32, .share_b = true,
       BATCH(2, 0), EPI(GELU, true, 0)),
};

static void checks(kiln_context *ctx, kiln_queue *q) {
  kiln__gemm_set_skinny_max(0);
  char tag[64];
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    snprintf(tag, sizeof tag, "case %zu", i);
    run_case(ctx, q, &cases[i], tag);
  }
  kiln__gemm_set_skinny_max(-1);
}

SPACE_TEST_MAIN("space_gemm_cpu", NULL, checks)
