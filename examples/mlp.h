/* mlp.h: the multilayer perceptron that train_fashion_mnist.c trains by
 * default (784 -> H -> H -> 10, ReLU; H = 1024 unless --hidden says
 * otherwise), on one kiln queue, behind model.h's interface (mlp_kind).
 *
 * Parameters in model.h's one f32 buffer, in the order W1, b1, W2, b2, W3,
 * b3, each W stored out x in row-major (PyTorch's nn.Linear layout), which
 * examples/torch_side_by_side.py reads. */
#ifndef MLP_H
#define MLP_H

#include "model.h"

enum { MLP_LAYERS = 3 };

/* The hidden width of the full-size network (the figures of
 * docs/performance.md). */
enum { MLP_HIDDEN = 1024 };

typedef model_dense mlp_layer;

typedef struct mlp {
  model base;
  mlp_layer layer[MLP_LAYERS];
  kiln_buffer *h[MLP_LAYERS];  /* f32 layer outputs, batch x out (the last
                                  is base.logits) */
  kiln_buffer *h_lp[MLP_LAYERS - 1]; /* bf16 copies of the hidden outputs */
  kiln_buffer *x_lp;           /* bf16 copy of the input batch */
  kiln_buffer *dz;             /* gradient of a layer's pre-activation */
  kiln_buffer *dh;             /* gradient of a hidden layer's output */
  kiln_buffer *d_lp;           /* bf16 copy of dz for the weight GEMMs */
  /* Inference (forward with training false) reads the weights packed
   * (kiln_pack), packed again at the first inference after they changed:
   * once per evaluation, not at every GEMM. */
  kiln_packed *packed[MLP_LAYERS];
  bool packed_fresh;           /* packed holds the weights of packed_steps */
  unsigned long packed_steps;  /* base.steps when they were packed */
} mlp;

#endif
