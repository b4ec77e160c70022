/* Building cl_programs, through the persistent cache when allowed. Private to
 * program.c (user programs), memo.c (op programs) and cache.c, which
 * implements it; the rest of the runtime goes through internal.h. */
#ifndef KILN_BUILD_H
#define KILN_BUILD_H

#include "internal.h"

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

/* Embedded sources by position, for kiln_cache_warm (memo.c). */
size_t kiln__kernel_source_count(void);
const char *kiln__kernel_source_name(size_t index);

/* kiln__op_program that also says whether the program came from the
 * persistent cache (for kiln_cache_warm). */
kiln_status kiln__op_program_cached(kiln_context *ctx, const char *name,
                                    const char *options, cl_program *out,
                                    bool *from_cache);

/* How many op-program compilations ctx's memo has started (tests). */
size_t kiln__memo_build_count(const kiln_context *ctx);

/* Compile source with exactly options (no cache), for cache.c. On failure
 * returns KILN_ERR_BUILD_FAILED (or another status) with the last error set
 * and *log holding the full log when there was one. */
kiln_status kiln__compile_source(kiln_context *ctx, const char *source,
                                 size_t length, const char *options,
                                 cl_program *out, char **log);

/* The build log of program for device: malloc'd, trailing blank lines
 * trimmed, "" when the driver gives none. */
kiln_status kiln__program_log(cl_program program,
                              const struct kiln_device *device, char **out);

#endif
