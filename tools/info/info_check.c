/* `kiln info --check` and the doctor's build test: build and run one small
 * kernel through kiln's own program API, then one op of kiln's op library (a
 * sum) on its output, so a PASS means kiln's compiler path and its op
 * kernels (not just the driver) work on the device. */
#include "commands.h"
#include "info.h"

#include <string.h>
#include <stdlib.h>

static const char check_source[] =
    "__kernel void kiln_check(__global const float *a, __global float *b,\n"
    "                         float s) {\n"
    "  size_t i = get_global_id(0);\n"
    "  b[i] = a[i] * s + 1.0f;\n"
    "}\n";

#define CHECK_N 4096

/* Copy up to max bytes of log into out, cut at a line end where possible. */
static void excerpt(char *out, size_t out_size, const char *what,
                    const char *log) {
  size_t used = (size_t)snprintf(out, out_size, "%s", what);
  if (log == NULL || log[0] == '\0' || used + 16 >= out_size)
    return;
  size_t room = out_size - used - 1;
  const size_t max = 600;
  if (room > max)
    room = max;
  size_t len = strlen(log);
  if (len > room) {
    len = room;
    while (len > room / 2 && log[len - 1] != '\n')
      len--;
  }
  snprintf(out + used, out_size - used, "\nbuild log:\n%.*s%s", (int)len, log,
           len < strlen(log) ? "\n[...]" : "");
}

bool info_check_device(const kiln_device *device, char *detail,
                       size_t detail_size, double *elapsed_ms) {
  double t0 = (1e3 * tools_now());
  bool pass = false;
  kiln_context *ctx = NULL;
  kiln_queue *queue = NULL;
  kiln_program *prog = NULL;
  kiln_kernel *kern = NULL;
  kiln_buffer *a = NULL, *b = NULL, *sum = NULL;
  float *host = malloc(2 * CHECK_N * sizeof(float));
  const char *step = "allocating host memory";
  detail[0] = '\0';
  if (host == NULL)
    goto fail;

  step = "kiln_context_create";
  if (kiln_context_create(device, NULL, &ctx) != KILN_OK)
    goto fail;
  step = "kiln_queue_create";
  if (kiln_queue_create(ctx, 0, &queue) != KILN_OK)
    goto fail;
  step = "kiln_program_create";
  if (kiln_program_create(ctx, check_source, 0, &prog) != KILN_OK)
    goto fail;
  /* Bypass kiln's program cache: the point is to see the compiler work. */
  if (kiln_program_build(prog, NULL, KILN_BUILD_NO_CACHE) != KILN_OK) {
    excerpt(detail, detail_size, "build failed: ",
            kiln_program_get_build_log(prog));
    if (strlen(kiln_program_get_build_log(prog)) == 0)
      snprintf(detail, detail_size, "build failed: %s", kiln_last_error());
    goto done;
  }
  step = "kiln_kernel_create";
  if (kiln_kernel_create(prog, "kiln_check", &kern) != KILN_OK)
    goto fail;
  step = "kiln_buffer_create";
  if (kiln_buffer_create(ctx, CHECK_N * sizeof(float), KILN_MEM_READ_ONLY, &a) != KILN_OK ||
      kiln_buffer_create(ctx, CHECK_N * sizeof(float), KILN_MEM_READ_WRITE, &b) != KILN_OK)
    goto fail;
  for (size_t i = 0; i < CHECK_N; i++)
    host[i] = (float)(i % 251);
  step = "kiln_buffer_write_sync";
  if (kiln_buffer_write_sync(queue, host, &(kiln_range){a, 0, CHECK_N, KILN_F32}) != KILN_OK)
    goto fail;
  step = "setting kernel arguments";
  if (kiln_kernel_set_arg_buffer(kern, 0, a) != KILN_OK ||
      kiln_kernel_set_arg_buffer(kern, 1, b) != KILN_OK ||
      kiln_kernel_set_arg_f32(kern, 2, 2.0f) != KILN_OK)
    goto fail;
  step = "kiln_kernel_launch";
  size_t global = CHECK_N;
  if (kiln_kernel_launch(queue, kern, 1, &global, NULL, 0, NULL, NULL) != KILN_OK)
    goto fail;
  step = "kiln_buffer_read_sync";
  if (kiln_buffer_read_sync(queue, &(kiln_range){b, 0, CHECK_N, KILN_F32}, host + CHECK_N) != KILN_OK)
    goto fail;
  for (size_t i = 0; i < CHECK_N; i++) {
    /* Small integers times 2 plus 1 are exact in float: compare exactly. */
    float want = host[i] * 2.0f + 1.0f;
    if (host[CHECK_N + i] != want) {
      snprintf(detail, detail_size,
               "wrong result: element %zu is %g, expected %g", i,
               (double)host[CHECK_N + i], (double)want);
      goto done;
    }
  }
  /* The outputs are integers, so their f32 sum is exact in any order. */
  double want_sum = 0.0;
  for (size_t i = 0; i < CHECK_N; i++)
    want_sum += host[CHECK_N + i];
  float got_sum = 0.0f;
  step = "the sum op (kiln_reduce)";
  if (kiln_buffer_create(ctx, sizeof(float), KILN_MEM_READ_WRITE, &sum) !=
          KILN_OK ||
      kiln_reduce(
          queue, KILN_REDUCE_SUM, &(kiln_range){b, 0, CHECK_N, KILN_F32},
          &(kiln_range){sum, 0, 1, KILN_F32}, 0, NULL, NULL) != KILN_OK ||
      kiln_buffer_read_sync(queue, &(kiln_range){sum, 0, 1, KILN_F32},
                            &got_sum) != KILN_OK)
    goto fail;
  if ((double)got_sum != want_sum) {
    snprintf(detail, detail_size, "wrong result: the sum op gave %.9g, "
             "expected %.9g", (double)got_sum, want_sum);
    goto done;
  }
  pass = true;
  snprintf(detail, detail_size,
           "built and ran a %d-element kernel and the sum op", CHECK_N);
  goto done;

fail:
  snprintf(detail, detail_size, "%s failed: %s", step,
           host ? kiln_last_error() : "out of host memory");
done:
  kiln_buffer_destroy(a);
  kiln_buffer_destroy(b);
  kiln_buffer_destroy(sum);
  kiln_kernel_destroy(kern);
  kiln_program_destroy(prog);
  kiln_queue_destroy(queue);
  kiln_context_destroy(ctx);
  free(host);
  if (elapsed_ms)
    *elapsed_ms = (1e3 * tools_now()) - t0;
  return pass;
}
