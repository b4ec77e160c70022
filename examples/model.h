/* model.h: what the Fashion-MNIST trainer (train_fashion_mnist.c) needs of a
 * network, so that one driver trains the perceptron of mlp.c and the
 * convolutional network of cnn.c with the same flags, output and
 * data-parallel mode.
 *
 * Every model keeps its trainable parameters in one f32 device buffer,
 * `params`, and their gradients in `grads` at the same offsets, so a single
 * allreduce, norm or optimizer launch covers them all (model_step), and a
 * file of nparams floats is the whole set of weights. gradients() computes
 * the gradients and the loss and nothing else; model_step() applies the
 * optimizer and nothing else: a data-parallel trainer averages `grads`
 * across ranks between the two. */
#ifndef MODEL_H
#define MODEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <kiln/kiln.h>

typedef enum model_optimizer { MODEL_ADAMW = 0, MODEL_SGD = 1 } model_optimizer;

typedef struct model_hyper {
  model_optimizer optimizer;
  float lr;
  float momentum;     /* SGD */
  float beta1, beta2; /* AdamW */
  float eps;          /* AdamW */
  float weight_decay; /* decoupled (AdamW) or L2 added to the gradient (SGD) */
} model_hyper;

typedef struct model model;

/* A network's own steps. x: rows (<= batch) images of 784 f32 pixels in
 * [0, 1] at x_offset; the wait list (the batch's upload, on another queue)
 * goes to the first command, the queue being in order. */
typedef struct model_kind {
  const char *name; /* "mlp", "cnn" */
  /* Create the buffers for batches of up to `batch` rows; width is the
   * hidden width (mlp) or the dense layer's width (cnn), 0 for the
   * default. act_dtype KILN_F32, or KILN_BF16 for bf16 weights and
   * activations (f32 master weights and arithmetic). */
  kiln_status (*create)(kiln_context *ctx, kiln_queue *queue, size_t batch,
                        size_t width, kiln_dtype act_dtype, model **out);
  void (*destroy)(model *m);
  /* Parameters from seed alone (the same bits on every device). */
  kiln_status (*init)(model *m, uint64_t seed);
  /* Logits of rows images into m->logits; training says whether layers that
   * behave differently in training (dropout, batch statistics) do so. */
  kiln_status (*forward)(model *m, size_t rows, kiln_buffer *x,
                         size_t x_offset, bool training, size_t num_wait,
                         kiln_event *const *wait_list);
  /* Forward (training) and backward over one batch: m->grads gets the
   * gradient of the mean cross-entropy over the rows, and the batch's mean
   * loss goes to loss[loss_offset] (f32). labels: rows u32 classes. */
  kiln_status (*gradients)(model *m, size_t rows, kiln_buffer *x,
                           size_t x_offset, kiln_buffer *labels,
                           size_t labels_offset, kiln_buffer *loss,
                           size_t loss_offset, size_t num_wait,
                           kiln_event *const *wait_list);
} model_kind;

/* The part every model shares; a model's own struct starts with it. */
struct model {
  const model_kind *kind;
  kiln_context *ctx;
  kiln_queue *queue;
  size_t batch;         /* the largest number of rows a call may pass */
  kiln_dtype act_dtype; /* KILN_F32 or KILN_BF16 */
  size_t width;         /* the width create() used (for the banner) */
  size_t nparams;
  unsigned long steps;          /* optimizer steps taken (AdamW's bias
                                   correction; dropout's stream offset) */
  uint64_t seed;                /* init()'s, for dropout's stream */
  kiln_buffer *params, *grads;  /* f32, nparams each, same offsets */
  kiln_buffer *opt_m, *opt_v;   /* optimizer state */
  kiln_buffer *params_lp;       /* bf16 copy of params (bf16 only) */
  kiln_buffer *logits;          /* f32, batch x 10, after forward */
};

extern const model_kind mlp_kind; /* mlp.c */
extern const model_kind cnn_kind; /* cnn.c */

/* The kind named name ("mlp", "cnn"), or NULL. */
const model_kind *model_kind_find(const char *name);

/* The shared buffers of m (params, grads, optimizer state, the bf16 copy
 * in bf16, logits) once m->nparams, batch and act_dtype are set. */
kiln_status model_alloc_common(model *m);
void model_free_common(model *m);
/* Zero the optimizer state and refresh the bf16 copy (after init). */
kiln_status model_reset_optimizer(model *m);

/* A dense (fully connected) layer: W out x in row-major (nn.Linear's
 * layout) at element w of params, its f32 bias (out) at b. */
typedef struct model_dense {
  size_t in, out;
  size_t w, b;
} model_dense;

/* The descriptor of ly's W as model_dense_forward reads it: out x in of
 * m->act_dtype from params (params_lp in bf16), transposed (op(W) = W^T,
 * in x out), for kiln_packed_create and kiln_pack. */
kiln_matrix model_dense_weights(const model *m, const model_dense *ly);

/* y = act(x W^T + b) in one launch: x rows x in of m->act_dtype at x_offset
 * of x (the weights read from params_lp in bf16, or from packed when not
 * NULL: ly's W packed by kiln_pack as KILN_OPERAND_B, see
 * model_dense_weights; the bias from params), y f32 rows x out. The wait
 * list goes to the launch. */
kiln_status model_dense_forward(model *m, const model_dense *ly, size_t rows,
                                kiln_buffer *x, size_t x_offset, kiln_buffer *y,
                                kiln_activation act, const kiln_packed *packed,
                                size_t num_wait, kiln_event *const *wait_list);

/* From dz (f32 rows x out, the gradient of the layer's pre-activation
 * output): dW = dz^T x and db = the column sums of dz into grads, and, when
 * dx is not NULL, dx = dz W (f32 rows x in). x as for the forward pass; in
 * bf16 dz is first cast into dz_lp (rows x out bf16) for the GEMMs. */
kiln_status model_dense_backward(model *m, const model_dense *ly, size_t rows,
                                 kiln_buffer *x, size_t x_offset,
                                 kiln_buffer *dz, kiln_buffer *dz_lp,
                                 kiln_buffer *dx);

/* The mean cross-entropy of m->logits (rows x 10, after forward) against
 * labels (rows u32) into loss[loss_offset], and its gradient to the logits
 * (f32, rows x 10) into dlogits. */
kiln_status model_loss(model *m, size_t rows, kiln_buffer *labels,
                       size_t labels_offset, kiln_buffer *loss,
                       size_t loss_offset, kiln_buffer *dlogits);

/* One optimizer step over every parameter from m->grads. */
kiln_status model_step(model *m, const model_hyper *hyper);

/* Add the number of rows whose logits' argmax (after forward) equals the
 * label to correct[correct_offset] (u32). */
kiln_status model_count_correct(model *m, size_t rows, kiln_buffer *labels,
                                size_t labels_offset, kiln_buffer *correct,
                                size_t correct_offset);

#endif
