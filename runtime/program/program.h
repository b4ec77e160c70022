/* The program room's interface (runtime/program/): building cl_programs, through
 * the persistent cache when allowed (build.c), user programs (program.c), and
 * the embedded op kernel sources with the per-context program memo and the
 * per-queue kernel cache (memo.c). Included by the op library above; it
 * includes only the core room below. Not installed. */
#ifndef KILN_PROGRAM_ROOM_H
#define KILN_PROGRAM_ROOM_H

#include "core/internal.h"

/* ---- the build path (build.c) -------------------------------------------- */

/* What to build. The options actually passed to clBuildProgram are the
 * profile's build options, then options, then -cl-kernel-arg-info when
 * arg_info is set (user programs, so argument sizes can be checked). */
struct kiln__build_request {
  kiln_context *ctx;
  const char *source;
  size_t source_length;
  const char *options; /* may be NULL */
  /* Short label stored in a cache entry for `kiln cache ls`: the embedded
   * source name ("elementwise") or "user". */
  const char *label;
  bool use_cache;
  bool arg_info;
};

struct kiln__build_result {
  cl_program program; /* NULL on failure */
  char *log;          /* full build log, malloc'd, never NULL on return */
  bool from_cache;
  bool cache_used;    /* the persistent cache was looked up (hit or miss) */
  unsigned retries;   /* builds repeated after a spurious failure */
  /* Set when the cache entry is to be written later, once the program's
   * kernels ran (KILN_QUIRK_LAZY_PROGRAM_BINARY): pass it to
   * kiln__cache_store_pending when the program is released. */
  struct kiln__cache_pending *pending;
};

/* Write the deferred cache entry of program (built on ctx) and free
 * pending; problems become the cache diagnostic. NULL pending is a no-op.
 * Thread-safe. */
void kiln__cache_store_pending(kiln_context *ctx, cl_program program,
                               struct kiln__cache_pending *pending);

/* Build req into *out. On KILN_ERR_BUILD_FAILED the last error carries the
 * log excerpt and a hint, and out->log the full log. On any return out->log
 * is a malloc'd string (possibly "") the caller frees, unless the status is
 * KILN_ERR_OUT_OF_HOST_MEMORY, where it may be NULL. Thread-safe. */
kiln_status kiln__build_program(const struct kiln__build_request *req,
                                struct kiln__build_result *out);

/* ---- embedded op kernels, the program memo, kernels per queue (memo.c) -- */

/* The OpenCL C source of the embedded op kernel file `name` (the .cl file's
 * base name, "elementwise"), with shared headers already inlined, or NULL.
 * *length receives its length. */
const char *kiln__kernel_source(const char *name, size_t *length);

/* The built cl_program for embedded source `name` with extra build options
 * (may be NULL; the profile's options are always prepended) on ctx: built at
 * most once per (context, name, options), thread-safely, through the
 * persistent cache. The program stays owned by the context; do not release
 * it. */
kiln_status kiln__op_program(kiln_context *ctx, const char *name,
                             const char *options, cl_program *out);

/* A cl_kernel for kernel_name in embedded program `name` built with options,
 * cached on queue: a queue is used by one thread at a time, so the op library
 * may set this kernel's arguments without locks. Owned by the queue. */
kiln_status kiln__queue_kernel(kiln_queue *queue, const char *name,
                               const char *options, const char *kernel_name,
                               cl_kernel *out);
/* The same, for a caller that holds key, an object that stands for (name,
 * options) as long as queue's context lives (the tune room's variants):
 * the queue's kernels are found by key and kernel_name, without hashing or
 * comparing the options. */
kiln_status kiln__queue_kernel_keyed(kiln_queue *queue, const void *key,
                                     const char *name, const char *options,
                                     const char *kernel_name, cl_kernel *out);

/* Embedded sources by position (memo.c). */
size_t kiln__kernel_source_count(void);
const char *kiln__kernel_source_name(size_t index);

/* kiln__op_program that also says whether the program came from the
 * persistent cache (for kiln_cache_warm). */
kiln_status kiln__op_program_cached(kiln_context *ctx, const char *name,
                                    const char *options, cl_program *out,
                                    bool *from_cache);

/* How many op-program compilations ctx's memo has started (tests). */
size_t kiln__memo_build_count(const kiln_context *ctx);

#endif
