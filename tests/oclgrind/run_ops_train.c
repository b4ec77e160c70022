/* The training ops (kiln/kiln_ops_train.h) for run_ops.c's group "train": each
 * once on small awkward sizes at odd offsets in sentinel-framed buffers,
 * checked against host references, so that Oclgrind sees every training
 * kernel of the device's family (out-of-bounds accesses, races between
 * work-items, uninitialised reads). The thorough checks are the unit tests
 * (tests/test_op_train_*.c); these are small and quick. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "run_ops_train.h"

/* Operand descriptors (compound literals living to the end of the block):
 * n elements of dt from element off of b; a packed row-major rows x cols
 * matrix. */
#define RANGE(b, off, n, dt) (&(kiln_range){(b), (off), (n), (dt)})
#define MATRIX(b, off, r, c, dt)                                               \
  (&(kiln_matrix){                                                             \
      .buffer = (b), .offset = (off), .rows = (r), .cols = (c), .dtype = (dt)})

/* A buffer of off sentinels (0x7fc0dead, a NaN as f32, far out of range as
 * an index), the n words of vals, and 3 more sentinels, written at once
 * (see input() in run_ops_util.c for why). */
static kiln_buffer *words(size_t off, const uint32_t *vals, size_t n) {
  size_t total = off + n + 3;
  uint32_t *image = malloc(total * 4);
  for (size_t i = 0; i < total; i++)
    image[i] = i >= off && i < off + n ? vals[i - off] : 0x7fc0deadu;
  kiln_buffer *b = NULL;
  if (kiln_buffer_create(ctx, total * 4, 0, &b) != KILN_OK ||
      kiln_buffer_write_sync(q, image, &(kiln_range){b, 0, total, KILN_U32}) != KILN_OK) {
    fprintf(stderr, "FAIL words buffer: %s\n", kiln_last_error());
    exit(1);
  }
  free(image);
  return b;
}

/* n copies of the f32 value v at off, framed by sentinels. */
static kiln_buffer *f32_const(size_t off, size_t n, float v) {
  uint32_t *w = malloc((n ? n : 1) * 4);
  for (size_t i = 0; i < n; i++)
    memcpy(&w[i], &v, 4);
  kiln_buffer *b = words(off, w, n);
  free(w);
  return b;
}

static void run_broadcast_and_grads(kiln_dtype dt) {
  const size_t R = 5, C = 7;
  void *ah, *bh, *gh;
  kiln_buffer *a = input(dt, 1, R * C, 301, &ah),
              *b = input(dt, 2, C, 302, &bh);
  kiln_buffer *y = output(dt, R * C);
  double want[5 * 7];
  CHECK_OK(kiln_binary_broadcast(q, KILN_BINARY_ADD, KILN_BROADCAST_ROW,
                                 MATRIX(a, 1, R, C, dt), RANGE(b, 2, C, dt),
                                 MATRIX(y, 0, R, C, dt), 0, NULL, NULL));
  void *got = download(y, dt, 0, R * C);
  for (size_t i = 0; i < R * C; i++)
    want[i] = load(dt, ah, i) + load(dt, bh, i % C);
  expect("broadcast row add", dt, got, want, R * C, 0);
  free(got);
  CHECK_OK(kiln_binary_broadcast(q, KILN_BINARY_MUL, KILN_BROADCAST_COL,
                                 MATRIX(a, 1, R, C, dt), RANGE(b, 2, R, dt),
                                 MATRIX(y, 0, R, C, dt), 0, NULL, NULL));
  got = download(y, dt, 0, R * C);
  for (size_t i = 0; i < R * C; i++)
    want[i] = load(dt, ah, i) * load(dt, bh, i / C);
  expect("broadcast col mul", dt, got, want, R * C, 0);
  free(got);
  kiln_buffer *g = input(dt, 3, R * C, 303, &gh);
  CHECK_OK(kiln_unary_backward(q, KILN_UNARY_RELU, KILN_GRAD_FROM_Y,
                               RANGE(a, 1, R * C, dt), RANGE(g, 3, R * C, dt),
                               RANGE(y, 0, R * C, dt), 0, NULL, NULL));
  got = download(y, dt, 0, R * C);
  for (size_t i = 0; i < R * C; i++)
    want[i] = load(dt, ah, i) > 0 ? load(dt, gh, i) : 0;
  expect("relu backward", dt, got, want, R * C, 0);
  free(got);
  CHECK_OK(kiln_unary_backward(q, KILN_UNARY_TANH, KILN_GRAD_FROM_X,
                               RANGE(a, 1, R * C, dt), RANGE(g, 3, R * C, dt),
                               RANGE(y, 0, R * C, dt), 0, NULL, NULL));
  got = download(y, dt, 0, R * C);
  for (size_t i = 0; i < R * C; i++) {
    double t = tanh(load(dt, ah, i));
    want[i] = load(dt, gh, i) * (1 - t * t);
  }
  expect("tanh backward", dt, got, want, R * C, 1e-6);
  free(got);
  CHECK_OK(kiln_unary_backward(q, KILN_UNARY_GELU, KILN_GRAD_FROM_X,
                               RANGE(a, 1, R * C, dt), RANGE(g, 3, R * C, dt),
                               RANGE(y, 0, R * C, dt), 0, NULL, NULL));
  got = download(y, dt, 0, R * C);
  for (size_t i = 0; i < R * C; i++) {
    double x = load(dt, ah, i), k = sqrt(2 / M_PI), c = 0.044715;
    double t = tanh(k * (x + c * x * x * x));
    want[i] = load(dt, gh, i) *
              (0.5 * (1 + t) + 0.5 * x * (1 - t * t) * k * (1 + 3 * c * x * x));
  }
  expect("gelu backward", dt, got, want, R * C, 1e-5);
  free(got), free(ah), free(bh), free(gh);
  kiln_buffer_destroy(a), kiln_buffer_destroy(b), kiln_buffer_destroy(g);
  kiln_buffer_destroy(y);
}

static void run_loss(kiln_dtype dt) {
  const size_t R = 6, C = 5;
  const uint32_t labels[6] = {0, 4, 2, 2, 1, 3};
  void *xh;
  kiln_buffer *x = input(dt, 2, R * C, 311, &xh), *l = words(1, labels, R);
  kiln_buffer *loss = output(KILN_F32, R + 1), *dx = output(dt, R * C);
  double want[6 * 5], wl[7], mean = 0;
  uint32_t hits = 0;
  for (size_t r = 0; r < R; r++) {
    double m = -INFINITY, s = 0;
    size_t best = 0;
    for (size_t c = 0; c < C; c++) {
      double v = load(dt, xh, r * C + c);
      if (v > m)
        m = v, best = c;
    }
    for (size_t c = 0; c < C; c++)
      s += exp(load(dt, xh, r * C + c) - m);
    wl[r] = m + log(s) - load(dt, xh, r * C + labels[r]);
    mean += wl[r] / R;
    hits += best == labels[r];
    for (size_t c = 0; c < C; c++)
      want[r * C + c] =
          (exp(load(dt, xh, r * C + c) - m) / s - (c == labels[r])) / R;
  }
  wl[R] = mean;
  CHECK_OK(kiln_softmax_cross_entropy(
      q, MATRIX(x, 2, R, C, dt), RANGE(l, 1, R, KILN_U32),
      RANGE(loss, 0, R, KILN_F32), RANGE(loss, R, 1, KILN_F32), 0, NULL, NULL));
  void *got = download(loss, KILN_F32, 0, R + 1);
  expect("cross-entropy loss and mean", KILN_F32, got, wl, R + 1, 1e-6);
  free(got);
  CHECK_OK(kiln_softmax_cross_entropy_backward(
      q, MATRIX(x, 2, R, C, dt), RANGE(l, 1, R, KILN_U32),
      MATRIX(dx, 0, R, C, dt), 1.0f / R, 0, NULL, NULL));
  got = download(dx, dt, 0, R * C);
  expect("cross-entropy backward", dt, got, want, R * C, 1e-7);
  free(got);
  uint32_t zero = 5;
  kiln_buffer *count = words(2, &zero, 1);
  CHECK_OK(
      kiln_accuracy_count(q, MATRIX(x, 2, R, C, dt), RANGE(l, 1, R, KILN_U32),
                          RANGE(count, 2, 1, KILN_U32), true, 0, NULL, NULL));
  got = download(count, KILN_U32, 2, 1);
  double wc = 5 + hits;
  expect("accuracy count", KILN_U32, got, &wc, 1, 0);
  free(got), free(xh);
  kiln_buffer_destroy(x), kiln_buffer_destroy(l), kiln_buffer_destroy(loss);
  kiln_buffer_destroy(dx), kiln_buffer_destroy(count);
}

static void run_row_backward(kiln_dtype dt) {
  const size_t R = 4, C = 9;
  void *yh, *gh, *sh;
  kiln_buffer *y = input(dt, 1, R * C, 321, &yh),
              *g = input(dt, 2, R * C, 322, &gh);
  kiln_buffer *sc = input(dt, 3, C, 323, &sh), *dx = output(dt, R * C);
  kiln_buffer *ds = output(KILN_F32, C), *db = output(KILN_F32, C);
  double want[4 * 9], wds[9] = {0}, wdb[9] = {0};
  CHECK_OK(kiln_softmax_rows_backward(q, MATRIX(y, 1, R, C, dt),
                                      MATRIX(g, 2, R, C, dt),
                                      MATRIX(dx, 0, R, C, dt), 0, NULL, NULL));
  void *got = download(dx, dt, 0, R * C);
  for (size_t r = 0; r < R; r++) {
    double d = 0;
    for (size_t c = 0; c < C; c++)
      d += load(dt, yh, r * C + c) * load(dt, gh, r * C + c);
    for (size_t c = 0; c < C; c++)
      want[r * C + c] = load(dt, yh, r * C + c) * (load(dt, gh, r * C + c) - d);
  }
  expect("softmax backward", dt, got, want, R * C, 1e-5);
  free(got);
  const float eps = 1e-5f;
  CHECK_OK(kiln_layernorm_rows_backward(
      q, MATRIX(y, 1, R, C, dt), RANGE(sc, 3, C, dt), MATRIX(g, 2, R, C, dt),
      MATRIX(dx, 0, R, C, dt), RANGE(ds, 0, C, KILN_F32),
      RANGE(db, 0, C, KILN_F32), eps, 0, NULL, NULL));
  for (size_t r = 0; r < R; r++) {
    double mean = 0, var = 0, sg = 0, sgx = 0;
    for (size_t c = 0; c < C; c++)
      mean += load(dt, yh, r * C + c) / C;
    for (size_t c = 0; c < C; c++)
      var += pow(load(dt, yh, r * C + c) - mean, 2) / C;
    double rstd = 1 / sqrt(var + eps);
    for (size_t c = 0; c < C; c++) {
      double xh = (load(dt, yh, r * C + c) - mean) * rstd;
      double gv = load(dt, gh, r * C + c) * load(dt, sh, c);
      sg += gv / C, sgx += gv * xh / C;
      wds[c] += load(dt, gh, r * C + c) * xh;
      wdb[c] += load(dt, gh, r * C + c);
    }
    for (size_t c = 0; c < C; c++) {
      double xh = (load(dt, yh, r * C + c) - mean) * rstd;
      double gv = load(dt, gh, r * C + c) * load(dt, sh, c);
      want[r * C + c] = rstd * (gv - sg - xh * sgx);
    }
  }
  got = download(dx, dt, 0, R * C);
  expect("layernorm backward dx", dt, got, want, R * C, 1e-4);
  free(got);
  got = download(ds, KILN_F32, 0, C);
  expect("layernorm backward dscale", KILN_F32, got, wds, C, 1e-4);
  free(got);
  got = download(db, KILN_F32, 0, C);
  expect("layernorm backward dbias", KILN_F32, got, wdb, C, 1e-5);
  free(got), free(yh), free(gh), free(sh);
  kiln_buffer_destroy(y), kiln_buffer_destroy(g), kiln_buffer_destroy(sc);
  kiln_buffer_destroy(dx), kiln_buffer_destroy(ds), kiln_buffer_destroy(db);
}

static void run_index(kiln_dtype dt) {
  const size_t T = 4, C = 5, R = 7;
  const uint32_t idx[7] = {3, 0, 3, 9, 1, 3, 0}; /* repeats; 9 out of range */
  void *th, *xh;
  kiln_buffer *t = input(dt, 1, T * C, 331, &th),
              *x = input(dt, 2, R * C, 332, &xh);
  kiln_buffer *ib = words(2, idx, R), *y = output(dt, R * C);
  double want[7 * 5];
  CHECK_OK(kiln_gather_rows(q, MATRIX(t, 1, T, C, dt),
                            RANGE(ib, 2, R, KILN_U32), MATRIX(y, 0, R, C, dt),
                            0, NULL, NULL));
  void *got = download(y, dt, 0, R * C);
  for (size_t r = 0; r < R; r++)
    for (size_t c = 0; c < C; c++)
      want[r * C + c] = idx[r] < T ? load(dt, th, idx[r] * C + c) : NAN;
  expect("gather_rows", dt, got, want, R * C, 0);
  free(got);
  CHECK_OK(kiln_scatter_add_rows(q, MATRIX(x, 2, R, C, dt),
                                 RANGE(ib, 2, R, KILN_U32),
                                 MATRIX(t, 1, T, C, dt), 0, NULL, NULL));
  for (size_t k = 0; k < T; k++)
    for (size_t c = 0; c < C; c++) {
      double s = load(dt, th, k * C + c);
      for (size_t r = 0; r < R; r++)
        if (idx[r] == k)
          s += load(dt, xh, r * C + c);
      want[k * C + c] = s;
    }
  got = download(t, dt, 1, T * C);
  expect("scatter_add_rows", dt, got, want, T * C, 1e-6);
  free(got), free(th), free(xh);
  kiln_buffer_destroy(t), kiln_buffer_destroy(x), kiln_buffer_destroy(ib);
  kiln_buffer_destroy(y);
}

static void run_random(void) {
  const size_t N = 23;
  kiln_buffer *y = output(KILN_F32, N), *u = output(KILN_U32, 4);
  CHECK_OK(kiln_random_bits(q, RANGE(u, 0, 4, KILN_U32), 0, 0, 0, NULL, NULL));
  void *got = download(u, KILN_U32, 0, 4);
  /* Random123's first known-answer vector: counter 0, key 0. */
  const double kat[4] = {0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8};
  expect("philox known answer", KILN_U32, got, kat, 4, 0);
  free(got);
  double want[23];
  CHECK_OK(kiln_random_uniform(q, RANGE(y, 0, N, KILN_F32), 7, 3, -2, 2, 0,
                               NULL, NULL));
  float *f = download(y, KILN_F32, 0, N);
  for (size_t i = 0; i < N; i++)
    want[i] = f[i] >= -2 && f[i] < 2 ? f[i] : NAN;
  expect("uniform in [-2, 2)", KILN_F32, f, want, N, 0);
  free(f);
  CHECK_OK(kiln_random_normal(q, RANGE(y, 0, N, KILN_F32), 7, 5, 0, 1, 0, NULL,
                              NULL));
  f = download(y, KILN_F32, 0, N);
  for (size_t i = 0; i < N; i++)
    want[i] = fabs(f[i]) < 5.8f ? f[i] : NAN;
  expect("normal within 5.8", KILN_F32, f, want, N, 0);
  free(f);
  void *xh;
  kiln_buffer *x = input(KILN_BF16, 1, N, 341, &xh), *yb = output(KILN_BF16, N);
  CHECK_OK(kiln_dropout_mask(q, RANGE(y, 0, N, KILN_F32), 9, 1, 0.5f, 0, NULL,
                             NULL));
  float *mask = download(y, KILN_F32, 0, N);
  CHECK_OK(kiln_dropout(q, RANGE(x, 1, N, KILN_BF16),
                        RANGE(yb, 0, N, KILN_BF16), 9, 1, 0.5f, 0, NULL, NULL));
  got = download(yb, KILN_BF16, 0, N);
  for (size_t i = 0; i < N; i++)
    want[i] =
        (mask[i] == 0 || mask[i] == 2) ? load(KILN_BF16, xh, i) * mask[i] : NAN;
  expect("dropout", KILN_BF16, got, want, N, 0);
  free(got), free(mask), free(xh);
  kiln_buffer_destroy(y), kiln_buffer_destroy(u), kiln_buffer_destroy(x);
  kiln_buffer_destroy(yb);
}

static void run_optim(kiln_dtype gdt) {
  const size_t N = 19;
  void *wh, *gh;
  kiln_buffer *w = input(KILN_F32, 1, N, 351, &wh),
              *g = input(gdt, 2, N, 352, &gh);
  kiln_buffer *m = f32_const(3, N, 0), *v = f32_const(1, N, 0);
  kiln_buffer *copy = output(KILN_BF16, N);
  uint32_t no = 0;
  kiln_buffer *skip = words(1, &no, 1);
  double want[19], wc[19];
  kiln_sgd_params sp = {.lr = 0.5f,
                        .momentum = 0.9f,
                        .weight_decay = 0.25f,
                        .nesterov = true,
                        .grad_scale = 0.5f};
  CHECK_OK(kiln_sgd_step(q, RANGE(g, 2, N, gdt), RANGE(skip, 1, 1, KILN_U32),
                         RANGE(w, 1, N, KILN_F32), RANGE(m, 3, N, KILN_F32),
                         RANGE(copy, 0, N, KILN_BF16), &sp, 0, NULL, NULL));
  for (size_t i = 0; i < N; i++) {
    double w0 = load(KILN_F32, wh, i);
    double gv = load(gdt, gh, i) * 0.5 + 0.25 * w0, vel = gv;
    want[i] = w0 - 0.5 * (gv + 0.9 * vel);
    wc[i] = want[i];
  }
  void *got = download(w, KILN_F32, 1, N);
  expect("sgd nesterov", KILN_F32, got, want, N, 1e-6);
  free(got);
  got = download(copy, KILN_BF16, 0, N);
  expect("sgd bf16 copy", KILN_BF16, got, wc, N, 0);
  free(got);
  kiln_adamw_params ap = {.lr = 0.125f,
                          .beta1 = 0.5f,
                          .beta2 = 0.75f,
                          .eps = 1e-3f,
                          .weight_decay = 0.5f,
                          .step = 1,
                          .grad_scale = 1};
  CHECK_OK(kiln_adamw_step(q, RANGE(g, 2, N, gdt), NULL,
                           RANGE(w, 1, N, KILN_F32), RANGE(m, 3, N, KILN_F32),
                           RANGE(v, 1, N, KILN_F32), NULL, &ap, 0, NULL, NULL));
  for (size_t i = 0; i < N; i++) {
    double gv = load(gdt, gh, i), w0 = want[i] * (1 - 0.125 * 0.5);
    double mv = 0.9 * 0 + 0, vv = 0.25 * gv * gv;
    /* m held the SGD velocity (its first step: the scaled gradient). */
    double vel = load(gdt, gh, i) * 0.5 + 0.25 * load(KILN_F32, wh, i);
    mv = vel + 0.5 * (gv - vel);
    want[i] = w0 - 0.125 / 0.5 * mv / (sqrt(vv) / sqrt(0.25) + 1e-3);
  }
  got = download(w, KILN_F32, 1, N);
  expect("adamw", KILN_F32, got, want, N, 1e-5);
  free(got);
  /* Norm, clip and check over two ranges. */
  kiln_range r[2] = {{w, 1, N, KILN_F32}, {g, 2, N, KILN_F32}};
  kiln_buffer *norm = output(KILN_F32, 1), *flag = words(0, &no, 1);
  CHECK_OK(kiln_grad_norm(q, r, 1, RANGE(norm, 0, 1, KILN_F32), 0, NULL, NULL));
  double ss = 0;
  for (size_t i = 0; i < N; i++)
    ss += want[i] * want[i];
  double wn = sqrt(ss);
  got = download(norm, KILN_F32, 0, 1);
  expect("grad_norm", KILN_F32, got, &wn, 1, 1e-5);
  free(got);
  CHECK_OK(kiln_clip_grad_norm(q, RANGE(norm, 0, 1, KILN_F32), r, 1, 0.5f, 0,
                               NULL, NULL));
  for (size_t i = 0; i < N; i++)
    want[i] *= 0.5 / (wn + 1e-6);
  got = download(w, KILN_F32, 1, N);
  expect("clip_grad_norm", KILN_F32, got, want, N, 1e-5);
  free(got);
  r[1].buffer = norm, r[1].offset = 0, r[1].count = 1;
  CHECK_OK(
      kiln_has_nonfinite(q, r, 2, RANGE(flag, 0, 1, KILN_U32), 0, NULL, NULL));
  got = download(flag, KILN_U32, 0, 1);
  double zero = 0;
  expect("has_nonfinite", KILN_U32, got, &zero, 1, 0);
  free(got), free(wh), free(gh);
  kiln_buffer_destroy(w), kiln_buffer_destroy(g), kiln_buffer_destroy(m);
  kiln_buffer_destroy(v), kiln_buffer_destroy(copy), kiln_buffer_destroy(skip);
  kiln_buffer_destroy(norm), kiln_buffer_destroy(flag);
}

void run_train(void) {
  run_broadcast_and_grads(KILN_F32);
  run_broadcast_and_grads(KILN_BF16);
  run_loss(KILN_F32);
  run_loss(KILN_F16);
  run_row_backward(KILN_F32);
  run_index(KILN_F32);
  run_index(KILN_BF16);
  run_random();
  run_optim(KILN_F32);
  run_optim(KILN_BF16);
}
