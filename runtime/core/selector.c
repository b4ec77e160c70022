/* Device selection: the selector grammar of kiln_device.h, parsed once into
 * terms, then evaluated against every device of a list with a reason for
 * each device, so "why was my GPU not used?" always has an answer.
 *
 * The parser (selector_parse.c) reports the 1-based column of the first
 * offending character and what it expected there; the evaluator never
 * fails. */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "internal.h"
#include "selector_parse.h"

#define REASON_CAPACITY 512

struct kiln_selection {
  const kiln_device_list *list;
  char *selector;            /* what was evaluated, or "<default>" */
  const kiln_device **taken; /* in list order */
  size_t taken_count;
  bool *is_taken;            /* per list device */
  char **reasons;            /* per list device */
};

/* ---- evaluation ---------------------------------------------------------- */

static const char *vendor_label(enum kiln_vendor v) {
  switch (v) {
  case KILN_VENDOR_NVIDIA: return "NVIDIA";
  case KILN_VENDOR_AMD: return "AMD";
  case KILN_VENDOR_INTEL: return "Intel";
  case KILN_VENDOR_UNKNOWN: break;
  }
  return "unknown";
}

/* Print a byte count in binary units for reasons ("3.8 GiB"). */
static void format_bytes(uint64_t bytes, char *out, size_t cap) {
  static const char *const units[] = {"bytes", "KiB", "MiB", "GiB", "TiB"};
  double v = (double)bytes;
  size_t u = 0;
  while (v >= 1024.0 && u + 1 < sizeof units / sizeof units[0]) {
    v /= 1024.0;
    u++;
  }
  if (u == 0)
    snprintf(out, cap, "%llu bytes", (unsigned long long)bytes);
  else
    snprintf(out, cap, "%.4g %s", v, units[u]);
}

/* Whether device d matches term t; when not, why (without the term's name,
 * which the caller appends). */
static bool term_matches(const struct term *t, const kiln_device *d,
                         char *why, size_t cap) {
  const kiln_device_info *in = &d->info;
  enum kiln_vendor vendor = kiln__backend_vendor(in->vendor_id, in->vendor);
  char have[32], want[32];
  switch (t->kind) {
  case T_ALL:
    return true;
  case T_GPU:
  case T_CPU:
  case T_ACCEL: {
    kiln_device_type wanted = t->kind == T_GPU   ? KILN_DEVICE_GPU
                              : t->kind == T_CPU ? KILN_DEVICE_CPU
                                                 : KILN_DEVICE_ACCELERATOR;
    if (in->type == wanted)
      return true;
    snprintf(why, cap, "type is %s, not %s", kiln_device_type_name(in->type),
             kiln_device_type_name(wanted));
    return false;
  }
  case T_NVIDIA:
  case T_AMD:
  case T_INTEL: {
    enum kiln_vendor wanted = t->kind == T_NVIDIA ? KILN_VENDOR_NVIDIA
                              : t->kind == T_AMD  ? KILN_VENDOR_AMD
                                                  : KILN_VENDOR_INTEL;
    if (vendor == wanted)
      return true;
    snprintf(why, cap, "vendor is '%.60s' (id 0x%x), not %s", in->vendor,
             (unsigned)in->vendor_id, vendor_label(wanted));
    return false;
  }
  case T_POCL:
  case T_RUSTICL: {
    bool ok = t->kind == T_POCL ? kiln__backend_is_pocl(in->platform_name)
                                : kiln__backend_is_rusticl(in->platform_name);
    if (!ok)
      snprintf(why, cap, "platform is '%.60s', not %s", in->platform_name,
               t->kind == T_POCL ? "PoCL" : "rusticl");
    return ok;
  }
  case T_INDEX:
    if (in->platform_index == t->a && in->device_index == t->b)
      return true;
    snprintf(why, cap, "is device %zu:%zu, not %llu:%llu", in->platform_index,
             in->device_index, (unsigned long long)t->a,
             (unsigned long long)t->b);
    return false;
  case T_NAME:
    if (kiln__contains_nocase(in->name, t->arg))
      return true;
    snprintf(why, cap, "name '%.80s' does not contain '%.80s'", in->name,
             t->arg);
    return false;
  case T_ID:
    if (strcasecmp(in->stable_id, t->arg) == 0)
      return true;
    snprintf(why, cap, "stable id is %s, not %.60s", in->stable_id, t->arg);
    return false;
  case T_UUID:
    if (strncmp(in->stable_id, "uuid-", 5) == 0 &&
        strcmp(in->stable_id + 5, t->arg) == 0)
      return true;
    if (strncmp(in->stable_id, "uuid-", 5) == 0)
      snprintf(why, cap, "UUID is %s, not %s", in->stable_id + 5, t->arg);
    else
      snprintf(why, cap, "the driver reports no UUID (no cl_khr_device_uuid)");
    return false;
  case T_PROFILE:
    if (strcasecmp(in->profile, t->arg) == 0)
      return true;
    snprintf(why, cap, "profile is %s, not %s", in->profile, t->arg);
    return false;
  case T_FP16:
    if (in->fp16)
      return true;
    snprintf(why, cap, "no fp16 (cl_khr_fp16 with a non-zero half config)");
    return false;
  case T_FP64:
    if (in->fp64)
      return true;
    snprintf(why, cap, "no fp64 (CL_DEVICE_DOUBLE_FP_CONFIG is 0)");
    return false;
  case T_SUBGROUPS:
    if (in->subgroups)
      return true;
    snprintf(why, cap, "no sub-groups");
    return false;
  case T_MEM:
    if (in->global_mem_bytes >= t->a)
      return true;
    format_bytes(in->global_mem_bytes, have, sizeof have);
    format_bytes(t->a, want, sizeof want);
    snprintf(why, cap, "global memory %s < %s", have, want);
    return false;
  case T_CU:
    if (in->compute_units >= t->a)
      return true;
    snprintf(why, cap, "%u compute units < %llu", (unsigned)in->compute_units,
             (unsigned long long)t->a);
    return false;
  }
  snprintf(why, cap, "unknown term");
  return false;
}

/* Whether d matches every term of alt; when not, the first failure as
 * "<why> (term '<text>', column N)". */
static bool alt_matches(const struct alternative *alt, const kiln_device *d,
                        char *why, size_t cap) {
  for (size_t i = 0; i < alt->count; i++) {
    char r[REASON_CAPACITY];
    if (!term_matches(&alt->terms[i], d, r, sizeof r)) {
      snprintf(why, cap, "%.400s (term '%.60s', column %zu)", r,
               alt->terms[i].text, alt->terms[i].column);
      return false;
    }
  }
  return true;
}

void kiln_selection_destroy(kiln_selection *selection) {
  if (selection == NULL)
    return;
  size_t n = kiln_device_list_get_count(selection->list);
  if (selection->reasons != NULL)
    for (size_t i = 0; i < n; i++)
      free(selection->reasons[i]);
  free(selection->reasons);
  free(selection->is_taken);
  free(selection->taken);
  free(selection->selector);
  free(selection);
}

/* The selector text in force: the argument, else KILN_DEVICE, else NULL for
 * the default rule. */
static const char *effective_selector(const char *selector, bool *from_env) {
  *from_env = false;
  if (selector != NULL)
    for (const char *c = selector; *c != '\0'; c++)
      if (!isspace((unsigned char)*c))
        return selector;
  const char *env = getenv("KILN_DEVICE");
  if (env != NULL)
    for (const char *c = env; *c != '\0'; c++)
      if (!isspace((unsigned char)*c)) {
        *from_env = true;
        return env;
      }
  return NULL;
}

/* Fill reasons and taken devices for the winning alternative (or none). */
static kiln_status evaluate(kiln_selection *sel, const struct parsed *ps,
                            bool default_rule) {
  size_t n = kiln_device_list_get_count(sel->list);
  size_t winner = SIZE_MAX;
  char why[REASON_CAPACITY];
  for (size_t a = 0; a < ps->count && winner == SIZE_MAX; a++)
    for (size_t i = 0; i < n && winner == SIZE_MAX; i++)
      if (alt_matches(&ps->alts[a], kiln_device_list_get(sel->list, i), why,
                      sizeof why))
        winner = a;
  for (size_t i = 0; i < n; i++) {
    const kiln_device *d = kiln_device_list_get(sel->list, i);
    char text[REASON_CAPACITY * 3];
    size_t used = 0;
    if (winner != SIZE_MAX &&
        alt_matches(&ps->alts[winner], d, why, sizeof why)) {
      sel->is_taken[i] = true;
      sel->taken[sel->taken_count++] = d;
      if (default_rule)
        snprintf(text, sizeof text, "taken: default rule, %s",
                 ps->alts[winner].terms[0].kind == T_GPU
                     ? "every GPU"
                     : "no GPU present, so every CPU");
      else
        snprintf(text, sizeof text, "taken: matches %s", ps->alts[winner].text);
    } else if (winner != SIZE_MAX && default_rule) {
      /* Name no term or column: the user wrote no selector. */
      term_matches(&ps->alts[winner].terms[0], d, why, sizeof why);
      snprintf(text, sizeof text, "refused: default rule takes %s; %s",
               ps->alts[winner].terms[0].kind == T_GPU
                   ? "only GPUs when there is one"
                   : "only CPUs when there is no GPU",
               why);
    } else if (winner != SIZE_MAX) {
      alt_matches(&ps->alts[winner], d, why, sizeof why);
      if (winner == 0)
        snprintf(text, sizeof text, "refused: %s", why);
      else
        snprintf(text, sizeof text,
                 "refused: %s (alternative %zu '%.80s' decides: the ones "
                 "before it took no device)",
                 why, winner + 1, ps->alts[winner].text);
    } else {
      used = (size_t)snprintf(text, sizeof text, "refused: ");
      for (size_t a = 0; a < ps->count && used < sizeof text; a++) {
        alt_matches(&ps->alts[a], d, why, sizeof why);
        used += (size_t)snprintf(text + used, sizeof text - used, "%s%s",
                                 a ? " | " : "", why);
      }
    }
    sel->reasons[i] = strdup(text);
    if (sel->reasons[i] == NULL)
      return kiln__fail(KILN_ERR_OUT_OF_HOST_MEMORY,
                        "kiln_selection_create: out of host memory");
  }
  return KILN_OK;
}

kiln_status kiln_selection_create(const kiln_device_list *list,
                                  const char *selector, kiln_selection **out) {
  if (out == NULL)
    return kiln__fail(KILN_ERR_NULL_POINTER,
                      "kiln_selection_create: out is NULL");
  *out = NULL;
  if (list == NULL)
    return kiln__fail(KILN_ERR_NULL_POINTER,
                      "kiln_selection_create: list is NULL");
  bool from_env;
  const char *text = effective_selector(selector, &from_env);
  bool default_rule = text == NULL;
  struct parsed ps = {0};
  kiln_status st = kiln__selector_parse(default_rule ? "gpu|cpu" : text,
                         from_env ? "KILN_DEVICE selector" : "selector", &ps);
  if (st != KILN_OK)
    return st;
  size_t n = kiln_device_list_get_count(list);
  kiln_selection *sel = calloc(1, sizeof *sel);
  if (sel == NULL)
    goto oom;
  sel->list = list;
  sel->selector = strdup(default_rule ? "<default>" : text);
  sel->taken = calloc(n ? n : 1, sizeof *sel->taken);
  sel->is_taken = calloc(n ? n : 1, sizeof *sel->is_taken);
  sel->reasons = calloc(n ? n : 1, sizeof *sel->reasons);
  if (sel->selector == NULL || sel->taken == NULL || sel->is_taken == NULL ||
      sel->reasons == NULL)
    goto oom;
  st = evaluate(sel, &ps, default_rule);
  if (st != KILN_OK)
    goto fail;
  kiln__selector_parsed_free(&ps);
  *out = sel;
  return KILN_OK;
oom:
  st = kiln__fail(KILN_ERR_OUT_OF_HOST_MEMORY,
                  "kiln_selection_create: out of host memory");
fail:
  kiln__selector_parsed_free(&ps);
  kiln_selection_destroy(sel);
  return st;
}

size_t kiln_selection_get_count(const kiln_selection *selection) {
  return selection != NULL ? selection->taken_count : 0;
}

const kiln_device *kiln_selection_get(const kiln_selection *selection,
                                      size_t index) {
  if (selection == NULL || index >= selection->taken_count)
    return NULL;
  return selection->taken[index];
}

const char *kiln_selection_get_explanation(const kiln_selection *selection,
                                           size_t list_index, bool *taken) {
  if (selection == NULL ||
      list_index >= kiln_device_list_get_count(selection->list))
    return NULL;
  if (taken != NULL)
    *taken = selection->is_taken[list_index];
  return selection->reasons[list_index];
}

const char *kiln_selection_get_selector(const kiln_selection *selection) {
  return selection != NULL ? selection->selector : NULL;
}

kiln_status kiln_device_select(const kiln_device_list *list,
                               const char *selector, const kiln_device **out) {
  if (out == NULL)
    return kiln__fail(KILN_ERR_NULL_POINTER, "kiln_device_select: out is NULL");
  *out = NULL;
  if (list == NULL)
    return kiln__fail(KILN_ERR_NULL_POINTER,
                      "kiln_device_select: list is NULL");
  kiln_selection *sel = NULL;
  kiln_status st = kiln_selection_create(list, selector, &sel);
  if (st != KILN_OK)
    return st;
  if (sel->taken_count > 0) {
    *out = sel->taken[0];
    kiln_selection_destroy(sel);
    return KILN_OK;
  }
  /* Name every device and why it was refused; the message is capped by the
   * error buffer, so a long list ends truncated rather than failing. */
  char msg[3072];
  size_t n = kiln_device_list_get_count(list);
  size_t used = (size_t)snprintf(msg, sizeof msg,
                                 "kiln_device_select: no device matches "
                                 "selector \"%.200s\"",
                                 sel->selector);
  if (n == 0 && used < sizeof msg) {
    /* The problem that says why, else the first. */
    const kiln_device_problem *pr = kiln__device_list_explaining_problem(list);
    if (pr == NULL)
      pr = kiln_device_list_get_problem(list, 0);
    used += (size_t)snprintf(msg + used, sizeof msg - used,
                             ": no OpenCL device was found%s%.1000s",
                             pr ? " (" : "", pr ? pr->message : "");
    if (pr != NULL && used < sizeof msg)
      used += (size_t)snprintf(msg + used, sizeof msg - used, ")");
  }
  for (size_t i = 0; i < n && used < sizeof msg; i++) {
    const kiln_device_info *in = kiln_device_get_info(
        kiln_device_list_get(list, i));
    used += (size_t)snprintf(msg + used, sizeof msg - used,
                             "%s %zu:%zu '%.80s' %s", i ? ";" : ":",
                             in->platform_index, in->device_index, in->name,
                             sel->reasons[i]);
  }
  kiln_selection_destroy(sel);
  return kiln__fail(KILN_ERR_NO_DEVICE, "%s", msg);
}
