/* train_mpi.c: the MPI side of train_fashion_mnist_mpi and train_gpt_mpi
 * (train_dp.h says what each hook does; the trainers call them).
 *
 *   mpirun -np N train_fashion_mnist_mpi [the trainer's options]
 *
 * Fault injection for the test suite only (tests/train_dp.sh): the
 * environment variable KILN_TRAIN_DP_FAULT=sum averages the gradients with
 * KILN_REDUCE_SUM instead of KILN_REDUCE_MEAN, =slice makes every rank take the
 * first slice of each batch. Both are wrong, and the test checks that its
 * loss comparison catches them (a tolerance that cannot fail proves
 * nothing). =local skips the gradient averaging, so each rank steps on its
 * own slice: the final-model check must then fail. */
#define _POSIX_C_SOURCE 200809L

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <kiln/kiln_mpi.h>

#include "train_dp.h"

struct dp {
  kiln_mpi *mpi;
  kiln_device_list *list;
  int rank, size;
  kiln_reduce_op grad_op; /* KILN_REDUCE_MEAN; KILN_REDUCE_SUM under the sum fault */
  int wrong_slice;
  int local; /* the local fault: no gradient averaging */
};

int dp_init(int *argc, char ***argv, dp **out) {
  *out = NULL;
  const char *slash = strrchr((*argv)[0], '/');
  const char *prog = slash ? slash + 1 : (*argv)[0];
  if (MPI_Init(argc, argv) != MPI_SUCCESS) {
    fprintf(stderr, "%s: MPI_Init failed\n", prog);
    return -1;
  }
  dp *d = calloc(1, sizeof *d);
  if (!d) {
    fprintf(stderr, "%s: out of host memory\n", prog);
    MPI_Abort(MPI_COMM_WORLD, 1);
    return -1;
  }
  /* A rank that stops joining the collectives (stuck, not dead: mpirun
   * ends the job when a rank dies) makes the others fail after this many
   * seconds instead of hanging; far above any step. */
  kiln_mpi_options opt = {.timeout_s = 300.0};
  if (kiln_mpi_create(MPI_COMM_WORLD, &opt, &d->mpi) != KILN_OK) {
    fprintf(stderr, "%s: %s\n", prog, kiln_last_error());
    free(d);
    MPI_Abort(MPI_COMM_WORLD, 1);
    return -1;
  }
  d->rank = kiln_mpi_get_rank(d->mpi);
  d->size = kiln_mpi_get_size(d->mpi);
  d->grad_op = KILN_REDUCE_MEAN;
  const char *fault = getenv("KILN_TRAIN_DP_FAULT");
  if (fault && !strcmp(fault, "sum"))
    d->grad_op = KILN_REDUCE_SUM;
  else if (fault && !strcmp(fault, "slice"))
    d->wrong_slice = 1;
  else if (fault && !strcmp(fault, "local"))
    d->local = 1;
  else if (fault && *fault) {
    fprintf(stderr, "%s: KILN_TRAIN_DP_FAULT=%s: expected sum, slice or "
            "local\n", prog, fault);
    dp_finish(d, 0);
    return -1;
  }
  *out = d;
  return 0;
}

int dp_rank(const dp *d) { return d->rank; }
int dp_size(const dp *d) { return d->size; }

kiln_status dp_slice(const dp *d, size_t batch, size_t *row0, size_t *rows) {
  size_t n = (size_t)d->size;
  /* Unequal slices would need the partial means weighted by their rows; an
   * exact split keeps one MEAN allreduce equal to the batch mean. */
  if (batch % n != 0) {
    char msg[160];
    snprintf(msg, sizeof msg, "--batch %zu is not a multiple of the %d ranks:"
             " every rank takes batch/ranks rows of each batch", batch,
             d->size);
    return kiln_set_last_error(KILN_ERR_INVALID_ARGUMENT, msg);
  }
  *rows = batch / n;
  *row0 = d->wrong_slice ? 0 : (size_t)d->rank * *rows;
  return KILN_OK;
}

kiln_status dp_context(dp *d, const char *selector, kiln_context **out) {
  const kiln_device *dev = NULL;
  kiln_status st = kiln_device_list_create(&d->list);
  if (st == KILN_OK)
    st = kiln_mpi_select_device(d->mpi, d->list, selector, &dev);
  if (st == KILN_OK)
    st = kiln_context_create(dev, NULL, out);
  return st;
}

kiln_status dp_average_grads(dp *d, kiln_queue *q, kiln_buffer *grads,
                             size_t count) {
  if (d->local)
    return KILN_OK;
  return kiln_mpi_allreduce(d->mpi, q, &(kiln_range){grads, 0, count, KILN_F32},
                            d->grad_op, 0, NULL, NULL);
}

kiln_status dp_average_losses(dp *d, kiln_queue *q, kiln_buffer *losses,
                              size_t count) {
  /* Each rank's loss is the mean over its slice; equal slices make the mean
   * of those the mean over the batch, the loss one process reports. */
  return kiln_mpi_allreduce(d->mpi, q, &(kiln_range){losses, 0, count, KILN_F32}, KILN_REDUCE_MEAN, 0, NULL, NULL);
}

/* FNV-1a over the bytes: equal models give equal sums; any differing bit
 * changes it (up to a 2^-64 chance). */
static uint64_t fnv1a(const unsigned char *p, size_t n) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (size_t i = 0; i < n; i++)
    h = (h ^ p[i]) * 0x100000001b3ull;
  return h;
}

kiln_status dp_check_params(dp *d, kiln_queue *q, kiln_buffer *params,
                            size_t count) {
  size_t bytes = count * sizeof(float);
  unsigned char *host = malloc(bytes);
  uint64_t *all = malloc((size_t)d->size * sizeof *all);
  kiln_status st = KILN_ERR_OUT_OF_HOST_MEMORY;
  if (!host || !all) {
    kiln_set_last_error(st, "out of host memory for the model checksum");
    goto done;
  }
  st = kiln_buffer_read_sync(q, &(kiln_range){params, 0, count, KILN_F32},
                             host);
  if (st != KILN_OK)
    goto done;
  uint64_t mine = fnv1a(host, bytes);
  /* Every rank reaches this call (a rank that failed earlier aborted the
   * job in dp_finish), so a plain MPI_Allgather cannot hang here. */
  if (MPI_Allgather(&mine, 1, MPI_UINT64_T, all, 1, MPI_UINT64_T,
                    MPI_COMM_WORLD) != MPI_SUCCESS) {
    st = kiln_set_last_error(KILN_ERR_COMM, "MPI_Allgather of the model "
                             "checksums failed");
    goto done;
  }
  int same = 1;
  for (int r = 0; r < d->size; r++)
    same &= all[r] == all[0];
  if (d->rank == 0) {
    printf("model checksum (FNV-1a of the %zu parameters):", count);
    for (int r = 0; r < d->size; r++)
      printf(" rank %d %016" PRIx64, r, all[r]);
    printf("%s\n", same ? ", identical on every rank" : ", DIFFERENT");
    fflush(stdout);
  }
  st = same ? KILN_OK
            : kiln_set_last_error(KILN_ERR_SHAPE_MISMATCH,
                                  "the final model differs between ranks");
done:
  free(host);
  free(all);
  return st;
}

void dp_finish(dp *d, int ok) {
  if (!d)
    return;
  if (!ok && d->size > 1)
    MPI_Abort(MPI_COMM_WORLD, 1);
  kiln_mpi_destroy(d->mpi);
  kiln_device_list_destroy(d->list);
  free(d);
  MPI_Finalize();
}
