/* Helpers for the op tests (test_op_*.c): an independent host reference for
 * f16/bf16 rounding, buffers holding host data, error bounds, and the
 * scaffolding every op test repeats (a context per device, guard checks
 * around the written range, the bad-argument fixture). Header-only (static
 * functions), so the tests' meson list needs no extra source. */
#ifndef KILN_OP_TEST_UTIL_H
#define KILN_OP_TEST_UTIL_H

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

/* ---- storage formats ----------------------------------------------------- */

/* The dtype a reduction writes: u32 indexes for ARGMAX, else f32. */
static inline kiln_dtype util_result_dtype(int op) {
  return op == KILN_REDUCE_ARGMAX ? KILN_U32 : KILN_F32;
}

/* The tests store and read f16 and bf16 data with the library's host
 * conversions (kiln_f32_to_f16 and siblings). util_f32_to_f16 and
 * util_f32_to_bf16 below are the independent reference those conversions
 * and kiln_cast are checked against (test_dtype, test_op_cast): written from
 * the value, in double, rather than on the bits, so a shared mistake is
 * unlikely. */

static inline float util_bits_to_f32(uint32_t u) {
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}
static inline uint32_t util_f32_to_bits(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  return u;
}

/* Round v to nearest even with a significand of `bits` bits (implicit one
 * included) and smallest normal exponent emin; overflow threshold max_exp:
 * values >= 2^max_exp after rounding become infinity. In double, where
 * every float is exact and nearbyint rounds ties to even. */
static inline double util_round_format(double v, int bits, int emin,
                                       int max_exp) {
  if (v == 0 || isnan(v) || isinf(v))
    return v;
  int e;
  frexp(v, &e); /* |v| in [2^(e-1), 2^e) */
  int E = e - 1 < emin ? emin : e - 1;
  double q = ldexp(1.0, E - (bits - 1));
  double r = nearbyint(v / q) * q;
  if (fabs(r) >= ldexp(1.0, max_exp))
    return v < 0 ? -INFINITY : INFINITY;
  return r;
}

static inline uint16_t util_f32_to_f16(float f) {
  if (isnan(f))
    return (uint16_t)(signbit(f) ? 0xfe00 : 0x7e00);
  double r = util_round_format(f, 11, -14, 16);
  uint16_t sign = signbit(r) ? 0x8000 : 0;
  double a = fabs(r);
  if (isinf(a))
    return sign | 0x7c00;
  if (a == 0)
    return sign;
  if (a < ldexp(1.0, -14))
    return sign | (uint16_t)(a / ldexp(1.0, -24));
  int e;
  frexp(a, &e);
  int E = e - 1;
  return sign | (uint16_t)((E + 15) << 10) |
         (uint16_t)((a / ldexp(1.0, E) - 1.0) * 1024.0);
}

static inline uint16_t util_f32_to_bf16(float f) {
  if (isnan(f))
    return (uint16_t)((util_f32_to_bits(f) >> 16) | 0x40);
  double r = util_round_format(f, 8, -126, 128);
  return (uint16_t)(util_f32_to_bits((float)r) >> 16);
}

/* Element access for a host array of dtype. */
static inline double util_get(kiln_dtype dt, const void *p, size_t i) {
  switch (dt) {
  case KILN_F32:
    return ((const float *)p)[i];
  case KILN_F16:
  case KILN_BF16: {
    float f;
    if (dt == KILN_F16)
      kiln_f16_to_f32((const uint16_t *)p + i, &f, 1);
    else
      kiln_bf16_to_f32((const uint16_t *)p + i, &f, 1);
    return f;
  }
  case KILN_I32:
    return ((const int32_t *)p)[i];
  case KILN_U32:
    return ((const uint32_t *)p)[i];
  }
  return NAN;
}
static inline void util_set(kiln_dtype dt, void *p, size_t i, double v) {
  switch (dt) {
  case KILN_F32:
    ((float *)p)[i] = (float)v;
    break;
  case KILN_F16:
  case KILN_BF16: {
    float f = (float)v;
    if (dt == KILN_F16)
      kiln_f32_to_f16(&f, (uint16_t *)p + i, 1);
    else
      kiln_f32_to_bf16(&f, (uint16_t *)p + i, 1);
    break;
  }
  case KILN_I32:
    ((int32_t *)p)[i] = (int32_t)v;
    break;
  case KILN_U32:
    ((uint32_t *)p)[i] = (uint32_t)v;
    break;
  }
}

/* Unit roundoff (half an ulp of 1) of the storage format. */
static inline double util_eps(kiln_dtype dt) {
  switch (dt) {
  case KILN_F16:
    return ldexp(1.0, -11);
  case KILN_BF16:
    return ldexp(1.0, -8);
  default:
    return ldexp(1.0, -24);
  }
}
/* Smallest positive normal of the format (below it, absolute error is what
 * the format can hold). */
static inline double util_tiny(kiln_dtype dt) {
  return dt == KILN_F16 ? ldexp(1.0, -14) : ldexp(1.0, -126);
}

/* The storage-format part of a tolerance around the exact result r: f16
 * and bf16 add the store's rounding (up to one storage ulp after an f32
 * error) and half a subnormal step below the format's smallest normal; f32
 * results may flush denormals, so FLT_MIN is allowed absolutely. */
static inline double util_storage_tol(kiln_dtype dt, double r) {
  double t = FLT_MIN;
  if (dt != KILN_F32)
    t += 2 * util_eps(dt) * fabs(r) + util_tiny(dt) * util_eps(dt);
  return t;
}

static inline const kiln_dtype *util_float_dtypes(size_t *count) {
  static const kiln_dtype d[] = {KILN_F32, KILN_F16, KILN_BF16};
  *count = 3;
  return d;
}

/* ---- buffers ------------------------------------------------------------- */

/* A host array of count elements of dt filled with pseudo-random values in
 * [lo, hi), rounded to dt. Free with free(). */
static inline void *util_random(kiln_dtype dt, size_t count, double lo,
                                double hi, uint32_t seed) {
  float *f = malloc((count ? count : 1) * sizeof *f);
  void *p = malloc((count ? count : 1) * 4);
  assert_non_null(f);
  assert_non_null(p);
  kiln_test_fill_random(f, count, (float)lo, (float)hi, seed);
  for (size_t i = 0; i < count; i++)
    util_set(dt, p, i, f[i]);
  free(f);
  return p;
}

/* A device buffer holding count elements of host data of dt. */
static inline kiln_buffer *util_upload(kiln_context *ctx, kiln_queue *q,
                                       kiln_dtype dt, const void *host,
                                       size_t count) {
  size_t bytes = (count ? count : 1) * kiln_dtype_size(dt);
  kiln_buffer *b = NULL;
  assert_kiln_ok(kiln_buffer_create(ctx, bytes, 0, &b));
  if (count)
    assert_kiln_ok(kiln_buffer_write_sync(q, host, &(kiln_range){b, 0, count, dt}));
  return b;
}

/* Read count elements of dt from b into a new host array. */
static inline void *util_download(kiln_queue *q, kiln_buffer *b, kiln_dtype dt,
                                  size_t count) {
  size_t bytes = (count ? count : 1) * kiln_dtype_size(dt);
  void *p = malloc(bytes);
  assert_non_null(p);
  if (count)
    assert_kiln_ok(kiln_buffer_read_sync(q, &(kiln_range){b, 0, count, dt}, p));
  return p;
}

/* A new buffer of bytes in ctx. */
static inline kiln_buffer *util_buffer(kiln_context *ctx, size_t bytes,
                                       unsigned flags) {
  kiln_buffer *b = NULL;
  assert_kiln_ok(kiln_buffer_create(ctx, bytes, flags, &b));
  return b;
}

/* before and after hold total elements of dt; the op wrote [off, off + n).
 * Fail if any element outside that range changed. */
static inline void util_check_guard(kiln_dtype dt, const void *before,
                                    const void *after, size_t off, size_t n,
                                    size_t total, const char *what) {
  size_t es = kiln_dtype_size(dt);
  for (size_t i = 0; i < total; i++) {
    if (i >= off && i < off + n)
      continue;
    if (memcmp((const char *)before + i * es, (const char *)after + i * es,
               es) != 0)
      fail_msg("%s: element %zu outside the range [%zu, %zu) was changed",
               what, i, off, off + n);
  }
}

/* ---- scaffolding ----------------------------------------------------------- */

/* Run body once per device under test, with a context and queue of its own
 * that are closed afterwards (kiln_test_close asserts nothing leaked). */
static inline void util_each_device(void (*body)(kiln_context *ctx,
                                                 kiln_queue *q)) {
  FOR_EACH_TEST_DEVICE(dev) {
    kiln_context *ctx;
    kiln_queue *q;
    kiln_test_open(dev, &ctx, &q);
    body(ctx, q);
    kiln_test_close(ctx, q);
  }
}

/* What the bad-argument tests share: a context and queue on the first
 * device with a 64-byte buffer b, and a second context with its own 64-byte
 * buffer ob (for the "belongs to a different context" errors). */
struct util_bad_env {
  kiln_context *ctx, *other;
  kiln_queue *q, *oq;
  kiln_buffer *b, *ob;
};

static inline struct util_bad_env util_bad_env_open(void) {
  struct util_bad_env e;
  kiln_test_open(0, &e.ctx, &e.q);
  kiln_test_open(0, &e.other, &e.oq);
  e.b = util_buffer(e.ctx, 64, 0);
  e.ob = util_buffer(e.other, 64, 0);
  return e;
}

/* Finish both queues (a refused call must not have left work behind that
 * fails later), then free everything util_bad_env_open made. */
static inline void util_bad_env_close(struct util_bad_env *e) {
  assert_kiln_ok(kiln_queue_finish(e->q));
  assert_kiln_ok(kiln_queue_finish(e->oq));
  assert_kiln_ok(kiln_buffer_destroy(e->b));
  assert_kiln_ok(kiln_buffer_destroy(e->ob));
  kiln_test_close(e->other, e->oq);
  kiln_test_close(e->ctx, e->q);
}

/* expr must fail with status, and kiln_last_error() must contain text. */
#define assert_kiln_error(expr, status, text)                                 \
  do {                                                                        \
    assert_kiln_status(expr, status);                                         \
    assert_last_error_contains(text);                                         \
  } while (0)

/* Fail with a useful message when |got - want| > tol (NaNs must match). */
#define UTIL_CLOSE(got, want, tol, ...)                                       \
  do {                                                                        \
    double g_ = (got), w_ = (want), t_ = (tol);                               \
    bool ok_ = (isnan(w_) && isnan(g_)) ||                                    \
               (isinf(w_) && g_ == w_) ||                                     \
               (!isnan(g_) && !isinf(w_) && fabs(g_ - w_) <= t_);             \
    if (!ok_) {                                                               \
      char where_[160];                                                       \
      snprintf(where_, sizeof where_, __VA_ARGS__);                           \
      fail_msg("%s: got %.9g, want %.9g (tolerance %.3g)", where_, g_, w_,   \
               t_);                                                           \
    }                                                                         \
  } while (0)

#endif
