/* GEMM: every layout, transpose, leading dimension, offset, alpha/beta case,
 * batching and f16/bf16 input against a host reference accumulated in
 * double; both kernel families on every test device (the device's own
 * profile, then the other family forced through a profile override); and
 * every bad argument refused with a message naming it.
 *
 * Tolerance. The device computes each C element as a chain of k fused
 * multiply-adds in f32 (each rounding once, relative error <= u = 2^-24),
 * then alpha * acc and fma(beta, C, .), and on the CPU family one addition
 * into C per pass of KC steps and per chunk of k. Every product |a||b|
 * passes through at most k + 2 + k/KC <= 2k + 2 roundings, so to first order
 * |C - C_ref| <= (2k + 2) u (|alpha| |A||B| + |beta| |C|)_ij. The constant
 * used, 2 (k + 4), covers that and the second-order terms; a wrong index or
 * a lost term is off by about |a||b| itself, far above this bound for the
 * sizes tested. The inputs of f16/bf16 cases are rounded on the host first
 * and the reference uses the rounded values, so storage rounding is not
 * part of the bound.
 *
 * Epilogue (kiln_matmul's kiln_epilogue): the bias adds one rounding (bound
 * gains |bias|), ReLU is 1-Lipschitz and exact, so the bound passes through it.
 * GELU's derivative is at most 1.13 in magnitude, so an input error e moves
 * it by at most 1.13 e; its own f32 evaluation adds OpenCL's tanh error
 * (<= 5 ulp of a value below 1, 10 u absolute) scaled by 0.5 |x|, and a few
 * roundings of |x|: 16 u (|x| + 1) covers it. */

#include "gemm_test_util.h"

/* Sizes: 1, primes, and non-multiples of every tile in use (MR 6 or 8, NR
 * 8 to 32, GPU tiles 16 to 64, KC 256, packing steps 64, 8 x 8 blocks). */
static void test_sizes(void **state) {
  (void)state;
  static const struct gcase cases[] = {
      GC(ROW, N, N, 1, 1, 1, 1.0f, 0.0f, KILN_F32),
      GC(ROW, N, N, 3, 3, 3, 1.0f, 0.0f, KILN_F32),
      GC(ROW, N, N, 17, 17, 17, 1.0f, 0.0f, KILN_F32),
      GC(ROW, N, N, 127, 127, 127, 1.0f, 0.0f, KILN_F32),
      GC(ROW, N, N, 7, 33, 65, 1.0f, 0.0f, KILN_F32),
      GC(ROW, N, N, 97, 45, 300, 1.0f, 0.0f, KILN_F32),
      GC(ROW, N, N, 130, 257, 19, 1.0f, 0.0f, KILN_F32),
      GC(ROW, N, N, 1, 100, 70, 1.0f, 0.0f, KILN_F32),
      GC(ROW, N, N, 100, 1, 70, 1.0f, 0.0f, KILN_F32),
      GC(ROW, N, N, 5, 7, 1, 1.0f, 0.0f, KILN_F32),
  };
  run_all(cases, sizeof cases / sizeof cases[0], true);
}

/* Every transpose in both layouts, rectangular m != n != k; and A and B
 * described in the other layout than C. */
static void test_transposes_layouts(void **state) {
  (void)state;
  struct gcase cases[16];
  size_t c = 0;
  for (int mix = 0; mix < 2; mix++)
    for (int l = 0; l < 2; l++)
      for (int ta = 0; ta < 2; ta++)
        for (int tb = 0; tb < 2; tb++) {
          cases[c] = (struct gcase)GC(l ? COL : ROW, ta ? T : N, tb ? T : N, 61,
                                      19, 131, 1.0f, 0.0f, KILN_F32);
          cases[c++].mix = mix;
        }
  run_all(cases, c, true);
}

/* Leading dimensions above the minimum and element offsets, so that the
 * guard check sees every gap; alpha and beta variants. */
static void test_ld_offsets_scalars(void **state) {
  (void)state;
  static const struct gcase cases[] = {
      GC(ROW, N, N, 45, 37, 29, 1.0f, 0.0f, KILN_F32, PADS(3, 5, 7, 1, 2, 3)),
      GC(COL, T, N, 45, 37, 29, 1.0f, 0.0f, KILN_F32, PADS(1, 9, 2, 5, 0, 11)),
      GC(ROW, N, T, 33, 70, 40, -1.5f, 0.5f, KILN_F32, PADS(2, 2, 2, 7, 9, 13)),
      GC(COL, N, N, 33, 70, 40, 2.0f, -1.0f, KILN_F32, PADS(0, 0, 4, 0, 0, 1)),
      GC(ROW, T, T, 20, 30, 10, 0.25f, 1.0f, KILN_F32, PADS(6, 0, 1, 3, 3, 3)),
      /* alpha == 0: A and B are not read (A is all NaN); C = beta * C. */
      GC(ROW, N, N, 20, 30, 10, 0.0f, 0.5f, KILN_F32, .nan_a = true),
      GC(COL, T, N, 20, 30, 10, 0.0f, 0.0f, KILN_F32, .nan_a = true),
      /* k == 0: C = beta * C, and beta == 0 gives zeros. */
      GC(ROW, N, N, 20, 30, 0, 1.0f, 3.0f, KILN_F32),
      GC(ROW, N, N, 20, 30, 0, 1.0f, 0.0f, KILN_F32),
  };
  run_all(cases, sizeof cases / sizeof cases[0], true);
}

static void test_batched(void **state) {
  (void)state;
  static const struct gcase cases[] = {
      GC(ROW, N, N, 33, 20, 17, 1.0f, 0.0f, KILN_F32, PADS(0, 0, 0, 0, 0, 0),
         BATCH(3, 0)),
      GC(COL, T, N, 9, 40, 23, -1.0f, 0.5f, KILN_F32, PADS(1, 2, 3, 4, 5, 6),
         BATCH(4, 7)),
      GC(ROW, N, T, 21, 8, 70, 1.0f, 1.0f, KILN_F32, PADS(0, 0, 0, 2, 0, 0),
         BATCH(5, 1), .share_a = true),
      GC(ROW, N, N, 16, 16, 16, 1.0f, 0.0f, KILN_BF16, PADS(0, 0, 0, 0, 0, 0),
         BATCH(2, 0)),
      GC(COL, T, T, 19, 27, 300, 0.5f, 0.0f, KILN_F16, PADS(1, 0, 2, 0, 3, 0),
         BATCH(3, 5), .share_b = true),
  };
  run_all(cases, sizeof cases / sizeof cases[0], true);
}

static void test_half_inputs(void **state) {
  (void)state;
  static const struct gcase cases[] = {
      GC(ROW, N, N, 67, 45, 80, 1.0f, 0.0f, KILN_F16),
      GC(COL, T, T, 67, 45, 80, 1.0f, 0.5f, KILN_F16, PADS(1, 2, 3, 1, 1, 1)),
      GC(ROW, T, N, 40, 90, 33, -2.0f, 0.0f, KILN_F16),
      GC(ROW, N, N, 67, 45, 80, 1.0f, 0.0f, KILN_BF16),
      GC(COL, N, T, 67, 45, 80, 1.0f, 0.5f, KILN_BF16, PADS(1, 2, 3, 1, 1, 1)),
      GC(ROW, T, T, 40, 90, 33, 0.5f, 0.0f, KILN_BF16),
  };
  run_all(cases, sizeof cases / sizeof cases[0], true);
}

/* Chunking of k and of the batch when the workspace limit is reached: the
 * limit is lowered so that small matrices need several chunks. Only the CPU
 * family uses the workspace; on a GPU-family profile this is one more
 * ordinary case. */
static void test_workspace_chunks(void **state) {
  (void)state;
  static const struct gcase cases[] = {
      /* (m + n) * k floats = 100 * 700 * 4 bytes > 64 KiB: k in chunks. */
      GC(ROW, N, N, 50, 50, 700, 1.0f, 0.5f, KILN_F32),
      GC(COL, T, T, 37, 53, 611, -1.0f, 0.0f, KILN_F32),
      /* Small entries, many of them: the batch in chunks. */
      GC(ROW, N, N, 24, 24, 40, 1.0f, 0.0f, KILN_F32, PADS(0, 0, 0, 0, 0, 0),
         BATCH(40, 1)),
      GC(COL, N, N, 24, 24, 40, 1.0f, 0.5f, KILN_F32, PADS(0, 0, 0, 0, 0, 0),
         BATCH(40, 1), .share_b = true),
  };
  kiln__gemm_set_workspace_limit(64 << 10);
  kiln__gemm_set_skinny_max(0); /* the packed kernel for every shape */
  run_all(cases, sizeof cases / sizeof cases[0], false);
  kiln__gemm_set_skinny_max(-1);
  kiln__gemm_set_workspace_limit(0);
}

/* The CPU family's other register tiles, forced through the test hook:
 * AVX-512's 8 x 32 of 16-wide vectors, one-vector rows of an odd height,
 * and k blocks (KC) shorter than k so that every tile makes several passes
 * over C. Only on devices whose own profile is of the CPU family: elsewhere
 * the forced CPU family already runs in the tests above, and each tile is
 * a program of its own, which Mesa's llvmpipe takes 20-45 s to compile. */
static void test_cpu_tiles(void **state) {
  (void)state;
  static const unsigned tiles[][4] = {
      {8, 32, 16, 40}, /* MR, NR, VW, KC */
      {3, 4, 4, 16},
      {5, 16, 8, 7},
  };
  static const struct gcase cases[] = {
      GC(ROW, N, N, 37, 45, 150, 1.0f, 0.0f, KILN_F32),
      GC(COL, T, T, 29, 70, 33, -1.0f, 0.5f, KILN_F32, PADS(1, 2, 3, 4, 5, 6)),
      GC(ROW, T, N, 17, 33, 64, 1.0f, 0.0f, KILN_F16),
      GC(ROW, N, T, 9, 40, 23, 1.0f, 1.0f, KILN_BF16, PADS(0, 0, 0, 0, 0, 0),
         BATCH(3, 2)),
  };
  kiln__gemm_set_skinny_max(0); /* these tiles are the packed kernel's */
  for (size_t t = 0; t < sizeof tiles / sizeof tiles[0]; t++) {
    kiln__gemm_set_cpu_tile(tiles[t][0], tiles[t][1], tiles[t][2],
                            tiles[t][3]);
    char what[64];
    snprintf(what, sizeof what, "tile %ux%u vw %u kc %u", tiles[t][0],
             tiles[t][1], tiles[t][2], tiles[t][3]);
    run_cpu_family(cases, sizeof cases / sizeof cases[0], what);
  }
  kiln__gemm_set_cpu_tile(0, 0, 0, 0);
  kiln__gemm_set_skinny_max(-1);
}

/* GFLOP/s of a 192^3 GEMM on ctx, warm (its kernels already built). */
static double gemm_rate(kiln_context *ctx, kiln_queue *q) {
  const size_t n = 192;
  kiln_buffer *a = util_buffer(ctx, n * n * 4, 0);
  float zero = 0.0f;
  assert_kiln_ok(kiln_buffer_fill(q, &zero, 4, &(kiln_range){a, 0, n * n, KILN_F32}, 0, NULL, NULL));
  double best = 1e30;
  for (int r = 0; r < 2; r++) {
    const double t0 = kiln_test_now();
    /* C overlapping A and B is refused, so A is used for A and B, and the
     * rate is that of C = A A with C in a second buffer. */
    kiln_buffer *c = util_buffer(ctx, n * n * 4, 0);
    assert_kiln_ok(kiln_matmul(
        q, 1, matrix_of(a, 0, n, n, KILN_F32), matrix_of(a, 0, n, n, KILN_F32),
        matrix_of(c, 0, n, n, KILN_F32), NULL, 0, NULL, NULL));
    assert_kiln_ok(kiln_queue_finish(q));
    const double t = kiln_test_now() - t0;
    assert_kiln_ok(kiln_buffer_destroy(c));
    if (t < best)
      best = t;
  }
  assert_kiln_ok(kiln_buffer_destroy(a));
  return 2.0 * (double)(n * n * n) / best * 1e-9;
}

/* Larger sizes, on the device's own profile only, checking a sample of rows
 * against the reference. A device whose GEMM runs under 2 GFLOP/s (Mesa's
 * llvmpipe runs at about 0.05) would take minutes here, so it skips these
 * cases, saying so; the smaller cases above still cover every code path. */
static void test_large(void **state) {
  (void)state;
  static const struct gcase cases[] = {
      GC(ROW, N, N, 1021, 1021, 1021, 1.0f, 0.0f, KILN_F32, .row_step = 7),
      GC(ROW, N, N, 2048, 2048, 2048, 1.0f, 0.0f, KILN_F32, .row_step = 61),
  };
  FOR_EACH_TEST_DEVICE(d) {
    kiln_context *ctx = NULL;
    kiln_queue *q = NULL;
    kiln_test_open(d, &ctx, &q);
    double rate = gemm_rate(ctx, q);
    if (rate < 2.0) {
      fprintf(stderr,
              "# device %zu (%s): GEMM at %.2f GFLOP/s, skipping the 1021 "
              "and 2048 cases\n",
              d, kiln_context_get_device_info(ctx)->name, rate);
    } else {
      for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char tag[96];
        snprintf(tag, sizeof tag, "device %zu: large case %zu", d, i);
        run_case(ctx, q, &cases[i], tag);
      }
    }
    kiln_test_close(ctx, q);
  }
}

/* ---- the fused epilogue (kiln_matmul with an epilogue) ---------------------------- */

/* Every activation with and without a bias, both layouts and every
 * transpose, awkward sizes, padded leading dimensions and offsets (the
 * guard check sees every gap), every dtype, beta 0 over a C of NaN and beta
 * != 0, and alpha == 0 / k == 0 (the scale kernel's epilogue); both
 * families. */
static void test_bias_act(void **state) {
  (void)state;
  static const struct gcase cases[] = {
      GC(ROW, N, N, 1, 1, 1, 1.0f, 0.0f, KILN_F32, EPI(RELU, true, 0)),
      GC(ROW, N, N, 37, 45, 29, 1.0f, 0.0f, KILN_F32, EPI(RELU, true, 3)),
      GC(COL, N, N, 37, 45, 29, 1.0f, 0.5f, KILN_F32, PADS(2, 3, 4, 1, 2, 3),
         EPI(GELU, true, 5)),
      GC(ROW, T, N, 61, 19, 131, -1.0f, 0.0f, KILN_F32, PADS(1, 0, 2, 0, 1, 2),
         EPI(GELU, false, 0)),
      GC(COL, T, T, 19, 61, 40, 0.5f, -1.0f, KILN_F32, PADS(0, 1, 0, 3, 0, 1),
         EPI(RELU, false, 0)),
      GC(ROW, N, T, 33, 70, 17, 2.0f, 1.0f, KILN_F32, EPI(NONE, true, 1)),
      GC(COL, N, T, 7, 130, 65, 1.0f, 0.0f, KILN_F32, EPI(NONE, false, 0)),
      GC(ROW, N, N, 67, 45, 80, 1.0f, 0.0f, KILN_F16, PADS(1, 2, 3, 1, 1, 1),
         EPI(GELU, true, 2)),
      GC(COL, T, N, 40, 90, 33, -2.0f, 0.5f, KILN_F16, EPI(RELU, true, 0)),
      GC(ROW, T, T, 45, 67, 80, 0.5f, 0.0f, KILN_BF16, EPI(RELU, true, 4)),
      GC(COL, N, T, 40, 90, 33, 1.0f, 0.5f, KILN_BF16, PADS(2, 0, 1, 0, 3, 0),
         EPI(GELU, false, 0)),
      /* alpha == 0 (A all NaN, not read) and k == 0: act(beta C + bias). */
      GC(ROW, N, N, 20, 30, 10, 0.0f, 0.5f, KILN_F32, .nan_a = true,
         EPI(RELU, true, 1)),
      GC(COL, N, N, 20, 30, 0, 1.0f, 0.0f, KILN_F32, EPI(GELU, true, 2)),
      GC(ROW, N, N, 20, 30, 0, 1.0f, 2.0f, KILN_F32, EPI(RELU, false, 0)),
  };
  run_all(cases, sizeof cases / sizeof cases[0], true);
}

/* On the CPU family the epilogue applies once, after the last chunk of k
 * and the last KC pass: a lowered workspace limit splits k into host
 * chunks, a forced KC shorter than k makes several passes per chunk. A
 * ReLU or a GELU applied to a partial sum gives a wrong total whenever a
 * partial is negative, which random inputs make certain. */
static void test_bias_act_chunks(void **state) {
  (void)state;
  static const struct gcase cases[] = {
      GC(ROW, N, N, 50, 50, 700, 1.0f, 0.5f, KILN_F32, EPI(RELU, true, 1)),
      GC(COL, T, T, 37, 53, 611, -1.0f, 0.0f, KILN_F32, EPI(GELU, true, 0)),
      GC(ROW, T, N, 29, 45, 300, 1.0f, 0.0f, KILN_F16, EPI(RELU, false, 0)),
  };
  kiln__gemm_set_workspace_limit(64 << 10);
  kiln__gemm_set_skinny_max(0); /* m = 50 at k = 700 would not pack */
  run_all(cases, sizeof cases / sizeof cases[0], false);
  kiln__gemm_set_workspace_limit(0);
  kiln__gemm_set_cpu_tile(3, 4, 4, 16);
  run_cpu_family(cases, sizeof cases / sizeof cases[0], "kc 16: epilogue");
  kiln__gemm_set_cpu_tile(0, 0, 0, 0);
  kiln__gemm_set_skinny_max(-1);
}

/* ---- bad input ----------------------------------------------------------- */

/* kiln_matmul from sgemm's arguments plus batch strides, a bias and an
 * activation: the descriptors, as kiln_ops.h's mapping from BLAS says. */
static kiln_status blas_like(kiln_queue *q, kiln_layout L, kiln_trans ta,
                             kiln_trans tb, size_t m, size_t n, size_t k,
                             float alpha, kiln_dtype dt, kiln_buffer *a,
                             size_t ao, size_t lda, size_t sa, kiln_buffer *b,
                             size_t bo, size_t ldb, size_t sb, float beta,
                             kiln_buffer *c, size_t co, size_t ldc, size_t sc,
                             size_t batch, kiln_buffer *bias, size_t bias_off,
                             kiln_activation act, kiln_event **ev) {
  const bool at = ta == KILN_TRANS, bt = tb == KILN_TRANS;
  const kiln_matrix da = {a, ao, at ? k : m, at ? m : k, lda, sa, dt, L, ta, NULL};
  const kiln_matrix db = {b, bo, bt ? n : k, bt ? k : n, ldb, sb, dt, L, tb, NULL};
  const kiln_matrix dc = {c, co, m, n, ldc, sc, KILN_F32, L, KILN_NO_TRANS, NULL};
  const kiln_epilogue e = {
      alpha, beta, bias ? range_of(bias, bias_off, n, KILN_F32) : NULL, act};
  return kiln_matmul(q, batch, &da, &db, &dc, &e, 0, NULL, ev);
}

static void test_bad_input(void **state) {
  (void)state;
  kiln_context *ctx = NULL;
  kiln_queue *q = NULL;
  kiln_test_open(0, &ctx, &q);
  kiln_buffer *a = NULL, *b = NULL, *c = NULL;
  assert_kiln_ok(kiln_buffer_create(ctx, 16 * 16 * 4, 0, &a));
  assert_kiln_ok(kiln_buffer_create(ctx, 16 * 16 * 4, 0, &b));
  assert_kiln_ok(kiln_buffer_create(ctx, 16 * 16 * 4, 0, &c));
  kiln_event *ev = (kiln_event *)(uintptr_t)1;

  /* The old BLAS-shaped argument lists, turned into descriptors by
   * blas_like, so each case below changes one argument. */
#define GEMM(qq, L, TA, TB, M, N_, K, al, dt, A, ao, lda, B, bo, ldb, be, C,   \
             co, ldc)                                                          \
  blas_like(qq, L, TA, TB, M, N_, K, al, dt, A, ao, lda, 0, B, bo, ldb, 0, be, \
            C, co, ldc, 0, 1, NULL, 0, NONE, &ev)
  assert_kiln_error(GEMM(NULL, ROW, N, N, 4, 4, 4, 1.0f, KILN_F32, a, 0, 4, b,
                         0, 4, 0.0f, c, 0, 4),
                    KILN_ERR_NULL_POINTER, "kiln_matmul: queue is NULL");
  assert_kiln_error(GEMM(q, ROW, N, N, 4, 4, 4, 1.0f, KILN_F32, NULL, 0, 4, b,
                         0, 4, 0.0f, c, 0, 4),
                    KILN_ERR_NULL_POINTER, "kiln_matmul: a is NULL");
  assert_kiln_error(GEMM(q, ROW, N, N, 4, 4, 4, 1.0f, KILN_F32, a, 0, 4, NULL,
                         0, 4, 0.0f, c, 0, 4),
                    KILN_ERR_NULL_POINTER, "kiln_matmul: b is NULL");
  assert_kiln_error(GEMM(q, ROW, N, N, 4, 4, 4, 1.0f, KILN_F32, a, 0, 4, b, 0,
                         4, 0.0f, NULL, 0, 4),
                    KILN_ERR_NULL_POINTER, "kiln_matmul: c is NULL");
  assert_kiln_error(GEMM(q, (kiln_layout)2, N, N, 4, 4, 4, 1.0f, KILN_F32, a, 0,
                         4, b, 0, 4, 0.0f, c, 0, 4),
                    KILN_ERR_INVALID_ARGUMENT,
                    "a.layout 2 is not a valid kiln_layout");
  assert_kiln_error(GEMM(q, ROW, (kiln_trans)5, N, 4, 4, 4, 1.0f, KILN_F32, a,
                         0, 4, b, 0, 4, 0.0f, c, 0, 4),
                    KILN_ERR_INVALID_ARGUMENT,
                    "a.trans 5 is not a valid kiln_trans");
  assert_kiln_error(GEMM(q, ROW, N, (kiln_trans)-1, 4, 4, 4, 1.0f, KILN_F32, a,
                         0, 4, b, 0, 4, 0.0f, c, 0, 4),
                    KILN_ERR_INVALID_ARGUMENT, "b.trans -1");
  assert_kiln_error(GEMM(q, ROW, N, N, 4, 4, 4, 1.0f, KILN_I32, a, 0, 4, b, 0,
                         4, 0.0f, c, 0, 4),
                    KILN_ERR_INVALID_ARGUMENT, "a.dtype i32 is not supported");
  assert_kiln_error(GEMM(q, ROW, N, N, 4, 4, 4, 1.0f, (kiln_dtype)9, a, 0, 4, b,
                         0, 4, 0.0f, c, 0, 4),
                    KILN_ERR_INVALID_ARGUMENT, "a.dtype 9 is not a kiln_dtype");
  /* Leading dimensions below the stored row (column) length. */
  assert_kiln_error(GEMM(q, ROW, N, N, 4, 5, 6, 1.0f, KILN_F32, a, 0, 5, b, 0,
                         5, 0.0f, c, 0, 5),
                    KILN_ERR_INVALID_ARGUMENT,
                    "a.ld 5 is less than 6, the row length of a");
  assert_kiln_error(GEMM(q, ROW, N, T, 4, 5, 6, 1.0f, KILN_F32, a, 0, 6, b, 0,
                         5, 0.0f, c, 0, 5),
                    KILN_ERR_INVALID_ARGUMENT, "b.ld 5 is less than 6");
  assert_kiln_error(GEMM(q, COL, N, N, 4, 5, 6, 1.0f, KILN_F32, a, 0, 4, b, 0,
                         6, 0.0f, c, 0, 3),
                    KILN_ERR_INVALID_ARGUMENT,
                    "c.ld 3 is less than 4, the column length of c");
  /* ld 0 is packed. */
  assert_kiln_ok(GEMM(q, ROW, N, N, 4, 4, 4, 1.0f, KILN_F32, a, 0, 0, b, 0, 0,
                      0.0f, c, 0, 0));
  kiln_event_release(ev);
  ev = NULL;
  /* Out of range: the buffers hold 256 floats. */
  assert_kiln_error(GEMM(q, ROW, N, N, 16, 16, 16, 1.0f, KILN_F32, a, 1, 16, b,
                         0, 16, 0.0f, c, 0, 16),
                    KILN_ERR_OUT_OF_RANGE,
                    "kiln_matmul: a range [offset 1, +256 elements");
  assert_kiln_error(GEMM(q, ROW, N, N, 16, 16, 16, 1.0f, KILN_F32, a, 0, 16, b,
                         0, 17, 0.0f, c, 0, 16),
                    KILN_ERR_OUT_OF_RANGE, "kiln_matmul: b range");
  assert_kiln_error(GEMM(q, ROW, N, N, 16, 16, 16, 1.0f, KILN_F32, a, 0, 16, b,
                         0, 16, 0.0f, c, 300, 16),
                    KILN_ERR_OUT_OF_RANGE,
                    "kiln_matmul: c.offset 300 is beyond c's");
  /* f16 elements are 2 bytes: 16 x 32 of them fit, 16 x 33 do not. */
  assert_kiln_ok(GEMM(q, ROW, N, N, 16, 16, 32, 1.0f, KILN_F16, a, 0, 32, b, 0,
                      16, 0.0f, c, 0, 16));
  kiln_event_release(ev);
  ev = NULL;
  assert_kiln_error(GEMM(q, ROW, N, N, 16, 16, 33, 1.0f, KILN_F16, a, 0, 33, b,
                         0, 16, 0.0f, c, 0, 16),
                    KILN_ERR_OUT_OF_RANGE, "elements of f16");
  /* Dimensions beyond what the kernels index; overflowing extents. */
  assert_kiln_error(GEMM(q, ROW, N, N, (size_t)INT32_MAX + 1, 4, 4, 1.0f,
                         KILN_F32, a, 0, 4, b, 0, 4, 0.0f, c, 0, 4),
                    KILN_ERR_INVALID_SIZE, "m 2147483648 exceeds INT32_MAX");
  assert_kiln_error(GEMM(q, ROW, N, N, 4, 4, (size_t)INT32_MAX + 1, 1.0f,
                         KILN_F32, a, 0, SIZE_MAX / 2, b, 0, 4, 0.0f, c, 0, 4),
                    KILN_ERR_INVALID_SIZE, "k 2147483648");
  assert_kiln_error(GEMM(q, ROW, N, N, 4, 4, 4, 1.0f, KILN_F32, a, 0,
                         SIZE_MAX / 2, b, 0, 4, 0.0f, c, 0, 4),
                    KILN_ERR_INVALID_SIZE, "the extent of a");
  /* C overlapping an input. */
  assert_kiln_error(GEMM(q, ROW, N, N, 4, 4, 4, 1.0f, KILN_F32, a, 0, 4, b, 0,
                         4, 0.0f, a, 8, 4),
                    KILN_ERR_INVALID_ARGUMENT,
                    "c overlaps a in the same buffer");
#undef GEMM
  assert_ptr_equal(ev, NULL); /* unchanged by every failure */

  /* Descriptors that disagree, and fields kiln_matmul does not take. */
  const kiln_matrix ma = {.buffer = a, .rows = 4, .cols = 6, .dtype = KILN_F32};
  const kiln_matrix mb = {.buffer = b, .rows = 6, .cols = 5, .dtype = KILN_F32};
  const kiln_matrix mc = {.buffer = c, .rows = 4, .cols = 5, .dtype = KILN_F32};
  kiln_matrix bad;
#define MM(A, B, C, E) kiln_matmul(q, 1, A, B, C, E, 0, NULL, &ev)
  assert_kiln_error(MM(NULL, &mb, &mc, NULL), KILN_ERR_NULL_POINTER,
                    "kiln_matmul: a is NULL");
  assert_kiln_error(MM(&ma, &mb, NULL, NULL), KILN_ERR_NULL_POINTER,
                    "kiln_matmul: c is NULL");
  bad = mb;
  bad.rows = 7;
  assert_kiln_error(MM(&ma, &bad, &mc, NULL), KILN_ERR_SHAPE_MISMATCH,
                    "the inner dimensions (k) disagree: 6 from op(a)'s "
                    "columns, 7 from op(b)'s rows");
  bad.trans = KILN_TRANS; /* op(b) is 5 x 7 */
  assert_kiln_error(MM(&ma, &bad, &mc, NULL), KILN_ERR_SHAPE_MISMATCH,
                    "6 from op(a)'s columns, 5 from op(b)'s rows");
  bad = mc;
  bad.rows = 3;
  assert_kiln_error(MM(&ma, &mb, &bad, NULL), KILN_ERR_SHAPE_MISMATCH,
                    "the rows of the product (m) disagree: 4 from op(a), 3 "
                    "from c");
  bad = mc;
  bad.cols = 6;
  assert_kiln_error(MM(&ma, &mb, &bad, NULL), KILN_ERR_SHAPE_MISMATCH,
                    "the columns of the product (n) disagree: 5 from op(b), "
                    "6 from c");
  bad = mb;
  bad.dtype = KILN_F16;
  assert_kiln_error(MM(&ma, &bad, &mc, NULL), KILN_ERR_SHAPE_MISMATCH,
                    "a (f32) and b (f16) disagree");
  bad = mc;
  bad.dtype = KILN_BF16;
  assert_kiln_error(MM(&ma, &mb, &bad, NULL), KILN_ERR_INVALID_ARGUMENT,
                    "c.dtype bf16 is not supported");
  bad = mc;
  bad.trans = KILN_TRANS;
  assert_kiln_error(MM(&ma, &mb, &bad, NULL), KILN_ERR_INVALID_ARGUMENT,
                    "c.trans is KILN_TRANS");
  bad = ma;
  bad.ld = 5;
  assert_kiln_error(MM(&bad, &mb, &mc, NULL), KILN_ERR_INVALID_ARGUMENT,
                    "a.ld 5 is less than 6");
  /* A column-major A is checked against its column length. */
  bad = (kiln_matrix){a, 0, 6, 4, 5, 0, KILN_F32, KILN_COL_MAJOR, KILN_TRANS, NULL};
  assert_kiln_error(MM(&bad, &mb, &mc, NULL), KILN_ERR_INVALID_ARGUMENT,
                    "a.ld 5 is less than 6, the column length of a");
  bad.ld = 6; /* op(A) = the 4 x 6 matrix ma describes */
  assert_kiln_ok(MM(&bad, &mb, &mc, NULL));
  kiln_event_release(ev);
  ev = NULL;
  kiln_epilogue e = KILN_EPILOGUE_INIT;
  e.bias = range_of(b, 0, 4, KILN_F32);
  assert_kiln_error(MM(&ma, &mb, &mc, &e), KILN_ERR_SHAPE_MISMATCH,
                    "the bias and the columns of C disagree: 4 from "
                    "epilogue.bias, 5 from c");
  e.bias = range_of(b, 0, 5, KILN_F16);
  assert_kiln_error(MM(&ma, &mb, &mc, &e), KILN_ERR_INVALID_ARGUMENT,
                    "epilogue.bias dtype f16 is not supported");
  e.bias = range_of(NULL, 0, 5, KILN_F32);
  assert_kiln_error(MM(&ma, &mb, &mc, &e), KILN_ERR_NULL_POINTER,
                    "epilogue.bias's buffer is NULL");
#undef MM
  assert_ptr_equal(ev, NULL);

  /* Batched: overlapping C entries, batch too large, ranges of the batch. */
#define GEMMB(qq, L, TA, TB, M, N_, K, al, dt, A, ao, lda, sa, B, bo, ldb, sb, \
              be, C, co, ldc, sc, batch)                                       \
  blas_like(qq, L, TA, TB, M, N_, K, al, dt, A, ao, lda, sa, B, bo, ldb, sb,   \
            be, C, co, ldc, sc, batch, NULL, 0, NONE, NULL)
  assert_kiln_error(GEMMB(q, ROW, N, N, 4, 4, 4, 1.0f, KILN_F32, a, 0, 4, 16, b,
                          0, 4, 16, 0.0f, c, 0, 4, 15, 2),
                    KILN_ERR_INVALID_ARGUMENT,
                    "c.batch_stride 15 is less than the 16 elements");
  assert_kiln_error(GEMMB(q, ROW, N, N, 4, 4, 4, 1.0f, KILN_F32, a, 0, 4, 16, b,
                          0, 4, 16, 0.0f, c, 0, 4, 16, 17),
                    KILN_ERR_OUT_OF_RANGE, "kiln_matmul: a range");
  assert_kiln_error(GEMMB(q, ROW, N, N, 4, 4, 4, 1.0f, KILN_F32, a, 0, 4, 0, b,
                          0, 4, 0, 0.0f, c, 0, 4, 16, (size_t)UINT32_MAX + 1),
                    KILN_ERR_INVALID_SIZE,
                    "batch 4294967296 exceeds UINT32_MAX");
  assert_kiln_error(GEMMB(q, ROW, N, N, 4, 4, 4, 1.0f, KILN_F32, a, 0, 4, 16, b,
                          0, 4, SIZE_MAX / 2, 0.0f, c, 0, 4, 16, 3),
                    KILN_ERR_INVALID_SIZE, "b.batch_stride");
#undef GEMMB

  /* The epilogue: kiln_matmul's checks, plus the activation and the
   * bias. */
#define GEMMX(qq, L, TA, TB, M, N_, K, al, dt, A, ao, lda, B, bo, ldb, be, C,  \
              co, ldc, bias, bias_off, act)                                    \
  blas_like(qq, L, TA, TB, M, N_, K, al, dt, A, ao, lda, 0, B, bo, ldb, 0, be, \
            C, co, ldc, 0, 1, bias, bias_off, act, NULL)
  assert_kiln_error(GEMMX(NULL, ROW, N, N, 4, 4, 4, 1.0f, KILN_F32, a, 0, 4, b,
                          0, 4, 0.0f, c, 0, 4, NULL, 0, NONE),
                    KILN_ERR_NULL_POINTER, "kiln_matmul: queue is NULL");
  assert_kiln_error(GEMMX(q, ROW, N, N, 4, 4, 4, 1.0f, KILN_F32, a, 0, 3, b, 0,
                          4, 0.0f, c, 0, 4, NULL, 0, RELU),
                    KILN_ERR_INVALID_ARGUMENT,
                    "kiln_matmul: a.ld 3 is less than 4");
  assert_kiln_error(GEMMX(q, ROW, N, N, 4, 4, 4, 1.0f, KILN_F32, a, 0, 4, b, 0,
                          4, 0.0f, c, 0, 4, NULL, 0, (kiln_activation)3),
                    KILN_ERR_INVALID_ARGUMENT,
                    "kiln_matmul: epilogue.activation 3 is not a valid "
                    "kiln_activation");
  assert_kiln_error(GEMMX(q, ROW, N, N, 4, 4, 4, 1.0f, KILN_F32, a, 0, 4, b, 0,
                          4, 0.0f, c, 0, 4, NULL, 0, (kiln_activation)-1),
                    KILN_ERR_INVALID_ARGUMENT, "activation -1");
  /* The bias holds n = 16 floats from its offset: 256 - 241 = 15 do not. */
  assert_kiln_error(GEMMX(q, ROW, N, N, 16, 16, 16, 1.0f, KILN_F32, a, 0, 16, b,
                          0, 16, 0.0f, c, 0, 16, b, 241, GELU),
                    KILN_ERR_OUT_OF_RANGE, "kiln_matmul: bias");
  assert_kiln_ok(GEMMX(q, ROW, N, N, 16, 16, 16, 1.0f, KILN_F32, a, 0, 16, b, 0,
                       16, 0.0f, c, 0, 16, b, 240, GELU));
  /* A bias inside C is read while C is written. */
  assert_kiln_error(GEMMX(q, ROW, N, N, 4, 4, 4, 1.0f, KILN_F32, a, 0, 4, b, 0,
                          4, 0.0f, c, 0, 4, c, 10, RELU),
                    KILN_ERR_INVALID_ARGUMENT, "kiln_matmul: bias");
  assert_kiln_ok(GEMMX(q, ROW, N, N, 4, 4, 4, 1.0f, KILN_F32, a, 0, 4, b, 0, 4,
                       0.0f, c, 0, 4, c, 16, RELU));
#undef GEMMX
  assert_kiln_ok(kiln_queue_finish(q));

  /* Zero sizes are no-ops whose out event still completes. */
  ev = NULL;
  assert_kiln_ok(kiln_matmul(
      q, 1, matrix_of(a, 0, 0, 4, KILN_F32), matrix_of(b, 0, 4, 4, KILN_F32),
      matrix_of(c, 0, 0, 4, KILN_F32), NULL, 0, NULL, &ev));
  assert_non_null(ev);
  assert_kiln_ok(kiln_event_wait(ev));
  kiln_event_release(ev);
  ev = NULL;
  assert_kiln_ok(kiln_matmul(q, 0, &ma, &mb, &mc, NULL, 0, NULL, &ev));
  assert_non_null(ev);
  assert_kiln_ok(kiln_event_wait(ev));
  kiln_event_release(ev);

  /* A buffer of another context. */
  kiln_context *other = NULL;
  kiln_test_open(0, &other, NULL);
  kiln_buffer *foreign = util_buffer(other, 256, 0);
  bad = ma;
  bad.buffer = foreign;
  assert_kiln_error(kiln_matmul(q, 1, &bad, &mb, &mc, NULL, 0, NULL, NULL),
                    KILN_ERR_WRONG_CONTEXT, "a belongs to a different context");
  assert_kiln_ok(kiln_buffer_destroy(foreign));
  assert_kiln_ok(kiln_context_destroy(other));

  assert_kiln_ok(kiln_buffer_destroy(a));
  assert_kiln_ok(kiln_buffer_destroy(b));
  assert_kiln_ok(kiln_buffer_destroy(c));
  kiln_test_close(ctx, q);
}

/* The workspace is reused: a second GEMM of the same size allocates
 * nothing, a smaller one neither. */
static void test_workspace_reuse(void **state) {
  (void)state;
  FOR_EACH_TEST_DEVICE(d) {
    kiln_context *ctx = NULL;
    kiln_queue *q = NULL;
    kiln_test_open(d, &ctx, &q);
    static const struct gcase big =
        GC(ROW, N, N, 100, 90, 80, 1.0f, 0.0f, KILN_F32);
    static const struct gcase small =
        GC(ROW, N, N, 30, 20, 10, 1.0f, 0.0f, KILN_F32);
    run_case(ctx, q, &big, "workspace: first");
    size_t bytes = 0, now = 0;
    cl_mem ws = kiln__op_workspace_held(q, &bytes);
    run_case(ctx, q, &big, "workspace: again");
    run_case(ctx, q, &small, "workspace: smaller");
    assert_ptr_equal(kiln__op_workspace_held(q, &now), ws);
    assert_int_equal(now, bytes);
    kiln_test_close(ctx, q);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_bad_input),
      cmocka_unit_test(test_sizes),
      cmocka_unit_test(test_transposes_layouts),
      cmocka_unit_test(test_ld_offsets_scalars),
      cmocka_unit_test(test_batched),
      cmocka_unit_test(test_half_inputs),
      cmocka_unit_test(test_workspace_chunks),
      cmocka_unit_test(test_cpu_tiles),
      cmocka_unit_test(test_workspace_reuse),
      cmocka_unit_test(test_bias_act),
      cmocka_unit_test(test_bias_act_chunks),
      cmocka_unit_test(test_large),
  };
  /* KILN_TEST_FILTER=test_sizes runs the matching tests only (cmocka
   * wildcards). */
  const char *filter = getenv("KILN_TEST_FILTER");
  if (filter != NULL && filter[0] != '\0')
    cmocka_set_test_filter(filter);
  return KILN_TEST_RUN("op_gemm", tests, true);
}
