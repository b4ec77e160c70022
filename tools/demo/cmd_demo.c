/* `kiln demo`: the smallest end-to-end proof that kiln works on a device.
 * It builds and runs a user kernel (saxpy over a million floats), then a few
 * ops of the op library (a sum and a small GEMM), checks every result against
 * the host, and prints the device, the build and run times and PASS/FAIL. */
#include "cli/cli.h"
#include "commands.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "demo.h"
#include "kiln/kiln.h"

static const char saxpy_source[] =
    "__kernel void saxpy(const uint n, const float a,\n"
    "                    __global const float *x, __global float *y) {\n"
    "  size_t i = get_global_id(0);\n"
    "  if (i < n)\n"
    "    y[i] = fma(a, x[i], y[i]);\n"
    "}\n";

#define DEFAULT_N (1u << 20)

static void usage(FILE *out) {
  fputs("usage: kiln demo [--device SEL] [--size N]\n"
        "\n"
        "Build and run a saxpy kernel over N floats (default 1048576), then a\n"
        "sum and a small GEMM from kiln's op library, on one device; check\n"
        "every result against the host and print the device, the build and\n"
        "run times and PASS or FAIL.\n"
        "\n"
        "options:\n"
        "  -d, --device SEL   device selector (as KILN_DEVICE: gpu, cpu, pocl,\n"
        "                     0:1, name:TEXT, ...); default KILN_DEVICE, else\n"
        "                     a GPU if there is one, else the first CPU device\n"
        "  -s, --size N       saxpy length, in floats (1 to 268435456)\n"
        "      --wide         do not fit lines to the terminal's width (or to\n"
        "                     80 columns when not a terminal)\n"
        "  -h, --help         this help\n"
        "\n"
        "exit status: 0 when every check passes, 1 otherwise (no usable\n"
        "device included), 2 on a usage error (a selector that does not\n"
        "parse included).\n",
        out);
}

/* Print the failing call and kiln's message; always returns false. */
static bool fail_call(const char *what) {
  printf("  %s failed: %s\n", what, kiln_last_error());
  return false;
}

static bool run_saxpy(kiln_context *ctx, kiln_queue *queue, size_t n) {
  bool ok = false;
  float *x = malloc(n * sizeof(float)), *y = malloc(n * sizeof(float));
  float *out = malloc(n * sizeof(float));
  kiln_buffer *bx = NULL, *by = NULL;
  kiln_program *prog = NULL;
  kiln_kernel *kern = NULL;
  kiln_event *ev = NULL;
  const float a = 2.5f;
  if (x == NULL || y == NULL || out == NULL) {
    printf("  out of host memory for %zu elements\n", n);
    goto done;
  }
  for (size_t i = 0; i < n; i++) {
    x[i] = (float)(i % 1000) * 0.001f;
    y[i] = (float)(i % 7) - 3.0f;
  }
  double t0 = (1e3 * tools_now());
  if (kiln_program_create_built(ctx, saxpy_source, NULL, &prog) != KILN_OK) {
    fail_call("building the saxpy kernel");
    goto done;
  }
  double build_ms = (1e3 * tools_now()) - t0;
  if (kiln_kernel_create(prog, "saxpy", &kern) != KILN_OK) {
    fail_call("kiln_kernel_create");
    goto done;
  }
  if (kiln_buffer_create(ctx, n * sizeof(float), KILN_MEM_READ_ONLY, &bx) != KILN_OK ||
      kiln_buffer_create(ctx, n * sizeof(float), KILN_MEM_READ_WRITE, &by) != KILN_OK) {
    fail_call("kiln_buffer_create");
    goto done;
  }
  double t1 = (1e3 * tools_now());
  if (kiln_buffer_write_sync(queue, x, &(kiln_range){bx, 0, n, KILN_F32}) != KILN_OK ||
      kiln_buffer_write_sync(queue, y, &(kiln_range){by, 0, n, KILN_F32}) != KILN_OK) {
    fail_call("kiln_buffer_write_sync");
    goto done;
  }
  if (kiln_kernel_set_arg_u32(kern, 0, (uint32_t)n) != KILN_OK ||
      kiln_kernel_set_arg_f32(kern, 1, a) != KILN_OK ||
      kiln_kernel_set_arg_buffer(kern, 2, bx) != KILN_OK ||
      kiln_kernel_set_arg_buffer(kern, 3, by) != KILN_OK) {
    fail_call("setting the kernel arguments");
    goto done;
  }
  double t2 = (1e3 * tools_now());
  size_t global = n;
  if (kiln_kernel_launch(queue, kern, 1, &global, NULL, 0, NULL, &ev) != KILN_OK ||
      kiln_event_wait(ev) != KILN_OK) {
    fail_call("running saxpy");
    goto done;
  }
  double run_ms = (1e3 * tools_now()) - t2;
  uint64_t start = 0, end = 0;
  bool profiled = kiln_event_get_profiling(ev, &start, &end) == KILN_OK && end > start;
  if (kiln_buffer_read_sync(queue, &(kiln_range){by, 0, n, KILN_F32}, out) != KILN_OK) {
    fail_call("kiln_buffer_read_sync");
    goto done;
  }
  double total_ms = (1e3 * tools_now()) - t1;
  size_t bad = 0, first_bad = 0;
  for (size_t i = 0; i < n; i++) {
    /* The kernel and fmaf both round once: results must be identical. */
    float want = fmaf(a, x[i], y[i]);
    if (out[i] != want && bad++ == 0)
      first_bad = i;
  }
  char line[512];
  int len = snprintf(line, sizeof line, "  saxpy, %zu floats: build %.1f ms%s, "
                     "kernel %.2f ms", n, build_ms,
                     kiln_program_is_from_cache(prog) ? " (from kiln's cache)" : "",
                     run_ms);
  if (profiled)
    len += snprintf(line + len, sizeof line - (size_t)len,
                    " (device %.2f ms, %.1f GB/s)", (double)(end - start) / 1e6,
                    3.0 * (double)n * sizeof(float) / (double)(end - start));
  snprintf(line + len, sizeof line - (size_t)len, ", with transfers %.1f ms",
           total_ms);
  cli_wrap(stdout, line, 0, 4, cli_width());
  if (bad > 0) {
    printf("  saxpy: %zu wrong elements; first at %zu: %.9g, expected %.9g\n",
           bad, first_bad, (double)out[first_bad],
           (double)fmaf(a, x[first_bad], y[first_bad]));
    goto done;
  }
  ok = true;
done:
  kiln_event_release(ev);
  kiln_kernel_destroy(kern);
  kiln_program_destroy(prog);
  kiln_buffer_destroy(bx);
  kiln_buffer_destroy(by);
  free(x);
  free(y);
  free(out);
  return ok;
}

int kiln_cmd_demo(int argc, char **argv) {
  static const struct option longopts[] = {
      {"device", required_argument, NULL, 'd'},
      {"size", required_argument, NULL, 's'},
      {"help", no_argument, NULL, 'h'},
      {NULL, 0, NULL, 0}};
  const char *selector = NULL;
  size_t n = DEFAULT_N;
  cli args;
  /* -n: --size's old short name. */
  cli_begin(&args, "kiln demo", argc, argv, "d:s:n:h", longopts);
  for (int c; (c = cli_next(&args)) != -1;) {
    switch (c) {
    case 'd':
      selector = optarg;
      break;
    case 'n':
    case 's': {
      char *end = NULL;
      unsigned long long v = strtoull(optarg, &end, 10);
      if (end == optarg || *end != '\0' || v == 0 || v > (1ull << 28) ||
          optarg[0] == '-')
        return cli_usage_error("kiln demo", "--size wants a number of floats "
                               "from 1 to 268435456, not '%s'", optarg);
      n = (size_t)v;
      break;
    }
    case 'h':
      usage(stdout);
      return CLI_OK;
    default:
      return CLI_USAGE;
    }
  }
  if (cli_no_operands(&args) != CLI_OK)
    return CLI_USAGE;

  int rc = 1;
  kiln_device_list *list = NULL;
  kiln_context *ctx = NULL;
  kiln_queue *queue = NULL;
  const kiln_device *dev = NULL;
  rc = cli_select_device("kiln demo", selector, &list, &dev);
  if (rc != CLI_OK)
    goto done;
  rc = CLI_FAILURE;
  const kiln_device_info *info = kiln_device_get_info(dev);
  if (kiln_context_create(dev, NULL, &ctx) != KILN_OK ||
      kiln_queue_create(ctx, KILN_QUEUE_PROFILING, &queue) != KILN_OK) {
    fprintf(stderr, "kiln demo: %s\n", kiln_last_error());
    goto done;
  }
  printf("kiln %s demo\n", kiln_version());
  char line[1024];
  snprintf(line, sizeof line, "device %zu:%zu: %s (%s, %s), profile %s, id %s",
           info->platform_index, info->device_index, info->name,
           info->platform_name, kiln_device_type_name(info->type),
           kiln_context_get_profile(ctx), info->stable_id);
  cli_wrap(stdout, line, 0, 2, cli_width());
  bool pass = run_saxpy(ctx, queue, n);
  pass = kiln_demo_ops(ctx, queue) && pass;
  printf("%s\n", pass ? "PASS" : "FAIL");
  rc = pass ? 0 : 1;
done:
  if (kiln_queue_destroy(queue) != KILN_OK ||
      kiln_context_destroy(ctx) != KILN_OK) {
    fprintf(stderr, "kiln demo: cleanup failed: %s\n", kiln_last_error());
    rc = 1;
  }
  kiln_device_list_destroy(list);
  return rc;
}
