/* The optimizer steps against a float64 host loop over several steps
 * (every gradient dtype, weight copies in every float dtype, momentum,
 * Nesterov, weight decay, gradient scaling, the skip flag), the global
 * gradient norm against float64 over several ranges (and the same bits run
 * to run), clipping by it, the non-finite check; both kernel families; bad
 * input.
 *
 * Error bounds (u = 2^-24): a step makes a handful of f32 roundings on each
 * of w, the state and the update (sqrt and division within 3 ulp in
 * OpenCL), each relative to the largest magnitude involved, so after S
 * steps |w - w_ref| <= 16 u S (max|w| + lr S max|update|), and likewise for
 * the state. The weight copy must be exactly the storage rounding of the
 * device's own f32 weights. The norm sums squares in f32, at most 1024 per
 * partial and then the partials in order: relative (chunk + partials + 2) u
 * on the sum of squares, half that on the norm. */
#include "train_test_util.h"

#define STEPS 5
static const double U = 0x1p-24;

struct ref_state {
  double *w, *a, *b; /* weights; velocity or m; v */
};

static void sgd_ref(const kiln_sgd_params *p, size_t n, struct ref_state *st,
                    const double *g) {
  for (size_t i = 0; i < n; i++) {
    double gv = g[i] * p->grad_scale + p->weight_decay * st->w[i];
    if (p->momentum != 0) {
      st->a[i] = p->momentum * st->a[i] + gv;
      gv = p->nesterov ? gv + p->momentum * st->a[i] : st->a[i];
    }
    st->w[i] -= p->lr * gv;
  }
}

static void adamw_ref(const kiln_adamw_params *p, size_t n,
                      struct ref_state *st, const double *g) {
  double t = (double)p->step;
  double bc1 = 1 - pow(p->beta1, t), bc2 = 1 - pow(p->beta2, t);
  for (size_t i = 0; i < n; i++) {
    double gv = g[i] * p->grad_scale;
    st->w[i] *= 1 - (double)p->lr * p->weight_decay;
    st->a[i] += (1 - (double)p->beta1) * (gv - st->a[i]);
    st->b[i] = p->beta2 * st->b[i] + (1 - (double)p->beta2) * gv * gv;
    st->w[i] -= p->lr / bc1 * st->a[i] / (sqrt(st->b[i]) / sqrt(bc2) + p->eps);
  }
}

/* Compare the f32 array got (at off) with ref, and the copy (if any) with
 * the rounding of got. */
static void check_f32(const float *got, size_t off, const double *ref, size_t n,
                      double tol, const char *what) {
  for (size_t i = 0; i < n; i++)
    UTIL_CLOSE(got[off + i], ref[i], tol, "%s at %zu", what, i);
}

static void step_case(kiln_context *ctx, kiln_queue *q, const char *profile,
                      bool adam, int variant, kiln_dtype gdt, kiln_dtype cdt,
                      size_t n) {
  const size_t OFF = 3, total = n + 7;
  kiln_sgd_params sp = {.lr = 0.05f,
                        .momentum = variant ? 0.9f : 0,
                        .weight_decay = variant == 2 ? 0.01f : 0,
                        .nesterov = variant == 2,
                        .grad_scale = 1};
  kiln_adamw_params ap = {.lr = 1e-2f,
                          .beta1 = 0.9f,
                          .beta2 = 0.999f,
                          .eps = 1e-8f,
                          .weight_decay = variant ? 0.1f : 0,
                          .step = 1,
                          .grad_scale = variant == 2 ? 0.25f : 1};
  float *w0 = util_random(KILN_F32, total, -1, 1, 81 + (uint32_t)n);
  float *z = calloc(total, 4);
  kiln_buffer *wb = util_upload(ctx, q, KILN_F32, w0, total);
  kiln_buffer *ab = util_upload(ctx, q, KILN_F32, z, total);
  kiln_buffer *bb = util_upload(ctx, q, KILN_F32, z, total);
  void *c0 = util_random(cdt, total, -1, 1, 82);
  kiln_buffer *cb = util_upload(ctx, q, cdt, c0, total);
  uint32_t flags[2] = {0, 1};
  kiln_buffer *fb = util_upload(ctx, q, KILN_U32, flags, 2);
  struct ref_state st = {calloc(n, 8), calloc(n, 8), calloc(n, 8)};
  double *g = calloc(n, 8), maxg = 0;
  for (size_t i = 0; i < n; i++)
    st.w[i] = w0[OFF + i];
  char what[80];
  snprintf(what, sizeof what, "%s %s v%d grad %s copy %s n %zu", profile,
           adam ? "adamw" : "sgd", variant, kiln_dtype_name(gdt),
           kiln_dtype_name(cdt), n);
  for (int step = 1; step <= STEPS; step++) {
    void *gh = util_random(gdt, total, -2, 2, 90 + (uint32_t)step);
    for (size_t i = 0; i < n; i++) {
      g[i] = util_get(gdt, gh, 1 + i);
      maxg = fmax(maxg, fabs(g[i]));
    }
    kiln_buffer *gb = util_upload(ctx, q, gdt, gh, total);
    ap.step = (uint64_t)step;
    /* Each step once with the skip flag set (nothing changes), then for
     * real; the copy only on the last step. */
    for (int skip = 1; skip >= 0; skip--) {
      kiln_buffer *wc = step == STEPS ? cb : NULL;
      if (adam)
        assert_kiln_ok(kiln_adamw_step(
            q, RANGE(gb, 1, n, gdt), RANGE(fb, (size_t)skip, 1, KILN_U32),
            RANGE(wb, OFF, n, KILN_F32), RANGE(ab, OFF, n, KILN_F32),
            RANGE(bb, OFF, n, KILN_F32), OPT_RANGE(wc, OFF, n, cdt), &ap, 0,
            NULL, NULL));
      else
        assert_kiln_ok(kiln_sgd_step(
            q, RANGE(gb, 1, n, gdt), skip ? RANGE(fb, 1, 1, KILN_U32) : NULL,
            RANGE(wb, OFF, n, KILN_F32),
            sp.momentum != 0 ? RANGE(ab, OFF, n, KILN_F32) : NULL,
            OPT_RANGE(wc, OFF, n, cdt), &sp, 0, NULL, NULL));
    }
    if (adam)
      adamw_ref(&ap, n, &st, g);
    else
      sgd_ref(&sp, n, &st, g);
    assert_kiln_ok(kiln_buffer_destroy(gb));
    free(gh);
  }
  float *w = util_download(q, wb, KILN_F32, total);
  float *a = util_download(q, ab, KILN_F32, total);
  void *c = util_download(q, cb, cdt, total);
  double maxw = 0;
  for (size_t i = 0; i < n; i++)
    maxw = fmax(maxw, fabs(st.w[i]));
  double upd = adam ? 1.0 / (1 - 0.9) : maxg * (1 + 10 + 10);
  double lr = adam ? ap.lr : sp.lr;
  check_f32(w, OFF, st.w, n, 16 * U * STEPS * (maxw + lr * STEPS * upd) + 1e-7,
            what);
  if (adam || sp.momentum != 0)
    check_f32(a, OFF, st.a, n, 16 * U * STEPS * 20 * maxg, what);
  for (size_t i = 0; i < n; i++) {
    uint32_t tmp;
    util_set(cdt, &tmp, 0, w[OFF + i]);
    double want = util_get(cdt, &tmp, 0);
    if (util_get(cdt, c, OFF + i) != want)
      fail_msg("%s: copy %zu is %.9g, not the rounding %.9g of w", what, i,
               util_get(cdt, c, OFF + i), want);
  }
  util_check_guard(KILN_F32, w0, w, OFF, n, total, what);
  util_check_guard(cdt, c0, c, OFF, n, total, what);
  free(w);
  free(a);
  free(c);
  free(w0);
  free(z);
  free(c0);
  free(g);
  free(st.w);
  free(st.a);
  free(st.b);
  assert_kiln_ok(kiln_buffer_destroy(wb));
  assert_kiln_ok(kiln_buffer_destroy(ab));
  assert_kiln_ok(kiln_buffer_destroy(bb));
  assert_kiln_ok(kiln_buffer_destroy(cb));
  assert_kiln_ok(kiln_buffer_destroy(fb));
}

static void steps_body(kiln_context *ctx, kiln_queue *q, const char *profile) {
  const size_t sizes[] = {1, 37, 1000};
  for (int adam = 0; adam < 2; adam++)
    for (int variant = 0; variant < 3; variant++)
      for (int gdt = KILN_F32; gdt <= KILN_BF16; gdt++)
        for (size_t si = 0; si < 3; si++)
          step_case(ctx, q, profile, adam, variant, (kiln_dtype)gdt,
                    (kiln_dtype)((gdt + variant) % 3), sizes[si]);
}

static void test_optimizer_steps(void **state) {
  (void)state;
  train_each_profile(steps_body);
}

static void norm_body(kiln_context *ctx, kiln_queue *q, const char *profile) {
  const size_t counts[] = {1, 0, 1021, 5000, 300000};
  enum { NR = 5 };
  size_t ndt;
  const kiln_dtype *dts = util_float_dtypes(&ndt);
  for (size_t d = 0; d < ndt; d++) {
    kiln_dtype dt = dts[d];
    kiln_range ranges[NR];
    void *host[NR];
    double ss = 0;
    for (int r = 0; r < NR; r++) {
      host[r] = util_random(dt, counts[r] + 4, -1, 1, 100 + (uint32_t)r);
      ranges[r] = (kiln_range){util_upload(ctx, q, dt, host[r], counts[r] + 4),
                               2, counts[r], dt};
      for (size_t i = 0; i < counts[r]; i++)
        ss += util_get(dt, host[r], 2 + i) * util_get(dt, host[r], 2 + i);
    }
    float nf[6] = {1, 1, 1, 1, 1, 1};
    kiln_buffer *nb = util_upload(ctx, q, KILN_F32, nf, 6);
    assert_kiln_ok(kiln_grad_norm(q, ranges, NR, RANGE(nb, 1, 1, KILN_F32), 0,
                                  NULL, NULL));
    assert_kiln_ok(kiln_grad_norm(q, ranges, NR, RANGE(nb, 2, 1, KILN_F32), 0,
                                  NULL, NULL));
    assert_kiln_ok(
        kiln_grad_norm(q, NULL, 0, RANGE(nb, 3, 1, KILN_F32), 0, NULL, NULL));
    assert_kiln_ok(kiln_buffer_read_sync(q, bytes_of(nb, 0, sizeof nf), nf));
    double want = sqrt(ss);
    UTIL_CLOSE(nf[1], want, (1024 + 1200 + 2) * U * want, "%s norm %s", profile,
               kiln_dtype_name(dt));
    assert_true(memcmp(&nf[1], &nf[2], 4) == 0); /* run to run */
    assert_true(nf[3] == 0 && nf[0] == 1 && nf[4] == 1);
    /* Clip to half the norm: every element scaled by the coefficient. */
    float max_norm = nf[1] / 2;
    float coef = max_norm / (nf[1] + 1e-6f);
    assert_kiln_ok(kiln_clip_grad_norm(q, RANGE(nb, 1, 1, KILN_F32), ranges, NR,
                                       max_norm, 0, NULL, NULL));
    for (int r = 0; r < NR; r++) {
      void *got = util_download(q, ranges[r].buffer, dt, counts[r] + 4);
      for (size_t i = 0; i < counts[r]; i++) {
        double w = util_get(dt, host[r], 2 + i) * (double)coef;
        UTIL_CLOSE(util_get(dt, got, 2 + i), w,
                   U * fabs(w) + util_storage_tol(dt, w), "%s clip %s %d %zu",
                   profile, kiln_dtype_name(dt), r, i);
      }
      util_check_guard(dt, host[r], got, 2, counts[r], counts[r] + 4, "clip");
      free(got);
    }
    /* A norm below max_norm, or not finite, changes nothing. */
    nf[0] = INFINITY;
    assert_kiln_ok(kiln_buffer_write_sync(q, nf, &(kiln_range){nb, 0, 1, KILN_F32}));
    void *before = util_download(q, ranges[2].buffer, dt, counts[2] + 4);
    assert_kiln_ok(kiln_clip_grad_norm(q, RANGE(nb, 0, 1, KILN_F32), ranges, NR,
                                       1.0f, 0, NULL, NULL));
    assert_kiln_ok(kiln_clip_grad_norm(q, RANGE(nb, 2, 1, KILN_F32), ranges, NR,
                                       1e30f, 0, NULL, NULL));
    void *after = util_download(q, ranges[2].buffer, dt, counts[2] + 4);
    assert_memory_equal(before, after, (counts[2] + 4) * kiln_dtype_size(dt));
    free(before);
    free(after);
    /* Non-finite check: clean, then an inf, then a NaN in another range. */
    uint32_t fl[3] = {7, 7, 7};
    kiln_buffer *fb = util_upload(ctx, q, KILN_U32, fl, 3);
    assert_kiln_ok(kiln_has_nonfinite(q, ranges, NR, RANGE(fb, 1, 1, KILN_U32),
                                      0, NULL, NULL));
    assert_kiln_ok(kiln_buffer_read_sync(q, bytes_of(fb, 0, sizeof fl), fl));
    assert_true(fl[0] == 7 && fl[1] == 0 && fl[2] == 7);
    for (int bad = 0; bad < 2; bad++) {
      int r = bad ? 4 : 2;
      size_t at = 2 + counts[r] - 1 - (size_t)bad * 777;
      util_set(dt, host[r], at, bad ? NAN : -INFINITY);
      assert_kiln_ok(kiln_buffer_write_sync(q, (char *)host[r] + at * kiln_dtype_size(dt), bytes_of(ranges[r].buffer, at * kiln_dtype_size(dt), kiln_dtype_size(dt))));
      assert_kiln_ok(kiln_has_nonfinite(
          q, ranges, NR, RANGE(fb, 1, 1, KILN_U32), 0, NULL, NULL));
      assert_kiln_ok(kiln_buffer_read_sync(q, bytes_of(fb, 0, sizeof fl), fl));
      assert_int_equal(fl[1], 1);
    }
    assert_kiln_ok(kiln_grad_norm(q, ranges, NR, RANGE(nb, 1, 1, KILN_F32), 0,
                                  NULL, NULL));
    assert_kiln_ok(kiln_buffer_read_sync(q, bytes_of(nb, 0, sizeof nf), nf));
    assert_true(!isfinite(nf[1]));
    assert_kiln_ok(kiln_buffer_destroy(fb));
    assert_kiln_ok(kiln_buffer_destroy(nb));
    for (int r = 0; r < NR; r++) {
      assert_kiln_ok(kiln_buffer_destroy(ranges[r].buffer));
      free(host[r]);
    }
  }
}

static void test_norm_clip_nonfinite(void **state) {
  (void)state;
  train_each_profile(norm_body);
}

static void test_bad_arguments(void **state) {
  (void)state;
  struct util_bad_env env = util_bad_env_open();
  kiln_queue *q = env.q;
  kiln_buffer *b = env.b, *ob = env.ob;
  kiln_buffer *c = util_buffer(env.ctx, 64, 0),
              *d = util_buffer(env.ctx, 64, 0);
  kiln_sgd_params sp = {.lr = 0.1f, .momentum = 0.9f, .grad_scale = 1};
  kiln_adamw_params ap = {.lr = 1e-3f,
                          .beta1 = 0.9f,
                          .beta2 = 0.999f,
                          .eps = 1e-8f,
                          .step = 1,
                          .grad_scale = 1};
  assert_kiln_error(kiln_sgd_step(NULL, RANGE(c, 0, 4, KILN_F32), NULL,
                                  RANGE(b, 0, 4, KILN_F32),
                                  RANGE(d, 0, 4, KILN_F32), NULL, &sp, 0, NULL,
                                  NULL),
                    KILN_ERR_NULL_POINTER, "kiln_sgd_step: queue is NULL");
  assert_kiln_error(
      kiln_sgd_step(q, RANGE(c, 0, 4, KILN_F32), NULL, RANGE(b, 0, 4, KILN_F32),
                    RANGE(d, 0, 4, KILN_F32), NULL, NULL, 0, NULL, NULL),
      KILN_ERR_NULL_POINTER, "params is NULL");
  assert_kiln_error(kiln_sgd_step(q, RANGE(c, 0, 4, KILN_F32), NULL,
                                  RANGE(b, 0, 4, KILN_F32), NULL, NULL, &sp, 0,
                                  NULL, NULL),
                    KILN_ERR_NULL_POINTER, "velocity is NULL");
  sp.grad_scale = 0;
  assert_kiln_error(
      kiln_sgd_step(q, RANGE(c, 0, 4, KILN_F32), NULL, RANGE(b, 0, 4, KILN_F32),
                    RANGE(d, 0, 4, KILN_F32), NULL, &sp, 0, NULL, NULL),
      KILN_ERR_INVALID_ARGUMENT, "grad_scale 0");
  sp.grad_scale = 1;
  sp.momentum = 1;
  assert_kiln_error(
      kiln_sgd_step(q, RANGE(c, 0, 4, KILN_F32), NULL, RANGE(b, 0, 4, KILN_F32),
                    RANGE(d, 0, 4, KILN_F32), NULL, &sp, 0, NULL, NULL),
      KILN_ERR_INVALID_ARGUMENT, "momentum 1");
  sp.momentum = 0;
  sp.nesterov = true;
  assert_kiln_error(
      kiln_sgd_step(q, RANGE(c, 0, 4, KILN_F32), NULL, RANGE(b, 0, 4, KILN_F32),
                    RANGE(d, 0, 4, KILN_F32), NULL, &sp, 0, NULL, NULL),
      KILN_ERR_INVALID_ARGUMENT, "nesterov needs");
  sp.nesterov = false;
  sp.momentum = 0.9f;
  assert_kiln_error(kiln_sgd_step(q, RANGE(c, 0, 4, KILN_F32), NULL,
                                  RANGE(b, 0, 4, KILN_F32),
                                  RANGE(d, 0, 4, KILN_F32),
                                  RANGE(b, 2, 4, KILN_F32), &sp, 0, NULL, NULL),
                    KILN_ERR_INVALID_ARGUMENT, "overlap");
  assert_kiln_error(
      kiln_sgd_step(q, RANGE(c, 0, 4, KILN_I32), NULL, RANGE(b, 0, 4, KILN_F32),
                    RANGE(d, 0, 4, KILN_F32), NULL, &sp, 0, NULL, NULL),
      KILN_ERR_INVALID_ARGUMENT, "grad dtype i32");
  assert_kiln_error(
      kiln_sgd_step(q, RANGE(c, 0, 4, KILN_F32), NULL, RANGE(b, 0, 4, KILN_F32),
                    RANGE(d, 0, 4, KILN_F32), RANGE(c, 8, 4, (kiln_dtype)77),
                    &sp, 0, NULL, NULL),
      KILN_ERR_INVALID_ARGUMENT, "w_copy dtype 77");
  assert_kiln_error(
      kiln_sgd_step(q, RANGE(c, 0, 4, KILN_F32), RANGE(ob, 0, 1, KILN_U32),
                    RANGE(b, 0, 4, KILN_F32), RANGE(d, 0, 4, KILN_F32), NULL,
                    &sp, 0, NULL, NULL),
      KILN_ERR_WRONG_CONTEXT, "skip belongs");
  assert_kiln_error(kiln_sgd_step(q, RANGE(c, 0, 40, KILN_F32), NULL,
                                  RANGE(b, 0, 40, KILN_F32),
                                  RANGE(d, 0, 40, KILN_F32), NULL, &sp, 0, NULL,
                                  NULL),
                    KILN_ERR_OUT_OF_RANGE, "w range");
  assert_kiln_error(
      kiln_adamw_step(NULL, RANGE(c, 0, 4, KILN_F32), NULL,
                      RANGE(b, 0, 4, KILN_F32), RANGE(d, 0, 4, KILN_F32),
                      RANGE(d, 4, 4, KILN_F32), NULL, &ap, 0, NULL, NULL),
      KILN_ERR_NULL_POINTER, "kiln_adamw_step: queue is NULL");
  ap.step = 0;
  assert_kiln_error(
      kiln_adamw_step(q, RANGE(c, 0, 4, KILN_F32), NULL,
                      RANGE(b, 0, 4, KILN_F32), RANGE(d, 0, 4, KILN_F32),
                      RANGE(d, 4, 4, KILN_F32), NULL, &ap, 0, NULL, NULL),
      KILN_ERR_INVALID_ARGUMENT, "step is 0");
  ap.step = 1;
  ap.eps = 0;
  assert_kiln_error(
      kiln_adamw_step(q, RANGE(c, 0, 4, KILN_F32), NULL,
                      RANGE(b, 0, 4, KILN_F32), RANGE(d, 0, 4, KILN_F32),
                      RANGE(d, 4, 4, KILN_F32), NULL, &ap, 0, NULL, NULL),
      KILN_ERR_INVALID_ARGUMENT, "eps 0");
  ap.eps = 1e-8f;
  ap.lr = NAN;
  assert_kiln_error(
      kiln_adamw_step(q, RANGE(c, 0, 4, KILN_F32), NULL,
                      RANGE(b, 0, 4, KILN_F32), RANGE(d, 0, 4, KILN_F32),
                      RANGE(d, 4, 4, KILN_F32), NULL, &ap, 0, NULL, NULL),
      KILN_ERR_INVALID_ARGUMENT, "params->lr nan");
  ap.lr = 1e-3f;
  assert_kiln_error(kiln_adamw_step(q, RANGE(c, 0, 4, KILN_F32), NULL,
                                    RANGE(b, 0, 4, KILN_F32), NULL,
                                    RANGE(d, 4, 4, KILN_F32), NULL, &ap, 0,
                                    NULL, NULL),
                    KILN_ERR_NULL_POINTER, "m is NULL");
  assert_kiln_error(
      kiln_adamw_step(q, RANGE(c, 0, 4, KILN_F32), NULL,
                      RANGE(b, 0, 4, KILN_F32), RANGE(d, 0, 4, KILN_F32),
                      RANGE(d, 2, 4, KILN_F32), NULL, &ap, 0, NULL, NULL),
      KILN_ERR_INVALID_ARGUMENT, "overlap");
  assert_kiln_error(kiln_adamw_step(q, NULL, NULL, RANGE(b, 0, 4, KILN_F32),
                                    RANGE(d, 0, 4, KILN_F32),
                                    RANGE(d, 4, 4, KILN_F32), NULL, &ap, 0,
                                    NULL, NULL),
                    KILN_ERR_NULL_POINTER, "grad is NULL");
  /* Operands that disagree with w: count, dtype. */
  assert_kiln_error(
      kiln_sgd_step(q, RANGE(c, 0, 3, KILN_F32), NULL, RANGE(b, 0, 4, KILN_F32),
                    RANGE(d, 0, 4, KILN_F32), NULL, &sp, 0, NULL, NULL),
      KILN_ERR_SHAPE_MISMATCH, "grad has 3 elements but w's count is 4");
  assert_kiln_error(
      kiln_sgd_step(q, RANGE(c, 0, 4, KILN_F32), NULL, RANGE(b, 0, 4, KILN_F32),
                    RANGE(d, 0, 5, KILN_F32), NULL, &sp, 0, NULL, NULL),
      KILN_ERR_SHAPE_MISMATCH, "velocity has 5 elements");
  assert_kiln_error(
      kiln_sgd_step(q, RANGE(c, 0, 4, KILN_F32), NULL, RANGE(b, 0, 4, KILN_F16),
                    RANGE(d, 0, 4, KILN_F32), NULL, &sp, 0, NULL, NULL),
      KILN_ERR_INVALID_ARGUMENT, "w dtype f16");
  assert_kiln_error(
      kiln_sgd_step(q, RANGE(c, 0, 4, KILN_F32), RANGE(c, 8, 1, KILN_F32),
                    RANGE(b, 0, 4, KILN_F32), RANGE(d, 0, 4, KILN_F32), NULL,
                    &sp, 0, NULL, NULL),
      KILN_ERR_INVALID_ARGUMENT, "skip dtype f32");
  assert_kiln_error(
      kiln_sgd_step(q, RANGE(c, 0, 4, KILN_F32), RANGE(c, 8, 2, KILN_U32),
                    RANGE(b, 0, 4, KILN_F32), RANGE(d, 0, 4, KILN_F32), NULL,
                    &sp, 0, NULL, NULL),
      KILN_ERR_SHAPE_MISMATCH, "skip has 2 elements");
  assert_kiln_error(
      kiln_adamw_step(q, RANGE(c, 0, 4, KILN_F32), NULL,
                      RANGE(b, 0, 4, KILN_F32), RANGE(d, 0, 4, KILN_F32),
                      RANGE(d, 4, 4, KILN_BF16), NULL, &ap, 0, NULL, NULL),
      KILN_ERR_INVALID_ARGUMENT, "v dtype bf16");
  assert_kiln_error(
      kiln_adamw_step(q, RANGE(c, 0, 4, KILN_F32), NULL,
                      RANGE(b, 0, 4, KILN_F32), RANGE(d, 0, 4, KILN_F32),
                      RANGE(d, 4, 4, KILN_F32), RANGE(c, 8, 2, KILN_BF16), &ap,
                      0, NULL, NULL),
      KILN_ERR_SHAPE_MISMATCH, "w_copy has 2 elements");
  assert_kiln_error(kiln_adamw_step(q, RANGE(c, 0, 4, KILN_F32), NULL, NULL,
                                    RANGE(d, 0, 4, KILN_F32),
                                    RANGE(d, 4, 4, KILN_F32), NULL, &ap, 0,
                                    NULL, NULL),
                    KILN_ERR_NULL_POINTER, "w is NULL");
  /* norm, clip, check */
  kiln_range r[2] = {{b, 0, 4, KILN_F32}, {c, 0, 4, KILN_F32}};
  assert_kiln_error(
      kiln_grad_norm(NULL, r, 2, RANGE(d, 0, 1, KILN_F32), 0, NULL, NULL),
      KILN_ERR_NULL_POINTER, "kiln_grad_norm: queue is NULL");
  assert_kiln_error(
      kiln_grad_norm(q, NULL, 2, RANGE(d, 0, 1, KILN_F32), 0, NULL, NULL),
      KILN_ERR_NULL_POINTER, "ranges is NULL");
  assert_kiln_error(
      kiln_grad_norm(q, r, 70000, RANGE(d, 0, 1, KILN_F32), 0, NULL, NULL),
      KILN_ERR_INVALID_SIZE, "exceeds 65536");
  assert_kiln_error(
      kiln_grad_norm(q, r, 2, RANGE(b, 1, 1, KILN_F32), 0, NULL, NULL),
      KILN_ERR_INVALID_ARGUMENT, "overlap");
  assert_kiln_error(kiln_grad_norm(q, r, 2, NULL, 0, NULL, NULL),
                    KILN_ERR_NULL_POINTER, "norm is NULL");
  r[1].count = 1000;
  assert_kiln_error(
      kiln_grad_norm(q, r, 2, RANGE(d, 0, 1, KILN_F32), 0, NULL, NULL),
      KILN_ERR_OUT_OF_RANGE, "ranges[1].buffer range");
  r[1] = (kiln_range){b, 2, 4, KILN_F32};
  assert_kiln_error(
      kiln_clip_grad_norm(q, RANGE(d, 0, 1, KILN_F32), r, 2, 1, 0, NULL, NULL),
      KILN_ERR_INVALID_ARGUMENT, "overlap");
  r[1] = (kiln_range){ob, 0, 4, KILN_F32};
  assert_kiln_error(
      kiln_clip_grad_norm(q, RANGE(d, 0, 1, KILN_F32), r, 2, 1, 0, NULL, NULL),
      KILN_ERR_WRONG_CONTEXT, "ranges[1].buffer belongs");
  r[1] = (kiln_range){c, 0, 4, KILN_F32};
  assert_kiln_error(kiln_clip_grad_norm(NULL, RANGE(d, 0, 1, KILN_F32), r, 2, 1,
                                        0, NULL, NULL),
                    KILN_ERR_NULL_POINTER, "queue is NULL");
  assert_kiln_error(
      kiln_clip_grad_norm(q, RANGE(d, 0, 1, KILN_F32), r, 2, -1, 0, NULL, NULL),
      KILN_ERR_INVALID_ARGUMENT, "max_norm -1");
  assert_kiln_error(
      kiln_has_nonfinite(NULL, r, 2, RANGE(d, 0, 1, KILN_U32), 0, NULL, NULL),
      KILN_ERR_NULL_POINTER, "kiln_has_nonfinite: queue is NULL");
  /* The ranges' dtype: a float one, the same for all. */
  kiln_range ru[2] = {{b, 0, 4, KILN_U32}, {c, 0, 4, KILN_U32}};
  assert_kiln_error(
      kiln_has_nonfinite(q, ru, 2, RANGE(d, 0, 1, KILN_U32), 0, NULL, NULL),
      KILN_ERR_INVALID_ARGUMENT, "ranges[0] dtype u32");
  r[1].dtype = KILN_F16;
  assert_kiln_error(
      kiln_grad_norm(q, r, 2, RANGE(d, 0, 1, KILN_F32), 0, NULL, NULL),
      KILN_ERR_SHAPE_MISMATCH, "ranges[1] dtype f16 differs from ranges[0]");
  assert_kiln_error(
      kiln_clip_grad_norm(q, RANGE(d, 0, 1, KILN_F32), r, 2, 1, 0, NULL, NULL),
      KILN_ERR_SHAPE_MISMATCH, "ranges[1] dtype f16");
  assert_kiln_error(
      kiln_has_nonfinite(q, r, 2, RANGE(d, 0, 1, KILN_U32), 0, NULL, NULL),
      KILN_ERR_SHAPE_MISMATCH, "ranges[1] dtype f16");
  r[1].dtype = KILN_F32;
  /* The single-element outputs: their dtype and count. */
  assert_kiln_error(
      kiln_grad_norm(q, r, 2, RANGE(d, 0, 1, KILN_F16), 0, NULL, NULL),
      KILN_ERR_INVALID_ARGUMENT, "norm dtype f16");
  assert_kiln_error(
      kiln_grad_norm(q, r, 2, RANGE(d, 0, 2, KILN_F32), 0, NULL, NULL),
      KILN_ERR_SHAPE_MISMATCH, "norm has 2 elements");
  assert_kiln_error(
      kiln_clip_grad_norm(q, RANGE(d, 0, 1, KILN_U32), r, 2, 1, 0, NULL, NULL),
      KILN_ERR_INVALID_ARGUMENT, "norm dtype u32");
  assert_kiln_error(
      kiln_has_nonfinite(q, r, 2, RANGE(d, 0, 1, KILN_F32), 0, NULL, NULL),
      KILN_ERR_INVALID_ARGUMENT, "flag dtype f32");
  assert_kiln_error(
      kiln_has_nonfinite(q, r, 2, RANGE(d, 0, 0, KILN_U32), 0, NULL, NULL),
      KILN_ERR_SHAPE_MISMATCH, "flag has 0 elements");
  assert_kiln_error(kiln_has_nonfinite(q, r, 2, NULL, 0, NULL, NULL),
                    KILN_ERR_NULL_POINTER, "flag is NULL");
  assert_kiln_ok(kiln_buffer_destroy(c));
  assert_kiln_ok(kiln_buffer_destroy(d));
  util_bad_env_close(&env);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_optimizer_steps),
      cmocka_unit_test(test_norm_clip_nonfinite),
      cmocka_unit_test(test_bad_arguments),
  };
  return KILN_TEST_RUN("op_train_optim", tests, true);
}
