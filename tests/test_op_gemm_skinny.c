/* GEMM's unpacked path for few rows or columns (CPU family,
 * runtime/ops/ops_gemm_skinny.c, cl_kernels/gemm_skinny.cl) against the
 * float64 reference of gemm_test_util.h, with its tolerance (derived in
 * test_op_gemm.c; the unpacked kernel sums 16 lanes of k separately and
 * then halves the vector, so each product still passes through at most
 * k / 16 + 4 + k % 16 <= k + 2 roundings, inside the 2 (k + 4) u bound).
 *
 * The switch point is forced up for most cases, so that shapes of every
 * kind take the path: m = 1, 2, 3 and primes (the kernels' row blocks of
 * 8, 4, 2 and 1 rows), n not a multiple of the column tiles (4 along k, 32
 * along n), k below 16 and not a multiple of 16 (the vector steps and the
 * scalar tail), both layouts and every transpose (which picks the kernel:
 * op(B) contiguous along k or along n), a small n (computed as C^T),
 * padded leading dimensions and offsets with guard elements, f16 and bf16
 * inputs, batches with shared operands, alpha and beta (beta 0 over a C
 * of NaN), and the epilogue. Then the default switch point is checked on
 * primes just below and just above it: right answers on both sides, and
 * the packed kernel's workspace allocated only above it. */
#include "gemm_test_util.h"

/* Every layout and transpose on small row counts and awkward columns. */
static void test_skinny_shapes(void **state) {
  (void)state;
  static const size_t shapes[][3] = {
      {1, 37, 45}, {2, 70, 33}, {3, 5, 16}, {13, 19, 17},
      {1, 1, 1},   {5, 33, 7},  {37, 5, 100}, /* small n: C^T */
  };
  enum { SHAPES = sizeof shapes / sizeof shapes[0] };
  struct gcase cases[8 * SHAPES];
  size_t c = 0;
  for (int l = 0; l < 2; l++)
    for (int ta = 0; ta < 2; ta++)
      for (int tb = 0; tb < 2; tb++)
        for (size_t s = 0; s < SHAPES; s++) {
          struct gcase g = GC(l ? COL : ROW, ta ? T : N, tb ? T : N,
                              shapes[s][0], shapes[s][1], shapes[s][2], 1.0f,
                              0.0f, KILN_F32);
          if (s % 2 == 1) { /* padded and offset, beta != 0 */
            g.lda_pad = 3;
            g.ldb_pad = 1;
            g.ldc_pad = 2;
            g.a_off = 5;
            g.b_off = 1;
            g.c_off = 7;
            g.alpha = -1.5f;
            g.beta = 0.5f;
          }
          cases[c++] = g;
        }
  kiln__gemm_set_skinny_max(1000);
  run_all(cases, c, true);
  kiln__gemm_set_skinny_max(-1);
}

/* f16/bf16, long k, batches, alpha/beta and the epilogue. */
static const struct gcase mixed[] = {
    GC(ROW, N, T, 1, 67, 300, 1.0f, 0.0f, KILN_F16, PADS(1, 2, 3, 1, 1, 1)),
    GC(ROW, N, N, 2, 45, 80, 1.0f, 0.5f, KILN_F16),
    GC(COL, T, T, 7, 40, 33, -2.0f, 0.0f, KILN_F16, PADS(0, 1, 0, 3, 0, 2)),
    GC(ROW, N, T, 3, 90, 1000, 0.5f, 1.0f, KILN_BF16),
    GC(COL, N, N, 11, 29, 64, 1.0f, 0.0f, KILN_BF16, PADS(2, 0, 1, 0, 3, 0)),
    GC(ROW, T, N, 60, 2, 130, 1.0f, 0.0f, KILN_BF16),
    /* Batches: strided, and one operand shared by every entry. */
    GC(ROW, N, T, 1, 33, 50, 1.0f, 0.0f, KILN_F32, PADS(0, 0, 0, 2, 1, 0),
       BATCH(3, 2)),
    GC(COL, T, N, 3, 40, 23, -1.0f, 0.5f, KILN_F32, PADS(1, 2, 3, 4, 5, 6),
       BATCH(4, 7)),
    GC(ROW, N, N, 2, 21, 70, 1.0f, 1.0f, KILN_F32, PADS(0, 0, 0, 2, 0, 0),
       BATCH(5, 1), .share_a = true),
    GC(ROW, N, T, 29, 3, 40, 1.0f, 0.0f, KILN_F16, PADS(1, 0, 2, 0, 3, 0),
       BATCH(3, 5), .share_b = true),
    GC(COL, T, T, 2, 19, 300, 0.5f, 0.0f, KILN_BF16, PADS(0, 0, 0, 0, 0, 0),
       BATCH(2, 0)),
    /* The epilogue: every activation, with and without a bias, both
     * kernels and C^T (the bias's strides swap), beta 0 and not. */
    GC(ROW, N, T, 1, 45, 29, 1.0f, 0.0f, KILN_F32, EPI(RELU, true, 3)),
    GC(ROW, N, N, 1, 45, 29, 1.0f, 0.0f, KILN_F32, EPI(GELU, true, 0)),
    GC(COL, N, N, 5, 37, 29, 1.0f, 0.5f, KILN_F32, PADS(2, 3, 4, 1, 2, 3),
       EPI(GELU, true, 5)),
    GC(ROW, T, N, 61, 4, 131, -1.0f, 0.0f, KILN_F32, PADS(1, 0, 2, 0, 1, 2),
       EPI(RELU, true, 1)),
    GC(COL, T, T, 3, 61, 40, 0.5f, -1.0f, KILN_F32, EPI(RELU, false, 0)),
    GC(ROW, N, T, 70, 7, 17, 2.0f, 1.0f, KILN_F32, EPI(NONE, true, 1)),
    GC(ROW, N, T, 2, 67, 80, 1.0f, 0.0f, KILN_BF16, PADS(1, 2, 3, 1, 1, 1),
       EPI(GELU, true, 2)),
    GC(COL, T, N, 9, 3, 33, -2.0f, 0.5f, KILN_F16, EPI(RELU, true, 0)),
};

static void test_skinny_mixed(void **state) {
  (void)state;
  kiln__gemm_set_skinny_max(1000);
  run_all(mixed, sizeof mixed / sizeof mixed[0], true);
  kiln__gemm_set_skinny_max(-1);
}

/* The narrow register blocks (devices without 16-float vectors: 2 x 2 dot
 * products, 4 rows of 16 columns) and the wide ones, through the tile
 * hook's vector width, on CPU-family devices (run_cpu_family). */
static void test_skinny_narrow(void **state) {
  (void)state;
  kiln__gemm_set_skinny_max(1000);
  static const unsigned widths[] = {4, 16};
  for (size_t w = 0; w < 2; w++) {
    kiln__gemm_set_cpu_tile(0, 0, widths[w], 0);
    char what[32];
    snprintf(what, sizeof what, "vw %u: mixed", widths[w]);
    run_cpu_family(mixed, sizeof mixed / sizeof mixed[0], what);
  }
  kiln__gemm_set_cpu_tile(0, 0, 0, 0);
  kiln__gemm_set_skinny_max(-1);
}

/* The default switch point (few <= k / 8 within [8, 64]): primes just
 * below and above it at k = 64 (8) and k = 1024 (64), for m and for n. On
 * a fresh queue of the CPU family, the unpacked kernel leaves the queue
 * without a workspace and the packed one allocates it, which tells which
 * ran. */
static void test_skinny_switch_point(void **state) {
  (void)state;
  static const struct {
    struct gcase g;
    bool packed;
  } cases[] = {
      {GC(ROW, N, T, 7, 50, 64, 1.0f, 0.0f, KILN_F32), false},
      {GC(ROW, N, T, 11, 50, 64, 1.0f, 0.0f, KILN_F32), true},
      {GC(ROW, N, N, 50, 7, 64, 1.0f, 0.0f, KILN_F32), false},
      {GC(ROW, N, N, 50, 11, 64, 1.0f, 0.0f, KILN_F32), true},
      {GC(ROW, N, T, 61, 70, 1024, 1.0f, 0.0f, KILN_F32, .row_step = 5),
       false},
      {GC(ROW, N, T, 67, 70, 1024, 1.0f, 0.0f, KILN_F32, .row_step = 5),
       true},
      {GC(COL, T, N, 70, 61, 1024, 1.0f, 0.0f, KILN_F32, .row_step = 5),
       false},
      {GC(COL, T, N, 70, 67, 1024, 1.0f, 0.0f, KILN_F32, .row_step = 5),
       true},
  };
  FOR_EACH_TEST_DEVICE(d) {
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
      kiln_context *ctx = NULL;
      kiln_queue *q = NULL;
      kiln_test_open(d, &ctx, &q);
      char tag[96];
      snprintf(tag, sizeof tag, "device %zu: switch point case %zu", d, i);
      run_case(ctx, q, &cases[i].g, tag);
      size_t held = 0;
      if (ctx->backend->tuning->family == KILN_FAMILY_CPU &&
          (kiln__op_workspace_held(q, &held) != NULL) != cases[i].packed)
        fail_msg("%s: the %s kernel ran", tag,
                 cases[i].packed ? "unpacked" : "packed");
      kiln_test_close(ctx, q);
    }
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_skinny_shapes),
      cmocka_unit_test(test_skinny_mixed),
      cmocka_unit_test(test_skinny_narrow),
      cmocka_unit_test(test_skinny_switch_point),
  };
  const char *filter = getenv("KILN_TEST_FILTER");
  if (filter != NULL && filter[0] != '\0')
    cmocka_set_test_filter(filter);
  return KILN_TEST_RUN("op_gemm_skinny", tests, true);
}
