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
 * (fmnist_data.c: the files, the batch order and the batches), pixels scaled
 * to [0, 1]. The options are parsed in train_options.c (--help lists them).
 * Each epoch visits the training set in an order shuffled from the seed
 * and drops the last partial batch; the same seed gives the same weights,
 * batches and so the same losses on one device. While the device computes a step, the host prepares the next
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
 * Build: cc train_fashion_mnist.c train_options.c model.c mlp.c cnn.c \
 *          fmnist_data.c $(pkg-config --cflags --libs kiln zlib) -lm
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
#include "train_options.h"

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
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
  fmnist_stage(test, idx, rows, r->host_x[0], r->host_labels[0]);
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
  train_options o;
  int rc = train_parse_args(argc, argv, &o);
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
    fmnist_shuffle(order, train.count, o.seed, e);
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
      fmnist_stage(&test, ti, test.count, tx, tl);
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
  fmnist_stage(&train, used + row0, rows, r.host_x[0], r.host_labels[0]);
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
        fmnist_stage(&train, used + (t + 1) * B + row0, rows, r.host_x[ns],
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
