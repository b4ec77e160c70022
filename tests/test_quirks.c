/* Driver quirks that kiln works around, shown on the drivers that have them
 * and checked to be handled everywhere. Each quirk test asserts both ways:
 * on a device whose profile records the quirk the driver must still show it
 * (so that a fixed driver makes this test say the quirk can go), and kiln's
 * behaviour must be right on every device. */
#include "harness.h"

#include <stdio.h>
#include <stdlib.h>

#include "kiln/kiln_cl.h"

static const char source[] =
    "__kernel void chain(__global uint *out, uint iters) {\n"
    "  uint i = (uint)get_global_id(0), h = i + 1u;\n"
    "  for (uint k = 0; k < iters; k++)\n"
    "    h = (h ^ (h >> 15)) * 2246822519u + k;\n"
    "  out[i] = h;\n"
    "}\n";

static uint32_t chain_ref(uint32_t i, uint32_t iters) {
  uint32_t h = i + 1u;
  for (uint32_t k = 0; k < iters; k++)
    h = (h ^ (h >> 15)) * 2246822519u + k;
  return h;
}

struct fixture {
  kiln_context *ctx;
  kiln_queue *q;
  kiln_program *program;
  kiln_kernel *kernel;
  kiln_buffer *out;
};

static void open_fixture(size_t d, struct fixture *f, size_t n) {
  kiln_test_open(d, &f->ctx, &f->q);
  assert_kiln_ok(kiln_program_create_built(f->ctx, source, NULL, &f->program));
  assert_kiln_ok(kiln_kernel_create(f->program, "chain", &f->kernel));
  assert_kiln_ok(kiln_buffer_create(f->ctx, n * 4, 0, &f->out));
  assert_kiln_ok(kiln_kernel_set_arg_buffer(f->kernel, 0, f->out));
}

static void close_fixture(struct fixture *f) {
  assert_kiln_ok(kiln_buffer_destroy(f->out));
  assert_kiln_ok(kiln_kernel_destroy(f->kernel));
  assert_kiln_ok(kiln_program_destroy(f->program));
  kiln_test_close(f->ctx, f->q);
}

static void launch(struct fixture *f, size_t n, uint32_t iters,
                   kiln_event **ev) {
  assert_kiln_ok(kiln_kernel_set_arg_u32(f->kernel, 1, iters));
  size_t global = n, local = 16;
  assert_kiln_ok(kiln_kernel_launch(f->q, f->kernel, 1, &global, &local, 0,
                                    NULL, ev));
}

/* KILN_QUIRK_FINISH_SKIPS_FLUSHED: kiln_queue_finish after kiln_queue_flush
 * waits for everything, on every device. Mesa 22.3's rusticl returns from
 * clFinish at once in this case; kiln waits on a marker there. */
static void test_finish_after_flush(void **state) {
  (void)state;
  enum { N = 1024, ITERS = 60000 };
  FOR_EACH_TEST_DEVICE(d) {
    struct fixture f;
    open_fixture(d, &f, N);
    uint32_t *host = calloc(N, 4);
    assert_non_null(host);
    kiln_event *launched, *read;
    launch(&f, N, ITERS, &launched);
    assert_kiln_ok(kiln_buffer_read(f.q, &(kiln_range){f.out, 0, N, KILN_U32},
                                    host, 0, NULL, &read));
    assert_kiln_ok(kiln_queue_flush(f.q));
    assert_kiln_ok(kiln_queue_finish(f.q));
    kiln_event_state st = KILN_EVENT_QUEUED;
    assert_kiln_ok(kiln_event_get_state(read, &st));
    assert_int_equal(st, KILN_EVENT_COMPLETE);
    for (uint32_t i = 0; i < N; i += 31)
      assert_int_equal(host[i], chain_ref(i, ITERS));

    /* The quirk itself, through the raw queue: informational only, because
     * a fast machine may finish the kernel before clFinish returns. */
    const kiln_device_info *info = kiln_context_get_device_info(f.ctx);
    cl_command_queue clq = kiln_queue_get_cl_queue(f.q);
    kiln_event *again;
    launch(&f, N, ITERS, &again);
    assert_int_equal(clFlush(clq), CL_SUCCESS);
    assert_int_equal(clFinish(clq), CL_SUCCESS);
    assert_kiln_ok(kiln_event_get_state(again, &st));
    fprintf(stderr, "# %s: after clFlush, clFinish left the launch %s "
                    "(finish-skips-flushed quirk %s)\n",
            info->name, st == KILN_EVENT_COMPLETE ? "complete" : "pending",
            info->quirks & KILN_QUIRK_FINISH_SKIPS_FLUSHED ? "recorded"
                                                           : "not recorded");
    if (st != KILN_EVENT_COMPLETE &&
        !(info->quirks & KILN_QUIRK_FINISH_SKIPS_FLUSHED))
      fail_msg("%s: clFinish returned with a flushed command pending, but "
               "its profile lacks KILN_QUIRK_FINISH_SKIPS_FLUSHED", info->name);
    assert_kiln_ok(kiln_event_wait(again));
    kiln_event_release(again);
    kiln_event_release(launched);
    kiln_event_release(read);
    free(host);
    close_fixture(&f);
  }
}

/* KILN_QUIRK_LOOP_LIMIT_65535: a loop of 65,000 iterations is right on
 * every device; one of 70,000 is cut short exactly where the profile says
 * the loop limiter acts, and nowhere else. */
static void test_loop_limit(void **state) {
  (void)state;
  enum { N = 64 };
  FOR_EACH_TEST_DEVICE(d) {
    struct fixture f;
    open_fixture(d, &f, N);
    const kiln_device_info *info = kiln_context_get_device_info(f.ctx);
    uint32_t host[N];
    launch(&f, N, 65000, NULL);
    assert_kiln_ok(
        kiln_buffer_read_sync(f.q, &(kiln_range){f.out, 0, N, KILN_U32}, host));
    for (uint32_t i = 0; i < N; i++)
      assert_int_equal(host[i], chain_ref(i, 65000));

    launch(&f, N, 70000, NULL);
    assert_kiln_ok(
        kiln_buffer_read_sync(f.q, &(kiln_range){f.out, 0, N, KILN_U32}, host));
    bool full = true;
    for (uint32_t i = 0; i < N; i++)
      full = full && host[i] == chain_ref(i, 70000);
    bool limited = info->quirks & KILN_QUIRK_LOOP_LIMIT_65535;
    fprintf(stderr, "# %s: a 70000-iteration loop %s (loop-limit-65535 "
                    "quirk %s)\n",
            info->name, full ? "ran in full" : "was cut short",
            limited ? "recorded" : "not recorded");
    if (limited && full)
      fail_msg("%s: the loop ran in full; the driver no longer limits "
               "loops, drop KILN_QUIRK_LOOP_LIMIT_65535 from its profile",
               info->name);
    if (!limited && !full)
      fail_msg("%s: a 70000-iteration loop gave wrong results but the "
               "profile lacks KILN_QUIRK_LOOP_LIMIT_65535", info->name);
    close_fixture(&f);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_finish_after_flush),
      cmocka_unit_test(test_loop_limit),
  };
  return KILN_TEST_RUN("quirks", tests, true);
}
