/* Device buffers, sub-buffer views, wrapped host memory and transfers.
 * Offsets and sizes are in bytes. Every transfer is asynchronous on a queue;
 * the _sync helpers wait for completion. */
#ifndef KILN_BUFFER_H
#define KILN_BUFFER_H

#if !defined(KILN_H_INSIDE) && !defined(KILN_COMPILATION)
#error "Only <kiln/kiln.h> can be included directly."
#endif

#include "kiln/kiln_common.h"

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
 * returns. NULL is a no-op. Not thread-safe with other calls on the same
 * buffer. */
KILN_API kiln_status kiln_buffer_destroy(kiln_buffer *buffer);

KILN_API size_t kiln_buffer_get_size(const kiln_buffer *buffer);
KILN_API kiln_context *kiln_buffer_get_context(const kiln_buffer *buffer);

/* Copy size_bytes from host src into dst at offset_bytes. src must stay valid
 * and unchanged until the command completes. */
KILN_API kiln_status kiln_buffer_write(kiln_queue *queue, kiln_buffer *dst,
                                       size_t offset_bytes, size_t size_bytes,
                                       const void *src, size_t num_wait,
                                       kiln_event *const *wait_list,
                                       kiln_event **out_event);
/* Copy size_bytes from src at offset_bytes to host dst, which must stay
 * valid until the command completes. */
KILN_API kiln_status kiln_buffer_read(kiln_queue *queue, kiln_buffer *src,
                                      size_t offset_bytes, size_t size_bytes,
                                      void *dst, size_t num_wait,
                                      kiln_event *const *wait_list,
                                      kiln_event **out_event);
/* Device-side copy; the two ranges must not overlap if src == dst. */
KILN_API kiln_status kiln_buffer_copy(kiln_queue *queue, kiln_buffer *src,
                                      size_t src_offset_bytes, kiln_buffer *dst,
                                      size_t dst_offset_bytes, size_t size_bytes,
                                      size_t num_wait,
                                      kiln_event *const *wait_list,
                                      kiln_event **out_event);
/* Fill a range with a repeated pattern of 1, 2, 4, 8, 16, 32, 64 or 128
 * bytes; offset_bytes and size_bytes must be multiples of pattern_bytes.
 * The pattern is copied before this returns. */
KILN_API kiln_status kiln_buffer_fill(kiln_queue *queue, kiln_buffer *buffer,
                                      const void *pattern, size_t pattern_bytes,
                                      size_t offset_bytes, size_t size_bytes,
                                      size_t num_wait,
                                      kiln_event *const *wait_list,
                                      kiln_event **out_event);

/* Map a range for host access (KILN_MAP_READ and/or KILN_MAP_WRITE). The
 * pointer is usable once the event completes; unmap it before any kernel uses
 * the buffer again. Mapping the same range twice gives two mappings (possibly
 * at the same address), each needing its own unmap. Threads may map and
 * unmap one buffer through their own queues concurrently (kiln's list of
 * live mappings is locked). */
KILN_API kiln_status kiln_buffer_map(kiln_queue *queue, kiln_buffer *buffer,
                                     unsigned map_flags, size_t offset_bytes,
                                     size_t size_bytes, void **out_ptr,
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
KILN_API kiln_status kiln_buffer_write_sync(kiln_queue *queue, kiln_buffer *dst,
                                            size_t offset_bytes,
                                            size_t size_bytes, const void *src);
KILN_API kiln_status kiln_buffer_read_sync(kiln_queue *queue, kiln_buffer *src,
                                           size_t offset_bytes,
                                           size_t size_bytes, void *dst);

KILN_END_DECLS

#endif
