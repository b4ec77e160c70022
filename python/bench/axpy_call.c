/* axpy_call: the per-call cost of a warm 16-element kiln_axpy from C, the
 * baseline of python/bench/bench.py's Python figure (docs/python.md,
 * Speed). Two measures, each the median of REPS repetitions (default 7):
 *   enqueue  N calls back to back, then one wait: time / N per call
 *   wait     N calls each followed by waiting for its event
 * Usage: axpy_call [SELECTOR] [N] [REPS]; prints one JSON object. */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include <kiln/kiln.h>

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

#define MAX_REPS 64

int main(int argc, char **argv) {
  const char *sel = argc > 1 ? argv[1] : NULL;
  long n = argc > 2 ? atol(argv[2]) : 20000;
  int reps = argc > 3 ? atoi(argv[3]) : 7;
  kiln_context *ctx = NULL;
  kiln_queue *q = NULL;
  kiln_buffer *xb = NULL, *yb = NULL;
  float ones[16];
  for (int i = 0; i < 16; i++)
    ones[i] = 1.0f;
  if (n <= 0 || reps < 1 || reps > MAX_REPS || kiln_context_create_default(sel, &ctx) != KILN_OK ||
      kiln_queue_create(ctx, 0, &q) != KILN_OK ||
      kiln_buffer_create(ctx, 64, 0, &xb) != KILN_OK ||
      kiln_buffer_create(ctx, 64, 0, &yb) != KILN_OK) {
    fprintf(stderr, "axpy_call: %s\n", kiln_last_error());
    return 1;
  }
  kiln_range x = {xb, 0, 16, KILN_F32}, y = {yb, 0, 16, KILN_F32};
  if (kiln_buffer_write_sync(q, ones, &x) != KILN_OK ||
      kiln_buffer_write_sync(q, ones, &y) != KILN_OK)
    return 1;
  for (int i = 0; i < 100; i++) /* warm: kernels built, workspace made */
    kiln_axpy(q, &x, &y, 1e-3f, 0, NULL, NULL);
  kiln_queue_finish(q);
  double enq[MAX_REPS], wait[MAX_REPS];
  for (int r = 0; r < reps; r++) {
    double t0 = now();
    for (long i = 0; i < n; i++)
      if (kiln_axpy(q, &x, &y, 1e-3f, 0, NULL, NULL) != KILN_OK)
        return 1;
    kiln_queue_finish(q);
    enq[r] = (now() - t0) / (double)n * 1e6;
    long m = n / 10;
    t0 = now();
    for (long i = 0; i < m; i++) {
      kiln_event *ev = NULL;
      if (kiln_axpy(q, &x, &y, 1e-3f, 0, NULL, &ev) != KILN_OK ||
          kiln_event_wait(ev) != KILN_OK)
        return 1;
      kiln_event_release(ev);
    }
    wait[r] = (now() - t0) / (double)m * 1e6;
  }
  qsort(enq, (size_t)reps, sizeof *enq, cmp);
  qsort(wait, (size_t)reps, sizeof *wait, cmp);
  printf("{\"device\": \"%s\", \"calls\": %ld, \"enqueue_us\": %.3f, \"wait_us\": %.3f}\n",
         kiln_context_get_device_info(ctx)->name, n, enq[reps / 2], wait[reps / 2]);
  kiln_buffer_destroy(xb);
  kiln_buffer_destroy(yb);
  kiln_queue_destroy(q);
  return kiln_context_destroy(ctx) == KILN_OK ? 0 : 1;
}
