/* The op library: elementwise maps, casts, reductions, scans, row-wise
 * softmax and layernorm (this section), transpose and GEMM (the section at the
 * end), tuned per device from its backend profile.
 *
 * Conventions shared by every op:
 * - Every op is asynchronous: it enqueues work on queue and returns. The
 *   queue comes first; `num_wait, wait_list, out_event` come last, with the
 *   meaning they have everywhere in kiln (events of the queue's context; the
 *   out event, when out_event is non-NULL, completes when the op's last
 *   command has; release it with kiln_event_release).
 * - The element type is an argument, `kiln_dtype dtype`, never part of the
 *   function name: `kiln_unary(q, KILN_UNARY_EXP, KILN_F16, n, x, 0, y, 0,
 *   0, NULL, NULL)`. Each op lists the dtypes it accepts.
 * - Buffers are given as (buffer, offset) pairs; offsets, counts, rows and
 *   columns are in elements of the dtype, not bytes. Matrices are row-major
 *   and contiguous (row r starts at offset + r * cols).
 * - f16 and bf16 are storage formats: elements are loaded into f32, computed
 *   in f32 and rounded to nearest even when stored, so they work on devices
 *   without cl_khr_fp16. Reductions accumulate in f32 and write f32 results.
 * - An element count of 0 (or 0 rows or columns) is a valid no-op: nothing
 *   runs, but the out event still completes once the wait list has.
 * - Input and output ranges may be the same range (in place) where an op says
 *   so; otherwise they must not overlap.
 * - Errors: KILN_ERR_NULL_POINTER (NULL queue or buffer), KILN_ERR_SHAPE_MISMATCH
 *   (a buffer or event of another context), KILN_ERR_OUT_OF_RANGE (offset +
 *   count beyond the buffer), KILN_ERR_INVALID_SIZE (offset + count
 *   overflowing size_t), KILN_ERR_INVALID_ARGUMENT (unknown op, dtype not
 *   allowed for the op, bad scalar), KILN_ERR_BUILD_FAILED or KILN_ERR_OPENCL
 *   from the device. The last error names the offending argument ("x",
 *   "y_offset", "dtype"). On an argument error nothing is enqueued and
 *   *out_event is unchanged. When a later step fails (building the op's
 *   kernels, an enqueue), *out_event is unchanged too, commands already
 *   enqueued for the op still run, and the op's output is undefined.
 * - Thread-safety: as for any enqueue, a queue is used by one thread at a
 *   time; different queues of one context may run ops concurrently.
 * - Workspace: ops that need scratch space for partial results keep one
 *   device buffer per queue, allocated at first use and replaced by a larger
 *   one only when an op needs more (never per call); it is freed with the
 *   queue. Reductions use 8 bytes per partial result (a few thousand at
 *   most for vectors: 4 x compute units x reduce_wg), scans 4 bytes per
 *   chunk (n / 2048 bytes at the CPU default), softmax and layernorm none.
 *   Ops on one queue run in order, so sharing it is safe. The allocation is
 *   rounded up to 64 KiB.
 * - Determinism: reductions and scans partition the work by a fixed rule that
 *   depends only on the device's profile and the sizes, and combine partial
 *   results in a fixed order with no floating-point atomics, so running an op
 *   twice on the same device and sizes gives the same bits.
 * - Tracing: with KILN_TRACE=path.json in the environment (read once per
 *   process, at the first op), every op that runs appends one Chrome
 *   trace-event "complete" event ("ph":"X"; Perfetto and chrome://tracing
 *   open the file) once its last command has completed: "name" the op
 *   ("reduce.sum"), "ts"/"dur" in microseconds from the queue's profiling
 *   timestamps (kiln queues record them when KILN_TRACE is set), "tid" one
 *   lane per queue, and "args" {device, op, dtype, shape, bytes, flops,
 *   gbps, gflops, timing, status}. Zero-size ops are not traced. The file is
 *   truncated at the first event and is a complete JSON array after every
 *   event, so an interrupted program leaves a readable trace. One process
 *   per file. Tracing failures (an unwritable path) never fail an op.
 */
#ifndef KILN_OPS_H
#define KILN_OPS_H

#if !defined(KILN_H_INSIDE) && !defined(KILN_COMPILATION)
#error "Only <kiln/kiln.h> can be included directly."
#endif

#include "kiln/kiln_common.h"
#include "kiln/kiln_dtype.h"
#include "kiln/kiln_tensor.h"

KILN_BEGIN_DECLS

/* ---- elementwise (dtypes f32, f16, bf16) -------------------------------- */

typedef enum kiln_unary_op {
  KILN_UNARY_NEG = 0,     /* -x */
  KILN_UNARY_ABS = 1,     /* |x| */
  KILN_UNARY_EXP = 2,     /* e^x */
  KILN_UNARY_LOG = 3,     /* natural logarithm; log(0) = -inf, log(<0) = NaN */
  KILN_UNARY_SQRT = 4,    /* square root; sqrt(<0) = NaN */
  KILN_UNARY_RELU = 5,    /* max(x, 0); NaN stays NaN */
  /* 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), the tanh form */
  KILN_UNARY_GELU = 6,
  KILN_UNARY_SIGMOID = 7, /* 1 / (1 + e^-x), without overflow for large |x| */
  KILN_UNARY_TANH = 8,
} kiln_unary_op;

typedef enum kiln_binary_op {
  KILN_BINARY_ADD = 0,
  KILN_BINARY_SUB = 1, /* a - b */
  KILN_BINARY_MUL = 2,
  KILN_BINARY_DIV = 3, /* a / b, IEEE (correctly rounded in f32 on devices
                          that round division correctly; within 2.5 ulp, as
                          OpenCL allows, elsewhere) */
  KILN_BINARY_MAX = 4, /* fmax: a NaN operand yields the other operand */
  KILN_BINARY_MIN = 5, /* fmin: likewise */
} kiln_binary_op;

/* y[i] = op(x[i]) for i < n. x and y may be the same range (in place). */
KILN_API kiln_status kiln_unary(kiln_queue *queue, kiln_unary_op op,
                                kiln_dtype dtype, size_t n,
                                const kiln_buffer *x, size_t x_offset,
                                kiln_buffer *y, size_t y_offset,
                                size_t num_wait, kiln_event *const *wait_list,
                                kiln_event **out_event);

/* y[i] = a[i] op b[i]. y may be the same range as a or b. */
KILN_API kiln_status kiln_binary(kiln_queue *queue, kiln_binary_op op,
                                 kiln_dtype dtype, size_t n,
                                 const kiln_buffer *a, size_t a_offset,
                                 const kiln_buffer *b, size_t b_offset,
                                 kiln_buffer *y, size_t y_offset,
                                 size_t num_wait, kiln_event *const *wait_list,
                                 kiln_event **out_event);

/* y[i] = a[i] op s, the scalar operand on the right. y may be the same
 * range as a. */
KILN_API kiln_status kiln_binary_scalar(kiln_queue *queue, kiln_binary_op op,
                                        kiln_dtype dtype, size_t n,
                                        const kiln_buffer *a, size_t a_offset,
                                        float s, kiln_buffer *y,
                                        size_t y_offset, size_t num_wait,
                                        kiln_event *const *wait_list,
                                        kiln_event **out_event);

/* y[i] = alpha * x[i] + y[i] (BLAS axpy; computed as fma(alpha, x, y) in
 * f32). x and y must not overlap. */
KILN_API kiln_status kiln_axpy(kiln_queue *queue, kiln_dtype dtype, size_t n,
                               float alpha, const kiln_buffer *x,
                               size_t x_offset, kiln_buffer *y,
                               size_t y_offset, size_t num_wait,
                               kiln_event *const *wait_list,
                               kiln_event **out_event);

/* x[i] = alpha * x[i], in place (BLAS scal). */
KILN_API kiln_status kiln_scale(kiln_queue *queue, kiln_dtype dtype, size_t n,
                                float alpha, kiln_buffer *x, size_t x_offset,
                                size_t num_wait, kiln_event *const *wait_list,
                                kiln_event **out_event);

/* y[i] = value for i < n. dtypes f32, f16, bf16 (value rounded to nearest
 * even), i32 and u32 (value must then be an integer in the type's range,
 * else KILN_ERR_INVALID_ARGUMENT). */
KILN_API kiln_status kiln_fill(kiln_queue *queue, kiln_dtype dtype, size_t n,
                               double value, kiln_buffer *y, size_t y_offset,
                               size_t num_wait, kiln_event *const *wait_list,
                               kiln_event **out_event);

/* y[i] = x[i] converted from x_dtype to y_dtype, both among f32, f16, bf16.
 * Widening is exact. Narrowing rounds to nearest even; values beyond the
 * range of f16 become +-inf; f16 subnormals are kept; a NaN stays a quiet
 * NaN, of unpromised sign and payload: kiln's conversions work on the bits
 * and keep the sign, but OpenCL promises no NaN bits through float values,
 * so a device may give another quiet NaN. Every other value gives the same
 * bits on every device. Equal dtypes copy the bits exactly, NaN included.
 * x and y must not overlap unless they are the same range with equal
 * dtypes. */
KILN_API kiln_status kiln_cast(kiln_queue *queue, size_t n, kiln_dtype x_dtype,
                               const kiln_buffer *x, size_t x_offset,
                               kiln_dtype y_dtype, kiln_buffer *y,
                               size_t y_offset, size_t num_wait,
                               kiln_event *const *wait_list,
                               kiln_event **out_event);

/* ---- reductions (input dtypes f32, f16, bf16) --------------------------- */

typedef enum kiln_reduce_op {
  KILN_REDUCE_SUM = 0,
  KILN_REDUCE_MIN = 1,  /* NaN elements are ignored (fmin); all NaN -> NaN */
  KILN_REDUCE_MAX = 2,  /* likewise */
  KILN_REDUCE_MEAN = 3, /* sum / count */
  /* sqrt(sum x^2), scaled so it neither overflows nor underflows where the
   * result is representable (like BLAS snrm2). */
  KILN_REDUCE_NRM2 = 4,
  /* Index (uint32) of the first maximum; NaN elements are ignored, and all
   * NaN gives 0. The result is written as KILN_U32, not f32. */
  KILN_REDUCE_ARGMAX = 5,
} kiln_reduce_op;

/* result[result_offset] = op(x[x_offset .. x_offset + n)), an f32 (a u32
 * index for ARGMAX). For n = 0 nothing is written. ARGMAX requires n <=
 * UINT32_MAX. */
KILN_API kiln_status kiln_reduce(kiln_queue *queue, kiln_reduce_op op,
                                 kiln_dtype dtype, size_t n,
                                 const kiln_buffer *x, size_t x_offset,
                                 kiln_buffer *result, size_t result_offset,
                                 size_t num_wait, kiln_event *const *wait_list,
                                 kiln_event **out_event);

/* result[result_offset] = sum x[i] * y[i] in f32, as an f32. */
KILN_API kiln_status kiln_dot(kiln_queue *queue, kiln_dtype dtype, size_t n,
                              const kiln_buffer *x, size_t x_offset,
                              const kiln_buffer *y, size_t y_offset,
                              kiln_buffer *result, size_t result_offset,
                              size_t num_wait, kiln_event *const *wait_list,
                              kiln_event **out_event);

/* Reduce each row of the rows x cols matrix x: result[result_offset + r] =
 * op(row r), for r < rows (f32, or u32 column indexes for ARGMAX). cols = 0
 * with rows > 0 is refused (the reduction of nothing is undefined for
 * min/max/argmax). */
KILN_API kiln_status kiln_reduce_rows(kiln_queue *queue, kiln_reduce_op op,
                                      kiln_dtype dtype, size_t rows,
                                      size_t cols, const kiln_buffer *x,
                                      size_t x_offset, kiln_buffer *result,
                                      size_t result_offset, size_t num_wait,
                                      kiln_event *const *wait_list,
                                      kiln_event **out_event);

/* Reduce each column: result[result_offset + c] = op(column c), c < cols
 * (u32 row indexes for ARGMAX). rows = 0 with cols > 0 is refused. */
KILN_API kiln_status kiln_reduce_cols(kiln_queue *queue, kiln_reduce_op op,
                                      kiln_dtype dtype, size_t rows,
                                      size_t cols, const kiln_buffer *x,
                                      size_t x_offset, kiln_buffer *result,
                                      size_t result_offset, size_t num_wait,
                                      kiln_event *const *wait_list,
                                      kiln_event **out_event);

/* ---- scan (dtypes f32, i32, u32) ---------------------------------------- */

typedef enum kiln_scan_kind {
  KILN_SCAN_INCLUSIVE = 0, /* y[i] = x[0] + ... + x[i] */
  KILN_SCAN_EXCLUSIVE = 1, /* y[i] = x[0] + ... + x[i-1], y[0] = 0 */
} kiln_scan_kind;

/* Prefix sums. Integer sums wrap modulo 2^32; f32 sums are computed per
 * chunk, then across chunks, so rounding differs from a sequential loop
 * (within n * eps * sum |x|) but is deterministic. x and y may be the same
 * range (in place). */
KILN_API kiln_status kiln_scan(kiln_queue *queue, kiln_scan_kind kind,
                               kiln_dtype dtype, size_t n,
                               const kiln_buffer *x, size_t x_offset,
                               kiln_buffer *y, size_t y_offset,
                               size_t num_wait, kiln_event *const *wait_list,
                               kiln_event **out_event);

/* ---- row ops (dtypes f32, f16, bf16) ------------------------------------ */

/* y[r][c] = exp(x[r][c] - max_r) / sum_c exp(x[r][c] - max_r) for each row,
 * stable for any finite input. x and y may be the same range. */
KILN_API kiln_status kiln_softmax_rows(kiln_queue *queue, kiln_dtype dtype,
                                       size_t rows, size_t cols,
                                       const kiln_buffer *x, size_t x_offset,
                                       kiln_buffer *y, size_t y_offset,
                                       size_t num_wait,
                                       kiln_event *const *wait_list,
                                       kiln_event **out_event);

/* Layer normalisation of each row: y = (x - mean) / sqrt(var + eps) * scale
 * + bias, with the biased variance of the row computed in two passes.
 * scale and bias are vectors of cols elements of dtype, each optional (NULL
 * means 1 and 0; their offsets are then ignored). eps must be finite and
 * >= 0. x and y may be the same range. */
KILN_API kiln_status kiln_layernorm_rows(kiln_queue *queue, kiln_dtype dtype,
                                         size_t rows, size_t cols,
                                         const kiln_buffer *x, size_t x_offset,
                                         const kiln_buffer *scale,
                                         size_t scale_offset,
                                         const kiln_buffer *bias,
                                         size_t bias_offset, float eps,
                                         kiln_buffer *y, size_t y_offset,
                                         size_t num_wait,
                                         kiln_event *const *wait_list,
                                         kiln_event **out_event);

/* ---- transpose (dtypes f32, f16, bf16, i32, u32) ------------------------ */

/* y = x^T: x is a rows x cols row-major matrix whose row r starts at element
 * x_offset + r * ldx (ldx >= cols); y is cols x rows, row c starting at
 * y_offset + c * ldy (ldy >= rows). Elements are moved bit for bit. x and y
 * must not overlap. rows or cols 0 is a no-op. Errors as for every op, plus
 * KILN_ERR_INVALID_ARGUMENT when ldx < cols or ldy < rows ("ldx"), and
 * KILN_ERR_INVALID_SIZE when rows or cols exceeds UINT32_MAX. */
KILN_API kiln_status kiln_transpose(kiln_queue *queue, kiln_dtype dtype,
                                    size_t rows, size_t cols,
                                    const kiln_buffer *x, size_t x_offset,
                                    size_t ldx, kiln_buffer *y,
                                    size_t y_offset, size_t ldy,
                                    size_t num_wait,
                                    kiln_event *const *wait_list,
                                    kiln_event **out_event);

/* ---- GEMM (A and B f32, f16 or bf16; C f32) ----------------------------- */

/* C = alpha * op(A) * op(B) + beta * C, with op(A) m x k, op(B) k x n and C
 * m x n, all in one layout (BLAS sgemm with CBLAS's layout argument).
 *
 * - ab_dtype is the element type of A and B: f32, or f16/bf16 as storage,
 *   converted to f32 on load. C is always f32 and every product is
 *   accumulated in f32 with fused multiply-adds.
 * - A as stored is m x k (k x m when trans_a is KILN_TRANS) in layout, with
 *   leading dimension lda: at least the stored row length (row-major) or
 *   column length (column-major), and at least 1. Likewise B (k x n, or
 *   n x k transposed) with ldb and C (m x n) with ldc. Offsets and leading
 *   dimensions count elements.
 * - beta == 0 never reads C (NaNs or garbage in C do not leak into the
 *   result). alpha == 0 or k == 0 reads neither A nor B and makes
 *   C = beta * C. m or n 0 is a no-op.
 * - C must not overlap A or B.
 * - Workspace: on CPU devices (profiles of the CPU family) A and B are first
 *   packed as f32 into the queue's op workspace (see the conventions above),
 *   which grows to (round_up(m, MR) + round_up(n, NR)) * k * 4 bytes per
 *   batch entry for the largest GEMM run on the queue, MR and NR being the
 *   profile's register tile, and at most 64 MiB: larger problems are packed
 *   and multiplied in chunks of k and of the batch. A GEMM with few rows
 *   or columns (min(m, n) at most k / 8 clamped to 8..64) skips the packing
 *   and the workspace: it reads A and B in place (a matrix-vector product
 *   reads B once). GPU-family profiles need no workspace.
 * - Errors as for every op, plus KILN_ERR_INVALID_ARGUMENT for an unknown
 *   layout or trans value or a leading dimension below its minimum (the
 *   message names "lda", "ldb" or "ldc"), KILN_ERR_INVALID_SIZE when m, n or
 *   k exceeds INT32_MAX, and KILN_ERR_OUT_OF_RANGE when a matrix does not fit
 *   in its buffer from its offset. */
KILN_API kiln_status kiln_gemm(kiln_queue *queue, kiln_layout layout,
                               kiln_trans trans_a, kiln_trans trans_b,
                               size_t m, size_t n, size_t k, float alpha,
                               kiln_dtype ab_dtype, const kiln_buffer *a,
                               size_t a_offset, size_t lda,
                               const kiln_buffer *b, size_t b_offset,
                               size_t ldb, float beta, kiln_buffer *c,
                               size_t c_offset, size_t ldc, size_t num_wait,
                               kiln_event *const *wait_list,
                               kiln_event **out_event);

/* Activation applied by kiln_gemm_bias_act's epilogue. Values are stable. */
typedef enum kiln_gemm_activation {
  KILN_GEMM_ACT_NONE = 0,
  KILN_GEMM_ACT_RELU = 1, /* max(x, 0) */
  KILN_GEMM_ACT_GELU = 2, /* the tanh form, exactly as KILN_UNARY_GELU */
} kiln_gemm_activation;

/* C = act(alpha * op(A) * op(B) + beta * C + bias): kiln_gemm with a fused
 * epilogue, so a dense layer is one launch. bias is an f32 vector of n
 * elements at bias_offset (one per column of C, broadcast over the m rows),
 * or NULL for none. All other arguments, rules and errors as kiln_gemm.
 * Errors besides kiln_gemm's: KILN_ERR_INVALID_ARGUMENT for an act outside
 * kiln_gemm_activation or a bias overlapping C, KILN_ERR_OUT_OF_RANGE when
 * the n bias elements do not fit in bias from bias_offset. When k or alpha
 * is 0, C = act(beta * C + bias). */
KILN_API kiln_status kiln_gemm_bias_act(
    kiln_queue *queue, kiln_layout layout, kiln_trans trans_a,
    kiln_trans trans_b, size_t m, size_t n, size_t k, float alpha,
    kiln_dtype ab_dtype, const kiln_buffer *a, size_t a_offset, size_t lda,
    const kiln_buffer *b, size_t b_offset, size_t ldb, float beta,
    kiln_buffer *c, size_t c_offset, size_t ldc, const kiln_buffer *bias,
    size_t bias_offset, kiln_gemm_activation act, size_t num_wait,
    kiln_event *const *wait_list, kiln_event **out_event);

/* Strided batched GEMM: for i < batch, C_i = alpha * op(A_i) * op(B_i) +
 * beta * C_i, where A_i starts at a_offset + i * stride_a (likewise B_i and
 * C_i), all other arguments as for kiln_gemm. stride_a or stride_b may be 0
 * (one A or B shared by every entry); the C_i must not overlap, so
 * stride_c must be at least the extent of one C when batch > 1. batch 0 is
 * a no-op. */
KILN_API kiln_status kiln_gemm_batched(
    kiln_queue *queue, kiln_layout layout, kiln_trans trans_a,
    kiln_trans trans_b, size_t m, size_t n, size_t k, float alpha,
    kiln_dtype ab_dtype, const kiln_buffer *a, size_t a_offset, size_t lda,
    size_t stride_a, const kiln_buffer *b, size_t b_offset, size_t ldb,
    size_t stride_b, float beta, kiln_buffer *c, size_t c_offset, size_t ldc,
    size_t stride_c, size_t batch, size_t num_wait,
    kiln_event *const *wait_list, kiln_event **out_event);

KILN_END_DECLS

#endif
