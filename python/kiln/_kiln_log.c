/* kiln's log in Python: kiln_trace_diagnostic() and the bridge from
 * kiln_log_set_handler to Python's logging module (kiln.log_to_python,
 * docs/python.md, "kiln's log").
 *
 * kiln calls its handler with its log lock held, from whichever thread
 * logs: a thread running Python (an op that reports a cache problem), an
 * OpenCL driver's callback thread (an unwritable trace), and kiln's
 * exit-time destructor (KILN_TRACE_SUMMARY=1's table), which runs after
 * Py_Finalize. So the handler here never runs Python and never waits for
 * the GIL: it copies the message into a queue of its own and asks the
 * interpreter, with Py_AddPendingCall (which needs neither the GIL nor a
 * thread state), to run drain() on the main thread, which hands the
 * messages to the Python sink (kiln._log_sink -> logging.getLogger("kiln"))
 * at its next bytecode: right after the kiln call returns, when it was the
 * main thread that logged. Taking the GIL in the handler instead would
 * deadlock when a thread holding the GIL calls kiln while another sits in
 * the handler under kiln's lock waiting for the GIL, and would crash once
 * the interpreter is gone.
 *
 * Exit: the package registers log_at_exit with atexit at import, so it runs
 * in Py_FinalizeEx while the interpreter is whole. It stops scheduling,
 * replaces the handler (kiln_log_set_handler returns only when no call of
 * the old one is running: both take kiln's lock), delivers what is queued
 * and drops the sink. The replacement, when KILN_LOG, KILN_TRACE or
 * KILN_TRACE_SUMMARY is set, writes to stderr as the kiln tool does
 * (tools/cli/cli.c's handler: this package is built apart from the tool, so
 * it has its own copy), so that the summary table kiln delivers after
 * Py_Finalize still reaches the user; otherwise it is NULL (kiln keeps the
 * messages). */
#include "_kiln.h"

#include <pthread.h>

/* At most this many messages wait for the main thread; more are counted
 * and reported as dropped. */
#define LOG_QUEUE_MAX 1024

typedef struct logmsg {
  struct logmsg *next;
  int level;
  char text[];
} logmsg;

/* Under qlock. */
static pthread_mutex_t qlock = PTHREAD_MUTEX_INITIALIZER;
static logmsg *qhead, *qtail;
static size_t queued;
static unsigned long dropped;
static int live;      /* the bridge is installed and Python may be asked */
static int scheduled; /* drain is pending with the interpreter */

/* Under the GIL: the Python callable sink(level, text), or NULL, and
 * whether log_at_exit ran (the bridge then stays off). */
static PyObject *sink;
static int exited;

static int drain(void *unused);

/* A second guard beside live (which log_at_exit clears before Py_FinalizeEx
 * tears anything down): reads of the runtime's static flags, safe from any
 * thread and after finalisation, false once it has begun. */
static int interpreter_running(void) {
#if PY_VERSION_HEX >= 0x030D0000
  return Py_IsInitialized() && !Py_IsFinalizing();
#else
  return Py_IsInitialized() && !_Py_IsFinalizing();
#endif
}

/* kiln's handler: queue the message, schedule drain. Any thread, with
 * kiln's log lock held; no Python. */
static void log_to_queue(kiln_log_level level, const char *message, void *data) {
  (void)data;
  size_t n = strlen(message);
  logmsg *m = malloc(sizeof *m + n + 1);
  if (m != NULL) {
    m->next = NULL;
    m->level = (int)level;
    memcpy(m->text, message, n + 1);
  }
  pthread_mutex_lock(&qlock);
  if (m == NULL || queued >= LOG_QUEUE_MAX) {
    dropped++;
    free(m);
  } else {
    if (qtail != NULL)
      qtail->next = m;
    else
      qhead = m;
    qtail = m;
    queued++;
  }
  if (live && !scheduled && interpreter_running() && Py_AddPendingCall(drain, NULL) == 0)
    scheduled = 1;
  pthread_mutex_unlock(&qlock);
}

/* Hand the queued messages to the sink, oldest first (then a line for any
 * dropped). The GIL is held: a pending call on the main thread, or a call
 * from Python. Returns 0 always: a pending call that failed would raise
 * into whatever Python code it interrupted, so the sink's exceptions are
 * reported as unraisable (sys.unraisablehook) instead. */
static int drain(void *unused) {
  (void)unused;
  pthread_mutex_lock(&qlock);
  logmsg *m = qhead;
  unsigned long lost = dropped;
  qhead = qtail = NULL;
  queued = 0;
  dropped = 0;
  scheduled = 0;
  pthread_mutex_unlock(&qlock);
  /* The exception being handled, if drain interrupted an except block. */
  PyObject *type, *value, *trace;
  PyErr_Fetch(&type, &value, &trace);
  while (m != NULL) {
    logmsg *next = m->next;
    if (sink != NULL) {
      PyObject *r = PyObject_CallFunction(sink, "is", m->level, m->text);
      if (r == NULL)
        PyErr_WriteUnraisable(sink);
      Py_XDECREF(r);
    }
    free(m);
    m = next;
  }
  if (lost > 0 && sink != NULL) {
    char line[160];
    snprintf(line, sizeof line,
             "%lu messages of kiln's log were dropped: more than %d waited "
             "for Python's main thread",
             lost, LOG_QUEUE_MAX);
    PyObject *r = PyObject_CallFunction(sink, "is", (int)KILN_LOG_WARN, line);
    if (r == NULL)
      PyErr_WriteUnraisable(sink);
    Py_XDECREF(r);
  }
  PyErr_Restore(type, value, trace);
  return 0;
}

/* The handler after Python's exit: stderr, as the kiln tool writes. */
static void log_to_stderr(kiln_log_level level, const char *message, void *data) {
  static const char *const word[] = {"", "error", "warning", "info", "debug"};
  (void)data;
  if (strchr(message, '\n') != NULL || level < KILN_LOG_ERROR || level > KILN_LOG_DEBUG)
    fprintf(stderr, "kiln: %s\n", message);
  else
    fprintf(stderr, "kiln: %s: %s\n", word[level], message);
  fflush(stderr);
}

/* Whether the environment asks for kiln's output (the kiln tool's rule). */
static int output_asked(void) {
  static const char *const asked[] = {"KILN_LOG", "KILN_TRACE", "KILN_TRACE_SUMMARY"};
  for (size_t i = 0; i < sizeof asked / sizeof asked[0]; i++) {
    const char *v = getenv(asked[i]);
    if (v != NULL && v[0] != '\0')
      return 1;
  }
  return 0;
}

/* Turn the bridge off: kiln gets replacement as its handler, the queue is
 * delivered, the sink dropped. */
static void bridge_off(kiln_log_fn replacement) {
  pthread_mutex_lock(&qlock);
  live = 0;
  pthread_mutex_unlock(&qlock);
  /* No call of log_to_queue runs once this returns (kiln's lock); none
   * waits for the GIL, so holding it here cannot deadlock. */
  kiln_log_set_handler(replacement, NULL);
  drain(NULL);
  Py_CLEAR(sink);
}

/* _log_bridge(sink): install the bridge with sink(level, text), or turn it
 * off with None. Returns whether it was on. */
static PyObject *mod_log_bridge(PyObject *self, PyObject *arg) {
  (void)self;
  if (arg != Py_None && !PyCallable_Check(arg)) {
    PyErr_SetString(PyExc_TypeError, "_log_bridge: sink must be callable or None");
    return NULL;
  }
  int was = sink != NULL;
  if (arg == Py_None) {
    if (was)
      bridge_off(NULL);
    return PyBool_FromLong(was);
  }
  if (exited)
    return PyBool_FromLong(was);
  Py_INCREF(arg);
  Py_XSETREF(sink, arg);
  pthread_mutex_lock(&qlock);
  live = 1;
  pthread_mutex_unlock(&qlock);
  kiln_log_set_handler(log_to_queue, NULL);
  return PyBool_FromLong(was);
}

/* _log_at_exit(): registered with atexit by the package (see the top). */
static PyObject *mod_log_at_exit(PyObject *self, PyObject *unused) {
  (void)self;
  (void)unused;
  exited = 1;
  if (sink != NULL)
    bridge_off(output_asked() ? log_to_stderr : NULL);
  Py_RETURN_NONE;
}

/* _log_flush(): deliver the queued messages now (drain). */
static PyObject *mod_log_flush(PyObject *self, PyObject *unused) {
  (void)self;
  (void)unused;
  drain(NULL);
  Py_RETURN_NONE;
}

static PyObject *mod_trace_diagnostic(PyObject *self, PyObject *unused) {
  (void)self;
  (void)unused;
  const char *text = kiln_trace_diagnostic();
  return PyUnicode_DecodeUTF8(text, (Py_ssize_t)strlen(text), "replace");
}

PyMethodDef log_functions[] = {
    {"trace_diagnostic", mod_trace_diagnostic, METH_NOARGS,
     "kiln_trace_diagnostic(): what kiln's trace and log said that nobody received."},
    {"_log_bridge", mod_log_bridge, METH_O,
     "Install the log bridge with sink(level, text), or remove it (None); "
     "returns whether it was on."},
    {"_log_at_exit", mod_log_at_exit, METH_NOARGS,
     "Remove the log bridge for good (atexit)."},
    {"_log_flush", mod_log_flush, METH_NOARGS, "Deliver the queued log messages now."},
    {0}};
