/* log_stderr.h: kiln's log on stderr, for the examples (one call at the
 * top of main; copy this file along with an example).
 *
 * kiln itself never prints: its diagnostics (KILN_LOG, an unwritable
 * KILN_TRACE, the KILN_TRACE_SUMMARY=1 table at exit) go to a handler the
 * program installs with kiln_log_set_handler, else they are only kept for
 * kiln_trace_diagnostic(). This one writes them to stderr as the kiln tool
 * does: "kiln: warning: TEXT", and a message of several lines (the summary
 * table) after "kiln: " alone. It is installed only when one of those
 * variables is set, so that an unset environment stays silent (a handler
 * alone would turn warnings on). */
#ifndef KILN_EXAMPLES_LOG_STDERR_H
#define KILN_EXAMPLES_LOG_STDERR_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <kiln/kiln.h>

static void log_stderr_line(kiln_log_level level, const char *message,
                            void *user_data) {
  static const char *const word[] = {"", "error", "warning", "info", "debug"};
  (void)user_data;
  if (strchr(message, '\n') != NULL || level < KILN_LOG_ERROR ||
      level > KILN_LOG_DEBUG)
    fprintf(stderr, "kiln: %s\n", message);
  else
    fprintf(stderr, "kiln: %s: %s\n", word[level], message);
  fflush(stderr);
}

static inline void log_to_stderr(void) {
  static const char *const asked[] = {"KILN_LOG", "KILN_TRACE",
                                      "KILN_TRACE_SUMMARY"};
  for (int i = 0; i < 3; i++) {
    const char *v = getenv(asked[i]);
    if (v != NULL && v[0] != '\0') {
      kiln_log_set_handler(log_stderr_line, NULL);
      return;
    }
  }
}

#endif
