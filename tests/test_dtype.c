/* The host conversions kiln_f32_to_f16, kiln_f16_to_f32, kiln_f32_to_bf16
 * and kiln_bf16_to_f32 give the same bits as kiln_cast on the device, over
 * every f16 and bf16 bit pattern and a large sample of f32 ones (every
 * exponent with ties and near-ties in both formats, subnormals, infinities,
 * NaNs of both signs with assorted payloads, and random patterns); and the
 * narrowing ones agree with the independent reference of op_test_util.h. */
#include <stdio.h>

#include "harness.h"
#include "op_test_util.h"

/* The device's cast of n elements of from (host x) to `to`, as host data. */
static void *device_cast(kiln_context *ctx, kiln_queue *q, kiln_dtype from,
                         const void *x, kiln_dtype to, size_t n) {
  kiln_buffer *xb = util_upload(ctx, q, from, x, n);
  kiln_buffer *yb = util_buffer(ctx, n * kiln_dtype_size(to), 0);
  assert_kiln_ok(kiln_cast(q, range_of(xb, 0, n, from), range_of(yb, 0, n, to),
                           0, NULL, NULL));
  void *y = util_download(q, yb, to, n);
  assert_kiln_ok(kiln_buffer_destroy(xb));
  assert_kiln_ok(kiln_buffer_destroy(yb));
  return y;
}

static uint32_t next(uint32_t *s) {
  *s ^= *s << 13;
  *s ^= *s >> 17;
  *s ^= *s << 5;
  return *s;
}

/* The f32 sample: for every exponent, mantissas at and around the rounding
 * points of f16 (13 dropped bits) and bf16 (16 dropped bits), both signs;
 * NaNs with payloads in the kept and the dropped bits; then random bit
 * patterns. */
static uint32_t *f32_sample(size_t *count) {
  static const uint32_t low[] = {0x0000, 0x0001, 0x0fff, 0x1000, 0x1001,
                                 0x1fff, 0x2000, 0x3000, 0x7fff, 0x8000,
                                 0x8001, 0xffff, 0x18000, 0x17fff, 0x7fffff};
  static const uint32_t nans[] = {0x7f800001u, 0x7fc00000u, 0x7fffffffu,
                                  0x7f801000u, 0x7fa00000u, 0x7f80ffffu,
                                  0x7fbfe000u, 0x7f810000u};
  const size_t nlow = sizeof low / sizeof *low, nrandom = 1u << 20;
  const size_t n = 256 * nlow * 4 * 2 + 2 * (sizeof nans / sizeof *nans) +
                   nrandom;
  uint32_t *u = malloc(n * sizeof *u), s = 20261126u;
  assert_non_null(u);
  size_t k = 0;
  for (uint32_t sign = 0; sign < 2; sign++)
    for (uint32_t e = 0; e < 256; e++)
      for (size_t j = 0; j < nlow; j++)
        for (uint32_t kept = 0; kept < 4; kept++) /* odd and even kept bits */
          u[k++] = sign << 31 | e << 23 |
                   ((low[j] | kept << 16 | (kept & 1u) << 13) & 0x7fffffu);
  for (size_t j = 0; j < sizeof nans / sizeof *nans; j++) {
    u[k++] = nans[j];
    u[k++] = nans[j] | 0x80000000u;
  }
  while (k < n)
    u[k++] = next(&s);
  *count = n;
  return u;
}

static bool is_nan16(kiln_dtype dt, uint16_t b) {
  return dt == KILN_F16 ? (b & 0x7c00u) == 0x7c00u && (b & 0x3ffu)
                        : (b & 0x7f80u) == 0x7f80u && (b & 0x7fu);
}

/* f32 -> f16 and f32 -> bf16: host bits = device bits, and = the reference
 * (for NaN: a quiet NaN of the same sign). */
static void narrow_on_device(kiln_context *ctx, kiln_queue *q) {
  size_t n;
  uint32_t *u = f32_sample(&n);
  const float *x = (const float *)u;
  const kiln_dtype tos[] = {KILN_F16, KILN_BF16};
  uint16_t *host = malloc(n * sizeof *host);
  assert_non_null(host);
  for (size_t t = 0; t < 2; t++) {
    kiln_dtype to = tos[t];
    if (to == KILN_F16)
      kiln_f32_to_f16(x, host, n);
    else
      kiln_f32_to_bf16(x, host, n);
    uint16_t *dev = device_cast(ctx, q, KILN_F32, u, to, n);
    for (size_t i = 0; i < n; i++) {
      uint16_t want = to == KILN_F16 ? util_f32_to_f16(x[i])
                                     : util_f32_to_bf16(x[i]);
      uint16_t quiet = to == KILN_F16 ? 0x7e00u : 0x7fc0u;
      bool ok = isnan(x[i]) ? (host[i] & 0x7fffu & quiet) == quiet &&
                                  (host[i] >> 15) == (u[i] >> 31)
                            : host[i] == want;
      if (!ok || dev[i] != host[i])
        fail_msg("f32 0x%08x -> %s: host 0x%04x, device 0x%04x, reference "
                 "0x%04x",
                 u[i], kiln_dtype_name(to), host[i], dev[i], want);
    }
    free(dev);
  }
  free(host);
  free(u);
}

static void test_narrow(void **state) {
  (void)state;
  util_each_device(narrow_on_device);
}

/* Every f16 and bf16 pattern: widening on the host gives the device's
 * bits, is exact (narrowing the result back by the reference gives the
 * pattern again), and keeps a NaN's sign and payload; and the device's cast
 * between the two 16-bit formats is the host's widening then narrowing. */
static void widen_on_device(kiln_context *ctx, kiln_queue *q) {
  const size_t n = 65536;
  uint16_t *all = malloc(n * sizeof *all), *across = malloc(n * sizeof *all);
  float *host = malloc(n * sizeof *host);
  assert_true(all && across && host);
  for (size_t i = 0; i < n; i++)
    all[i] = (uint16_t)i;
  const kiln_dtype froms[] = {KILN_F16, KILN_BF16};
  for (size_t f = 0; f < 2; f++) {
    kiln_dtype from = froms[f], other = froms[1 - f];
    if (from == KILN_F16)
      kiln_f16_to_f32(all, host, n);
    else
      kiln_bf16_to_f32(all, host, n);
    uint32_t *dev = device_cast(ctx, q, from, all, KILN_F32, n);
    for (size_t i = 0; i < n; i++) {
      uint32_t got = util_f32_to_bits(host[i]);
      bool ok = is_nan16(from, all[i])
                    ? got == ((uint32_t)(all[i] & 0x8000u) << 16 |
                              0x7f800000u |
                              (uint32_t)(all[i] & (from == KILN_F16 ? 0x3ffu
                                                                    : 0x7fu))
                                  << (from == KILN_F16 ? 13 : 16))
                    : (from == KILN_F16 ? util_f32_to_f16(host[i])
                                        : util_f32_to_bf16(host[i])) == all[i];
      if (!ok || dev[i] != got)
        fail_msg("%s 0x%04zx -> f32: host 0x%08x, device 0x%08x",
                 kiln_dtype_name(from), i, got, dev[i]);
    }
    free(dev);
    if (other == KILN_F16)
      kiln_f32_to_f16(host, across, n);
    else
      kiln_f32_to_bf16(host, across, n);
    uint16_t *dev16 = device_cast(ctx, q, from, all, other, n);
    for (size_t i = 0; i < n; i++)
      if (dev16[i] != across[i])
        fail_msg("%s 0x%04zx -> %s: host 0x%04x, device 0x%04x",
                 kiln_dtype_name(from), i, kiln_dtype_name(other), across[i],
                 dev16[i]);
    free(dev16);
  }
  free(all);
  free(across);
  free(host);
}

static void test_widen(void **state) {
  (void)state;
  util_each_device(widen_on_device);
}

/* n = 0 touches nothing, so NULL is fine there. */
static void test_empty(void **state) {
  (void)state;
  uint16_t h = 0x1234;
  float f = 2.0f;
  kiln_f32_to_f16(&f, &h, 0);
  kiln_f32_to_bf16(&f, &h, 0);
  kiln_f16_to_f32(&h, &f, 0);
  kiln_bf16_to_f32(&h, &f, 0);
  assert_int_equal(h, 0x1234);
  assert_true(f == 2.0f);
  kiln_f32_to_f16(NULL, NULL, 0);
  kiln_f32_to_bf16(NULL, NULL, 0);
  kiln_f16_to_f32(NULL, NULL, 0);
  kiln_bf16_to_f32(NULL, NULL, 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_narrow),
      cmocka_unit_test(test_widen),
      cmocka_unit_test(test_empty),
  };
  return KILN_TEST_RUN("dtype", tests, true);
}
