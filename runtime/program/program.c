/* User programs: create from source, build (through build.c's one build
 * path, which uses the persistent cache), build logs. */
#include <stdlib.h>
#include <string.h>

#include "program.h"

/* Put before a user's source when it is compiled, so that compilers name it
 * "<source>" with the user's own line numbers in their messages, instead of
 * a temporary file of the driver's (PoCL: ~/.cache/pocl/kcache/
 * tempfile_XXXXXX.cl). #line is part of OpenCL C's (C99) preprocessor. */
#define SOURCE_NAME_LINE "#line 1 \"<source>\"\n"

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
  size_t named_length = strlen(SOURCE_NAME_LINE) + program->source_length;
  char *named = malloc(named_length + 1);
  if (named == NULL)
    return kiln__fail(KILN_ERR_OUT_OF_HOST_MEMORY,
                      "kiln_program_build: cannot copy %zu bytes of source",
                      program->source_length);
  memcpy(named, SOURCE_NAME_LINE, strlen(SOURCE_NAME_LINE));
  memcpy(named + strlen(SOURCE_NAME_LINE), program->source,
         program->source_length + 1);
  struct kiln__build_request req = {
      .ctx = ctx,
      .source = named,
      .source_length = named_length,
      .options = options,
      .label = "user",
      .use_cache = (flags & KILN_BUILD_NO_CACHE) == 0 &&
                   (ctx->flags & KILN_CONTEXT_NO_CACHE) == 0,
      .arg_info = true,
  };
  struct kiln__build_result res = {0};
  kiln_status st = kiln__build_program(&req, &res);
  free(named);
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

const char *kiln_program_get_build_log(const kiln_program *program) {
  if (program == NULL || program->log == NULL)
    return "";
  return program->log;
}

bool kiln_program_is_from_cache(const kiln_program *program) {
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
