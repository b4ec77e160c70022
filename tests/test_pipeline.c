/* The double-buffered pipeline: every batch's result lands in its place,
 * for batch counts 1, 2 and odd ones, with a transfer queue given or made;
 * bad inputs refused. */
#include <stdlib.h>
#include <string.h>

#include "harness.h"

struct job {
  size_t n;
  size_t calls;
};

/* y = 2 * x + batch, through two ops (a copy would hide ordering bugs less
 * well than a computation that reads its input twice). */
static kiln_status work(void *user, kiln_queue *queue, size_t batch,
                        kiln_buffer *in, kiln_buffer *out, size_t num_wait,
                        kiln_event *const *wait_list, kiln_event **out_event) {
  struct job *j = user;
  j->calls++;
  float b = (float)batch;
  kiln_status s = kiln_fill(queue, range_of(out, 0, j->n, KILN_F32), &b,
                            num_wait, wait_list, NULL);
  if (s == KILN_OK)
    s = kiln_axpy(queue, range_of(in, 0, j->n, KILN_F32),
                  range_of(out, 0, j->n, KILN_F32), 2.0f, 0, NULL, out_event);
  return s;
}

static kiln_status no_event(void *user, kiln_queue *queue, size_t batch,
                            kiln_buffer *in, kiln_buffer *out, size_t num_wait,
                            kiln_event *const *wait_list,
                            kiln_event **out_event) {
  (void)user, (void)queue, (void)batch, (void)in, (void)out, (void)num_wait;
  (void)wait_list, (void)out_event;
  return KILN_OK;
}

static void test_results(void **state) {
  (void)state;
  static const size_t batches[] = {1, 2, 7, 16};
  enum { N = 5003 };
  FOR_EACH_TEST_DEVICE(d) {
    kiln_context *ctx;
    kiln_queue *queue, *transfer;
    kiln_test_open(d, &ctx, &queue);
    assert_kiln_ok(kiln_queue_create(ctx, 0, &transfer));
    for (size_t k = 0; k < sizeof batches / sizeof batches[0]; k++) {
      size_t nb = batches[k];
      float *in = malloc(nb * N * sizeof *in);
      float *out = malloc(nb * N * sizeof *out);
      assert_non_null(in);
      assert_non_null(out);
      kiln_test_fill_random(in, nb * N, -4.0f, 4.0f, (uint32_t)k + 1);
      memset(out, 0, nb * N * sizeof *out);
      struct job j = {N, 0};
      /* After a wait list of one marker; the out event is complete on
       * return. */
      kiln_event *gate = NULL, *done = NULL;
      kiln_event_state done_state = KILN_EVENT_QUEUED;
      assert_kiln_ok(kiln_queue_marker(queue, 0, NULL, &gate));
      assert_kiln_ok(kiln_pipeline_run(queue, k % 2 ? transfer : NULL, nb,
                                       N * sizeof(float), N * sizeof(float), in,
                                       out, work, &j, 1, &gate, &done));
      assert_kiln_ok(kiln_event_get_state(done, &done_state));
      assert_int_equal(done_state, KILN_EVENT_COMPLETE);
      kiln_event_release(gate);
      kiln_event_release(done);
      assert_int_equal(j.calls, nb);
      for (size_t i = 0; i < nb * N; i++)
        assert_true(out[i] == 2.0f * in[i] + (float)(i / N));
      free(in);
      free(out);
    }
    assert_kiln_ok(kiln_queue_destroy(transfer));
    kiln_test_close(ctx, queue);
  }
}

static void test_bad_inputs(void **state) {
  (void)state;
  kiln_context *ctx;
  kiln_queue *queue;
  kiln_test_open(0, &ctx, &queue);
  float in[8] = {0}, out[8];
  struct job j = {2, 0};
  assert_kiln_status(
      kiln_pipeline_run(NULL, NULL, 4, 8, 8, in, out, work, &j, 0, NULL, NULL),
      KILN_ERR_NULL_POINTER);
  assert_last_error_contains("kiln_pipeline_run: compute is NULL");
  assert_kiln_status(
      kiln_pipeline_run(queue, NULL, 4, 8, 8, in, out, NULL, &j, 0, NULL, NULL),
      KILN_ERR_NULL_POINTER);
  assert_kiln_status(kiln_pipeline_run(queue, queue, 4, 8, 8, in, out, work, &j,
                                       0, NULL, NULL),
                     KILN_ERR_INVALID_ARGUMENT);
  assert_kiln_status(
      kiln_pipeline_run(queue, NULL, 4, 0, 8, in, out, work, &j, 0, NULL, NULL),
      KILN_ERR_INVALID_SIZE);
  assert_kiln_status(kiln_pipeline_run(queue, NULL, SIZE_MAX, 8, 8, in, out,
                                       work, &j, 0, NULL, NULL),
                     KILN_ERR_INVALID_SIZE);
  assert_kiln_status(kiln_pipeline_run(queue, NULL, 4, 8, 8, NULL, out, work,
                                       &j, 0, NULL, NULL),
                     KILN_ERR_NULL_POINTER);
  assert_last_error_contains("host_in is NULL");
  kiln_context *other;
  kiln_queue *foreign;
  kiln_test_open(0, &other, &foreign);
  assert_kiln_status(kiln_pipeline_run(queue, foreign, 4, 8, 8, in, out, work,
                                       &j, 0, NULL, NULL),
                     KILN_ERR_WRONG_CONTEXT);
  kiln_test_close(other, foreign);
  assert_int_equal(j.calls, 0);
  /* A function that gives no event is refused, and what ran is finished. */
  assert_kiln_status(kiln_pipeline_run(queue, NULL, 4, 8, 8, in, out, no_event,
                                       NULL, 0, NULL, NULL),
                     KILN_ERR_INVALID_ARGUMENT);
  assert_last_error_contains("without an out_event");
  /* num_batches 0 does nothing. */
  assert_kiln_ok(kiln_pipeline_run(queue, NULL, 0, 8, 8, NULL, NULL, work, &j,
                                   0, NULL, NULL));
  assert_int_equal(j.calls, 0);
  kiln_test_close(ctx, queue);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_bad_inputs),
      cmocka_unit_test(test_results),
  };
  return KILN_TEST_RUN("pipeline", tests, true);
}
