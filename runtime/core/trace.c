/* KILN_TRACE=path.json writes one Chrome trace-event ("ph":"X", a complete
 * event) per traced piece of work, which Perfetto and chrome://tracing open:
 * every op ("kiln.op"), every user-kernel launch ("kiln.kernel"), every
 * buffer read, write, copy and fill ("kiln.transfer"), and every program
 * build ("kiln.build", on a lane of its own, timed on the host). The rooms
 * that enqueue the work describe it (a name and a JSON object of
 * arguments); this module times it and writes it.
 *
 * Design choices, and why:
 * - Commands are asynchronous, so their times are known only when the last
 *   one completes. Each traced command group registers a completion
 *   callback (clSetEventCallback) on its last command and the callback
 *   writes the event. No sync point is needed, and work the program never
 *   waits for is still recorded once it runs. The order of events in the
 *   file is the order of completion; viewers sort by "ts" anyway.
 * - Times come from queue profiling (start of the first command, end of the
 *   last) when the queue has it (queue.c enables profiling when KILN_TRACE
 *   is set); otherwise from the host clock, from the enqueue to the
 *   callback, marked "timing":"host" in the event's args.
 * - The file is always a complete JSON array: each event is written followed
 *   by "\n]\n" and flushed, and the next event first seeks back over that
 *   closing bracket. A program interrupted between events (even killed), or
 *   one that never tears kiln down, leaves a file any JSON parser reads; no
 *   atexit handler is needed, which could misbehave when kiln is embedded
 *   and unloaded. When the path is not seekable (a pipe), events are
 *   streamed without the closing bracket, which the trace-event format
 *   explicitly tolerates.
 * - Callbacks arrive on driver threads, concurrently: one mutex guards the
 *   file, and encoding (jansson) happens under it.
 * - One file per process: "%p" in KILN_TRACE becomes the process id. The
 *   file is opened at the first event and locked (flock) before it is
 *   truncated, so a second process given the same path writes nothing and
 *   says why once, through kiln_trace_diagnostic(), instead of two writers
 *   interleaving into a corrupt file.
 * - KILN_TRACE_SUMMARY (with or without KILN_TRACE) adds every event to a
 *   table of totals by category and name (calls, time, bytes, flops) that
 *   a destructor delivers when the process exits (or kiln is unloaded):
 *   which ops and kernels ran for how long, without Perfetto. The table's
 *   code (trace_table.c) is shared with `kiln trace summarize`, which
 *   builds the same table from a trace file. kiln never prints, so where
 *   the table goes is the variable's value: 1 (on, yes, true) delivers it
 *   to the application's log handler (kiln_log_set_handler; the kiln tool's
 *   and the examples' write it to stderr), and nowhere without one; any
 *   other value but 0, off, no and false is a path ("%p" expanded as in
 *   KILN_TRACE) that the table is written to, replacing the file, as
 *   KILN_TRACE writes its trace: a file the user named. A path that cannot
 *   be written is reported through the log.
 * Tracing never fails the work it records: problems only stop the trace and
 * become the diagnostic. */
#include "internal.h"
#include "trace_table.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

static pthread_once_t env_once = PTHREAD_ONCE_INIT;
static pthread_mutex_t trace_lock = PTHREAD_MUTEX_INITIALIZER;
static char *trace_path;   /* from KILN_TRACE with %p expanded, read once */
static FILE *trace_file;   /* opened at the first event */
static bool trace_broken;  /* opening failed: stop trying */
static bool trace_seekable;
static unsigned long trace_events;
static char trace_problem[512]; /* why nothing is written ("" when fine) */

/* Lanes ("tid"): one per queue seen, each with a thread_name record, and
 * lane 0 for work timed on the host (program builds). A queue address
 * reused after a destroy keeps the old lane, which is harmless. */
#define TRACE_LANES 256
static const void *trace_lanes[TRACE_LANES];
static unsigned trace_lane_count;
static bool host_lane_named;

static const char closing[] = "\n]\n";

/* KILN_TRACE_SUMMARY's table (trace_table.h), under trace_lock, and the
 * file it goes to (NULL: the log handler). */
static bool summary_on;
static char *summary_path;
static kiln__trace_table summary;

/* KILN_TRACE with every "%p" replaced by the process id and "%%" by "%". */
static char *expand_path(const char *pattern) {
  char pid[32];
  snprintf(pid, sizeof pid, "%ld", (long)getpid());
  size_t cap = strlen(pattern) * sizeof pid + 1, used = 0;
  char *out = malloc(cap);
  if (out == NULL)
    return NULL;
  for (const char *p = pattern; *p != '\0'; p++) {
    if (p[0] == '%' && p[1] == 'p') {
      memcpy(out + used, pid, strlen(pid));
      used += strlen(pid);
      p++;
    } else if (p[0] == '%' && p[1] == '%') {
      out[used++] = '%';
      p++;
    } else {
      out[used++] = *p;
    }
  }
  out[used] = '\0';
  return out;
}

/* Whether v is one of the words in list (case aside). */
static bool one_of(const char *v, const char *const *list, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (strcasecmp(v, list[i]) == 0)
      return true;
  return false;
}

static void read_env(void) {
  const char *p = getenv("KILN_TRACE");
  if (p != NULL && p[0] != '\0')
    trace_path = expand_path(p);
  static const char *const no[] = {"0", "off", "no", "false"};
  static const char *const yes[] = {"1", "on", "yes", "true"};
  const char *s = getenv("KILN_TRACE_SUMMARY");
  summary_on = s != NULL && s[0] != '\0' && !one_of(s, no, 4);
  if (summary_on && !one_of(s, yes, 4)) {
    summary_path = expand_path(s);
    summary_on = summary_path != NULL;
  }
}

bool kiln__trace_enabled(void) {
  pthread_once(&env_once, read_env);
  return trace_path != NULL || summary_on;
}

/* Write text and a newline to KILN_TRACE_SUMMARY's file, replacing it;
 * a failure goes to the log. Called with trace_lock held. */
static void write_summary_file(const char *text) {
  char why[128];
  int fd = kiln__open_output(summary_path, O_CREAT | O_TRUNC, why, sizeof why);
  FILE *f = fd < 0 ? NULL : fdopen(fd, "w");
  if (fd >= 0 && f == NULL) {
    snprintf(why, sizeof why, "%s", strerror(errno));
    close(fd);
  }
  if (f != NULL) {
    bool ok = fputs(text, f) >= 0 && fputs("\n", f) >= 0;
    if (!ok)
      snprintf(why, sizeof why, "%s", strerror(errno));
    if (fclose(f) != 0 && ok) {
      ok = false;
      snprintf(why, sizeof why, "%s", strerror(errno));
    }
    if (ok)
      return;
  }
  kiln__log(KILN__LOG_WARN,
            "KILN_TRACE_SUMMARY: cannot write '%s': %s; no summary is written",
            summary_path, why);
}

/* KILN_TRACE_SUMMARY's table, 80 columns, longest total first: to the file
 * it names, else to the log handler (none: nowhere, kiln never prints). */
__attribute__((destructor)) static void deliver_summary(void) {
  if (!summary_on)
    return;
  pthread_mutex_lock(&trace_lock);
  char *text = NULL;
  size_t size = 0;
  FILE *out = open_memstream(&text, &size);
  if (out != NULL) {
    fprintf(out, "trace summary of process %ld: ", (long)getpid());
    kiln__trace_table_print(&summary, out, 80);
    if (fclose(out) == 0 && text != NULL) {
      if (size > 0 && text[size - 1] == '\n')
        text[size - 1] = '\0';
      if (summary_path != NULL)
        write_summary_file(text);
      else
        kiln__log_report(text);
    }
    free(text);
  }
  kiln__trace_table_free(&summary);
  pthread_mutex_unlock(&trace_lock);
}

KILN_API const char *kiln_trace_diagnostic(void) {
  /* The trace's problem, then the log's kept messages but the one that
   * repeats it (kiln__log_kept: KILN__LOG_KEPT lines at most). */
  static _Thread_local char
      copy[sizeof trace_problem +
           KILN__LOG_KEPT * (KILN__LOG_KEPT_CHARS + 16)];
  char problem[sizeof trace_problem];
  pthread_mutex_lock(&trace_lock);
  memcpy(problem, trace_problem, sizeof problem);
  pthread_mutex_unlock(&trace_lock);
  memcpy(copy, problem, sizeof problem);
  kiln__log_kept(copy, sizeof copy, problem[0] != '\0' ? problem : NULL);
  return copy;
}

/* Open, lock and truncate the trace file. Called with trace_lock held. The
 * file is opened without truncation and truncated only once this process
 * holds the lock, so a second process on the same path neither clobbers
 * the first one's events nor interleaves its own with them. */
static bool open_file(void) {
  if (trace_file != NULL)
    return true;
  if (trace_broken)
    return false;
  trace_broken = true; /* until everything below succeeded */
  /* Never blocks in open(2): a FIFO that no process reads is refused. */
  char why[128];
  int fd = kiln__open_output(trace_path, O_CREAT, why, sizeof why);
  if (fd < 0) {
    snprintf(trace_problem, sizeof trace_problem,
             "KILN_TRACE: cannot open '%s': %s; no trace is written",
             trace_path, why);
    kiln__log(KILN__LOG_WARN, "%s", trace_problem);
    return false;
  }
  if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
    snprintf(trace_problem, sizeof trace_problem,
             "KILN_TRACE: '%s' is being written by another process; this "
             "process (%ld) writes no trace (put %%p in KILN_TRACE for one "
             "file per process)",
             trace_path, (long)getpid());
    kiln__log(KILN__LOG_WARN, "%s", trace_problem);
    close(fd);
    return false;
  }
  FILE *f = ftruncate(fd, 0) == 0 ? fdopen(fd, "w") : NULL;
  if (f == NULL) {
    snprintf(trace_problem, sizeof trace_problem,
             "KILN_TRACE: cannot write '%s': %s; no trace is written",
             trace_path, strerror(errno));
    kiln__log(KILN__LOG_WARN, "%s", trace_problem);
    close(fd);
    return false;
  }
  struct stat st;
  trace_seekable = fstat(fd, &st) == 0 && S_ISREG(st.st_mode);
  trace_file = f;
  trace_broken = false;
  return true;
}

/* Append one JSON value as an array element. Called with trace_lock held. */
static void append(json_t *value) {
  /* 15 digits keep nanoseconds in "ts" (microseconds since the device
   * clock's epoch) without the noise of %.17g. */
  char *text = json_dumps(value, JSON_COMPACT | JSON_REAL_PRECISION(15));
  if (text == NULL)
    return;
  if (trace_events == 0) {
    fputs("[\n", trace_file);
  } else if (trace_seekable &&
             fseek(trace_file, -(long)(sizeof closing - 1), SEEK_END) == 0) {
    fputs(",\n", trace_file);
  } else {
    trace_seekable = false;
    fputs(",\n", trace_file);
  }
  fputs(text, trace_file);
  if (trace_seekable)
    fputs(closing, trace_file);
  fflush(trace_file);
  trace_events++;
  free(text);
}

/* A thread_name metadata record for lane tid. Called with trace_lock held. */
static void name_lane(int tid, const char *label) {
  json_t *meta = json_pack("{s:s, s:s, s:i, s:i, s:{s:s}}", "name",
                           "thread_name", "ph", "M", "pid", (int)getpid(),
                           "tid", tid, "args", "name", label);
  if (meta != NULL) {
    append(meta);
    json_decref(meta);
  }
}

/* The lane of queue, or of the host for NULL; names it the first time.
 * Called with trace_lock held. */
static int lane_of(const void *queue, const char *device) {
  if (queue == NULL) {
    if (!host_lane_named)
      name_lane(0, "host: program builds");
    host_lane_named = true;
    return 0;
  }
  for (unsigned i = 0; i < trace_lane_count; i++)
    if (trace_lanes[i] == queue)
      return (int)i + 1;
  if (trace_lane_count == TRACE_LANES)
    return TRACE_LANES + 1; /* an overflow lane shared by the rest */
  trace_lanes[trace_lane_count++] = queue;
  int tid = (int)trace_lane_count;
  char label[192];
  snprintf(label, sizeof label, "queue %d on %s", tid, device);
  name_lane(tid, label);
  return tid;
}

static json_t *rate(double amount, double ns) {
  /* amount per nanosecond = giga-amount per second. */
  return ns > 0 ? json_real(amount / ns) : json_null();
}

/* Write one complete event: args gets "device", "timing", and "gbps" and
 * "gflops" where it holds "bytes" and "flops"; takes over args. */
static void write_event(const char *cat, const char *name, const void *lane,
                        const char *device, json_t *args, uint64_t start,
                        uint64_t end, bool device_time) {
  double dur_ns = (double)(end - start);
  json_object_set_new(args, "device", json_string(device));
  json_t *bytes = json_object_get(args, "bytes");
  if (json_is_number(bytes))
    json_object_set_new(args, "gbps", rate(json_number_value(bytes), dur_ns));
  json_t *flops = json_object_get(args, "flops");
  if (json_is_number(flops))
    json_object_set_new(args, "gflops", rate(json_number_value(flops), dur_ns));
  json_object_set_new(args, "timing",
                      json_string(device_time ? "device" : "host"));

  pthread_mutex_lock(&trace_lock);
  if (summary_on)
    kiln__trace_table_add(&summary, cat, name, dur_ns, args);
  if (trace_path != NULL && open_file()) {
    int tid = lane_of(lane, device);
    json_t *ev = json_object();
    if (ev != NULL) {
      json_object_set_new(ev, "name", json_string(name));
      json_object_set_new(ev, "cat", json_string(cat));
      json_object_set_new(ev, "ph", json_string("X"));
      json_object_set_new(ev, "ts", json_real((double)start / 1000.0));
      json_object_set_new(ev, "dur", json_real(dur_ns / 1000.0));
      json_object_set_new(ev, "pid", json_integer(getpid()));
      json_object_set_new(ev, "tid", json_integer(tid));
      json_object_set(ev, "args", args);
      append(ev);
      json_decref(ev);
    }
  }
  pthread_mutex_unlock(&trace_lock);
  json_decref(args);
}

/* What the completion callback needs, copied: the queue may be destroyed
 * before it runs. Lanes are keyed by the OpenCL queue, so that objects
 * holding only that (a staging ring) trace on their kiln queue's lane. */
struct trace_record {
  cl_event first, last;
  const char *cat;
  char name[128];
  const void *queue;
  char device[128];
  json_t *args;
  uint64_t host_ns;
};

static void CL_CALLBACK on_complete(cl_event ev, cl_int exec_status,
                                    void *user) {
  (void)ev;
  struct trace_record *r = user;
  cl_ulong start = 0, end = 0;
  bool device_time =
      clGetEventProfilingInfo(r->first, CL_PROFILING_COMMAND_START,
                              sizeof start, &start, NULL) == CL_SUCCESS &&
      clGetEventProfilingInfo(r->last, CL_PROFILING_COMMAND_END, sizeof end,
                              &end, NULL) == CL_SUCCESS &&
      end >= start && start != 0;
  if (!device_time) {
    start = r->host_ns;
    end = kiln__now_ns();
  }
  json_object_set_new(r->args, "status",
                      json_string(exec_status == CL_COMPLETE ? "ok" : "failed"));
  write_event(r->cat, r->name, r->queue, r->device, r->args, start, end,
              device_time);
  clReleaseEvent(r->first);
  clReleaseEvent(r->last);
  free(r);
}

static const char *device_name(const kiln_context *ctx) {
  return ctx != NULL && ctx->device != NULL && ctx->device->info.name != NULL
             ? ctx->device->info.name
             : "?";
}

void kiln__trace_commands(const kiln_queue *queue, const char *cat,
                          const char *name, json_t *args, cl_event first,
                          cl_event last, uint64_t host_ns) {
  kiln__trace_cl_commands(queue->ctx, queue->cl, cat, name, args, first, last,
                          host_ns);
}

void kiln__trace_cl_commands(const kiln_context *ctx, cl_command_queue queue,
                             const char *cat, const char *name, json_t *args,
                             cl_event first, cl_event last, uint64_t host_ns) {
  if (args == NULL)
    return;
  struct trace_record *r = kiln__trace_enabled() && first != NULL &&
                                   last != NULL
                               ? calloc(1, sizeof *r)
                               : NULL;
  if (r == NULL) {
    json_decref(args);
    return;
  }
  r->first = first;
  r->last = last;
  r->cat = cat;
  snprintf(r->name, sizeof r->name, "%s", name);
  r->queue = queue;
  snprintf(r->device, sizeof r->device, "%s", device_name(ctx));
  r->args = args;
  r->host_ns = host_ns;
  clRetainEvent(first);
  clRetainEvent(last);
  if (clSetEventCallback(last, CL_COMPLETE, on_complete, r) != CL_SUCCESS) {
    clReleaseEvent(first);
    clReleaseEvent(last);
    json_decref(args);
    free(r);
  }
}

void kiln__trace_host(const kiln_context *ctx, const char *cat,
                      const char *name, json_t *args, uint64_t host_start_ns) {
  if (args == NULL)
    return;
  if (!kiln__trace_enabled()) {
    json_decref(args);
    return;
  }
  write_event(cat, name, NULL, device_name(ctx), args, host_start_ns,
              kiln__now_ns(), false);
}
