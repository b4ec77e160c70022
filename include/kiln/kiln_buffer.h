/* Device buffers, sub-buffer views, wrapped host memory and transfers.
 *
 * Memory that has no element type yet is sized in bytes (*_bytes: creating a
 * buffer or a view). Transfers name the data they move with a kiln_range
 * (kiln_tensor.h): offset and count in elements of the range's dtype, the
 * same ranges ops and MPI collectives take. A range must lie inside its
 * buffer (KILN_ERR_OUT_OF_RANGE), have a count > 0 (KILN_ERR_INVALID_SIZE)
 * and a buffer of the queue's context (KILN_ERR_WRONG_CONTEXT). Every
 * transfer is asynchronous on a queue; the _sync helpers wait for
 * completion. */
#ifndef KILN_BUFFER_H
#define KILN_BUFFER_H

#if !defined(KILN_H_INSIDE) && !defined(KILN_COMPILATION)
#error "Only <kiln/kiln.h> can be included directly."
#endif

#include "kiln/kiln_common.h"
#include "kiln/kiln_tensor.h"

KILN_BEGIN_DECLS

/* Access from kernels. READ_WRITE is the default (0). */
enum {
  KILN_MEM_READ_WRITE = 0,
  KILN_MEM_READ_ONLY = 1u << 0,
  KILN_MEM_WRITE_ONLY = 1u << 1,
};

/* Access of a mapping. */
enum {
  KILN_MAP_READ = 1u << 0,
  KILN_MAP_WRITE = 1u << 1,
};

/* Allocate size_bytes (> 0, at most the device's max allocation) on the
 * context's device. Contents are undefined. Thread-safe. */
KILN_API kiln_status kiln_buffer_create(kiln_context *ctx, size_t size_bytes,
                                        unsigned flags, kiln_buffer **out);

/* A buffer backed by the caller's memory (CL_MEM_USE_HOST_PTR). host must
 * stay valid until the buffer is destroyed and every command using it has
 * completed; between commands, access it through kiln_buffer_map.
 * Thread-safe. */
KILN_API kiln_status kiln_buffer_wrap_host(kiln_context *ctx, void *host,
                                           size_t size_bytes, unsigned flags,
                                           kiln_buffer **out);

/* A view of [offset_bytes, offset_bytes + size_bytes) of parent, which must
 * lie inside parent; offset_bytes must be a multiple of the device's base
 * address alignment (kiln_device_info.mem_base_addr_align_bits / 8). flags
 * 0 inherits the parent's access; other flags may only narrow it (a
 * read-only parent takes only KILN_MEM_READ_ONLY views, a write-only parent
 * only KILN_MEM_WRITE_ONLY ones). A view of a view is refused. Thread-safe,
 * also for views of one parent made on several threads. */
KILN_API kiln_status kiln_buffer_create_sub(kiln_buffer *parent,
                                            size_t offset_bytes,
                                            size_t size_bytes, unsigned flags,
                                            kiln_buffer **out);

/* Destroy a buffer. KILN_ERR_BUSY, destroying nothing, while sub-buffer
 * views of it are alive or a mapping of it has not been unmapped.
 * Commands already enqueued that use the buffer still complete correctly:
 * the device memory is freed only after the last of them finishes, and this
 * call does not wait for them. The handle is invalid as soon as this
 * returns (a pooled buffer's handle stays its pool's, so destroying one
 * twice is detected: KILN_ERR_INVALID_ARGUMENT). NULL is a no-op. Not
 * thread-safe with other calls on the same buffer. */
KILN_API kiln_status kiln_buffer_destroy(kiln_buffer *buffer);

KILN_API size_t kiln_buffer_get_size(const kiln_buffer *buffer);
KILN_API kiln_context *kiln_buffer_get_context(const kiln_buffer *buffer);

/* Copy dst->count elements from host src into dst. src must stay valid
 * and unchanged until the command completes. */
KILN_API kiln_status kiln_buffer_write(kiln_queue *queue, const void *src,
                                       const kiln_range *dst, size_t num_wait,
                                       kiln_event *const *wait_list,
                                       kiln_event **out_event);
/* Copy the elements of src to host dst, which must stay valid until the
 * command completes. */
KILN_API kiln_status kiln_buffer_read(kiln_queue *queue, const kiln_range *src,
                                      void *dst, size_t num_wait,
                                      kiln_event *const *wait_list,
                                      kiln_event **out_event);
/* Device-side copy of src to dst, which must have the same count and dtype
 * (else KILN_ERR_SHAPE_MISMATCH) and must not overlap it (also not through
 * two views of one buffer: KILN_ERR_INVALID_ARGUMENT). */
KILN_API kiln_status kiln_buffer_copy(kiln_queue *queue, const kiln_range *src,
                                      const kiln_range *dst, size_t num_wait,
                                      kiln_event *const *wait_list,
                                      kiln_event **out_event);
/* Fill dst with a repeated raw pattern of 1, 2, 4, 8, 16, 32, 64 or 128
 * bytes (OpenCL's fill sizes), whatever dst's dtype: a bit pattern for any
 * element type or a group of elements. dst's bytes must start and end at
 * multiples of pattern_bytes. The pattern is copied before this returns.
 * For a typed value use the op kiln_fill. */
KILN_API kiln_status kiln_buffer_fill(kiln_queue *queue, const void *pattern,
                                      size_t pattern_bytes,
                                      const kiln_range *dst, size_t num_wait,
                                      kiln_event *const *wait_list,
                                      kiln_event **out_event);

/* Map data for host access (map_flags: KILN_MAP_READ and/or
 * KILN_MAP_WRITE); *out_ptr points at its first element. The pointer is
 * usable once the event completes; unmap it before any kernel uses the
 * buffer again. Mapping the same range twice gives two mappings (possibly
 * at the same address), each needing its own unmap. Threads may map and
 * unmap one buffer through their own queues concurrently (kiln's list of
 * live mappings is locked). */
KILN_API kiln_status kiln_buffer_map(kiln_queue *queue, const kiln_range *data,
                                     void **out_ptr, unsigned map_flags,
                                     size_t num_wait,
                                     kiln_event *const *wait_list,
                                     kiln_event **out_event);
/* Unmap a pointer that kiln_buffer_map returned for this same buffer and
 * that is not yet unmapped; any other pointer is refused with
 * KILN_ERR_INVALID_ARGUMENT before OpenCL sees it. */
KILN_API kiln_status kiln_buffer_unmap(kiln_queue *queue, kiln_buffer *buffer,
                                       void *mapped, size_t num_wait,
                                       kiln_event *const *wait_list,
                                       kiln_event **out_event);

/* Blocking helpers: enqueue, then wait for that command. */
KILN_API kiln_status kiln_buffer_write_sync(kiln_queue *queue, const void *src,
                                            const kiln_range *dst);
KILN_API kiln_status kiln_buffer_read_sync(kiln_queue *queue,
                                           const kiln_range *src, void *dst);

KILN_END_DECLS

#endif
