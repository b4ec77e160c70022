/* Pinned host memory (kiln_pinned.h): a CL_MEM_ALLOC_HOST_PTR buffer,
 * mapped once at creation and unmapped at destruction, so its host address
 * is memory the driver allocated for DMA. A transfer that names such an
 * address as its host pointer can go straight to the device without the
 * driver's own bounce copy. */
#include <stdlib.h>

#include "mem.h"

struct kiln_pinned {
  kiln_context *ctx;
  cl_command_queue queue; /* retained: the map's queue, used to unmap */
  cl_mem mem;
  void *ptr;
  size_t size;
};

kiln_status kiln_pinned_create(kiln_queue *queue, size_t size_bytes,
                               kiln_pinned **out) {
  static const char fn[] = "kiln_pinned_create";
  if (out == NULL)
    return kiln__fail(KILN_ERR_NULL_POINTER, "%s: out is NULL", fn);
  *out = NULL;
  if (queue == NULL)
    return kiln__fail(KILN_ERR_NULL_POINTER, "%s: queue is NULL", fn);
  if (size_bytes == 0)
    return kiln__fail(KILN_ERR_INVALID_SIZE, "%s: size_bytes is 0", fn);
  uint64_t max = queue->ctx->device->info.max_alloc_bytes;
  if ((uint64_t)size_bytes > max)
    return kiln__fail(KILN_ERR_INVALID_SIZE,
                      "%s: size_bytes %zu exceeds the device's maximum "
                      "allocation of %llu bytes",
                      fn, size_bytes, (unsigned long long)max);
  kiln_pinned *p = calloc(1, sizeof *p);
  if (p == NULL)
    return kiln__fail(KILN_ERR_OUT_OF_HOST_MEMORY, "%s: out of host memory",
                      fn);
  cl_int err = CL_SUCCESS;
  p->mem = clCreateBuffer(queue->ctx->cl,
                          CL_MEM_READ_WRITE | CL_MEM_ALLOC_HOST_PTR,
                          size_bytes, NULL, &err);
  if (err != CL_SUCCESS || p->mem == NULL) {
    free(p);
    return kiln__fail_cl(err != CL_SUCCESS ? err : CL_OUT_OF_HOST_MEMORY,
                         "clCreateBuffer", queue->ctx->device,
                         "%s: %zu bytes with CL_MEM_ALLOC_HOST_PTR", fn,
                         size_bytes);
  }
  p->ptr = clEnqueueMapBuffer(queue->cl, p->mem, CL_TRUE,
                              CL_MAP_READ | CL_MAP_WRITE, 0, size_bytes, 0,
                              NULL, NULL, &err);
  if (err != CL_SUCCESS || p->ptr == NULL) {
    clReleaseMemObject(p->mem);
    free(p);
    return kiln__fail_cl(err != CL_SUCCESS ? err : CL_MAP_FAILURE,
                         "clEnqueueMapBuffer", queue->ctx->device,
                         "%s: mapping %zu bytes", fn, size_bytes);
  }
  p->ctx = queue->ctx;
  p->queue = queue->cl;
  clRetainCommandQueue(p->queue);
  p->size = size_bytes;
  kiln__context_child_added(p->ctx);
  *out = p;
  return KILN_OK;
}

kiln_status kiln_pinned_destroy(kiln_pinned *pinned) {
  if (pinned == NULL)
    return KILN_OK;
  cl_event ev = NULL;
  cl_int err = clEnqueueUnmapMemObject(pinned->queue, pinned->mem, pinned->ptr,
                                       0, NULL, &ev);
  kiln_status status = KILN_OK;
  if (err == CL_SUCCESS) {
    err = clWaitForEvents(1, &ev);
    clReleaseEvent(ev);
    if (err != CL_SUCCESS)
      status = kiln__fail_cl(err, "clWaitForEvents", pinned->ctx->device,
                             "kiln_pinned_destroy: waiting for the unmap");
  } else {
    status = kiln__fail_cl(err, "clEnqueueUnmapMemObject", pinned->ctx->device,
                           "kiln_pinned_destroy");
  }
  /* Freed even when the unmap failed: releasing the buffer frees its
   * mapping with it, and the caller has no way left to retry. */
  clReleaseMemObject(pinned->mem);
  clReleaseCommandQueue(pinned->queue);
  kiln__context_child_removed(pinned->ctx);
  free(pinned);
  return status;
}

void *kiln_pinned_get_ptr(const kiln_pinned *pinned) {
  return pinned != NULL ? pinned->ptr : NULL;
}

size_t kiln_pinned_get_size(const kiln_pinned *pinned) {
  return pinned != NULL ? pinned->size : 0;
}
