/* Training ops, random numbers: kiln_random_bits, kiln_random_uniform,
 * kiln_random_normal, kiln_dropout_mask, kiln_dropout (contracts in
 * kiln/kiln_ops_train.h; kernels in cl_kernels/train_random.cl, built per
 * storage dtype). One work-item per Philox block of four elements. */
#include "ops_train_internal.h"

#include <math.h>
#include <stdio.h>

static const char *const dt_options[] = {
    [KILN_F32] = "-DDT=0", [KILN_F16] = "-DDT=1", [KILN_BF16] = "-DDT=2"};

/* offset + n must not pass 2^64. */
static kiln_status check_stream(const char *fn, uint64_t offset, size_t n) {
  if (n > 0 && (uint64_t)(n - 1) > UINT64_MAX - offset)
    return kiln__fail(KILN_ERR_INVALID_SIZE,
                      "%s: offset %llu + n %zu passes the end of the stream "
                      "(2^64 elements)",
                      fn, (unsigned long long)offset, n);
  return KILN_OK;
}

/* Enqueue kernel name of train_random.cl over the blocks covering elements
 * [offset, offset + n): arguments (seed, first block, first lane) and then
 * the count extra ones. */
static kiln_status launch_stream(struct kiln__op *op, kiln_dtype dtype,
                                 const char *name, uint64_t seed,
                                 uint64_t offset, size_t n, cl_uint count,
                                 const struct kiln__arg *extra) {
  cl_kernel k = NULL;
  cl_ulong sd = seed, first = offset / 4;
  cl_uint lane0 = (cl_uint)(offset % 4);
  kiln_status s = kiln__queue_kernel(op->queue, "train_random",
                                     dt_options[dtype], name, &k);
  KILN__CHECK(s, kiln__op_args(op, k, 3, KILN__ARG(sd), KILN__ARG(first),
                      KILN__ARG(lane0)));
  for (cl_uint i = 0; i < count && s == KILN_OK; i++) {
    cl_int err = clSetKernelArg(k, 3 + i, extra[i].size, extra[i].value);
    if (err != CL_SUCCESS)
      s = kiln__fail_cl(err, "clSetKernelArg", op->queue->ctx->device,
                        "%s: argument %u of %s", op->fn, 3 + i, name);
  }
  /* lane0 + n elements, in blocks of four (n < 2^64 - 3 as size_t). */
  size_t blocks = n / 4 + (n % 4 + lane0 + 3) / 4;
  KILN__CHECK(s, kiln__train_launch_elems(op, k, blocks));
  return s;
}

/* The checks and launch shared by the five ops: y (named y_what, of one of
 * dtypes) is the output, n = its count; x, when not NULL, an input of the
 * same dtype and count. s carries the caller's checks so far. */
static kiln_status run(kiln_queue *queue, const char *fn, const char *trace,
                       const char *kernel, unsigned dtypes, uint64_t seed,
                       uint64_t offset, const kiln_range *x_r,
                       const kiln_range *y_r, const char *y_what, kiln_status s,
                       cl_uint count, struct kiln__arg *extra, size_t num_wait,
                       kiln_event *const *wait_list, kiln_event **out_event) {
  KILN__CHECK(s, kiln__train_need(fn, y_what, y_r));
  if (s != KILN_OK)
    return s;
  char name[16];
  snprintf(name, sizeof name, "%s dtype", y_what);
  kiln_dtype y_dtype = y_r->dtype;
  size_t n = y_r->count;
  KILN__CHECK(s, kiln__ops_check_dtype(fn, name, y_dtype, dtypes));
  if (x_r != NULL) {
    KILN__CHECK(s, kiln__train_same_dtype(fn, "x", x_r->dtype, y_what, y_dtype));
    KILN__CHECK(s, kiln__train_same_count(fn, "x", x_r->count, "y's count", n));
  }
  KILN__CHECK(s, check_stream(fn, offset, n));
  const kiln_buffer *x = x_r != NULL ? x_r->buffer : NULL;
  size_t x_offset = x_r != NULL ? x_r->offset : 0;
  kiln_buffer *y = y_r->buffer;
  size_t y_offset = y_r->offset;
  if (x_r != NULL)
    KILN__CHECK(s, kiln__ops_check_map(fn, queue, "x", x, x_offset, y, y_offset, n,
                              y_dtype));
  else
    KILN__CHECK(s, kiln__ops_check_out(fn, queue, y_what, y, y_offset, n, y_dtype));
  if (s != KILN_OK)
    return s;
  struct kiln__op o;
  if ((s = kiln__op_begin(&o, queue, fn, num_wait, wait_list, out_event)))
    return s;
  double es = (double)kiln_dtype_size(y_dtype);
  kiln__op_describe(&o, trace, y_dtype, 1, &n,
                    (x_r != NULL ? 2 : 1) * es * (double)n, 30.0 * (double)n);
  if (n > 0) {
    cl_ulong yo = y_offset, nn = n, xo = x_offset;
    /* extra ends with [x, xo,] y, yo, n. */
    cl_uint at = count;
    if (x_r != NULL) {
      extra[at++] = KILN__ARG(x->cl);
      extra[at++] = KILN__ARG(xo);
    }
    extra[at++] = KILN__ARG(y->cl);
    extra[at++] = KILN__ARG(yo);
    extra[at++] = KILN__ARG(nn);
    s = launch_stream(&o, y_dtype == KILN_U32 ? KILN_F32 : y_dtype, kernel,
                      seed, offset, n, at, extra);
  }
  return kiln__op_end(&o, s, out_event);
}

KILN_API kiln_status kiln_random_bits(kiln_queue *queue, const kiln_range *y,
                                      uint64_t seed, uint64_t offset,
                                      size_t num_wait,
                                      kiln_event *const *wait_list,
                                      kiln_event **out_event) {
  static const char fn[] = "kiln_random_bits";
  struct kiln__arg extra[8];
  kiln_status s = kiln__ops_check_queue(fn, queue);
  if (s != KILN_OK)
    return s;
  /* The u32 output is built in the f32 program, the likeliest to exist. */
  return run(queue, fn, "random.bits", "random_bits", KILN__DT(KILN_U32), seed,
             offset, NULL, y, "y", s, 0, extra, num_wait, wait_list, out_event);
}

KILN_API kiln_status kiln_random_uniform(kiln_queue *queue, const kiln_range *y,
                                         uint64_t seed, uint64_t offset,
                                         float lo, float hi, size_t num_wait,
                                         kiln_event *const *wait_list,
                                         kiln_event **out_event) {
  static const char fn[] = "kiln_random_uniform";
  struct kiln__arg extra[8] = {KILN__ARG(lo), KILN__ARG(hi)};
  kiln_status s = kiln__ops_check_queue(fn, queue);
  KILN__CHECK(s, kiln__train_check_finite(fn, "lo", lo));
  KILN__CHECK(s, kiln__train_check_finite(fn, "hi", hi));
  if (s == KILN_OK && !(lo <= hi && isfinite(hi - lo)))
    s = kiln__fail(KILN_ERR_INVALID_ARGUMENT,
                   "%s: lo %g and hi %g: lo <= hi, with a finite hi - lo, is "
                   "required",
                   fn, (double)lo, (double)hi);
  if (s != KILN_OK)
    return s;
  return run(queue, fn, "random.uniform", "random_uniform", KILN__DT_FLOATS,
             seed, offset, NULL, y, "y", s, 2, extra, num_wait, wait_list,
             out_event);
}

KILN_API kiln_status kiln_random_normal(kiln_queue *queue, const kiln_range *y,
                                        uint64_t seed, uint64_t offset,
                                        float mean, float stddev,
                                        size_t num_wait,
                                        kiln_event *const *wait_list,
                                        kiln_event **out_event) {
  static const char fn[] = "kiln_random_normal";
  struct kiln__arg extra[8] = {KILN__ARG(mean), KILN__ARG(stddev)};
  kiln_status s = kiln__ops_check_queue(fn, queue);
  KILN__CHECK(s, kiln__train_check_finite(fn, "mean", mean));
  KILN__CHECK(s, kiln__train_check_finite(fn, "stddev", stddev));
  if (s == KILN_OK && stddev < 0)
    s = kiln__fail(KILN_ERR_INVALID_ARGUMENT, "%s: stddev %g must be >= 0", fn,
                   (double)stddev);
  if (s != KILN_OK)
    return s;
  return run(queue, fn, "random.normal", "random_normal", KILN__DT_FLOATS, seed,
             offset, NULL, y, "y", s, 2, extra, num_wait, wait_list, out_event);
}

/* p in [0, 1]; the kept elements' scale 1 / (1 - p) rounded to f32 (any
 * value for p = 1, which keeps nothing). */
static kiln_status dropout_scale(const char *fn, float p, float *scale) {
  if (!(p >= 0 && p <= 1))
    return kiln__fail(KILN_ERR_INVALID_ARGUMENT, "%s: p %g must be in [0, 1]",
                      fn, (double)p);
  *scale = p < 1 ? (float)(1.0 / (1.0 - (double)p)) : 0.0f;
  return KILN_OK;
}

KILN_API kiln_status kiln_dropout_mask(kiln_queue *queue,
                                       const kiln_range *mask, uint64_t seed,
                                       uint64_t offset, float p,
                                       size_t num_wait,
                                       kiln_event *const *wait_list,
                                       kiln_event **out_event) {
  static const char fn[] = "kiln_dropout_mask";
  float scale = 0;
  struct kiln__arg extra[8] = {KILN__ARG(p), KILN__ARG(scale)};
  kiln_status s = kiln__ops_check_queue(fn, queue);
  KILN__CHECK(s, dropout_scale(fn, p, &scale));
  if (s != KILN_OK)
    return s;
  return run(queue, fn, "dropout_mask", "dropout_mask", KILN__DT_FLOATS, seed,
             offset, NULL, mask, "mask", s, 2, extra, num_wait, wait_list,
             out_event);
}

KILN_API kiln_status kiln_dropout(kiln_queue *queue, const kiln_range *x,
                                  const kiln_range *y, uint64_t seed,
                                  uint64_t offset, float p, size_t num_wait,
                                  kiln_event *const *wait_list,
                                  kiln_event **out_event) {
  static const char fn[] = "kiln_dropout";
  float scale = 0;
  struct kiln__arg extra[8] = {KILN__ARG(p), KILN__ARG(scale)};
  kiln_status s = kiln__ops_check_queue(fn, queue);
  KILN__CHECK(s, dropout_scale(fn, p, &scale));
  KILN__CHECK(s, kiln__train_need(fn, "x", x));
  if (s != KILN_OK)
    return s;
  return run(queue, fn, "dropout", "dropout", KILN__DT_FLOATS, seed, offset, x,
             y, "y", s, 2, extra, num_wait, wait_list, out_event);
}

void kiln__ops_warm_train_random(const kiln_context *ctx, kiln__warm_add_fn add,
                                 void *user) {
  (void)ctx;
  for (int d = KILN_F32; d <= KILN_BF16; d++)
    add(user, "train_random", dt_options[d]);
}
