/* Attention ops: multi-head scaled dot-product self-attention, forward and
 * backward, fused in the style of FlashAttention (Dao et al., 2022: tiles
 * of queries against tiles of keys and values with an online softmax, so no
 * T x T matrix is ever stored), and the key/value cache of generation.
 *
 * Layout. The operands are what a GPT-2 block has in hand, so it feeds them
 * without copies: the fused projection qkv of llm.c, a batch of `batch`
 * matrices of T rows (positions) by 3C columns, Q in columns [0, C), K in
 * [C, 2C) and V in [2C, 3C), each split into `heads` heads of hs = C /
 * heads consecutive columns (head h: columns h hs to (h + 1) hs - 1 of each
 * third); the output out is T x C per batch entry with the heads in the
 * same columns, ready for the projection GEMM. Every matrix is row-major
 * and not transposed, with any leading dimension ld (0: packed) and a
 * batch_stride between batch entries (0 only for an input shared by every
 * entry, or when batch is 1), so llm.c's packed (B, T, 3C) buffer is
 * {.rows = T, .cols = 3C, .batch_stride = T * 3C} and a view of a larger
 * buffer works too. The softmax statistics lse are f32, batch x heads x T
 * (entry (b, h, t) at offset + (b heads + h) T + t): lse = m + log(sum_j
 * exp(s_j - m)) of row t's scores s, which is all the backward pass needs
 * to rebuild any probability.
 *
 * Arithmetic. Scores s_j = scale q . k_j, probabilities exp(s_j - lse); the
 * defaults are scale = 1 / sqrt(hs) and a causal mask (position t attends
 * to positions 0..t). qkv, out and their gradients share one dtype, f32,
 * f16 or bf16 (storage; all arithmetic in f32, results rounded to nearest
 * even once); lse is f32. hs is at most 128. Both kernel families: the GPU
 * family stages tiles of K and V (of Q and dO in the backward pass) in
 * local memory for a work-group of query (key) rows; the CPU family gives
 * a work-item 16 rows, one per vector lane, and reads the other operand
 * straight from its caches, no barriers.
 * Sums run in a fixed order: the same bits on every run on one device. The
 * conventions of docs/conventions.md hold: asynchronous on the queue,
 * argument errors leave nothing enqueued; a dtype or a size that disagrees
 * with another operand is KILN_ERR_SHAPE_MISMATCH naming both; heads that
 * do not divide C, hs over 128, a bad descriptor field are
 * KILN_ERR_INVALID_ARGUMENT naming it; a NULL required descriptor
 * KILN_ERR_NULL_POINTER; batch, heads or T of 0 KILN_ERR_INVALID_SIZE.
 * Outputs must not overlap inputs or each other (compared by the spans
 * their descriptors cover). */
#ifndef KILN_OPS_ATTENTION_H
#define KILN_OPS_ATTENTION_H

#if !defined(KILN_H_INSIDE) && !defined(KILN_COMPILATION)
#error "Only <kiln/kiln.h> can be included directly."
#endif

#include "kiln/kiln_common.h"
#include "kiln/kiln_tensor.h"
#include "kiln/kiln_ops.h"

KILN_BEGIN_DECLS

/* The scalars of an attention call and its one option. A NULL params is
 * KILN_ATTENTION_PARAMS_INIT (scale 1 / sqrt(hs), causal). */
typedef struct kiln_attention_params {
  float scale; /* 0: 1 / sqrt(hs); else finite and > 0 */
  bool causal; /* position t attends to positions <= t only */
} kiln_attention_params;
#define KILN_ATTENTION_PARAMS_INIT {0.0f, true}

/* out = softmax(scale Q K^T [masked]) V per batch entry and head, from qkv
 * (T x 3C) into out (T x C); lse (batch heads T f32 elements, see above)
 * receives the row statistics, or is NULL when no backward pass follows.
 * Workspace: none. */
KILN_API kiln_status kiln_attention_forward(
    kiln_queue *queue, size_t batch, size_t heads, const kiln_matrix *qkv,
    const kiln_matrix *out, const kiln_range *lse,
    const kiln_attention_params *params, size_t num_wait,
    kiln_event *const *wait_list, kiln_event **out_event);

/* The gradient of the forward pass: from qkv, the forward's out and lse
 * (as that call wrote them, with the same params) and dout (T x C, the
 * loss's gradient with respect to out), dqkv (T x 3C, qkv's shape) receives
 * dQ, dK and dV in Q's, K's and V's columns; it is overwritten, not
 * accumulated. Recomputes the probabilities tile by tile from lse: a pass
 * over query rows (dQ, and D_t = dout_t . out_t) and a pass over key rows
 * (dK, dV), so no atomics and no T x T matrix. Workspace: the queue's op
 * workspace, 4 bytes per (batch, head, position). */
KILN_API kiln_status kiln_attention_backward(
    kiln_queue *queue, size_t batch, size_t heads, const kiln_matrix *qkv,
    const kiln_matrix *out, const kiln_matrix *dout, const kiln_range *lse,
    const kiln_matrix *dqkv, const kiln_attention_params *params,
    size_t num_wait, kiln_event *const *wait_list, kiln_event **out_event);

/* ---- generation: the key/value cache ------------------------------------- */
/* A cache holds, per batch entry b and head h, Tmax rows of hs keys (or
 * values): a kiln_matrix of rows Tmax and cols hs (ld 0 or >= hs) whose
 * batch entries are the batch x heads pairs, entry b heads + h at
 * batch_stride (0 only when batch x heads is 1) from the previous one,
 * i.e. the (B, heads, Tmax, hs) tensor of PyTorch's caches when packed:
 * {.rows = Tmax, .cols = hs, .batch_stride = Tmax * hs}. The key and value
 * caches have one shape and the dtype of the new keys. */

/* Copy the keys k and values v of n new positions (each a batch of n x C
 * matrices, heads as in qkv: for a GPT-2 block, views of qkv's K and V
 * columns, {.offset = C, .rows = n, .cols = C, .ld = 3C, ...}) into cache
 * rows [pos, pos + n) of every batch entry and head, bit for bit. pos + n
 * beyond the cache's Tmax rows is KILN_ERR_OUT_OF_RANGE ("pos"). */
KILN_API kiln_status kiln_attention_cache_append(
    kiln_queue *queue, size_t batch, size_t heads, size_t pos,
    const kiln_matrix *k, const kiln_matrix *v, const kiln_matrix *k_cache,
    const kiln_matrix *v_cache, size_t num_wait, kiln_event *const *wait_list,
    kiln_event **out_event);

/* Attention of n new queries q (a batch of n x C matrices, heads as in qkv;
 * for a GPT-2 block a view of qkv's Q columns) against the first t cached
 * positions, the last n of which are the queries' own: query i sits at
 * position t - n + i and, with params->causal, attends to positions up to
 * it. out is n x C per batch entry, as kiln_attention_forward's. The rows
 * of out equal that call's last n rows over the same t positions (same
 * kernels and summation order). t beyond the caches' Tmax rows is
 * KILN_ERR_OUT_OF_RANGE ("t"); n > t is KILN_ERR_SHAPE_MISMATCH. */
KILN_API kiln_status kiln_attention_decode(
    kiln_queue *queue, size_t batch, size_t heads, size_t t,
    const kiln_matrix *q, const kiln_matrix *k_cache,
    const kiln_matrix *v_cache, const kiln_matrix *out,
    const kiln_attention_params *params, size_t num_wait,
    kiln_event *const *wait_list, kiln_event **out_event);

KILN_END_DECLS

#endif
