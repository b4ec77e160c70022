/* The public tuning API (kiln/kiln_tune.h): the spaces of the ops that have
 * one (the table below; each space is described as a struct
 * kiln__tuning_space) and their tuning files (tuning_file.c).
 * Parameters are checked here against the space and the device before they
 * are recorded, written or built, so that neither a tuner's mistake nor a
 * bad export can reach a kernel. */
#include "tune.h"

#include <stdio.h>
#include <string.h>

/* Every op with a space; add a module's space here. */
static const struct kiln__tuning_space *const spaces[] = {
    &kiln__gemm_tuning_space,        &kiln__transpose_tuning_space,
    &kiln__reduce_tuning_space,      &kiln__elementwise_tuning_space,
    &kiln__gemm_cpu_tuning_space,    &kiln__transpose_cpu_tuning_space,
    &kiln__gemm_mma_tuning_space,    &kiln__conv_tuning_space,
};
#define SPACES (sizeof spaces / sizeof spaces[0])

static kiln_status check_context(const char *fn, const kiln_context *ctx) {
  if (ctx == NULL)
    return kiln__fail(KILN_ERR_NULL_POINTER, "%s: ctx is NULL", fn);
  return KILN_OK;
}

/* op's space into *out; else the KILN_ERR_NOT_FOUND failure. */
static kiln_status find_space(const char *fn, const char *op,
                              const struct kiln__tuning_space **out) {
  if (op == NULL)
    return kiln__fail(KILN_ERR_NULL_POINTER, "%s: op is NULL", fn);
  char names[256] = "";
  size_t used = 0;
  for (size_t i = 0; i < SPACES; i++) {
    if (strcmp(op, spaces[i]->op) == 0) {
      *out = spaces[i];
      return KILN_OK;
    }
    int n = snprintf(names + used, sizeof names - used, "%s%s", i ? ", " : "",
                     spaces[i]->op);
    if (n > 0 && (size_t)n < sizeof names - used)
      used += (size_t)n;
  }
  return kiln__fail(KILN_ERR_NOT_FOUND,
                    "%s: op \"%.64s\" has no parameter space (ops with one: "
                    "%s)",
                    fn, op, names);
}

KILN_API kiln_status kiln_tuning_get_knob(const char *op, size_t index,
                                          kiln_tuning_knob *out) {
  static const char fn[] = "kiln_tuning_get_knob";
  const struct kiln__tuning_space *sp = NULL;
  kiln_status s = find_space(fn, op, &sp);
  if (s != KILN_OK)
    return s;
  if (out == NULL)
    return kiln__fail(KILN_ERR_NULL_POINTER, "%s: out is NULL", fn);
  if (index >= sp->knobs)
    return kiln__fail(KILN_ERR_OUT_OF_RANGE,
                      "%s: index %zu is past the %zu knobs of %s", fn, index,
                      sp->knobs, op);
  memset(out, 0, sizeof *out);
  sp->knob(sp, index, out);
  return KILN_OK;
}

/* Check params for ctx's device; the failure names fn. */
static kiln_status check_params(const char *fn, const kiln_context *ctx,
                                const char *op, const char *params,
                                char *reason, size_t size,
                                const struct kiln__tuning_space **space) {
  const struct kiln__tuning_space *sp = NULL;
  kiln_status s = check_context(fn, ctx);
  if (s == KILN_OK)
    s = find_space(fn, op, &sp);
  if (s == KILN_OK && params == NULL)
    s = kiln__fail(KILN_ERR_NULL_POINTER, "%s: params is NULL", fn);
  if (s == KILN_OK) {
    char why[512] = "";
    s = sp->check(sp, ctx, params, why, sizeof why);
    if (s != KILN_OK)
      s = kiln__fail(s, "%s: params: %s", fn, why);
  }
  if (reason != NULL && size > 0)
    snprintf(reason, size, "%s", s == KILN_OK ? "" : kiln_last_error());
  if (space != NULL)
    *space = sp;
  return s;
}

KILN_API kiln_status kiln_tuning_check(const kiln_context *ctx, const char *op,
                                       const char *params, char *reason,
                                       size_t size) {
  return check_params("kiln_tuning_check", ctx, op, params, reason, size,
                      NULL);
}

KILN_API kiln_status kiln_tuning_set(kiln_context *ctx, const char *op,
                                     const char *params) {
  static const char fn[] = "kiln_tuning_set";
  const struct kiln__tuning_space *sp = NULL;
  kiln_status s = params == NULL
                      ? check_context(fn, ctx)
                      : check_params(fn, ctx, op, params, NULL, 0, NULL);
  if (s == KILN_OK && params == NULL)
    s = find_space(fn, op, &sp);
  if (s == KILN_OK)
    s = kiln__tuning_set(ctx, op, params);
  return s;
}

KILN_API kiln_status kiln_tuning_build(kiln_context *ctx, const char *op,
                                       const char *params) {
  const struct kiln__tuning_space *sp = NULL;
  kiln_status s =
      check_params("kiln_tuning_build", ctx, op, params, NULL, 0, &sp);
  if (s != KILN_OK)
    return s;
  /* Counted as a child of ctx while it runs, so that destroying ctx then
   * fails (KILN_ERR_BUSY) instead of freeing the memo the build writes to:
   * a tuner abandons a build that runs past its timeout without waiting. */
  kiln__context_child_added(ctx);
  s = sp->build(sp, ctx, params);
  kiln__context_child_removed(ctx);
  return s;
}

KILN_API kiln_status kiln_tuning_save(kiln_context *ctx, const char *op,
                                      const char *params, const char *figures,
                                      const char *path) {
  static const char fn[] = "kiln_tuning_save";
  kiln_status s = check_params(fn, ctx, op, params, NULL, 0, NULL);
  if (s == KILN_OK)
    s = kiln__tuning_write(fn, ctx, op, params, figures, path);
  return s;
}

KILN_API kiln_status kiln_tuning_reset(kiln_context *ctx, const char *path) {
  static const char fn[] = "kiln_tuning_reset";
  kiln_status s = check_context(fn, ctx);
  if (s == KILN_OK)
    s = kiln__tuning_remove(fn, ctx, path);
  return s;
}

KILN_API kiln_status kiln_tuning_get_info(const kiln_context *ctx,
                                          const char *op,
                                          kiln_tuning_info *info) {
  static const char fn[] = "kiln_tuning_get_info";
  const struct kiln__tuning_space *sp = NULL;
  kiln_status s = check_context(fn, ctx);
  if (s == KILN_OK)
    s = find_space(fn, op, &sp);
  if (s == KILN_OK && info == NULL)
    s = kiln__fail(KILN_ERR_NULL_POINTER, "%s: info is NULL", fn);
  if (s != KILN_OK)
    return s;
  memset(info, 0, sizeof *info);
  const char *source = "profile";
  s = sp->in_effect(sp, ctx, info->params, sizeof info->params, &source);
  if (s != KILN_OK)
    return s;
  snprintf(info->source, sizeof info->source, "%s", source);
  if (sp->used != NULL)
    sp->used(sp, ctx, info->used, sizeof info->used);
  kiln__tuning_file_info(ctx, op, info);
  return KILN_OK;
}
