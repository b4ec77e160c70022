/* train_options.c: train_fashion_mnist's command line (train_options.h):
 * one table of the options, which --help prints and an unknown option is
 * looked up in, and the parser with each option's allowed values. */
#include "train_options.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fmnist_data.h"


/* Every option, one line each: --help prints them, and an unknown option
 * is looked up here. */
static const struct {
  const char *name, *value, *what;
} option_help[] = {
    {"--model", "mlp|cnn", "the network (default mlp)"},
    {"--device", "SEL", "device selector (as KILN_DEVICE: gpu, cpu, 0:1)"},
    {"--epochs", "N", "passes over the training set, 1-1000 (default 1)"},
    {"--precision", "f32|bf16", "weights' and activations' type (default f32)"},
    {"--optimizer", "adamw|sgd", "the update rule (default adamw)"},
    {"--lr", "X", "learning rate (default 0.001 adamw, 0.05 sgd)"},
    {"--weight-decay", "X", "decoupled weight decay, 0 or more (default 0)"},
    {"--schedule", "constant|cosine", "learning rate over the run (constant)"},
    {"--batch", "N", "examples per step, 1-65536 (default 256)"},
    {"--hidden", "N", "MLP hidden layers (1024) or CNN dense (128)"},
    {"--seed", "N", "seed of weights and batch order (default 42)"},
    {"--data", "DIR", "the gzip'd IDX files (default below)"},
    {"--limit", "N", "use the first N training examples only"},
    {"--test-limit", "N", "use the first N test examples only"},
    {"--steps", "N", "stop after N steps in all"},
    {"--print-losses", NULL, "print every step's loss"},
    {"--export", "DIR", "write init.f32, order.u32 and final.f32 to DIR"},
    {"--bench-infer", "RUNS", "time the forward pass at batch 1 and --batch"},
    {"--expect-accuracy", "PCT", "exit 1 when the test accuracy is below PCT"},
    {"--help", NULL, "this help (also -h)"},
};
#define OPTION_COUNT (sizeof option_help / sizeof option_help[0])

static void help(FILE *out) {
  fprintf(out, "usage: train_fashion_mnist [options]\n\n"
               "Train a 784-1024-1024-10 MLP (or, with --model cnn, a small "
               "CNN) on\nFashion-MNIST with kiln's ops; print each epoch's "
               "loss, test accuracy and time.\n\n"
               "options:\n");
  for (size_t i = 0; i < OPTION_COUNT; i++) {
    char left[64];
    snprintf(left, sizeof left, "%s%s%s", option_help[i].name,
             option_help[i].value ? " " : "", option_help[i].value ? option_help[i].value : "");
    fprintf(out, "  %-26s %s\n", left, option_help[i].what);
  }
  fprintf(out, "\ndefault data directory: %s\n"
               "exit status: 0 success, 1 failure, 2 usage error.\n",
          FMNIST_DEFAULT_DIR);
}

/* A usage error: the reason, then where to look. */
static int usage(const char *why) {
  fprintf(stderr, "train_fashion_mnist: %s (see train_fashion_mnist --help)\n",
          why);
  return 2;
}

/* The option called name, or NULL. */
static bool known_option(const char *name, bool *takes_value) {
  for (size_t i = 0; i < OPTION_COUNT; i++)
    if (!strcmp(name, option_help[i].name)) {
      *takes_value = option_help[i].value != NULL;
      return true;
    }
  return false;
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

static bool parse_float(const char *s, double *out) {
  char *end;
  errno = 0;
  double v = strtod(s, &end);
  if (errno || end == s || *end || !isfinite(v))
    return false;
  *out = v;
  return true;
}

int train_parse_args(int argc, char **argv, train_options *o) {
  *o = (train_options){.data = FMNIST_DEFAULT_DIR,
                 .epochs = 1,
                 .precision = KILN_F32,
                 .hyper = {.optimizer = MODEL_ADAMW, .lr = 1e-3f,
                           .momentum = 0.9f, .beta1 = 0.9f, .beta2 = 0.999f,
                           .eps = 1e-8f, .weight_decay = 0.0f},
                 .kind = &mlp_kind,
                 .batch = 256,
                 .seed = 42};
  bool lr_given = false;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    size_t n;
    double d;
    bool takes_value = false;
    char why[256];
    if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
      help(stdout);
      return -1;
    }
    if (!known_option(a, &takes_value)) {
      snprintf(why, sizeof why, "unknown option '%s'", a);
      return usage(why);
    }
    if (!strcmp(a, "--print-losses")) {
      o->print_losses = true;
      continue;
    }
    if (!v) {
      snprintf(why, sizeof why, "%s needs a value", a);
      return usage(why);
    }
    i++;
    if (!strcmp(a, "--device"))
      o->device = v;
    else if (!strcmp(a, "--model") && model_kind_find(v))
      o->kind = model_kind_find(v);
    else if (!strcmp(a, "--data"))
      o->data = v;
    else if (!strcmp(a, "--export"))
      o->export_dir = v;
    else if (!strcmp(a, "--epochs") && parse_size(v, &n) && n >= 1 && n <= 1000)
      o->epochs = (int)n;
    else if (!strcmp(a, "--precision") && !strcmp(v, "f32"))
      o->precision = KILN_F32;
    else if (!strcmp(a, "--precision") && !strcmp(v, "bf16"))
      o->precision = KILN_BF16;
    else if (!strcmp(a, "--optimizer") && !strcmp(v, "adamw"))
      o->hyper.optimizer = MODEL_ADAMW;
    else if (!strcmp(a, "--optimizer") && !strcmp(v, "sgd"))
      o->hyper.optimizer = MODEL_SGD;
    else if (!strcmp(a, "--lr") && parse_float(v, &d) && d > 0) {
      o->hyper.lr = (float)d;
      lr_given = true;
    } else if (!strcmp(a, "--schedule") && !strcmp(v, "constant"))
      o->cosine = false;
    else if (!strcmp(a, "--schedule") && !strcmp(v, "cosine"))
      o->cosine = true;
    else if (!strcmp(a, "--weight-decay") && parse_float(v, &d) && d >= 0)
      o->hyper.weight_decay = (float)d;
    else if (!strcmp(a, "--batch") && parse_size(v, &n) && n >= 1 &&
               n <= 65536)
      o->batch = n;
    else if (!strcmp(a, "--hidden") && parse_size(v, &n) && n >= 1 &&
             n <= 65536)
      o->hidden = n;
    else if (!strcmp(a, "--seed") && parse_size(v, &n))
      o->seed = n;
    else if (!strcmp(a, "--limit") && parse_size(v, &n))
      o->limit = n;
    else if (!strcmp(a, "--test-limit") && parse_size(v, &n))
      o->test_limit = n;
    else if (!strcmp(a, "--steps") && parse_size(v, &n) && n >= 1)
      o->max_steps = n;
    else if (!strcmp(a, "--bench-infer") && parse_size(v, &n) && n >= 1)
      o->bench_runs = n;
    else if (!strcmp(a, "--expect-accuracy") && parse_float(v, &d))
      o->expect_accuracy = d;
    else {
      snprintf(why, sizeof why, "bad value for %s: '%s'", a, v);
      return usage(why);
    }
  }
  if (!lr_given && o->hyper.optimizer == MODEL_SGD)
    o->hyper.lr = 0.05f;
  return 0;
}
