/* Events: kiln's reference-counted wrapper of cl_event, and the wait-list
 * conversion every enqueue shares. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "internal.h"

kiln_status kiln__event_wrap_cl(kiln_context *ctx, bool profiled, cl_event ev,
                                kiln_event **out) {
  kiln_event *event = malloc(sizeof *event);
  if (event == NULL) {
    clReleaseEvent(ev);
    *out = NULL;
    return kiln__fail(KILN_ERR_OUT_OF_HOST_MEMORY,
                      "kiln_event: out of host memory wrapping an event");
  }
  event->ctx = ctx;
  event->cl = ev;
  atomic_init(&event->refs, 1u);
  event->profiled = profiled;
  kiln__context_child_added(ctx);
  *out = event;
  return KILN_OK;
}

kiln_status kiln__event_wrap(kiln_queue *queue, cl_event ev, kiln_event **out) {
  return kiln__event_wrap_cl(
      queue->ctx, (queue->flags & KILN_QUEUE_PROFILING) != 0, ev, out);
}

kiln_status kiln__event_out(kiln_queue *queue, cl_event ev,
                            kiln_event **out_event) {
  if (out_event == NULL) {
    if (ev != NULL)
      clReleaseEvent(ev);
    return KILN_OK;
  }
  return kiln__event_wrap(queue, ev, out_event);
}

kiln_status kiln__wait_list(const kiln_queue *queue, size_t num_wait,
                            kiln_event *const *wait_list,
                            cl_event inline_buf[KILN__WAIT_INLINE],
                            cl_event **out) {
  return kiln__wait_list_cl(queue->ctx, num_wait, wait_list, inline_buf, out);
}

kiln_status kiln__wait_list_cl(const kiln_context *ctx, size_t num_wait,
                               kiln_event *const *wait_list,
                               cl_event inline_buf[KILN__WAIT_INLINE],
                               cl_event **out) {
  *out = NULL;
  if (num_wait == 0)
    return KILN_OK;
  if (wait_list == NULL)
    return kiln__fail(KILN_ERR_NULL_POINTER,
                      "wait_list is NULL but num_wait is %zu", num_wait);
  if (num_wait > UINT32_MAX)
    return kiln__fail(KILN_ERR_INVALID_SIZE,
                      "num_wait %zu exceeds OpenCL's limit of %u events",
                      num_wait, (unsigned)UINT32_MAX);
  /* Validate everything before allocating, so errors need no cleanup. */
  for (size_t i = 0; i < num_wait; i++) {
    if (wait_list[i] == NULL)
      return kiln__fail(KILN_ERR_NULL_POINTER,
                        "wait_list[%zu] is NULL (num_wait %zu)", i, num_wait);
    if (wait_list[i]->ctx != ctx)
      return kiln__fail(KILN_ERR_WRONG_CONTEXT,
                        "wait_list[%zu] is an event of another context than "
                        "the queue's",
                        i);
  }
  cl_event *list = inline_buf;
  if (num_wait > KILN__WAIT_INLINE) {
    size_t bytes;
    if (kiln__mul_overflows(num_wait, sizeof *list, &bytes) ||
        (list = malloc(bytes)) == NULL)
      return kiln__fail(KILN_ERR_OUT_OF_HOST_MEMORY,
                        "out of host memory for a wait list of %zu events",
                        num_wait);
  }
  for (size_t i = 0; i < num_wait; i++)
    list[i] = wait_list[i]->cl;
  *out = list;
  return KILN_OK;
}

void kiln__wait_list_free(cl_event *list,
                          cl_event inline_buf[KILN__WAIT_INLINE]) {
  if (list != NULL && list != inline_buf)
    free(list);
}

static kiln_status query_status(const kiln_event *event, const char *fn,
                                cl_int *out) {
  cl_int value = 0;
  cl_int err = clGetEventInfo(event->cl, CL_EVENT_COMMAND_EXECUTION_STATUS,
                              sizeof value, &value, NULL);
  if (err != CL_SUCCESS)
    return kiln__fail_cl(err, "clGetEventInfo", event->ctx->device,
                         "%s: CL_EVENT_COMMAND_EXECUTION_STATUS", fn);
  *out = value;
  return KILN_OK;
}

/* Wait for one event; fn and index (SIZE_MAX: none) name it in errors. */
static kiln_status wait_one(kiln_event *event, const char *fn, size_t index) {
  char which[48] = "event";
  if (index != SIZE_MAX)
    snprintf(which, sizeof which, "events[%zu]", index);
  cl_int err = clWaitForEvents(1, &event->cl);
  /* A failed command makes clWaitForEvents return
   * CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST; the execution status says
   * how it failed, so look at it either way. */
  cl_int state = 0;
  kiln_status status = query_status(event, fn, &state);
  if (status != KILN_OK)
    return status;
  if (state < 0)
    return kiln__fail(KILN_ERR_EXEC_FAILED,
                      "%s: the command of %s failed on device '%s' with "
                      "execution status %s (%d)",
                      fn, which, event->ctx->device->info.name,
                      kiln_cl_error_name(state), (int)state);
  if (err != CL_SUCCESS)
    return kiln__fail_cl(err, "clWaitForEvents", event->ctx->device, "%s: %s",
                         fn, which);
  return KILN_OK;
}

kiln_status kiln_event_wait(kiln_event *event) {
  if (event == NULL)
    return kiln__fail(KILN_ERR_NULL_POINTER, "kiln_event_wait: event is NULL");
  return wait_one(event, "kiln_event_wait", SIZE_MAX);
}

kiln_status kiln_event_wait_all(size_t num_events, kiln_event *const *events) {
  if (num_events == 0)
    return KILN_OK;
  if (events == NULL)
    return kiln__fail(KILN_ERR_NULL_POINTER,
                      "kiln_event_wait_all: events is NULL but num_events is "
                      "%zu",
                      num_events);
  for (size_t i = 0; i < num_events; i++)
    if (events[i] == NULL)
      return kiln__fail(KILN_ERR_NULL_POINTER,
                        "kiln_event_wait_all: events[%zu] is NULL", i);
  /* One at a time: clWaitForEvents refuses events of different contexts,
   * and waiting in order costs nothing more, since the total wait is that
   * of the slowest event. Every event is waited for even after a failure,
   * so that nothing is still running when this returns. */
  kiln_status first = KILN_OK;
  char message[1024] = "";
  for (size_t i = 0; i < num_events; i++) {
    kiln_status status = wait_one(events[i], "kiln_event_wait_all", i);
    if (status != KILN_OK && first == KILN_OK) {
      first = status;
      snprintf(message, sizeof message, "%s", kiln_last_error());
    }
  }
  if (first != KILN_OK)
    return kiln__fail(first, "%s", message);
  return KILN_OK;
}

kiln_status kiln_event_get_state(kiln_event *event, kiln_event_state *out) {
  if (event == NULL)
    return kiln__fail(KILN_ERR_NULL_POINTER,
                      "kiln_event_get_state: event is NULL");
  if (out == NULL)
    return kiln__fail(KILN_ERR_NULL_POINTER,
                      "kiln_event_get_state: out is NULL");
  cl_int state = 0;
  kiln_status status = query_status(event, "kiln_event_get_state", &state);
  if (status != KILN_OK)
    return status;
  switch (state) {
  case CL_COMPLETE:
    *out = KILN_EVENT_COMPLETE;
    break;
  case CL_RUNNING:
    *out = KILN_EVENT_RUNNING;
    break;
  case CL_SUBMITTED:
    *out = KILN_EVENT_SUBMITTED;
    break;
  case CL_QUEUED:
    *out = KILN_EVENT_QUEUED;
    break;
  default:
    /* Negative values are the error the command ended with. */
    *out = KILN_EVENT_FAILED;
    break;
  }
  return KILN_OK;
}

kiln_status kiln_event_get_profiling(kiln_event *event, uint64_t *start_ns,
                                     uint64_t *end_ns) {
  if (event == NULL)
    return kiln__fail(KILN_ERR_NULL_POINTER,
                      "kiln_event_get_profiling: event is NULL");
  if (!event->profiled)
    return kiln__fail(KILN_ERR_INVALID_STATE,
                      "kiln_event_get_profiling: the event's queue was created "
                      "without KILN_QUEUE_PROFILING");
  cl_int state = 0;
  kiln_status status = query_status(event, "kiln_event_get_profiling", &state);
  if (status != KILN_OK)
    return status;
  if (state < 0)
    return kiln__fail(
        KILN_ERR_EXEC_FAILED,
        "kiln_event_get_profiling: the command failed with %s (%d); "
        "it has no timestamps",
        kiln_cl_error_name(state), (int)state);
  if (state != CL_COMPLETE)
    return kiln__fail(KILN_ERR_INVALID_STATE,
                      "kiln_event_get_profiling: the command has not completed "
                      "(state %s); wait for the event first",
                      state == CL_RUNNING     ? "running"
                      : state == CL_SUBMITTED ? "submitted"
                                              : "queued");
  cl_ulong start = 0, end = 0;
  cl_int err = clGetEventProfilingInfo(event->cl, CL_PROFILING_COMMAND_START,
                                       sizeof start, &start, NULL);
  if (err == CL_SUCCESS)
    err = clGetEventProfilingInfo(event->cl, CL_PROFILING_COMMAND_END,
                                  sizeof end, &end, NULL);
  if (err != CL_SUCCESS)
    return kiln__fail_cl(err, "clGetEventProfilingInfo", event->ctx->device,
                         "kiln_event_get_profiling");
  if (start_ns != NULL)
    *start_ns = start;
  if (end_ns != NULL)
    *end_ns = end;
  return KILN_OK;
}

kiln_event *kiln_event_retain(kiln_event *event) {
  if (event != NULL)
    atomic_fetch_add(&event->refs, 1u);
  return event;
}

void kiln_event_release(kiln_event *event) {
  if (event == NULL)
    return;
  if (atomic_fetch_sub(&event->refs, 1u) != 1u)
    return;
  kiln_context *ctx = event->ctx;
  clReleaseEvent(event->cl);
  free(event);
  kiln__context_child_removed(ctx);
}
