/* The ops kiln tune searches: GEMM (its gate and timing in tune_gate.c)
 * and the GPU family's bandwidth-bound kernels with small spaces
 * (transpose; the reductions, timed on sum, dot and nrm2; elementwise,
 * timed on axpy and scale), and the CPU family's GEMM and transpose, with
 * their correctness gates and timings.
 *
 * The bandwidth gates run the op on awkward shapes (1, primes, lengths past
 * whole work-groups of the largest point, offsets both off and on every
 * vector width, f32, f16 and bf16) and compare every element, and the
 * guard elements around the output, against a float64 host reference:
 * - transpose moves bits: exact;
 * - elementwise: one f32 rounding (fma for axpy) and the store's rounding
 *   to the storage format: within an ulp of the format (relative 2^-23,
 *   2^-10, 2^-7), plus f16's subnormal step;
 * - reductions: the bound of tests/test_op_reduce.c, (n/16 + 2^13) u
 *   sum|x| for sum and dot (u = 2^-24), half that relative for nrm2, exact
 *   for max and argmax (first index of equal maxima).
 * Inputs are exact in every storage format (bf16: f32 cut to 16 bits; f16:
 * multiples of 2^-10 below 2), so the reference needs no rounding. */
#include "../commands.h"
#include "tune.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---- host data in any storage format ------------------------------------- */

static const kiln_dtype float_types[] = {KILN_F32, KILN_F16, KILN_BF16};

static uint32_t lcg(uint32_t *s) {
  *s = *s * 1664525u + 1013904223u;
  return *s >> 8;
}

/* A value in [-2, 2) exact in dt (see the opening comment). */
static float draw(uint32_t *s, kiln_dtype dt) {
  const int k = (int)(lcg(s) % 4096) - 2048;
  if (dt == KILN_F16)
    return (float)k / 1024.0f;
  float v = (float)lcg(s) / (float)(1u << 24) * 4.0f - 2.0f;
  if (dt == KILN_BF16) {
    uint32_t u;
    memcpy(&u, &v, 4);
    u &= 0xffff0000u;
    memcpy(&v, &u, 4);
  }
  return v;
}

/* Store v (exact in dt) as element i of buf. */
static void put(kiln_dtype dt, void *buf, size_t i, float v) {
  if (dt == KILN_F32) {
    memcpy((char *)buf + 4 * i, &v, 4);
    return;
  }
  uint16_t h;
  if (dt == KILN_F16)
    kiln_f32_to_f16(&v, &h, 1);
  else
    kiln_f32_to_bf16(&v, &h, 1);
  memcpy((char *)buf + 2 * i, &h, 2);
}

static double get(kiln_dtype dt, const void *buf, size_t i) {
  float v;
  if (dt == KILN_F32) {
    memcpy(&v, (const char *)buf + 4 * i, 4);
    return v;
  }
  uint16_t h;
  memcpy(&h, (const char *)buf + 2 * i, 2);
  if (dt == KILN_F16)
    kiln_f16_to_f32(&h, &v, 1);
  else
    kiln_bf16_to_f32(&h, &v, 1);
  return v;
}

/* count random elements of dt, and a device buffer holding them. */
static void *random_data(kiln_context *ctx, kiln_queue *q, kiln_dtype dt,
                         size_t count, uint32_t seed, kiln_buffer **out) {
  const size_t bytes = count * kiln_dtype_size(dt);
  void *h = malloc(bytes);
  *out = NULL;
  if (h == NULL)
    return NULL;
  for (size_t i = 0; i < count; i++)
    put(dt, h, i, draw(&seed, dt));
  if (kiln_buffer_create(ctx, bytes, 0, out) != KILN_OK ||
      kiln_buffer_write_sync(q, h, &(kiln_range){*out, 0, count, dt}) != KILN_OK) {
    kiln_buffer_destroy(*out);
    *out = NULL;
    free(h);
    return NULL;
  }
  return h;
}

/* The device buffer's contents, or NULL (why set). */
static void *download(kiln_queue *q, const kiln_range *src, char *why,
                      size_t size) {
  void *h = malloc(src->count * kiln_dtype_size(src->dtype));
  if (h == NULL || kiln_buffer_read_sync(q, src, h) != KILN_OK) {
    snprintf(why, size, "%s", h ? kiln_last_error() : "out of host memory");
    free(h);
    return NULL;
  }
  return h;
}

/* Wait for everything enqueued on q, at most run_timeout_s (tune_wait):
 * false with why on a failure, or with *timed_out when it still runs. */
static bool finish(kiln_queue *q, double run_timeout_s, bool *timed_out,
                   char *why, size_t size) {
  kiln_event *ev = NULL;
  const bool ok = kiln_queue_marker(q, 0, NULL, &ev) == KILN_OK &&
                  tune_wait(ev, run_timeout_s, timed_out);
  kiln_event_release(ev);
  if (!ok && *timed_out)
    snprintf(why, size, "run timeout (a launch ran past %g s)",
             run_timeout_s);
  else if (!ok)
    snprintf(why, size, "%s", kiln_last_error());
  return ok;
}

/* The test hook (tune.h) on an op's output buffer of bytes. */
static void hook(const tune_hooks *hooks, const char *params, kiln_queue *q,
                 kiln_buffer *out, size_t bytes) {
  if (hooks != NULL && hooks->after_gemm != NULL)
    hooks->after_gemm(hooks->user, params, q, out, bytes / 4);
}

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

static bool transpose_case(kiln_context *ctx, kiln_queue *q,
                           const struct tcase *t, const char *params,
                           const tune_hooks *hooks, double run_timeout_s,
                           bool *timed_out, char *why, size_t size) {
  const size_t es = kiln_dtype_size(t->dtype), ldx = t->cols + t->ldx_pad,
               ldy = t->rows + t->ldy_pad;
  const size_t nx = t->x_off + (t->rows - 1) * ldx + t->cols + 3,
               ny = t->y_off + (t->cols - 1) * ldy + t->rows + 3;
  kiln_buffer *dx = NULL, *dy = NULL;
  void *x = random_data(ctx, q, KILN_F32, nx * es / 4 + 1, 7, &dx);
  void *y0 = random_data(ctx, q, KILN_F32, ny * es / 4 + 1, 9, &dy);
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
  } else if (!finish(q, run_timeout_s, timed_out, why, size)) {
    /* why says it */
  } else if (hook(hooks, params, q, dy, ny * es),
             (y = download(q, &(kiln_range){dy, 0, ny, t->dtype}, why, size)) != NULL) {
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

/* The deadline (0: none) has come: the gate's "" why. */
static bool past(double deadline, char *why) {
  if (deadline > 0.0 && tools_now() >= deadline) {
    why[0] = '\0';
    return true;
  }
  return false;
}

static bool gate_transpose(kiln_context *ctx, kiln_queue *q,
                           const char *params, const tune_hooks *hooks,
                           double run_timeout_s, double deadline,
                           double *seconds, bool *timed_out, char *why,
                           size_t size) {
  const double t0 = tools_now();
  bool ok = true;
  *timed_out = false;
  for (size_t i = 0; i < sizeof tcases / sizeof tcases[0] && ok; i++)
    ok = !past(deadline, why) &&
         transpose_case(ctx, q, &tcases[i], params, hooks, run_timeout_s,
                        timed_out, why, size);
  *seconds = tools_now() - t0;
  return ok;
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
  void *x = random_data(ctx, q, dt, total, 3 + (uint32_t)n, &dx);
  void *y0 = random_data(ctx, q, dt, total, 4 + (uint32_t)op, &dy);
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
  else if (!finish(q, run_timeout_s, timed_out, why, size))
    ok = false; /* why says it */
  else if (hook(hooks, params, q, dy, total * es),
           (y = download(q, &(kiln_range){dy, 0, total, dt}, why, size)) != NULL) {
    const double rel = dt == KILN_F32 ? 0x1p-23 : dt == KILN_F16 ? 0x1p-10
                                                                 : 0x1p-7;
    const double abs_tol = dt == KILN_F16 ? 0x1p-24 : 1e-38;
    ok = true;
    for (size_t i = 0; i < total && ok; i++) {
      const bool inside = i >= yo && i < yo + n;
      const double a = inside ? get(dt, x, xo + i - yo) : 0.0,
                   b = get(dt, y0, i);
      double want = b;
      if (inside)
        want = op == EW_AXPY    ? 1.5 * a + b
               : op == EW_ADD   ? a + get(dt, x, i)
               : op == EW_SCALE ? -0.75 * b
                                : -a;
      const double got = get(dt, y, i);
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

static bool gate_elementwise(kiln_context *ctx, kiln_queue *q,
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
          ok = !past(deadline, why) &&
               ew_case(ctx, q, op, float_types[d], sizes[i], offs[o][0],
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
  void *x = random_data(ctx, q, dt, off + n, 11 + (uint32_t)n, &dx);
  void *y = op == 6 ? random_data(ctx, q, dt, off + n, 12, &dy) : x;
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
                   finish(q, run_timeout_s, timed_out, why, size);
  if (ran) {
    hook(hooks, params, q, dr, sizeof res);
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
      const double v = get(dt, x, off + i);
      const double t = op == 6 ? v * get(dt, y, off + i) : v;
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
        want = fmin(want, get(dt, x, off + i));
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

static bool gate_reduce(kiln_context *ctx, kiln_queue *q, const char *params,
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
        ok = !past(deadline, why) &&
             reduce_case(ctx, q, op, float_types[d], sizes[i], i % 2 ? 8 : 3,
                         params, hooks, run_timeout_s, timed_out, why, size);
  /* 2^22 + 3 in f32: segments of at least 65536 elements on devices of up
   * to 2 compute units (32 partials each), whole passes of every point. */
  static const int long_ops[] = {KILN_REDUCE_SUM, KILN_REDUCE_NRM2,
                                 KILN_REDUCE_ARGMAX, 6};
  for (size_t i = 0; i < 4 && ok; i++)
    ok = !past(deadline, why) &&
         reduce_case(ctx, q, long_ops[i], KILN_F32, (1u << 22) + 3,
                     i % 2 ? 8 : 3, params, hooks, run_timeout_s, timed_out,
                     why, size);
  *seconds = tools_now() - t0;
  return ok;
}

/* ---- convolution ---------------------------------------------------------- */

/* kiln_conv2d's forward pass (the GPU family's implicit GEMM, conv2d's
 * space) on awkward shapes: 1x1 images, primes, channels and positions
 * past every tile, stride, padding, dilation, groups and depthwise, f32,
 * f16 and bf16, bias + ReLU, beta over the old y, with guards around y.
 * Tolerance as tests/test_op_conv.c's: 2 (kk + 10) u S, S the sum of the
 * terms' magnitudes (u = 2^-24: products of exact inputs accumulated in
 * f32 by fma). */
struct ccase {
  size_t n, c, h, w, oc, kh, kw, sh, sw, ph, pw, dh, dw, groups;
  kiln_dtype dtype;
  bool relu_bias;
  float beta;
};
static const struct ccase ccases[] = {
    {1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 1, 1, 1, KILN_F32, true, 0.0f},
    {3, 3, 7, 11, 5, 3, 3, 1, 1, 1, 1, 1, 1, 1, KILN_F32, true, 0.0f},
    {2, 37, 13, 11, 70, 3, 3, 1, 1, 1, 1, 1, 1, 1, KILN_F32, true, 0.5f},
    {2, 4, 9, 8, 6, 3, 2, 2, 1, 0, 1, 2, 1, 2, KILN_F16, false, 0.5f},
    {2, 6, 10, 10, 6, 3, 3, 1, 1, 1, 1, 1, 1, 6, KILN_BF16, true, 0.0f},
    {1, 3, 5, 7, 4, 1, 1, 3, 2, 0, 0, 1, 1, 1, KILN_F32, false, 0.0f},
};

static bool conv_case(kiln_context *ctx, kiln_queue *q, const struct ccase *t,
                      const char *params, const tune_hooks *hooks,
                      double run_timeout_s, bool *timed_out, char *why,
                      size_t size) {
  const kiln_dtype dt = t->dtype;
  const size_t oh = (t->h + 2 * t->ph - t->dh * (t->kh - 1) - 1) / t->sh + 1,
               ow = (t->w + 2 * t->pw - t->dw * (t->kw - 1) - 1) / t->sw + 1,
               cg = t->c / t->groups, ocg = t->oc / t->groups,
               kk = cg * t->kh * t->kw, xn = t->n * t->c * t->h * t->w,
               wn = t->oc * kk, yn = t->n * t->oc * oh * ow, yo = 3,
               ytotal = yn + 6;
  kiln_buffer *dx = NULL, *dw = NULL, *db = NULL, *dy = NULL;
  void *x = random_data(ctx, q, dt, xn, 21, &dx);
  void *w = random_data(ctx, q, dt, wn, 22, &dw);
  void *b = random_data(ctx, q, KILN_F32, t->oc, 23, &db);
  void *y0 = random_data(ctx, q, KILN_F32, ytotal, 24, &dy);
  void *y = NULL;
  bool ok = false;
  kiln_conv2d_params p = {t->sh, t->sw, t->ph, t->pw, t->dh, t->dw,
                          t->groups};
  kiln_range bias = {db, 0, t->oc, KILN_F32};
  kiln_epilogue e = {1.0f, t->beta, t->relu_bias ? &bias : NULL,
                     t->relu_bias ? KILN_ACT_RELU : KILN_ACT_NONE};
  if (x == NULL || w == NULL || b == NULL || y0 == NULL) {
    snprintf(why, size, "%s", kiln_last_error());
  } else if (kiln_conv2d(q,
                         &(kiln_image){.buffer = dx, .n = t->n, .c = t->c,
                                       .h = t->h, .w = t->w, .dtype = dt},
                         &(kiln_image){.buffer = dw, .n = t->oc, .c = cg,
                                       .h = t->kh, .w = t->kw, .dtype = dt},
                         &(kiln_image){.buffer = dy, .offset = yo, .n = t->n,
                                       .c = t->oc, .h = oh, .w = ow,
                                       .dtype = KILN_F32},
                         &p, &e, 0, NULL, NULL) != KILN_OK) {
    snprintf(why, size, "%s", kiln_last_error());
  } else if (!finish(q, run_timeout_s, timed_out, why, size)) {
    /* why says it */
  } else if (hook(hooks, params, q, dy, ytotal * 4),
             (y = download(q, &(kiln_range){dy, 0, ytotal, KILN_F32}, why,
                           size)) != NULL) {
    ok = true;
    for (size_t i = 0; i < ytotal && ok; i++) {
      const double old = get(KILN_F32, y0, i), got = get(KILN_F32, y, i);
      double want = old, tol = 0.0;
      if (i >= yo && i < yo + yn) {
        const size_t j = i - yo, ox = j % ow, oy = j / ow % oh,
                     o = j / (ow * oh) % t->oc, img = j / (ow * oh * t->oc),
                     g = o / ocg;
        double acc = 0.0, mag = 0.0;
        for (size_t ci = 0; ci < cg; ci++)
          for (size_t ky = 0; ky < t->kh; ky++)
            for (size_t kx = 0; kx < t->kw; kx++) {
              const long iy = (long)(oy * t->sh + ky * t->dh) - (long)t->ph,
                         ix = (long)(ox * t->sw + kx * t->dw) - (long)t->pw;
              if (iy < 0 || ix < 0 || iy >= (long)t->h || ix >= (long)t->w)
                continue;
              const double v =
                  get(dt, x,
                      ((img * t->c + g * cg + ci) * t->h + (size_t)iy) * t->w +
                          (size_t)ix) *
                  get(dt, w, ((o * cg + ci) * t->kh + ky) * t->kw + kx);
              acc += v;
              mag += fabs(v);
            }
        const double bv = t->relu_bias ? get(KILN_F32, b, o) : 0.0;
        want = acc + t->beta * old + bv;
        mag += fabs(t->beta * old) + fabs(bv);
        if (t->relu_bias && want < 0.0)
          want = 0.0;
        tol = 2.0 * ((double)kk + 10) * 0x1p-24 * mag + 1e-38;
      }
      if (!(fabs(got - want) <= tol)) {
        snprintf(why, size,
                 "conv2d %s n%zu c%zu %zux%zu oc%zu k%zux%zu g%zu: y[%zu] = "
                 "%.9g, want %.9g%s",
                 kiln_dtype_name(dt), t->n, t->c, t->h, t->w, t->oc, t->kh,
                 t->kw, t->groups, i, got, want,
                 i >= yo && i < yo + yn ? "" : " (outside y)");
        ok = false;
      }
    }
  }
  free(x);
  free(w);
  free(b);
  free(y0);
  free(y);
  kiln_buffer_destroy(dx);
  kiln_buffer_destroy(dw);
  kiln_buffer_destroy(db);
  kiln_buffer_destroy(dy);
  return ok;
}

static bool gate_conv(kiln_context *ctx, kiln_queue *q, const char *params,
                      const tune_hooks *hooks, double run_timeout_s,
                      double deadline, double *seconds, bool *timed_out,
                      char *why, size_t size) {
  const double t0 = tools_now();
  bool ok = true;
  *timed_out = false;
  for (size_t i = 0; i < sizeof ccases / sizeof ccases[0] && ok; i++)
    ok = !past(deadline, why) &&
         conv_case(ctx, q, &ccases[i], params, hooks, run_timeout_s,
                   timed_out, why, size);
  *seconds = tools_now() - t0;
  return ok;
}

/* ---- timing --------------------------------------------------------------- */

typedef kiln_status (*run_fn)(kiln_queue *q, const size_t *z, kiln_buffer *a,
                              kiln_buffer *b, kiln_buffer *c);

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

/* As tune_time_gemm: a warm-up, then the best of runs, stopping early once
 * a run is slower than stop_above; 0 when the deadline comes before any
 * figure, -2 when a run goes past run_timeout_s (it still runs). */
static double time_runs(kiln_context *ctx, kiln_queue *q, const size_t *z,
                        size_t elements, run_fn run, int runs,
                        double stop_above, double deadline,
                        double run_timeout_s, const tune_hooks *hooks,
                        const char *params) {
  kiln_buffer *a = NULL, *b = NULL, *c = NULL;
  double best = -1.0;
  const float one = 1.0f;
  if (kiln_buffer_create(ctx, elements * 4, 0, &a) != KILN_OK ||
      kiln_buffer_create(ctx, elements * 4, 0, &b) != KILN_OK ||
      kiln_buffer_create(ctx, 16, 0, &c) != KILN_OK ||
      kiln_buffer_fill(q, &one, 4, &(kiln_range){a, 0, elements, KILN_F32}, 0, NULL, NULL) !=
          KILN_OK ||
      kiln_buffer_fill(q, &one, 4, &(kiln_range){b, 0, elements, KILN_F32}, 0, NULL, NULL) !=
          KILN_OK ||
      kiln_queue_finish(q) != KILN_OK)
    goto done;
  for (int r = -1; r < runs; r++) {
    if (deadline > 0.0 && tools_now() >= deadline) {
      if (best < 0.0)
        best = 0.0; /* no figure: out of time */
      break;
    }
    const double t0 = tools_now();
    bool timed_out = false;
    char why[8];
    if (run(q, z, a, b, c) != KILN_OK ||
        !finish(q, run_timeout_s, &timed_out, why, sizeof why)) {
      best = timed_out ? -2.0 : -1.0;
      goto done;
    }
    double t = tools_now() - t0;
    if (hooks != NULL && hooks->time_scale != NULL)
      t *= hooks->time_scale(hooks->user, params);
    if (r < 0 && !(stop_above > 0.0 && t > stop_above))
      continue;
    if (best < 0.0 || t < best)
      best = t;
    if (stop_above > 0.0 && t > stop_above)
      break;
  }
done:
  kiln_buffer_destroy(a);
  kiln_buffer_destroy(b);
  kiln_buffer_destroy(c);
  return best;
}

static double time_gemm(kiln_context *ctx, kiln_queue *q, const size_t *z,
                        int runs, double stop_above, double deadline,
                        double run_timeout_s, const tune_hooks *hooks,
                        const char *params) {
  return tune_time_gemm(ctx, q, z[0], z[1], z[2], runs, stop_above, deadline,
                        run_timeout_s, hooks, params);
}
static double time_gemm_mma(kiln_context *ctx, kiln_queue *q,
                            const size_t *z, int runs, double stop_above,
                            double deadline, double run_timeout_s,
                            const tune_hooks *hooks, const char *params) {
  return tune_time_gemm_dtype(ctx, q, KILN_BF16, z[0], z[1], z[2], runs,
                              stop_above, deadline, run_timeout_s, hooks,
                              params);
}
static double time_transpose(kiln_context *ctx, kiln_queue *q,
                             const size_t *z, int runs, double stop_above,
                             double deadline, double run_timeout_s,
                             const tune_hooks *hooks, const char *params) {
  return time_runs(ctx, q, z, z[0] * z[1], run_transpose, runs, stop_above,
                   deadline, run_timeout_s, hooks, params);
}
static double time_reduce(kiln_context *ctx, kiln_queue *q, const size_t *z,
                          int runs, double stop_above, double deadline,
                          double run_timeout_s, const tune_hooks *hooks,
                          const char *params) {
  return time_runs(ctx, q, z, z[0], run_reduce, runs, stop_above, deadline,
                   run_timeout_s, hooks, params);
}
static double time_elementwise(kiln_context *ctx, kiln_queue *q,
                               const size_t *z, int runs, double stop_above,
                               double deadline, double run_timeout_s,
                               const tune_hooks *hooks, const char *params) {
  return time_runs(ctx, q, z, z[0], run_elementwise, runs, stop_above,
                   deadline, run_timeout_s, hooks, params);
}

/* The CNN's layer shape (examples/cnn.c): z[0] images of z[1] channels,
 * 28 x 28, a 3 x 3 kernel to z[2] channels of 26 x 26: the forward pass
 * with ReLU, then the input gradient (the two calls the space's point
 * serves, so a point is not tuned for one at the other's expense); x then
 * w in a (inputs may overlap), y (then dy) in b, dx over x. */
#define CONV_SIDE 28
static size_t conv_elements(const size_t *z) {
  const size_t os = CONV_SIDE - 2,
               in = z[0] * z[1] * CONV_SIDE * CONV_SIDE + z[2] * z[1] * 9,
               out = z[0] * z[2] * os * os;
  return in > out ? in : out;
}
static kiln_status run_conv(kiln_queue *q, const size_t *z, kiln_buffer *a,
                            kiln_buffer *b, kiln_buffer *c) {
  (void)c;
  const size_t os = CONV_SIDE - 2;
  kiln_epilogue e = KILN_EPILOGUE_INIT;
  e.activation = KILN_ACT_RELU;
  const kiln_conv2d_params p = KILN_CONV2D_PARAMS_INIT;
  const kiln_image x = {.buffer = a, .n = z[0], .c = z[1], .h = CONV_SIDE,
                        .w = CONV_SIDE, .dtype = KILN_F32},
                   w = {.buffer = a,
                        .offset = z[0] * z[1] * CONV_SIDE * CONV_SIDE,
                        .n = z[2], .c = z[1], .h = 3, .w = 3,
                        .dtype = KILN_F32},
                   y = {.buffer = b, .n = z[0], .c = z[2], .h = os, .w = os,
                        .dtype = KILN_F32};
  kiln_status s = kiln_conv2d(q, &x, &w, &y, &p, &e, 0, NULL, NULL);
  if (s == KILN_OK)
    s = kiln_conv2d_backward_data(q, &y, &w, &x, &p, 0, NULL, NULL);
  return s;
}
static double time_conv(kiln_context *ctx, kiln_queue *q, const size_t *z,
                        int runs, double stop_above, double deadline,
                        double run_timeout_s, const tune_hooks *hooks,
                        const char *params) {
  return time_runs(ctx, q, z, conv_elements(z), run_conv, runs, stop_above,
                   deadline, run_timeout_s, hooks, params);
}
static double work_conv(const size_t *z) {
  const double os = CONV_SIDE - 2;
  return 4.0 * (double)z[0] * (double)z[2] * os * os * (double)z[1] * 9.0;
}

static double work_gemm(const size_t *z) {
  return 2.0 * (double)z[0] * (double)z[1] * (double)z[2];
}
/* Bytes read and written once each, as kiln bench counts them. */
static double work_transpose(const size_t *z) {
  return 8.0 * (double)z[0] * (double)z[1];
}
static double work_reduce(const size_t *z) { return 16.0 * (double)z[0]; }
static double work_elementwise(const size_t *z) { return 20.0 * (double)z[0]; }

/* ---- the table ------------------------------------------------------------ */

/* The CPU family's spaces run the same op, so the same gate and timing. */
static const tune_op ops[] = {
    {"gemm", "", "f32 C = A B", "GFLOP/s", "512,1024", 16384, 3, tune_gate,
     time_gemm, work_gemm, "GPU", "gemm_cpu"},
    {"transpose", "", "f32 N x N transpose", "GB/s", "1024,2048", 32768, 2,
     gate_transpose, time_transpose, work_transpose, "GPU", "transpose_cpu"},
    {"reduce", "sum,dot,nrm2", "f32 sum, dot and nrm2 of N", "GB/s",
     "4194304,16777216", 1u << 30, 1, gate_reduce, time_reduce, work_reduce,
     "GPU", NULL},
    {"elementwise", "axpy,scale", "f32 axpy and scale of N", "GB/s",
     "4194304,16777216", 1u << 30, 1, gate_elementwise, time_elementwise,
     work_elementwise, "GPU", NULL},
    {"gemm_mma", "", "bf16 C = A B on NVIDIA's matrix units", "GFLOP/s",
     "1024,4096", 16384, 3, tune_gate_mma, time_gemm_mma, work_gemm, "GPU",
     NULL},
    {"conv2d", "conv",
     "f32 NxCx28x28 3x3 convolution to K channels + ReLU, and its input "
     "gradient (NxCxK)",
     "GFLOP/s", "32x1x32,32x32x64", 4096, 3, gate_conv, time_conv, work_conv,
     "GPU", NULL},
    {"gemm_cpu", "", "f32 C = A B", "GFLOP/s", "512,1024", 16384, 3,
     tune_gate, time_gemm, work_gemm, "CPU", "gemm"},
    {"transpose_cpu", "", "f32 N x N transpose", "GB/s", "1024,4096", 32768,
     2, gate_transpose, time_transpose, work_transpose, "CPU", "transpose"},
};

const tune_op *tune_op_at(size_t index) {
  return index < sizeof ops / sizeof ops[0] ? &ops[index] : NULL;
}

const tune_op *tune_op_find(const char *name) {
  const size_t len = strlen(name);
  for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++) {
    if (strcmp(ops[i].name, name) == 0)
      return &ops[i];
    for (const char *a = ops[i].aliases; *a;) {
      const size_t n = strcspn(a, ",");
      if (n == len && strncmp(a, name, n) == 0)
        return &ops[i];
      a += n + (a[n] == ',');
    }
  }
  return NULL;
}
