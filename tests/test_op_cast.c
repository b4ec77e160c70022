/* kiln_cast between f32, f16 and bf16, checked bit for bit: widening is
 * exact, narrowing rounds to nearest even. The inputs include every hard
 * case: ties in both directions, the f16 overflow threshold (65520 rounds
 * to inf, 65519 to 65504), f16 subnormals and their ties, bf16 overflow at
 * FLT_MAX, f32 subnormals, signed zeros, infinities and NaN (which must stay
 * a quiet NaN; sign and payload are not promised, except that equal dtypes
 * copy the bits). Sizes 0 to past the work-group size, offsets, in place,
 * bad input. */
#include <stdio.h>

#include "harness.h"
#include "op_test_util.h"

#define XOFF 3
#define YOFF 5

/* The special values, then random ones of all magnitudes. */
static float *inputs(size_t n) {
  static const float special[] = {
      0.0f, -0.0f, 1.0f, -1.0f, 65504.0f, 65519.0f, 65520.0f, -65520.0f,
      1e5f, 0x1p-24f, 0x1p-25f, 0x3p-25f, 0x1.8p-24f, 0x1p-14f, 0x1.ffcp-15f,
      1.0f + 0x1p-11f, 1.0f + 0x3p-11f, 1.0f + 0x1p-8f, 1.0f + 0x3p-8f,
      -(1.0f + 0x3p-8f), FLT_MAX, -FLT_MAX, FLT_MIN, 0x1p-149f, 0x1.8p-140f,
      INFINITY, -INFINITY, NAN, -NAN, 3.14159265f, 1.0f + 0x1p-9f + 0x1p-20f,
      0x1.00802p0f};
  size_t ns = sizeof special / sizeof *special;
  float *x = malloc(n * sizeof *x);
  assert_non_null(x);
  kiln_test_fill_random(x, n, -1, 1, 2024);
  for (size_t i = 0; i < n; i++) {
    if (i % 97 < ns)
      x[i] = special[i % 97];
    else /* spread over exponents -40..40 */
      x[i] = ldexpf(x[i], (int)(i % 81) - 40);
  }
  return x;
}

/* The expected bits of y = cast(x) for element value v (given as f32, which
 * every input is exactly). */
static uint32_t expect(kiln_dtype to, float v) {
  switch (to) {
  case KILN_F16:
    return util_f32_to_f16(v);
  case KILN_BF16:
    return util_f32_to_bf16(v);
  default:
    return util_f32_to_bits(v);
  }
}

static uint32_t bits_at(kiln_dtype dt, const void *p, size_t i) {
  return dt == KILN_F32 ? ((const uint32_t *)p)[i]
                        : ((const uint16_t *)p)[i];
}

/* A NaN whose quiet bit (the top significand bit) is set. */
static bool is_quiet_nan_bits(kiln_dtype dt, uint32_t b) {
  switch (dt) {
  case KILN_F16:
    return (b & 0x7e00) == 0x7e00;
  case KILN_BF16:
    return (b & 0x7fc0) == 0x7fc0;
  default:
    return (b & 0x7fc00000u) == 0x7fc00000u;
  }
}

static void cast_on_device(kiln_context *ctx, kiln_queue *q) {
  static const size_t sizes[] = {0, 1, 3, 17, 127, 1021, 4099};
  const size_t maxn = 4099, total = YOFF + maxn + 4;
  size_t ndt;
  const kiln_dtype *dts = util_float_dtypes(&ndt);
  float *src = inputs(total);
  for (size_t a = 0; a < ndt; a++) {
    kiln_dtype from = dts[a];
    /* The input in `from`, and its exact f32 values. */
    void *x = malloc(total * 4);
    float *xv = malloc(total * sizeof *xv);
    for (size_t i = 0; i < total; i++) {
      if (from == KILN_F32)
        ((float *)x)[i] = src[i];
      else
        ((uint16_t *)x)[i] = (uint16_t)expect(from, src[i]);
      xv[i] = (float)util_get(from, x, i);
    }
    kiln_buffer *xb = util_upload(ctx, q, from, x, total);
    for (size_t b = 0; b < ndt; b++) {
      kiln_dtype to = dts[b];
      void *y0 = util_random(to, total, -1, 1, 8);
      kiln_buffer *yb = util_upload(ctx, q, to, y0, total);
      for (size_t si = 0; si < sizeof sizes / sizeof *sizes; si++) {
        size_t n = sizes[si];
        assert_kiln_ok(
            kiln_buffer_write_sync(q, y0, bytes_of(yb, 0, total * kiln_dtype_size(to))));
        assert_kiln_ok(kiln_cast(q, range_of(xb, XOFF, n, from),
                                 range_of(yb, YOFF, n, to), 0, NULL, NULL));
        void *y = util_download(q, yb, to, total);
        char what[64];
        snprintf(what, sizeof what, "%s->%s n=%zu", kiln_dtype_name(from),
                 kiln_dtype_name(to), n);
        util_check_guard(to, y0, y, YOFF, n, total, what);
        for (size_t i = YOFF; i < YOFF + n; i++) {
          uint32_t got = bits_at(to, y, i);
          float v = xv[XOFF + (i - YOFF)];
          uint32_t want = expect(to, v);
          if (isnan(v) && from != to) {
            /* Any quiet NaN: OpenCL promises neither sign nor payload
             * through a conversion (NVIDIA's gives 0x7fffffff), and every
             * input NaN here is quiet. */
            if (!is_quiet_nan_bits(to, got))
              fail_msg("%s->%s n=%zu i=%zu: NaN became 0x%x, not a quiet NaN",
                       kiln_dtype_name(from), kiln_dtype_name(to), n, i, got);
          } else if (got != want) {
            fail_msg("%s->%s n=%zu i=%zu: %a became 0x%x, want 0x%x",
                     kiln_dtype_name(from), kiln_dtype_name(to), n, i,
                     (double)v, got, want);
          }
        }
        free(y);
      }
      assert_kiln_ok(kiln_buffer_destroy(yb));
      free(y0);
    }
    /* Same dtype in place is a copy onto itself. */
    assert_kiln_ok(kiln_cast(q, range_of(xb, XOFF, 100, from),
                             range_of(xb, XOFF, 100, from), 0, NULL, NULL));
    void *again = util_download(q, xb, from, total);
    assert_memory_equal(again, x, total * kiln_dtype_size(from));
    free(again);
    assert_kiln_ok(kiln_buffer_destroy(xb));
    free(x);
    free(xv);
  }
  free(src);
}

static void test_cast(void **state) {
  (void)state;
  util_each_device(cast_on_device);
}

/* f32 -> f16 -> f32 and f32 -> bf16 -> f32 round trips are exact for
 * values the narrow format represents. */
static void round_trip_on_device(kiln_context *ctx, kiln_queue *q) {
  const size_t n = 65536;
  /* Every finite f16 bit pattern, and every bf16 one with the top 16 bits
   * of i, as f32 values. */
  float *h = malloc(n * sizeof *h), *bf = malloc(n * sizeof *bf);
  size_t nh = 0, nb = 0;
  for (uint32_t i = 0; i < n; i++) {
    float v, w;
    uint16_t b = (uint16_t)i;
    kiln_f16_to_f32(&b, &v, 1);
    if (!isnan(v))
      h[nh++] = v;
    kiln_bf16_to_f32(&b, &w, 1);
    if (!isnan(w))
      bf[nb++] = w;
  }
  float *sets[2] = {h, bf};
  size_t counts[2] = {nh, nb};
  kiln_dtype mids[2] = {KILN_F16, KILN_BF16};
  for (int s = 0; s < 2; s++) {
    kiln_buffer *a = util_upload(ctx, q, KILN_F32, sets[s], counts[s]);
    kiln_buffer *m = util_buffer(ctx, counts[s] * 2, 0);
    assert_kiln_ok(kiln_cast(q, range_of(a, 0, counts[s], KILN_F32),
                             range_of(m, 0, counts[s], mids[s]), 0, NULL,
                             NULL));
    assert_kiln_ok(kiln_fill(q, range_of(a, 0, counts[s], KILN_F32),
                             &(float){0.0f}, 0, NULL, NULL));
    assert_kiln_ok(kiln_cast(q, range_of(m, 0, counts[s], mids[s]),
                             range_of(a, 0, counts[s], KILN_F32), 0, NULL,
                             NULL));
    float *back = util_download(q, a, KILN_F32, counts[s]);
    for (size_t i = 0; i < counts[s]; i++)
      if (util_f32_to_bits(back[i]) != util_f32_to_bits(sets[s][i]))
        fail_msg("%s round trip of %a gave %a", kiln_dtype_name(mids[s]),
                 (double)sets[s][i], (double)back[i]);
    free(back);
    assert_kiln_ok(kiln_buffer_destroy(a));
    assert_kiln_ok(kiln_buffer_destroy(m));
  }
  free(h);
  free(bf);
}

static void test_round_trip(void **state) {
  (void)state;
  util_each_device(round_trip_on_device);
}

/* Values outside the enum have a defined answer: size 0 (which every op
 * refuses) and the name "unknown". */
static void test_dtype_queries(void **state) {
  (void)state;
  assert_int_equal(kiln_dtype_size(KILN_F32), 4);
  assert_int_equal(kiln_dtype_size(KILN_BF16), 2);
  assert_string_equal(kiln_dtype_name(KILN_F16), "f16");
  assert_int_equal(kiln_dtype_size((kiln_dtype)99), 0);
  assert_string_equal(kiln_dtype_name((kiln_dtype)99), "unknown");
  assert_int_equal(kiln_dtype_size((kiln_dtype)-1), 0);
}

static void test_zero_size_and_bad(void **state) {
  (void)state;
  struct util_bad_env env = util_bad_env_open();
  kiln_queue *q = env.q;
  kiln_buffer *b = env.b, *ob = env.ob;
  kiln_event *e = NULL;
  assert_kiln_ok(kiln_cast(q, range_of(b, 16, 0, KILN_F32),
                           range_of(b, 32, 0, KILN_F16), 0, NULL, &e));
  assert_kiln_ok(kiln_event_wait(e));
  kiln_event_release(e);

  assert_kiln_error(kiln_cast(NULL, range_of(b, 0, 4, KILN_F32),
                              range_of(b, 16, 4, KILN_F16), 0, NULL, NULL),
                    KILN_ERR_NULL_POINTER, "kiln_cast: queue is NULL");
  assert_kiln_error(kiln_cast(q, range_of(b, 0, 4, KILN_I32),
                              range_of(b, 16, 4, KILN_F16), 0, NULL, NULL),
                    KILN_ERR_INVALID_ARGUMENT, "x.dtype i32");
  assert_kiln_error(kiln_cast(q, range_of(b, 0, 4, KILN_F32),
                              range_of(b, 16, 4, (kiln_dtype)7), 0, NULL, NULL),
                    KILN_ERR_INVALID_ARGUMENT, "y.dtype 7 is not a kiln_dtype");
  /* 64 bytes: 32 f16 elements, 16 f32. */
  assert_kiln_status(kiln_cast(q, range_of(b, 0, 20, KILN_F16),
                               range_of(ob, 0, 20, KILN_F32), 0, NULL, NULL),
                     KILN_ERR_WRONG_CONTEXT);
  assert_kiln_error(kiln_cast(q, range_of(b, 0, 20, KILN_F16),
                              range_of(b, 0, 20, KILN_F32), 0, NULL, NULL),
                    KILN_ERR_OUT_OF_RANGE,
                    "y range [offset 0, +20 elements of f32)");
  assert_kiln_error(kiln_cast(q, range_of(NULL, 0, 4, KILN_F32),
                              range_of(b, 0, 4, KILN_F16), 0, NULL, NULL),
                    KILN_ERR_NULL_POINTER, "x is NULL");
  /* Narrowing in place would race: refused even at the same offset. */
  assert_kiln_error(kiln_cast(q, range_of(b, 0, 8, KILN_F32),
                              range_of(b, 0, 8, KILN_F16), 0, NULL, NULL),
                    KILN_ERR_INVALID_ARGUMENT, "overlap");
  assert_kiln_ok(kiln_queue_finish(q));
  /* One count for x and y; NULL descriptors. */
  assert_kiln_error(kiln_cast(q, range_of(b, 0, 4, KILN_F32),
                              range_of(b, 8, 5, KILN_F16), 0, NULL, NULL),
                    KILN_ERR_SHAPE_MISMATCH,
                    "x (4 elements) and y (5 elements) disagree");
  assert_kiln_error(kiln_cast(q, NULL, range_of(b, 8, 5, KILN_F16), 0, NULL,
                              NULL),
                    KILN_ERR_NULL_POINTER, "kiln_cast: x is NULL");
  util_bad_env_close(&env);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_cast),
      cmocka_unit_test(test_round_trip),
      cmocka_unit_test(test_zero_size_and_bad),
      cmocka_unit_test(test_dtype_queries),
  };
  return KILN_TEST_RUN("op_cast", tests, true);
}
