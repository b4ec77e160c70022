/* train_dp.h: the data-parallel hooks of train_fashion_mnist.c and
 * train_gpt.c.
 *
 * Each trainer is built twice from the same source: one process (the inline
 * no-ops below) and, where libkiln_mpi is built, an _mpi build
 * (-DKILN_TRAIN_MPI, train_mpi.c). Under
 * `mpirun -np N` every rank walks the same global batch order, takes rows
 * [r*B/N, (r+1)*B/N) of each batch of B, computes the gradient of the mean
 * loss over its rows, and averages the gradients over the ranks (one
 * allreduce, KILN_REDUCE_MEAN) before the optimizer step. With equal slices the
 * mean of the N slice means is the mean over the B rows, so every rank takes
 * the step one process would take on the whole batch, up to the order of the
 * f32 sums. The trainer keeps all calls below unconditional, so the single
 * process build is the same code path with N = 1. */
#ifndef TRAIN_DP_H
#define TRAIN_DP_H

#include <stddef.h>

#include <kiln/kiln.h>

typedef struct dp dp;

#ifdef KILN_TRAIN_MPI
/* MPI_Init and kiln_mpi_create; 0 on success (the error is printed). */
int dp_init(int *argc, char ***argv, dp **out);
int dp_rank(const dp *d);
int dp_size(const dp *d);
/* This rank's slice of a global batch of `batch` rows: KILN_ERR_INVALID_ARGUMENT
 * unless batch is a multiple of the number of ranks (equal slices keep the
 * mean of the slice means equal to the batch mean). */
kiln_status dp_slice(const dp *d, size_t batch, size_t *row0, size_t *rows);
/* A context on this rank's device: kiln_mpi_select_device (node-local rank
 * modulo the devices that selector takes). */
kiln_status dp_context(dp *d, const char *selector, kiln_context **out);
/* Average the count f32 gradients at the start of grads over the ranks, in
 * place (between the gradients and the optimizer step). */
kiln_status dp_average_grads(dp *d, kiln_queue *q, kiln_buffer *grads,
                             size_t count);
/* Average count f32 losses at the start of losses over the ranks. */
kiln_status dp_average_losses(dp *d, kiln_queue *q, kiln_buffer *losses,
                              size_t count);
/* Compare a checksum of the count f32 parameters at the start of params
 * across the ranks: KILN_ERR_SHAPE_MISMATCH (and the checksums printed)
 * when any rank's model differs. */
kiln_status dp_check_params(dp *d, kiln_queue *q, kiln_buffer *params,
                            size_t count);
/* kiln_mpi_destroy and MPI_Finalize; after a failure (ok false) on several
 * ranks, MPI_Abort instead, so the other ranks do not wait for this one in a
 * collective. */
void dp_finish(dp *d, int ok);
#else
static inline int dp_init(int *argc, char ***argv, dp **out) {
  (void)argc;
  (void)argv;
  *out = NULL;
  return 0;
}
static inline int dp_rank(const dp *d) { return (void)d, 0; }
static inline int dp_size(const dp *d) { return (void)d, 1; }
static inline kiln_status dp_slice(const dp *d, size_t batch, size_t *row0,
                                   size_t *rows) {
  (void)d;
  *row0 = 0;
  *rows = batch;
  return KILN_OK;
}
static inline kiln_status dp_context(dp *d, const char *selector,
                                     kiln_context **out) {
  (void)d;
  return kiln_context_create_default(selector, out);
}
static inline kiln_status dp_average_grads(dp *d, kiln_queue *q,
                                           kiln_buffer *grads, size_t count) {
  (void)d;
  (void)q;
  (void)grads;
  (void)count;
  return KILN_OK;
}
static inline kiln_status dp_average_losses(dp *d, kiln_queue *q,
                                            kiln_buffer *losses,
                                            size_t count) {
  (void)d;
  (void)q;
  (void)losses;
  (void)count;
  return KILN_OK;
}
static inline kiln_status dp_check_params(dp *d, kiln_queue *q,
                                          kiln_buffer *params, size_t count) {
  (void)d;
  (void)q;
  (void)params;
  (void)count;
  return KILN_OK;
}
static inline void dp_finish(dp *d, int ok) {
  (void)d;
  (void)ok;
}
#endif

#endif
