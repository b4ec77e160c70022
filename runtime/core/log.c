/* KILN_LOG: diagnostics that kiln otherwise keeps to its status messages,
 * written to stderr, one line each ("kiln: warning: ..."), at or above
 * the level asked for: off, error, warn, info, debug (or 0 to 4).
 *
 * kiln prints nothing unless an environment variable asks for output: with
 * KILN_LOG unset the level is off, except that KILN_TRACE or
 * KILN_TRACE_SUMMARY (a request for output) makes it warn, so that a trace
 * that cannot be written says so once instead of failing silently. A value
 * kiln does not know counts as warn and is itself reported once. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "internal.h"

static pthread_once_t once = PTHREAD_ONCE_INIT;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static int level;           /* messages at or below this are written */
static const char *unknown; /* a KILN_LOG value not understood */

static const char *const names[] = {"off", "error", "warn", "info", "debug"};

static bool set(const char *v) {
  return v != NULL && v[0] != '\0';
}

static void read_env(void) {
  const char *v = getenv("KILN_LOG");
  level = set(getenv("KILN_TRACE")) || set(getenv("KILN_TRACE_SUMMARY"))
              ? KILN__LOG_WARN
              : 0;
  if (!set(v))
    return;
  for (int i = 0; i <= KILN__LOG_DEBUG; i++)
    if (strcasecmp(v, names[i]) == 0 ||
        (v[0] == (char)('0' + i) && v[1] == '\0')) {
      level = i;
      return;
    }
  if (strcasecmp(v, "warning") == 0) {
    level = KILN__LOG_WARN;
    return;
  }
  level = KILN__LOG_WARN;
  unknown = v;
}

bool kiln__log_enabled(int at) {
  pthread_once(&once, read_env);
  return at <= level;
}

void kiln__log(int at, const char *fmt, ...) {
  if (!kiln__log_enabled(at))
    return;
  char line[2048];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(line, sizeof line, fmt, ap);
  va_end(ap);
  pthread_mutex_lock(&lock);
  if (unknown != NULL) {
    fprintf(stderr,
            "kiln: warning: KILN_LOG=%.100s is not off, error, warn, info or "
            "debug; using warn\n",
            unknown);
    unknown = NULL;
  }
  fprintf(stderr, "kiln: %s: %s\n", at == KILN__LOG_ERROR  ? "error"
                                    : at == KILN__LOG_WARN ? "warning"
                                    : at == KILN__LOG_INFO ? "info"
                                                           : "debug",
          line);
  fflush(stderr);
  pthread_mutex_unlock(&lock);
}
