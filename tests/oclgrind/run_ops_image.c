/* The image ops (kiln/kiln_ops_image.h) for run_ops.c's group "image":
 * pooling forward and backward, batch normalisation in training and
 * inference mode and backward, once each on small awkward shapes at odd
 * offsets in sentinel-framed buffers, checked against host references, so
 * that Oclgrind sees every kernel of cl_kernels/image.cl. The thorough
 * checks are tests/test_op_image_pool.c, tests/test_op_image_bn.c and
 * tests/test_op_image_torch.c. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "run_ops_image.h"

#define RANGE(b, off, n, dt) (&(kiln_range){(b), (off), (n), (dt)})
#define IMAGE(b, off, n_, c_, h_, w_, dt)                                      \
  (&(kiln_image){.buffer = (b), .offset = (off), .n = (n_), .c = (c_),        \
                 .h = (h_), .w = (w_), .dtype = (dt)})

/* 2 x 3 x 5 x 6 images. */
enum { N = 2, C = 3, H = 5, W = 6 };

/* k x k windows, stride s, padding p: overlapping windows (s < k) take the
 * gather kernel, disjoint ones the scatter (pool_backward_tiled), after
 * image_zero where they leave elements out. */
static void run_pool(kiln_pool_op op, bool exclude, kiln_dtype dt, int K,
                     int S, int P) {
  const int OH = (H + 2 * P - K) / S + 1, OW = (W + 2 * P - K) / S + 1;
  const size_t count = N * C * H * W, oc = (size_t)(N * C * OH * OW);
  void *xh, *gh;
  kiln_buffer *x = input(dt, 3, count, 401, &xh);
  kiln_buffer *g = input(dt, 1, oc, 402, &gh);
  kiln_buffer *y = output(dt, oc), *dx = output(dt, count);
  kiln_pool2d_params prm = {(size_t)K, (size_t)K, (size_t)S, (size_t)S,
                            (size_t)P, (size_t)P, exclude};
  CHECK_OK(kiln_pool2d(q, op, IMAGE(x, 3, N, C, H, W, dt),
                       IMAGE(y, 0, N, C, OH, OW, dt), &prm, 0, NULL, NULL));
  CHECK_OK(kiln_pool2d_backward(q, op, IMAGE(x, 3, N, C, H, W, dt),
                                IMAGE(g, 1, N, C, OH, OW, dt),
                                IMAGE(dx, 0, N, C, H, W, dt), &prm, 0, NULL,
                                NULL));
  double *want_y = malloc(oc * sizeof *want_y);
  double want_dx[N * C * H * W];
  memset(want_dx, 0, sizeof want_dx);
  for (size_t p = 0; p < N * C; p++)
    for (int oh = 0; oh < OH; oh++)
      for (int ow = 0; ow < OW; ow++) {
        int h0 = oh * S - P, w0 = ow * S - P, best = -1, cnt = 0;
        double s = 0;
        for (int ih = h0 < 0 ? 0 : h0; ih < h0 + K && ih < H; ih++)
          for (int iw = w0 < 0 ? 0 : w0; iw < w0 + K && iw < W; iw++) {
            int e = ih * W + iw;
            double v = load(dt, xh, p * H * W + (size_t)e);
            if (best < 0 || v > load(dt, xh, p * H * W + (size_t)best))
              best = e;
            s += v;
            cnt++;
          }
        size_t o = (p * OH + (size_t)oh) * OW + (size_t)ow;
        double gv = load(dt, gh, o), div = exclude ? cnt : K * K;
        if (op == KILN_POOL_MAX) {
          want_y[o] = load(dt, xh, p * H * W + (size_t)best);
          want_dx[p * H * W + (size_t)best] += gv;
        } else {
          want_y[o] = s / div;
          for (int ih = h0 < 0 ? 0 : h0; ih < h0 + K && ih < H; ih++)
            for (int iw = w0 < 0 ? 0 : w0; iw < w0 + K && iw < W; iw++)
              want_dx[p * H * W + (size_t)(ih * W + iw)] += gv / div;
        }
      }
  const char *name = op == KILN_POOL_MAX ? "pool2d max"
                     : exclude           ? "pool2d mean (exclude padding)"
                                         : "pool2d mean";
  void *got = download(y, dt, 0, oc);
  expect(name, dt, got, want_y, oc, 1e-5);
  free(got);
  got = download(dx, dt, 0, count);
  expect("pool2d backward", dt, got, want_dx, count, 1e-5);
  free(got), free(xh), free(gh), free(want_y);
  kiln_buffer_destroy(x), kiln_buffer_destroy(g);
  kiln_buffer_destroy(y), kiln_buffer_destroy(dx);
}

/* Training forward with running statistics, backward, inference. */
static void run_batchnorm(kiln_dtype dt, size_t n, size_t c, size_t h,
                          size_t w) {
  const size_t count = n * c * h * w, hw = h * w, m = n * h * w;
  void *xh, *gh, *vh;
  kiln_buffer *x = input(dt, 1, count, 411, &xh);
  kiln_buffer *g = input(dt, 2, count, 412, &gh);
  /* gamma, beta, running mean, running var (made positive below) */
  kiln_buffer *v = input(KILN_F32, 1, 4 * c, 413, &vh);
  float *vf = vh, *whole = malloc((4 * c + 4) * sizeof *whole);
  /* rewritten whole: Oclgrind mishandles host writes at an offset
   * (input() in run_ops_util.c) */
  CHECK_OK(kiln_buffer_read_sync(q, RANGE(v, 0, 4 * c + 4, KILN_F32), whole));
  for (size_t ch = 0; ch < c; ch++)
    vf[3 * c + ch] = whole[1 + 3 * c + ch] = fabsf(vf[3 * c + ch]) + 0.5f;
  CHECK_OK(kiln_buffer_write_sync(q, whole, RANGE(v, 0, 4 * c + 4, KILN_F32)));
  kiln_buffer *y = output(dt, count), *dx = output(dt, count);
  kiln_buffer *yi = output(dt, count), *saved = output(KILN_F32, 2 * c);
  kiln_buffer *grads = output(KILN_F32, 2 * c);
  kiln_batchnorm_params prm = KILN_BATCHNORM_PARAMS_INIT;
  const kiln_image *xi = IMAGE(x, 1, n, c, h, w, dt);
  CHECK_OK(kiln_batchnorm_train(q, xi, RANGE(v, 1, c, KILN_F32),
                                RANGE(v, 1 + c, c, KILN_F32),
                                IMAGE(y, 0, n, c, h, w, dt),
                                RANGE(v, 1 + 2 * c, c, KILN_F32),
                                RANGE(v, 1 + 3 * c, c, KILN_F32),
                                RANGE(saved, 0, 2 * c, KILN_F32), &prm, 0, NULL,
                                NULL));
  CHECK_OK(kiln_batchnorm_backward(
      q, xi, RANGE(v, 1, c, KILN_F32), RANGE(saved, 0, 2 * c, KILN_F32),
      IMAGE(g, 2, n, c, h, w, dt), IMAGE(dx, 0, n, c, h, w, dt),
      RANGE(grads, 0, c, KILN_F32), RANGE(grads, c, c, KILN_F32), 0, NULL,
      NULL));
  CHECK_OK(kiln_batchnorm_inference(
      q, xi, RANGE(v, 1, c, KILN_F32), RANGE(v, 1 + c, c, KILN_F32),
      RANGE(v, 1 + 2 * c, c, KILN_F32), RANGE(v, 1 + 3 * c, c, KILN_F32),
      IMAGE(yi, 0, n, c, h, w, dt), &prm, 0, NULL, NULL));
  double *want_y = malloc(3 * count * sizeof *want_y);
  double *want_dx = want_y + count, *want_yi = want_dx + count;
  double *want_g = malloc(6 * c * sizeof *want_g), *want_v = want_g + 2 * c;
  for (size_t ch = 0; ch < c; ch++) {
    double s = 0, ss = 0, sg = 0, sgx = 0;
    for (size_t i = 0; i < n; i++)
      for (size_t e = 0; e < hw; e++)
        s += load(dt, xh, (i * c + ch) * hw + e);
    double mean = s / (double)m;
    for (size_t i = 0; i < n; i++)
      for (size_t e = 0; e < hw; e++) {
        double d = load(dt, xh, (i * c + ch) * hw + e) - mean;
        ss += d * d;
      }
    double var = ss / (double)m, rstd = 1 / sqrt(var + prm.eps);
    double gam = vf[ch], bet = vf[c + ch];
    double rm = 0.9 * vf[2 * c + ch] + 0.1 * mean;
    double rv = 0.9 * vf[3 * c + ch] + 0.1 * var * (double)m / (double)(m - 1);
    want_v[ch] = gam; /* gamma and beta unchanged */
    want_v[c + ch] = bet;
    want_v[2 * c + ch] = rm;
    want_v[3 * c + ch] = rv;
    for (size_t i = 0; i < n; i++)
      for (size_t e = 0; e < hw; e++) {
        size_t k = (i * c + ch) * hw + e;
        double xhat = (load(dt, xh, k) - mean) * rstd, gv = load(dt, gh, k);
        want_y[k] = xhat * gam + bet;
        want_yi[k] = (load(dt, xh, k) - rm) / sqrt(rv + prm.eps) * gam + bet;
        sg += gv;
        sgx += gv * xhat;
      }
    want_g[ch] = sgx;
    want_g[c + ch] = sg;
    for (size_t i = 0; i < n; i++)
      for (size_t e = 0; e < hw; e++) {
        size_t k = (i * c + ch) * hw + e;
        double xhat = (load(dt, xh, k) - mean) * rstd;
        want_dx[k] = gam * rstd *
                     (load(dt, gh, k) - sg / (double)m - xhat * sgx / (double)m);
      }
  }
  void *got = download(y, dt, 0, count);
  expect("batchnorm_train", dt, got, want_y, count, 1e-4);
  free(got);
  got = download(v, KILN_F32, 1, 4 * c);
  expect("batchnorm_train running statistics", KILN_F32, got, want_v, 4 * c,
         1e-5);
  free(got);
  got = download(grads, KILN_F32, 0, 2 * c);
  expect("batchnorm_backward dgamma, dbeta", KILN_F32, got, want_g, 2 * c,
         1e-4);
  free(got);
  got = download(dx, dt, 0, count);
  expect("batchnorm_backward dx", dt, got, want_dx, count, 1e-4);
  free(got);
  got = download(yi, dt, 0, count);
  expect("batchnorm_inference", dt, got, want_yi, count, 1e-4);
  free(got), free(xh), free(gh), free(vh);
  free(whole), free(want_y), free(want_g);
  kiln_buffer_destroy(x), kiln_buffer_destroy(g), kiln_buffer_destroy(v);
  kiln_buffer_destroy(y), kiln_buffer_destroy(dx), kiln_buffer_destroy(yi);
  kiln_buffer_destroy(saved), kiln_buffer_destroy(grads);
}

void run_image(void) {
  run_pool(KILN_POOL_MAX, false, KILN_F32, 3, 2, 1);
  run_pool(KILN_POOL_MAX, false, KILN_BF16, 3, 2, 1);
  run_pool(KILN_POOL_MEAN, false, KILN_F16, 3, 2, 1);
  run_pool(KILN_POOL_MEAN, true, KILN_F32, 3, 2, 1);
  run_pool(KILN_POOL_MAX, false, KILN_F32, 2, 2, 0);  /* row 5 left out */
  run_pool(KILN_POOL_MEAN, true, KILN_BF16, 2, 3, 1); /* stride > window */
  run_batchnorm(KILN_F32, N, C, H, W);
  run_batchnorm(KILN_BF16, N, C, H, W);
  /* over 1024 values per channel: several partial sums per channel on the
   * CPU family (16-item groups of 32 values each) */
  run_batchnorm(KILN_F32, 3, 2, 19, 23);
}
