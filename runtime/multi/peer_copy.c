/* Copies between buffers of different contexts (devices), which OpenCL
 * cannot do directly: through a ring of two pinned chunks (kiln_staging,
 * on the source's context), so that the read of chunk i from the source
 * device runs while chunk i - 1 is written to the destination. Events of
 * two contexts cannot wait on each other, so the host orders the steps
 * (staging.c). The ring lives for one call. */
#include <stdint.h>
#include <string.h>

#include "multi.h"
#include "mem/mem.h"

#define SLOTS 2
#define DEFAULT_CHUNK ((size_t)4 << 20)

kiln_status kiln_peer_copy(kiln_queue *src_queue, kiln_buffer *src,
                           size_t src_offset_bytes, kiln_queue *dst_queue,
                           kiln_buffer *dst, size_t dst_offset_bytes,
                           size_t size_bytes, size_t chunk_bytes) {
  static const char fn[] = "kiln_peer_copy";
  if (src_queue == NULL || src == NULL || dst_queue == NULL || dst == NULL)
    return kiln__fail(KILN_ERR_NULL_POINTER, "%s: %s is NULL", fn,
                      src_queue == NULL ? "src_queue"
                      : src == NULL     ? "src"
                      : dst_queue == NULL ? "dst_queue"
                                          : "dst");
  if (src->ctx != src_queue->ctx || dst->ctx != dst_queue->ctx)
    return kiln__fail(KILN_ERR_SHAPE_MISMATCH,
                      "%s: %s belongs to another context than its queue", fn,
                      src->ctx != src_queue->ctx ? "src" : "dst");
  if (size_bytes == 0)
    return KILN_OK;
  kiln_status status =
      kiln__buffer_range(src, src_offset_bytes, size_bytes, "kiln_peer_copy: src");
  if (status == KILN_OK)
    status = kiln__buffer_range(dst, dst_offset_bytes, size_bytes,
                                "kiln_peer_copy: dst");
  if (status != KILN_OK)
    return status;
  if (chunk_bytes == 0)
    chunk_bytes = DEFAULT_CHUNK;
  if (chunk_bytes > size_bytes)
    chunk_bytes = size_bytes;

  kiln_staging *ring = NULL;
  status = kiln_staging_create(src_queue, chunk_bytes, SLOTS, &ring);
  if (status != KILN_OK)
    return status;
  const char *call = "clEnqueueReadBuffer";
  cl_int err = kiln__staging_peer_copy(ring, src, src_offset_bytes,
                                       dst_queue->cl, dst, dst_offset_bytes,
                                       size_bytes, &call);
  if (err != CL_SUCCESS) {
    /* Writes go to the destination's device, everything else is the
     * source's. */
    bool write = strcmp(call, "clEnqueueWriteBuffer") == 0;
    status = kiln__fail_cl(err, call, (write ? dst : src)->ctx->device,
                           "%s: %zu bytes in %zu-byte chunks", fn, size_bytes,
                           chunk_bytes);
  }
  kiln_status destroyed = kiln_staging_destroy(ring);
  return status != KILN_OK ? status : destroyed;
}
