/* Philox4x32-10 and the random ops: Random123's published known-answer
 * vectors on the device (an explicit-counter kernel) and on the host
 * reference; kiln_random_bits, _uniform, _normal, kiln_dropout_mask and
 * kiln_dropout against a host mirror of the kernels' arithmetic, bit for
 * bit (the "same numbers on every device" promise: the host is one more
 * device); streams produced in pieces equal the whole; the normal
 * generator's log, sqrt and sincos against libm; moments; bad input. The
 * host mirror must not contract a * b + c either: x86-64 without -march
 * has no FMA instruction to contract into, and fmaf is explicit. */
#include "program/program.h"
#include "train_test_util.h"

/* ---- host mirror of cl_kernels/train_random.cl --------------------------- */

static void philox(uint32_t ctr[4], const uint32_t key_in[2]) {
  uint32_t k0 = key_in[0], k1 = key_in[1];
  for (int r = 0; r < 10; r++) {
    if (r > 0) {
      k0 += 0x9E3779B9u;
      k1 += 0xBB67AE85u;
    }
    uint64_t p0 = (uint64_t)0xD2511F53u * ctr[0];
    uint64_t p1 = (uint64_t)0xCD9E8D57u * ctr[2];
    uint32_t n0 = (uint32_t)(p1 >> 32) ^ ctr[1] ^ k0, n1 = (uint32_t)p1;
    uint32_t n2 = (uint32_t)(p0 >> 32) ^ ctr[3] ^ k1, n3 = (uint32_t)p0;
    ctr[0] = n0;
    ctr[1] = n1;
    ctr[2] = n2;
    ctr[3] = n3;
  }
}

static void block(uint64_t seed, uint64_t b, uint32_t w[4]) {
  uint32_t key[2] = {(uint32_t)seed, (uint32_t)(seed >> 32)};
  w[0] = (uint32_t)b;
  w[1] = (uint32_t)(b >> 32);
  w[2] = w[3] = 0;
  philox(w, key);
}

static float u01(uint32_t w) { return (float)(w >> 8) * 0x1p-24f; }

static float h_log(float x) {
  uint32_t b = util_f32_to_bits(x);
  int e = (int)(b >> 23) - 127;
  float m = util_bits_to_f32((b & 0x7fffffu) | 0x3f800000u);
  if (m > 1.41421356f) {
    m = m * 0.5f;
    e += 1;
  }
  float f = m - 1.0f, d = m + 1.0f, r = 0.5f;
  for (int i = 0; i < 4; i++)
    r = fmaf(r, fmaf(-d, r, 1.0f), r);
  float s = f * r, s2 = s * s;
  float p = fmaf(s2, 1.0f / 11.0f, 1.0f / 9.0f);
  p = fmaf(s2, p, 1.0f / 7.0f);
  p = fmaf(s2, p, 1.0f / 5.0f);
  p = fmaf(s2, p, 1.0f / 3.0f);
  p = fmaf(s2, p, 1.0f);
  float lm = 2.0f * s * p;
  float fe = (float)e;
  return fmaf(fe, 0.693145751953125f, fmaf(fe, 1.4286068202862268e-06f, lm));
}

static float h_sqrt(float x) {
  if (x == 0.0f)
    return 0.0f;
  float y = util_bits_to_f32(0x5f3759dfu - (util_f32_to_bits(x) >> 1));
  float h = 0.5f * x;
  for (int i = 0; i < 4; i++)
    y = y * fmaf(-h * y, y, 1.5f);
  float s = x * y;
  return fmaf(fmaf(-s, s, x), 0.5f * y, s);
}

static void h_sincos(uint32_t W, float *sn, float *cs) {
  uint32_t k = (W + (1u << 21)) >> 22;
  float f = (float)((int32_t)W - (int32_t)(k << 22)) * 0x1p-22f;
  float f2 = f * f;
  float sp = fmaf(f2, 0.00016044118478735975f, -0.004681754135318687f);
  sp = fmaf(f2, sp, 0.07969262624616703f);
  sp = fmaf(f2, sp, -0.6459640975062462f);
  sp = fmaf(f2, sp, 1.5707963267948966f);
  float sv = f * sp;
  float cp = fmaf(f2, -2.5202042373060596e-05f, 0.0009192602748394263f);
  cp = fmaf(f2, cp, -0.020863480763352957f);
  cp = fmaf(f2, cp, 0.253669507901048f);
  cp = fmaf(f2, cp, -1.2337005501361697f);
  float cv = fmaf(f2, cp, 1.0f);
  switch (k & 3u) {
  case 0:
    *sn = sv, *cs = cv;
    break;
  case 1:
    *sn = cv, *cs = -sv;
    break;
  case 2:
    *sn = -sv, *cs = -cv;
    break;
  default:
    *sn = -cv, *cs = sv;
  }
}

static float h_normal(uint64_t seed, uint64_t g) {
  uint32_t w[4];
  block(seed, g / 4, w);
  unsigned l = (unsigned)(g % 4), p = l / 2;
  float r = h_sqrt(-2.0f * h_log((float)((w[2 * p] >> 8) + 1u) * 0x1p-24f));
  float sn, cs;
  h_sincos(w[2 * p + 1] >> 8, &sn, &cs);
  return l % 2 ? r * sn : r * cs;
}

static uint32_t h_bits(uint64_t seed, uint64_t g) {
  uint32_t w[4];
  block(seed, g / 4, w);
  return w[g % 4];
}

/* ---- tests --------------------------------------------------------------- */

/* Random123's kat_vectors: counter, key, expected. */
static const uint32_t kat[3][10] = {
    {0, 0, 0, 0, 0, 0, 0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8},
    {0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff,
     0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd},
    {0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344, 0xa4093822, 0x299f31d0,
     0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1},
};

static void test_known_answers_host(void **state) {
  (void)state;
  for (int v = 0; v < 3; v++) {
    uint32_t ctr[4] = {kat[v][0], kat[v][1], kat[v][2], kat[v][3]};
    philox(ctr, &kat[v][4]);
    assert_memory_equal(ctr, &kat[v][6], 16);
  }
}

static void kat_body(kiln_context *ctx, kiln_queue *q, const char *profile) {
  (void)profile;
  kiln_buffer *out = util_buffer(ctx, 16, 0);
  for (int v = 0; v < 3; v++) {
    cl_kernel k = NULL;
    assert_kiln_ok(
        kiln__queue_kernel(q, "train_random", "-DDT=0", "philox_block", &k));
    cl_uint ctr[4] = {kat[v][0], kat[v][1], kat[v][2], kat[v][3]};
    cl_uint key[2] = {kat[v][4], kat[v][5]};
    assert_int_equal(clSetKernelArg(k, 0, sizeof ctr, ctr), CL_SUCCESS);
    assert_int_equal(clSetKernelArg(k, 1, sizeof key, key), CL_SUCCESS);
    assert_int_equal(clSetKernelArg(k, 2, sizeof out->cl, &out->cl),
                     CL_SUCCESS);
    size_t one = 1;
    assert_int_equal(
        clEnqueueNDRangeKernel(q->cl, k, 1, NULL, &one, &one, 0, NULL, NULL),
        CL_SUCCESS);
    uint32_t got[4];
    assert_kiln_ok(kiln_buffer_read_sync(q, &(kiln_range){out, 0, 4, KILN_U32}, got));
    assert_memory_equal(got, &kat[v][6], 16);
  }
  /* Through the public op: seed = key, offset = 4 x counter, words 2 and 3
   * of the counter being 0 there. */
  assert_kiln_ok(
      kiln_random_bits(q, RANGE(out, 0, 4, KILN_U32), 0, 0, 0, NULL, NULL));
  uint32_t got[4];
  assert_kiln_ok(kiln_buffer_read_sync(q, &(kiln_range){out, 0, 4, KILN_U32}, got));
  assert_memory_equal(got, &kat[0][6], 16);
  assert_kiln_ok(kiln_buffer_destroy(out));
}

static void test_known_answers_device(void **state) {
  (void)state;
  train_each_profile(kat_body);
}

/* Every op, every dtype, at awkward offsets and counts, bit for bit against
 * the host mirror, and in pieces. */
static void ops_body(kiln_context *ctx, kiln_queue *q, const char *profile) {
  const uint64_t seeds[] = {0, 42, 0xfedcba9876543210ull};
  const uint64_t offsets[] = {0, 1, 3, 6, 0xfffffffffull};
  const size_t counts[] = {1, 2, 5, 1001};
  const size_t YO = 3;
  for (size_t si = 0; si < 3; si++)
    for (size_t oi = 0; oi < 5; oi++)
      for (size_t ci = 0; ci < 4; ci++) {
        uint64_t seed = seeds[si], off = offsets[oi];
        size_t n = counts[ci], total = YO + n + 2;
        char what[80];
        snprintf(what, sizeof what, "%s seed %llu offset %llu n %zu", profile,
                 (unsigned long long)seed, (unsigned long long)off, n);
        uint32_t *z = calloc(total, 4);
        kiln_buffer *yb = util_upload(ctx, q, KILN_U32, z, total);
        assert_kiln_ok(kiln_random_bits(q, RANGE(yb, YO, n, KILN_U32), seed,
                                        off, 0, NULL, NULL));
        uint32_t *bits = util_download(q, yb, KILN_U32, total);
        for (size_t i = 0; i < n; i++)
          if (bits[YO + i] != h_bits(seed, off + i))
            fail_msg("%s: bits %zu", what, i);
        util_check_guard(KILN_U32, z, bits, YO, n, total, what);
        size_t ndt;
        const kiln_dtype *dts = util_float_dtypes(&ndt);
        for (size_t d = 0; d < ndt; d++) {
          kiln_dtype dt = dts[d];
          void *x = util_random(dt, total, -3, 3, 5);
          kiln_buffer *xb = util_upload(ctx, q, dt, x, total);
          kiln_buffer *ob = util_upload(ctx, q, dt, z, total);
          for (int op = 0; op < 4; op++) {
            const float p = 0.3f, scale = (float)(1.0 / (1.0 - (double)p));
            if (op == 0)
              assert_kiln_ok(kiln_random_uniform(q, RANGE(ob, YO, n, dt), seed,
                                                 off, -0.5f, 2.0f, 0, NULL,
                                                 NULL));
            else if (op == 1)
              assert_kiln_ok(kiln_random_normal(q, RANGE(ob, YO, n, dt), seed,
                                                off, 1.0f, 0.02f, 0, NULL,
                                                NULL));
            else if (op == 2)
              assert_kiln_ok(kiln_dropout_mask(q, RANGE(ob, YO, n, dt), seed,
                                               off, p, 0, NULL, NULL));
            else
              assert_kiln_ok(kiln_dropout(q, RANGE(xb, 1, n, dt),
                                          RANGE(ob, YO, n, dt), seed, off, p, 0,
                                          NULL, NULL));
            void *y = util_download(q, ob, dt, total);
            void *want = malloc(total * 4);
            memcpy(want, y, total * kiln_dtype_size(dt));
            for (size_t i = 0; i < n; i++) {
              uint32_t w = h_bits(seed, off + i);
              float v;
              if (op == 0)
                v = fmaf(u01(w), 2.0f - -0.5f, -0.5f);
              else if (op == 1)
                v = fmaf(0.02f, h_normal(seed, off + i), 1.0f);
              else if (op == 2)
                v = u01(w) >= p ? scale : 0.0f;
              else
                v = (float)util_get(dt, x, 1 + i) *
                    (u01(w) >= p ? scale : 0.0f);
              util_set(dt, want, YO + i, v);
            }
            if (memcmp(y, want, total * kiln_dtype_size(dt)) != 0)
              for (size_t i = 0; i < n; i++)
                if (util_get(dt, y, YO + i) != util_get(dt, want, YO + i))
                  fail_msg("%s op %d %s: element %zu is %.9g, not %.9g", what,
                           op, kiln_dtype_name(dt), i, util_get(dt, y, YO + i),
                           util_get(dt, want, YO + i));
            util_check_guard(dt, z, y, YO, n, total, what);
            free(y);
            free(want);
          }
          /* In pieces: the stream cut at an odd point is the same. */
          if (n > 2) {
            size_t cut = n / 2 + 1;
            assert_kiln_ok(kiln_random_normal(q, RANGE(ob, YO, cut, dt), seed,
                                              off, 0, 1, 0, NULL, NULL));
            assert_kiln_ok(
                kiln_random_normal(q, RANGE(ob, YO + cut, n - cut, dt), seed,
                                   off + cut, 0, 1, 0, NULL, NULL));
            void *y = util_download(q, ob, dt, total);
            for (size_t i = 0; i < n; i++) {
              void *one = malloc(4);
              util_set(dt, one, 0, h_normal(seed, off + i));
              assert_true(util_get(dt, y, YO + i) == util_get(dt, one, 0));
              free(one);
            }
            free(y);
          }
          assert_kiln_ok(kiln_buffer_destroy(xb));
          assert_kiln_ok(kiln_buffer_destroy(ob));
          free(x);
        }
        free(bits);
        free(z);
        assert_kiln_ok(kiln_buffer_destroy(yb));
      }
}

static void test_ops_bit_exact(void **state) {
  (void)state;
  train_each_profile(ops_body);
}

/* The mirror's log, sqrt and sincos against libm, over every input the
 * generator can give (a sample of them), and the moments of a long stream. */
static void test_math_and_moments(void **state) {
  (void)state;
  double worst_log = 0, worst_sqrt = 0, worst_trig = 0;
  for (uint32_t W = 0; W < (1u << 24); W += 257) {
    float u = (float)(W + 1) * 0x1p-24f;
    double l = log((double)u);
    worst_log = fmax(worst_log, fabs(h_log(u) - l) / fmax(fabs(l), 1e-7));
    float x = -2.0f * h_log(u);
    worst_sqrt = fmax(worst_sqrt, fabs(h_sqrt(x) - sqrt((double)x)) /
                                      fmax(sqrt((double)x), 1e-30));
    float sn, cs;
    h_sincos(W, &sn, &cs);
    double t = 2 * M_PI * (double)W * 0x1p-24;
    worst_trig = fmax(worst_trig, fmax(fabs(sn - sin(t)), fabs(cs - cos(t))));
  }
  if (worst_log > 4 * 0x1p-24 || worst_sqrt > 2 * 0x1p-24 ||
      worst_trig > 4 * 0x1p-24)
    fail_msg("log %.3g, sqrt %.3g, sincos %.3g", worst_log, worst_sqrt,
             worst_trig);
  /* 2^20 normals: mean within 5 sigma of 0, variance of 1, |z| < 5.8. */
  double s = 0, s2 = 0, mx = 0;
  const size_t N = 1u << 20;
  for (size_t i = 0; i < N; i++) {
    double z = h_normal(7, i);
    s += z;
    s2 += z * z;
    mx = fmax(mx, fabs(z));
  }
  double mean = s / (double)N, var = s2 / (double)N - mean * mean;
  assert_true(fabs(mean) < 5 / sqrt((double)N));
  assert_true(fabs(var - 1) < 5 * sqrt(2.0 / (double)N));
  assert_true(mx < 5.8);
}

static void test_bad_arguments(void **state) {
  (void)state;
  struct util_bad_env env = util_bad_env_open();
  kiln_queue *q = env.q;
  kiln_buffer *b = env.b, *ob = env.ob;
  assert_kiln_error(
      kiln_random_bits(NULL, RANGE(b, 0, 4, KILN_U32), 0, 0, 0, NULL, NULL),
      KILN_ERR_NULL_POINTER, "kiln_random_bits: queue is NULL");
  assert_kiln_error(kiln_random_bits(q, RANGE(b, 0, 4, KILN_U32), 0, UINT64_MAX,
                                     0, NULL, NULL),
                    KILN_ERR_INVALID_SIZE, "passes the end of the stream");
  assert_kiln_error(
      kiln_random_bits(q, RANGE(b, 0, 40, KILN_U32), 0, 0, 0, NULL, NULL),
      KILN_ERR_OUT_OF_RANGE, "y range");
  assert_kiln_error(kiln_random_uniform(NULL, RANGE(b, 0, 4, KILN_F32), 0, 0, 0,
                                        1, 0, NULL, NULL),
                    KILN_ERR_NULL_POINTER, "queue is NULL");
  assert_kiln_error(kiln_random_uniform(q, RANGE(b, 0, 4, KILN_F32), 0, 0, 2, 1,
                                        0, NULL, NULL),
                    KILN_ERR_INVALID_ARGUMENT, "lo <= hi");
  assert_kiln_error(kiln_random_uniform(q, RANGE(b, 0, 4, KILN_U32), 0, 0, 0, 1,
                                        0, NULL, NULL),
                    KILN_ERR_INVALID_ARGUMENT, "dtype u32");
  assert_kiln_error(kiln_random_normal(NULL, RANGE(b, 0, 4, KILN_F32), 0, 0, 0,
                                       1, 0, NULL, NULL),
                    KILN_ERR_NULL_POINTER, "queue is NULL");
  assert_kiln_error(kiln_random_normal(q, RANGE(b, 0, 4, KILN_F32), 0, 0, 0, -1,
                                       0, NULL, NULL),
                    KILN_ERR_INVALID_ARGUMENT, "stddev -1");
  assert_kiln_error(kiln_random_normal(q, RANGE(ob, 0, 4, KILN_BF16), 0, 0, 0,
                                       1, 0, NULL, NULL),
                    KILN_ERR_WRONG_CONTEXT, "y belongs");
  assert_kiln_error(kiln_dropout_mask(NULL, RANGE(b, 0, 4, KILN_F32), 0, 0,
                                      0.5f, 0, NULL, NULL),
                    KILN_ERR_NULL_POINTER, "queue is NULL");
  assert_kiln_error(
      kiln_dropout_mask(q, RANGE(b, 0, 4, KILN_F32), 0, 0, 1.5f, 0, NULL, NULL),
      KILN_ERR_INVALID_ARGUMENT, "p 1.5");
  assert_kiln_error(kiln_dropout_mask(q, NULL, 0, 0, 0.5f, 0, NULL, NULL),
                    KILN_ERR_NULL_POINTER, "mask is NULL");
  assert_kiln_error(kiln_dropout(NULL, RANGE(b, 0, 4, KILN_F32),
                                 RANGE(b, 8, 4, KILN_F32), 0, 0, 0.5f, 0, NULL,
                                 NULL),
                    KILN_ERR_NULL_POINTER, "queue is NULL");
  assert_kiln_error(kiln_dropout(q, NULL, RANGE(b, 8, 4, KILN_F32), 0, 0, 0.5f,
                                 0, NULL, NULL),
                    KILN_ERR_NULL_POINTER, "x is NULL");
  assert_kiln_error(kiln_dropout(q, RANGE(b, 0, 4, KILN_F32),
                                 RANGE(b, 2, 4, KILN_F32), 0, 0, 0.5f, 0, NULL,
                                 NULL),
                    KILN_ERR_INVALID_ARGUMENT, "overlap");
  assert_kiln_error(kiln_dropout(q, RANGE(b, 0, 4, KILN_F32),
                                 RANGE(b, 8, 4, KILN_F32), 0, 0, -1, 0, NULL,
                                 NULL),
                    KILN_ERR_INVALID_ARGUMENT, "p -1");
  /* The output's dtype, and an input that disagrees with it. */
  assert_kiln_error(
      kiln_random_bits(q, RANGE(b, 0, 4, KILN_I32), 0, 0, 0, NULL, NULL),
      KILN_ERR_INVALID_ARGUMENT, "y dtype i32");
  assert_kiln_error(
      kiln_dropout_mask(q, RANGE(b, 0, 4, KILN_U32), 0, 0, 0.5f, 0, NULL, NULL),
      KILN_ERR_INVALID_ARGUMENT, "mask dtype u32");
  assert_kiln_error(
      kiln_dropout(q, RANGE(b, 0, 3, KILN_F32), RANGE(b, 8, 4, KILN_F32), 0, 0,
                   0.5f, 0, NULL, NULL),
      KILN_ERR_SHAPE_MISMATCH, "x has 3 elements but y's count is 4");
  assert_kiln_error(
      kiln_dropout(q, RANGE(b, 0, 4, KILN_BF16), RANGE(b, 8, 4, KILN_F32), 0, 0,
                   0.5f, 0, NULL, NULL),
      KILN_ERR_SHAPE_MISMATCH, "x dtype bf16 differs from y dtype f32");
  util_bad_env_close(&env);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_known_answers_host),
      cmocka_unit_test(test_known_answers_device),
      cmocka_unit_test(test_ops_bit_exact),
      cmocka_unit_test(test_math_and_moments),
      cmocka_unit_test(test_bad_arguments),
  };
  return KILN_TEST_RUN("op_train_random", tests, true);
}
