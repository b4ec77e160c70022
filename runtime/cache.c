/* The persistent program cache (first cut: builds from source only). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "build.h"
#include "internal.h"

kiln_status kiln__build_program(const struct kiln__build_request *req,
                                struct kiln__build_result *out) {
  memset(out, 0, sizeof *out);
  const char *profile = req->ctx->backend != NULL &&
                                req->ctx->backend->build_options != NULL
                            ? req->ctx->backend->build_options
                            : "";
  const char *user = req->options != NULL ? req->options : "";
  const char *arg_info = req->arg_info ? "-cl-kernel-arg-info" : "";
  size_t n = strlen(profile) + strlen(user) + strlen(arg_info) + 3;
  char *options = malloc(n);
  if (options == NULL)
    return kiln__fail(KILN_ERR_OUT_OF_HOST_MEMORY,
                      "cannot allocate the build options");
  snprintf(options, n, "%s %s %s", profile, user, arg_info);
  kiln_status st = kiln__compile_source(req->ctx, req->source,
                                        req->source_length, options,
                                        &out->program, &out->log);
  free(options);
  return st;
}
