/* KILN_LOG: diagnostics that kiln otherwise keeps to its status messages,
 * at or above the level asked for: off, error, warn, info, debug (or 0 to
 * 4). Each goes to the application's handler (kiln_log_set_handler), else
 * to stderr as one line ("kiln: warning: ...").
 *
 * The library prints nothing by itself: with KILN_LOG unset the level is
 * off, except that KILN_TRACE or KILN_TRACE_SUMMARY (a request for output)
 * makes it warn, so that a trace that cannot be written says so once
 * instead of failing silently; so does a handler (the application asked
 * for the messages). A value kiln does not know counts as warn and is
 * itself reported once. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "internal.h"

static pthread_once_t once = PTHREAD_ONCE_INIT;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static atomic_int level;    /* messages at or below this are delivered */
static int env_level = -1;  /* KILN_LOG's, or -1 when it is unset */
static int default_level;   /* without KILN_LOG or a handler */
static const char *unknown; /* a KILN_LOG value not understood */
static kiln_log_fn handler; /* under lock */
static void *handler_data;

static const char *const names[] = {"off", "error", "warn", "info", "debug"};

static bool set(const char *v) {
  return v != NULL && v[0] != '\0';
}

static int parse_level(const char *v) {
  for (int i = 0; i <= KILN__LOG_DEBUG; i++)
    if (strcasecmp(v, names[i]) == 0 ||
        (v[0] == (char)('0' + i) && v[1] == '\0'))
      return i;
  if (strcasecmp(v, "warning") != 0)
    unknown = v;
  return KILN__LOG_WARN;
}

static void read_env(void) {
  const char *v = getenv("KILN_LOG");
  default_level = set(getenv("KILN_TRACE")) || set(getenv("KILN_TRACE_SUMMARY"))
                      ? KILN__LOG_WARN
                      : 0;
  if (set(v))
    env_level = parse_level(v);
  atomic_store(&level, env_level >= 0 ? env_level : default_level);
}

KILN_API void kiln_log_set_handler(kiln_log_fn fn, void *user_data) {
  pthread_once(&once, read_env);
  pthread_mutex_lock(&lock);
  handler = fn;
  handler_data = user_data;
  atomic_store(&level, env_level >= 0 ? env_level
                       : fn != NULL   ? KILN__LOG_WARN
                                      : default_level);
  pthread_mutex_unlock(&lock);
}

bool kiln__log_enabled(int at) {
  pthread_once(&once, read_env);
  return at <= atomic_load(&level);
}

/* Deliver one message: to the handler, else to stderr (after "kiln: " and
 * the level's word unless plain). Called with lock held. */
static void deliver(int at, const char *text, bool plain) {
  if (handler != NULL) {
    handler((kiln_log_level)at, text, handler_data);
    return;
  }
  if (plain)
    fprintf(stderr, "kiln: %s\n", text);
  else
    fprintf(stderr, "kiln: %s: %s\n", at == KILN__LOG_ERROR  ? "error"
                                      : at == KILN__LOG_WARN ? "warning"
                                      : at == KILN__LOG_INFO ? "info"
                                                             : "debug",
            text);
  fflush(stderr);
}

/* The unknown KILN_LOG value, once. Called with lock held. */
static void report_unknown(void) {
  if (unknown == NULL)
    return;
  char line[256];
  snprintf(line, sizeof line,
           "KILN_LOG=%.100s is not off, error, warn, info or debug; using "
           "warn",
           unknown);
  unknown = NULL;
  deliver(KILN__LOG_WARN, line, false);
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
  report_unknown();
  deliver(at, line, false);
  pthread_mutex_unlock(&lock);
}

void kiln__log_report(const char *text) {
  pthread_once(&once, read_env);
  pthread_mutex_lock(&lock);
  deliver(KILN__LOG_INFO, text, true);
  pthread_mutex_unlock(&lock);
}
