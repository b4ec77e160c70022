/* The staging pipeline behind every collective, as a request advanced by
 * kiln_mpi_test and kiln_mpi_wait.
 *
 * The data is cut into chunks of at most mpi->chunk_bytes. Chunk c lives in
 * host slot c % slots and goes through: READ (device -> slot, on the
 * caller's in-order queue), MPI (a non-blocking collective on the slot),
 * WRITE (slot -> device). Reads of later chunks are enqueued as soon as
 * their slot is free, so the device copies of some chunks run while MPI
 * exchanges others. MPI collectives on one communicator must start in the
 * same order on every rank, so chunks enter MPI strictly in order; they may
 * leave it and be written back in any order. f16 and bf16 are widened to
 * f32 in the slot before MPI and narrowed after, so they are reduced in
 * f32. */
#include <stdio.h>
#include <stdlib.h>

#include "mpi_internal.h"

enum stage { IDLE, READING, EXCHANGING, WRITING };

struct slot {
  enum stage stage;
  size_t chunk;
  kiln_event *event; /* last device command of the stage, or NULL */
  MPI_Request mpi;
  unsigned char *raw; /* device-format bytes */
  float *wide;        /* f32 copy for reductions of f16 / bf16 */
};

struct kiln_mpi_request {
  kiln_mpi *mpi;
  struct kiln_mpi_request *next; /* in mpi->requests */
  unsigned long ticket;
  struct kiln__mpi_args a;
  size_t es;          /* element size */
  size_t chunk_elems; /* elements per chunk (per block for gather/scatter) */
  size_t chunks, next_read, next_exchange, done;
  unsigned char *memory;
  bool own_memory; /* else mpi->stage */
  bool finished;
  kiln_status result;
  char message[1024]; /* the failure, repeated by kiln_mpi_wait */
  struct slot slots[];
};

static size_t chunk_len(const kiln_mpi_request *r, size_t c) {
  size_t first = c * r->chunk_elems;
  size_t left = r->a.count - first;
  return left < r->chunk_elems ? left : r->chunk_elems;
}

/* Bytes of raw and of f32 staging one slot needs. */
static void slot_bytes(const kiln_mpi_request *r, size_t *raw, size_t *wide) {
  size_t n = r->chunk_elems, p = (size_t)r->mpi->size;
  *raw = 0;
  *wide = 0;
  switch (r->a.kind) {
  case KIND_ALLREDUCE:
    *raw = n * r->es;
    *wide = r->a.dtype == KILN_F32 ? 0 : n * 4;
    break;
  case KIND_BROADCAST:
    *raw = n * r->es;
    break;
  case KIND_ALLGATHER: /* this rank's piece, then every rank's */
    *raw = (p + 1) * n * r->es;
    break;
  case KIND_REDUCE_SCATTER: /* every block widened, then the result */
    *raw = p * n * r->es;
    *wide = (p + 1) * n * 4;
    break;
  }
  /* Keep every slot 64-byte aligned. */
  *raw = (*raw + 63) & ~(size_t)63;
}

static MPI_Op mpi_op(kiln_reduce_op op) {
  switch (op) {
  case KILN_REDUCE_MAX:
    return MPI_MAX;
  case KILN_REDUCE_MIN:
    return MPI_MIN;
  default:
    return MPI_SUM; /* MEAN divides afterwards */
  }
}

static kiln_status fail(kiln_mpi_request *r, kiln_status status) {
  /* A half-done collective leaves the other ranks inside MPI with us: the
   * communicator cannot be trusted again. */
  r->mpi->broken = true;
  r->finished = true;
  r->result = status;
  snprintf(r->message, sizeof r->message, "%s", kiln_last_error());
  return status;
}

static void widen(const kiln_mpi_request *r, const unsigned char *raw,
                  float *wide, size_t n) {
  const uint16_t *h = (const uint16_t *)raw;
  if (r->a.dtype == KILN_F32) {
    memcpy(wide, raw, n * 4);
  } else if (r->a.dtype == KILN_F16) {
    kiln_f16_to_f32(h, wide, n);
  } else {
    kiln_bf16_to_f32(h, wide, n);
  }
}

/* Divide for MEAN, then store in the device format. */
static void narrow(const kiln_mpi_request *r, float *wide, unsigned char *raw,
                   size_t n) {
  if (r->a.op == KILN_REDUCE_MEAN) {
    float size = (float)r->mpi->size;
    for (size_t i = 0; i < n; i++)
      wide[i] /= size;
  }
  uint16_t *h = (uint16_t *)raw;
  if (r->a.dtype == KILN_F32) {
    if ((unsigned char *)wide != raw)
      memcpy(raw, wide, n * 4);
  } else if (r->a.dtype == KILN_F16) {
    kiln_f32_to_f16(wide, h, n);
  } else {
    kiln_f32_to_bf16(wide, h, n);
  }
}

/* Enqueue the device -> host copies of chunk c into slot s. */
static kiln_status start_read(kiln_mpi_request *r, struct slot *s, size_t c) {
  size_t n = chunk_len(r, c), first = c * r->chunk_elems, es = r->es;
  /* The first read waits for the caller's wait list; the queue is in order,
   * so every later command follows it. */
  size_t num_wait = c == 0 ? r->a.num_wait : 0;
  kiln_event *const *wait = c == 0 ? r->a.wait_list : NULL;
  kiln_status status = KILN_OK;
  s->chunk = c;
  s->stage = READING;
  s->event = NULL;
  switch (r->a.kind) {
  case KIND_BROADCAST:
    if (r->mpi->rank != r->a.root)
      return KILN_OK; /* receives only */
    /* fall through */
  case KIND_ALLREDUCE:
  case KIND_ALLGATHER:
    status = kiln_buffer_read(
        r->a.queue,
        &(kiln_range){r->a.src, r->a.src_offset + first, n, r->a.dtype}, s->raw,
        num_wait, wait, &s->event);
    break;
  case KIND_REDUCE_SCATTER:
    for (int p = 0; p < r->mpi->size && status == KILN_OK; p++) {
      kiln_event_release(s->event);
      s->event = NULL;
      size_t at = (size_t)p * r->a.count + first;
      status = kiln_buffer_read(
          r->a.queue,
          &(kiln_range){r->a.src, r->a.src_offset + at, n, r->a.dtype},
          s->raw + (size_t)p * n * es, p == 0 ? num_wait : 0,
          p == 0 ? wait : NULL, &s->event);
    }
    break;
  }
  return status;
}

static kiln_status start_exchange(kiln_mpi_request *r, struct slot *s) {
  size_t n = chunk_len(r, s->chunk), es = r->es;
  int ni = (int)n, p = r->mpi->size, rc = MPI_SUCCESS;
  const char *call = "";
  switch (r->a.kind) {
  case KIND_ALLREDUCE: {
    float *data = (float *)s->raw;
    if (r->a.dtype != KILN_F32) {
      widen(r, s->raw, s->wide, n);
      data = s->wide;
    }
    call = "MPI_Iallreduce";
    rc = MPI_Iallreduce(MPI_IN_PLACE, data, ni, MPI_FLOAT, mpi_op(r->a.op),
                        r->mpi->data, &s->mpi);
    break;
  }
  case KIND_BROADCAST:
    call = "MPI_Ibcast";
    rc = MPI_Ibcast(s->raw, (int)(n * es), MPI_BYTE, r->a.root, r->mpi->comm,
                    &s->mpi);
    break;
  case KIND_ALLGATHER:
    call = "MPI_Iallgather";
    rc = MPI_Iallgather(s->raw, (int)(n * es), MPI_BYTE, s->raw + n * es,
                        (int)(n * es), MPI_BYTE, r->mpi->data, &s->mpi);
    break;
  case KIND_REDUCE_SCATTER:
    widen(r, s->raw, s->wide, (size_t)p * n);
    call = "MPI_Ireduce_scatter_block";
    rc = MPI_Ireduce_scatter_block(s->wide, s->wide + (size_t)p * n, ni,
                                   MPI_FLOAT, mpi_op(r->a.op), r->mpi->comm,
                                   &s->mpi);
    break;
  }
  if (rc != MPI_SUCCESS)
    return kiln__mpi_fail(r->mpi, r->a.fn, call, rc);
  s->stage = EXCHANGING;
  return KILN_OK;
}

/* Chunk exchanged: turn it back into device format and enqueue the writes. */
static kiln_status start_write(kiln_mpi_request *r, struct slot *s) {
  size_t n = chunk_len(r, s->chunk), first = s->chunk * r->chunk_elems;
  size_t es = r->es, p = (size_t)r->mpi->size;
  kiln_status status = KILN_OK;
  s->stage = WRITING;
  s->event = NULL;
  switch (r->a.kind) {
  case KIND_ALLREDUCE:
    if (r->a.dtype == KILN_F32)
      narrow(r, (float *)s->raw, s->raw, n);
    else
      narrow(r, s->wide, s->raw, n);
    break;
  case KIND_REDUCE_SCATTER:
    narrow(r, s->wide + p * n, s->raw, n);
    break;
  default:
    break;
  }
  switch (r->a.kind) {
  case KIND_BROADCAST:
    if (r->mpi->rank == r->a.root)
      return KILN_OK; /* its data is already in place */
    /* fall through */
  case KIND_ALLREDUCE:
  case KIND_REDUCE_SCATTER:
    status = kiln_buffer_write(
        r->a.queue, s->raw,
        &(kiln_range){r->a.dst, r->a.dst_offset + first, n, r->a.dtype}, 0,
        NULL, &s->event);
    break;
  case KIND_ALLGATHER:
    for (size_t q = 0; q < p && status == KILN_OK; q++) {
      kiln_event_release(s->event);
      s->event = NULL;
      size_t at = q * r->a.count + first;
      status = kiln_buffer_write(
          r->a.queue, s->raw + (q + 1) * n * es,
          &(kiln_range){r->a.dst, r->a.dst_offset + at, n, r->a.dtype}, 0, NULL,
          &s->event);
    }
    break;
  }
  return status;
}

/* Whether the slot's device command has completed (true when it has none). */
static kiln_status device_done(struct slot *s, bool *done) {
  *done = true;
  if (s->event == NULL)
    return KILN_OK;
  kiln_event_state state;
  kiln_status status = kiln_event_get_state(s->event, &state);
  if (status != KILN_OK)
    return status;
  if (state == KILN_EVENT_FAILED)
    return kiln_event_wait(s->event); /* names the failure */
  *done = state == KILN_EVENT_COMPLETE;
  if (*done) {
    kiln_event_release(s->event);
    s->event = NULL;
  }
  return KILN_OK;
}

/* One pass over every slot; *moved tells whether anything advanced. */
static kiln_status advance(kiln_mpi_request *r, bool *moved) {
  kiln_status status = KILN_OK;
  bool done, enqueued = false;
  *moved = false;
  for (size_t i = 0; i < r->mpi->slots; i++) {
    struct slot *s = &r->slots[i];
    if (s->stage == WRITING) {
      if ((status = device_done(s, &done)) != KILN_OK)
        return status;
      if (done) {
        s->stage = IDLE;
        r->done++;
        *moved = true;
      }
    } else if (s->stage == EXCHANGING) {
      int flag = 0;
      int rc = MPI_Test(&s->mpi, &flag, MPI_STATUS_IGNORE);
      if (rc != MPI_SUCCESS)
        return kiln__mpi_fail(r->mpi, r->a.fn, "MPI_Test", rc);
      if (flag) {
        if ((status = start_write(r, s)) != KILN_OK)
          return status;
        enqueued = *moved = true;
      }
    }
  }
  while (r->next_read < r->chunks &&
         r->slots[r->next_read % r->mpi->slots].stage == IDLE) {
    struct slot *s = &r->slots[r->next_read % r->mpi->slots];
    if ((status = start_read(r, s, r->next_read)) != KILN_OK)
      return status;
    r->next_read++;
    enqueued = *moved = true;
  }
  if (enqueued && (status = kiln_queue_flush(r->a.queue)) != KILN_OK)
    return status;
  while (r->ticket == r->mpi->turn && r->next_exchange < r->next_read) {
    struct slot *s = &r->slots[r->next_exchange % r->mpi->slots];
    if ((status = device_done(s, &done)) != KILN_OK)
      return status;
    if (!done)
      break;
    if ((status = start_exchange(r, s)) != KILN_OK)
      return status;
    r->next_exchange++;
    *moved = true;
  }
  if (r->ticket == r->mpi->turn && r->next_exchange == r->chunks) {
    r->mpi->turn++; /* the next request may exchange */
    *moved = true;
  }
  return KILN_OK;
}

kiln_status kiln__mpi_request_create(kiln_mpi *mpi,
                                     const struct kiln__mpi_args *args,
                                     kiln_mpi_request **out) {
  kiln_mpi_request *r =
      calloc(1, sizeof *r + mpi->slots * sizeof(struct slot));
  if (r == NULL)
    return kiln__mpi_error(KILN_ERR_OUT_OF_HOST_MEMORY, "%s: out of memory",
                           args->fn);
  r->mpi = mpi;
  r->a = *args;
  r->es = kiln_dtype_size(args->dtype);
  /* A small collective stages only what it moves. */
  r->chunk_elems = mpi->chunk_bytes / r->es;
  if (r->chunk_elems > args->count)
    r->chunk_elems = args->count;
  if (r->chunk_elems == 0)
    r->chunk_elems = 1;
  r->chunks = (args->count + r->chunk_elems - 1) / r->chunk_elems;
  size_t raw, wide, used = r->chunks < mpi->slots ? r->chunks : mpi->slots;
  slot_bytes(r, &raw, &wide);
  size_t need = used * (raw + wide);
  if (!mpi->stage_taken && !mpi->broken) {
    if (mpi->stage_bytes < need) {
      free(mpi->stage);
      mpi->stage = malloc(need);
      mpi->stage_bytes = mpi->stage ? need : 0;
    }
    r->memory = mpi->stage;
    mpi->stage_taken = r->memory != NULL;
  }
  if (r->memory == NULL && need > 0) {
    r->memory = malloc(need);
    r->own_memory = true;
  }
  if (r->memory == NULL && need > 0) {
    free(r);
    return kiln__mpi_error(KILN_ERR_OUT_OF_HOST_MEMORY,
                           "%s: cannot allocate %zu bytes of host staging",
                           args->fn, need);
  }
  for (size_t i = 0; i < used; i++) {
    r->slots[i].raw = r->memory + i * (raw + wide);
    r->slots[i].wide = (float *)(r->memory + i * (raw + wide) + raw);
  }
  /* Slots past `used` keep no memory and are never reached: with fewer
   * chunks than slots, chunk c always lands in slot c. */
  r->ticket = mpi->next_ticket++;
  kiln_mpi_request **tail = &mpi->requests;
  while (*tail != NULL)
    tail = &(*tail)->next;
  *tail = r;
  mpi->live_requests++;
  *out = r;
  return KILN_OK;
}

/* Advance r until it stops moving. */
static void progress_one(kiln_mpi_request *r) {
  if (r->finished)
    return;
  if (r->mpi->broken) {
    fail(r, kiln__mpi_error(KILN_ERR_COMM,
                            "%s: another collective on this kiln_mpi timed "
                            "out or failed half-way; it can no longer be "
                            "used", r->a.fn));
    return;
  }
  bool moved = true;
  kiln_status status = KILN_OK;
  while (moved && r->done < r->chunks && status == KILN_OK)
    status = advance(r, &moved);
  if (status == KILN_OK && r->chunks == 0 && r->ticket == r->mpi->turn)
    r->mpi->turn++;
  if (status != KILN_OK)
    fail(r, status);
  else if (r->done == r->chunks && r->ticket < r->mpi->turn) {
    r->finished = true;
    r->result = KILN_OK;
  }
}

kiln_status kiln_mpi_test(kiln_mpi_request *request, bool *done) {
  if (done == NULL)
    return kiln__mpi_error(KILN_ERR_NULL_POINTER, "kiln_mpi_test: done is NULL");
  *done = false;
  if (request == NULL)
    return kiln__mpi_error(KILN_ERR_NULL_POINTER,
                           "kiln_mpi_test: request is NULL");
  /* Every live request moves, oldest first: a later one may be waiting for
   * its turn to exchange behind one the caller has not tested yet. */
  for (kiln_mpi_request *r = request->mpi->requests; r != NULL; r = r->next)
    progress_one(r);
  *done = request->finished;
  if (request->result != KILN_OK)
    return kiln_set_last_error(request->result, request->message);
  return KILN_OK;
}

/* Block efficiently on whatever the pipeline waits for: a device command
 * when no MPI exchange is pending, else a pause between MPI polls. */
static void idle(kiln_mpi_request *r, unsigned *idle_rounds) {
  for (size_t i = 0; i < r->mpi->slots; i++)
    if (r->slots[i].stage == EXCHANGING) {
      kiln__mpi_pause(idle_rounds);
      return;
    }
  for (size_t i = 0; i < r->mpi->slots; i++)
    if (r->slots[i].event != NULL) {
      kiln_event_wait(r->slots[i].event); /* a failure shows in advance() */
      return;
    }
  /* Waiting for an earlier request's turn to pass. */
  kiln__mpi_pause(idle_rounds);
}

kiln_status kiln_mpi_wait(kiln_mpi_request *request) {
  if (request == NULL)
    return kiln__mpi_error(KILN_ERR_NULL_POINTER,
                           "kiln_mpi_wait: request is NULL");
  kiln_mpi_request *r = request;
  kiln_mpi *mpi = r->mpi;
  double start = kiln__mpi_now();
  kiln_status status = KILN_OK;
  bool done = false;
  unsigned idle_rounds = 0;
  size_t seen = r->done + r->next_exchange + r->next_read;
  while ((status = kiln_mpi_test(r, &done)) == KILN_OK && !done) {
    size_t now = r->done + r->next_exchange + r->next_read;
    if (now != seen)
      idle_rounds = 0; /* progress: poll eagerly again */
    seen = now;
    if (mpi->timeout_s > 0 && kiln__mpi_now() - start > mpi->timeout_s) {
      status = kiln__mpi_error(
          KILN_ERR_COMM,
          "%s: rank %d of %d waited %.3g s for the other ranks and gave up "
          "(kiln_mpi_options.timeout_s), with %zu of %zu chunks done: a "
          "rank died, hangs or never called this collective; this kiln_mpi "
          "can no longer be used",
          r->a.fn, mpi->rank, mpi->size, mpi->timeout_s, r->done, r->chunks);
      fail(r, status);
      break;
    }
    idle(r, &idle_rounds);
  }
  /* Device commands still reading or writing the slots must end before the
   * memory is reused; MPI operations still pending after a failure cannot be
   * cancelled, so then the memory is left to them. */
  if (status != KILN_OK) {
    for (size_t i = 0; i < mpi->slots; i++)
      if (r->slots[i].event != NULL) {
        kiln_event_wait(r->slots[i].event);
        kiln_event_release(r->slots[i].event);
      }
    kiln_set_last_error(status, r->message[0] ? r->message : kiln_last_error());
  } else if (r->own_memory) {
    free(r->memory);
  }
  if (!r->own_memory && status == KILN_OK)
    mpi->stage_taken = false;
  for (kiln_mpi_request **link = &mpi->requests; *link != NULL;
       link = &(*link)->next)
    if (*link == r) {
      *link = r->next;
      break;
    }
  mpi->live_requests--;
  free(r);
  return status;
}
