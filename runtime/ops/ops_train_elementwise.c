/* Training ops, elementwise: kiln_binary_broadcast and kiln_unary_backward
 * (contracts in kiln/kiln_ops_train.h; kernels in
 * cl_kernels/train_elementwise.cl, built once per storage dtype). */
#include "ops_train_internal.h"

#include <stdio.h>

static const char *const dt_options[] = {
    [KILN_F32] = "-DDT=0", [KILN_F16] = "-DDT=1", [KILN_BF16] = "-DDT=2"};

/* Per binary op: the kernels for a row and a column vector, trace names. */
static const struct {
  const char *row, *col, *row_trace, *col_trace;
} bcast_ops[] = {
    [KILN_BINARY_ADD] = {"bcast_row_add", "bcast_col_add", "broadcast.row.add",
                         "broadcast.col.add"},
    [KILN_BINARY_SUB] = {"bcast_row_sub", "bcast_col_sub", "broadcast.row.sub",
                         "broadcast.col.sub"},
    [KILN_BINARY_MUL] = {"bcast_row_mul", "bcast_col_mul", "broadcast.row.mul",
                         "broadcast.col.mul"},
    [KILN_BINARY_DIV] = {"bcast_row_div", "bcast_col_div", "broadcast.row.div",
                         "broadcast.col.div"},
    [KILN_BINARY_MAX] = {"bcast_row_max", "bcast_col_max", "broadcast.row.max",
                         "broadcast.col.max"},
    [KILN_BINARY_MIN] = {"bcast_row_min", "bcast_col_min", "broadcast.row.min",
                         "broadcast.col.min"},
};

KILN_API kiln_status kiln_binary_broadcast(
    kiln_queue *queue, kiln_binary_op op, kiln_broadcast broadcast,
    const kiln_matrix *a, const kiln_range *b, const kiln_matrix *y,
    size_t num_wait, kiln_event *const *wait_list, kiln_event **out_event) {
  static const char fn[] = "kiln_binary_broadcast";
  size_t count = 0;
  kiln_status s = kiln__ops_check_queue(fn, queue);
  if (s == KILN_OK && (unsigned)op > KILN_BINARY_MIN)
    s = kiln__fail(KILN_ERR_INVALID_ARGUMENT,
                   "%s: op %d is not a kiln_binary_op", fn, (int)op);
  if (s == KILN_OK && (unsigned)broadcast > KILN_BROADCAST_COL)
    s = kiln__fail(KILN_ERR_INVALID_ARGUMENT,
                   "%s: broadcast %d is not a kiln_broadcast", fn,
                   (int)broadcast);
  KILN__CHECK(s, kiln__train_check_matrix(fn, "a", a));
  KILN__CHECK(s, kiln__train_need(fn, "b", b));
  KILN__CHECK(s, kiln__train_check_matrix(fn, "y", y));
  if (s != KILN_OK)
    return s;
  kiln_dtype dtype = a->dtype;
  size_t rows = a->rows, cols = a->cols;
  bool row = broadcast == KILN_BROADCAST_ROW;
  size_t bn = row ? cols : rows;
  KILN__CHECK(s, kiln__ops_check_dtype(fn, "a dtype", dtype, KILN__DT_FLOATS));
  KILN__CHECK(s, kiln__train_same_matrix(fn, "y", y, "a", a));
  KILN__CHECK(s, kiln__train_same_dtype(fn, "b", b->dtype, "a", dtype));
  KILN__CHECK(s, kiln__train_same_count(fn, "b", b->count, row ? "a's cols" : "a's rows",
                               bn));
  KILN__CHECK(s, kiln__ops_check_shape(fn, rows, cols, &count));
  KILN__CHECK(s, kiln__ops_check_map(fn, queue, "a", a->buffer, a->offset, y->buffer,
                            y->offset, count, dtype));
  KILN__CHECK(s, kiln__ops_check_in(fn, queue, "b", b->buffer, b->offset, bn, dtype));
  KILN__CHECK(s, kiln__ops_check_overlap(fn, "b", b->buffer, b->offset, bn, dtype, "y",
                                y->buffer, y->offset, count, dtype, false));
  if (s == KILN_OK && rows > UINT32_MAX)
    s = kiln__fail(KILN_ERR_INVALID_SIZE, "%s: rows %zu exceeds UINT32_MAX", fn,
                   rows);
  if (s != KILN_OK)
    return s;
  struct kiln__op o;
  if ((s = kiln__op_begin(&o, queue, fn, num_wait, wait_list, out_event)))
    return s;
  size_t shape[2] = {rows, cols};
  double es = (double)kiln_dtype_size(dtype);
  kiln__op_describe(&o, row ? bcast_ops[op].row_trace : bcast_ops[op].col_trace,
                    dtype, 2, shape, es * (2.0 * (double)count + (double)bn),
                    (double)count);
  if (count > 0) {
    cl_kernel k = NULL;
    cl_ulong ao = a->offset, bo = b->offset, yo = y->offset, nc = cols;
    KILN__CHECK(s, kiln__op_kernel(
        &o, "train_elementwise", dt_options[dtype],
        row ? bcast_ops[op].row : bcast_ops[op].col, &k, 7,
        KILN__ARG(a->buffer->cl), KILN__ARG(ao), KILN__ARG(b->buffer->cl),
        KILN__ARG(bo), KILN__ARG(y->buffer->cl), KILN__ARG(yo), KILN__ARG(nc)));
    KILN__CHECK(s, kiln__train_launch_matrix(&o, k, rows, cols));
  }
  return kiln__op_end(&o, s, out_event);
}

/* The kernel of an activation's gradient from x or from y, NULL when that
 * form is not offered; trace name; rough FLOPs per element. */
static const char *grad_kernel(kiln_unary_op op, kiln_grad_from from,
                               const char **trace, double *flops) {
  static const struct {
    kiln_unary_op op;
    const char *x, *y, *trace;
    double flops;
  } table[] = {
      {KILN_UNARY_RELU, "grad_relu_x", "grad_relu_y", "unary_backward.relu", 1},
      {KILN_UNARY_GELU, "grad_gelu_x", NULL, "unary_backward.gelu", 25},
      {KILN_UNARY_SIGMOID, "grad_sigmoid_x", "grad_sigmoid_y",
       "unary_backward.sigmoid", 15},
      {KILN_UNARY_TANH, "grad_tanh_x", "grad_tanh_y", "unary_backward.tanh",
       12},
  };
  for (size_t i = 0; i < sizeof table / sizeof table[0]; i++)
    if (table[i].op == op) {
      *trace = table[i].trace;
      *flops = table[i].flops;
      return from == KILN_GRAD_FROM_X ? table[i].x : table[i].y;
    }
  return NULL;
}

KILN_API kiln_status kiln_unary_backward(
    kiln_queue *queue, kiln_unary_op op, kiln_grad_from from,
    const kiln_range *xy, const kiln_range *dy, const kiln_range *dx,
    size_t num_wait, kiln_event *const *wait_list, kiln_event **out_event) {
  static const char fn[] = "kiln_unary_backward";
  const char *trace = NULL, *kname = NULL;
  double flops = 0;
  kiln_status s = kiln__ops_check_queue(fn, queue);
  if (s == KILN_OK && (unsigned)from > KILN_GRAD_FROM_Y)
    s = kiln__fail(KILN_ERR_INVALID_ARGUMENT,
                   "%s: from %d is not a kiln_grad_from", fn, (int)from);
  if (s == KILN_OK) {
    kname = grad_kernel(op, from, &trace, &flops);
    if (kname == NULL && trace == NULL)
      s = kiln__fail(KILN_ERR_INVALID_ARGUMENT,
                     "%s: op %d has no gradient here (relu, gelu, sigmoid, "
                     "tanh do)",
                     fn, (int)op);
    else if (kname == NULL)
      s = kiln__fail(KILN_ERR_INVALID_ARGUMENT,
                     "%s: op gelu's gradient needs x (KILN_GRAD_FROM_X), not "
                     "y",
                     fn);
  }
  KILN__CHECK(s, kiln__train_need(fn, "xy", xy));
  KILN__CHECK(s, kiln__train_need(fn, "dy", dy));
  KILN__CHECK(s, kiln__train_need(fn, "dx", dx));
  if (s != KILN_OK)
    return s;
  kiln_dtype dtype = xy->dtype;
  size_t n = xy->count;
  KILN__CHECK(s, kiln__ops_check_dtype(fn, "xy dtype", dtype, KILN__DT_FLOATS));
  KILN__CHECK(s, kiln__train_same_dtype(fn, "dy", dy->dtype, "xy", dtype));
  KILN__CHECK(s, kiln__train_same_dtype(fn, "dx", dx->dtype, "xy", dtype));
  KILN__CHECK(s, kiln__train_same_count(fn, "dy", dy->count, "xy's count", n));
  KILN__CHECK(s, kiln__train_same_count(fn, "dx", dx->count, "xy's count", n));
  KILN__CHECK(s, kiln__ops_check_in(fn, queue, "xy", xy->buffer, xy->offset, n, dtype));
  KILN__CHECK(s, kiln__ops_check_in(fn, queue, "dy", dy->buffer, dy->offset, n, dtype));
  KILN__CHECK(s, kiln__ops_check_out(fn, queue, "dx", dx->buffer, dx->offset, n, dtype));
  KILN__CHECK(s, kiln__ops_check_overlap(fn, "dy", dy->buffer, dy->offset, n, dtype,
                                "dx", dx->buffer, dx->offset, n, dtype, true));
  KILN__CHECK(s, kiln__ops_check_overlap(fn, "xy", xy->buffer, xy->offset, n, dtype,
                                "dx", dx->buffer, dx->offset, n, dtype, true));
  if (s != KILN_OK)
    return s;
  struct kiln__op o;
  if ((s = kiln__op_begin(&o, queue, fn, num_wait, wait_list, out_event)))
    return s;
  kiln__op_describe(&o, trace, dtype, 1, &n,
                    3.0 * (double)kiln_dtype_size(dtype) * (double)n,
                    flops * (double)n);
  if (n > 0) {
    cl_kernel k = NULL;
    cl_ulong xo = xy->offset, go = dy->offset, dxo = dx->offset, nn = n;
    KILN__CHECK(s, kiln__op_kernel(&o, "train_elementwise", dt_options[dtype], kname, &k,
                          7, KILN__ARG(xy->buffer->cl), KILN__ARG(xo),
                          KILN__ARG(dy->buffer->cl), KILN__ARG(go),
                          KILN__ARG(dx->buffer->cl), KILN__ARG(dxo),
                          KILN__ARG(nn)));
    KILN__CHECK(s, kiln__train_launch_elems(&o, k, n));
  }
  return kiln__op_end(&o, s, out_event);
}

void kiln__ops_warm_train_elementwise(const kiln_context *ctx,
                                      kiln__warm_add_fn add, void *user) {
  (void)ctx;
  for (int d = KILN_F32; d <= KILN_BF16; d++)
    add(user, "train_elementwise", dt_options[d]);
}
