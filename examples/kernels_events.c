/* kernels_events.c: your own OpenCL kernels on two queues, ordered by
 * events instead of waiting on the host.
 *
 * Queue A uploads x and runs `scale` (y = a * x); queue B, without the host
 * waiting in between, runs `offset` (z = y + b) once A's kernel is done, by
 * passing A's event in B's wait list. Only the final read blocks.
 *
 * Build: cc kernels_events.c $(pkg-config --cflags --libs kiln) */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <kiln/kiln.h>

#include "log_stderr.h"

static const char *source =
    "__kernel void scale(__global const float *x, __global float *y, float a) {\n"
    "  size_t i = get_global_id(0);\n"
    "  y[i] = a * x[i];\n"
    "}\n"
    "__kernel void offset(__global const float *y, __global float *z, float b) {\n"
    "  size_t i = get_global_id(0);\n"
    "  z[i] = y[i] + b;\n"
    "}\n";

enum { N = 1 << 16 };

int main(int argc, char **argv) {
  log_to_stderr(); /* kiln never prints: its log on stderr */
  /* --help; anything else is a usage error (exit 2). The device comes
   * from KILN_DEVICE. */
  if (argc > 1) {
    const int help = !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h");
    if (!help)
      fprintf(stderr, "kernels_events: unknown argument '%s'\n", argv[1]);
    fprintf(help ? stdout : stderr,
            "usage: kernels_events\n"
            "Run two kernels on two queues ordered by an event; check the result.\n"
            "options:\n"
            "  -h, --help   this help\n"
            "environment: KILN_DEVICE, the device selector (default: a GPU,\n"
            "else the CPU)\n");
    return help ? 0 : 2;
  }

  static float x[N], z[N];
  for (size_t i = 0; i < N; i++)
    x[i] = (float)i * 0.5f;
  const size_t bytes = sizeof x;
  size_t global = N;

  kiln_context *ctx = NULL;
  kiln_queue *qa = NULL, *qb = NULL;
  kiln_buffer *bx = NULL, *by = NULL, *bz = NULL;
  kiln_program *prog = NULL;
  kiln_kernel *scale = NULL, *offset = NULL;
  kiln_event *uploaded = NULL, *scaled = NULL, *offsetted = NULL;
  int rc = EXIT_FAILURE;

  /* Queues of one context share its buffers. A queue is used by one thread
   * at a time; two queues may run concurrently, so ordering across them is
   * up to events. KILN_QUEUE_PROFILING lets us ask for device timestamps. */
  if (kiln_context_create_default(NULL, &ctx) != KILN_OK ||
      kiln_queue_create(ctx, KILN_QUEUE_PROFILING, &qa) != KILN_OK ||
      kiln_queue_create(ctx, KILN_QUEUE_PROFILING, &qb) != KILN_OK ||
      kiln_buffer_create(ctx, bytes, KILN_MEM_READ_ONLY, &bx) != KILN_OK ||
      kiln_buffer_create(ctx, bytes, KILN_MEM_READ_WRITE, &by) != KILN_OK ||
      kiln_buffer_create(ctx, bytes, KILN_MEM_WRITE_ONLY, &bz) != KILN_OK)
    goto fail;

  /* Built once per device and options; later runs load the binary from
   * kiln's program cache. A build error's log is in kiln_last_error(). */
  if (kiln_program_create_built(ctx, source, NULL, &prog) != KILN_OK ||
      kiln_kernel_create(prog, "scale", &scale) != KILN_OK ||
      kiln_kernel_create(prog, "offset", &offset) != KILN_OK ||
      kiln_kernel_set_arg_buffer(scale, 0, bx) != KILN_OK ||
      kiln_kernel_set_arg_buffer(scale, 1, by) != KILN_OK ||
      kiln_kernel_set_arg_f32(scale, 2, 3.0f) != KILN_OK ||
      kiln_kernel_set_arg_buffer(offset, 0, by) != KILN_OK ||
      kiln_kernel_set_arg_buffer(offset, 1, bz) != KILN_OK ||
      kiln_kernel_set_arg_f32(offset, 2, 1.0f) != KILN_OK)
    goto fail;

  /* Queue A: upload (asynchronous: x must stay unchanged until `uploaded`
   * completes), then scale after it. */
  if (kiln_buffer_write(qa, x, &(kiln_range){bx, 0, N, KILN_F32}, 0, NULL,
                        &uploaded) != KILN_OK ||
      kiln_kernel_launch(qa, scale, 1, &global, NULL, 1, &uploaded, &scaled) !=
          KILN_OK ||
      kiln_queue_flush(qa) != KILN_OK)
    goto fail;
  /* Queue B: offset waits for A's scale, then the blocking read. */
  if (kiln_kernel_launch(qb, offset, 1, &global, NULL, 1, &scaled,
                         &offsetted) != KILN_OK ||
      kiln_buffer_read(qb, &(kiln_range){bz, 0, N, KILN_F32}, z, 1, &offsetted,
                       NULL) != KILN_OK ||
      kiln_queue_finish(qb) != KILN_OK)
    goto fail;

  /* An event reports a command that failed on the device; waiting on both
   * also makes sure A's work is complete before we look at timings. */
  kiln_event *both[] = {scaled, offsetted};
  if (kiln_event_wait_all(2, both) != KILN_OK)
    goto fail;
  uint64_t s0, s1, o0, o1;
  if (kiln_event_get_profiling(scaled, &s0, &s1) != KILN_OK ||
      kiln_event_get_profiling(offsetted, &o0, &o1) != KILN_OK)
    goto fail;
  printf("%s: scale %.3f ms, offset %.3f ms on the device\n",
         kiln_context_get_device_info(ctx)->name, (double)(s1 - s0) * 1e-6,
         (double)(o1 - o0) * 1e-6);

  /* Check every element against the host: z = 3 x + 1. */
  for (size_t i = 0; i < N; i++) {
    float want = 3.0f * x[i] + 1.0f;
    if (fabsf(z[i] - want) > 1e-6f * fabsf(want)) {
      fprintf(stderr, "kernels_events: z[%zu] = %g, expected %g\n", i, z[i], want);
      goto done;
    }
  }
  printf("kernels_events: %d elements correct\n", N);
  rc = EXIT_SUCCESS;
  goto done;
fail:
  fprintf(stderr, "kernels_events: %s\n", kiln_last_error());
done:
  /* Events are reference counted (producer and waiters share them); every
   * other object is destroyed, children before the context. */
  kiln_event_release(uploaded);
  kiln_event_release(scaled);
  kiln_event_release(offsetted);
  kiln_kernel_destroy(scale);
  kiln_kernel_destroy(offset);
  kiln_program_destroy(prog);
  kiln_buffer_destroy(bx);
  kiln_buffer_destroy(by);
  kiln_buffer_destroy(bz);
  kiln_queue_destroy(qa);
  kiln_queue_destroy(qb);
  if (kiln_context_destroy(ctx) != KILN_OK)
    rc = EXIT_FAILURE;
  return rc;
}
