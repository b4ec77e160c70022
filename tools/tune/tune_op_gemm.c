/* kiln tune's GEMM (ops gemm, gemm_cpu and gemm_mma): the correctness gate
 * and the timing. every candidate runs on
 * awkward shapes and is checked against a float64 host reference before it
 * is timed, so that no set of parameters that computes a wrong result can
 * be kept (CLBlast's tuner has no such gate, and its users have shipped
 * parameters that computed wrong results).
 *
 * Tolerance, as in tests/test_op_gemm.c: each element of C is a chain of k
 * f32 FMAs (one rounding each, u = 2^-24) plus alpha, beta and bias
 * roundings, so |C - C_ref| <= 2 (k + 4) u (|alpha| sum |a||b| + |beta| |C|
 * + |bias|); ReLU passes that through. A wrong index or a lost term is off
 * by about |a||b|, far above it at these sizes. bf16 inputs are rounded on
 * the host first and the reference uses the rounded values; f16 inputs
 * are multiples of 1/256 (exact in f16 and bf16).
 *
 * The matrix units' gate (tune_gate_mma, op gemm_mma) runs f16 and bf16
 * cases only, first requiring that the matrix-unit kernel is what GEMM runs
 * (kiln_tuning_info's used), with 8 times the tolerance: tensor cores align
 * the terms of their sums by truncation rather than rounding (Fasi, Higham,
 * Mikaitis and Pranesh, "Numerical behavior of NVIDIA tensor cores", 2021),
 * a few units in the last place per k-step of 16 at most, still about 1000
 * times below the error of a wrong index at these sizes. */
#include "tune.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The shapes: non-multiples of every tile in the space (16 to 128, k steps
 * 8 to 32, vectors up to 8), 1, both layouts, every transpose, offsets and
 * leading dimensions both unaligned and multiples of 8 (so that aligned
 * vector loads run), beta 0 over NaN, and a ReLU + bias epilogue. */
struct gate_case {
  kiln_layout layout;
  kiln_trans ta, tb;
  size_t m, n, k;
  float alpha, beta;
  kiln_dtype dtype;
  size_t pad, off; /* added to every leading dimension; offset of A, B, C */
  bool relu_bias;
  double tol_scale; /* times the tolerance (the opening comment) */
};
static const struct gate_case mma_cases[] = {
    {KILN_ROW_MAJOR, KILN_NO_TRANS, KILN_NO_TRANS, 1, 1, 1, 1.0f, 0.0f,
     KILN_BF16, 0, 0, false, 8.0},
    {KILN_ROW_MAJOR, KILN_NO_TRANS, KILN_NO_TRANS, 37, 45, 29, 1.0f, 0.5f,
     KILN_F16, 3, 1, true, 8.0},
    {KILN_COL_MAJOR, KILN_TRANS, KILN_TRANS, 61, 19, 131, -1.0f, 0.0f,
     KILN_BF16, 1, 5, false, 8.0},
    {KILN_ROW_MAJOR, KILN_TRANS, KILN_NO_TRANS, 130, 67, 40, 0.5f, 1.0f,
     KILN_F16, 8, 8, true, 8.0},
    {KILN_COL_MAJOR, KILN_NO_TRANS, KILN_TRANS, 133, 129, 70, 1.0f, 0.0f,
     KILN_BF16, 2, 3, false, 8.0},
};
static const struct gate_case cases[] = {
    {KILN_ROW_MAJOR, KILN_NO_TRANS, KILN_NO_TRANS, 1, 1, 1, 1.0f, 0.0f,
     KILN_F32, 0, 0, false, 1.0},
    {KILN_ROW_MAJOR, KILN_NO_TRANS, KILN_NO_TRANS, 37, 45, 29, 1.0f, 0.5f,
     KILN_F32, 3, 1, true, 1.0},
    {KILN_COL_MAJOR, KILN_TRANS, KILN_TRANS, 61, 19, 131, -1.0f, 0.0f,
     KILN_F32, 1, 5, false, 1.0},
    {KILN_ROW_MAJOR, KILN_TRANS, KILN_NO_TRANS, 130, 67, 40, 0.5f, 1.0f,
     KILN_F32, 8, 8, true, 1.0},
    {KILN_COL_MAJOR, KILN_NO_TRANS, KILN_TRANS, 33, 129, 70, 1.0f, 0.0f,
     KILN_BF16, 2, 3, false, 1.0},
};

/* The f16 bits of v, a multiple of 1/256 in [-1, 1] (exact: at most 9
 * significant bits, exponent at least -8). */
static uint16_t f16_bits(float v) {
  if (v == 0.0f)
    return 0;
  int e;
  const float f = frexpf(fabsf(v), &e); /* |v| = f 2^e, f in [0.5, 1) */
  const uint16_t mant = (uint16_t)((f * 2.0f - 1.0f) * 1024.0f);
  return (uint16_t)((v < 0.0f ? 0x8000u : 0u) |
                    (unsigned)(e - 1 + 15) << 10 | mant);
}

/* A value in [-1, 1) as dtype: rounded to bf16 when bf16, to a multiple of
 * 1/256 when f16; its 16 bits in *bits (bf16's truncation otherwise). */
static float draw(uint32_t *s, kiln_dtype dtype, uint16_t *bits) {
  float v = (float)tune_lcg(s) / (float)(1u << 24) * 2.0f - 1.0f;
  if (dtype == KILN_F16) {
    v = floorf(v * 256.0f) / 256.0f;
    *bits = f16_bits(v);
    return v;
  }
  uint32_t u;
  memcpy(&u, &v, 4);
  u &= 0xffff0000u; /* truncation: exact in bf16 */
  if (dtype == KILN_BF16)
    memcpy(&v, &u, 4);
  *bits = (uint16_t)(u >> 16);
  return v;
}

static size_t at(kiln_layout l, size_t r, size_t c, size_t ld) {
  return l == KILN_ROW_MAJOR ? r * ld + c : c * ld + r;
}

/* The case's GEMM on the device buffers, with leading dimensions lda, ldb
 * and ldc (its bias and ReLU when the case has them). */
static kiln_status gate_matmul(kiln_queue *q, const struct gate_case *g,
                               kiln_buffer *da, kiln_buffer *db,
                               kiln_buffer *dc, kiln_buffer *dbias, size_t lda,
                               size_t ldb, size_t ldc, kiln_event **ev) {
  const bool ta = g->ta == KILN_TRANS, tb = g->tb == KILN_TRANS;
  const kiln_matrix a = {da,   g->off, ta ? g->k : g->m, ta ? g->m : g->k,
                         lda,  0,      g->dtype,         g->layout,
                         g->ta, NULL};
  const kiln_matrix b = {db,   g->off, tb ? g->n : g->k, tb ? g->k : g->n,
                         ldb,  0,      g->dtype,         g->layout,
                         g->tb, NULL};
  const kiln_matrix c = {dc, g->off,   g->m,      g->n,         ldc,
                         0,  KILN_F32, g->layout, KILN_NO_TRANS, NULL};
  const kiln_range bias = {dbias, 0, g->n, KILN_F32};
  const kiln_epilogue e = {g->alpha, g->beta, g->relu_bias ? &bias : NULL,
                           g->relu_bias ? KILN_ACT_RELU : KILN_ACT_NONE};
  return kiln_matmul(q, 1, &a, &b, &c, &e, 0, NULL, ev);
}

/* One case; false with why on any failure. */
static bool run_case(const tune_case_env *env, const void *c_case) {
  const struct gate_case *g = c_case;
  kiln_context *ctx = env->ctx;
  kiln_queue *q = env->q;
  char *why = env->why;
  const size_t size = env->why_size;
  const double run_timeout_s = env->run_timeout_s;
  const bool ta = g->ta == KILN_TRANS, tb = g->tb == KILN_TRANS;
  const bool row = g->layout == KILN_ROW_MAJOR;
  const size_t ar = ta ? g->k : g->m, ac = ta ? g->m : g->k;
  const size_t br = tb ? g->n : g->k, bc = tb ? g->k : g->n;
  const size_t lda = (row ? ac : ar) + g->pad, ldb = (row ? bc : br) + g->pad,
               ldc = (row ? g->n : g->m) + g->pad;
  const size_t na = g->off + (row ? ar : ac) * lda + 1,
               nb = g->off + (row ? br : bc) * ldb + 1,
               nc = g->off + (row ? g->m : g->n) * ldc + 1;
  const bool bf16 = g->dtype != KILN_F32; /* 16-bit operands */
  const size_t es = bf16 ? 2 : 4;
  const kiln_dtype abt = g->dtype;
  float *a = malloc(na * 4), *b = malloc(nb * 4), *c = malloc(nc * 4),
        *bias = malloc(g->n * 4), *out = malloc(nc * 4);
  uint16_t *ah = malloc(na * 2), *bh = malloc(nb * 2);
  bool ok = false;
  kiln_buffer *da = NULL, *db = NULL, *dc = NULL, *dbias = NULL;
  if (!a || !b || !c || !bias || !out || !ah || !bh) {
    snprintf(why, size, "out of host memory");
    goto done;
  }
  uint32_t seed = (uint32_t)(g->m * 131 + g->n * 7 + g->k);
  uint16_t bits;
  for (size_t i = 0; i < na; i++)
    a[i] = draw(&seed, g->dtype, &ah[i]);
  for (size_t i = 0; i < nb; i++)
    b[i] = draw(&seed, g->dtype, &bh[i]);
  for (size_t i = 0; i < nc; i++)
    c[i] = g->beta == 0.0f ? NAN : draw(&seed, KILN_F32, &bits);
  for (size_t i = 0; i < g->n; i++)
    bias[i] = draw(&seed, KILN_F32, &bits);
  kiln_event *ev = NULL;
  if (kiln_buffer_create(ctx, na * es, 0, &da) != KILN_OK ||
      kiln_buffer_create(ctx, nb * es, 0, &db) != KILN_OK ||
      kiln_buffer_create(ctx, nc * 4, 0, &dc) != KILN_OK ||
      kiln_buffer_create(ctx, g->n * 4, 0, &dbias) != KILN_OK ||
      kiln_buffer_write_sync(q, bf16 ? (void *)ah : (void *)a,
                             &(kiln_range){da, 0, na, abt}) != KILN_OK ||
      kiln_buffer_write_sync(q, bf16 ? (void *)bh : (void *)b,
                             &(kiln_range){db, 0, nb, abt}) != KILN_OK ||
      kiln_buffer_write_sync(q, c, &(kiln_range){dc, 0, nc, KILN_F32}) !=
          KILN_OK ||
      kiln_buffer_write_sync(q, bias, &(kiln_range){dbias, 0, g->n, KILN_F32}) !=
          KILN_OK ||
      gate_matmul(q, g, da, db, dc, dbias, lda, ldb, ldc, &ev) != KILN_OK ||
      !tune_wait(ev, run_timeout_s, env->timed_out)) {
    if (*env->timed_out)
      snprintf(why, size, "run timeout (a launch ran past %g s)",
               run_timeout_s);
    else
      snprintf(why, size, "%s", kiln_last_error());
    kiln_event_release(ev);
    goto done;
  }
  kiln_event_release(ev);
  tune_hook(env->hooks, env->params, q, dc, nc * 4);
  if (kiln_buffer_read_sync(q, &(kiln_range){dc, 0, nc, KILN_F32}, out) !=
      KILN_OK) {
    snprintf(why, size, "%s", kiln_last_error());
    goto done;
  }
  const double u = ldexp(1.0, -24);
  for (size_t i = 0; i < nc; i++) {
    bool inside = false;
    size_t r = 0, cc = 0;
    if (i >= g->off) {
      const size_t e = i - g->off, line = e / ldc, pos = e % ldc;
      r = row ? line : pos;
      cc = row ? pos : line;
      inside = r < g->m && cc < g->n;
    }
    if (!inside) {
      if (memcmp(&out[i], &c[i], 4) != 0) {
        snprintf(why, size, "%zux%zux%zu: element %zu outside C changed",
                 g->m, g->n, g->k, i);
        goto done;
      }
      continue;
    }
    double want = 0.0, mag = 0.0;
    for (size_t p = 0; p < g->k; p++) {
      const double av = a[g->off + (ta ? at(g->layout, p, r, lda)
                                       : at(g->layout, r, p, lda))];
      const double bv = b[g->off + (tb ? at(g->layout, cc, p, ldb)
                                       : at(g->layout, p, cc, ldb))];
      want += av * bv;
      mag += fabs(av * bv);
    }
    want *= g->alpha;
    mag *= fabs(g->alpha);
    if (g->beta != 0.0f) {
      want += g->beta * (double)c[i];
      mag += fabs(g->beta * (double)c[i]);
    }
    if (g->relu_bias) {
      want += bias[cc];
      mag += fabs(bias[cc]);
      want = want < 0.0 ? 0.0 : want;
    }
    const double tol = g->tol_scale * 2.0 * (double)(g->k + 4) * u * mag + 1e-30;
    if (!(fabs(out[i] - want) <= tol)) {
      snprintf(why, size,
               "%s %c%c %zux%zux%zu %s: C[%zu][%zu] = %.9g, want %.9g "
               "(tolerance %.3g)",
               row ? "row" : "col", ta ? 'T' : 'N', tb ? 'T' : 'N', g->m,
               g->n, g->k, kiln_dtype_name(g->dtype), r, cc, (double)out[i], want,
               tol);
      goto done;
    }
  }
  ok = true;
done:
  kiln_buffer_destroy(da);
  kiln_buffer_destroy(db);
  kiln_buffer_destroy(dc);
  kiln_buffer_destroy(dbias);
  free(a);
  free(b);
  free(c);
  free(bias);
  free(out);
  free(ah);
  free(bh);
  return ok;
}

bool tune_gate_gemm(kiln_context *ctx, kiln_queue *q, const char *params,
                    const tune_hooks *hooks, double run_timeout_s,
                    double deadline, double *seconds, bool *timed_out,
                    char *why, size_t why_size) {
  const tune_case_env env = {ctx, q, params, hooks, run_timeout_s,
                             timed_out, why, why_size};
  return tune_run_cases(&env, cases, sizeof cases / sizeof cases[0],
                        sizeof cases[0], run_case, deadline, seconds);
}

bool tune_gate_mma(kiln_context *ctx, kiln_queue *q, const char *params,
                   const tune_hooks *hooks, double run_timeout_s,
                   double deadline, double *seconds, bool *timed_out,
                   char *why, size_t why_size) {
  *timed_out = false;
  *seconds = 0.0;
  /* A gate passed by gemm_gpu would say nothing of the matrix units. */
  kiln_tuning_info *t = malloc(sizeof *t);
  if (t == NULL) {
    snprintf(why, why_size, "out of host memory");
    return false;
  }
  const bool used = kiln_tuning_get_info(ctx, "gemm_mma", t) == KILN_OK &&
                    strncmp(t->used, "yes", 3) == 0;
  if (!used)
    snprintf(why, why_size, "the matrix units do not run: %.400s", t->used);
  free(t);
  if (!used)
    return false;
  const tune_case_env env = {ctx, q, params, hooks, run_timeout_s,
                             timed_out, why, why_size};
  return tune_run_cases(&env, mma_cases,
                        sizeof mma_cases / sizeof mma_cases[0],
                        sizeof mma_cases[0], run_case, deadline, seconds);
}

/* The timing's GEMM: C (f32) = A B, m x n x k, A and B of dtype. */
struct timed_gemm {
  kiln_dtype dtype;
  size_t m, n, k;
  kiln_buffer *a, *b, *c;
};

static kiln_status run_gemm(kiln_queue *q, void *arg) {
  const struct timed_gemm *g = arg;
  return kiln_matmul(
      q, 1,
      &(kiln_matrix){
          .buffer = g->a, .rows = g->m, .cols = g->k, .dtype = g->dtype},
      &(kiln_matrix){
          .buffer = g->b, .rows = g->k, .cols = g->n, .dtype = g->dtype},
      &(kiln_matrix){
          .buffer = g->c, .rows = g->m, .cols = g->n, .dtype = KILN_F32},
      NULL, 0, NULL, NULL);
}

/* tune_time_fn's timing of an m x n x k GEMM with A and B of dtype (f32,
 * f16 or bf16; C f32). */
static double time_gemm_dtype(kiln_context *ctx, kiln_queue *q,
                              kiln_dtype dtype, const size_t *z, int runs,
                              double stop_above, double deadline,
                              double run_timeout_s, const tune_hooks *hooks,
                              const char *params) {
  struct timed_gemm g = {dtype, z[0], z[1], z[2], NULL, NULL, NULL};
  double best = -1.0;
  /* 0.5 as an f32, or the 16 bits of 0.5 in f16 (0x3800) and bf16. */
  const float half = 0.5f;
  const uint16_t half_bits = dtype == KILN_F16 ? 0x3800u : 0x3f00u;
  const size_t es = dtype == KILN_F32 ? 4 : 2;
  const void *pattern =
      es == 4 ? (const void *)&half : (const void *)&half_bits;
  if (kiln_buffer_create(ctx, g.m * g.k * es, 0, &g.a) == KILN_OK &&
      kiln_buffer_create(ctx, g.k * g.n * es, 0, &g.b) == KILN_OK &&
      kiln_buffer_create(ctx, g.m * g.n * 4, 0, &g.c) == KILN_OK &&
      kiln_buffer_fill(q, pattern, es, &(kiln_range){g.a, 0, g.m * g.k, dtype},
                       0, NULL, NULL) == KILN_OK &&
      kiln_buffer_fill(q, pattern, es, &(kiln_range){g.b, 0, g.k * g.n, dtype},
                       0, NULL, NULL) == KILN_OK &&
      kiln_queue_finish(q) == KILN_OK)
    best = tune_time_loop(q, run_gemm, &g, runs, stop_above, deadline,
                          run_timeout_s, hooks, params);
  kiln_buffer_destroy(g.a);
  kiln_buffer_destroy(g.b);
  kiln_buffer_destroy(g.c);
  return best;
}

double tune_time_gemm(kiln_context *ctx, kiln_queue *q, const size_t *z,
                      int runs, double stop_above, double deadline,
                      double run_timeout_s, const tune_hooks *hooks,
                      const char *params) {
  return time_gemm_dtype(ctx, q, KILN_F32, z, runs, stop_above, deadline,
                         run_timeout_s, hooks, params);
}

double tune_time_gemm_mma(kiln_context *ctx, kiln_queue *q, const size_t *z,
                          int runs, double stop_above, double deadline,
                          double run_timeout_s, const tune_hooks *hooks,
                          const char *params) {
  return time_gemm_dtype(ctx, q, KILN_BF16, z, runs, stop_above, deadline,
                         run_timeout_s, hooks, params);
}

double tune_work_gemm(const size_t *z) {
  return 2.0 * (double)z[0] * (double)z[1] * (double)z[2];
}
