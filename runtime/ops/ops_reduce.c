/* Reductions: kiln_reduce, kiln_dot, kiln_reduce_rows, kiln_reduce_cols
 * (contracts in kiln/kiln_ops.h; kernels in cl_kernels/reduce.cl).
 *
 * Every reduction is "rows" or "columns" of a row-major matrix (a vector is
 * one row). The host splits each row (or each block of columns) into
 * `segs` segments so there are enough workers to fill the device:
 * - CPU family (PoCL): a worker is one work-item that walks a long contiguous
 *   segment with 16-wide vector accumulators. PLATFORM-FACTS measured this
 *   at the speed of an OpenMP loop, where a __local tree got under 10%.
 *   Work-groups of reduce_wg items (PoCL runs a group on one thread) and an
 *   explicit local size, because PoCL's default puts a small range in one
 *   group on one thread.
 * - GPU family: a worker is a work-group whose items stride through the
 *   segment (coalesced loads) and combine in a __local tree. Its kernels
 *   have a parameter space (work-group size, vectors per work-item, vector
 *   width, partials per compute unit: below) whose point comes from a
 *   tuning file or the profile (tune/tune.h).
 * With one segment per row the row kernel writes the result itself;
 * otherwise it writes one partial state per segment into the queue's
 * workspace and a final kernel combines them in segment order. The split
 * depends only on the sizes, the profile and the device's compute units, so
 * results are bit-for-bit repeatable on a device.
 *
 * Workspace: outputs x segs x 8 bytes when segs > 1; with the defaults at
 * most 4 x compute units x reduce_wg states (4 KiB on a 2-core PoCL), more
 * only when there are few long columns. */
#include "ops_internal.h"

#include <stdio.h>

/* Column block of the CPU family's column kernel (64 bytes of f32). */
#define CPU_CB 16

enum { OP_DOT = KILN_REDUCE_ARGMAX + 1 }; /* internal: dot shares the path */

static const char *const op_names[] = {
    [KILN_REDUCE_SUM] = "sum",       [KILN_REDUCE_MIN] = "min",
    [KILN_REDUCE_MAX] = "max",       [KILN_REDUCE_MEAN] = "mean",
    [KILN_REDUCE_NRM2] = "nrm2",     [KILN_REDUCE_ARGMAX] = "argmax",
    [OP_DOT] = "dot",
};
static const char *const trace_vec[] = {
    [KILN_REDUCE_SUM] = "reduce.sum",     [KILN_REDUCE_MIN] = "reduce.min",
    [KILN_REDUCE_MAX] = "reduce.max",     [KILN_REDUCE_MEAN] = "reduce.mean",
    [KILN_REDUCE_NRM2] = "reduce.nrm2",   [KILN_REDUCE_ARGMAX] = "reduce.argmax",
    [OP_DOT] = "dot",
};
static const char *const trace_rows[] = {
    [KILN_REDUCE_SUM] = "reduce_rows.sum",
    [KILN_REDUCE_MIN] = "reduce_rows.min",
    [KILN_REDUCE_MAX] = "reduce_rows.max",
    [KILN_REDUCE_MEAN] = "reduce_rows.mean",
    [KILN_REDUCE_NRM2] = "reduce_rows.nrm2",
    [KILN_REDUCE_ARGMAX] = "reduce_rows.argmax",
};
static const char *const trace_cols[] = {
    [KILN_REDUCE_SUM] = "reduce_cols.sum",
    [KILN_REDUCE_MIN] = "reduce_cols.min",
    [KILN_REDUCE_MAX] = "reduce_cols.max",
    [KILN_REDUCE_MEAN] = "reduce_cols.mean",
    [KILN_REDUCE_NRM2] = "reduce_cols.nrm2",
    [KILN_REDUCE_ARGMAX] = "reduce_cols.argmax",
};

enum { K_WG = KILN__REDUCE_WG, K_PARTS = KILN__REDUCE_PARTS };

static size_t compute_units(const kiln_context *ctx) {
  return ctx->device != NULL && ctx->device->info.compute_units
             ? ctx->device->info.compute_units
             : 1;
}

/* What the profile (CPU family) or the point in effect (GPU family) asks
 * for, defaults applied. */
struct params {
  bool cpu;
  size_t wg;        /* CPU: items per group; GPU: items per worker group */
  size_t min_chunk; /* fewest elements worth a worker of their own */
  size_t target;    /* workers wanted in flight */
  const char *options; /* buf (CPU family) or the variant's (GPU) */
  char buf[128];
};

static kiln_status get_params(const kiln_context *ctx, kiln_dtype dtype,
                              struct params *p) {
  const struct kiln_tuning *t = kiln__ops_tuning(ctx);
  const size_t cus = compute_units(ctx);
  p->cpu = t->family == KILN_FAMILY_CPU;
  p->min_chunk = kiln__ops_tune(t->reduce_chunk, 4096);
  if (p->cpu) {
    p->wg = kiln__ops_local_size(ctx, kiln__ops_tune(t->reduce_wg, 16));
    /* Four groups of items per core balance uneven cores. */
    p->target = kiln__ops_tune(t->reduce_workers, (unsigned)(4 * cus * p->wg));
    p->options = p->buf;
    snprintf(p->buf, sizeof p->buf,
             "-DDT=%d -DFAMILY=1 -DWG=%zu -DCB=%d", (int)dtype, p->wg, CPU_CB);
    return KILN_OK;
  }
  /* GPU: PARTS work-groups per compute unit hide memory latency. */
  const struct kiln__variant *v;
  kiln_status s = kiln__variant_get(ctx, KILN__TUNED_REDUCE, dtype, &v);
  if (s != KILN_OK)
    return s;
  p->wg = v->point.v[K_WG];
  p->target = (size_t)v->point.v[K_PARTS] * cus;
  p->options = v->options; /* lives as long as ctx */
  return s;
}

/* Split each of `outputs` runs of `len` elements into segments: as many as
 * it takes to have about `target` workers, none shorter than min_len, each
 * a multiple of `align` long. */
static void split(size_t outputs, size_t len, size_t target, size_t min_len,
                  size_t align, size_t *segs, size_t *seg_len) {
  size_t want = outputs >= target ? 1 : kiln__div_up(target, outputs);
  size_t most = kiln__div_up(len, min_len ? min_len : 1);
  size_t n = want < most ? want : most;
  if (n < 1)
    n = 1;
  size_t l = kiln__div_up(kiln__div_up(len, n), align) * align;
  *seg_len = l;
  *segs = kiln__div_up(len, l);
}

/* The final pass over partial states: one work-item per output. */
static kiln_status run_final(struct kiln__op *op, const struct params *p,
                             int opi, cl_mem part, size_t segs, size_t outputs,
                             const kiln_buffer *result, size_t result_offset,
                             float count) {
  char kname[32];
  snprintf(kname, sizeof kname, "final_%s", op_names[opi]);
  cl_kernel k = NULL;
  cl_uint sg = (cl_uint)segs;
  cl_ulong no = outputs, ro = result_offset;
  kiln_status s = kiln__op_kernel(
      op, "reduce", p->options, kname, &k, 6, KILN__ARG(part), KILN__ARG(sg),
      KILN__ARG(no), KILN__ARG(result->cl), KILN__ARG(ro), KILN__ARG(count));
  KILN__CHECK(s, kiln__op_launch_1d(op, k, outputs,
                           kiln__ops_local_size(op->queue->ctx, 64)));
  return s;
}

/* Rows (a vector is rows = 1) of x, or x . y for dot. */
static kiln_status run_rows(struct kiln__op *op, int opi, kiln_dtype dtype,
                            size_t rows, size_t cols, const kiln_buffer *x,
                            size_t x_offset, const kiln_buffer *y,
                            size_t y_offset, const kiln_buffer *result,
                            size_t result_offset) {
  struct params p;
  kiln_status s = get_params(op->queue->ctx, dtype, &p);
  if (s != KILN_OK)
    return s;
  size_t segs, seg_len;
  split(rows, cols, p.target, p.min_chunk, 16, &segs, &seg_len);
  if (segs > UINT32_MAX)
    return kiln__fail(KILN_ERR_INVALID_SIZE, "%s: too many segments", op->fn);
  cl_mem part = NULL;
  size_t states = rows * segs, bytes = 0; /* rows * segs <= about target */
  if (segs > 1) {
    KILN__CHECK(s, kiln__mul_overflows(states, 8, &bytes)
              ? kiln__fail(KILN_ERR_INVALID_SIZE, "%s: workspace size", op->fn)
              : KILN_OK);
    KILN__CHECK(s, kiln__op_workspace(op, bytes, &part));
  }
  char kname[32];
  snprintf(kname, sizeof kname, "rows_%s", op_names[opi]);
  cl_kernel k = NULL;
  cl_ulong xo = x_offset, yo = y_offset, nr = rows, nc = cols, sl = seg_len;
  cl_ulong ro = result_offset;
  cl_uint sg = (cl_uint)segs;
  float count = (float)cols;
  KILN__CHECK(s, kiln__op_kernel(op, "reduce", p.options, kname, &k, 12,
                        KILN__ARG(x->cl), KILN__ARG(xo), KILN__ARG(y->cl),
                        KILN__ARG(yo), KILN__ARG(nr), KILN__ARG(nc),
                        KILN__ARG(sl), KILN__ARG(sg), KILN__ARG(part),
                        KILN__ARG(result->cl), KILN__ARG(ro),
                        KILN__ARG(count)));
  if (p.cpu) {
    KILN__CHECK(s, kiln__op_launch_1d(op, k, states, p.wg));
  } else {
    size_t items;
    KILN__CHECK(s, kiln__mul_overflows(states, p.wg, &items)
              ? kiln__fail(KILN_ERR_INVALID_SIZE, "%s: too many work-items",
                           op->fn)
              : KILN_OK);
    KILN__CHECK(s, kiln__op_launch_1d(op, k, items, p.wg));
  }
  if (segs > 1)
    KILN__CHECK(s, run_final(op, &p, opi, part, segs, rows, result, result_offset,
                    count));
  return s;
}

static kiln_status run_cols(struct kiln__op *op, int opi, kiln_dtype dtype,
                            size_t rows, size_t cols, const kiln_buffer *x,
                            size_t x_offset, const kiln_buffer *result,
                            size_t result_offset) {
  struct params p;
  kiln_status s = get_params(op->queue->ctx, dtype, &p);
  if (s != KILN_OK)
    return s;
  size_t cb = p.cpu ? CPU_CB : 1;
  size_t blocks = kiln__div_up(cols, cb);
  /* GPU: workers are single items here, so want a group's worth per
   * worker group of the row kernels. */
  size_t target = p.cpu ? p.target : p.target * p.wg;
  size_t min_rows = p.cpu ? kiln__div_up(p.min_chunk, cb) : 64;
  size_t segs, seg_len;
  split(blocks, rows, target, min_rows, 1, &segs, &seg_len);
  if (segs > UINT32_MAX)
    return kiln__fail(KILN_ERR_INVALID_SIZE, "%s: too many segments", op->fn);
  cl_mem part = NULL;
  size_t bytes = 0;
  if (segs > 1) {
    KILN__CHECK(s, kiln__mul_overflows(cols, segs * 8, &bytes)
              ? kiln__fail(KILN_ERR_INVALID_SIZE, "%s: workspace size", op->fn)
              : KILN_OK);
    KILN__CHECK(s, kiln__op_workspace(op, bytes, &part));
  }
  char kname[32];
  snprintf(kname, sizeof kname, "cols_%s", op_names[opi]);
  cl_kernel k = NULL;
  cl_ulong xo = x_offset, nr = rows, nc = cols, sl = seg_len;
  cl_ulong ro = result_offset;
  cl_uint sg = (cl_uint)segs;
  float count = (float)rows;
  KILN__CHECK(s, kiln__op_kernel(op, "reduce", p.options, kname, &k, 10,
                        KILN__ARG(x->cl), KILN__ARG(xo), KILN__ARG(nr),
                        KILN__ARG(nc), KILN__ARG(sl), KILN__ARG(sg),
                        KILN__ARG(part), KILN__ARG(result->cl), KILN__ARG(ro),
                        KILN__ARG(count)));
  KILN__CHECK(s, kiln__op_launch_1d(op, k, blocks * segs, p.wg));
  if (segs > 1)
    KILN__CHECK(s, run_final(op, &p, opi, part, segs, cols, result, result_offset,
                    count));
  return s;
}

static kiln_status check_op(const char *fn, kiln_reduce_op op) {
  if ((unsigned)op > KILN_REDUCE_ARGMAX)
    return kiln__fail(KILN_ERR_INVALID_ARGUMENT,
                      "%s: op %d is not a kiln_reduce_op", fn, (int)op);
  return KILN_OK;
}

static kiln_dtype result_dtype(int opi) {
  return opi == KILN_REDUCE_ARGMAX ? KILN_U32 : KILN_F32;
}

/* Indexes are u32 and 0xffffffff marks "none yet". */
static kiln_status check_index_range(const char *fn, int opi, const char *what,
                                     size_t len) {
  if (opi == KILN_REDUCE_ARGMAX && len >= UINT32_MAX)
    return kiln__fail(KILN_ERR_INVALID_SIZE,
                      "%s: argmax over %s %zu elements long: indexes are u32, "
                      "so at most %u",
                      fn, what, len, UINT32_MAX - 1);
  return KILN_OK;
}

static double flops_per(int opi) {
  return opi == OP_DOT || opi == KILN_REDUCE_NRM2 ? 2.0 : 1.0;
}

KILN_API kiln_status kiln_reduce(kiln_queue *queue, kiln_reduce_op op,
                                 const kiln_range *xr, const kiln_range *rr,
                                 size_t num_wait, kiln_event *const *wait_list,
                                 kiln_event **out_event) {
  static const char fn[] = "kiln_reduce";
  kiln_status s = kiln__ops_check_queue(fn, queue);
  KILN__CHECK(s, check_op(fn, op));
  KILN__CHECK(s, kiln__ops_check_desc(fn, "x", xr));
  if (s != KILN_OK)
    return s;
  KILN__CHECK(s, kiln__ops_check_result(fn, "result", rr, 1, result_dtype(op),
                               op == KILN_REDUCE_ARGMAX ? "ARGMAX"
                                                        : "a reduction"));
  if (s != KILN_OK)
    return s;
  const size_t n = xr->count;
  const kiln_dtype dtype = xr->dtype;
  const kiln_buffer *x = xr->buffer;
  kiln_buffer *result = rr->buffer;
  const size_t x_offset = xr->offset, result_offset = rr->offset;
  KILN__CHECK(s, kiln__ops_check_dtype(fn, "x.dtype", dtype, KILN__DT_FLOATS));
  KILN__CHECK(s, kiln__ops_check_in(fn, queue, "x", x, x_offset, n, dtype));
  KILN__CHECK(s, check_index_range(fn, op, "a vector", n));
  KILN__CHECK(s, kiln__ops_check_out(fn, queue, "result", result, result_offset,
                            n ? 1 : 0, result_dtype(op)));
  KILN__CHECK(s, kiln__ops_check_overlap(fn, "x", x, x_offset, n, dtype, "result",
                                result, result_offset, 1, result_dtype(op),
                                false));
  if (s != KILN_OK)
    return s;
  struct kiln__op o;
  if ((s = kiln__op_begin(&o, queue, fn, num_wait, wait_list, out_event)))
    return s;
  kiln__op_describe(&o, trace_vec[op], dtype, 1, &n,
                    (double)kiln_dtype_size(dtype) * n + 4,
                    flops_per(op) * n);
  if (n > 0)
    s = run_rows(&o, op, dtype, 1, n, x, x_offset, x, x_offset, result,
                 result_offset);
  return kiln__op_end(&o, s, out_event);
}

KILN_API kiln_status kiln_dot(kiln_queue *queue, const kiln_range *xr,
                              const kiln_range *yr, const kiln_range *rr,
                              size_t num_wait, kiln_event *const *wait_list,
                              kiln_event **out_event) {
  static const char fn[] = "kiln_dot";
  kiln_status s = kiln__ops_check_queue(fn, queue);
  KILN__CHECK(s, kiln__ops_check_agree(fn, "x", xr, "y", yr));
  KILN__CHECK(s, kiln__ops_check_result(fn, "result", rr, 1, KILN_F32, "a dot product"));
  if (s != KILN_OK)
    return s;
  const size_t n = xr->count;
  const kiln_dtype dtype = xr->dtype;
  const kiln_buffer *x = xr->buffer, *y = yr->buffer;
  kiln_buffer *result = rr->buffer;
  const size_t x_offset = xr->offset, y_offset = yr->offset,
               result_offset = rr->offset;
  KILN__CHECK(s, kiln__ops_check_dtype(fn, "x.dtype", dtype, KILN__DT_FLOATS));
  KILN__CHECK(s, kiln__ops_check_in(fn, queue, "x", x, x_offset, n, dtype));
  KILN__CHECK(s, kiln__ops_check_in(fn, queue, "y", y, y_offset, n, dtype));
  KILN__CHECK(s, kiln__ops_check_out(fn, queue, "result", result, result_offset,
                            n ? 1 : 0, KILN_F32));
  KILN__CHECK(s, kiln__ops_check_overlap(fn, "x", x, x_offset, n, dtype, "result",
                                result, result_offset, 1, KILN_F32, false));
  KILN__CHECK(s, kiln__ops_check_overlap(fn, "y", y, y_offset, n, dtype, "result",
                                result, result_offset, 1, KILN_F32, false));
  if (s != KILN_OK)
    return s;
  struct kiln__op o;
  if ((s = kiln__op_begin(&o, queue, fn, num_wait, wait_list, out_event)))
    return s;
  kiln__op_describe(&o, trace_vec[OP_DOT], dtype, 1, &n,
                    2.0 * (double)kiln_dtype_size(dtype) * n + 4, 2.0 * n);
  if (n > 0)
    s = run_rows(&o, OP_DOT, dtype, 1, n, x, x_offset, y, y_offset, result,
                 result_offset);
  return kiln__op_end(&o, s, out_event);
}

/* Checks shared by the row and column forms; `along` is the reduced
 * length, `outputs` the number of results. */
static kiln_status check_matrix(const char *fn, kiln_queue *queue,
                                kiln_reduce_op op, kiln_dtype dtype,
                                size_t rows, size_t cols, const kiln_buffer *x,
                                size_t x_offset, const kiln_buffer *result,
                                size_t result_offset, bool by_rows) {
  size_t count = 0;
  size_t along = by_rows ? cols : rows, outputs = by_rows ? rows : cols;
  kiln_status s = kiln__ops_check_queue(fn, queue);
  KILN__CHECK(s, check_op(fn, op));
  KILN__CHECK(s, kiln__ops_check_dtype(fn, "x.dtype", dtype, KILN__DT_FLOATS));
  KILN__CHECK(s, kiln__ops_check_shape(fn, rows, cols, &count));
  if (s == KILN_OK && along == 0 && outputs > 0)
    s = kiln__fail(KILN_ERR_INVALID_SIZE,
                   "%s: %s is 0 with %s %zu: each result would reduce "
                   "nothing",
                   fn, by_rows ? "cols" : "rows", by_rows ? "rows" : "cols",
                   outputs);
  KILN__CHECK(s, check_index_range(fn, op, by_rows ? "rows" : "columns", along));
  KILN__CHECK(s, kiln__ops_check_in(fn, queue, "x", x, x_offset, count, dtype));
  KILN__CHECK(s, kiln__ops_check_out(fn, queue, "result", result, result_offset,
                            count ? outputs : 0, result_dtype(op)));
  KILN__CHECK(s, kiln__ops_check_overlap(fn, "x", x, x_offset, count, dtype, "result",
                                result, result_offset, count ? outputs : 0,
                                result_dtype(op), false));
  return s;
}

/* kiln_reduce_rows (by_rows) or kiln_reduce_cols. */
static kiln_status reduce_matrix(const char *fn, kiln_queue *queue,
                                 kiln_reduce_op op, const kiln_matrix *xm,
                                 const kiln_range *rr, bool by_rows,
                                 size_t num_wait, kiln_event *const *wait_list,
                                 kiln_event **out_event) {
  kiln_status s = kiln__ops_check_queue(fn, queue);
  KILN__CHECK(s, check_op(fn, op));
  KILN__CHECK(s, kiln__ops_check_rows_matrix(fn, "x", xm));
  if (s != KILN_OK)
    return s;
  KILN__CHECK(s, kiln__ops_check_result(
      fn, "result", rr, by_rows ? xm->rows : xm->cols, result_dtype(op),
      by_rows ? "one result per row of x" : "one result per column of x"));
  if (s != KILN_OK)
    return s;
  const size_t rows = xm->rows, cols = xm->cols, x_offset = xm->offset,
               result_offset = rr->offset;
  const kiln_dtype dtype = xm->dtype;
  const kiln_buffer *x = xm->buffer;
  kiln_buffer *result = rr->buffer;
  s = check_matrix(fn, queue, op, dtype, rows, cols, x, x_offset, result,
                   result_offset, by_rows);
  if (s != KILN_OK)
    return s;
  struct kiln__op o;
  if ((s = kiln__op_begin(&o, queue, fn, num_wait, wait_list, out_event)))
    return s;
  size_t shape[2] = {rows, cols}, outputs = by_rows ? rows : cols;
  double count = (double)rows * (double)cols;
  kiln__op_describe(&o, by_rows ? trace_rows[op] : trace_cols[op], dtype, 2,
                    shape,
                    (double)kiln_dtype_size(dtype) * count + 4.0 * outputs,
                    flops_per(op) * count);
  if (outputs > 0)
    s = by_rows ? run_rows(&o, op, dtype, rows, cols, x, x_offset, x,
                           x_offset, result, result_offset)
                : run_cols(&o, op, dtype, rows, cols, x, x_offset, result,
                           result_offset);
  return kiln__op_end(&o, s, out_event);
}

KILN_API kiln_status kiln_reduce_rows(kiln_queue *queue, kiln_reduce_op op,
                                      const kiln_matrix *x,
                                      const kiln_range *result, size_t num_wait,
                                      kiln_event *const *wait_list,
                                      kiln_event **out_event) {
  return reduce_matrix("kiln_reduce_rows", queue, op, x, result, true, num_wait,
                       wait_list, out_event);
}

KILN_API kiln_status kiln_reduce_cols(kiln_queue *queue, kiln_reduce_op op,
                                      const kiln_matrix *x,
                                      const kiln_range *result, size_t num_wait,
                                      kiln_event *const *wait_list,
                                      kiln_event **out_event) {
  return reduce_matrix("kiln_reduce_cols", queue, op, x, result, false,
                       num_wait, wait_list, out_event);
}

void kiln__ops_warm_reduce(const kiln_context *ctx, kiln__warm_add_fn add,
                           void *user) {
  const kiln_dtype dts[] = {KILN_F32, KILN_F16, KILN_BF16};
  for (size_t i = 0; i < sizeof dts / sizeof *dts; i++) {
    struct params p;
    if (get_params(ctx, dts[i], &p) == KILN_OK)
      add(user, "reduce", p.options);
  }
}
