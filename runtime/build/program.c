/* User programs: create from source, build (through the persistent cache),
 * build logs; and the raw source compilation that cache.c falls back to. */
#include <stdlib.h>
#include <string.h>

#include "build.h"
#include "internal.h"

/* How much of a build log the last error quotes: the first lines are where
 * compilers put the first error, and the message buffer is bounded. */
#define EXCERPT_MAX_LINES 12
#define EXCERPT_MAX_CHARS 1500

kiln_status kiln__program_log(cl_program program, const struct kiln_device *device,
                              char **out) {
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

kiln_status kiln__compile_source(kiln_context *ctx, const char *source,
                                 size_t length, const char *options,
                                 cl_program *out, char **log) {
  *out = NULL;
  *log = NULL;
  cl_int err = CL_SUCCESS;
  cl_program program =
      clCreateProgramWithSource(ctx->cl, 1, &source, &length, &err);
  if (err != CL_SUCCESS)
    return kiln__fail_cl(err, "clCreateProgramWithSource", ctx->device,
                         "%zu bytes of source", length);
  err = clBuildProgram(program, 1, &ctx->device->id, options, NULL, NULL);
  kiln_status st = kiln__program_log(program, ctx->device, log);
  if (st != KILN_OK)
    goto fail;
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

/* ---- the public program API -------------------------------------------- */

kiln_status kiln_program_create(kiln_context *ctx, const char *source,
                                size_t source_length, kiln_program **out) {
  if (out != NULL)
    *out = NULL;
  if (ctx == NULL || source == NULL || out == NULL)
    return kiln__fail(KILN_ERR_NULL_POINTER, "kiln_program_create: %s is NULL",
                      ctx == NULL ? "ctx" : source == NULL ? "source" : "out");
  if (source_length == 0)
    source_length = strlen(source);
  if (source_length == 0)
    return kiln__fail(KILN_ERR_INVALID_SIZE,
                      "kiln_program_create: source is empty");
  if (memchr(source, '\0', source_length) != NULL)
    return kiln__fail(KILN_ERR_INVALID_ARGUMENT,
                      "kiln_program_create: source holds a NUL byte within its "
                      "%zu bytes (source_length too large?)",
                      source_length);
  size_t alloc = 0;
  if (kiln__add_overflows(source_length, 1, &alloc))
    return kiln__fail(KILN_ERR_INVALID_SIZE,
                      "kiln_program_create: source_length %zu overflows",
                      source_length);
  kiln_program *program = calloc(1, sizeof *program);
  char *copy = malloc(alloc);
  if (program == NULL || copy == NULL) {
    free(program);
    free(copy);
    return kiln__fail(KILN_ERR_OUT_OF_HOST_MEMORY,
                      "kiln_program_create: cannot copy %zu bytes of source",
                      source_length);
  }
  memcpy(copy, source, source_length);
  copy[source_length] = '\0';
  program->ctx = ctx;
  program->source = copy;
  program->source_length = source_length;
  atomic_init(&program->children, 0);
  kiln__context_child_added(ctx);
  *out = program;
  return KILN_OK;
}

kiln_status kiln_program_build(kiln_program *program, const char *options,
                               unsigned flags) {
  if (program == NULL)
    return kiln__fail(KILN_ERR_NULL_POINTER,
                      "kiln_program_build: program is NULL");
  if (program->built)
    return kiln__fail(KILN_ERR_INVALID_STATE,
                      "kiln_program_build: the program is already built; "
                      "create a new program to build with other options");
  if ((flags & ~(unsigned)KILN_BUILD_NO_CACHE) != 0)
    return kiln__fail(KILN_ERR_INVALID_ARGUMENT,
                      "kiln_program_build: unknown flags 0x%x",
                      flags & ~(unsigned)KILN_BUILD_NO_CACHE);
  kiln_context *ctx = program->ctx;
  struct kiln__build_request req = {
      .ctx = ctx,
      .source = program->source,
      .source_length = program->source_length,
      .options = options,
      .label = "user",
      .use_cache = (flags & KILN_BUILD_NO_CACHE) == 0 &&
                   (ctx->flags & KILN_CONTEXT_NO_CACHE) == 0,
      .arg_info = true,
  };
  struct kiln__build_result res = {0};
  kiln_status st = kiln__build_program(&req, &res);
  if (res.log != NULL) {
    free(program->log);
    program->log = res.log;
  }
  if (st != KILN_OK)
    return st;
  program->cl = res.program;
  program->from_cache = res.from_cache;
  program->pending_store = res.pending;
  program->built = true;
  return KILN_OK;
}

kiln_status kiln_program_create_built(kiln_context *ctx, const char *source,
                                      const char *options, kiln_program **out) {
  if (out == NULL)
    return kiln__fail(KILN_ERR_NULL_POINTER,
                      "kiln_program_create_built: out is NULL");
  *out = NULL;
  kiln_program *program = NULL;
  kiln_status st = kiln_program_create(ctx, source, 0, &program);
  if (st != KILN_OK)
    return st;
  st = kiln_program_build(program, options, 0);
  if (st != KILN_OK) {
    /* Keep the build failure's message: destroy cannot fail here (no kernels
     * exist yet), so it does not overwrite it. */
    kiln_program_destroy(program);
    return st;
  }
  *out = program;
  return KILN_OK;
}

const char *kiln_program_build_log(const kiln_program *program) {
  if (program == NULL || program->log == NULL)
    return "";
  return program->log;
}

bool kiln_program_from_cache(const kiln_program *program) {
  return program != NULL && program->from_cache;
}

kiln_status kiln_program_destroy(kiln_program *program) {
  if (program == NULL)
    return KILN_OK;
  size_t kernels = atomic_load(&program->children);
  if (kernels > 0)
    return kiln__fail(KILN_ERR_BUSY,
                      "kiln_program_destroy: %zu kernel%s made from the "
                      "program %s still alive; destroy them first",
                      kernels, kernels == 1 ? "" : "s",
                      kernels == 1 ? "is" : "are");
  /* Kernels of the program have run by now, so a driver whose binary grows
   * at launch (KILN_QUIRK_LAZY_PROGRAM_BINARY) gives its complete code. */
  kiln__cache_store_pending(program->ctx, program->cl, program->pending_store);
  if (program->cl != NULL)
    clReleaseProgram(program->cl);
  kiln__context_child_removed(program->ctx);
  free(program->source);
  free(program->log);
  free(program);
  return KILN_OK;
}
