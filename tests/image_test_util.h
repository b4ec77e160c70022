/* What the image-op tests (test_op_image_pool.c, test_op_image_bn.c,
 * test_op_image_torch.c) share: descriptors, guarded uploads and the error
 * bounds of pooling and batch normalisation against exact (float64)
 * results, derived in the header comments of test_op_image_pool.c and
 * test_op_image_bn.c. Header-only. */
#ifndef KILN_IMAGE_TEST_UTIL_H
#define KILN_IMAGE_TEST_UTIL_H

#include "train_test_util.h"

#define IMG_U 0x1p-24

static inline kiln_image image_at(kiln_buffer *b, size_t off, size_t n,
                                  size_t c, size_t h, size_t w, kiln_dtype dt) {
  return (kiln_image){.buffer = b, .offset = off, .n = n, .c = c, .h = h,
                      .w = w, .dtype = dt};
}

static inline double *img_doubles(size_t n) {
  if (n > ((size_t)1 << 32))
    fail_msg("img_doubles: %zu doubles is more than any test needs", n);
  double *p = calloc(n ? n : 1, sizeof *p);
  assert_non_null(p);
  return p;
}

/* Read back n elements at off of b (off + n + guard in all, the others
 * compared with before, the buffer's host image before the op); returns the
 * n values as doubles. */
static inline double *img_download(kiln_queue *q, size_t guard,
                                   kiln_buffer *b, kiln_dtype dt, size_t off,
                                   size_t n, const void *before,
                                   const char *what) {
  size_t total = off + n + guard;
  void *after = util_download(q, b, dt, total);
  util_check_guard(dt, before, after, off, n, total, what);
  double *v = img_doubles(n);
  for (size_t i = 0; i < n; i++)
    v[i] = util_get(dt, after, off + i);
  free(after);
  return v;
}

/* Batch statistics per channel: mean and biased variance over n h w. */
static inline void bn_stats(size_t n, size_t c, size_t hw, const double *x,
                            double *mean, double *var) {
  for (size_t ch = 0; ch < c; ch++) {
    double s = 0, q = 0, m = (double)(n * hw);
    for (size_t i = 0; i < n; i++)
      for (size_t e = 0; e < hw; e++)
        s += x[(i * c + ch) * hw + e];
    for (size_t i = 0; i < n; i++)
      for (size_t e = 0; e < hw; e++) {
        double d = x[(i * c + ch) * hw + e] - s / m;
        q += d * d;
      }
    mean[ch] = s / m;
    var[ch] = q / m;
  }
}

/* Pooling with a window of kk = kh kw elements covering each input element
 * at most cover times, inputs of magnitude at most max_x and gradients at
 * most max_dy: the bound on y (0 for max pooling, exact) and on dx. */
static inline double pool_tol_y(bool is_max, double kk, double max_x,
                                kiln_dtype dt, double want) {
  return (is_max ? 0 : (kk + 2) * IMG_U * kk * max_x) +
         util_storage_tol(dt, want);
}
static inline double pool_tol_dx(double cover, double max_dy, kiln_dtype dt,
                                 double want) {
  return (cover + 2) * IMG_U * cover * max_dy + util_storage_tol(dt, want);
}

/* Batch statistics of channel ch of an n x c x hw image x (the stored
 * values), whose exact mean and biased variance are given: bounds on the
 * computed mean, variance, and rstd (relative). */
struct bn_tol {
  double mean, var, rstd_rel;
};
static inline struct bn_tol bn_tolerance(size_t n, size_t c, size_t hw,
                                         const double *x, size_t ch,
                                         double mean, double var, double eps) {
  double shift = x[ch * hw], m = (double)(n * hw), sa = 0, sa2 = 0;
  for (size_t i = 0; i < n; i++)
    for (size_t e = 0; e < hw; e++) {
      double a = x[(i * c + ch) * hw + e] - shift;
      sa += fabs(a);
      sa2 += a * a;
    }
  struct bn_tol t;
  double ed = m * IMG_U * sa / m + IMG_U * fabs(mean - shift);
  t.mean = ed + 2 * IMG_U * fabs(mean);
  t.var = 3 * m * IMG_U * sa2 / m + 2 * fabs(mean - shift) * ed +
          2 * IMG_U * var;
  t.rstd_rel = t.var / (2 * (var + eps)) + 4 * IMG_U;
  return t;
}

/* The bound on y = (x - mean) rstd gamma + beta given the statistics'. */
static inline double bn_tol_y(const struct bn_tol *t, double gamma_abs,
                              double beta_abs, double rstd, double x,
                              double mean, double want, kiln_dtype dt) {
  return gamma_abs * (rstd * t->mean + fabs(x - mean) * rstd * t->rstd_rel) +
         4 * IMG_U * (fabs(want) + beta_abs) + util_storage_tol(dt, want);
}

/* Backward of channel ch, over m elements, with sdy = sum |dy| and sdyx =
 * sum |dy xhat|: bounds on dbeta, dgamma and one element of dx (k = |gamma
 * rstd|, xh = |xhat|, dy its upstream gradient). */
static inline double bn_tol_dbeta(double m, double sdy) {
  return m * IMG_U * sdy + FLT_MIN;
}
static inline double bn_tol_dgamma(double m, double sdyx) {
  return (m + 4) * IMG_U * sdyx + FLT_MIN;
}
static inline double bn_tol_dx(double m, double sdy, double sdyx, double k,
                               double xh, double dy, double want,
                               kiln_dtype dt) {
  return k * (IMG_U * sdy + xh * (m + 4) * IMG_U * sdyx / m) +
         6 * IMG_U * k * (fabs(dy) + sdy / m + xh * sdyx / m + xh) +
         util_storage_tol(dt, want);
}

/* ---- device operands --------------------------------------------------- */

/* Offsets of the input and output images in their buffers, and the guard
 * elements after them. */
#define XOFF 3
#define YOFF 5
#define GUARD 4

/* Upload n doubles as dt, at offset off with GUARD random guard elements
 * after; *stored receives the values as stored (rounded), *raw the whole
 * host image for the guard check later. */
static inline kiln_buffer *upload_at(kiln_context *ctx, kiln_queue *q,
                                     kiln_dtype dt, size_t off, size_t n,
                                     double lo, double hi, uint32_t seed,
                                     double **stored, void **raw) {
  size_t total = off + n + GUARD;
  void *h = util_random(dt, total, lo, hi, seed);
  if (stored != NULL) {
    *stored = img_doubles(n);
    for (size_t i = 0; i < n; i++)
      (*stored)[i] = util_get(dt, h, off + i);
  }
  kiln_buffer *b = util_upload(ctx, q, dt, h, total);
  if (raw != NULL)
    *raw = h;
  else
    free(h);
  return b;
}

/* got within rel (1 + max|want|) of want, element by element. */
static inline void expect_close_arrays(const char *what, const double *got,
                                       const double *want, size_t n,
                                       double rel) {
  double scale = 0;
  for (size_t i = 0; i < n; i++)
    scale = fmax(scale, fabs(want[i]));
  for (size_t i = 0; i < n; i++)
    UTIL_CLOSE(got[i], want[i], rel * (1 + scale), "%s [%zu]", what, i);
}

#endif
