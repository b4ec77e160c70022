/* The public tuning API (kiln/kiln_tune.h): the spaces of the ops that have
 * one ("gemm", ops_gemm_gpu.c; "transpose", "reduce", "elementwise", the
 * small spaces of ops_space.h) and their tuning files (ops_tuning.c).
 * Parameters are checked here against the space and the device before they
 * are recorded or written, so that neither a tuner's mistake nor a bad
 * export can reach a kernel. */
#include "ops_gemm.h"
#include "ops_internal.h"
#include "ops_space.h"
#include "ops_tuning.h"

#include <stdio.h>
#include <string.h>

static kiln_status check_context(const char *fn, const kiln_context *ctx) {
  if (ctx == NULL)
    return kiln__fail(KILN_ERR_NULL_POINTER, "%s: ctx is NULL", fn);
  return KILN_OK;
}

/* The small spaces, by name; GEMM's is handled on its own. */
static const struct kiln__space *const small_spaces[] = {
    &kiln__transpose_space, &kiln__reduce_space, &kiln__elementwise_space};

/* op's small space, or NULL for "gemm" (or an op without a space). */
static const struct kiln__space *small_space(const char *op) {
  for (size_t i = 0; i < sizeof small_spaces / sizeof *small_spaces; i++)
    if (strcmp(small_spaces[i]->name, op) == 0)
      return small_spaces[i];
  return NULL;
}

/* op has a space; else the KILN_ERR_NOT_FOUND failure. */
static kiln_status check_op(const char *fn, const char *op) {
  if (op == NULL)
    return kiln__fail(KILN_ERR_NULL_POINTER, "%s: op is NULL", fn);
  if (strcmp(op, "gemm") != 0 && small_space(op) == NULL)
    return kiln__fail(KILN_ERR_NOT_FOUND,
                      "%s: op \"%.64s\" has no parameter space (ops with "
                      "one: gemm, transpose, reduce, elementwise)",
                      fn, op);
  return KILN_OK;
}

KILN_API kiln_status kiln_tuning_knob_get(const char *op, size_t index,
                                          kiln_tuning_knob *out) {
  static const char fn[] = "kiln_tuning_knob_get";
  kiln_status s = check_op(fn, op);
  if (s != KILN_OK)
    return s;
  if (out == NULL)
    return kiln__fail(KILN_ERR_NULL_POINTER, "%s: out is NULL", fn);
  const struct kiln__space *sp = small_space(op);
  const size_t knobs = sp ? sp->count : KILN__GEMM_GPU_KNOBS;
  if (index >= knobs)
    return kiln__fail(KILN_ERR_OUT_OF_RANGE,
                      "%s: index %zu is past the %zu knobs of %s", fn, index,
                      knobs, op);
  memset(out, 0, sizeof *out);
  if (sp != NULL) {
    const struct kiln__space_knob *k = &sp->knob[index];
    out->name = k->name;
    out->what = k->what;
    out->count = k->count;
    memcpy(out->values, k->values, k->count * sizeof k->values[0]);
    return KILN_OK;
  }
  const struct kiln__gemm_knob *k = &kiln__gemm_gpu_knobs[index];
  out->name = k->name;
  out->what = k->what;
  out->count = k->count;
  memcpy(out->values, k->values, k->count * sizeof k->values[0]);
  return KILN_OK;
}

/* Whether params is a point of op's space (false: why, malformed or a
 * value outside the space) and runs on info's device (*runs; why). */
static bool parse_check(const char *op, const char *params,
                        const kiln_device_info *info, bool *runs, char *why,
                        size_t size) {
  const struct kiln__space *sp = small_space(op);
  *runs = false;
  if (sp != NULL) {
    struct kiln__point p;
    if (!kiln__space_parse(sp, params, &p, why, size) ||
        kiln__space_outside(sp, &p, why, size))
      return false;
    *runs = kiln__space_check(sp, &p, info, true, why, size);
    return true;
  }
  struct kiln__gemm_gpu_params p;
  if (!kiln__gemm_gpu_parse(params, &p, why, size))
    return false;
  /* Outside the listed values is a malformed point; beyond the kernel's
   * rules or the device's limits, one this device cannot run. */
  char space_why[512];
  *runs = kiln__gemm_gpu_check(&p, info, true, space_why, sizeof space_why);
  if (!*runs && kiln__gemm_gpu_check(&p, info, false, why, size)) {
    snprintf(why, size, "%s", space_why);
    return false;
  }
  snprintf(why, size, "%s", space_why);
  return true;
}

/* Parse and check params for ctx's device; the failure names fn. */
static kiln_status check_params(const char *fn, const kiln_context *ctx,
                                const char *op, const char *params,
                                char *reason, size_t size) {
  char why[512] = "";
  kiln_status s = check_context(fn, ctx);
  if (s == KILN_OK)
    s = check_op(fn, op);
  if (s == KILN_OK && params == NULL)
    s = kiln__fail(KILN_ERR_NULL_POINTER, "%s: params is NULL", fn);
  bool runs = false;
  if (s == KILN_OK &&
      !parse_check(op, params, &ctx->device->info, &runs, why, sizeof why))
    s = kiln__fail(KILN_ERR_INVALID_ARGUMENT, "%s: params: %s", fn, why);
  else if (s == KILN_OK && !runs)
    s = kiln__fail(KILN_ERR_UNSUPPORTED, "%s: params: %s", fn, why);
  if (reason != NULL && size > 0)
    snprintf(reason, size, "%s", s == KILN_OK ? "" : kiln_last_error());
  return s;
}

KILN_API kiln_status kiln_tuning_check(const kiln_context *ctx, const char *op,
                                       const char *params, char *reason,
                                       size_t size) {
  return check_params("kiln_tuning_check", ctx, op, params, reason, size);
}

KILN_API kiln_status kiln_tuning_set(kiln_context *ctx, const char *op,
                                     const char *params) {
  static const char fn[] = "kiln_tuning_set";
  kiln_status s = params == NULL ? check_context(fn, ctx)
                                 : check_params(fn, ctx, op, params, NULL, 0);
  if (s == KILN_OK && params == NULL)
    s = check_op(fn, op);
  if (s == KILN_OK)
    s = kiln__tuning_set(ctx, op, params);
  return s;
}

KILN_API kiln_status kiln_tuning_save(kiln_context *ctx, const char *op,
                                      const char *params, const char *figures,
                                      const char *path) {
  static const char fn[] = "kiln_tuning_save";
  kiln_status s = check_params(fn, ctx, op, params, NULL, 0);
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
  kiln_status s = check_context(fn, ctx);
  if (s == KILN_OK)
    s = check_op(fn, op);
  if (s == KILN_OK && info == NULL)
    s = kiln__fail(KILN_ERR_NULL_POINTER, "%s: info is NULL", fn);
  if (s != KILN_OK)
    return s;
  memset(info, 0, sizeof *info);
  const struct kiln__space *sp = small_space(op);
  const char *source = "profile";
  if (sp != NULL) {
    struct kiln__point p;
    s = kiln__space_params(ctx, sp, &p, &source);
    if (s == KILN_OK)
      kiln__space_format(sp, &p, info->params, sizeof info->params);
  } else {
    struct kiln__gemm_gpu_params p;
    s = kiln__gemm_gpu_source(ctx, &p, &source);
    if (s == KILN_OK)
      kiln__gemm_gpu_format(&p, info->params, sizeof info->params);
  }
  if (s != KILN_OK)
    return s;
  /* The CPU family runs its own kernels, which have no space. */
  const bool cpu = kiln__ops_tuning(ctx)->family == KILN_FAMILY_CPU;
  if (cpu)
    info->params[0] = '\0';
  snprintf(info->source, sizeof info->source, "%s",
           cpu ? "profile (CPU family)" : source);
  kiln__tuning_file_info(ctx, op, info);
  return KILN_OK;
}
