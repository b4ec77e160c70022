/* The one build path of kiln: a program (a user's or an op's) is looked up
 * in the persistent cache, loaded from its binary on a hit, compiled from
 * source otherwise, and its binary stored back, now or when the program is
 * released (KILN_QUIRK_LAZY_PROGRAM_BINARY). The cache (cache.c,
 * cache_entry.c) is only the store it uses: a cache problem is recorded as
 * the cache's diagnostic and the build goes on from source. */
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "program.h"
#include "cache_internal.h"

/* ---- the last failed build's log, per thread ----------------------------- */

/* kiln_last_build_log's text: a malloc'd copy per thread, freed when the
 * thread exits (a key destructor) or the next failure replaces it. */
static pthread_key_t failed_log_key;
static pthread_once_t failed_log_once = PTHREAD_ONCE_INIT;
static bool failed_log_ready;

static void make_failed_log_key(void) {
  failed_log_ready = pthread_key_create(&failed_log_key, free) == 0;
}

/* Keep a copy of log as this thread's last failed build log. Best effort:
 * without memory the previous log is dropped and "" is reported. */
static void note_failed_log(const char *log) {
  pthread_once(&failed_log_once, make_failed_log_key);
  if (!failed_log_ready)
    return;
  free(pthread_getspecific(failed_log_key));
  pthread_setspecific(failed_log_key, log != NULL ? strdup(log) : NULL);
}

const char *kiln_last_build_log(void) {
  pthread_once(&failed_log_once, make_failed_log_key);
  const char *log = failed_log_ready ? pthread_getspecific(failed_log_key)
                                     : NULL;
  return log != NULL ? log : "";
}

/* ---- from source ---------------------------------------------------------- */

/* How much of a build log the last error quotes: the first lines are where
 * compilers put the first error, and the message buffer is bounded. */
#define EXCERPT_MAX_LINES 12
#define EXCERPT_MAX_CHARS 1500

/* The build log of program for device: malloc'd, trailing blank lines
 * trimmed, "" when the driver gives none. */
static kiln_status program_log(cl_program program,
                               const struct kiln_device *device, char **out) {
  *out = NULL;
  size_t size = 0;
  cl_int err = clGetProgramBuildInfo(program, device->id, CL_PROGRAM_BUILD_LOG,
                                     0, NULL, &size);
  if (err != CL_SUCCESS)
    size = 0;
  char *log = malloc(size + 1);
  if (log == NULL)
    return kiln__fail(KILN_ERR_OUT_OF_HOST_MEMORY,
                      "cannot allocate %zu bytes for a build log", size + 1);
  log[0] = '\0';
  if (size > 0 &&
      clGetProgramBuildInfo(program, device->id, CL_PROGRAM_BUILD_LOG, size,
                            log, NULL) != CL_SUCCESS)
    log[0] = '\0';
  log[size] = '\0';
  /* Drivers pad logs with trailing newlines and NULs; trim for messages. */
  size_t n = strlen(log);
  while (n > 0 && (log[n - 1] == '\n' || log[n - 1] == ' ' || log[n - 1] == '\r'))
    log[--n] = '\0';
  *out = log;
  return KILN_OK;
}

/* The first lines of log, bounded, into buf. */
static void log_excerpt(const char *log, char *buf, size_t capacity) {
  size_t used = 0, lines = 0;
  const char *p = log;
  while (*p != '\0' && lines < EXCERPT_MAX_LINES && used + 1 < capacity) {
    buf[used++] = *p;
    if (*p == '\n')
      lines++;
    p++;
  }
  if (*p != '\0') {
    const char *more = lines >= EXCERPT_MAX_LINES ? "[...]" : " [...]";
    size_t len = strlen(more);
    if (used + len + 1 > capacity)
      used = capacity > len + 1 ? capacity - len - 1 : 0;
    memcpy(buf + used, more, len);
    used += len;
  }
  while (used > 0 && buf[used - 1] == '\n')
    used--;
  buf[used] = '\0';
}

/* Builds a driver with KILN_QUIRK_SPURIOUS_BUILD_FAILURE gets again after a
 * failure without an error in the log. */
#define SPURIOUS_RETRIES 2

/* Whether a failed build looks like the driver's spurious failure: the quirk
 * is known for the device, the failure is CL_BUILD_PROGRAM_FAILURE and no
 * line of the log reports an error (compilers write "error:"; PoCL's log of
 * such a failure holds only its own "failed to build the program"). A real
 * error is never retried. */
static bool spurious_failure(const kiln_context *ctx, cl_int err,
                             const char *log) {
  return err == CL_BUILD_PROGRAM_FAILURE &&
         (ctx->device->info.quirks & KILN_QUIRK_SPURIOUS_BUILD_FAILURE) != 0 &&
         strstr(log, "error") == NULL;
}

/* Compile source with exactly options. On failure returns
 * KILN_ERR_BUILD_FAILED (or another status) with the last error set and *log
 * holding the full log when there was one. */
static kiln_status compile_source(kiln_context *ctx, const char *source,
                                  size_t length, const char *options,
                                  cl_program *out, char **log,
                                  unsigned *retries) {
  *out = NULL;
  *log = NULL;
  cl_int err = CL_SUCCESS;
  cl_program program = NULL;
  kiln_status st = KILN_OK;
  for (unsigned attempt = 0;; attempt++) {
    program = clCreateProgramWithSource(ctx->cl, 1, &source, &length, &err);
    if (err != CL_SUCCESS)
      return kiln__fail_cl(err, "clCreateProgramWithSource", ctx->device,
                           "%zu bytes of source", length);
    err = clBuildProgram(program, 1, &ctx->device->id, options, NULL, NULL);
    st = program_log(program, ctx->device, log);
    if (st != KILN_OK)
      goto fail;
    if (!spurious_failure(ctx, err, *log) || attempt == SPURIOUS_RETRIES)
      break;
    kiln__cache_note("clBuildProgram failed with CL_BUILD_PROGRAM_FAILURE "
                     "but no error in its log on '%s' (attempt %u of %u, "
                     "options '%s'); built again (quirk "
                     "spurious-build-failure)",
                     ctx->device->info.name, attempt + 1,
                     SPURIOUS_RETRIES + 1, options);
    (*retries)++;
    clReleaseProgram(program);
    free(*log);
    *log = NULL;
  }
  if (err != CL_SUCCESS) {
    static _Thread_local char excerpt[EXCERPT_MAX_CHARS + 8];
    log_excerpt(*log, excerpt, sizeof excerpt);
    if (err == CL_INVALID_BUILD_OPTIONS)
      st = kiln__fail_cl(err, "clBuildProgram", ctx->device,
                         "build options '%s' were refused%s%s", options,
                         excerpt[0] != '\0' ? "; build log excerpt:\n" : "",
                         excerpt);
    else
      st = kiln__fail_cl(err, "clBuildProgram", ctx->device,
                         "%s%s%sbuild log excerpt:\n%s",
                         options[0] != '\0' ? "options '" : "", options,
                         options[0] != '\0' ? "'; " : "",
                         excerpt[0] != '\0' ? excerpt
                                            : "(the driver gave no build log)");
    /* Compilers may fail for reasons OpenCL reports as other codes; a failed
     * build is a build failure whatever the code. */
    if (st != KILN_ERR_OUT_OF_HOST_MEMORY && st != KILN_ERR_OUT_OF_DEVICE_MEMORY)
      st = KILN_ERR_BUILD_FAILED;
    goto fail;
  }
  *out = program;
  return KILN_OK;
fail:
  clReleaseProgram(program);
  return st;
}

/* ---- through the cache -------------------------------------------------- */

/* Load payload as a program binary and build it with options. */
static bool load_binary(kiln_context *ctx, const unsigned char *payload,
                        size_t length, const char *options, cl_program *out,
                        char **log, char *why, size_t cap) {
  cl_int status = CL_SUCCESS, err = CL_SUCCESS;
  cl_program program = clCreateProgramWithBinary(
      ctx->cl, 1, &ctx->device->id, &length, &payload, &status, &err);
  if (err != CL_SUCCESS || status != CL_SUCCESS) {
    snprintf(why, cap, "clCreateProgramWithBinary refused it: %s",
             kiln_cl_error_name(err != CL_SUCCESS ? err : status));
    if (program != NULL)
      clReleaseProgram(program);
    return false;
  }
  err = clBuildProgram(program, 1, &ctx->device->id, options, NULL, NULL);
  if (err != CL_SUCCESS) {
    snprintf(why, cap, "clBuildProgram of the binary failed: %s",
             kiln_cl_error_name(err));
    clReleaseProgram(program);
    return false;
  }
  if (program_log(program, ctx->device, log) != KILN_OK) {
    clReleaseProgram(program);
    snprintf(why, cap, "out of memory");
    return false;
  }
  *out = program;
  return true;
}

/* Save program's binary as the entry at path; problems become the note. */
static void store(kiln_context *ctx, cl_program program,
                  const struct kiln__cache_config *config, const char *path,
                  const struct kiln__cache_key *key, const char *label) {
  size_t size = 0;
  cl_int err = clGetProgramInfo(program, CL_PROGRAM_BINARY_SIZES, sizeof size,
                                &size, NULL);
  if (err != CL_SUCCESS || size == 0) {
    kiln__cache_note("the driver gives no program binary for '%s' on '%s' "
                     "(%s): it cannot be cached",
                     label, ctx->device->info.name,
                     err != CL_SUCCESS ? kiln_cl_error_name(err) : "size 0");
    return;
  }
  unsigned char *binary = malloc(size);
  if (binary == NULL)
    return;
  err = clGetProgramInfo(program, CL_PROGRAM_BINARIES, sizeof binary, &binary,
                         NULL);
  char why[600];
  if (err != CL_SUCCESS)
    kiln__cache_note("clGetProgramInfo(CL_PROGRAM_BINARIES) failed: %s",
                     kiln_cl_error_name(err));
  else if (!kiln__cache_entry_write(config->dir, path, key, label,
                                    ctx->device->info.name, binary, size, why,
                                    sizeof why))
    kiln__cache_note("cannot store a cache entry, working without the "
                     "cache: %s",
                     why);
  else
    kiln__cache_count(KILN__CACHE_STORE);
  free(binary);
}

static char *join_options(const struct kiln__build_request *req) {
  const char *profile =
      req->ctx->backend != NULL && req->ctx->backend->build_options != NULL
          ? req->ctx->backend->build_options
          : "";
  const char *user = req->options != NULL ? req->options : "";
  const char *arg_info = req->arg_info ? "-cl-kernel-arg-info" : "";
  size_t n = strlen(profile) + strlen(user) + strlen(arg_info) + 3;
  char *options = malloc(n);
  if (options == NULL)
    return NULL;
  snprintf(options, n, "%s%s%s%s%s", profile,
           profile[0] != '\0' && user[0] != '\0' ? " " : "", user,
           (profile[0] != '\0' || user[0] != '\0') && arg_info[0] != '\0' ? " "
                                                                          : "",
           arg_info);
  return options;
}

/* Everything a deferred store needs, copied at build time: the environment
 * may change before the program is released. */
struct kiln__cache_pending {
  struct kiln__cache_config config;
  struct kiln__cache_key key;
  char path[KILN__CACHE_PATH_MAX];
  char label[64];
};

void kiln__cache_store_pending(kiln_context *ctx, cl_program program,
                               struct kiln__cache_pending *pending) {
  if (pending == NULL)
    return;
  if (program != NULL) {
    store(ctx, program, &pending->config, pending->path, &pending->key,
          pending->label);
    kiln__cache_evict(pending->config.dir, pending->config.max_bytes);
    kiln__cache_save_stats(pending->config.dir);
  }
  free(pending);
}

/* kiln__build_program without the trace. */
static kiln_status build_program(const struct kiln__build_request *req,
                                 struct kiln__build_result *out) {
  memset(out, 0, sizeof *out);
  kiln_context *ctx = req->ctx;
  char *options = join_options(req);
  if (options == NULL)
    return kiln__fail(KILN_ERR_OUT_OF_HOST_MEMORY,
                      "cannot allocate the build options");
  struct kiln__cache_config config;
  struct kiln__cache_key key;
  char path[KILN__CACHE_PATH_MAX];
  char why[600];
  bool cached = false;
  if (req->use_cache) {
    kiln__cache_config(&config);
    if (config.problem[0] != '\0')
      kiln__cache_note("%s", config.problem);
    cached = config.enabled && config.have_dir;
  }
  if (cached && !kiln__cache_make_dir(config.dir, why, sizeof why)) {
    kiln__cache_note("working without the program cache: %s", why);
    cached = false;
  }
  if (cached && (!kiln__cache_key(ctx->device, req->source, req->source_length,
                                  options, &key) ||
                 snprintf(path, sizeof path, "%s/%s%s", config.dir, key.hex,
                          KILN__CACHE_SUFFIX) >= (int)sizeof path))
    cached = false;

  out->cache_used = cached;
  if (cached) {
    unsigned char *payload = NULL;
    size_t length = 0;
    enum kiln__entry_result r =
        kiln__cache_entry_read(path, &key, &payload, &length, why, sizeof why);
    if (r == KILN__ENTRY_OK) {
      char reason[sizeof why];
      if (load_binary(ctx, payload, length, options, &out->program, &out->log,
                      reason, sizeof reason)) {
        free(payload);
        free(options);
        /* The file's mtime is its last use, for least-recently-used
         * eviction; atime is unreliable (noatime, relatime). */
        utimensat(AT_FDCWD, path, NULL, 0);
        kiln__cache_count(KILN__CACHE_HIT);
        kiln__cache_save_stats(config.dir);
        out->from_cache = true;
        return KILN_OK;
      }
      memcpy(why, reason, sizeof why);
      r = KILN__ENTRY_CORRUPT;
    }
    free(payload);
    if (r == KILN__ENTRY_CORRUPT) {
      /* Removed before the rebuild rewrites it, so that a failing rebuild
       * does not leave the bad entry for the next process. */
      unlink(path);
      kiln__cache_count(KILN__CACHE_REJECTED);
      kiln__cache_note("removed cache entry %s (%s): %s; rebuilt from source",
                       key.hex, req->label, why);
    } else if (r == KILN__ENTRY_UNREADABLE) {
      kiln__cache_note("cache entry %s is unreadable (%s); built from source",
                       key.hex, why);
    }
    kiln__cache_count(KILN__CACHE_MISS);
  }

  kiln_status st = compile_source(ctx, req->source, req->source_length,
                                  options, &out->program, &out->log,
                                  &out->retries);
  free(options);
  if (st != KILN_OK)
    note_failed_log(out->log);
  if (st == KILN_OK && cached &&
      (ctx->device->info.quirks & KILN_QUIRK_LAZY_PROGRAM_BINARY) != 0) {
    /* Querying the binary now would freeze it without the code the first
     * launches compile; the owner stores it on release instead. */
    out->pending = malloc(sizeof *out->pending);
    if (out->pending != NULL) {
      out->pending->config = config;
      out->pending->key = key;
      memcpy(out->pending->path, path, sizeof path);
      kiln__cache_copy(out->pending->label, sizeof out->pending->label,
                       req->label);
    }
  } else if (st == KILN_OK && cached) {
    store(ctx, out->program, &config, path, &key, req->label);
    kiln__cache_evict(config.dir, config.max_bytes);
  }
  if (cached)
    kiln__cache_save_stats(config.dir);
  return st;
}

kiln_status kiln__build_program(const struct kiln__build_request *req,
                                struct kiln__build_result *out) {
  bool traced = kiln__trace_enabled();
  uint64_t start = traced ? kiln__now_ns() : 0;
  kiln_status st = build_program(req, out);
  if (traced) {
    /* One "kiln.build" event on the host lane: what was built, whether
     * kiln's cache served it, how long it took (the event's duration, and
     * build_ms for readers of args alone), and how it ended. */
    double ms = (double)(kiln__now_ns() - start) / 1e6;
    char name[96];
    snprintf(name, sizeof name, "build %s", req->label);
    kiln__trace_host(
        req->ctx, "kiln.build", name,
        json_pack("{s:s, s:s, s:s, s:f, s:i, s:s}", "source", req->label,
                  "options", req->options != NULL ? req->options : "",
                  "cache", out->from_cache  ? "hit"
                           : out->cache_used ? "miss"
                                             : "off",
                  "build_ms", ms, "retries", (int)out->retries, "status",
                  st == KILN_OK ? "ok" : kiln_status_name(st)),
        start);
  }
  return st;
}
