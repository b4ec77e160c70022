/* kiln tune's convolution (op conv2d): the gate runs kiln_conv2d's
 * forward pass (the GPU family's implicit GEMM, conv2d's space) on awkward
 * shapes: 1x1 images, primes, channels and positions past every tile,
 * stride, padding, dilation, groups and depthwise, f32, f16 and bf16,
 * bias + ReLU, beta over the old y, with guards around y.
 * Tolerance as tests/conv_test_util.h's: 2 (kk + 10) u S, S the sum of the
 * terms' magnitudes (u = 2^-24: products of exact inputs accumulated in
 * f32 by fma). */
#include "tune.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

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

static bool conv_case(const tune_case_env *env, const void *cc) {
  const struct ccase *t = cc;
  kiln_context *ctx = env->ctx;
  kiln_queue *q = env->q;
  char *why = env->why;
  const size_t size = env->why_size;
  const kiln_dtype dt = t->dtype;
  const size_t oh = (t->h + 2 * t->ph - t->dh * (t->kh - 1) - 1) / t->sh + 1,
               ow = (t->w + 2 * t->pw - t->dw * (t->kw - 1) - 1) / t->sw + 1,
               cg = t->c / t->groups, ocg = t->oc / t->groups,
               kk = cg * t->kh * t->kw, xn = t->n * t->c * t->h * t->w,
               wn = t->oc * kk, yn = t->n * t->oc * oh * ow, yo = 3,
               ytotal = yn + 6;
  kiln_buffer *dx = NULL, *dw = NULL, *db = NULL, *dy = NULL;
  void *x = tune_random_data(ctx, q, dt, xn, 21, &dx);
  void *w = tune_random_data(ctx, q, dt, wn, 22, &dw);
  void *b = tune_random_data(ctx, q, KILN_F32, t->oc, 23, &db);
  void *y0 = tune_random_data(ctx, q, KILN_F32, ytotal, 24, &dy);
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
  } else if (!tune_finish(q, env->run_timeout_s, env->timed_out, why, size)) {
    /* why says it */
  } else if (tune_hook(env->hooks, env->params, q, dy, ytotal * 4),
             (y = tune_download(q, &(kiln_range){dy, 0, ytotal, KILN_F32}, why,
                           size)) != NULL) {
    ok = true;
    for (size_t i = 0; i < ytotal && ok; i++) {
      const double old = tune_get(KILN_F32, y0, i), got = tune_get(KILN_F32, y, i);
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
                  tune_get(dt, x,
                      ((img * t->c + g * cg + ci) * t->h + (size_t)iy) * t->w +
                          (size_t)ix) *
                  tune_get(dt, w, ((o * cg + ci) * t->kh + ky) * t->kw + kx);
              acc += v;
              mag += fabs(v);
            }
        const double bv = t->relu_bias ? tune_get(KILN_F32, b, o) : 0.0;
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

bool tune_gate_conv(kiln_context *ctx, kiln_queue *q, const char *params,
                    const tune_hooks *hooks, double run_timeout_s,
                    double deadline, double *seconds, bool *timed_out,
                    char *why, size_t size) {
  const tune_case_env env = {ctx, q, params, hooks, run_timeout_s,
                             timed_out, why, size};
  return tune_run_cases(&env, ccases, sizeof ccases / sizeof ccases[0],
                        sizeof ccases[0], conv_case, deadline, seconds);
}

/* ---- timing --------------------------------------------------------------- */

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
double tune_time_conv(kiln_context *ctx, kiln_queue *q, const size_t *z,
                        int runs, double stop_above, double deadline,
                        double run_timeout_s, const tune_hooks *hooks,
                        const char *params) {
  return tune_time_f32(ctx, q, z, conv_elements(z), run_conv, runs, stop_above,
                   deadline, run_timeout_s, hooks, params);
}
double tune_work_conv(const size_t *z) {
  const double os = CONV_SIDE - 2;
  return 4.0 * (double)z[0] * (double)z[2] * os * os * (double)z[1] * 9.0;
}

