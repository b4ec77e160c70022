/* cnn.c: the convolutional network of cnn.h behind model.h (cnn_kind): its
 * buffers, initialisation, forward pass and gradients, each a sequence of
 * kiln ops on one in-order queue (convolution, batch normalisation,
 * pooling, dropout, the dense layers of model.c), so the host never waits
 * inside a step. In bf16 the convolutions' and dense layers' operands are
 * bf16 copies (f32 accumulation); batch normalisation, pooling and every
 * gradient sum stay in f32. */
#include "cnn.h"

#include <math.h>
#include <stdlib.h>

#define TRY(call, label)                                                       \
  do {                                                                         \
    st = (call);                                                               \
    if (st != KILN_OK)                                                         \
      goto label;                                                              \
  } while (0)

enum { SIDE = 28, INPUTS = SIDE * SIDE, CLASSES = 10 };

static const float DROPOUT = 0.25f;

static kiln_status make(kiln_context *ctx, size_t elems, kiln_dtype dtype,
                        kiln_buffer **out) {
  return kiln_buffer_create(ctx, elems * kiln_dtype_size(dtype),
                            KILN_MEM_READ_WRITE, out);
}

static void cnn_destroy(model *mm) {
  cnn *m = (cnn *)mm;
  if (!m)
    return;
  model_free_common(mm);
  kiln_buffer *all[] = {m->stats, m->saved,  m->c1,     m->r1,    m->c2,
                        m->r2,    m->p,      m->h3,     m->dbig,  m->dbig2,
                        m->dsmall, m->dsmall2, m->x_lp, m->r1_lp, m->p_lp,
                        m->h3_lp, m->d_lp};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
    kiln_buffer_destroy(all[i]);
  free(m);
}

static kiln_status cnn_create(kiln_context *ctx, kiln_queue *queue,
                              size_t batch, size_t dense, kiln_dtype act_dtype,
                              model **out) {
  kiln_status st = KILN_OK;
  if (dense == 0)
    dense = CNN_DENSE;
  cnn *m = calloc(1, sizeof *m);
  if (!m)
    return KILN_ERR_OUT_OF_HOST_MEMORY;
  m->base = (model){.kind = &cnn_kind,
                    .ctx = ctx,
                    .queue = queue,
                    .batch = batch,
                    .act_dtype = act_dtype,
                    .width = dense};
  size_t off = 0;
  m->w1 = off;
  off += (size_t)CNN_C1 * CNN_K * CNN_K;
  m->g1 = off;
  off += CNN_C1;
  m->be1 = off;
  off += CNN_C1;
  m->w2 = off;
  off += (size_t)CNN_C2 * CNN_C1 * CNN_K * CNN_K;
  m->g2 = off;
  off += CNN_C2;
  m->be2 = off;
  off += CNN_C2;
  m->fc1 = (model_dense){.in = CNN_FLAT, .out = dense, .w = off};
  off += CNN_FLAT * dense;
  m->fc1.b = off;
  off += dense;
  m->fc2 = (model_dense){.in = dense, .out = CLASSES, .w = off};
  off += dense * CLASSES;
  m->fc2.b = off;
  off += CLASSES;
  m->base.nparams = off;

  const size_t big = batch * CNN_C2 * CNN_H2 * CNN_H2; /* the largest map */
  const size_t small = batch * (dense > CLASSES ? dense : CLASSES);
  TRY(model_alloc_common(&m->base), fail);
  TRY(make(ctx, 2 * (CNN_C1 + CNN_C2), KILN_F32, &m->stats), fail);
  TRY(make(ctx, 2 * (CNN_C1 + CNN_C2), KILN_F32, &m->saved), fail);
  TRY(make(ctx, batch * CNN_C1 * CNN_H1 * CNN_H1, KILN_F32, &m->c1), fail);
  TRY(make(ctx, batch * CNN_C1 * CNN_H1 * CNN_H1, KILN_F32, &m->r1), fail);
  TRY(make(ctx, big, KILN_F32, &m->c2), fail);
  TRY(make(ctx, big, KILN_F32, &m->r2), fail);
  TRY(make(ctx, batch * CNN_FLAT, KILN_F32, &m->p), fail);
  TRY(make(ctx, batch * dense, KILN_F32, &m->h3), fail);
  TRY(make(ctx, big, KILN_F32, &m->dbig), fail);
  TRY(make(ctx, big, KILN_F32, &m->dbig2), fail);
  TRY(make(ctx, small, KILN_F32, &m->dsmall), fail);
  TRY(make(ctx, small, KILN_F32, &m->dsmall2), fail);
  if (act_dtype == KILN_BF16) {
    TRY(make(ctx, batch * INPUTS, KILN_BF16, &m->x_lp), fail);
    TRY(make(ctx, batch * CNN_C1 * CNN_H1 * CNN_H1, KILN_BF16, &m->r1_lp),
        fail);
    TRY(make(ctx, batch * CNN_FLAT, KILN_BF16, &m->p_lp), fail);
    TRY(make(ctx, batch * dense, KILN_BF16, &m->h3_lp), fail);
    TRY(make(ctx, big > small ? big : small, KILN_BF16, &m->d_lp), fail);
  }
  *out = &m->base;
  return KILN_OK;
fail:
  cnn_destroy(&m->base);
  return st;
}

/* Uniform in +-1/sqrt(fan_in), PyTorch's default for convolutions and
 * linear layers, from the piece of the seed's stream at the tensor's
 * offset (the same bits on every device). */
static kiln_status init_uniform(model *mm, uint64_t seed, size_t offset,
                                size_t count, size_t fan_in) {
  const float bound = 1.0f / sqrtf((float)fan_in);
  const kiln_range r = {mm->params, offset, count, KILN_F32};
  return kiln_random_uniform(mm->queue, &r, seed, offset, -bound, bound, 0,
                             NULL, NULL);
}

static kiln_status fill(kiln_queue *q, kiln_buffer *b, size_t offset,
                        size_t count, float value) {
  const kiln_range r = {b, offset, count, KILN_F32};
  return kiln_fill(q, &r, &value, 0, NULL, NULL);
}

static kiln_status cnn_init(model *mm, uint64_t seed) {
  cnn *m = (cnn *)mm;
  kiln_queue *q = mm->queue;
  kiln_status st = KILN_OK;
  const size_t k2 = CNN_K * CNN_K;
  mm->seed = seed;
  TRY(init_uniform(mm, seed, m->w1, CNN_C1 * k2, k2), done);
  TRY(init_uniform(mm, seed, m->w2, (size_t)CNN_C2 * CNN_C1 * k2, CNN_C1 * k2),
      done);
  const model_dense *fc[] = {&m->fc1, &m->fc2};
  for (int i = 0; i < 2; i++) {
    TRY(init_uniform(mm, seed, fc[i]->w, fc[i]->in * fc[i]->out, fc[i]->in),
        done);
    TRY(init_uniform(mm, seed, fc[i]->b, fc[i]->out, fc[i]->in), done);
  }
  /* Batch norm: gamma 1, beta 0; running mean 0, running variance 1. */
  TRY(fill(q, mm->params, m->g1, CNN_C1, 1.0f), done);
  TRY(fill(q, mm->params, m->be1, CNN_C1, 0.0f), done);
  TRY(fill(q, mm->params, m->g2, CNN_C2, 1.0f), done);
  TRY(fill(q, mm->params, m->be2, CNN_C2, 0.0f), done);
  TRY(fill(q, m->stats, 0, CNN_C1, 0.0f), done);
  TRY(fill(q, m->stats, CNN_C1, CNN_C1, 1.0f), done);
  TRY(fill(q, m->stats, 2 * CNN_C1, CNN_C2, 0.0f), done);
  TRY(fill(q, m->stats, 2 * CNN_C1 + CNN_C2, CNN_C2, 1.0f), done);
  st = model_reset_optimizer(mm);
done:
  return st;
}

static kiln_image image(kiln_buffer *b, size_t offset, size_t n, size_t c,
                        size_t side, kiln_dtype dtype) {
  return (kiln_image){.buffer = b, .offset = offset, .n = n, .c = c,
                      .h = side, .w = side, .dtype = dtype};
}

static kiln_range range(kiln_buffer *b, size_t offset, size_t count,
                        kiln_dtype dtype) {
  return (kiln_range){b, offset, count, dtype};
}

/* f32 src into its bf16 copy dst (count elements). */
static kiln_status to_lp(kiln_queue *q, kiln_buffer *src, kiln_buffer *dst,
                         size_t count, size_t num_wait,
                         kiln_event *const *wait_list) {
  const kiln_range from = range(src, 0, count, KILN_F32);
  const kiln_range to = range(dst, 0, count, KILN_BF16);
  return kiln_cast(q, &from, &to, num_wait, wait_list, NULL);
}

/* Batch norm (batch statistics in training, running ones otherwise) of the
 * conv output c into r, then ReLU in place. layer 0 or 1. */
static kiln_status bn_relu(cnn *m, int layer, size_t rows, bool training) {
  kiln_queue *q = m->base.queue;
  const size_t ch = layer == 0 ? CNN_C1 : CNN_C2;
  const size_t side = layer == 0 ? CNN_H1 : CNN_H2;
  const size_t stat0 = layer == 0 ? 0 : 2 * CNN_C1; /* mean, then var */
  const size_t gamma_at = layer == 0 ? m->g1 : m->g2;
  const size_t beta_at = layer == 0 ? m->be1 : m->be2;
  kiln_buffer *c = layer == 0 ? m->c1 : m->c2, *r = layer == 0 ? m->r1 : m->r2;
  const kiln_image x = image(c, 0, rows, ch, side, KILN_F32);
  const kiln_image y = image(r, 0, rows, ch, side, KILN_F32);
  const kiln_range gamma = range(m->base.params, gamma_at, ch, KILN_F32);
  const kiln_range beta = range(m->base.params, beta_at, ch, KILN_F32);
  const kiln_range mean = range(m->stats, stat0, ch, KILN_F32);
  const kiln_range var = range(m->stats, stat0 + ch, ch, KILN_F32);
  const kiln_range saved = range(m->saved, stat0, 2 * ch, KILN_F32);
  const kiln_batchnorm_params p = KILN_BATCHNORM_PARAMS_INIT;
  kiln_status st =
      training ? kiln_batchnorm_train(q, &x, &gamma, &beta, &y, &mean, &var,
                                      &saved, &p, 0, NULL, NULL)
               : kiln_batchnorm_inference(q, &x, &gamma, &beta, &mean, &var,
                                          &y, &p, 0, NULL, NULL);
  const kiln_range all = range(r, 0, rows * ch * side * side, KILN_F32);
  if (st == KILN_OK)
    st = kiln_unary(q, KILN_UNARY_RELU, &all, &all, 0, NULL, NULL);
  return st;
}

/* Dropout's stream offset for this step: each step its own piece. */
static uint64_t dropout_offset(const cnn *m) {
  return (uint64_t)m->base.steps * m->base.batch * CNN_FLAT;
}

static kiln_status cnn_forward(model *mm, size_t rows, kiln_buffer *x,
                               size_t x_offset, bool training, size_t num_wait,
                               kiln_event *const *wait_list) {
  cnn *m = (cnn *)mm;
  kiln_queue *q = mm->queue;
  const kiln_dtype dt = mm->act_dtype;
  const bool lp = dt == KILN_BF16;
  kiln_buffer *w = lp ? mm->params_lp : mm->params;
  kiln_status st = KILN_OK;
  kiln_image in = image(x, x_offset, rows, 1, SIDE, KILN_F32);
  if (lp) {
    const kiln_range from = range(x, x_offset, rows * INPUTS, KILN_F32);
    const kiln_range to = range(m->x_lp, 0, rows * INPUTS, KILN_BF16);
    TRY(kiln_cast(q, &from, &to, num_wait, wait_list, NULL), done);
    num_wait = 0;
    wait_list = NULL;
    in = image(m->x_lp, 0, rows, 1, SIDE, KILN_BF16);
  }
  const kiln_conv2d_params conv = KILN_CONV2D_PARAMS_INIT;
  const kiln_image w1 = image(w, m->w1, CNN_C1, 1, CNN_K, dt);
  const kiln_image c1 = image(m->c1, 0, rows, CNN_C1, CNN_H1, KILN_F32);
  TRY(kiln_conv2d(q, &in, &w1, &c1, &conv, NULL, num_wait, wait_list, NULL),
      done);
  TRY(bn_relu(m, 0, rows, training), done);
  const size_t n1 = rows * CNN_C1 * CNN_H1 * CNN_H1;
  if (lp)
    TRY(to_lp(q, m->r1, m->r1_lp, n1, 0, NULL), done);
  const kiln_image r1 = image(lp ? m->r1_lp : m->r1, 0, rows, CNN_C1, CNN_H1, dt);
  const kiln_image w2 = image(w, m->w2, CNN_C2, CNN_C1, CNN_K, dt);
  const kiln_image c2 = image(m->c2, 0, rows, CNN_C2, CNN_H2, KILN_F32);
  TRY(kiln_conv2d(q, &r1, &w2, &c2, &conv, NULL, 0, NULL, NULL), done);
  TRY(bn_relu(m, 1, rows, training), done);
  const kiln_image r2 = image(m->r2, 0, rows, CNN_C2, CNN_H2, KILN_F32);
  const kiln_image pooled = image(m->p, 0, rows, CNN_C2, CNN_HP, KILN_F32);
  const kiln_pool2d_params pool = {.kernel_h = 2, .kernel_w = 2};
  TRY(kiln_pool2d(q, KILN_POOL_MAX, &r2, &pooled, &pool, 0, NULL, NULL), done);
  const size_t flat = rows * CNN_FLAT;
  const kiln_range pr = range(m->p, 0, flat, KILN_F32);
  if (training)
    TRY(kiln_dropout(q, &pr, &pr, mm->seed, dropout_offset(m), DROPOUT, 0, NULL,
                     NULL),
        done);
  if (lp)
    TRY(to_lp(q, m->p, m->p_lp, flat, 0, NULL), done);
  TRY(model_dense_forward(mm, &m->fc1, rows, lp ? m->p_lp : m->p, 0, m->h3,
                          KILN_ACT_RELU, NULL, 0, NULL),
      done);
  if (lp)
    TRY(to_lp(q, m->h3, m->h3_lp, rows * m->fc1.out, 0, NULL), done);
  TRY(model_dense_forward(mm, &m->fc2, rows, lp ? m->h3_lp : m->h3, 0,
                          mm->logits, KILN_ACT_NONE, NULL, 0, NULL),
      done);
done:
  return st;
}

/* From d (f32, the gradient of layer's BN+ReLU output, in place): through
 * the ReLU (from its output) and the batch norm, into d again as the
 * gradient of the conv output; gamma's and beta's gradients into grads. */
static kiln_status bn_relu_backward(cnn *m, int layer, size_t rows,
                                    kiln_buffer *d) {
  kiln_queue *q = m->base.queue;
  const size_t ch = layer == 0 ? CNN_C1 : CNN_C2;
  const size_t side = layer == 0 ? CNN_H1 : CNN_H2;
  const size_t stat0 = layer == 0 ? 0 : 2 * CNN_C1;
  const size_t gamma_at = layer == 0 ? m->g1 : m->g2;
  const size_t beta_at = layer == 0 ? m->be1 : m->be2;
  kiln_buffer *c = layer == 0 ? m->c1 : m->c2, *r = layer == 0 ? m->r1 : m->r2;
  const size_t n = rows * ch * side * side;
  const kiln_range ry = range(r, 0, n, KILN_F32), dr = range(d, 0, n, KILN_F32);
  kiln_status st = kiln_unary_backward(q, KILN_UNARY_RELU, KILN_GRAD_FROM_Y,
                                       &ry, &dr, &dr, 0, NULL, NULL);
  const kiln_image x = image(c, 0, rows, ch, side, KILN_F32);
  const kiln_image dimg = image(d, 0, rows, ch, side, KILN_F32);
  const kiln_range gamma = range(m->base.params, gamma_at, ch, KILN_F32);
  const kiln_range saved = range(m->saved, stat0, 2 * ch, KILN_F32);
  const kiln_range dgamma = range(m->base.grads, gamma_at, ch, KILN_F32);
  const kiln_range dbeta = range(m->base.grads, beta_at, ch, KILN_F32);
  if (st == KILN_OK)
    st = kiln_batchnorm_backward(q, &x, &gamma, &saved, &dimg, &dimg, &dgamma,
                                 &dbeta, 0, NULL, NULL);
  return st;
}

static kiln_status cnn_gradients(model *mm, size_t rows, kiln_buffer *x,
                                 size_t x_offset, kiln_buffer *labels,
                                 size_t labels_offset, kiln_buffer *loss,
                                 size_t loss_offset, size_t num_wait,
                                 kiln_event *const *wait_list) {
  cnn *m = (cnn *)mm;
  kiln_queue *q = mm->queue;
  const kiln_dtype dt = mm->act_dtype;
  const bool lp = dt == KILN_BF16;
  kiln_buffer *w = lp ? mm->params_lp : mm->params;
  kiln_status st = KILN_OK;
  TRY(cnn_forward(mm, rows, x, x_offset, true, num_wait, wait_list), done);
  TRY(model_loss(mm, rows, labels, labels_offset, loss, loss_offset,
                 m->dsmall),
      done);
  /* The dense layers: fc2 (dz in dsmall, dh3 into dsmall2), fc1's ReLU,
   * fc1 (dz in dsmall, the pooled map's gradient into dbig). */
  TRY(model_dense_backward(mm, &m->fc2, rows, lp ? m->h3_lp : m->h3, 0,
                           m->dsmall, m->d_lp, m->dsmall2),
      done);
  const size_t nh = rows * m->fc1.out;
  const kiln_range h3 = range(m->h3, 0, nh, KILN_F32);
  const kiln_range dh3 = range(m->dsmall2, 0, nh, KILN_F32);
  const kiln_range dz3 = range(m->dsmall, 0, nh, KILN_F32);
  TRY(kiln_unary_backward(q, KILN_UNARY_RELU, KILN_GRAD_FROM_Y, &h3, &dh3, &dz3,
                          0, NULL, NULL),
      done);
  TRY(model_dense_backward(mm, &m->fc1, rows, lp ? m->p_lp : m->p, 0,
                           m->dsmall, m->d_lp, m->dbig),
      done);
  /* Dropout is its own backward with the same stream piece; then the
   * pool's gradient to r2 (dbig2), through BN2 and its ReLU. */
  const kiln_range dp = range(m->dbig, 0, rows * CNN_FLAT, KILN_F32);
  TRY(kiln_dropout(q, &dp, &dp, mm->seed, dropout_offset(m), DROPOUT, 0, NULL,
                   NULL),
      done);
  const kiln_image r2 = image(m->r2, 0, rows, CNN_C2, CNN_H2, KILN_F32);
  const kiln_image dpool = image(m->dbig, 0, rows, CNN_C2, CNN_HP, KILN_F32);
  const kiln_image dr2 = image(m->dbig2, 0, rows, CNN_C2, CNN_H2, KILN_F32);
  const kiln_pool2d_params pool = {.kernel_h = 2, .kernel_w = 2};
  TRY(kiln_pool2d_backward(q, KILN_POOL_MAX, &r2, &dpool, &dr2, &pool, 0, NULL,
                           NULL),
      done);
  TRY(bn_relu_backward(m, 1, rows, m->dbig2), done);
  /* conv2: its weights' gradient from r1 and dc2, the gradient to r1 from
   * dc2 and w2 (into dbig), both GEMMs in the layer's dtype. */
  const size_t n2 = rows * CNN_C2 * CNN_H2 * CNN_H2;
  if (lp)
    TRY(to_lp(q, m->dbig2, m->d_lp, n2, 0, NULL), done);
  const kiln_conv2d_params conv = KILN_CONV2D_PARAMS_INIT;
  const kiln_image dc2 = image(lp ? m->d_lp : m->dbig2, 0, rows, CNN_C2,
                               CNN_H2, dt);
  const kiln_image r1 = image(lp ? m->r1_lp : m->r1, 0, rows, CNN_C1, CNN_H1, dt);
  const kiln_image dw2 = image(mm->grads, m->w2, CNN_C2, CNN_C1, CNN_K,
                               KILN_F32);
  const kiln_image w2 = image(w, m->w2, CNN_C2, CNN_C1, CNN_K, dt);
  const kiln_image dr1 = image(m->dbig, 0, rows, CNN_C1, CNN_H1, KILN_F32);
  TRY(kiln_conv2d_backward_weights(q, &r1, &dc2, &dw2, NULL, &conv, 0, NULL,
                                   NULL),
      done);
  TRY(kiln_conv2d_backward_data(q, &dc2, &w2, &dr1, &conv, 0, NULL, NULL),
      done);
  TRY(bn_relu_backward(m, 0, rows, m->dbig), done);
  /* conv1: only its weights' gradient (the input needs none). */
  const size_t n1 = rows * CNN_C1 * CNN_H1 * CNN_H1;
  if (lp)
    TRY(to_lp(q, m->dbig, m->d_lp, n1, 0, NULL), done);
  const kiln_image dc1 = image(lp ? m->d_lp : m->dbig, 0, rows, CNN_C1, CNN_H1,
                               dt);
  const kiln_image in = lp ? image(m->x_lp, 0, rows, 1, SIDE, KILN_BF16)
                           : image(x, x_offset, rows, 1, SIDE, KILN_F32);
  const kiln_image dw1 = image(mm->grads, m->w1, CNN_C1, 1, CNN_K, KILN_F32);
  TRY(kiln_conv2d_backward_weights(q, &in, &dc1, &dw1, NULL, &conv, 0, NULL,
                                   NULL),
      done);
done:
  return st;
}

const model_kind cnn_kind = {
    .name = "cnn",
    .create = cnn_create,
    .destroy = cnn_destroy,
    .init = cnn_init,
    .forward = cnn_forward,
    .gradients = cnn_gradients,
};
