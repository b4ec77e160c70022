/* KILN_LOG: diagnostics that kiln otherwise keeps to its status messages,
 * at or above the level asked for: off, error, warn, info, debug (or 0 to
 * 4).
 *
 * kiln never prints (docs/conventions.md, Errors): a message goes to the
 * application's handler (kiln_log_set_handler), which decides where it is
 * shown; the kiln tool and the examples install one that writes "kiln:
 * warning: ..." lines to stderr. Without a handler a message is kept, not
 * written: the last KILN__LOG_KEPT (4) of them stay readable through
 * kiln_trace_diagnostic(), oldest first, each after its level's word
 * ("warning: ..."); older ones are dropped. A ring rather than the last
 * message alone, because the message that explains a failure (an unusable
 * cache, a skipped tuning file) is often followed by a less telling one.
 *
 * The level: with KILN_LOG unset it is off, except that KILN_TRACE or
 * KILN_TRACE_SUMMARY (a request for output) makes it warn, so that a trace
 * that cannot be written says so once instead of failing silently; so does
 * a handler (the application asked for the messages). A value kiln does not
 * know counts as warn and is itself reported once. */
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

/* The messages kept without a handler (under lock): a ring of the last
 * KEPT, kept_total counting every one ever kept. */
#define KEPT KILN__LOG_KEPT
static struct {
  int level;
  char text[KILN__LOG_KEPT_CHARS];
} kept[KEPT];
static unsigned long kept_total;

static const char *const names[] = {"off", "error", "warn", "info", "debug"};
/* The word before a message: "warning: ...". */
static const char *const words[] = {"", "error", "warning", "info", "debug"};

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

/* Deliver one message: to the handler, else into the ring of kept
 * messages. Called with lock held. */
static void deliver(int at, const char *text) {
  if (handler != NULL) {
    handler((kiln_log_level)at, text, handler_data);
    return;
  }
  unsigned long slot = kept_total++ % KEPT;
  kept[slot].level = at;
  /* Cut to the slot on purpose (the precision says so to the compiler). */
  snprintf(kept[slot].text, sizeof kept[slot].text, "%.*s",
           (int)sizeof kept[slot].text - 1, text);
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
  deliver(KILN__LOG_WARN, line);
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
  deliver(at, line);
  pthread_mutex_unlock(&lock);
}

bool kiln__log_report(const char *text) {
  pthread_once(&once, read_env);
  pthread_mutex_lock(&lock);
  bool delivered = handler != NULL;
  if (delivered)
    handler(KILN_LOG_INFO, text, handler_data);
  pthread_mutex_unlock(&lock);
  return delivered;
}

size_t kiln__log_kept(char *out, size_t cap, const char *skip) {
  pthread_mutex_lock(&lock);
  size_t used = strnlen(out, cap);
  unsigned long first = kept_total > KEPT ? kept_total - KEPT : 0;
  for (unsigned long i = first; i < kept_total && used + 1 < cap; i++) {
    const char *text = kept[i % KEPT].text;
    if (skip != NULL && strcmp(text, skip) == 0)
      continue;
    int n = snprintf(out + used, cap - used, "%s%s: %s", used > 0 ? "\n" : "",
                     words[kept[i % KEPT].level], text);
    used = n < 0 ? used : used + (size_t)n >= cap ? cap - 1 : used + (size_t)n;
  }
  pthread_mutex_unlock(&lock);
  return used;
}
