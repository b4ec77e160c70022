/* The per-call cost of a small tuned op: not a test (meson builds it, the
 * suite does not run it). docs/performance.md, "Tuning", says how the
 * figures there were taken:
 *
 *   bench_gemm_call calls N      one thread, one queue: one warm-up GEMM
 *                                (program build, tuning file read), then N
 *                                8x8x8 GEMMs; under callgrind, the
 *                                instructions of N calls minus those of 0
 *                                calls, over N, are one call's
 *   bench_gemm_call rate SECONDS two threads, a queue each on one context:
 *                                GEMMs per second, both threads together
 *
 * Before the first GEMM the parameters in effect are saved as the device's
 * tuning file (in KILN_CACHE_DIR), so the op reads them from a file as a
 * tuned program does. Run with a GPU-family profile forced
 * (KILN_PROFILE=nvidia) to take the GPU family's path on PoCL. */
#include <kiln/kiln.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define EDGE 8

struct worker {
  kiln_context *ctx;
  kiln_queue *queue;
  kiln_buffer *a, *b, *c;
  double seconds;
  unsigned long calls;
  kiln_status status;
};

static kiln_status gemm(struct worker *w) {
  const kiln_matrix a = {.buffer = w->a, .rows = EDGE, .cols = EDGE,
                         .dtype = KILN_F32};
  kiln_matrix b = a, c = a;
  b.buffer = w->b;
  c.buffer = w->c;
  return kiln_matmul(w->queue, 1, &a, &b, &c, NULL, 0, NULL, NULL);
}

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static kiln_status worker_open(struct worker *w) {
  const size_t bytes = EDGE * EDGE * sizeof(float);
  float ones[EDGE * EDGE];
  for (size_t i = 0; i < EDGE * EDGE; i++)
    ones[i] = 1.0f;
  kiln_status s = kiln_queue_create(w->ctx, 0, &w->queue);
  if (s == KILN_OK)
    s = kiln_buffer_create(w->ctx, bytes, KILN_MEM_READ_WRITE, &w->a);
  if (s == KILN_OK)
    s = kiln_buffer_create(w->ctx, bytes, KILN_MEM_READ_WRITE, &w->b);
  if (s == KILN_OK)
    s = kiln_buffer_create(w->ctx, bytes, KILN_MEM_READ_WRITE, &w->c);
  if (s == KILN_OK)
    s = kiln_buffer_write(w->queue, ones,
                          &(kiln_range){w->a, 0, EDGE * EDGE, KILN_F32}, 0,
                          NULL, NULL);
  if (s == KILN_OK)
    s = kiln_buffer_write(w->queue, ones,
                          &(kiln_range){w->b, 0, EDGE * EDGE, KILN_F32}, 0,
                          NULL, NULL);
  if (s == KILN_OK)
    s = gemm(w); /* the warm-up: builds the program */
  if (s == KILN_OK)
    s = kiln_queue_finish(w->queue);
  return s;
}

static void worker_close(struct worker *w) {
  kiln_buffer_destroy(w->a);
  kiln_buffer_destroy(w->b);
  kiln_buffer_destroy(w->c);
  kiln_queue_destroy(w->queue);
}

static void *run_for(void *arg) {
  struct worker *w = arg;
  const double end = now() + w->seconds;
  while (w->status == KILN_OK && now() < end) {
    for (int i = 0; i < 64 && w->status == KILN_OK; i++)
      w->status = gemm(w);
    w->calls += 64;
    if (w->status == KILN_OK)
      w->status = kiln_queue_finish(w->queue);
  }
  return NULL;
}

static int fail(const char *what, kiln_status s) {
  fprintf(stderr, "bench_gemm_call: %s: %s (%s)\n", what,
          kiln_status_string(s), kiln_last_error());
  return 1;
}

int main(int argc, char **argv) {
  if (argc != 3 || (strcmp(argv[1], "calls") && strcmp(argv[1], "rate"))) {
    fprintf(stderr, "usage: bench_gemm_call calls N | rate SECONDS\n");
    return 2;
  }
  kiln_context *ctx = NULL;
  kiln_status s = kiln_context_create_default(NULL, &ctx);
  if (s != KILN_OK)
    return fail("kiln_context_create_default", s);
  kiln_tuning_info *info = calloc(1, sizeof *info);
  if (info == NULL)
    return fail("calloc", KILN_ERR_OUT_OF_HOST_MEMORY);
  s = kiln_tuning_get_info(ctx, "gemm", info);
  if (s != KILN_OK)
    return fail("kiln_tuning_get_info", s);
  if (info->params[0] == '\0') {
    fprintf(stderr, "bench_gemm_call: the device runs the CPU family: force "
                    "a GPU profile (KILN_PROFILE=nvidia)\n");
    return 1;
  }
  s = kiln_tuning_save(ctx, "gemm", info->params, "bench_gemm_call", NULL);
  free(info);
  if (s != KILN_OK)
    return fail("kiln_tuning_save", s);

  int rc = 0;
  if (strcmp(argv[1], "calls") == 0) {
    struct worker w = {.ctx = ctx};
    s = worker_open(&w);
    const long n = atol(argv[2]);
    for (long i = 0; i < n && s == KILN_OK; i++)
      s = gemm(&w);
    if (s == KILN_OK)
      s = kiln_queue_finish(w.queue);
    if (s != KILN_OK)
      rc = fail("gemm", s);
    worker_close(&w);
  } else {
    struct worker w[2] = {{.ctx = ctx}, {.ctx = ctx}};
    pthread_t thread[2];
    for (int i = 0; i < 2 && s == KILN_OK; i++) {
      s = worker_open(&w[i]);
      w[i].seconds = atof(argv[2]);
    }
    if (s == KILN_OK) {
      const double start = now();
      for (int i = 0; i < 2; i++)
        pthread_create(&thread[i], NULL, run_for, &w[i]);
      for (int i = 0; i < 2; i++)
        pthread_join(thread[i], NULL);
      const double took = now() - start;
      s = w[0].status != KILN_OK ? w[0].status : w[1].status;
      if (s == KILN_OK)
        printf("%.0f GEMMs per second (8x8x8 f32, 2 threads, 2 queues, "
               "%lu + %lu calls in %.2f s)\n",
               (double)(w[0].calls + w[1].calls) / took, w[0].calls,
               w[1].calls, took);
    }
    if (s != KILN_OK)
      rc = fail("gemm", s);
    for (int i = 0; i < 2; i++)
      worker_close(&w[i]);
  }
  kiln_context_destroy(ctx);
  return rc;
}
