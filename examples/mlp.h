/* mlp.h: the multilayer perceptron that train_fashion_mnist.c trains
 * (784 -> H -> H -> 10, ReLU; H = 1024 unless --hidden says otherwise), on
 * one kiln queue.
 *
 * Layout, chosen so that data-parallel training (one allreduce of the
 * gradients per step) and a comparison with PyTorch stay simple:
 * - every parameter lives in one f32 device buffer, `params`, in the order
 *   W1, b1, W2, b2, W3, b3, each W stored out x in row-major (PyTorch's
 *   nn.Linear layout), so a file of nparams floats is the whole model;
 * - the gradients live in one buffer `grads` with the same offsets, so a
 *   single allreduce (or a single norm, or a single optimizer launch) covers
 *   them all;
 * - mlp_gradients() computes gradients and the loss and nothing else;
 *   mlp_step() applies the optimizer and nothing else. A data-parallel
 *   trainer averages `grads` across ranks between the two. */
#ifndef MLP_H
#define MLP_H

#include <stddef.h>
#include <stdint.h>

#include <kiln/kiln.h>

enum { MLP_LAYERS = 3 };

typedef enum mlp_optimizer { MLP_ADAMW = 0, MLP_SGD = 1 } mlp_optimizer;

typedef struct mlp_hyper {
  mlp_optimizer optimizer;
  float lr;
  float momentum;     /* SGD */
  float beta1, beta2; /* AdamW */
  float eps;          /* AdamW */
  float weight_decay; /* decoupled (AdamW) or L2 added to the gradient (SGD) */
} mlp_hyper;

typedef struct mlp_layer {
  size_t in, out;
  size_t w, b; /* element offsets of the weights and the bias in params */
} mlp_layer;

typedef struct mlp {
  kiln_context *ctx;
  kiln_queue *queue;
  size_t batch; /* the largest number of rows a call may pass */
  kiln_dtype act_dtype; /* KILN_F32, or KILN_BF16 for bf16 weights and activations */
  mlp_layer layer[MLP_LAYERS];
  size_t nparams;
  unsigned long steps; /* optimizer steps taken (AdamW's bias correction) */
  kiln_buffer *params, *grads; /* f32, nparams each, same offsets */
  kiln_buffer *opt_m, *opt_v;  /* optimizer state (momentum / Adam moments) */
  kiln_buffer *params_lp;      /* bf16 copy of params (bf16 only) */
  kiln_buffer *h[MLP_LAYERS];  /* f32 layer outputs, batch x out */
  kiln_buffer *h_lp[MLP_LAYERS - 1]; /* bf16 copies of the hidden outputs */
  kiln_buffer *x_lp;           /* bf16 copy of the input batch */
  kiln_buffer *dz;             /* gradient of a layer's pre-activation */
  kiln_buffer *dh;             /* gradient of a hidden layer's output */
  kiln_buffer *d_lp;           /* bf16 copy of dz for the weight GEMMs */
  kiln_buffer *row_loss;       /* f32 per-row loss, batch */
  kiln_buffer *scratch;        /* f32, a few scalars */
} mlp;

/* The hidden width of the full-size network (the figures of docs/performance.md). */
enum { MLP_HIDDEN = 1024 };

/* Create the model's buffers for batches of up to `batch` rows, with two
 * hidden layers of `hidden` units. act_dtype KILN_F32 or KILN_BF16.
 * Returns a kiln status; the last error says why. */
kiln_status mlp_create(kiln_context *ctx, kiln_queue *queue, size_t batch,
                       size_t hidden, kiln_dtype act_dtype, mlp **out);
void mlp_destroy(mlp *m);

/* Initialise the parameters from seed (nn.Linear's default: W and b
 * uniform in +-1/sqrt(in)) and zero the optimizer state. */
kiln_status mlp_init(mlp *m, uint64_t seed);

/* Forward pass over rows (<= batch) of x (f32, rows x 784 at x_offset):
 * the logits are m->h[MLP_LAYERS - 1] (rows x 10, f32). Waits for wait. */
kiln_status mlp_forward(mlp *m, size_t rows, kiln_buffer *x, size_t x_offset,
                        size_t num_wait, kiln_event *const *wait_list);

/* Forward and backward over one batch: fills m->grads with the gradient of
 * the mean cross-entropy over the rows, and adds the batch's mean loss to
 * loss[loss_offset] (f32). labels: rows u32 class indexes. */
kiln_status mlp_gradients(mlp *m, size_t rows, kiln_buffer *x,
                          size_t x_offset, kiln_buffer *labels,
                          size_t labels_offset, kiln_buffer *loss,
                          size_t loss_offset, size_t num_wait,
                          kiln_event *const *wait_list);

/* One optimizer step from m->grads; updates params (and their bf16 copy). */
kiln_status mlp_step(mlp *m, const mlp_hyper *hyper);

/* Add the number of rows whose argmax of the logits (after mlp_forward)
 * equals the label to correct[correct_offset] (u32). */
kiln_status mlp_count_correct(mlp *m, size_t rows, kiln_buffer *labels,
                              size_t labels_offset, kiln_buffer *correct,
                              size_t correct_offset);

#endif
