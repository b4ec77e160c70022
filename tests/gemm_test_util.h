/* The GEMM correctness checks shared by test_op_gemm.c and
 * test_gemm_space.c: a case description, the float64 host reference and
 * its tolerance (derived in test_op_gemm.c's opening comment; the
 * product itself from gemm_ref.h), and the
 * runner over every test device and both kernel families. Static functions
 * in a header, like op_test_util.h: each test program includes it once. */
#ifndef KILN_GEMM_TEST_UTIL_H
#define KILN_GEMM_TEST_UTIL_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "harness.h"
#include "core/internal.h"
#include "gemm_ref.h"
#include "op_test_util.h"
#include "ops/ops_gemm.h"

struct gcase {
  kiln_layout layout;
  kiln_trans ta, tb;
  size_t m, n, k;
  float alpha, beta;
  kiln_dtype dtype;
  size_t lda_pad, ldb_pad, ldc_pad; /* added to the minimum */
  size_t a_off, b_off, c_off;
  size_t batch, stride_pad; /* gap between batch entries */
  bool share_a, share_b;    /* stride_a = 0, stride_b = 0 */
  size_t row_step;          /* check every row_step-th row (0: 1) */
  bool nan_a;               /* fill A with NaN (alpha == 0 cases) */
  /* The epilogue: act, and a bias at bias_off when bias is set. epi
   * passes an epilogue even with neither (else alpha 1, beta 0 pass
   * NULL). */
  bool epi, bias;
  bool mix; /* A and B described in the layout other than C's */
  kiln_activation act;
  size_t bias_off;
};

/* GELU's tanh form in double (the reference of KILN_ACT_GELU). */
static double gelu_ref(double x) {
  return 0.5 * x *
         (1.0 + tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)));
}

/* Stored shape of a matrix and its minimum leading dimension. */
static size_t min_ld(kiln_layout layout, size_t rows, size_t cols) {
  size_t len = layout == KILN_ROW_MAJOR ? cols : rows;
  return len > 1 ? len : 1;
}
static size_t extent(kiln_layout layout, size_t rows, size_t cols, size_t ld) {
  if (rows == 0 || cols == 0)
    return 0;
  return layout == KILN_ROW_MAJOR ? (rows - 1) * ld + cols
                                  : (cols - 1) * ld + rows;
}

static void run_case(kiln_context *ctx, kiln_queue *q, const struct gcase *gc,
                     const char *tag) {
  const kiln_layout L = gc->layout;
  const bool ta = gc->ta == KILN_TRANS, tb = gc->tb == KILN_TRANS;
  const size_t m = gc->m, n = gc->n, k = gc->k;
  const size_t ar = ta ? k : m, ac = ta ? m : k;
  const size_t br = tb ? n : k, bc = tb ? k : n;
  const size_t lda = min_ld(L, ar, ac) + gc->lda_pad;
  const size_t ldb = min_ld(L, br, bc) + gc->ldb_pad;
  const size_t ldc = min_ld(L, m, n) + gc->ldc_pad;
  const size_t batch = gc->batch ? gc->batch : 1;
  const size_t a_ext = extent(L, ar, ac, lda), b_ext = extent(L, br, bc, ldb),
               c_ext = extent(L, m, n, ldc);
  const size_t stride_a = gc->share_a ? 0 : a_ext + gc->stride_pad;
  const size_t stride_b = gc->share_b ? 0 : b_ext + gc->stride_pad;
  const size_t stride_c = c_ext + gc->stride_pad;
  const size_t a_count = gc->a_off + (batch - 1) * stride_a + a_ext + 3;
  const size_t b_count = gc->b_off + (batch - 1) * stride_b + b_ext + 3;
  const size_t c_count = gc->c_off + (batch - 1) * stride_c + c_ext + 3;

  void *a = util_random(gc->dtype, a_count, -1.0, 1.0, 11u + (uint32_t)m);
  void *b = util_random(gc->dtype, b_count, -1.0, 1.0, 23u + (uint32_t)n);
  if (gc->nan_a)
    for (size_t i = 0; i < a_count; i++)
      util_set(gc->dtype, a, i, NAN);
  float *c0 = util_random(KILN_F32, c_count, -1.0, 1.0, 37u + (uint32_t)k);
  /* beta == 0 must not read C: NaN everywhere inside C would leak. */
  if (gc->beta == 0.0f)
    for (size_t i = 0; i < c_count; i++)
      c0[i] = NAN;
  kiln_buffer *da = util_upload(ctx, q, gc->dtype, a, a_count);
  kiln_buffer *db = util_upload(ctx, q, gc->dtype, b, b_count);
  kiln_buffer *dc = util_upload(ctx, q, KILN_F32, c0, c_count);
  const size_t bias_count = gc->bias_off + n + 3;
  float *bias = util_random(KILN_F32, bias_count, -2.0, 2.0, 41u + (uint32_t)n);
  kiln_buffer *dbias = util_upload(ctx, q, KILN_F32, bias, bias_count);

  /* The descriptors. With mix, A and B are described in the other layout
   * than C: the same memory read as the stored transpose, trans flipped. */
  kiln_matrix ma = {da, gc->a_off, ar, ac, lda, stride_a, gc->dtype, L, gc->ta, NULL};
  kiln_matrix mb = {db, gc->b_off, br, bc, ldb, stride_b, gc->dtype, L, gc->tb, NULL};
  const kiln_matrix mc = {dc, gc->c_off,    m, n, ldc, stride_c, KILN_F32,
                          L,  KILN_NO_TRANS, NULL};
  if (gc->mix) {
    kiln_matrix *ops[2] = {&ma, &mb};
    for (int i = 0; i < 2; i++) {
      const size_t r = ops[i]->rows;
      ops[i]->rows = ops[i]->cols;
      ops[i]->cols = r;
      ops[i]->layout = L == KILN_ROW_MAJOR ? KILN_COL_MAJOR : KILN_ROW_MAJOR;
      ops[i]->trans = ops[i]->trans == KILN_TRANS ? KILN_NO_TRANS : KILN_TRANS;
    }
  }
  const kiln_range bias_range = {dbias, gc->bias_off, n, KILN_F32};
  const kiln_epilogue e = {gc->alpha, gc->beta, gc->bias ? &bias_range : NULL,
                           gc->act};
  /* A NULL epilogue is alpha 1, beta 0 and nothing else. */
  const bool plain = !gc->epi && gc->alpha == 1.0f && gc->beta == 0.0f;
  kiln_event *ev = NULL;
  assert_kiln_ok(
      kiln_matmul(q, batch, &ma, &mb, &mc, plain ? NULL : &e, 0, NULL, &ev));
  assert_non_null(ev);
  assert_kiln_ok(kiln_event_wait(ev));
  kiln_event_release(ev);
  float *c = util_download(q, dc, KILN_F32, c_count);

  /* Everything outside the C matrices is untouched (bitwise: NaN too). */
  bool *inside = calloc(c_count, 1);
  assert_non_null(inside);
  for (size_t t = 0; t < batch; t++)
    for (size_t i = 0; i < m; i++)
      for (size_t j = 0; j < n; j++)
        inside[gc->c_off + t * stride_c + gemm_ref_index(L, i, j, ldc)] = true;
  for (size_t i = 0; i < c_count; i++)
    if (!inside[i] && memcmp(&c[i], &c0[i], 4) != 0)
      fail_msg("%s: element %zu outside C changed from %g to %g", tag, i,
               (double)c0[i], (double)c[i]);
  free(inside);

  const double u = ldexp(1.0, -24);
  const size_t step = gc->row_step ? gc->row_step : 1;
  double *ref = malloc((n ? n : 1) * sizeof *ref);
  double *mag = malloc((n ? n : 1) * sizeof *mag);
  assert_non_null(ref);
  assert_non_null(mag);
  for (size_t t = 0; t < batch; t++) {
    const size_t co = gc->c_off + t * stride_c;
    const struct gemm_ref_operand ra = {gc->dtype, a,   gc->a_off + t * stride_a,
                                        L,         lda, gc->ta};
    const struct gemm_ref_operand rb = {gc->dtype, b,   gc->b_off + t * stride_b,
                                        L,         ldb, gc->tb};
    /* Rows 0, step, 2 step, ... and always the last one. */
    for (size_t i = 0; i < m;
         i = i + step < m || i == m - 1 ? i + step : m - 1) {
      /* alpha == 0 reads neither (A may be NaN). */
      gemm_ref_row(&ra, &rb, i, n, gc->alpha != 0.0f ? k : 0, ref, mag);
      for (size_t j = 0; j < n; j++) {
        size_t ci = co + gemm_ref_index(L, i, j, ldc);
        double want = gc->alpha * ref[j];
        double bound = fabs(gc->alpha) * mag[j];
        if (gc->beta != 0.0f) {
          want += gc->beta * (double)c0[ci];
          bound += fabs(gc->beta) * fabs((double)c0[ci]);
        }
        if (gc->bias) {
          want += (double)bias[gc->bias_off + j];
          bound += fabs((double)bias[gc->bias_off + j]);
        }
        double tol = 2.0 * (double)(k + 4) * u * bound + 1e-30;
        if (gc->act == KILN_ACT_RELU) {
          want = want < 0.0 ? 0.0 : want;
        } else if (gc->act == KILN_ACT_GELU) {
          tol = 1.13 * tol + 16.0 * u * (fabs(want) + 1.0);
          want = gelu_ref(want);
        }
        UTIL_CLOSE(c[ci], want, tol, "%.80s: batch %zu C[%zu][%zu]", tag, t, i,
                   j);
      }
      if (i == m - 1)
        break;
    }
  }
  free(ref);
  free(mag);
  free(a);
  free(b);
  free(c0);
  free(c);
  free(bias);
  assert_kiln_ok(kiln_buffer_destroy(dbias));
  assert_kiln_ok(kiln_buffer_destroy(da));
  assert_kiln_ok(kiln_buffer_destroy(db));
  assert_kiln_ok(kiln_buffer_destroy(dc));
}

/* Run cases on every device, with its own profile and (when other is set)
 * with the other family forced. */
static void run_all(const struct gcase *cases, size_t count, bool other) {
  FOR_EACH_TEST_DEVICE(d) {
    for (int pass = 0; pass < (other ? 2 : 1); pass++) {
      kiln_context *ctx = NULL;
      kiln_queue *q = NULL;
      kiln_test_open_family(d, pass == 1, &ctx, &q);
      const char *profile = kiln_context_get_profile(ctx);
      for (size_t i = 0; i < count; i++) {
        const struct gcase *g = &cases[i];
        char tag[200];
        snprintf(tag, sizeof tag,
                 "device %zu profile %s: %s %c%c m %zu n %zu k %zu %s alpha "
                 "%g beta %g batch %zu",
                 d, profile, g->layout == KILN_ROW_MAJOR ? "row" : "col",
                 g->ta ? 'T' : 'N', g->tb ? 'T' : 'N', g->m, g->n, g->k,
                 kiln_dtype_name(g->dtype), (double)g->alpha, (double)g->beta,
                 g->batch);
        run_case(ctx, q, g, tag);
      }
      kiln_test_close(ctx, q);
    }
  }
}

/* Run cases on every test device whose own profile is of the CPU family
 * (tests of that family's knobs, forced through the test hooks), tagging
 * failures with what. Elsewhere the forced CPU family of run_all covers
 * the same code, and each knob setting is a program of its own, which
 * Mesa's llvmpipe takes 20-45 s to compile. */
static inline void run_cpu_family(const struct gcase *cases, size_t count,
                                  const char *what) {
  FOR_EACH_TEST_DEVICE(d) {
    kiln_context *ctx = NULL;
    kiln_queue *q = NULL;
    kiln_test_open(d, &ctx, &q);
    if (ctx->backend->tuning->family == KILN_FAMILY_CPU)
      for (size_t i = 0; i < count; i++) {
        char tag[160];
        snprintf(tag, sizeof tag, "device %zu %s: case %zu", d, what, i);
        run_case(ctx, q, &cases[i], tag);
      }
    kiln_test_close(ctx, q);
  }
}

/* A case: the leading fields positionally (the dtype last of them), the
 * rest designated. */
#define GC(L, A, B, M, N_, K, AL, BE, ...)                                     \
  {                                                                            \
    .layout = L, .ta = A, .tb = B, .m = M, .n = N_, .k = K, .alpha = AL,       \
    .beta = BE, .dtype = __VA_ARGS__                                           \
  }
/* Leading-dimension padding and offsets of A, B and C. */
#define PADS(la, lb, lc, oa, ob, oc)                                           \
  .lda_pad = la, .ldb_pad = lb, .ldc_pad = lc, .a_off = oa, .b_off = ob,       \
  .c_off = oc
#define BATCH(count, gap) .batch = count, .stride_pad = gap

#define ROW KILN_ROW_MAJOR
#define COL KILN_COL_MAJOR
#define N KILN_NO_TRANS
#define T KILN_TRANS

/* The epilogue: act, bias (or not) and the bias's offset. */
#define EPI(A, HAS_BIAS, OFF)                                                  \
  .epi = true, .act = A, .bias = HAS_BIAS, .bias_off = OFF
#define RELU KILN_ACT_RELU
#define GELU KILN_ACT_GELU
#define NONE KILN_ACT_NONE

#endif
