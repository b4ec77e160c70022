/* model.c: the parts of model.h every network shares: its parameter,
 * gradient and optimizer buffers, the optimizer step and the accuracy
 * count. */
#include "model.h"

#include <string.h>

const model_kind *model_kind_find(const char *name) {
  static const model_kind *const kinds[] = {&mlp_kind, &cnn_kind};
  for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++)
    if (!strcmp(kinds[i]->name, name))
      return kinds[i];
  return NULL;
}

enum { CLASSES = 10 };

static kiln_status make(kiln_context *ctx, size_t elems, kiln_dtype dtype,
                        kiln_buffer **out) {
  return kiln_buffer_create(ctx, elems * kiln_dtype_size(dtype),
                            KILN_MEM_READ_WRITE, out);
}

kiln_status model_alloc_common(model *m) {
  kiln_status st = make(m->ctx, m->nparams, KILN_F32, &m->params);
  if (st == KILN_OK)
    st = make(m->ctx, m->nparams, KILN_F32, &m->grads);
  if (st == KILN_OK)
    st = make(m->ctx, m->nparams, KILN_F32, &m->opt_m);
  if (st == KILN_OK)
    st = make(m->ctx, m->nparams, KILN_F32, &m->opt_v);
  if (st == KILN_OK)
    st = make(m->ctx, m->batch * CLASSES, KILN_F32, &m->logits);
  if (st == KILN_OK && m->act_dtype == KILN_BF16)
    st = make(m->ctx, m->nparams, KILN_BF16, &m->params_lp);
  return st;
}

void model_free_common(model *m) {
  kiln_buffer *all[] = {m->params, m->grads, m->opt_m, m->opt_v, m->logits,
                        m->params_lp};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
    kiln_buffer_destroy(all[i]);
}

kiln_status model_reset_optimizer(model *m) {
  const float zero = 0.0f;
  const kiln_range opt_m = {m->opt_m, 0, m->nparams, KILN_F32};
  const kiln_range opt_v = {m->opt_v, 0, m->nparams, KILN_F32};
  kiln_status st = kiln_fill(m->queue, &opt_m, &zero, 0, NULL, NULL);
  if (st == KILN_OK)
    st = kiln_fill(m->queue, &opt_v, &zero, 0, NULL, NULL);
  if (st == KILN_OK && m->params_lp) {
    const kiln_range params = {m->params, 0, m->nparams, KILN_F32};
    const kiln_range params_lp = {m->params_lp, 0, m->nparams, KILN_BF16};
    st = kiln_cast(m->queue, &params, &params_lp, 0, NULL, NULL);
  }
  m->steps = 0;
  return st;
}

kiln_matrix model_dense_weights(const model *m, const model_dense *ly) {
  const kiln_dtype dt = m->act_dtype;
  const kiln_matrix w = {.buffer = dt == KILN_BF16 ? m->params_lp : m->params,
                         .offset = ly->w,
                         .rows = ly->out,
                         .cols = ly->in,
                         .dtype = dt,
                         .trans = KILN_TRANS};
  return w;
}

kiln_status model_dense_forward(model *m, const model_dense *ly, size_t rows,
                                kiln_buffer *x, size_t x_offset, kiln_buffer *y,
                                kiln_activation act, const kiln_packed *packed,
                                size_t num_wait, kiln_event *const *wait_list) {
  const kiln_dtype dt = m->act_dtype;
  /* W is out x in, hence TRANS; the bias is read from the f32 master. */
  const kiln_matrix a = {
      .buffer = x, .offset = x_offset, .rows = rows, .cols = ly->in, .dtype = dt};
  kiln_matrix wt = model_dense_weights(m, ly);
  if (packed != NULL) {
    kiln_status st = kiln_packed_get_matrix(packed, &wt);
    if (st != KILN_OK)
      return st;
  }
  const kiln_matrix h = {
      .buffer = y, .rows = rows, .cols = ly->out, .dtype = KILN_F32};
  const kiln_range bias = {m->params, ly->b, ly->out, KILN_F32};
  const kiln_epilogue e = {1.0f, 0.0f, &bias, act};
  return kiln_matmul(m->queue, 1, &a, &wt, &h, &e, num_wait, wait_list, NULL);
}

kiln_status model_dense_backward(model *m, const model_dense *ly, size_t rows,
                                 kiln_buffer *x, size_t x_offset,
                                 kiln_buffer *dz, kiln_buffer *dz_lp,
                                 kiln_buffer *dx) {
  kiln_queue *q = m->queue;
  const kiln_dtype dt = m->act_dtype;
  kiln_status st = KILN_OK;
  kiln_buffer *d = dz;
  if (dt == KILN_BF16) {
    const kiln_range from = {dz, 0, rows * ly->out, KILN_F32};
    const kiln_range to = {dz_lp, 0, rows * ly->out, KILN_BF16};
    st = kiln_cast(q, &from, &to, 0, NULL, NULL);
    d = dz_lp;
  }
  /* dW = dz^T x (out x in), db = the column sums of dz (in f32). */
  const kiln_matrix dzm = {.buffer = d, .rows = rows, .cols = ly->out, .dtype = dt};
  kiln_matrix dz_t = dzm;
  dz_t.trans = KILN_TRANS;
  const kiln_matrix a = {
      .buffer = x, .offset = x_offset, .rows = rows, .cols = ly->in, .dtype = dt};
  const kiln_matrix dw = {.buffer = m->grads,
                          .offset = ly->w,
                          .rows = ly->out,
                          .cols = ly->in,
                          .dtype = KILN_F32};
  const kiln_matrix dz32 = {
      .buffer = dz, .rows = rows, .cols = ly->out, .dtype = KILN_F32};
  const kiln_range db = {m->grads, ly->b, ly->out, KILN_F32};
  if (st == KILN_OK)
    st = kiln_matmul(q, 1, &dz_t, &a, &dw, NULL, 0, NULL, NULL);
  if (st == KILN_OK)
    st = kiln_reduce_cols(q, KILN_REDUCE_SUM, &dz32, &db, 0, NULL, NULL);
  if (st != KILN_OK || dx == NULL)
    return st;
  /* dx = dz W (rows x in). */
  const kiln_matrix wm = {.buffer = dt == KILN_BF16 ? m->params_lp : m->params,
                          .offset = ly->w,
                          .rows = ly->out,
                          .cols = ly->in,
                          .dtype = dt};
  const kiln_matrix da = {
      .buffer = dx, .rows = rows, .cols = ly->in, .dtype = KILN_F32};
  return kiln_matmul(q, 1, &dzm, &wm, &da, NULL, 0, NULL, NULL);
}

kiln_status model_loss(model *m, size_t rows, kiln_buffer *labels,
                       size_t labels_offset, kiln_buffer *loss,
                       size_t loss_offset, kiln_buffer *dlogits) {
  const kiln_matrix logits = {
      .buffer = m->logits, .rows = rows, .cols = CLASSES, .dtype = KILN_F32};
  kiln_matrix d = logits;
  d.buffer = dlogits;
  const kiln_range label_r = {labels, labels_offset, rows, KILN_U32};
  const kiln_range mean = {loss, loss_offset, 1, KILN_F32};
  kiln_status st = kiln_softmax_cross_entropy(m->queue, &logits, &label_r,
                                              NULL, &mean, 0, NULL, NULL);
  /* d(mean loss)/d(logits): the rows' gradients scaled by 1 / rows. */
  if (st == KILN_OK)
    st = kiln_softmax_cross_entropy_backward(m->queue, &logits, &label_r, &d,
                                             1.0f / (float)rows, 0, NULL, NULL);
  return st;
}

kiln_status model_step(model *m, const model_hyper *hp) {
  m->steps++;
  kiln_range w = {m->params, 0, m->nparams, KILN_F32};
  kiln_range grad = {m->grads, 0, m->nparams, KILN_F32};
  kiln_range opt_m = {m->opt_m, 0, m->nparams, KILN_F32};
  kiln_range opt_v = {m->opt_v, 0, m->nparams, KILN_F32};
  kiln_range copy = {m->params_lp, 0, m->nparams, KILN_BF16};
  const kiln_range *w_copy = m->params_lp ? &copy : NULL;
  /* One launch updates every parameter: they are one contiguous range,
   * and both optimizers act element by element. */
  if (hp->optimizer == MODEL_SGD) {
    kiln_sgd_params p = {.lr = hp->lr,
                         .momentum = hp->momentum,
                         .weight_decay = hp->weight_decay,
                         .nesterov = false,
                         .grad_scale = 1.0f};
    return kiln_sgd_step(m->queue, &grad, NULL, &w, &opt_m, w_copy, &p, 0, NULL,
                         NULL);
  }
  kiln_adamw_params p = {.lr = hp->lr,
                         .beta1 = hp->beta1,
                         .beta2 = hp->beta2,
                         .eps = hp->eps,
                         .weight_decay = hp->weight_decay,
                         .step = m->steps,
                         .grad_scale = 1.0f};
  return kiln_adamw_step(m->queue, &grad, NULL, &w, &opt_m, &opt_v, w_copy, &p,
                         0, NULL, NULL);
}

kiln_status model_count_correct(model *m, size_t rows, kiln_buffer *labels,
                                size_t labels_offset, kiln_buffer *correct,
                                size_t correct_offset) {
  kiln_matrix logits = {
      .buffer = m->logits, .rows = rows, .cols = CLASSES, .dtype = KILN_F32};
  kiln_range label_r = {labels, labels_offset, rows, KILN_U32};
  kiln_range count = {correct, correct_offset, 1, KILN_U32};
  return kiln_accuracy_count(m->queue, &logits, &label_r, &count, true, 0, NULL,
                             NULL);
}
