/* In-order command queues. Everything that enqueues work takes a wait list
 * (num_wait events, which must belong to the queue's context) and an optional
 * out_event (NULL when the caller does not want one). */
#ifndef KILN_QUEUE_H
#define KILN_QUEUE_H

#if !defined(KILN_H_INSIDE) && !defined(KILN_COMPILATION)
#error "Only <kiln/kiln.h> can be included directly."
#endif

#include "kiln/kiln_common.h"

KILN_BEGIN_DECLS

enum {
  /* Record start and end times on the events of this queue
   * (kiln_event_get_profiling). Forced on for every queue while the environment
   * variable KILN_TRACE is set and not empty, because op tracing reads those
   * times. */
  KILN_QUEUE_PROFILING = 1u << 0,
};

/* Create an in-order queue on ctx. flags: KILN_QUEUE_*. Thread-safe. */
KILN_API kiln_status kiln_queue_create(kiln_context *ctx, unsigned flags,
                                       kiln_queue **out);

/* Destroy a queue. Work still pending on it is not cancelled: destroy first
 * waits until every command enqueued on the queue has completed (as
 * kiln_queue_finish), then frees the queue whatever the wait returned, and
 * returns the status of that wait. Events obtained from the queue stay valid
 * until released, and other threads may go on waiting on them. NULL is a
 * no-op. */
KILN_API kiln_status kiln_queue_destroy(kiln_queue *queue);

/* Submit enqueued commands to the device without waiting. (Under Oclgrind,
 * whose clFlush runs the queue to completion, this blocks like finish.) */
KILN_API kiln_status kiln_queue_flush(kiln_queue *queue);
/* Block until every command enqueued so far has completed. Fails only when
 * the wait itself fails: a command that ended abnormally is reported by its
 * event (kiln_event_wait, KILN_ERR_EXEC_FAILED), not here, because drivers
 * do not report it through clFinish (PoCL 3.1, rusticl and Oclgrind all
 * return success). */
KILN_API kiln_status kiln_queue_finish(kiln_queue *queue);

/* Enqueue a marker that completes when the wait list (or, with an empty wait
 * list, every command enqueued before it) has completed. */
KILN_API kiln_status kiln_queue_marker(kiln_queue *queue, size_t num_wait,
                                       kiln_event *const *wait_list,
                                       kiln_event **out_event);

/* The context the queue belongs to. Borrowed. */
KILN_API kiln_context *kiln_queue_get_context(const kiln_queue *queue);

KILN_END_DECLS

#endif
