/* train_gpt.c: train a GPT-2 (gpt.c) on a text or token file with kiln's op
 * library, reading and writing Karpathy's llm.c checkpoints, and report per
 * step the loss, the time and the tokens per second, with a validation loss
 * every --val-every steps.
 *
 * Data: any text file, as bytes (vocabulary 256: a byte-level model), or an
 * llm.c token file (256 int32 header, magic 20240520, then uint16 tokens,
 * e.g. from llm.c's GPT-2 tokenizer scripts), recognised by its magic. The
 * last tenth is held out for validation unless --val-data names a file.
 * Batches are consecutive windows of B x T + 1 tokens, as llm.c's loader
 * reads them, wrapping at the end.
 *
 * The model comes from --load CHECKPOINT (llm.c's model file: the header
 * fixes the configuration) or, without it, from the flags and GPT-2's
 * initialisation from --seed. --save CHECKPOINT writes the parameters in
 * llm.c's format and the AdamW state beside it (CHECKPOINT.state), each
 * through a temporary file renamed over the old one; --resume CHECKPOINT
 * loads both and continues the step count, learning rate schedule and data
 * position up to --steps (--run-steps stops a run early, for jobs in
 * chunks: a run in chunks gives the losses of one run, bit for bit). The
 * learning rate warms up linearly over --warmup steps, then follows a
 * cosine down to a tenth of --lr at --steps.
 *
 * Data-parallel mode (train_dp.h): train_gpt_mpi, the same source built
 * with -DKILN_TRAIN_MPI and train_mpi.c, runs under `mpirun -np N`: each
 * rank takes B/N of every batch's sequences (--batch a multiple of N), the
 * gradients are averaged over the ranks (one allreduce) before the clip and
 * the step, the losses likewise; rank 0 prints and saves, and at the end the
 * ranks check that their models are bit-identical.
 *
 * Build: cc train_gpt.c gpt.c $(pkg-config --cflags --libs kiln) -lm
 *   (data-parallel: mpicc -DKILN_TRAIN_MPI ... train_mpi.c, and kiln-mpi) */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <kiln/kiln.h>

#include "gpt.h"
#include "log_stderr.h"
#include "train_dp.h"

static const char *const PROG = "train_gpt";
static const int32_t TOKENS_MAGIC = 20240520;
static const uint32_t STATE_MAGIC = 0x6b6c6e73; /* "kln" "s": optimizer state */

typedef struct options {
  const char *device, *data, *val_data, *load, *save, *resume;
  gpt_config cfg;
  size_t batch, seq, steps, run_steps, warmup, val_every, val_batches;
  float lr, weight_decay, clip;
  kiln_dtype precision;
  uint64_t seed;
  bool print_losses;
} options;

static const struct option_help {
  const char *flag, *help;
} HELP[] = {
    {"--data FILE", "training text (bytes) or llm.c token file (required)"},
    {"--val-data FILE", "validation file (default: the last tenth of --data)"},
    {"--load CKPT", "start from an llm.c checkpoint (fixes the model's shape)"},
    {"--resume CKPT", "continue a run saved with --save (weights, AdamW state)"},
    {"--save CKPT", "at the end: the model (llm.c format) and CKPT.state"},
    {"--layers N", "transformer blocks without --load (default 4)"},
    {"--heads N", "attention heads (default 4)"},
    {"--channels N", "model width, a multiple of --heads (default 128)"},
    {"--context N", "positions the model holds (default 64)"},
    {"--vocab N", "vocabulary without --load (default 256: bytes)"},
    {"--batch N", "sequences per step (default 8)"},
    {"--seq N", "tokens per sequence, at most the context (default: it)"},
    {"--steps N", "the schedule's length in optimizer steps (default 100)"},
    {"--run-steps N", "stop this run after N steps (jobs in chunks, with --save)"},
    {"--lr X", "peak learning rate (default 3e-4)"},
    {"--warmup N", "linear warm-up steps (default 10)"},
    {"--weight-decay X", "AdamW's decoupled weight decay (default 0.1)"},
    {"--clip X", "clip the gradients' global norm to X; 0: off (default 1)"},
    {"--val-every N", "validation loss every N steps; 0: never (default 20)"},
    {"--val-batches N", "batches per validation (default 4)"},
    {"--seed N", "initialisation seed (default 1337)"},
    {"--precision P", "f32 (default), or bf16 GEMMs/attention, f32 master weights"},
    {"--device SEL", "kiln device selector (default: KILN_DEVICE or the first)"},
    {"--print-losses", "one line 'step N loss X' per step, nothing else per step"},
    {"--help", "this text"},
};

static int usage(FILE *to, const char *why) {
  if (why)
    fprintf(to, "%s: %s\n", PROG, why);
  fprintf(to, "usage: %s --data FILE [options]\n", PROG);
  for (size_t i = 0; i < sizeof HELP / sizeof HELP[0]; i++)
    fprintf(to, "  %-18s %s\n", HELP[i].flag, HELP[i].help);
  return why ? 2 : 0;
}

static bool parse_size(const char *s, size_t *out) {
  char *end;
  errno = 0;
  unsigned long long v = strtoull(s, &end, 10);
  if (errno || end == s || *end || s[0] == '-')
    return false;
  *out = (size_t)v;
  return true;
}

static bool parse_float(const char *s, float *out) {
  char *end;
  errno = 0;
  double v = strtod(s, &end);
  if (errno || end == s || *end || !isfinite(v) || v < 0)
    return false;
  *out = (float)v;
  return true;
}

static int parse_args(int argc, char **argv, options *o) {
  *o = (options){.cfg = {.max_seq = 64, .vocab = 256, .padded_vocab = 256,
                         .layers = 4, .heads = 4, .channels = 128},
                 .batch = 8, .steps = 100, .warmup = 10, .val_every = 20,
                 .val_batches = 4, .lr = 3e-4f, .weight_decay = 0.1f,
                 .clip = 1.0f, .seed = 1337, .precision = KILN_F32};
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(a, "--help") || !strcmp(a, "-h"))
      return usage(stdout, NULL) - 1; /* -1: exit 0 */
    if (!strcmp(a, "--print-losses")) {
      o->print_losses = true;
      continue;
    }
    if (!v) {
      char why[128];
      snprintf(why, sizeof why, "%s needs a value", a);
      return usage(stderr, why);
    }
    i++;
    size_t n = 0;
    bool ok = true;
    if (!strcmp(a, "--data")) o->data = v;
    else if (!strcmp(a, "--val-data")) o->val_data = v;
    else if (!strcmp(a, "--load")) o->load = v;
    else if (!strcmp(a, "--resume")) o->resume = v;
    else if (!strcmp(a, "--save")) o->save = v;
    else if (!strcmp(a, "--device")) o->device = v;
    else if (!strcmp(a, "--precision"))
      o->precision = !strcmp(v, "bf16") ? KILN_BF16 : KILN_F32,
      ok = !strcmp(v, "bf16") || !strcmp(v, "f32");
    else if (!strcmp(a, "--lr")) ok = parse_float(v, &o->lr) && o->lr > 0;
    else if (!strcmp(a, "--weight-decay")) ok = parse_float(v, &o->weight_decay);
    else if (!strcmp(a, "--clip")) ok = parse_float(v, &o->clip);
    else if (!parse_size(v, &n)) ok = false;
    else if (!strcmp(a, "--layers")) o->cfg.layers = n, ok = n >= 1;
    else if (!strcmp(a, "--heads")) o->cfg.heads = n, ok = n >= 1;
    else if (!strcmp(a, "--channels")) o->cfg.channels = n, ok = n >= 1;
    else if (!strcmp(a, "--context")) o->cfg.max_seq = n, ok = n >= 1;
    else if (!strcmp(a, "--vocab")) o->cfg.vocab = n, ok = n >= 2;
    else if (!strcmp(a, "--batch")) o->batch = n, ok = n >= 1;
    else if (!strcmp(a, "--seq")) o->seq = n, ok = n >= 1;
    else if (!strcmp(a, "--steps")) o->steps = n;
    else if (!strcmp(a, "--run-steps")) o->run_steps = n, ok = n >= 1;
    else if (!strcmp(a, "--warmup")) o->warmup = n;
    else if (!strcmp(a, "--val-every")) o->val_every = n;
    else if (!strcmp(a, "--val-batches")) o->val_batches = n, ok = n >= 1;
    else if (!strcmp(a, "--seed")) o->seed = n;
    else {
      char why[300];
      snprintf(why, sizeof why, "unknown option %s", a);
      return usage(stderr, why);
    }
    if (!ok) {
      char why[300];
      snprintf(why, sizeof why, "bad value for %s: %s", a, v);
      return usage(stderr, why);
    }
  }
  if (!o->data)
    return usage(stderr, "--data FILE is required (any text; the King James "
                         "Bible: apt-get install bible-kjv && bible -f "
                         "Gen1:1-Rev22:21 > kjv.txt)");
  if (o->load && o->resume)
    return usage(stderr, "--load and --resume both name a checkpoint: give one");
  /* llm.c pads the vocabulary to a multiple of 128. */
  o->cfg.padded_vocab = (o->cfg.vocab + 127) / 128 * 128;
  return 0;
}

/* Tokens of a file: an llm.c token file by its magic, else its bytes. */
typedef struct tokens {
  uint32_t *v;
  size_t n;
} tokens;

static int load_tokens(const char *path, tokens *out, char *err, size_t n) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    snprintf(err, n, "%s: cannot open: %s", path, strerror(errno));
    return -1;
  }
  unsigned char *raw = NULL;
  size_t size = 0, cap = 0;
  for (;;) {
    if (size == cap) {
      cap = cap ? 2 * cap : 1 << 20;
      unsigned char *grown = realloc(raw, cap);
      if (!grown) {
        free(raw);
        fclose(f);
        snprintf(err, n, "%s: out of host memory", path);
        return -1;
      }
      raw = grown;
    }
    size_t got = fread(raw + size, 1, cap - size, f);
    size += got;
    if (got == 0)
      break;
  }
  int bad = ferror(f);
  fclose(f);
  int rc = -1;
  int32_t header[256];
  if (bad) {
    snprintf(err, n, "%s: read error", path);
  } else if (size >= 4 && memcmp(raw, &TOKENS_MAGIC, 4) == 0) {
    memcpy(header, raw, size < sizeof header ? size : sizeof header);
    size_t count = header[2] > 0 ? (size_t)header[2] : 0;
    if (size < sizeof header)
      snprintf(err, n, "%s: truncated llm.c token file header", path);
    else if (header[1] != 1)
      snprintf(err, n, "%s: llm.c token file version %d; this program reads "
               "version 1 (uint16 tokens)", path, (int)header[1]);
    else if (size != sizeof header + 2 * count)
      snprintf(err, n, "%s: its header promises %zu tokens, the file holds "
               "%zu bytes of them", path, count, size - sizeof header);
    else if ((out->v = malloc(count * sizeof *out->v)) == NULL)
      snprintf(err, n, "%s: out of host memory", path);
    else {
      for (size_t i = 0; i < count; i++) {
        uint16_t t;
        memcpy(&t, raw + sizeof header + 2 * i, 2);
        out->v[i] = t;
      }
      out->n = count;
      rc = 0;
    }
  } else if ((out->v = malloc((size ? size : 1) * sizeof *out->v)) == NULL) {
    snprintf(err, n, "%s: out of host memory", path);
  } else {
    for (size_t i = 0; i < size; i++)
      out->v[i] = raw[i];
    out->n = size;
    rc = 0;
  }
  free(raw);
  return rc;
}

/* The first token not below vocab, or SIZE_MAX. */
static size_t first_out_of_vocab(const tokens *t, size_t vocab) {
  for (size_t i = 0; i < t->n; i++)
    if (t->v[i] >= vocab)
      return i;
  return SIZE_MAX;
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Batch at *pos of t into inputs and targets (B T each), advancing *pos by
 * B T and wrapping so that a window of B T + 1 tokens always fits. */
static void next_batch(const tokens *t, size_t *pos, size_t bt, uint32_t *in,
                       uint32_t *target) {
  if (*pos + bt + 1 > t->n)
    *pos = 0;
  memcpy(in, t->v + *pos, bt * sizeof *in);
  memcpy(target, t->v + *pos + 1, bt * sizeof *target);
  *pos += bt;
}

static float lr_at(const options *o, size_t step) {
  if (step < o->warmup)
    return o->lr * (float)(step + 1) / (float)o->warmup;
  const float min_lr = 0.1f * o->lr;
  const double span = o->steps > o->warmup ? (double)(o->steps - o->warmup) : 1;
  const double progress = (double)(step - o->warmup) / span;
  return min_lr + 0.5f * (o->lr - min_lr) *
                      (float)(1.0 + cos(3.14159265358979323846 * progress));
}

/* The AdamW state beside a checkpoint: magic, step, data position, nparams
 * (u64 each), then m and v (f32). */
static int save_state(gpt *m, const char *ckpt, size_t pos, char *err,
                      size_t n) {
  char path[4096], tmp[4200];
  snprintf(path, sizeof path, "%s.state", ckpt);
  snprintf(tmp, sizeof tmp, "%s.tmp", path);
  uint64_t head[4] = {STATE_MAGIC, m->steps, pos, m->nparams};
  float *host = malloc(m->nparams * sizeof *host);
  FILE *f = host ? fopen(tmp, "wb") : NULL;
  int rc = -1;
  if (!f || fwrite(head, sizeof head, 1, f) != 1) {
    snprintf(err, n, "%s: cannot write: %s", tmp,
             host ? strerror(errno) : "out of host memory");
    goto out;
  }
  kiln_buffer *state[2] = {m->opt_m, m->opt_v};
  for (int i = 0; i < 2; i++) {
    if (kiln_buffer_read_sync(m->queue, &(kiln_range){state[i], 0, m->nparams,
                                                      KILN_F32},
                              host) != KILN_OK) {
      snprintf(err, n, "%s: %s", path, kiln_last_error());
      goto out;
    }
    if (fwrite(host, sizeof *host, m->nparams, f) != m->nparams) {
      snprintf(err, n, "%s: cannot write: %s", tmp, strerror(errno));
      goto out;
    }
  }
  int closed = fclose(f);
  f = NULL;
  if (closed != 0 || rename(tmp, path) != 0) {
    snprintf(err, n, "%s: cannot write: %s", path, strerror(errno));
    goto out;
  }
  rc = 0;
out:
  if (f)
    fclose(f);
  if (rc != 0)
    remove(tmp);
  free(host);
  return rc;
}

static int load_state(gpt *m, const char *ckpt, size_t *pos, char *err,
                      size_t n) {
  char path[4096];
  snprintf(path, sizeof path, "%s.state", ckpt);
  uint64_t head[4];
  float *host = malloc(m->nparams * sizeof *host);
  FILE *f = fopen(path, "rb");
  int rc = -1;
  if (!f || !host) {
    snprintf(err, n, "%s: cannot open: %s", path,
             host ? strerror(errno) : "out of host memory");
    goto out;
  }
  if (fread(head, sizeof head, 1, f) != 1 || head[0] != STATE_MAGIC ||
      head[3] != m->nparams) {
    snprintf(err, n, "%s: not the optimizer state of this checkpoint's model",
             path);
    goto out;
  }
  kiln_buffer *state[2] = {m->opt_m, m->opt_v};
  for (int i = 0; i < 2; i++) {
    if (fread(host, sizeof *host, m->nparams, f) != m->nparams) {
      snprintf(err, n, "%s: truncated", path);
      goto out;
    }
    if (kiln_buffer_write_sync(m->queue, host,
                               &(kiln_range){state[i], 0, m->nparams,
                                             KILN_F32}) != KILN_OK) {
      snprintf(err, n, "%s: %s", path, kiln_last_error());
      goto out;
    }
  }
  m->steps = (unsigned long)head[1];
  *pos = (size_t)head[2];
  rc = 0;
out:
  if (f)
    fclose(f);
  free(host);
  return rc;
}

/* Upload this rank's rows (sequences row0.. of the m->B it holds) of the
 * next batch of B sequences and run the forward pass with the loss (and the
 * backward pass); the loss, averaged over the ranks, read back (a blocking
 * read: the step's one synchronisation). */
static kiln_status step_loss(gpt *m, dp *par, const tokens *t, size_t *pos,
                             size_t B, size_t row0, size_t T, uint32_t *in,
                             uint32_t *target, bool backward, float *loss) {
  const size_t rows = m->B, bt = rows * T;
  next_batch(t, pos, B * T, in, target);
  kiln_status st = kiln_buffer_write_sync(
      m->queue, in + row0 * T, &(kiln_range){m->tokens, 0, bt, KILN_U32});
  if (st == KILN_OK)
    st = kiln_buffer_write_sync(m->queue, target + row0 * T,
                                &(kiln_range){m->targets, 0, bt, KILN_U32});
  if (st == KILN_OK)
    st = gpt_forward(m, rows, T, true);
  if (st == KILN_OK && backward)
    st = gpt_backward(m, rows, T);
  if (st == KILN_OK && backward)
    st = dp_average_grads(par, m->queue, m->grads, m->nparams);
  if (st == KILN_OK)
    st = dp_average_losses(par, m->queue, m->scalars, 1);
  if (st == KILN_OK)
    st = kiln_buffer_read_sync(m->queue,
                               &(kiln_range){m->scalars, 0, 1, KILN_F32}, loss);
  return st;
}

int main(int argc, char **argv) {
  log_to_stderr(); /* kiln never prints: its log on stderr */
  options o;
  int rc = parse_args(argc, argv, &o);
  if (rc)
    return rc < 0 ? 0 : rc;
  dp *par = NULL; /* data-parallel hooks; no-ops in the one-process build */
  if (dp_init(&argc, &argv, &par) != 0)
    return EXIT_FAILURE;
  const bool root = dp_rank(par) == 0; /* the rank that prints and saves */
  size_t row0 = 0, rows = 0;           /* this rank's sequences of a batch */
  char err[4400];
  tokens train = {0}, val = {0};
  kiln_context *ctx = NULL;
  kiln_queue *q = NULL;
  gpt *m = NULL;
  uint32_t *in = NULL, *target = NULL;
  rc = EXIT_FAILURE;
  const char *ckpt = o.load ? o.load : o.resume;
  if (ckpt && gpt_read_header(ckpt, &o.cfg, err, sizeof err) != 0)
    goto io_fail;
  if (o.cfg.channels % o.cfg.heads) {
    fprintf(stderr, "%s: %zu heads do not divide %zu channels\n", PROG,
            o.cfg.heads, o.cfg.channels);
    goto out;
  }
  const size_t T = o.seq ? o.seq : o.cfg.max_seq, B = o.batch;
  if (T > o.cfg.max_seq) {
    fprintf(stderr, "%s: --seq %zu is longer than the model's context of %zu "
            "positions\n", PROG, T, o.cfg.max_seq);
    goto out;
  }
  if (load_tokens(o.data, &train, err, sizeof err) != 0 ||
      (o.val_data && load_tokens(o.val_data, &val, err, sizeof err) != 0))
    goto io_fail;
  if (!o.val_data) { /* hold out the last tenth */
    size_t keep = train.n - train.n / 10;
    val.n = train.n - keep;
    val.v = malloc((val.n ? val.n : 1) * sizeof *val.v);
    if (!val.v) {
      fprintf(stderr, "%s: out of host memory\n", PROG);
      goto out;
    }
    memcpy(val.v, train.v + keep, val.n * sizeof *val.v);
    train.n = keep;
  }
  const tokens *sets[2] = {&train, &val};
  for (int s = 0; s < 2; s++) {
    size_t at = first_out_of_vocab(sets[s], o.cfg.vocab);
    if (at != SIZE_MAX) {
      fprintf(stderr, "%s: token %" PRIu32 " at position %zu of the %s data "
              "is outside the model's vocabulary of %zu (a tokenizer that does "
              "not match the checkpoint?)\n", PROG, sets[s]->v[at], at,
              s ? "validation" : "training", o.cfg.vocab);
      goto out;
    }
    if (sets[s]->n < B * T + 1 && (s == 0 || o.val_every)) {
      fprintf(stderr, "%s: the %s data holds %zu tokens, fewer than one batch "
              "of %zu x %zu + 1\n", PROG, s ? "validation" : "training",
              sets[s]->n, B, T);
      goto out;
    }
  }
  if (dp_slice(par, B, &row0, &rows) != KILN_OK)
    goto kiln_fail;
  in = malloc(B * T * sizeof *in);
  target = malloc(B * T * sizeof *target);
  if (!in || !target) {
    fprintf(stderr, "%s: out of host memory\n", PROG);
    goto out;
  }
  if (dp_context(par, o.device, &ctx) != KILN_OK ||
      kiln_queue_create(ctx, 0, &q) != KILN_OK ||
      gpt_create(ctx, q, &o.cfg, rows, T, o.precision, &m) != KILN_OK)
    goto kiln_fail;
  size_t pos = 0, val_pos = 0;
  if (ckpt) {
    if (gpt_load(m, ckpt, err, sizeof err) != 0 ||
        (o.resume && load_state(m, o.resume, &pos, err, sizeof err) != 0))
      goto io_fail;
  } else if (gpt_init(m, o.seed) != KILN_OK) {
    goto kiln_fail;
  }
  if (!o.print_losses && root)
    printf("%s: %s, %s, GPT-2 L %zu, heads %zu, C %zu, context %zu, vocab %zu "
           "(%zu parameters), batch %zu x %zu, %zu training and %zu validation "
           "tokens, %zu steps from step %lu\n",
           PROG, kiln_context_get_device_info(ctx)->name,
           kiln_dtype_name(o.precision), o.cfg.layers,
           o.cfg.heads, o.cfg.channels, o.cfg.max_seq, o.cfg.vocab, m->nparams,
           B, T, train.n, val.n, o.steps, m->steps);
  const bool bar = root && !o.print_losses && isatty(STDERR_FILENO);
  double total_s = 0.0;
  size_t timed = 0;
  float loss = NAN;
  const size_t first = m->steps;
  size_t todo = o.steps > first ? o.steps - first : 0;
  if (o.run_steps && o.run_steps < todo)
    todo = o.run_steps;
  for (size_t k = 0; k < todo; k++) {
    const size_t step = m->steps; /* the global step (resumes continue it) */
    const double t0 = now_s();
    if (step_loss(m, par, &train, &pos, B, row0, T, in, target, true,
                  &loss) != KILN_OK ||
        gpt_update(m, lr_at(&o, step), 0.9f, 0.95f, 1e-8f, o.weight_decay,
                   o.clip) != KILN_OK ||
        kiln_queue_finish(q) != KILN_OK)
      goto kiln_fail;
    const double dt = now_s() - t0;
    if (k > 0) { /* the first step builds the kernels */
      total_s += dt;
      timed++;
    }
    if (root && o.print_losses) {
      printf("step %zu loss %.9g\n", step + 1, (double)loss);
    } else if (root) {
      if (bar)
        fprintf(stderr, "\r%*s\r", 78, "");
      printf("step %zu/%zu: loss %.6f, lr %.3g, %.1f ms, %.0f tokens/s\n",
             step + 1, o.steps, (double)loss, (double)lr_at(&o, step),
             dt * 1e3, (double)(B * T) / dt);
    }
    if (o.val_every && (k + 1) % o.val_every == 0) {
      double sum = 0.0;
      for (size_t v = 0; v < o.val_batches; v++) {
        float vl;
        if (step_loss(m, par, &val, &val_pos, B, row0, T, in, target, false,
                      &vl) != KILN_OK)
          goto kiln_fail;
        sum += vl;
      }
      val_pos = 0; /* every validation sees the same batches */
      if (root)
        printf("step %zu: validation loss %.6f\n", step + 1,
               sum / (double)o.val_batches);
    }
    if (bar) {
      int done = (int)(40 * (k + 1) / todo);
      double left = timed ? total_s / (double)timed * (double)(todo - k - 1)
                          : 0.0;
      fprintf(stderr, "[%.*s%*s] %zu/%zu, loss %.4f, %.0f s left", done,
              "########################################", 40 - done, "", k + 1,
              todo, (double)loss, left);
    }
    fflush(stdout);
  }
  if (bar)
    fprintf(stderr, "\r%*s\r", 78, "");
  if (dp_check_params(par, q, m->params, m->nparams) != KILN_OK)
    goto kiln_fail;
  if (o.save && root &&
      (gpt_save(m, o.save, err, sizeof err) != 0 ||
       save_state(m, o.save, pos, err, sizeof err) != 0))
    goto io_fail;
  if (!o.print_losses && root)
    printf("summary: steps %zu, mean step %.3f ms, %.0f tokens/s, loss %.6f\n",
           todo, timed ? total_s / (double)timed * 1e3 : 0.0,
           timed ? (double)(B * T * timed) / total_s : 0.0, (double)loss);
  rc = EXIT_SUCCESS;
  goto out;
io_fail:
  fprintf(stderr, "%s: %s\n", PROG, err);
  goto out;
kiln_fail:
  fprintf(stderr, "%s: %s\n", PROG, kiln_last_error());
out:
  gpt_destroy(m);
  kiln_queue_destroy(q);
  kiln_context_destroy(ctx);
  free(train.v);
  free(val.v);
  free(in);
  free(target);
  dp_finish(par, rc == EXIT_SUCCESS);
  return rc;
}
