/* Split batched GEMM throughput on a device set (kiln_multi_gemm_batched):
 * the same batch on whatever devices the selector takes, so that one run
 * with one device and one with two, given the same total CPU threads,
 * compare the split's cost:
 *
 *   POCL_DEVICES=pthread POCL_MAX_PTHREAD_COUNT=2 kiln-multi-bench
 *   POCL_DEVICES="pthread pthread" POCL_MAX_PTHREAD_COUNT=1 kiln-multi-bench
 *
 * usage: kiln-multi-bench [SELECTOR [N [BATCH]]]   (default: all 256 16)
 * Prints GFLOP/s (2 n^3 batch / time, host arrays in and out included),
 * median of 5 runs after a warm-up. */
#include <stdio.h>
#include <stdlib.h>

#include "../cli/cli.h"
#include "../commands.h"
#include "kiln/kiln.h"

static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

int main(int argc, char **argv) {
  cli_log_to_stderr();
  const char *selector = argc > 1 ? argv[1] : "all";
  size_t n = argc > 2 ? (size_t)atol(argv[2]) : 256;
  size_t batch = argc > 3 ? (size_t)atol(argv[3]) : 16;
  kiln_device_set *set = NULL;
  if (kiln_device_set_create(selector, NULL, &set) != KILN_OK) {
    fprintf(stderr, "kiln-multi-bench: %s\n", kiln_last_error());
    return 1;
  }
  size_t nn = n * n;
  float *a = malloc(nn * batch * 4), *b = malloc(nn * batch * 4);
  float *c = malloc(nn * batch * 4);
  for (size_t i = 0; i < nn * batch; i++) {
    a[i] = (float)(i % 17) * 0.0625f;
    b[i] = (float)(i % 13) * 0.125f;
  }
  enum { REPS = 5 };
  double t[REPS];
  for (int r = -1; r < REPS; r++) {
    double t0 = tools_now();
    kiln_matrix m = {.rows = n, .cols = n, .batch_stride = nn,
                     .dtype = KILN_F32};
    if (kiln_multi_gemm_batched(set, batch, &m, a, &m, b, &m, c, 1.0f,
                                0.0f) != KILN_OK) {
      fprintf(stderr, "kiln-multi-bench: %s\n", kiln_last_error());
      return 1;
    }
    if (r >= 0)
      t[r] = tools_now() - t0;
  }
  qsort(t, REPS, sizeof t[0], cmp);
  printf("%zu device(s), %zu x (%zu^3) f32: %.2f GFLOP/s (median %.1f ms)\n",
         kiln_device_set_get_count(set), batch, n,
         2.0 * (double)(nn * n * batch) / t[REPS / 2] / 1e9,
         t[REPS / 2] * 1e3);
  free(a);
  free(b);
  free(c);
  kiln_device_set_destroy(set);
  return 0;
}
