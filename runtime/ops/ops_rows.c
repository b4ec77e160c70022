/* Row ops: kiln_softmax_rows, kiln_layernorm_rows (contracts in
 * kiln/kiln_ops.h; kernels in cl_kernels/rows.cl).
 *
 * One worker per row: on the CPU family a work-item that makes three
 * vectorised passes over its row (cached between passes for rows up to a
 * few thousand elements), in groups of reduce_wg rows; on the GPU family a
 * work-group of reduce_wg items. A few very long rows therefore use few
 * cores; the ops are meant for the many-rows shapes of neural networks.
 * No workspace. */
#include "ops_train_internal.h" /* the row-kernel parameters */

#include <math.h>

/* Descriptor, shape, dtype and x/y checks shared by both ops. */
static kiln_status check_common(const char *fn, kiln_queue *queue,
                                const kiln_matrix *xm, const kiln_matrix *ym) {
  size_t count = 0;
  kiln_status s = kiln__ops_check_queue(fn, queue);
  KILN__CHECK(s, kiln__ops_check_rows_matrix(fn, "x", xm));
  KILN__CHECK(s, kiln__ops_check_rows_matrix(fn, "y", ym));
  KILN__CHECK(s, kiln__ops_check_same_matrix(fn, "x", xm, "y", ym));
  if (s != KILN_OK)
    return s;
  const size_t rows = xm->rows, cols = xm->cols;
  const kiln_dtype dtype = xm->dtype;
  KILN__CHECK(s, kiln__ops_check_dtype(fn, "x.dtype", dtype, KILN__DT_FLOATS));
  KILN__CHECK(s, kiln__ops_check_shape(fn, rows, cols, &count));
  if (s == KILN_OK && rows > 0 && cols == 0)
    s = kiln__fail(KILN_ERR_INVALID_SIZE,
                   "%s: cols is 0 with rows %zu: a row needs an element", fn,
                   rows);
  KILN__CHECK(s, kiln__ops_check_map(fn, queue, "x", xm->buffer, xm->offset, ym->buffer,
                            ym->offset, count, dtype));
  return s;
}

KILN_API kiln_status kiln_softmax_rows(kiln_queue *queue, const kiln_matrix *xm,
                                       const kiln_matrix *ym, size_t num_wait,
                                       kiln_event *const *wait_list,
                                       kiln_event **out_event) {
  static const char fn[] = "kiln_softmax_rows";
  kiln_status s = check_common(fn, queue, xm, ym);
  if (s != KILN_OK)
    return s;
  const size_t rows = xm->rows, cols = xm->cols;
  const size_t x_offset = xm->offset, y_offset = ym->offset;
  const kiln_dtype dtype = xm->dtype;
  const kiln_buffer *x = xm->buffer;
  kiln_buffer *y = ym->buffer;
  struct kiln__op o;
  if ((s = kiln__op_begin(&o, queue, fn, num_wait, wait_list, out_event)))
    return s;
  size_t shape[2] = {rows, cols};
  double count = (double)rows * (double)cols;
  kiln__op_describe(&o, "softmax_rows", dtype, 2, shape,
                    2.0 * (double)kiln_dtype_size(dtype) * count,
                    25.0 * count /* two exps, a max, a sum, a product */);
  if (rows > 0) {
    struct kiln__train_rows p;
    kiln__train_rows_params(queue->ctx, dtype, &p);
    cl_kernel k = NULL;
    cl_ulong xo = x_offset, yo = y_offset, nr = rows, nc = cols;
    KILN__CHECK(s, kiln__op_kernel(&o, "rows", p.options, "softmax_rows", &k, 6,
                          KILN__ARG(x->cl), KILN__ARG(xo), KILN__ARG(y->cl),
                          KILN__ARG(yo), KILN__ARG(nr), KILN__ARG(nc)));
    KILN__CHECK(s, kiln__train_launch_rows(&o, &p, k, rows));
  }
  return kiln__op_end(&o, s, out_event);
}

/* An optional vector of the layernorm (scale, bias): one element of x's
 * dtype per column. */
static kiln_status check_vector(const char *fn, const char *what,
                                const kiln_range *v, const kiln_matrix *xm) {
  if (v != NULL && (v->count != xm->cols || v->dtype != xm->dtype))
    return kiln__fail(KILN_ERR_SHAPE_MISMATCH,
                      "%s: %s (%zu elements of %s) and x (%zu columns of %s) "
                      "disagree: %s holds one element of x's dtype per column",
                      fn, what, v->count, kiln_dtype_name(v->dtype), xm->cols,
                      kiln_dtype_name(xm->dtype), what);
  return KILN_OK;
}

KILN_API kiln_status kiln_layernorm_rows(
    kiln_queue *queue, const kiln_matrix *xm, const kiln_range *scale_r,
    const kiln_range *bias_r, const kiln_matrix *ym, float eps, size_t num_wait,
    kiln_event *const *wait_list, kiln_event **out_event) {
  static const char fn[] = "kiln_layernorm_rows";
  kiln_status s = check_common(fn, queue, xm, ym);
  if (s != KILN_OK)
    return s;
  const size_t rows = xm->rows, cols = xm->cols;
  const size_t x_offset = xm->offset, y_offset = ym->offset;
  const kiln_dtype dtype = xm->dtype;
  const kiln_buffer *x = xm->buffer;
  kiln_buffer *y = ym->buffer;
  const kiln_buffer *scale = scale_r != NULL ? scale_r->buffer : NULL;
  const kiln_buffer *bias = bias_r != NULL ? bias_r->buffer : NULL;
  const size_t scale_offset = scale_r != NULL ? scale_r->offset : 0;
  const size_t bias_offset = bias_r != NULL ? bias_r->offset : 0;
  KILN__CHECK(s, check_vector(fn, "scale", scale_r, xm));
  KILN__CHECK(s, check_vector(fn, "bias", bias_r, xm));
  if (s == KILN_OK && !(isfinite(eps) && eps >= 0))
    s = kiln__fail(KILN_ERR_INVALID_ARGUMENT,
                   "%s: eps %g must be finite and >= 0", fn, (double)eps);
  if (scale_r != NULL) {
    KILN__CHECK(s, kiln__ops_check_in(fn, queue, "scale", scale, scale_offset, cols,
                             dtype));
    KILN__CHECK(s, kiln__ops_check_overlap(fn, "scale", scale, scale_offset, cols,
                                  dtype, "y", y, y_offset, rows * cols, dtype,
                                  false));
  }
  if (bias_r != NULL) {
    KILN__CHECK(s, kiln__ops_check_in(fn, queue, "bias", bias, bias_offset, cols,
                             dtype));
    KILN__CHECK(s, kiln__ops_check_overlap(fn, "bias", bias, bias_offset, cols, dtype,
                                  "y", y, y_offset, rows * cols, dtype,
                                  false));
  }
  if (s != KILN_OK)
    return s;
  struct kiln__op o;
  if ((s = kiln__op_begin(&o, queue, fn, num_wait, wait_list, out_event)))
    return s;
  size_t shape[2] = {rows, cols};
  double count = (double)rows * (double)cols;
  kiln__op_describe(&o, "layernorm_rows", dtype, 2, shape,
                    2.0 * (double)kiln_dtype_size(dtype) * count,
                    8.0 * count);
  if (rows > 0) {
    struct kiln__train_rows p;
    kiln__train_rows_params(queue->ctx, dtype, &p);
    cl_kernel k = NULL;
    /* Absent vectors: any valid buffer stands in; the kernel never reads
     * it. */
    cl_mem g = scale != NULL ? scale->cl : x->cl;
    cl_mem b = bias != NULL ? bias->cl : x->cl;
    cl_ulong xo = x_offset, so = scale != NULL ? scale_offset : 0;
    cl_ulong bo = bias != NULL ? bias_offset : 0, yo = y_offset;
    cl_ulong nr = rows, nc = cols;
    cl_int has_scale = scale != NULL, has_bias = bias != NULL;
    KILN__CHECK(s, kiln__op_kernel(&o, "rows", p.options, "layernorm_rows", &k, 13,
                          KILN__ARG(x->cl), KILN__ARG(xo), KILN__ARG(g),
                          KILN__ARG(so), KILN__ARG(b), KILN__ARG(bo),
                          KILN__ARG(has_scale), KILN__ARG(has_bias),
                          KILN__ARG(eps), KILN__ARG(y->cl), KILN__ARG(yo),
                          KILN__ARG(nr), KILN__ARG(nc)));
    KILN__CHECK(s, kiln__train_launch_rows(&o, &p, k, rows));
  }
  return kiln__op_end(&o, s, out_event);
}

void kiln__ops_warm_rows(const kiln_context *ctx, kiln__warm_add_fn add,
                         void *user) {
  const kiln_dtype dts[] = {KILN_F32, KILN_F16, KILN_BF16};
  for (size_t i = 0; i < sizeof dts / sizeof *dts; i++) {
    struct kiln__train_rows p;
    kiln__train_rows_params(ctx, dts[i], &p);
    add(user, "rows", p.options);
  }
}
