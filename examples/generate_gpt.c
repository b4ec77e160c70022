/* generate_gpt.c: sample text from a GPT-2 checkpoint (llm.c's model file,
 * e.g. one that train_gpt --save wrote) with kiln, through the key/value
 * cache (gpt_decode): the prompt is read once, then each new token attends
 * to the cached keys and values of every position before it.
 *
 *   generate_gpt --load CKPT [--prompt TEXT] [--tokens N] [--temperature X]
 *                [--top-k K] [--seed N] [--batch B] [--tokenizer FILE]
 *                [--precision f32|bf16] [--device SEL]
 *
 * A byte-level model (vocabulary 256, as train_gpt makes from text) prints
 * text; another prints token ids, or text through llm.c's tokenizer file
 * (gpt2_tokenizer.bin: 256 uint32 header, magic 20240328, then each token's
 * length byte and bytes). --batch B samples B continuations of the prompt
 * at once (each its own stream of the seed). It reports the time to the
 * first token (the prompt's pass and one sample) and the tokens per second
 * of the rest. Vocabulary mismatches between the checkpoint and the
 * tokenizer are refused.
 *
 * Build: cc generate_gpt.c gpt.c $(pkg-config --cflags --libs kiln) -lm */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <kiln/kiln.h>

#include "gpt.h"
#include "log_stderr.h"

static const char *const PROG = "generate_gpt";

typedef struct options {
  const char *load, *prompt, *tokenizer, *device;
  size_t tokens, top_k, batch;
  float temperature;
  kiln_dtype precision;
  uint64_t seed;
} options;

static int usage(FILE *to, const char *why) {
  if (why)
    fprintf(to, "%s: %s\n", PROG, why);
  fprintf(to,
          "usage: %s --load CKPT [options]\n"
          "  --load CKPT        llm.c model file (required)\n"
          "  --prompt TEXT      the start (default: a newline); bytes, or\n"
          "                     token ids '1,2,3' for a model of another vocabulary\n"
          "  --tokens N         tokens to generate (default 64; prompt + N <= context)\n"
          "  --temperature X    softmax temperature; 0: always the likeliest (default 1)\n"
          "  --top-k K          sample among the K likeliest; 0: all (default 40)\n"
          "  --seed N           sampling seed (default 1)\n"
          "  --batch B          continuations sampled at once, 1..64 (default 1)\n"
          "  --tokenizer FILE   llm.c tokenizer file, to print text\n"
          "  --precision P      f32, or bf16 GEMMs and attention (default f32)\n"
          "  --device SEL       kiln device selector\n"
          "  --help             this text\n",
          PROG);
  return why ? 2 : 0;
}

static int parse_args(int argc, char **argv, options *o) {
  *o = (options){.prompt = "\n", .tokens = 64, .top_k = 40, .batch = 1,
                 .temperature = 1.0f, .seed = 1, .precision = KILN_F32};
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(a, "--help") || !strcmp(a, "-h"))
      return usage(stdout, NULL) - 1;
    if (!v)
      return usage(stderr, "an option is missing its value");
    i++;
    char *end;
    errno = 0;
    double d = strtod(v, &end);
    bool number = !errno && end != v && !*end && isfinite(d) && d >= 0;
    if (!strcmp(a, "--load")) o->load = v;
    else if (!strcmp(a, "--prompt")) o->prompt = v;
    else if (!strcmp(a, "--tokenizer")) o->tokenizer = v;
    else if (!strcmp(a, "--device")) o->device = v;
    else if (!strcmp(a, "--precision") && !strcmp(v, "f32"))
      o->precision = KILN_F32;
    else if (!strcmp(a, "--precision") && !strcmp(v, "bf16"))
      o->precision = KILN_BF16;
    else if (!strcmp(a, "--temperature") && number) o->temperature = (float)d;
    else if (!strcmp(a, "--tokens") && number && d >= 1) o->tokens = (size_t)d;
    else if (!strcmp(a, "--top-k") && number) o->top_k = (size_t)d;
    else if (!strcmp(a, "--batch") && number && d >= 1 && d <= 64)
      o->batch = (size_t)d;
    else if (!strcmp(a, "--seed") && number) o->seed = (uint64_t)d;
    else {
      char why[300];
      snprintf(why, sizeof why, "bad option or value: %s %s", a, v);
      return usage(stderr, why);
    }
  }
  if (!o->load)
    return usage(stderr, "--load CKPT is required");
  return 0;
}

/* llm.c's tokenizer file: the text of every token. */
typedef struct tokenizer {
  size_t count;
  char **text;
} tokenizer;

static int tokenizer_load(const char *path, size_t vocab, tokenizer *t,
                          char *err, size_t n) {
  FILE *f = fopen(path, "rb");
  uint32_t header[256];
  if (!f) {
    snprintf(err, n, "%s: cannot open: %s", path, strerror(errno));
    return -1;
  }
  int rc = -1;
  if (fread(header, sizeof header, 1, f) != 1 || header[0] != 20240328) {
    snprintf(err, n, "%s: not an llm.c tokenizer file", path);
    goto out;
  }
  if (header[2] != vocab) {
    snprintf(err, n, "%s: a vocabulary of %u tokens; the checkpoint's has %zu",
             path, header[2], vocab);
    goto out;
  }
  t->text = calloc(vocab, sizeof *t->text);
  if (!t->text)
    goto out;
  for (t->count = 0; t->count < vocab; t->count++) {
    unsigned char len;
    char *s;
    if (fread(&len, 1, 1, f) != 1 || !(s = malloc((size_t)len + 1)) ||
        fread(s, 1, len, f) != len) {
      snprintf(err, n, "%s: truncated at token %zu", path, t->count);
      goto out;
    }
    s[len] = '\0';
    t->text[t->count] = s;
  }
  rc = 0;
out:
  fclose(f);
  return rc;
}

static void tokenizer_free(tokenizer *t) {
  for (size_t i = 0; i < t->count; i++)
    free(t->text[i]);
  free(t->text);
}

/* The prompt as tokens: bytes for a byte-level model, else ids "1,2,3". */
static size_t prompt_tokens(const char *prompt, size_t vocab, uint32_t *out,
                            size_t cap, char *err, size_t n) {
  size_t count = 0;
  if (vocab == 256) {
    for (const unsigned char *p = (const unsigned char *)prompt;
         *p && count < cap; p++)
      out[count++] = *p;
  } else {
    const char *p = prompt;
    while (*p && count < cap) {
      char *end;
      unsigned long v = strtoul(p, &end, 10);
      if (end == p || v >= vocab) {
        snprintf(err, n, "the prompt of a %zu-token model is token ids below "
                 "%zu, separated by commas: '%s'", vocab, vocab, prompt);
        return 0;
      }
      out[count++] = (uint32_t)v;
      p = *end == ',' ? end + 1 : end;
    }
  }
  if (count == 0)
    snprintf(err, n, "the prompt is empty");
  return count;
}

static uint64_t next_random(uint64_t *state) {
  uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

/* Sample a token from logits (V): temperature, then the top k. */
static uint32_t sample(const float *logits, size_t V, float temperature,
                       size_t top_k, uint64_t *rng, float *scratch) {
  size_t best = 0;
  for (size_t i = 1; i < V; i++)
    if (logits[i] > logits[best])
      best = i;
  if (temperature == 0.0f)
    return (uint32_t)best;
  /* The k-th largest logit as a threshold (k passes of O(V): small k). */
  float cut = -INFINITY;
  if (top_k > 0 && top_k < V) {
    memcpy(scratch, logits, V * sizeof *scratch);
    for (size_t k = 0; k < top_k; k++) {
      size_t at = 0;
      for (size_t i = 1; i < V; i++)
        if (scratch[i] > scratch[at])
          at = i;
      cut = scratch[at];
      scratch[at] = -INFINITY;
    }
  }
  double sum = 0.0;
  for (size_t i = 0; i < V; i++)
    sum += logits[i] >= cut ? exp((logits[i] - logits[best]) / temperature) : 0;
  double u = (double)(next_random(rng) >> 11) * 0x1.0p-53 * sum, acc = 0.0;
  for (size_t i = 0; i < V; i++) {
    if (logits[i] < cut)
      continue;
    acc += exp((logits[i] - logits[best]) / temperature);
    if (acc > u)
      return (uint32_t)i;
  }
  return (uint32_t)best;
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void print_token(uint32_t t, size_t vocab, const tokenizer *tok) {
  if (tok->count)
    fputs(tok->text[t], stdout);
  else if (vocab == 256)
    putchar((int)t);
  else
    printf("%u ", t);
}

int main(int argc, char **argv) {
  log_to_stderr(); /* kiln never prints: its log on stderr */
  options o;
  int rc = parse_args(argc, argv, &o);
  if (rc)
    return rc < 0 ? 0 : rc;
  char err[4400];
  gpt_config cfg;
  tokenizer tok = {0};
  kiln_context *ctx = NULL;
  kiln_queue *q = NULL;
  gpt *m = NULL;
  uint32_t *seqs = NULL, *in = NULL;
  float *logits = NULL, *scratch = NULL;
  rc = EXIT_FAILURE;
  if (gpt_read_header(o.load, &cfg, err, sizeof err) != 0 ||
      (o.tokenizer &&
       tokenizer_load(o.tokenizer, cfg.vocab, &tok, err, sizeof err) != 0))
    goto io_fail;
  const size_t B = o.batch, V = cfg.vocab, T = cfg.max_seq;
  seqs = malloc(B * T * sizeof *seqs);
  if (!seqs) {
    fprintf(stderr, "%s: out of host memory\n", PROG);
    goto out;
  }
  const size_t np = prompt_tokens(o.prompt, V, seqs, T, err, sizeof err);
  if (np == 0)
    goto io_fail;
  /* The most rows one pass reads is the prompt's B x np: activations and
   * logits for those, not for the whole context (B x 1024 rows of GPT-2's
   * training activations would be 10 GB at batch 8); the key/value cache
   * holds the context. */
  in = malloc(B * np * sizeof *in);
  logits = malloc(B * np * V * sizeof *logits);
  scratch = malloc(V * sizeof *scratch);
  if (!in || !logits || !scratch) {
    fprintf(stderr, "%s: out of host memory\n", PROG);
    goto out;
  }
  if (np + o.tokens > T) {
    fprintf(stderr, "%s: a prompt of %zu tokens and %zu more exceed the "
            "model's context of %zu\n", PROG, np, o.tokens, T);
    goto out;
  }
  if (kiln_context_create_default(o.device, &ctx) != KILN_OK ||
      kiln_queue_create(ctx, 0, &q) != KILN_OK ||
      gpt_create(ctx, q, &cfg, B, np, o.precision, &m) != KILN_OK)
    goto kiln_fail;
  if (gpt_load(m, o.load, err, sizeof err) != 0)
    goto io_fail;
  uint64_t rng[64];
  for (size_t b = 0; b < B; b++)
    rng[b] = o.seed * 0x100000001b3ull + b;
  for (size_t b = 1; b < B; b++)
    memcpy(seqs + b * T, seqs, np * sizeof *seqs);
  if (B == 1)
    for (size_t i = 0; i < np; i++)
      print_token(seqs[i], V, &tok);
  const double t0 = now_s();
  double first = 0.0;
  size_t pos = 0, n = np;
  for (size_t k = 0; k < o.tokens; k++) {
    /* The new tokens of each sequence: the prompt, then one at a time. */
    for (size_t b = 0; b < B; b++)
      memcpy(in + b * n, seqs + b * T + pos, n * sizeof *in);
    size_t off;
    kiln_buffer *lb = gpt_logits(m, &off);
    if (kiln_buffer_write_sync(q, in,
                               &(kiln_range){m->tokens, 0, B * n, KILN_U32}) !=
            KILN_OK ||
        gpt_decode(m, B, pos, n) != KILN_OK ||
        kiln_buffer_read_sync(q, &(kiln_range){lb, off, B * n * V, KILN_F32},
                              logits) != KILN_OK)
      goto kiln_fail;
    for (size_t b = 0; b < B; b++) {
      uint32_t t = sample(logits + (b * n + n - 1) * V, V, o.temperature,
                          o.top_k, &rng[b], scratch);
      seqs[b * T + pos + n] = t;
      if (B == 1) {
        print_token(t, V, &tok);
        fflush(stdout);
      }
    }
    if (k == 0)
      first = now_s() - t0;
    pos += n;
    n = 1;
  }
  const double total = now_s() - t0;
  if (B > 1)
    for (size_t b = 0; b < B; b++) {
      printf("--- sample %zu\n", b + 1);
      for (size_t i = 0; i < np + o.tokens; i++)
        print_token(seqs[b * T + i], V, &tok);
      putchar('\n');
    }
  fprintf(stderr, "\n%s: %s, batch %zu: first token after %.1f ms (a prompt "
          "of %zu), then %.1f tokens/s per sequence (%.1f in all)\n", PROG,
          kiln_context_get_device_info(ctx)->name, B, first * 1e3, np,
          o.tokens > 1 ? (double)(o.tokens - 1) / (total - first) : 0.0,
          o.tokens > 1 ? (double)(B * (o.tokens - 1)) / (total - first) : 0.0);
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
  tokenizer_free(&tok);
  free(seqs);
  free(in);
  free(logits);
  free(scratch);
  return rc;
}
