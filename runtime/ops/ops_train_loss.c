/* Training ops over rows: kiln_softmax_cross_entropy (+ _backward),
 * kiln_accuracy_count, kiln_softmax_rows_backward,
 * kiln_layernorm_rows_backward (contracts in kiln/kiln_ops_train.h; kernels in
 * cl_kernels/train_rows.cl, built per storage dtype and kernel family like
 * rows.cl). One worker per row as in ops_rows.c; the batch mean and
 * layernorm's column sums run in a second, fixed-order kernel. */
#include "ops_train_internal.h"

#include <math.h>
#include <stdio.h>

/* The logits and labels of the cross-entropy ops and accuracy, checked and
 * unpacked: a rows x cols matrix (count = rows * cols elements) of dtype,
 * and rows labels of label_dtype. */
struct logits_in {
  kiln_dtype dtype, label_dtype;
  size_t rows, cols, count;
  const kiln_buffer *logits, *labels;
  size_t logits_offset, labels_offset;
};

/* Shape, dtype, logits and labels checks shared by the cross-entropy ops and
 * accuracy; *L receives the operands when they pass. */
static kiln_status check_logits(const char *fn, kiln_queue *queue,
                                const kiln_matrix *logits,
                                const kiln_range *labels, struct logits_in *L) {
  kiln_status s = kiln__ops_check_queue(fn, queue);
  KILN__CHECK(s, kiln__train_check_matrix(fn, "logits", logits));
  KILN__CHECK(s, kiln__train_need(fn, "labels", labels));
  if (s != KILN_OK)
    return s;
  size_t rows = logits->rows, cols = logits->cols;
  *L = (struct logits_in){.dtype = logits->dtype,
                          .label_dtype = labels->dtype,
                          .rows = rows,
                          .cols = cols,
                          .logits = logits->buffer,
                          .labels = labels->buffer,
                          .logits_offset = logits->offset,
                          .labels_offset = labels->offset};
  KILN__CHECK(s, kiln__ops_check_dtype(fn, "logits dtype", logits->dtype,
                              KILN__DT_FLOATS));
  KILN__CHECK(s, kiln__ops_check_dtype(fn, "labels dtype", labels->dtype,
                              KILN__DT_LABELS));
  KILN__CHECK(s, kiln__train_same_count(fn, "labels", labels->count, "logits' rows",
                               rows));
  KILN__CHECK(s, kiln__ops_check_shape(fn, rows, cols, &L->count));
  if (s == KILN_OK && rows > 0 && cols == 0)
    s = kiln__fail(KILN_ERR_INVALID_SIZE,
                   "%s: cols is 0 with rows %zu: a row needs an element", fn,
                   rows);
  if (s == KILN_OK && rows > UINT32_MAX)
    s = kiln__fail(KILN_ERR_INVALID_SIZE, "%s: rows %zu exceeds UINT32_MAX", fn,
                   rows);
  if (s == KILN_OK && cols > INT32_MAX)
    s = kiln__fail(KILN_ERR_INVALID_SIZE, "%s: cols %zu exceeds INT32_MAX", fn,
                   cols);
  KILN__CHECK(s, kiln__ops_check_in(fn, queue, "logits", logits->buffer, logits->offset,
                           L->count, logits->dtype));
  KILN__CHECK(s, kiln__ops_check_in(fn, queue, "labels", labels->buffer, labels->offset,
                           rows, labels->dtype));
  return s;
}

/* An output of the ops above (what: count elements of dtype at offset in
 * b) overlaps neither the logits nor the labels; it may be the very logits
 * where same_ok (the backward pass in place). */
static kiln_status check_apart(const char *fn, const struct logits_in *L,
                               const char *what, const kiln_buffer *b,
                               size_t offset, size_t count, kiln_dtype dtype,
                               bool same_ok) {
  kiln_status s = kiln__ops_check_overlap(
      fn, "logits", L->logits, L->logits_offset, L->count, L->dtype, what, b,
      offset, count, dtype, same_ok);
  KILN__CHECK(s, kiln__ops_check_overlap(fn, "labels", L->labels,
                                         L->labels_offset, L->rows,
                                         L->label_dtype, what, b, offset,
                                         count, dtype, false));
  return s;
}

KILN_API kiln_status kiln_softmax_cross_entropy(
    kiln_queue *queue, const kiln_matrix *logits_m, const kiln_range *labels_r,
    const kiln_range *loss_r, const kiln_range *mean_r, size_t num_wait,
    kiln_event *const *wait_list, kiln_event **out_event) {
  static const char fn[] = "kiln_softmax_cross_entropy";
  struct logits_in L;
  kiln_status s = check_logits(fn, queue, logits_m, labels_r, &L);
  if (s != KILN_OK)
    return s;
  kiln_buffer *loss = loss_r != NULL ? loss_r->buffer : NULL;
  kiln_buffer *mean = mean_r != NULL ? mean_r->buffer : NULL;
  size_t loss_offset = loss_r != NULL ? loss_r->offset : 0;
  size_t mean_offset = mean_r != NULL ? mean_r->offset : 0;
  if (loss_r == NULL && mean_r == NULL)
    s = kiln__fail(KILN_ERR_NULL_POINTER,
                   "%s: loss and mean are both NULL: nothing to compute", fn);
  if (loss_r != NULL) {
    if (loss_r->dtype != KILN_F32)
      KILN__CHECK(s, kiln__ops_check_dtype(fn, "loss dtype", loss_r->dtype,
                                  KILN__DT(KILN_F32)));
    KILN__CHECK(s, kiln__train_same_count(fn, "loss", loss_r->count, "logits' rows",
                                 L.rows));
    KILN__CHECK(s, kiln__ops_check_out(fn, queue, "loss", loss, loss_offset, L.rows,
                              KILN_F32));
    KILN__CHECK(s, check_apart(fn, &L, "loss", loss, loss_offset, L.rows,
                               KILN_F32, false));
  }
  if (mean_r != NULL) {
    KILN__CHECK(s, kiln__train_check_scalar(fn, "mean", mean_r, KILN_F32));
    KILN__CHECK(s, 
        kiln__ops_check_out(fn, queue, "mean", mean, mean_offset, 1, KILN_F32));
    if (loss != NULL)
      KILN__CHECK(s, kiln__ops_check_overlap(fn, "loss", loss, loss_offset, L.rows,
                                    KILN_F32, "mean", mean, mean_offset, 1,
                                    KILN_F32, false));
  }
  if (s != KILN_OK)
    return s;
  struct kiln__op o;
  if ((s = kiln__op_begin(&o, queue, fn, num_wait, wait_list, out_event)))
    return s;
  size_t shape[2] = {L.rows, L.cols};
  kiln__op_describe(&o, "softmax_cross_entropy", L.dtype, 2, shape,
                    (double)kiln_dtype_size(L.dtype) * (double)L.count +
                        8.0 * (double)L.rows,
                    12.0 * (double)L.count);
  if (L.rows > 0) {
    struct kiln__train_rows p;
    kiln__train_rows_params(queue->ctx, L.dtype, &p);
    cl_mem lm = loss != NULL ? loss->cl : NULL;
    cl_ulong xo = L.logits_offset, lo = L.labels_offset;
    cl_ulong so = loss != NULL ? loss_offset : 0, nr = L.rows, nc = L.cols;
    if (loss == NULL) {
      size_t bytes;
      if (kiln__mul_overflows(L.rows, 4, &bytes))
        s = kiln__fail(KILN_ERR_INVALID_SIZE, "%s: rows %zu", fn, L.rows);
      KILN__CHECK(s, kiln__op_workspace(&o, bytes, &lm));
    }
    cl_kernel k = NULL;
    KILN__CHECK(s, kiln__op_kernel(&o, "train_rows", p.options, "ce_forward", &k, 8,
                          KILN__ARG(L.logits->cl), KILN__ARG(xo),
                          KILN__ARG(L.labels->cl), KILN__ARG(lo), KILN__ARG(lm),
                          KILN__ARG(so), KILN__ARG(nr), KILN__ARG(nc)));
    KILN__CHECK(s, kiln__train_launch_rows(&o, &p, k, L.rows));
    if (mean != NULL) {
      cl_kernel km = NULL;
      cl_ulong mo = mean_offset;
      size_t one = 1;
      KILN__CHECK(s, kiln__op_kernel(&o, "train_rows", p.options, "mean_f32", &km, 5,
                            KILN__ARG(lm), KILN__ARG(so), KILN__ARG(nr),
                            KILN__ARG(mean->cl), KILN__ARG(mo)));
      KILN__CHECK(s, kiln__op_launch(&o, km, 1, &one, &one));
    }
  }
  return kiln__op_end(&o, s, out_event);
}

KILN_API kiln_status kiln_softmax_cross_entropy_backward(
    kiln_queue *queue, const kiln_matrix *logits_m, const kiln_range *labels_r,
    const kiln_matrix *dlogits_m, float scale, size_t num_wait,
    kiln_event *const *wait_list, kiln_event **out_event) {
  static const char fn[] = "kiln_softmax_cross_entropy_backward";
  struct logits_in L;
  kiln_status s = check_logits(fn, queue, logits_m, labels_r, &L);
  KILN__CHECK(s, kiln__train_check_matrix(fn, "dlogits", dlogits_m));
  if (s != KILN_OK)
    return s;
  KILN__CHECK(s, kiln__train_same_matrix(fn, "dlogits", dlogits_m, "logits", logits_m));
  kiln_buffer *dlogits = dlogits_m->buffer;
  size_t dlogits_offset = dlogits_m->offset;
  KILN__CHECK(s, kiln__train_check_finite(fn, "scale", scale));
  KILN__CHECK(s, kiln__ops_check_out(fn, queue, "dlogits", dlogits, dlogits_offset,
                            L.count, L.dtype));
  KILN__CHECK(s, check_apart(fn, &L, "dlogits", dlogits, dlogits_offset,
                             L.count, L.dtype, true));
  if (s != KILN_OK)
    return s;
  struct kiln__op o;
  if ((s = kiln__op_begin(&o, queue, fn, num_wait, wait_list, out_event)))
    return s;
  size_t shape[2] = {L.rows, L.cols};
  kiln__op_describe(&o, "softmax_cross_entropy_backward", L.dtype, 2, shape,
                    2.0 * (double)kiln_dtype_size(L.dtype) * (double)L.count,
                    20.0 * (double)L.count);
  if (L.rows > 0) {
    struct kiln__train_rows p;
    kiln__train_rows_params(queue->ctx, L.dtype, &p);
    cl_ulong xo = L.logits_offset, lo = L.labels_offset, dxo = dlogits_offset;
    cl_ulong nr = L.rows, nc = L.cols;
    cl_kernel k = NULL;
    KILN__CHECK(s, kiln__op_kernel(&o, "train_rows", p.options, "ce_backward", &k, 9,
                          KILN__ARG(L.logits->cl), KILN__ARG(xo),
                          KILN__ARG(L.labels->cl), KILN__ARG(lo),
                          KILN__ARG(scale), KILN__ARG(dlogits->cl),
                          KILN__ARG(dxo), KILN__ARG(nr), KILN__ARG(nc)));
    KILN__CHECK(s, kiln__train_launch_rows(&o, &p, k, L.rows));
  }
  return kiln__op_end(&o, s, out_event);
}

KILN_API kiln_status kiln_accuracy_count(
    kiln_queue *queue, const kiln_matrix *logits_m, const kiln_range *labels_r,
    const kiln_range *count_r, bool accumulate, size_t num_wait,
    kiln_event *const *wait_list, kiln_event **out_event) {
  static const char fn[] = "kiln_accuracy_count";
  struct logits_in L;
  kiln_status s = check_logits(fn, queue, logits_m, labels_r, &L);
  KILN__CHECK(s, kiln__train_check_scalar(fn, "count", count_r, KILN_U32));
  if (s != KILN_OK)
    return s;
  kiln_buffer *count = count_r->buffer;
  size_t count_offset = count_r->offset;
  KILN__CHECK(s, 
      kiln__ops_check_in(fn, queue, "count", count, count_offset, 1, KILN_U32));
  KILN__CHECK(s, kiln__ops_check_out(fn, queue, "count", count, count_offset, 1,
                            KILN_U32));
  KILN__CHECK(s, check_apart(fn, &L, "count", count, count_offset, 1,
                             KILN_U32, false));
  if (s != KILN_OK)
    return s;
  struct kiln__op o;
  if ((s = kiln__op_begin(&o, queue, fn, num_wait, wait_list, out_event)))
    return s;
  size_t shape[2] = {L.rows, L.cols};
  kiln__op_describe(&o, "accuracy_count", L.dtype, 2, shape,
                    (double)kiln_dtype_size(L.dtype) * (double)L.count +
                        4.0 * (double)L.rows,
                    (double)L.count);
  struct kiln__train_rows p;
  kiln__train_rows_params(queue->ctx, L.dtype, &p);
  cl_ulong co = count_offset;
  if (!accumulate) {
    /* Zero L.rows still set the count to 0. */
    cl_kernel kz = NULL;
    size_t one = 1;
    KILN__CHECK(s, kiln__op_kernel(&o, "train_rows", p.options, "zero_u32", &kz, 2,
                          KILN__ARG(count->cl), KILN__ARG(co)));
    KILN__CHECK(s, kiln__op_launch(&o, kz, 1, &one, &one));
  }
  if (L.rows > 0) {
    cl_ulong xo = L.logits_offset, lo = L.labels_offset, nr = L.rows,
             nc = L.cols;
    cl_kernel k = NULL;
    KILN__CHECK(s, kiln__op_kernel(
        &o, "train_rows", p.options, "accuracy", &k, 8, KILN__ARG(L.logits->cl),
        KILN__ARG(xo), KILN__ARG(L.labels->cl), KILN__ARG(lo),
        KILN__ARG(count->cl), KILN__ARG(co), KILN__ARG(nr), KILN__ARG(nc)));
    KILN__CHECK(s, kiln__train_launch_rows(&o, &p, k, L.rows));
  }
  return kiln__op_end(&o, s, out_event);
}

KILN_API kiln_status kiln_softmax_rows_backward(
    kiln_queue *queue, const kiln_matrix *y_m, const kiln_matrix *dy_m,
    const kiln_matrix *dx_m, size_t num_wait, kiln_event *const *wait_list,
    kiln_event **out_event) {
  static const char fn[] = "kiln_softmax_rows_backward";
  size_t count = 0;
  kiln_status s = kiln__ops_check_queue(fn, queue);
  KILN__CHECK(s, kiln__train_check_matrix(fn, "y", y_m));
  KILN__CHECK(s, kiln__train_check_matrix(fn, "dy", dy_m));
  KILN__CHECK(s, kiln__train_check_matrix(fn, "dx", dx_m));
  if (s != KILN_OK)
    return s;
  kiln_dtype dtype = y_m->dtype;
  size_t rows = y_m->rows, cols = y_m->cols;
  const kiln_buffer *y = y_m->buffer, *dy = dy_m->buffer;
  kiln_buffer *dx = dx_m->buffer;
  size_t y_offset = y_m->offset, dy_offset = dy_m->offset,
         dx_offset = dx_m->offset;
  KILN__CHECK(s, kiln__ops_check_dtype(fn, "y dtype", dtype, KILN__DT_FLOATS));
  KILN__CHECK(s, kiln__train_same_matrix(fn, "dy", dy_m, "y", y_m));
  KILN__CHECK(s, kiln__train_same_matrix(fn, "dx", dx_m, "y", y_m));
  KILN__CHECK(s, kiln__ops_check_shape(fn, rows, cols, &count));
  KILN__CHECK(s, kiln__ops_check_in(fn, queue, "y", y, y_offset, count, dtype));
  KILN__CHECK(s, kiln__ops_check_in(fn, queue, "dy", dy, dy_offset, count, dtype));
  KILN__CHECK(s, kiln__ops_check_out(fn, queue, "dx", dx, dx_offset, count, dtype));
  KILN__CHECK(s, kiln__ops_check_overlap(fn, "dy", dy, dy_offset, count, dtype, "dx", dx,
                                dx_offset, count, dtype, true));
  KILN__CHECK(s, kiln__ops_check_overlap(fn, "y", y, y_offset, count, dtype, "dx", dx,
                                dx_offset, count, dtype, true));
  if (s != KILN_OK)
    return s;
  struct kiln__op o;
  if ((s = kiln__op_begin(&o, queue, fn, num_wait, wait_list, out_event)))
    return s;
  size_t shape[2] = {rows, cols};
  kiln__op_describe(&o, "softmax_rows_backward", dtype, 2, shape,
                    3.0 * (double)kiln_dtype_size(dtype) * (double)count,
                    4.0 * (double)count);
  if (count > 0) {
    struct kiln__train_rows p;
    kiln__train_rows_params(queue->ctx, dtype, &p);
    cl_ulong yo = y_offset, go = dy_offset, dxo = dx_offset;
    cl_ulong nr = rows, nc = cols;
    cl_kernel k = NULL;
    KILN__CHECK(s, kiln__op_kernel(&o, "train_rows", p.options, "softmax_backward", &k,
                          8, KILN__ARG(y->cl), KILN__ARG(yo), KILN__ARG(dy->cl),
                          KILN__ARG(go), KILN__ARG(dx->cl), KILN__ARG(dxo),
                          KILN__ARG(nr), KILN__ARG(nc)));
    KILN__CHECK(s, kiln__train_launch_rows(&o, &p, k, rows));
  }
  return kiln__op_end(&o, s, out_event);
}

/* The offset of an optional operand (0 when absent). */
#define OPT_OFFSET(d) ((d) != NULL ? (d)->offset : 0)
#define OPT_BUFFER(d) ((d) != NULL ? (d)->buffer : NULL)

KILN_API kiln_status kiln_layernorm_rows_backward(
    kiln_queue *queue, const kiln_matrix *x_m, const kiln_range *scale_r,
    const kiln_matrix *dy_m, const kiln_matrix *dx_m,
    const kiln_range *dscale_r, const kiln_range *dbias_r, float eps,
    size_t num_wait, kiln_event *const *wait_list, kiln_event **out_event) {
  static const char fn[] = "kiln_layernorm_rows_backward";
  size_t count = 0;
  kiln_status s = kiln__ops_check_queue(fn, queue);
  KILN__CHECK(s, kiln__train_check_matrix(fn, "x", x_m));
  KILN__CHECK(s, kiln__train_check_matrix(fn, "dy", dy_m));
  if (dx_m != NULL)
    KILN__CHECK(s, kiln__train_check_matrix(fn, "dx", dx_m));
  /* An operand given is an operand used: its buffer may not be NULL. */
  const kiln_range *opt[3] = {scale_r, dscale_r, dbias_r};
  const char *const opt_names[3] = {"scale->buffer", "dscale->buffer",
                                    "dbias->buffer"};
  for (int i = 0; i < 3; i++)
    if (opt[i] != NULL)
      KILN__CHECK(s, kiln__train_need(fn, opt_names[i], opt[i]->buffer));
  if (dx_m != NULL)
    KILN__CHECK(s, kiln__train_need(fn, "dx->buffer", dx_m->buffer));
  if (s != KILN_OK)
    return s;
  kiln_dtype dtype = x_m->dtype;
  size_t rows = x_m->rows, cols = x_m->cols;
  const kiln_buffer *x = x_m->buffer, *dy = dy_m->buffer;
  const kiln_buffer *scale = OPT_BUFFER(scale_r);
  kiln_buffer *dx = OPT_BUFFER(dx_m), *dscale = OPT_BUFFER(dscale_r),
              *dbias = OPT_BUFFER(dbias_r);
  size_t x_offset = x_m->offset, dy_offset = dy_m->offset;
  size_t scale_offset = OPT_OFFSET(scale_r), dx_offset = OPT_OFFSET(dx_m),
         dscale_offset = OPT_OFFSET(dscale_r),
         dbias_offset = OPT_OFFSET(dbias_r);
  KILN__CHECK(s, kiln__ops_check_dtype(fn, "x dtype", dtype, KILN__DT_FLOATS));
  KILN__CHECK(s, kiln__train_same_matrix(fn, "dy", dy_m, "x", x_m));
  if (dx_m != NULL)
    KILN__CHECK(s, kiln__train_same_matrix(fn, "dx", dx_m, "x", x_m));
  if (scale_r != NULL) {
    KILN__CHECK(s, kiln__train_same_dtype(fn, "scale", scale_r->dtype, "x", dtype));
    KILN__CHECK(s, 
        kiln__train_same_count(fn, "scale", scale_r->count, "x's cols", cols));
  }
  const kiln_range *sum_r[2] = {dscale_r, dbias_r};
  const char *const sum_names[2] = {"dscale", "dbias"};
  for (int i = 0; i < 2; i++)
    if (sum_r[i] != NULL) {
      char name[16];
      snprintf(name, sizeof name, "%s dtype", sum_names[i]);
      if (sum_r[i]->dtype != KILN_F32)
        KILN__CHECK(s, kiln__ops_check_dtype(fn, name, sum_r[i]->dtype,
                                    KILN__DT(KILN_F32)));
      KILN__CHECK(s, kiln__train_same_count(fn, sum_names[i], sum_r[i]->count,
                                   "x's cols", cols));
    }
  KILN__CHECK(s, kiln__ops_check_shape(fn, rows, cols, &count));
  if (s == KILN_OK && rows > 0 && cols == 0)
    s = kiln__fail(KILN_ERR_INVALID_SIZE,
                   "%s: cols is 0 with rows %zu: a row needs an element", fn,
                   rows);
  if (s == KILN_OK && !(isfinite(eps) && eps >= 0))
    s = kiln__fail(KILN_ERR_INVALID_ARGUMENT,
                   "%s: eps %g must be finite and >= 0", fn, (double)eps);
  KILN__CHECK(s, kiln__ops_check_in(fn, queue, "x", x, x_offset, count, dtype));
  KILN__CHECK(s, kiln__ops_check_in(fn, queue, "dy", dy, dy_offset, count, dtype));
  if (scale != NULL)
    KILN__CHECK(s, kiln__ops_check_in(fn, queue, "scale", scale, scale_offset, cols,
                             dtype));
  if (dx != NULL) {
    KILN__CHECK(s, kiln__ops_check_out(fn, queue, "dx", dx, dx_offset, count, dtype));
    KILN__CHECK(s, kiln__ops_check_overlap(fn, "dy", dy, dy_offset, count, dtype, "dx",
                                  dx, dx_offset, count, dtype, true));
    KILN__CHECK(s, kiln__ops_check_overlap(fn, "x", x, x_offset, count, dtype, "dx", dx,
                                  dx_offset, count, dtype, false));
    if (scale != NULL)
      KILN__CHECK(s, kiln__ops_check_overlap(fn, "scale", scale, scale_offset, cols,
                                    dtype, "dx", dx, dx_offset, count, dtype,
                                    false));
  }
  /* dscale and dbias are f32 outputs that nothing else may share. */
  const struct {
    const char *what;
    const kiln_buffer *b;
    size_t off, n;
    kiln_dtype dt;
  } others[] = {{"x", x, x_offset, count, dtype},
                {"dy", dy, dy_offset, count, dtype},
                {"scale", scale, scale_offset, cols, dtype},
                {"dx", dx, dx_offset, count, dtype}};
  kiln_buffer *const outs[2] = {dscale, dbias};
  const size_t out_offs[2] = {dscale_offset, dbias_offset};
  const char *const out_names[2] = {"dscale", "dbias"};
  for (int i = 0; i < 2; i++) {
    if (outs[i] == NULL)
      continue;
    KILN__CHECK(s, kiln__ops_check_out(fn, queue, out_names[i], outs[i], out_offs[i],
                              cols, KILN_F32));
    for (size_t j = 0; j < sizeof others / sizeof others[0]; j++)
      if (others[j].b != NULL)
        KILN__CHECK(s, kiln__ops_check_overlap(fn, others[j].what, others[j].b,
                                      others[j].off, others[j].n, others[j].dt,
                                      out_names[i], outs[i], out_offs[i], cols,
                                      KILN_F32, false));
  }
  if (dscale != NULL && dbias != NULL)
    KILN__CHECK(s, kiln__ops_check_overlap(fn, "dscale", dscale, dscale_offset, cols,
                                  KILN_F32, "dbias", dbias, dbias_offset, cols,
                                  KILN_F32, false));
  if (s != KILN_OK)
    return s;
  struct kiln__op o;
  if ((s = kiln__op_begin(&o, queue, fn, num_wait, wait_list, out_event)))
    return s;
  size_t shape[2] = {rows, cols};
  kiln__op_describe(&o, "layernorm_rows_backward", dtype, 2, shape,
                    3.0 * (double)kiln_dtype_size(dtype) * (double)count,
                    16.0 * (double)count);
  bool sums = dscale != NULL || dbias != NULL;
  if (count > 0 && (dx != NULL || sums)) {
    struct kiln__train_rows p;
    kiln__train_rows_params(queue->ctx, dtype, &p);
    cl_mem stats = NULL;
    if (sums)
      KILN__CHECK(s, kiln__op_workspace(&o, rows * 8, &stats)); /* rows*cols fits */
    cl_mem sc = scale != NULL ? scale->cl : x->cl;
    cl_mem dxm = dx != NULL ? dx->cl : x->cl;
    cl_mem st = stats != NULL ? stats : x->cl;
    cl_ulong xo = x_offset, so = scale != NULL ? scale_offset : 0;
    cl_ulong go = dy_offset, dxo = dx != NULL ? dx_offset : 0;
    cl_ulong nr = rows, nc = cols;
    /* The column sums read dy after the row pass: when dx is dy (in
     * place), the row pass first writes only the row statistics, and dx
     * comes in a third launch after the sums. */
    const bool in_place = dx == dy && dx_offset == dy_offset;
    cl_int has_scale = scale != NULL, has_stats = sums;
    cl_int has_dx = dx != NULL && !(in_place && sums);
    cl_kernel k = NULL;
    KILN__CHECK(s, kiln__op_kernel(
        &o, "train_rows", p.options, "layernorm_backward_rows", &k, 15,
        KILN__ARG(x->cl), KILN__ARG(xo), KILN__ARG(sc), KILN__ARG(so),
        KILN__ARG(has_scale), KILN__ARG(eps), KILN__ARG(dy->cl), KILN__ARG(go),
        KILN__ARG(dxm), KILN__ARG(dxo), KILN__ARG(has_dx), KILN__ARG(st),
        KILN__ARG(has_stats), KILN__ARG(nr), KILN__ARG(nc)));
    KILN__CHECK(s, kiln__train_launch_rows(&o, &p, k, rows));
    if (sums) {
      cl_mem dsm = dscale != NULL ? dscale->cl : st;
      cl_mem dbm = dbias != NULL ? dbias->cl : st;
      cl_ulong dso = dscale != NULL ? dscale_offset : 0;
      cl_ulong dbo = dbias != NULL ? dbias_offset : 0;
      cl_int has_ds = dscale != NULL, has_db = dbias != NULL;
      cl_kernel kc = NULL;
      KILN__CHECK(s, kiln__op_kernel(
          &o, "train_rows", p.options, "layernorm_backward_cols", &kc, 13,
          KILN__ARG(x->cl), KILN__ARG(xo), KILN__ARG(dy->cl), KILN__ARG(go),
          KILN__ARG(st), KILN__ARG(dsm), KILN__ARG(dso), KILN__ARG(has_ds),
          KILN__ARG(dbm), KILN__ARG(dbo), KILN__ARG(has_db), KILN__ARG(nr),
          KILN__ARG(nc)));
      KILN__CHECK(s, kiln__train_launch_elems(&o, kc, cols));
    }
    if (dx != NULL && !has_dx) {
      has_dx = 1;
      KILN__CHECK(s, kiln__op_args(
          &o, k, 15, KILN__ARG(x->cl), KILN__ARG(xo), KILN__ARG(sc),
          KILN__ARG(so), KILN__ARG(has_scale), KILN__ARG(eps),
          KILN__ARG(dy->cl), KILN__ARG(go), KILN__ARG(dxm), KILN__ARG(dxo),
          KILN__ARG(has_dx), KILN__ARG(st), KILN__ARG(has_stats),
          KILN__ARG(nr), KILN__ARG(nc)));
      KILN__CHECK(s, kiln__train_launch_rows(&o, &p, k, rows));
    }
  }
  return kiln__op_end(&o, s, out_event);
}

void kiln__ops_warm_train_loss(const kiln_context *ctx, kiln__warm_add_fn add,
                               void *user) {
  for (int d = KILN_F32; d <= KILN_BF16; d++) {
    struct kiln__train_rows p;
    kiln__train_rows_params(ctx, (kiln_dtype)d, &p);
    add(user, "train_rows", p.options);
  }
}
