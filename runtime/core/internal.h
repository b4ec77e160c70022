/* The core room's interface (runtime/core/): errors, devices, contexts,
 * queues, events, buffers, programs and kernels as objects. Included by the
 * rooms above it (mem, program, tune, ops, multi); it includes nothing of
 * theirs. Not installed.
 *
 * Naming: internal non-static functions are kiln__<module>_<verb>. */
#ifndef KILN_INTERNAL_H
#define KILN_INTERNAL_H

/* The one place that fixes the OpenCL API level kiln compiles against: 3.0
 * headers, with 1.2 entry points still declared, because drivers from 1.2
 * (Oclgrind, older NVIDIA) to 3.0 (PoCL, rusticl) must all work. */
#define CL_TARGET_OPENCL_VERSION 300
#define CL_USE_DEPRECATED_OPENCL_1_2_APIS
#include <CL/opencl.h>

#include <jansson.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <pthread.h>

#include "kiln/kiln.h"
#include "backend.h"

/* ---- errors (error.c) --------------------------------------------------- */

/* Record a failure that did not come from OpenCL; returns status so callers
 * can write `return kiln__fail(KILN_ERR_..., "...", ...);`. */
kiln_status kiln__fail(kiln_status status, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Record a failed OpenCL call: "clCreateBuffer: CL_INVALID_BUFFER_SIZE (-61)
 * on device 'NAME' (PLATFORM): <context>. Hint: ...". device may be NULL.
 * Maps err to the matching kiln_status and returns it. */
kiln_status kiln__fail_cl(cl_int err, const char *call,
                          const struct kiln_device *device, const char *fmt,
                          ...) __attribute__((format(printf, 4, 5)));

/* Map an OpenCL error code to a kiln_status. */
kiln_status kiln__status_from_cl(cl_int err);

/* ---- size arithmetic ---------------------------------------------------- */

static inline bool kiln__add_overflows(size_t a, size_t b, size_t *sum) {
  return __builtin_add_overflow(a, b, sum);
}
static inline bool kiln__mul_overflows(size_t a, size_t b, size_t *product) {
  return __builtin_mul_overflow(a, b, product);
}

/* ---- devices (device.c) ------------------------------------------------- */

struct kiln_device {
  cl_platform_id platform;
  cl_device_id id;
  kiln_device_info info;       /* strings point into storage */
  const struct kiln_backend *backend; /* matched profile */
  char *storage;               /* one allocation holding every info string */
};

/* A deep copy of device that owns its strings, for contexts that outlive
 * their device list. */
kiln_status kiln__device_clone(const struct kiln_device *device,
                               struct kiln_device **out);
void kiln__device_free(struct kiln_device *device);
/* A list of copies of count made-up devices, for tests and tools that need
 * devices no machine has (an NVIDIA GPU in CI). Strings are copied (NULL
 * becomes ""); platform and id are kept as given. A device whose backend is
 * NULL gets the profile kiln__backend_match picks, and its info.profile and
 * info.quirks from it. */
kiln_status kiln__device_list_synthetic(const struct kiln_device *devices,
                                        size_t count, kiln_device_list **out);
/* Whole-word test in a normalised extension list (info.extensions);
 * device_query.c. */
bool kiln__has_extension(const char *list, const char *ext);

/* ---- state of higher rooms on core objects ------------------------------ */

/* What a room above keeps on a core object (the program room's memo on a
 * context and kernels on a queue, the tune room's variants on a context,
 * the op library's scratch on a queue). The core object knows only how to
 * free it, so calls still flow down: the state begins with this header, sits
 * in its room's slot, and the object calls destroy(state) when it is
 * destroyed, the rooms above first (their state may hold the lower ones'
 * objects: kernels of memo programs). */
struct kiln__attached {
  void (*destroy)(struct kiln__attached *self);
};

/* One slot per room that attaches state, lowest room first. */
enum kiln__slot {
  KILN__SLOT_PROGRAM, /* context: program memo; queue: op kernels */
  KILN__SLOT_TUNE,    /* context: resolved op variants */
  KILN__SLOT_OPS,     /* queue: op scratch */
  KILN__SLOTS
};

/* ---- context (context.c) ------------------------------------------------ */

struct kiln_context {
  cl_context cl;
  struct kiln_device *device;          /* owned clone */
  const struct kiln_backend *backend;  /* profile in force */
  unsigned flags;                      /* KILN_CONTEXT_* */
  atomic_size_t children;              /* live queues, buffers, programs, events */
  /* The rooms' state (kiln__context_attach), created there at first use,
   * destroyed here before the cl_context it may hold programs of. */
  _Atomic(struct kiln__attached *) attached[KILN__SLOTS];
};

/* slot's state on ctx, NULL until a room attached it. Lock-free. */
static inline struct kiln__attached *
kiln__context_attached(const kiln_context *ctx, enum kiln__slot slot) {
  return atomic_load_explicit(&ctx->attached[slot], memory_order_acquire);
}
/* Attach state to slot unless another thread did first (threads may race
 * to a context's first op): returns the state in force, state or the
 * winner's, in which case the caller destroys its own. */
struct kiln__attached *kiln__context_attach(kiln_context *ctx,
                                            enum kiln__slot slot,
                                            struct kiln__attached *state);

void kiln__context_child_added(kiln_context *ctx);
void kiln__context_child_removed(kiln_context *ctx);


/* ---- queue, event (queue.c, event.c) ------------------------------------ */

/* A recording in progress on a queue (the ops room's recorded sequences,
 * runtime/ops/sequence.c). While a queue has one, kiln_kernel_launch and
 * the op library hand their launches to it instead of enqueuing them, and
 * report each buffer the launch uses; buffer transfers on the queue are
 * refused. A table of function pointers, so calls still flow down. */
struct kiln__recorder {
  /* Capture kernel as launched now (its arguments as set). user is the
   * kiln_kernel for kiln_kernel_launch, NULL for an op's kernel. */
  kiln_status (*launch)(struct kiln__recorder *self, cl_kernel kernel,
                        const kiln_kernel *user, cl_uint dims,
                        const size_t *global, const size_t *local);
  /* The launch about to be captured uses buffer: keep it from being
   * destroyed while the recording lives. */
  kiln_status (*use_buffer)(struct kiln__recorder *self, kiln_buffer *buffer);
  /* ... or uses mem, op scratch that the queue may replace: retain it. */
  kiln_status (*use_mem)(struct kiln__recorder *self, cl_mem mem);
};

/* Files opened by a path a user gave (files.c). kiln__open_regular opens
 * path for reading, never blocking in open(2) (a FIFO at the path), and
 * refuses anything but a regular file: -1 with errno (ENOENT when there is
 * none; EINVAL when it is not a regular file) and the reason in why
 * ("a FIFO, not a regular file", or strerror's text). The descriptor is
 * blocking and close-on-exec. kiln__fopen_regular is the same as a FILE
 * ("rb"). kiln__open_output opens path for writing with extra flags
 * (O_CREAT, O_EXCL, O_TRUNC ...; mode 0644), never blocking in open(2):
 * a FIFO that no process reads is refused ("a FIFO that no process
 * reads"), one with a reader is used. kiln__file_kind names a st_mode's
 * file type ("a FIFO"). */
int kiln__open_regular(const char *path, char *why, size_t cap);
FILE *kiln__fopen_regular(const char *path, char *why, size_t cap);
int kiln__open_output(const char *path, int flags, char *why, size_t cap);
const char *kiln__file_kind(unsigned mode);

/* KILN_LOG (log.c): a message to kiln_log_set_handler's handler, else kept
 * (never printed) for kiln_trace_diagnostic(), when at is within the level
 * in force (off unless KILN_LOG, KILN_TRACE or KILN_TRACE_SUMMARY is set,
 * or a handler is). For diagnostics that otherwise stay in status messages;
 * never for errors the caller receives. */
enum {
  KILN__LOG_ERROR = KILN_LOG_ERROR,
  KILN__LOG_WARN = KILN_LOG_WARN,
  KILN__LOG_INFO = KILN_LOG_INFO,
  KILN__LOG_DEBUG = KILN_LOG_DEBUG,
};
/* The most characters of one kept message (longer ones are cut), and how
 * many are kept: kiln__log_kept writes at most KILN__LOG_KEPT lines of at
 * most KILN__LOG_KEPT_CHARS + 10 characters. */
#define KILN__LOG_KEPT_CHARS 1024
#define KILN__LOG_KEPT 4
bool kiln__log_enabled(int at);
void kiln__log(int at, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* A report the environment asked for (KILN_TRACE_SUMMARY's table), whatever
 * the level: to the handler at level info. Returns false, delivering
 * nothing, when no handler is installed. */
bool kiln__log_report(const char *text);
/* Append to the NUL-terminated text in out (cap bytes in all) the messages
 * kept without a handler, oldest first, one per line ("warning: ..."),
 * leaving out one whose text is skip (NULL: none); truncates at cap.
 * Returns the length of out. */
size_t kiln__log_kept(char *out, size_t cap, const char *skip);

/* Whether PoCL cannot create its kernel cache directory (pocl_cache.c), in
 * which case its platform lists no device: true with a sentence naming the
 * directory, the variable it comes from and what to set, in out. */
bool kiln__pocl_cache_problem(char *out, size_t cap);

/* The problem that explains an empty list (a PoCL platform that cannot
 * create its kernel cache), or NULL. */
const kiln_device_problem *
kiln__device_list_explaining_problem(const kiln_device_list *list);

/* What kiln_queue_finish proves, shared with the pools homed on the queue
 * (they may outlive the kiln_queue, kiln_pool.h): every command enqueued
 * before the finish with ticket t began has completed once done >= t.
 * A pool block given back when `started` was s is free once done > s. */
struct kiln__queue_sync {
  atomic_uint refs;
  _Atomic uint64_t started; /* tickets handed to finishes */
  _Atomic uint64_t done;    /* the highest ticket of a finish that returned */
};

/* Drop a reference to sync (NULL: nothing). */
void kiln__queue_sync_release(struct kiln__queue_sync *sync);

struct kiln_queue {
  kiln_context *ctx;
  cl_command_queue cl;
  unsigned flags;
  struct kiln__queue_sync *sync;
  /* The rooms' state, created there at the first op (a queue is used by
   * one thread at a time: plain pointers); destroyed with the queue after
   * it finished. */
  struct kiln__attached *attached[KILN__SLOTS];
  /* A recording in progress, else NULL: consulted by core itself at every
   * launch and transfer, hence a field of its own. */
  struct kiln__recorder *recorder;
};

struct kiln_event {
  kiln_context *ctx;
  cl_event cl;
  atomic_uint refs;
  bool profiled; /* came from a queue with KILN_QUEUE_PROFILING */
};

/* Wrap a freshly returned cl_event (kiln takes over its reference) into
 * *out. On failure the cl_event is released. */
kiln_status kiln__event_wrap(kiln_queue *queue, cl_event ev, kiln_event **out);
/* The same for a command of ctx whose queue is known only as a cl queue (a
 * sequence's); profiled as that queue was created. */
kiln_status kiln__event_wrap_cl(kiln_context *ctx, bool profiled, cl_event ev,
                                kiln_event **out);

/* Validate a wait list against queue's context and convert it. When
 * num_wait <= KILN__WAIT_INLINE the result is written into inline_buf, else a
 * heap array is returned that the caller frees with kiln__wait_list_free. */
#define KILN__WAIT_INLINE 16
kiln_status kiln__wait_list(const kiln_queue *queue, size_t num_wait,
                            kiln_event *const *wait_list,
                            cl_event inline_buf[KILN__WAIT_INLINE],
                            cl_event **out);
/* The same against ctx (for calls that hold no kiln_queue). */
kiln_status kiln__wait_list_cl(const kiln_context *ctx, size_t num_wait,
                               kiln_event *const *wait_list,
                               cl_event inline_buf[KILN__WAIT_INLINE],
                               cl_event **out);
void kiln__wait_list_free(cl_event *list, cl_event inline_buf[KILN__WAIT_INLINE]);

/* The out event of a blocking call that has completed its work on queue: a
 * marker after it, waited for, so complete on return (nothing when
 * out_event is NULL). */
kiln_status kiln__done_event(kiln_queue *queue, kiln_event **out_event);

/* Finish an enqueue: if out_event is non-NULL wrap ev into it, else release
 * ev. Returns the status of wrapping. */
kiln_status kiln__event_out(kiln_queue *queue, cl_event ev,
                            kiln_event **out_event);

/* ---- buffer (buffer.c) -------------------------------------------------- */

struct kiln__mapping; /* buffer.c: one live kiln_buffer_map result */

/* The pool's block behind a pooled buffer (pool.c). kiln_buffer_destroy
 * calls give_back(self) instead of releasing the cl_mem and freeing the
 * struct: both belong to the block and are handed out again (only size and
 * flags are set anew, so a field added to kiln_buffer must be back at its
 * initial value when destroy succeeds). The pool calls buffers and never
 * the other way round. Thread-safe. */
struct kiln__pooled {
  /* false, changing nothing, when the block is not handed out (the buffer
   * was given back already). */
  bool (*give_back)(struct kiln__pooled *self);
};

struct kiln_buffer {
  kiln_context *ctx;
  cl_mem cl;
  size_t size;
  unsigned flags;          /* KILN_MEM_* access in force */
  kiln_buffer *parent;     /* for sub-buffer views */
  size_t origin;           /* views: byte offset of the view in parent */
  atomic_size_t children;  /* live views */
  pthread_mutex_t map_lock;     /* guards maps */
  struct kiln__mapping *maps;   /* live mappings, to validate unmap */
  struct kiln__pooled *pooled;  /* pooled buffers: their block, else NULL */
  atomic_size_t recordings;     /* recorded sequences that use it */
};

/* Check range (named what in messages: "kiln_peer_copy: src") and give its
 * byte offset and size: NULL range or buffer is KILN_ERR_NULL_POINTER, an
 * unknown dtype KILN_ERR_INVALID_ARGUMENT, overflowing sizes
 * KILN_ERR_INVALID_SIZE, a range past its buffer KILN_ERR_OUT_OF_RANGE. A
 * count of 0 is valid here; callers that refuse it say so. */
kiln_status kiln__range_bytes(const kiln_range *range, const char *what,
                              size_t *offset_bytes, size_t *size_bytes);

/* Enqueue a write (write true) or read of size_bytes at offset_bytes of
 * buffer from or to host, both already checked: the untyped path under
 * kiln_buffer_write/read, for memory that has no element type (the
 * pipeline's batches of bytes). */
kiln_status kiln__buffer_transfer(kiln_queue *queue, kiln_buffer *buffer,
                                  size_t offset_bytes, size_t size_bytes,
                                  void *host, bool write, size_t num_wait,
                                  kiln_event *const *wait_list,
                                  kiln_event **out_event);

/* Check that [offset, offset + size) lies inside buffer; what names the
 * argument in the error and may carry the caller's name
 * ("kiln_buffer_write: dst" gives "kiln_buffer_write: dst range [offset 96,
 * +64 bytes) exceeds the buffer's 128 bytes"). Zero sizes are refused. */
kiln_status kiln__buffer_range(const kiln_buffer *buffer, size_t offset,
                               size_t size, const char *what);

/* Make a kiln buffer around mem, taking over the caller's reference (on
 * failure mem is released). parent and origin describe a view (parent NULL
 * otherwise); flags are the KILN_MEM_* access in force. fn names the public
 * caller in errors. */
kiln_status kiln__buffer_wrap(kiln_context *ctx, cl_mem mem, size_t size,
                              unsigned flags, kiln_buffer *parent,
                              size_t origin, const char *fn, kiln_buffer **out);

/* ---- the clock (clock.c) ------------------------------------------------ */

/* The library's one host clock: CLOCK_MONOTONIC in nanoseconds since an
 * arbitrary start (trace times, build times, waits, calibration). */
uint64_t kiln__now_ns(void);

/* ---- tracing (trace.c) ------------------------------------------------- */

/* Whether KILN_TRACE names a file for this process (read once). */
bool kiln__trace_enabled(void);


/* Trace the commands first .. last of queue (first may equal last) as one
 * event of category cat ("kiln.op", "kiln.kernel", "kiln.transfer") named
 * name, with args, a JSON object made by the caller (takes it over; NULL is
 * ignored): the trace adds "device", "status", "timing", and "gbps" and
 * "gflops" where args hold "bytes" and "flops". Takes one reference to each
 * event and writes the event when last completes, from device profiling
 * times when the queue has them, else from host_ns (kiln__now_ns at
 * the enqueue) to completion. Silent on failure: tracing never fails the
 * work. Call only when kiln__trace_enabled(). */
void kiln__trace_commands(const kiln_queue *queue, const char *cat,
                          const char *name, json_t *args, cl_event first,
                          cl_event last, uint64_t host_ns);

/* kiln__trace_commands for an object that keeps only ctx and the OpenCL
 * queue (a staging ring); same lane as the kiln queue around queue. */
void kiln__trace_cl_commands(const kiln_context *ctx, cl_command_queue queue,
                             const char *cat, const char *name, json_t *args,
                             cl_event first, cl_event last, uint64_t host_ns);

/* Trace host work on ctx's device (a program build) that began at
 * host_start_ns and ends now, on the host lane. Takes over args. */
void kiln__trace_host(const kiln_context *ctx, const char *cat,
                      const char *name, json_t *args, uint64_t host_start_ns);

/* ---- program, kernel (program/program.c, kernel.c, kernel_args.c) ---------- */

struct kiln_program {
  kiln_context *ctx;
  cl_program cl;
  char *source;
  size_t source_length;
  char *log;
  bool built;
  bool from_cache;
  atomic_size_t children;  /* live kernels */
  /* A cache entry to write when the program is released (drivers with
   * KILN_QUIRK_LAZY_PROGRAM_BINARY); NULL otherwise. program/build.c. */
  struct kiln__cache_pending *pending_store;
};

/* What kiln knows of one kernel argument (kernel_args.c). */
struct kiln__kernel_arg {
  size_t size;          /* by-value size of the declared type; 0 if unknown */
  unsigned address;     /* CL_KERNEL_ARG_ADDRESS_*; 0 if unknown */
  bool set;             /* a setter succeeded for it */
  size_t local_bytes;   /* bytes of a __local argument as last set, else 0 */
  char type[40];        /* declared type name ("float4"); "" if unknown */
  kiln_buffer *buffer;  /* the buffer last set to it, for recordings */
};

struct kiln_kernel {
  kiln_program *program;
  cl_kernel cl;
  uint32_t num_args;
  char *name;
  struct kiln__kernel_arg *args; /* num_args entries */
  bool arg_info;                 /* the driver reported argument types */
  size_t max_group;              /* CL_KERNEL_WORK_GROUP_SIZE; 0 if unknown */
  size_t required[3];            /* reqd_work_group_size, or zeros */
};

/* Fill kernel->args from the driver's argument info; arg_info stays false
 * when the driver gives none (kernel_args.c). */
void kiln__kernel_query_args(kiln_kernel *kernel,
                             const struct kiln_device *device);
/* After CL_INVALID_KERNEL_ARGS: fail naming the arguments kiln never set
 * (kernel_args.c). */
kiln_status kiln__kernel_fail_unset_args(kiln_kernel *kernel, cl_int err,
                                        const struct kiln_device *device);

#endif
