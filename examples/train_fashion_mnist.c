/* train_fashion_mnist.c: train a network on Fashion-MNIST with kiln's op
 * library, and report per epoch the mean training loss, the test accuracy
 * and the time. --model mlp (the default) is a multilayer perceptron (784 ->
 * 1024 -> 1024 -> 10, ReLU; mlp.c), --model cnn a small convolutional
 * network (cnn.c); both behind model.h, so every flag below means the same
 * for either.
 *
 *   train_fashion_mnist [--model mlp|cnn] [--device SEL] [--epochs N]
 *                       [--precision f32|bf16]
 *                       [--optimizer adamw|sgd] [--lr X] [--weight-decay X]
 *                       [--schedule constant|cosine]
 *                       [--batch N] [--hidden N] [--seed N] [--data DIR]
 *                       [--limit N] [--test-limit N]
 *                       [--steps N] [--print-losses] [--export DIR]
 *                       [--bench-infer RUNS] [--expect-accuracy PCT]
 *
 * The data is the gzip'd IDX files of Debian's package dataset-fashion-mnist
 * (fmnist_data.c), pixels scaled to [0, 1]. Each epoch visits the training
 * set in an order shuffled from the seed and drops the last partial batch;
 * the same seed gives the same weights, batches and so the same losses on
 * one device. While the device computes a step, the host prepares the next
 * batch and a second queue uploads it (two input slots, ordered by events),
 * so the compute queue never waits for a transfer it could have overlapped.
 *
 * --hidden N gives the MLP's hidden layers (the CNN's dense layer) N units
 * instead of the default: a small network for slow devices (the
 * PoCL-against-rusticl test uses 64, where Mesa's llvmpipe takes about a
 * minute a step at full size). --steps N stops after N steps in all;
 * --export DIR writes the initial weights (init.f32: every parameter, in the
 * model's layout: mlp.h, cnn.h), the batch order
 * (order.u32: the example indexes of each step used, in order) and the final
 * weights (final.f32), which examples/torch_side_by_side.py reads to train the
 * same network in PyTorch. --bench-infer RUNS times the trained network's
 * forward pass at batch 1 and 256 (upload, forward, read of the logits).
 * --expect-accuracy PCT exits 1 when the final test accuracy is below PCT
 * (the test suite's short run uses it).
 *
 * Data-parallel mode (train_dp.h): train_fashion_mnist_mpi, the same source
 * built with -DKILN_TRAIN_MPI and train_mpi.c, runs under `mpirun -np N`:
 * each rank trains on N-th of every batch (--batch a multiple of N) and the
 * gradients are averaged over the ranks before every step; rank 0 prints,
 * and at the end the ranks check that their models are bit-identical.
 *
 * Build: cc train_fashion_mnist.c model.c mlp.c cnn.c fmnist_data.c \
 *          $(pkg-config --cflags --libs kiln zlib) -lm
 *   (data-parallel: mpicc -DKILN_TRAIN_MPI ... train_mpi.c, and kiln-mpi) */
/* clock_gettime and isatty are POSIX, not C11. */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <kiln/kiln.h>

#include "fmnist_data.h"
#include "log_stderr.h"
#include "model.h"
#include "train_dp.h"

typedef struct options {
  const char *device, *data, *export_dir;
  int epochs;
  kiln_dtype precision;
  const model_kind *kind;
  model_hyper hyper;
  size_t batch, hidden, limit, test_limit, max_steps, bench_runs;
  uint64_t seed;
  bool print_losses;
  bool cosine; /* --schedule cosine */
  double expect_accuracy;
} options;

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

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

static int parse_args(int argc, char **argv, options *o) {
  *o = (options){.data = FMNIST_DEFAULT_DIR,
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

/* splitmix64: the host's generator for the batch order (the weights come
 * from kiln's Philox op). */
static uint64_t next_random(uint64_t *state) {
  uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

/* Fisher-Yates shuffle of 0..n-1 for one epoch, from the seed and the
 * epoch's number alone. */
static void shuffle(uint32_t *order, size_t n, uint64_t seed, int epoch) {
  uint64_t state = seed * 0x100000001b3ull + (uint64_t)epoch;
  for (size_t i = 0; i < n; i++)
    order[i] = (uint32_t)i;
  for (size_t i = n; i > 1; i--) {
    size_t j = (size_t)(next_random(&state) % i);
    uint32_t t = order[i - 1];
    order[i - 1] = order[j];
    order[j] = t;
  }
}

/* Pixels as f32 in [0, 1] and labels as u32, for examples idx[0..rows). */
static void stage(const fmnist_set *set, const uint32_t *idx, size_t rows,
                  float *x, uint32_t *labels) {
  for (size_t r = 0; r < rows; r++) {
    const uint8_t *img = set->images + (size_t)idx[r] * FMNIST_PIXELS;
    for (size_t p = 0; p < FMNIST_PIXELS; p++)
      x[r * FMNIST_PIXELS + p] = (float)img[p] * (1.0f / 255.0f);
    labels[r] = set->labels[idx[r]];
  }
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static double median(double *v, size_t n) {
  if (n == 0)
    return 0.0;
  qsort(v, n, sizeof *v, cmp_double);
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* The progress line on a terminal: the epoch's bar, the running mean loss
 * of the epoch (NAN: not read yet) and the time left for the whole run. */
static void progress(int epoch, int epochs, size_t done, size_t total,
                     double loss, double left_s) {
  int width = 20, fill = (int)(width * done / (total ? total : 1));
  char loss_text[32] = "-", left[32] = "-";
  if (isfinite(loss))
    snprintf(loss_text, sizeof loss_text, "%.4f", loss);
  if (left_s >= 0) {
    long sec = (long)(left_s + 0.5);
    if (sec >= 3600)
      snprintf(left, sizeof left, "%ld:%02ld:%02ld", sec / 3600, sec / 60 % 60,
               sec % 60);
    else
      snprintf(left, sizeof left, "%ld:%02ld", sec / 60, sec % 60);
  }
  fprintf(stderr, "\repoch %d/%d [%.*s%*s] %zu/%zu loss %s, %s left\033[K",
          epoch, epochs, fill, "####################", width - fill, "", done,
          total, loss_text, left);
  fflush(stderr);
}

static int write_file(const char *dir, const char *name, const void *data,
                      size_t bytes) {
  char path[4096];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  /* O_NONBLOCK: a FIFO with no reader at the path is refused (ENXIO)
   * instead of hanging the program in open. */
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_NONBLOCK | O_CLOEXEC,
                0644);
  if (fd >= 0)
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  FILE *f = fd >= 0 ? fdopen(fd, "wb") : NULL;
  if (!f || fwrite(data, 1, bytes, f) != bytes || fclose(f) != 0) {
    const int err = errno;
    fprintf(stderr, "train_fashion_mnist: cannot write %s: %s\n", path,
            err == ENXIO ? "a FIFO that no process reads" : strerror(err));
    if (!f && fd >= 0)
      close(fd);
    return -1;
  }
  return 0;
}

/* Everything the run owns on the device, released in one place. */
typedef struct run {
  kiln_context *ctx;
  kiln_queue *q, *upload;
  model *model;
  kiln_buffer *x[2], *labels[2]; /* the two input slots */
  kiln_buffer *test_x, *test_labels, *losses, *correct;
  float *host_x[2];
  uint32_t *host_labels[2];
} run;

static void run_free(run *r) {
  kiln_queue_destroy(r->upload);
  kiln_queue_destroy(r->q);
  if (r->model)
    r->model->kind->destroy(r->model);
  for (int s = 0; s < 2; s++) {
    kiln_buffer_destroy(r->x[s]);
    kiln_buffer_destroy(r->labels[s]);
    free(r->host_x[s]);
    free(r->host_labels[s]);
  }
  kiln_buffer_destroy(r->test_x);
  kiln_buffer_destroy(r->test_labels);
  kiln_buffer_destroy(r->losses);
  kiln_buffer_destroy(r->correct);
  kiln_context_destroy(r->ctx);
}

#define TRY(call, label)                                                       \
  do {                                                                         \
    if ((call) != KILN_OK)                                                     \
      goto label;                                                              \
  } while (0)

/* Test accuracy in percent (a negative value on a kiln error). */
static double evaluate(run *r, size_t count, size_t batch) {
  uint32_t correct = 0;
  const uint32_t zero = 0;
  TRY(kiln_fill(r->q, &(kiln_range){r->correct, 0, 1, KILN_U32}, &zero, 0, NULL,
                NULL),
      fail);
  for (size_t start = 0; start < count; start += batch) {
    size_t rows = count - start < batch ? count - start : batch;
    TRY(r->model->kind->forward(r->model, rows, r->test_x,
                                start * FMNIST_PIXELS, false, 0, NULL),
        fail);
    TRY(model_count_correct(r->model, rows, r->test_labels, start, r->correct,
                            0),
        fail);
  }
  TRY(kiln_buffer_read_sync(r->q, &(kiln_range){r->correct, 0, 1, KILN_U32}, &correct),
      fail);
  return 100.0 * correct / (double)count;
fail:
  return -1.0;
}

/* Median latency in ms of one inference at `rows` rows: upload, forward,
 * read the logits back (what a caller serving requests waits for). */
static double bench_infer(run *r, const fmnist_set *test, size_t rows,
                          size_t runs) {
  uint32_t *idx = malloc(rows * sizeof *idx);
  double *times = malloc((runs + 1) * sizeof *times), result = -1.0;
  float *logits = malloc(rows * FMNIST_CLASSES * sizeof *logits);
  if (!idx || !times || !logits)
    goto done;
  for (size_t i = 0; i < rows; i++)
    idx[i] = (uint32_t)(i % test->count);
  stage(test, idx, rows, r->host_x[0], r->host_labels[0]);
  for (size_t k = 0; k <= runs; k++) { /* run 0 warms up */
    double t0 = now_s();
    TRY(kiln_buffer_write(r->q, r->host_x[0], &(kiln_range){r->x[0], 0, rows * FMNIST_PIXELS, KILN_F32}, 0, NULL, NULL),
        done);
    TRY(r->model->kind->forward(r->model, rows, r->x[0], 0, false, 0, NULL),
        done);
    TRY(kiln_buffer_read_sync(r->q, &(kiln_range){r->model->logits, 0, rows * FMNIST_CLASSES, KILN_F32}, logits),
        done);
    times[k] = (now_s() - t0) * 1e3;
  }
  result = median(times + 1, runs);
done:
  free(idx);
  free(times);
  free(logits);
  return result;
}

int main(int argc, char **argv) {
  log_to_stderr(); /* kiln never prints: its log on stderr */
  options o;
  int rc = parse_args(argc, argv, &o);
  if (rc)
    return rc < 0 ? EXIT_SUCCESS : rc; /* < 0: --help */
  dp *par = NULL; /* data-parallel hooks; no-ops in the one-process build */
  if (dp_init(&argc, &argv, &par) != 0)
    return EXIT_FAILURE;
  const bool root = dp_rank(par) == 0; /* the rank that prints */
  size_t row0 = 0, rows = 0; /* this rank's rows of every batch */
  char err[4352];
  fmnist_set train = {0}, test = {0};
  run r = {0};
  uint32_t *order = NULL, *used = NULL;
  float *step_loss = NULL, *weights = NULL;
  double *step_ms = NULL;
  kiln_event *up[2] = {NULL, NULL}, *done[2] = {NULL, NULL};
  rc = EXIT_FAILURE;

  /* The data first: a missing or damaged file is reported before any
   * device is touched. */
  if (fmnist_load(o.data, "train", o.limit, &train, err, sizeof err) != 0 ||
      fmnist_load(o.data, "t10k", o.test_limit, &test, err, sizeof err) != 0) {
    fprintf(stderr, "train_fashion_mnist: %s\n", err);
    goto out;
  }
  if (train.count < o.batch) {
    fprintf(stderr, "train_fashion_mnist: %zu training examples, fewer than "
            "one batch of %zu\n", train.count, o.batch);
    goto out;
  }
  const size_t B = o.batch, steps_per_epoch = train.count / B;
  TRY(dp_slice(par, B, &row0, &rows), kiln_fail);
  size_t total_steps = steps_per_epoch * (size_t)o.epochs;
  if (o.max_steps && o.max_steps < total_steps)
    total_steps = o.max_steps;
  order = malloc(train.count * sizeof *order);
  used = malloc(total_steps * B * sizeof *used);
  step_loss = malloc(steps_per_epoch * sizeof *step_loss);
  step_ms = malloc(total_steps * sizeof *step_ms);
  for (int s = 0; s < 2; s++) {
    r.host_x[s] = malloc(B * FMNIST_PIXELS * sizeof(float));
    r.host_labels[s] = malloc(B * sizeof(uint32_t));
  }
  if (!order || !used || !step_loss || !step_ms || !r.host_x[0] ||
      !r.host_x[1] || !r.host_labels[0] || !r.host_labels[1]) {
    fprintf(stderr, "train_fashion_mnist: out of host memory\n");
    goto out;
  }
  /* The whole run's batch order, fixed before the first step. */
  for (int e = 0; e < o.epochs; e++) {
    size_t first = (size_t)e * steps_per_epoch * B;
    if (first >= total_steps * B)
      break;
    shuffle(order, train.count, o.seed, e);
    size_t take = total_steps * B - first;
    if (take > steps_per_epoch * B)
      take = steps_per_epoch * B;
    memcpy(used + first, order, take * sizeof *used);
  }

  TRY(dp_context(par, o.device, &r.ctx), kiln_fail);
  TRY(kiln_queue_create(r.ctx, 0, &r.q), kiln_fail);
  TRY(kiln_queue_create(r.ctx, 0, &r.upload), kiln_fail);
  TRY(o.kind->create(r.ctx, r.q, B, o.hidden, o.precision, &r.model),
      kiln_fail);
  for (int s = 0; s < 2; s++) {
    TRY(kiln_buffer_create(r.ctx, B * FMNIST_PIXELS * 4, KILN_MEM_READ_ONLY,
                           &r.x[s]), kiln_fail);
    TRY(kiln_buffer_create(r.ctx, B * 4, KILN_MEM_READ_ONLY, &r.labels[s]),
        kiln_fail);
  }
  TRY(kiln_buffer_create(r.ctx, test.count * FMNIST_PIXELS * 4,
                         KILN_MEM_READ_ONLY, &r.test_x), kiln_fail);
  TRY(kiln_buffer_create(r.ctx, test.count * 4, KILN_MEM_READ_ONLY,
                         &r.test_labels), kiln_fail);
  TRY(kiln_buffer_create(r.ctx, steps_per_epoch * 4, KILN_MEM_READ_WRITE,
                         &r.losses), kiln_fail);
  TRY(kiln_buffer_create(r.ctx, 4, KILN_MEM_READ_WRITE, &r.correct),
      kiln_fail);
  {
    /* The test set goes up once, converted like the training batches. */
    float *tx = malloc(test.count * FMNIST_PIXELS * sizeof *tx);
    uint32_t *tl = malloc(test.count * sizeof *tl), *ti = malloc(test.count * 4);
    kiln_status st = KILN_ERR_OUT_OF_HOST_MEMORY;
    if (tx && tl && ti) {
      for (size_t i = 0; i < test.count; i++)
        ti[i] = (uint32_t)i;
      stage(&test, ti, test.count, tx, tl);
      st = kiln_buffer_write_sync(r.q, tx, &(kiln_range){r.test_x, 0, test.count * FMNIST_PIXELS, KILN_F32});
      if (st == KILN_OK)
        st = kiln_buffer_write_sync(r.q, tl, &(kiln_range){r.test_labels, 0, test.count, KILN_U32});
    }
    free(tx);
    free(tl);
    free(ti);
    TRY(st, kiln_fail);
  }
  TRY(r.model->kind->init(r.model, o.seed), kiln_fail);
  if (o.export_dir && root) {
    weights = malloc(r.model->nparams * sizeof *weights);
    if (!weights) {
      fprintf(stderr, "train_fashion_mnist: out of host memory\n");
      goto out;
    }
    TRY(kiln_buffer_read_sync(r.q, &(kiln_range){r.model->params, 0, r.model->nparams, KILN_F32}, weights),
        kiln_fail);
    if (write_file(o.export_dir, "init.f32", weights,
                   r.model->nparams * sizeof *weights) != 0 ||
        write_file(o.export_dir, "order.u32", used,
                   total_steps * B * sizeof *used) != 0)
      goto out;
  }

  if (root)
    printf("train_fashion_mnist: %s, %s %s, %s lr %g%s, weight decay %g, batch %zu, width %zu, %zu training and "
         "%zu test examples, %zu steps per epoch, seed %" PRIu64 "\n",
         kiln_context_get_device_info(r.ctx)->name, o.kind->name,
         kiln_dtype_name(o.precision),
         o.hyper.optimizer == MODEL_SGD ? "sgd (momentum 0.9)" : "adamw",
         (double)o.hyper.lr, o.cosine ? " cosine" : "", (double)o.hyper.weight_decay, B, r.model->width, train.count, test.count, steps_per_epoch,
         o.seed);
  const bool bar = root && isatty(STDERR_FILENO);
  double accuracy = 0.0, last_loss = NAN, epoch_s = 0.0;
  /* The bar's running loss (this epoch's) is read at an epoch's first and
   * last step and at most twice a second between: the read waits for the
   * step in flight, which costs the overlap of that one step. */
  double run_t0 = now_s(), bar_read = 0.0, bar_loss = NAN;
  size_t t = 0, timed = 0;
  /* Prologue: the first batch (this rank's rows of it) into slot 0. */
  stage(&train, used + row0, rows, r.host_x[0], r.host_labels[0]);
  TRY(kiln_buffer_write(r.upload, r.host_x[0], &(kiln_range){r.x[0], 0, rows * FMNIST_PIXELS, KILN_F32}, 0, NULL, NULL), kiln_fail);
  TRY(kiln_buffer_write(r.upload, r.host_labels[0], &(kiln_range){r.labels[0], 0, rows, KILN_U32}, 0, NULL, &up[0]), kiln_fail);
  /* A queue's commands may not start until it is flushed (rusticl waits
   * for that), and the compute queue will wait for these. */
  TRY(kiln_queue_flush(r.upload), kiln_fail);
  for (int e = 0; e < o.epochs && t < total_steps; e++) {
    double t0 = now_s(), last_done = t0;
    size_t first = t;
    for (size_t k = 0; k < steps_per_epoch && t < total_steps; k++, t++) {
      int s = (int)(t % 2), ns = 1 - s;
      TRY(r.model->kind->gradients(r.model, rows, r.x[s], 0, r.labels[s], 0,
                                   r.losses, k, 1, &up[s]),
          kiln_fail);
      TRY(dp_average_grads(par, r.q, r.model->grads, r.model->nparams),
          kiln_fail);
      /* Cosine decay: lr at step t of T is lr (1 + cos(pi t / T)) / 2. */
      model_hyper hyper = o.hyper;
      if (o.cosine)
        hyper.lr = (float)(0.5 * o.hyper.lr *
                           (1.0 + cos(3.14159265358979323846 * (double)t / (double)total_steps)));
      TRY(model_step(r.model, &hyper), kiln_fail);
      kiln_event_release(up[s]);
      up[s] = NULL;
      TRY(kiln_queue_marker(r.q, 0, NULL, &done[s]), kiln_fail);
      TRY(kiln_queue_flush(r.q), kiln_fail);
      /* While step t runs: wait for step t - 1, which read slot ns, then
       * fill slot ns with batch t + 1 and upload it on the other queue. */
      if (done[ns]) {
        TRY(kiln_event_wait(done[ns]), kiln_fail);
        kiln_event_release(done[ns]);
        done[ns] = NULL;
        double now = now_s();
        if (k > 0)
          step_ms[timed++] = (now - last_done) * 1e3;
        last_done = now;
      }
      if (t + 1 < total_steps) {
        stage(&train, used + (t + 1) * B + row0, rows, r.host_x[ns],
              r.host_labels[ns]);
        TRY(kiln_buffer_write(r.upload, r.host_x[ns], &(kiln_range){r.x[ns], 0, rows * FMNIST_PIXELS, KILN_F32}, 0, NULL, NULL), kiln_fail);
        TRY(kiln_buffer_write(r.upload, r.host_labels[ns], &(kiln_range){r.labels[ns], 0, rows, KILN_U32}, 0, NULL, &up[ns]),
            kiln_fail);
        TRY(kiln_queue_flush(r.upload), kiln_fail);
      }
      if (bar) {
        const double now = now_s();
        if (now - bar_read >= 0.5 || k == 0 || k + 1 == steps_per_epoch) {
          TRY(kiln_buffer_read_sync(r.q, &(kiln_range){r.losses, 0, k + 1, KILN_F32},
                                    step_loss), kiln_fail);
          double sum = 0.0;
          for (size_t j = 0; j <= k; j++)
            sum += step_loss[j];
          bar_loss = sum / (double)(k + 1);
          bar_read = now;
        }
        const double per_step = (now - run_t0) / (double)(t + 1);
        progress(e + 1, o.epochs, k + 1, steps_per_epoch, bar_loss,
                 per_step * (double)(total_steps - t - 1));
      }
    }
    TRY(kiln_queue_finish(r.q), kiln_fail);
    for (int s = 0; s < 2; s++) {
      kiln_event_release(done[s]);
      done[s] = NULL;
    }
    epoch_s = now_s() - t0;
    size_t n = t - first;
    TRY(dp_average_losses(par, r.q, r.losses, n), kiln_fail);
    TRY(kiln_buffer_read_sync(r.q, &(kiln_range){r.losses, 0, n, KILN_F32}, step_loss), kiln_fail);
    double sum = 0.0;
    for (size_t k = 0; k < n; k++) {
      sum += step_loss[k];
      if (o.print_losses && root)
        printf("step %zu loss %.9g\n", first + k + 1, (double)step_loss[k]);
    }
    last_loss = sum / (double)n;
    accuracy = evaluate(&r, test.count, B);
    if (accuracy < 0)
      goto kiln_fail;
    if (bar)
      fputs("\r\033[K", stderr);
    if (root)
      printf("epoch %d/%d: loss %.6f, test accuracy %.2f%%, %.2f s (%zu steps)\n",
           e + 1, o.epochs, last_loss, accuracy, epoch_s, n);
    fflush(stdout);
  }
  double median_step = median(step_ms, timed);
  TRY(dp_check_params(par, r.q, r.model->params, r.model->nparams),
      kiln_fail);
  if (o.export_dir && root) {
    TRY(kiln_buffer_read_sync(r.q, &(kiln_range){r.model->params, 0, r.model->nparams, KILN_F32}, weights),
        kiln_fail);
    if (write_file(o.export_dir, "final.f32", weights,
                   r.model->nparams * sizeof *weights) != 0)
      goto out;
  }
  if (root)
    printf("summary: steps %zu, median step %.3f ms, last epoch %.3f s, "
         "loss %.6f, test accuracy %.2f%%\n",
         t, median_step, epoch_s, last_loss, accuracy);
  if (o.bench_runs) {
    double b1 = bench_infer(&r, &test, 1, o.bench_runs);
    double bb = bench_infer(&r, &test, B, o.bench_runs);
    if (b1 < 0 || bb < 0)
      goto kiln_fail;
    if (root)
      printf("inference: batch 1 %.3f ms, batch %zu %.3f ms (median of %zu)\n",
           b1, B, bb, o.bench_runs);
  }
  if (accuracy < o.expect_accuracy) {
    fprintf(stderr, "train_fashion_mnist: test accuracy %.2f%% is below the "
            "expected %.2f%%\n", accuracy, o.expect_accuracy);
    goto out;
  }
  rc = EXIT_SUCCESS;
  goto out;
kiln_fail:
  fprintf(stderr, "train_fashion_mnist: %s\n", kiln_last_error());
out:
  for (int s = 0; s < 2; s++) {
    kiln_event_release(up[s]);
    kiln_event_release(done[s]);
  }
  run_free(&r);
  fmnist_free(&train);
  fmnist_free(&test);
  free(order);
  free(used);
  free(step_loss);
  free(step_ms);
  free(weights);
  dp_finish(par, rc == EXIT_SUCCESS);
  return rc;
}
