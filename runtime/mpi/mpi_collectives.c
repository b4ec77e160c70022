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
  static const char *const names[] = {"sum", "min", "max", "mean"};
  return op >= 0 && op < 4 ? names[op] : "?";
}

/* Whether the range lies in its buffer; the message names it. */
static kiln_status check_range(const char *fn, const char *name,
                               const kiln_range *r, size_t es) {
  size_t size = kiln_buffer_get_size(r->buffer);
  if (r->offset > SIZE_MAX / es || r->count > SIZE_MAX / es ||
      r->offset * es > size || r->count * es > size - r->offset * es)
    return kiln__mpi_error(KILN_ERR_OUT_OF_RANGE,
                           "%s: %s range [offset %zu, +%zu elements of %s) "
                           "exceeds its buffer's %zu bytes",
                           fn, name, r->offset, r->count,
                           kiln_dtype_name(r->dtype), size);
  return KILN_OK;
}

/* Fill the buffer fields of *a from its ranges, once they are checked. */
static void take_ranges(struct kiln__mpi_args *a) {
  a->src = a->src_range->buffer;
  a->dst = a->dst_range->buffer;
  a->src_offset = a->src_range->offset;
  a->dst_offset = a->dst_range->offset;
  a->dtype = a->src_range->dtype;
  a->count = a->kind == KIND_REDUCE_SCATTER ? a->dst_range->count
                                            : a->src_range->count;
}

static kiln_status check_args(const kiln_mpi *mpi, struct kiln__mpi_args *a) {
  const char *fn = a->fn;
  bool same = a->src_range == a->dst_range;
  const char *src_name = same ? "data" : "src";
  if (mpi == NULL)
    return kiln__mpi_error(KILN_ERR_NULL_POINTER, "%s: mpi is NULL", fn);
  if (a->queue == NULL)
    return kiln__mpi_error(KILN_ERR_NULL_POINTER, "%s: queue is NULL", fn);
  if (a->src_range == NULL || a->dst_range == NULL)
    return kiln__mpi_error(KILN_ERR_NULL_POINTER, "%s: %s is NULL", fn,
                           a->src_range == NULL ? src_name : "dst");
  if (a->src_range->buffer == NULL || a->dst_range->buffer == NULL)
    return kiln__mpi_error(KILN_ERR_NULL_POINTER, "%s: %s->buffer is NULL", fn,
                           a->src_range->buffer == NULL ? src_name : "dst");
  if (a->num_wait > 0 && a->wait_list == NULL)
    return kiln__mpi_error(KILN_ERR_NULL_POINTER,
                           "%s: wait_list is NULL with num_wait %zu", fn,
                           a->num_wait);
  if (mpi->broken)
    return kiln__mpi_error(KILN_ERR_COMM,
                           "%s: an earlier collective on this kiln_mpi timed "
                           "out or failed half-way; it can no longer be used",
                           fn);
  kiln_dtype dtype = a->src_range->dtype;
  size_t es = kiln_dtype_size(dtype);
  bool reduce = a->kind == KIND_ALLREDUCE || a->kind == KIND_REDUCE_SCATTER;
  if (es == 0 ||
      (reduce && dtype != KILN_F32 && dtype != KILN_F16 && dtype != KILN_BF16))
    return kiln__mpi_error(KILN_ERR_INVALID_ARGUMENT,
                           "%s: %s dtype %d (%s) is not supported (%s)", fn,
                           src_name, (int)dtype, kiln_dtype_name(dtype),
                           reduce ? "f32, f16 or bf16" : "any kiln_dtype");
  if (a->dst_range->dtype != dtype)
    return kiln__mpi_error(
        KILN_ERR_SHAPE_MISMATCH, "%s: src dtype %s differs from dst dtype %s",
        fn, kiln_dtype_name(dtype), kiln_dtype_name(a->dst_range->dtype));
  if (reduce && a->op != KILN_REDUCE_SUM && a->op != KILN_REDUCE_MIN &&
      a->op != KILN_REDUCE_MAX && a->op != KILN_REDUCE_MEAN)
    return kiln__mpi_error(KILN_ERR_INVALID_ARGUMENT,
                           "%s: op %d is not KILN_REDUCE_SUM, MIN, MAX or "
                           "MEAN (the reductions MPI collectives offer)",
                           fn, (int)a->op);
  if (a->kind == KIND_BROADCAST && (a->root < 0 || a->root >= mpi->size))
    return kiln__mpi_error(KILN_ERR_INVALID_ARGUMENT,
                           "%s: root %d is outside the communicator's ranks "
                           "0..%d", fn, a->root, mpi->size - 1);
  kiln_context *ctx = kiln_queue_get_context(a->queue);
  if (kiln_buffer_get_context(a->src_range->buffer) != ctx ||
      kiln_buffer_get_context(a->dst_range->buffer) != ctx)
    return kiln__mpi_error(
        KILN_ERR_WRONG_CONTEXT,
        "%s: %s's buffer belongs to another context than queue", fn,
        kiln_buffer_get_context(a->src_range->buffer) != ctx ? src_name
                                                             : "dst");
  /* allgather: dst holds size blocks of src; reduce-scatter: src holds size
   * blocks of dst. */
  size_t p = (size_t)mpi->size;
  const kiln_range *block =
      a->kind == KIND_REDUCE_SCATTER ? a->dst_range : a->src_range;
  const kiln_range *wide =
      a->kind == KIND_REDUCE_SCATTER ? a->src_range : a->dst_range;
  if (!same && block->count > SIZE_MAX / p)
    return kiln__mpi_error(
        KILN_ERR_INVALID_SIZE, "%s: %s count %zu times %d ranks overflows", fn,
        block == a->src_range ? "src" : "dst", block->count, mpi->size);
  if (!same && wide->count != block->count * p)
    return kiln__mpi_error(KILN_ERR_SHAPE_MISMATCH,
                           "%s: %s count %zu is not %d ranks times %s count "
                           "%zu",
                           fn, wide == a->src_range ? "src" : "dst",
                           wide->count, mpi->size,
                           block == a->src_range ? "src" : "dst", block->count);
  kiln_status status = check_range(fn, src_name, a->src_range, es);
  if (status == KILN_OK && !same)
    status = check_range(fn, "dst", a->dst_range, es);
  /* allgather and reduce-scatter read src while they write dst: ranges of
   * one buffer must not share an element (views of one parent are not
   * detected). */
  const kiln_range *s = a->src_range, *d = a->dst_range;
  if (status == KILN_OK &&
      (a->kind == KIND_ALLGATHER || a->kind == KIND_REDUCE_SCATTER) &&
      s->buffer == d->buffer && s->count > 0 && d->count > 0 &&
      s->offset < d->offset + d->count && d->offset < s->offset + s->count)
    status = kiln__mpi_error(
        KILN_ERR_INVALID_ARGUMENT,
        "%s: src [offset %zu, +%zu) and dst [offset %zu, +%zu) overlap in "
        "one buffer (elements of %s); %s reads src while it writes dst",
        fn, s->offset, s->count, d->offset, d->count, kiln_dtype_name(dtype),
        kind_name(a->kind));
  if (status == KILN_OK)
    take_ranges(a);
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

kiln_status kiln__mpi_start(kiln_mpi *mpi, struct kiln__mpi_args *args,
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

/* The blocking form: start, wait, and give an event of queue that is
 * complete on return (a marker after the collective's last command, waited
 * for). */
static kiln_status run(kiln_mpi *mpi, struct kiln__mpi_args *args,
                       kiln_event **out_event) {
  if (out_event != NULL)
    *out_event = NULL;
  kiln_mpi_request *request = NULL;
  kiln_status status = kiln__mpi_start(mpi, args, &request);
  if (status == KILN_OK)
    status = kiln_mpi_wait(request);
  if (status == KILN_OK && out_event != NULL)
    status = kiln_queue_marker(args->queue, 0, NULL, out_event);
  /* Complete on return, as a blocking call's event is. */
  if (status == KILN_OK && out_event != NULL &&
      (status = kiln_event_wait(*out_event)) != KILN_OK) {
    kiln_event_release(*out_event);
    *out_event = NULL;
  }
  return status;
}

#define ARGS(kind_, src_, dst_)                                                \
  {                                                                            \
    .fn = fn, .kind = kind_, .queue = queue, .src_range = src_,                \
    .dst_range = dst_, .num_wait = num_wait, .wait_list = wait_list            \
  }

kiln_status kiln_mpi_allreduce(kiln_mpi *mpi, kiln_queue *queue,
                               const kiln_range *data, kiln_reduce_op op,
                               size_t num_wait, kiln_event *const *wait_list,
                               kiln_event **out_event) {
  static const char fn[] = "kiln_mpi_allreduce";
  struct kiln__mpi_args a = ARGS(KIND_ALLREDUCE, data, data);
  a.op = op;
  return run(mpi, &a, out_event);
}

kiln_status kiln_mpi_iallreduce(kiln_mpi *mpi, kiln_queue *queue,
                                const kiln_range *data, kiln_reduce_op op,
                                size_t num_wait, kiln_event *const *wait_list,
                                kiln_mpi_request **out) {
  static const char fn[] = "kiln_mpi_iallreduce";
  struct kiln__mpi_args a = ARGS(KIND_ALLREDUCE, data, data);
  a.op = op;
  return kiln__mpi_start(mpi, &a, out);
}

kiln_status kiln_mpi_broadcast(kiln_mpi *mpi, kiln_queue *queue,
                               const kiln_range *data, int root,
                               size_t num_wait, kiln_event *const *wait_list,
                               kiln_event **out_event) {
  static const char fn[] = "kiln_mpi_broadcast";
  struct kiln__mpi_args a = ARGS(KIND_BROADCAST, data, data);
  a.root = root;
  return run(mpi, &a, out_event);
}

kiln_status kiln_mpi_ibroadcast(kiln_mpi *mpi, kiln_queue *queue,
                                const kiln_range *data, int root,
                                size_t num_wait, kiln_event *const *wait_list,
                                kiln_mpi_request **out) {
  static const char fn[] = "kiln_mpi_ibroadcast";
  struct kiln__mpi_args a = ARGS(KIND_BROADCAST, data, data);
  a.root = root;
  return kiln__mpi_start(mpi, &a, out);
}

kiln_status kiln_mpi_allgather(kiln_mpi *mpi, kiln_queue *queue,
                               const kiln_range *src, const kiln_range *dst,
                               size_t num_wait, kiln_event *const *wait_list,
                               kiln_event **out_event) {
  static const char fn[] = "kiln_mpi_allgather";
  struct kiln__mpi_args a = ARGS(KIND_ALLGATHER, src, dst);
  return run(mpi, &a, out_event);
}

kiln_status kiln_mpi_iallgather(kiln_mpi *mpi, kiln_queue *queue,
                                const kiln_range *src, const kiln_range *dst,
                                size_t num_wait, kiln_event *const *wait_list,
                                kiln_mpi_request **out) {
  static const char fn[] = "kiln_mpi_iallgather";
  struct kiln__mpi_args a = ARGS(KIND_ALLGATHER, src, dst);
  return kiln__mpi_start(mpi, &a, out);
}

kiln_status kiln_mpi_reduce_scatter(kiln_mpi *mpi, kiln_queue *queue,
                                    const kiln_range *src,
                                    const kiln_range *dst, kiln_reduce_op op,
                                    size_t num_wait,
                                    kiln_event *const *wait_list,
                                    kiln_event **out_event) {
  static const char fn[] = "kiln_mpi_reduce_scatter";
  struct kiln__mpi_args a = ARGS(KIND_REDUCE_SCATTER, src, dst);
  a.op = op;
  return run(mpi, &a, out_event);
}

kiln_status kiln_mpi_ireduce_scatter(kiln_mpi *mpi, kiln_queue *queue,
                                     const kiln_range *src,
                                     const kiln_range *dst, kiln_reduce_op op,
                                     size_t num_wait,
                                     kiln_event *const *wait_list,
                                     kiln_mpi_request **out) {
  static const char fn[] = "kiln_mpi_ireduce_scatter";
  struct kiln__mpi_args a = ARGS(KIND_REDUCE_SCATTER, src, dst);
  a.op = op;
  return kiln__mpi_start(mpi, &a, out);
}
