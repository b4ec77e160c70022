/* cnn.h: the convolutional network that `train_fashion_mnist --model cnn`
 * trains, behind model.h's interface (cnn_kind):
 *
 *   conv 1->32 3x3 - BN - ReLU - conv 32->64 3x3 - BN - ReLU - max-pool 2
 *   - dropout 0.25 - dense 9216->D - ReLU - dense D->10      (D = 128)
 *
 * PyTorch's MNIST example network with batch normalisation after each
 * convolution (whose bias it makes redundant, so the convolutions have
 * none). Parameters in model.h's one f32 buffer, in the order conv1.weight
 * (32x1x3x3), bn1.weight, bn1.bias, conv2.weight (64x32x3x3), bn2.weight,
 * bn2.bias, fc1.weight (Dx9216), fc1.bias, fc2.weight (10xD), fc2.bias:
 * PyTorch's state_dict order, less the running statistics, which live in
 * their own buffer (`stats`: bn1 mean, var, bn2 mean, var) as they are no
 * parameters (not trained, not averaged by the data-parallel mode). */
#ifndef CNN_H
#define CNN_H

#include "model.h"

enum {
  CNN_C1 = 32,    /* first convolution's channels */
  CNN_C2 = 64,    /* second convolution's channels */
  CNN_K = 3,      /* kernel size of both */
  CNN_H1 = 26,    /* image side after conv1 (28 - 3 + 1) */
  CNN_H2 = 24,    /* after conv2 */
  CNN_HP = 12,    /* after the 2x2 max-pool */
  CNN_FLAT = CNN_C2 * CNN_HP * CNN_HP, /* 9216 */
  CNN_DENSE = 128 /* the dense layer's default width */
};

typedef struct cnn {
  model base;
  size_t w1, g1, be1, w2, g2, be2; /* element offsets in params */
  model_dense fc1, fc2;
  kiln_buffer *stats;   /* f32 running mean and var of bn1 then bn2 */
  kiln_buffer *saved;   /* f32 batch statistics for the backward pass */
  kiln_buffer *c1, *r1; /* conv1's output, after BN and ReLU */
  kiln_buffer *c2, *r2; /* the same for conv2 */
  kiln_buffer *p;       /* pooled (and dropped out in training) */
  kiln_buffer *h3;      /* fc1 after ReLU */
  kiln_buffer *dbig, *dbig2; /* gradients of conv-sized activations */
  kiln_buffer *dsmall, *dsmall2; /* gradients of dense-sized activations */
  /* bf16 only: GEMM operands in bf16 (input, r1, p, h3, gradients). */
  kiln_buffer *x_lp, *r1_lp, *p_lp, *h3_lp, *d_lp;
} cnn;

#endif
