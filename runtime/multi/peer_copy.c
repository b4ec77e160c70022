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

/* The ring copy of size_bytes (> 0, both ranges checked). */
static kiln_status copy(const char *fn, kiln_queue *src_queue,
                        kiln_queue *dst_queue, kiln_buffer *src,
                        size_t src_offset_bytes, kiln_buffer *dst,
                        size_t dst_offset_bytes, size_t size_bytes,
                        size_t chunk_bytes) {
  if (chunk_bytes == 0)
    chunk_bytes = DEFAULT_CHUNK;
  if (chunk_bytes > size_bytes)
    chunk_bytes = size_bytes;

  kiln_staging *ring = NULL;
  kiln_status status =
      kiln_staging_create(src_queue, chunk_bytes, SLOTS, &ring);
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

kiln_status kiln_peer_copy(kiln_queue *src_queue, kiln_queue *dst_queue,
                           const kiln_range *src, const kiln_range *dst,
                           size_t chunk_bytes, size_t num_wait,
                           kiln_event *const *wait_list,
                           kiln_event **out_event) {
  static const char fn[] = "kiln_peer_copy";
  if (out_event != NULL)
    *out_event = NULL;
  if (src_queue == NULL || dst_queue == NULL)
    return kiln__fail(KILN_ERR_NULL_POINTER, "%s: %s is NULL", fn,
                      src_queue == NULL ? "src_queue" : "dst_queue");
  size_t src_offset_bytes = 0, dst_offset_bytes = 0, size_bytes = 0, dst_bytes;
  kiln_status status = kiln__range_bytes(src, "kiln_peer_copy: src",
                                         &src_offset_bytes, &size_bytes);
  if (status == KILN_OK)
    status = kiln__range_bytes(dst, "kiln_peer_copy: dst", &dst_offset_bytes,
                               &dst_bytes);
  if (status != KILN_OK)
    return status;
  if (src->buffer->ctx != src_queue->ctx || dst->buffer->ctx != dst_queue->ctx)
    return kiln__fail(KILN_ERR_WRONG_CONTEXT,
                      "%s: %s belongs to another context than its queue", fn,
                      src->buffer->ctx != src_queue->ctx ? "src" : "dst");
  if (src->count != dst->count || src->dtype != dst->dtype)
    return kiln__fail(KILN_ERR_SHAPE_MISMATCH,
                      "%s: src (%zu elements of %s) and dst (%zu elements of "
                      "%s) differ",
                      fn, src->count, kiln_dtype_name(src->dtype), dst->count,
                      kiln_dtype_name(dst->dtype));
  if (num_wait > 0 && wait_list == NULL)
    return kiln__fail(KILN_ERR_NULL_POINTER,
                      "%s: wait_list is NULL but num_wait is %zu", fn,
                      num_wait);
  /* Events of the two contexts cannot order each other on a device: the
   * host waits for the wait list (of either context) before the first
   * read. */
  if ((status = kiln_event_wait_all(num_wait, wait_list)) != KILN_OK)
    return status;
  if (size_bytes > 0 &&
      (status = copy(fn, src_queue, dst_queue, src->buffer, src_offset_bytes,
                     dst->buffer, dst_offset_bytes, size_bytes, chunk_bytes)) !=
          KILN_OK)
    return status;
  return kiln__done_event(dst_queue, out_event);
}
