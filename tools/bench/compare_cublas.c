/* kiln-compare-cublas: kiln against the vendor's own library on an NVIDIA
 * GPU, in one run: SGEMM (n x n x n, f32) at 1024, 2048 and 4096 against
 * cuBLAS, and the bandwidth ops (sum, dot, axpy, transpose) against the
 * device's own copy bandwidth (cudaMemcpy device to device), as the ratios
 * kiln / cuBLAS and kiln / copy.
 *
 * A developer tool, built only when the CUDA toolkit (cudart, cuBLAS) is
 * found at build time (tools/bench/meson.build), and not installed: kiln
 * itself never links CUDA. kiln runs through NVIDIA's OpenCL driver on the
 * GPU that --device selects (default: gpu), cuBLAS on CUDA device 0; with
 * several GPUs, make them the same one (CUDA_VISIBLE_DEVICES). Every figure
 * is the best of --runs runs after a warm-up, the two sides interleaved so
 * that a change in load hits both; each kiln run ends when its queue has
 * finished, each CUDA run at cudaDeviceSynchronize.
 *
 * usage: kiln-compare-cublas [--device SEL] [--runs N] */
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../commands.h"
#include "kiln/kiln.h"

#define KILN_TRY(expr)                                                         \
  do {                                                                         \
    if ((expr) != KILN_OK) {                                                   \
      fprintf(stderr, "kiln-compare-cublas: %s: %s\n", #expr,                  \
              kiln_last_error());                                              \
      exit(1);                                                                 \
    }                                                                          \
  } while (0)
#define CUDA_TRY(expr)                                                         \
  do {                                                                         \
    if ((expr) != 0) {                                                         \
      fprintf(stderr, "kiln-compare-cublas: %s failed\n", #expr);              \
      exit(1);                                                                 \
    }                                                                          \
  } while (0)

static kiln_queue *q;
static kiln_context *ctx;
static cublasHandle_t blas;

/* Best seconds of runs calls of each side, interleaved, after a warm-up. */
typedef void (*run_fn)(void *user);
static void race(run_fn kiln_run, run_fn other_run, void *user, int runs,
                 double *kiln_best, double *other_best) {
  kiln_run(user);
  other_run(user);
  *kiln_best = *other_best = 1e30;
  for (int r = 0; r < runs; r++) {
    double t0 = tools_now();
    kiln_run(user);
    double t = tools_now() - t0;
    if (t < *kiln_best)
      *kiln_best = t;
    t0 = tools_now();
    other_run(user);
    t = tools_now() - t0;
    if (t < *other_best)
      *other_best = t;
  }
}

struct gemm_case {
  size_t n;
  kiln_buffer *a, *b, *c;
  float *da, *db, *dc;
};

static void kiln_gemm_run(void *user) {
  struct gemm_case *g = user;
  KILN_TRY(kiln_matmul(
      q, 1,
      &(kiln_matrix){
          .buffer = g->a, .rows = g->n, .cols = g->n, .dtype = KILN_F32},
      &(kiln_matrix){
          .buffer = g->b, .rows = g->n, .cols = g->n, .dtype = KILN_F32},
      &(kiln_matrix){
          .buffer = g->c, .rows = g->n, .cols = g->n, .dtype = KILN_F32},
      NULL, 0, NULL, NULL));
  KILN_TRY(kiln_queue_finish(q));
}

static void cublas_gemm_run(void *user) {
  struct gemm_case *g = user;
  const float one = 1.0f, zero = 0.0f;
  const int n = (int)g->n;
  CUDA_TRY(cublasSgemm(blas, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &one, g->da,
                       n, g->db, n, &zero, g->dc, n));
  CUDA_TRY(cudaDeviceSynchronize());
}

struct band_case {
  size_t n; /* floats */
  int op;   /* 0 sum, 1 dot, 2 axpy, 3 transpose */
  kiln_buffer *x, *y, *r;
  float *dx, *dy;
};

static void kiln_band_run(void *user) {
  struct band_case *b = user;
  size_t side = 1;
  while ((side + 1) * (side + 1) <= b->n)
    side++;
  switch (b->op) {
  case 0:
    KILN_TRY(kiln_reduce(q, KILN_REDUCE_SUM,
                         &(kiln_range){b->x, 0, b->n, KILN_F32},
                         &(kiln_range){b->r, 0, 1, KILN_F32}, 0, NULL, NULL));
    break;
  case 1:
    KILN_TRY(kiln_dot(q, &(kiln_range){b->x, 0, b->n, KILN_F32},
                      &(kiln_range){b->y, 0, b->n, KILN_F32},
                      &(kiln_range){b->r, 0, 1, KILN_F32}, 0, NULL, NULL));
    break;
  case 2:
    KILN_TRY(kiln_axpy(q, &(kiln_range){b->x, 0, b->n, KILN_F32},
                       &(kiln_range){b->y, 0, b->n, KILN_F32}, 0.5f, 0, NULL,
                       NULL));
    break;
  default:
    KILN_TRY(kiln_transpose(
        q,
        &(kiln_matrix){
            .buffer = b->x, .rows = side, .cols = side, .dtype = KILN_F32},
        &(kiln_matrix){
            .buffer = b->y, .rows = side, .cols = side, .dtype = KILN_F32},
        0, NULL, NULL));
  }
  KILN_TRY(kiln_queue_finish(q));
}

static void cuda_copy_run(void *user) {
  struct band_case *b = user;
  CUDA_TRY(cudaMemcpy(b->dy, b->dx, b->n * 4, cudaMemcpyDeviceToDevice));
  CUDA_TRY(cudaDeviceSynchronize());
}

int main(int argc, char **argv) {
  static const struct option opts[] = {{"device", required_argument, 0, 'd'},
                                       {"runs", required_argument, 0, 'r'},
                                       {"help", no_argument, 0, 'h'},
                                       {0, 0, 0, 0}};
  const char *selector = "gpu";
  int runs = 10;
  for (int c; (c = getopt_long(argc, argv, "d:r:h", opts, NULL)) != -1;) {
    if (c == 'd')
      selector = optarg;
    else if (c == 'r')
      runs = atoi(optarg) > 0 ? atoi(optarg) : 10;
    else {
      fprintf(c == 'h' ? stdout : stderr,
              "usage: kiln-compare-cublas [--device SEL] [--runs N]\n");
      return c == 'h' ? 0 : 2;
    }
  }
  KILN_TRY(kiln_context_create_default(selector, &ctx));
  KILN_TRY(kiln_queue_create(ctx, 0, &q));
  CUDA_TRY(cublasCreate(&blas));
  printf("kiln on %s (profile %s); cuBLAS on CUDA device 0\n",
         kiln_context_get_device_info(ctx)->name, kiln_context_get_profile(ctx));
  printf("%-10s %8s %12s %12s %8s\n", "op", "size", "kiln", "reference",
         "ratio");
  static const size_t sizes[] = {1024, 2048, 4096};
  for (size_t i = 0; i < 3; i++) {
    struct gemm_case g = {.n = sizes[i]};
    const size_t bytes = g.n * g.n * 4;
    KILN_TRY(kiln_buffer_create(ctx, bytes, 0, &g.a));
    KILN_TRY(kiln_buffer_create(ctx, bytes, 0, &g.b));
    KILN_TRY(kiln_buffer_create(ctx, bytes, 0, &g.c));
    const float half = 0.5f;
    KILN_TRY(kiln_buffer_fill(q, &half, 4, &(kiln_range){g.a, 0, g.n * g.n, KILN_F32}, 0, NULL, NULL));
    KILN_TRY(kiln_buffer_fill(q, &half, 4, &(kiln_range){g.b, 0, g.n * g.n, KILN_F32}, 0, NULL, NULL));
    CUDA_TRY(cudaMalloc((void **)&g.da, bytes));
    CUDA_TRY(cudaMalloc((void **)&g.db, bytes));
    CUDA_TRY(cudaMalloc((void **)&g.dc, bytes));
    CUDA_TRY(cudaMemset(g.da, 0, bytes));
    CUDA_TRY(cudaMemset(g.db, 0, bytes));
    double tk, tc;
    race(kiln_gemm_run, cublas_gemm_run, &g, runs, &tk, &tc);
    const double flop = 2.0 * (double)g.n * (double)g.n * (double)g.n;
    printf("%-10s %8zu %7.1f TF/s %7.1f TF/s %8.2f\n", "sgemm", g.n,
           flop / tk * 1e-12, flop / tc * 1e-12, tc / tk);
    kiln_buffer_destroy(g.a);
    kiln_buffer_destroy(g.b);
    kiln_buffer_destroy(g.c);
    cudaFree(g.da);
    cudaFree(g.db);
    cudaFree(g.dc);
  }
  static const char *const names[] = {"sum", "dot", "axpy", "transpose"};
  /* Bytes each op moves (read + write), against a copy's 2 x n x 4. */
  static const double moved[] = {1, 2, 3, 2};
  const size_t n = (size_t)1 << 26; /* 256 MiB per vector */
  struct band_case b = {.n = n};
  KILN_TRY(kiln_buffer_create(ctx, n * 4, 0, &b.x));
  KILN_TRY(kiln_buffer_create(ctx, n * 4, 0, &b.y));
  KILN_TRY(kiln_buffer_create(ctx, 64, 0, &b.r));
  const float one = 1.0f;
  KILN_TRY(kiln_buffer_fill(q, &one, 4, &(kiln_range){b.x, 0, n, KILN_F32}, 0, NULL, NULL));
  KILN_TRY(kiln_buffer_fill(q, &one, 4, &(kiln_range){b.y, 0, n, KILN_F32}, 0, NULL, NULL));
  CUDA_TRY(cudaMalloc((void **)&b.dx, n * 4));
  CUDA_TRY(cudaMalloc((void **)&b.dy, n * 4));
  for (int op = 0; op < 4; op++) {
    b.op = op;
    double tk, tc;
    race(kiln_band_run, cuda_copy_run, &b, runs, &tk, &tc);
    const double gk = moved[op] * (double)n * 4 / tk * 1e-9;
    const double gc = 2.0 * (double)n * 4 / tc * 1e-9;
    printf("%-10s %8zu %7.0f GB/s %7.0f GB/s %8.2f\n", names[op], n, gk, gc,
           gk / gc);
  }
  cudaFree(b.dx);
  cudaFree(b.dy);
  kiln_buffer_destroy(b.x);
  kiln_buffer_destroy(b.y);
  kiln_buffer_destroy(b.r);
  cublasDestroy(blas);
  kiln_queue_destroy(q);
  kiln_context_destroy(ctx);
  return 0;
}
