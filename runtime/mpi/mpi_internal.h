/* kiln_mpi's private interface (runtime/mpi/): the communicator object, the
 * collective request and the helpers shared by mpi_comm.c, mpi_request.c and
 * mpi_collectives.c. libkiln_mpi uses libkiln only through its public
 * headers, so it records failures with kiln_set_last_error. Not installed. */
#ifndef KILN_MPI_INTERNAL_H
#define KILN_MPI_INTERNAL_H

#include <string.h>

#include "kiln/kiln_mpi.h"

struct kiln_mpi {
  /* Two duplicates of the caller's communicator, both MPI_ERRORS_RETURN.
   * MPI matches collectives on a communicator by the order they start, the
   * same on every rank. The agreement of each collective runs on `comm`
   * when the collective is started, in program order; the chunks run on
   * `data` later, inside kiln_mpi_test and kiln_mpi_wait, whose timing
   * differs between ranks: on one communicator the two streams could
   * interleave differently on two ranks. */
  MPI_Comm comm, data;
  int rank, size, local_rank, local_size;
  size_t chunk_bytes, slots;
  double timeout_s;
  /* A collective timed out or failed half-way: MPI operations may still be
   * pending on memory we own, so nothing more may run and that memory is
   * never freed. */
  bool broken;
  int live_requests;
  /* Requests start their chunks' exchanges strictly one after the other,
   * in the order they were started (tickets), so every rank issues the
   * same sequence on `data` whichever request it tests first. */
  unsigned long next_ticket, turn;
  struct kiln_mpi_request *requests; /* live ones, oldest first */
  /* Staging memory kept between collectives, so that a training loop does
   * not fault in fresh pages every step; taken by at most one request. */
  unsigned char *stage;
  size_t stage_bytes;
  bool stage_taken;
};

/* The collectives; part of the signature every rank agrees on. */
enum kiln__mpi_kind {
  KIND_ALLREDUCE = 1,
  KIND_BROADCAST = 2,
  KIND_ALLGATHER = 3,
  KIND_REDUCE_SCATTER = 4,
};

/* What one collective was asked to do, after argument checks. */
struct kiln__mpi_args {
  const char *fn; /* public function name, for messages */
  enum kiln__mpi_kind kind;
  kiln_queue *queue;
  /* The caller's ranges, read during the call only (the same range for
   * allreduce and broadcast); the fields below are taken from them once
   * they are checked. */
  const kiln_range *src_range, *dst_range;
  kiln_buffer *src, *dst;        /* the ranges' buffers */
  size_t src_offset, dst_offset; /* elements of dtype */
  size_t count; /* elements per rank: src's, dst's for reduce-scatter */
  kiln_dtype dtype;
  kiln_reduce_op op;
  int root;
  size_t num_wait;
  kiln_event *const *wait_list;
};

/* Record "fn: MPI_call failed on rank R of N: <MPI error string>" and return
 * KILN_ERR_COMM. */
kiln_status kiln__mpi_fail(const kiln_mpi *mpi, const char *fn,
                           const char *call, int mpi_error);
/* printf-style kiln_set_last_error; returns status. */
kiln_status kiln__mpi_error(kiln_status status, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Wait for one MPI request within mpi->timeout_s, driving MPI's progress.
 * A timeout breaks mpi and returns KILN_ERR_COMM. */
kiln_status kiln__mpi_wait_one(kiln_mpi *mpi, const char *fn, const char *what,
                               MPI_Request *request);

/* Allocate the staging and the request of a checked, agreed collective
 * (mpi_request.c). */
kiln_status kiln__mpi_request_create(kiln_mpi *mpi,
                                     const struct kiln__mpi_args *args,
                                     kiln_mpi_request **out);

/* Pause between two polls of MPI; *idle_rounds counts the polls that found
 * nothing to do in a row (the caller zeroes it after progress). */
void kiln__mpi_pause(unsigned *idle_rounds);

/* Seconds since an arbitrary start (CLOCK_MONOTONIC). */
double kiln__mpi_now(void);

/* Check the arguments every collective shares (filling the buffer fields of
 * args from its ranges), agree with the other ranks on the signature, and
 * start the request. */
kiln_status kiln__mpi_start(kiln_mpi *mpi, struct kiln__mpi_args *args,
                            kiln_mpi_request **out);

#endif
