/* Allreduce bus bandwidth: kiln_mpi_allreduce of an f32 device buffer
 * against MPI_Allreduce of the same bytes in host memory, 1 MiB to 256 MiB.
 *
 *   mpirun --oversubscribe -np 2 build/tools/scale/kiln-mpi-bench [MAX_MIB]
 *
 * Bus bandwidth (NCCL's convention) is bytes * 2 (p - 1) / p / time: what
 * each rank's link carries in a ring allreduce, so it is comparable across
 * rank counts. Each size: one warm-up, then the median of 5 runs, each
 * timed from a barrier to the slowest rank's end. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../cli/cli.h"
#include "kiln/kiln_mpi.h"

static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* Seconds of the slowest rank, median of reps. */
static double median(double *t, int reps) {
  qsort(t, (size_t)reps, sizeof *t, cmp);
  return t[reps / 2];
}

int main(int argc, char **argv) {
  cli_log_to_stderr();
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  size_t max_mib = argc > 1 ? (size_t)atol(argv[1]) : 256;
  kiln_device_list *list = NULL;
  const kiln_device *dev = NULL;
  kiln_context *ctx = NULL;
  kiln_queue *q = NULL;
  kiln_mpi *mpi = NULL;
  if (kiln_device_list_create(&list) != KILN_OK ||
      kiln_mpi_create(MPI_COMM_WORLD, NULL, &mpi) != KILN_OK ||
      kiln_mpi_select_device(mpi, list, NULL, &dev) != KILN_OK ||
      kiln_context_create(dev, NULL, &ctx) != KILN_OK ||
      kiln_queue_create(ctx, 0, &q) != KILN_OK) {
    fprintf(stderr, "rank %d: %s\n", rank, kiln_last_error());
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  if (rank == 0)
    printf("%d ranks, device '%s'\n| size | kiln device allreduce GB/s | "
           "MPI_Allreduce host GB/s | ratio | MPI_Allreduce host in 4 MiB "
           "pieces GB/s | ratio to pieces |\n|---:|---:|---:|---:|---:|---:|\n",
           size, kiln_device_get_info(dev)->name);
  enum { REPS = 5 };
  for (size_t mib = 1; mib <= max_mib; mib *= 2) {
    size_t bytes = mib << 20, n = bytes / 4;
    float *host = malloc(bytes);
    for (size_t i = 0; i < n; i++)
      host[i] = (float)(i % 1000) * 0.001f;
    kiln_buffer *buf = NULL;
    if (kiln_buffer_create(ctx, bytes, 0, &buf) != KILN_OK ||
        kiln_buffer_write_sync(q, host, &(kiln_range){buf, 0, n, KILN_F32}) !=
            KILN_OK) {
      fprintf(stderr, "rank %d: %s\n", rank, kiln_last_error());
      MPI_Abort(MPI_COMM_WORLD, 1);
    }
    double tk[REPS], th[REPS], tp[REPS];
    for (int r = -1; r < REPS; r++) {
      MPI_Barrier(MPI_COMM_WORLD);
      double t0 = MPI_Wtime();
      if (kiln_mpi_allreduce(mpi, q, &(kiln_range){buf, 0, n, KILN_F32},
                             KILN_REDUCE_SUM, 0, NULL, NULL) != KILN_OK) {
        fprintf(stderr, "rank %d: %s\n", rank, kiln_last_error());
        MPI_Abort(MPI_COMM_WORLD, 1);
      }
      double t = MPI_Wtime() - t0, slowest;
      MPI_Allreduce(&t, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
      if (r >= 0)
        tk[r] = slowest;
      MPI_Barrier(MPI_COMM_WORLD);
      t0 = MPI_Wtime();
      MPI_Allreduce(MPI_IN_PLACE, host, (int)n, MPI_FLOAT, MPI_SUM,
                    MPI_COMM_WORLD);
      t = MPI_Wtime() - t0;
      MPI_Allreduce(&t, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
      if (r >= 0)
        th[r] = slowest;
      /* The same bytes as 4 MiB MPI_Allreduce calls: what kiln's staging
       * does on the MPI side, without the device copies. */
      MPI_Barrier(MPI_COMM_WORLD);
      t0 = MPI_Wtime();
      for (size_t at = 0; at < n; at += (size_t)1 << 20) {
        size_t len = n - at < ((size_t)1 << 20) ? n - at : (size_t)1 << 20;
        MPI_Allreduce(MPI_IN_PLACE, host + at, (int)len, MPI_FLOAT, MPI_SUM,
                      MPI_COMM_WORLD);
      }
      t = MPI_Wtime() - t0;
      MPI_Allreduce(&t, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
      if (r >= 0)
        tp[r] = slowest;
    }
    double factor = 2.0 * (size - 1) / size * (double)bytes / 1e9;
    double gk = factor / median(tk, REPS), gh = factor / median(th, REPS);
    double gp = factor / median(tp, REPS);
    if (rank == 0)
      printf("| %zu MiB | %.2f | %.2f | %.2f | %.2f | %.2f |\n", mib, gk, gh,
             gk / gh, gp, gk / gp);
    fflush(stdout);
    kiln_buffer_destroy(buf);
    free(host);
  }
  kiln_mpi_destroy(mpi);
  kiln_queue_destroy(q);
  kiln_context_destroy(ctx);
  kiln_device_list_destroy(list);
  MPI_Finalize();
  return 0;
}
