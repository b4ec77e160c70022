/* The installed libkiln_mpi as a user builds against it (kiln-mpi.pc), run
 * on two ranks by tests/package_consumer.sh: an allreduce of each rank's
 * rank + 1 must give 1 + 2 on both. */
#include <stdio.h>

#include <kiln/kiln_mpi.h>

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  kiln_mpi *mpi = NULL;
  kiln_context *ctx = NULL;
  kiln_queue *q = NULL;
  kiln_buffer *buf = NULL;
  float v[16];
  int ok = kiln_mpi_create(MPI_COMM_WORLD, NULL, &mpi) == KILN_OK &&
           kiln_context_create_default(NULL, &ctx) == KILN_OK &&
           kiln_queue_create(ctx, 0, &q) == KILN_OK &&
           kiln_buffer_create(ctx, sizeof v, 0, &buf) == KILN_OK;
  for (int i = 0; i < 16; i++)
    v[i] = (float)(kiln_mpi_get_rank(mpi) + 1);
  ok = ok &&
       kiln_buffer_write_sync(q, v, &(kiln_range){buf, 0, 16, KILN_F32}) ==
           KILN_OK &&
       kiln_mpi_allreduce(mpi, q, &(kiln_range){buf, 0, 16, KILN_F32},
                          KILN_REDUCE_SUM, 0, NULL, NULL) == KILN_OK &&
       kiln_buffer_read_sync(q, &(kiln_range){buf, 0, 16, KILN_F32}, v) ==
           KILN_OK;
  int size = kiln_mpi_get_size(mpi);
  for (int i = 0; ok && i < 16; i++)
    ok = v[i] == (float)(size * (size + 1) / 2);
  if (!ok)
    fprintf(stderr, "consumer_mpi: %s (v[0] = %g)\n", kiln_last_error(), v[0]);
  kiln_buffer_destroy(buf);
  kiln_queue_destroy(q);
  kiln_context_destroy(ctx);
  kiln_mpi_destroy(mpi);
  MPI_Finalize();
  return ok ? 0 : 1;
}
