/* Kernels: creation, every argument setter's checks, launch validation, and
 * real kernels whose results are checked against the host. One program
 * holds every kernel the tests need, so each device compiles once (and
 * later runs load it from kiln's cache). */
#include "harness.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/internal.h" /* the device limits for out-of-range sizes */
#include "kiln/kiln_cl.h"   /* the raw handles, to compare with the driver */

static const char source[] =
    "__kernel void saxpy(__global float *y, __global const float *x,\n"
    "                    float a, uint n) {\n"
    "  size_t i = get_global_id(0);\n"
    "  if (i < n) y[i] = a * x[i] + y[i];\n"
    "}\n"
    "__kernel void grid(__global uint *out) {\n"
    "  size_t x = get_global_id(0), y = get_global_id(1);\n"
    "  out[y * get_global_size(0) + x] = (uint)(y * 1000 + x);\n"
    "}\n"
    "__kernel void groups(__global uint *out) {\n"
    "  out[get_global_id(0)] = (uint)get_local_size(0);\n"
    "}\n"
    "__kernel __attribute__((reqd_work_group_size(16, 1, 1)))\n"
    "void fixed(__global uint *out) {\n"
    "  out[get_global_id(0)] = (uint)get_local_size(0);\n"
    "}\n"
    "__kernel void types(__global int *out, __local float *scratch,\n"
    "                    char c, short s, int i, long l, float f,\n"
    "                    float4 v, uint3 u3, ulong2 w, uchar2 z) {\n"
    "  scratch[0] = f;\n"
    "  out[0] = c + s + i + (int)l + (int)scratch[0] + (int)v.x + (int)u3.x\n"
    "           + (int)w.x + (int)z.x;\n"
    "}\n";

struct fixture {
  kiln_context *ctx;
  kiln_queue *queue;
  kiln_program *program;
};

static void open_fixture(size_t d, struct fixture *f) {
  kiln_test_open(d, &f->ctx, &f->queue);
  assert_kiln_ok(kiln_program_create_built(f->ctx, source, NULL, &f->program));
}

static void close_fixture(struct fixture *f) {
  assert_kiln_ok(kiln_program_destroy(f->program));
  kiln_test_close(f->ctx, f->queue);
}

static void test_create_errors(void **state) {
  (void)state;
  kiln_kernel *kernel = (kiln_kernel *)1;
  assert_kiln_status(kiln_kernel_create(NULL, "saxpy", &kernel),
                     KILN_ERR_NULL_POINTER);
  assert_last_error_contains("program");
  assert_null(kernel);
  assert_int_equal(kiln_kernel_get_arg_count(NULL), 0);
  FOR_EACH_TEST_DEVICE(d) {
    struct fixture f;
    open_fixture(d, &f);
    assert_kiln_status(kiln_kernel_create(f.program, NULL, &kernel),
                       KILN_ERR_NULL_POINTER);
    assert_last_error_contains("name");
    assert_kiln_status(kiln_kernel_create(f.program, "saxpy", NULL),
                       KILN_ERR_NULL_POINTER);
    assert_last_error_contains("out");
    assert_kiln_status(kiln_kernel_create(f.program, "sxapy", &kernel),
                       KILN_ERR_NOT_FOUND);
    assert_last_error_contains("'sxapy'");
    /* The message lists what the program does have. */
    assert_last_error_contains("saxpy");
    assert_last_error_contains("grid");
    assert_last_error_contains("types");
    assert_last_error_contains("fixed");
    assert_null(kernel);
    assert_kiln_ok(kiln_kernel_create(f.program, "types", &kernel));
    assert_int_equal(kiln_kernel_get_arg_count(kernel), 11);
    assert_kiln_ok(kiln_kernel_destroy(kernel));
    close_fixture(&f);
  }
}

static void test_setter_errors(void **state) {
  (void)state;
  float one = 1.0f;
  assert_kiln_status(kiln_kernel_set_arg_scalar(NULL, 0, &one, 4),
                     KILN_ERR_NULL_POINTER);
  assert_last_error_contains("kernel is NULL");
  assert_kiln_status(kiln_kernel_set_arg_buffer(NULL, 0, NULL),
                     KILN_ERR_NULL_POINTER);
  assert_kiln_status(kiln_kernel_set_arg_local(NULL, 0, 4),
                     KILN_ERR_NULL_POINTER);
  assert_kiln_status(kiln_kernel_set_arg_f32(NULL, 0, 1.0f),
                     KILN_ERR_NULL_POINTER);
  FOR_EACH_TEST_DEVICE(d) {
    struct fixture f;
    open_fixture(d, &f);
    kiln_kernel *k;
    assert_kiln_ok(kiln_kernel_create(f.program, "types", &k));
    kiln_buffer *buf;
    assert_kiln_ok(kiln_buffer_create(f.ctx, 64, 0, &buf));

    /* Index out of range: names the index and the count. */
    assert_kiln_status(kiln_kernel_set_arg_i32(k, 11, 1), KILN_ERR_OUT_OF_RANGE);
    assert_last_error_contains("index 11");
    assert_last_error_contains("11 arguments");
    assert_kiln_status(kiln_kernel_set_arg_buffer(k, 99, buf),
                       KILN_ERR_OUT_OF_RANGE);
    assert_kiln_status(kiln_kernel_set_arg_local(k, 12, 16),
                       KILN_ERR_OUT_OF_RANGE);

    /* Buffers. */
    assert_kiln_status(kiln_kernel_set_arg_buffer(k, 0, NULL),
                       KILN_ERR_NULL_POINTER);
    assert_last_error_contains("buffer is NULL");
    assert_kiln_status(kiln_kernel_set_arg_buffer(k, 6, buf),
                       KILN_ERR_INVALID_ARGUMENT);
    assert_last_error_contains("argument 6");
    assert_last_error_contains("'float'");
    assert_kiln_status(kiln_kernel_set_arg_buffer(k, 1, buf),
                       KILN_ERR_INVALID_ARGUMENT);
    assert_last_error_contains("__local");
    assert_kiln_ok(kiln_kernel_set_arg_buffer(k, 0, buf));
    kiln_context *other;
    kiln_test_open(d, &other, NULL);
    kiln_buffer *foreign;
    assert_kiln_ok(kiln_buffer_create(other, 64, 0, &foreign));
    assert_kiln_status(kiln_kernel_set_arg_buffer(k, 0, foreign),
                       KILN_ERR_WRONG_CONTEXT);
    assert_last_error_contains("another context");
    assert_kiln_ok(kiln_buffer_destroy(foreign));
    assert_kiln_ok(kiln_context_destroy(other));

    /* Local memory. */
    uint64_t local_mem = kiln_context_get_device_info(f.ctx)->local_mem_bytes;
    assert_kiln_status(kiln_kernel_set_arg_local(k, 1, 0), KILN_ERR_INVALID_SIZE);
    assert_last_error_contains("size_bytes is 0");
    assert_kiln_status(kiln_kernel_set_arg_local(k, 1, (size_t)local_mem + 1),
                       KILN_ERR_INVALID_SIZE);
    assert_last_error_contains("local memory");
    assert_kiln_status(kiln_kernel_set_arg_local(k, 0, 16),
                       KILN_ERR_INVALID_ARGUMENT);
    assert_last_error_contains("__global");
    assert_kiln_ok(kiln_kernel_set_arg_local(k, 1, 16));

    /* Scalars: sizes checked against the declared type. */
    assert_kiln_status(kiln_kernel_set_arg_scalar(k, 4, NULL, 4),
                       KILN_ERR_NULL_POINTER);
    assert_last_error_contains("value is NULL");
    assert_kiln_status(kiln_kernel_set_arg_scalar(k, 4, &one, 0),
                       KILN_ERR_INVALID_SIZE);
    assert_kiln_status(kiln_kernel_set_arg_f64(k, 6, 1.0), KILN_ERR_INVALID_SIZE);
    assert_last_error_contains("kiln_kernel_set_arg_f64");
    assert_last_error_contains("declared 'float' (4 bytes) but 8 bytes");
    assert_kiln_status(kiln_kernel_set_arg_i32(k, 2, 1), KILN_ERR_INVALID_SIZE);
    assert_last_error_contains("'char' (1 bytes) but 4 bytes");
    assert_kiln_status(kiln_kernel_set_arg_i32(k, 5, 1), KILN_ERR_INVALID_SIZE);
    assert_last_error_contains("'long' (8 bytes)");
    assert_kiln_status(kiln_kernel_set_arg_u32(k, 5, 1), KILN_ERR_INVALID_SIZE);
    assert_last_error_contains("kiln_kernel_set_arg_u32");
    assert_kiln_status(kiln_kernel_set_arg_i64(k, 4, 1), KILN_ERR_INVALID_SIZE);
    assert_last_error_contains("'int' (4 bytes) but 8 bytes");
    assert_kiln_status(kiln_kernel_set_arg_u64(k, 11, 1), KILN_ERR_OUT_OF_RANGE);
    assert_last_error_contains("kiln_kernel_set_arg_u64");
    assert_kiln_status(kiln_kernel_set_arg_u64(NULL, 0, 1), KILN_ERR_NULL_POINTER);
    assert_kiln_status(kiln_kernel_set_arg_f32(k, 7, 1.0f), KILN_ERR_INVALID_SIZE);
    assert_last_error_contains("'float4' (16 bytes) but 4 bytes");
    /* A three-component vector occupies four. */
    uint32_t u3[4] = {1, 2, 3, 0};
    assert_kiln_status(kiln_kernel_set_arg_scalar(k, 8, u3, 12),
                       KILN_ERR_INVALID_SIZE);
    assert_last_error_contains("'uint3' (16 bytes)");
    assert_kiln_status(kiln_kernel_set_arg_f32(k, 0, 1.0f),
                       KILN_ERR_INVALID_ARGUMENT);
    assert_last_error_contains("not a by-value argument");

    /* Every type accepted at its right size; the kernel then runs. */
    int8_t c = 1;
    int16_t s = 2;
    float v[4] = {5, 0, 0, 0};
    uint64_t w[2] = {6, 0};
    uint8_t z[2] = {7, 0};
    assert_kiln_ok(kiln_kernel_set_arg_scalar(k, 2, &c, 1));
    assert_kiln_ok(kiln_kernel_set_arg_scalar(k, 3, &s, 2));
    assert_kiln_ok(kiln_kernel_set_arg_i32(k, 4, 3));
    assert_kiln_ok(kiln_kernel_set_arg_i64(k, 5, 4));
    assert_kiln_ok(kiln_kernel_set_arg_f32(k, 6, 10.0f));
    assert_kiln_ok(kiln_kernel_set_arg_scalar(k, 7, v, sizeof v));
    assert_kiln_ok(kiln_kernel_set_arg_scalar(k, 8, u3, sizeof u3));
    assert_kiln_ok(kiln_kernel_set_arg_scalar(k, 9, w, sizeof w));
    assert_kiln_ok(kiln_kernel_set_arg_scalar(k, 10, z, sizeof z));
    size_t one_item = 1;
    assert_kiln_ok(kiln_kernel_launch(f.queue, k, 1, &one_item, &one_item, 0,
                                      NULL, NULL));
    int32_t result = 0;
    assert_kiln_ok(kiln_buffer_read_sync(
        f.queue, &(kiln_range){buf, 0, 1, KILN_I32}, &result));
    assert_int_equal(result, 1 + 2 + 3 + 4 + 10 + 5 + 1 + 6 + 7);

    assert_kiln_ok(kiln_buffer_destroy(buf));
    assert_kiln_ok(kiln_kernel_destroy(k));
    close_fixture(&f);
  }
}

static void test_launch_errors(void **state) {
  (void)state;
  size_t g[3] = {64, 1, 1}, l[3] = {8, 1, 1};
  assert_kiln_status(kiln_kernel_launch(NULL, NULL, 1, g, NULL, 0, NULL, NULL),
                     KILN_ERR_NULL_POINTER);
  assert_last_error_contains("queue is NULL");
  FOR_EACH_TEST_DEVICE(d) {
    struct fixture f;
    open_fixture(d, &f);
    const kiln_device_info *info = kiln_context_get_device_info(f.ctx);
    kiln_kernel *k;
    assert_kiln_ok(kiln_kernel_create(f.program, "grid", &k));
    kiln_buffer *buf;
    assert_kiln_ok(kiln_buffer_create(f.ctx, 64 * 4, 0, &buf));

    assert_kiln_status(kiln_kernel_launch(f.queue, NULL, 1, g, NULL, 0, NULL, NULL),
                       KILN_ERR_NULL_POINTER);
    assert_last_error_contains("kernel is NULL");
    assert_kiln_status(kiln_kernel_launch(f.queue, k, 1, NULL, NULL, 0, NULL, NULL),
                       KILN_ERR_NULL_POINTER);
    assert_last_error_contains("global_size");
    assert_kiln_status(kiln_kernel_launch(f.queue, k, 0, g, NULL, 0, NULL, NULL),
                       KILN_ERR_INVALID_ARGUMENT);
    assert_last_error_contains("work_dim 0");
    assert_kiln_status(kiln_kernel_launch(f.queue, k, 4, g, NULL, 0, NULL, NULL),
                       KILN_ERR_INVALID_ARGUMENT);
    assert_last_error_contains("work_dim 4");
    size_t zero[2] = {64, 0};
    assert_kiln_status(kiln_kernel_launch(f.queue, k, 2, zero, NULL, 0, NULL, NULL),
                       KILN_ERR_INVALID_SIZE);
    assert_last_error_contains("global_size[1] is 0");
    size_t huge[2] = {SIZE_MAX / 2, 4};
    assert_kiln_status(kiln_kernel_launch(f.queue, k, 2, huge, NULL, 0, NULL, NULL),
                       KILN_ERR_INVALID_SIZE);
    assert_last_error_contains("overflows");
    size_t bad_local[1] = {7};
    assert_kiln_status(kiln_kernel_launch(f.queue, k, 1, g, bad_local, 0, NULL, NULL),
                       KILN_ERR_INVALID_SIZE);
    assert_last_error_contains("local_size[0] = 7 does not divide global_size[0] = 64");
    size_t zero_local[1] = {0};
    assert_kiln_status(kiln_kernel_launch(f.queue, k, 1, g, zero_local, 0, NULL, NULL),
                       KILN_ERR_INVALID_SIZE);
    assert_last_error_contains("local_size[0] is 0");
    /* Past the per-dimension limit, with a global size it divides. */
    size_t item_max = info->max_work_item_sizes[0];
    size_t big_g[1] = {item_max * 2}, big_l[1] = {item_max * 2};
    assert_kiln_status(kiln_kernel_launch(f.queue, k, 1, big_g, big_l, 0, NULL, NULL),
                       KILN_ERR_INVALID_SIZE);
    assert_last_error_contains("max work-item size");
    assert_last_error_contains("dimension 0");
    /* Within each dimension's limit but over the group limit. */
    if (info->max_work_item_sizes[1] >= 2 &&
        info->max_work_item_sizes[0] >= info->max_work_group_size) {
      size_t gg[2] = {info->max_work_group_size, 2};
      size_t ll[2] = {info->max_work_group_size, 2};
      assert_kiln_status(kiln_kernel_launch(f.queue, k, 2, gg, ll, 0, NULL, NULL),
                         KILN_ERR_INVALID_SIZE);
      assert_last_error_contains("max work-group size");
    }
    /* Unset arguments are named. */
    assert_kiln_status(kiln_kernel_launch(f.queue, k, 1, g, l, 0, NULL, NULL),
                       KILN_ERR_INVALID_ARGUMENT);
    assert_last_error_contains("argument 0 is not set");
    /* A kernel of another context. */
    kiln_context *other;
    kiln_queue *other_queue;
    kiln_test_open(d, &other, &other_queue);
    assert_kiln_ok(kiln_kernel_set_arg_buffer(k, 0, buf));
    assert_kiln_status(
        kiln_kernel_launch(other_queue, k, 1, g, l, 0, NULL, NULL),
        KILN_ERR_WRONG_CONTEXT);
    assert_last_error_contains("another context");
    kiln_test_close(other, other_queue);

    assert_kiln_ok(kiln_buffer_destroy(buf));
    assert_kiln_ok(kiln_kernel_destroy(k));
    close_fixture(&f);
  }
}

static void test_saxpy_results(void **state) {
  (void)state;
  enum { N = 1000 };
  float x[N], y[N], out[N];
  kiln_test_fill_random(x, N, -1.0f, 1.0f, 11);
  kiln_test_fill_random(y, N, -1.0f, 1.0f, 12);
  FOR_EACH_TEST_DEVICE(d) {
    struct fixture f;
    open_fixture(d, &f);
    kiln_kernel *k;
    assert_kiln_ok(kiln_kernel_create(f.program, "saxpy", &k));
    kiln_buffer *bx, *by;
    assert_kiln_ok(kiln_buffer_create(f.ctx, sizeof x, KILN_MEM_READ_ONLY, &bx));
    assert_kiln_ok(kiln_buffer_create(f.ctx, sizeof y, 0, &by));
    assert_kiln_ok(
        kiln_buffer_write_sync(f.queue, x, &(kiln_range){bx, 0, N, KILN_F32}));
    assert_kiln_ok(
        kiln_buffer_write_sync(f.queue, y, &(kiln_range){by, 0, N, KILN_F32}));
    assert_kiln_ok(kiln_kernel_set_arg_buffer(k, 0, by));
    assert_kiln_ok(kiln_kernel_set_arg_buffer(k, 1, bx));
    assert_kiln_ok(kiln_kernel_set_arg_f32(k, 2, 2.5f));
    assert_kiln_ok(kiln_kernel_set_arg_u32(k, 3, N));
    /* kiln chooses the local size; N = 1000 has awkward divisors. */
    size_t global = N;
    kiln_event *ev = NULL;
    assert_kiln_ok(kiln_kernel_launch(f.queue, k, 1, &global, NULL, 0, NULL, &ev));
    assert_non_null(ev);
    /* A second launch waits on the first explicitly, with a local size. */
    size_t global2 = 1024, local2 = 16;
    assert_kiln_ok(kiln_kernel_launch(f.queue, k, 1, &global2, &local2, 1, &ev,
                                      NULL));
    kiln_event_release(ev);
    assert_kiln_ok(
        kiln_buffer_read_sync(f.queue, &(kiln_range){by, 0, N, KILN_F32}, out));
    for (size_t i = 0; i < N; i++) {
      float want = 2.5f * x[i] + (2.5f * x[i] + y[i]);
      assert_float_equal(out[i], want, 1e-5f);
    }
    assert_kiln_ok(kiln_buffer_destroy(bx));
    assert_kiln_ok(kiln_buffer_destroy(by));
    assert_kiln_ok(kiln_kernel_destroy(k));
    close_fixture(&f);
  }
}

static void test_grid_and_chosen_local_size(void **state) {
  (void)state;
  FOR_EACH_TEST_DEVICE(d) {
    struct fixture f;
    open_fixture(d, &f);
    kiln_kernel *k;
    assert_kiln_ok(kiln_kernel_create(f.program, "grid", &k));
    enum { W = 24, H = 5 };
    kiln_buffer *buf;
    assert_kiln_ok(kiln_buffer_create(f.ctx, W * H * 4, 0, &buf));
    assert_kiln_ok(kiln_kernel_set_arg_buffer(k, 0, buf));
    size_t g[2] = {W, H};
    assert_kiln_ok(kiln_kernel_launch(f.queue, k, 2, g, NULL, 0, NULL, NULL));
    uint32_t out[W * H];
    assert_kiln_ok(kiln_buffer_read_sync(
        f.queue, &(kiln_range){buf, 0, W * H, KILN_U32}, out));
    for (uint32_t y = 0; y < H; y++)
      for (uint32_t x = 0; x < W; x++)
        assert_int_equal(out[y * W + x], y * 1000 + x);
    assert_kiln_ok(kiln_buffer_destroy(buf));
    assert_kiln_ok(kiln_kernel_destroy(k));

    /* With the serial-default quirk, a small range is still split so every
     * compute unit gets a group. */
    const kiln_device_info *info = kiln_context_get_device_info(f.ctx);
    if ((f.ctx->backend->quirks & KILN_QUIRK_SERIAL_DEFAULT_LOCAL_SIZE) != 0 &&
        info->compute_units > 1) {
      assert_kiln_ok(kiln_kernel_create(f.program, "groups", &k));
      assert_kiln_ok(kiln_buffer_create(f.ctx, 64 * 4, 0, &buf));
      assert_kiln_ok(kiln_kernel_set_arg_buffer(k, 0, buf));
      size_t n = 64;
      assert_kiln_ok(kiln_kernel_launch(f.queue, k, 1, &n, NULL, 0, NULL, NULL));
      uint32_t sizes[64];
      assert_kiln_ok(kiln_buffer_read_sync(
          f.queue, &(kiln_range){buf, 0, 64, KILN_U32}, sizes));
      assert_true(sizes[0] >= 1 && sizes[0] <= 64 / info->compute_units);
      assert_int_equal(64 % sizes[0], 0);
      assert_kiln_ok(kiln_buffer_destroy(buf));
      assert_kiln_ok(kiln_kernel_destroy(k));
    }
    close_fixture(&f);
  }
}

static void test_required_group_size(void **state) {
  (void)state;
  FOR_EACH_TEST_DEVICE(d) {
    struct fixture f;
    open_fixture(d, &f);
    kiln_kernel *k;
    assert_kiln_ok(kiln_kernel_create(f.program, "fixed", &k));
    kiln_buffer *buf;
    assert_kiln_ok(kiln_buffer_create(f.ctx, 64 * 4, 0, &buf));
    assert_kiln_ok(kiln_kernel_set_arg_buffer(k, 0, buf));
    size_t global = 64, local = 8;
    assert_kiln_status(kiln_kernel_launch(f.queue, k, 1, &global, &local, 0,
                                          NULL, NULL),
                       KILN_ERR_INVALID_SIZE);
    assert_last_error_contains("reqd_work_group_size");
    /* Without a local size kiln leaves the choice to the attribute. */
    assert_kiln_ok(kiln_kernel_launch(f.queue, k, 1, &global, NULL, 0, NULL, NULL));
    uint32_t sizes[64];
    assert_kiln_ok(kiln_buffer_read_sync(
        f.queue, &(kiln_range){buf, 0, 64, KILN_U32}, sizes));
    for (int i = 0; i < 64; i++)
      assert_int_equal(sizes[i], 16);
    assert_kiln_ok(kiln_buffer_destroy(buf));
    assert_kiln_ok(kiln_kernel_destroy(k));
    close_fixture(&f);
  }
}

/* kiln_kernel_get_info: every field against the driver's own answer, the
 * required size of a reqd_work_group_size kernel, and __local memory that
 * grows with a __local argument. */
static void test_kernel_info(void **state) {
  (void)state;
  FOR_EACH_TEST_DEVICE(d) {
    struct fixture f;
    open_fixture(d, &f);
    kiln_kernel_info info;
    assert_kiln_status(kiln_kernel_get_info(NULL, &info), KILN_ERR_NULL_POINTER);
    assert_last_error_contains("kiln_kernel_get_info: kernel is NULL");
    kiln_kernel *saxpy, *fixed, *types;
    assert_kiln_ok(kiln_kernel_create(f.program, "saxpy", &saxpy));
    assert_kiln_ok(kiln_kernel_create(f.program, "fixed", &fixed));
    assert_kiln_ok(kiln_kernel_create(f.program, "types", &types));
    assert_kiln_status(kiln_kernel_get_info(saxpy, NULL), KILN_ERR_NULL_POINTER);
    assert_last_error_contains("kiln_kernel_get_info: out is NULL");

    assert_kiln_ok(kiln_kernel_get_info(saxpy, &info));
    assert_string_equal(info.name, "saxpy");
    assert_int_equal(info.num_args, 4);
    cl_device_id dev = kiln_device_get_cl_device(kiln_test_device(d));
    size_t wg = 0, multiple = 0;
    assert_int_equal(clGetKernelWorkGroupInfo(kiln_kernel_get_cl_kernel(saxpy),
                                              dev, CL_KERNEL_WORK_GROUP_SIZE,
                                              sizeof wg, &wg, NULL),
                     CL_SUCCESS);
    assert_int_equal(
        clGetKernelWorkGroupInfo(kiln_kernel_get_cl_kernel(saxpy), dev,
                                 CL_KERNEL_PREFERRED_WORK_GROUP_SIZE_MULTIPLE,
                                 sizeof multiple, &multiple, NULL),
        CL_SUCCESS);
    assert_int_equal(info.work_group_size, wg);
    assert_int_equal(info.preferred_multiple, multiple);
    assert_true(info.work_group_size >= 1);
    assert_true(info.work_group_size <=
                kiln_context_get_device_info(f.ctx)->max_work_group_size);
    assert_int_equal(info.required_size[0], 0);

    assert_kiln_ok(kiln_kernel_get_info(fixed, &info));
    assert_int_equal(info.required_size[0], 16);
    assert_int_equal(info.required_size[1], 1);
    assert_int_equal(info.required_size[2], 1);

    kiln_kernel_info before, after;
    assert_kiln_ok(kiln_kernel_get_info(types, &before));
    assert_int_equal(before.local_arg_bytes, 0);
    assert_kiln_ok(kiln_kernel_set_arg_local(types, 1, 4096));
    assert_kiln_ok(kiln_kernel_get_info(types, &after));
    assert_int_equal(after.local_arg_bytes, 4096);
    assert_true(after.local_mem_bytes >= before.local_mem_bytes);
    /* Set again, smaller: the argument counts once, at its new size. */
    assert_kiln_ok(kiln_kernel_set_arg_local(types, 1, 256));
    assert_kiln_ok(kiln_kernel_get_info(types, &after));
    assert_int_equal(after.local_arg_bytes, 256);

    assert_kiln_ok(kiln_kernel_destroy(types));
    assert_kiln_ok(kiln_kernel_destroy(fixed));
    assert_kiln_ok(kiln_kernel_destroy(saxpy));
    close_fixture(&f);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_create_errors),
      cmocka_unit_test(test_setter_errors),
      cmocka_unit_test(test_launch_errors),
      cmocka_unit_test(test_saxpy_results),
      cmocka_unit_test(test_grid_and_chosen_local_size),
      cmocka_unit_test(test_required_group_size),
      cmocka_unit_test(test_kernel_info),
  };
  return KILN_TEST_RUN("kernel", tests, true);
}
