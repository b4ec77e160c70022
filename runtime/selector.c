/* Device selection: the selector grammar of kiln_device.h, parsed once into
 * terms, then evaluated against every device of a list with a reason for
 * each device, so "why was my GPU not used?" always has an answer.
 *
 * The parser reports the 1-based column of the first offending character and
 * what it expected there; the evaluator never fails. */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "internal.h"

#define REASON_CAPACITY 512

enum term_kind {
  T_ALL, T_GPU, T_CPU, T_ACCEL, T_NVIDIA, T_AMD, T_INTEL, T_POCL, T_RUSTICL,
  T_INDEX, T_NAME, T_ID, T_UUID, T_PROFILE, T_FP16, T_FP64, T_SUBGROUPS,
  T_MEM, T_CU,
};

struct term {
  enum term_kind kind;
  size_t column;       /* 1-based, of the term's first character */
  char *text;          /* the term as written, for reasons */
  char *arg;           /* name:/id:/uuid:/profile: argument (normalised) */
  uint64_t a, b;       /* P:D, mem>= bytes, cu>= count */
};

struct alternative {
  struct term *terms;
  size_t count;
  char *text; /* as written, trimmed */
};

struct parsed {
  struct alternative *alts;
  size_t count;
};

struct kiln_selection {
  const kiln_device_list *list;
  char *selector;            /* what was evaluated, or "<default>" */
  const kiln_device **taken; /* in list order */
  size_t taken_count;
  bool *is_taken;            /* per list device */
  char **reasons;            /* per list device */
};

/* ---- parsing ------------------------------------------------------------- */

/* Simple keyword terms. */
static const struct {
  const char *word;
  enum term_kind kind;
} keywords[] = {
    {"all", T_ALL},         {"gpu", T_GPU},         {"cpu", T_CPU},
    {"accelerator", T_ACCEL}, {"nvidia", T_NVIDIA}, {"amd", T_AMD},
    {"intel", T_INTEL},     {"pocl", T_POCL},       {"rusticl", T_RUSTICL},
    {"fp16", T_FP16},       {"fp64", T_FP64},       {"subgroups", T_SUBGROUPS},
};

static const char expected_terms[] =
    "gpu, cpu, accelerator, nvidia, amd, intel, pocl, rusticl, P:D, "
    "name:TEXT, id:ID, uuid:HEX, profile:NAME, fp16, fp64, subgroups, "
    "mem>=SIZE, cu>=N or all";

struct parser {
  const char *src;   /* the whole selector */
  const char *where; /* "selector" or "KILN_DEVICE selector" */
  size_t pos;
};

/* "selector "gpu,,x": expected a term at column 5", plus "; expected ..."
 * when hint is not NULL. */
static kiln_status syntax_error_hint(const struct parser *p, size_t pos,
                                     const char *what, const char *hint) {
  return kiln__fail(KILN_ERR_SELECTOR_SYNTAX,
                    "%s \"%.200s\": %s at column %zu%s%s", p->where, p->src,
                    what, pos + 1, hint ? "; expected " : "", hint ? hint : "");
}

static kiln_status syntax_error(const struct parser *p, size_t pos,
                                const char *what) {
  return syntax_error_hint(p, pos, what, NULL);
}

static void skip_spaces(struct parser *p) {
  while (p->src[p->pos] != '\0' && isspace((unsigned char)p->src[p->pos]))
    p->pos++;
}

static char *dup_range(const char *s, size_t n) {
  char *d = malloc(n + 1);
  if (d != NULL) {
    memcpy(d, s, n);
    d[n] = '\0';
  }
  return d;
}

/* Decimal digits at p->pos into *value; false if none or overflowing. */
static bool parse_number(struct parser *p, uint64_t *value) {
  size_t start = p->pos;
  uint64_t v = 0;
  while (isdigit((unsigned char)p->src[p->pos])) {
    unsigned d = (unsigned)(p->src[p->pos] - '0');
    if (v > (UINT64_MAX - d) / 10)
      return false;
    v = v * 10 + d;
    p->pos++;
  }
  *value = v;
  return p->pos > start;
}

/* TEXT of name:/id:/uuid:/profile: runs to the next ',' or '|', trimmed. */
static kiln_status parse_text(struct parser *p, struct term *t,
                              const char *what) {
  skip_spaces(p);
  size_t start = p->pos;
  while (p->src[p->pos] != '\0' && p->src[p->pos] != ',' &&
         p->src[p->pos] != '|')
    p->pos++;
  size_t end = p->pos;
  while (end > start && isspace((unsigned char)p->src[end - 1]))
    end--;
  if (end == start)
    return syntax_error(p, start, what);
  t->arg = dup_range(p->src + start, end - start);
  if (t->arg == NULL)
    return kiln__fail(KILN_ERR_OUT_OF_HOST_MEMORY,
                      "kiln_selection_create: out of host memory");
  return KILN_OK;
}

/* uuid:HEX: 32 hex digits, dashes allowed anywhere (clinfo prints
 * 8-4-4-4-12), normalised to lowercase without dashes. */
static kiln_status check_uuid(const struct parser *p, struct term *t,
                              size_t arg_pos) {
  size_t w = 0;
  for (size_t r = 0; t->arg[r] != '\0'; r++) {
    char c = t->arg[r];
    if (c == '-')
      continue;
    if (!isxdigit((unsigned char)c) || w == 32)
      return syntax_error(p, arg_pos + r,
                          "expected 32 hexadecimal digits after 'uuid:'");
    t->arg[w++] = (char)tolower((unsigned char)c);
  }
  t->arg[w] = '\0';
  if (w != 32)
    return syntax_error(p, arg_pos,
                        "expected 32 hexadecimal digits after 'uuid:'");
  return KILN_OK;
}

static kiln_status parse_term(struct parser *p, struct term *t) {
  skip_spaces(p);
  size_t start = p->pos;
  const char *s = p->src;
  t->column = start + 1;
  kiln_status st = KILN_OK;

  if (isdigit((unsigned char)s[p->pos])) {
    if (!parse_number(p, &t->a) || t->a > SIZE_MAX)
      return syntax_error(p, start, "expected a platform index (P:D)");
    if (s[p->pos] != ':')
      return syntax_error(p, p->pos, "expected ':' after the platform index");
    p->pos++;
    size_t dpos = p->pos;
    if (!parse_number(p, &t->b) || t->b > SIZE_MAX)
      return syntax_error(p, dpos, "expected a device index after 'P:'");
    t->kind = T_INDEX;
    goto done;
  }
  while (isalnum((unsigned char)s[p->pos]) || s[p->pos] == '_')
    p->pos++;
  size_t len = p->pos - start;
  if (len == 0)
    return syntax_error(p, start, "expected a term");
  const char *w = s + start;
#define WORD_IS(lit) (len == sizeof(lit) - 1 && strncasecmp(w, lit, len) == 0)

  for (size_t i = 0; i < sizeof keywords / sizeof keywords[0]; i++)
    if (strlen(keywords[i].word) == len &&
        strncasecmp(w, keywords[i].word, len) == 0) {
      t->kind = keywords[i].kind;
      goto done;
    }
  if (WORD_IS("name") || WORD_IS("id") || WORD_IS("uuid") ||
      WORD_IS("profile")) {
    t->kind = WORD_IS("name") ? T_NAME
              : WORD_IS("id") ? T_ID
              : WORD_IS("uuid") ? T_UUID
                                : T_PROFILE;
    if (s[p->pos] != ':')
      return syntax_error(p, p->pos, "expected ':' after the keyword");
    p->pos++;
    size_t arg_pos = p->pos;
    while (isspace((unsigned char)s[arg_pos]))
      arg_pos++;
    st = parse_text(p, t, "expected text after ':'");
    if (st != KILN_OK)
      return st;
    if (t->kind == T_UUID)
      st = check_uuid(p, t, arg_pos);
    if (t->kind == T_PROFILE && kiln__backend_find(t->arg) == NULL) {
      char what[80], hint[200];
      snprintf(what, sizeof what, "unknown profile '%.40s'", t->arg);
      size_t used = (size_t)snprintf(hint, sizeof hint, "one of");
      for (size_t i = 0; i < kiln__backend_count && used < sizeof hint; i++)
        used += (size_t)snprintf(hint + used, sizeof hint - used, "%s %s",
                                 i ? "," : "", kiln__backends[i]->name);
      return syntax_error_hint(p, arg_pos, what, hint);
    }
    if (st != KILN_OK)
      return st;
    goto done;
  }
  if (WORD_IS("mem") || WORD_IS("cu")) {
    bool mem = WORD_IS("mem");
    t->kind = mem ? T_MEM : T_CU;
    skip_spaces(p);
    if (s[p->pos] != '>' || s[p->pos + 1] != '=')
      return syntax_error(p, p->pos, mem ? "expected '>=' after 'mem'"
                                         : "expected '>=' after 'cu'");
    p->pos += 2;
    skip_spaces(p);
    size_t npos = p->pos;
    if (!parse_number(p, &t->a))
      return syntax_error(p, npos,
                          mem ? "expected a size (digits with an optional K, "
                                "M, G or T suffix) after 'mem>='"
                              : "expected a number after 'cu>='");
    if (mem) {
      unsigned shift = 0;
      switch (toupper((unsigned char)s[p->pos])) {
      case 'K': shift = 10; break;
      case 'M': shift = 20; break;
      case 'G': shift = 30; break;
      case 'T': shift = 40; break;
      default: break;
      }
      if (shift != 0) {
        if (t->a > (UINT64_MAX >> shift))
          return syntax_error(p, npos, "size too large after 'mem>='");
        t->a <<= shift;
        p->pos++;
        /* Accept "8G", "8GB", "8GiB". */
        if (toupper((unsigned char)s[p->pos]) == 'I' &&
            toupper((unsigned char)s[p->pos + 1]) == 'B')
          p->pos += 2;
        else if (toupper((unsigned char)s[p->pos]) == 'B')
          p->pos++;
      }
    } else if (t->a > UINT32_MAX) {
      return syntax_error(p, npos, "compute unit count too large after 'cu>='");
    }
    goto done;
  }
  {
    char what[80];
    snprintf(what, sizeof what, "unknown term '%.*s'",
             (int)(len > 40 ? 40 : len), w);
    return syntax_error_hint(p, start, what, expected_terms);
  }
#undef WORD_IS
done:
  {
    size_t end = p->pos;
    while (end > start && isspace((unsigned char)s[end - 1]))
      end--;
    t->text = dup_range(s + start, end - start);
    if (t->text == NULL)
      return kiln__fail(KILN_ERR_OUT_OF_HOST_MEMORY,
                        "kiln_selection_create: out of host memory");
  }
  return st;
}

static void parsed_free(struct parsed *ps) {
  for (size_t i = 0; i < ps->count; i++) {
    for (size_t j = 0; j < ps->alts[i].count; j++) {
      free(ps->alts[i].terms[j].text);
      free(ps->alts[i].terms[j].arg);
    }
    free(ps->alts[i].terms);
    free(ps->alts[i].text);
  }
  free(ps->alts);
  ps->alts = NULL;
  ps->count = 0;
}

/* Append a zeroed element to a growable array. */
static void *push(void *array, size_t *count, size_t elem) {
  void *p = realloc(array, (*count + 1) * elem);
  if (p != NULL) {
    memset((char *)p + *count * elem, 0, elem);
    (*count)++;
  }
  return p;
}

static kiln_status parse(const char *src, const char *where,
                         struct parsed *out) {
  struct parser p = {src, where, 0};
  kiln_status st = KILN_OK;
  *out = (struct parsed){0};
  for (;;) {
    struct alternative *alts = push(out->alts, &out->count, sizeof *alts);
    if (alts == NULL)
      goto oom;
    out->alts = alts;
    struct alternative *alt = &out->alts[out->count - 1];
    skip_spaces(&p);
    size_t alt_start = p.pos;
    for (;;) {
      struct term *terms = push(alt->terms, &alt->count, sizeof *terms);
      if (terms == NULL)
        goto oom;
      alt->terms = terms;
      st = parse_term(&p, &alt->terms[alt->count - 1]);
      if (st != KILN_OK)
        goto fail;
      skip_spaces(&p);
      if (src[p.pos] != ',')
        break;
      p.pos++;
    }
    size_t alt_end = p.pos;
    while (alt_end > alt_start && isspace((unsigned char)src[alt_end - 1]))
      alt_end--;
    alt->text = dup_range(src + alt_start, alt_end - alt_start);
    if (alt->text == NULL)
      goto oom;
    if (src[p.pos] == '\0')
      return KILN_OK;
    if (src[p.pos] != '|') {
      st = syntax_error(&p, p.pos, "expected ',', '|' or the end after a term");
      goto fail;
    }
    p.pos++;
  }
oom:
  st = kiln__fail(KILN_ERR_OUT_OF_HOST_MEMORY,
                  "kiln_selection_create: out of host memory");
fail:
  parsed_free(out);
  return st;
}

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
  size_t n = kiln_device_list_count(selection->list);
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
  size_t n = kiln_device_list_count(sel->list);
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
  kiln_status st = parse(default_rule ? "gpu|cpu" : text,
                         from_env ? "KILN_DEVICE selector" : "selector", &ps);
  if (st != KILN_OK)
    return st;
  size_t n = kiln_device_list_count(list);
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
  parsed_free(&ps);
  *out = sel;
  return KILN_OK;
oom:
  st = kiln__fail(KILN_ERR_OUT_OF_HOST_MEMORY,
                  "kiln_selection_create: out of host memory");
fail:
  parsed_free(&ps);
  kiln_selection_destroy(sel);
  return st;
}

size_t kiln_selection_count(const kiln_selection *selection) {
  return selection != NULL ? selection->taken_count : 0;
}

const kiln_device *kiln_selection_get(const kiln_selection *selection,
                                      size_t index) {
  if (selection == NULL || index >= selection->taken_count)
    return NULL;
  return selection->taken[index];
}

const char *kiln_selection_explain(const kiln_selection *selection,
                                   size_t list_index, bool *taken) {
  if (selection == NULL ||
      list_index >= kiln_device_list_count(selection->list))
    return NULL;
  if (taken != NULL)
    *taken = selection->is_taken[list_index];
  return selection->reasons[list_index];
}

const char *kiln_selection_selector(const kiln_selection *selection) {
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
  size_t n = kiln_device_list_count(list);
  size_t used = (size_t)snprintf(msg, sizeof msg,
                                 "kiln_device_select: no device matches "
                                 "selector \"%.200s\"",
                                 sel->selector);
  if (n == 0 && used < sizeof msg) {
    const kiln_device_problem *pr = kiln_device_list_problem(list, 0);
    used += (size_t)snprintf(msg + used, sizeof msg - used,
                             ": no OpenCL device was found%s%.300s",
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
