/* Training ops, rows by index: kiln_gather_rows and kiln_scatter_add_rows
 * (contracts in kiln/kiln_ops_train.h; kernels in cl_kernels/train_index.cl).
 * Scatter-add links repeated indices in the queue's workspace (8 bytes per
 * row) and sums each chain in one work-item per column, so no atomics and
 * no run-to-run differences. */
#include "ops_train_internal.h"

#include <stdio.h>

static const char *const dt_options[] = {
    [KILN_F32] = "-DDT=0", [KILN_F16] = "-DDT=1", [KILN_BF16] = "-DDT=2"};

/* Checks shared by both: the descriptors, dtypes and shapes, and the index
 * vector. m (named what: gather's y, scatter's x) is rows x cols, the table
 * table_rows x cols of m's dtype (one of dtypes). *count and *table_count
 * receive rows * cols and table_rows * cols. */
static kiln_status check_index(const char *fn, kiln_queue *queue,
                               unsigned dtypes, const char *what,
                               const kiln_matrix *m, const kiln_matrix *table,
                               const kiln_range *indices, size_t *count,
                               size_t *table_count) {
  kiln_status s = kiln__ops_check_queue(fn, queue);
  KILN__CHECK(s, kiln__train_check_matrix(fn, "table", table));
  KILN__CHECK(s, kiln__train_need(fn, "indices", indices));
  KILN__CHECK(s, kiln__train_check_matrix(fn, what, m));
  if (s != KILN_OK)
    return s;
  size_t rows = m->rows, cols = m->cols, table_rows = table->rows;
  char name[16];
  snprintf(name, sizeof name, "%s dtype", what);
  KILN__CHECK(s, kiln__ops_check_dtype(fn, name, m->dtype, dtypes));
  KILN__CHECK(s, kiln__ops_check_dtype(fn, "indices dtype", indices->dtype,
                              KILN__DT_LABELS));
  KILN__CHECK(s, kiln__train_same_dtype(fn, "table", table->dtype, what, m->dtype));
  if (s == KILN_OK && table->cols != cols)
    s = kiln__fail(KILN_ERR_SHAPE_MISMATCH,
                   "%s: table has %zu cols but %s has %zu", fn, table->cols,
                   what, cols);
  snprintf(name, sizeof name, "%s's rows", what);
  KILN__CHECK(s, kiln__train_same_count(fn, "indices", indices->count, name, rows));
  KILN__CHECK(s, kiln__ops_check_shape(fn, rows, cols, count));
  KILN__CHECK(s, kiln__ops_check_shape(fn, table_rows, cols, table_count));
  if (s == KILN_OK && (rows > INT32_MAX || table_rows > INT32_MAX))
    s = kiln__fail(KILN_ERR_INVALID_SIZE,
                   "%s: rows %zu and table rows %zu must be at most "
                   "INT32_MAX",
                   fn, rows, table_rows);
  KILN__CHECK(s, kiln__ops_check_in(fn, queue, "indices", indices->buffer,
                           indices->offset, rows, indices->dtype));
  return s;
}

KILN_API kiln_status kiln_gather_rows(kiln_queue *queue,
                                      const kiln_matrix *table_m,
                                      const kiln_range *indices_r,
                                      const kiln_matrix *y_m, size_t num_wait,
                                      kiln_event *const *wait_list,
                                      kiln_event **out_event) {
  static const char fn[] = "kiln_gather_rows";
  size_t count = 0, tcount = 0;
  kiln_status s = check_index(
      fn, queue, KILN__DT_FLOATS | KILN__DT(KILN_I32) | KILN__DT(KILN_U32), "y",
      y_m, table_m, indices_r, &count, &tcount);
  if (s != KILN_OK)
    return s;
  kiln_dtype dtype = y_m->dtype, index_dtype = indices_r->dtype;
  size_t rows = y_m->rows, cols = y_m->cols, table_rows = table_m->rows;
  const kiln_buffer *table = table_m->buffer, *indices = indices_r->buffer;
  kiln_buffer *y = y_m->buffer;
  size_t table_offset = table_m->offset, indices_offset = indices_r->offset,
         y_offset = y_m->offset;
  KILN__CHECK(s, kiln__ops_check_in(fn, queue, "table", table, table_offset, tcount,
                           dtype));
  KILN__CHECK(s, kiln__ops_check_out(fn, queue, "y", y, y_offset, count, dtype));
  KILN__CHECK(s, kiln__ops_check_overlap(fn, "table", table, table_offset, tcount, dtype,
                                "y", y, y_offset, count, dtype, false));
  KILN__CHECK(s, kiln__ops_check_overlap(fn, "indices", indices, indices_offset, rows,
                                index_dtype, "y", y, y_offset, count, dtype,
                                false));
  if (s != KILN_OK)
    return s;
  struct kiln__op o;
  if ((s = kiln__op_begin(&o, queue, fn, num_wait, wait_list, out_event)))
    return s;
  size_t shape[2] = {rows, cols};
  kiln__op_describe(&o, "gather_rows", dtype, 2, shape,
                    2.0 * (double)kiln_dtype_size(dtype) * (double)count +
                        4.0 * (double)rows,
                    0);
  if (count > 0) {
    bool wide = kiln_dtype_size(dtype) == 4;
    cl_kernel k = NULL;
    cl_ulong to = table_offset, tr = table_rows, io = indices_offset;
    cl_ulong yo = y_offset, nc = cols;
    KILN__CHECK(s, kiln__op_kernel(
        &o, "train_index", dt_options[wide ? KILN_F32 : KILN_F16],
        wide ? "gather32" : "gather16", &k, 8, KILN__ARG(table->cl),
        KILN__ARG(to), KILN__ARG(tr), KILN__ARG(indices->cl), KILN__ARG(io),
        KILN__ARG(y->cl), KILN__ARG(yo), KILN__ARG(nc)));
    KILN__CHECK(s, kiln__train_launch_matrix(&o, k, rows, cols));
  }
  return kiln__op_end(&o, s, out_event);
}

KILN_API kiln_status kiln_scatter_add_rows(
    kiln_queue *queue, const kiln_matrix *x_m, const kiln_range *indices_r,
    const kiln_matrix *table_m, size_t num_wait, kiln_event *const *wait_list,
    kiln_event **out_event) {
  static const char fn[] = "kiln_scatter_add_rows";
  size_t count = 0, tcount = 0;
  kiln_status s = check_index(fn, queue, KILN__DT_FLOATS, "x", x_m, table_m,
                              indices_r, &count, &tcount);
  if (s != KILN_OK)
    return s;
  kiln_dtype dtype = x_m->dtype, index_dtype = indices_r->dtype;
  size_t rows = x_m->rows, cols = x_m->cols, table_rows = table_m->rows;
  const kiln_buffer *x = x_m->buffer, *indices = indices_r->buffer;
  kiln_buffer *table = table_m->buffer;
  size_t x_offset = x_m->offset, indices_offset = indices_r->offset,
         table_offset = table_m->offset;
  KILN__CHECK(s, kiln__ops_check_in(fn, queue, "x", x, x_offset, count, dtype));
  KILN__CHECK(s, kiln__ops_check_in(fn, queue, "table", table, table_offset, tcount,
                           dtype));
  KILN__CHECK(s, kiln__ops_check_out(fn, queue, "table", table, table_offset, tcount,
                            dtype));
  KILN__CHECK(s, kiln__ops_check_overlap(fn, "x", x, x_offset, count, dtype, "table",
                                table, table_offset, tcount, dtype, false));
  KILN__CHECK(s, kiln__ops_check_overlap(fn, "indices", indices, indices_offset, rows,
                                index_dtype, "table", table, table_offset,
                                tcount, dtype, false));
  if (s != KILN_OK)
    return s;
  struct kiln__op o;
  if ((s = kiln__op_begin(&o, queue, fn, num_wait, wait_list, out_event)))
    return s;
  size_t shape[2] = {rows, cols};
  kiln__op_describe(&o, "scatter_add_rows", dtype, 2, shape,
                    3.0 * (double)kiln_dtype_size(dtype) * (double)count +
                        12.0 * (double)rows,
                    (double)count);
  if (count > 0) {
    cl_mem chain = NULL;
    KILN__CHECK(s, kiln__op_workspace(&o, rows * 8, &chain)); /* rows <= INT32_MAX */
    const char *opt = dt_options[dtype];
    cl_kernel kc = NULL, ka = NULL;
    cl_ulong io = indices_offset, nr = rows, tr = table_rows;
    KILN__CHECK(s, kiln__op_kernel(&o, "train_index", opt, "scatter_chain", &kc, 5,
                          KILN__ARG(indices->cl), KILN__ARG(io), KILN__ARG(nr),
                          KILN__ARG(tr), KILN__ARG(chain)));
    KILN__CHECK(s, kiln__train_launch_elems(&o, kc, rows));
    cl_ulong xo = x_offset, to = table_offset, nc = cols;
    KILN__CHECK(s, kiln__op_kernel(
        &o, "train_index", opt, "scatter_add_rows", &ka, 9, KILN__ARG(x->cl),
        KILN__ARG(xo), KILN__ARG(indices->cl), KILN__ARG(io), KILN__ARG(chain),
        KILN__ARG(nr), KILN__ARG(table->cl), KILN__ARG(to), KILN__ARG(nc)));
    KILN__CHECK(s, kiln__train_launch_matrix(&o, ka, rows, cols));
  }
  return kiln__op_end(&o, s, out_event);
}

void kiln__ops_warm_train_index(const kiln_context *ctx, kiln__warm_add_fn add,
                                void *user) {
  (void)ctx;
  for (int d = KILN_F32; d <= KILN_BF16; d++)
    add(user, "train_index", dt_options[d]);
}
