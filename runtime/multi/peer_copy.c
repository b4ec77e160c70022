/* Copies between buffers of different contexts (devices), which OpenCL
 * cannot do directly: through two chunks of pinned host memory, so that the
 * read of chunk i from the source device runs while chunk i - 1 is written
 * to the destination. Events of two contexts cannot wait on each other, so
 * the host orders the steps.
 *
 * The staging is a buffer allocated by the source's driver with
 * CL_MEM_ALLOC_HOST_PTR and mapped once: on GPUs that is page-locked memory
 * the copy engines reach directly. It lives for one call; a pool of pinned
 * memory may later take its place. */
#include <stdint.h>

#include "multi.h"

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

  cl_int err = CL_SUCCESS;
  cl_mem pinned = clCreateBuffer(src->ctx->cl, CL_MEM_ALLOC_HOST_PTR,
                                 SLOTS * chunk_bytes, NULL, &err);
  if (err != CL_SUCCESS)
    return kiln__fail_cl(err, "clCreateBuffer", src->ctx->device,
                         "%s: %zu bytes of pinned staging", fn,
                         SLOTS * chunk_bytes);
  unsigned char *host = clEnqueueMapBuffer(
      src_queue->cl, pinned, CL_TRUE, CL_MAP_READ | CL_MAP_WRITE, 0,
      SLOTS * chunk_bytes, 0, NULL, NULL, &err);
  if (err != CL_SUCCESS) {
    clReleaseMemObject(pinned);
    return kiln__fail_cl(err, "clEnqueueMapBuffer", src->ctx->device,
                         "%s: mapping the pinned staging", fn);
  }
  kiln_event *read[SLOTS] = {NULL}, *write[SLOTS] = {NULL};
  size_t chunks = (size_bytes + chunk_bytes - 1) / chunk_bytes;
  /* Step i reads chunk i and writes chunk i - 1; the last step only
   * writes. */
  for (size_t i = 0; i <= chunks && status == KILN_OK; i++) {
    if (i < chunks) {
      size_t s = i % SLOTS, at = i * chunk_bytes;
      size_t len = size_bytes - at < chunk_bytes ? size_bytes - at : chunk_bytes;
      if (write[s] != NULL) { /* the slot's previous chunk is written */
        status = kiln_event_wait(write[s]);
        kiln_event_release(write[s]);
        write[s] = NULL;
      }
      if (status == KILN_OK)
        status = kiln_buffer_read(src_queue, src, src_offset_bytes + at, len,
                                  host + s * chunk_bytes, 0, NULL, &read[s]);
      if (status == KILN_OK)
        status = kiln_queue_flush(src_queue);
    }
    if (i > 0 && status == KILN_OK) {
      size_t s = (i - 1) % SLOTS, at = (i - 1) * chunk_bytes;
      size_t len = size_bytes - at < chunk_bytes ? size_bytes - at : chunk_bytes;
      status = kiln_event_wait(read[s]);
      kiln_event_release(read[s]);
      read[s] = NULL;
      if (status == KILN_OK)
        status = kiln_buffer_write(dst_queue, dst, dst_offset_bytes + at, len,
                                   host + s * chunk_bytes, 0, NULL, &write[s]);
      if (status == KILN_OK)
        status = kiln_queue_flush(dst_queue);
    }
  }
  /* Whatever happened, no command may still use the staging when it goes. */
  for (size_t s = 0; s < SLOTS; s++) {
    kiln_status w = KILN_OK;
    if (read[s] != NULL)
      w = kiln_event_wait(read[s]);
    if (write[s] != NULL && w == KILN_OK)
      w = kiln_event_wait(write[s]);
    if (status == KILN_OK)
      status = w;
    kiln_event_release(read[s]);
    kiln_event_release(write[s]);
  }
  cl_event unmapped = NULL;
  err = clEnqueueUnmapMemObject(src_queue->cl, pinned, host, 0, NULL, &unmapped);
  if (err == CL_SUCCESS) {
    clWaitForEvents(1, &unmapped);
    clReleaseEvent(unmapped);
  } else if (status == KILN_OK) {
    status = kiln__fail_cl(err, "clEnqueueUnmapMemObject", src->ctx->device,
                           "%s: unmapping the pinned staging", fn);
  }
  clReleaseMemObject(pinned);
  return status;
}
