/* The GPU family's two convolution paths on the CNN's layers
 * (examples/cnn.c: 3x3, stride 1, no padding; conv1 1 -> 32 channels on
 * 28x28, conv2 32 -> 64 on 26x26): the implicit GEMM (cl_kernels/
 * conv_gemm.cl, conv_gemm_data.cl) against im2col plus gemm_gpu (and
 * col2im), for the forward pass with bias and ReLU fused and for conv2's
 * input gradient (the CNN needs none for conv1), in one run, alternately,
 * best of RUNS each, after checking that both give the same result (max
 * |difference| over max |output|). Not a test: meson builds it, the
 * suite does not run it (docs/ops.md, "Convolution", has the figures).
 *
 *   bench_conv_gpu [BATCH [RUNS [f32|bf16]]]      defaults 128 5 f32
 *
 * The context forces the GPU family's profile (KILN_PROFILE, default
 * nvidia here), so on PoCL it runs the GPU family's kernels. */
#include <kiln/kiln.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ops/ops_conv_gpu.h"

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

#define CHECK(call)                                                            \
  do {                                                                         \
    if ((call) != KILN_OK) {                                                   \
      fprintf(stderr, "bench_conv_gpu: %s\n", kiln_last_error());              \
      exit(1);                                                                 \
    }                                                                          \
  } while (0)

static kiln_buffer *random_buffer(kiln_context *ctx, kiln_queue *q,
                                  size_t count, kiln_dtype dt,
                                  unsigned seed) {
  float *h = malloc(count * sizeof *h);
  if (h == NULL)
    exit(1);
  for (size_t i = 0; i < count; i++) {
    seed = seed * 1664525u + 1013904223u;
    h[i] = (float)(seed >> 8) / (float)(1u << 24) - 0.5f;
  }
  kiln_buffer *b = NULL;
  uint16_t *lp = malloc(count * sizeof *lp);
  if (lp == NULL)
    exit(1);
  kiln_f32_to_bf16(h, lp, count);
  CHECK(kiln_buffer_create(ctx, count * 4, 0, &b));
  CHECK(kiln_buffer_write_sync(q, dt == KILN_BF16 ? (void *)lp : (void *)h,
                               &(kiln_range){b, 0, count, dt}));
  free(h);
  free(lp);
  return b;
}

/* Seconds of one forward pass (e not NULL: x, w into y) or input gradient
 * (e NULL: y, w into x, which is then f32) on path (implicit or not). */
static double time_path(kiln_queue *q, bool implicit, const kiln_image *x,
                        const kiln_image *w, const kiln_image *y,
                        const kiln_epilogue *e) {
  kiln__conv_set_implicit(implicit);
  const kiln_conv2d_params p = KILN_CONV2D_PARAMS_INIT;
  const double t0 = now();
  if (e != NULL)
    CHECK(kiln_conv2d(q, x, w, y, &p, e, 0, NULL, NULL));
  else
    CHECK(kiln_conv2d_backward_data(q, y, w, x, &p, 0, NULL, NULL));
  CHECK(kiln_queue_finish(q));
  return now() - t0;
}

static float *download(kiln_queue *q, const kiln_image *y, size_t count) {
  float *h = malloc(count * sizeof *h);
  if (h == NULL)
    exit(1);
  CHECK(kiln_buffer_read_sync(q, &(kiln_range){y->buffer, 0, count, KILN_F32},
                              h));
  return h;
}

/* Both paths of one call (see time_path): agreement, then the table row. */
static void compare(kiln_queue *q, const char *name, const kiln_image *x,
                    const kiln_image *w, const kiln_image *y,
                    const kiln_epilogue *e, size_t count, double flops,
                    int runs) {
  const kiln_image *out = e != NULL ? y : x;
  time_path(q, true, x, w, y, e); /* warm-up (program builds) */
  float *a = download(q, out, count);
  time_path(q, false, x, w, y, e);
  float *b = download(q, out, count);
  double diff = 0, mag = 0;
  for (size_t i = 0; i < count; i++) {
    diff = fmax(diff, fabs((double)a[i] - b[i]));
    mag = fmax(mag, fabs((double)b[i]));
  }
  free(a);
  free(b);
  double best[2] = {1e30, 1e30};
  for (int r = 0; r < runs; r++)
    for (int path = 0; path < 2; path++)
      best[path] = fmin(best[path], time_path(q, path == 0, x, w, y, e));
  printf("%-8s %12.2f %12.2f %8.2f %10.2f %12.2e\n", name, 1e3 * best[0],
         1e3 * best[1], best[1] / best[0], flops / best[0] * 1e-9,
         mag > 0 ? diff / mag : diff);
}


int main(int argc, char **argv) {
  const size_t batch = argc > 1 ? strtoul(argv[1], NULL, 10) : 128;
  const int runs = argc > 2 ? atoi(argv[2]) : 5;
  const kiln_dtype dt =
      argc > 3 && strcmp(argv[3], "bf16") == 0 ? KILN_BF16 : KILN_F32;
  setenv("KILN_PROFILE", "nvidia", 0); /* unless one is given */
  kiln_context *ctx = NULL;
  kiln_queue *q = NULL;
  CHECK(kiln_context_create_default(NULL, &ctx));
  CHECK(kiln_queue_create(ctx, 0, &q));
  static const struct {
    const char *name;
    size_t c, side, oc;
  } layers[] = {{"conv1", 1, 28, 32}, {"conv2", 32, 26, 64}};
  printf("# %s, batch %zu, %s, best of %d, profile %s\n", kiln_dtype_name(dt),
         batch, "forward with bias + ReLU fused", runs, getenv("KILN_PROFILE"));
  printf("%-8s %12s %12s %8s %10s %12s\n", "layer", "implicit ms",
         "im2col ms", "ratio", "GFLOP/s", "max rel diff");
  for (size_t l = 0; l < 2; l++) {
    const size_t c = layers[l].c, side = layers[l].side, oc = layers[l].oc,
                 os = side - 2;
    const size_t xn = batch * c * side * side, wn = oc * c * 9,
                 yn = batch * oc * os * os;
    kiln_buffer *xb = random_buffer(ctx, q, xn, dt, 1),
                *wb = random_buffer(ctx, q, wn, dt, 2),
                *bb = random_buffer(ctx, q, oc, KILN_F32, 3), *yb = NULL;
    CHECK(kiln_buffer_create(ctx, yn * 4, 0, &yb));
    const kiln_image x = {.buffer = xb, .n = batch, .c = c, .h = side,
                          .w = side, .dtype = dt},
                     w = {.buffer = wb, .n = oc, .c = c, .h = 3, .w = 3,
                          .dtype = dt},
                     y = {.buffer = yb, .n = batch, .c = oc, .h = os,
                          .w = os, .dtype = KILN_F32};
    kiln_range bias = {bb, 0, oc, KILN_F32};
    kiln_epilogue e = KILN_EPILOGUE_INIT;
    e.bias = &bias;
    e.activation = KILN_ACT_RELU;
    const double flops = 2.0 * (double)yn * (double)(c * 9);
    compare(q, layers[l].name, &x, &w, &y, &e, yn, flops, runs);
    if (l == 1) {
      /* conv2's input gradient: dy (random, in y's place) into an f32 x. */
      kiln_buffer *dyb = random_buffer(ctx, q, yn, dt, 4), *dxb = NULL;
      CHECK(kiln_buffer_create(ctx, xn * 4, 0, &dxb));
      kiln_image dy = y, dx = x;
      dy.buffer = dyb;
      dy.dtype = dt;
      dx.buffer = dxb;
      dx.dtype = KILN_F32;
      compare(q, "conv2 dx", &dx, &w, &dy, NULL, xn, flops, runs);
      kiln_buffer_destroy(dyb);
      kiln_buffer_destroy(dxb);
    }
    kiln_buffer_destroy(xb);
    kiln_buffer_destroy(wb);
    kiln_buffer_destroy(bb);
    kiln_buffer_destroy(yb);
  }
  kiln__conv_set_implicit(true);
  kiln_queue_destroy(q);
  kiln_context_destroy(ctx);
  return 0;
}
