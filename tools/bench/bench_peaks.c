/* The device's peaks for `kiln bench`: memory bandwidth (the best of a
 * copy, a triad and an in-place scale kernel over arrays far larger than
 * any cache) and FMA
 * throughput (independent fma() chains in registers), measured once per
 * device with small kiln kernels and cached in
 * <kiln cache directory>/peaks-<stable id>.json, keyed by the stable id and
 * checked against the driver version and kiln version. */
#include "bench.h"

#include "kiln/kiln_cl.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* 2: the scale kernel joined the bandwidth figure. */
#define PEAKS_SCHEMA "kiln-peaks/2"

/* VT is a float vector of the device's preferred width (float when 1):
 * enough independent work per instruction on CPUs, plain floats on GPUs.
 * The fma kernel keeps 12 independent chains per work-item so that the
 * latency of one FMA (4-6 cycles on CPUs, a few on GPUs) never limits it. */
static const char peak_source[] =
    "#if VW == 1\n"
    "typedef float VT;\n"
    "#elif VW == 2\n"
    "typedef float2 VT;\n"
    "#elif VW == 4\n"
    "typedef float4 VT;\n"
    "#elif VW == 8\n"
    "typedef float8 VT;\n"
    "#else\n"
    "typedef float16 VT;\n"
    "#endif\n"
    "__kernel void peak_copy(__global const float4 *src,\n"
    "                        __global float4 *dst) {\n"
    "  size_t i = get_global_id(0);\n"
    "  dst[i] = src[i];\n"
    "}\n"
    "__kernel void peak_triad(__global float4 *a, __global const float4 *b,\n"
    "                         __global const float4 *c, float s) {\n"
    "  size_t i = get_global_id(0);\n"
    "  a[i] = fma((float4)s, c[i], b[i]);\n"
    "}\n"
    "__kernel void peak_scale(__global float4 *a, float s) {\n"
    "  size_t i = get_global_id(0);\n"
    "  a[i] *= s;\n"
    "}\n"
    "__kernel void peak_fma(__global float *out, float a, float b,\n"
    "                       uint iters) {\n"
    "  VT x0 = (VT)(get_global_id(0) * 1e-7f), x1 = x0 + (VT)0.01f,\n"
    "     x2 = x0 + (VT)0.02f, x3 = x0 + (VT)0.03f, x4 = x0 + (VT)0.04f,\n"
    "     x5 = x0 + (VT)0.05f, x6 = x0 + (VT)0.06f, x7 = x0 + (VT)0.07f,\n"
    "     x8 = x0 + (VT)0.08f, x9 = x0 + (VT)0.09f, x10 = x0 + (VT)0.1f,\n"
    "     x11 = x0 + (VT)0.11f;\n"
    "  for (uint i = 0; i < iters; i++) {\n"
    "    x0 = fma(x0, (VT)a, (VT)b); x1 = fma(x1, (VT)a, (VT)b);\n"
    "    x2 = fma(x2, (VT)a, (VT)b); x3 = fma(x3, (VT)a, (VT)b);\n"
    "    x4 = fma(x4, (VT)a, (VT)b); x5 = fma(x5, (VT)a, (VT)b);\n"
    "    x6 = fma(x6, (VT)a, (VT)b); x7 = fma(x7, (VT)a, (VT)b);\n"
    "    x8 = fma(x8, (VT)a, (VT)b); x9 = fma(x9, (VT)a, (VT)b);\n"
    "    x10 = fma(x10, (VT)a, (VT)b); x11 = fma(x11, (VT)a, (VT)b);\n"
    "  }\n"
    "  VT s = x0 + x1 + x2 + x3 + x4 + x5 + x6 + x7 + x8 + x9 + x10 + x11;\n"
    "  float t = 0.0f;\n"
    "  for (int i = 0; i < VW; i++)\n"
    "    t += ((float *)&s)[i];\n"
    "  out[get_global_id(0)] = t;\n"
    "}\n";

static unsigned float_width(const kiln_device_info *info) {
  unsigned w = info->vector_width_float;
  return w >= 16 ? 16 : w >= 8 ? 8 : w >= 4 ? 4 : w >= 2 ? 2 : 1;
}

/* Seconds one launch of kernel takes: the device's own timestamps when they
 * are plausible (positive, within the host's time and close to it), else
 * the host's clock around launch and wait. rusticl's timer has no useful
 * resolution, and trusting it made the calibration loops below run for
 * minutes. */
static double launch_seconds(kiln_queue *queue, kiln_kernel *kernel,
                             size_t global, size_t local) {
  kiln_event *ev = NULL;
  double t0 = tools_now();
  if (kiln_kernel_launch(queue, kernel, 1, &global, &local, 0, NULL, &ev) !=
          KILN_OK ||
      kiln_event_wait(ev) != KILN_OK) {
    kiln_event_release(ev);
    return -1.0;
  }
  double host = tools_now() - t0;
  uint64_t start = 0, end = 0;
  double t = host;
  if (kiln_event_get_profiling(ev, &start, &end) == KILN_OK && end > start) {
    double dev = 1e-9 * (double)(end - start);
    if (dev <= host && (dev >= 0.5 * host || host - dev < 50e-6))
      t = dev;
  }
  kiln_event_release(ev);
  return t;
}

/* Best of eleven launches: a peak is what the device does at best, and on
 * a shared machine a burst of load during five launches once halved the
 * FMA figure, which the cache then kept. */
static double best_of(kiln_queue *queue, kiln_kernel *kernel, size_t global,
                      size_t local) {
  double best = -1.0;
  for (int r = 0; r < 11; r++) {
    double t = launch_seconds(queue, kernel, global, local);
    if (t < 0)
      return -1.0;
    if (best < 0 || t < best)
      best = t;
  }
  return best;
}

/* The longest chain of the fma kernel: llvmpipe's loop limit. */
#define FMA_MAX_ITERS 65535u

/* Make the fma kernel's output buffer (argument 0) hold items floats,
 * replacing a smaller one. */
static bool fma_output(kiln_context *ctx, kiln_kernel *fmak, kiln_buffer **o,
                       size_t items) {
  if (*o != NULL && kiln_buffer_get_size(*o) >= items * 4)
    return true;
  kiln_buffer_destroy(*o);
  *o = NULL;
  return kiln_buffer_create(ctx, items * 4, 0, o) == KILN_OK &&
         kiln_kernel_set_arg_buffer(fmak, 0, *o) == KILN_OK;
}

static bool measure(kiln_context *ctx, kiln_queue *queue,
                    struct bench_peaks *out, char *err, size_t err_size) {
  const kiln_device_info *info = kiln_context_get_device_info(ctx);
  bool ok = false;
  kiln_program *prog = NULL;
  kiln_kernel *copy = NULL, *triad = NULL, *scale = NULL, *fmak = NULL;
  kiln_buffer *a = NULL, *b = NULL, *c = NULL, *o = NULL;
  unsigned w = float_width(info);
  char options[32];
  snprintf(options, sizeof options, "-DVW=%u", w);
  if (kiln_program_create_built(ctx, peak_source, options, &prog) != KILN_OK ||
      kiln_kernel_create(prog, "peak_copy", &copy) != KILN_OK ||
      kiln_kernel_create(prog, "peak_triad", &triad) != KILN_OK ||
      kiln_kernel_create(prog, "peak_scale", &scale) != KILN_OK ||
      kiln_kernel_create(prog, "peak_fma", &fmak) != KILN_OK) {
    snprintf(err, err_size, "building the peak kernels: %s", kiln_last_error());
    goto done;
  }
  /* Arrays of 64 MiB (128 MiB with 4 GiB of memory or more): far beyond
   * every cache, and long enough that launch costs vanish. */
  size_t n = info->global_mem_bytes >= ((uint64_t)4 << 30) ? (size_t)1 << 25
                                                           : (size_t)1 << 24;
  while (n * 4 > info->max_alloc_bytes || 3 * n * 4 > info->global_mem_bytes)
    n /= 2;
  size_t bytes = n * 4;
  if (kiln_buffer_create(ctx, bytes, 0, &a) != KILN_OK ||
      kiln_buffer_create(ctx, bytes, 0, &b) != KILN_OK ||
      kiln_buffer_create(ctx, bytes, 0, &c) != KILN_OK) {
    snprintf(err, err_size, "allocating 3 x %zu bytes: %s", bytes,
             kiln_last_error());
    goto done;
  }
  float one = 1.0f;
  if (kiln_buffer_fill(queue, &one, 4, &(kiln_range){a, 0, n, KILN_F32}, 0, NULL, NULL) != KILN_OK ||
      kiln_buffer_fill(queue, &one, 4, &(kiln_range){b, 0, n, KILN_F32}, 0, NULL, NULL) != KILN_OK ||
      kiln_buffer_fill(queue, &one, 4, &(kiln_range){c, 0, n, KILN_F32}, 0, NULL, NULL) != KILN_OK ||
      kiln_queue_finish(queue) != KILN_OK) {
    snprintf(err, err_size, "filling the arrays: %s", kiln_last_error());
    goto done;
  }
  /* 256 work-items, or what the device and each kernel allow (rusticl's
   * llvmpipe: 32 for these kernels). The program has one device, so the
   * query needs none named. */
  size_t local =
      info->max_work_group_size < 256 ? info->max_work_group_size : 256;
  kiln_kernel *const kernels[4] = {copy, triad, scale, fmak};
  for (int i = 0; i < 4; i++) {
    size_t kmax = 0;
    if (clGetKernelWorkGroupInfo(kiln_kernel_get_cl_kernel(kernels[i]), NULL,
                                 CL_KERNEL_WORK_GROUP_SIZE, sizeof kmax, &kmax,
                                 NULL) == CL_SUCCESS &&
        kmax > 0 && kmax < local)
      local = kmax;
  }
  size_t items = n / 4;
  if (kiln_kernel_set_arg_buffer(copy, 0, a) != KILN_OK ||
      kiln_kernel_set_arg_buffer(copy, 1, b) != KILN_OK ||
      kiln_kernel_set_arg_buffer(triad, 0, a) != KILN_OK ||
      kiln_kernel_set_arg_buffer(triad, 1, b) != KILN_OK ||
      kiln_kernel_set_arg_buffer(triad, 2, c) != KILN_OK ||
      kiln_kernel_set_arg_f32(triad, 3, 0.5f) != KILN_OK ||
      kiln_kernel_set_arg_buffer(scale, 0, c) != KILN_OK ||
      kiln_kernel_set_arg_f32(scale, 1, 1.0f) != KILN_OK) {
    snprintf(err, err_size, "setting arguments: %s", kiln_last_error());
    goto done;
  }
  /* Grow the arrays from 4 MiB until a copy takes 20 ms or the whole
   * allocation is used: fast devices get arrays far beyond their caches,
   * and slow ones (Mesa's llvmpipe) finish in seconds, not minutes. */
  size_t used = (size_t)1 << 20;
  if (used > n)
    used = n;
  double t_copy, t_triad, t_scale = -1.0;
  for (;;) {
    size_t groups = used / 4 / local;
    items = (groups ? groups : 1) * local;
    t_copy = best_of(queue, copy, items, local);
    if (t_copy <= 0 || t_copy >= 0.02 || used == n)
      break;
    used = used * 4 < n ? used * 4 : n;
  }
  t_triad = t_copy > 0 ? best_of(queue, triad, items, local) : -1.0;
  if (t_triad > 0)
    t_scale = best_of(queue, scale, items, local);
  if (t_copy <= 0 || t_triad <= 0 || t_scale <= 0) {
    snprintf(err, err_size, "running the bandwidth kernels: %s",
             kiln_last_error());
    goto done;
  }
  double moved = (double)items * 16.0; /* bytes per array */
  double gbps_copy = 2.0 * moved / t_copy * 1e-9;
  double gbps_triad = 3.0 * moved / t_triad * 1e-9;
  /* Copy and triad write arrays they never read, which costs a CPU a read
   * of each line before the write (write-allocate) that the byte count
   * leaves out; the scale reads what it writes, so it moves just the
   * bytes counted (kiln's axpy and scale do the same, and measured 30%
   * above the copy/triad figure on PoCL). */
  double gbps_scale = 2.0 * moved / t_scale * 1e-9;
  out->gbps = gbps_copy > gbps_triad ? gbps_copy : gbps_triad;
  if (gbps_scale > out->gbps)
    out->gbps = gbps_scale;

  /* FMA, in two shapes, keeping the faster: one work-item per group, 32
   * per compute unit (a CPU thread running the chains in its vector
   * registers; on PoCL 3.1 with 2 cores, 4 per core reached only 75% of
   * this), and full groups filling every compute unit many times over (GPUs,
   * and CPU drivers that vectorise across work-items, like llvmpipe, where
   * the first shape crawls). */
  const size_t cus = info->compute_units ? info->compute_units : 1;
  const size_t shapes[2][2] = {{32 * cus, 1}, {cus * local * 16, local}};
  if (kiln_kernel_set_arg_f32(fmak, 1, 0.999f) != KILN_OK ||
      kiln_kernel_set_arg_f32(fmak, 2, 0.001f) != KILN_OK) {
    snprintf(err, err_size, "preparing the fma kernel: %s", kiln_last_error());
    goto done;
  }
  out->gflops = 0.0;
  for (int sh = 0; sh < 2; sh++) {
    const size_t flocal = shapes[sh][1];
    size_t fglobal = shapes[sh][0];
    /* Grow the chain until one launch takes 20 ms, and past 65535 links
     * the number of work-items instead (doubling whole groups): Mesa's
     * llvmpipe silently stops every loop after 65535 iterations
     * (KILN_QUIRK_LOOP_LIMIT_65535), so a longer chain would count work
     * that never ran. The cap holds on every device, not only quirked
     * ones: one code path, and more work-items lengthen a launch as well
     * as a longer chain does. A shape whose shortest chain already takes
     * over a second is hopeless and is not pursued. */
    uint32_t iters = 16;
    double t_fma;
    for (;;) {
      if (!fma_output(ctx, fmak, &o, fglobal) ||
          kiln_kernel_set_arg_u32(fmak, 3, iters) != KILN_OK) {
        snprintf(err, err_size, "preparing the fma kernel: %s",
                 kiln_last_error());
        goto done;
      }
      t_fma = launch_seconds(queue, fmak, fglobal, flocal);
      if (t_fma < 0) {
        snprintf(err, err_size, "running the fma kernel: %s",
                 kiln_last_error());
        goto done;
      }
      if (t_fma >= 1.0)
        break;
      if (t_fma >= 0.02 || fglobal >= shapes[sh][0] << 12) {
        t_fma = best_of(queue, fmak, fglobal, flocal);
        break;
      }
      if (iters < FMA_MAX_ITERS)
        iters = 2 * iters < FMA_MAX_ITERS ? 2 * iters : FMA_MAX_ITERS;
      else
        fglobal *= 2;
    }
    double gflops = (double)fglobal * iters * 12.0 * w * 2.0 / t_fma * 1e-9;
    if (t_fma > 0 && gflops > out->gflops)
      out->gflops = gflops;
  }
  ok = true;
done:
  kiln_buffer_destroy(a);
  kiln_buffer_destroy(b);
  kiln_buffer_destroy(c);
  kiln_buffer_destroy(o);
  kiln_kernel_destroy(copy);
  kiln_kernel_destroy(triad);
  kiln_kernel_destroy(scale);
  kiln_kernel_destroy(fmak);
  kiln_program_destroy(prog);
  return ok;
}

/* The cache file for the device: its stable id with anything but
 * [A-Za-z0-9._-] made '_'. */
static void cache_path(const kiln_device_info *info, char *path, size_t size) {
  kiln_cache_info ci;
  path[0] = '\0';
  if (kiln_cache_get_info(&ci) != KILN_OK || !ci.enabled || !ci.usable ||
      ci.directory[0] == '\0')
    return;
  char id[256];
  size_t i = 0;
  for (const char *s = info->stable_id; *s && i + 1 < sizeof id; s++, i++) {
    char ch = *s;
    bool keep = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
                (ch >= '0' && ch <= '9') || ch == '.' || ch == '-' || ch == '_';
    id[i] = keep ? ch : '_';
  }
  id[i] = '\0';
  int w = snprintf(path, size, "%s/peaks-%s.json", ci.directory, id);
  if (w < 0 || (size_t)w >= size)
    path[0] = '\0';
}

static bool load(const char *path, const kiln_device_info *info,
                 struct bench_peaks *out) {
  json_error_t jerr;
  json_t *root = json_load_file(path, 0, &jerr);
  if (root == NULL)
    return false;
  const char *schema = json_string_value(json_object_get(root, "schema"));
  const char *id = json_string_value(json_object_get(root, "stable_id"));
  const char *driver =
      json_string_value(json_object_get(root, "driver_version"));
  const char *kv = json_string_value(json_object_get(root, "kiln_version"));
  double gbps = json_number_value(json_object_get(root, "gbps"));
  double gflops = json_number_value(json_object_get(root, "gflops"));
  /* A file from another driver or kiln version is measured again: either
   * may change what the kernels reach. */
  bool ok = schema && strcmp(schema, PEAKS_SCHEMA) == 0 && id &&
            strcmp(id, info->stable_id) == 0 && driver &&
            strcmp(driver, info->driver_version) == 0 && kv &&
            strcmp(kv, kiln_version()) == 0 && gbps > 0 && gflops > 0 &&
            isfinite(gbps) && isfinite(gflops);
  if (ok) {
    out->gbps = gbps;
    out->gflops = gflops;
  }
  json_decref(root);
  return ok;
}

/* Write through a temporary file and rename, so that a concurrent reader
 * sees the old file or the new one, never half of one. */
static void store(const char *path, const kiln_device_info *info,
                  const struct bench_peaks *p) {
  json_t *root = json_pack(
      "{s:s, s:s, s:s, s:s, s:s, s:f, s:f, s:I}", "schema", PEAKS_SCHEMA,
      "stable_id", info->stable_id, "device", info->name, "driver_version",
      info->driver_version, "kiln_version", kiln_version(), "gbps", p->gbps,
      "gflops", p->gflops, "measured_unix", (json_int_t)time(NULL));
  if (root == NULL)
    return;
  char tmp[4300];
  snprintf(tmp, sizeof tmp, "%s.%ld.tmp", path, (long)getpid());
  if (json_dump_file(root, tmp, JSON_INDENT(2)) == 0) {
    if (rename(tmp, path) != 0)
      remove(tmp);
  }
  json_decref(root);
}

bool bench_peaks_get(kiln_context *ctx, kiln_queue *queue, bool remeasure,
                     struct bench_peaks *out, char *err, size_t err_size) {
  const kiln_device_info *info = kiln_context_get_device_info(ctx);
  memset(out, 0, sizeof *out);
  cache_path(info, out->path, sizeof out->path);
  if (!remeasure && out->path[0] != '\0' && load(out->path, info, out)) {
    out->cached = true;
    return true;
  }
  if (!measure(ctx, queue, out, err, err_size))
    return false;
  if (out->path[0] != '\0')
    store(out->path, info, out);
  return true;
}
