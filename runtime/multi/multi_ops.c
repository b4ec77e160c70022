/* Ops split across a device set. Each device gets a contiguous part (of the
 * batch, or of the elements), in its own buffers: every device's upload, op
 * and download are enqueued and flushed before any is waited for, so the
 * devices work at once. On a failure every queue is finished before the
 * buffers go and the call returns, so no command still reads or writes the
 * caller's arrays. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "multi.h"

/* One device's part of a split op. */
struct part {
  size_t first, count;
  kiln_buffer *buf[4];
};

static kiln_status check_set(const char *fn, const kiln_device_set *set) {
  if (set == NULL)
    return kiln__fail(KILN_ERR_NULL_POINTER, "%s: set is NULL", fn);
  return KILN_OK;
}

static kiln_status split(const kiln_device_set *set, size_t total,
                         struct part *parts) {
  size_t counts[KILN__MULTI_MAX];
  kiln_status status = kiln_device_set_split(set, total, set->count, counts);
  size_t first = 0;
  for (size_t d = 0; d < set->count; d++) {
    memset(&parts[d], 0, sizeof parts[d]);
    parts[d].first = first;
    parts[d].count = counts[d];
    first += counts[d];
  }
  return status;
}

/* Finish every queue (also after a failure), free the parts' buffers, and
 * return the first failure. */
static kiln_status finish(kiln_device_set *set, struct part *parts,
                          kiln_status status) {
  for (size_t d = 0; d < set->count; d++) {
    kiln_status s = kiln_queue_finish(set->dev[d].queue);
    if (status == KILN_OK)
      status = s;
  }
  for (size_t d = 0; d < set->count; d++)
    for (int i = 0; i < 4; i++)
      kiln_buffer_destroy(parts[d].buf[i]);
  return status;
}

/* A device buffer of count f32 elements (at least one) holding
 * host[0 .. count) when host is not NULL. */
static kiln_status upload(kiln_context *ctx, kiln_queue *q, const float *host,
                          size_t count, kiln_buffer **out) {
  kiln_status status =
      kiln_buffer_create(ctx, (count < 1 ? 1 : count) * 4, 0, out);
  if (status == KILN_OK && host != NULL && count > 0)
    status = kiln_buffer_write(q, host, &(kiln_range){*out, 0, count, KILN_F32},
                               0, NULL, NULL);
  return status;
}

/* Elements spanned by a stored rows x cols matrix with leading dim ld. */
static bool extent(kiln_layout layout, size_t rows, size_t cols, size_t ld,
                   size_t *out) {
  if (rows == 0 || cols == 0) {
    *out = 0;
    return true;
  }
  size_t outer = layout == KILN_COL_MAJOR ? cols : rows;
  size_t inner = layout == KILN_COL_MAJOR ? rows : cols;
  return !kiln__mul_overflows(outer - 1, ld, out) &&
         !kiln__add_overflows(*out, inner, out);
}

/* Elements one device needs of an operand: nb (> 0) entries at stride, or
 * the shared matrix when stride is 0; false when the bytes overflow. */
static bool span(size_t nb, size_t stride, size_t one, size_t *out) {
  if (stride == 0)
    *out = one;
  else if (kiln__mul_overflows(nb - 1, stride, out) ||
           kiln__add_overflows(*out, one, out))
    return false;
  return *out <= SIZE_MAX / 4;
}

/* The leading dimension in force: ld, or the packed one when ld is 0. */
static size_t lead(const kiln_matrix *x) {
  if (x->ld != 0)
    return x->ld;
  return x->layout == KILN_COL_MAJOR ? x->rows : x->cols;
}

/* The split GEMM of checked operands: each device's part of the batch runs
 * on the caller's descriptors moved onto its own buffers (offset 0, the
 * leading dimension in force). */
static kiln_status gemm_split(const char *fn, kiln_device_set *set,
                              size_t batch, const kiln_matrix *a,
                              const float *a_host, const kiln_matrix *b,
                              const float *b_host, const kiln_matrix *c,
                              float *c_host, const kiln_epilogue *e) {
  kiln_status status = KILN_OK;
  if (batch == 0 || c->rows == 0 || c->cols == 0)
    return KILN_OK;
  const kiln_matrix *x[3] = {a, b, c};
  size_t ext[3];
  for (int i = 0; i < 3; i++)
    if (!extent(x[i]->layout, x[i]->rows, x[i]->cols, lead(x[i]), &ext[i]))
      return kiln__fail(KILN_ERR_INVALID_SIZE,
                        "%s: a matrix's extent overflows size_t", fn);
  struct part parts[KILN__MULTI_MAX];
  if ((status = split(set, batch, parts)) != KILN_OK)
    return status;
  for (size_t d = 0; d < set->count && status == KILN_OK; d++) {
    struct part *p = &parts[d];
    if (p->count == 0)
      continue;
    kiln_context *ctx = set->dev[d].ctx;
    kiln_queue *q = set->dev[d].queue;
    size_t n[3];
    if (!span(p->count, a->batch_stride, ext[0], &n[0]) ||
        !span(p->count, b->batch_stride, ext[1], &n[1]) ||
        !span(p->count, c->batch_stride, ext[2], &n[2])) {
      status = kiln__fail(KILN_ERR_INVALID_SIZE,
                          "%s: the batch's extent overflows size_t", fn);
      break;
    }
    float *pc = c_host + c->offset + p->first * c->batch_stride;
    /* A shared operand (batch stride 0) goes whole to every device; beta
     * == 0 never reads C: it is not uploaded. */
    const float *host[3] = {
        a_host + a->offset + p->first * a->batch_stride,
        b_host + b->offset + p->first * b->batch_stride,
        e->beta != 0.0f ? pc : NULL};
    kiln_matrix dev[3];
    for (int i = 0; i < 3 && status == KILN_OK; i++) {
      status = upload(ctx, q, host[i], n[i], &p->buf[i]);
      dev[i] = *x[i];
      dev[i].buffer = p->buf[i];
      dev[i].offset = 0;
      dev[i].ld = lead(x[i]);
    }
    if (status == KILN_OK)
      status = kiln_matmul(q, p->count, &dev[0], &dev[1], &dev[2], e, 0, NULL,
                           NULL);
    if (status == KILN_OK)
      status = kiln_buffer_read(q, &(kiln_range){p->buf[2], 0, n[2], KILN_F32},
                                pc, 0, NULL, NULL);
    if (status == KILN_OK)
      status = kiln_queue_flush(q);
  }
  return finish(set, parts, status);
}

/* Check one operand's descriptor: host data (buffer NULL), f32, the
 * layout of a. */
static kiln_status check_host_matrix(const char *fn, const char *name,
                                     const kiln_matrix *x, const void *host,
                                     kiln_layout layout) {
  if (x == NULL || host == NULL)
    return kiln__fail(KILN_ERR_NULL_POINTER, "%s: %s%s is NULL", fn, name,
                      x == NULL ? "" : "_host");
  if (x->buffer != NULL)
    return kiln__fail(KILN_ERR_INVALID_ARGUMENT,
                      "%s: %s->buffer is not NULL; the split GEMM takes host "
                      "data (%s_host), see kiln_multi.h",
                      fn, name, name);
  if (x->packed != NULL)
    return kiln__fail(KILN_ERR_INVALID_ARGUMENT,
                      "%s: %s->packed is set; the split GEMM takes host data "
                      "(%s_host), see kiln_multi.h",
                      fn, name, name);
  if (x->dtype != KILN_F32)
    return kiln__fail(KILN_ERR_INVALID_ARGUMENT,
                      "%s: %s dtype %s is not f32", fn, name,
                      kiln_dtype_name(x->dtype));
  if (x->layout != KILN_ROW_MAJOR && x->layout != KILN_COL_MAJOR)
    return kiln__fail(KILN_ERR_INVALID_ARGUMENT, "%s: %s layout %d is unknown",
                      fn, name, (int)x->layout);
  if (x->layout != layout)
    return kiln__fail(KILN_ERR_SHAPE_MISMATCH,
                      "%s: %s layout differs from a's", fn, name);
  if (x->trans != KILN_NO_TRANS && x->trans != KILN_TRANS)
    return kiln__fail(KILN_ERR_INVALID_ARGUMENT, "%s: %s trans %d is unknown",
                      fn, name, (int)x->trans);
  return KILN_OK;
}

kiln_status kiln_multi_gemm_batched(kiln_device_set *set, size_t batch,
                                    const kiln_matrix *a, const float *a_host,
                                    const kiln_matrix *b, const float *b_host,
                                    const kiln_matrix *c, float *c_host,
                                    float alpha, float beta) {
  static const char fn[] = "kiln_multi_gemm_batched";
  kiln_status status = check_set(fn, set);
  if (status == KILN_OK && a == NULL)
    status = kiln__fail(KILN_ERR_NULL_POINTER, "%s: a is NULL", fn);
  if (status == KILN_OK)
    status = check_host_matrix(fn, "a", a, a_host, a->layout);
  if (status == KILN_OK)
    status = check_host_matrix(fn, "b", b, b_host, a->layout);
  if (status == KILN_OK)
    status = check_host_matrix(fn, "c", c, c_host, a->layout);
  if (status != KILN_OK)
    return status;
  if (c->trans != KILN_NO_TRANS)
    return kiln__fail(KILN_ERR_INVALID_ARGUMENT,
                      "%s: c->trans must be KILN_NO_TRANS", fn);
  /* op(a) is m x k, op(b) k x n, c m x n. */
  size_t m = a->trans ? a->cols : a->rows, k = a->trans ? a->rows : a->cols;
  size_t kb = b->trans ? b->cols : b->rows, n = b->trans ? b->rows : b->cols;
  if (kb != k || c->rows != m || c->cols != n)
    return kiln__fail(KILN_ERR_SHAPE_MISMATCH,
                      "%s: op(a) is %zu x %zu, op(b) %zu x %zu and c %zu x "
                      "%zu; they must be m x k, k x n and m x n",
                      fn, m, k, kb, n, c->rows, c->cols);
  const kiln_epilogue e = {alpha, beta, NULL, KILN_ACT_NONE};
  return gemm_split(fn, set, batch, a, a_host, b, b_host, c, c_host, &e);
}

/* The elementwise ops: arity 1 (unary) or 2 (binary). */
static kiln_status map(const char *fn, kiln_device_set *set, int arity, int op,
                       size_t n, const float *x, const float *x2, float *y) {
  kiln_status status = check_set(fn, set);
  if (status != KILN_OK)
    return status;
  if (x == NULL || (arity == 2 && x2 == NULL) || y == NULL)
    return kiln__fail(KILN_ERR_NULL_POINTER, "%s: %s is NULL", fn,
                      x == NULL                    ? (arity == 2 ? "a" : "x")
                      : (arity == 2 && x2 == NULL) ? "b"
                                                   : "y");
  if (n > SIZE_MAX / 4)
    return kiln__fail(KILN_ERR_INVALID_SIZE, "%s: n %zu overflows", fn, n);
  if (n == 0)
    return KILN_OK;
  struct part parts[KILN__MULTI_MAX];
  if ((status = split(set, n, parts)) != KILN_OK)
    return status;
  for (size_t d = 0; d < set->count && status == KILN_OK; d++) {
    struct part *p = &parts[d];
    if (p->count == 0)
      continue;
    kiln_context *ctx = set->dev[d].ctx;
    kiln_queue *q = set->dev[d].queue;
    status = upload(ctx, q, x + p->first, p->count, &p->buf[0]);
    if (status == KILN_OK && arity == 2)
      status = upload(ctx, q, x2 + p->first, p->count, &p->buf[1]);
    const kiln_range r0 = {p->buf[0], 0, p->count, KILN_F32};
    const kiln_range r1 = {p->buf[1], 0, p->count, KILN_F32};
    if (status == KILN_OK) {
      if (arity == 1)
        status = kiln_unary(q, (kiln_unary_op)op, &r0, &r0, 0, NULL, NULL);
      else
        status =
            kiln_binary(q, (kiln_binary_op)op, &r0, &r1, &r0, 0, NULL, NULL);
    }
    /* All uploads are enqueued before this download (one in-order queue),
     * so y may be the same array as x. */
    if (status == KILN_OK)
      status = kiln_buffer_read(q,
                                &(kiln_range){p->buf[0], 0, p->count, KILN_F32},
                                y + p->first, 0, NULL, NULL);
    if (status == KILN_OK)
      status = kiln_queue_flush(q);
  }
  return finish(set, parts, status);
}

kiln_status kiln_multi_unary(kiln_device_set *set, kiln_unary_op op, size_t n,
                             const float *x, float *y) {
  return map("kiln_multi_unary", set, 1, op, n, x, NULL, y);
}

kiln_status kiln_multi_binary(kiln_device_set *set, kiln_binary_op op,
                              size_t n, const float *a, const float *b,
                              float *y) {
  return map("kiln_multi_binary", set, 2, op, n, a, b, y);
}

kiln_status kiln_multi_reduce(kiln_device_set *set, kiln_reduce_op op,
                              size_t n, const float *x, float *result) {
  static const char fn[] = "kiln_multi_reduce";
  kiln_status status = check_set(fn, set);
  if (status != KILN_OK)
    return status;
  if (x == NULL || result == NULL)
    return kiln__fail(KILN_ERR_NULL_POINTER, "%s: %s is NULL", fn,
                      x == NULL ? "x" : "result");
  if (op != KILN_REDUCE_SUM && op != KILN_REDUCE_MIN &&
      op != KILN_REDUCE_MAX && op != KILN_REDUCE_MEAN)
    return kiln__fail(KILN_ERR_INVALID_ARGUMENT,
                      "%s: op %d cannot be combined from parts (SUM, MIN, "
                      "MAX or MEAN)", fn, (int)op);
  if (n == 0 || n > SIZE_MAX / 4)
    return kiln__fail(KILN_ERR_INVALID_SIZE, "%s: n %zu is 0 or overflows", fn,
                      n);
  struct part parts[KILN__MULTI_MAX];
  float partial[KILN__MULTI_MAX];
  if ((status = split(set, n, parts)) != KILN_OK)
    return status;
  for (size_t d = 0; d < set->count && status == KILN_OK; d++) {
    struct part *p = &parts[d];
    if (p->count == 0)
      continue;
    kiln_context *ctx = set->dev[d].ctx;
    kiln_queue *q = set->dev[d].queue;
    status = upload(ctx, q, x + p->first, p->count, &p->buf[0]);
    if (status == KILN_OK)
      status = upload(ctx, q, NULL, 1, &p->buf[1]);
    if (status == KILN_OK)
      status =
          kiln_reduce(q, op, &(kiln_range){p->buf[0], 0, p->count, KILN_F32},
                      &(kiln_range){p->buf[1], 0, 1, KILN_F32}, 0, NULL, NULL);
    if (status == KILN_OK)
      status = kiln_buffer_read(q, &(kiln_range){p->buf[1], 0, 1, KILN_F32},
                                &partial[d], 0, NULL, NULL);
    if (status == KILN_OK)
      status = kiln_queue_flush(q);
  }
  if ((status = finish(set, parts, status)) != KILN_OK)
    return status;
  /* In device order, so a fixed split always gives the same bits. */
  double acc = 0;
  float best = NAN;
  for (size_t d = 0; d < set->count; d++) {
    if (parts[d].count == 0)
      continue;
    if (op == KILN_REDUCE_SUM)
      acc += partial[d];
    else if (op == KILN_REDUCE_MEAN)
      acc += (double)partial[d] * (double)parts[d].count;
    else if (op == KILN_REDUCE_MIN)
      best = fminf(best, partial[d]);
    else
      best = fmaxf(best, partial[d]);
  }
  if (op == KILN_REDUCE_SUM)
    *result = (float)acc;
  else if (op == KILN_REDUCE_MEAN)
    *result = (float)(acc / (double)n);
  else
    *result = best;
  return KILN_OK;
}
