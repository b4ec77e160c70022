/* Selector parsing: the grammar of kiln_device.h into alternatives of terms.
 * The parser reports the 1-based column of the first offending character and
 * what it expected there. */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "selector_parse.h"

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

void kiln__selector_parsed_free(struct parsed *ps) {
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

kiln_status kiln__selector_parse(const char *src, const char *where,
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
  kiln__selector_parsed_free(out);
  return st;
}
