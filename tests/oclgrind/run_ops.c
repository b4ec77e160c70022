/* Every public op (and the probe kernel) once, on small awkward sizes with
 * offsets into larger buffers, each result checked against a host reference.
 *
 * Written to run under Oclgrind (tests/oclgrind/run.sh: out-of-bounds,
 * uninitialised-value and data-race checks), which is about 2000 times
 * slower than PoCL, so sizes are tens to hundreds of elements (a few
 * thousand where several tiles or chunks are the point); it also runs as an
 * ordinary test on the default device. Operands sit at odd offsets in
 * buffers whose other elements hold sentinels (NaN): reading outside the
 * range spoils a result, writing outside it is caught on read-back, and
 * writing past the buffer is caught by Oclgrind.
 *
 * The device: KILN_TEST_DEVICE when set, else kiln's default selection.
 * The profile (so the kernel family): KILN_PROFILE, as for every context.
 * RUN_OPS_ONLY and RUN_OPS_SKIP (comma-separated groups: probe, unary,
 * binary, axpy, cast, reduce, reduce_large, scan, rows, transpose, gemm,
 * gemm_space, gemm_mma, spaces, train, conv, image, attention)
 * choose what
 * runs, so a run can leave out a kernel a checking tool cannot handle.
 * Exit status 0 when every check passed, 1 otherwise. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "run_ops_attention.h"
#include "run_ops_image.h"
#include "run_ops_train.h"
#include "run_ops_conv.h"
#include "run_ops_gemm.h"
#include "run_ops_util.h"
#include "tune/tune.h"

/* ---- elementwise ----------------------------------------------------------- */

static double unary_ref(kiln_unary_op op, double x) {
  switch (op) {
  case KILN_UNARY_NEG: return -x;
  case KILN_UNARY_ABS: return fabs(x);
  case KILN_UNARY_EXP: return exp(x);
  case KILN_UNARY_LOG: return log(x);
  case KILN_UNARY_SQRT: return sqrt(x);
  case KILN_UNARY_RELU: return x > 0 ? x : 0;
  case KILN_UNARY_GELU:
    return 0.5 * x * (1 + tanh(sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
  case KILN_UNARY_SIGMOID: return 1 / (1 + exp(-x));
  case KILN_UNARY_TANH: return tanh(x);
  }
  return NAN;
}

static double binary_ref(kiln_binary_op op, double a, double b) {
  switch (op) {
  case KILN_BINARY_ADD: return a + b;
  case KILN_BINARY_SUB: return a - b;
  case KILN_BINARY_MUL: return a * b;
  case KILN_BINARY_DIV: return a / b;
  case KILN_BINARY_MAX: return fmax(a, b);
  case KILN_BINARY_MIN: return fmin(a, b);
  }
  return NAN;
}

static void run_unary(kiln_unary_op op, kiln_dtype dt, size_t n) {
  void *xh;
  kiln_buffer *x = input(dt, 3, n, 11u + op, &xh), *y = output(dt, n + 5);
  CHECK_OK(kiln_unary(q, op, &(kiln_range){x, 3, n, dt},
                      &(kiln_range){y, 5, n, dt}, 0, NULL, NULL));
  void *got = download(y, dt, 5, n);
  double *want = malloc(n * sizeof *want);
  for (size_t i = 0; i < n; i++)
    want[i] = unary_ref(op, load(dt, xh, i));
  char what[64];
  snprintf(what, sizeof what, "unary %d %s n=%zu", (int)op, kiln_dtype_name(dt), n);
  expect(what, dt, got, want, n, 1e-6);
  free(want), free(got), free(xh);
  kiln_buffer_destroy(x), kiln_buffer_destroy(y);
}

static void run_binary(kiln_binary_op op, kiln_dtype dt, size_t n, bool scalar) {
  void *ah, *bh;
  kiln_buffer *a = input(dt, 1, n, 21u + op, &ah);
  kiln_buffer *b = input(dt, 2, n, 31u + op, &bh), *y = output(dt, n);
  const float s = 1.25f;
  if (scalar)
    CHECK_OK(kiln_binary_scalar(q, op, &(kiln_range){a, 1, n, dt},
                                &(kiln_range){y, 0, n, dt}, s, 0, NULL, NULL));
  else
    CHECK_OK(kiln_binary(q, op, &(kiln_range){a, 1, n, dt},
                         &(kiln_range){b, 2, n, dt}, &(kiln_range){y, 0, n, dt},
                         0, NULL, NULL));
  void *got = download(y, dt, 0, n);
  double *want = malloc(n * sizeof *want);
  for (size_t i = 0; i < n; i++)
    want[i] = binary_ref(op, load(dt, ah, i), scalar ? s : load(dt, bh, i));
  char what[64];
  snprintf(what, sizeof what, "binary%s %d %s n=%zu", scalar ? "_scalar" : "",
           (int)op, kiln_dtype_name(dt), n);
  /* a / b with b near 0 is large: a relative tolerance covers it. */
  expect(what, dt, got, want, n, 1e-6);
  free(want), free(got), free(ah), free(bh);
  kiln_buffer_destroy(a), kiln_buffer_destroy(b), kiln_buffer_destroy(y);
}

static void run_axpy_scale_fill(void) {
  const size_t n = 53;
  void *xh, *yh;
  kiln_buffer *x = input(KILN_F32, 4, n, 41, &xh), *y = input(KILN_F32, 0, n, 42, &yh);
  CHECK_OK(kiln_axpy(q, &(kiln_range){x, 4, n, KILN_F32},
                     &(kiln_range){y, 0, n, KILN_F32}, -0.75f, 0, NULL, NULL));
  void *got = download(y, KILN_F32, 0, n);
  double want[53];
  for (size_t i = 0; i < n; i++)
    want[i] = fmaf(-0.75f, ((float *)xh)[i], ((float *)yh)[i]);
  expect("axpy f32 n=53", KILN_F32, got, want, n, 0);
  free(got);
  kiln_buffer_destroy(x), kiln_buffer_destroy(y), free(xh), free(yh);

  kiln_buffer *s = input(KILN_BF16, 7, 19, 43, &xh);
  CHECK_OK(
      kiln_scale(q, &(kiln_range){s, 7, 19, KILN_BF16}, 0.5f, 0, NULL, NULL));
  got = download(s, KILN_BF16, 7, 19);
  for (size_t i = 0; i < 19; i++)
    want[i] = 0.5 * load(KILN_BF16, xh, i);
  expect("scale bf16 n=19", KILN_BF16, got, want, 19, 0);
  free(got), free(xh), kiln_buffer_destroy(s);

  const kiln_dtype all[] = {KILN_F32, KILN_F16, KILN_BF16, KILN_I32, KILN_U32};
  for (size_t d = 0; d < 5; d++) {
    kiln_buffer *f = output(all[d], 30);
    double v = all[d] == KILN_I32 ? -7 : all[d] == KILN_U32 ? 4000000000.0 : 2.5;
    /* v as one element of each dtype (2.5 is 0x4100 in f16, 0x4020 in
     * bf16). */
    const float vf = 2.5f;
    const uint16_t vh = 0x4100, vb = 0x4020;
    const int32_t vi = -7;
    const uint32_t vu = 4000000000u;
    const void *const bits[] = {&vf, &vh, &vb, &vi, &vu};
    CHECK_OK(
        kiln_fill(q, &(kiln_range){f, 6, 23, all[d]}, bits[d], 0, NULL, NULL));
    got = download(f, all[d], 6, 23);
    for (size_t i = 0; i < 23; i++)
      want[i] = v;
    char what[32];
    snprintf(what, sizeof what, "fill %s n=23", kiln_dtype_name(all[d]));
    expect(what, all[d], got, want, 23, 0);
    free(got), kiln_buffer_destroy(f);
  }
}

static void run_cast(kiln_dtype from, kiln_dtype to) {
  const size_t n = 31;
  void *xh;
  kiln_buffer *x = input(from, 2, n, 51, &xh), *y = output(to, n + 1);
  CHECK_OK(kiln_cast(q, &(kiln_range){x, 2, n, from},
                     &(kiln_range){y, 1, n, to}, 0, NULL, NULL));
  void *got = download(y, to, 1, n);
  double want[31];
  for (size_t i = 0; i < n; i++)
    want[i] = load(from, xh, i); /* the grid values are exact in all three */
  char what[32];
  snprintf(what, sizeof what, "cast %s->%s n=31", kiln_dtype_name(from),
           kiln_dtype_name(to));
  expect(what, to, got, want, n, 0);
  free(got), free(xh), kiln_buffer_destroy(x), kiln_buffer_destroy(y);
}

/* ---- reductions, scan, rows ------------------------------------------------ */

static double reduce_ref(kiln_reduce_op op, const double *v, size_t n,
                         size_t stride) {
  double acc = op == KILN_REDUCE_MIN ? INFINITY : op == KILN_REDUCE_MAX ? -INFINITY : 0;
  size_t arg = 0;
  for (size_t i = 0; i < n; i++) {
    double x = v[i * stride];
    switch (op) {
    case KILN_REDUCE_SUM: case KILN_REDUCE_MEAN: acc += x; break;
    case KILN_REDUCE_MIN: acc = fmin(acc, x); break;
    case KILN_REDUCE_MAX: acc = fmax(acc, x); break;
    case KILN_REDUCE_NRM2: acc += x * x; break;
    case KILN_REDUCE_ARGMAX:
      if (i == 0 || x > v[arg * stride])
        arg = i;
      break;
    }
  }
  if (op == KILN_REDUCE_MEAN)
    return acc / (double)n;
  if (op == KILN_REDUCE_NRM2)
    return sqrt(acc);
  return op == KILN_REDUCE_ARGMAX ? (double)arg : acc;
}

static void run_reductions(kiln_dtype dt, size_t n) {
  void *xh;
  kiln_buffer *x = input(dt, 5, n, 61, &xh), *r = NULL;
  double *v = malloc(n * sizeof *v);
  for (size_t i = 0; i < n; i++)
    v[i] = load(dt, xh, i);
  for (int op = KILN_REDUCE_SUM; op <= KILN_REDUCE_ARGMAX; op++) {
    /* A fresh result buffer per op, so each read-back sees one op's write. */
    kiln_buffer_destroy(r);
    r = output(KILN_F32, 8);
    kiln_dtype rt = op == KILN_REDUCE_ARGMAX ? KILN_U32 : KILN_F32;
    CHECK_OK(kiln_reduce(q, (kiln_reduce_op)op, &(kiln_range){x, 5, n, dt},
                         &(kiln_range){r, 2, 1, rt}, 0, NULL, NULL));
    void *got = download(r, rt, 2, 1);
    double want = reduce_ref((kiln_reduce_op)op, v, n, 1);
    char what[48];
    snprintf(what, sizeof what, "reduce %d %s n=%zu", op, kiln_dtype_name(dt), n);
    expect(what, rt, got, &want, 1, 1e-5 * (double)n);
    free(got);
  }
  void *yh;
  kiln_buffer *y = input(dt, 0, n, 62, &yh);
  kiln_buffer_destroy(r);
  r = output(KILN_F32, 8);
  CHECK_OK(kiln_dot(q, &(kiln_range){x, 5, n, dt}, &(kiln_range){y, 0, n, dt},
                    &(kiln_range){r, 0, 1, KILN_F32}, 0, NULL, NULL));
  void *got = download(r, KILN_F32, 0, 1);
  double want = 0;
  for (size_t i = 0; i < n; i++)
    want += v[i] * load(dt, yh, i);
  char what[48];
  snprintf(what, sizeof what, "dot %s n=%zu", kiln_dtype_name(dt), n);
  expect(what, KILN_F32, got, &want, 1, 1e-5 * (double)n);
  free(got), free(yh), free(v), free(xh);
  kiln_buffer_destroy(x), kiln_buffer_destroy(y), kiln_buffer_destroy(r);
}

static void run_matrix_reductions(size_t rows, size_t cols) {
  void *xh;
  kiln_buffer *x = input(KILN_F32, 3, rows * cols, 71, &xh), *r = NULL;
  double *v = malloc(rows * cols * sizeof *v), *want = malloc((rows + cols) * sizeof *want);
  for (size_t i = 0; i < rows * cols; i++)
    v[i] = ((float *)xh)[i];
  for (int op = KILN_REDUCE_SUM; op <= KILN_REDUCE_ARGMAX; op++) {
    kiln_dtype rt = op == KILN_REDUCE_ARGMAX ? KILN_U32 : KILN_F32;
    char what[64];
    kiln_buffer_destroy(r);
    r = output(KILN_F32, rows + cols);
    CHECK_OK(kiln_reduce_rows(q, (kiln_reduce_op)op,
                              &(kiln_matrix){.buffer = x,
                                             .offset = 3,
                                             .rows = rows,
                                             .cols = cols,
                                             .dtype = KILN_F32},
                              &(kiln_range){r, 1, rows, rt}, 0, NULL, NULL));
    void *got = download(r, rt, 1, rows);
    for (size_t i = 0; i < rows; i++)
      want[i] = reduce_ref((kiln_reduce_op)op, v + i * cols, cols, 1);
    snprintf(what, sizeof what, "reduce_rows %d %zux%zu", op, rows, cols);
    expect(what, rt, got, want, rows, 1e-5 * (double)cols);
    free(got);
    kiln_buffer_destroy(r);
    r = output(KILN_F32, rows + cols);
    CHECK_OK(kiln_reduce_cols(q, (kiln_reduce_op)op,
                              &(kiln_matrix){.buffer = x,
                                             .offset = 3,
                                             .rows = rows,
                                             .cols = cols,
                                             .dtype = KILN_F32},
                              &(kiln_range){r, 0, cols, rt}, 0, NULL, NULL));
    got = download(r, rt, 0, cols);
    for (size_t j = 0; j < cols; j++)
      want[j] = reduce_ref((kiln_reduce_op)op, v + j, rows, cols);
    snprintf(what, sizeof what, "reduce_cols %d %zux%zu", op, rows, cols);
    expect(what, rt, got, want, cols, 1e-5 * (double)rows);
    free(got);
  }
  free(v), free(want), free(xh), kiln_buffer_destroy(x), kiln_buffer_destroy(r);
}

static void run_scan(kiln_scan_kind kind, kiln_dtype dt, size_t n, bool in_place) {
  void *xh;
  kiln_buffer *x = input(dt, 2, n, 81, &xh);
  kiln_buffer *y = in_place ? x : output(dt, n + 4);
  size_t y_off = in_place ? 2 : 4;
  CHECK_OK(kiln_scan(q, kind, &(kiln_range){x, 2, n, dt},
                     &(kiln_range){y, y_off, n, dt}, 0, NULL, NULL));
  void *got = download(y, dt, y_off, n);
  double *want = malloc(n * sizeof *want), acc = 0;
  for (size_t i = 0; i < n; i++) {
    if (kind == KILN_SCAN_EXCLUSIVE)
      want[i] = acc;
    double xi = load(dt, xh, i);
    acc = dt == KILN_U32 ? fmod(acc + xi, 4294967296.0) : acc + xi;
    if (kind == KILN_SCAN_INCLUSIVE)
      want[i] = acc;
  }
  char what[48];
  snprintf(what, sizeof what, "scan %s %s n=%zu%s",
           kind == KILN_SCAN_INCLUSIVE ? "inclusive" : "exclusive",
           kiln_dtype_name(dt), n, in_place ? " in place" : "");
  expect(what, dt, got, want, n, dt == KILN_F32 ? 1e-5 * (double)n : 0);
  free(want), free(got), free(xh);
  kiln_buffer_destroy(x);
  if (!in_place)
    kiln_buffer_destroy(y);
}

static void run_rows(kiln_dtype dt, size_t rows, size_t cols, bool affine) {
  void *xh, *sh = NULL, *bh = NULL;
  kiln_buffer *x = input(dt, 1, rows * cols, 91, &xh), *y = output(dt, rows * cols);
  kiln_buffer *s = affine ? input(dt, 2, cols, 92, &sh) : NULL;
  kiln_buffer *b = affine ? input(dt, 3, cols, 93, &bh) : NULL;
  double *want = malloc(rows * cols * sizeof *want);
  char what[64];
  const kiln_matrix xm = {
      .buffer = x, .offset = 1, .rows = rows, .cols = cols, .dtype = dt};
  const kiln_matrix ym = {.buffer = y, .rows = rows, .cols = cols, .dtype = dt};
  CHECK_OK(kiln_softmax_rows(q, &xm, &ym, 0, NULL, NULL));
  void *got = download(y, dt, 0, rows * cols);
  for (size_t r = 0; r < rows; r++) {
    double mx = -INFINITY, den = 0;
    for (size_t c = 0; c < cols; c++)
      mx = fmax(mx, load(dt, xh, r * cols + c));
    for (size_t c = 0; c < cols; c++)
      den += exp(load(dt, xh, r * cols + c) - mx);
    for (size_t c = 0; c < cols; c++)
      want[r * cols + c] = exp(load(dt, xh, r * cols + c) - mx) / den;
  }
  snprintf(what, sizeof what, "softmax_rows %s %zux%zu", kiln_dtype_name(dt), rows, cols);
  expect(what, dt, got, want, rows * cols, 1e-6);
  free(got);
  const float eps = 1e-5f;
  const kiln_range sr = {s, 2, cols, dt}, br = {b, 3, cols, dt};
  CHECK_OK(kiln_layernorm_rows(q, &xm, s ? &sr : NULL, b ? &br : NULL, &ym, eps,
                               0, NULL, NULL));
  got = download(y, dt, 0, rows * cols);
  for (size_t r = 0; r < rows; r++) {
    double mean = 0, var = 0;
    for (size_t c = 0; c < cols; c++)
      mean += load(dt, xh, r * cols + c);
    mean /= (double)cols;
    for (size_t c = 0; c < cols; c++) {
      double d = load(dt, xh, r * cols + c) - mean;
      var += d * d;
    }
    var /= (double)cols;
    for (size_t c = 0; c < cols; c++)
      want[r * cols + c] =
          (load(dt, xh, r * cols + c) - mean) / sqrt(var + eps) *
              (affine ? load(dt, sh, c) : 1) + (affine ? load(dt, bh, c) : 0);
  }
  snprintf(what, sizeof what, "layernorm_rows %s %zux%zu%s", kiln_dtype_name(dt),
           rows, cols, affine ? " scale+bias" : "");
  expect(what, dt, got, want, rows * cols, 1e-4);
  free(got), free(want), free(xh), free(sh), free(bh);
  kiln_buffer_destroy(x), kiln_buffer_destroy(y);
  kiln_buffer_destroy(s), kiln_buffer_destroy(b);
}

/* The embedded probe kernel, through the op library's per-queue cache. */
static void run_probe(void) {
  enum { N = 75 };
  cl_kernel k;
  CHECK_OK(kiln__queue_kernel(q, "probe", NULL, "kiln_probe", &k));
  kiln_buffer *out = output(KILN_U32, N);
  cl_uint seed = 0x5eedu;
  size_t global = N;
  if (clSetKernelArg(k, 0, sizeof(cl_mem), &out->cl) != CL_SUCCESS ||
      clSetKernelArg(k, 1, sizeof seed, &seed) != CL_SUCCESS ||
      clEnqueueNDRangeKernel(q->cl, k, 1, NULL, &global, NULL, 0, NULL,
                             NULL) != CL_SUCCESS) {
    fprintf(stderr, "FAIL probe: launch failed\n");
    failures++;
    kiln_buffer_destroy(out);
    return;
  }
  uint32_t *got = download(out, KILN_U32, 0, N);
  double want[N];
  for (uint32_t i = 0; i < N; i++)
    want[i] = (double)((i * 2654435761u) ^ seed);
  expect("probe n=75", KILN_U32, got, want, N, 0);
  free(got), kiln_buffer_destroy(out);
}

/* ---- which kernels ran ---------------------------------------------------- */

/* The op library's launches are recorded by name: tests/oclgrind/meson.build
 * links with -Wl,--wrap=clEnqueueNDRangeKernel, so kiln's calls come here
 * first. The list is printed at the end, as evidence of what was checked. */
enum { MAX_KERNELS = 256 };
static char kernel_names[MAX_KERNELS][64];
static size_t kernel_count;

cl_int __real_clEnqueueNDRangeKernel(cl_command_queue, cl_kernel, cl_uint,
                                     const size_t *, const size_t *,
                                     const size_t *, cl_uint, const cl_event *,
                                     cl_event *);
cl_int __wrap_clEnqueueNDRangeKernel(cl_command_queue queue, cl_kernel kernel,
                                     cl_uint dim, const size_t *offset,
                                     const size_t *global, const size_t *local,
                                     cl_uint num_wait, const cl_event *wait,
                                     cl_event *event);
cl_int __wrap_clEnqueueNDRangeKernel(cl_command_queue queue, cl_kernel kernel,
                                     cl_uint dim, const size_t *offset,
                                     const size_t *global, const size_t *local,
                                     cl_uint num_wait, const cl_event *wait,
                                     cl_event *event) {
  char name[64] = "";
  clGetKernelInfo(kernel, CL_KERNEL_FUNCTION_NAME, sizeof name, name, NULL);
  size_t i = 0;
  while (i < kernel_count && strcmp(kernel_names[i], name) != 0)
    i++;
  if (i == kernel_count && kernel_count < MAX_KERNELS)
    snprintf(kernel_names[kernel_count++], sizeof kernel_names[0], "%s", name);
  return __real_clEnqueueNDRangeKernel(queue, kernel, dim, offset, global,
                                       local, num_wait, wait, event);
}

/* Whether comma-separated list names group. */
static bool listed(const char *list, const char *group) {
  size_t len = strlen(group);
  for (const char *p = list; p != NULL && *p != '\0';) {
    const char *end = strchr(p, ',');
    size_t n = end != NULL ? (size_t)(end - p) : strlen(p);
    if (n == len && strncmp(p, group, n) == 0)
      return true;
    p = end != NULL ? end + 1 : NULL;
  }
  return false;
}

static bool selected(const char *group) {
  const char *only = getenv("RUN_OPS_ONLY"), *skip = getenv("RUN_OPS_SKIP");
  if (only != NULL && *only != '\0' && !listed(only, group))
    return false;
  if (skip != NULL && listed(skip, group)) {
    printf("skip %s\n", group);
    return false;
  }
  return true;
}

/* Samples of the small spaces (kiln/kiln_tune.h: transpose, reduce,
 * elementwise) under the same checks: every knob off its default, vector
 * passes over several groups' worth of elements, misaligned offsets. Only
 * where the GPU family runs, like gemm_space. */
static void run_small_spaces(void) {
  static const struct {
    const char *op, *params;
  } points[] = {
      {"transpose", "TILE=8 PAD=0 WPT=2"},
      {"transpose", "TILE=16 PAD=1 WPT=8"},
      {"reduce", "WG=32 WPT=2 VW=4 PARTS=2"},
      {"reduce", "WG=64 WPT=1 VW=8 PARTS=8"},
      {"elementwise", "WG=32 WPT=2 VW=4"},
      {"elementwise", "WG=64 WPT=4 VW=8"},
  };
  kiln_tuning_info info;
  CHECK_OK(kiln_tuning_get_info(ctx, "reduce", &info));
  if (info.params[0] == '\0') {
    printf("skip spaces: the CPU family runs its own kernels\n");
    return;
  }
  for (size_t i = 0; i < sizeof points / sizeof points[0]; i++) {
    char why[512];
    if (kiln_tuning_check(ctx, points[i].op, points[i].params, why,
                          sizeof why) != KILN_OK) {
      printf("skip %s point %s: %s\n", points[i].op, points[i].params, why);
      continue;
    }
    CHECK_OK(kiln_tuning_set(ctx, points[i].op, points[i].params));
    printf("# %s point: %s\n", points[i].op, points[i].params);
    if (strcmp(points[i].op, "transpose") == 0) {
      run_transpose(KILN_F32, 37, 21);
      run_transpose(KILN_F16, 9, 40);
    } else if (strcmp(points[i].op, "reduce") == 0) {
      run_reductions(KILN_F32, 777);
      run_reductions(KILN_BF16, 301);
      run_matrix_reductions(7, 45);
    } else {
      run_unary(KILN_UNARY_EXP, KILN_F16, 301);
      run_binary(KILN_BINARY_ADD, KILN_BF16, 517, false);
      run_axpy_scale_fill();
    }
    CHECK_OK(kiln_tuning_set(ctx, points[i].op, NULL));
  }
}

/* The CPU family's streaming stores, row-wise block order and one 16 x 16
 * register transpose per block (space transpose_cpu): y's leading
 * dimension (rows + 1) of 32 takes the streaming path. Only where the CPU
 * family runs. */
static void run_transpose_cpu_point(void) {
  static const char point[] = "NT=1 ORDER=1 TILE=16 VW=16";
  kiln_tuning_info info;
  CHECK_OK(kiln_tuning_get_info(ctx, "transpose_cpu", &info));
  if (info.params[0] == '\0') {
    printf("skip transpose_cpu point: the GPU family runs its own kernel\n");
    return;
  }
  CHECK_OK(kiln_tuning_set(ctx, "transpose_cpu", point));
  printf("# transpose_cpu point: %s\n", point);
  run_transpose(KILN_F32, 31, 37);
  run_transpose(KILN_F16, 15, 9);
  CHECK_OK(kiln_tuning_set(ctx, "transpose_cpu", NULL));
}

int main(void) {
  const char *selector = getenv("KILN_TEST_DEVICE");
  if (kiln_context_create_default(selector, &ctx) != KILN_OK ||
      kiln_queue_create(ctx, 0, &q) != KILN_OK) {
    fprintf(stderr, "FAIL no context: %s\n", kiln_last_error());
    return 1;
  }
  printf("# device '%s', profile %s\n", kiln_context_get_device_info(ctx)->name,
         kiln_context_get_profile(ctx));

  if (selected("probe"))
    run_probe();
  if (selected("unary")) {
    for (int op = KILN_UNARY_NEG; op <= KILN_UNARY_TANH; op++)
      run_unary((kiln_unary_op)op, KILN_F32, 37);
    run_unary(KILN_UNARY_EXP, KILN_F16, 29);
    run_unary(KILN_UNARY_GELU, KILN_BF16, 29);
  }
  if (selected("binary")) {
    for (int op = KILN_BINARY_ADD; op <= KILN_BINARY_MIN; op++)
      run_binary((kiln_binary_op)op, KILN_F32, 41, false);
    run_binary(KILN_BINARY_MUL, KILN_F16, 23, false);
    run_binary(KILN_BINARY_DIV, KILN_F32, 41, true);
    run_binary(KILN_BINARY_MAX, KILN_BF16, 17, true);
  }
  if (selected("axpy"))
    run_axpy_scale_fill();
  const kiln_dtype floats[] = {KILN_F32, KILN_F16, KILN_BF16};
  if (selected("cast"))
    for (int i = 0; i < 3; i++)
      for (int j = 0; j < 3; j++)
        if (i != j)
          run_cast(floats[i], floats[j]);
  if (selected("reduce")) {
    run_reductions(KILN_F32, 777);
    run_reductions(KILN_F16, 129);
    run_reductions(KILN_F32, 1);
    run_matrix_reductions(7, 45);
    run_matrix_reductions(33, 5);
  }
  /* Several partials and a final pass, in a group of its own: see
   * tests/oclgrind/run.sh on Oclgrind's false reports across kernels. */
  if (selected("reduce_large"))
    run_reductions(KILN_F32, 40000);
  if (selected("scan")) {
    run_scan(KILN_SCAN_INCLUSIVE, KILN_F32, 257, false);
    run_scan(KILN_SCAN_EXCLUSIVE, KILN_I32, 300, false);
    run_scan(KILN_SCAN_INCLUSIVE, KILN_U32, 129, true);
    /* Several chunks on both families (sums, carry and apply passes). */
    run_scan(KILN_SCAN_EXCLUSIVE, KILN_F32, 20011, false);
  }
  if (selected("rows")) {
    run_rows(KILN_F32, 5, 33, true);
    run_rows(KILN_F16, 3, 17, false);
    run_rows(KILN_BF16, 2, 70, true);
    run_rows(KILN_F32, 2, 1500, true);
  }
  if (selected("transpose")) {
    run_transpose(KILN_F32, 13, 7);
    run_transpose(KILN_F16, 5, 11);
    run_transpose(KILN_U32, 3, 3);
    run_transpose(KILN_F32, 70, 35);
    run_transpose_cpu_point();
  }
  if (selected("gemm"))
    run_gemm_group();
  if (selected("train"))
    run_train();
  if (selected("conv"))
    run_conv();
  if (selected("image"))
    run_image();
  if (selected("attention"))
    run_attention();

  if (selected("gemm_space"))
    run_gemm_space();
  if (selected("gemm_mma"))
    run_gemm_mma();
  if (selected("spaces"))
    run_small_spaces();

  kiln_status s = kiln_queue_destroy(q);
  if (s == KILN_OK)
    s = kiln_context_destroy(ctx);
  if (s != KILN_OK) {
    fprintf(stderr, "FAIL teardown: %s\n", kiln_last_error());
    failures++;
  }
  printf("# kernels:");
  for (size_t i = 0; i < kernel_count; i++)
    printf(" %s", kernel_names[i]);
  printf("\n# %d checks, %d failures\n", checks, failures);
  return failures ? 1 : 0;
}
