/* kiln-compare-cublas: kiln against the vendor's own library on an NVIDIA
 * GPU, in one run:
 *
 * - GEMM (n x n x n, row-major A, B, f32 C) at 1024, 2048, 4096 and 8192
 *   (--size) for three operand types: f32 against cublasSgemm with TF32 off
 *   (CUBLAS_DEFAULT_MATH, which never uses TF32 for SGEMM; kiln report also
 *   sets NVIDIA_TF32_OVERRIDE=0), bf16 and f16 against cublasGemmEx with
 *   CUBLAS_COMPUTE_32F and an f32 C, as kiln computes them (f32
 *   accumulation, f32 output). Both sides get the same random operands in
 *   [-1, 1] (never zeros: they hide unwritten outputs and can run faster),
 *   and after the timing kiln's C is checked against cuBLAS's (relative
 *   Frobenius error; more than 1e-3 marks the row WRONG and the exit status
 *   1: both sum products of the same rounded operands in f32).
 * - the bandwidth ops (sum, dot, axpy, transpose) against the device's own
 *   copy bandwidth (cudaMemcpy device to device).
 *
 * Each row gives kiln's rate, the reference's, and the ratio kiln /
 * reference. A developer tool, built only when the CUDA toolkit (cudart,
 * cuBLAS) is found at build time (tools/bench/meson.build), and not
 * installed: kiln itself never links CUDA. kiln runs through NVIDIA's OpenCL
 * driver on the GPU that --device selects (default: gpu), cuBLAS on CUDA
 * device 0; with several GPUs, make them the same one
 * (CUDA_VISIBLE_DEVICES). Every figure is the best of --runs runs after a
 * warm-up, the two sides interleaved so that a change in load hits both;
 * each kiln run ends when its queue has finished, each CUDA run at
 * cudaDeviceSynchronize.
 *
 * usage: kiln-compare-cublas [--device SEL] [--runs N] [--size N,...]
 *                            [--no-bandwidth] */
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <getopt.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
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

/* One GEMM case: kiln's buffers and cuBLAS's copies of the same operands
 * (dtype's storage: 4 bytes for f32, 2 for bf16 and f16), C always f32. */
struct gemm_case {
  size_t n;
  kiln_dtype dtype;
  kiln_buffer *a, *b, *c;
  void *da, *db;
  float *dc;
};

static void kiln_gemm_run(void *user) {
  struct gemm_case *g = user;
  KILN_TRY(kiln_matmul(
      q, 1,
      &(kiln_matrix){
          .buffer = g->a, .rows = g->n, .cols = g->n, .dtype = g->dtype},
      &(kiln_matrix){
          .buffer = g->b, .rows = g->n, .cols = g->n, .dtype = g->dtype},
      &(kiln_matrix){
          .buffer = g->c, .rows = g->n, .cols = g->n, .dtype = KILN_F32},
      NULL, 0, NULL, NULL));
  KILN_TRY(kiln_queue_finish(q));
}

/* cuBLAS is column-major: with the row-major buffers passed as (B, A) it
 * computes B^T A^T column-major, which is A B row-major, kiln's C. */
static void cublas_gemm_run(void *user) {
  struct gemm_case *g = user;
  const float one = 1.0f, zero = 0.0f;
  const int n = (int)g->n;
  if (g->dtype == KILN_F32) {
    CUDA_TRY(cublasSgemm(blas, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &one,
                         (const float *)g->db, n, (const float *)g->da, n,
                         &zero, g->dc, n));
  } else {
    const cudaDataType t = g->dtype == KILN_BF16 ? CUDA_R_16BF : CUDA_R_16F;
    CUDA_TRY(cublasGemmEx(blas, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &one, g->db,
                          t, n, g->da, t, n, &zero, g->dc, CUDA_R_32F, n,
                          CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
  }
  CUDA_TRY(cudaDeviceSynchronize());
}

/* n*n values in [-1, 1) from a fixed seed, stored as dtype into out. */
static void random_operand(size_t count, unsigned seed, kiln_dtype dtype,
                           float *scratch, void *out) {
  uint64_t x = 0x9e3779b97f4a7c15ull * (seed + 1);
  for (size_t i = 0; i < count; i++) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    scratch[i] = (float)((double)(x >> 40) / (double)(1ull << 23) - 1.0);
  }
  if (dtype == KILN_F32)
    memcpy(out, scratch, count * 4);
  else if (dtype == KILN_BF16)
    kiln_f32_to_bf16(scratch, out, count);
  else
    kiln_f32_to_f16(scratch, out, count);
}

/* ||x - y|| / ||y||, in double. */
static double relative_error(const float *x, const float *y, size_t count) {
  double diff = 0, ref = 0;
  for (size_t i = 0; i < count; i++) {
    const double d = (double)x[i] - (double)y[i];
    diff += d * d;
    ref += (double)y[i] * (double)y[i];
  }
  return ref > 0 ? sqrt(diff / ref) : sqrt(diff);
}

/* One row of the GEMM table; false when kiln's C is wrong. */
static bool gemm_row(size_t n, kiln_dtype dtype, int runs) {
  static const char *const names[] = {[KILN_F32] = "sgemm",
                                      [KILN_BF16] = "gemm_bf16",
                                      [KILN_F16] = "gemm_f16"};
  struct gemm_case g = {.n = n, .dtype = dtype};
  const size_t count = n * n, elem = dtype == KILN_F32 ? 4 : 2;
  float *scratch = malloc(count * 4), *kc = malloc(count * 4),
        *cc = malloc(count * 4);
  void *host = malloc(count * elem);
  if (scratch == NULL || kc == NULL || cc == NULL || host == NULL) {
    fprintf(stderr, "kiln-compare-cublas: out of host memory at n %zu\n", n);
    exit(1);
  }
  KILN_TRY(kiln_buffer_create(ctx, count * elem, 0, &g.a));
  KILN_TRY(kiln_buffer_create(ctx, count * elem, 0, &g.b));
  KILN_TRY(kiln_buffer_create(ctx, count * 4, 0, &g.c));
  CUDA_TRY(cudaMalloc(&g.da, count * elem));
  CUDA_TRY(cudaMalloc(&g.db, count * elem));
  CUDA_TRY(cudaMalloc((void **)&g.dc, count * 4));
  random_operand(count, 1, dtype, scratch, host);
  KILN_TRY(kiln_buffer_write_sync(q, host, &(kiln_range){g.a, 0, count, dtype}));
  CUDA_TRY(cudaMemcpy(g.da, host, count * elem, cudaMemcpyHostToDevice));
  random_operand(count, 2, dtype, scratch, host);
  KILN_TRY(kiln_buffer_write_sync(q, host, &(kiln_range){g.b, 0, count, dtype}));
  CUDA_TRY(cudaMemcpy(g.db, host, count * elem, cudaMemcpyHostToDevice));
  double tk, tc;
  race(kiln_gemm_run, cublas_gemm_run, &g, runs, &tk, &tc);
  KILN_TRY(kiln_buffer_read_sync(q, &(kiln_range){g.c, 0, count, KILN_F32}, kc));
  CUDA_TRY(cudaMemcpy(cc, g.dc, count * 4, cudaMemcpyDeviceToHost));
  const double err = relative_error(kc, cc, count);
  const bool right = err <= 1e-3;
  const double flop = 2.0 * (double)n * (double)n * (double)n;
  printf("%-10s %8zu %7.1f TF/s %7.1f TF/s %8.2f  err %.1e%s\n", names[dtype],
         n, flop / tk * 1e-12, flop / tc * 1e-12, tc / tk, err,
         right ? "" : " WRONG");
  fflush(stdout);
  kiln_buffer_destroy(g.a);
  kiln_buffer_destroy(g.b);
  kiln_buffer_destroy(g.c);
  cudaFree(g.da);
  cudaFree(g.db);
  cudaFree(g.dc);
  free(scratch);
  free(kc);
  free(cc);
  free(host);
  return right;
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

/* sum, dot, axpy and transpose of 2^26 floats against cudaMemcpy. */
static void bandwidth_rows(int runs) {
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
}

/* --size: comma-separated sizes from 16 to 32768. */
static size_t parse_sizes(const char *text, size_t *sizes, size_t cap) {
  size_t count = 0;
  for (const char *p = text; *p;) {
    char *end = NULL;
    const unsigned long long v = strtoull(p, &end, 10);
    if (end == p || v < 16 || v > 32768 || count == cap ||
        (*end != ',' && *end != '\0'))
      return 0;
    sizes[count++] = (size_t)v;
    p = *end == ',' ? end + 1 : end;
  }
  return count;
}

int main(int argc, char **argv) {
  static const struct option opts[] = {{"device", required_argument, 0, 'd'},
                                       {"runs", required_argument, 0, 'r'},
                                       {"size", required_argument, 0, 's'},
                                       {"no-bandwidth", no_argument, 0, 'B'},
                                       {"help", no_argument, 0, 'h'},
                                       {0, 0, 0, 0}};
  const char *selector = "gpu";
  int runs = 10;
  bool bandwidth = true;
  size_t sizes[8] = {1024, 2048, 4096, 8192}, nsizes = 4;
  for (int c; (c = getopt_long(argc, argv, "d:r:s:Bh", opts, NULL)) != -1;) {
    if (c == 'd')
      selector = optarg;
    else if (c == 'r')
      runs = atoi(optarg) > 0 ? atoi(optarg) : 10;
    else if (c == 's' && (nsizes = parse_sizes(optarg, sizes, 8)) > 0)
      continue;
    else if (c == 'B')
      bandwidth = false;
    else {
      fprintf(c == 'h' ? stdout : stderr,
              "usage: kiln-compare-cublas [--device SEL] [--runs N] "
              "[--size N,...] [--no-bandwidth]\n"
              "  GEMM n x n x n at each --size (16 to 32768, at most 8; "
              "default\n  1024,2048,4096,8192): f32 against cuBLAS SGEMM "
              "with TF32 off, bf16\n  and f16 against cublasGemmEx "
              "(CUBLAS_COMPUTE_32F, f32 C); then sum,\n  dot, axpy and "
              "transpose against cudaMemcpy's bandwidth.\n");
      return c == 'h' ? 0 : 2;
    }
  }
  KILN_TRY(kiln_context_create_default(selector, &ctx));
  KILN_TRY(kiln_queue_create(ctx, 0, &q));
  CUDA_TRY(cublasCreate(&blas));
  /* SGEMM in plain f32: CUBLAS_DEFAULT_MATH never converts to TF32. */
  CUDA_TRY(cublasSetMathMode(blas, CUBLAS_DEFAULT_MATH));
  const char *tf32 = getenv("NVIDIA_TF32_OVERRIDE");
  printf("kiln on %s (profile %s); cuBLAS on CUDA device 0 "
         "(CUBLAS_DEFAULT_MATH, NVIDIA_TF32_OVERRIDE=%s)\n",
         kiln_context_get_device_info(ctx)->name, kiln_context_get_profile(ctx),
         tf32 ? tf32 : "unset");
  printf("%-10s %8s %12s %12s %8s\n", "op", "size", "kiln", "reference",
         "ratio");
  bool right = true;
  static const kiln_dtype dtypes[] = {KILN_F32, KILN_BF16, KILN_F16};
  for (size_t d = 0; d < 3; d++)
    for (size_t i = 0; i < nsizes; i++)
      right = gemm_row(sizes[i], dtypes[d], runs) && right;
  if (bandwidth)
    bandwidth_rows(runs);
  cublasDestroy(blas);
  kiln_queue_destroy(q);
  kiln_context_destroy(ctx);
  return right ? 0 : 1;
}
