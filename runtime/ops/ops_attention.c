/* Attention ops: kiln_attention_forward, _backward, _cache_append and
 * _decode (contracts in kiln/kiln_ops_attention.h; kernels in
 * cl_kernels/attention.cl). One program per (dtype, head-size bucket 32, 64
 * or 128, family) holds every kernel; decode is the forward kernel with the
 * keys and values read from the caches' strides. */
#include "ops_train_internal.h"
#include "kiln/kiln_ops_attention.h"

#include <math.h>
#include <stdio.h>

#define MAX_HEAD 128

/* The elements a matrix operand covers in its buffer: [offset, offset +
 * count), for the overlap checks. */
struct span {
  const kiln_buffer *buffer;
  size_t offset, count, ld;
};

/* One operand: rows x cols of dtype (named by dtype_of), entries batch
 * entries batch_stride apart, row-major, not transposed, ld 0 or >= cols;
 * an output's entries must not overlap each other. what names it. */
static kiln_status check_operand(const char *fn, const kiln_queue *queue,
                                 const char *what, const kiln_matrix *m,
                                 size_t rows, size_t cols, const char *shape_of,
                                 size_t entries, kiln_dtype dtype,
                                 const char *dtype_of, bool write,
                                 struct span *sp) {
  kiln_status s = kiln__train_check_row_major(fn, what, m);
  if (s != KILN_OK)
    return s;
  if (m->rows != rows || m->cols != cols)
    return kiln__fail(KILN_ERR_SHAPE_MISMATCH,
                      "%s: %s is %zux%zu but %s makes it %zux%zu", fn, what,
                      m->rows, m->cols, shape_of, rows, cols);
  if (dtype_of != NULL)
    KILN__CHECK(s, kiln__train_same_dtype(fn, what, m->dtype, dtype_of, dtype));
  else {
    char name[40];
    snprintf(name, sizeof name, "%s dtype", what);
    KILN__CHECK(s, kiln__ops_check_dtype(fn, name, m->dtype, KILN__DT_FLOATS));
  }
  if (s != KILN_OK)
    return s;
  size_t ld = m->ld ? m->ld : cols;
  if (ld < cols)
    return kiln__fail(KILN_ERR_INVALID_ARGUMENT,
                      "%s: %s->ld %zu is less than its %zu cols", fn, what, ld,
                      cols);
  size_t one, span = 0, total;
  if (kiln__mul_overflows(rows - 1, ld, &one) ||
      kiln__add_overflows(one, cols, &one) ||
      kiln__mul_overflows(entries - 1, m->batch_stride, &span) ||
      kiln__add_overflows(span, one, &total))
    return kiln__fail(KILN_ERR_INVALID_SIZE,
                      "%s: the extent of %s (%zux%zu, ld %zu, batch_stride "
                      "%zu, %zu entries) overflows size_t",
                      fn, what, rows, cols, ld, m->batch_stride, entries);
  if (write && entries > 1 && m->batch_stride < one)
    return kiln__fail(KILN_ERR_INVALID_ARGUMENT,
                      "%s: %s->batch_stride %zu is less than the %zu elements "
                      "one entry spans, so the %zu entries it is written in "
                      "would overlap",
                      fn, what, m->batch_stride, one, entries);
  s = write ? kiln__ops_check_out(fn, queue, what, m->buffer, m->offset, total,
                                  m->dtype)
            : kiln__ops_check_in(fn, queue, what, m->buffer, m->offset, total,
                                 m->dtype);
  *sp = (struct span){m->buffer, m->offset, total, ld};
  return s;
}

static kiln_status disjoint(const char *fn, const char *a_what,
                            const struct span *a, const char *b_what,
                            const struct span *b, kiln_dtype dtype) {
  return kiln__ops_check_overlap(fn, a_what, a->buffer, a->offset, a->count,
                                 dtype, b_what, b->buffer, b->offset, b->count,
                                 dtype, false);
}

/* batch, heads (> 0, their product at most UINT32_MAX), and the model width
 * c split into heads of at most MAX_HEAD; *hs receives c / heads. */
static kiln_status check_heads(const char *fn, size_t batch, size_t heads,
                               size_t c, const char *c_of, size_t *hs) {
  size_t bh;
  if (batch == 0 || heads == 0)
    return kiln__fail(KILN_ERR_INVALID_SIZE,
                      "%s: batch %zu and heads %zu must be at least 1", fn,
                      batch, heads);
  if (kiln__mul_overflows(batch, heads, &bh) || bh > UINT32_MAX)
    return kiln__fail(KILN_ERR_INVALID_SIZE,
                      "%s: batch %zu x heads %zu exceeds UINT32_MAX", fn, batch,
                      heads);
  if (c == 0 || c % heads != 0)
    return kiln__fail(KILN_ERR_INVALID_ARGUMENT,
                      "%s: heads %zu does not divide C %zu (%s)", fn, heads, c,
                      c_of);
  *hs = c / heads;
  if (*hs > MAX_HEAD)
    return kiln__fail(KILN_ERR_INVALID_ARGUMENT,
                      "%s: head size %zu (C %zu / heads %zu) exceeds %d", fn,
                      *hs, c, heads, MAX_HEAD);
  return KILN_OK;
}

/* A sequence length the kernels index with 32-bit integers. */
static kiln_status check_length(const char *fn, const char *what, size_t t) {
  if (t == 0 || t > INT32_MAX)
    return kiln__fail(KILN_ERR_INVALID_SIZE,
                      "%s: %s %zu must be in [1, INT32_MAX]", fn, what, t);
  return KILN_OK;
}

/* The params in force (NULL: KILN_ATTENTION_PARAMS_INIT). */
static kiln_status resolve_params(const char *fn,
                                  const kiln_attention_params *params,
                                  size_t hs, float *scale, cl_uint *causal) {
  const kiln_attention_params init = KILN_ATTENTION_PARAMS_INIT;
  const kiln_attention_params *p = params ? params : &init;
  if (!isfinite(p->scale) || p->scale < 0)
    return kiln__fail(KILN_ERR_INVALID_ARGUMENT,
                      "%s: params->scale %g must be finite and >= 0 (0: 1 / "
                      "sqrt(head size))",
                      fn, (double)p->scale);
  *scale = p->scale != 0 ? p->scale : (float)(1.0 / sqrt((double)hs));
  *causal = p->causal ? 1 : 0;
  return KILN_OK;
}

/* ---- kernels --------------------------------------------------------------- */

struct cfg {
  size_t bq;   /* local size of dimension 0 */
  size_t rows; /* rows per work-item */
  char options[96];
};

static unsigned bucket(size_t hs) { return hs <= 32 ? 32 : hs <= 64 ? 64 : 128; }

static void make_cfg(const kiln_context *ctx, kiln_dtype dtype, unsigned dmax,
                     struct cfg *c) {
  bool cpu = kiln__train_cpu(ctx);
  /* GPU: a group of 64 query rows shares each staged tile. CPU: a
   * work-item per 16 rows, one per float16 lane, alone in its group (PoCL
   * would otherwise run a group's items one after another anyway). */
  c->bq = cpu ? 1 : kiln__ops_local_size(ctx, 64);
  c->rows = cpu ? 16 : 1;
  snprintf(c->options, sizeof c->options,
           "-DDT=%d -DFAMILY=%d -DDMAX=%u -DBQ=%zu -DBK=%u", (int)dtype,
           cpu ? 1 : 0, dmax, c->bq, 2048 / dmax);
}

/* rows (in blocks of c->rows) rounded up to the group's size, times the
 * batch x heads pairs. */
static kiln_status launch_rows(struct kiln__op *op, const struct cfg *c,
                               cl_kernel k, size_t rows, size_t bh) {
  size_t global[2] = {0, bh}, local[2] = {c->bq, 1};
  if (!kiln__ops_round_up(kiln__div_up(rows, c->rows), c->bq, &global[0]))
    return kiln__fail(KILN_ERR_INVALID_SIZE, "%s: %zu rows is too many",
                      op->fn, rows);
  return kiln__op_launch(op, k, 2, global, local);
}

/* The forward kernel over tq queries against tk keys; the operands'
 * offsets, leading dimensions and strides in elements. */
struct fwd_args {
  const kiln_buffer *q, *k, *v, *o, *lse;
  cl_ulong q_off, q_ld, q_bs, k_off, k_ld, k_bs, k_hs, v_off, v_ld, v_bs,
      v_hs, o_off, o_ld, o_bs, lse_off;
  cl_uint has_lse, tq, tk, qpos0, heads, d, causal;
  float scale;
};

static kiln_status run_fwd(struct kiln__op *op, kiln_dtype dtype,
                           const struct fwd_args *a, size_t bh) {
  struct cfg c;
  make_cfg(op->queue->ctx, dtype, bucket(a->d), &c);
  cl_kernel k = NULL;
  kiln_status s = kiln__op_kernel(
      op, "attention", c.options, "attn_fwd", &k, 28, KILN__ARG(a->q->cl),
      KILN__ARG(a->q_off), KILN__ARG(a->q_ld), KILN__ARG(a->q_bs),
      KILN__ARG(a->k->cl), KILN__ARG(a->k_off), KILN__ARG(a->k_ld),
      KILN__ARG(a->k_bs), KILN__ARG(a->k_hs), KILN__ARG(a->v->cl),
      KILN__ARG(a->v_off), KILN__ARG(a->v_ld), KILN__ARG(a->v_bs),
      KILN__ARG(a->v_hs), KILN__ARG(a->o->cl), KILN__ARG(a->o_off),
      KILN__ARG(a->o_ld), KILN__ARG(a->o_bs), KILN__ARG(a->lse->cl),
      KILN__ARG(a->lse_off), KILN__ARG(a->has_lse), KILN__ARG(a->tq),
      KILN__ARG(a->tk), KILN__ARG(a->qpos0), KILN__ARG(a->heads),
      KILN__ARG(a->d), KILN__ARG(a->causal), KILN__ARG(a->scale));
  KILN__CHECK(s, launch_rows(op, &c, k, a->tq, bh));
  return s;
}

/* Multiply-adds of attention over rows queries and keys keys per pair
 * (half the pairs under the causal mask of a square). */
static double attn_flops(size_t bh, size_t rows, size_t keys, size_t hs,
                         bool causal) {
  double pairs = (double)rows * (double)keys;
  if (causal && rows == keys)
    pairs = pairs / 2 + (double)rows / 2;
  return 4.0 * (double)bh * pairs * (double)hs;
}

/* ---- entry points ---------------------------------------------------------- */

KILN_API kiln_status kiln_attention_forward(
    kiln_queue *queue, size_t batch, size_t heads, const kiln_matrix *qkv,
    const kiln_matrix *out, const kiln_range *lse,
    const kiln_attention_params *params, size_t num_wait,
    kiln_event *const *wait_list, kiln_event **out_event) {
  static const char fn[] = "kiln_attention_forward";
  kiln_status s = kiln__ops_check_queue(fn, queue);
  KILN__CHECK(s, kiln__train_need(fn, "qkv", qkv));
  KILN__CHECK(s, kiln__train_need(fn, "out", out));
  if (s != KILN_OK)
    return s;
  const size_t t = qkv->rows, c = out->cols;
  size_t hs = 0, bh = 0;
  struct span sq, so, sl = {0};
  KILN__CHECK(s, check_length(fn, "T (qkv's rows)", t));
  if (s == KILN_OK && (c > SIZE_MAX / 3 || qkv->cols != 3 * c))
    s = kiln__fail(KILN_ERR_SHAPE_MISMATCH,
                   "%s: qkv has %zu cols but out's %zu cols make it 3C = %zu",
                   fn, qkv->cols, c, 3 * c);
  KILN__CHECK(s, check_heads(fn, batch, heads, c, "out's cols", &hs));
  KILN__CHECK(s, check_operand(fn, queue, "qkv", qkv, t, 3 * c, "out", batch,
                               qkv->dtype, NULL, false, &sq));
  KILN__CHECK(s, check_operand(fn, queue, "out", out, t, c, "qkv", batch,
                               qkv->dtype, "qkv", true, &so));
  KILN__CHECK(s, disjoint(fn, "qkv", &sq, "out", &so, qkv->dtype));
  if (s == KILN_OK)
    bh = batch * heads;
  if (s == KILN_OK && lse != NULL) {
    size_t n = 0;
    s = kiln__ops_check_dtype(fn, "lse dtype", lse->dtype, KILN__DT(KILN_F32));
    if (s == KILN_OK && kiln__mul_overflows(bh, t, &n))
      s = kiln__fail(KILN_ERR_INVALID_SIZE, "%s: batch x heads x T overflows",
                     fn);
    KILN__CHECK(s, kiln__train_same_count(fn, "lse", lse->count,
                                          "batch x heads x T", n));
    KILN__CHECK(s, kiln__ops_check_out(fn, queue, "lse", lse->buffer,
                                       lse->offset, n, KILN_F32));
    sl = (struct span){lse->buffer, lse->offset, n, 0};
    KILN__CHECK(s, kiln__ops_check_overlap(
                       fn, "lse", lse->buffer, lse->offset, n, KILN_F32, "qkv",
                       sq.buffer, sq.offset, sq.count, qkv->dtype, false));
    KILN__CHECK(s, kiln__ops_check_overlap(
                       fn, "lse", lse->buffer, lse->offset, n, KILN_F32, "out",
                       so.buffer, so.offset, so.count, qkv->dtype, false));
  }
  float scale = 0;
  cl_uint causal = 0;
  KILN__CHECK(s, resolve_params(fn, params, hs, &scale, &causal));
  if (s != KILN_OK)
    return s;
  const kiln_dtype dtype = qkv->dtype;
  struct kiln__op o;
  if ((s = kiln__op_begin(&o, queue, fn, num_wait, wait_list, out_event)))
    return s;
  size_t shape[3] = {bh, t, hs};
  size_t es = kiln_dtype_size(dtype);
  kiln__op_describe(&o, "attention_forward", dtype, 3, shape,
                    (double)bh * (double)t * (double)hs * 4.0 * (double)es +
                        (lse ? 4.0 * (double)bh * (double)t : 0.0),
                    attn_flops(bh, t, t, hs, causal));
  struct fwd_args a = {
      .q = qkv->buffer, .k = qkv->buffer, .v = qkv->buffer, .o = out->buffer,
      .lse = lse ? lse->buffer : out->buffer,
      .q_off = qkv->offset, .q_ld = sq.ld, .q_bs = qkv->batch_stride,
      .k_off = qkv->offset + c, .k_ld = sq.ld, .k_bs = qkv->batch_stride,
      .k_hs = hs, .v_off = qkv->offset + 2 * c, .v_ld = sq.ld,
      .v_bs = qkv->batch_stride, .v_hs = hs, .o_off = out->offset,
      .o_ld = so.ld, .o_bs = out->batch_stride, .lse_off = sl.offset,
      .has_lse = lse != NULL, .tq = (cl_uint)t, .tk = (cl_uint)t, .qpos0 = 0,
      .heads = (cl_uint)heads, .d = (cl_uint)hs, .causal = causal,
      .scale = scale};
  s = run_fwd(&o, dtype, &a, bh);
  return kiln__op_end(&o, s, out_event);
}

KILN_API kiln_status kiln_attention_backward(
    kiln_queue *queue, size_t batch, size_t heads, const kiln_matrix *qkv,
    const kiln_matrix *out, const kiln_matrix *dout, const kiln_range *lse,
    const kiln_matrix *dqkv, const kiln_attention_params *params,
    size_t num_wait, kiln_event *const *wait_list, kiln_event **out_event) {
  static const char fn[] = "kiln_attention_backward";
  kiln_status s = kiln__ops_check_queue(fn, queue);
  KILN__CHECK(s, kiln__train_need(fn, "qkv", qkv));
  KILN__CHECK(s, kiln__train_need(fn, "out", out));
  KILN__CHECK(s, kiln__train_need(fn, "lse", lse));
  if (s != KILN_OK)
    return s;
  const size_t t = qkv->rows, c = out->cols;
  size_t hs = 0, bh = 0, n = 0;
  struct span sq, so, sd, sx, sl;
  KILN__CHECK(s, check_length(fn, "T (qkv's rows)", t));
  if (s == KILN_OK && (c > SIZE_MAX / 3 || qkv->cols != 3 * c))
    s = kiln__fail(KILN_ERR_SHAPE_MISMATCH,
                   "%s: qkv has %zu cols but out's %zu cols make it 3C = %zu",
                   fn, qkv->cols, c, 3 * c);
  KILN__CHECK(s, check_heads(fn, batch, heads, c, "out's cols", &hs));
  const kiln_dtype dtype = qkv->dtype;
  KILN__CHECK(s, check_operand(fn, queue, "qkv", qkv, t, 3 * c, "out", batch,
                               dtype, NULL, false, &sq));
  KILN__CHECK(s, check_operand(fn, queue, "out", out, t, c, "qkv", batch,
                               dtype, "qkv", false, &so));
  KILN__CHECK(s, check_operand(fn, queue, "dout", dout, t, c, "out", batch,
                               dtype, "qkv", false, &sd));
  KILN__CHECK(s, check_operand(fn, queue, "dqkv", dqkv, t, 3 * c, "qkv",
                               batch, dtype, "qkv", true, &sx));
  if (s == KILN_OK)
    bh = batch * heads;
  KILN__CHECK(s, kiln__ops_check_dtype(fn, "lse dtype", lse->dtype,
                                       KILN__DT(KILN_F32)));
  if (s == KILN_OK && kiln__mul_overflows(bh, t, &n))
    s = kiln__fail(KILN_ERR_INVALID_SIZE, "%s: batch x heads x T overflows",
                   fn);
  KILN__CHECK(s, kiln__train_same_count(fn, "lse", lse->count,
                                        "batch x heads x T", n));
  KILN__CHECK(s, kiln__ops_check_in(fn, queue, "lse", lse->buffer, lse->offset,
                                    n, KILN_F32));
  if (s != KILN_OK)
    return s;
  sl = (struct span){lse->buffer, lse->offset, n, 0};
  const struct span *ins[4] = {&sq, &so, &sd, &sl};
  static const char *const in_names[4] = {"qkv", "out", "dout", "lse"};
  for (int i = 0; i < 4 && s == KILN_OK; i++)
    s = kiln__ops_check_overlap(fn, in_names[i], ins[i]->buffer,
                                ins[i]->offset, ins[i]->count,
                                i == 3 ? KILN_F32 : dtype, "dqkv", sx.buffer,
                                sx.offset, sx.count, dtype, false);
  float scale = 0;
  cl_uint causal = 0;
  KILN__CHECK(s, resolve_params(fn, params, hs, &scale, &causal));
  if (s != KILN_OK)
    return s;
  struct kiln__op o;
  if ((s = kiln__op_begin(&o, queue, fn, num_wait, wait_list, out_event)))
    return s;
  size_t shape[3] = {bh, t, hs};
  size_t es = kiln_dtype_size(dtype);
  kiln__op_describe(&o, "attention_backward", dtype, 3, shape,
                    (double)bh * (double)t *
                        ((double)hs * 8.0 * (double)es + 12.0),
                    2.5 * attn_flops(bh, t, t, hs, causal));
  cl_mem dsum = NULL;
  KILN__CHECK(s, kiln__op_workspace(&o, n * 4, &dsum)); /* n <= 2^32 x 2^31 */
  struct cfg cf;
  make_cfg(queue->ctx, dtype, bucket(hs), &cf);
  const cl_ulong q_off = qkv->offset, k_off = qkv->offset + c,
                 v_off = qkv->offset + 2 * c, x_ld = sq.ld,
                 x_bs = qkv->batch_stride, o_off = out->offset, o_ld = so.ld,
                 o_bs = out->batch_stride, do_off = dout->offset,
                 do_ld = sd.ld, do_bs = dout->batch_stride,
                 l_off = lse->offset, dq_off = dqkv->offset,
                 dk_off = dqkv->offset + c, dv_off = dqkv->offset + 2 * c,
                 dx_ld = sx.ld, dx_bs = dqkv->batch_stride;
  const cl_uint tt = (cl_uint)t, hh = (cl_uint)heads, d = (cl_uint)hs;
  cl_kernel kq = NULL, kk = NULL;
  KILN__CHECK(s, kiln__op_kernel(
                     &o, "attention", cf.options, "attn_bwd_dq", &kq, 26,
                     KILN__ARG(qkv->buffer->cl), KILN__ARG(q_off),
                     KILN__ARG(k_off), KILN__ARG(v_off), KILN__ARG(x_ld),
                     KILN__ARG(x_bs), KILN__ARG(out->buffer->cl),
                     KILN__ARG(o_off), KILN__ARG(o_ld), KILN__ARG(o_bs),
                     KILN__ARG(dout->buffer->cl), KILN__ARG(do_off),
                     KILN__ARG(do_ld), KILN__ARG(do_bs),
                     KILN__ARG(lse->buffer->cl), KILN__ARG(l_off),
                     KILN__ARG(dsum), KILN__ARG(dqkv->buffer->cl),
                     KILN__ARG(dq_off), KILN__ARG(dx_ld), KILN__ARG(dx_bs),
                     KILN__ARG(tt), KILN__ARG(hh), KILN__ARG(d),
                     KILN__ARG(causal), KILN__ARG(scale)));
  KILN__CHECK(s, launch_rows(&o, &cf, kq, t, bh));
  KILN__CHECK(s, kiln__op_kernel(
                     &o, "attention", cf.options, "attn_bwd_dkdv", &kk, 23,
                     KILN__ARG(qkv->buffer->cl), KILN__ARG(q_off),
                     KILN__ARG(k_off), KILN__ARG(v_off), KILN__ARG(x_ld),
                     KILN__ARG(x_bs), KILN__ARG(dout->buffer->cl),
                     KILN__ARG(do_off), KILN__ARG(do_ld), KILN__ARG(do_bs),
                     KILN__ARG(lse->buffer->cl), KILN__ARG(l_off),
                     KILN__ARG(dsum), KILN__ARG(dqkv->buffer->cl),
                     KILN__ARG(dk_off), KILN__ARG(dv_off), KILN__ARG(dx_ld),
                     KILN__ARG(dx_bs), KILN__ARG(tt), KILN__ARG(hh),
                     KILN__ARG(d), KILN__ARG(causal), KILN__ARG(scale)));
  KILN__CHECK(s, launch_rows(&o, &cf, kk, t, bh));
  return kiln__op_end(&o, s, out_event);
}

/* The caches of the cache calls: rows tmax (set from k_cache) x hs, entries
 * bh; v_cache like k_cache. */
static kiln_status check_caches(const char *fn, const kiln_queue *queue,
                                const kiln_matrix *kc, const kiln_matrix *vc,
                                size_t hs, size_t bh, kiln_dtype dtype,
                                const char *dtype_of, bool write,
                                struct span *sk, struct span *sv) {
  kiln_status s = kiln__train_need(fn, "k_cache", kc);
  KILN__CHECK(s, kiln__train_need(fn, "v_cache", vc));
  if (s != KILN_OK)
    return s;
  char why[48];
  snprintf(why, sizeof why, "the head size %zu", hs);
  KILN__CHECK(s, check_operand(fn, queue, "k_cache", kc, kc->rows, hs, why, bh,
                               dtype, dtype_of, write, sk));
  KILN__CHECK(s, check_operand(fn, queue, "v_cache", vc, kc->rows, hs,
                               "k_cache", bh, dtype, dtype_of, write, sv));
  if (s == KILN_OK && kc->rows == 0)
    s = kiln__fail(KILN_ERR_INVALID_SIZE, "%s: the caches have 0 rows", fn);
  return s;
}

/* What the cache calls share: the rows x (named xn: append's k, decode's
 * q; n x C per batch entry, its dtype the call's) and y (yn: append's v,
 * read; decode's out, written) with heads dividing C, and the two caches
 * of x's dtype (written by append). sp receives x's, y's and the caches'
 * spans; *hs and *bh the head size and batch x heads. */
static kiln_status check_cache_call(const char *fn, const kiln_queue *queue,
                                    size_t batch, size_t heads, const char *xn,
                                    const kiln_matrix *x, const char *yn,
                                    const kiln_matrix *y, bool y_write,
                                    const kiln_matrix *kc,
                                    const kiln_matrix *vc, bool caches_write,
                                    size_t *hs, size_t *bh,
                                    struct span sp[4]) {
  kiln_status s = kiln__ops_check_queue(fn, queue);
  KILN__CHECK(s, kiln__train_need(fn, xn, x));
  if (s != KILN_OK)
    return s;
  char what[32];
  snprintf(what, sizeof what, "n (%s's rows)", xn);
  KILN__CHECK(s, check_length(fn, what, x->rows));
  snprintf(what, sizeof what, "%s's cols", xn);
  KILN__CHECK(s, check_heads(fn, batch, heads, x->cols, what, hs));
  KILN__CHECK(s, check_operand(fn, queue, xn, x, x->rows, x->cols, xn, batch,
                               x->dtype, NULL, false, &sp[0]));
  KILN__CHECK(s, check_operand(fn, queue, yn, y, x->rows, x->cols, xn, batch,
                               x->dtype, xn, y_write, &sp[1]));
  if (s == KILN_OK)
    *bh = batch * heads;
  KILN__CHECK(s, check_caches(fn, queue, kc, vc, *hs, *bh, x->dtype, xn,
                              caches_write, &sp[2], &sp[3]));
  return s;
}

KILN_API kiln_status kiln_attention_cache_append(
    kiln_queue *queue, size_t batch, size_t heads, size_t pos,
    const kiln_matrix *k, const kiln_matrix *v, const kiln_matrix *k_cache,
    const kiln_matrix *v_cache, size_t num_wait, kiln_event *const *wait_list,
    kiln_event **out_event) {
  static const char fn[] = "kiln_attention_cache_append";
  size_t hs = 0, bh = 0;
  struct span sp[4] = {{0}};
  kiln_status s = check_cache_call(fn, queue, batch, heads, "k", k, "v", v,
                                   false, k_cache, v_cache, true, &hs, &bh, sp);
  const struct span sk = sp[0], sv = sp[1], skc = sp[2], svc = sp[3];
  const size_t n = s == KILN_OK ? k->rows : 0;
  const kiln_dtype dtype = s == KILN_OK ? k->dtype : KILN_F32;
  if (s == KILN_OK && (pos > k_cache->rows || n > k_cache->rows - pos))
    s = kiln__fail(KILN_ERR_OUT_OF_RANGE,
                   "%s: pos %zu + %zu new rows exceeds the caches' %zu rows",
                   fn, pos, n, k_cache->rows);
  KILN__CHECK(s, disjoint(fn, "k_cache", &skc, "v_cache", &svc, dtype));
  KILN__CHECK(s, disjoint(fn, "k", &sk, "k_cache", &skc, dtype));
  KILN__CHECK(s, disjoint(fn, "k", &sk, "v_cache", &svc, dtype));
  KILN__CHECK(s, disjoint(fn, "v", &sv, "k_cache", &skc, dtype));
  KILN__CHECK(s, disjoint(fn, "v", &sv, "v_cache", &svc, dtype));
  if (s != KILN_OK)
    return s;
  struct kiln__op o;
  if ((s = kiln__op_begin(&o, queue, fn, num_wait, wait_list, out_event)))
    return s;
  size_t shape[3] = {bh, n, hs};
  kiln__op_describe(&o, "attention_cache_append", dtype, 3, shape,
                    4.0 * (double)bh * (double)n * (double)hs *
                        (double)kiln_dtype_size(dtype),
                    0);
  struct cfg cf;
  make_cfg(queue->ctx, dtype, bucket(hs), &cf);
  const cl_uint nn = (cl_uint)n, pp = (cl_uint)pos, hh = (cl_uint)heads,
                d = (cl_uint)hs;
  const kiln_matrix *src[2] = {k, v}, *dst[2] = {k_cache, v_cache};
  const struct span *ss[2] = {&sk, &sv}, *ds[2] = {&skc, &svc};
  size_t local = kiln__ops_local_size(queue->ctx, 64);
  for (int i = 0; i < 2 && s == KILN_OK; i++) {
    cl_ulong x_off = src[i]->offset, x_ld = ss[i]->ld,
             x_bs = src[i]->batch_stride, c_off = dst[i]->offset,
             c_ld = ds[i]->ld, c_bs = dst[i]->batch_stride;
    cl_kernel kern = NULL;
    s = kiln__op_kernel(&o, "attention", cf.options, "attn_cache_append",
                        &kern, 12, KILN__ARG(src[i]->buffer->cl),
                        KILN__ARG(x_off), KILN__ARG(x_ld), KILN__ARG(x_bs),
                        KILN__ARG(dst[i]->buffer->cl), KILN__ARG(c_off),
                        KILN__ARG(c_ld), KILN__ARG(c_bs), KILN__ARG(nn),
                        KILN__ARG(pp), KILN__ARG(hh), KILN__ARG(d));
    size_t global[2] = {0, bh}, lsz[2] = {local, 1};
    if (s == KILN_OK && !kiln__ops_round_up(n * hs, local, &global[0]))
      s = kiln__fail(KILN_ERR_INVALID_SIZE, "%s: n %zu is too large", fn, n);
    KILN__CHECK(s, kiln__op_launch(&o, kern, 2, global, lsz));
  }
  return kiln__op_end(&o, s, out_event);
}

KILN_API kiln_status kiln_attention_decode(
    kiln_queue *queue, size_t batch, size_t heads, size_t t,
    const kiln_matrix *q, const kiln_matrix *k_cache,
    const kiln_matrix *v_cache, const kiln_matrix *out,
    const kiln_attention_params *params, size_t num_wait,
    kiln_event *const *wait_list, kiln_event **out_event) {
  static const char fn[] = "kiln_attention_decode";
  size_t hs = 0, bh = 0;
  struct span sp[4] = {{0}};
  kiln_status s = check_cache_call(fn, queue, batch, heads, "q", q, "out", out,
                                   true, k_cache, v_cache, false, &hs, &bh, sp);
  const struct span sq = sp[0], so = sp[1], skc = sp[2], svc = sp[3];
  const size_t n = s == KILN_OK ? q->rows : 0;
  const kiln_dtype dtype = s == KILN_OK ? q->dtype : KILN_F32;
  KILN__CHECK(s, check_length(fn, "t", t));
  if (s == KILN_OK && t > k_cache->rows)
    s = kiln__fail(KILN_ERR_OUT_OF_RANGE,
                   "%s: t %zu exceeds the caches' %zu rows", fn, t,
                   k_cache->rows);
  if (s == KILN_OK && n > t)
    s = kiln__fail(KILN_ERR_SHAPE_MISMATCH,
                   "%s: q has %zu rows but only t %zu positions are cached "
                   "(the queries' own are the last of them)",
                   fn, n, t);
  KILN__CHECK(s, disjoint(fn, "q", &sq, "out", &so, dtype));
  KILN__CHECK(s, disjoint(fn, "k_cache", &skc, "out", &so, dtype));
  KILN__CHECK(s, disjoint(fn, "v_cache", &svc, "out", &so, dtype));
  float scale = 0;
  cl_uint causal = 0;
  KILN__CHECK(s, resolve_params(fn, params, hs, &scale, &causal));
  if (s != KILN_OK)
    return s;
  struct kiln__op o;
  if ((s = kiln__op_begin(&o, queue, fn, num_wait, wait_list, out_event)))
    return s;
  size_t shape[3] = {bh, n, hs};
  kiln__op_describe(&o, "attention_decode", dtype, 3, shape,
                    (double)bh * (double)hs * (2.0 * (double)n + 2.0 * (double)t) *
                        (double)kiln_dtype_size(dtype),
                    attn_flops(bh, n, t, hs, false));
  struct fwd_args a = {
      .q = q->buffer, .k = k_cache->buffer, .v = v_cache->buffer,
      .o = out->buffer, .lse = out->buffer, .q_off = q->offset, .q_ld = sq.ld,
      .q_bs = q->batch_stride, .k_off = k_cache->offset, .k_ld = skc.ld,
      .k_bs = (cl_ulong)heads * k_cache->batch_stride,
      .k_hs = k_cache->batch_stride, .v_off = v_cache->offset, .v_ld = svc.ld,
      .v_bs = (cl_ulong)heads * v_cache->batch_stride,
      .v_hs = v_cache->batch_stride, .o_off = out->offset, .o_ld = so.ld,
      .o_bs = out->batch_stride, .lse_off = 0, .has_lse = 0,
      .tq = (cl_uint)n, .tk = (cl_uint)t, .qpos0 = (cl_uint)(t - n),
      .heads = (cl_uint)heads, .d = (cl_uint)hs, .causal = causal,
      .scale = scale};
  s = run_fwd(&o, dtype, &a, bh);
  return kiln__op_end(&o, s, out_event);
}

void kiln__ops_warm_attention(const kiln_context *ctx, kiln__warm_add_fn add,
                              void *user) {
  for (int d = KILN_F32; d <= KILN_BF16; d++)
    for (unsigned dmax = 32; dmax <= MAX_HEAD; dmax *= 2) {
      struct cfg c;
      make_cfg(ctx, (kiln_dtype)d, dmax, &c);
      add(user, "attention", c.options);
    }
}
