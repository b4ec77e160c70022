/* kiln tune's bandwidth-bound ops with small spaces: the GPU family's
 * transpose (and the CPU family's, transpose_cpu), the reductions (timed
 * on sum, dot and nrm2) and elementwise (timed on axpy and scale), with
 * their correctness gates and timings.
 *
 * The gates run the op on awkward shapes (1, primes, lengths past whole
 * work-groups of the largest point, offsets both off and on every vector
 * width, f32, f16 and bf16) and compare every element, and the guard
 * elements around the output, against a float64 host reference:
 * - transpose moves bits: exact;
 * - elementwise: one f32 rounding (fma for axpy) and the store's rounding
 *   to the storage format: within an ulp of the format (relative 2^-23,
 *   2^-10, 2^-7), plus f16's subnormal step;
 * - reductions: the bound of tests/test_op_reduce.c, (n/16 + 2^13) u
 *   sum|x| for sum and dot (u = 2^-24), half that relative for nrm2, exact
 *   for max and argmax (first index of equal maxima). */
#include "../commands.h"
#include "tune.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- transpose ------------------------------------------------------------ */

struct tcase {
  size_t rows, cols, ldx_pad, ldy_pad, x_off, y_off;
  kiln_dtype dtype;
};
static const struct tcase tcases[] = {
    {1, 1, 0, 0, 0, 0, KILN_F32},      {37, 45, 3, 5, 1, 2, KILN_F32},
    {129, 67, 0, 1, 7, 0, KILN_F16},   {65, 130, 2, 0, 8, 8, KILN_BF16},
    {200, 71, 0, 0, 0, 3, KILN_U32},   {3, 257, 1, 1, 5, 1, KILN_F32},
};

static bool transpose_case(const tune_case_env *env, const void *tc) {
  const struct tcase *t = tc;
  kiln_context *ctx = env->ctx;
  kiln_queue *q = env->q;
  char *why = env->why;
  const size_t size = env->why_size;
  const size_t es = kiln_dtype_size(t->dtype), ldx = t->cols + t->ldx_pad,
               ldy = t->rows + t->ldy_pad;
  const size_t nx = t->x_off + (t->rows - 1) * ldx + t->cols + 3,
               ny = t->y_off + (t->cols - 1) * ldy + t->rows + 3;
  kiln_buffer *dx = NULL, *dy = NULL;
  void *x = tune_random_data(ctx, q, KILN_F32, nx * es / 4 + 1, 7, &dx);
  void *y0 = tune_random_data(ctx, q, KILN_F32, ny * es / 4 + 1, 9, &dy);
  void *y = NULL;
  bool ok = false;
  if (x == NULL || y0 == NULL) {
    snprintf(why, size, "%s", kiln_last_error());
  } else if (kiln_transpose(q,
                            &(kiln_matrix){.buffer = dx,
                                           .offset = t->x_off,
                                           .rows = t->rows,
                                           .cols = t->cols,
                                           .ld = ldx,
                                           .dtype = t->dtype},
                            &(kiln_matrix){.buffer = dy,
                                           .offset = t->y_off,
                                           .rows = t->cols,
                                           .cols = t->rows,
                                           .ld = ldy,
                                           .dtype = t->dtype},
                            0, NULL, NULL) != KILN_OK) {
    snprintf(why, size, "%s", kiln_last_error());
  } else if (!tune_finish(q, env->run_timeout_s, env->timed_out, why, size)) {
    /* why says it */
  } else if (tune_hook(env->hooks, env->params, q, dy, ny * es),
             (y = tune_download(q, &(kiln_range){dy, 0, ny, t->dtype}, why, size)) != NULL) {
    ok = true;
    for (size_t r = 0; r < t->rows && ok; r++)
      for (size_t c = 0; c < t->cols && ok; c++) {
        const size_t yi = t->y_off + c * ldy + r;
        ok = memcmp((char *)y + yi * es,
                    (char *)x + (t->x_off + r * ldx + c) * es, es) == 0;
        if (!ok)
          snprintf(why, size, "transpose %zux%zu %s: y[%zu][%zu] wrong",
                   t->rows, t->cols, kiln_dtype_name(t->dtype), c, r);
      }
    /* Outside the transposed elements y is untouched. */
    for (size_t i = 0; i < ny && ok; i++) {
      const size_t e = i - t->y_off;
      const bool inside =
          i >= t->y_off && e / ldy < t->cols && e % ldy < t->rows;
      if (!inside && memcmp((char *)y + i * es, (char *)y0 + i * es, es)) {
        snprintf(why, size, "transpose %zux%zu: element %zu outside y changed",
                 t->rows, t->cols, i);
        ok = false;
      }
    }
  }
  free(x);
  free(y0);
  free(y);
  kiln_buffer_destroy(dx);
  kiln_buffer_destroy(dy);
  return ok;
}

bool tune_gate_transpose(kiln_context *ctx, kiln_queue *q, const char *params,
                         const tune_hooks *hooks, double run_timeout_s,
                         double deadline, double *seconds, bool *timed_out,
                         char *why, size_t size) {
  const tune_case_env env = {ctx, q, params, hooks, run_timeout_s,
                             timed_out, why, size};
  return tune_run_cases(&env, tcases, sizeof tcases / sizeof tcases[0],
                        sizeof tcases[0], transpose_case, deadline, seconds);
}

/* ---- elementwise ---------------------------------------------------------- */

enum { EW_AXPY, EW_ADD, EW_SCALE, EW_NEG };
static const char *const ew_names[] = {"axpy", "add", "scale", "neg"};

/* Op on n elements: y (at yo) from x (at xo), as the kernels compute it. */
static bool ew_case(kiln_context *ctx, kiln_queue *q, int op, kiln_dtype dt,
                    size_t n, size_t xo, size_t yo, const char *params,
                    const tune_hooks *hooks, double run_timeout_s,
                    bool *timed_out, char *why, size_t size) {
  const size_t total = yo + n + 5, es = kiln_dtype_size(dt);
  kiln_buffer *dx = NULL, *dy = NULL;
  void *x = tune_random_data(ctx, q, dt, total, 3 + (uint32_t)n, &dx);
  void *y0 = tune_random_data(ctx, q, dt, total, 4 + (uint32_t)op, &dy);
  void *y = NULL;
  kiln_status s = x && y0 ? KILN_OK : KILN_ERR_OUT_OF_HOST_MEMORY;
  if (s == KILN_OK && op == EW_AXPY)
    s = kiln_axpy(q, &(kiln_range){dx, xo, n, dt}, &(kiln_range){dy, yo, n, dt},
                  1.5f, 0, NULL, NULL);
  else if (s == KILN_OK && op == EW_ADD)
    s = kiln_binary(q, KILN_BINARY_ADD, &(kiln_range){dx, xo, n, dt},
                    &(kiln_range){dx, yo, n, dt}, &(kiln_range){dy, yo, n, dt},
                    0, NULL, NULL);
  else if (s == KILN_OK && op == EW_SCALE)
    s = kiln_scale(q, &(kiln_range){dy, yo, n, dt}, -0.75f, 0, NULL, NULL);
  else if (s == KILN_OK)
    s = kiln_unary(q, KILN_UNARY_NEG, &(kiln_range){dx, xo, n, dt},
                   &(kiln_range){dy, yo, n, dt}, 0, NULL, NULL);
  bool ok = false;
  if (s != KILN_OK)
    snprintf(why, size, "%s", x && y0 ? kiln_last_error() : "out of memory");
  else if (!tune_finish(q, run_timeout_s, timed_out, why, size))
    ok = false; /* why says it */
  else if (tune_hook(hooks, params, q, dy, total * es),
           (y = tune_download(q, &(kiln_range){dy, 0, total, dt}, why, size)) != NULL) {
    const double rel = dt == KILN_F32 ? 0x1p-23 : dt == KILN_F16 ? 0x1p-10
                                                                 : 0x1p-7;
    const double abs_tol = dt == KILN_F16 ? 0x1p-24 : 1e-38;
    ok = true;
    for (size_t i = 0; i < total && ok; i++) {
      const bool inside = i >= yo && i < yo + n;
      const double a = inside ? tune_get(dt, x, xo + i - yo) : 0.0,
                   b = tune_get(dt, y0, i);
      double want = b;
      if (inside)
        want = op == EW_AXPY    ? 1.5 * a + b
               : op == EW_ADD   ? a + tune_get(dt, x, i)
               : op == EW_SCALE ? -0.75 * b
                                : -a;
      const double got = tune_get(dt, y, i);
      if (!(fabs(got - want) <= (inside ? rel * fabs(want) + abs_tol : 0.0))) {
        snprintf(why, size,
                 "%s %s n=%zu offsets %zu, %zu: y[%zu] = %.9g, want %.9g",
                 ew_names[op], kiln_dtype_name(dt), n, xo, yo, i, got, want);
        ok = false;
      }
    }
  }
  free(x);
  free(y0);
  free(y);
  kiln_buffer_destroy(dx);
  kiln_buffer_destroy(dy);
  return ok;
}

bool tune_gate_elementwise(kiln_context *ctx, kiln_queue *q,
                             const char *params, const tune_hooks *hooks,
                             double run_timeout_s, double deadline,
                             double *seconds, bool *timed_out, char *why,
                             size_t size) {
  /* 70001: past whole groups of the largest point (65536 elements). */
  static const size_t sizes[] = {1, 37, 70001};
  static const size_t offs[][2] = {{3, 5}, {8, 16}};
  const double t0 = tools_now();
  bool ok = true;
  *timed_out = false;
  for (size_t d = 0; d < 3 && ok; d++)
    for (int op = EW_AXPY; op <= EW_NEG && ok; op++)
      for (size_t i = 0; i < 3 && ok; i++)
        for (size_t o = 0; o < 2 && ok; o++)
          ok = !tune_past(deadline, why) &&
               ew_case(ctx, q, op, tune_float_types[d], sizes[i], offs[o][0],
                       offs[o][1], params, hooks, run_timeout_s, timed_out,
                       why, size);
  *seconds = tools_now() - t0;
  return ok;
}

/* ---- reductions ----------------------------------------------------------- */

/* kiln_reduce's op (0..5: sum, min, max, mean, nrm2, argmax) or dot (6) of
 * n elements of dt at offset off, checked. */
static bool reduce_case(kiln_context *ctx, kiln_queue *q, int op,
                        kiln_dtype dt, size_t n, size_t off,
                        const char *params, const tune_hooks *hooks,
                        double run_timeout_s, bool *timed_out, char *why,
                        size_t size) {
  static const char *const names[] = {"sum",  "min",    "max", "mean",
                                      "nrm2", "argmax", "dot"};
  kiln_buffer *dx = NULL, *dy = NULL, *dr = NULL;
  void *x = tune_random_data(ctx, q, dt, off + n, 11 + (uint32_t)n, &dx);
  void *y = op == 6 ? tune_random_data(ctx, q, dt, off + n, 12, &dy) : x;
  uint32_t res[3] = {0xdeadbeefu, 0xdeadbeefu, 0xdeadbeefu};
  kiln_status s = x && y ? kiln_buffer_create(ctx, sizeof res, 0, &dr)
                         : KILN_ERR_OUT_OF_HOST_MEMORY;
  if (s == KILN_OK)
    s = kiln_buffer_write_sync(q, res, &(kiln_range){dr, 0, 3, KILN_U32});
  if (s == KILN_OK && op == 6)
    s = kiln_dot(q, &(kiln_range){dx, off, n, dt},
                 &(kiln_range){dy, off, n, dt},
                 &(kiln_range){dr, 1, 1, KILN_F32}, 0, NULL, NULL);
  else if (s == KILN_OK)
    s = kiln_reduce(q, (kiln_reduce_op)op, &(kiln_range){dx, off, n, dt},
                    &(kiln_range){dr, 1, 1,
                                  (kiln_reduce_op)op == KILN_REDUCE_ARGMAX
                                      ? KILN_U32
                                      : KILN_F32},
                    0, NULL, NULL);
  const bool ran = s == KILN_OK &&
                   tune_finish(q, run_timeout_s, timed_out, why, size);
  if (ran) {
    tune_hook(hooks, params, q, dr, sizeof res);
    s = kiln_buffer_read_sync(q, &(kiln_range){dr, 0, 3, KILN_U32}, res);
  }
  bool ok = ran && s == KILN_OK && res[0] == 0xdeadbeefu &&
            res[2] == 0xdeadbeefu;
  if (s != KILN_OK)
    snprintf(why, size, "%s", x && y ? kiln_last_error() : "out of memory");
  else if (!ran)
    ok = false; /* why says it */
  else if (!ok)
    snprintf(why, size, "%s n=%zu: wrote outside its result", names[op], n);
  if (ok) {
    double sum = 0, sabs = 0, sq = 0, best = -INFINITY;
    size_t arg = 0;
    for (size_t i = 0; i < n; i++) {
      const double v = tune_get(dt, x, off + i);
      const double t = op == 6 ? v * tune_get(dt, y, off + i) : v;
      sum += t;
      sabs += fabs(t);
      sq += v * v;
      if (v > best) {
        best = v;
        arg = i;
      }
    }
    float got;
    memcpy(&got, &res[1], 4);
    const double u = 0x1p-24, d = (double)n / 16 + 8192;
    double want = sum, tol = (d + 1) * u * sabs;
    if (op == KILN_REDUCE_MEAN) {
      want = sum / (double)n;
      tol = tol / (double)n + u * fabs(want);
    } else if (op == KILN_REDUCE_NRM2) {
      want = sqrt(sq);
      tol = (d / 2 + 3) * u * want;
    } else if (op == KILN_REDUCE_MAX) {
      want = best;
      tol = 0;
    } else if (op == KILN_REDUCE_MIN) {
      want = best;
      for (size_t i = 0; i < n; i++)
        want = fmin(want, tune_get(dt, x, off + i));
      tol = 0;
    }
    if (op == KILN_REDUCE_ARGMAX)
      ok = res[1] == arg;
    else
      ok = fabs(got - want) <= tol;
    if (!ok)
      snprintf(why, size, "%s %s n=%zu offset %zu: got %.9g (%u), want %.9g",
               names[op], kiln_dtype_name(dt), n, off, (double)got, res[1],
               op == KILN_REDUCE_ARGMAX ? (double)arg : want);
  }
  if (y != x)
    free(y);
  free(x);
  kiln_buffer_destroy(dx);
  kiln_buffer_destroy(dy);
  kiln_buffer_destroy(dr);
  return ok;
}

bool tune_gate_reduce(kiln_context *ctx, kiln_queue *q, const char *params,
                      const tune_hooks *hooks, double run_timeout_s,
                      double deadline, double *seconds, bool *timed_out,
                      char *why, size_t size) {
  static const size_t sizes[] = {1, 37, 4099, 70001};
  const double t0 = tools_now();
  bool ok = true;
  *timed_out = false;
  for (size_t d = 0; d < 3 && ok; d++)
    for (int op = 0; op <= 6 && ok; op++)
      for (size_t i = 0; i < 4 && ok; i++)
        ok = !tune_past(deadline, why) &&
             reduce_case(ctx, q, op, tune_float_types[d], sizes[i], i % 2 ? 8 : 3,
                         params, hooks, run_timeout_s, timed_out, why, size);
  /* 2^22 + 3 in f32: segments of at least 65536 elements on devices of up
   * to 2 compute units (32 partials each), whole passes of every point. */
  static const int long_ops[] = {KILN_REDUCE_SUM, KILN_REDUCE_NRM2,
                                 KILN_REDUCE_ARGMAX, 6};
  for (size_t i = 0; i < 4 && ok; i++)
    ok = !tune_past(deadline, why) &&
         reduce_case(ctx, q, long_ops[i], KILN_F32, (1u << 22) + 3,
                     i % 2 ? 8 : 3, params, hooks, run_timeout_s, timed_out,
                     why, size);
  *seconds = tools_now() - t0;
  return ok;
}

/* ---- timing --------------------------------------------------------------- */

static kiln_status run_transpose(kiln_queue *q, const size_t *z,
                                 kiln_buffer *a, kiln_buffer *b,
                                 kiln_buffer *c) {
  (void)c;
  return kiln_transpose(
      q,
      &(kiln_matrix){
          .buffer = a, .rows = z[0], .cols = z[1], .dtype = KILN_F32},
      &(kiln_matrix){
          .buffer = b, .rows = z[1], .cols = z[0], .dtype = KILN_F32},
      0, NULL, NULL);
}

/* sum, dot and nrm2 of z[0] elements. */
static kiln_status run_reduce(kiln_queue *q, const size_t *z, kiln_buffer *a,
                              kiln_buffer *b, kiln_buffer *c) {
  kiln_status s =
      kiln_reduce(q, KILN_REDUCE_SUM, &(kiln_range){a, 0, z[0], KILN_F32},
                  &(kiln_range){c, 0, 1, KILN_F32}, 0, NULL, NULL);
  if (s == KILN_OK)
    s = kiln_dot(q, &(kiln_range){a, 0, z[0], KILN_F32},
                 &(kiln_range){b, 0, z[0], KILN_F32},
                 &(kiln_range){c, 1, 1, KILN_F32}, 0, NULL, NULL);
  if (s == KILN_OK)
    s = kiln_reduce(q, KILN_REDUCE_NRM2, &(kiln_range){a, 0, z[0], KILN_F32},
                    &(kiln_range){c, 2, 1, KILN_F32}, 0, NULL, NULL);
  return s;
}

/* axpy and scale of z[0] elements. */
static kiln_status run_elementwise(kiln_queue *q, const size_t *z,
                                   kiln_buffer *a, kiln_buffer *b,
                                   kiln_buffer *c) {
  (void)c;
  kiln_status s =
      kiln_axpy(q, &(kiln_range){a, 0, z[0], KILN_F32},
                &(kiln_range){b, 0, z[0], KILN_F32}, 0.5f, 0, NULL, NULL);
  if (s == KILN_OK)
    s = kiln_scale(q, &(kiln_range){b, 0, z[0], KILN_F32}, 0.5f, 0, NULL, NULL);
  return s;
}

double tune_time_transpose(kiln_context *ctx, kiln_queue *q,
                             const size_t *z, int runs, double stop_above,
                             double deadline, double run_timeout_s,
                             const tune_hooks *hooks, const char *params) {
  return tune_time_f32(ctx, q, z, z[0] * z[1], run_transpose, runs, stop_above,
                   deadline, run_timeout_s, hooks, params);
}
double tune_time_reduce(kiln_context *ctx, kiln_queue *q, const size_t *z,
                          int runs, double stop_above, double deadline,
                          double run_timeout_s, const tune_hooks *hooks,
                          const char *params) {
  return tune_time_f32(ctx, q, z, z[0], run_reduce, runs, stop_above, deadline,
                   run_timeout_s, hooks, params);
}
double tune_time_elementwise(kiln_context *ctx, kiln_queue *q,
                               const size_t *z, int runs, double stop_above,
                               double deadline, double run_timeout_s,
                               const tune_hooks *hooks, const char *params) {
  return tune_time_f32(ctx, q, z, z[0], run_elementwise, runs, stop_above,
                   deadline, run_timeout_s, hooks, params);
}

/* Bytes read and written once each, as kiln bench counts them. */
double tune_work_transpose(const size_t *z) {
  return 8.0 * (double)z[0] * (double)z[1];
}
double tune_work_reduce(const size_t *z) { return 16.0 * (double)z[0]; }
double tune_work_elementwise(const size_t *z) { return 20.0 * (double)z[0]; }
