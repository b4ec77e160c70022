/* kiln's convolution, pooling and batch normalisation against PyTorch: the float64
 * inputs, outputs and gradients that tests/fixtures/make_cnn_fixtures.py
 * wrote with torch (tests/fixtures/cnn/CASE.FIELD.npy, described in
 * tests/fixtures/README.md), on every device, both kernel families and
 * every float dtype. The fixtures' inputs are multiples of 1/16 that every
 * dtype stores exactly (checked here), so the error bounds are those of
 * test_op_image.c (tests/image_test_util.h): kiln's f32 arithmetic and the
 * output's store. Each case's parameters are also checked against the line
 * cases.txt gives it, so this table and the script cannot drift apart.
 * The convolutions (kiln_ops_conv.h) are checked on the same fixtures,
 * exactly (see conv_fx). */
#include "image_test_util.h"
#include "npy.h"

#include <errno.h>

#define OFF 3

static const char *fixture_dir(void) {
  const char *d = getenv("KILN_FIXTURE_DIR");
  return d != NULL ? d : "tests/fixtures/cnn";
}

static struct npy_array load(const char *name, const char *field) {
  char path[512], err[640]; /* room for the path and the reason */
  snprintf(path, sizeof path, "%s/%s.%s.npy", fixture_dir(), name, field);
  struct npy_array a;
  if (npy_read(path, &a, err, sizeof err) != 0)
    fail_msg("%s", err);
  return a;
}

/* cases.txt has exactly this line. */
static void expect_case_line(const char *line) {
  char path[512], buf[512];
  snprintf(path, sizeof path, "%s/cases.txt", fixture_dir());
  FILE *f = fopen(path, "r");
  if (f == NULL)
    fail_msg("%s: %s", path, strerror(errno));
  bool found = false;
  while (!found && fgets(buf, sizeof buf, f) != NULL) {
    buf[strcspn(buf, "\n")] = 0;
    found = strcmp(buf, line) == 0;
  }
  fclose(f);
  if (!found)
    fail_msg("%s has no line \"%s\": regenerate the fixtures or fix the "
             "table in %s",
             path, line, __FILE__);
}

/* A buffer of a's count of dt from element OFF, with guards of -5 around:
 * an input's (raw NULL) holds a's values, which must be stored exactly; an
 * output's (raw not NULL: it receives the host image, for the guard check)
 * holds NaN, so an element the op does not write cannot pass. */
static kiln_buffer *upload(kiln_context *ctx, kiln_queue *q, kiln_dtype dt,
                           const struct npy_array *a, void **raw) {
  size_t total = OFF + a->count + 4;
  void *h = malloc(total * 4);
  assert_non_null(h);
  for (size_t i = 0; i < total; i++)
    util_set(dt, h, i, -5);
  for (size_t i = 0; i < a->count; i++) {
    util_set(dt, h, OFF + i, raw != NULL ? NAN : a->data[i]);
    if (raw == NULL && util_get(dt, h, OFF + i) != a->data[i])
      fail_msg("fixture value %.17g is not exact in %s", a->data[i],
               kiln_dtype_name(dt));
  }
  kiln_buffer *b = util_upload(ctx, q, dt, h, total);
  if (raw != NULL)
    *raw = h;
  else
    free(h);
  return b;
}

static kiln_image image_of(kiln_buffer *b, const struct npy_array *a,
                           kiln_dtype dt) {
  assert_int_equal(a->ndim, 4);
  return image_at(b, OFF, a->shape[0], a->shape[1], a->shape[2], a->shape[3],
                  dt);
}

/* ---- convolution ------------------------------------------------------------- */

/* The inputs are multiples of 1/16 of magnitude at most 4, so every product
 * is a multiple of 1/256 of at most 16 and every sum these cases form (a few
 * hundred terms at most) stays below 2^16 on the same grid: exact in f32 in
 * any order. kiln's convolutions must then give PyTorch's float64 results
 * exactly, whatever the family, the dtype or the chunking. */
static const struct conv_fx {
  const char *name;
  size_t sh, sw, ph, pw, dh, dw, groups;
  bool bias;
} convs[] = {
    {"conv_basic", 1, 1, 1, 1, 1, 1, 1, true},
    {"conv_stride", 2, 3, 1, 0, 1, 1, 1, true},
    {"conv_dilation", 1, 1, 2, 2, 2, 2, 1, true},
    {"conv_groups", 1, 1, 1, 1, 1, 1, 2, true},
    {"conv_depthwise", 2, 2, 1, 1, 1, 1, 3, true},
    {"conv_pointwise", 1, 1, 0, 0, 1, 1, 1, false},
    {"conv_whole", 1, 1, 0, 0, 1, 1, 1, true},
    {"conv_1x1_image", 1, 1, 1, 1, 1, 1, 1, true},
};

static void expect_exact(kiln_queue *q, kiln_buffer *b,
                         const struct npy_array *want, void *raw,
                         const char *what, const char *field) {
  double *got = img_download(q, 4, b, KILN_F32, OFF, want->count, raw, what);
  for (size_t i = 0; i < want->count; i++)
    UTIL_CLOSE(got[i], want->data[i], 0, "%s %s[%zu]", what, field, i);
  free(got);
}

static void conv_body(kiln_context *ctx, kiln_queue *q, const char *profile) {
  size_t ndt;
  const kiln_dtype *dts = util_float_dtypes(&ndt);
  for (size_t ci = 0; ci < sizeof convs / sizeof convs[0]; ci++) {
    const struct conv_fx *c = &convs[ci];
    char line[200];
    snprintf(line, sizeof line,
             "%s conv2d stride=%zu,%zu padding=%zu,%zu dilation=%zu,%zu "
             "groups=%zu bias=%d",
             c->name, c->sh, c->sw, c->ph, c->pw, c->dh, c->dw, c->groups,
             c->bias);
    expect_case_line(line);
    struct npy_array x = load(c->name, "x"), w = load(c->name, "w");
    struct npy_array y = load(c->name, "y"), dy = load(c->name, "dy");
    struct npy_array dx = load(c->name, "dx"), dw = load(c->name, "dw");
    struct npy_array b = {0}, db = {0};
    if (c->bias) {
      b = load(c->name, "b");
      db = load(c->name, "db");
    }
    const kiln_conv2d_params prm = {c->sh, c->sw, c->ph, c->pw,
                                    c->dh, c->dw, c->groups};
    for (size_t d = 0; d < ndt; d++) {
      const kiln_dtype dt = dts[d];
      void *yraw, *dxraw, *dwraw, *dbraw = NULL;
      kiln_buffer *xb = upload(ctx, q, dt, &x, NULL);
      kiln_buffer *wb = upload(ctx, q, dt, &w, NULL);
      kiln_buffer *gb = upload(ctx, q, dt, &dy, NULL);
      kiln_buffer *yb = upload(ctx, q, KILN_F32, &y, &yraw);
      kiln_buffer *dxb = upload(ctx, q, KILN_F32, &dx, &dxraw);
      kiln_buffer *dwb = upload(ctx, q, KILN_F32, &dw, &dwraw);
      kiln_buffer *bb = c->bias ? upload(ctx, q, KILN_F32, &b, NULL) : NULL;
      kiln_buffer *dbb = c->bias ? upload(ctx, q, KILN_F32, &db, &dbraw) : NULL;
      const kiln_image xi = image_of(xb, &x, dt), wi = image_of(wb, &w, dt);
      const kiln_image gi = image_of(gb, &dy, dt);
      const kiln_image yi = image_of(yb, &y, KILN_F32);
      const kiln_image dxi = image_of(dxb, &dx, KILN_F32);
      const kiln_image dwi = image_of(dwb, &dw, KILN_F32);
      const kiln_range br = {bb, OFF, b.count, KILN_F32};
      const kiln_range dbr = {dbb, OFF, db.count, KILN_F32};
      kiln_epilogue e = KILN_EPILOGUE_INIT;
      e.bias = c->bias ? &br : NULL;
      assert_kiln_ok(kiln_conv2d(q, &xi, &wi, &yi, &prm, &e, 0, NULL, NULL));
      assert_kiln_ok(
          kiln_conv2d_backward_data(q, &gi, &wi, &dxi, &prm, 0, NULL, NULL));
      assert_kiln_ok(kiln_conv2d_backward_weights(
          q, &xi, &gi, &dwi, c->bias ? &dbr : NULL, &prm, 0, NULL, NULL));
      char what[120];
      snprintf(what, sizeof what, "%s %s %s vs torch", profile, c->name,
               kiln_dtype_name(dt));
      expect_exact(q, yb, &y, yraw, what, "y");
      expect_exact(q, dxb, &dx, dxraw, what, "dx");
      expect_exact(q, dwb, &dw, dwraw, what, "dw");
      if (c->bias)
        expect_exact(q, dbb, &db, dbraw, what, "db");
      free(yraw);
      free(dxraw);
      free(dwraw);
      free(dbraw);
      kiln_buffer *all[] = {xb, wb, gb, yb, dxb, dwb, bb, dbb};
      for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        kiln_buffer_destroy(all[i]);
    }
    struct npy_array *arrays[] = {&x, &w, &y, &dy, &dx, &dw, &b, &db};
    for (size_t i = 0; i < sizeof arrays / sizeof arrays[0]; i++)
      free(arrays[i]->data);
  }
}

static void test_conv_torch(void **state) {
  (void)state;
  train_each_profile(conv_body);
}

/* ---- pooling ------------------------------------------------------------------ */

static const struct pool_fx {
  const char *name;
  kiln_pool_op op;
  size_t kh, kw, sh, sw, ph, pw;
  bool exclude;
} pools[] = {
    {"pool_max_2x2", KILN_POOL_MAX, 2, 2, 2, 2, 0, 0, false},
    {"pool_max_pad", KILN_POOL_MAX, 3, 3, 2, 2, 1, 1, false},
    {"pool_max_stride", KILN_POOL_MAX, 3, 2, 5, 4, 0, 1, false},
    {"pool_max_ties", KILN_POOL_MAX, 3, 3, 1, 1, 1, 1, false},
    {"pool_avg_pad", KILN_POOL_MEAN, 3, 3, 2, 2, 1, 1, false},
    {"pool_avg_exclude", KILN_POOL_MEAN, 3, 3, 2, 2, 1, 1, true},
    {"pool_avg_1x1", KILN_POOL_MEAN, 1, 1, 1, 1, 0, 0, false},
};

static void pool_body(kiln_context *ctx, kiln_queue *q, const char *profile) {
  size_t ndt;
  const kiln_dtype *dts = util_float_dtypes(&ndt);
  for (size_t pi = 0; pi < sizeof pools / sizeof pools[0]; pi++) {
    const struct pool_fx *p = &pools[pi];
    char line[200];
    snprintf(line, sizeof line,
             "%s %s_pool2d kernel=%zu,%zu stride=%zu,%zu padding=%zu,%zu "
             "count_include_pad=%d",
             p->name, p->op == KILN_POOL_MAX ? "max" : "avg", p->kh, p->kw,
             p->sh, p->sw, p->ph, p->pw, !p->exclude);
    expect_case_line(line);
    struct npy_array x = load(p->name, "x"), y = load(p->name, "y");
    struct npy_array dy = load(p->name, "dy"), dx = load(p->name, "dx");
    kiln_pool2d_params prm = {p->kh, p->kw, p->sh, p->sw, p->ph, p->pw,
                              p->exclude};
    double cover = (double)(((p->kh + p->sh - 1) / p->sh) *
                            ((p->kw + p->sw - 1) / p->sw));
    for (size_t d = 0; d < ndt; d++) {
      kiln_dtype dt = dts[d];
      void *yraw, *dxraw;
      kiln_buffer *xb = upload(ctx, q, dt, &x, NULL);
      kiln_buffer *yb = upload(ctx, q, dt, &y, &yraw);
      kiln_buffer *gb = upload(ctx, q, dt, &dy, NULL);
      kiln_buffer *dxb = upload(ctx, q, dt, &dx, &dxraw);
      kiln_image xi = image_of(xb, &x, dt), yi = image_of(yb, &y, dt);
      kiln_image gi = image_of(gb, &dy, dt), dxi = image_of(dxb, &dx, dt);
      assert_kiln_ok(kiln_pool2d(q, p->op, &xi, &yi, &prm, 0, NULL, NULL));
      assert_kiln_ok(kiln_pool2d_backward(q, p->op, &xi, &gi, &dxi, &prm, 0,
                                          NULL, NULL));
      char what[120];
      snprintf(what, sizeof what, "%s %s %s vs torch", profile, p->name,
               kiln_dtype_name(dt));
      double *gy = img_download(q, 4, yb, dt, OFF, y.count, yraw, what);
      double *gdx = img_download(q, 4, dxb, dt, OFF, dx.count, dxraw, what);
      for (size_t i = 0; i < y.count; i++)
        UTIL_CLOSE(gy[i], y.data[i],
                   pool_tol_y(p->op == KILN_POOL_MAX, (double)(p->kh * p->kw),
                              4, dt, y.data[i]),
                   "%s y[%zu]", what, i);
      for (size_t i = 0; i < dx.count; i++)
        UTIL_CLOSE(gdx[i], dx.data[i], pool_tol_dx(cover, 1, dt, dx.data[i]),
                   "%s dx[%zu]", what, i);
      free(gy);
      free(gdx);
      free(yraw);
      free(dxraw);
      kiln_buffer_destroy(xb);
      kiln_buffer_destroy(yb);
      kiln_buffer_destroy(gb);
      kiln_buffer_destroy(dxb);
    }
    free(x.data);
    free(y.data);
    free(dy.data);
    free(dx.data);
  }
}

static void test_pool_torch(void **state) {
  (void)state;
  train_each_profile(pool_body);
}

/* ---- batch normalisation --------------------------------------------------------- */

static const struct bn_fx {
  const char *name;
  bool train;
  const char *momentum_repr, *eps_repr; /* as Python's repr wrote them */
  float momentum, eps;
  bool affine;
} bns[] = {
    {"bn_train", true, "0.1", "1e-05", 0.1f, 1e-5f, true},
    {"bn_train_c1", true, "0.25", "0.001", 0.25f, 1e-3f, false},
    {"bn_train_1x1", true, "0.1", "1e-05", 0.1f, 1e-5f, true},
    {"bn_eval", false, NULL, "1e-05", 0, 1e-5f, true},
    {"bn_eval_c1", false, NULL, "0.001", 0, 1e-3f, false},
};

/* The per-channel vectors of a case in one f32 buffer, each at a multiple
 * of c: gamma 0, beta 1, running mean 2, running var 3, saved 4-5, dgamma
 * 6, dbeta 7. */
#define VEC(k, n) RANGE(vb, (k) * c, (n), KILN_F32)

static void expect_vec(const float *got, const struct npy_array *want,
                       const double *tol, const char *what,
                       const char *field) {
  for (size_t i = 0; i < want->count; i++)
    UTIL_CLOSE(got[i], want->data[i], tol[i], "%s %s[%zu]", what, field, i);
}

static void bn_train_case(kiln_context *ctx, kiln_queue *q,
                          const char *profile, const struct bn_fx *b,
                          kiln_dtype dt) {
  const char *nm = b->name;
  struct npy_array xs[2] = {load(nm, "x1"), load(nm, "x2")};
  struct npy_array ys[2] = {load(nm, "y1"), load(nm, "y2")};
  struct npy_array rms[3] = {load(nm, "rm0"), load(nm, "rm1"), load(nm, "rm2")};
  struct npy_array rvs[3] = {load(nm, "rv0"), load(nm, "rv1"), load(nm, "rv2")};
  struct npy_array mean2 = load(nm, "mean2"), inv2 = load(nm, "invstd2");
  struct npy_array dy = load(nm, "dy2"), dx = load(nm, "dx2");
  struct npy_array gamma = {0}, beta = {0}, dg = {0}, db = {0};
  size_t n = xs[0].shape[0], c = xs[0].shape[1];
  size_t hw = xs[0].shape[2] * xs[0].shape[3], count = xs[0].count;
  double m = (double)(n * hw);
  float *v = calloc(8 * c, sizeof *v);
  assert_non_null(v);
  if (b->affine) {
    gamma = load(nm, "gamma");
    beta = load(nm, "beta");
    dg = load(nm, "dgamma2");
    db = load(nm, "dbeta2");
    for (size_t ch = 0; ch < c; ch++) {
      v[ch] = (float)gamma.data[ch];
      v[c + ch] = (float)beta.data[ch];
    }
  }
  for (size_t ch = 0; ch < c; ch++) {
    v[2 * c + ch] = (float)rms[0].data[ch];
    v[3 * c + ch] = (float)rvs[0].data[ch];
  }
  kiln_buffer *vb = util_upload(ctx, q, KILN_F32, v, 8 * c);
  kiln_batchnorm_params prm = {b->eps, b->momentum};
  double *tol_rm = img_doubles(c), *tol_rv = img_doubles(c);
  double *mean = img_doubles(c), *var = img_doubles(c), *tol = img_doubles(c);
  char what[120];
  kiln_buffer *xb = NULL;
  for (int step = 0; step < 2; step++) {
    void *yraw;
    if (xb != NULL)
      kiln_buffer_destroy(xb);
    xb = upload(ctx, q, dt, &xs[step], NULL);
    kiln_buffer *yb = upload(ctx, q, dt, &ys[step], &yraw);
    kiln_image xi = image_of(xb, &xs[step], dt), yi = image_of(yb, &ys[step], dt);
    assert_kiln_ok(kiln_batchnorm_train(
        q, &xi, b->affine ? VEC(0, c) : NULL, b->affine ? VEC(1, c) : NULL,
        &yi, VEC(2, c), VEC(3, c), VEC(4, 2 * c), &prm, 0, NULL, NULL));
    snprintf(what, sizeof what, "%s %s %s step %d vs torch", profile, nm,
             kiln_dtype_name(dt), step + 1);
    double *y = img_download(q, 4, yb, dt, OFF, count, yraw, what);
    assert_kiln_ok(kiln_buffer_read_sync(q, VEC(0, 8 * c), v));
    bn_stats(n, c, hw, xs[step].data, mean, var);
    for (size_t i = 0; i < count; i++) {
      size_t ch = (i / hw) % c;
      struct bn_tol t = bn_tolerance(n, c, hw, xs[step].data, ch, mean[ch],
                                     var[ch], b->eps);
      double rstd = 1 / sqrt(var[ch] + b->eps);
      UTIL_CLOSE(y[i], ys[step].data[i],
                 bn_tol_y(&t, b->affine ? fabs(gamma.data[ch]) : 1,
                          b->affine ? fabs(beta.data[ch]) : 0, rstd,
                          xs[step].data[i], mean[ch], ys[step].data[i], dt),
                 "%s y[%zu]", what, i);
    }
    for (size_t ch = 0; ch < c; ch++) {
      struct bn_tol t = bn_tolerance(n, c, hw, xs[step].data, ch, mean[ch],
                                     var[ch], b->eps);
      tol_rm[ch] = (1 - b->momentum) * tol_rm[ch] + b->momentum * t.mean +
                   4 * IMG_U * (fabs(rms[step + 1].data[ch]) + 8);
      tol_rv[ch] = (1 - b->momentum) * tol_rv[ch] +
                   b->momentum * t.var * m / (m - 1) +
                   4 * IMG_U * (fabs(rvs[step + 1].data[ch]) + 8);
      tol[ch] = t.mean;
    }
    expect_vec(v + 2 * c, &rms[step + 1], tol_rm, what, "running_mean");
    expect_vec(v + 3 * c, &rvs[step + 1], tol_rv, what, "running_var");
    free(y);
    free(yraw);
    kiln_buffer_destroy(yb);
  }
  /* the saved statistics of step 2 and the backward pass */
  expect_vec(v + 4 * c, &mean2, tol, what, "saved mean");
  for (size_t ch = 0; ch < c; ch++) {
    struct bn_tol t = bn_tolerance(n, c, hw, xs[1].data, ch, mean[ch],
                                   var[ch], b->eps);
    tol[ch] = (t.rstd_rel + 2 * IMG_U) * inv2.data[ch];
  }
  expect_vec(v + 5 * c, &inv2, tol, what, "saved invstd");
  void *dxraw;
  kiln_buffer *gb = upload(ctx, q, dt, &dy, NULL);
  kiln_buffer *dxb = upload(ctx, q, dt, &dx, &dxraw);
  kiln_image xi = image_of(xb, &xs[1], dt), gi = image_of(gb, &dy, dt);
  kiln_image dxi = image_of(dxb, &dx, dt);
  assert_kiln_ok(kiln_batchnorm_backward(
      q, &xi, b->affine ? VEC(0, c) : NULL, VEC(4, 2 * c), &gi, &dxi,
      VEC(6, c), VEC(7, c), 0, NULL, NULL));
  snprintf(what, sizeof what, "%s %s %s backward vs torch", profile, nm,
           kiln_dtype_name(dt));
  double *gdx = img_download(q, 4, dxb, dt, OFF, count, dxraw, what);
  assert_kiln_ok(kiln_buffer_read_sync(q, VEC(0, 8 * c), v));
  double *sdy = img_doubles(c), *sdyx = img_doubles(c);
  for (size_t i = 0; i < count; i++) {
    size_t ch = (i / hw) % c;
    sdy[ch] += fabs(dy.data[i]);
    sdyx[ch] += fabs(dy.data[i] * (xs[1].data[i] - mean2.data[ch]) *
                     inv2.data[ch]);
  }
  for (size_t i = 0; i < count; i++) {
    size_t ch = (i / hw) % c;
    double k = fabs((b->affine ? gamma.data[ch] : 1) * inv2.data[ch]);
    double xh = fabs((xs[1].data[i] - mean2.data[ch]) * inv2.data[ch]);
    /* the saved statistics' own errors move dx too: rstd's relative error
     * scales it, the mean's shifts xhat */
    struct bn_tol t = bn_tolerance(n, c, hw, xs[1].data, ch, mean[ch],
                                   var[ch], b->eps);
    double stats = fabs(dx.data[i]) * 3 * t.rstd_rel +
                   k * t.mean * inv2.data[ch] * sdyx[ch] / m * 3;
    UTIL_CLOSE(gdx[i], dx.data[i],
               bn_tol_dx(m, sdy[ch], sdyx[ch], k, xh, dy.data[i], dx.data[i],
                         dt) +
                   stats,
               "%s dx[%zu]", what, i);
  }
  if (b->affine) {
    for (size_t ch = 0; ch < c; ch++) {
      struct bn_tol t = bn_tolerance(n, c, hw, xs[1].data, ch, mean[ch],
                                     var[ch], b->eps);
      tol[ch] = bn_tol_dbeta(m, sdy[ch]);
      tol_rm[ch] = bn_tol_dgamma(m, sdyx[ch]) + sdyx[ch] * t.rstd_rel +
                   t.mean * inv2.data[ch] * sdy[ch];
    }
    expect_vec(v + 7 * c, &db, tol, what, "dbeta");
    expect_vec(v + 6 * c, &dg, tol_rm, what, "dgamma");
  }
  free(gdx);
  free(dxraw);
  free(sdy);
  free(sdyx);
  kiln_buffer_destroy(gb);
  kiln_buffer_destroy(dxb);
  kiln_buffer_destroy(xb);
  kiln_buffer_destroy(vb);
  struct npy_array *all[] = {&xs[0], &xs[1], &ys[0], &ys[1], &rms[0],
                             &rms[1], &rms[2], &rvs[0], &rvs[1], &rvs[2],
                             &mean2, &inv2, &dy, &dx, &gamma, &beta, &dg, &db};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
    free(all[i]->data);
  free(v);
  free(tol_rm);
  free(tol_rv);
  free(mean);
  free(var);
  free(tol);
}

static void bn_eval_case(kiln_context *ctx, kiln_queue *q, const char *profile,
                         const struct bn_fx *b, kiln_dtype dt) {
  const char *nm = b->name;
  struct npy_array x = load(nm, "x"), y = load(nm, "y");
  struct npy_array rm = load(nm, "rm"), rv = load(nm, "rv");
  struct npy_array gamma = {0}, beta = {0};
  size_t c = x.shape[1], hw = x.shape[2] * x.shape[3];
  float *v = calloc(4 * c, sizeof *v);
  assert_non_null(v);
  if (b->affine) {
    gamma = load(nm, "gamma");
    beta = load(nm, "beta");
  }
  for (size_t ch = 0; ch < c; ch++) {
    v[ch] = b->affine ? (float)gamma.data[ch] : 0;
    v[c + ch] = b->affine ? (float)beta.data[ch] : 0;
    v[2 * c + ch] = (float)rm.data[ch];
    v[3 * c + ch] = (float)rv.data[ch];
  }
  kiln_buffer *vb = util_upload(ctx, q, KILN_F32, v, 4 * c);
  void *yraw;
  kiln_buffer *xb = upload(ctx, q, dt, &x, NULL);
  kiln_buffer *yb = upload(ctx, q, dt, &y, &yraw);
  kiln_image xi = image_of(xb, &x, dt), yi = image_of(yb, &y, dt);
  kiln_batchnorm_params prm = {b->eps, 0.5f};
  assert_kiln_ok(kiln_batchnorm_inference(
      q, &xi, b->affine ? VEC(0, c) : NULL, b->affine ? VEC(1, c) : NULL,
      VEC(2, c), VEC(3, c), &yi, &prm, 0, NULL, NULL));
  char what[120];
  snprintf(what, sizeof what, "%s %s %s vs torch", profile, nm,
           kiln_dtype_name(dt));
  double *gy = img_download(q, 4, yb, dt, OFF, y.count, yraw, what);
  for (size_t i = 0; i < y.count; i++) {
    size_t ch = (i / hw) % c;
    double ga = b->affine ? fabs(gamma.data[ch]) : 1;
    double be = b->affine ? fabs(beta.data[ch]) : 0;
    double rstd = 1 / sqrt(rv.data[ch] + b->eps);
    double tol = 8 * IMG_U * (fabs(x.data[i]) + fabs(rm.data[ch])) * rstd * ga +
                 8 * IMG_U * (fabs(y.data[i]) + be) +
                 util_storage_tol(dt, y.data[i]);
    UTIL_CLOSE(gy[i], y.data[i], tol, "%s y[%zu]", what, i);
  }
  free(gy);
  free(yraw);
  kiln_buffer_destroy(xb);
  kiln_buffer_destroy(yb);
  kiln_buffer_destroy(vb);
  free(x.data);
  free(y.data);
  free(rm.data);
  free(rv.data);
  free(gamma.data);
  free(beta.data);
  free(v);
}

static void bn_body(kiln_context *ctx, kiln_queue *q, const char *profile) {
  size_t ndt;
  const kiln_dtype *dts = util_float_dtypes(&ndt);
  for (size_t bi = 0; bi < sizeof bns / sizeof bns[0]; bi++) {
    const struct bn_fx *b = &bns[bi];
    char line[200];
    if (b->train)
      snprintf(line, sizeof line,
               "%s batchnorm_train momentum=%s eps=%s affine=%d", b->name,
               b->momentum_repr, b->eps_repr, b->affine);
    else
      snprintf(line, sizeof line, "%s batchnorm_eval eps=%s affine=%d",
               b->name, b->eps_repr, b->affine);
    expect_case_line(line);
    for (size_t d = 0; d < ndt; d++) {
      if (b->train)
        bn_train_case(ctx, q, profile, b, dts[d]);
      else
        bn_eval_case(ctx, q, profile, b, dts[d]);
    }
  }
}

static void test_batchnorm_torch(void **state) {
  (void)state;
  train_each_profile(bn_body);
}

/* The reader refuses what it cannot read. */
static void test_npy_reader(void **state) {
  (void)state;
  struct npy_array a;
  char err[640];
  assert_int_equal(npy_read("/nonexistent/x.npy", &a, err, sizeof err), -1);
  char path[512];
  snprintf(path, sizeof path, "%s/cases.txt", fixture_dir());
  assert_int_equal(npy_read(path, &a, err, sizeof err), -1);
  assert_non_null(strstr(err, "not a .npy file"));
  a = load("pool_max_2x2", "x");
  assert_int_equal(a.ndim, 4);
  assert_int_equal(a.count, 2 * 3 * 8 * 8);
  free(a.data);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_npy_reader),
      cmocka_unit_test(test_conv_torch),
      cmocka_unit_test(test_pool_torch),
      cmocka_unit_test(test_batchnorm_torch),
  };
  return KILN_TEST_RUN("op_image_torch", tests, false);
}
