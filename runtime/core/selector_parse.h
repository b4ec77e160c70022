/* The selector grammar of kiln_device.h parsed into terms (selector_parse.c),
 * for the evaluator in selector.c. Not installed. */
#ifndef KILN_SELECTOR_PARSE_H
#define KILN_SELECTOR_PARSE_H

#include "internal.h"

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

/* Parse src, a selector, into *out (freed with kiln__selector_parsed_free).
 * where names the selector in errors ("selector" or "KILN_DEVICE
 * selector"); a syntax error gives its 1-based column and what was expected
 * there. */
kiln_status kiln__selector_parse(const char *src, const char *where,
                                 struct parsed *out);
void kiln__selector_parsed_free(struct parsed *ps);

#endif
