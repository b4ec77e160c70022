/* Convolution: 2-D convolution of a batch of images (kiln_image, NCHW)
 * forward with a fused bias and activation, and its two gradients, to the
 * input and to the weights and bias, as PyTorch's conv2d (a
 * cross-correlation: the kernel is not flipped).
 *
 * The conventions of docs/conventions.md hold here: asynchronous on a
 * queue; arguments in the order queue, inputs, outputs, the scalar struct
 * (kiln_conv2d_params), options, then `num_wait, wait_list, out_event`.
 *
 * Shapes, as PyTorch's torch.nn.functional.conv2d:
 *   x  n x c x h x w              (the input images)
 *   w  oc x c/groups x kh x kw    (the weights: a kiln_image whose n is the
 *                                  output channels and c the input channels
 *                                  of one group)
 *   y  n x oc x oh x ow           with oh = (h + 2 pad_h - dil_h (kh - 1) -
 *                                  1) / stride_h + 1 (floor), ow alike
 *   bias and its gradient: a range of oc f32.
 * groups divides c and oc; groups == c == oc is a depthwise convolution.
 * A kernel whose dilated extent exceeds the padded image (no output
 * position) is KILN_ERR_SHAPE_MISMATCH, as is any size or dtype that
 * disagrees with another operand (the message names both).
 *
 * Dtypes: the data read (x, w, dy) is f32, or f16/bf16 storage converted to
 * f32 on load; the operands a call multiplies share one dtype (x and w,
 * dy and w, x and dy). What a call writes (y, dx, dw, db) is f32, and every
 * sum is accumulated in f32 with fused multiply-adds, as kiln_matmul.
 *
 * Layout: NCHW only (the descriptor's layout KILN_NCHW, which is 0);
 * KILN_NHWC is KILN_ERR_INVALID_ARGUMENT naming the operand. NCHW is
 * PyTorch's default and what the im2col columns want: an image row of a
 * channel is contiguous, so gathering a column block reads runs of ow.
 *
 * Method: im2col plus kiln_matmul's GEMM on both kernel families. Each
 * call unfolds a chunk of the batch into columns (c/groups kh kw rows by
 * oh ow columns per image and group) in the queue's op workspace
 * (kiln/kiln_ops.h) and multiplies them with the family's GEMM kernels,
 * whose epilogue applies the bias and the activation. The workspace grows
 * to the columns of the chunk (chunks keep them at most 2 MiB on the CPU
 * family, about a core's L2, and 64 MiB on the GPU family; at least one
 * image) plus what the CPU family's GEMM packs; no call allocates device
 * memory once the workspace is large enough. Backward to the input
 * multiplies w^T by dy into f32 columns and folds them back (col2im) as a
 * gather: each input pixel sums its own terms in a fixed order, no atomics.
 * Backward to the weights multiplies dy by each image's columns into f32
 * products in the workspace (oc x c/groups x kh x kw floats per image of
 * the chunk) and adds them up in image order. Same sizes, same device,
 * same bits.
 *
 * On the GPU family the forward pass and the input gradient are implicit
 * GEMMs instead: the GEMM kernel's tiles reading their operands through
 * the convolution's index map, no columns and no workspace, tunable as the
 * conv2d space (kiln tune --op conv2d; docs/tuning.md); the forward pass
 * gives im2col's bits with the same tile. im2col stays for f16 and bf16
 * where the GEMM runs them on matrix units.
 *
 * Operands must not overlap, except that the inputs may. Image and kernel
 * heights and widths of 0 are KILN_ERR_INVALID_SIZE; n, c and oc may be 0:
 * sums over nothing are 0 (c 0 makes y = act(beta y + bias), an empty
 * batch makes dw and db zeros), and a call with nothing to write is a
 * no-op whose out event still completes. Sizes are at most INT32_MAX
 * each, and one image's columns (c kh kw oh ow) at most INT32_MAX
 * elements (KILN_ERR_INVALID_SIZE). */
#ifndef KILN_OPS_CONV_H
#define KILN_OPS_CONV_H

#if !defined(KILN_H_INSIDE) && !defined(KILN_COMPILATION)
#error "Only <kiln/kiln.h> can be included directly."
#endif

#include "kiln/kiln_common.h"
#include "kiln/kiln_tensor.h"
#include "kiln/kiln_ops.h"

KILN_BEGIN_DECLS

/* The geometry of a convolution. A zero stride, dilation or groups is
 * KILN_ERR_INVALID_ARGUMENT naming the field, so start from
 * KILN_CONV2D_PARAMS_INIT; a NULL params pointer means it. */
typedef struct kiln_conv2d_params {
  size_t stride_h, stride_w;     /* >= 1 */
  size_t pad_h, pad_w;           /* zeros added on each side */
  size_t dilation_h, dilation_w; /* >= 1; 1 is a dense kernel */
  size_t groups;                 /* >= 1, divides c and oc */
} kiln_conv2d_params;

/* Stride 1, no padding, no dilation, one group. */
#define KILN_CONV2D_PARAMS_INIT {1, 1, 0, 0, 1, 1, 1}

/* y = act(alpha * conv(x, w) + beta * y + bias), with epilogue as
 * kiln_matmul's (NULL: KILN_EPILOGUE_INIT, alpha 1, beta 0, no bias, no
 * activation; beta 0 never reads y). epilogue->bias is a range of oc f32,
 * one per output channel, broadcast over the images and pixels.
 *
 *   kiln_image x = {xbuf, 0, 128, 1, 28, 28, KILN_F32},
 *              w = {wbuf, 0, 32, 1, 3, 3, KILN_F32},
 *              y = {ybuf, 0, 128, 32, 28, 28, KILN_F32};
 *   kiln_conv2d_params p = KILN_CONV2D_PARAMS_INIT;
 *   p.pad_h = p.pad_w = 1;
 *   kiln_range b = {bbuf, 0, 32, KILN_F32};
 *   kiln_epilogue e = KILN_EPILOGUE_INIT;
 *   e.bias = &b;
 *   e.activation = KILN_ACT_RELU;
 *   kiln_conv2d(q, &x, &w, &y, &p, &e, 0, NULL, &done);
 */
KILN_API kiln_status kiln_conv2d(kiln_queue *queue, const kiln_image *x,
                                 const kiln_image *w, const kiln_image *y,
                                 const kiln_conv2d_params *params,
                                 const kiln_epilogue *epilogue,
                                 size_t num_wait, kiln_event *const *wait_list,
                                 kiln_event **out_event);

/* The gradient to the input: dx = conv_transpose(dy, w), f32, overwritten
 * (every element of dx is written, zero where no output position sees
 * it). dy (n x oc x oh x ow) and w share a dtype; dx has x's shape, which
 * with params fixes oh and ow. The activation's gradient is not part of
 * it: apply kiln_unary_backward to dy first. */
KILN_API kiln_status kiln_conv2d_backward_data(
    kiln_queue *queue, const kiln_image *dy, const kiln_image *w,
    const kiln_image *dx, const kiln_conv2d_params *params, size_t num_wait,
    kiln_event *const *wait_list, kiln_event **out_event);

/* The gradients to the weights and the bias: dw = sum over the batch of dy
 * correlated with x (w's shape, f32, overwritten) and, when db is not
 * NULL, db[o] = the sum of dy over the images and pixels of channel o (oc
 * f32, overwritten). x and dy share a dtype. */
KILN_API kiln_status kiln_conv2d_backward_weights(
    kiln_queue *queue, const kiln_image *x, const kiln_image *dy,
    const kiln_image *dw, const kiln_range *db,
    const kiln_conv2d_params *params, size_t num_wait,
    kiln_event *const *wait_list, kiln_event **out_event);

KILN_END_DECLS

#endif
