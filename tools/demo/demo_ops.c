/* `kiln demo`, second half: a few ops of kiln's op library, each checked
 * against a double-precision host reference. */
#include "cli/cli.h"
#include "commands.h"
#include "demo.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#define SUM_N (1u << 20)
#define GEMM_M 96
#define GEMM_N 80
#define GEMM_K 112

/* Deterministic values in [-1, 1) that differ from element to element. */
static float value(size_t i, uint32_t salt) {
  uint32_t h = (uint32_t)i * 2654435761u ^ salt;
  h ^= h >> 15;
  h *= 2246822519u;
  h ^= h >> 13;
  return (float)(h >> 8) / (float)(1u << 23) - 1.0f;
}

static bool demo_sum(kiln_context *ctx, kiln_queue *queue) {
  bool ok = false;
  float *x = malloc(SUM_N * sizeof(float));
  kiln_buffer *bx = NULL, *br = NULL;
  if (x == NULL)
    goto done;
  double want = 0.0, abs_sum = 0.0;
  for (size_t i = 0; i < SUM_N; i++) {
    x[i] = value(i, 0x5eed);
    want += x[i];
    abs_sum += fabs(x[i]);
  }
  float got = 0.0f;
  double t0 = (1e3 * tools_now());
  if (kiln_buffer_create(ctx, SUM_N * sizeof(float), KILN_MEM_READ_ONLY, &bx) !=
          KILN_OK ||
      kiln_buffer_create(ctx, sizeof(float), KILN_MEM_READ_WRITE, &br) !=
          KILN_OK ||
      kiln_buffer_write_sync(queue, x, &(kiln_range){bx, 0, SUM_N, KILN_F32}) !=
          KILN_OK ||
      kiln_reduce(queue, KILN_REDUCE_SUM, &(kiln_range){bx, 0, SUM_N, KILN_F32},
                  &(kiln_range){br, 0, 1, KILN_F32}, 0, NULL,
                  NULL) != KILN_OK ||
      kiln_buffer_read_sync(queue, &(kiln_range){br, 0, 1, KILN_F32}, &got) != KILN_OK) {
    printf("  sum failed: %s\n", kiln_last_error());
    goto done;
  }
  double ms = (1e3 * tools_now()) - t0;
  /* An f32 sum in any order is within n * eps * sum|x| of the exact one;
   * kiln's blocked sum does far better, so a tenth of that bound is a
   * real check. */
  double tol = 0.1 * SUM_N * 1.2e-7 * abs_sum / 16.0 + 1e-3;
  ok = fabs((double)got - want) <= tol;
  char line[256];
  snprintf(line, sizeof line, "  sum of %u floats: %.6g (host %.6g), %.1f ms "
           "including the build: %s", SUM_N, (double)got, want, ms,
           ok ? "ok" : "WRONG");
  cli_wrap(stdout, line, 0, 4, cli_width());
done:
  kiln_buffer_destroy(bx);
  kiln_buffer_destroy(br);
  free(x);
  return ok;
}

static bool demo_gemm(kiln_context *ctx, kiln_queue *queue) {
  bool ok = false;
  const size_t m = GEMM_M, n = GEMM_N, k = GEMM_K;
  float *a = malloc(m * k * sizeof(float)), *b = malloc(k * n * sizeof(float));
  float *c = malloc(m * n * sizeof(float));
  kiln_buffer *ba = NULL, *bb = NULL, *bc = NULL;
  if (a == NULL || b == NULL || c == NULL)
    goto done;
  for (size_t i = 0; i < m * k; i++)
    a[i] = value(i, 0xa);
  for (size_t i = 0; i < k * n; i++)
    b[i] = value(i, 0xb);
  double t0 = (1e3 * tools_now());
  if (kiln_buffer_create(ctx, m * k * sizeof(float), KILN_MEM_READ_ONLY, &ba) !=
          KILN_OK ||
      kiln_buffer_create(ctx, k * n * sizeof(float), KILN_MEM_READ_ONLY, &bb) !=
          KILN_OK ||
      kiln_buffer_create(ctx, m * n * sizeof(float), KILN_MEM_READ_WRITE,
                         &bc) != KILN_OK ||
      kiln_buffer_write_sync(queue, a, &(kiln_range){ba, 0, m * k, KILN_F32}) !=
          KILN_OK ||
      kiln_buffer_write_sync(queue, b, &(kiln_range){bb, 0, k * n, KILN_F32}) !=
          KILN_OK ||
      kiln_matmul(
          queue, 1,
          &(kiln_matrix){.buffer = ba, .rows = m, .cols = k, .dtype = KILN_F32},
          &(kiln_matrix){.buffer = bb, .rows = k, .cols = n, .dtype = KILN_F32},
          &(kiln_matrix){.buffer = bc, .rows = m, .cols = n, .dtype = KILN_F32},
          NULL, 0, NULL, NULL) != KILN_OK ||
      kiln_buffer_read_sync(queue, &(kiln_range){bc, 0, m * n, KILN_F32}, c) !=
          KILN_OK) {
    printf("  gemm failed: %s\n", kiln_last_error());
    goto done;
  }
  double ms = (1e3 * tools_now()) - t0;
  double worst = 0.0;
  for (size_t i = 0; i < m; i++) {
    for (size_t j = 0; j < n; j++) {
      double want = 0.0, mag = 0.0;
      for (size_t p = 0; p < k; p++) {
        want += (double)a[i * k + p] * b[p * n + j];
        mag += fabs((double)a[i * k + p] * b[p * n + j]);
      }
      /* Relative to the sum of magnitudes: the f32 error bound's scale. */
      double err = fabs((double)c[i * n + j] - want) / (mag + 1e-30);
      if (err > worst)
        worst = err;
    }
  }
  ok = worst <= k * 1.2e-7;
  char line[256];
  snprintf(line, sizeof line, "  gemm %zux%zux%zu: max relative error %.2g, "
           "%.1f ms including the build: %s", m, n, k, worst, ms,
           ok ? "ok" : "WRONG");
  cli_wrap(stdout, line, 0, 4, cli_width());
done:
  kiln_buffer_destroy(ba);
  kiln_buffer_destroy(bb);
  kiln_buffer_destroy(bc);
  free(a);
  free(b);
  free(c);
  return ok;
}

bool kiln_demo_ops(kiln_context *ctx, kiln_queue *queue) {
  bool sum = demo_sum(ctx, queue);
  bool gemm = demo_gemm(ctx, queue);
  return sum && gemm;
}
