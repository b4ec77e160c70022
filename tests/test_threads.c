/* Thread stress: eight threads on one context, each with its own queue, at
 * once running ops, building user programs (one source shared by every
 * thread and one source per thread), reading the program cache, sharing a
 * read-only buffer and handing events to each other. Every result is checked
 * against a host reference. Built and run under ThreadSanitizer as well
 * (tests/reliability.sh), which is what finds races; run normally it checks
 * that concurrent use gives right answers.
 *
 * cmocka's assertions are not thread-safe, so worker threads record the
 * first failure in their own struct and the main thread asserts on it.
 *
 * KILN_THREADS_ROUNDS (default 2) sets the rounds per thread, for longer
 * runs by hand. */
#include "harness.h"

#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

enum { THREADS = 8, MAX_ROUNDS = 1000 };

/* What every thread shares. */
struct shared {
  kiln_context *ctx;
  pthread_barrier_t barrier;
  kiln_buffer *input;     /* read-only input every thread's ops read */
  const float *input_host;
  size_t input_n;
  int rounds;
  /* Events handed from thread i to thread (i + 1) % THREADS each round. */
  kiln_event *handoff[THREADS];
};

struct worker {
  struct shared *sh;
  int id;
  bool failed;
  char message[640];
  size_t checks; /* results verified, so a silent no-op cannot pass */
};

static void worker_fail(struct worker *w, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void worker_fail(struct worker *w, const char *fmt, ...) {
  if (w->failed)
    return;
  w->failed = true;
  va_list ap;
  va_start(ap, fmt);
  int n = snprintf(w->message, sizeof w->message, "thread %d: ", w->id);
  vsnprintf(w->message + n, sizeof w->message - (size_t)n, fmt, ap);
  va_end(ap);
}

/* Run a kiln call; on failure record it with the last error and bail out. */
#define W_OK(w, expr)                                                         \
  do {                                                                        \
    kiln_status s_ = (expr);                                                  \
    if (s_ != KILN_OK) {                                                      \
      worker_fail((w), "%s returned %s: %s", #expr, kiln_status_name(s_),     \
                  kiln_last_error());                                         \
      goto out;                                                               \
    }                                                                         \
  } while (0)

#define W_CHECK(w, cond, ...)                                                 \
  do {                                                                        \
    (w)->checks++;                                                            \
    if (!(cond)) {                                                            \
      worker_fail((w), __VA_ARGS__);                                          \
      goto out;                                                               \
    }                                                                         \
  } while (0)

static bool close_to(double got, double want, double tol) {
  return fabs(got - want) <= tol;
}

/* ---- ops ---------------------------------------------------------------- */

/* Elementwise, reduction, scan, transpose, softmax and GEMM on this thread's
 * queue, chained by events where one feeds the next, reading the shared
 * input buffer concurrently with the other threads. Sizes differ per thread
 * and round so that kernels of several shapes are in flight at once. */
static void run_ops(struct worker *w, kiln_queue *q, int round) {
  struct shared *sh = w->sh;
  const size_t n = 300 + 37 * (size_t)w->id + (size_t)round; /* <= input_n */
  const size_t rows = 3 + (size_t)w->id, cols = 17 + (size_t)round;
  const size_t m = 5 + (size_t)w->id, gn = 7, gk = 9 + (size_t)round;
  kiln_buffer *y = NULL, *sum = NULL, *ints = NULL, *scanned = NULL;
  kiln_buffer *t = NULL, *a = NULL, *b = NULL, *c = NULL, *sm = NULL;
  kiln_event *ev_axpy = NULL, *ev_sum = NULL;
  float *host = NULL;
  int32_t *ihost = NULL;
  float *ah = NULL, *bh = NULL;
  kiln_context *ctx = sh->ctx;
  const float *x = sh->input_host;

  host = malloc(sizeof(float) * n * 2);
  ihost = malloc(sizeof(int32_t) * n * 2);
  ah = malloc(sizeof(float) * m * gk);
  bh = malloc(sizeof(float) * gk * gn);
  if (host == NULL || ihost == NULL || ah == NULL || bh == NULL) {
    worker_fail(w, "out of host memory");
    goto out;
  }

  /* y = -x; y = 0.5 * x + y  ->  y = -0.5 x. */
  W_OK(w, kiln_buffer_create(ctx, n * sizeof(float), 0, &y));
  W_OK(w, kiln_unary(q, KILN_UNARY_NEG, range_of(sh->input, 0, n, KILN_F32),
                     range_of(y, 0, n, KILN_F32), 0, NULL, NULL));
  W_OK(w, kiln_axpy(q, range_of(sh->input, 0, n, KILN_F32),
                    range_of(y, 0, n, KILN_F32), 0.5f, 0, NULL, &ev_axpy));
  /* sum(y), waiting on the axpy's event explicitly. */
  W_OK(w, kiln_buffer_create(ctx, sizeof(float), 0, &sum));
  W_OK(w, kiln_reduce(q, KILN_REDUCE_SUM, range_of(y, 0, n, KILN_F32),
                      range_of(sum, 0, 1, KILN_F32), 1, &ev_axpy, &ev_sum));
  W_OK(w, kiln_buffer_read(q, &(kiln_range){y, 0, n, KILN_F32}, host, 1, &ev_sum, NULL));
  float got_sum = 0;
  W_OK(w, kiln_buffer_read_sync(q, &(kiln_range){sum, 0, 1, KILN_F32}, &got_sum));
  double want_sum = 0, abs_sum = 0;
  for (size_t i = 0; i < n; i++) {
    float want = fmaf(0.5f, x[i], -x[i]);
    W_CHECK(w, host[i] == want, "axpy(neg) n=%zu [%zu]: got %a want %a", n, i,
            (double)host[i], (double)want);
    want_sum += want;
    abs_sum += fabs(want);
  }
  W_CHECK(w, close_to(got_sum, want_sum, 4.0 * (double)n * 0x1p-24 * abs_sum),
          "sum n=%zu: got %.9g want %.9g", n, (double)got_sum, want_sum);

  /* Inclusive scan of int32, exact. */
  for (size_t i = 0; i < n; i++)
    ihost[i] = (int32_t)((i * 7 + (size_t)w->id) % 13) - 6;
  W_OK(w, kiln_buffer_create(ctx, n * sizeof(int32_t), 0, &ints));
  W_OK(w, kiln_buffer_create(ctx, n * sizeof(int32_t), 0, &scanned));
  W_OK(w, kiln_buffer_write(q, ihost, &(kiln_range){ints, 0, n, KILN_I32}, 0, NULL, NULL));
  W_OK(w, kiln_scan(q, KILN_SCAN_INCLUSIVE, range_of(ints, 0, n, KILN_I32),
                    range_of(scanned, 0, n, KILN_I32), 0, NULL, NULL));
  W_OK(w, kiln_buffer_read_sync(q, &(kiln_range){scanned, 0, n, KILN_I32}, ihost + n));
  int32_t acc = 0;
  for (size_t i = 0; i < n; i++) {
    acc += ihost[i];
    W_CHECK(w, ihost[n + i] == acc, "scan n=%zu [%zu]: got %d want %d", n, i,
            ihost[n + i], acc);
  }

  /* Transpose a rows x cols slice of the shared input; bit-exact. */
  W_OK(w, kiln_buffer_create(ctx, rows * cols * sizeof(float), 0, &t));
  W_OK(w, kiln_transpose(q, matrix_of(sh->input, 1, rows, cols, KILN_F32),
                         matrix_of(t, 0, cols, rows, KILN_F32), 0, NULL, NULL));
  W_OK(w, kiln_buffer_read_sync(q, &(kiln_range){t, 0, rows * cols, KILN_F32}, host));
  for (size_t r = 0; r < rows; r++)
    for (size_t cc = 0; cc < cols; cc++)
      W_CHECK(w, host[cc * rows + r] == x[1 + r * cols + cc],
              "transpose %zux%zu at (%zu,%zu)", rows, cols, r, cc);

  /* Softmax of the same slice: rows sum to 1, order preserved. */
  W_OK(w, kiln_buffer_create(ctx, rows * cols * sizeof(float), 0, &sm));
  W_OK(w, kiln_softmax_rows(q, matrix_of(sh->input, 1, rows, cols, KILN_F32),
                            matrix_of(sm, 0, rows, cols, KILN_F32), 0, NULL,
                            NULL));
  W_OK(w, kiln_buffer_read_sync(q, &(kiln_range){sm, 0, rows * cols, KILN_F32}, host));
  for (size_t r = 0; r < rows; r++) {
    const float *xr = x + 1 + r * cols;
    double mx = xr[0], den = 0;
    for (size_t cc = 1; cc < cols; cc++)
      mx = xr[cc] > mx ? xr[cc] : mx;
    for (size_t cc = 0; cc < cols; cc++)
      den += exp(xr[cc] - mx);
    for (size_t cc = 0; cc < cols; cc++) {
      double want = exp(xr[cc] - mx) / den;
      W_CHECK(w, close_to(host[r * cols + cc], want, 1e-5 * want + 1e-7),
              "softmax %zux%zu at (%zu,%zu): got %.9g want %.9g", rows, cols,
              r, cc, (double)host[r * cols + cc], want);
    }
  }

  /* C = A * B, small and odd-shaped, against a double reference with the
   * K * eps * |A||B| bound. */
  for (size_t i = 0; i < m * gk; i++)
    ah[i] = x[(i * 3) % sh->input_n];
  for (size_t i = 0; i < gk * gn; i++)
    bh[i] = x[(i * 5 + 11) % sh->input_n];
  W_OK(w, kiln_buffer_create(ctx, m * gk * sizeof(float), 0, &a));
  W_OK(w, kiln_buffer_create(ctx, gk * gn * sizeof(float), 0, &b));
  W_OK(w, kiln_buffer_create(ctx, m * gn * sizeof(float), 0, &c));
  W_OK(w, kiln_buffer_write(q, ah, &(kiln_range){a, 0, m * gk, KILN_F32}, 0, NULL, NULL));
  W_OK(w, kiln_buffer_write(q, bh, &(kiln_range){b, 0, gk * gn, KILN_F32}, 0, NULL, NULL));
  W_OK(w, kiln_matmul(q, 1, matrix_of(a, 0, m, gk, KILN_F32),
                      matrix_of(b, 0, gk, gn, KILN_F32),
                      matrix_of(c, 0, m, gn, KILN_F32), NULL, 0, NULL, NULL));
  W_OK(w, kiln_buffer_read_sync(q, &(kiln_range){c, 0, m * gn, KILN_F32}, host));
  for (size_t i = 0; i < m; i++)
    for (size_t j = 0; j < gn; j++) {
      double want = 0, mag = 0;
      for (size_t p = 0; p < gk; p++) {
        want += (double)ah[i * gk + p] * bh[p * gn + j];
        mag += fabs((double)ah[i * gk + p] * bh[p * gn + j]);
      }
      W_CHECK(w, close_to(host[i * gn + j], want,
                          2.0 * (double)gk * 0x1p-24 * mag + 1e-30),
              "gemm %zux%zux%zu at (%zu,%zu): got %.9g want %.9g", m, gn, gk,
              i, j, (double)host[i * gn + j], want);
    }
out:
  kiln_event_release(ev_axpy);
  kiln_event_release(ev_sum);
  kiln_buffer *all[] = {y, sum, ints, scanned, t, a, b, c, sm};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
    if (kiln_buffer_destroy(all[i]) != KILN_OK)
      worker_fail(w, "kiln_buffer_destroy: %s", kiln_last_error());
  free(host);
  free(ihost);
  free(ah);
  free(bh);
}

/* ---- user programs and the cache ---------------------------------------- */

/* Every thread builds this same source at the same moment: one cache key
 * written and read by eight builds at once. */
static const char shared_source[] =
    "__kernel void stamp(__global int *out, int base) {\n"
    "  size_t i = get_global_id(0);\n"
    "  out[i] = base + (int)(i * 3u);\n"
    "}\n";

static void run_user_kernels(struct worker *w, kiln_queue *q, int round) {
  kiln_context *ctx = w->sh->ctx;
  kiln_program *shared = NULL, *own = NULL;
  kiln_kernel *ks = NULL, *ko = NULL;
  kiln_buffer *out = NULL;
  kiln_cache_list *list = NULL;
  enum { N = 96 };
  int32_t host[N];
  char source[512];

  /* A source only this thread and round compiles (a distinct cache key). */
  snprintf(source, sizeof source,
           "#define THREAD %d\n#define ROUND %d\n"
           "__kernel void own(__global int *out, int scale) {\n"
           "  size_t i = get_global_id(0);\n"
           "  out[i] = (int)i * scale + THREAD * 1000 + ROUND;\n"
           "}\n",
           w->id, round);

  W_OK(w, kiln_buffer_create(ctx, sizeof host, 0, &out));
  W_OK(w, kiln_program_create_built(ctx, shared_source, NULL, &shared));
  W_OK(w, kiln_kernel_create(shared, "stamp", &ks));
  W_OK(w, kiln_kernel_set_arg_buffer(ks, 0, out));
  W_OK(w, kiln_kernel_set_arg_i32(ks, 1, 100 * w->id + round));
  size_t global = N, local = 16;
  W_OK(w, kiln_kernel_launch(q, ks, 1, &global, &local, 0, NULL, NULL));
  W_OK(w, kiln_buffer_read_sync(q, &(kiln_range){out, 0, sizeof host / sizeof host[0], KILN_I32}, host));
  for (int i = 0; i < N; i++)
    W_CHECK(w, host[i] == 100 * w->id + round + i * 3,
            "shared kernel [%d]: got %d", i, host[i]);

  /* Meanwhile other threads are storing entries: a listing must be
   * consistent (every entry it returns has a name) and info must work. */
  kiln_cache_info info;
  W_OK(w, kiln_cache_get_info(&info));
  W_OK(w, kiln_cache_list_create(&list));
  for (size_t i = 0; i < kiln_cache_list_get_count(list); i++) {
    const kiln_cache_entry *e = kiln_cache_list_get(list, i);
    W_CHECK(w, e != NULL && e->file[0] != '\0', "cache list entry %zu", i);
  }

  W_OK(w, kiln_program_create_built(ctx, source, "-DUNUSED_OPTION=1", &own));
  W_OK(w, kiln_kernel_create(own, "own", &ko));
  W_OK(w, kiln_kernel_set_arg_buffer(ko, 0, out));
  W_OK(w, kiln_kernel_set_arg_i32(ko, 1, w->id + 2));
  W_OK(w, kiln_kernel_launch(q, ko, 1, &global, NULL, 0, NULL, NULL));
  W_OK(w, kiln_buffer_read_sync(q, &(kiln_range){out, 0, sizeof host / sizeof host[0], KILN_I32}, host));
  for (int i = 0; i < N; i++)
    W_CHECK(w, host[i] == i * (w->id + 2) + w->id * 1000 + round,
            "own kernel [%d]: got %d", i, host[i]);
out:
  kiln_cache_list_destroy(list);
  if (kiln_kernel_destroy(ks) != KILN_OK || kiln_kernel_destroy(ko) != KILN_OK ||
      kiln_program_destroy(shared) != KILN_OK ||
      kiln_program_destroy(own) != KILN_OK ||
      kiln_buffer_destroy(out) != KILN_OK)
    worker_fail(w, "destroying user objects: %s", kiln_last_error());
}

/* ---- events and errors across threads ------------------------------------ */

/* Each thread publishes an event (an extra reference for its neighbour),
 * then, after a barrier, waits on and releases its neighbour's: reference
 * counts change on several threads at once. */
static void run_handoff(struct worker *w, kiln_queue *q) {
  struct shared *sh = w->sh;
  kiln_event *mine = NULL;
  kiln_status s = kiln_queue_marker(q, 0, NULL, &mine);
  if (s != KILN_OK) {
    worker_fail(w, "kiln_queue_marker: %s", kiln_last_error());
    mine = NULL;
  }
  sh->handoff[w->id] = mine != NULL ? kiln_event_retain(mine) : NULL;
  pthread_barrier_wait(&sh->barrier);
  kiln_event *theirs = sh->handoff[(w->id + 1) % THREADS];
  if (theirs != NULL) {
    if (kiln_event_wait(theirs) != KILN_OK)
      worker_fail(w, "kiln_event_wait: %s", kiln_last_error());
    kiln_event_state state = KILN_EVENT_QUEUED;
    if (kiln_event_get_state(theirs, &state) != KILN_OK ||
        state != KILN_EVENT_COMPLETE)
      worker_fail(w, "neighbour's event is not complete (%d)", (int)state);
    kiln_event_release(theirs);
  }
  kiln_event_release(mine);
  pthread_barrier_wait(&sh->barrier);
  sh->handoff[w->id] = NULL; /* each thread clears only its own slot */

  /* The last error is per thread: every thread fails differently at once,
   * then each must still read its own message. */
  float byte = 0;
  s = kiln_buffer_read_sync(q, &(kiln_range){sh->input, (size_t)(4096 + w->id) * 1000, 1, KILN_F32}, &byte);
  pthread_barrier_wait(&sh->barrier);
  w->checks++;
  if (s != KILN_ERR_OUT_OF_RANGE)
    worker_fail(w, "read past the end returned %s", kiln_status_name(s));
  char offset_text[48];
  snprintf(offset_text, sizeof offset_text, "%zu",
           (size_t)(4096 + w->id) * 1000);
  if (strstr(kiln_last_error(), offset_text) == NULL)
    worker_fail(w, "last error \"%s\" is not this thread's (no %s)",
                kiln_last_error(), offset_text);
}

static void *worker_main(void *arg) {
  struct worker *w = arg;
  kiln_queue *q = NULL;
  pthread_barrier_wait(&w->sh->barrier);
  kiln_status s = kiln_queue_create(w->sh->ctx, 0, &q);
  if (s != KILN_OK) {
    worker_fail(w, "kiln_queue_create: %s", kiln_last_error());
  }
  for (int round = 0; round < w->sh->rounds; round++) {
    if (q != NULL && !w->failed) {
      /* Half the threads start with ops, half with builds, so both kinds of
       * work overlap from the first moment. */
      if ((w->id + round) % 2 == 0) {
        run_ops(w, q, round);
        run_user_kernels(w, q, round);
      } else {
        run_user_kernels(w, q, round);
        run_ops(w, q, round);
      }
    }
    /* Every thread reaches the same barriers, failed or not. */
    if (q != NULL) {
      run_handoff(w, q);
    } else {
      pthread_barrier_wait(&w->sh->barrier);
      pthread_barrier_wait(&w->sh->barrier);
      pthread_barrier_wait(&w->sh->barrier);
    }
  }
  if (kiln_queue_destroy(q) != KILN_OK)
    worker_fail(w, "kiln_queue_destroy: %s", kiln_last_error());
  return NULL;
}

static int rounds_from_env(void) {
  const char *v = getenv("KILN_THREADS_ROUNDS");
  if (v == NULL || *v == '\0')
    return 2;
  int r = atoi(v);
  return r < 1 ? 1 : r > MAX_ROUNDS ? MAX_ROUNDS : r;
}

static void test_eight_threads_one_context(void **state) {
  (void)state;
  FOR_EACH_TEST_DEVICE(d) {
    struct shared sh = {.rounds = rounds_from_env(), .input_n = 1024};
    kiln_queue *q;
    kiln_test_open(d, &sh.ctx, &q);
    float *input = malloc(sh.input_n * sizeof *input);
    assert_non_null(input);
    kiln_test_fill_random(input, sh.input_n, -2.0f, 2.0f, 77);
    sh.input_host = input;
    assert_kiln_ok(kiln_buffer_create(sh.ctx, sh.input_n * sizeof *input,
                                      KILN_MEM_READ_ONLY, &sh.input));
    assert_kiln_ok(kiln_buffer_write_sync(q, input, &(kiln_range){sh.input, 0, sh.input_n, KILN_F32}));
    assert_int_equal(pthread_barrier_init(&sh.barrier, NULL, THREADS), 0);

    pthread_t threads[THREADS];
    struct worker workers[THREADS];
    for (int i = 0; i < THREADS; i++) {
      workers[i] = (struct worker){.sh = &sh, .id = i};
      assert_int_equal(
          pthread_create(&threads[i], NULL, worker_main, &workers[i]), 0);
    }
    for (int i = 0; i < THREADS; i++)
      pthread_join(threads[i], NULL);
    pthread_barrier_destroy(&sh.barrier);

    size_t checks = 0;
    for (int i = 0; i < THREADS; i++) {
      if (workers[i].failed)
        fail_msg("%s", workers[i].message);
      checks += workers[i].checks;
    }
    /* Every thread verified its results in every round. */
    assert_true(checks >= (size_t)THREADS * (size_t)sh.rounds * 900);
    assert_kiln_ok(kiln_buffer_destroy(sh.input));
    free(input);
    kiln_test_close(sh.ctx, q);
  }
}

/* Contexts themselves are created and destroyed concurrently (the default
 * contract: kiln_context_create is thread-safe), each thread also creating
 * and destroying its own queues and buffers on its own context. */
struct ctx_worker {
  const kiln_device *device;
  pthread_barrier_t *barrier;
  bool failed;
  char message[512];
};

static void *ctx_worker_main(void *arg) {
  struct ctx_worker *w = arg;
  pthread_barrier_wait(w->barrier);
  for (int i = 0; i < 4 && !w->failed; i++) {
    kiln_context *ctx = NULL;
    kiln_queue *q = NULL;
    kiln_buffer *b = NULL;
    uint32_t pattern = 0xa5a5a5a5u ^ (uint32_t)i, back[64];
    if (kiln_context_create(w->device, NULL, &ctx) != KILN_OK ||
        kiln_queue_create(ctx, 0, &q) != KILN_OK ||
        kiln_buffer_create(ctx, sizeof back, 0, &b) != KILN_OK ||
        kiln_buffer_fill(q, &pattern, sizeof pattern, &(kiln_range){b, 0, 64, KILN_U32}, 0, NULL, NULL) != KILN_OK ||
        kiln_buffer_read_sync(q, &(kiln_range){b, 0, 64, KILN_U32}, back) != KILN_OK) {
      w->failed = true;
      snprintf(w->message, sizeof w->message, "%s", kiln_last_error());
    }
    for (size_t j = 0; j < 64 && !w->failed; j++)
      if (back[j] != pattern) {
        w->failed = true;
        snprintf(w->message, sizeof w->message, "fill [%zu] = %#x", j,
                 (unsigned)back[j]);
      }
    if (kiln_buffer_destroy(b) != KILN_OK || kiln_queue_destroy(q) != KILN_OK ||
        kiln_context_destroy(ctx) != KILN_OK) {
      w->failed = true;
      snprintf(w->message, sizeof w->message, "destroy: %s", kiln_last_error());
    }
  }
  return NULL;
}

static void test_contexts_in_parallel(void **state) {
  (void)state;
  FOR_EACH_TEST_DEVICE(d) {
    pthread_barrier_t barrier;
    assert_int_equal(pthread_barrier_init(&barrier, NULL, THREADS), 0);
    pthread_t threads[THREADS];
    struct ctx_worker workers[THREADS];
    for (int i = 0; i < THREADS; i++) {
      workers[i] = (struct ctx_worker){.device = kiln_test_device(d),
                                       .barrier = &barrier};
      assert_int_equal(
          pthread_create(&threads[i], NULL, ctx_worker_main, &workers[i]), 0);
    }
    for (int i = 0; i < THREADS; i++)
      pthread_join(threads[i], NULL);
    pthread_barrier_destroy(&barrier);
    for (int i = 0; i < THREADS; i++)
      if (workers[i].failed)
        fail_msg("thread %d: %s", i, workers[i].message);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_eight_threads_one_context),
      cmocka_unit_test(test_contexts_in_parallel),
  };
  return KILN_TEST_RUN("threads", tests, true);
}
