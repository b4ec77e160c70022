/* mlp.c: the perceptron of mlp.h behind model.h (mlp_kind): its buffers,
 * initialisation, forward pass and gradients, each a short sequence of kiln
 * ops on one in-order queue, so that the host never waits inside a step:
 * each op reads what the one before it wrote. */
#include "mlp.h"

#include <math.h>
#include <stdbool.h>
#include <stdlib.h>

/* Every call below returns a kiln_status; the first failure ends the
 * function with it (kiln_last_error() holds the message). */
#define TRY(call, label)                                                       \
  do {                                                                         \
    st = (call);                                                               \
    if (st != KILN_OK)                                                         \
      goto label;                                                              \
  } while (0)

enum { INPUTS = 784, CLASSES = 10 };

static kiln_status make(kiln_context *ctx, size_t elems, size_t elem_size,
                        kiln_buffer **out) {
  return kiln_buffer_create(ctx, elems * elem_size, KILN_MEM_READ_WRITE, out);
}

static void mlp_destroy(model *mm) {
  mlp *m = (mlp *)mm;
  if (!m)
    return;
  model_free_common(&m->base);
  for (int l = 0; l < MLP_LAYERS; l++)
    (void)kiln_packed_destroy(m->packed[l]);
  kiln_buffer *all[] = {m->h[0], m->h[1], m->h_lp[0], m->h_lp[1],
                        m->x_lp,  m->dz,   m->dh,      m->d_lp};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
    kiln_buffer_destroy(all[i]);
  free(m);
}

static kiln_status mlp_create(kiln_context *ctx, kiln_queue *queue,
                              size_t batch, size_t hidden,
                              kiln_dtype act_dtype, model **out) {
  kiln_status st = KILN_OK;
  if (hidden == 0)
    hidden = MLP_HIDDEN;
  const size_t widths[MLP_LAYERS + 1] = {INPUTS, hidden, hidden, CLASSES};
  mlp *m = calloc(1, sizeof *m);
  if (!m)
    return KILN_ERR_OUT_OF_HOST_MEMORY;
  m->base = (model){.kind = &mlp_kind,
                    .ctx = ctx,
                    .queue = queue,
                    .batch = batch,
                    .act_dtype = act_dtype,
                    .width = hidden};
  size_t off = 0, widest = 0;
  for (int l = 0; l < MLP_LAYERS; l++) {
    mlp_layer *ly = &m->layer[l];
    ly->in = widths[l];
    ly->out = widths[l + 1];
    ly->w = off;
    off += ly->in * ly->out;
    ly->b = off;
    off += ly->out;
    if (ly->out > widest)
      widest = ly->out;
  }
  m->base.nparams = off;
  size_t lp = kiln_dtype_size(KILN_BF16);
  TRY(model_alloc_common(&m->base), fail);
  for (int l = 0; l < MLP_LAYERS - 1; l++)
    TRY(make(ctx, batch * m->layer[l].out, 4, &m->h[l]), fail);
  m->h[MLP_LAYERS - 1] = m->base.logits;
  TRY(make(ctx, batch * widest, 4, &m->dz), fail);
  TRY(make(ctx, batch * widest, 4, &m->dh), fail);
  if (act_dtype == KILN_BF16) {
    for (int l = 0; l < MLP_LAYERS - 1; l++)
      TRY(make(ctx, batch * m->layer[l].out, lp, &m->h_lp[l]), fail);
    TRY(make(ctx, batch * INPUTS, lp, &m->x_lp), fail);
    TRY(make(ctx, batch * widest, lp, &m->d_lp), fail);
  }
  *out = &m->base;
  return KILN_OK;
fail:
  mlp_destroy(&m->base);
  return st;
}

static kiln_status mlp_init(model *mm, uint64_t seed) {
  mlp *m = (mlp *)mm;
  kiln_status st = KILN_OK;
  /* Each tensor takes the piece of one Philox stream that starts at its
   * offset in params, so the whole model is a function of the seed alone,
   * the same bits on every device. */
  for (int l = 0; l < MLP_LAYERS; l++) {
    const mlp_layer *ly = &m->layer[l];
    float bound = 1.0f / sqrtf((float)ly->in);
    kiln_range w = {mm->params, ly->w, ly->in * ly->out, KILN_F32};
    kiln_range b = {mm->params, ly->b, ly->out, KILN_F32};
    TRY(kiln_random_uniform(mm->queue, &w, seed, ly->w, -bound, bound, 0, NULL,
                            NULL),
        done);
    TRY(kiln_random_uniform(mm->queue, &b, seed, ly->b, -bound, bound, 0, NULL,
                            NULL),
        done);
  }
  m->packed_fresh = false;
  st = model_reset_optimizer(mm);
done:
  return st;
}

/* The GEMM operand holding layer l's input: the batch itself for the first
 * layer, the previous layer's output (its bf16 copy in bf16) otherwise. */
static kiln_buffer *layer_input(mlp *m, int l, kiln_buffer *x,
                                size_t x_offset, size_t *offset) {
  *offset = 0;
  if (l > 0)
    return m->base.act_dtype == KILN_BF16 ? m->h_lp[l - 1] : m->h[l - 1];
  if (m->base.act_dtype == KILN_BF16)
    return m->x_lp;
  *offset = x_offset;
  return x;
}

/* The weights packed for inference, packed again when an optimizer step
 * (or init) changed them since: the first inference of an evaluation
 * packs, the others reuse. The packed matrices are made at the first
 * inference and kept (kiln_pack writes into them again). */
static kiln_status pack_weights(mlp *m) {
  model *mm = &m->base;
  if (m->packed_fresh && m->packed_steps == mm->steps)
    return KILN_OK;
  kiln_status st = KILN_OK;
  for (int l = 0; l < MLP_LAYERS && st == KILN_OK; l++) {
    const kiln_matrix w = model_dense_weights(mm, &m->layer[l]);
    if (m->packed[l] == NULL)
      st = kiln_packed_create(mm->ctx, KILN_OPERAND_B, &w, &m->packed[l]);
    if (st == KILN_OK)
      st = kiln_pack(mm->queue, &w, m->packed[l], 0, NULL, NULL);
  }
  m->packed_fresh = st == KILN_OK;
  m->packed_steps = mm->steps;
  return st;
}

static kiln_status mlp_forward(model *mm, size_t rows, kiln_buffer *x,
                               size_t x_offset, bool training, size_t num_wait,
                               kiln_event *const *wait_list) {
  mlp *m = (mlp *)mm;
  kiln_status st = KILN_OK;
  kiln_queue *q = mm->queue;
  /* No layer of this network behaves differently in training; inference
   * reads packed weights (training changes them at every step). */
  if (!training)
    TRY(pack_weights(m), done);
  /* The wait list (the batch's upload, on another queue) goes to the first
   * op; the queue is in order, so every later op follows it. */
  if (mm->act_dtype == KILN_BF16) {
    const kiln_range xr = {x, x_offset, rows * INPUTS, KILN_F32};
    const kiln_range x_lp = {m->x_lp, 0, rows * INPUTS, KILN_BF16};
    TRY(kiln_cast(q, &xr, &x_lp, num_wait, wait_list, NULL), done);
    num_wait = 0;
    wait_list = NULL;
  }
  for (int l = 0; l < MLP_LAYERS; l++) {
    const mlp_layer *ly = &m->layer[l];
    size_t in_off;
    kiln_buffer *in = layer_input(m, l, x, x_offset, &in_off);
    TRY(model_dense_forward(mm, ly, rows, in, in_off, m->h[l],
                            l == MLP_LAYERS - 1 ? KILN_ACT_NONE : KILN_ACT_RELU,
                            training ? NULL : m->packed[l], num_wait,
                            wait_list),
        done);
    num_wait = 0;
    wait_list = NULL;
    if (l == MLP_LAYERS - 1)
      break;
    if (mm->act_dtype == KILN_BF16)
      TRY(kiln_cast(q, &(kiln_range){m->h[l], 0, rows * ly->out, KILN_F32},
                    &(kiln_range){m->h_lp[l], 0, rows * ly->out, KILN_BF16}, 0,
                    NULL, NULL),
          done);
  }
done:
  return st;
}

static kiln_status mlp_gradients(model *mm, size_t rows, kiln_buffer *x,
                                 size_t x_offset, kiln_buffer *labels,
                                 size_t labels_offset, kiln_buffer *loss,
                                 size_t loss_offset, size_t num_wait,
                                 kiln_event *const *wait_list) {
  mlp *m = (mlp *)mm;
  kiln_status st = KILN_OK;
  kiln_queue *q = mm->queue;
  const int last = MLP_LAYERS - 1;
  TRY(mlp_forward(mm, rows, x, x_offset, true, num_wait, wait_list), done);
  /* d(mean loss)/d(logits) into dz; then down the layers, dz always holds
   * the gradient of layer l's pre-activation output. */
  TRY(model_loss(mm, rows, labels, labels_offset, loss, loss_offset, m->dz),
      done);
  for (int l = last; l >= 0; l--) {
    const mlp_layer *ly = &m->layer[l];
    size_t in_off;
    kiln_buffer *in = layer_input(m, l, x, x_offset, &in_off);
    TRY(model_dense_backward(mm, ly, rows, in, in_off, m->dz, m->d_lp,
                             l > 0 ? m->dh : NULL),
        done);
    if (l == 0)
      break;
    /* Through the previous layer's ReLU, from its output (kept in h):
     * dz = dh where h > 0. */
    size_t n = rows * ly->in;
    kiln_range hy = {m->h[l - 1], 0, n, KILN_F32};
    kiln_range dh = {m->dh, 0, n, KILN_F32}, dzr = {m->dz, 0, n, KILN_F32};
    TRY(kiln_unary_backward(q, KILN_UNARY_RELU, KILN_GRAD_FROM_Y, &hy, &dh, &dzr,
                            0, NULL, NULL),
        done);
  }
done:
  return st;
}

const model_kind mlp_kind = {
    .name = "mlp",
    .create = mlp_create,
    .destroy = mlp_destroy,
    .init = mlp_init,
    .forward = mlp_forward,
    .gradients = mlp_gradients,
};
