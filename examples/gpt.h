/* gpt.h: a GPT-2 (pre-LayerNorm blocks, learned positions, GELU tanh, token
 * embedding tied to the output projection) on one kiln queue, laid out as
 * Karpathy's llm.c lays it out, so its checkpoints load and save unchanged.
 *
 * Parameters: one f32 buffer in llm.c's order, each tensor holding every
 * layer's slice back to back: wte (Vp x C), wpe (maxT x C), ln1w, ln1b (L x
 * C), qkvw (L x 3C x C), qkvb (L x 3C), attprojw (L x C x C), attprojb
 * (L x C), ln2w, ln2b (L x C), fcw (L x 4C x C), fcb (L x 4C), fcprojw (L x
 * C x 4C), fcprojb (L x C), lnfw, lnfb (C). Vp is the vocabulary padded
 * (llm.c: to a multiple of 128) whose extra rows are never read. The
 * gradients live in one buffer at the same offsets, so one norm, one
 * clip, one allreduce and one AdamW launch cover all of them.
 *
 * Checkpoints are llm.c's model files: 256 int32 (magic 20240326, version
 * 3, maxT, V, L, NH, C, Vp) then the parameters in f32. gpt_load refuses a
 * truncated or foreign file with a sentence saying what is wrong; gpt_save
 * writes a temporary file and renames it over the target, so an existing
 * checkpoint is never left half written. */
#ifndef GPT_H
#define GPT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <kiln/kiln.h>

typedef struct gpt_config {
  size_t max_seq;       /* maxT: the positions wpe holds */
  size_t vocab;         /* V */
  size_t padded_vocab;  /* Vp >= V */
  size_t layers;        /* L */
  size_t heads;         /* NH, divides channels */
  size_t channels;      /* C */
} gpt_config;

enum { GPT_NUM_TENSORS = 16 };

typedef struct gpt {
  gpt_config cfg;
  kiln_context *ctx;
  kiln_queue *queue;
  size_t B, T;          /* the batch and sequence length buffers hold */
  kiln_dtype dt;        /* the GEMMs' and the attention's dtype */
  size_t sizes[GPT_NUM_TENSORS], offsets[GPT_NUM_TENSORS];
  size_t nparams;
  unsigned long steps;
  kiln_buffer *params, *grads, *opt_m, *opt_v;
  /* bf16 only: the weights' copy that AdamW refreshes, and the bf16
   * shadows of the activations and gradients the GEMMs read. */
  kiln_buffer *params_lp, *acts_lp, *grad_lp;
  kiln_buffer *acts;      /* every activation of the forward pass, f32 */
  kiln_buffer *grad_acts; /* the backward pass's scratch, f32 */
  kiln_buffer *tokens, *targets; /* u32, B x T */
  kiln_buffer *scalars; /* f32: mean loss, grad norm */
  kiln_buffer *kv_cache; /* generation's keys and values (gpt_decode) */
  size_t cache_batch;    /* the sequences kv_cache was made for */
  size_t act_off[16];  /* offsets of the activation kinds in acts */
  size_t grad_off[8];  /* and of the scratch kinds in grad_acts */
} gpt;

/* Parameter count and tensor sizes of cfg (no device needed). */
size_t gpt_param_count(const gpt_config *cfg, size_t sizes[GPT_NUM_TENSORS]);

/* Buffers for batches of B sequences of T <= cfg->max_seq tokens. dtype
 * KILN_F32, or KILN_BF16 for mixed precision: the GEMMs and the attention
 * read bf16 copies of the weights and of their inputs and accumulate in
 * f32; the residual stream, layer norms, softmax, gradients' sums and the
 * f32 master weights that AdamW updates stay f32. */
kiln_status gpt_create(kiln_context *ctx, kiln_queue *queue,
                       const gpt_config *cfg, size_t B, size_t T,
                       kiln_dtype dtype, gpt **out);
void gpt_destroy(gpt *m);

/* GPT-2's initialisation from seed alone: weights normal(0, 0.02), the
 * residual projections (attprojw, fcprojw) normal(0, 0.02 / sqrt(2 L)),
 * biases 0, layer norms' weights 1; optimizer state zeroed. */
kiln_status gpt_init(gpt *m, uint64_t seed);

/* Zero the AdamW state and refresh the bf16 weights from the f32 ones
 * (after new parameters were written, as gpt_init and gpt_load do). */
kiln_status gpt_reset_optimizer(gpt *m);

/* llm.c checkpoint files (gpt_checkpoint.c). */
/* Read an llm.c header (no device): 0 and *cfg, or -1 and a sentence. */
int gpt_read_header(const char *path, gpt_config *cfg, char *err,
                    size_t err_size);
/* Load the parameters of an llm.c checkpoint whose header matches m's
 * configuration; optimizer state zeroed. -1 and a sentence in err. */
int gpt_load(gpt *m, const char *path, char *err, size_t err_size);
/* Save the parameters as an llm.c checkpoint, through path.tmp and rename. */
int gpt_save(gpt *m, const char *path, char *err, size_t err_size);

/* Forward pass over B x T tokens (u32, already in m->tokens; B and T at
 * most what gpt_create was given): logits (B T rows of V f32) at
 * gpt_logits(). With with_loss, also the mean cross-entropy against
 * m->targets (B x T u32) into m->scalars[0]. */
kiln_status gpt_forward(gpt *m, size_t B, size_t T, bool with_loss);
/* After gpt_forward(with_loss): every parameter's gradient into m->grads. */
kiln_status gpt_backward(gpt *m, size_t B, size_t T);
/* Clip the gradients' global norm to max_norm (0: no clipping; the norm is
 * left in m->scalars[1]) and take one AdamW step with learning rate lr. */
kiln_status gpt_update(gpt *m, float lr, float beta1, float beta2, float eps,
                       float weight_decay, float max_norm);

/* Generation with the key/value cache: B sequences of n new tokens (in
 * m->tokens, sequence by sequence) at positions [pos, pos + n), attending
 * to the cached positions before them (the first call has pos 0: the
 * prompt). Logits of the B n rows (sequence by sequence) at gpt_logits().
 * pos + n at most max_seq; B n at most the B T of gpt_create. The cache
 * (2 L B max_seq C floats) is made by the first call. */
kiln_status gpt_decode(gpt *m, size_t B, size_t pos, size_t n);

/* The logits' buffer and element offset (B T rows of V f32). */
kiln_buffer *gpt_logits(const gpt *m, size_t *offset);

#endif
