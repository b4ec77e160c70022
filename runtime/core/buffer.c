/* Buffers, sub-buffer views, wrapped host memory, transfers and mappings.
 *
 * Everything is validated here before OpenCL sees it, because drivers answer
 * bad input with a bare CL_INVALID_VALUE (or, for some, a crash); kiln's
 * message names the argument and the numbers instead. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

#define MEM_FLAGS_KNOWN (KILN_MEM_READ_ONLY | KILN_MEM_WRITE_ONLY)
#define MAP_FLAGS_KNOWN (KILN_MAP_READ | KILN_MAP_WRITE)

/* One live mapping: unmap must be given a pointer that map returned for the
 * same buffer, which OpenCL checks inconsistently across drivers. Mapping the
 * same range twice may yield the same pointer twice, so entries are a
 * multiset: each unmap removes one. */
struct kiln__mapping {
  void *ptr;
  struct kiln__mapping *next;
};

static const char *access_name(unsigned flags) {
  if (flags & KILN_MEM_READ_ONLY)
    return "read-only";
  if (flags & KILN_MEM_WRITE_ONLY)
    return "write-only";
  return "read-write";
}

static cl_mem_flags cl_access(unsigned flags) {
  if (flags & KILN_MEM_READ_ONLY)
    return CL_MEM_READ_ONLY;
  if (flags & KILN_MEM_WRITE_ONLY)
    return CL_MEM_WRITE_ONLY;
  return CL_MEM_READ_WRITE;
}

static kiln_status check_mem_flags(unsigned flags, const char *fn) {
  if ((flags & ~(unsigned)MEM_FLAGS_KNOWN) != 0)
    return kiln__fail(KILN_ERR_INVALID_ARGUMENT,
                      "%s: flags has unknown bits 0x%x (known: "
                      "KILN_MEM_READ_ONLY, KILN_MEM_WRITE_ONLY)",
                      fn, flags & ~(unsigned)MEM_FLAGS_KNOWN);
  if ((flags & KILN_MEM_READ_ONLY) && (flags & KILN_MEM_WRITE_ONLY))
    return kiln__fail(KILN_ERR_INVALID_ARGUMENT,
                      "%s: flags has both KILN_MEM_READ_ONLY and "
                      "KILN_MEM_WRITE_ONLY; pass at most one",
                      fn);
  return KILN_OK;
}

/* Size checks shared by create and wrap_host: zero, and the device's single
 * allocation limit, which drivers enforce differently (PoCL lets some
 * oversize requests through and fails later). */
static kiln_status check_alloc_size(const kiln_context *ctx, size_t size,
                                    const char *fn) {
  if (size == 0)
    return kiln__fail(KILN_ERR_INVALID_SIZE, "%s: size_bytes is 0", fn);
  uint64_t max = ctx->device->info.max_alloc_bytes;
  if ((uint64_t)size > max)
    return kiln__fail(KILN_ERR_INVALID_SIZE,
                      "%s: size_bytes %zu exceeds the device's maximum "
                      "allocation of %llu bytes (max_alloc_bytes of '%s')",
                      fn, size, (unsigned long long)max,
                      ctx->device->info.name);
  return KILN_OK;
}

kiln_status kiln__buffer_range(const kiln_buffer *buffer, size_t offset,
                               size_t size, const char *what) {
  if (buffer == NULL)
    return kiln__fail(KILN_ERR_NULL_POINTER, "%s is NULL", what);
  if (size == 0)
    return kiln__fail(KILN_ERR_INVALID_SIZE,
                      "%s range [offset %zu, +0 bytes) is empty; sizes must "
                      "be > 0",
                      what, offset);
  size_t end;
  if (kiln__add_overflows(offset, size, &end))
    return kiln__fail(KILN_ERR_INVALID_SIZE,
                      "%s range [offset %zu, +%zu bytes) overflows size_t",
                      what, offset, size);
  if (end > buffer->size)
    return kiln__fail(KILN_ERR_OUT_OF_RANGE,
                      "%s range [offset %zu, +%zu bytes) exceeds the buffer's "
                      "%zu bytes",
                      what, offset, size, buffer->size);
  return KILN_OK;
}

kiln_status kiln__range_bytes(const kiln_range *range, const char *what,
                              size_t *offset_bytes, size_t *size_bytes) {
  if (range == NULL || range->buffer == NULL)
    return kiln__fail(KILN_ERR_NULL_POINTER, "%s%s is NULL", what,
                      range == NULL ? "" : "->buffer");
  size_t es = kiln_dtype_size(range->dtype);
  if (es == 0)
    return kiln__fail(KILN_ERR_INVALID_ARGUMENT,
                      "%s dtype %d is not a "
                      "kiln_dtype",
                      what, (int)range->dtype);
  size_t off, size, end;
  if (kiln__mul_overflows(range->offset, es, &off) ||
      kiln__mul_overflows(range->count, es, &size) ||
      kiln__add_overflows(off, size, &end))
    return kiln__fail(KILN_ERR_INVALID_SIZE,
                      "%s range [offset %zu, +%zu elements of %s) overflows "
                      "size_t in bytes",
                      what, range->offset, range->count,
                      kiln_dtype_name(range->dtype));
  if (end > range->buffer->size)
    return kiln__fail(KILN_ERR_OUT_OF_RANGE,
                      "%s range [offset %zu, +%zu elements of %s) exceeds "
                      "the buffer's %zu bytes",
                      what, range->offset, range->count,
                      kiln_dtype_name(range->dtype), range->buffer->size);
  *offset_bytes = off;
  *size_bytes = size;
  return KILN_OK;
}

kiln_status kiln__buffer_wrap(kiln_context *ctx, cl_mem mem, size_t size,
                              unsigned flags, kiln_buffer *parent,
                              size_t origin, const char *fn,
                              kiln_buffer **out) {
  kiln_buffer *buffer = calloc(1, sizeof *buffer);
  if (buffer == NULL || pthread_mutex_init(&buffer->map_lock, NULL) != 0) {
    free(buffer);
    clReleaseMemObject(mem);
    return kiln__fail(KILN_ERR_OUT_OF_HOST_MEMORY, "%s: out of host memory",
                      fn);
  }
  buffer->ctx = ctx;
  buffer->cl = mem;
  buffer->size = size;
  buffer->flags = flags;
  buffer->parent = parent;
  buffer->origin = origin;
  atomic_init(&buffer->children, 0);
  atomic_init(&buffer->recordings, 0);
  if (parent != NULL)
    atomic_fetch_add(&parent->children, 1);
  kiln__context_child_added(ctx);
  *out = buffer;
  return KILN_OK;
}

/* clCreateBuffer and wrap; host is NULL or the caller's memory. */
static kiln_status create_buffer(kiln_context *ctx, void *host, size_t size,
                                 unsigned flags, const char *fn,
                                 kiln_buffer **out) {
  cl_mem_flags cl_flags = cl_access(flags);
  if (host != NULL)
    cl_flags |= CL_MEM_USE_HOST_PTR;
  cl_int err = CL_SUCCESS;
  cl_mem mem = clCreateBuffer(ctx->cl, cl_flags, size, host, &err);
  if (err != CL_SUCCESS || mem == NULL)
    return kiln__fail_cl(err != CL_SUCCESS ? err : CL_OUT_OF_HOST_MEMORY,
                         "clCreateBuffer", ctx->device,
                         "%s: %zu bytes, %s", fn, size, access_name(flags));
  return kiln__buffer_wrap(ctx, mem, size, flags, NULL, 0, fn, out);
}

/* The checks kiln_buffer_create and kiln_buffer_wrap_host share, in their
 * order (out, ctx, host when wrapping, flags, size), then the buffer. */
static kiln_status checked_create(kiln_context *ctx, void *host, bool wrap,
                                  size_t size_bytes, unsigned flags,
                                  const char *fn, kiln_buffer **out) {
  if (out == NULL)
    return kiln__fail(KILN_ERR_NULL_POINTER, "%s: out is NULL", fn);
  *out = NULL;
  if (ctx == NULL)
    return kiln__fail(KILN_ERR_NULL_POINTER, "%s: ctx is NULL", fn);
  if (wrap && host == NULL)
    return kiln__fail(KILN_ERR_NULL_POINTER, "%s: host is NULL", fn);
  kiln_status status = check_mem_flags(flags, fn);
  if (status == KILN_OK)
    status = check_alloc_size(ctx, size_bytes, fn);
  if (status != KILN_OK)
    return status;
  return create_buffer(ctx, host, size_bytes, flags, fn, out);
}

kiln_status kiln_buffer_create(kiln_context *ctx, size_t size_bytes,
                               unsigned flags, kiln_buffer **out) {
  return checked_create(ctx, NULL, false, size_bytes, flags,
                        "kiln_buffer_create", out);
}

kiln_status kiln_buffer_wrap_host(kiln_context *ctx, void *host,
                                  size_t size_bytes, unsigned flags,
                                  kiln_buffer **out) {
  return checked_create(ctx, host, true, size_bytes, flags,
                        "kiln_buffer_wrap_host", out);
}

kiln_status kiln_buffer_create_sub(kiln_buffer *parent, size_t offset_bytes,
                                   size_t size_bytes, unsigned flags,
                                   kiln_buffer **out) {
  static const char fn[] = "kiln_buffer_create_sub";
  if (out == NULL)
    return kiln__fail(KILN_ERR_NULL_POINTER, "%s: out is NULL", fn);
  *out = NULL;
  if (parent == NULL)
    return kiln__fail(KILN_ERR_NULL_POINTER, "%s: parent is NULL", fn);
  /* OpenCL itself refuses sub-buffers of sub-buffers; saying so here gives
   * the reason instead of CL_INVALID_MEM_OBJECT. */
  if (parent->parent != NULL)
    return kiln__fail(KILN_ERR_INVALID_ARGUMENT,
                      "%s: parent is itself a view (at offset %zu of its "
                      "buffer); a view of a view is refused, make the view "
                      "from the original buffer",
                      fn, parent->origin);
  kiln_status status = check_mem_flags(flags, fn);
  if (status != KILN_OK)
    return status;
  status = kiln__buffer_range(parent, offset_bytes, size_bytes,
                              "kiln_buffer_create_sub: view");
  if (status != KILN_OK)
    return status;
  kiln_context *ctx = parent->ctx;
  size_t align = ctx->device->info.mem_base_addr_align_bits / 8;
  if (align > 1 && offset_bytes % align != 0)
    return kiln__fail(KILN_ERR_INVALID_ARGUMENT,
                      "%s: offset_bytes %zu is not a multiple of the device's "
                      "base address alignment of %zu bytes "
                      "(mem_base_addr_align_bits %u)",
                      fn, offset_bytes, align,
                      (unsigned)ctx->device->info.mem_base_addr_align_bits);
  /* flags 0 inherits the parent's access, as in clCreateSubBuffer; explicit
   * access must equal a restricted parent's, since a view cannot grant more
   * than its buffer allows. */
  unsigned effective = flags == 0 ? parent->flags : flags;
  if (flags != 0 && parent->flags != 0 && flags != parent->flags)
    return kiln__fail(KILN_ERR_INVALID_ARGUMENT,
                      "%s: flags ask for %s access but the parent is %s; a "
                      "view may only narrow its parent's access",
                      fn, access_name(flags), access_name(parent->flags));

  cl_buffer_region region = {.origin = offset_bytes, .size = size_bytes};
  cl_int err = CL_SUCCESS;
  cl_mem mem = clCreateSubBuffer(parent->cl, flags == 0 ? 0 : cl_access(flags),
                                 CL_BUFFER_CREATE_TYPE_REGION, &region, &err);
  if (err != CL_SUCCESS || mem == NULL)
    return kiln__fail_cl(err != CL_SUCCESS ? err : CL_OUT_OF_HOST_MEMORY,
                         "clCreateSubBuffer", ctx->device,
                         "%s: [offset %zu, +%zu bytes) of a %zu-byte buffer",
                         fn, offset_bytes, size_bytes, parent->size);
  return kiln__buffer_wrap(ctx, mem, size_bytes, effective, parent,
                           offset_bytes, fn, out);
}

kiln_status kiln_buffer_destroy(kiln_buffer *buffer) {
  if (buffer == NULL)
    return KILN_OK;
  size_t views = atomic_load(&buffer->children);
  if (views > 0)
    return kiln__fail(KILN_ERR_BUSY,
                      "kiln_buffer_destroy: %zu sub-buffer view%s of this "
                      "buffer %s still alive; destroy %s first",
                      views, views == 1 ? "" : "s", views == 1 ? "is" : "are",
                      views == 1 ? "it" : "them");
  size_t recorded = atomic_load(&buffer->recordings);
  if (recorded > 0)
    return kiln__fail(KILN_ERR_BUSY,
                      "kiln_buffer_destroy: %zu recorded sequence%s still "
                      "use%s this buffer; kiln_sequence_destroy %s first",
                      recorded, recorded == 1 ? "" : "s",
                      recorded == 1 ? "s" : "", recorded == 1 ? "it" : "them");
  pthread_mutex_lock(&buffer->map_lock);
  size_t mapped = 0;
  for (struct kiln__mapping *m = buffer->maps; m != NULL; m = m->next)
    mapped++;
  pthread_mutex_unlock(&buffer->map_lock);
  /* A mapped pointer would dangle once the memory goes, with no way left to
   * unmap it. */
  if (mapped > 0)
    return kiln__fail(KILN_ERR_BUSY,
                      "kiln_buffer_destroy: %zu mapping%s of this buffer %s "
                      "still live; kiln_buffer_unmap %s first",
                      mapped, mapped == 1 ? "" : "s",
                      mapped == 1 ? "is" : "are", mapped == 1 ? "it" : "them");
  /* A pooled buffer's cl_mem and struct stay with its block for the next
   * allocation (pool.c): no driver call, no free. */
  if (buffer->pooled != NULL) {
    if (!buffer->pooled->give_back(buffer->pooled))
      return kiln__fail(KILN_ERR_INVALID_ARGUMENT,
                        "kiln_buffer_destroy: buffer was already destroyed "
                        "(given back to its pool)");
    kiln__context_child_removed(buffer->ctx);
    return KILN_OK;
  }
  /* OpenCL keeps the memory until enqueued commands that use it complete,
   * so releasing here is safe with work pending. */
  clReleaseMemObject(buffer->cl);
  if (buffer->parent != NULL)
    atomic_fetch_sub(&buffer->parent->children, 1);
  kiln__context_child_removed(buffer->ctx);
  pthread_mutex_destroy(&buffer->map_lock);
  free(buffer);
  return KILN_OK;
}

size_t kiln_buffer_get_size(const kiln_buffer *buffer) {
  return buffer != NULL ? buffer->size : 0;
}

kiln_context *kiln_buffer_get_context(const kiln_buffer *buffer) {
  return buffer != NULL ? buffer->ctx : NULL;
}

/* The queue must exist and share the buffer's context. what is "dst" etc. */
static kiln_status check_queue_buffer(const kiln_queue *queue,
                                      const kiln_buffer *buffer,
                                      const char *fn, const char *what) {
  if (queue == NULL)
    return kiln__fail(KILN_ERR_NULL_POINTER, "%s: queue is NULL", fn);
  if (buffer == NULL)
    return kiln__fail(KILN_ERR_NULL_POINTER, "%s: %s is NULL", fn, what);
  if (buffer->ctx != queue->ctx)
    return kiln__fail(KILN_ERR_WRONG_CONTEXT,
                      "%s: %s belongs to another context than the queue", fn,
                      what);
  /* A transfer would run now, out of the recorded order. */
  if (queue->recorder != NULL)
    return kiln__fail(KILN_ERR_INVALID_STATE,
                      "%s: the queue is recording a sequence, which records "
                      "kernel launches and ops only; end the recording first",
                      fn);
  return KILN_OK;
}

/* Convert the wait list, prefixing its errors with fn. */
static kiln_status convert_waits(const kiln_queue *queue, size_t num_wait,
                                 kiln_event *const *list,
                                 cl_event inline_buf[KILN__WAIT_INLINE],
                                 cl_event **out, const char *fn) {
  kiln_status status = kiln__wait_list(queue, num_wait, list, inline_buf, out);
  if (status != KILN_OK) {
    char message[1024];
    snprintf(message, sizeof message, "%s", kiln_last_error());
    return kiln__fail(status, "%s: %s", fn, message);
  }
  return KILN_OK;
}

/* Reads and writes differ only in direction: one checked path for both, so a
 * check added to one cannot be missed in the other. */

/* Finish an enqueued transfer: trace it when KILN_TRACE is on (ev exists
 * then), then hand ev to the caller or release it. */
static kiln_status transfer_done(kiln_queue *queue, cl_event ev,
                                 kiln_event **out_event, const char *name,
                                 size_t bytes, uint64_t host_ns) {
  if (ev != NULL && kiln__trace_enabled())
    kiln__trace_commands(queue, "kiln.transfer", name,
                         json_pack("{s:s, s:f}", "op", name, "bytes",
                                   (double)bytes),
                         ev, ev, host_ns);
  return kiln__event_out(queue, ev, out_event);
}
/* Check range (argument what of fn) for a transfer on queue: its buffer of
 * queue's context, not empty, inside the buffer; gives its bytes. */
static kiln_status check_transfer(const kiln_queue *queue,
                                  const kiln_range *range, const char *fn,
                                  const char *what, size_t *offset_bytes,
                                  size_t *size_bytes) {
  if (queue == NULL)
    return kiln__fail(KILN_ERR_NULL_POINTER, "%s: queue is NULL", fn);
  char name[96];
  snprintf(name, sizeof name, "%s: %s", fn, what);
  kiln_status status = kiln__range_bytes(range, name, offset_bytes, size_bytes);
  if (status != KILN_OK)
    return status;
  status = check_queue_buffer(queue, range->buffer, fn, what);
  if (status == KILN_OK && range->count == 0)
    return kiln__fail(KILN_ERR_INVALID_SIZE,
                      "%s: %s range [offset %zu, +0 elements) is empty; "
                      "counts must be > 0",
                      fn, what, range->offset);
  return status;
}

kiln_status kiln__buffer_transfer(kiln_queue *queue, kiln_buffer *buffer,
                                  size_t offset_bytes, size_t size_bytes,
                                  void *host, bool write, size_t num_wait,
                                  kiln_event *const *wait_list,
                                  kiln_event **out_event) {
  const char *fn = write ? "kiln_buffer_write" : "kiln_buffer_read";
  cl_event inline_buf[KILN__WAIT_INLINE], *waits, ev = NULL;
  kiln_status status =
      convert_waits(queue, num_wait, wait_list, inline_buf, &waits, fn);
  if (status != KILN_OK)
    return status;
  bool traced = kiln__trace_enabled();
  uint64_t host_ns = traced ? kiln__now_ns() : 0;
  cl_event *ev_out = out_event != NULL || traced ? &ev : NULL;
  cl_int err =
      write ? clEnqueueWriteBuffer(queue->cl, buffer->cl, CL_FALSE,
                                   offset_bytes, size_bytes, host,
                                   (cl_uint)num_wait, waits, ev_out)
            : clEnqueueReadBuffer(queue->cl, buffer->cl, CL_FALSE,
                                  offset_bytes, size_bytes, host,
                                  (cl_uint)num_wait, waits, ev_out);
  kiln__wait_list_free(waits, inline_buf);
  if (err != CL_SUCCESS)
    return kiln__fail_cl(err,
                         write ? "clEnqueueWriteBuffer" : "clEnqueueReadBuffer",
                         queue->ctx->device, "%s: [offset %zu, +%zu bytes)", fn,
                         offset_bytes, size_bytes);
  return transfer_done(queue, ev, out_event, write ? "write" : "read",
                       size_bytes, host_ns);
}

static kiln_status transfer(kiln_queue *queue, const kiln_range *range,
                            void *host, bool write, size_t num_wait,
                            kiln_event *const *wait_list,
                            kiln_event **out_event) {
  const char *fn = write ? "kiln_buffer_write" : "kiln_buffer_read";
  const char *buffer_arg = write ? "dst" : "src";
  const char *host_arg = write ? "src" : "dst";
  if (out_event != NULL)
    *out_event = NULL;
  size_t offset_bytes = 0, size_bytes = 0;
  kiln_status status =
      check_transfer(queue, range, fn, buffer_arg, &offset_bytes, &size_bytes);
  if (status != KILN_OK)
    return status;
  if (host == NULL)
    return kiln__fail(KILN_ERR_NULL_POINTER, "%s: %s is NULL", fn, host_arg);
  return kiln__buffer_transfer(queue, range->buffer, offset_bytes, size_bytes,
                               host, write, num_wait, wait_list, out_event);
}

kiln_status kiln_buffer_write(kiln_queue *queue, const void *src,
                              const kiln_range *dst, size_t num_wait,
                              kiln_event *const *wait_list,
                              kiln_event **out_event) {
  /* The cast only lets both directions share one path; a write never
   * modifies src. */
  return transfer(queue, dst, (void *)(uintptr_t)src, true, num_wait, wait_list,
                  out_event);
}

kiln_status kiln_buffer_read(kiln_queue *queue, const kiln_range *src,
                             void *dst, size_t num_wait,
                             kiln_event *const *wait_list,
                             kiln_event **out_event) {
  return transfer(queue, src, dst, false, num_wait, wait_list, out_event);
}

kiln_status kiln_buffer_copy(kiln_queue *queue, const kiln_range *src_range,
                             const kiln_range *dst_range, size_t num_wait,
                             kiln_event *const *wait_list,
                             kiln_event **out_event) {
  static const char fn[] = "kiln_buffer_copy";
  if (out_event != NULL)
    *out_event = NULL;
  size_t src_offset_bytes = 0, dst_offset_bytes = 0, size_bytes = 0, dst_bytes;
  kiln_status status = check_transfer(queue, src_range, fn, "src",
                                      &src_offset_bytes, &size_bytes);
  if (status == KILN_OK)
    status = check_transfer(queue, dst_range, fn, "dst", &dst_offset_bytes,
                            &dst_bytes);
  if (status != KILN_OK)
    return status;
  if (src_range->count != dst_range->count ||
      src_range->dtype != dst_range->dtype)
    return kiln__fail(KILN_ERR_SHAPE_MISMATCH,
                      "%s: src (%zu elements of %s) and dst (%zu elements of "
                      "%s) differ",
                      fn, src_range->count, kiln_dtype_name(src_range->dtype),
                      dst_range->count, kiln_dtype_name(dst_range->dtype));
  kiln_buffer *src = src_range->buffer, *dst = dst_range->buffer;
  /* Overlap is judged in the root buffer, so two views of one buffer that
   * share bytes are caught too (OpenCL would fail with
   * CL_MEM_COPY_OVERLAP, without saying where). */
  const kiln_buffer *src_root = src->parent != NULL ? src->parent : src;
  const kiln_buffer *dst_root = dst->parent != NULL ? dst->parent : dst;
  if (src_root == dst_root) {
    size_t a = src->origin + src_offset_bytes;
    size_t b = dst->origin + dst_offset_bytes;
    if (a < b + size_bytes && b < a + size_bytes)
      return kiln__fail(KILN_ERR_INVALID_ARGUMENT,
                        "%s: src range [offset %zu, +%zu bytes) and dst range "
                        "[offset %zu, +%zu bytes) overlap in the same buffer",
                        fn, a, size_bytes, b, size_bytes);
  }
  cl_event inline_buf[KILN__WAIT_INLINE], *waits, ev = NULL;
  status = convert_waits(queue, num_wait, wait_list, inline_buf, &waits, fn);
  if (status != KILN_OK)
    return status;
  bool traced = kiln__trace_enabled();
  uint64_t host_ns = traced ? kiln__now_ns() : 0;
  cl_int err = clEnqueueCopyBuffer(queue->cl, src->cl, dst->cl,
                                   src_offset_bytes, dst_offset_bytes,
                                   size_bytes, (cl_uint)num_wait, waits,
                                   out_event != NULL || traced ? &ev : NULL);
  kiln__wait_list_free(waits, inline_buf);
  if (err != CL_SUCCESS)
    return kiln__fail_cl(err, "clEnqueueCopyBuffer", queue->ctx->device,
                         "%s: %zu bytes", fn, size_bytes);
  /* A copy reads and writes every byte. */
  return transfer_done(queue, ev, out_event, "copy", 2 * size_bytes, host_ns);
}

kiln_status kiln_buffer_fill(kiln_queue *queue, const void *pattern,
                             size_t pattern_bytes, const kiln_range *dst,
                             size_t num_wait, kiln_event *const *wait_list,
                             kiln_event **out_event) {
  static const char fn[] = "kiln_buffer_fill";
  if (out_event != NULL)
    *out_event = NULL;
  size_t offset_bytes = 0, size_bytes = 0;
  kiln_status status =
      check_transfer(queue, dst, fn, "dst", &offset_bytes, &size_bytes);
  if (status != KILN_OK)
    return status;
  kiln_buffer *buffer = dst->buffer;
  if (pattern == NULL)
    return kiln__fail(KILN_ERR_NULL_POINTER, "%s: pattern is NULL", fn);
  /* OpenCL's pattern sizes: the sizes of its scalar and vector types. */
  if (pattern_bytes == 0 || pattern_bytes > 128 ||
      (pattern_bytes & (pattern_bytes - 1)) != 0)
    return kiln__fail(KILN_ERR_INVALID_SIZE,
                      "%s: pattern_bytes %zu is not one of 1, 2, 4, 8, 16, "
                      "32, 64, 128",
                      fn, pattern_bytes);
  if (offset_bytes % pattern_bytes != 0 || size_bytes % pattern_bytes != 0)
    return kiln__fail(KILN_ERR_INVALID_ARGUMENT,
                      "%s: dst's bytes [offset %zu, +%zu) must start and end "
                      "at multiples of pattern_bytes %zu",
                      fn, offset_bytes, size_bytes, pattern_bytes);
  cl_event inline_buf[KILN__WAIT_INLINE], *waits, ev = NULL;
  status = convert_waits(queue, num_wait, wait_list, inline_buf, &waits, fn);
  if (status != KILN_OK)
    return status;
  bool traced = kiln__trace_enabled();
  uint64_t host_ns = traced ? kiln__now_ns() : 0;
  cl_int err = clEnqueueFillBuffer(queue->cl, buffer->cl, pattern,
                                   pattern_bytes, offset_bytes, size_bytes,
                                   (cl_uint)num_wait, waits,
                                   out_event != NULL || traced ? &ev : NULL);
  kiln__wait_list_free(waits, inline_buf);
  if (err != CL_SUCCESS)
    return kiln__fail_cl(err, "clEnqueueFillBuffer", queue->ctx->device,
                         "%s: %zu-byte pattern over [offset %zu, +%zu bytes)",
                         fn, pattern_bytes, offset_bytes, size_bytes);
  return transfer_done(queue, ev, out_event, "fill", size_bytes, host_ns);
}

static void mapping_push(kiln_buffer *buffer, struct kiln__mapping *m) {
  pthread_mutex_lock(&buffer->map_lock);
  m->next = buffer->maps;
  buffer->maps = m;
  pthread_mutex_unlock(&buffer->map_lock);
}

/* Unlink one entry for ptr; NULL when ptr is not mapped from buffer. */
static struct kiln__mapping *mapping_take(kiln_buffer *buffer, void *ptr) {
  pthread_mutex_lock(&buffer->map_lock);
  struct kiln__mapping **link = &buffer->maps;
  while (*link != NULL && (*link)->ptr != ptr)
    link = &(*link)->next;
  struct kiln__mapping *m = *link;
  if (m != NULL)
    *link = m->next;
  pthread_mutex_unlock(&buffer->map_lock);
  return m;
}

kiln_status kiln_buffer_map(kiln_queue *queue, const kiln_range *data,
                            void **out_ptr, unsigned map_flags, size_t num_wait,
                            kiln_event *const *wait_list,
                            kiln_event **out_event) {
  static const char fn[] = "kiln_buffer_map";
  if (out_event != NULL)
    *out_event = NULL;
  if (out_ptr == NULL)
    return kiln__fail(KILN_ERR_NULL_POINTER, "%s: out_ptr is NULL", fn);
  *out_ptr = NULL;
  size_t offset_bytes = 0, size_bytes = 0;
  kiln_status status =
      check_transfer(queue, data, fn, "data", &offset_bytes, &size_bytes);
  if (status != KILN_OK)
    return status;
  kiln_buffer *buffer = data->buffer;
  if (map_flags == 0 || (map_flags & ~(unsigned)MAP_FLAGS_KNOWN) != 0)
    return kiln__fail(KILN_ERR_INVALID_ARGUMENT,
                      "%s: map_flags 0x%x must be KILN_MAP_READ, "
                      "KILN_MAP_WRITE or both",
                      fn, map_flags);
  /* Allocated first, so that nothing can fail between a successful map and
   * recording it. */
  struct kiln__mapping *m = malloc(sizeof *m);
  if (m == NULL)
    return kiln__fail(KILN_ERR_OUT_OF_HOST_MEMORY, "%s: out of host memory",
                      fn);
  cl_event inline_buf[KILN__WAIT_INLINE], *waits, ev = NULL;
  status = convert_waits(queue, num_wait, wait_list, inline_buf, &waits, fn);
  if (status != KILN_OK) {
    free(m);
    return status;
  }
  cl_map_flags cl_flags = 0;
  if (map_flags & KILN_MAP_READ)
    cl_flags |= CL_MAP_READ;
  if (map_flags & KILN_MAP_WRITE)
    cl_flags |= CL_MAP_WRITE;
  cl_int err = CL_SUCCESS;
  void *ptr = clEnqueueMapBuffer(queue->cl, buffer->cl, CL_FALSE, cl_flags,
                                 offset_bytes, size_bytes, (cl_uint)num_wait,
                                 waits, out_event != NULL ? &ev : NULL, &err);
  kiln__wait_list_free(waits, inline_buf);
  if (err != CL_SUCCESS || ptr == NULL) {
    free(m);
    if (ev != NULL)
      clReleaseEvent(ev);
    return kiln__fail_cl(err != CL_SUCCESS ? err : CL_MAP_FAILURE,
                         "clEnqueueMapBuffer", queue->ctx->device,
                         "%s: [offset %zu, +%zu bytes)", fn, offset_bytes,
                         size_bytes);
  }
  m->ptr = ptr;
  mapping_push(buffer, m);
  *out_ptr = ptr;
  return kiln__event_out(queue, ev, out_event);
}

kiln_status kiln_buffer_unmap(kiln_queue *queue, kiln_buffer *buffer,
                              void *mapped, size_t num_wait,
                              kiln_event *const *wait_list,
                              kiln_event **out_event) {
  static const char fn[] = "kiln_buffer_unmap";
  if (out_event != NULL)
    *out_event = NULL;
  kiln_status status = check_queue_buffer(queue, buffer, fn, "buffer");
  if (status != KILN_OK)
    return status;
  if (mapped == NULL)
    return kiln__fail(KILN_ERR_NULL_POINTER, "%s: mapped is NULL", fn);
  cl_event inline_buf[KILN__WAIT_INLINE], *waits, ev = NULL;
  status = convert_waits(queue, num_wait, wait_list, inline_buf, &waits, fn);
  if (status != KILN_OK)
    return status;
  struct kiln__mapping *m = mapping_take(buffer, mapped);
  if (m == NULL) {
    kiln__wait_list_free(waits, inline_buf);
    return kiln__fail(KILN_ERR_INVALID_ARGUMENT,
                      "%s: mapped (%p) is not a live mapping of this buffer "
                      "(not returned by kiln_buffer_map on it, or already "
                      "unmapped)",
                      fn, mapped);
  }
  cl_int err = clEnqueueUnmapMemObject(queue->cl, buffer->cl, mapped,
                                       (cl_uint)num_wait, waits,
                                       out_event != NULL ? &ev : NULL);
  kiln__wait_list_free(waits, inline_buf);
  if (err != CL_SUCCESS) {
    /* Still mapped: keep it on record so the caller can retry. */
    mapping_push(buffer, m);
    return kiln__fail_cl(err, "clEnqueueUnmapMemObject", queue->ctx->device,
                         "%s", fn);
  }
  free(m);
  return kiln__event_out(queue, ev, out_event);
}

kiln_status kiln_buffer_write_sync(kiln_queue *queue, const void *src,
                                   const kiln_range *dst) {
  kiln_event *ev = NULL;
  kiln_status status = kiln_buffer_write(queue, src, dst, 0, NULL, &ev);
  if (status != KILN_OK)
    return status;
  status = kiln_event_wait(ev);
  kiln_event_release(ev);
  return status;
}

kiln_status kiln_buffer_read_sync(kiln_queue *queue, const kiln_range *src,
                                  void *dst) {
  kiln_event *ev = NULL;
  kiln_status status = kiln_buffer_read(queue, src, dst, 0, NULL, &ev);
  if (status != KILN_OK)
    return status;
  status = kiln_event_wait(ev);
  kiln_event_release(ev);
  return status;
}
