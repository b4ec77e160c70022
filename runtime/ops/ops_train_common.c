/* Helpers the training-op modules share (ops_train_internal.h): launch
 * shapes, row-kernel parameters, scalar and range-list checks. */
#include "ops_train_internal.h"

#include <math.h>
#include <stdio.h>

kiln_status kiln__train_launch_elems(struct kiln__op *op, cl_kernel k,
                                     size_t n) {
  const struct kiln_tuning *t = kiln__ops_tuning(op->queue->ctx);
  size_t local = kiln__ops_local_size(op->queue->ctx,
                                      kiln__ops_tune(t->elementwise_wg, 256));
  return kiln__op_launch_1d(op, k, n, local);
}

kiln_status kiln__train_launch_matrix(struct kiln__op *op, cl_kernel k,
                                      size_t rows, size_t cols) {
  const struct kiln_tuning *t = kiln__ops_tuning(op->queue->ctx);
  size_t want = kiln__ops_tune(t->elementwise_wg, 256);
  /* A narrow matrix would waste most of a wide group on padding. */
  while (want > 16 && want / 2 >= cols)
    want /= 2;
  size_t local[2] = {kiln__ops_local_size(op->queue->ctx, want), 1};
  size_t global[2] = {0, rows};
  if (!kiln__ops_round_up(cols, local[0], &global[0]))
    return kiln__fail(KILN_ERR_INVALID_SIZE, "%s: cols %zu is too large",
                      op->fn, cols);
  return kiln__op_launch(op, k, 2, global, local);
}

void kiln__train_rows_params(const kiln_context *ctx, kiln_dtype dtype,
                             struct kiln__train_rows *p) {
  const struct kiln_tuning *t = kiln__ops_tuning(ctx);
  p->cpu = t->family == KILN_FAMILY_CPU;
  p->wg = kiln__ops_local_size(ctx,
                               kiln__ops_tune(t->reduce_wg, p->cpu ? 16 : 256));
  snprintf(p->options, sizeof p->options, "-DDT=%d -DFAMILY=%d -DWG=%zu",
           (int)dtype, p->cpu ? 1 : 0, p->wg);
}

kiln_status kiln__train_launch_rows(struct kiln__op *op,
                                    const struct kiln__train_rows *p,
                                    cl_kernel k, size_t rows) {
  size_t items = rows, global;
  if ((!p->cpu && kiln__mul_overflows(rows, p->wg, &items)) ||
      !kiln__ops_round_up(items, p->wg, &global))
    return kiln__fail(KILN_ERR_INVALID_SIZE, "%s: rows %zu is too large",
                      op->fn, rows);
  return kiln__op_launch(op, k, 1, &global, &p->wg);
}

kiln_status kiln__train_check_finite(const char *fn, const char *what,
                                     float value) {
  if (!isfinite(value))
    return kiln__fail(KILN_ERR_INVALID_ARGUMENT, "%s: %s %g must be finite", fn,
                      what, (double)value);
  return KILN_OK;
}

kiln_status kiln__train_need(const char *fn, const char *what,
                             const void *desc) {
  if (desc == NULL)
    return kiln__fail(KILN_ERR_NULL_POINTER, "%s: %s is NULL", fn, what);
  return KILN_OK;
}

kiln_status kiln__train_check_row_major(const char *fn, const char *what,
                                        const kiln_matrix *m) {
  kiln_status s = kiln__train_need(fn, what, m);
  if (s == KILN_OK)
    s = kiln__ops_check_unpacked(fn, what, m);
  if (s == KILN_OK &&
      (m->layout != KILN_ROW_MAJOR || m->trans != KILN_NO_TRANS))
    s = kiln__fail(KILN_ERR_INVALID_ARGUMENT,
                   "%s: %s must be row-major and not transposed (layout %d, "
                   "trans %d)",
                   fn, what, (int)m->layout, (int)m->trans);
  return s;
}

kiln_status kiln__train_check_matrix(const char *fn, const char *what,
                                     const kiln_matrix *m) {
  kiln_status s = kiln__train_check_row_major(fn, what, m);
  if (s != KILN_OK)
    return s;
  if (m->ld != 0 && m->ld != m->cols)
    return kiln__fail(KILN_ERR_INVALID_ARGUMENT,
                      "%s: %s->ld %zu: the training ops take packed rows (ld 0 "
                      "or cols %zu)",
                      fn, what, m->ld, m->cols);
  if (m->batch_stride != 0)
    return kiln__fail(KILN_ERR_INVALID_ARGUMENT,
                      "%s: %s->batch_stride %zu: the training ops take one "
                      "matrix (0)",
                      fn, what, m->batch_stride);
  size_t count;
  return kiln__ops_check_shape(fn, m->rows, m->cols, &count);
}

kiln_status kiln__train_same_dtype(const char *fn, const char *what,
                                   kiln_dtype dtype, const char *other,
                                   kiln_dtype other_dtype) {
  if (dtype == other_dtype)
    return KILN_OK;
  return kiln__fail(
      KILN_ERR_SHAPE_MISMATCH, "%s: %s dtype %s differs from %s dtype %s", fn,
      what, kiln_dtype_name(dtype), other, kiln_dtype_name(other_dtype));
}

kiln_status kiln__train_same_count(const char *fn, const char *what,
                                   size_t count, const char *other,
                                   size_t other_count) {
  if (count == other_count)
    return KILN_OK;
  return kiln__fail(KILN_ERR_SHAPE_MISMATCH,
                    "%s: %s has %zu elements but %s is %zu", fn, what, count,
                    other, other_count);
}

kiln_status kiln__train_same_matrix(const char *fn, const char *what,
                                    const kiln_matrix *m, const char *other,
                                    const kiln_matrix *o) {
  if (m->rows != o->rows || m->cols != o->cols)
    return kiln__fail(KILN_ERR_SHAPE_MISMATCH,
                      "%s: %s is %zux%zu but %s is %zux%zu", fn, what, m->rows,
                      m->cols, other, o->rows, o->cols);
  return kiln__train_same_dtype(fn, what, m->dtype, other, o->dtype);
}

kiln_status kiln__train_check_scalar(const char *fn, const char *what,
                                     const kiln_range *r, kiln_dtype dtype) {
  kiln_status s = kiln__train_need(fn, what, r);
  if (s == KILN_OK && r->dtype != dtype) {
    char name[48];
    snprintf(name, sizeof name, "%s dtype", what);
    s = kiln__ops_check_dtype(fn, name, r->dtype, KILN__DT(dtype));
  }
  if (s == KILN_OK && r->count != 1)
    s = kiln__fail(KILN_ERR_SHAPE_MISMATCH,
                   "%s: %s has %zu elements: it is one %s", fn, what, r->count,
                   kiln_dtype_name(dtype));
  return s;
}

kiln_status kiln__train_check_ranges(const char *fn, kiln_queue *queue,
                                     size_t num_ranges,
                                     const kiln_range *ranges, bool write) {
  if (num_ranges > 65536)
    return kiln__fail(KILN_ERR_INVALID_SIZE, "%s: num_ranges %zu exceeds 65536",
                      fn, num_ranges);
  if (num_ranges > 0 && ranges == NULL)
    return kiln__fail(KILN_ERR_NULL_POINTER,
                      "%s: ranges is NULL with num_ranges %zu", fn, num_ranges);
  kiln_status s = KILN_OK;
  if (num_ranges > 0)
    s = kiln__ops_check_dtype(fn, "ranges[0] dtype", ranges[0].dtype,
                              KILN__DT_FLOATS);
  for (size_t i = 0; i < num_ranges && s == KILN_OK; i++) {
    char what[40];
    snprintf(what, sizeof what, "ranges[%zu]", i);
    const kiln_range *r = &ranges[i];
    kiln_dtype dtype = ranges[0].dtype;
    s = kiln__train_same_dtype(fn, what, r->dtype, "ranges[0]", dtype);
    snprintf(what, sizeof what, "ranges[%zu].buffer", i);
    KILN__CHECK(s, kiln__ops_check_in(fn, queue, what, r->buffer, r->offset,
                                      r->count, dtype));
    if (write)
      KILN__CHECK(s, kiln__ops_check_out(fn, queue, what, r->buffer, r->offset,
                                         r->count, dtype));
    for (size_t j = 0; write && j < i && s == KILN_OK; j++)
      s = kiln__ops_check_overlap(
          fn, what, r->buffer, r->offset, r->count, dtype, "an earlier range",
          ranges[j].buffer, ranges[j].offset, ranges[j].count, dtype, false);
  }
  return s;
}
