/* The small parameter spaces' shared machinery (tune.h): checking a
 * point against its space and a device, its text forms, the point in
 * effect on a context (test override, then kiln_tuning_set, the tuning
 * file or the tuning database, then the profile), and the callbacks of the
 * spaces' entries in the tuning API's table. The spaces themselves are
 * data in the modules of their kernels. */
#include "tune.h"

#include <stdio.h>
#include <string.h>

const struct kiln_tuning *kiln__ops_tuning(const kiln_context *ctx) {
  static const struct kiln_tuning defaults = {0};
  if (ctx->backend != NULL && ctx->backend->tuning != NULL)
    return ctx->backend->tuning;
  return &defaults;
}

size_t kiln__ops_local_size(const kiln_context *ctx, size_t want) {
  if (want == 0)
    want = 64;
  size_t max = ctx->device != NULL ? ctx->device->info.max_work_group_size : 0;
  if (max != 0 && want > max)
    want = max;
  size_t p = 1;
  while (p * 2 <= want)
    p *= 2;
  return p;
}

bool kiln__space_outside(const struct kiln__space *sp,
                         const struct kiln__point *p, char *reason,
                         size_t size) {
  for (size_t i = 0; i < sp->count; i++) {
    const struct kiln__space_knob *k = &sp->knob[i];
    bool found = false;
    for (unsigned j = 0; j < k->count; j++)
      found = found || k->values[j] == p->v[i];
    if (!found) {
      snprintf(reason, size, "%s %u is not one of the values of the space",
               k->name, p->v[i]);
      return true;
    }
  }
  return false;
}

bool kiln__space_check(const struct kiln__space *sp,
                       const struct kiln__point *p,
                       const kiln_device_info *info, bool in_space,
                       char *reason, size_t size) {
  for (size_t i = 0; i < sp->count; i++)
    if (p->v[i] == 0 && sp->knob[i].values[0] != 0) {
      snprintf(reason, size, "%s is 0", sp->knob[i].name);
      return false;
    }
  if (in_space && kiln__space_outside(sp, p, reason, size))
    return false;
  return sp->check(p, info, reason, size);
}

bool kiln__space_check_wg(unsigned wg, const kiln_device_info *info,
                          char *reason, size_t size) {
  if (wg & (wg - 1)) {
    snprintf(reason, size, "WG %u is not a power of two", wg);
    return false;
  }
  const size_t most = info->max_work_group_size < info->max_work_item_sizes[0]
                          ? info->max_work_group_size
                          : info->max_work_item_sizes[0];
  if (wg > most) {
    snprintf(reason, size,
             "work-groups of %u work-items exceed the device's %zu", wg,
             most);
    return false;
  }
  return true;
}

int kiln__space_format(const struct kiln__space *sp,
                       const struct kiln__point *p, char *buf, size_t size) {
  size_t used = 0;
  for (size_t i = 0; i < sp->count; i++) {
    int n = snprintf(buf + used, used < size ? size - used : 0, "%s%s=%u",
                     i ? " " : "", sp->knob[i].name, p->v[i]);
    if (n < 0)
      return n;
    used += (size_t)n;
  }
  if (sp->count == 0 && size > 0)
    buf[0] = '\0';
  return (int)used;
}

bool kiln__knobs_parse(const char *text, const char *what,
                       const char *const *names, size_t count,
                       unsigned *values, char *reason, size_t size) {
  bool seen[64] = {false};
  if (count > 64) {
    snprintf(reason, size, "%s: too many knobs", what);
    return false;
  }
  const char *s = text;
  for (;;) {
    s += strspn(s, " ,");
    if (*s == '\0')
      break;
    const size_t len = strcspn(s, "=, ");
    size_t i = 0;
    while (i < count &&
           !(strlen(names[i]) == len && strncmp(names[i], s, len) == 0))
      i++;
    if (i == count || s[len] != '=') {
      snprintf(reason, size, "\"%.*s\" is not NAME=VALUE for a %s knob",
               (int)(len < 40 ? len : 40), s, what);
      return false;
    }
    s += len + 1;
    unsigned long v = 0;
    size_t digits = 0;
    while (s[digits] >= '0' && s[digits] <= '9' && digits < 6)
      v = v * 10 + (unsigned long)(s[digits++] - '0');
    if (digits == 0 || (s[digits] && s[digits] != ' ' && s[digits] != ',')) {
      snprintf(reason, size, "the value of %s is not a small number",
               names[i]);
      return false;
    }
    if (seen[i] && values[i] != (unsigned)v) {
      snprintf(reason, size, "%s is given twice, as %u and as %lu", names[i],
               values[i], v);
      return false;
    }
    values[i] = (unsigned)v;
    seen[i] = true;
    s += digits;
  }
  for (size_t i = 0; i < count; i++)
    if (!seen[i]) {
      snprintf(reason, size, "%s is missing", names[i]);
      return false;
    }
  return true;
}

bool kiln__space_parse(const struct kiln__space *sp, const char *text,
                       struct kiln__point *p, char *reason, size_t size) {
  const char *names[KILN__SPACE_KNOBS];
  for (size_t i = 0; i < sp->count; i++)
    names[i] = sp->knob[i].name;
  return kiln__knobs_parse(text, sp->name, names, sp->count, p->v, reason,
                           size);
}

void kiln__space_options(const struct kiln__space *sp,
                         const struct kiln__point *p, char *buf, size_t size) {
  size_t used = strlen(buf);
  for (size_t i = 0; i < sp->count && used < size; i++) {
    int n = snprintf(buf + used, size - used, "%s-D%s=%u", used ? " " : "",
                     sp->knob[i].name, p->v[i]);
    if (n < 0)
      break;
    used += (size_t)n;
  }
}

/* ---- the point in effect -------------------------------------------------- */

/* Tests' overrides, one slot per space: flag and point set under no lock,
 * since tests set them between ops on one thread; atomic only so that it
 * is not a data race. */
#define SLOTS 8
static const struct kiln__space *_Atomic override_space[SLOTS];
static _Atomic bool override_set[SLOTS];
static struct kiln__point override_point[SLOTS];

static size_t slot_of(const struct kiln__space *sp) {
  size_t i = 0;
  while (i < SLOTS && atomic_load(&override_space[i]) != sp &&
         atomic_load(&override_space[i]) != NULL)
    i++;
  return i;
}

void kiln__space_set_override(const struct kiln__space *sp,
                              const struct kiln__point *p) {
  const size_t i = slot_of(sp);
  if (i == SLOTS)
    return; /* more spaces than slots: a bug caught by the space tests */
  atomic_store(&override_set[i], false);
  atomic_store(&override_space[i], sp);
  if (p != NULL) {
    override_point[i] = *p;
    atomic_store(&override_set[i], true);
  }
  kiln__variants_stale();
}

kiln_status kiln__space_params(const kiln_context *ctx,
                               const struct kiln__space *sp,
                               struct kiln__point *p, const char **source) {
  const kiln_device_info *info = &ctx->device->info;
  char reason[256];
  const size_t i = slot_of(sp);
  if (i < SLOTS && atomic_load(&override_set[i])) {
    *source = "test override";
    *p = override_point[i];
    if (!kiln__space_check(sp, p, info, false, reason, sizeof reason))
      return kiln__fail(KILN_ERR_UNSUPPORTED,
                        "%s parameters rejected for %s: %s", sp->name,
                        info->name, reason);
    return KILN_OK;
  }
  char text[KILN_TUNING_TEXT_CAPACITY];
  const char *from = NULL;
  /* A rejected file line gives way to the database row, and that to the
   * profile (kiln_tuning_set checks before it records: never rejected). */
  while (kiln__tuning_lookup(ctx, sp->name, text, sizeof text, &from)) {
    if (kiln__space_parse(sp, text, p, reason, sizeof reason) &&
        kiln__space_check(sp, p, info, true, reason, sizeof reason)) {
      *source = from;
      return KILN_OK;
    }
    kiln__tuning_reject(ctx, sp->name, reason);
  }
  *source = "profile";
  sp->defaults(ctx, p);
  return KILN_OK;
}

/* ---- the spaces' entries in the tuning API's table ------------------------- */

void kiln__space_knob(const struct kiln__tuning_space *self, size_t index,
                      kiln_tuning_knob *out) {
  const struct kiln__space_knob *k = &self->small->knob[index];
  out->name = k->name;
  out->what = k->what;
  out->count = k->count;
  memcpy(out->values, k->values, k->count * sizeof k->values[0]);
}

kiln_status kiln__space_check_params(const struct kiln__tuning_space *self,
                                     const kiln_context *ctx,
                                     const char *params, char *why,
                                     size_t size) {
  struct kiln__point p;
  if (!kiln__space_parse(self->small, params, &p, why, size) ||
      kiln__space_outside(self->small, &p, why, size))
    return KILN_ERR_INVALID_ARGUMENT;
  /* A point of the space beyond the kernel's rules or the device's
   * limits is one this device cannot run. */
  return kiln__space_check(self->small, &p, &ctx->device->info, true, why,
                           size)
             ? KILN_OK
             : KILN_ERR_UNSUPPORTED;
}

kiln_status kiln__space_in_effect(const struct kiln__tuning_space *self,
                                  const kiln_context *ctx, char *params,
                                  size_t size, const char **source) {
  struct kiln__point p;
  kiln_status s = kiln__space_params(ctx, self->small, &p, source);
  if (s != KILN_OK)
    return s;
  /* The other family runs its own kernels, which are not of this space. */
  const enum kiln_kernel_family family = kiln__ops_tuning(ctx)->family;
  if (family != self->small->family) {
    *source = family == KILN_FAMILY_CPU ? "profile (CPU family)"
                                        : "profile (GPU family)";
    params[0] = '\0';
  } else {
    kiln__space_format(self->small, &p, params, size);
  }
  return KILN_OK;
}

kiln_status kiln__space_build(const struct kiln__tuning_space *self,
                              kiln_context *ctx, const char *params) {
  struct kiln__point p;
  char why[256], options[160] = "";
  if (!kiln__space_parse(self->small, params, &p, why, sizeof why))
    return kiln__fail(KILN_ERR_INVALID_ARGUMENT, "%s params: %s",
                      self->op, why);
  self->small->options(&p, KILN_F32, options, sizeof options);
  cl_program program; /* owned by ctx's memo, as a launch's would be */
  return kiln__op_program(ctx, self->small->program, options, &program);
}
