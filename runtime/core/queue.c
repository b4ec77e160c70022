/* In-order command queues. */
#include <stdio.h>
#include <stdlib.h>

#include "internal.h"

#define QUEUE_FLAGS_KNOWN (KILN_QUEUE_PROFILING)

/* Op tracing reads start and end times from events, which needs profiling
 * on every queue, including queues the application created without it. */
static bool trace_requested(void) {
  const char *v = getenv("KILN_TRACE");
  return (v != NULL && v[0] != '\0') || kiln__trace_enabled();
}

/* clCreateCommandQueueWithProperties is a 2.0 entry point. Oclgrind's 1.2
 * platform exports it yet hangs in it, and other 1.2 platforms may lack it,
 * so 1.x platforms (and profiles that flag the quirk) use the 1.2 call. */
static bool legacy_create(const kiln_context *ctx) {
  return ctx->device->info.platform_cl_version < 200 ||
         (ctx->backend->quirks & KILN_QUIRK_LEGACY_QUEUE_CREATE) != 0 ||
         (ctx->device->info.quirks & KILN_QUIRK_LEGACY_QUEUE_CREATE) != 0;
}

kiln_status kiln_queue_create(kiln_context *ctx, unsigned flags,
                              kiln_queue **out) {
  if (out == NULL)
    return kiln__fail(KILN_ERR_NULL_POINTER, "kiln_queue_create: out is NULL");
  *out = NULL;
  if (ctx == NULL)
    return kiln__fail(KILN_ERR_NULL_POINTER, "kiln_queue_create: ctx is NULL");
  if ((flags & ~(unsigned)QUEUE_FLAGS_KNOWN) != 0)
    return kiln__fail(KILN_ERR_INVALID_ARGUMENT,
                      "kiln_queue_create: flags has unknown bits 0x%x",
                      flags & ~(unsigned)QUEUE_FLAGS_KNOWN);
  if (trace_requested())
    flags |= KILN_QUEUE_PROFILING;

  kiln_queue *queue = calloc(1, sizeof *queue);
  if (queue != NULL && (queue->sync = calloc(1, sizeof *queue->sync)) == NULL) {
    free(queue);
    queue = NULL;
  }
  if (queue == NULL)
    return kiln__fail(KILN_ERR_OUT_OF_HOST_MEMORY,
                      "kiln_queue_create: out of host memory");

  cl_int err = CL_SUCCESS;
  const char *call;
  cl_command_queue_properties props =
      (flags & KILN_QUEUE_PROFILING) ? CL_QUEUE_PROFILING_ENABLE : 0;
  if (legacy_create(ctx)) {
    call = "clCreateCommandQueue";
    queue->cl = clCreateCommandQueue(ctx->cl, ctx->device->id, props, &err);
  } else {
    call = "clCreateCommandQueueWithProperties";
    cl_queue_properties list[] = {CL_QUEUE_PROPERTIES, props, 0};
    queue->cl = clCreateCommandQueueWithProperties(
        ctx->cl, ctx->device->id, props != 0 ? list : NULL, &err);
  }
  if (err != CL_SUCCESS || queue->cl == NULL) {
    kiln_status status =
        kiln__fail_cl(err != CL_SUCCESS ? err : CL_OUT_OF_HOST_MEMORY, call,
                      ctx->device, "kiln_queue_create (flags 0x%x)", flags);
    free(queue->sync);
    free(queue);
    return status;
  }
  queue->ctx = ctx;
  atomic_init(&queue->sync->refs, 1);
  /* Recorded as in force, so events know whether they carry timestamps
   * even when only KILN_TRACE asked for them. */
  queue->flags = flags;
  kiln__context_child_added(ctx);
  *out = queue;
  return KILN_OK;
}

/* clFinish, made to wait on drivers whose clFinish skips commands already
 * flushed (KILN_QUIRK_FINISH_SKIPS_FLUSHED): everything pending is flushed
 * first, then a marker is enqueued and waited for. The flush matters on
 * rusticl, which completes the commands of one flush in a batch and may
 * signal a marker sharing their batch before it has waited for them; a
 * marker in a later batch is signalled only after they all completed. The
 * clFinish that follows is then cheap. */
static cl_int finish(kiln_queue *queue) {
  if (queue->ctx->device->info.quirks & KILN_QUIRK_FINISH_SKIPS_FLUSHED) {
    cl_event marker = NULL;
    cl_int err = clFlush(queue->cl);
    if (err == CL_SUCCESS)
      err = clEnqueueMarkerWithWaitList(queue->cl, 0, NULL, &marker);
    if (err != CL_SUCCESS)
      return err;
    err = clWaitForEvents(1, &marker);
    clReleaseEvent(marker);
    if (err != CL_SUCCESS)
      return err;
  }
  return clFinish(queue->cl);
}

kiln_status kiln_queue_destroy(kiln_queue *queue) {
  if (queue == NULL)
    return KILN_OK;
  if (queue->recorder != NULL)
    return kiln__fail(KILN_ERR_BUSY,
                      "kiln_queue_destroy: a sequence is recording on this "
                      "queue; kiln_sequence_end or kiln_sequence_destroy it "
                      "first");
  /* Pending work is finished, not abandoned: the caller's host pointers in
   * pending reads and writes stay in use until then. */
  cl_int err = finish(queue);
  kiln_status status = KILN_OK;
  if (err != CL_SUCCESS)
    status = kiln__fail_cl(err, "clFinish", queue->ctx->device,
                           "kiln_queue_destroy: waiting for pending commands");
  for (size_t i = KILN__SLOTS; i-- > 0;)
    if (queue->attached[i] != NULL)
      queue->attached[i]->destroy(queue->attached[i]);
  clReleaseCommandQueue(queue->cl);
  kiln__queue_sync_release(queue->sync);
  kiln__context_child_removed(queue->ctx);
  free(queue);
  return status;
}

kiln_status kiln_queue_flush(kiln_queue *queue) {
  if (queue == NULL)
    return kiln__fail(KILN_ERR_NULL_POINTER, "kiln_queue_flush: queue is NULL");
  cl_int err = clFlush(queue->cl);
  if (err != CL_SUCCESS)
    return kiln__fail_cl(err, "clFlush", queue->ctx->device,
                         "kiln_queue_flush");
  return KILN_OK;
}

void kiln__queue_sync_release(struct kiln__queue_sync *sync) {
  if (sync != NULL && atomic_fetch_sub(&sync->refs, 1) == 1)
    free(sync);
}

kiln_status kiln_queue_finish(kiln_queue *queue) {
  if (queue == NULL)
    return kiln__fail(KILN_ERR_NULL_POINTER,
                      "kiln_queue_finish: queue is NULL");
  const uint64_t ticket = atomic_fetch_add(&queue->sync->started, 1) + 1;
  cl_int err = finish(queue);
  if (err != CL_SUCCESS)
    return kiln__fail_cl(err, "clFinish", queue->ctx->device,
                         "kiln_queue_finish");
  /* done = max(done, ticket): finishes may return out of order. */
  uint64_t seen = atomic_load(&queue->sync->done);
  while (seen < ticket &&
         !atomic_compare_exchange_weak(&queue->sync->done, &seen, ticket)) {
  }
  return KILN_OK;
}

kiln_status kiln_queue_marker(kiln_queue *queue, size_t num_wait,
                              kiln_event *const *wait_list,
                              kiln_event **out_event) {
  if (out_event != NULL)
    *out_event = NULL;
  if (queue == NULL)
    return kiln__fail(KILN_ERR_NULL_POINTER,
                      "kiln_queue_marker: queue is NULL");
  cl_event inline_buf[KILN__WAIT_INLINE];
  cl_event *waits = NULL;
  kiln_status status =
      kiln__wait_list(queue, num_wait, wait_list, inline_buf, &waits);
  if (status != KILN_OK) {
    char message[1024];
    snprintf(message, sizeof message, "%s", kiln_last_error());
    return kiln__fail(status, "kiln_queue_marker: %s", message);
  }
  cl_event ev = NULL;
  cl_int err = clEnqueueMarkerWithWaitList(queue->cl, (cl_uint)num_wait, waits,
                                           out_event != NULL ? &ev : NULL);
  kiln__wait_list_free(waits, inline_buf);
  if (err != CL_SUCCESS)
    return kiln__fail_cl(err, "clEnqueueMarkerWithWaitList",
                         queue->ctx->device, "kiln_queue_marker");
  return kiln__event_out(queue, ev, out_event);
}

kiln_context *kiln_queue_get_context(const kiln_queue *queue) {
  return queue != NULL ? queue->ctx : NULL;
}

kiln_status kiln__done_event(kiln_queue *queue, kiln_event **out_event) {
  if (out_event == NULL)
    return KILN_OK;
  kiln_status status = kiln_queue_marker(queue, 0, NULL, out_event);
  if (status == KILN_OK && (status = kiln_event_wait(*out_event)) != KILN_OK) {
    kiln_event_release(*out_event);
    *out_event = NULL;
  }
  return status;
}
