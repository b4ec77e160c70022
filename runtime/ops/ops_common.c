/* The op library's common plumbing: argument checks, the launch path
 * (wait list, out event, zero-size no-ops, tracing) and the per-queue
 * workspace. See ops_internal.h for how an op uses it. */
#include "ops_internal.h"

#include <stdint.h>
#include <stdio.h>

/* ---- argument checks ----------------------------------------------------- */

kiln_status kiln__ops_check_queue(const char *fn, const kiln_queue *queue) {
  if (queue == NULL)
    return kiln__fail(KILN_ERR_NULL_POINTER, "%s: queue is NULL", fn);
  return KILN_OK;
}

kiln_status kiln__ops_check_dtype(const char *fn, const char *what,
                                  kiln_dtype dtype, unsigned allowed) {
  unsigned bit = (unsigned)dtype < 32 ? KILN__DT(dtype) : 0;
  if (kiln_dtype_size(dtype) != 0 && (allowed & bit) != 0)
    return KILN_OK;
  /* List what the op does take, so the message tells the fix. */
  char list[64] = "";
  size_t used = 0;
  for (unsigned d = KILN_F32; d <= KILN_U32; d++) {
    if (!(allowed & KILN__DT(d)))
      continue;
    int w = snprintf(list + used, sizeof list - used, "%s%s",
                     used ? ", " : "", kiln_dtype_name((kiln_dtype)d));
    if (w < 0 || (size_t)w >= sizeof list - used)
      break;
    used += (size_t)w;
  }
  if (kiln_dtype_size(dtype) == 0)
    return kiln__fail(KILN_ERR_INVALID_ARGUMENT,
                      "%s: %s %d is not a kiln_dtype (this op takes %s)", fn,
                      what, (int)dtype, list);
  return kiln__fail(KILN_ERR_INVALID_ARGUMENT,
                    "%s: %s %s is not supported by this op (it takes %s)", fn,
                    what, kiln_dtype_name(dtype), list);
}

kiln_status kiln__ops_check_range(const char *fn, const kiln_queue *queue,
                                  const char *what, const kiln_buffer *buffer,
                                  size_t offset, size_t count,
                                  kiln_dtype dtype) {
  if (buffer == NULL)
    return kiln__fail(KILN_ERR_NULL_POINTER, "%s: %s is NULL", fn, what);
  if (buffer->ctx != queue->ctx)
    return kiln__fail(KILN_ERR_WRONG_CONTEXT,
                      "%s: %s belongs to a different context than queue", fn,
                      what);
  size_t esize = kiln_dtype_size(dtype);
  size_t end, end_bytes;
  if (kiln__add_overflows(offset, count, &end) ||
      kiln__mul_overflows(end, esize, &end_bytes))
    return kiln__fail(KILN_ERR_INVALID_SIZE,
                      "%s: %s.offset %zu + %zu elements of %s overflows size_t",
                      fn, what, offset, count, kiln_dtype_name(dtype));
  if (end_bytes > buffer->size) {
    size_t have = buffer->size / esize;
    if (offset > have)
      return kiln__fail(KILN_ERR_OUT_OF_RANGE,
                        "%s: %s.offset %zu is beyond %s's %zu elements of %s "
                        "(%zu bytes)",
                        fn, what, offset, what, have, kiln_dtype_name(dtype),
                        buffer->size);
    return kiln__fail(KILN_ERR_OUT_OF_RANGE,
                      "%s: %s range [offset %zu, +%zu elements of %s) exceeds "
                      "the buffer's %zu elements (%zu bytes)",
                      fn, what, offset, count, kiln_dtype_name(dtype), have,
                      buffer->size);
  }
  /* Every buffer an op uses passes here: a recording keeps it alive. */
  return kiln__ops_record_buffer(queue, buffer);
}

kiln_status kiln__ops_record_buffer(const kiln_queue *queue,
                                    const kiln_buffer *buffer) {
  /* The count it raises is bookkeeping, not the buffer's contents. */
  if (queue->recorder != NULL)
    return queue->recorder->use_buffer(queue->recorder,
                                       (kiln_buffer *)(uintptr_t)buffer);
  return KILN_OK;
}

/* kiln__ops_check_range, then the buffer must not carry flag, which forbids
 * how the op uses it (use: "read", "written"; flag_name spells flag). */
static kiln_status check_access(const char *fn, const kiln_queue *queue,
                                const char *what, const kiln_buffer *buffer,
                                size_t offset, size_t count, kiln_dtype dtype,
                                unsigned flag, const char *use,
                                const char *flag_name) {
  kiln_status s =
      kiln__ops_check_range(fn, queue, what, buffer, offset, count, dtype);
  if (s == KILN_OK && (buffer->flags & flag))
    s = kiln__fail(KILN_ERR_INVALID_ARGUMENT,
                   "%s: %s is %s by the op but was created %s", fn, what, use,
                   flag_name);
  return s;
}

kiln_status kiln__ops_check_in(const char *fn, const kiln_queue *queue,
                               const char *what, const kiln_buffer *buffer,
                               size_t offset, size_t count, kiln_dtype dtype) {
  return check_access(fn, queue, what, buffer, offset, count, dtype,
                      KILN_MEM_WRITE_ONLY, "read", "KILN_MEM_WRITE_ONLY");
}

kiln_status kiln__ops_check_out(const char *fn, const kiln_queue *queue,
                                const char *what, const kiln_buffer *buffer,
                                size_t offset, size_t count, kiln_dtype dtype) {
  return check_access(fn, queue, what, buffer, offset, count, dtype,
                      KILN_MEM_READ_ONLY, "written", "KILN_MEM_READ_ONLY");
}

kiln_status kiln__ops_check_map(const char *fn, const kiln_queue *queue,
                                const char *x_what, const kiln_buffer *x,
                                size_t x_offset, const kiln_buffer *y,
                                size_t y_offset, size_t count,
                                kiln_dtype dtype) {
  kiln_status s =
      kiln__ops_check_in(fn, queue, x_what, x, x_offset, count, dtype);
  if (s == KILN_OK)
    s = kiln__ops_check_out(fn, queue, "y", y, y_offset, count, dtype);
  if (s == KILN_OK)
    s = kiln__ops_check_overlap(fn, x_what, x, x_offset, count, dtype, "y", y,
                                y_offset, count, dtype, true);
  return s;
}

/* The buffer at the root of a view and the view's byte origin in it. */
static const kiln_buffer *root_of(const kiln_buffer *b, size_t *origin) {
  *origin = b->parent != NULL ? b->origin : 0;
  return b->parent != NULL ? b->parent : b;
}

kiln_status kiln__ops_check_overlap(const char *fn, const char *a_what,
                                    const kiln_buffer *a, size_t a_offset,
                                    size_t a_count, kiln_dtype a_dtype,
                                    const char *b_what, const kiln_buffer *b,
                                    size_t b_offset, size_t b_count,
                                    kiln_dtype b_dtype, bool same_ok) {
  size_t a_origin, b_origin;
  if (a_count == 0 || b_count == 0 ||
      root_of(a, &a_origin) != root_of(b, &b_origin))
    return KILN_OK;
  /* Ranges were checked against their buffers, so none of this overflows. */
  size_t as = kiln_dtype_size(a_dtype), bs = kiln_dtype_size(b_dtype);
  size_t a0 = a_origin + a_offset * as, a1 = a0 + a_count * as;
  size_t b0 = b_origin + b_offset * bs, b1 = b0 + b_count * bs;
  if (a1 <= b0 || b1 <= a0)
    return KILN_OK;
  if (same_ok && a0 == b0 && a1 == b1 && as == bs)
    return KILN_OK;
  return kiln__fail(KILN_ERR_INVALID_ARGUMENT,
                    "%s: %s bytes [%zu, %zu) and %s bytes [%zu, %zu) overlap "
                    "in the same buffer%s",
                    fn, a_what, a0, a1, b_what, b0, b1,
                    same_ok ? " (only the very same range is allowed)" : "");
}

/* ---- descriptors --------------------------------------------------------- */

kiln_status kiln__ops_check_desc(const char *fn, const char *what,
                                 const void *desc) {
  if (desc == NULL)
    return kiln__fail(KILN_ERR_NULL_POINTER, "%s: %s is NULL", fn, what);
  return KILN_OK;
}

kiln_status kiln__ops_check_agree(const char *fn, const char *a_what,
                                  const kiln_range *a, const char *b_what,
                                  const kiln_range *b) {
  kiln_status s = kiln__ops_check_desc(fn, a_what, a);
  if (s == KILN_OK)
    s = kiln__ops_check_desc(fn, b_what, b);
  if (s == KILN_OK && (a->count != b->count || a->dtype != b->dtype))
    s = kiln__fail(KILN_ERR_SHAPE_MISMATCH,
                   "%s: %s (%zu elements of %s) and %s (%zu elements of %s) "
                   "disagree: the op needs one count and one dtype",
                   fn, a_what, a->count, kiln_dtype_name(a->dtype), b_what,
                   b->count, kiln_dtype_name(b->dtype));
  return s;
}

kiln_status kiln__ops_check_map_ranges(const char *fn, const kiln_queue *queue,
                                       const char *x_what, const kiln_range *x,
                                       const char *y_what, const kiln_range *y,
                                       unsigned dtypes) {
  kiln_status s = kiln__ops_check_agree(fn, x_what, x, y_what, y);
  if (s == KILN_OK) {
    char what[64];
    snprintf(what, sizeof what, "%s.dtype", x_what);
    s = kiln__ops_check_dtype(fn, what, x->dtype, dtypes);
  }
  if (s == KILN_OK)
    s = kiln__ops_check_map(fn, queue, x_what, x->buffer, x->offset, y->buffer,
                            y->offset, x->count, x->dtype);
  return s;
}

kiln_status kiln__ops_check_result(const char *fn, const char *what,
                                   const kiln_range *r, size_t count,
                                   kiln_dtype dtype, const char *because) {
  kiln_status s = kiln__ops_check_desc(fn, what, r);
  if (s == KILN_OK && (r->count != count || r->dtype != dtype))
    s = kiln__fail(KILN_ERR_SHAPE_MISMATCH,
                   "%s: %s holds %zu elements of %s but %s needs %zu of %s", fn,
                   what, r->count, kiln_dtype_name(r->dtype), because, count,
                   kiln_dtype_name(dtype));
  return s;
}

kiln_status kiln__ops_check_unpacked(const char *fn, const char *what,
                                     const kiln_matrix *x) {
  if (x->packed != NULL)
    return kiln__fail(KILN_ERR_INVALID_ARGUMENT,
                      "%s: %s.packed is set: only kiln_matmul's a and b take "
                      "packed operands",
                      fn, what);
  return KILN_OK;
}

kiln_status kiln__ops_check_matrix(const char *fn, const char *what,
                                   const kiln_matrix *x, size_t *ld) {
  kiln_status s = kiln__ops_check_desc(fn, what, x);
  if (s == KILN_OK)
    s = kiln__ops_check_unpacked(fn, what, x);
  if (s != KILN_OK)
    return s;
  if ((unsigned)x->layout > KILN_COL_MAJOR)
    return kiln__fail(KILN_ERR_INVALID_ARGUMENT,
                      "%s: %s.layout %d is not a valid kiln_layout", fn, what,
                      (int)x->layout);
  if ((unsigned)x->trans > KILN_TRANS)
    return kiln__fail(KILN_ERR_INVALID_ARGUMENT,
                      "%s: %s.trans %d is not a valid kiln_trans", fn, what,
                      (int)x->trans);
  const bool row = x->layout == KILN_ROW_MAJOR;
  const size_t len = row ? x->cols : x->rows;
  const size_t min = len > 1 ? len : 1;
  *ld = x->ld != 0 ? x->ld : min;
  if (*ld < min)
    return kiln__fail(KILN_ERR_INVALID_ARGUMENT,
                      "%s: %s.ld %zu is less than %zu, the %s length of %s as "
                      "stored (%zu x %zu, %s)",
                      fn, what, *ld, min, row ? "row" : "column", what, x->rows,
                      x->cols, row ? "row-major" : "column-major");
  return KILN_OK;
}

kiln_status kiln__ops_check_rows_matrix(const char *fn, const char *what,
                                        const kiln_matrix *x) {
  size_t ld = 0; /* set when the check passes; 0 quiets gcc -O3 */
  kiln_status s = kiln__ops_check_matrix(fn, what, x, &ld);
  static const char takes[] =
      "(row ops take one row-major matrix with contiguous rows: layout "
      "KILN_ROW_MAJOR, trans KILN_NO_TRANS, ld 0 or cols, batch_stride 0)";
  if (s == KILN_OK && x->layout != KILN_ROW_MAJOR)
    s = kiln__fail(KILN_ERR_INVALID_ARGUMENT,
                   "%s: %s.layout is KILN_COL_MAJOR %s", fn, what, takes);
  if (s == KILN_OK && x->trans != KILN_NO_TRANS)
    s = kiln__fail(KILN_ERR_INVALID_ARGUMENT, "%s: %s.trans is KILN_TRANS %s",
                   fn, what, takes);
  if (s == KILN_OK && ld != (x->cols > 1 ? x->cols : 1))
    s = kiln__fail(KILN_ERR_INVALID_ARGUMENT,
                   "%s: %s.ld %zu is not %s's %zu columns %s", fn, what, ld,
                   what, x->cols, takes);
  if (s == KILN_OK && x->batch_stride != 0)
    s = kiln__fail(KILN_ERR_INVALID_ARGUMENT,
                   "%s: %s.batch_stride %zu is not 0 %s", fn, what,
                   x->batch_stride, takes);
  return s;
}

kiln_status kiln__ops_check_same_matrix(const char *fn, const char *a_what,
                                        const kiln_matrix *a,
                                        const char *b_what,
                                        const kiln_matrix *b) {
  if (a->rows != b->rows || a->cols != b->cols || a->dtype != b->dtype)
    return kiln__fail(KILN_ERR_SHAPE_MISMATCH,
                      "%s: %s (%zu x %zu %s) and %s (%zu x %zu %s) disagree: "
                      "the op needs one shape and one dtype",
                      fn, a_what, a->rows, a->cols, kiln_dtype_name(a->dtype),
                      b_what, b->rows, b->cols, kiln_dtype_name(b->dtype));
  return KILN_OK;
}

kiln_status kiln__ops_check_shape(const char *fn, size_t rows, size_t cols,
                                  size_t *count) {
  if (kiln__mul_overflows(rows, cols, count))
    return kiln__fail(KILN_ERR_INVALID_SIZE,
                      "%s: rows %zu x cols %zu overflows size_t", fn, rows,
                      cols);
  return KILN_OK;
}


/* ---- launching ----------------------------------------------------------- */

/* Trace op as one "kiln.op" event spanning its first to its last command,
 * with what kiln__op_describe recorded. */
static void trace_op(const struct kiln__op *op) {
  json_t *shape = json_array();
  for (unsigned i = 0; i < op->ndim && shape != NULL; i++)
    json_array_append_new(shape, json_integer((json_int_t)op->shape[i]));
  json_t *args = json_pack("{s:s, s:s, s:o*, s:f, s:f}", "op", op->name,
                           "dtype", kiln_dtype_name(op->dtype), "shape", shape,
                           "bytes", op->bytes, "flops", op->flops);
  kiln__trace_commands(op->queue, "kiln.op", op->name, args, op->first,
                       op->last, op->host_ns);
}

kiln_status kiln__op_begin(struct kiln__op *op, kiln_queue *queue,
                           const char *fn, size_t num_wait,
                           kiln_event *const *wait_list,
                           kiln_event **out_event) {
  op->queue = queue;
  op->fn = fn;
  op->name = fn;
  op->dtype = KILN_F32;
  op->ndim = 0;
  op->bytes = 0;
  op->flops = 0;
  op->wait = NULL;
  op->num_wait = 0;
  op->first = NULL;
  op->last = NULL;
  op->launches = 0;
  /* A recorded op runs at replay, which is traced and waited for as a
   * whole (kiln_sequence_replay). */
  if (queue->recorder != NULL && (num_wait > 0 || out_event != NULL))
    return kiln__fail(KILN_ERR_INVALID_STATE,
                      "%s: the queue is recording a sequence; recorded ops "
                      "take no wait list and give no event (pass them to "
                      "kiln_sequence_replay)",
                      fn);
  op->traced = queue->recorder == NULL && kiln__trace_enabled();
  op->want_event = out_event != NULL || op->traced;
  op->host_ns = op->traced ? kiln__now_ns() : 0;
  if (num_wait > UINT32_MAX)
    return kiln__fail(KILN_ERR_INVALID_SIZE,
                      "%s: num_wait %zu exceeds what OpenCL accepts", fn,
                      num_wait);
  kiln_status s =
      kiln__wait_list(queue, num_wait, wait_list, op->wait_inline, &op->wait);
  if (s != KILN_OK) {
    op->wait = NULL;
    return s;
  }
  op->num_wait = (cl_uint)num_wait;
  return KILN_OK;
}

void kiln__op_describe(struct kiln__op *op, const char *name, kiln_dtype dtype,
                       unsigned ndim, const size_t *shape, double bytes,
                       double flops) {
  op->name = name;
  op->dtype = dtype;
  op->ndim = ndim > 3 ? 3 : ndim;
  for (unsigned i = 0; i < op->ndim; i++)
    op->shape[i] = shape[i];
  op->bytes = bytes;
  op->flops = flops;
}

static kiln_status set_args(struct kiln__op *op, cl_kernel kernel,
                            cl_uint count, va_list ap) {
  for (cl_uint i = 0; i < count; i++) {
    struct kiln__arg a = va_arg(ap, struct kiln__arg);
    cl_int err = clSetKernelArg(kernel, i, a.size, a.value);
    if (err != CL_SUCCESS)
      return kiln__fail_cl(err, "clSetKernelArg", op->queue->ctx->device,
                           "%s: argument %u (%zu bytes) of the op kernel",
                           op->fn, (unsigned)i, a.size);
  }
  return KILN_OK;
}

kiln_status kiln__op_args(struct kiln__op *op, cl_kernel kernel, cl_uint count,
                          ...) {
  va_list ap;
  va_start(ap, count);
  kiln_status s = set_args(op, kernel, count, ap);
  va_end(ap);
  return s;
}

kiln_status kiln__op_kernel(struct kiln__op *op, const char *source,
                            const char *options, const char *name,
                            cl_kernel *out, cl_uint count, ...) {
  kiln_status s = kiln__queue_kernel(op->queue, source, options, name, out);
  if (s != KILN_OK)
    return s;
  va_list ap;
  va_start(ap, count);
  s = set_args(op, *out, count, ap);
  va_end(ap);
  return s;
}

static void release_wait(struct kiln__op *op) {
  if (op->wait != NULL)
    kiln__wait_list_free(op->wait, op->wait_inline);
  op->wait = NULL;
  op->num_wait = 0;
}

kiln_status kiln__op_launch(struct kiln__op *op, cl_kernel kernel,
                            cl_uint dims, const size_t *global,
                            const size_t *local) {
  if (op->queue->recorder != NULL) {
    kiln_status s = op->queue->recorder->launch(op->queue->recorder, kernel,
                                                NULL, dims, global, local);
    if (s == KILN_OK)
      op->launches++;
    return s;
  }
  cl_event ev = NULL;
  cl_uint nw = op->launches == 0 ? op->num_wait : 0;
  cl_int err = clEnqueueNDRangeKernel(op->queue->cl, kernel, dims, NULL,
                                      global, local, nw,
                                      nw ? op->wait : NULL,
                                      op->want_event ? &ev : NULL);
  if (err != CL_SUCCESS) {
    char name[64] = "?";
    clGetKernelInfo(kernel, CL_KERNEL_FUNCTION_NAME, sizeof name, name, NULL);
    name[sizeof name - 1] = '\0';
    return kiln__fail_cl(err, "clEnqueueNDRangeKernel", op->queue->ctx->device,
                         "%s: kernel %s, global %zu, local %zu", op->fn, name,
                         global[0], local[0]);
  }
  if (op->launches == 0)
    release_wait(op);
  op->launches++;
  if (ev == NULL)
    return KILN_OK;
  if (op->traced && op->first == NULL) {
    op->first = ev;
    clRetainEvent(ev);
  }
  if (op->last != NULL)
    clReleaseEvent(op->last);
  op->last = ev;
  return KILN_OK;
}

kiln_status kiln__op_launch_1d(struct kiln__op *op, cl_kernel kernel,
                               size_t items, size_t local) {
  size_t global;
  if (!kiln__ops_round_up(items, local, &global))
    return kiln__fail(KILN_ERR_INVALID_SIZE, "%s: too many work-items",
                      op->fn);
  return kiln__op_launch(op, kernel, 1, &global, &local);
}

kiln_status kiln__op_end(struct kiln__op *op, kiln_status status,
                         kiln_event **out_event) {
  if (status == KILN_OK && op->launches == 0 &&
      (out_event != NULL || op->num_wait > 0)) {
    /* A zero-size op: the marker keeps the promise that the out event (and,
     * in queue order, whatever follows) comes after the wait list. */
    cl_event ev = NULL;
    cl_int err = clEnqueueMarkerWithWaitList(
        op->queue->cl, op->num_wait, op->num_wait ? op->wait : NULL,
        out_event != NULL ? &ev : NULL);
    if (err != CL_SUCCESS)
      status = kiln__fail_cl(err, "clEnqueueMarkerWithWaitList",
                             op->queue->ctx->device,
                             "%s: completing a zero-size op", op->fn);
    else
      op->last = ev;
  }
  release_wait(op);
  if (status == KILN_OK && op->traced && op->launches > 0 &&
      op->first != NULL && op->last != NULL)
    trace_op(op);
  if (op->first != NULL)
    clReleaseEvent(op->first);
  op->first = NULL;
  cl_event last = op->last;
  op->last = NULL;
  if (status != KILN_OK) {
    if (last != NULL)
      clReleaseEvent(last);
    return status;
  }
  if (last == NULL)
    return KILN_OK;
  return kiln__event_out(op->queue, last, out_event);
}

/* ---- workspace ----------------------------------------------------------- */

/* The queue's op scratch, the op library's state on it. */
struct workspace {
  struct kiln__attached attached;
  cl_mem mem;
  size_t bytes;
};

static void workspace_destroy(struct kiln__attached *attached) {
  struct workspace *ws = (struct workspace *)attached;
  if (ws->mem != NULL)
    clReleaseMemObject(ws->mem);
  free(ws);
}

cl_mem kiln__op_workspace_held(const kiln_queue *queue, size_t *bytes) {
  const struct workspace *ws =
      (const struct workspace *)queue->attached[KILN__SLOT_OPS];
  *bytes = ws ? ws->bytes : 0;
  return ws ? ws->mem : NULL;
}

static kiln_status workspace(struct kiln__op *op, size_t bytes, cl_mem *out) {
  kiln_queue *q = op->queue;
  struct workspace *ws = (struct workspace *)q->attached[KILN__SLOT_OPS];
  if (ws != NULL && ws->mem != NULL && ws->bytes >= bytes) {
    *out = ws->mem;
    return KILN_OK;
  }
  if (ws == NULL) {
    ws = calloc(1, sizeof *ws);
    if (ws == NULL)
      return kiln__fail(KILN_ERR_OUT_OF_HOST_MEMORY,
                        "%s: cannot allocate the queue's op workspace",
                        op->fn);
    ws->attached.destroy = workspace_destroy;
    q->attached[KILN__SLOT_OPS] = &ws->attached;
  }
  /* Round up to 64 KiB so a run of slightly growing ops does not reallocate
   * every time. */
  size_t want;
  if (kiln__add_overflows(bytes, 65535, &want))
    return kiln__fail(KILN_ERR_INVALID_SIZE, "%s: workspace of %zu bytes",
                      op->fn, bytes);
  want &= ~(size_t)65535;
  if (want == 0)
    want = 65536;
  cl_int err = CL_SUCCESS;
  cl_mem mem = clCreateBuffer(q->ctx->cl, CL_MEM_READ_WRITE, want, NULL, &err);
  if (mem == NULL || err != CL_SUCCESS)
    return kiln__fail_cl(err != CL_SUCCESS ? err : CL_OUT_OF_RESOURCES,
                         "clCreateBuffer", q->ctx->device,
                         "%s: the queue's op workspace of %zu bytes", op->fn,
                         want);
  if (ws->mem != NULL)
    clReleaseMemObject(ws->mem);
  ws->mem = mem;
  ws->bytes = want;
  *out = mem;
  return KILN_OK;
}

kiln_status kiln__op_workspace(struct kiln__op *op, size_t bytes,
                               cl_mem *out) {
  kiln_status s = workspace(op, bytes, out);
  /* A recording keeps the scratch it captured, which a later, larger op may
   * replace on the queue. */
  if (s == KILN_OK && op->queue->recorder != NULL)
    s = op->queue->recorder->use_mem(op->queue->recorder, *out);
  return s;
}
