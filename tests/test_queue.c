/* Queues: creation (profiling, KILN_TRACE), flush/finish/marker, destroy
 * with pending work, and distinct queues used from distinct threads. */
#include <pthread.h>
#include <stdlib.h>

#include "harness.h"
#include "core/internal.h"

static void test_create_destroy(void **state) {
  (void)state;
  unsetenv("KILN_TRACE");
  FOR_EACH_TEST_DEVICE(i) {
    kiln_context *ctx = NULL;
    kiln_test_open(i, &ctx, NULL);
    kiln_queue *plain = NULL, *profiled = NULL;
    assert_kiln_ok(kiln_queue_create(ctx, 0, &plain));
    assert_kiln_ok(kiln_queue_create(ctx, KILN_QUEUE_PROFILING, &profiled));
    assert_ptr_equal(kiln_queue_get_context(plain), ctx);
    assert_ptr_equal(kiln_queue_get_context(profiled), ctx);
    assert_int_equal(plain->flags, 0);
    assert_int_equal(profiled->flags, KILN_QUEUE_PROFILING);

    /* The OpenCL queue carries the profiling property asked for. */
    cl_command_queue_properties props = 0;
    assert_int_equal(clGetCommandQueueInfo(profiled->cl, CL_QUEUE_PROPERTIES,
                                           sizeof props, &props, NULL),
                     CL_SUCCESS);
    assert_true(props & CL_QUEUE_PROFILING_ENABLE);
    assert_int_equal(clGetCommandQueueInfo(plain->cl, CL_QUEUE_PROPERTIES,
                                           sizeof props, &props, NULL),
                     CL_SUCCESS);
    assert_false(props & CL_QUEUE_PROFILING_ENABLE);
    /* In-order, as the header promises. */
    assert_false(props & CL_QUEUE_OUT_OF_ORDER_EXEC_MODE_ENABLE);

    assert_kiln_ok(kiln_queue_flush(plain));
    assert_kiln_ok(kiln_queue_finish(plain));
    assert_kiln_ok(kiln_queue_destroy(plain));
    assert_kiln_ok(kiln_queue_destroy(profiled));
    assert_kiln_ok(kiln_queue_destroy(NULL));
    assert_kiln_ok(kiln_context_destroy(ctx));
  }
}

static void test_bad_arguments(void **state) {
  (void)state;
  kiln_context *ctx = NULL;
  kiln_test_open(0, &ctx, NULL);
  kiln_queue *queue = (kiln_queue *)(uintptr_t)1;
  assert_kiln_status(kiln_queue_create(NULL, 0, &queue), KILN_ERR_NULL_POINTER);
  assert_last_error_contains("kiln_queue_create: ctx is NULL");
  assert_null(queue);
  assert_kiln_status(kiln_queue_create(ctx, 0, NULL), KILN_ERR_NULL_POINTER);
  assert_last_error_contains("kiln_queue_create: out is NULL");
  assert_kiln_status(kiln_queue_create(ctx, 0x10, &queue),
                     KILN_ERR_INVALID_ARGUMENT);
  assert_last_error_contains("unknown bits 0x10");
  assert_null(queue);

  assert_kiln_status(kiln_queue_flush(NULL), KILN_ERR_NULL_POINTER);
  assert_last_error_contains("kiln_queue_flush: queue is NULL");
  assert_kiln_status(kiln_queue_finish(NULL), KILN_ERR_NULL_POINTER);
  assert_last_error_contains("kiln_queue_finish: queue is NULL");
  kiln_event *event = (kiln_event *)(uintptr_t)1;
  assert_kiln_status(kiln_queue_marker(NULL, 0, NULL, &event),
                     KILN_ERR_NULL_POINTER);
  assert_last_error_contains("kiln_queue_marker: queue is NULL");
  assert_null(event);
  assert_null(kiln_queue_get_context(NULL));
  /* Nothing leaked by the failures. */
  assert_kiln_ok(kiln_context_destroy(ctx));
}

static void test_trace_forces_profiling(void **state) {
  (void)state;
  kiln_context *ctx = NULL;
  kiln_test_open(0, &ctx, NULL);
  setenv("KILN_TRACE", "1", 1);
  kiln_queue *queue = NULL;
  assert_kiln_ok(kiln_queue_create(ctx, 0, &queue));
  unsetenv("KILN_TRACE");
  assert_int_equal(queue->flags & KILN_QUEUE_PROFILING, KILN_QUEUE_PROFILING);
  kiln_event *event = NULL;
  assert_kiln_ok(kiln_queue_marker(queue, 0, NULL, &event));
  assert_kiln_ok(kiln_event_wait(event));
  uint64_t start = 0, end = 0;
  assert_kiln_ok(kiln_event_get_profiling(event, &start, &end));
  assert_true(end >= start);
  kiln_event_release(event);
  assert_kiln_ok(kiln_queue_destroy(queue));

  /* Set but empty: no profiling. */
  setenv("KILN_TRACE", "", 1);
  assert_kiln_ok(kiln_queue_create(ctx, 0, &queue));
  unsetenv("KILN_TRACE");
  assert_int_equal(queue->flags, 0);
  assert_kiln_ok(kiln_queue_marker(queue, 0, NULL, &event));
  assert_kiln_ok(kiln_event_wait(event));
  assert_kiln_status(kiln_event_get_profiling(event, &start, &end),
                     KILN_ERR_INVALID_STATE);
  kiln_event_release(event);
  assert_kiln_ok(kiln_queue_destroy(queue));
  assert_kiln_ok(kiln_context_destroy(ctx));
}

static void test_marker(void **state) {
  (void)state;
  FOR_EACH_TEST_DEVICE(i) {
    kiln_context *ctx = NULL;
    kiln_queue *queue = NULL;
    kiln_test_open(i, &ctx, &queue);
    enum { N = 1 << 16 };
    float *host = malloc(N * sizeof *host);
    float *back = calloc(N, sizeof *back);
    assert_non_null(host);
    assert_non_null(back);
    kiln_test_fill_random(host, N, -1.0f, 1.0f, 7);
    kiln_buffer *buffer = NULL;
    assert_kiln_ok(kiln_buffer_create(ctx, N * sizeof *host, 0, &buffer));

    /* Empty wait list: the marker covers everything enqueued before it. */
    kiln_event *marker = NULL;
    assert_kiln_ok(kiln_buffer_write(
        queue, host, &(kiln_range){buffer, 0, N, KILN_F32}, 0, NULL, NULL));
    assert_kiln_ok(kiln_buffer_read(
        queue, &(kiln_range){buffer, 0, N, KILN_F32}, back, 0, NULL, NULL));
    assert_kiln_ok(kiln_queue_marker(queue, 0, NULL, &marker));
    assert_kiln_ok(kiln_event_wait(marker));
    assert_memory_equal(host, back, N * sizeof *host);
    kiln_event_release(marker);

    /* Explicit wait list. */
    kiln_event *w1 = NULL, *w2 = NULL;
    assert_kiln_ok(kiln_buffer_write(
        queue, host, &(kiln_range){buffer, 0, 16, KILN_F32}, 0, NULL, &w1));
    assert_kiln_ok(kiln_queue_marker(queue, 1, &w1, &w2));
    kiln_event *pair[2] = {w1, w2};
    assert_kiln_ok(kiln_queue_marker(queue, 2, pair, &marker));
    assert_kiln_ok(kiln_event_wait(marker));
    kiln_event_state st;
    assert_kiln_ok(kiln_event_get_state(w1, &st));
    assert_int_equal(st, KILN_EVENT_COMPLETE);
    assert_kiln_ok(kiln_event_get_state(w2, &st));
    assert_int_equal(st, KILN_EVENT_COMPLETE);
    kiln_event_release(marker);

    /* Without an out event. */
    assert_kiln_ok(kiln_queue_marker(queue, 2, pair, NULL));

    /* Bad wait lists. */
    marker = (kiln_event *)(uintptr_t)1;
    assert_kiln_status(kiln_queue_marker(queue, 2, NULL, &marker),
                       KILN_ERR_NULL_POINTER);
    assert_last_error_contains("kiln_queue_marker: wait_list is NULL but "
                               "num_wait is 2");
    assert_null(marker);
    kiln_event *holes[2] = {w1, NULL};
    assert_kiln_status(kiln_queue_marker(queue, 2, holes, &marker),
                       KILN_ERR_NULL_POINTER);
    assert_last_error_contains("wait_list[1] is NULL");

    kiln_context *other = NULL;
    kiln_queue *other_queue = NULL;
    kiln_test_open(i, &other, &other_queue);
    kiln_event *foreign = NULL;
    assert_kiln_ok(kiln_queue_marker(other_queue, 0, NULL, &foreign));
    kiln_event *mixed[2] = {w1, foreign};
    assert_kiln_status(kiln_queue_marker(queue, 2, mixed, &marker),
                       KILN_ERR_WRONG_CONTEXT);
    assert_last_error_contains("wait_list[1] is an event of another context");
    assert_kiln_ok(kiln_event_wait(foreign));
    kiln_event_release(foreign);
    kiln_test_close(other, other_queue);

    kiln_event_release(w1);
    kiln_event_release(w2);
    assert_kiln_ok(kiln_buffer_destroy(buffer));
    kiln_test_close(ctx, queue);
    free(host);
    free(back);
  }
}

/* kiln_queue_destroy waits for pending work and keeps its events valid. */
static void test_destroy_with_pending_work(void **state) {
  (void)state;
  FOR_EACH_TEST_DEVICE(i) {
    kiln_context *ctx = NULL;
    kiln_queue *queue = NULL, *reader = NULL;
    kiln_test_open(i, &ctx, &queue);
    assert_kiln_ok(kiln_queue_create(ctx, 0, &reader));
    const size_t bytes = 16u << 20;
    unsigned char *host = malloc(bytes);
    unsigned char *back = malloc(bytes);
    assert_non_null(host);
    assert_non_null(back);
    for (size_t k = 0; k < bytes; k++)
      host[k] = (unsigned char)(k * 31u + 7u);
    kiln_buffer *a = NULL, *b = NULL;
    assert_kiln_ok(kiln_buffer_create(ctx, bytes, 0, &a));
    assert_kiln_ok(kiln_buffer_create(ctx, bytes, 0, &b));
    kiln_event *last = NULL;
    assert_kiln_ok(kiln_buffer_write(
        queue, host, &(kiln_range){a, 0, bytes / 4, KILN_U32}, 0, NULL, NULL));
    assert_kiln_ok(kiln_buffer_copy(
        queue, &(kiln_range){a, 0, bytes / 4, KILN_U32},
        &(kiln_range){b, 0, bytes / 4, KILN_U32}, 0, NULL, &last));
    /* No wait, no finish: destroy must do it. */
    assert_kiln_ok(kiln_queue_destroy(queue));
    kiln_event_state st = KILN_EVENT_QUEUED;
    assert_kiln_ok(kiln_event_get_state(last, &st));
    assert_int_equal(st, KILN_EVENT_COMPLETE);
    assert_kiln_ok(kiln_event_wait(last));
    kiln_event_release(last);
    assert_kiln_ok(kiln_buffer_read_sync(
        reader, &(kiln_range){b, 0, bytes / 4, KILN_U32}, back));
    assert_memory_equal(host, back, bytes);
    assert_kiln_ok(kiln_buffer_destroy(a));
    assert_kiln_ok(kiln_buffer_destroy(b));
    kiln_test_close(ctx, reader);
    free(host);
    free(back);
  }
}

/* Distinct queues on one context, one per thread, concurrently. */
struct worker {
  kiln_context *ctx;
  uint32_t seed;
  int failures;
};

static void *worker_main(void *arg) {
  struct worker *w = arg;
  enum { N = 4096, ROUNDS = 20 };
  float host[N], back[N];
  kiln_queue *queue = NULL;
  kiln_buffer *buffer = NULL;
  if (kiln_queue_create(w->ctx, 0, &queue) != KILN_OK ||
      kiln_buffer_create(w->ctx, sizeof host, 0, &buffer) != KILN_OK) {
    w->failures++;
    goto done;
  }
  for (int r = 0; r < ROUNDS; r++) {
    kiln_test_fill_random(host, N, 0.0f, 1.0f, w->seed + (uint32_t)r);
    if (kiln_buffer_write(queue, host, &(kiln_range){buffer, 0, N, KILN_F32}, 0,
                          NULL, NULL) != KILN_OK ||
        kiln_buffer_read_sync(queue, &(kiln_range){buffer, 0, N, KILN_F32},
                              back) != KILN_OK ||
        memcmp(host, back, sizeof host) != 0)
      w->failures++;
  }
done:
  if (kiln_buffer_destroy(buffer) != KILN_OK ||
      kiln_queue_destroy(queue) != KILN_OK)
    w->failures++;
  return NULL;
}

static void test_queues_in_threads(void **state) {
  (void)state;
  FOR_EACH_TEST_DEVICE(i) {
    kiln_context *ctx = NULL;
    kiln_test_open(i, &ctx, NULL);
    enum { THREADS = 4 };
    struct worker workers[THREADS];
    pthread_t threads[THREADS];
    for (int t = 0; t < THREADS; t++) {
      workers[t] = (struct worker){.ctx = ctx, .seed = 100u * (uint32_t)t + 1};
      assert_int_equal(
          pthread_create(&threads[t], NULL, worker_main, &workers[t]), 0);
    }
    for (int t = 0; t < THREADS; t++) {
      pthread_join(threads[t], NULL);
      assert_int_equal(workers[t].failures, 0);
    }
    assert_int_equal(atomic_load(&ctx->children), 0);
    assert_kiln_ok(kiln_context_destroy(ctx));
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_create_destroy),
      cmocka_unit_test(test_bad_arguments),
      cmocka_unit_test(test_trace_forces_profiling),
      cmocka_unit_test(test_marker),
      cmocka_unit_test(test_destroy_with_pending_work),
      cmocka_unit_test(test_queues_in_threads),
  };
  return KILN_TEST_RUN("queue", tests, true);
}
