/* Pinned host memory and a staging helper for pageable memory.
 *
 * A driver copies between the device and host memory by DMA only from
 * memory it has pinned (page-locked); from ordinary (pageable) memory it
 * first copies through a pinned bounce buffer of its own, or pins page by
 * page. kiln_pinned is host memory the driver allocated for DMA
 * (CL_MEM_ALLOC_HOST_PTR, mapped for the object's whole life: the portable
 * way, since OpenCL has no explicit "pin" call). Pass kiln_pinned_get_ptr() (or
 * a pointer inside it) as the host pointer of kiln_buffer_write/read.
 *
 * kiln_staging copies a caller's pageable memory through a ring of pinned
 * chunks: the memcpy into chunk i+1 overlaps the DMA of chunk i. Measured
 * speeds of both, against host memcpy: README, "Moving data". */
#ifndef KILN_PINNED_H
#define KILN_PINNED_H

#if !defined(KILN_H_INSIDE) && !defined(KILN_COMPILATION)
#error "Only <kiln/kiln.h> can be included directly."
#endif

#include "kiln/kiln_common.h"
#include "kiln/kiln_tensor.h"

KILN_BEGIN_DECLS

typedef struct kiln_pinned kiln_pinned;
typedef struct kiln_staging kiln_staging;

/* size_bytes (> 0, at most the device's max allocation) of pinned host
 * memory for queue's context, mapped through queue (blocking) and readable
 * and writable by the host until kiln_pinned_destroy. The object keeps its
 * own reference to the OpenCL queue. Counts as a child of the context.
 * Thread-safe. */
KILN_API kiln_status kiln_pinned_create(kiln_queue *queue, size_t size_bytes,
                                        kiln_pinned **out);

/* Unmap and free. Waits until the unmap (and so every earlier command of
 * the queue the memory was mapped through) has completed; commands of other
 * queues using the memory must have completed before. NULL is a no-op. Not
 * thread-safe with other uses of the same object. */
KILN_API kiln_status kiln_pinned_destroy(kiln_pinned *pinned);

/* The host address (NULL for NULL) and size in bytes (0 for NULL).
 * Thread-safe. */
KILN_API void *kiln_pinned_get_ptr(const kiln_pinned *pinned);
KILN_API size_t kiln_pinned_get_size(const kiln_pinned *pinned);

/* A ring of num_chunks (>= 1) pinned chunks of chunk_bytes (> 0) each, for
 * staged transfers on queue. Counts as a child of the context. Thread-safe
 * to create; one thread at a time may use a staging object. */
KILN_API kiln_status kiln_staging_create(kiln_queue *queue, size_t chunk_bytes,
                                         size_t num_chunks,
                                         kiln_staging **out);

/* Waits for its pending chunks, then frees. NULL is a no-op. */
KILN_API kiln_status kiln_staging_destroy(kiln_staging *staging);

/* Copy pageable host memory src into the range dst, chunk by chunk
 * through the ring, on the staging object's queue after everything
 * enqueued there before and after the wait list (events of its context,
 * waited for by the host first). Blocking: returns once the whole copy has
 * completed (src may be reused at once); *out_event (out_event may be
 * NULL) is then an event of that queue, already complete. A count of 0
 * copies nothing and succeeds; otherwise the range must lie inside its
 * buffer. */
KILN_API kiln_status kiln_staging_write(kiln_staging *staging, const void *src,
                                        const kiln_range *dst, size_t num_wait,
                                        kiln_event *const *wait_list,
                                        kiln_event **out_event);

/* Copy the range src into pageable host memory dst through the ring, as
 * kiln_staging_write does the other way. Blocking: dst holds the data when
 * this returns. */
KILN_API kiln_status kiln_staging_read(kiln_staging *staging,
                                       const kiln_range *src, void *dst,
                                       size_t num_wait,
                                       kiln_event *const *wait_list,
                                       kiln_event **out_event);

KILN_END_DECLS

#endif
