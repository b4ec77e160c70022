/* The child of the trace and log tests (test_trace.c, test_log.c): the test
 * binary run again with --child MODE, whose main() calls child_main. */
#ifndef KILN_TRACE_CHILD_H
#define KILN_TRACE_CHILD_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/internal.h"
#include "harness.h"

/* The "handler" child's log handler: each message, with its level, as a
 * line of the file KILN_TEST_LOG_FILE names. */
static inline void record_message(kiln_log_level level, const char *message,
                                  void *user_data) {
  fprintf(user_data, "level %d: %s\n", (int)level, message);
  fflush(user_data);
}

/* The child's work: one op on the test device. MODE "run" exits; "report"
 * also prints kiln_trace_diagnostic(); "hold" writes "ready" to stdout once
 * its event is in the file, then waits to be killed; "handler" installs
 * record_message first and reports; "ring" logs six warnings ("message 1"
 * to "message 6") before the op and reports. */
static inline int child_main(const char *mode) {
  if (strcmp(mode, "handler") == 0) {
    FILE *log = fopen(getenv("KILN_TEST_LOG_FILE"), "w");
    if (log == NULL)
      return 1;
    kiln_log_set_handler(record_message, log);
  }
  if (strcmp(mode, "ring") == 0)
    for (int i = 1; i <= 6; i++)
      kiln__log(KILN__LOG_WARN, "message %d", i);
  kiln_context *ctx = NULL;
  kiln_queue *q = NULL;
  kiln_buffer *x = NULL;
  kiln_status s = kiln_context_create_default(getenv("KILN_TEST_DEVICE"), &ctx);
  if (s == KILN_OK)
    s = kiln_queue_create(ctx, 0, &q);
  if (s == KILN_OK)
    s = kiln_buffer_create(ctx, 4096, 0, &x);
  if (s == KILN_OK)
    s = kiln_fill(q, range_of(x, 0, 1024, KILN_F32), &(float){1.0f}, 0, NULL,
                  NULL);
  if (s == KILN_OK)
    s = kiln_queue_finish(q);
  if (s != KILN_OK) {
    fprintf(stderr, "child: %s\n", kiln_last_error());
    return 1;
  }
  /* The event is written by a completion callback: give it a moment. */
  struct timespec settle = {0, 200 * 1000 * 1000};
  nanosleep(&settle, NULL);
  if (strcmp(mode, "run") != 0 && strcmp(mode, "hold") != 0)
    printf("diagnostic: %s\n", kiln_trace_diagnostic());
  if (strcmp(mode, "hold") == 0) {
    printf("ready\n");
    fflush(stdout);
    for (;;)
      pause();
  }
  kiln_buffer_destroy(x);
  kiln_queue_destroy(q);
  kiln_context_destroy(ctx);
  return 0;
}

#endif
