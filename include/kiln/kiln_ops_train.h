/* Training ops: what a training step needs around its GEMMs (broadcast
 * bias and scaling, activation and row-op gradients, softmax cross-entropy,
 * accuracy, embedding gather and scatter-add, Philox random numbers,
 * optimizer steps, gradient norm, clipping and a non-finite check).
 *
 * The conventions of docs/conventions.md hold here: asynchronous on a
 * queue; arguments in the order queue, op kind, inputs, outputs (an operand
 * read and written, like an optimizer's weights, is an output), scalars,
 * options, then `num_wait, wait_list, out_event`. Operands are descriptors
 * (kiln/kiln_tensor.h): a `kiln_range` for vectors, a `kiln_matrix` for
 * anything with rows and columns, and their dtypes and extents are the
 * op's: there is no separate dtype or count argument. The matrices here
 * are row-major, as stored and packed (layout KILN_ROW_MAJOR, trans
 * KILN_NO_TRANS, ld 0 or cols, batch_stride 0: KILN_ERR_INVALID_ARGUMENT
 * otherwise). Float operands are f32, f16 or bf16 storage with f32
 * arithmetic, rounded to nearest even on store; 0 rows, columns or
 * elements is a no-op whose out event still completes; ranges must not
 * overlap unless an op says so. Operands that must agree are checked: a
 * dtype or an extent that differs from the one another operand fixes is
 * KILN_ERR_SHAPE_MISMATCH naming both; a dtype the op does not take at all
 * is KILN_ERR_INVALID_ARGUMENT; a NULL descriptor where one is required is
 * KILN_ERR_NULL_POINTER. What differs per op:
 * - Vectors that are sums over a batch (dscale, dbias, losses, norms) are
 *   f32 ranges whatever the data's dtype is, as kiln's reductions are; a
 *   single value (a mean, a norm, a count, a flag) is a range of count 1.
 * - Labels and indices are ranges of u32 or i32. An index out of range is a
 *   bug the device cannot report as a status; each op says what it writes
 *   instead (NaN where it can), so the non-finite check or the loss shows
 *   it.
 * - Optimizer state (weights, momentum, Adam moments) is f32; the gradient
 *   may be any float dtype, and an optional copy of the updated weights is
 *   written as f16 or bf16 for the next forward pass.
 * - Parameter structs (kiln_sgd_params, kiln_adamw_params) hold the step's
 *   scalars (and the one option, nesterov, that goes with them): they take
 *   the scalar slot, after the outputs. kiln_unary_backward's `from` says
 *   what the op is (which gradient form) and sits beside the op kind;
 *   kiln_accuracy_count's `accumulate` is an option, after the outputs;
 *   the random ops' scalars are the stream position (seed, offset) first,
 *   then the distribution's floats.
 * - Determinism: no op here uses floating-point atomics; sums over rows or
 *   over buffers run in a fixed order that depends only on the sizes and the
 *   device's profile, so two runs on one device give the same bits
 *   (scatter-add with repeated indices included). Philox outputs are the
 *   same bits on every device.
 * - Workspace: ops that keep per-row or per-block partial results use the
 *   queue's op workspace (kiln/kiln_ops.h): 4 bytes per row for the mean
 *   cross-entropy without a loss vector, 8 bytes per row for layernorm
 *   backward's dscale/dbias and for scatter-add's chains, 4 bytes per
 *   partial sum of the gradient norm (64 per 16384 elements of a range, at
 *   most 4096 per range).
 *
 * The bias gradient of kiln_binary_broadcast (KILN_BINARY_ADD, a row vector)
 * is kiln_reduce_cols with KILN_REDUCE_SUM; weight gradients are kiln_matmul
 * with a transposed operand; dropout backward is kiln_dropout with the same
 * seed and offset. */
#ifndef KILN_OPS_TRAIN_H
#define KILN_OPS_TRAIN_H

#if !defined(KILN_H_INSIDE) && !defined(KILN_COMPILATION)
#error "Only <kiln/kiln.h> can be included directly."
#endif

#include "kiln/kiln_common.h"
#include "kiln/kiln_tensor.h"
#include "kiln/kiln_ops.h"

KILN_BEGIN_DECLS

/* ---- broadcast binary ops (dtypes f32, f16, bf16) ------------------------ */

/* Which way the vector operand b is broadcast over the rows x cols matrix. */
typedef enum kiln_broadcast {
  /* b is a row vector of cols elements, repeated down the rows:
   * y[r][c] = a[r][c] op b[c] (bias add). */
  KILN_BROADCAST_ROW = 0,
  /* b is a column vector of rows elements, repeated across the columns:
   * y[r][c] = a[r][c] op b[r] (per-row scaling). */
  KILN_BROADCAST_COL = 1,
} kiln_broadcast;

/* y = a op broadcast(b) for any of the six kiln_binary_op (a on the left,
 * as in kiln_binary). a and y are rows x cols of one dtype; b has that dtype
 * and cols elements (KILN_BROADCAST_ROW) or rows (KILN_BROADCAST_COL). y may
 * be the same range as a (in place); b must not overlap y.
 * KILN_ERR_INVALID_ARGUMENT for an unknown op or broadcast ("broadcast"). */
KILN_API kiln_status kiln_binary_broadcast(
    kiln_queue *queue, kiln_binary_op op, kiln_broadcast broadcast,
    const kiln_matrix *a, const kiln_range *b, const kiln_matrix *y,
    size_t num_wait, kiln_event *const *wait_list, kiln_event **out_event);

/* ---- activation gradients (dtypes f32, f16, bf16) ------------------------ */

/* What the first buffer of kiln_unary_backward holds. */
typedef enum kiln_grad_from {
  KILN_GRAD_FROM_X = 0, /* the activation's input x */
  KILN_GRAD_FROM_Y = 1, /* its output y = f(x): saves keeping x alive */
} kiln_grad_from;

/* dx[i] = dy[i] * f'(x[i]) for f one of KILN_UNARY_RELU, GELU, SIGMOID,
 * TANH (the forms of kiln_unary), from x or from y:
 * - RELU: dy where x > 0 (from y: y > 0), else 0; at 0 and for NaN x the
 *   gradient is 0, as in PyTorch.
 * - GELU (tanh form): from x only; KILN_GRAD_FROM_Y is refused.
 * - SIGMOID: dy * s (1 - s), s = sigmoid(x) or y.
 * - TANH: dy * (1 - t^2), t = tanh(x) or y.
 * xy holds x or y per from; xy, dy and dx have one dtype and count; dx may
 * be the same range as dy or as xy (in place). op and from together say
 * what to do, so both sit in the op-kind slot. KILN_ERR_INVALID_ARGUMENT
 * for another op ("op") or an unknown from. */
KILN_API kiln_status kiln_unary_backward(
    kiln_queue *queue, kiln_unary_op op, kiln_grad_from from,
    const kiln_range *xy, const kiln_range *dy, const kiln_range *dx,
    size_t num_wait, kiln_event *const *wait_list, kiln_event **out_event);

/* ---- softmax cross-entropy and accuracy ---------------------------------- */
/* logits: a rows x cols matrix (f32, f16, bf16); labels: a range of rows
 * elements of KILN_U32 or KILN_I32, each a class index in [0, cols). rows
 * must be at most UINT32_MAX, cols at most INT32_MAX, and cols >= 1 when
 * rows > 0. */

/* Per-row loss[r] = logsumexp(logits[r]) - logits[r][labels[r]] (f32,
 * rows elements; computed as max + log(sum exp(x - max)), so logits of
 * +-1e4 neither overflow nor lose the loss), and mean (one f32) = the mean
 * of the rows' losses (summed in a fixed order). Either output may be NULL,
 * not both. A label out of range gives that row a NaN loss, and so a NaN
 * mean. */
KILN_API kiln_status kiln_softmax_cross_entropy(
    kiln_queue *queue, const kiln_matrix *logits, const kiln_range *labels,
    const kiln_range *loss, const kiln_range *mean, size_t num_wait,
    kiln_event *const *wait_list, kiln_event **out_event);

/* dlogits[r][c] = (softmax(logits[r])[c] - (c == labels[r])) * scale, the
 * gradient of scale * sum_r loss[r]: scale = 1 / rows for the mean loss
 * (times the loss scale under loss scaling). dlogits has the logits' shape
 * and dtype and may be the same range as logits (in place). A label out of
 * range gives a row of NaN. scale must be finite ("scale"). */
KILN_API kiln_status kiln_softmax_cross_entropy_backward(
    kiln_queue *queue, const kiln_matrix *logits, const kiln_range *labels,
    const kiln_matrix *dlogits, float scale, size_t num_wait,
    kiln_event *const *wait_list, kiln_event **out_event);

/* count (one u32) = the number of rows whose first maximum (NaN ignored,
 * as KILN_REDUCE_ARGMAX) is at column labels[r]; with the option
 * accumulate, that number is added to the count already there (modulo 2^32)
 * instead, so an epoch's correct predictions add up on the device. A label
 * out of range never matches. */
KILN_API kiln_status kiln_accuracy_count(
    kiln_queue *queue, const kiln_matrix *logits, const kiln_range *labels,
    const kiln_range *count, bool accumulate, size_t num_wait,
    kiln_event *const *wait_list, kiln_event **out_event);

/* ---- row-op backward (dtypes f32, f16, bf16) ----------------------------- */

/* Backward of kiln_softmax_rows from its output y: dx = y * (dy - sum_c(dy *
 * y)) per row. y, dy and dx are rows x cols of one dtype; dx may be the same
 * range as dy or y. */
KILN_API kiln_status kiln_softmax_rows_backward(
    kiln_queue *queue, const kiln_matrix *y, const kiln_matrix *dy,
    const kiln_matrix *dx, size_t num_wait, kiln_event *const *wait_list,
    kiln_event **out_event);

/* Backward of kiln_layernorm_rows with the same x, scale and eps (the row
 * statistics are recomputed from x, two-pass). With xhat = (x - mean) *
 * rstd and g = dy * scale:
 *   dx = rstd * (g - mean_c(g) - xhat * mean_c(g * xhat))   (x's dtype)
 *   dscale[c] = sum_r dy[r][c] * xhat[r][c]                 (f32)
 *   dbias[c] = sum_r dy[r][c]                               (f32)
 * x, dy and dx are rows x cols of one dtype; scale (cols elements of that
 * dtype) may be NULL (all ones). Each of dx, dscale, dbias (cols f32
 * elements) may be NULL (not computed); dscale and dbias are overwritten,
 * not accumulated, and summed over rows in a fixed order. dx may be the
 * same range as dy. eps as in the forward op. */
KILN_API kiln_status kiln_layernorm_rows_backward(
    kiln_queue *queue, const kiln_matrix *x, const kiln_range *scale,
    const kiln_matrix *dy, const kiln_matrix *dx, const kiln_range *dscale,
    const kiln_range *dbias, float eps, size_t num_wait,
    kiln_event *const *wait_list, kiln_event **out_event);

/* ---- gather and scatter-add of rows -------------------------------------- */

/* Embedding lookup: y[i][:] = table[indices[i]][:] for i < rows, y being
 * rows x cols, indices rows elements (u32 or i32) and the table table_rows
 * x cols of y's dtype: f32, f16, bf16, i32 or u32 (moved bit for bit). A
 * row whose index is out of range is written with every bit set (NaN for
 * the float types, -1 or UINT32_MAX for the integers). y must not overlap
 * table or indices. rows and table_rows at most INT32_MAX, for this op and
 * the next. */
KILN_API kiln_status kiln_gather_rows(kiln_queue *queue,
                                      const kiln_matrix *table,
                                      const kiln_range *indices,
                                      const kiln_matrix *y, size_t num_wait,
                                      kiln_event *const *wait_list,
                                      kiln_event **out_event);

/* Its gradient: table[indices[i]][:] += x[i][:] for i < rows, x being rows
 * x cols and the table table_rows x cols, of one dtype f32, f16 or bf16.
 * Repeated indices are summed in f32 in increasing i, onto the table's
 * value, and stored once: the same bits on every run. Rows whose index is
 * out of range are skipped. Matching repeated indices costs about rows^2 /
 * 2 index comparisons, fine for batches up to tens of thousands of rows. x
 * and indices must not overlap table (read and written: an output). */
KILN_API kiln_status kiln_scatter_add_rows(
    kiln_queue *queue, const kiln_matrix *x, const kiln_range *indices,
    const kiln_matrix *table, size_t num_wait, kiln_event *const *wait_list,
    kiln_event **out_event);

/* ---- Philox4x32-10 random numbers ---------------------------------------- */
/* Element i of a call is element g = offset + i of the stream named by seed:
 * word g % 4 of Philox4x32-10 (Salmon et al., SC'11; Random123) with key
 * (seed mod 2^32, seed >> 32) and counter (b mod 2^32, b >> 32, 0, 0),
 * b = g / 4. So a stream can be produced in pieces (offset = elements done
 * so far) and gives the same bits on every device. seed and offset are the
 * first scalars of every function here, the distribution's own follow. The
 * output's count n: offset + n must not exceed 2^64 ("offset"). From a word
 * w:
 *   uniform u = (w >> 8) * 2^-24 in [0, 1), exact in f32.
 * Floating results are computed with f32 additions, multiplications and
 * fma only (kiln's own log, sqrt and sincos polynomials for the normal
 * ones), which OpenCL rounds correctly, so they too are the same bits on
 * every device; f16/bf16 storage rounds them once. */

/* The raw 32-bit words into y (a KILN_U32 range). */
KILN_API kiln_status kiln_random_bits(kiln_queue *queue, const kiln_range *y,
                                      uint64_t seed, uint64_t offset,
                                      size_t num_wait,
                                      kiln_event *const *wait_list,
                                      kiln_event **out_event);

/* y = fma(u, hi - lo, lo) in f32: uniform in [lo, hi) (hi only through the
 * final rounding). lo and hi finite, lo <= hi. y f32, f16 or bf16. */
KILN_API kiln_status kiln_random_uniform(kiln_queue *queue, const kiln_range *y,
                                         uint64_t seed, uint64_t offset,
                                         float lo, float hi, size_t num_wait,
                                         kiln_event *const *wait_list,
                                         kiln_event **out_event);

/* y = mean + stddev * z, z standard normal by Box-Muller on the block's
 * words: (w0, w1) give elements 4b and 4b+1, (w2, w3) 4b+2 and 4b+3, as
 * r cos t and r sin t with r = sqrt(-2 ln u1), u1 = ((w0 >> 8) + 1) 2^-24 in
 * (0, 1], and t = 2 pi u(w1). |z| < 5.8. mean, stddev finite, stddev >= 0.
 * y f32, f16 or bf16. */
KILN_API kiln_status kiln_random_normal(kiln_queue *queue, const kiln_range *y,
                                        uint64_t seed, uint64_t offset,
                                        float mean, float stddev,
                                        size_t num_wait,
                                        kiln_event *const *wait_list,
                                        kiln_event **out_event);

/* Inverted dropout with drop probability p in [0, 1]: element g is kept
 * when u(w_g) >= p. kiln_dropout_mask writes 1 / (1 - p) (rounded to f32)
 * for kept elements and 0 for dropped ones (p = 1 drops all);
 * kiln_dropout writes y = x * that mask without storing it, and with the
 * same seed and offset is also its own backward (dx = kiln_dropout(dy)).
 * x and y have one dtype (f32, f16, bf16) and count; y may be the same
 * range as x. */
KILN_API kiln_status kiln_dropout_mask(kiln_queue *queue,
                                       const kiln_range *mask, uint64_t seed,
                                       uint64_t offset, float p,
                                       size_t num_wait,
                                       kiln_event *const *wait_list,
                                       kiln_event **out_event);
KILN_API kiln_status kiln_dropout(kiln_queue *queue, const kiln_range *x,
                                  const kiln_range *y, uint64_t seed,
                                  uint64_t offset, float p, size_t num_wait,
                                  kiln_event *const *wait_list,
                                  kiln_event **out_event);

/* ---- optimizer steps ----------------------------------------------------- */
/* One call updates one parameter tensor in a single pass, in the argument
 * order inputs (grad, skip), outputs (w, the state, w_copy: read and
 * written), scalars (the params struct). The weights w and the optimizer
 * state are f32 ranges of w's count n; grad has n elements of f32, f16 or
 * bf16 and is first multiplied by params->grad_scale (1, or 1 / loss scale;
 * finite and > 0, so a zeroed struct is refused rather than silently
 * training nothing). w_copy, when not NULL, receives the updated weights in
 * its own dtype (f32, f16, bf16; n elements): the low-precision weights the
 * next forward pass reads. skip, when not NULL, is one u32 flag
 * (kiln_has_nonfinite's): nonzero leaves w and the state unchanged (w_copy
 * is then rewritten from the unchanged w), without a round trip to the
 * host. No two of w, grad, the state and w_copy may overlap. Scalars must
 * be finite; bad ones are KILN_ERR_INVALID_ARGUMENT naming the field. */

/* SGD with momentum, as torch.optim.SGD with dampening 0 and a velocity
 * buffer initialised to zeros:
 *   g = grad * grad_scale + weight_decay * w
 *   v = momentum * v + g;  g = nesterov ? g + momentum * v : v  (momentum != 0)
 *   w = w - lr * g
 * velocity may be NULL only when momentum is 0. */
typedef struct kiln_sgd_params {
  float lr;
  float momentum;     /* in [0, 1) */
  float weight_decay; /* L2, added to the gradient; >= 0 */
  bool nesterov;      /* needs momentum > 0 */
  float grad_scale;
} kiln_sgd_params;

KILN_API kiln_status kiln_sgd_step(
    kiln_queue *queue, const kiln_range *grad, const kiln_range *skip,
    const kiln_range *w, const kiln_range *velocity, const kiln_range *w_copy,
    const kiln_sgd_params *params, size_t num_wait,
    kiln_event *const *wait_list, kiln_event **out_event);

/* AdamW (Loshchilov and Hutter), as torch.optim.AdamW (amsgrad off) with
 * moments m and v initialised to zeros, t = params->step (1 for the first
 * step; bias corrections computed on the host in double):
 *   g = grad * grad_scale
 *   w = w * (1 - lr * weight_decay)
 *   m = m + (1 - beta1) (g - m);  v = beta2 v + (1 - beta2) g^2
 *   w = w - (lr / (1 - beta1^t)) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps) */
typedef struct kiln_adamw_params {
  float lr;
  float beta1, beta2; /* in [0, 1) */
  float eps;          /* > 0 */
  float weight_decay; /* decoupled; >= 0 */
  uint64_t step;      /* t >= 1 */
  float grad_scale;
} kiln_adamw_params;

KILN_API kiln_status kiln_adamw_step(
    kiln_queue *queue, const kiln_range *grad, const kiln_range *skip,
    const kiln_range *w, const kiln_range *m, const kiln_range *v,
    const kiln_range *w_copy, const kiln_adamw_params *params, size_t num_wait,
    kiln_event *const *wait_list, kiln_event **out_event);

/* ---- gradient norm, clipping, non-finite check --------------------------- */

/* The norm and check ops take an array of num_ranges kiln_range, one per
 * parameter tensor's gradient, all of one dtype (f32, f16, bf16; a range of
 * another dtype than ranges[0]'s is KILN_ERR_SHAPE_MISMATCH): the same
 * ranges an allreduce takes. */

/* norm (one f32) = sqrt(sum over every element of every range of x^2), the
 * global L2 norm of torch.nn.utils.clip_grad_norm_. Squares are summed in
 * f32 per range in a fixed order and the ranges' sums added in array order;
 * an inf or NaN element makes the norm inf or NaN. num_ranges 0 (or every
 * count 0) writes 0. ranges may be NULL only when num_ranges is 0; at most
 * 65536 ranges ("num_ranges"). */
KILN_API kiln_status kiln_grad_norm(kiln_queue *queue, const kiln_range *ranges,
                                    size_t num_ranges, const kiln_range *norm,
                                    size_t num_wait,
                                    kiln_event *const *wait_list,
                                    kiln_event **out_event);

/* Scale every range in place by max_norm / (norm + 1e-6) when that is below
 * 1 (torch.nn.utils.clip_grad_norm_), norm being the one f32 kiln_grad_norm
 * wrote (read on the device: no round trip). A non-finite norm leaves the
 * ranges unchanged. max_norm finite and > 0. The ranges (read and written:
 * the outputs, after the input norm) must not overlap each other or the
 * norm. */
KILN_API kiln_status kiln_clip_grad_norm(
    kiln_queue *queue, const kiln_range *norm, const kiln_range *ranges,
    size_t num_ranges, float max_norm, size_t num_wait,
    kiln_event *const *wait_list, kiln_event **out_event);

/* flag (one u32) = 1 when any element of any range is inf or NaN, else 0:
 * the overflow check of dynamic loss scaling, and the skip flag of the
 * optimizer steps. Limits as for kiln_grad_norm. */
KILN_API kiln_status kiln_has_nonfinite(kiln_queue *queue,
                                        const kiln_range *ranges,
                                        size_t num_ranges,
                                        const kiln_range *flag, size_t num_wait,
                                        kiln_event *const *wait_list,
                                        kiln_event **out_event);

KILN_END_DECLS

#endif
