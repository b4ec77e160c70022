/* Staged transfers of pageable memory through a ring of pinned chunks
 * (kiln_pinned.h), and copies between devices through the same ring
 * (kiln_peer_copy). Each chunk has the event of its last transfer; a chunk
 * is refilled or drained only after that event completed, so the host
 * memcpy (or the other device's write) of one chunk overlaps the device
 * copy of the others. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mem.h"

struct kiln_staging {
  kiln_context *ctx;
  cl_command_queue queue; /* retained */
  kiln_pinned *ring;      /* num_chunks * chunk_bytes */
  size_t chunk_bytes;
  size_t num_chunks;
  cl_event *events;       /* per chunk: its last transfer, or NULL */
};

kiln_status kiln_staging_create(kiln_queue *queue, size_t chunk_bytes,
                                size_t num_chunks, kiln_staging **out) {
  static const char fn[] = "kiln_staging_create";
  if (out == NULL)
    return kiln__fail(KILN_ERR_NULL_POINTER, "%s: out is NULL", fn);
  *out = NULL;
  if (queue == NULL)
    return kiln__fail(KILN_ERR_NULL_POINTER, "%s: queue is NULL", fn);
  size_t total;
  if (chunk_bytes == 0 || num_chunks == 0 ||
      kiln__mul_overflows(chunk_bytes, num_chunks, &total))
    return kiln__fail(KILN_ERR_INVALID_SIZE,
                      "%s: chunk_bytes %zu and num_chunks %zu must both be > 0 "
                      "and their product fit size_t",
                      fn, chunk_bytes, num_chunks);
  kiln_staging *s = calloc(1, sizeof *s);
  cl_event *events = calloc(num_chunks, sizeof *events);
  if (s == NULL || events == NULL) {
    free(s);
    free(events);
    return kiln__fail(KILN_ERR_OUT_OF_HOST_MEMORY, "%s: out of host memory",
                      fn);
  }
  kiln_status status = kiln_pinned_create(queue, total, &s->ring);
  if (status != KILN_OK) {
    free(s);
    free(events);
    return status;
  }
  s->ctx = queue->ctx;
  s->queue = queue->cl;
  clRetainCommandQueue(s->queue);
  s->chunk_bytes = chunk_bytes;
  s->num_chunks = num_chunks;
  s->events = events;
  *out = s;
  return KILN_OK;
}

/* With KILN_TRACE set, each chunk's device copy is one "kiln.transfer"
 * event named after the call, on the staging queue's lane, with its bytes,
 * device offset and ring slot. */
static void trace_chunk(const kiln_context *ctx, cl_command_queue queue,
                        const char *name, cl_event ev, size_t offset,
                        size_t len, size_t slot, uint64_t host_ns) {
  if (ev == NULL || !kiln__trace_enabled())
    return;
  kiln__trace_cl_commands(
      ctx, queue, "kiln.transfer", name,
      json_pack("{s:s, s:f, s:f, s:f}", "op", name, "bytes", (double)len,
                "offset", (double)offset, "slot", (double)slot),
      ev, ev, host_ns);
}

/* Wait for chunk i's last transfer and forget it. */
static cl_int settle(kiln_staging *s, size_t i) {
  if (s->events[i] == NULL)
    return CL_SUCCESS;
  cl_int err = clWaitForEvents(1, &s->events[i]);
  clReleaseEvent(s->events[i]);
  s->events[i] = NULL;
  return err;
}

/* Settle every chunk; the first error wins. */
static cl_int settle_all(kiln_staging *s) {
  cl_int first = CL_SUCCESS;
  for (size_t i = 0; i < s->num_chunks; i++) {
    cl_int err = settle(s, i);
    if (first == CL_SUCCESS)
      first = err;
  }
  return first;
}

kiln_status kiln_staging_destroy(kiln_staging *staging) {
  if (staging == NULL)
    return KILN_OK;
  settle_all(staging);
  kiln_status status = kiln_pinned_destroy(staging->ring);
  clReleaseCommandQueue(staging->queue);
  free(staging->events);
  free(staging);
  return status;
}

/* The checks both directions share; on success *offset and *size are the
 * range's bytes, and the wait list has completed (the host waits for it:
 * the copy is blocking and its first chunk needs the data). */
static kiln_status check(kiln_staging *s, const kiln_range *range,
                         const void *host, size_t num_wait,
                         kiln_event *const *wait_list, const char *fn,
                         const char *range_arg, const char *host_arg,
                         size_t *offset, size_t *size) {
  if (s == NULL)
    return kiln__fail(KILN_ERR_NULL_POINTER, "%s: staging is NULL", fn);
  char what[96];
  snprintf(what, sizeof what, "%s: %s", fn, range_arg);
  kiln_status status = kiln__range_bytes(range, what, offset, size);
  if (status != KILN_OK)
    return status;
  if (host == NULL)
    return kiln__fail(KILN_ERR_NULL_POINTER, "%s: %s is NULL", fn, host_arg);
  if (range->buffer->ctx != s->ctx)
    return kiln__fail(KILN_ERR_WRONG_CONTEXT,
                      "%s: %s belongs to another context than the staging "
                      "ring",
                      fn, range_arg);
  cl_event inline_buf[KILN__WAIT_INLINE], *checked = NULL;
  status =
      kiln__wait_list_cl(s->ctx, num_wait, wait_list, inline_buf, &checked);
  kiln__wait_list_free(checked, inline_buf);
  if (status != KILN_OK) {
    char message[1024];
    snprintf(message, sizeof message, "%s", kiln_last_error());
    return kiln__fail(status, "%s: %s", fn, message);
  }
  return kiln_event_wait_all(num_wait, wait_list);
}

/* A blocking call's out event: a marker on the ring's queue, waited for,
 * so complete on return (it carries no profiling times). */
static kiln_status done_event(kiln_staging *s, const char *fn,
                              kiln_event **out_event) {
  if (out_event == NULL)
    return KILN_OK;
  cl_event ev = NULL;
  cl_int err = clEnqueueMarkerWithWaitList(s->queue, 0, NULL, &ev);
  if (err == CL_SUCCESS && (err = clWaitForEvents(1, &ev)) != CL_SUCCESS)
    clReleaseEvent(ev);
  if (err != CL_SUCCESS)
    return kiln__fail_cl(err, "clEnqueueMarkerWithWaitList", s->ctx->device,
                         "%s: out_event", fn);
  return kiln__event_wrap_cl(s->ctx, false, ev, out_event);
}

kiln_status kiln_staging_write(kiln_staging *staging, const void *src,
                               const kiln_range *dst, size_t num_wait,
                               kiln_event *const *wait_list,
                               kiln_event **out_event) {
  static const char fn[] = "kiln_staging_write";
  if (out_event != NULL)
    *out_event = NULL;
  size_t offset_bytes = 0, size_bytes = 0;
  kiln_status status = check(staging, dst, src, num_wait, wait_list, fn, "dst",
                             "src", &offset_bytes, &size_bytes);
  if (status != KILN_OK)
    return status;
  if (size_bytes == 0)
    return done_event(staging, fn, out_event);
  cl_mem dst_mem = dst->buffer->cl;
  unsigned char *ring = kiln_pinned_get_ptr(staging->ring);
  size_t chunk = staging->chunk_bytes;
  cl_int err = CL_SUCCESS;
  const char *call = "clWaitForEvents";
  for (size_t done = 0, k = 0; done < size_bytes && err == CL_SUCCESS; k++) {
    size_t i = k % staging->num_chunks;
    size_t len = size_bytes - done < chunk ? size_bytes - done : chunk;
    err = settle(staging, i);
    if (err != CL_SUCCESS)
      break;
    memcpy(ring + i * chunk, (const unsigned char *)src + done, len);
    call = "clEnqueueWriteBuffer";
    uint64_t host_ns = kiln__trace_enabled() ? kiln__now_ns() : 0;
    err = clEnqueueWriteBuffer(staging->queue, dst_mem, CL_FALSE,
                               offset_bytes + done, len, ring + i * chunk, 0,
                               NULL, &staging->events[i]);
    if (err != CL_SUCCESS) {
      staging->events[i] = NULL;
      break;
    }
    trace_chunk(staging->ctx, staging->queue, fn, staging->events[i],
                offset_bytes + done, len, i, host_ns);
    if (k == 0)
      clFlush(staging->queue); /* start the device before the next memcpy */
    done += len;
  }
  cl_int waited = settle_all(staging);
  if (err == CL_SUCCESS && waited != CL_SUCCESS) {
    err = waited;
    call = "clWaitForEvents";
  }
  if (err != CL_SUCCESS)
    return kiln__fail_cl(err, call, staging->ctx->device,
                         "%s: [offset %zu, +%zu bytes) in %zu-byte chunks", fn,
                         offset_bytes, size_bytes, chunk);
  return done_event(staging, fn, out_event);
}

/* Where a staged read sends each chunk once it is in the ring: into host
 * memory (kiln_staging_read), or, by a write on another queue, into a
 * buffer of any context (kiln__staging_peer_copy). */
struct drain {
  unsigned char *host;    /* memcpy to host + position, when not NULL */
  const kiln_context *ctx; /* else a write on queue (of ctx) to mem at */
  cl_command_queue queue;  /* offset */
  cl_mem mem;
  size_t offset;
};

/* Read size bytes of src at offset through the ring, chunk after chunk,
 * and drain each. Reads of chunks k .. k+n-1 are in flight while chunk k is
 * drained; a drain by write leaves that write as its slot's event, so the
 * slot's next read waits for it. On failure *call names the call. */
static cl_int read_through(kiln_staging *s, cl_mem src, size_t offset,
                           size_t size, const struct drain *d, const char *fn,
                           const char **call) {
  unsigned char *ring = kiln_pinned_get_ptr(s->ring);
  size_t chunk = s->chunk_bytes, n = s->num_chunks;
  size_t chunks = size / chunk + (size % chunk != 0);
  cl_int err = CL_SUCCESS;
  size_t issued = 0;
  for (size_t k = 0; k < chunks && err == CL_SUCCESS; k++) {
    while (err == CL_SUCCESS && issued < chunks && issued < k + n) {
      size_t i = issued % n, at = issued * chunk;
      size_t len = size - at < chunk ? size - at : chunk;
      *call = "clWaitForEvents";
      err = settle(s, i);
      if (err != CL_SUCCESS)
        break;
      *call = "clEnqueueReadBuffer";
      uint64_t host_ns = kiln__trace_enabled() ? kiln__now_ns() : 0;
      err = clEnqueueReadBuffer(s->queue, src, CL_FALSE, offset + at, len,
                                ring + i * chunk, 0, NULL, &s->events[i]);
      if (err != CL_SUCCESS)
        s->events[i] = NULL;
      else
        trace_chunk(s->ctx, s->queue, fn, s->events[i], offset + at, len, i,
                    host_ns);
      issued++;
    }
    if (err != CL_SUCCESS)
      break;
    size_t i = k % n, at = k * chunk;
    size_t len = size - at < chunk ? size - at : chunk;
    *call = "clWaitForEvents";
    err = settle(s, i);
    if (err != CL_SUCCESS)
      break;
    if (d->host != NULL) {
      memcpy(d->host + at, ring + i * chunk, len);
      continue;
    }
    *call = "clEnqueueWriteBuffer";
    uint64_t host_ns = kiln__trace_enabled() ? kiln__now_ns() : 0;
    err = clEnqueueWriteBuffer(d->queue, d->mem, CL_FALSE, d->offset + at, len,
                               ring + i * chunk, 0, NULL, &s->events[i]);
    if (err != CL_SUCCESS) {
      s->events[i] = NULL;
      break;
    }
    trace_chunk(d->ctx, d->queue, fn, s->events[i], d->offset + at, len, i,
                host_ns);
    err = clFlush(d->queue); /* rusticl runs nothing unflushed */
  }
  cl_int waited = settle_all(s);
  if (err == CL_SUCCESS && waited != CL_SUCCESS) {
    err = waited;
    *call = "clWaitForEvents";
  }
  return err;
}

kiln_status kiln_staging_read(kiln_staging *staging, const kiln_range *src,
                              void *dst, size_t num_wait,
                              kiln_event *const *wait_list,
                              kiln_event **out_event) {
  static const char fn[] = "kiln_staging_read";
  if (out_event != NULL)
    *out_event = NULL;
  size_t offset_bytes = 0, size_bytes = 0;
  kiln_status status = check(staging, src, dst, num_wait, wait_list, fn, "src",
                             "dst", &offset_bytes, &size_bytes);
  if (status != KILN_OK)
    return status;
  if (size_bytes == 0)
    return done_event(staging, fn, out_event);
  const char *call = "clEnqueueReadBuffer";
  struct drain d = {dst, NULL, NULL, NULL, 0};
  cl_int err = read_through(staging, src->buffer->cl, offset_bytes, size_bytes,
                            &d, fn, &call);
  if (err != CL_SUCCESS)
    return kiln__fail_cl(err, call, staging->ctx->device,
                         "%s: [offset %zu, +%zu bytes) in %zu-byte chunks", fn,
                         offset_bytes, size_bytes, staging->chunk_bytes);
  return done_event(staging, fn, out_event);
}

cl_int kiln__staging_peer_copy(kiln_staging *staging, kiln_buffer *src,
                               size_t src_offset, cl_command_queue dst_queue,
                               kiln_buffer *dst, size_t dst_offset,
                               size_t size, const char **call) {
  struct drain d = {NULL, dst->ctx, dst_queue, dst->cl, dst_offset};
  *call = "clEnqueueReadBuffer";
  return read_through(staging, src->cl, src_offset, size, &d,
                      "kiln_peer_copy", call);
}
