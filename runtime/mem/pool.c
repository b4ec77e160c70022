/* The per-context memory pool (kiln_pool.h).
 *
 * Blocks are driver buffers rounded up to a size class (four classes per
 * power of two, so at most 25% is wasted). Each block keeps, besides its
 * cl_mem, the kiln_buffer struct it is handed out as: a pool hit only pops
 * a free list and refills the struct's size and flags under one lock, with
 * no driver call, no malloc and no event query (callgrind: about 300
 * instructions for alloc+destroy, against about 1,000 when every hit
 * retained the cl_mem and wrapped a fresh struct). kiln_buffer_destroy
 * hands a pooled buffer to give_back, which parks its block as
 * "unfenced"; the block keeps the only cl_mem reference. A block goes back to the free lists only after a marker
 * enqueued on the home queue behind it (a "fence") has completed: the home
 * queue is in order, so every command enqueued there before the marker,
 * including every use of the block, has ended by then. Fences are enqueued
 * lazily, when an allocation finds no free block, so that a quick
 * alloc/destroy loop costs no OpenCL call per destroy. A kiln_queue_finish
 * on the home queue frees, without a marker, every block given back
 * before it began (the queue's sync tickets, internal.h): so a trim after
 * a finish gives back every block the caller is done with. PoCL 3.1 runs
 * clSetMemObjectDestructorCallback as soon as the last reference goes, even
 * with commands pending, so that callback cannot tell when a block is free.
 *
 * One mutex guards everything; driver calls made under it are cheap
 * (clCreateBuffer, markers, event queries) except the wait in make_room,
 * which only happens when the pool is at its limit. */
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>

#include "mem.h"

#define MIN_BLOCK_BYTES 256u
#define NUM_CLASSES (4u * 64u + 1u)
/* How much more than twice the bytes in use the pool may hold before an
 * allocation polls pending fences, and for how long it polls. */
#define SLACK_BYTES ((size_t)64 << 20)
#define POLL_NS 200000u

struct kiln__pool_block {
  struct kiln__pooled base;       /* first: buffers hold &base */
  kiln_pool *pool;
  cl_mem mem;                     /* the pool's reference, the only one */
  kiln_buffer *buffer;            /* what it is handed out as */
  size_t bytes;                   /* the driver allocation */
  size_t requested;               /* while in use: the buffer's size */
  uint64_t ticket;                /* the home queue's finishes begun when
                                     given back */
  bool in_use;                    /* handed out, not yet given back */
  unsigned cls;
  struct kiln__pool_block *next;
};

/* Blocks given back before one marker on the home queue. */
struct pool_fence {
  cl_event marker;
  uint64_t ticket; /* the home queue's finishes begun when enqueued */
  struct kiln__pool_block *blocks;
  struct pool_fence *next;
};

struct kiln_pool {
  kiln_context *ctx;
  cl_command_queue home; /* retained */
  struct kiln__queue_sync *sync; /* home's, retained */
  uint64_t done_seen; /* sync->done when the unfenced list was last scanned */
  pthread_mutex_t lock;
  struct kiln__pool_block *free_lists[NUM_CLASSES];
  struct kiln__pool_block *unfenced;
  struct pool_fence *fences, *fences_tail; /* oldest first */
  kiln_pool_stats stats;
};

/* Round size up to its class: 2^p <= size, steps of 2^(p-2). A size at the
 * top of a power's range lands on the next power's first class, so class
 * numbers and block sizes agree. */
static size_t class_of(size_t size, unsigned *cls) {
  if (size < MIN_BLOCK_BYTES)
    size = MIN_BLOCK_BYTES;
  unsigned p = 63u - (unsigned)__builtin_clzll((unsigned long long)size);
  size_t step = (size_t)1 << (p - 2);
  size_t rounded = size + (step - 1);
  if (rounded < size) { /* only near SIZE_MAX, refused earlier anyway */
    *cls = NUM_CLASSES - 1;
    return size;
  }
  rounded &= ~(step - 1);
  *cls = 4u * p + (unsigned)(rounded / step - 4u);
  return rounded;
}

static void add_reserved(kiln_pool *pool, size_t bytes) {
  pool->stats.reserved_bytes += bytes;
  if (pool->stats.reserved_bytes > pool->stats.peak_reserved_bytes)
    pool->stats.peak_reserved_bytes = pool->stats.reserved_bytes;
}

static void trace_pool(const kiln_pool *pool, const char *name,
                       uint64_t start_ns, size_t bytes) {
  const kiln_pool_stats *s = &pool->stats;
  json_t *args = json_pack(
      "{s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:f}", "bytes", (double)bytes,
      "in_use_bytes", (double)s->in_use_bytes, "pending_bytes",
      (double)s->pending_bytes, "cached_bytes", (double)s->cached_bytes,
      "reserved_bytes", (double)s->reserved_bytes, "peak_reserved_bytes",
      (double)s->peak_reserved_bytes, "hits", (double)s->hits, "misses",
      (double)s->misses);
  kiln__trace_host(pool->ctx, "kiln.pool", name, args, start_ns);
}

static void free_block(kiln_pool *pool, struct kiln__pool_block *block) {
  pool->stats.reserved_bytes -= block->bytes;
  clReleaseMemObject(block->mem);
  pthread_mutex_destroy(&block->buffer->map_lock);
  free(block->buffer);
  free(block);
}

/* Whether a finish of the home queue that began after ticket has returned:
 * then every command enqueued there before it has completed. */
static bool finished_since(const kiln_pool *pool, uint64_t ticket) {
  return atomic_load(&pool->sync->done) > ticket;
}

static void cache_block(kiln_pool *pool, struct kiln__pool_block *b) {
  pool->stats.pending_bytes -= b->bytes;
  pool->stats.cached_bytes += b->bytes;
  b->next = pool->free_lists[b->cls];
  pool->free_lists[b->cls] = b;
}

/* Move the unfenced blocks that a finish of the home queue has freed to
 * the free lists. A block's ticket is never below done when it is given
 * back, so only a finish returned since the last scan can free one. */
static void collect_finished(kiln_pool *pool) {
  const uint64_t done = atomic_load(&pool->sync->done);
  if (done == pool->done_seen)
    return;
  pool->done_seen = done;
  for (struct kiln__pool_block **link = &pool->unfenced; *link != NULL;) {
    struct kiln__pool_block *b = *link;
    if (finished_since(pool, b->ticket)) {
      *link = b->next;
      cache_block(pool, b);
    } else {
      link = &b->next;
    }
  }
}

/* Move the blocks of every completed fence, oldest first, to the free
 * lists. A failed command has ended too, so its block is free as well. */
static void collect_fences(kiln_pool *pool) {
  collect_finished(pool);
  while (pool->fences != NULL) {
    struct pool_fence *f = pool->fences;
    if (!finished_since(pool, f->ticket)) {
      cl_int state = CL_QUEUED;
      cl_int err = clGetEventInfo(f->marker, CL_EVENT_COMMAND_EXECUTION_STATUS,
                                  sizeof state, &state, NULL);
      if (err == CL_SUCCESS && state > CL_COMPLETE)
        return; /* the home queue is in order: later fences are not done */
    }
    pool->fences = f->next;
    if (pool->fences == NULL)
      pool->fences_tail = NULL;
    while (f->blocks != NULL) {
      struct kiln__pool_block *b = f->blocks;
      f->blocks = b->next;
      cache_block(pool, b);
    }
    clReleaseEvent(f->marker);
    free(f);
  }
}

/* Enqueue a fence behind the unfenced blocks. On failure they stay
 * unfenced (pending): never reused early, tried again next time. */
static void fence_unfenced(kiln_pool *pool) {
  if (pool->unfenced == NULL)
    return;
  struct pool_fence *f = calloc(1, sizeof *f);
  if (f == NULL)
    return;
  f->ticket = atomic_load(&pool->sync->started);
  if (clEnqueueMarkerWithWaitList(pool->home, 0, NULL, &f->marker) !=
      CL_SUCCESS) {
    free(f);
    return;
  }
  /* Flushed at once: a marker left in the queue completes only at the
   * caller's next flush or wait, and a loop that allocates without
   * enqueueing anything (or only every so often) then found no block free
   * and kept asking the driver (kiln bench pool: 16k misses in 22k
   * allocations of 4 KiB). One flush per fence, and one fence per round
   * trip (take_block), is cheap beside the marker itself (about 1 us on
   * PoCL; the round trip takes 20-40 us). */
  clFlush(pool->home);
  f->blocks = pool->unfenced;
  pool->unfenced = NULL;
  if (pool->fences_tail != NULL)
    pool->fences_tail->next = f;
  else
    pool->fences = f;
  pool->fences_tail = f;
}

/* Give every cached block back to the driver; returns the bytes. */
static size_t release_cached(kiln_pool *pool) {
  size_t released = 0;
  for (unsigned c = 0; c < NUM_CLASSES; c++)
    while (pool->free_lists[c] != NULL) {
      struct kiln__pool_block *b = pool->free_lists[c];
      pool->free_lists[c] = b->next;
      pool->stats.cached_bytes -= b->bytes;
      released += b->bytes;
      free_block(pool, b);
    }
  return released;
}

/* Make reserved + bytes fit the limit: cached blocks go first, then the
 * pool waits for pending ones (which then are cached, and go). */
static kiln_status make_room(kiln_pool *pool, size_t bytes, size_t request) {
  size_t limit = pool->stats.limit_bytes;
  while (limit != 0 && pool->stats.reserved_bytes + bytes > limit) {
    if (pool->stats.cached_bytes > 0) {
      release_cached(pool);
      continue;
    }
    fence_unfenced(pool);
    if (pool->fences == NULL)
      return kiln__fail(
          KILN_ERR_OUT_OF_DEVICE_MEMORY,
          "kiln_pool_alloc: size_bytes %zu (a %zu-byte block) does not fit "
          "the pool's limit of %zu bytes: %zu bytes are in use by %zu live "
          "buffer%s",
          request, bytes, limit, pool->stats.in_use_bytes,
          pool->stats.live_buffers, pool->stats.live_buffers == 1 ? "" : "s");
    cl_int err = clFlush(pool->home);
    if (err == CL_SUCCESS)
      err = clWaitForEvents(1, &pool->fences->marker);
    if (err != CL_SUCCESS)
      return kiln__fail_cl(err, "clWaitForEvents", pool->ctx->device,
                           "kiln_pool_alloc: waiting for given-back blocks "
                           "to make room under the pool's limit");
    collect_fences(pool);
  }
  return KILN_OK;
}

static bool give_back(struct kiln__pooled *self);

/* Poll the oldest fence for up to POLL_NS; true (and its blocks collected)
 * when it completed in that time. */
static bool poll_oldest_fence(kiln_pool *pool) {
  clFlush(pool->home);
  uint64_t start = kiln__now_ns();
  for (;;) {
    cl_int state = CL_QUEUED;
    if (clGetEventInfo(pool->fences->marker, CL_EVENT_COMMAND_EXECUTION_STATUS,
                       sizeof state, &state, NULL) != CL_SUCCESS)
      return false;
    if (state <= CL_COMPLETE) {
      collect_fences(pool);
      return true;
    }
    if (kiln__now_ns() - start > POLL_NS)
      return false;
    sched_yield();
  }
}

/* Pop a free block of class cls, or NULL. */
static struct kiln__pool_block *pop_free(kiln_pool *pool, unsigned cls) {
  struct kiln__pool_block *b = pool->free_lists[cls];
  if (b != NULL) {
    pool->free_lists[cls] = b->next;
    pool->stats.cached_bytes -= b->bytes;
    pool->stats.hits++;
  }
  return b;
}

/* The slow path, when class cls has no free block: collect completed
 * fences, fence what came back, and failing all that, a new block from
 * the driver. */
static kiln_status take_block(kiln_pool *pool, size_t size, unsigned cls,
                              size_t bytes, struct kiln__pool_block **out,
                              uint64_t *driver_start_ns) {
  collect_fences(pool);
  /* One fence in flight at a time: blocks given back meanwhile wait for
   * the next one, so a fast alloc/destroy loop costs one marker per fence
   * round trip, not one per block. */
  if (pool->free_lists[cls] == NULL && pool->unfenced != NULL &&
      pool->fences == NULL) {
    fence_unfenced(pool);
    collect_fences(pool);
  }
  /* Holding much more than is in use means blocks come back faster than
   * their fences complete (a marker takes tens of microseconds on PoCL;
   * measured: 2 GiB reserved for one live 1 MiB buffer churned in a loop):
   * then the oldest fence is polled for a while before the driver is
   * asked. Never an unbounded wait: the queue may be held up by a user
   * event that this very thread is to set. */
  while (pool->free_lists[cls] == NULL &&
         pool->stats.reserved_bytes + bytes >
             2 * (pool->stats.in_use_bytes + bytes) + SLACK_BYTES) {
    if (pool->fences == NULL)
      fence_unfenced(pool);
    if (pool->fences == NULL || !poll_oldest_fence(pool))
      break;
  }
  struct kiln__pool_block *b = pop_free(pool, cls);
  if (b != NULL) {
    *out = b;
    return KILN_OK;
  }
  bool traced = kiln__trace_enabled();
  uint64_t start = traced ? kiln__now_ns() : 0;
  kiln_status status = make_room(pool, bytes, size);
  if (status != KILN_OK)
    return status;
  b = calloc(1, sizeof *b);
  if (b == NULL)
    return kiln__fail(KILN_ERR_OUT_OF_HOST_MEMORY,
                      "kiln_pool_alloc: out of host memory");
  cl_int err = CL_SUCCESS;
  b->mem = clCreateBuffer(pool->ctx->cl, CL_MEM_READ_WRITE, bytes, NULL, &err);
  if (err != CL_SUCCESS || b->mem == NULL) {
    free(b);
    return kiln__fail_cl(err != CL_SUCCESS ? err : CL_OUT_OF_HOST_MEMORY,
                         "clCreateBuffer", pool->ctx->device,
                         "kiln_pool_alloc: a %zu-byte block for size_bytes %zu",
                         bytes, size);
  }
  /* wrap takes over the one reference, which stays the block's (and on
   * failure releases it). The struct counts as a context child only while
   * handed out, which the caller counts for every allocation. */
  status = kiln__buffer_wrap(pool->ctx, b->mem, size, 0, NULL, 0,
                             "kiln_pool_alloc", &b->buffer);
  if (status != KILN_OK) {
    free(b);
    return status;
  }
  kiln__context_child_removed(pool->ctx);
  b->buffer->pooled = &b->base;
  b->base.give_back = give_back;
  b->pool = pool;
  b->bytes = bytes;
  b->cls = cls;
  add_reserved(pool, bytes);
  pool->stats.misses++;
  /* Traced by the caller once the block counts as in use, so that the
   * statistics in the trace add up. */
  *driver_start_ns = traced ? start : 0;
  *out = b;
  return KILN_OK;
}

kiln_status kiln_pool_create(kiln_queue *queue, size_t limit_bytes,
                             kiln_pool **out) {
  if (out == NULL)
    return kiln__fail(KILN_ERR_NULL_POINTER, "kiln_pool_create: out is NULL");
  *out = NULL;
  if (queue == NULL)
    return kiln__fail(KILN_ERR_NULL_POINTER,
                      "kiln_pool_create: queue is NULL");
  kiln_pool *pool = calloc(1, sizeof *pool);
  if (pool == NULL || pthread_mutex_init(&pool->lock, NULL) != 0) {
    free(pool);
    return kiln__fail(KILN_ERR_OUT_OF_HOST_MEMORY,
                      "kiln_pool_create: out of host memory");
  }
  pool->ctx = queue->ctx;
  pool->home = queue->cl;
  clRetainCommandQueue(pool->home);
  pool->sync = queue->sync;
  atomic_fetch_add(&pool->sync->refs, 1);
  pool->stats.limit_bytes = limit_bytes;
  kiln__context_child_added(pool->ctx);
  *out = pool;
  return KILN_OK;
}

kiln_status kiln_pool_destroy(kiln_pool *pool) {
  if (pool == NULL)
    return KILN_OK;
  pthread_mutex_lock(&pool->lock);
  size_t live = pool->stats.live_buffers;
  if (live > 0) {
    pthread_mutex_unlock(&pool->lock);
    return kiln__fail(KILN_ERR_BUSY,
                      "kiln_pool_destroy: %zu buffer%s from this pool %s "
                      "still alive; destroy %s first",
                      live, live == 1 ? "" : "s", live == 1 ? "is" : "are",
                      live == 1 ? "it" : "them");
  }
  bool traced = kiln__trace_enabled();
  if (traced)
    trace_pool(pool, "pool_destroy", kiln__now_ns(), 0);
  release_cached(pool);
  /* Pending blocks: releasing the pool's reference is safe with commands
   * pending, the driver frees the memory after them. */
  while (pool->fences != NULL) {
    struct pool_fence *f = pool->fences;
    pool->fences = f->next;
    for (struct kiln__pool_block *b = f->blocks, *n; b != NULL; b = n) {
      n = b->next;
      free_block(pool, b);
    }
    clReleaseEvent(f->marker);
    free(f);
  }
  for (struct kiln__pool_block *b = pool->unfenced, *n; b != NULL; b = n) {
    n = b->next;
    free_block(pool, b);
  }
  pthread_mutex_unlock(&pool->lock);
  clReleaseCommandQueue(pool->home);
  kiln__queue_sync_release(pool->sync);
  kiln__context_child_removed(pool->ctx);
  pthread_mutex_destroy(&pool->lock);
  free(pool);
  return KILN_OK;
}

kiln_status kiln_pool_alloc(kiln_pool *pool, size_t size_bytes, unsigned flags,
                            kiln_buffer **out) {
  static const char fn[] = "kiln_pool_alloc";
  if (out == NULL)
    return kiln__fail(KILN_ERR_NULL_POINTER, "%s: out is NULL", fn);
  *out = NULL;
  if (pool == NULL)
    return kiln__fail(KILN_ERR_NULL_POINTER, "%s: pool is NULL", fn);
  unsigned known = KILN_MEM_READ_ONLY | KILN_MEM_WRITE_ONLY;
  if ((flags & ~known) != 0 || flags == known)
    return kiln__fail(KILN_ERR_INVALID_ARGUMENT,
                      "%s: flags 0x%x must be 0, KILN_MEM_READ_ONLY or "
                      "KILN_MEM_WRITE_ONLY",
                      fn, flags);
  if (size_bytes == 0)
    return kiln__fail(KILN_ERR_INVALID_SIZE, "%s: size_bytes is 0", fn);
  uint64_t max = pool->ctx->device->info.max_alloc_bytes;
  if ((uint64_t)size_bytes > max)
    return kiln__fail(KILN_ERR_INVALID_SIZE,
                      "%s: size_bytes %zu exceeds the device's maximum "
                      "allocation of %llu bytes",
                      fn, size_bytes, (unsigned long long)max);
  unsigned cls;
  size_t bytes = class_of(size_bytes, &cls);
  if ((uint64_t)bytes > max)
    bytes = (size_t)max; /* every request of this class is <= max */

  pthread_mutex_lock(&pool->lock);
  struct kiln__pool_block *block = pop_free(pool, cls);
  uint64_t driver_start_ns = 0;
  kiln_status status = KILN_OK;
  if (block == NULL)
    status = take_block(pool, size_bytes, cls, bytes, &block, &driver_start_ns);
  if (block != NULL) {
    pool->stats.in_use_bytes += block->bytes;
    pool->stats.requested_bytes += size_bytes;
    pool->stats.live_buffers++;
    block->requested = size_bytes;
    block->in_use = true;
    if (driver_start_ns != 0)
      trace_pool(pool, "pool_driver_alloc", driver_start_ns, block->bytes);
  }
  pthread_mutex_unlock(&pool->lock);
  if (block == NULL)
    return status;
  /* Every other field is as kiln__buffer_wrap left it: destroy refuses a
   * buffer with views, maps or recordings, so none are left. */
  kiln_buffer *buffer = block->buffer;
  buffer->size = size_bytes;
  buffer->flags = flags;
  kiln__context_child_added(pool->ctx);
  *out = buffer;
  return KILN_OK;
}

/* From kiln_buffer_destroy, which leaves the cl_mem and the struct to the
 * block. */
static bool give_back(struct kiln__pooled *self) {
  struct kiln__pool_block *block = (struct kiln__pool_block *)self;
  kiln_pool *pool = block->pool;
  pthread_mutex_lock(&pool->lock);
  if (!block->in_use) {
    pthread_mutex_unlock(&pool->lock);
    return false;
  }
  block->in_use = false;
  block->ticket = atomic_load(&pool->sync->started);
  pool->stats.in_use_bytes -= block->bytes;
  pool->stats.requested_bytes -= block->requested;
  pool->stats.live_buffers--;
  pool->stats.pending_bytes += block->bytes;
  block->requested = 0;
  block->next = pool->unfenced;
  pool->unfenced = block;
  pthread_mutex_unlock(&pool->lock);
  return true;
}

/* Whether buffer (of pool) is handed out. */
static bool handed_out(kiln_pool *pool, const kiln_buffer *buffer) {
  pthread_mutex_lock(&pool->lock);
  bool live = ((const struct kiln__pool_block *)buffer->pooled)->in_use;
  pthread_mutex_unlock(&pool->lock);
  return live;
}

kiln_status kiln_pool_release_after(kiln_pool *pool, kiln_buffer *buffer,
                                    size_t num_wait,
                                    kiln_event *const *wait_list,
                                    kiln_event **out_event) {
  static const char fn[] = "kiln_pool_release_after";
  if (out_event != NULL)
    *out_event = NULL;
  if (pool == NULL)
    return kiln__fail(KILN_ERR_NULL_POINTER, "%s: pool is NULL", fn);
  if (buffer == NULL)
    return kiln__fail(KILN_ERR_NULL_POINTER, "%s: buffer is NULL", fn);
  if (buffer->pooled == NULL || buffer->pooled->give_back != give_back ||
      ((struct kiln__pool_block *)buffer->pooled)->pool != pool)
    return kiln__fail(KILN_ERR_INVALID_ARGUMENT,
                      "%s: buffer is not from this pool", fn);
  /* Its struct stays the block's, so a second release reaches the pool:
   * refused before a marker is enqueued for it. */
  if (!handed_out(pool, buffer))
    return kiln__fail(KILN_ERR_INVALID_ARGUMENT,
                      "%s: buffer was already given back to the pool "
                      "(released or destroyed before)",
                      fn);
  cl_event inline_buf[KILN__WAIT_INLINE], *waits = NULL;
  kiln_status status =
      kiln__wait_list_cl(pool->ctx, num_wait, wait_list, inline_buf, &waits);
  if (status != KILN_OK) {
    char message[1024];
    snprintf(message, sizeof message, "%s", kiln_last_error());
    return kiln__fail(status, "%s: %s", fn, message);
  }
  /* The home queue is in order: the fence enqueued later behind this
   * marker completes only after these events, and so does the marker the
   * caller gets. */
  cl_event ev = NULL;
  if (num_wait > 0 || out_event != NULL) {
    cl_int err = clEnqueueMarkerWithWaitList(
        pool->home, (cl_uint)num_wait, waits, out_event != NULL ? &ev : NULL);
    kiln__wait_list_free(waits, inline_buf);
    if (err != CL_SUCCESS)
      return kiln__fail_cl(err, "clEnqueueMarkerWithWaitList",
                           pool->ctx->device, "%s", fn);
  }
  status = kiln_buffer_destroy(buffer);
  if (ev == NULL)
    return status;
  if (status != KILN_OK) {
    clReleaseEvent(ev);
    return status;
  }
  return kiln__event_wrap_cl(pool->ctx, false, ev, out_event);
}

kiln_status kiln_pool_trim(kiln_pool *pool, size_t *out_released_bytes) {
  if (out_released_bytes != NULL)
    *out_released_bytes = 0;
  if (pool == NULL)
    return kiln__fail(KILN_ERR_NULL_POINTER, "kiln_pool_trim: pool is NULL");
  bool traced = kiln__trace_enabled();
  uint64_t start = traced ? kiln__now_ns() : 0;
  pthread_mutex_lock(&pool->lock);
  collect_fences(pool);
  fence_unfenced(pool);
  collect_fences(pool);
  size_t released = release_cached(pool);
  if (traced)
    trace_pool(pool, "pool_trim", start, released);
  pthread_mutex_unlock(&pool->lock);
  if (out_released_bytes != NULL)
    *out_released_bytes = released;
  return KILN_OK;
}

kiln_status kiln_pool_get_stats(kiln_pool *pool, kiln_pool_stats *out) {
  if (pool == NULL)
    return kiln__fail(KILN_ERR_NULL_POINTER,
                      "kiln_pool_get_stats: pool is NULL");
  if (out == NULL)
    return kiln__fail(KILN_ERR_NULL_POINTER,
                      "kiln_pool_get_stats: out is NULL");
  pthread_mutex_lock(&pool->lock);
  collect_fences(pool);
  *out = pool->stats;
  pthread_mutex_unlock(&pool->lock);
  return KILN_OK;
}
