/* `kiln bench`: one runner per op. Each allocates its operands, fills them
 * with pseudo-random values in [-1, 1), times the op with bench_time (one
 * warm-up, then the median of the timed runs, each up to the queue's
 * finish, so every step of the op counts) and checks the result of the last
 * run against a host reference computed in double (GEMM: a sample of
 * rows). */
#include "bench.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define U (ldexp(1.0, -24)) /* unit roundoff of f32 */

/* ---- host data ----------------------------------------------------------- */

static void fill_random(float *x, size_t n, uint32_t seed) {
  uint32_t s = seed ? seed : 1u;
  for (size_t i = 0; i < n; i++) {
    s ^= s << 13;
    s ^= s >> 17;
    s ^= s << 5;
    x[i] = (float)(s >> 8) / (float)(1u << 23) - 1.0f;
  }
}

static uint32_t bits(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  return u;
}

/* Store x (n floats) as dtype into a new host array, and replace x by the
 * values actually stored, so the reference sees what the device sees. */
static void *to_storage(const char *dtype, float *x, size_t n,
                        size_t *elem_size) {
  bool f16 = strcmp(dtype, "f16") == 0, bf16 = strcmp(dtype, "bf16") == 0;
  *elem_size = f16 || bf16 ? 2 : 4;
  void *p = malloc(n * *elem_size);
  if (p == NULL)
    return NULL;
  if (!f16 && !bf16) {
    memcpy(p, x, n * 4);
    return p;
  }
  uint16_t *h = p;
  if (f16) {
    kiln_f32_to_f16(x, h, n);
    kiln_f16_to_f32(h, x, n);
  } else {
    kiln_f32_to_bf16(x, h, n);
    kiln_bf16_to_f32(h, x, n);
  }
  return p;
}

static kiln_dtype dtype_of(const char *name) {
  return strcmp(name, "f16") == 0    ? KILN_F16
         : strcmp(name, "bf16") == 0 ? KILN_BF16
                                     : KILN_F32;
}

/* A device buffer of count elements of dt holding host data (or
 * uninitialised, host NULL). */
static kiln_buffer *upload(const struct bench_env *env, const void *host,
                           size_t count, kiln_dtype dt,
                           struct bench_result *r) {
  kiln_buffer *b = NULL;
  size_t bytes = count * kiln_dtype_size(dt);
  if (kiln_buffer_create(env->ctx, bytes, 0, &b) != KILN_OK ||
      (host != NULL &&
       kiln_buffer_write_sync(env->queue, host, &(kiln_range){b, 0, count, dt}) != KILN_OK)) {
    snprintf(r->note, sizeof r->note, "allocating %zu bytes: %s", bytes,
             kiln_last_error());
    kiln_buffer_destroy(b);
    return NULL;
  }
  return b;
}

static bool download(const struct bench_env *env, kiln_buffer *b, void *host,
                     size_t count, kiln_dtype dt, struct bench_result *r) {
  if (kiln_buffer_read_sync(env->queue, &(kiln_range){b, 0, count, dt}, host) == KILN_OK)
    return true;
  snprintf(r->note, sizeof r->note, "reading the result: %s",
           kiln_last_error());
  return false;
}

/* Fill in the timing part of r, or the failure. */
static bool timed(const struct bench_env *env, struct bench_result *r,
                  kiln_status (*op)(void *arg), void *arg, double work,
                  bool flops) {
  double s = bench_time(env, op, arg);
  if (s <= 0) {
    snprintf(r->note, sizeof r->note, "%s", kiln_last_error());
    return false;
  }
  r->median_s = s;
  r->flops = flops;
  r->rate = work / s * 1e-9;
  return true;
}

/* ---- GEMM ---------------------------------------------------------------- */

struct gemm_args {
  kiln_queue *q;
  kiln_matrix a, b, c;
};

static kiln_status gemm_op(void *p) {
  struct gemm_args *g = p;
  return kiln_matmul(g->q, 1, &g->a, &g->b, &g->c, NULL, 0, NULL, NULL);
}

/* gemm_packed's B: packed once here, before the timed runs (the weights of
 * a layer, packed when loaded and read by every call); g->b becomes the
 * descriptor that names it. */
static bool pack_b(const struct bench_env *env, struct gemm_args *g,
                   kiln_packed **packed, struct bench_result *r) {
  kiln_matrix b;
  if (kiln_packed_create(env->ctx, KILN_OPERAND_B, &g->b, packed) !=
          KILN_OK ||
      kiln_pack(env->queue, &g->b, *packed, 0, NULL, NULL) != KILN_OK ||
      kiln_packed_get_matrix(*packed, &b) != KILN_OK) {
    snprintf(r->note, sizeof r->note, "packing B: %s", kiln_last_error());
    return false;
  }
  g->b = b;
  return true;
}

/* gemm, gemm_f16, gemm_bf16 and gemm_packed (B packed once, f32). */
static bool run_gemm(const struct bench_env *env, struct bench_result *r) {
  const size_t m = r->shape[0], n = r->shape[1], k = r->shape[2];
  const kiln_dtype dt = dtype_of(r->dtype);
  bool ok = false;
  size_t es;
  float *a = malloc(m * k * 4), *b = malloc(k * n * 4), *c = malloc(m * n * 4);
  void *as = NULL, *bs = NULL;
  kiln_buffer *da = NULL, *db = NULL, *dc = NULL;
  kiln_packed *packed = NULL;
  struct gemm_args g = {.q = env->queue};
  if (a == NULL || b == NULL || c == NULL) {
    snprintf(r->note, sizeof r->note, "out of host memory");
    goto done;
  }
  fill_random(a, m * k, 1);
  fill_random(b, k * n, 2);
  as = to_storage(r->dtype, a, m * k, &es);
  bs = to_storage(r->dtype, b, k * n, &es);
  if (as == NULL || bs == NULL ||
      (da = upload(env, as, m * k, dt, r)) == NULL ||
      (db = upload(env, bs, k * n, dt, r)) == NULL ||
      (dc = upload(env, NULL, m * n, KILN_F32, r)) == NULL)
    goto done;
  g.a = (kiln_matrix){.buffer = da, .rows = m, .cols = k, .dtype = dt};
  g.b = (kiln_matrix){.buffer = db, .rows = k, .cols = n, .dtype = dt};
  g.c = (kiln_matrix){.buffer = dc, .rows = m, .cols = n, .dtype = KILN_F32};
  if (strcmp(r->op, "gemm_packed") == 0 && !pack_b(env, &g, &packed, r))
    goto done;
  if (!timed(env, r, gemm_op, &g, 2.0 * (double)m * (double)n * (double)k,
             true))
    goto done;
  ok = true;
  if (!env->verify)
    goto done;
  if (!download(env, dc, c, m * n, KILN_F32, r)) {
    ok = false;
    goto done;
  }
  /* About 16 rows spread over C, and the last: a full reference of a 2048
   * GEMM would take the host longer than the benchmark. */
  size_t step = m / 16 ? m / 16 : 1;
  double *ref = calloc(n, sizeof *ref), *mag = calloc(n, sizeof *mag);
  if (ref == NULL || mag == NULL) {
    free(ref);
    free(mag);
    goto done;
  }
  for (size_t i = 0; i < m && ok;
       i = i + step < m || i == m - 1 ? i + step : m - 1) {
    memset(ref, 0, n * sizeof *ref);
    memset(mag, 0, n * sizeof *mag);
    for (size_t p = 0; p < k; p++)
      for (size_t j = 0; j < n; j++) {
        double v = (double)a[i * k + p] * (double)b[p * n + j];
        ref[j] += v;
        mag[j] += fabs(v);
      }
    for (size_t j = 0; j < n; j++) {
      /* k fused multiply-adds and the scaling: see tests/test_op_gemm.c. */
      double tol = 2.0 * (double)(k + 4) * U * mag[j] + 1e-30;
      if (fabs((double)c[i * n + j] - ref[j]) > tol) {
        snprintf(r->note, sizeof r->note,
                 "C[%zu][%zu] = %.9g, reference %.9g (tolerance %.3g)", i, j,
                 (double)c[i * n + j], ref[j], tol);
        ok = false;
        break;
      }
    }
    if (i == m - 1)
      break;
  }
  free(ref);
  free(mag);
  r->verified = ok;
done:
  kiln_packed_destroy(packed);
  kiln_buffer_destroy(da);
  kiln_buffer_destroy(db);
  kiln_buffer_destroy(dc);
  free(a);
  free(b);
  free(c);
  free(as);
  free(bs);
  return ok;
}

/* ---- transpose ----------------------------------------------------------- */

struct tr_args {
  kiln_queue *q;
  size_t rows, cols;
  kiln_buffer *x, *y;
};

static kiln_status tr_op(void *p) {
  struct tr_args *t = p;
  return kiln_transpose(
      t->q,
      &(kiln_matrix){
          .buffer = t->x, .rows = t->rows, .cols = t->cols, .dtype = KILN_F32},
      &(kiln_matrix){
          .buffer = t->y, .rows = t->cols, .cols = t->rows, .dtype = KILN_F32},
      0, NULL, NULL);
}

static bool run_transpose(const struct bench_env *env, struct bench_result *r) {
  const size_t rows = r->shape[0], cols = r->shape[1], n = rows * cols;
  bool ok = false;
  float *x = malloc(n * 4), *y = malloc(n * 4);
  struct tr_args t = {env->queue, rows, cols, NULL, NULL};
  if (x == NULL || y == NULL) {
    snprintf(r->note, sizeof r->note, "out of host memory");
    goto done;
  }
  fill_random(x, n, 3);
  if ((t.x = upload(env, x, n, KILN_F32, r)) == NULL ||
      (t.y = upload(env, NULL, n, KILN_F32, r)) == NULL)
    goto done;
  if (!timed(env, r, tr_op, &t, 2.0 * (double)n * 4.0, false))
    goto done;
  ok = true;
  if (!env->verify)
    goto done;
  if (!download(env, t.y, y, n, KILN_F32, r)) {
    ok = false;
    goto done;
  }
  for (size_t i = 0; i < rows && ok; i++)
    for (size_t j = 0; j < cols; j++)
      if (bits(y[j * rows + i]) != bits(x[i * cols + j])) {
        snprintf(r->note, sizeof r->note, "y[%zu][%zu] differs", j, i);
        ok = false;
        break;
      }
  r->verified = ok;
done:
  kiln_buffer_destroy(t.x);
  kiln_buffer_destroy(t.y);
  free(x);
  free(y);
  return ok;
}

/* ---- vector ops ---------------------------------------------------------- */

enum vec_kind { VEC_SUM, VEC_NRM2, VEC_DOT, VEC_AXPY, VEC_SCALE };

struct vec_args {
  kiln_queue *q;
  enum vec_kind kind;
  size_t n;
  kiln_buffer *x, *y, *out;
};

static kiln_status vec_op(void *p) {
  struct vec_args *v = p;
  switch (v->kind) {
  case VEC_SUM:
    return kiln_reduce(v->q, KILN_REDUCE_SUM,
                       &(kiln_range){v->x, 0, v->n, KILN_F32},
                       &(kiln_range){v->out, 0, 1, KILN_F32}, 0, NULL, NULL);
  case VEC_NRM2:
    return kiln_reduce(v->q, KILN_REDUCE_NRM2,
                       &(kiln_range){v->x, 0, v->n, KILN_F32},
                       &(kiln_range){v->out, 0, 1, KILN_F32}, 0, NULL, NULL);
  case VEC_DOT:
    return kiln_dot(v->q, &(kiln_range){v->x, 0, v->n, KILN_F32},
                    &(kiln_range){v->y, 0, v->n, KILN_F32},
                    &(kiln_range){v->out, 0, 1, KILN_F32}, 0, NULL, NULL);
  case VEC_AXPY:
    return kiln_axpy(v->q, &(kiln_range){v->x, 0, v->n, KILN_F32},
                     &(kiln_range){v->y, 0, v->n, KILN_F32}, 0.5f, 0, NULL,
                     NULL);
  case VEC_SCALE:
    /* -1: every run flips x exactly, so the result stays checkable. */
    return kiln_scale(v->q, &(kiln_range){v->x, 0, v->n, KILN_F32}, -1.0f, 0,
                      NULL, NULL);
  }
  return KILN_ERR_INVALID_ARGUMENT;
}

static bool run_vector(const struct bench_env *env, struct bench_result *r,
                       enum vec_kind kind) {
  const size_t n = r->shape[0];
  bool ok = false;
  float *x = malloc(n * 4), *y = malloc(n * 4), *out = malloc(n * 4);
  struct vec_args v = {env->queue, kind, n, NULL, NULL, NULL};
  if (x == NULL || y == NULL || out == NULL) {
    snprintf(r->note, sizeof r->note, "out of host memory");
    goto done;
  }
  fill_random(x, n, 4);
  fill_random(y, n, 5);
  if ((v.x = upload(env, x, n, KILN_F32, r)) == NULL ||
      (v.y = upload(env, y, n, KILN_F32, r)) == NULL ||
      (v.out = upload(env, NULL, 1, KILN_F32, r)) == NULL)
    goto done;
  /* Bytes each op must move at least once. */
  double words = kind == VEC_SUM || kind == VEC_NRM2 ? 1.0
                 : kind == VEC_AXPY                  ? 3.0
                                                     : 2.0;
  if (!timed(env, r, vec_op, &v, words * 4.0 * (double)n, false))
    goto done;
  ok = true;
  if (!env->verify)
    goto done;
  /* axpy and scale ran 1 + runs times, in place. */
  double got = 0.0, want = 0.0, tol = 0.0;
  if (kind == VEC_AXPY || kind == VEC_SCALE) {
    kiln_buffer *res = kind == VEC_AXPY ? v.y : v.x;
    if (!download(env, res, out, n, KILN_F32, r)) {
      ok = false;
      goto done;
    }
    double times = kind == VEC_AXPY ? 1.0 + env->runs : 0.0;
    for (size_t i = 0; i < n; i++) {
      double sign = env->runs % 2 ? 1.0 : -1.0; /* (-1)^(1 + runs) */
      want = kind == VEC_AXPY ? (double)y[i] + times * 0.5 * (double)x[i]
                              : sign * (double)x[i];
      /* Each axpy rounds once: the error grows by u per run. */
      tol =
          (times + 1.0) * 2.0 * U * (fabs((double)y[i]) + times * 0.5) + 1e-30;
      if (fabs((double)out[i] - want) > tol) {
        snprintf(r->note, sizeof r->note, "element %zu = %.9g, reference %.9g",
                 i, (double)out[i], want);
        ok = false;
        break;
      }
    }
    r->verified = ok;
    goto done;
  }
  float res = 0.0f;
  if (!download(env, v.out, &res, 1, KILN_F32, r)) {
    ok = false;
    goto done;
  }
  got = res;
  double mag = 0.0;
  for (size_t i = 0; i < n; i++) {
    double t = kind == VEC_SUM    ? (double)x[i]
               : kind == VEC_NRM2 ? (double)x[i] * (double)x[i]
                                  : (double)x[i] * (double)y[i];
    want += t;
    mag += fabs(t);
  }
  /* Any summation order of n terms errs by at most (n - 1) u sum|t|; the
   * square root of nrm2 halves the relative error and adds half an ulp. */
  tol = 2.0 * (double)n * U * mag + 1e-30;
  if (kind == VEC_NRM2) {
    want = sqrt(want);
    tol = ((double)n * U + 2.0 * U) * want;
  }
  ok = fabs(got - want) <= tol;
  if (!ok)
    snprintf(r->note, sizeof r->note, "result %.9g, reference %.9g", got, want);
  r->verified = ok;
done:
  kiln_buffer_destroy(v.x);
  kiln_buffer_destroy(v.y);
  kiln_buffer_destroy(v.out);
  free(x);
  free(y);
  free(out);
  return ok;
}

static bool run_sum(const struct bench_env *e, struct bench_result *r) {
  return run_vector(e, r, VEC_SUM);
}
static bool run_nrm2(const struct bench_env *e, struct bench_result *r) {
  return run_vector(e, r, VEC_NRM2);
}
static bool run_dot(const struct bench_env *e, struct bench_result *r) {
  return run_vector(e, r, VEC_DOT);
}
static bool run_axpy(const struct bench_env *e, struct bench_result *r) {
  return run_vector(e, r, VEC_AXPY);
}
static bool run_scale(const struct bench_env *e, struct bench_result *r) {
  return run_vector(e, r, VEC_SCALE);
}

/* ---- the table ----------------------------------------------------------- */

const struct bench_op *bench_ops(size_t *count) {
  static const struct bench_op ops[] = {
      {"gemm",
       "f32",
       "N (N x N x N) or MxNxK",
       3,
       {{1024, 1024, 1024}, {2048, 2048, 2048}},
       run_gemm},
      {"gemm_packed",
       "f32",
       "N or MxNxK (B packed once: kiln_pack)",
       3,
       {{1024, 1024, 1024}, {0, 0, 0}},
       run_gemm},
      {"gemm_f16",
       "f16",
       "N or MxNxK (f16 A, B; f32 C)",
       3,
       {{1024, 1024, 1024}, {0, 0, 0}},
       run_gemm},
      {"gemm_bf16",
       "bf16",
       "N or MxNxK (bf16 A, B; f32 C)",
       3,
       {{1024, 1024, 1024}, {0, 0, 0}},
       run_gemm},
      {"transpose",
       "f32",
       "N (N x N) or RxC",
       2,
       {{4096, 4096, 0}, {0, 0, 0}},
       run_transpose},
      {"sum", "f32", "elements", 1, {{1u << 24, 0, 0}, {0, 0, 0}}, run_sum},
      {"dot", "f32", "elements", 1, {{1u << 24, 0, 0}, {0, 0, 0}}, run_dot},
      {"nrm2", "f32", "elements", 1, {{1u << 24, 0, 0}, {0, 0, 0}}, run_nrm2},
      {"axpy", "f32", "elements", 1, {{1u << 24, 0, 0}, {0, 0, 0}}, run_axpy},
      {"scale", "f32", "elements", 1, {{1u << 24, 0, 0}, {0, 0, 0}}, run_scale},
      {"reduce_rows",
       "f32",
       "R (R x 1024) or RxC",
       2,
       {{4096, 1024, 0}, {0, 0, 0}},
       bench_run_rows},
      {"softmax",
       "f32",
       "R (R x 1024) or RxC",
       2,
       {{4096, 1024, 0}, {0, 0, 0}},
       bench_run_rows},
      {"layernorm",
       "f32",
       "R (R x 1024) or RxC",
       2,
       {{4096, 1024, 0}, {0, 0, 0}},
       bench_run_rows},
      {"launch",
       "f32",
       "elements of the tiny op",
       1,
       {{1024, 0, 0}, {0, 0, 0}},
       bench_run_launch},
      {"pool",
       "u8",
       "bytes per buffer",
       1,
       {{4096, 0, 0}, {64u << 10, 0, 0}, {1u << 20, 0, 0}, {16u << 20, 0, 0}},
       bench_run_pool},
      {"h2d", "u8", "bytes", 1, {{64u << 20, 0, 0}, {0, 0, 0}},
       bench_run_h2d},
      {"d2h", "u8", "bytes", 1, {{64u << 20, 0, 0}, {0, 0, 0}},
       bench_run_d2h},
      {"sequence", "f32", "elements per op (100 ops)", 1,
       {{4096, 0, 0}, {0, 0, 0}}, bench_run_sequence},
      {"pipeline", "f32", "elements per batch (64 batches)", 1,
       {{1u << 18, 0, 0}, {0, 0, 0}}, bench_run_pipeline},
  };
  *count = sizeof ops / sizeof ops[0];
  return ops;
}
