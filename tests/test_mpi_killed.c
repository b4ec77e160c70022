/* A rank killed in the middle of a job must not leave the others hanging.
 * Rank 1 kills itself (SIGKILL: no MPI_Finalize, no clean-up) while rank 0
 * waits in kiln_mpi_allreduce with a 10 s timeout. What stops rank 0 is
 * either Open MPI's runtime, which terminates the whole job when one of its
 * processes dies (Open MPI 4.1's behaviour; there is no fault tolerance in
 * its default build), or kiln_mpi's timeout, which returns KILN_ERR_COMM.
 * tests/mpi_run.sh --expect-abort passes when the job ends on its own,
 * unsuccessfully, well before its hang limit; a hang fails it. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "kiln/kiln_mpi.h"

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  kiln_device_list *list = NULL;
  const kiln_device *dev = NULL;
  kiln_context *ctx = NULL;
  kiln_queue *queue = NULL;
  kiln_buffer *buf = NULL;
  kiln_mpi *mpi = NULL;
  kiln_mpi_options opt = {.timeout_s = 10};
  if (kiln_device_list_create(&list) != KILN_OK ||
      kiln_mpi_create(MPI_COMM_WORLD, &opt, &mpi) != KILN_OK ||
      kiln_mpi_select_device(mpi, list, getenv("KILN_TEST_DEVICE"), &dev) !=
          KILN_OK ||
      kiln_context_create(dev, NULL, &ctx) != KILN_OK ||
      kiln_queue_create(ctx, 0, &queue) != KILN_OK ||
      kiln_buffer_create(ctx, 1 << 20, 0, &buf) != KILN_OK) {
    fprintf(stderr, "rank %d: set-up failed: %s\n", rank, kiln_last_error());
    return 2;
  }
  MPI_Barrier(MPI_COMM_WORLD);
  if (rank == 1)
    raise(SIGKILL);
  sleep(1); /* let rank 1 die first */
  kiln_status status =
      kiln_mpi_allreduce(mpi, queue, &(kiln_range){buf, 0, 1 << 18, KILN_F32},
                         KILN_REDUCE_SUM, 0, NULL, NULL);
  fprintf(stderr, "rank %d: allreduce with a dead rank returned %s: %s\n",
          rank, kiln_status_name(status), kiln_last_error());
  /* No MPI_Finalize: it would wait for the dead rank. */
  return status == KILN_ERR_COMM ? 3 : 4;
}
