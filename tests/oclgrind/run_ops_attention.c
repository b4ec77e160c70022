/* run_ops.c's group "attention": the attention ops
 * (kiln/kiln_ops_attention.h) once each on small awkward shapes in
 * sentinel-framed buffers, checked against the float64 host attention, so
 * that Oclgrind sees every attention kernel of the device's family (the
 * GPU family's staged tiles and barriers included: T 70 spans two query
 * groups and several key tiles). The thorough checks are
 * tests/test_op_attention.c. */
#include <math.h>
#include <stdlib.h>

#include "../attention_ref.h"
#include "run_ops_attention.h"

/* The packed (B, T, W) layout of run_ops' buffers: element (b, t, w). */
static size_t el(size_t t_rows, size_t w, size_t b, size_t t, size_t c) {
  return (b * t_rows + t) * w + c;
}

static kiln_matrix packed(kiln_buffer *buf, size_t off, size_t rows,
                          size_t cols, size_t batch, kiln_dtype dt) {
  return (kiln_matrix){.buffer = buf,
                       .offset = off,
                       .rows = rows,
                       .cols = cols,
                       .batch_stride = batch > 1 ? rows * cols : 0,
                       .dtype = dt};
}

/* The largest of n bounds, for expect()'s absolute tolerance. */
static double max_of(const double *t, size_t n) {
  double m = 0;
  for (size_t i = 0; i < n; i++)
    m = fmax(m, t[i]);
  return m;
}

static void run_attention_case(kiln_dtype dt, size_t B, size_t H, size_t T,
                               size_t d, bool causal) {
  const size_t C = H * d, n3 = B * T * 3 * C, n1 = B * T * C, nl = B * H * T;
  const size_t n4 = B * H * T * d;
  void *xh, *gh;
  kiln_buffer *x = input(dt, 3, n3, 401, &xh), *g = input(dt, 2, n1, 402, &gh);
  kiln_buffer *o = output(dt, n1), *l = output(KILN_F32, nl),
              *dx = output(dt, n3);
  kiln_matrix mx = packed(x, 3, T, 3 * C, B, dt), mo = packed(o, 0, T, C, B, dt);
  kiln_matrix mg = packed(g, 2, T, C, B, dt), md = packed(dx, 0, T, 3 * C, B, dt);
  kiln_range rl = {l, 0, nl, KILN_F32};
  kiln_attention_params params = {0.0f, causal};
  CHECK_OK(kiln_attention_forward(q, B, H, &mx, &mo, &rl, &params, 0, NULL,
                                  NULL));
  CHECK_OK(kiln_attention_backward(q, B, H, &mx, &mo, &mg, &rl, &md, &params,
                                   0, NULL, NULL));
  struct aref_prob p = {B, H, T, d, causal, (float)(1.0 / sqrt((double)d)),
                        NULL, NULL, NULL, NULL};
  double *in = aref_doubles(4 * n4);
  p.q = in;
  p.k = in + n4;
  p.v = in + 2 * n4;
  p.dout = in + 3 * n4;
  for (size_t b = 0; b < B; b++)
    for (size_t h = 0; h < H; h++)
      for (size_t t = 0; t < T; t++)
        for (size_t c = 0; c < d; c++) {
          for (size_t part = 0; part < 3; part++)
            in[part * n4 + AREF_IX(&p, b, h, t, c)] =
                load(dt, xh, el(T, 3 * C, b, t, part * C + h * d + c));
          p.dout[AREF_IX(&p, b, h, t, c)] =
              load(dt, gh, el(T, C, b, t, h * d + c));
        }
  double *ro = aref_doubles(n4), *rl_ = aref_doubles(nl);
  double *to = aref_doubles(n4), *tl = aref_doubles(nl);
  aref_forward(&p, ro, rl_, to, tl);
  double *g3 = aref_doubles(3 * n4), *t3 = aref_doubles(3 * n4);
  for (size_t e = 0; e < n4; e++)
    to[e] += 2 * (dt == KILN_F16 ? 0x1p-11 : dt == KILN_BF16 ? 0x1p-8 : 0) *
             fabs(ro[e]);
  aref_backward(&p, to, tl, g3, g3 + n4, g3 + 2 * n4, t3, t3 + n4,
                t3 + 2 * n4);
  /* The references in the device's layouts. */
  double *wo = aref_doubles(n1), *wx = aref_doubles(n3);
  for (size_t b = 0; b < B; b++)
    for (size_t h = 0; h < H; h++)
      for (size_t t = 0; t < T; t++)
        for (size_t c = 0; c < d; c++) {
          size_t e = AREF_IX(&p, b, h, t, c);
          wo[el(T, C, b, t, h * d + c)] = ro[e];
          for (size_t part = 0; part < 3; part++)
            wx[el(T, 3 * C, b, t, part * C + h * d + c)] = g3[part * n4 + e];
        }
  void *got = download(o, dt, 0, n1);
  expect("attention forward", dt, got, wo, n1, max_of(to, n4));
  free(got);
  got = download(l, KILN_F32, 0, nl);
  expect("attention lse", KILN_F32, got, rl_, nl, max_of(tl, nl));
  free(got);
  got = download(dx, dt, 0, n3);
  expect("attention backward", dt, got, wx, n3, max_of(t3, 3 * n4));
  free(got);

  /* The cache: append the first T - 1 positions, then the last, and decode
   * the last query; it must equal the forward's last row. */
  const size_t tmax = T + 1, nc = B * H * tmax * d;
  kiln_buffer *kc = output(dt, nc), *vc = output(dt, nc), *od = output(dt, B * C);
  kiln_matrix mk = {.buffer = kc, .rows = tmax, .cols = d,
                    .batch_stride = tmax * d, .dtype = dt};
  kiln_matrix mv = mk;
  mv.buffer = vc;
  const size_t chunks[2][2] = {{0, T - 1}, {T - 1, 1}}; /* pos, n; T >= 2 */
  for (int i = 0; i < 2; i++) {
    size_t pos = chunks[i][0], n = chunks[i][1];
    kiln_matrix k = {.buffer = x, .offset = 3 + el(T, 3 * C, 0, pos, C),
                     .rows = n, .cols = C, .ld = 3 * C,
                     .batch_stride = B > 1 ? T * 3 * C : 0, .dtype = dt};
    kiln_matrix v = k;
    v.offset += C;
    CHECK_OK(kiln_attention_cache_append(q, B, H, pos, &k, &v, &mk, &mv, 0,
                                         NULL, NULL));
  }
  kiln_matrix ql = {.buffer = x, .offset = 3 + el(T, 3 * C, 0, T - 1, 0),
                    .rows = 1, .cols = C, .ld = 3 * C,
                    .batch_stride = B > 1 ? T * 3 * C : 0, .dtype = dt};
  kiln_matrix mod = packed(od, 0, 1, C, B, dt);
  CHECK_OK(kiln_attention_decode(q, B, H, T, &ql, &mk, &mv, &mod, &params, 0,
                                 NULL, NULL));
  double *wd = aref_doubles(B * C);
  for (size_t b = 0; b < B; b++)
    for (size_t c = 0; c < C; c++)
      wd[b * C + c] = wo[el(T, C, b, T - 1, c)];
  got = download(od, dt, 0, B * C);
  expect("attention decode", dt, got, wd, B * C, max_of(to, n4));
  free(got);
  /* The caches hold K and V bit for bit; rows past T keep their
   * sentinels (NaN in every float type). */
  for (int which = 0; which < 2; which++) {
    got = download(which ? vc : kc, dt, 0, nc);
    size_t bad = nc;
    for (size_t e = 0; e < nc && bad == nc; e++) {
      size_t bh = e / (tmax * d), t = e / d % tmax, c = e % d;
      size_t src = el(T, 3 * C, bh / H, t, (which ? 2 : 1) * C + bh % H * d + c);
      double v = load(dt, got, e);
      if (t < T ? v != load(dt, xh, src) : !isnan(v))
        bad = e;
    }
    checks++;
    if (bad != nc) {
      fprintf(stderr, "FAIL attention cache %s: element %zu is wrong\n",
              which ? "v" : "k", bad);
      failures++;
    }
    free(got);
  }
  free(wd);
  free(wo);
  free(wx);
  free(in);
  free(ro);
  free(rl_);
  free(to);
  free(tl);
  free(g3);
  free(t3);
  free(xh);
  free(gh);
  kiln_buffer *bufs[] = {x, g, o, l, dx, kc, vc, od};
  for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
    kiln_buffer_destroy(bufs[i]);
}

void run_attention(void) {
  run_attention_case(KILN_F32, 2, 2, 5, 8, true);
  run_attention_case(KILN_F16, 1, 1, 70, 8, true);
  run_attention_case(KILN_BF16, 1, 2, 3, 24, false);
}
