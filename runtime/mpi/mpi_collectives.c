/* The public collectives: argument checks, the agreement every rank makes
 * on what it was asked before any data moves (so a mismatch is an error on
 * every rank, not a hang), and the blocking forms, which are start + wait. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "mpi_internal.h"

static const char *kind_name(int kind) {
  switch (kind) {
  case KIND_ALLREDUCE:
    return "allreduce";
  case KIND_BROADCAST:
    return "broadcast";
  case KIND_ALLGATHER:
    return "allgather";
  case KIND_REDUCE_SCATTER:
    return "reduce-scatter";
  }
  return "a collective with bad arguments (see that rank's error)";
}

static const char *op_name(int op) {
  static const char *const names[] = {"sum", "mean", "max", "min"};
  return op >= 0 && op < 4 ? names[op] : "?";
}

/* Whether [offset, offset + bytes) lies in buffer; the message names it. */
static kiln_status check_range(const char *fn, const char *name,
                               const kiln_buffer *buffer, size_t offset,
                               size_t elems, size_t es) {
  size_t size = kiln_buffer_size(buffer);
  if (elems > SIZE_MAX / es || offset > size || elems * es > size - offset)
    return kiln__mpi_error(KILN_ERR_OUT_OF_RANGE,
                           "%s: %zu elements of %zu bytes at offset %zu do "
                           "not fit in %s (%zu bytes)",
                           fn, elems, es, offset, name, size);
  return KILN_OK;
}

static kiln_status check_args(const kiln_mpi *mpi,
                              const struct kiln__mpi_args *a) {
  const char *fn = a->fn;
  if (mpi == NULL)
    return kiln__mpi_error(KILN_ERR_NULL_POINTER, "%s: mpi is NULL", fn);
  if (a->queue == NULL)
    return kiln__mpi_error(KILN_ERR_NULL_POINTER, "%s: queue is NULL", fn);
  if (a->src == NULL || a->dst == NULL)
    return kiln__mpi_error(KILN_ERR_NULL_POINTER, "%s: %s is NULL", fn,
                           a->src == a->dst ? "buffer"
                           : a->src == NULL ? "src" : "dst");
  if (a->num_wait > 0 && a->wait_list == NULL)
    return kiln__mpi_error(KILN_ERR_NULL_POINTER,
                           "%s: wait_list is NULL with num_wait %zu", fn,
                           a->num_wait);
  if (mpi->broken)
    return kiln__mpi_error(KILN_ERR_COMM,
                           "%s: an earlier collective on this kiln_mpi timed "
                           "out or failed half-way; it can no longer be used",
                           fn);
  size_t es = kiln_dtype_size(a->dtype);
  bool reduce = a->kind == KIND_ALLREDUCE || a->kind == KIND_REDUCE_SCATTER;
  if (es == 0 || (reduce && a->dtype != KILN_F32 && a->dtype != KILN_F16 &&
                  a->dtype != KILN_BF16))
    return kiln__mpi_error(KILN_ERR_INVALID_ARGUMENT,
                           "%s: dtype %d (%s) is not supported (%s)", fn,
                           (int)a->dtype, kiln_dtype_name(a->dtype),
                           reduce ? "f32, f16 or bf16" : "any kiln_dtype");
  if (reduce && ((int)a->op < 0 || (int)a->op > KILN_MPI_MIN))
    return kiln__mpi_error(KILN_ERR_INVALID_ARGUMENT,
                           "%s: op %d is not a kiln_mpi_op", fn, (int)a->op);
  if (a->kind == KIND_BROADCAST && (a->root < 0 || a->root >= mpi->size))
    return kiln__mpi_error(KILN_ERR_INVALID_ARGUMENT,
                           "%s: root %d is outside the communicator's ranks "
                           "0..%d", fn, a->root, mpi->size - 1);
  kiln_context *ctx = kiln_queue_context(a->queue);
  if (kiln_buffer_context(a->src) != ctx || kiln_buffer_context(a->dst) != ctx)
    return kiln__mpi_error(KILN_ERR_SHAPE_MISMATCH,
                           "%s: the buffer belongs to another context than "
                           "queue", fn);
  size_t p = (size_t)mpi->size, wide = a->count;
  if (a->kind == KIND_ALLGATHER || a->kind == KIND_REDUCE_SCATTER) {
    if (a->count > SIZE_MAX / p)
      return kiln__mpi_error(KILN_ERR_INVALID_SIZE,
                             "%s: count %zu times %zu ranks overflows", fn,
                             a->count, p);
    wide = a->count * p;
  }
  kiln_status status = check_range(
      fn, a->src == a->dst ? "buffer" : "src", a->src, a->src_offset,
      a->kind == KIND_REDUCE_SCATTER ? wide : a->count, es);
  if (status == KILN_OK && a->src != a->dst)
    status = check_range(fn, "dst", a->dst, a->dst_offset,
                         a->kind == KIND_ALLGATHER ? wide : a->count, es);
  return status;
}

/* Every rank learns the smallest and largest value of each field of the
 * signature in one MPI_Iallreduce (MAX over v and -v), so all of them see a
 * mismatch at once and fail together. */
enum { SIG_KIND, SIG_COUNT, SIG_DTYPE, SIG_OP, SIG_ROOT, SIG_FIELDS };

static kiln_status agree(kiln_mpi *mpi, const struct kiln__mpi_args *a) {
  static const char *const field[SIG_FIELDS] = {"collective", "count",
                                                "dtype", "op", "root"};
  int64_t mine[SIG_FIELDS] = {
      a->kind, (int64_t)a->count, a->dtype,
      a->kind == KIND_ALLREDUCE || a->kind == KIND_REDUCE_SCATTER ? a->op : 0,
      a->kind == KIND_BROADCAST ? a->root : 0};
  /* On the heap: after a timeout MPI may still write into it. */
  int64_t *both = malloc(2 * SIG_FIELDS * sizeof *both);
  if (both == NULL)
    return kiln__mpi_error(KILN_ERR_OUT_OF_HOST_MEMORY, "%s: out of memory",
                           a->fn);
  for (int i = 0; i < SIG_FIELDS; i++) {
    both[i] = mine[i];
    both[SIG_FIELDS + i] = -mine[i];
  }
  MPI_Request request;
  int rc = MPI_Iallreduce(MPI_IN_PLACE, both, 2 * SIG_FIELDS, MPI_INT64_T,
                          MPI_MAX, mpi->comm, &request);
  if (rc != MPI_SUCCESS) {
    free(both);
    return kiln__mpi_fail(mpi, a->fn, "MPI_Iallreduce", rc);
  }
  kiln_status status =
      kiln__mpi_wait_one(mpi, a->fn, "agreeing on sizes", &request);
  if (status != KILN_OK)
    return status; /* `both` is MPI's now */
  for (int i = 0; i < SIG_FIELDS && status == KILN_OK; i++) {
    int64_t hi = both[i], lo = -both[SIG_FIELDS + i];
    if (hi == lo)
      continue;
    if (i == SIG_KIND)
      status = kiln__mpi_error(
          KILN_ERR_SHAPE_MISMATCH,
          "%s: ranks called different collectives at once: rank %d called "
          "%s, another called %s",
          a->fn, mpi->rank, kind_name((int)mine[i]),
          kind_name((int)(mine[i] == hi ? lo : hi)));
    else if (i == SIG_DTYPE)
      status = kiln__mpi_error(
          KILN_ERR_SHAPE_MISMATCH,
          "%s: ranks passed different dtypes: rank %d passed %s, another "
          "passed %s",
          a->fn, mpi->rank, kiln_dtype_name((kiln_dtype)mine[i]),
          kiln_dtype_name((kiln_dtype)(mine[i] == hi ? lo : hi)));
    else if (i == SIG_OP)
      status = kiln__mpi_error(
          KILN_ERR_SHAPE_MISMATCH,
          "%s: ranks passed different ops: rank %d passed %s, another "
          "passed %s",
          a->fn, mpi->rank, op_name((int)mine[i]),
          op_name((int)(mine[i] == hi ? lo : hi)));
    else
      status = kiln__mpi_error(
          KILN_ERR_SHAPE_MISMATCH,
          "%s: ranks passed different %ss: rank %d passed %lld, the %s "
          "across the %d ranks range from %lld to %lld",
          a->fn, field[i], mpi->rank, (long long)mine[i], field[i],
          mpi->size, (long long)lo, (long long)hi);
  }
  free(both);
  return status;
}

kiln_status kiln__mpi_start(kiln_mpi *mpi, const struct kiln__mpi_args *args,
                            kiln_mpi_request **out) {
  kiln_status status =
      out == NULL ? kiln__mpi_error(KILN_ERR_NULL_POINTER, "%s: out is NULL",
                                    args->fn)
                  : check_args(mpi, args);
  if (out != NULL)
    *out = NULL;
  /* A rank whose own arguments are bad still takes part in the agreement
   * when it can, so the others fail too instead of waiting for it. */
  if (status != KILN_OK) {
    if (mpi != NULL && !mpi->broken && kiln_last_status() != KILN_ERR_COMM) {
      char saved[1024];
      snprintf(saved, sizeof saved, "%s", kiln_last_error());
      struct kiln__mpi_args poison = *args;
      poison.kind = (enum kiln__mpi_kind)0; /* matches no real call */
      agree(mpi, &poison);
      kiln_set_last_error(status, saved);
    }
    return status;
  }
  if ((status = agree(mpi, args)) != KILN_OK)
    return status;
  return kiln__mpi_request_create(mpi, args, out);
}

static kiln_status run(kiln_mpi *mpi, const struct kiln__mpi_args *args) {
  kiln_mpi_request *request = NULL;
  kiln_status status = kiln__mpi_start(mpi, args, &request);
  if (status != KILN_OK)
    return status;
  return kiln_mpi_wait(request);
}

#define ALLREDUCE_ARGS                                                        \
  {.fn = fn, .kind = KIND_ALLREDUCE, .queue = queue, .src = buffer,           \
   .dst = buffer, .src_offset = offset_bytes, .dst_offset = offset_bytes,     \
   .count = count, .dtype = dtype, .op = op, .num_wait = num_wait,            \
   .wait_list = wait_list}

kiln_status kiln_mpi_allreduce(kiln_mpi *mpi, kiln_queue *queue,
                               kiln_buffer *buffer, size_t offset_bytes,
                               size_t count, kiln_dtype dtype, kiln_mpi_op op,
                               size_t num_wait, kiln_event *const *wait_list) {
  static const char fn[] = "kiln_mpi_allreduce";
  struct kiln__mpi_args a = ALLREDUCE_ARGS;
  return run(mpi, &a);
}

kiln_status kiln_mpi_iallreduce(kiln_mpi *mpi, kiln_queue *queue,
                                kiln_buffer *buffer, size_t offset_bytes,
                                size_t count, kiln_dtype dtype, kiln_mpi_op op,
                                size_t num_wait, kiln_event *const *wait_list,
                                kiln_mpi_request **out) {
  static const char fn[] = "kiln_mpi_iallreduce";
  struct kiln__mpi_args a = ALLREDUCE_ARGS;
  return kiln__mpi_start(mpi, &a, out);
}

#define BROADCAST_ARGS                                                        \
  {.fn = fn, .kind = KIND_BROADCAST, .queue = queue, .src = buffer,           \
   .dst = buffer, .src_offset = offset_bytes, .dst_offset = offset_bytes,     \
   .count = count, .dtype = dtype, .root = root, .num_wait = num_wait,        \
   .wait_list = wait_list}

kiln_status kiln_mpi_broadcast(kiln_mpi *mpi, kiln_queue *queue,
                               kiln_buffer *buffer, size_t offset_bytes,
                               size_t count, kiln_dtype dtype, int root,
                               size_t num_wait, kiln_event *const *wait_list) {
  static const char fn[] = "kiln_mpi_broadcast";
  struct kiln__mpi_args a = BROADCAST_ARGS;
  return run(mpi, &a);
}

kiln_status kiln_mpi_ibroadcast(kiln_mpi *mpi, kiln_queue *queue,
                                kiln_buffer *buffer, size_t offset_bytes,
                                size_t count, kiln_dtype dtype, int root,
                                size_t num_wait, kiln_event *const *wait_list,
                                kiln_mpi_request **out) {
  static const char fn[] = "kiln_mpi_ibroadcast";
  struct kiln__mpi_args a = BROADCAST_ARGS;
  return kiln__mpi_start(mpi, &a, out);
}

#define GATHER_ARGS(kind_)                                                    \
  {.fn = fn, .kind = kind_, .queue = queue, .src = src, .dst = dst,           \
   .src_offset = src_offset_bytes, .dst_offset = dst_offset_bytes,            \
   .count = count, .dtype = dtype, .num_wait = num_wait,                      \
   .wait_list = wait_list}

kiln_status kiln_mpi_allgather(kiln_mpi *mpi, kiln_queue *queue,
                               kiln_buffer *src, size_t src_offset_bytes,
                               kiln_buffer *dst, size_t dst_offset_bytes,
                               size_t count, kiln_dtype dtype, size_t num_wait,
                               kiln_event *const *wait_list) {
  static const char fn[] = "kiln_mpi_allgather";
  struct kiln__mpi_args a = GATHER_ARGS(KIND_ALLGATHER);
  return run(mpi, &a);
}

kiln_status kiln_mpi_iallgather(kiln_mpi *mpi, kiln_queue *queue,
                                kiln_buffer *src, size_t src_offset_bytes,
                                kiln_buffer *dst, size_t dst_offset_bytes,
                                size_t count, kiln_dtype dtype,
                                size_t num_wait, kiln_event *const *wait_list,
                                kiln_mpi_request **out) {
  static const char fn[] = "kiln_mpi_iallgather";
  struct kiln__mpi_args a = GATHER_ARGS(KIND_ALLGATHER);
  return kiln__mpi_start(mpi, &a, out);
}

kiln_status kiln_mpi_reduce_scatter(kiln_mpi *mpi, kiln_queue *queue,
                                    kiln_buffer *src, size_t src_offset_bytes,
                                    kiln_buffer *dst, size_t dst_offset_bytes,
                                    size_t count, kiln_dtype dtype,
                                    kiln_mpi_op op, size_t num_wait,
                                    kiln_event *const *wait_list) {
  static const char fn[] = "kiln_mpi_reduce_scatter";
  struct kiln__mpi_args a = GATHER_ARGS(KIND_REDUCE_SCATTER);
  a.op = op;
  return run(mpi, &a);
}

kiln_status kiln_mpi_ireduce_scatter(
    kiln_mpi *mpi, kiln_queue *queue, kiln_buffer *src,
    size_t src_offset_bytes, kiln_buffer *dst, size_t dst_offset_bytes,
    size_t count, kiln_dtype dtype, kiln_mpi_op op, size_t num_wait,
    kiln_event *const *wait_list, kiln_mpi_request **out) {
  static const char fn[] = "kiln_mpi_ireduce_scatter";
  struct kiln__mpi_args a = GATHER_ARGS(KIND_REDUCE_SCATTER);
  a.op = op;
  return kiln__mpi_start(mpi, &a, out);
}
