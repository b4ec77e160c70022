/* A per-context memory pool: device buffers handed out from cached blocks
 * by size class, instead of one driver allocation each.
 *
 * A pool works beside one queue, its home queue. A buffer from the pool is
 * an ordinary kiln_buffer (transfers, kernels, ops, views all take it); its
 * kiln_buffer_destroy hands the block back to the pool instead of to the
 * driver. The block is not reused at once: the pool first enqueues a marker
 * on the home queue (which waits for every command enqueued there before
 * it) and reuses the block only once that marker has completed, so reuse
 * never hands out memory that a pending command still reads or writes.
 * Commands on other queues that use a pooled buffer must be complete, or
 * waited for by a command on the home queue, before the buffer is
 * destroyed (kiln_pool_release_after orders them for you).
 *
 * Pool memory is not a leak: kiln_pool_stats says exactly what the pool
 * holds from the driver (in use + pending + cached = reserved), and
 * kiln_pool_trim gives the cached part back. With KILN_TRACE set, driver
 * allocations, trims and the pool's end are traced with these statistics
 * (category "kiln.pool"). */
#ifndef KILN_POOL_H
#define KILN_POOL_H

#if !defined(KILN_H_INSIDE) && !defined(KILN_COMPILATION)
#error "Only <kiln/kiln.h> can be included directly."
#endif

#include "kiln/kiln_common.h"

KILN_BEGIN_DECLS

typedef struct kiln_pool kiln_pool;

/* What the pool holds, in bytes of driver blocks unless named otherwise.
 * Always: reserved_bytes == in_use_bytes + pending_bytes + cached_bytes. */
typedef struct kiln_pool_stats {
  size_t in_use_bytes;        /* blocks held by live pooled buffers */
  size_t requested_bytes;     /* what those buffers asked for (<= in_use) */
  size_t pending_bytes;       /* given back, waiting for commands to end */
  size_t cached_bytes;        /* free blocks ready for reuse */
  size_t reserved_bytes;      /* all of the above: held from the driver */
  size_t peak_reserved_bytes; /* the most reserved_bytes ever was */
  size_t limit_bytes;         /* the pool's cap on reserved_bytes; 0: none */
  size_t live_buffers;        /* pooled buffers not yet destroyed */
  uint64_t hits;              /* allocations served from cached blocks */
  uint64_t misses;            /* allocations that asked the driver */
} kiln_pool_stats;

/* Create a pool for queue's context whose home queue is queue (the pool
 * keeps its own reference to the underlying OpenCL queue, so queue may be
 * destroyed first). limit_bytes caps reserved_bytes (0: no cap). The pool
 * counts as a child of the context: kiln_context_destroy is KILN_ERR_BUSY
 * until the pool is destroyed. Thread-safe. */
KILN_API kiln_status kiln_pool_create(kiln_queue *queue, size_t limit_bytes,
                                      kiln_pool **out);

/* Destroy the pool and give every block back to the driver (blocks still
 * used by pending commands are freed by the driver once those end).
 * KILN_ERR_BUSY, destroying nothing, while buffers from the pool are alive.
 * NULL is a no-op. Not thread-safe with other calls on the same pool. */
KILN_API kiln_status kiln_pool_destroy(kiln_pool *pool);

/* A buffer of size_bytes (> 0, at most the device's max allocation) with
 * access flags (KILN_MEM_*), from a cached block of its size class when one
 * is free, else from the driver. Contents are undefined. When a new block
 * would take reserved_bytes over the limit, cached blocks are given back
 * first, then the pool waits for pending blocks; if it still does not fit,
 * KILN_ERR_OUT_OF_DEVICE_MEMORY with the numbers. Thread-safe. */
KILN_API kiln_status kiln_pool_alloc(kiln_pool *pool, size_t size_bytes,
                                     unsigned flags, kiln_buffer **out);

/* Destroy a pooled buffer once the num_wait events in wait_list (commands
 * on any queue of the context) have completed, besides the commands of the
 * home queue: the block is reused only after all of them. Equivalent to
 * kiln_buffer_destroy when num_wait is 0 and out_event NULL. *out_event
 * (out_event may be NULL) is a marker on the home queue that completes
 * when all of them have (it carries no profiling times).
 * KILN_ERR_INVALID_ARGUMENT when buffer is not from this pool or was given
 * back already (released or destroyed before); KILN_ERR_BUSY
 * while views of it are alive. Thread-safe. */
KILN_API kiln_status kiln_pool_release_after(kiln_pool *pool,
                                             kiln_buffer *buffer,
                                             size_t num_wait,
                                             kiln_event *const *wait_list,
                                             kiln_event **out_event);

/* Give cached blocks back to the driver, and those pending blocks whose
 * commands have completed: every block destroyed before a
 * kiln_queue_finish of the home queue that has returned, and those whose
 * marker on the home queue has completed (a block destroyed since the last
 * finish may wait for a later trim). *out_released_bytes (may be NULL)
 * receives how many bytes went back. Thread-safe. */
KILN_API kiln_status kiln_pool_trim(kiln_pool *pool,
                                    size_t *out_released_bytes);

/* A consistent snapshot of the pool's statistics. Thread-safe. */
KILN_API kiln_status kiln_pool_get_stats(kiln_pool *pool, kiln_pool_stats *out);

KILN_END_DECLS

#endif
