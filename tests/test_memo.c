/* The in-process memo: embedded sources by name, each (source, options)
 * compiled at most once per context however many threads ask, failed
 * builds retried, and kernels cached per queue. Uses the tiny probe.cl. */
#include "harness.h"

#include <pthread.h>
#include <stdlib.h>

#include "program/program.h"
#include "core/internal.h"

static void test_kernel_source(void **state) {
  (void)state;
  size_t length = 0;
  const char *source = kiln__kernel_source("probe", &length);
  assert_non_null(source);
  assert_int_equal(length, strlen(source));
  assert_non_null(strstr(source, "__kernel void kiln_probe"));
  assert_null(kiln__kernel_source("no_such_source", &length));
  assert_null(kiln__kernel_source(NULL, &length));
  /* Every listed name can be looked up. */
  size_t count = kiln__kernel_source_count();
  assert_true(count >= 1);
  for (size_t i = 0; i < count; i++)
    assert_non_null(kiln__kernel_source(kiln__kernel_source_name(i), NULL));
  assert_null(kiln__kernel_source_name(count));
}

struct race {
  kiln_context *ctx;
  pthread_barrier_t *start;
  cl_program program;
  kiln_status status;
};

static void *ask(void *arg) {
  struct race *r = arg;
  pthread_barrier_wait(r->start);
  r->status = kiln__op_program(r->ctx, "probe", "-DKILN_MEMO_RACE=1", &r->program);
  return NULL;
}

static void test_one_build_for_many_threads(void **state) {
  (void)state;
  enum { THREADS = 8 };
  FOR_EACH_TEST_DEVICE(d) {
    kiln_context *ctx;
    kiln_test_open(d, &ctx, NULL);
    pthread_barrier_t start;
    pthread_barrier_init(&start, NULL, THREADS);
    pthread_t threads[THREADS];
    struct race races[THREADS];
    for (int i = 0; i < THREADS; i++) {
      races[i] = (struct race){.ctx = ctx, .start = &start};
      assert_int_equal(pthread_create(&threads[i], NULL, ask, &races[i]), 0);
    }
    for (int i = 0; i < THREADS; i++)
      pthread_join(threads[i], NULL);
    pthread_barrier_destroy(&start);
    for (int i = 0; i < THREADS; i++) {
      assert_int_equal(races[i].status, KILN_OK);
      assert_ptr_equal(races[i].program, races[0].program);
    }
    assert_non_null(races[0].program);
    assert_int_equal(kiln__memo_build_count(ctx), 1);
    /* Other options are another program; the same ones are not rebuilt. */
    cl_program again, other;
    assert_kiln_ok(kiln__op_program(ctx, "probe", "-DKILN_MEMO_RACE=1", &again));
    assert_ptr_equal(again, races[0].program);
    assert_kiln_ok(kiln__op_program(ctx, "probe", NULL, &other));
    assert_ptr_not_equal(other, again);
    assert_int_equal(kiln__memo_build_count(ctx), 2);
    assert_kiln_ok(kiln_context_destroy(ctx));
  }
}

static void test_errors_and_retry(void **state) {
  (void)state;
  cl_program program;
  assert_kiln_status(kiln__op_program(NULL, "probe", NULL, &program),
                     KILN_ERR_NULL_POINTER);
  FOR_EACH_TEST_DEVICE(d) {
    kiln_context *ctx;
    kiln_test_open(d, &ctx, NULL);
    assert_kiln_status(kiln__op_program(ctx, "no_such_source", NULL, &program),
                       KILN_ERR_NOT_FOUND);
    assert_last_error_contains("no_such_source");
    assert_kiln_status(kiln__op_program(ctx, "probe", NULL, NULL),
                       KILN_ERR_NULL_POINTER);
    /* A failing build reports its log and is retried by the next caller. */
    const char *bad = "-DKILN_PROBE_BAD -kiln-not-an-option";
    assert_kiln_status(kiln__op_program(ctx, "probe", bad, &program),
                       KILN_ERR_BUILD_FAILED);
    assert_last_error_contains("clBuildProgram failed");
    size_t builds = kiln__memo_build_count(ctx);
    assert_kiln_status(kiln__op_program(ctx, "probe", bad, &program),
                       KILN_ERR_BUILD_FAILED);
    assert_int_equal(kiln__memo_build_count(ctx), builds + 1);
    assert_kiln_ok(kiln_context_destroy(ctx));
  }
}

static void test_queue_kernels(void **state) {
  (void)state;
  FOR_EACH_TEST_DEVICE(d) {
    kiln_context *ctx;
    kiln_queue *queue;
    kiln_test_open(d, &ctx, &queue);
    cl_kernel k1, k2;
    assert_kiln_status(kiln__queue_kernel(NULL, "probe", NULL, "kiln_probe", &k1),
                       KILN_ERR_NULL_POINTER);
    assert_kiln_status(kiln__queue_kernel(queue, "probe", NULL, NULL, &k1),
                       KILN_ERR_NULL_POINTER);
    assert_kiln_ok(kiln__queue_kernel(queue, "probe", NULL, "kiln_probe", &k1));
    assert_kiln_ok(kiln__queue_kernel(queue, "probe", "", "kiln_probe", &k2));
    assert_ptr_equal(k1, k2); /* NULL and "" are the same options */
    assert_kiln_status(kiln__queue_kernel(queue, "probe", NULL, "nope", &k2),
                       KILN_ERR_NOT_FOUND);
    assert_last_error_contains("'nope'");
    /* A second queue has its own kernel (arguments are per kernel) but
     * shares the program. */
    kiln_queue *queue2;
    assert_kiln_ok(kiln_queue_create(ctx, 0, &queue2));
    assert_kiln_ok(kiln__queue_kernel(queue2, "probe", NULL, "kiln_probe", &k2));
    assert_ptr_not_equal(k1, k2);
    assert_int_equal(kiln__memo_build_count(ctx), 1);

    /* The cached kernel runs and writes the probe pattern. */
    enum { N = 256 };
    kiln_buffer *buf;
    assert_kiln_ok(kiln_buffer_create(ctx, N * 4, 0, &buf));
    cl_uint seed = 0x5eedu;
    assert_int_equal(clSetKernelArg(k1, 0, sizeof(cl_mem), &buf->cl), CL_SUCCESS);
    assert_int_equal(clSetKernelArg(k1, 1, sizeof seed, &seed), CL_SUCCESS);
    size_t global = N, local = 64;
    assert_int_equal(clEnqueueNDRangeKernel(queue->cl, k1, 1, NULL, &global,
                                            &local, 0, NULL, NULL),
                     CL_SUCCESS);
    uint32_t out[N];
    assert_kiln_ok(
        kiln_buffer_read_sync(queue, &(kiln_range){buf, 0, N, KILN_U32}, out));
    for (uint32_t i = 0; i < N; i++)
      assert_int_equal(out[i], (i * 2654435761u) ^ seed);
    assert_kiln_ok(kiln_buffer_destroy(buf));
    assert_kiln_ok(kiln_queue_destroy(queue2));
    kiln_test_close(ctx, queue);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_kernel_source),
      cmocka_unit_test(test_one_build_for_many_threads),
      cmocka_unit_test(test_errors_and_retry),
      cmocka_unit_test(test_queue_kernels),
  };
  return KILN_TEST_RUN("memo", tests, true);
}
