/* Fused attention (kiln/kiln_ops_attention.h) against an unfused float64
 * host attention on awkward shapes (T = 1, primes, T past several tiles and
 * query groups, head sizes 8 to 128, batch 1 and 3, heads 1 and 4, causal
 * and not), every float dtype, both kernel families on every device,
 * strided operands (padded ld, batch strides with gaps, odd offsets) whose
 * untouched elements are checked; the backward pass against the host
 * gradient and the host gradient against finite differences of the host
 * forward; the key/value cache against the full forward's rows; bad input.
 *
 * Error bounds (u = 2^-24; d the head size; n the keys a row sees; S the
 * row's largest scale sum_c |q_c k_jc|; sums over the row's keys):
 * - a score carries (d + 2) u S (its dot product and the scaled q), so
 *   each p_j / l is within 2 (d + 2) u S + (2 n + 16) u relative (the
 *   running max cancels; exp, the rescalings and the sum of l add the
 *   rest): out_c within that times A_c = sum_j p_j |v_jc| / l; lse within
 *   (d + 2) u S + (n + 8) u + u |lse|.
 * - backward, per pair: dp = dO . v_j within (d + 2) u sum |dO||v_j|; D =
 *   dO . O within sum_c |dO_c| tol(O_c) + (d + 2) u sum |dO||O| (O as the
 *   forward stored it); p_j within dp_rel = 2 (d + 2) u S + tol(lse) + 4u
 *   relative; so dS = p (dp - D) within p (dp_rel (|dp| + |D|) + err(dp) +
 *   err(D)), and dQ = scale sum_j dS k_j, dK = scale sum_i dS q_i, dV =
 *   sum_i p dO_i add (n + 2) u of their absolute sums.
 * Every bound is doubled (the first-order terms above drop products of
 * small errors and the last rounding of each product), and f16/bf16
 * outputs add the store's rounding (util_storage_tol). The inputs of the
 * reference are the stored (rounded) inputs, so the storage formats add
 * nothing else. */
#include "attention_ref.h"
#include "train_test_util.h"


struct shape {
  size_t batch, heads, t, hs;
  bool causal;
};
static const struct shape shapes[] = {
    {1, 1, 1, 8, true},    {3, 4, 7, 8, true},    {1, 1, 13, 24, false},
    {3, 4, 17, 24, true},  {1, 4, 67, 64, true},  {3, 1, 31, 64, false},
    {1, 1, 37, 128, true}, {1, 4, 5, 128, false}, {3, 4, 1, 64, true},
    {1, 1, 131, 32, true}, {1, 2, 70, 16, false},
};
#define NSHAPES (sizeof shapes / sizeof shapes[0])

/* A strided operand: rows x cols per batch entry at off, ld, bs. */
struct lay {
  size_t off, rows, cols, ld, bs, batch;
};
static size_t lay_total(const struct lay *l) {
  return l->off + (l->batch - 1) * l->bs + (l->rows - 1) * l->ld + l->cols + 3;
}
static size_t at(const struct lay *l, size_t b, size_t r, size_t c) {
  return l->off + b * l->bs + r * l->ld + c;
}
static struct lay make_lay(size_t off, size_t rows, size_t cols, size_t pad,
                           size_t batch) {
  struct lay l = {off, rows, cols, cols + pad, 0, batch};
  l.bs = rows * l.ld + 2 * pad + 1;
  return l;
}
static kiln_matrix mat(kiln_buffer *b, const struct lay *l, kiln_dtype dt) {
  return (kiln_matrix){.buffer = b,
                       .offset = l->off,
                       .rows = l->rows,
                       .cols = l->cols,
                       .ld = l->ld,
                       .batch_stride = l->batch > 1 ? l->bs : 0,
                       .dtype = dt};
}

static double *doubles(size_t n) {
  double *p = calloc(n ? n : 1, sizeof *p);
  assert_non_null(p);
  return p;
}

/* L = sum dout . attention(x), x = q, k, v concatenated: for the finite
 * differences. */
static struct aref_prob g_p;
static double loss_of(const double *x) {
  struct aref_prob p = g_p;
  size_t n4 = p.B * p.H * p.T * p.d;
  p.q = (double *)x;
  p.k = (double *)x + n4;
  p.v = (double *)x + 2 * n4;
  double *out = doubles(n4), l = 0;
  aref_forward(&p, out, NULL, NULL, NULL);
  for (size_t e = 0; e < n4; e++)
    l += p.dout[e] * out[e];
  free(out);
  return l;
}

/* ---- forward and backward on the device ---------------------------------- */

static void check_written(kiln_dtype dt, const void *before, const void *after,
                          const bool *written, size_t total, const char *what) {
  size_t es = kiln_dtype_size(dt);
  for (size_t e = 0; e < total; e++)
    if (!written[e] &&
        memcmp((const char *)before + e * es, (const char *)after + e * es,
               es) != 0)
      fail_msg("%s: element %zu, which the op does not write, changed", what,
               e);
}

static void attention_body(kiln_context *ctx, kiln_queue *q,
                           const char *profile) {
  size_t ndt;
  const kiln_dtype *dts = util_float_dtypes(&ndt);
  for (size_t si = 0; si < NSHAPES; si++)
    for (size_t di = 0; di < ndt; di++) {
      const struct shape *sh = &shapes[si];
      kiln_dtype dt = dts[di];
      size_t B = sh->batch, H = sh->heads, T = sh->t, d = sh->hs, C = H * d;
      size_t pad = si % 2 ? 3 : 0;
      struct lay lq = make_lay(3, T, 3 * C, pad, B);
      struct lay lo = make_lay(2, T, C, pad, B);
      struct lay lg = make_lay(1, T, C, 0, B);
      struct lay lx = make_lay(5, T, 3 * C, pad + 1, B);
      size_t nq = lay_total(&lq), no = lay_total(&lo), ng = lay_total(&lg),
             nx = lay_total(&lx), nl = B * H * T, loff = 4;
      void *qkv = util_random(dt, nq, -1.5, 1.5, 900 + (uint32_t)si);
      void *dout = util_random(dt, ng, -1, 1, 901 + (uint32_t)si);
      void *o0 = util_random(dt, no, -1, 1, 902);
      void *x0 = util_random(dt, nx, -1, 1, 903);
      float *l0 = util_random(KILN_F32, nl + loff + 3, -1, 1, 904);
      kiln_buffer *bq = util_upload(ctx, q, dt, qkv, nq);
      kiln_buffer *bo = util_upload(ctx, q, dt, o0, no);
      kiln_buffer *bg = util_upload(ctx, q, dt, dout, ng);
      kiln_buffer *bx = util_upload(ctx, q, dt, x0, nx);
      kiln_buffer *bl = util_upload(ctx, q, KILN_F32, l0, nl + loff + 3);
      kiln_matrix mq = mat(bq, &lq, dt), mo = mat(bo, &lo, dt),
                  mg = mat(bg, &lg, dt), mx = mat(bx, &lx, dt);
      kiln_attention_params params = {0.0f, sh->causal};
      assert_kiln_ok(kiln_attention_forward(q, B, H, &mq, &mo,
                                            RANGE(bl, loff, nl, KILN_F32),
                                            &params, 0, NULL, NULL));
      assert_kiln_ok(kiln_attention_backward(
          q, B, H, &mq, &mo, &mg, RANGE(bl, loff, nl, KILN_F32), &mx, &params,
          0, NULL, NULL));
      void *o = util_download(q, bo, dt, no);
      void *x = util_download(q, bx, dt, nx);
      float *l = util_download(q, bl, KILN_F32, nl + loff + 3);

      struct aref_prob p = {B, H, T, d, sh->causal, (float)(1.0 / sqrt((double)d)),
                       NULL, NULL, NULL, NULL};
      size_t n4 = B * H * T * d;
      double *xin = doubles(3 * n4);
      p.q = xin;
      p.k = xin + n4;
      p.v = xin + 2 * n4;
      p.dout = doubles(n4);
      for (size_t b = 0; b < B; b++)
        for (size_t hh = 0; hh < H; hh++)
          for (size_t t = 0; t < T; t++)
            for (size_t c = 0; c < d; c++) {
              size_t e = AREF_IX(&p, b, hh, t, c);
              p.q[e] = util_get(dt, qkv, at(&lq, b, t, hh * d + c));
              p.k[e] = util_get(dt, qkv, at(&lq, b, t, C + hh * d + c));
              p.v[e] = util_get(dt, qkv, at(&lq, b, t, 2 * C + hh * d + c));
              p.dout[e] = util_get(dt, dout, at(&lg, b, t, hh * d + c));
            }
      double *ro = doubles(n4), *rl = doubles(nl), *to = doubles(n4),
             *tl = doubles(nl);
      aref_forward(&p, ro, rl, to, tl);
      char what[64];
      snprintf(what, sizeof what, "%s %s B%zu H%zu T%zu hs%zu %s", profile,
               kiln_dtype_name(dt), B, H, T, d,
               sh->causal ? "causal" : "full");
      bool *wo = calloc(no, 1), *wx = calloc(nx, 1), *wl = calloc(nl + loff + 3, 1);
      for (size_t b = 0; b < B; b++)
        for (size_t hh = 0; hh < H; hh++)
          for (size_t t = 0; t < T; t++) {
            size_t row = (b * H + hh) * T + t;
            UTIL_CLOSE(l[loff + row], rl[row], tl[row], "%s lse %zu", what,
                       row);
            wl[loff + row] = true;
            for (size_t c = 0; c < d; c++) {
              size_t e = AREF_IX(&p, b, hh, t, c), oe = at(&lo, b, t, hh * d + c);
              /* The bound on out as stored, for the backward's D. */
              to[e] += util_storage_tol(dt, ro[e]);
              UTIL_CLOSE(util_get(dt, o, oe), ro[e], to[e],
                         "%s out b%zu h%zu t%zu c%zu", what, b, hh, t, c);
              wo[oe] = true;
            }
          }
      check_written(dt, o0, o, wo, no, what);
      check_written(KILN_F32, l0, l, wl, nl + loff + 3, what);

      double *g = doubles(3 * n4), *tg = doubles(3 * n4);
      aref_backward(&p, to, tl, g, g + n4, g + 2 * n4, tg, tg + n4, tg + 2 * n4);
      /* The host gradient against finite differences of the host forward
       * (f32 pass only: it does not depend on the device). */
      double *fd = NULL;
      if (dt == KILN_F32 && 3 * n4 <= 1200) {
        fd = doubles(3 * n4);
        g_p = p;
        train_fd_grad(loss_of, xin, 3 * n4, fd);
        for (size_t e = 0; e < 3 * n4; e++)
          UTIL_CLOSE(g[e], fd[e], 1e-6 * (1 + fabs(fd[e])),
                     "%s host gradient vs finite differences at %zu", what, e);
      }
      for (size_t part = 0; part < 3; part++)
        for (size_t b = 0; b < B; b++)
          for (size_t hh = 0; hh < H; hh++)
            for (size_t t = 0; t < T; t++)
              for (size_t c = 0; c < d; c++) {
                size_t e = part * n4 + AREF_IX(&p, b, hh, t, c);
                size_t xe = at(&lx, b, t, part * C + hh * d + c);
                double want = g[e];
                double tol = tg[e] + util_storage_tol(dt, want);
                UTIL_CLOSE(util_get(dt, x, xe), want, tol,
                           "%s d%c b%zu h%zu t%zu c%zu", what, "qkv"[part], b,
                           hh, t, c);
                if (fd)
                  UTIL_CLOSE(util_get(dt, x, xe), fd[e],
                             tol + 1e-6 * (1 + fabs(fd[e])),
                             "%s d%c vs finite differences at %zu", what,
                             "qkv"[part], e);
                wx[xe] = true;
              }
      check_written(dt, x0, x, wx, nx, what);
      free(fd);
      free(g);
      free(tg);
      free(wo);
      free(wx);
      free(wl);
      free(ro);
      free(rl);
      free(to);
      free(tl);
      free(xin);
      free(p.dout);
      free(qkv);
      free(dout);
      free(o0);
      free(x0);
      free(l0);
      free(o);
      free(x);
      free(l);
      assert_kiln_ok(kiln_buffer_destroy(bq));
      assert_kiln_ok(kiln_buffer_destroy(bo));
      assert_kiln_ok(kiln_buffer_destroy(bg));
      assert_kiln_ok(kiln_buffer_destroy(bx));
      assert_kiln_ok(kiln_buffer_destroy(bl));
    }
}

static void test_forward_backward(void **state) {
  (void)state;
  train_each_profile(attention_body);
}

/* ---- key/value cache ------------------------------------------------------- */

/* Append the K/V of qkv's rows in chunks of 1 to 3 positions (a prompt
 * first), decode each chunk's queries against the cache, and compare with
 * the full forward's rows: the same kernel over the same keys in the same
 * order, so the same bits. Then the caches must hold K and V bit for bit,
 * with rows past T and the padding untouched. */
static void cache_body(kiln_context *ctx, kiln_queue *q, const char *profile) {
  static const struct shape cs[] = {
      {3, 4, 9, 24, true}, {1, 1, 70, 64, true}, {1, 2, 5, 128, false}};
  size_t ndt;
  const kiln_dtype *dts = util_float_dtypes(&ndt);
  for (size_t si = 0; si < sizeof cs / sizeof cs[0]; si++)
    for (size_t di = 0; di < ndt; di++) {
      const struct shape *sh = &cs[si];
      kiln_dtype dt = dts[di];
      size_t B = sh->batch, H = sh->heads, T = sh->t, d = sh->hs, C = H * d;
      size_t tmax = T + 2;
      struct lay lq = make_lay(1, T, 3 * C, 2, B);
      struct lay lo = make_lay(0, T, C, 0, B);
      /* The caches: (B H) entries of tmax x d, ld d + 1, 1 apart beyond. */
      struct lay lc = {2, tmax, d, d + 1, tmax * (d + 1) + 1, B * H};
      size_t nq = lay_total(&lq), no = lay_total(&lo), nc = lay_total(&lc);
      void *qkv = util_random(dt, nq, -2, 2, 700 + (uint32_t)si);
      void *c0 = util_random(dt, nc, -1, 1, 701);
      kiln_buffer *bq = util_upload(ctx, q, dt, qkv, nq);
      kiln_buffer *bo = util_upload(ctx, q, dt, c0, no);
      kiln_buffer *bd = util_upload(ctx, q, dt, c0, no);
      kiln_buffer *bk = util_upload(ctx, q, dt, c0, nc);
      kiln_buffer *bv = util_upload(ctx, q, dt, c0, nc);
      kiln_matrix mq = mat(bq, &lq, dt), mo = mat(bo, &lo, dt);
      kiln_matrix mk = mat(bk, &lc, dt), mv = mat(bv, &lc, dt);
      kiln_attention_params params = {0.0f, sh->causal};
      assert_kiln_ok(kiln_attention_forward(q, B, H, &mq, &mo, NULL, &params,
                                            0, NULL, NULL));
      void *full = util_download(q, bo, dt, no);
      char what[64];
      snprintf(what, sizeof what, "%s %s cache B%zu H%zu T%zu hs%zu", profile,
               kiln_dtype_name(dt), B, H, T, d);
      size_t pos = 0, step = 0;
      while (pos < T) {
        size_t n = step == 0 ? (T + 1) / 2 : 1 + step % 3;
        if (n > T - pos)
          n = T - pos;
        kiln_matrix k = mq, v = mq, qq = mq, od = mat(bd, &lo, dt);
        k.offset = at(&lq, 0, pos, C);
        v.offset = at(&lq, 0, pos, 2 * C);
        qq.offset = at(&lq, 0, pos, 0);
        k.rows = v.rows = qq.rows = od.rows = n;
        k.cols = v.cols = qq.cols = C;
        assert_kiln_ok(kiln_attention_cache_append(q, B, H, pos, &k, &v, &mk,
                                                   &mv, 0, NULL, NULL));
        /* Non-causal decode sees only what is cached: compare those rows
         * with a forward over the first pos + n positions. */
        assert_kiln_ok(kiln_attention_decode(q, B, H, pos + n, &qq, &mk, &mv,
                                             &od, &params, 0, NULL, NULL));
        void *dec = util_download(q, bd, dt, no);
        void *want = full;
        if (!sh->causal) {
          kiln_matrix pre = mq, po = mo;
          pre.rows = po.rows = pos + n;
          assert_kiln_ok(kiln_attention_forward(q, B, H, &pre, &po, NULL,
                                                &params, 0, NULL, NULL));
          want = util_download(q, bo, dt, no);
        }
        size_t es = kiln_dtype_size(dt);
        for (size_t b = 0; b < B; b++)
          for (size_t r = 0; r < n; r++)
            if (memcmp((char *)dec + at(&lo, b, r, 0) * es,
                       (char *)want + at(&lo, b, pos + r, 0) * es, C * es) != 0)
              fail_msg("%s: decode of positions [%zu, %zu) differs from the "
                       "forward's row %zu of batch %zu",
                       what, pos, pos + n, pos + r, b);
        if (want != full)
          free(want);
        free(dec);
        pos += n;
        step++;
      }
      void *kc = util_download(q, bk, dt, nc), *vc = util_download(q, bv, dt, nc);
      bool *w = calloc(nc, 1);
      size_t es = kiln_dtype_size(dt);
      for (size_t b = 0; b < B; b++)
        for (size_t hh = 0; hh < H; hh++)
          for (size_t t = 0; t < T; t++) {
            size_t ce = at(&lc, b * H + hh, t, 0);
            if (memcmp((char *)kc + ce * es,
                       (char *)qkv + at(&lq, b, t, C + hh * d) * es,
                       d * es) != 0 ||
                memcmp((char *)vc + ce * es,
                       (char *)qkv + at(&lq, b, t, 2 * C + hh * d) * es,
                       d * es) != 0)
              fail_msg("%s: cache row %zu of b%zu h%zu is not K/V", what, t, b,
                       hh);
            for (size_t c = 0; c < d; c++)
              w[ce + c] = true;
          }
      check_written(dt, c0, kc, w, nc, what);
      check_written(dt, c0, vc, w, nc, what);
      free(w);
      free(kc);
      free(vc);
      free(full);
      free(qkv);
      free(c0);
      assert_kiln_ok(kiln_buffer_destroy(bq));
      assert_kiln_ok(kiln_buffer_destroy(bo));
      assert_kiln_ok(kiln_buffer_destroy(bd));
      assert_kiln_ok(kiln_buffer_destroy(bk));
      assert_kiln_ok(kiln_buffer_destroy(bv));
    }
}

static void test_cache(void **state) {
  (void)state;
  train_each_profile(cache_body);
}

/* An explicit scale and the mask off match the reference too (one shape). */
static void scale_body(kiln_context *ctx, kiln_queue *q, const char *profile) {
  size_t B = 2, H = 2, T = 11, d = 8, C = H * d;
  float *qkv = util_random(KILN_F32, B * T * 3 * C, -1, 1, 55);
  kiln_buffer *bq = util_upload(ctx, q, KILN_F32, qkv, B * T * 3 * C);
  kiln_buffer *bo = util_buffer(ctx, B * T * C * 4, 0);
  kiln_attention_params params = {0.7f, false};
  assert_kiln_ok(kiln_attention_forward(
      q, B, H,
      &(kiln_matrix){.buffer = bq, .rows = T, .cols = 3 * C,
                     .batch_stride = T * 3 * C, .dtype = KILN_F32},
      &(kiln_matrix){.buffer = bo, .rows = T, .cols = C,
                     .batch_stride = T * C, .dtype = KILN_F32},
      NULL, &params, 0, NULL, NULL));
  float *o = util_download(q, bo, KILN_F32, B * T * C);
  struct aref_prob p = {B, H, T, d, false, 0.7f, NULL, NULL, NULL, NULL};
  size_t n4 = B * H * T * d;
  double *x = doubles(3 * n4), *ro = doubles(n4), *to = doubles(n4);
  p.q = x;
  p.k = x + n4;
  p.v = x + 2 * n4;
  for (size_t b = 0; b < B; b++)
    for (size_t h = 0; h < H; h++)
      for (size_t t = 0; t < T; t++)
        for (size_t c = 0; c < d; c++)
          for (size_t part = 0; part < 3; part++)
            x[part * n4 + AREF_IX(&p, b, h, t, c)] =
                qkv[(b * T + t) * 3 * C + part * C + h * d + c];
  aref_forward(&p, ro, NULL, to, NULL);
  for (size_t b = 0; b < B; b++)
    for (size_t h = 0; h < H; h++)
      for (size_t t = 0; t < T; t++)
        for (size_t c = 0; c < d; c++)
          UTIL_CLOSE(o[(b * T + t) * C + h * d + c], ro[AREF_IX(&p, b, h, t, c)],
                     to[AREF_IX(&p, b, h, t, c)] + FLT_MIN, "%s scale 0.7 at %zu",
                     profile, AREF_IX(&p, b, h, t, c));
  free(qkv);
  free(o);
  free(x);
  free(ro);
  free(to);
  assert_kiln_ok(kiln_buffer_destroy(bq));
  assert_kiln_ok(kiln_buffer_destroy(bo));
}

static void test_scale(void **state) {
  (void)state;
  train_each_profile(scale_body);
}

/* ---- bad input --------------------------------------------------------------- */

static void test_bad_arguments(void **state) {
  (void)state;
  struct util_bad_env env = util_bad_env_open();
  kiln_queue *q = env.q;
  kiln_buffer *b = util_buffer(env.ctx, 1 << 16, 0);
  kiln_buffer *c = util_buffer(env.ctx, 1 << 16, 0);
  /* T 2, C 8, heads 2. */
  kiln_matrix qkv = {.buffer = b, .rows = 2, .cols = 24, .dtype = KILN_F32};
  kiln_matrix out = {.buffer = c, .rows = 2, .cols = 8, .dtype = KILN_F32};
  kiln_matrix dq = {.buffer = c, .offset = 64, .rows = 2, .cols = 24,
                    .dtype = KILN_F32};
  kiln_range lse = {c, 200, 4, KILN_F32};
  assert_kiln_ok(kiln_attention_forward(q, 1, 2, &qkv, &out, &lse, NULL, 0,
                                        NULL, NULL));
  assert_kiln_error(kiln_attention_forward(NULL, 1, 2, &qkv, &out, NULL, NULL,
                                           0, NULL, NULL),
                    KILN_ERR_NULL_POINTER, "queue");
  assert_kiln_error(kiln_attention_forward(q, 1, 2, NULL, &out, NULL, NULL, 0,
                                           NULL, NULL),
                    KILN_ERR_NULL_POINTER, "qkv is NULL");
  assert_kiln_error(kiln_attention_forward(q, 0, 2, &qkv, &out, NULL, NULL, 0,
                                           NULL, NULL),
                    KILN_ERR_INVALID_SIZE, "batch 0");
  assert_kiln_error(kiln_attention_forward(q, 1, 3, &qkv, &out, NULL, NULL, 0,
                                           NULL, NULL),
                    KILN_ERR_INVALID_ARGUMENT, "heads 3 does not divide C 8");
  /* Head size 136 > 128. */
  kiln_matrix wide = {.buffer = b, .rows = 1, .cols = 408, .dtype = KILN_F32};
  kiln_matrix wide_o = {.buffer = c, .rows = 1, .cols = 136,
                        .dtype = KILN_F32};
  assert_kiln_error(kiln_attention_forward(q, 1, 1, &wide, &wide_o, NULL, NULL,
                                           0, NULL, NULL),
                    KILN_ERR_INVALID_ARGUMENT, "head size 136");
  kiln_matrix o16 = out;
  o16.dtype = KILN_F16;
  assert_kiln_error(kiln_attention_forward(q, 1, 2, &qkv, &o16, NULL, NULL, 0,
                                           NULL, NULL),
                    KILN_ERR_SHAPE_MISMATCH, "out dtype f16 differs");
  kiln_matrix o9 = out;
  o9.cols = 9;
  assert_kiln_error(kiln_attention_forward(q, 1, 2, &qkv, &o9, NULL, NULL, 0,
                                           NULL, NULL),
                    KILN_ERR_SHAPE_MISMATCH, "qkv has 24 cols");
  kiln_matrix o3 = out;
  o3.rows = 3;
  assert_kiln_error(kiln_attention_forward(q, 1, 2, &qkv, &o3, NULL, NULL, 0,
                                           NULL, NULL),
                    KILN_ERR_SHAPE_MISMATCH, "out is 3x8");
  kiln_matrix qi = qkv;
  qi.dtype = KILN_I32;
  assert_kiln_error(kiln_attention_forward(q, 1, 2, &qi, &out, NULL, NULL, 0,
                                           NULL, NULL),
                    KILN_ERR_INVALID_ARGUMENT, "qkv dtype");
  kiln_matrix qt = qkv;
  qt.trans = KILN_TRANS;
  assert_kiln_error(kiln_attention_forward(q, 1, 2, &qt, &out, NULL, NULL, 0,
                                           NULL, NULL),
                    KILN_ERR_INVALID_ARGUMENT, "row-major");
  kiln_matrix ob = out;
  ob.batch_stride = 8;
  assert_kiln_error(kiln_attention_forward(q, 2, 2, &qkv, &ob, NULL, NULL, 0,
                                           NULL, NULL),
                    KILN_ERR_INVALID_ARGUMENT, "out->batch_stride 8");
  assert_kiln_error(kiln_attention_forward(q, 1, 2, &qkv, &out,
                                           RANGE(c, 200, 5, KILN_F32), NULL, 0,
                                           NULL, NULL),
                    KILN_ERR_SHAPE_MISMATCH, "lse has 5 elements");
  assert_kiln_error(kiln_attention_forward(q, 1, 2, &qkv, &out,
                                           RANGE(c, 200, 4, KILN_F16), NULL, 0,
                                           NULL, NULL),
                    KILN_ERR_INVALID_ARGUMENT, "lse dtype");
  assert_kiln_error(kiln_attention_forward(q, 1, 2, &qkv, &out,
                                           RANGE(c, 4, 4, KILN_F32), NULL, 0,
                                           NULL, NULL),
                    KILN_ERR_INVALID_ARGUMENT, "overlap");
  kiln_matrix oo = out;
  oo.buffer = b;
  assert_kiln_error(kiln_attention_forward(q, 1, 2, &qkv, &oo, NULL, NULL, 0,
                                           NULL, NULL),
                    KILN_ERR_INVALID_ARGUMENT, "overlap");
  kiln_matrix ox = out;
  ox.buffer = env.ob;
  assert_kiln_error(kiln_attention_forward(q, 1, 2, &qkv, &ox, NULL, NULL, 0,
                                           NULL, NULL),
                    KILN_ERR_WRONG_CONTEXT, "out");
  kiln_matrix big = qkv;
  big.offset = (1 << 14) - 10;
  assert_kiln_error(kiln_attention_forward(q, 1, 2, &big, &out, NULL, NULL, 0,
                                           NULL, NULL),
                    KILN_ERR_OUT_OF_RANGE, "qkv");
  kiln_attention_params neg = {-1.0f, true};
  assert_kiln_error(kiln_attention_forward(q, 1, 2, &qkv, &out, NULL, &neg, 0,
                                           NULL, NULL),
                    KILN_ERR_INVALID_ARGUMENT, "params->scale");
  /* Backward. */
  assert_kiln_ok(kiln_attention_backward(q, 1, 2, &qkv, &out, &out, &lse, &dq,
                                         NULL, 0, NULL, NULL));
  assert_kiln_error(kiln_attention_backward(q, 1, 2, &qkv, &out, &out, NULL,
                                            &dq, NULL, 0, NULL, NULL),
                    KILN_ERR_NULL_POINTER, "lse is NULL");
  kiln_matrix dq16 = dq;
  dq16.dtype = KILN_BF16;
  assert_kiln_error(kiln_attention_backward(q, 1, 2, &qkv, &out, &out, &lse,
                                            &dq16, NULL, 0, NULL, NULL),
                    KILN_ERR_SHAPE_MISMATCH, "dqkv dtype bf16 differs");
  assert_kiln_error(kiln_attention_backward(q, 1, 2, &qkv, &out, &out, &lse,
                                            &qkv, NULL, 0, NULL, NULL),
                    KILN_ERR_INVALID_ARGUMENT, "overlap");
  /* The cache: 2 entries (batch 1, heads 2) of 4 x 4. */
  kiln_matrix kc = {.buffer = b, .offset = 1000, .rows = 4, .cols = 4,
                    .batch_stride = 16, .dtype = KILN_F32};
  kiln_matrix vc = kc;
  vc.offset = 2000;
  kiln_matrix kn = {.buffer = b, .offset = 8, .rows = 2, .cols = 8, .ld = 24,
                    .dtype = KILN_F32};
  kiln_matrix vn = kn;
  vn.offset = 16;
  kiln_matrix qn = kn;
  qn.offset = 0;
  assert_kiln_ok(kiln_attention_cache_append(q, 1, 2, 2, &kn, &vn, &kc, &vc, 0,
                                             NULL, NULL));
  assert_kiln_error(kiln_attention_cache_append(q, 1, 2, 3, &kn, &vn, &kc, &vc,
                                                0, NULL, NULL),
                    KILN_ERR_OUT_OF_RANGE, "pos 3 + 2 new rows exceeds");
  assert_kiln_ok(kiln_attention_decode(q, 1, 2, 4, &qn, &kc, &vc, &out, NULL,
                                       0, NULL, NULL));
  assert_kiln_error(kiln_attention_decode(q, 1, 2, 5, &qn, &kc, &vc, &out,
                                          NULL, 0, NULL, NULL),
                    KILN_ERR_OUT_OF_RANGE, "t 5 exceeds the caches' 4 rows");
  assert_kiln_error(kiln_attention_decode(q, 1, 2, 1, &qn, &kc, &vc, &out,
                                          NULL, 0, NULL, NULL),
                    KILN_ERR_SHAPE_MISMATCH, "q has 2 rows but only t 1");
  kiln_matrix kc5 = kc;
  kc5.cols = 5;
  assert_kiln_error(kiln_attention_decode(q, 1, 2, 4, &qn, &kc5, &vc, &out,
                                          NULL, 0, NULL, NULL),
                    KILN_ERR_SHAPE_MISMATCH, "k_cache is 4x5");
  kiln_matrix vc16 = vc;
  vc16.dtype = KILN_F16;
  assert_kiln_error(kiln_attention_cache_append(q, 1, 2, 0, &kn, &vn, &kc,
                                                &vc16, 0, NULL, NULL),
                    KILN_ERR_SHAPE_MISMATCH, "v_cache dtype f16 differs");
  kiln_matrix kc0 = kc;
  kc0.batch_stride = 0;
  assert_kiln_error(kiln_attention_cache_append(q, 1, 2, 0, &kn, &vn, &kc0, &vc,
                                                0, NULL, NULL),
                    KILN_ERR_INVALID_ARGUMENT, "k_cache->batch_stride 0");
  assert_kiln_error(kiln_attention_cache_append(q, 1, 2, 0, &kn, &vn, &kc, &kc,
                                                0, NULL, NULL),
                    KILN_ERR_INVALID_ARGUMENT, "overlap");
  assert_kiln_ok(kiln_buffer_destroy(b));
  assert_kiln_ok(kiln_buffer_destroy(c));
  util_bad_env_close(&env);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_forward_backward),
      cmocka_unit_test(test_cache),
      cmocka_unit_test(test_scale),
      cmocka_unit_test(test_bad_arguments),
  };
  return KILN_TEST_RUN("op_attention", tests, true);
}
