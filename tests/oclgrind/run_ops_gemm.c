/* Transpose and GEMM for run_ops.c's groups "transpose", "gemm",
 * "gemm_space" and "gemm_mma": kiln_transpose and kiln_matmul (layouts,
 * transposes, dtypes, batches, k = 0, the CPU family's unpacked kernel, a
 * packed A) on small awkward shapes at odd offsets in sentinel-framed
 * buffers against host references, and samples of the GPU family's GEMM
 * space and of the emulated matrix-unit kernel. The thorough checks are
 * tests/test_op_transpose.c, test_op_gemm.c and test_op_gemm_packed.c. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "run_ops_gemm.h"
#include "tune/tune.h"

void run_transpose(kiln_dtype dt, size_t rows, size_t cols) {
  size_t ldx = cols + 2, ldy = rows + 1;
  void *xh;
  kiln_buffer *x = input(dt, 0, rows * ldx, 101, &xh), *y = output(dt, cols * ldy);
  const kiln_matrix xm = {
      .buffer = x, .rows = rows, .cols = cols, .ld = ldx, .dtype = dt};
  const kiln_matrix ym = {
      .buffer = y, .rows = cols, .cols = rows, .ld = ldy, .dtype = dt};
  CHECK_OK(kiln_transpose(q, &xm, &ym, 0, NULL, NULL));
  void *got = download(y, dt, 0, cols * ldy);
  size_t bad = 0;
  for (size_t c = 0; c < cols; c++)
    for (size_t r = 0; r < rows; r++)
      bad += memcmp((char *)got + (c * ldy + r) * dsize(dt),
                    (char *)xh + (r * ldx + c) * dsize(dt), dsize(dt)) != 0;
  checks++;
  if (bad) {
    fprintf(stderr, "FAIL transpose %s %zux%zu: %zu elements differ\n",
            kiln_dtype_name(dt), rows, cols, bad);
    failures++;
  } else {
    printf("ok   transpose %s %zux%zu\n", kiln_dtype_name(dt), rows, cols);
  }
  free(got), free(xh), kiln_buffer_destroy(x), kiln_buffer_destroy(y);
}

/* Element (i, j) of a matrix stored in layout with leading dimension ld. */
static size_t at(kiln_layout layout, size_t i, size_t j, size_t ld) {
  return layout == KILN_ROW_MAJOR ? i * ld + j : j * ld + i;
}

/* Whether run_gemm passes A packed (kiln_pack): the pack kernels, the
 * plain copy, and the register tile reading the packed panels. */
static bool gemm_pack_a;
/* Whether run_gemm's A and B start at offsets of 8 with leading dimensions
 * multiples of 8 (gemm_mma's staging then loads aligned vectors). */
static bool gemm_aligned;

static void run_gemm(kiln_layout layout, kiln_trans ta, kiln_trans tb,
                     kiln_dtype dt, size_t m, size_t n, size_t k, float beta,
                     size_t batch) {
  const float alpha = 1.5f;
  /* Stored shapes: A is m x k (k x m transposed), B k x n (n x k). */
  size_t ar = ta ? k : m, ac = ta ? m : k, br = tb ? n : k, bc = tb ? k : n;
  size_t lda = (layout == KILN_ROW_MAJOR ? ac : ar) + 1;
  size_t ldb = (layout == KILN_ROW_MAJOR ? bc : br) + 2;
  const size_t a_off = gemm_aligned ? 8 : 2, b_off = gemm_aligned ? 8 : 1;
  if (gemm_aligned) {
    lda = (lda + 7) / 8 * 8;
    ldb = (ldb + 7) / 8 * 8;
  }
  size_t ldc = (layout == KILN_ROW_MAJOR ? n : m) + 1;
  size_t a_ext = (layout == KILN_ROW_MAJOR ? ar : ac) * lda;
  size_t b_ext = (layout == KILN_ROW_MAJOR ? br : bc) * ldb;
  size_t c_ext = (layout == KILN_ROW_MAJOR ? m : n) * ldc;
  /* Batched: one A shared by every entry (stride 0), B and C strided. */
  void *ah, *bh, *ch = NULL;
  kiln_buffer *a = input(dt, a_off, a_ext, 111, &ah);
  kiln_buffer *b = input(dt, b_off, b_ext * batch, 112, &bh);
  kiln_buffer *c = beta != 0 ? input(KILN_F32, 3, c_ext * batch, 113, &ch)
                             : output(KILN_F32, c_ext * batch + 3);
  const kiln_matrix ma = {a, a_off, ar, ac, lda, 0, dt, layout, ta, NULL};
  const kiln_matrix mb = {b, b_off, br, bc, ldb, b_ext, dt, layout, tb, NULL};
  const kiln_matrix mc = {
      c, 3, m, n, ldc, c_ext, KILN_F32, layout, KILN_NO_TRANS, NULL};
  const kiln_epilogue epi = {alpha, beta, NULL, KILN_ACT_NONE};
  kiln_packed *packed = NULL;
  kiln_matrix pa = ma;
  if (gemm_pack_a) {
    CHECK_OK(kiln_packed_create(ctx, KILN_OPERAND_A, &ma, &packed));
    CHECK_OK(kiln_pack(q, &ma, packed, 0, NULL, NULL));
    CHECK_OK(kiln_packed_get_matrix(packed, &pa));
  }
  CHECK_OK(kiln_matmul(q, batch, &pa, &mb, &mc, &epi, 0, NULL, NULL));
  float *got = download(c, KILN_F32, 3, c_ext * batch);
  for (size_t e = 0; e < batch; e++)
    for (size_t i = 0; i < m; i++)
      for (size_t j = 0; j < n; j++) {
        double sum = 0, mag = 0;
        for (size_t p = 0; p < k; p++) {
          double av = load(dt, ah, ta ? at(layout, p, i, lda) : at(layout, i, p, lda));
          double bv = load(dt, bh, e * b_ext + (tb ? at(layout, j, p, ldb)
                                                   : at(layout, p, j, ldb)));
          sum += av * bv;
          mag += fabs(av * bv);
        }
        size_t ci = e * c_ext + at(layout, i, j, ldc);
        double want = alpha * sum + (beta != 0 ? beta * ((float *)ch)[ci] : 0);
        double tol = 2.0 * (double)(k + 2) * 0x1p-24 * (fabs(alpha) * mag +
                     (beta != 0 ? fabs(beta * ((float *)ch)[ci]) : 0)) + 1e-30;
        checks++;
        if (!(fabs(got[ci] - want) <= tol)) {
          fprintf(stderr, "FAIL gemm %s %c%c %s %zux%zux%zu beta %g batch %zu "
                          "at [%zu](%zu,%zu): got %.9g want %.9g\n",
                  layout == KILN_ROW_MAJOR ? "row" : "col", ta ? 'T' : 'N',
                  tb ? 'T' : 'N', kiln_dtype_name(dt), m, n, k, (double)beta,
                  batch, e, i, j, (double)got[ci], want);
          failures++;
          goto done;
        }
      }
  printf("ok   gemm %s %c%c %s %zux%zux%zu beta %g batch %zu%s%s\n",
         layout == KILN_ROW_MAJOR ? "row" : "col", ta ? 'T' : 'N',
         tb ? 'T' : 'N', kiln_dtype_name(dt), m, n, k, (double)beta, batch,
         gemm_pack_a ? " (a packed)" : "", gemm_aligned ? " (aligned)" : "");
done:
  CHECK_OK(kiln_packed_destroy(packed));
  free(got), free(ah), free(bh), free(ch);
  kiln_buffer_destroy(a), kiln_buffer_destroy(b), kiln_buffer_destroy(c);
}

/* The group "gemm". */
void run_gemm_group(void) {
  run_gemm(KILN_ROW_MAJOR, KILN_NO_TRANS, KILN_NO_TRANS, KILN_F32, 17, 13, 19, 0.5f, 1);
  run_gemm(KILN_COL_MAJOR, KILN_TRANS, KILN_NO_TRANS, KILN_F32, 9, 21, 11, 0.0f, 1);
  run_gemm(KILN_ROW_MAJOR, KILN_NO_TRANS, KILN_TRANS, KILN_F16, 6, 10, 33, 0.0f, 1);
  run_gemm(KILN_COL_MAJOR, KILN_TRANS, KILN_TRANS, KILN_BF16, 5, 7, 3, 1.0f, 1);
  run_gemm(KILN_ROW_MAJOR, KILN_NO_TRANS, KILN_NO_TRANS, KILN_F32, 7, 5, 6, 0.0f, 3);
  /* k = 0: C = beta * C, reading neither A nor B. */
  run_gemm(KILN_COL_MAJOR, KILN_NO_TRANS, KILN_NO_TRANS, KILN_F32, 6, 9, 0, 0.5f, 1);
  /* The CPU family's unpacked kernel (few rows or columns): op(B) along
   * k with a column tail and a k tail, along n with a partial column
   * tile, and a small n computed as C^T, each way. */
  run_gemm(KILN_ROW_MAJOR, KILN_NO_TRANS, KILN_TRANS, KILN_F32, 3, 37, 40, 0.5f, 1);
  run_gemm(KILN_ROW_MAJOR, KILN_NO_TRANS, KILN_NO_TRANS, KILN_BF16, 5, 40, 20, 0.0f, 1);
  run_gemm(KILN_ROW_MAJOR, KILN_NO_TRANS, KILN_TRANS, KILN_F32, 37, 3, 70, 1.0f, 1);
  run_gemm(KILN_ROW_MAJOR, KILN_TRANS, KILN_NO_TRANS, KILN_F16, 37, 3, 20, 0.0f, 2);
  /* Several register tiles and blocks in each direction. */
  run_gemm(KILN_ROW_MAJOR, KILN_NO_TRANS, KILN_NO_TRANS, KILN_F32, 45, 70, 130, 1.0f, 1);
  /* A packed (kiln_pack): its panels on the CPU family (row-major C,
   * shared by a batch), its plain copy elsewhere. */
  gemm_pack_a = true;
  run_gemm(KILN_ROW_MAJOR, KILN_TRANS, KILN_NO_TRANS, KILN_F32, 17, 13, 19, 0.5f, 2);
  run_gemm(KILN_COL_MAJOR, KILN_NO_TRANS, KILN_NO_TRANS, KILN_F16, 9, 21, 11, 0.0f, 1);
  gemm_pack_a = false;
}

/* A sample of GEMM's GPU-family space (kiln/kiln_tune.h) under the same
 * checks: staged and unstaged operands, vector loads, padding, double
 * buffering, k-unrolling, both output stride layouts, and the direct
 * kernel. Only where the GPU family runs (KILN_PROFILE=generic in run.sh):
 * the CPU family runs its own kernel (space gemm_cpu). */
void run_gemm_space(void) {
  static const char *const points[] = {
      "MWG=16 NWG=16 KWG=8 MDIMC=8 NDIMC=8 VWM=2 VWN=2 SA=1 SB=1 PADA=0 "
      "PADB=1 DB=1 KWI=2 STRM=0 STRN=1 DWG=8 DWI=1 SWITCH=0",
      "MWG=32 NWG=16 KWG=16 MDIMC=8 NDIMC=8 VWM=4 VWN=1 SA=1 SB=0 PADA=1 "
      "PADB=0 DB=0 KWI=4 STRM=1 STRN=0 DWG=8 DWI=2 SWITCH=0",
      "MWG=16 NWG=64 KWG=8 MDIMC=8 NDIMC=8 VWM=1 VWN=8 SA=0 SB=1 PADA=0 "
      "PADB=0 DB=1 KWI=8 STRM=0 STRN=0 DWG=16 DWI=1 SWITCH=0",
      "MWG=16 NWG=16 KWG=8 MDIMC=8 NDIMC=8 VWM=2 VWN=2 SA=1 SB=1 PADA=0 "
      "PADB=1 DB=1 KWI=2 STRM=0 STRN=1 DWG=8 DWI=4 SWITCH=512",
  };
  kiln_tuning_info info;
  CHECK_OK(kiln_tuning_get_info(ctx, "gemm", &info));
  if (info.params[0] == '\0') {
    printf("skip gemm_space: the CPU family runs its own kernel\n");
    return;
  }
  for (size_t i = 0; i < sizeof points / sizeof points[0]; i++) {
    char why[512];
    if (kiln_tuning_check(ctx, "gemm", points[i], why, sizeof why) !=
        KILN_OK) {
      printf("skip gemm_space point %zu: %s\n", i, why);
      continue;
    }
    CHECK_OK(kiln_tuning_set(ctx, "gemm", points[i]));
    printf("# gemm_space point %zu: %s\n", i, points[i]);
    run_gemm(KILN_ROW_MAJOR, KILN_NO_TRANS, KILN_NO_TRANS, KILN_F32, 17, 13,
             19, 0.5f, 1);
    run_gemm(KILN_COL_MAJOR, KILN_TRANS, KILN_TRANS, KILN_BF16, 9, 21, 11,
             0.0f, 2);
  }
  CHECK_OK(kiln_tuning_set(ctx, "gemm", NULL));
}

/* The matrix-unit GEMM (cl_kernels/gemm_mma.cl) with its instructions
 * emulated (KILN_MMA_EMULATE: a test-only switch of the runtime), so that
 * Oclgrind checks its staging, fragment index arithmetic, exchanges through
 * __local memory and epilogue, on two points (one stage of k 16 with 32 x
 * 32 blocks of 16 x 16 warp tiles; the default, double buffered), with
 * operands that take the staging's element path and aligned ones that take
 * its vector path (along k and along the rows, vectors crossing the
 * edges); NVIDIA's form on both points, and on the first AMD's two and
 * Intel's (sub-groups of 8 and 16), each on a context of the same device
 * with the vendor's profile forced (its build options select the form), in
 * place of the group's context while it runs. Only where the GPU family
 * runs, like gemm_space. */
void run_gemm_mma(void) {
  static const unsigned points[][6] = {{32, 32, 16, 16, 16, 1},
                                       {64, 64, 32, 32, 32, 2}};
  kiln_tuning_info info;
  CHECK_OK(kiln_tuning_get_info(ctx, "gemm", &info));
  if (info.params[0] == '\0') {
    printf("skip gemm_mma: the CPU family runs its own kernel\n");
    return;
  }
  kiln__gemm_mma_emulate(true);
  for (size_t i = 0; i < sizeof points / sizeof points[0]; i++) {
    struct kiln__point p = {{0}};
    for (size_t j = 0; j < 6; j++)
      p.v[j] = points[i][j];
    kiln__space_set_override(&kiln__gemm_mma_space, &p);
    printf("# gemm_mma point %zu\n", i);
    run_gemm(KILN_ROW_MAJOR, KILN_NO_TRANS, KILN_NO_TRANS, KILN_F16, 17, 13,
             19, 0.5f, 1);
    run_gemm(KILN_COL_MAJOR, KILN_TRANS, KILN_TRANS, KILN_BF16, 9, 21, 35,
             0.0f, 2);
    run_gemm(KILN_ROW_MAJOR, KILN_TRANS, KILN_NO_TRANS, KILN_BF16, 33, 40, 20,
             1.0f, 1);
    gemm_aligned = true;
    run_gemm(KILN_ROW_MAJOR, KILN_NO_TRANS, KILN_NO_TRANS, KILN_F16, 17, 13,
             19, 0.5f, 1);
    run_gemm(KILN_COL_MAJOR, KILN_TRANS, KILN_TRANS, KILN_BF16, 9, 21, 35,
             0.0f, 2);
    gemm_aligned = false;
  }
  static const struct {
    const char *profile, *form;
    bool wmma;
    unsigned sub_group;
  } vendors[] = {{"amd", "AMD's MFMA", false, 16},
                 {"amd", "AMD's WMMA", true, 16},
                 {"intel", "Intel's DPAS, 8 lanes", false, 8},
                 {"intel", "Intel's DPAS, 16 lanes", false, 16}};
  kiln_context *const own_ctx = ctx;
  kiln_queue *const own_q = q;
  struct kiln__point p = {{0}};
  for (size_t j = 0; j < 6; j++)
    p.v[j] = points[0][j];
  kiln__space_set_override(&kiln__gemm_mma_space, &p);
  for (size_t v = 0; v < sizeof vendors / sizeof vendors[0]; v++) {
    const kiln_context_options opts = {.profile = vendors[v].profile};
    CHECK_OK(kiln_context_create(own_ctx->device, &opts, &ctx));
    CHECK_OK(kiln_queue_create(ctx, 0, &q));
    kiln__gemm_mma_emulate_wmma(vendors[v].wmma);
    kiln__gemm_mma_emulate_dpas(vendors[v].sub_group);
    printf("# gemm_mma point 0, %s form\n", vendors[v].form);
    CHECK_OK(kiln_tuning_get_info(ctx, "gemm_mma", &info));
    checks++;
    if (strcmp(info.used, "yes, for f16 and bf16 GEMM") != 0) {
      fprintf(stderr, "FAIL gemm_mma %s: not run: %s\n", vendors[v].form,
              info.used);
      failures++;
    }
    run_gemm(KILN_ROW_MAJOR, KILN_TRANS, KILN_NO_TRANS, KILN_F16, 33, 40, 20,
             1.0f, 1);
    gemm_aligned = true;
    run_gemm(KILN_COL_MAJOR, KILN_TRANS, KILN_TRANS, KILN_BF16, 9, 21, 35,
             0.0f, 2);
    gemm_aligned = false;
    CHECK_OK(kiln_queue_destroy(q));
    CHECK_OK(kiln_context_destroy(ctx));
    ctx = own_ctx;
    q = own_q;
  }
  kiln__gemm_mma_emulate_wmma(false);
  kiln__gemm_mma_emulate_dpas(16);
  kiln__space_set_override(&kiln__gemm_mma_space, NULL);
  kiln__gemm_mma_emulate(false);
}
