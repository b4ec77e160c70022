/* The tuner's correctness gate and its timing: every candidate runs on
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
#include "../commands.h"
#include "tune.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sched.h>
#include <time.h>

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
};
static const struct gate_case mma_cases[] = {
    {KILN_ROW_MAJOR, KILN_NO_TRANS, KILN_NO_TRANS, 1, 1, 1, 1.0f, 0.0f,
     KILN_BF16, 0, 0, false},
    {KILN_ROW_MAJOR, KILN_NO_TRANS, KILN_NO_TRANS, 37, 45, 29, 1.0f, 0.5f,
     KILN_F16, 3, 1, true},
    {KILN_COL_MAJOR, KILN_TRANS, KILN_TRANS, 61, 19, 131, -1.0f, 0.0f,
     KILN_BF16, 1, 5, false},
    {KILN_ROW_MAJOR, KILN_TRANS, KILN_NO_TRANS, 130, 67, 40, 0.5f, 1.0f,
     KILN_F16, 8, 8, true},
    {KILN_COL_MAJOR, KILN_NO_TRANS, KILN_TRANS, 133, 129, 70, 1.0f, 0.0f,
     KILN_BF16, 2, 3, false},
};
static const struct gate_case cases[] = {
    {KILN_ROW_MAJOR, KILN_NO_TRANS, KILN_NO_TRANS, 1, 1, 1, 1.0f, 0.0f,
     KILN_F32, 0, 0, false},
    {KILN_ROW_MAJOR, KILN_NO_TRANS, KILN_NO_TRANS, 37, 45, 29, 1.0f, 0.5f,
     KILN_F32, 3, 1, true},
    {KILN_COL_MAJOR, KILN_TRANS, KILN_TRANS, 61, 19, 131, -1.0f, 0.0f,
     KILN_F32, 1, 5, false},
    {KILN_ROW_MAJOR, KILN_TRANS, KILN_NO_TRANS, 130, 67, 40, 0.5f, 1.0f,
     KILN_F32, 8, 8, true},
    {KILN_COL_MAJOR, KILN_NO_TRANS, KILN_TRANS, 33, 129, 70, 1.0f, 0.0f,
     KILN_BF16, 2, 3, false},
};

static uint32_t lcg(uint32_t *s) {
  *s = *s * 1664525u + 1013904223u;
  return *s >> 8;
}

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
  float v = (float)lcg(s) / (float)(1u << 24) * 2.0f - 1.0f;
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

bool tune_wait(kiln_event *ev, double timeout_s, bool *timed_out) {
  *timed_out = false;
  const double t_end = tools_now() + timeout_s;
  /* Poll: kiln_event_wait cannot be given up on. A few yields first (a
   * short kernel's time stays exact), then sleeps growing from 20 us to
   * 1 ms (a long one's is off by under 1 ms, and the waiting thread leaves
   * the CPU to a CPU device). */
  long sleep_ns = 20000;
  for (int spins = 0;; spins++) {
    kiln_event_state st;
    if (kiln_event_get_state(ev, &st) != KILN_OK)
      return false;
    if (st == KILN_EVENT_COMPLETE || st == KILN_EVENT_FAILED)
      return kiln_event_wait(ev) == KILN_OK; /* the failure's message */
    if (tools_now() >= t_end) {
      *timed_out = true;
      return false;
    }
    if (spins < 100) {
      sched_yield();
      continue;
    }
    struct timespec ts = {0, sleep_ns};
    nanosleep(&ts, NULL);
    if (sleep_ns < 1000000)
      sleep_ns *= 2;
  }
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
static bool run_case(kiln_context *ctx, kiln_queue *q,
                     const struct gate_case *g, const char *params,
                     const tune_hooks *hooks, double run_timeout_s,
                     double tol_scale, bool *timed_out, char *why,
                     size_t size) {
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
      !tune_wait(ev, run_timeout_s, timed_out)) {
    if (*timed_out)
      snprintf(why, size, "run timeout (a launch ran past %g s)",
               run_timeout_s);
    else
      snprintf(why, size, "%s", kiln_last_error());
    kiln_event_release(ev);
    goto done;
  }
  kiln_event_release(ev);
  if (hooks != NULL && hooks->after_gemm != NULL)
    hooks->after_gemm(hooks->user, params, q, dc, nc);
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
    const double tol = tol_scale * 2.0 * (double)(g->k + 4) * u * mag + 1e-30;
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

/* The cases in order, as tune_gate says. */
static bool run_cases(kiln_context *ctx, kiln_queue *q,
                      const struct gate_case *list, size_t count,
                      double tol_scale, const char *params,
                      const tune_hooks *hooks, double run_timeout_s,
                      double deadline, bool *timed_out, char *why,
                      size_t why_size) {
  bool ok = true;
  for (size_t i = 0; i < count && ok; i++) {
    if (deadline > 0.0 && tools_now() >= deadline) {
      why[0] = '\0';
      return false;
    }
    ok = run_case(ctx, q, &list[i], params, hooks, run_timeout_s, tol_scale,
                  timed_out, why, why_size);
  }
  return ok;
}

bool tune_gate(kiln_context *ctx, kiln_queue *q, const char *params,
               const tune_hooks *hooks, double run_timeout_s,
               double deadline, double *seconds, bool *timed_out, char *why,
               size_t why_size) {
  const double t0 = tools_now();
  *timed_out = false;
  const bool ok = run_cases(ctx, q, cases, sizeof cases / sizeof cases[0],
                            1.0, params, hooks, run_timeout_s, deadline,
                            timed_out, why, why_size);
  *seconds = tools_now() - t0;
  return ok;
}

bool tune_gate_mma(kiln_context *ctx, kiln_queue *q, const char *params,
                   const tune_hooks *hooks, double run_timeout_s,
                   double deadline, double *seconds, bool *timed_out,
                   char *why, size_t why_size) {
  const double t0 = tools_now();
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
  const bool ok = run_cases(ctx, q, mma_cases,
                            sizeof mma_cases / sizeof mma_cases[0], 8.0,
                            params, hooks, run_timeout_s, deadline, timed_out,
                            why, why_size);
  *seconds = tools_now() - t0;
  return ok;
}

double tune_time_gemm(kiln_context *ctx, kiln_queue *q, size_t m, size_t n,
                      size_t k, int runs, double stop_above, double deadline,
                      double run_timeout_s, const tune_hooks *hooks,
                      const char *params) {
  return tune_time_gemm_dtype(ctx, q, KILN_F32, m, n, k, runs, stop_above,
                              deadline, run_timeout_s, hooks, params);
}

double tune_time_gemm_dtype(kiln_context *ctx, kiln_queue *q,
                            kiln_dtype dtype, size_t m, size_t n, size_t k,
                            int runs, double stop_above, double deadline,
                            double run_timeout_s, const tune_hooks *hooks,
                            const char *params) {
  kiln_buffer *a = NULL, *b = NULL, *c = NULL;
  double best = -1.0;
  /* 0.5 as an f32, or the 16 bits of 0.5 in f16 (0x3800) and bf16. */
  const float one = 0.5f;
  const uint16_t half_bits = dtype == KILN_F16 ? 0x3800u : 0x3f00u;
  const size_t es = dtype == KILN_F32 ? 4 : 2;
  const void *pattern = es == 4 ? (const void *)&one : (const void *)&half_bits;
  if (kiln_buffer_create(ctx, m * k * es, 0, &a) != KILN_OK ||
      kiln_buffer_create(ctx, k * n * es, 0, &b) != KILN_OK ||
      kiln_buffer_create(ctx, m * n * 4, 0, &c) != KILN_OK ||
      kiln_buffer_fill(q, pattern, es, &(kiln_range){a, 0, m * k, dtype}, 0,
                       NULL, NULL) != KILN_OK ||
      kiln_buffer_fill(q, pattern, es, &(kiln_range){b, 0, k * n, dtype}, 0,
                       NULL, NULL) != KILN_OK ||
      kiln_queue_finish(q) != KILN_OK)
    goto done;
  /* One warm-up run (kernel build and first-touch costs), then timed runs. */
  for (int r = -1; r < runs; r++) {
    if (deadline > 0.0 && tools_now() >= deadline) {
      if (best < 0.0)
        best = 0.0; /* no figure: out of time */
      break;
    }
    const double t0 = tools_now();
    kiln_event *ev = NULL;
    bool timed_out = false;
    const bool ran =
        kiln_matmul(q, 1,
                    &(kiln_matrix){
                        .buffer = a, .rows = m, .cols = k, .dtype = dtype},
                    &(kiln_matrix){
                        .buffer = b, .rows = k, .cols = n, .dtype = dtype},
                    &(kiln_matrix){
                        .buffer = c, .rows = m, .cols = n, .dtype = KILN_F32},
                    NULL, 0, NULL, &ev) == KILN_OK &&
        tune_wait(ev, run_timeout_s, &timed_out);
    kiln_event_release(ev);
    if (!ran) {
      best = timed_out ? -2.0 : -1.0;
      goto done;
    }
    double t = tools_now() - t0;
    if (hooks != NULL && hooks->time_scale != NULL)
      t *= hooks->time_scale(hooks->user, params);
    /* The warm-up already says when a candidate is clearly slower (its
     * program was built by the gate): a slow candidate at a large size
     * would otherwise cost the budget several long runs. */
    if (r < 0) {
      if (stop_above > 0.0 && t > stop_above) {
        best = t;
        goto done;
      }
      continue;
    }
    if (best < 0.0 || t < best)
      best = t;
    if (stop_above > 0.0 && t > stop_above)
      break; /* clearly slower than the best so far: no need for more */
  }
done:
  kiln_buffer_destroy(a);
  kiln_buffer_destroy(b);
  kiln_buffer_destroy(c);
  return best;
}
