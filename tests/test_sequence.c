/* Recorded sequences: replays give what the same launches give run one by
 * one, with changed arguments too, through command buffers (PoCL) and the
 * prepared list (everywhere); bad input and misuse refused, buffers used by
 * a recording kept alive. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

static const char source[] =
    "__kernel void axpb(__global float *y, __global const float *x, float a,"
    "                   float b) {\n"
    "  size_t i = get_global_id(0);\n"
    "  y[i] = y[i] * 0.5f + a * x[i] + b;\n"
    "}\n";

enum { N = 4096 };

struct rig {
  kiln_context *ctx;
  kiln_queue *queue;
  kiln_program *program;
  kiln_kernel *kernel;
  kiln_buffer *x, *x2, *y, *t;
};

static struct rig open_rig(size_t d) {
  struct rig r;
  kiln_test_open(d, &r.ctx, &r.queue);
  assert_kiln_ok(kiln_program_create_built(r.ctx, source, "", &r.program));
  assert_kiln_ok(kiln_kernel_create(r.program, "axpb", &r.kernel));
  kiln_buffer **bufs[] = {&r.x, &r.x2, &r.y, &r.t};
  for (int i = 0; i < 4; i++)
    assert_kiln_ok(kiln_buffer_create(r.ctx, N * sizeof(float), 0, bufs[i]));
  return r;
}

static void close_rig(struct rig r) {
  assert_kiln_ok(kiln_buffer_destroy(r.x));
  assert_kiln_ok(kiln_buffer_destroy(r.x2));
  assert_kiln_ok(kiln_buffer_destroy(r.y));
  assert_kiln_ok(kiln_buffer_destroy(r.t));
  assert_kiln_ok(kiln_kernel_destroy(r.kernel));
  assert_kiln_ok(kiln_program_destroy(r.program));
  kiln_test_close(r.ctx, r.queue);
}

static void upload(struct rig *r, uint32_t seed) {
  static float h[N];
  kiln_test_fill_random(h, N, -1.0f, 1.0f, seed);
  assert_kiln_ok(
      kiln_buffer_write_sync(r->queue, h, &(kiln_range){r->x, 0, N, KILN_F32}));
  kiln_test_fill_random(h, N, -2.0f, 2.0f, seed + 1);
  assert_kiln_ok(kiln_buffer_write_sync(r->queue, h,
                                        &(kiln_range){r->x2, 0, N, KILN_F32}));
  kiln_test_fill_random(h, N, 0.0f, 1.0f, seed + 2);
  assert_kiln_ok(
      kiln_buffer_write_sync(r->queue, h, &(kiln_range){r->y, 0, N, KILN_F32}));
}

/* One step, launched or recorded: a user kernel between two ops, each
 * reading what the one before wrote. */
static void step(struct rig *r, const kiln_buffer *x, float a) {
  assert_kiln_ok(kiln_kernel_set_arg_buffer(r->kernel, 0, r->y));
  assert_kiln_ok(kiln_kernel_set_arg_buffer(r->kernel, 1, x));
  assert_kiln_ok(kiln_kernel_set_arg_f32(r->kernel, 2, a));
  assert_kiln_ok(kiln_kernel_set_arg_f32(r->kernel, 3, 0.25f));
  size_t global = N, local = 32; /* rusticl allows at most 32 here */
  assert_kiln_ok(kiln_axpy(r->queue, range_of(r->x, 0, N, KILN_F32),
                           range_of(r->y, 0, N, KILN_F32), 0.5f, 0, NULL,
                           NULL));
  assert_kiln_ok(kiln_kernel_launch(r->queue, r->kernel, 1, &global, &local, 0,
                                    NULL, NULL));
  assert_kiln_ok(kiln_unary(r->queue, KILN_UNARY_ABS,
                            range_of(r->y, 0, N, KILN_F32),
                            range_of(r->t, 0, N, KILN_F32), 0, NULL, NULL));
  assert_kiln_ok(kiln_binary(r->queue, KILN_BINARY_MUL,
                             range_of(r->t, 0, N, KILN_F32),
                             range_of(r->x, 0, N, KILN_F32),
                             range_of(r->y, 0, N, KILN_F32), 0, NULL, NULL));
}

static void read_y(struct rig *r, float *out) {
  assert_kiln_ok(kiln_buffer_read_sync(
      r->queue, &(kiln_range){r->y, 0, N, KILN_F32}, out));
}

static void check_replay(size_t d, unsigned flags) {
  static float want[N], got[N];
  struct rig r = open_rig(d);
  /* Direct: three steps with a = 1, then two with x2 and a = -3. */
  upload(&r, 11);
  for (int i = 0; i < 3; i++)
    step(&r, r.x, 1.0f);
  for (int i = 0; i < 2; i++)
    step(&r, r.x2, -3.0f);
  read_y(&r, want);

  upload(&r, 11);
  kiln_sequence *seq;
  assert_kiln_ok(kiln_sequence_begin(r.queue, flags, &seq));
  size_t user_launch = 0;
  assert_kiln_ok(kiln_axpy(r.queue, range_of(r.x, 0, N, KILN_F32),
                           range_of(r.y, 0, N, KILN_F32), 0.5f, 0, NULL, NULL));
  user_launch = kiln_sequence_get_launch_count(seq);
  /* Record from step() minus its first op, which is recorded above so that
   * the user launch's number is known. */
  assert_kiln_ok(kiln_kernel_set_arg_buffer(r.kernel, 0, r.y));
  assert_kiln_ok(kiln_kernel_set_arg_buffer(r.kernel, 1, r.x));
  assert_kiln_ok(kiln_kernel_set_arg_f32(r.kernel, 2, 1.0f));
  assert_kiln_ok(kiln_kernel_set_arg_f32(r.kernel, 3, 0.25f));
  size_t global = N, local = 32; /* rusticl allows at most 32 here */
  assert_kiln_ok(kiln_kernel_launch(r.queue, r.kernel, 1, &global, &local, 0,
                                    NULL, NULL));
  assert_kiln_ok(kiln_unary(r.queue, KILN_UNARY_ABS,
                            range_of(r.y, 0, N, KILN_F32),
                            range_of(r.t, 0, N, KILN_F32), 0, NULL, NULL));
  assert_kiln_ok(kiln_binary(r.queue, KILN_BINARY_MUL,
                             range_of(r.t, 0, N, KILN_F32),
                             range_of(r.x, 0, N, KILN_F32),
                             range_of(r.y, 0, N, KILN_F32), 0, NULL, NULL));
  assert_kiln_ok(kiln_sequence_end(seq));
  assert_true(kiln_sequence_get_launch_count(seq) >= 4);
  /* Of the devices tests run on, PoCL offers command buffers and its
   * profile says they are slow (flags 0: the list); rusticl and Oclgrind
   * offer none. */
  bool pocl = strcmp(kiln_context_get_profile(r.ctx), "pocl") == 0;
  assert_int_equal(kiln_sequence_uses_command_buffer(seq),
                   pocl && flags == KILN_SEQUENCE_COMMAND_BUFFER);
  /* Changing the kernel's own arguments after recording changes nothing. */
  assert_kiln_ok(kiln_kernel_set_arg_f32(r.kernel, 2, 100.0f));

  assert_kiln_ok(kiln_sequence_replay(seq, 0, NULL, NULL));
  kiln_event *ev;
  assert_kiln_ok(kiln_sequence_replay(seq, 0, NULL, &ev));
  assert_kiln_ok(kiln_sequence_replay(seq, 1, &ev, NULL));
  kiln_event_release(ev);
  assert_kiln_ok(kiln_sequence_set_arg_buffer(seq, user_launch, 1, r.x2));
  float a = -3.0f;
  assert_kiln_ok(kiln_sequence_set_arg_scalar(seq, user_launch, 2, &a,
                                              sizeof a));
  /* The ops of the step still read x: replay as the direct run did. */
  assert_kiln_ok(kiln_sequence_replay(seq, 0, NULL, NULL));
  assert_kiln_ok(kiln_sequence_replay(seq, 0, NULL, &ev));
  assert_kiln_ok(kiln_event_wait(ev));
  kiln_event_release(ev);
  read_y(&r, got);
  for (size_t i = 0; i < N; i++)
    assert_true(fabsf(got[i] - want[i]) <= 1e-6f * (1.0f + fabsf(want[i])));

  /* The recording keeps its buffers. */
  assert_kiln_status(kiln_buffer_destroy(r.x2), KILN_ERR_BUSY);
  assert_last_error_contains("1 recorded sequence still uses this buffer");
  assert_kiln_status(kiln_context_destroy(r.ctx), KILN_ERR_BUSY);
  assert_kiln_ok(kiln_sequence_destroy(seq));
  close_rig(r);
}

static void test_replay_equals_direct(void **state) {
  (void)state;
  FOR_EACH_TEST_DEVICE(d) {
    check_replay(d, 0);
    check_replay(d, KILN_SEQUENCE_COMMAND_BUFFER);
    check_replay(d, KILN_SEQUENCE_PREPARED_LIST);
  }
}

static void test_bad_inputs(void **state) {
  (void)state;
  struct rig r = open_rig(0);
  kiln_sequence *seq = (kiln_sequence *)(uintptr_t)1;
  assert_kiln_status(kiln_sequence_begin(NULL, 0, &seq), KILN_ERR_NULL_POINTER);
  assert_null(seq);
  assert_kiln_status(kiln_sequence_begin(r.queue, 0, NULL),
                     KILN_ERR_NULL_POINTER);
  assert_kiln_status(kiln_sequence_begin(r.queue, 1u << 20, &seq),
                     KILN_ERR_INVALID_ARGUMENT);
  assert_last_error_contains("flags has unknown bits 0x100000");
  assert_kiln_status(
      kiln_sequence_begin(r.queue,
                          KILN_SEQUENCE_COMMAND_BUFFER |
                              KILN_SEQUENCE_PREPARED_LIST,
                          &seq),
      KILN_ERR_INVALID_ARGUMENT);
  assert_last_error_contains("both KILN_SEQUENCE_COMMAND_BUFFER and "
                             "KILN_SEQUENCE_PREPARED_LIST");
  assert_kiln_status(kiln_sequence_end(NULL), KILN_ERR_NULL_POINTER);
  assert_kiln_ok(kiln_sequence_destroy(NULL));
  assert_int_equal(kiln_sequence_get_launch_count(NULL), 0);
  assert_false(kiln_sequence_uses_command_buffer(NULL));
  assert_kiln_status(kiln_sequence_replay(NULL, 0, NULL, NULL),
                     KILN_ERR_NULL_POINTER);

  assert_kiln_ok(kiln_sequence_begin(r.queue, KILN_SEQUENCE_COMMAND_BUFFER,
                                     &seq));
  kiln_sequence *second;
  assert_kiln_status(kiln_sequence_begin(r.queue, 0, &second),
                     KILN_ERR_INVALID_STATE);
  assert_kiln_status(kiln_sequence_replay(seq, 0, NULL, NULL),
                     KILN_ERR_INVALID_STATE);
  /* Recording: transfers, wait lists and events are refused. */
  float h[4] = {0};
  assert_kiln_status(kiln_buffer_write(r.queue, h,
                                       &(kiln_range){r.y, 0, 4, KILN_F32}, 0,
                                       NULL, NULL),
                     KILN_ERR_INVALID_STATE);
  assert_last_error_contains("the queue is recording a sequence");
  kiln_event *ev = NULL;
  assert_kiln_status(kiln_axpy(r.queue, range_of(r.x, 0, N, KILN_F32),
                               range_of(r.y, 0, N, KILN_F32), 1.0f, 0, NULL,
                               &ev),
                     KILN_ERR_INVALID_STATE);
  assert_kiln_ok(kiln_kernel_set_arg_buffer(r.kernel, 0, r.y));
  assert_kiln_ok(kiln_kernel_set_arg_buffer(r.kernel, 1, r.x));
  assert_kiln_ok(kiln_kernel_set_arg_f32(r.kernel, 2, 1.0f));
  size_t global = N;
  assert_kiln_status(kiln_kernel_launch(r.queue, r.kernel, 1, &global, NULL, 0,
                                        NULL, NULL),
                     KILN_ERR_INVALID_STATE);
  assert_last_error_contains("argument 3 of kernel 'axpb' is not set");
  assert_kiln_ok(kiln_kernel_set_arg_f32(r.kernel, 3, 1.0f));
  assert_kiln_status(kiln_kernel_launch(r.queue, r.kernel, 1, &global, NULL, 0,
                                        NULL, &ev),
                     KILN_ERR_INVALID_STATE);
  assert_kiln_ok(kiln_axpy(r.queue, range_of(r.x, 0, N, KILN_F32),
                           range_of(r.y, 0, N, KILN_F32), 1.0f, 0, NULL, NULL));
  assert_kiln_ok(kiln_kernel_launch(r.queue, r.kernel, 1, &global, NULL, 0,
                                    NULL, NULL));
  assert_kiln_status(kiln_queue_destroy(r.queue), KILN_ERR_BUSY);
  assert_kiln_status(kiln_sequence_set_arg_scalar(seq, 1, 2, h, 4),
                     KILN_ERR_INVALID_STATE);
  assert_kiln_ok(kiln_sequence_end(seq));
  assert_kiln_status(kiln_sequence_end(seq), KILN_ERR_INVALID_STATE);

  /* Argument changes: only for user launches, checked like the kernel's. */
  assert_kiln_status(kiln_sequence_set_arg_scalar(NULL, 1, 2, h, 4),
                     KILN_ERR_NULL_POINTER);
  assert_kiln_status(kiln_sequence_set_arg_scalar(seq, 1000, 2, h, 4),
                     KILN_ERR_OUT_OF_RANGE);
  assert_kiln_status(kiln_sequence_set_arg_scalar(seq, 0, 2, h, 4),
                     KILN_ERR_INVALID_ARGUMENT);
  assert_last_error_contains("launch 0 is an op's");
  size_t user = kiln_sequence_get_launch_count(seq) - 1;
  assert_kiln_status(kiln_sequence_set_arg_scalar(seq, user, 1000, h, 4),
                     KILN_ERR_OUT_OF_RANGE);
  assert_kiln_status(kiln_sequence_set_arg_scalar(seq, user, 2, NULL, 4),
                     KILN_ERR_NULL_POINTER);
  assert_kiln_status(kiln_sequence_set_arg_scalar(seq, user, 2, h, 8),
                     KILN_ERR_INVALID_SIZE);
  assert_kiln_status(kiln_sequence_set_arg_scalar(seq, user, 0, h, 8),
                     KILN_ERR_INVALID_ARGUMENT);
  assert_kiln_status(kiln_sequence_set_arg_buffer(seq, user, 0, NULL),
                     KILN_ERR_NULL_POINTER);
  assert_kiln_status(kiln_sequence_set_arg_buffer(NULL, user, 0, r.x),
                     KILN_ERR_NULL_POINTER);
  assert_kiln_status(kiln_sequence_set_arg_buffer(seq, user, 2, r.x),
                     KILN_ERR_INVALID_ARGUMENT);
  assert_kiln_status(kiln_sequence_set_arg_buffer(seq, SIZE_MAX, 0, r.x),
                     KILN_ERR_OUT_OF_RANGE);
  assert_kiln_status(kiln_sequence_replay(seq, 2, NULL, NULL),
                     KILN_ERR_NULL_POINTER);
  assert_kiln_status(kiln_buffer_destroy(r.y), KILN_ERR_BUSY);
  assert_kiln_ok(kiln_sequence_destroy(seq));

  /* An empty sequence replays as a marker after its wait list. */
  assert_kiln_ok(kiln_sequence_begin(r.queue, 0, &seq));
  assert_kiln_ok(kiln_sequence_end(seq));
  assert_kiln_ok(kiln_sequence_replay(seq, 0, NULL, &ev));
  assert_kiln_ok(kiln_event_wait(ev));
  kiln_event_release(ev);
  /* Destroying a recording sequence ends the recording. */
  kiln_sequence *live;
  assert_kiln_ok(kiln_sequence_begin(r.queue, 0, &live));
  assert_kiln_ok(kiln_sequence_destroy(live));
  assert_kiln_ok(
      kiln_buffer_write_sync(r.queue, h, &(kiln_range){r.y, 0, 4, KILN_F32}));
  assert_kiln_ok(kiln_sequence_destroy(seq));
  close_rig(r);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_bad_inputs),
      cmocka_unit_test(test_replay_equals_direct),
  };
  return KILN_TEST_RUN("sequence", tests, true);
}
