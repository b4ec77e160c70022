/* Image ops beside convolution (kiln_ops_conv.h): 2-D max and average
 * pooling and batch normalisation, forward and backward, on batches of
 * images described by kiln_image (kiln/kiln_tensor.h).
 *
 * The conventions of docs/conventions.md hold: asynchronous on a queue;
 * arguments in the order queue, op kind, inputs, outputs, the parameter
 * struct (scalar slot), then `num_wait, wait_list, out_event`. What is
 * common to every op here:
 * - Images are NCHW (layout KILN_NCHW); KILN_NHWC is refused by name
 *   (KILN_ERR_INVALID_ARGUMENT, "x->layout"). Image data is f32, f16 or
 *   bf16 storage with f32 arithmetic, rounded to nearest even on store; the
 *   images of one call share one dtype (KILN_ERR_SHAPE_MISMATCH naming
 *   both otherwise), and shapes that must agree are checked the same way.
 * - Per-channel vectors (gamma, beta, running statistics, gradients of
 *   gamma and beta) are kiln_range of c f32 elements whatever the images'
 *   dtype is, as PyTorch keeps batch-norm parameters in f32 under mixed
 *   precision; another dtype is KILN_ERR_INVALID_ARGUMENT, another count
 *   KILN_ERR_SHAPE_MISMATCH naming the range and "x's channels".
 * - Outputs must not overlap inputs or each other; an empty batch (n or c
 *   0) is a no-op whose out event still completes.
 * - Determinism: no atomics; every sum runs in a fixed order that depends
 *   only on the sizes and the device's profile, so two runs on one device
 *   give the same bits.
 * - One generic kernel family: the kernels are the same on the CPU and the
 *   GPU family (pooling: one work-item per output, and backward one per
 *   window or, for overlapping windows, per input element; batch
 *   statistics: a two-level reduction in work-groups of the profile's
 *   reduction group size), except that a work-item of the statistics sums
 *   a contiguous span on the CPU family and a strided one on the GPU family
 *   (the order, so the bits, is fixed per family and size).
 * - Workspace: batch normalisation keeps its per-channel partial sums in
 *   the queue's op workspace (kiln/kiln_ops.h): 8 bytes per partial, at
 *   most 64 partials per channel, plus 8 bytes per channel. Pooling needs
 *   none. */
#ifndef KILN_OPS_IMAGE_H
#define KILN_OPS_IMAGE_H

#if !defined(KILN_H_INSIDE) && !defined(KILN_COMPILATION)
#error "Only <kiln/kiln.h> can be included directly."
#endif

#include "kiln/kiln_common.h"
#include "kiln/kiln_tensor.h"
#include "kiln/kiln_ops.h"

KILN_BEGIN_DECLS

/* ---- 2-D pooling ---------------------------------------------------------- */

/* Which pooling: the window's maximum or its mean (average pooling); a view
 * of kiln_reduce_op. */
typedef enum kiln_pool_op {
  KILN_POOL_MAX = KILN_REDUCE_MAX,
  KILN_POOL_MEAN = KILN_REDUCE_MEAN,
} kiln_pool_op;

/* The window of a 2-D pooling, as torch.nn.MaxPool2d / AvgPool2d with
 * dilation 1 and ceil_mode off. A zeroed struct plus the kernel size is
 * PyTorch's default (stride = kernel, no padding, count_include_pad). */
typedef struct kiln_pool2d_params {
  size_t kernel_h, kernel_w; /* >= 1 */
  size_t stride_h, stride_w; /* 0: the kernel size (PyTorch's default) */
  /* Implicit padding on each side, at most half the kernel (PyTorch's
   * rule: so every window holds an element of the image). Max pooling
   * never picks a padded position; average pooling counts it as a zero. */
  size_t pad_h, pad_w;
  /* Average pooling only: false (PyTorch's count_include_pad=True, the
   * default) divides by kernel_h * kernel_w; true divides by the number of
   * the window's elements inside the image. */
  bool exclude_padding;
} kiln_pool2d_params;

/* y = pool(x) per image and channel. x is n x c x h x w; y must be n x c x
 * oh x ow with oh = (h + 2 pad_h - kernel_h) / stride_h + 1 (rounded down)
 * and ow likewise, else KILN_ERR_SHAPE_MISMATCH naming y; a window larger
 * than the padded image is KILN_ERR_SHAPE_MISMATCH naming params->kernel_h
 * (or _w) and x. A kernel size of 0 or a padding above half the kernel is
 * KILN_ERR_INVALID_ARGUMENT naming the field; op other than the two is
 * KILN_ERR_INVALID_ARGUMENT ("op").
 * KILN_POOL_MAX: the first maximum in scan order (row by row, left to
 * right) wins a tie; a NaN in the window is the result (the first NaN), as
 * in PyTorch. The argmax is not stored: kiln_pool2d_backward recomputes it
 * from x with the same comparisons, so it is the same element. Storing it
 * would cost a 4-byte index per output written here and read back there;
 * recomputing reads the window's kernel_h * kernel_w elements, which the
 * backward pass reads from cache: with disjoint windows (stride >= kernel,
 * the usual 2x2 stride 2) one work-item per window writes its part of dx,
 * with overlapping ones one work-item per input element gathers from the
 * windows that cover it (CPU devices: a row of windows or a plane per
 * work-item, the same values; no atomics, hence deterministic). */
KILN_API kiln_status kiln_pool2d(kiln_queue *queue, kiln_pool_op op,
                                 const kiln_image *x, const kiln_image *y,
                                 const kiln_pool2d_params *params,
                                 size_t num_wait, kiln_event *const *wait_list,
                                 kiln_event **out_event);

/* dx = the gradient of kiln_pool2d with the same op and params, from dy (the
 * shape of y): dx is overwritten (not accumulated) with, for each element,
 * the sum over the windows that cover it of dy (max pooling: windows whose
 * maximum it is; mean pooling: dy over the window's divisor), summed in
 * increasing output position. x is the forward input (n x c x h x w, dx's
 * shape and dtype); max pooling reads it, mean pooling only its shape, and
 * there x may be NULL (dx gives the shape). Errors as kiln_pool2d. */
KILN_API kiln_status kiln_pool2d_backward(
    kiln_queue *queue, kiln_pool_op op, const kiln_image *x,
    const kiln_image *dy, const kiln_image *dx,
    const kiln_pool2d_params *params, size_t num_wait,
    kiln_event *const *wait_list, kiln_event **out_event);

/* ---- batch normalisation -------------------------------------------------- */

/* Batch normalisation's scalars, as torch.nn.BatchNorm2d's: start from
 * KILN_BATCHNORM_PARAMS_INIT (eps 1e-5, momentum 0.1). */
typedef struct kiln_batchnorm_params {
  float eps;      /* added to the variance; finite, >= 0 */
  float momentum; /* running = (1 - momentum) running + momentum batch; [0, 1] */
} kiln_batchnorm_params;
#define KILN_BATCHNORM_PARAMS_INIT {1e-5f, 0.1f}

/* Training mode: per channel ch, over the m = n * h * w elements of the
 * batch, mean = sum x / m and var = sum (x - mean)^2 / m (biased), and
 *   y = (x - mean) / sqrt(var + eps) * gamma[ch] + beta[ch].
 * gamma and beta may be NULL (1 and 0: affine off). The statistics are
 * one pass of sums of x - s and (x - s)^2 with s = the channel's first
 * element (a shift that keeps the difference of squares from cancelling),
 * in f32, in a fixed order.
 * running_mean and running_var, read and written (so outputs), are
 * updated as PyTorch does, with the unbiased variance:
 *   running_mean = (1 - momentum) running_mean + momentum mean
 *   running_var = (1 - momentum) running_var + momentum var m / (m - 1);
 * both NULL leaves them (track_running_stats off); one without the other
 * is KILN_ERR_NULL_POINTER. saved, when not NULL, receives 2c f32: the
 * batch mean of channel ch at [ch] and 1 / sqrt(var + eps) at [c + ch],
 * what kiln_batchnorm_backward takes. m must be at least 2 (PyTorch's
 * "expected more than 1 value per channel"; KILN_ERR_INVALID_SIZE naming
 * x). y has x's shape and dtype and may be the same image (in place). */
KILN_API kiln_status kiln_batchnorm_train(
    kiln_queue *queue, const kiln_image *x, const kiln_range *gamma,
    const kiln_range *beta, const kiln_image *y,
    const kiln_range *running_mean, const kiln_range *running_var,
    const kiln_range *saved, const kiln_batchnorm_params *params,
    size_t num_wait, kiln_event *const *wait_list, kiln_event **out_event);

/* Inference mode: y = (x - running_mean) / sqrt(running_var + eps) * gamma
 * + beta per channel (gamma, beta NULL: 1 and 0; running statistics
 * required, f32, c each). params->momentum is not used. y may be x. */
KILN_API kiln_status kiln_batchnorm_inference(
    kiln_queue *queue, const kiln_image *x, const kiln_range *gamma,
    const kiln_range *beta, const kiln_range *running_mean,
    const kiln_range *running_var, const kiln_image *y,
    const kiln_batchnorm_params *params, size_t num_wait,
    kiln_event *const *wait_list, kiln_event **out_event);

/* Backward of training mode, from its input x, gamma (NULL: 1) and the
 * saved statistics (2c f32 from kiln_batchnorm_train). With xhat = (x -
 * mean) * rstd, per channel over the m elements of the batch:
 *   dbeta = sum dy,  dgamma = sum dy * xhat                       (f32, c)
 *   dx = gamma * rstd * (dy - dbeta / m - xhat * dgamma / m)     (x's dtype)
 * Each of dx, dgamma, dbeta may be NULL (not computed), not all three;
 * dgamma and dbeta are overwritten, not accumulated. dy and dx have x's
 * shape and dtype; dx may be the same image as dy. */
KILN_API kiln_status kiln_batchnorm_backward(
    kiln_queue *queue, const kiln_image *x, const kiln_range *gamma,
    const kiln_range *saved, const kiln_image *dy, const kiln_image *dx,
    const kiln_range *dgamma, const kiln_range *dbeta, size_t num_wait,
    kiln_event *const *wait_list, kiln_event **out_event);

KILN_END_DECLS

#endif
