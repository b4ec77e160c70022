/* Events: completion of enqueued commands. Reference counted, because the
 * command that produces an event and the code waiting on it share it. */
#ifndef KILN_EVENT_H
#define KILN_EVENT_H

#if !defined(KILN_H_INSIDE) && !defined(KILN_COMPILATION)
#error "Only <kiln/kiln.h> can be included directly."
#endif

#include "kiln/kiln_common.h"

KILN_BEGIN_DECLS

typedef enum kiln_event_state {
  KILN_EVENT_COMPLETE = 0,
  KILN_EVENT_RUNNING = 1,
  KILN_EVENT_SUBMITTED = 2,
  KILN_EVENT_QUEUED = 3,
  KILN_EVENT_FAILED = -1, /* the command ended abnormally */
} kiln_event_state;

/* Block until the event's command has completed. KILN_ERR_EXEC_FAILED when it
 * ended abnormally. Thread-safe. */
KILN_API kiln_status kiln_event_wait(kiln_event *event);
/* Block until every event has completed. Events may come from different
 * contexts. Every event is waited for even after one has failed; the status
 * and last error are those of the first failure, naming its index
 * ("events[2]"). num_events 0 returns KILN_OK. Thread-safe. */
KILN_API kiln_status kiln_event_wait_all(size_t num_events,
                                         kiln_event *const *events);
/* Current state, without blocking. Thread-safe. */
KILN_API kiln_status kiln_event_get_state(kiln_event *event,
                                          kiln_event_state *out);
/* Device timestamps in nanoseconds of the command's start and end. Requires
 * a queue created with KILN_QUEUE_PROFILING (else KILN_ERR_INVALID_STATE)
 * and a completed command (else KILN_ERR_INVALID_STATE). Either out pointer
 * may be NULL. Thread-safe. */
KILN_API kiln_status kiln_event_get_profiling(kiln_event *event,
                                              uint64_t *start_ns,
                                              uint64_t *end_ns);
/* Add a reference; returns event. Thread-safe. */
KILN_API kiln_event *kiln_event_retain(kiln_event *event);
/* Drop a reference; the last one frees the event (the command itself is
 * unaffected). NULL is a no-op. Thread-safe. */
KILN_API void kiln_event_release(kiln_event *event);

KILN_END_DECLS

#endif
