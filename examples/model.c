/* model.c: the parts of model.h every network shares: its parameter,
 * gradient and optimizer buffers, the optimizer step and the accuracy
 * count. */
#include "model.h"

#include <string.h>

const model_kind *model_kind_find(const char *name) {
  static const model_kind *const kinds[] = {&mlp_kind};
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
