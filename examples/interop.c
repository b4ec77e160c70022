/* interop.c: kiln and raw OpenCL in one program (kiln/kiln_cl.h).
 *
 * kiln hands out the OpenCL objects behind its own, so code written
 * against OpenCL keeps working beside kiln: here a cl_mem created with
 * clCreateBuffer on kiln's context is wrapped as a kiln_buffer, filled by
 * kiln's axpy op, then read back with clEnqueueReadBuffer on kiln's queue.
 * kiln never releases what it did not create: the wrapped buffer keeps its
 * own reference, and the caller still releases its cl_mem.
 *
 * Build: cc interop.c $(pkg-config --cflags --libs kiln OpenCL) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <kiln/kiln.h>
#include <kiln/kiln_cl.h>

#include "log_stderr.h"

enum { N = 4096 };

int main(int argc, char **argv) {
  log_to_stderr(); /* kiln never prints: its log on stderr */
  /* --help; anything else is a usage error (exit 2). The device comes
   * from KILN_DEVICE. */
  if (argc > 1) {
    const int help = !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h");
    if (!help)
      fprintf(stderr, "interop: unknown argument '%s'\n", argv[1]);
    fprintf(help ? stdout : stderr,
            "usage: interop\n"
            "Wrap a raw OpenCL buffer, fill it with kiln's axpy, read it with OpenCL.\n"
            "options:\n"
            "  -h, --help   this help\n"
            "environment: KILN_DEVICE, the device selector (default: a GPU,\n"
            "else the CPU)\n");
    return help ? 0 : 2;
  }

  static float x[N], y[N];
  for (size_t i = 0; i < N; i++) {
    x[i] = (float)i;
    y[i] = 1.0f;
  }
  kiln_context *ctx = NULL;
  kiln_queue *q = NULL;
  kiln_buffer *kx = NULL, *ky = NULL;
  cl_mem raw = NULL;
  int rc = EXIT_FAILURE;
  if (kiln_context_create_default(NULL, &ctx) != KILN_OK ||
      kiln_queue_create(ctx, 0, &q) != KILN_OK ||
      kiln_buffer_create(ctx, sizeof x, KILN_MEM_READ_ONLY, &kx) != KILN_OK ||
      kiln_buffer_write_sync(q, x, &(kiln_range){kx, 0, N, KILN_F32}) !=
          KILN_OK)
    goto fail;

  /* The raw handles. They are borrowed: valid while the kiln objects live. */
  cl_context cl_ctx = kiln_context_get_cl_context(ctx);
  cl_command_queue cl_q = kiln_queue_get_cl_queue(q);
  char name[256] = "";
  cl_device_id dev = NULL;
  if (clGetCommandQueueInfo(cl_q, CL_QUEUE_DEVICE, sizeof dev, &dev, NULL) != CL_SUCCESS ||
      clGetDeviceInfo(dev, CL_DEVICE_NAME, sizeof name, name, NULL) != CL_SUCCESS) {
    fprintf(stderr, "interop: OpenCL queries on kiln's queue failed\n");
    goto done;
  }

  /* A buffer made by plain OpenCL, initialised by it, then wrapped. */
  cl_int err = CL_SUCCESS;
  raw = clCreateBuffer(cl_ctx, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR,
                       sizeof y, y, &err);
  if (err != CL_SUCCESS) {
    fprintf(stderr, "interop: clCreateBuffer failed: %s\n", kiln_cl_error_name(err));
    goto done;
  }
  if (kiln_buffer_wrap_cl(ctx, raw, &ky) != KILN_OK ||
      /* y = 2 x + y, by kiln, on the wrapped buffer. */
      kiln_axpy(q, &(kiln_range){kx, 0, N, KILN_F32},
                &(kiln_range){ky, 0, N, KILN_F32}, 2.0f, 0, NULL,
                NULL) != KILN_OK)
    goto fail;
  if (kiln_buffer_get_cl_mem(ky) != raw) {
    fprintf(stderr, "interop: the wrapped buffer is not the cl_mem given\n");
    goto done;
  }

  /* Back to OpenCL: kiln's queue is in order, so a blocking read enqueued
   * on it after the op sees the op's result. */
  err = clEnqueueReadBuffer(cl_q, raw, CL_TRUE, 0, sizeof y, y, 0, NULL, NULL);
  if (err != CL_SUCCESS) {
    fprintf(stderr, "interop: clEnqueueReadBuffer failed: %s\n", kiln_cl_error_name(err));
    goto done;
  }
  for (size_t i = 0; i < N; i++)
    if (y[i] != 2.0f * (float)i + 1.0f) {
      fprintf(stderr, "interop: y[%zu] = %g, expected %g\n", i, y[i],
              2.0f * (float)i + 1.0f);
      goto done;
    }
  printf("interop: kiln's axpy on a cl_mem, read back by OpenCL on %s: correct\n", name);
  rc = EXIT_SUCCESS;
  goto done;
fail:
  fprintf(stderr, "interop: %s\n", kiln_last_error());
done:
  kiln_buffer_destroy(ky);    /* drops kiln's reference to raw ... */
  if (raw != NULL)
    clReleaseMemObject(raw);  /* ... and this is ours */
  kiln_buffer_destroy(kx);
  kiln_queue_destroy(q);
  if (kiln_context_destroy(ctx) != KILN_OK)
    rc = EXIT_FAILURE;
  return rc;
}
