/* Timing for every `kiln bench` runner (on the tools' clock, tools_now):
 * sorting of samples, and the median of an op's timed runs. Below the runners (bench_ops.c,
 * bench_extra.c) and the peaks (bench_peaks.c), calling none of them. */
#include "bench.h"

#include <stdlib.h>

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

void bench_sort(double *t, size_t count) {
  qsort(t, count, sizeof t[0], cmp_double);
}

double bench_time(const struct bench_env *env, kiln_status (*op)(void *arg),
                  void *arg) {
  enum { MAX_RUNS = 101 };
  double t[MAX_RUNS];
  int runs = env->runs < MAX_RUNS ? env->runs : MAX_RUNS;
  if (op(arg) != KILN_OK || kiln_queue_finish(env->queue) != KILN_OK)
    return -1.0;
  for (int i = 0; i < runs; i++) {
    double t0 = tools_now();
    if (op(arg) != KILN_OK || kiln_queue_finish(env->queue) != KILN_OK)
      return -1.0;
    t[i] = tools_now() - t0;
  }
  bench_sort(t, (size_t)runs);
  return runs % 2 ? t[runs / 2] : 0.5 * (t[runs / 2 - 1] + t[runs / 2]);
}
