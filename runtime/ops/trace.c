/* Op tracing: KILN_TRACE=path.json writes one Chrome trace-event ("ph":"X",
 * a complete event) per op, which Perfetto and chrome://tracing open.
 *
 * Design choices, and why:
 * - Ops are asynchronous, so an op's times are known only when its last
 *   command completes. Each traced op registers a completion callback
 *   (clSetEventCallback) on its last command and the callback writes the
 *   event. No sync point is needed, and an op the program never waits for is
 *   still recorded once it runs. The order of events in the file is the
 *   order of completion; viewers sort by "ts" anyway.
 * - Times come from queue profiling (start of the op's first command, end of
 *   its last) when the queue has it (queue.c enables profiling when
 *   KILN_TRACE is set); otherwise from the host clock, from the op's enqueue
 *   to the callback, marked "timing":"host" in the event's args.
 * - The file is always a complete JSON array: each event is written followed
 *   by "\n]\n" and flushed, and the next event first seeks back over that
 *   closing bracket. A program interrupted between ops, or one that never
 *   tears kiln down, leaves a file any JSON parser reads; no atexit handler
 *   is needed, which could misbehave when kiln is embedded and unloaded.
 *   When the path is not seekable (a pipe), events are streamed without the
 *   closing bracket, which the trace-event format explicitly tolerates.
 * - Callbacks arrive on driver threads, concurrently: one mutex guards the
 *   file, and encoding (jansson) happens under it.
 * - One file per process: the path is opened (truncated) at the first event.
 *   Two processes must not share a path.
 * Tracing never fails an op: problems here are dropped silently. */
#include "ops_internal.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static pthread_once_t env_once = PTHREAD_ONCE_INIT;
static pthread_mutex_t trace_lock = PTHREAD_MUTEX_INITIALIZER;
static char *trace_path;   /* from KILN_TRACE, read once */
static FILE *trace_file;   /* opened at the first event */
static bool trace_broken;  /* opening failed: stop trying */
static bool trace_seekable;
static unsigned long trace_events;

/* Queues seen so far, so each gets a small stable "tid" and one
 * thread_name record. A queue address reused after a destroy keeps the old
 * lane, which is harmless. */
#define TRACE_LANES 256
static const void *trace_lanes[TRACE_LANES];
static unsigned trace_lane_count;

static const char closing[] = "\n]\n";

static void read_env(void) {
  const char *p = getenv("KILN_TRACE");
  if (p != NULL && p[0] != '\0')
    trace_path = strdup(p);
}

bool kiln__trace_enabled(void) {
  pthread_once(&env_once, read_env);
  return trace_path != NULL;
}

/* What the callback needs, copied: the queue may be destroyed before the
 * callback runs. */
struct trace_record {
  cl_event first, last;
  const char *name;
  const void *queue;
  char device[128];
  kiln_dtype dtype;
  unsigned ndim;
  size_t shape[3];
  double bytes, flops;
  uint64_t host_ns;
};

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Called with trace_lock held. */
static bool open_file(void) {
  if (trace_file != NULL)
    return true;
  if (trace_broken)
    return false;
  trace_file = fopen(trace_path, "w");
  if (trace_file == NULL) {
    trace_broken = true;
    return false;
  }
  struct stat st;
  trace_seekable = fstat(fileno(trace_file), &st) == 0 && S_ISREG(st.st_mode);
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

/* The lane ("tid") of queue; writes its thread_name metadata the first time.
 * Called with trace_lock held. */
static int lane_of(const void *queue, const char *device) {
  for (unsigned i = 0; i < trace_lane_count; i++)
    if (trace_lanes[i] == queue)
      return (int)i + 1;
  if (trace_lane_count == TRACE_LANES)
    return TRACE_LANES + 1; /* an overflow lane shared by the rest */
  trace_lanes[trace_lane_count++] = queue;
  int tid = (int)trace_lane_count;
  char label[192];
  snprintf(label, sizeof label, "queue %d on %s", tid, device);
  json_t *meta = json_pack("{s:s, s:s, s:i, s:i, s:{s:s}}", "name",
                           "thread_name", "ph", "M", "pid", (int)getpid(),
                           "tid", tid, "args", "name", label);
  if (meta != NULL) {
    append(meta);
    json_decref(meta);
  }
  return tid;
}

static json_t *rate(double amount, double ns) {
  /* amount per nanosecond = giga-amount per second. */
  return ns > 0 ? json_real(amount / ns) : json_null();
}

static void write_record(const struct trace_record *r, cl_int exec_status) {
  cl_ulong start = 0, end = 0;
  bool device_time =
      clGetEventProfilingInfo(r->first, CL_PROFILING_COMMAND_START,
                              sizeof start, &start, NULL) == CL_SUCCESS &&
      clGetEventProfilingInfo(r->last, CL_PROFILING_COMMAND_END, sizeof end,
                              &end, NULL) == CL_SUCCESS &&
      end >= start && start != 0;
  if (!device_time) {
    start = r->host_ns;
    end = now_ns();
  }
  double dur_ns = (double)(end - start);

  json_t *shape = json_array();
  for (unsigned i = 0; i < r->ndim && shape != NULL; i++)
    json_array_append_new(shape, json_integer((json_int_t)r->shape[i]));
  json_t *args = json_pack(
      "{s:s, s:s, s:s, s:o*, s:f, s:f, s:o, s:o, s:s, s:s}", "device",
      r->device, "op", r->name, "dtype", kiln_dtype_name(r->dtype), "shape",
      shape, "bytes", r->bytes, "flops", r->flops, "gbps",
      rate(r->bytes, dur_ns), "gflops", rate(r->flops, dur_ns), "timing",
      device_time ? "device" : "host", "status",
      exec_status == CL_COMPLETE ? "ok" : "failed");
  if (args == NULL)
    return;

  pthread_mutex_lock(&trace_lock);
  if (open_file()) {
    int tid = lane_of(r->queue, r->device);
    json_t *ev = json_object();
    if (ev != NULL) {
      json_object_set_new(ev, "name", json_string(r->name));
      json_object_set_new(ev, "cat", json_string("kiln.op"));
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

static void CL_CALLBACK on_complete(cl_event ev, cl_int exec_status,
                                    void *user) {
  (void)ev;
  struct trace_record *r = user;
  write_record(r, exec_status);
  clReleaseEvent(r->first);
  clReleaseEvent(r->last);
  free(r);
}

void kiln__trace_op(const struct kiln__op *op, cl_event first, cl_event last) {
  if (!kiln__trace_enabled())
    return;
  struct trace_record *r = calloc(1, sizeof *r);
  if (r == NULL)
    return;
  r->first = first;
  r->last = last;
  r->name = op->name;
  r->queue = op->queue;
  const char *dev = op->queue->ctx->device != NULL
                        ? op->queue->ctx->device->info.name
                        : NULL;
  snprintf(r->device, sizeof r->device, "%s", dev != NULL ? dev : "?");
  r->dtype = op->dtype;
  r->ndim = op->ndim;
  memcpy(r->shape, op->shape, sizeof r->shape);
  r->bytes = op->bytes;
  r->flops = op->flops;
  r->host_ns = op->host_ns;
  clRetainEvent(first);
  clRetainEvent(last);
  if (clSetEventCallback(last, CL_COMPLETE, on_complete, r) != CL_SUCCESS) {
    clReleaseEvent(first);
    clReleaseEvent(last);
    free(r);
  }
}
