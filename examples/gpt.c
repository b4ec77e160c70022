/* gpt.c: the GPT-2 of gpt.h: llm.c's layout, and the forward pass,
 * backward pass and AdamW update as sequences of kiln ops on one in-order
 * queue (layer norms, GEMMs with fused bias, the fused attention, GELU, the
 * embedding gather and its scatter-add, the fused cross-entropy), so the
 * host waits only where it reads a result. llm.c's checkpoint files are
 * gpt_checkpoint.c. */
#include "gpt.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TRY(call)                                                              \
  do {                                                                         \
    st = (call);                                                               \
    if (st != KILN_OK)                                                         \
      goto done;                                                               \
  } while (0)

enum { WTE, WPE, LN1W, LN1B, QKVW, QKVB, ATTPROJW, ATTPROJB, LN2W, LN2B, FCW,
       FCB, FCPROJW, FCPROJB, LNFW, LNFB };

/* The activations kept for the backward pass, in acts. */
enum { A_ENCODED, A_LN1, A_QKV, A_ATTY, A_LSE, A_RES2, A_LN2, A_FCH, A_GELU,
       A_RES3, A_LNF, A_LOGITS, A_KINDS };
/* The backward pass's scratch, in grad_acts. */
enum { G_RES, G_TMP, G_QKV, G_BIG1, G_BIG2, G_LOGITS, G_KINDS };

static const float LN_EPS = 1e-5f;

size_t gpt_param_count(const gpt_config *cfg, size_t sizes[GPT_NUM_TENSORS]) {
  const size_t C = cfg->channels, L = cfg->layers;
  const size_t s[GPT_NUM_TENSORS] = {
      cfg->padded_vocab * C, cfg->max_seq * C, L * C, L * C, L * 3 * C * C,
      L * 3 * C, L * C * C, L * C, L * C, L * C, L * 4 * C * C, L * 4 * C,
      L * C * 4 * C, L * C, C, C};
  size_t total = 0;
  for (int i = 0; i < GPT_NUM_TENSORS; i++) {
    if (sizes)
      sizes[i] = s[i];
    total += s[i];
  }
  return total;
}

static kiln_status make(kiln_context *ctx, size_t elems, kiln_buffer **out) {
  return kiln_buffer_create(ctx, elems * sizeof(float), KILN_MEM_READ_WRITE,
                            out);
}

kiln_status gpt_create(kiln_context *ctx, kiln_queue *queue,
                       const gpt_config *cfg, size_t B, size_t T,
                       kiln_dtype dtype, gpt **out) {
  kiln_status st = KILN_OK;
  gpt *m = calloc(1, sizeof *m);
  if (!m)
    return KILN_ERR_OUT_OF_HOST_MEMORY;
  m->cfg = *cfg;
  m->ctx = ctx;
  m->queue = queue;
  m->B = B;
  m->T = T;
  m->dt = dtype;
  m->nparams = gpt_param_count(cfg, m->sizes);
  for (int i = 1; i < GPT_NUM_TENSORS; i++)
    m->offsets[i] = m->offsets[i - 1] + m->sizes[i - 1];
  const size_t BT = B * T, C = cfg->channels, L = cfg->layers;
  const size_t act[A_KINDS] = {BT * C,     L * BT * C,     L * BT * 3 * C,
                               L * BT * C, L * B * cfg->heads * T,
                               L * BT * C, L * BT * C,     L * BT * 4 * C,
                               L * BT * 4 * C, L * BT * C, BT * C,
                               BT * cfg->vocab};
  size_t total = 0;
  for (int i = 0; i < A_KINDS; i++) {
    m->act_off[i] = total;
    total += act[i];
  }
  const size_t grad[G_KINDS] = {BT * C, BT * C, BT * 3 * C, BT * 4 * C,
                                BT * 4 * C, BT * cfg->vocab};
  size_t gtotal = 0;
  for (int i = 0; i < G_KINDS; i++) {
    m->grad_off[i] = gtotal;
    gtotal += grad[i];
  }
  TRY(make(ctx, m->nparams, &m->params));
  TRY(make(ctx, m->nparams, &m->grads));
  TRY(make(ctx, m->nparams, &m->opt_m));
  TRY(make(ctx, m->nparams, &m->opt_v));
  TRY(make(ctx, total, &m->acts));
  TRY(make(ctx, gtotal, &m->grad_acts));
  if (dtype != KILN_F32) {
    /* bf16 shadows: the weights, and every activation and gradient a GEMM
     * or the attention reads, at the offsets of their f32 originals. */
    TRY(kiln_buffer_create(ctx, m->nparams * 2, KILN_MEM_READ_WRITE,
                           &m->params_lp));
    TRY(kiln_buffer_create(ctx, total * 2, KILN_MEM_READ_WRITE, &m->acts_lp));
    TRY(kiln_buffer_create(ctx, gtotal * 2, KILN_MEM_READ_WRITE, &m->grad_lp));
  }
  TRY(make(ctx, BT, &m->tokens));
  TRY(make(ctx, BT, &m->targets));
  TRY(make(ctx, 4, &m->scalars));
  /* The padded vocabulary rows of wte's gradient are never written by a
   * step: zero them (all of grads) once. */
  const float zero = 0.0f;
  TRY(kiln_fill(queue, &(kiln_range){m->grads, 0, m->nparams, KILN_F32}, &zero,
                0, NULL, NULL));
  *out = m;
  return KILN_OK;
done:
  gpt_destroy(m);
  return st;
}

void gpt_destroy(gpt *m) {
  if (!m)
    return;
  kiln_buffer *all[] = {m->params,    m->grads,  m->opt_m,   m->opt_v,
                        m->acts,      m->grad_acts, m->tokens, m->targets,
                        m->scalars,   m->kv_cache, m->params_lp, m->acts_lp,
                        m->grad_lp};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
    kiln_buffer_destroy(all[i]);
  free(m);
}

static kiln_range param(const gpt *m, int tensor, size_t layer,
                        size_t per_layer) {
  return (kiln_range){m->params, m->offsets[tensor] + layer * per_layer,
                      per_layer, KILN_F32};
}

static kiln_range grad(const gpt *m, int tensor, size_t layer,
                       size_t per_layer) {
  return (kiln_range){m->grads, m->offsets[tensor] + layer * per_layer,
                      per_layer, KILN_F32};
}

kiln_status gpt_reset_optimizer(gpt *m) {
  const float zero = 0.0f;
  kiln_status st = kiln_fill(
      m->queue, &(kiln_range){m->opt_m, 0, m->nparams, KILN_F32}, &zero, 0,
      NULL, NULL);
  if (st == KILN_OK)
    st = kiln_fill(m->queue, &(kiln_range){m->opt_v, 0, m->nparams, KILN_F32},
                   &zero, 0, NULL, NULL);
  if (st == KILN_OK && m->params_lp)
    st = kiln_cast(m->queue, &(kiln_range){m->params, 0, m->nparams, KILN_F32},
                   &(kiln_range){m->params_lp, 0, m->nparams, m->dt}, 0, NULL,
                   NULL);
  m->steps = 0;
  return st;
}

kiln_status gpt_init(gpt *m, uint64_t seed) {
  kiln_status st = KILN_OK;
  const float resid = 0.02f / sqrtf(2.0f * (float)m->cfg.layers);
  for (int t = 0; t < GPT_NUM_TENSORS; t++) {
    const kiln_range r = {m->params, m->offsets[t], m->sizes[t], KILN_F32};
    const bool weight = t == WTE || t == WPE || t == QKVW || t == ATTPROJW ||
                        t == FCW || t == FCPROJW;
    const bool norm = t == LN1W || t == LN2W || t == LNFW;
    if (weight) {
      const float sd = t == ATTPROJW || t == FCPROJW ? resid : 0.02f;
      /* Each tensor takes the piece of the seed's stream at its offset. */
      TRY(kiln_random_normal(m->queue, &r, seed, m->offsets[t], 0.0f, sd, 0,
                             NULL, NULL));
    } else {
      const float v = norm ? 1.0f : 0.0f;
      TRY(kiln_fill(m->queue, &r, &v, 0, NULL, NULL));
    }
  }
  st = gpt_reset_optimizer(m);
done:
  return st;
}

/* ---- forward and backward ---------------------------------------------- */

static kiln_matrix act_mat(const gpt *m, int kind, size_t index, size_t rows,
                           size_t cols) {
  return (kiln_matrix){.buffer = m->acts,
                       .offset = m->act_off[kind] + index * rows * cols,
                       .rows = rows,
                       .cols = cols,
                       .dtype = KILN_F32};
}

static kiln_matrix grad_mat(const gpt *m, int kind, size_t rows, size_t cols) {
  return (kiln_matrix){.buffer = m->grad_acts,
                       .offset = m->grad_off[kind],
                       .rows = rows,
                       .cols = cols,
                       .dtype = KILN_F32};
}

static kiln_range as_range(const kiln_matrix *x) {
  return (kiln_range){x->buffer, x->offset, x->rows * x->cols, x->dtype};
}

/* x as the GEMMs and the attention read it: itself in f32, its bf16 shadow
 * (same offset in acts_lp or grad_lp) otherwise. */
static kiln_matrix lp_of(const gpt *m, const kiln_matrix *x) {
  kiln_matrix v = *x;
  if (m->dt != KILN_F32 && x->dtype == KILN_F32) {
    v.buffer = x->buffer == m->acts ? m->acts_lp : m->grad_lp;
    v.dtype = m->dt;
  }
  return v;
}

/* lp_of(x), after casting x into it where that is a copy. */
static kiln_status to_lp(gpt *m, const kiln_matrix *x, kiln_matrix *out) {
  *out = lp_of(m, x);
  if (out->buffer == x->buffer)
    return KILN_OK;
  const kiln_range from = as_range(x), to = as_range(out);
  return kiln_cast(m->queue, &from, &to, 0, NULL, NULL);
}

/* Weight tensor w's layer slice, out x in, as the GEMMs read it. */
static kiln_matrix weight(const gpt *m, int w, size_t layer, size_t out,
                          size_t in) {
  return (kiln_matrix){.buffer = m->dt == KILN_F32 ? m->params : m->params_lp,
                       .offset = m->offsets[w] + layer * in * out,
                       .rows = out,
                       .cols = in,
                       .dtype = m->dt};
}

/* y = x W^T + b (+ y when accumulate), x in the GEMMs' dtype (lp_of), y
 * f32: W out x in at tensor's layer slice. */
static kiln_status linear(gpt *m, const kiln_matrix *x, int w_tensor,
                          int b_tensor, size_t layer, const kiln_matrix *y,
                          bool accumulate) {
  const size_t in = x->cols, out = y->cols;
  kiln_matrix w = weight(m, w_tensor, layer, out, in);
  w.trans = KILN_TRANS;
  const kiln_range b = param(m, b_tensor, layer, out);
  const kiln_epilogue e = {1.0f, accumulate ? 1.0f : 0.0f, &b, KILN_ACT_NONE};
  return kiln_matmul(m->queue, 1, x, &w, y, &e, 0, NULL, NULL);
}

/* From dy (rows x out; f32, or already in the GEMMs' dtype): dW = dy^T x,
 * db = the column sums of dy (both f32, overwritten) and dx = dy W (f32,
 * overwritten); x as linear() took it. */
static kiln_status linear_backward(gpt *m, const kiln_matrix *x, int w_tensor,
                                   int b_tensor, size_t layer,
                                   const kiln_matrix *dy,
                                   const kiln_matrix *dx) {
  const size_t in = x->cols, out = dy->cols;
  kiln_matrix dyg;
  kiln_status st = to_lp(m, dy, &dyg);
  kiln_matrix dy_t = dyg;
  dy_t.trans = KILN_TRANS;
  const kiln_matrix dw = {.buffer = m->grads,
                          .offset = m->offsets[w_tensor] + layer * in * out,
                          .rows = out, .cols = in, .dtype = KILN_F32};
  const kiln_matrix w = weight(m, w_tensor, layer, out, in);
  const kiln_range db = grad(m, b_tensor, layer, out);
  if (st == KILN_OK)
    st = kiln_matmul(m->queue, 1, &dy_t, x, &dw, NULL, 0, NULL, NULL);
  if (st == KILN_OK)
    st = kiln_reduce_cols(m->queue, KILN_REDUCE_SUM, dy, &db, 0, NULL, NULL);
  if (st == KILN_OK)
    st = kiln_matmul(m->queue, 1, &dyg, &w, dx, NULL, 0, NULL, NULL);
  return st;
}

static kiln_status copy(gpt *m, const kiln_matrix *from,
                        const kiln_matrix *to) {
  const kiln_range a = as_range(from), b = as_range(to);
  return kiln_buffer_copy(m->queue, &a, &b, 0, NULL, NULL);
}

/* The residual stream entering layer l. */
static kiln_matrix layer_input(const gpt *m, size_t l, size_t BT) {
  const size_t C = m->cfg.channels;
  return l == 0 ? act_mat(m, A_ENCODED, 0, BT, C)
                : act_mat(m, A_RES3, l - 1, BT, C);
}

/* The attention operands of layer l as kiln_attention_* take them, in the
 * GEMMs' dtype (the attention reads and writes bf16 in bf16). */
static void attention_views(const gpt *m, size_t l, size_t B, size_t T,
                            kiln_matrix *qkv, kiln_matrix *atty,
                            kiln_range *lse) {
  const size_t C = m->cfg.channels, BT = B * T;
  const kiln_matrix qkv_flat = act_mat(m, A_QKV, l, BT, 3 * C);
  const kiln_matrix atty_flat = act_mat(m, A_ATTY, l, BT, C);
  *qkv = lp_of(m, &qkv_flat);
  qkv->rows = T;
  qkv->batch_stride = T * 3 * C;
  *atty = lp_of(m, &atty_flat);
  atty->rows = T;
  atty->batch_stride = T * C;
  const size_t nl = B * m->cfg.heads * T;
  *lse = (kiln_range){m->acts, m->act_off[A_LSE] + l * nl, nl, KILN_F32};
}

/* Token and position embeddings of B sequences of n tokens at positions
 * [pos, pos + n) (tokens in m->tokens, sequence by sequence): gather the
 * tokens' rows of wte, then add wpe's rows to each sequence. */
static kiln_status embed(gpt *m, size_t B, size_t n, size_t pos) {
  kiln_status st = KILN_OK;
  const size_t C = m->cfg.channels;
  const kiln_matrix wte = {.buffer = m->params, .offset = m->offsets[WTE],
                           .rows = m->cfg.padded_vocab, .cols = C,
                           .dtype = KILN_F32};
  const kiln_range tokens = {m->tokens, 0, B * n, KILN_U32};
  const kiln_matrix enc = act_mat(m, A_ENCODED, 0, B * n, C);
  TRY(kiln_gather_rows(m->queue, &wte, &tokens, &enc, 0, NULL, NULL));
  const kiln_range wpe = {m->params, m->offsets[WPE] + pos * C, n * C,
                          KILN_F32};
  for (size_t b = 0; b < B; b++) {
    const kiln_range seq = {m->acts, enc.offset + b * n * C, n * C, KILN_F32};
    TRY(kiln_axpy(m->queue, &wpe, &seq, 1.0f, 0, NULL, NULL));
  }
done:
  return st;
}

/* Layer l's first half up to the attention's input: ln1 and qkv of rows
 * residual rows res, into activation slot `slot`. */
static kiln_status block_qkv(gpt *m, size_t slot, size_t l, size_t rows,
                             const kiln_matrix *res) {
  const size_t C = m->cfg.channels;
  const kiln_matrix ln1 = act_mat(m, A_LN1, slot, rows, C);
  const kiln_range ln1w = param(m, LN1W, l, C), ln1b = param(m, LN1B, l, C);
  kiln_status st = kiln_layernorm_rows(m->queue, res, &ln1w, &ln1b, &ln1,
                                       LN_EPS, 0, NULL, NULL);
  const kiln_matrix qkv = act_mat(m, A_QKV, slot, rows, 3 * C);
  kiln_matrix x, unused;
  if (st == KILN_OK)
    st = to_lp(m, &ln1, &x);
  if (st == KILN_OK)
    st = linear(m, &x, QKVW, QKVB, l, &qkv, false);
  /* The attention reads qkv in the GEMMs' dtype. */
  if (st == KILN_OK)
    st = to_lp(m, &qkv, &unused);
  return st;
}

/* Layer l's rest from the attention's output (in slot's A_ATTY): residual2
 * = res + attproj, the MLP, residual3 = residual2 + fcproj, in slot. */
static kiln_status block_rest(gpt *m, size_t slot, size_t l, size_t rows,
                              const kiln_matrix *res) {
  kiln_status st = KILN_OK;
  const size_t C = m->cfg.channels;
  /* residual2 = res + atty W^T + b: the GEMM accumulates onto a copy. */
  const kiln_matrix res2 = act_mat(m, A_RES2, slot, rows, C);
  const kiln_matrix atty_f32 = act_mat(m, A_ATTY, slot, rows, C);
  const kiln_matrix atty = lp_of(m, &atty_f32); /* the attention wrote it */
  kiln_matrix x;
  TRY(copy(m, res, &res2));
  TRY(linear(m, &atty, ATTPROJW, ATTPROJB, l, &res2, true));
  const kiln_matrix ln2 = act_mat(m, A_LN2, slot, rows, C);
  const kiln_range ln2w = param(m, LN2W, l, C), ln2b = param(m, LN2B, l, C);
  TRY(kiln_layernorm_rows(m->queue, &res2, &ln2w, &ln2b, &ln2, LN_EPS, 0, NULL,
                          NULL));
  const kiln_matrix fch = act_mat(m, A_FCH, slot, rows, 4 * C);
  const kiln_matrix gelu = act_mat(m, A_GELU, slot, rows, 4 * C);
  TRY(to_lp(m, &ln2, &x));
  TRY(linear(m, &x, FCW, FCB, l, &fch, false));
  const kiln_range fch_r = as_range(&fch), gelu_r = as_range(&gelu);
  TRY(kiln_unary(m->queue, KILN_UNARY_GELU, &fch_r, &gelu_r, 0, NULL, NULL));
  const kiln_matrix res3 = act_mat(m, A_RES3, slot, rows, C);
  TRY(copy(m, &res2, &res3));
  TRY(to_lp(m, &gelu, &x));
  TRY(linear(m, &x, FCPROJW, FCPROJB, l, &res3, true));
done:
  return st;
}

/* The final layer norm of last (rows x C) and the logits lnf wte^T over
 * the V real tokens (the padded rows of wte are never read). */
static kiln_status head(gpt *m, size_t rows, const kiln_matrix *last) {
  const size_t C = m->cfg.channels;
  const kiln_matrix lnf = act_mat(m, A_LNF, 0, rows, C);
  const kiln_range lnfw = param(m, LNFW, 0, C), lnfb = param(m, LNFB, 0, C);
  kiln_status st = kiln_layernorm_rows(m->queue, last, &lnfw, &lnfb, &lnf,
                                       LN_EPS, 0, NULL, NULL);
  kiln_matrix wte_t = weight(m, WTE, 0, m->cfg.vocab, C), x;
  wte_t.trans = KILN_TRANS;
  const kiln_matrix logits = act_mat(m, A_LOGITS, 0, rows, m->cfg.vocab);
  if (st == KILN_OK)
    st = to_lp(m, &lnf, &x);
  if (st == KILN_OK)
    st = kiln_matmul(m->queue, 1, &x, &wte_t, &logits, NULL, 0, NULL, NULL);
  return st;
}

kiln_status gpt_forward(gpt *m, size_t B, size_t T, bool with_loss) {
  kiln_status st = KILN_OK;
  const size_t BT = B * T;
  TRY(embed(m, B, T, 0));
  for (size_t l = 0; l < m->cfg.layers; l++) {
    const kiln_matrix res = layer_input(m, l, BT);
    TRY(block_qkv(m, l, l, BT, &res));
    kiln_matrix qkv, atty;
    kiln_range lse;
    attention_views(m, l, B, T, &qkv, &atty, &lse);
    TRY(kiln_attention_forward(m->queue, B, m->cfg.heads, &qkv, &atty, &lse,
                               NULL, 0, NULL, NULL));
    TRY(block_rest(m, l, l, BT, &res));
  }
  const kiln_matrix last = layer_input(m, m->cfg.layers, BT);
  TRY(head(m, BT, &last));
  if (with_loss) {
    const kiln_matrix logits = act_mat(m, A_LOGITS, 0, BT, m->cfg.vocab);
    const kiln_range targets = {m->targets, 0, BT, KILN_U32};
    const kiln_range mean = {m->scalars, 0, 1, KILN_F32};
    TRY(kiln_softmax_cross_entropy(m->queue, &logits, &targets, NULL, &mean, 0,
                                   NULL, NULL));
  }
done:
  return st;
}

/* The key/value caches of layer l, as kiln_attention_cache_* take them:
 * B x heads entries of max_seq x hs. */
static void cache_views(const gpt *m, size_t l, size_t B, kiln_matrix *k,
                        kiln_matrix *v) {
  const size_t hs = m->cfg.channels / m->cfg.heads, tmax = m->cfg.max_seq;
  const size_t per_layer = B * m->cfg.heads * tmax * hs;
  *k = (kiln_matrix){.buffer = m->kv_cache, .offset = 2 * l * per_layer,
                     .rows = tmax, .cols = hs, .batch_stride = tmax * hs,
                     .dtype = m->dt};
  *v = *k;
  v->offset += per_layer;
}

kiln_status gpt_decode(gpt *m, size_t B, size_t pos, size_t n) {
  kiln_status st = KILN_OK;
  const size_t C = m->cfg.channels, rows = B * n;
  if (n == 0 || pos + n > m->cfg.max_seq || rows > m->B * m->T ||
      (m->kv_cache && B != m->cache_batch)) {
    char why[300];
    snprintf(why, sizeof why,
             "gpt_decode: %zu sequences of %zu tokens at position %zu do not "
             "fit (context %zu, %zu rows of activations, cache made for %zu "
             "sequences)", B, n, pos, m->cfg.max_seq, m->B * m->T,
             m->kv_cache ? m->cache_batch : B);
    return kiln_set_last_error(KILN_ERR_OUT_OF_RANGE, why);
  }
  if (!m->kv_cache) {
    TRY(kiln_buffer_create(m->ctx,
                           2 * m->cfg.layers * B * m->cfg.max_seq * C *
                               kiln_dtype_size(m->dt),
                           KILN_MEM_READ_WRITE, &m->kv_cache));
    m->cache_batch = B;
  }
  TRY(embed(m, B, n, pos));
  for (size_t l = 0; l < m->cfg.layers; l++) {
    /* Every layer works in slot 0: nothing is kept for a backward pass. */
    const kiln_matrix res = l == 0 ? act_mat(m, A_ENCODED, 0, rows, C)
                                   : act_mat(m, A_RES3, 0, rows, C);
    TRY(block_qkv(m, 0, l, rows, &res));
    const kiln_matrix qkv_f32 = act_mat(m, A_QKV, 0, rows, 3 * C);
    const kiln_matrix qkv = lp_of(m, &qkv_f32);
    kiln_matrix q = {.buffer = qkv.buffer, .offset = qkv.offset, .rows = n,
                     .cols = C, .ld = 3 * C, .batch_stride = n * 3 * C,
                     .dtype = qkv.dtype};
    kiln_matrix k = q, v = q;
    k.offset += C;
    v.offset += 2 * C;
    kiln_matrix kc, vc;
    cache_views(m, l, B, &kc, &vc);
    TRY(kiln_attention_cache_append(m->queue, B, m->cfg.heads, pos, &k, &v,
                                    &kc, &vc, 0, NULL, NULL));
    const kiln_matrix out_f32 = act_mat(m, A_ATTY, 0, rows, C);
    kiln_matrix out = lp_of(m, &out_f32);
    out.rows = n;
    out.batch_stride = n * C;
    TRY(kiln_attention_decode(m->queue, B, m->cfg.heads, pos + n, &q, &kc, &vc,
                              &out, NULL, 0, NULL, NULL));
    TRY(block_rest(m, 0, l, rows, &res));
  }
  const kiln_matrix last = act_mat(m, A_RES3, 0, rows, C);
  TRY(head(m, rows, &last));
done:
  return st;
}

/* dres += the gradient to a layer norm's input x from dy (in dtmp, which
 * it overwrites), and the norm's weight and bias gradients. */
static kiln_status layernorm_backward(gpt *m, const kiln_matrix *x, int w,
                                      int b, size_t l, const kiln_matrix *dtmp,
                                      const kiln_matrix *dres) {
  const size_t C = m->cfg.channels;
  const kiln_range scale = param(m, w, l, C);
  const kiln_range dw = grad(m, w, l, C), db = grad(m, b, l, C);
  kiln_status st = kiln_layernorm_rows_backward(
      m->queue, x, &scale, dtmp, dtmp, &dw, &db, LN_EPS, 0, NULL, NULL);
  const kiln_range from = as_range(dtmp), to = as_range(dres);
  if (st == KILN_OK)
    st = kiln_axpy(m->queue, &from, &to, 1.0f, 0, NULL, NULL);
  return st;
}

kiln_status gpt_backward(gpt *m, size_t B, size_t T) {
  kiln_status st = KILN_OK;
  kiln_queue *q = m->queue;
  const size_t C = m->cfg.channels, BT = B * T, V = m->cfg.vocab;
  const kiln_matrix logits = act_mat(m, A_LOGITS, 0, BT, V);
  const kiln_matrix dlogits = grad_mat(m, G_LOGITS, BT, V);
  const kiln_range targets = {m->targets, 0, BT, KILN_U32};
  TRY(kiln_softmax_cross_entropy_backward(q, &logits, &targets, &dlogits,
                                          1.0f / (float)BT, 0, NULL, NULL));
  /* The tied embedding's gradient from the output projection (overwrite),
   * to which the input embedding's scatter-add is added at the end. */
  const kiln_matrix lnf_f32 = act_mat(m, A_LNF, 0, BT, C);
  const kiln_matrix lnf = lp_of(m, &lnf_f32); /* as the forward pass cast it */
  kiln_matrix dl;
  TRY(to_lp(m, &dlogits, &dl));
  kiln_matrix dl_t = dl;
  dl_t.trans = KILN_TRANS;
  const kiln_matrix dwte = {.buffer = m->grads, .offset = m->offsets[WTE],
                            .rows = V, .cols = C, .dtype = KILN_F32};
  const kiln_matrix wte = weight(m, WTE, 0, V, C);
  TRY(kiln_matmul(q, 1, &dl_t, &lnf, &dwte, NULL, 0, NULL, NULL));
  const kiln_matrix dtmp = grad_mat(m, G_TMP, BT, C);
  const kiln_matrix dres = grad_mat(m, G_RES, BT, C);
  TRY(kiln_matmul(q, 1, &dl, &wte, &dtmp, NULL, 0, NULL, NULL));
  /* dres starts as the final layer norm's input gradient. */
  const float zero = 0.0f;
  const kiln_range dres_r = as_range(&dres);
  TRY(kiln_fill(q, &dres_r, &zero, 0, NULL, NULL));
  const kiln_matrix last = layer_input(m, m->cfg.layers, BT);
  TRY(layernorm_backward(m, &last, LNFW, LNFB, 0, &dtmp, &dres));
  const kiln_matrix dbig1 = grad_mat(m, G_BIG1, BT, 4 * C);
  const kiln_matrix dbig2 = grad_mat(m, G_BIG2, BT, 4 * C);
  for (size_t l = m->cfg.layers; l-- > 0;) {
    /* residual3 = residual2 + fcproj(gelu(fc(ln2(residual2)))) */
    /* The GEMMs' inputs as the forward pass cast them (lp_of). */
    const kiln_matrix gelu_f32 = act_mat(m, A_GELU, l, BT, 4 * C);
    const kiln_matrix gelu = lp_of(m, &gelu_f32);
    const kiln_matrix fch = act_mat(m, A_FCH, l, BT, 4 * C);
    TRY(linear_backward(m, &gelu, FCPROJW, FCPROJB, l, &dres, &dbig1));
    const kiln_range fch_r = as_range(&fch), d1 = as_range(&dbig1),
                     d2 = as_range(&dbig2);
    TRY(kiln_unary_backward(q, KILN_UNARY_GELU, KILN_GRAD_FROM_X, &fch_r, &d1,
                            &d2, 0, NULL, NULL));
    const kiln_matrix ln2_f32 = act_mat(m, A_LN2, l, BT, C);
    const kiln_matrix ln2 = lp_of(m, &ln2_f32);
    TRY(linear_backward(m, &ln2, FCW, FCB, l, &dbig2, &dtmp));
    const kiln_matrix res2 = act_mat(m, A_RES2, l, BT, C);
    TRY(layernorm_backward(m, &res2, LN2W, LN2B, l, &dtmp, &dres));
    /* residual2 = res + attproj(attention(qkv(ln1(res)))) */
    const kiln_matrix atty_f32 = act_mat(m, A_ATTY, l, BT, C);
    const kiln_matrix atty_flat = lp_of(m, &atty_f32);
    TRY(linear_backward(m, &atty_flat, ATTPROJW, ATTPROJB, l, &dres, &dtmp));
    kiln_matrix qkv, atty, datty;
    kiln_range lse;
    attention_views(m, l, B, T, &qkv, &atty, &lse);
    TRY(to_lp(m, &dtmp, &datty));
    const kiln_matrix dqkv_f32 = grad_mat(m, G_QKV, BT, 3 * C);
    kiln_matrix dqkv = lp_of(m, &dqkv_f32);
    datty.rows = T;
    datty.batch_stride = T * C;
    const kiln_matrix dqkv_flat = dqkv;
    dqkv.rows = T;
    dqkv.batch_stride = T * 3 * C;
    TRY(kiln_attention_backward(q, B, m->cfg.heads, &qkv, &atty, &datty, &lse,
                                &dqkv, NULL, 0, NULL, NULL));
    const kiln_matrix ln1_f32 = act_mat(m, A_LN1, l, BT, C);
    const kiln_matrix ln1 = lp_of(m, &ln1_f32);
    TRY(linear_backward(m, &ln1, QKVW, QKVB, l, &dqkv_flat, &dtmp));
    const kiln_matrix res = layer_input(m, l, BT);
    TRY(layernorm_backward(m, &res, LN1W, LN1B, l, &dtmp, &dres));
  }
  /* The embeddings: wte's token rows gain dres's rows (scatter-add, in a
   * fixed order); wpe's gradient is the sum of dres over the sequences. */
  const kiln_matrix dwte_all = {.buffer = m->grads, .offset = m->offsets[WTE],
                                .rows = m->cfg.padded_vocab, .cols = C,
                                .dtype = KILN_F32};
  const kiln_range tokens = {m->tokens, 0, BT, KILN_U32};
  TRY(kiln_scatter_add_rows(q, &dres, &tokens, &dwte_all, 0, NULL, NULL));
  const kiln_range dwpe = grad(m, WPE, 0, T * C);
  for (size_t b = 0; b < B; b++) {
    const kiln_range seq = {m->grad_acts, dres.offset + b * T * C, T * C,
                            KILN_F32};
    if (b == 0)
      TRY(kiln_buffer_copy(q, &seq, &dwpe, 0, NULL, NULL));
    else
      TRY(kiln_axpy(q, &seq, &dwpe, 1.0f, 0, NULL, NULL));
  }
done:
  return st;
}

kiln_status gpt_update(gpt *m, float lr, float beta1, float beta2, float eps,
                       float weight_decay, float max_norm) {
  kiln_status st = KILN_OK;
  const kiln_range g = {m->grads, 0, m->nparams, KILN_F32};
  const kiln_range norm = {m->scalars, 1, 1, KILN_F32};
  TRY(kiln_grad_norm(m->queue, &g, 1, &norm, 0, NULL, NULL));
  if (max_norm > 0.0f)
    TRY(kiln_clip_grad_norm(m->queue, &norm, &g, 1, max_norm, 0, NULL, NULL));
  m->steps++;
  const kiln_range w = {m->params, 0, m->nparams, KILN_F32};
  const kiln_range mo = {m->opt_m, 0, m->nparams, KILN_F32};
  const kiln_range vo = {m->opt_v, 0, m->nparams, KILN_F32};
  const kiln_adamw_params p = {.lr = lr, .beta1 = beta1, .beta2 = beta2,
                               .eps = eps, .weight_decay = weight_decay,
                               .step = m->steps, .grad_scale = 1.0f};
  const kiln_range copy_lp = {m->params_lp, 0, m->nparams, m->dt};
  TRY(kiln_adamw_step(m->queue, &g, NULL, &w, &mo, &vo,
                      m->params_lp ? &copy_lp : NULL, &p, 0, NULL, NULL));
done:
  return st;
}

kiln_buffer *gpt_logits(const gpt *m, size_t *offset) {
  *offset = m->act_off[A_LOGITS];
  return m->acts;
}
