/* The op library: elementwise maps, casts, reductions, scans, row-wise
 * softmax and layernorm, transpose and GEMM (kiln_matmul), tuned per device
 * from its backend profile.
 *
 * Conventions shared by every op (docs/conventions.md states them for all of
 * kiln):
 * - Every op is asynchronous: it enqueues work on queue and returns. The
 *   arguments come in one order: queue, the op's kind, sizes the descriptors
 *   lack (kiln_matmul's batch), inputs, outputs, scalars, options, then
 *   `num_wait, wait_list, out_event`, with the meaning they have everywhere
 *   in kiln (events of the queue's context; the out event, when out_event
 *   is non-NULL, completes when the op's last command has; release it with
 *   kiln_event_release).
 * - Operands are descriptors (kiln/kiln_tensor.h): a `const kiln_range *`
 *   for vectors, a `const kiln_matrix *` for matrices. The element type and
 *   the extent come from them, never from separate arguments:
 *
 *     kiln_range x = {xbuf, 0, n, KILN_F16}, y = {ybuf, 0, n, KILN_F16};
 *     kiln_unary(q, KILN_UNARY_EXP, &x, &y, 0, NULL, NULL);
 *
 *   Each op lists the dtypes it accepts. Operands that must agree (the
 *   counts of an elementwise op's inputs and output, their dtypes, a
 *   matrix's rows and its result's count) are checked: a disagreement is
 *   KILN_ERR_SHAPE_MISMATCH, and the message names both operands.
 * - Offsets, counts, rows, columns and leading dimensions are in elements of
 *   the descriptor's dtype, not bytes.
 * - Row ops (kiln_reduce_rows, kiln_reduce_cols, kiln_softmax_rows,
 *   kiln_layernorm_rows) take one row-major matrix with contiguous rows: a
 *   kiln_matrix with layout KILN_ROW_MAJOR, trans KILN_NO_TRANS, ld 0 or
 *   cols and batch_stride 0. Any other descriptor is refused with
 *   KILN_ERR_INVALID_ARGUMENT naming the field (transpose first, or copy
 *   the rows together). kiln_transpose takes any ld; kiln_matmul takes every
 *   field but a transposed C.
 * - f16 and bf16 are storage formats: elements are loaded into f32, computed
 *   in f32 and rounded to nearest even when stored, so they work on devices
 *   without cl_khr_fp16. Reductions accumulate in f32 and write f32 results.
 * - An element count of 0 (or 0 rows or columns) is a valid no-op: nothing
 *   runs, but the out event still completes once the wait list has.
 * - Input and output ranges may be the same range (in place) where an op says
 *   so; otherwise they must not overlap.
 * - Errors: KILN_ERR_NULL_POINTER (NULL queue, descriptor or buffer),
 *   KILN_ERR_WRONG_CONTEXT (a buffer or event of another context),
 *   KILN_ERR_SHAPE_MISMATCH (operands that disagree), KILN_ERR_OUT_OF_RANGE
 *   (offset + count beyond the buffer), KILN_ERR_INVALID_SIZE (offset +
 *   count overflowing size_t), KILN_ERR_INVALID_ARGUMENT (unknown op, dtype
 *   not allowed for the op, bad scalar, a descriptor field the op does not
 *   take), KILN_ERR_BUILD_FAILED or KILN_ERR_OPENCL from the device. The
 *   last error names the offending operand or field ("x", "y_offset",
 *   "x.ld", "dtype"). On an argument error nothing is enqueued and
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

/* y[i] = op(x[i]) for i < x->count. x and y have one count and one dtype;
 * they may be the same range (in place). */
KILN_API kiln_status kiln_unary(kiln_queue *queue, kiln_unary_op op,
                                const kiln_range *x, const kiln_range *y,
                                size_t num_wait, kiln_event *const *wait_list,
                                kiln_event **out_event);

/* y[i] = a[i] op b[i]; a, b and y have one count and one dtype. y may be the
 * same range as a or b. */
KILN_API kiln_status kiln_binary(kiln_queue *queue, kiln_binary_op op,
                                 const kiln_range *a, const kiln_range *b,
                                 const kiln_range *y, size_t num_wait,
                                 kiln_event *const *wait_list,
                                 kiln_event **out_event);

/* y[i] = a[i] op s, the scalar operand on the right. y may be the same
 * range as a. */
KILN_API kiln_status kiln_binary_scalar(kiln_queue *queue, kiln_binary_op op,
                                        const kiln_range *a,
                                        const kiln_range *y, float s,
                                        size_t num_wait,
                                        kiln_event *const *wait_list,
                                        kiln_event **out_event);

/* y[i] = alpha * x[i] + y[i] (BLAS axpy; computed as fma(alpha, x, y) in
 * f32). x and y must not overlap. */
KILN_API kiln_status kiln_axpy(kiln_queue *queue, const kiln_range *x,
                               const kiln_range *y, float alpha,
                               size_t num_wait, kiln_event *const *wait_list,
                               kiln_event **out_event);

/* x[i] = alpha * x[i], in place (BLAS scal). */
KILN_API kiln_status kiln_scale(kiln_queue *queue, const kiln_range *x,
                                float alpha, size_t num_wait,
                                kiln_event *const *wait_list,
                                kiln_event **out_event);

/* y[i] = *value for i < y->count. value points at one element of y's dtype
 * (a float for f32, the uint16_t bits of an f16 or bf16, an int32_t, a
 * uint32_t), copied bit for bit as clEnqueueFillBuffer copies its pattern: every value of every
 * dtype, NaN payloads and signed zeros included, fills exactly, and no
 * rounding rule is needed (a float or double argument would round f16 and
 * bf16 and could not carry every bit pattern of a wider future dtype).
 * dtypes f32, f16, bf16, i32, u32. */
KILN_API kiln_status kiln_fill(kiln_queue *queue, const kiln_range *y,
                               const void *value, size_t num_wait,
                               kiln_event *const *wait_list,
                               kiln_event **out_event);

/* y[i] = x[i] converted from x's dtype to y's, both among f32, f16, bf16;
 * x and y have one count. Widening is exact. Narrowing rounds to nearest
 * even; values beyond the range of f16 become +-inf; f16 subnormals are
 * kept; a NaN stays a quiet NaN, of unpromised sign and payload: kiln's
 * conversions work on the bits and keep the sign, but OpenCL promises no
 * NaN bits through float values, so a device may give another quiet NaN.
 * Every other value gives the same bits on every device. Equal dtypes copy
 * the bits exactly, NaN included. x and y must not overlap unless they are
 * the same range with equal dtypes. */
KILN_API kiln_status kiln_cast(kiln_queue *queue, const kiln_range *x,
                               const kiln_range *y, size_t num_wait,
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

/* result[0] = op(x), an f32 (a u32 index for ARGMAX): result is a range of
 * one element of that dtype. For an empty x nothing is written. ARGMAX
 * requires x->count <= UINT32_MAX. */
KILN_API kiln_status kiln_reduce(kiln_queue *queue, kiln_reduce_op op,
                                 const kiln_range *x,
                                 const kiln_range *result, size_t num_wait,
                                 kiln_event *const *wait_list,
                                 kiln_event **out_event);

/* result[0] = sum x[i] * y[i] in f32, as an f32; x and y have one count and
 * one dtype, result is one f32. */
KILN_API kiln_status kiln_dot(kiln_queue *queue, const kiln_range *x,
                              const kiln_range *y, const kiln_range *result,
                              size_t num_wait, kiln_event *const *wait_list,
                              kiln_event **out_event);

/* Reduce each row of the matrix x (a row op: see above): result[r] =
 * op(row r), for r < x->rows; result is a range of x->rows f32 (u32 column
 * indexes for ARGMAX). cols = 0 with rows > 0 is refused (the reduction of
 * nothing is undefined for min/max/argmax). */
KILN_API kiln_status kiln_reduce_rows(kiln_queue *queue, kiln_reduce_op op,
                                      const kiln_matrix *x,
                                      const kiln_range *result,
                                      size_t num_wait,
                                      kiln_event *const *wait_list,
                                      kiln_event **out_event);

/* Reduce each column: result[c] = op(column c), c < x->cols; result holds
 * x->cols f32 (u32 row indexes for ARGMAX). rows = 0 with cols > 0 is
 * refused. */
KILN_API kiln_status kiln_reduce_cols(kiln_queue *queue, kiln_reduce_op op,
                                      const kiln_matrix *x,
                                      const kiln_range *result,
                                      size_t num_wait,
                                      kiln_event *const *wait_list,
                                      kiln_event **out_event);

/* ---- scan (dtypes f32, i32, u32) ---------------------------------------- */

typedef enum kiln_scan_kind {
  KILN_SCAN_INCLUSIVE = 0, /* y[i] = x[0] + ... + x[i] */
  KILN_SCAN_EXCLUSIVE = 1, /* y[i] = x[0] + ... + x[i-1], y[0] = 0 */
} kiln_scan_kind;

/* Prefix sums; x and y have one count and one dtype. Integer sums wrap
 * modulo 2^32; f32 sums are computed per chunk, then across chunks, so
 * rounding differs from a sequential loop (within n * eps * sum |x|) but is
 * deterministic. x and y may be the same range (in place). */
KILN_API kiln_status kiln_scan(kiln_queue *queue, kiln_scan_kind kind,
                               const kiln_range *x, const kiln_range *y,
                               size_t num_wait, kiln_event *const *wait_list,
                               kiln_event **out_event);

/* ---- row ops (dtypes f32, f16, bf16) ------------------------------------ */

/* y[r][c] = exp(x[r][c] - max_r) / sum_c exp(x[r][c] - max_r) for each row,
 * stable for any finite input. x and y are row-op matrices (see above) of
 * one shape and dtype, and may be the same matrix. */
KILN_API kiln_status kiln_softmax_rows(kiln_queue *queue,
                                       const kiln_matrix *x,
                                       const kiln_matrix *y, size_t num_wait,
                                       kiln_event *const *wait_list,
                                       kiln_event **out_event);

/* Layer normalisation of each row: y = (x - mean) / sqrt(var + eps) * scale
 * + bias, with the biased variance of the row computed in two passes. x
 * and y are row-op matrices of one shape and dtype (they may be the same
 * matrix); scale and bias are ranges of x->cols elements of that dtype,
 * each optional (NULL means 1 and 0). eps must be finite and >= 0. */
KILN_API kiln_status kiln_layernorm_rows(
    kiln_queue *queue, const kiln_matrix *x, const kiln_range *scale,
    const kiln_range *bias, const kiln_matrix *y, float eps, size_t num_wait,
    kiln_event *const *wait_list, kiln_event **out_event);

/* ---- transpose (dtypes f32, f16, bf16, i32, u32) ------------------------ */

/* y = x^T: x is rows x cols with leading dimension x->ld (0: packed), y is
 * cols x rows with y->ld, both of one dtype and one layout (row-major, or
 * both column-major, which moves the same elements), trans KILN_NO_TRANS
 * and batch_stride 0. Elements are moved bit for bit. x and y must not
 * overlap. rows or cols 0 is a no-op. Errors as for every op, plus
 * KILN_ERR_INVALID_ARGUMENT for an ld below the row length ("x.ld") or
 * layouts that differ, KILN_ERR_SHAPE_MISMATCH when y is not x's shape
 * transposed, and KILN_ERR_INVALID_SIZE when rows or cols exceeds
 * UINT32_MAX. */
KILN_API kiln_status kiln_transpose(kiln_queue *queue, const kiln_matrix *x,
                                    const kiln_matrix *y, size_t num_wait,
                                    kiln_event *const *wait_list,
                                    kiln_event **out_event);

/* ---- GEMM (A and B f32, f16 or bf16; C f32) ----------------------------- */

/* The activation of a GEMM epilogue (and of any later fused op): none, or
 * one of the unary ops, with kiln_unary_op's value, so the same name means
 * the same number everywhere (docs/conventions.md, one enum per concept).
 * Values are stable. */
typedef enum kiln_activation {
  KILN_ACT_NONE = 0,
  KILN_ACT_RELU = KILN_UNARY_RELU, /* max(x, 0), exactly as kiln_unary */
  KILN_ACT_GELU = KILN_UNARY_GELU, /* the tanh form, exactly as kiln_unary */
} kiln_activation;

/* What kiln_matmul does with the product: C = activation(alpha * op(A) *
 * op(B) + beta * C + bias). bias is NULL (none) or a range of n f32, one
 * per column of C, broadcast over the m rows; it must not overlap C.
 * alpha is used as given, so a zero-initialised epilogue has alpha 0:
 * start from KILN_EPILOGUE_INIT. */
typedef struct kiln_epilogue {
  float alpha;
  float beta;
  const kiln_range *bias;
  kiln_activation activation;
} kiln_epilogue;

/* alpha 1, beta 0, no bias, no activation: what a NULL epilogue means. */
#define KILN_EPILOGUE_INIT {1.0f, 0.0f, NULL, KILN_ACT_NONE}

/* For i < batch: C_i = act(alpha * op(A_i) * op(B_i) + beta * C_i + bias),
 * in the style of cuBLASLt's matmul. One entry point for plain, fused and
 * strided batched GEMM.
 *
 * - The descriptors say everything about an operand: A as stored is
 *   a->rows x a->cols in a->layout with leading dimension a->ld (0:
 *   packed); op(A) is A, or A^T when a->trans is KILN_TRANS. op(A) is m x
 *   k, op(B) k x n and C m x n (c->trans must be KILN_NO_TRANS); inner or
 *   outer sizes that disagree are KILN_ERR_SHAPE_MISMATCH naming both
 *   operands. Layouts may differ between operands: a column-major matrix
 *   is the row-major matrix of its transpose, so kiln rewrites A and B into
 *   C's layout (no copy).
 * - Entry i of a batch starts at offset + i * batch_stride (0: one matrix
 *   shared by every entry, allowed for A and B). The C_i must not overlap,
 *   so c->batch_stride must be at least the extent of one C when batch > 1.
 *   batch 0 is a no-op; batch at most UINT32_MAX.
 * - A and B share one dtype, f32, or f16/bf16 as storage, converted to f32
 *   on load. C is always f32 and every product is accumulated in f32 with
 *   fused multiply-adds.
 * - epilogue NULL means KILN_EPILOGUE_INIT. beta == 0 never reads C (NaNs
 *   or garbage in C do not leak into the result). alpha == 0 or k == 0
 *   reads neither A nor B and makes C = act(beta * C + bias). m or n 0 is a
 *   no-op.
 * - C must not overlap A or B.
 * - A or B may name a packed matrix (descriptor's packed set, see
 *   kiln_packed below): the same result, bit for bit, without repacking
 *   it at every call on the CPU family.
 * - Leading dimensions are at least the stored row length (row-major) or
 *   column length (column-major), and at least 1.
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
 *   layout, trans or activation, a leading dimension below its minimum (the
 *   message names "a.ld", "b.ld" or "c.ld"), a transposed C, a C or bias
 *   that is not f32, overlapping batch entries of C or a bias overlapping
 *   C; KILN_ERR_SHAPE_MISMATCH for sizes that disagree (op(A)'s columns and
 *   op(B)'s rows, C's shape, the bias's count) or A and B of different
 *   dtypes; KILN_ERR_INVALID_SIZE when
 *   m, n or k exceeds INT32_MAX; KILN_ERR_OUT_OF_RANGE when a matrix (every
 *   batch entry) or the bias does not fit in its buffer.
 *
 * From BLAS: cblas_sgemm(layout, ta, tb, M, N, K, alpha, A, lda, B, ldb,
 * beta, C, ldc) is
 *
 *   kiln_matrix a = {abuf, 0, ta ? K : M, ta ? M : K, lda, 0, KILN_F32,
 *                    layout, ta, NULL},
 *               b = {bbuf, 0, tb ? N : K, tb ? K : N, ldb, 0, KILN_F32,
 *                    layout, tb, NULL},
 *               c = {cbuf, 0, M, N, ldc, 0, KILN_F32, layout, KILN_NO_TRANS,
 *                    NULL};
 *   kiln_matmul(q, 1, &a, &b, &c, &(kiln_epilogue){alpha, beta, NULL,
 *               KILN_ACT_NONE}, 0, NULL, NULL);
 *
 * (rows and cols describe the matrix as stored). No BLAS-shaped wrapper is
 * offered: it would take 19 parameters, past the 12 that every kiln
 * function keeps to. */
KILN_API kiln_status kiln_matmul(kiln_queue *queue, size_t batch,
                                 const kiln_matrix *a, const kiln_matrix *b,
                                 const kiln_matrix *c,
                                 const kiln_epilogue *epilogue,
                                 size_t num_wait, kiln_event *const *wait_list,
                                 kiln_event **out_event);

/* ---- operands that stay packed ------------------------------------------ */

/* Which operand of kiln_matmul a packed matrix is for. */
typedef enum kiln_operand {
  KILN_OPERAND_A = 0, /* op(A), m x k */
  KILN_OPERAND_B = 1, /* op(B), k x n */
} kiln_operand;

/* A matrix kept in the layout kiln_matmul's kernels read, so that a
 * layer's weights are packed once and reused by every GEMM until they
 * change (as oneDNN's reorders and cuBLASLt's transforms allow).
 *
 *   kiln_packed *w;
 *   kiln_packed_create(ctx, KILN_OPERAND_B, &wdesc, &w);   allocate
 *   kiln_pack(q, &wdesc, w, 0, NULL, NULL);                copy wdesc's data in
 *   kiln_matrix b;
 *   kiln_packed_get_matrix(w, &b);                         b.packed == w
 *   kiln_matmul(q, 1, &x, &b, &y, &e, 0, NULL, NULL);      any number of times
 *   kiln_packed_destroy(w);
 *
 * What it holds: a plain copy of the matrix as stored (same dtype, layout
 * and trans, leading dimension packed), and on the CPU family (PoCL) also
 * op(X) as the f32 panels that gemm_cpu.cl's register tile reads (MR-row
 * panels of op(A), NR-column panels of op(B), the last padded with zeros:
 * round_up(m, MR) * k or round_up(n, NR) * k floats), which the unpacked
 * call packs into the queue's workspace at every call. Each kiln_matmul
 * takes the panels where the unpacked call would pack (a row-major C and
 * m and n above the switch point of kiln_matmul's workspace note), so it
 * packs only the other operand, or nothing; elsewhere (few rows or
 * columns, a column-major C) it reads the copy in place as the unpacked
 * call reads its source. Where the packed dimension (m of A, n of B) is
 * itself at most the switch point, no call would take panels and none are
 * made. The GPU family's kernels read operands in place through __local
 * tiles and repack nothing per call: no other layout would save work, so
 * the copy is all it holds.
 * Results: bit for bit those of the unpacked call on the same device (the
 * same kernels, the same order of sums).
 *
 * Use: a kiln_matrix whose packed is the object, with rows, cols, dtype,
 * layout and trans exactly those it was created with, buffer NULL and
 * offset, ld and batch_stride 0 (kiln_packed_get_matrix fills one in), as
 * kiln_matmul's A or B (the role it was created for), on a queue of its
 * context. It is shared by every batch entry. Anything else is refused:
 * another shape, dtype, layout or trans (KILN_ERR_SHAPE_MISMATCH), the
 * other role, or buffer, offset, ld or batch_stride set
 * (KILN_ERR_INVALID_ARGUMENT), a queue of another context
 * (KILN_ERR_WRONG_CONTEXT), a packed matrix never filled by kiln_pack
 * (KILN_ERR_INVALID_STATE); every other call's matrix operands refuse
 * packed descriptors (KILN_ERR_INVALID_ARGUMENT, "x.packed").
 *
 * Tuning: panels depend on the register tile's MR (A) or NR (B). When the
 * context's gemm_cpu variant changes them after the last kiln_pack
 * (kiln_tuning_set, a tuning file reloaded, a test override), kiln_matmul
 * refuses the packed matrix with KILN_ERR_INVALID_STATE naming both
 * tiles rather than fall back to packing at every call behind the
 * caller's back; the next kiln_pack repacks it for the new tile (new
 * panels replace the old). A change of KC, MB, NB or VW alone keeps it
 * valid.
 *
 * Threads: like a buffer, shared between threads and queues of its
 * context; kiln_pack writes it, so order kiln_pack before the GEMMs that
 * read it (events, or one in-order queue), as for any buffer. */

/* Allocate a packed matrix for src's shape (rows, cols, dtype f32, f16 or
 * bf16, layout and trans; src's buffer, offset and ld are not read, so the
 * descriptor later given to kiln_pack serves) as operand role on ctx's
 * device. rows and cols are at least 1 and at most INT32_MAX;
 * src->batch_stride must be 0 and src->packed NULL. */
KILN_API kiln_status kiln_packed_create(kiln_context *ctx, kiln_operand role,
                                        const kiln_matrix *src,
                                        kiln_packed **out);

/* Release packed (NULL does nothing). GEMMs already enqueued that read it
 * complete normally (OpenCL keeps their memory until they have).
 * KILN_ERR_BUSY, destroying nothing, while a recorded sequence
 * (kiln_sequence.h) that packs or reads it is alive. */
KILN_API kiln_status kiln_packed_destroy(kiln_packed *packed);

/* Pack src (a matrix in a buffer, of exactly the shape, dtype, layout and
 * trans that dst was created with; any ld and offset; batch_stride 0) into
 * dst, on queue, a queue of dst's context. May be called again whenever
 * src's data changes (a training step): dst keeps its memory. */
KILN_API kiln_status kiln_pack(kiln_queue *queue, const kiln_matrix *src,
                               kiln_packed *dst, size_t num_wait,
                               kiln_event *const *wait_list,
                               kiln_event **out_event);

/* The descriptor that names packed as a kiln_matmul operand: buffer NULL,
 * offset, ld and batch_stride 0, packed set, and the rows, cols, dtype,
 * layout and trans it was created with. */
KILN_API kiln_status kiln_packed_get_matrix(const kiln_packed *packed,
                                            kiln_matrix *out);

KILN_END_DECLS

#endif
