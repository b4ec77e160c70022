/* kiln's tuning database (backends/tuning_db.c gives the format and the
 * rules for adding a row): the rows that match a device, the first per op,
 * for tuning_file.c, which puts them between a user's tuning file and the
 * profile's defaults. A malformed row is skipped, never trusted, and its
 * reason recorded; whether a row's parameters fit the op's space and the
 * device is for the op module to say, as for a tuning file's. */
#include "tune.h"

#include <ctype.h>
#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A test's database instead of the shipped one (NULL: the shipped one). */
static _Atomic(const char *) test_database;

void kiln__tuning_db_use(const char *text) { atomic_store(&test_database, text); }

/* Field i of the row in fields (split at " | "), trimmed; false when the
 * row has not exactly five. */
static bool split(char *row, char *fields[5]) {
  size_t n = 0;
  for (char *p = row;; n++) {
    char *bar = strstr(p, " | ");
    if (n == 5)
      return false;
    fields[n] = p;
    if (bar == NULL)
      break;
    *bar = '\0';
    p = bar + 3;
  }
  if (n != 4)
    return false;
  for (size_t i = 0; i < 5; i++) {
    char *f = fields[i];
    while (*f == ' ')
      f++;
    size_t len = strlen(f);
    while (len > 0 && (f[len - 1] == ' ' || f[len - 1] == '\r'))
      f[--len] = '\0';
    fields[i] = f;
  }
  return true;
}

/* A version as kiln spells it: digits and dots, starting with a digit
 * (a pre-release suffix after '-' allowed). */
static bool version_ok(const char *v) {
  if (!isdigit((unsigned char)v[0]))
    return false;
  size_t i = 0;
  while (isdigit((unsigned char)v[i]) || v[i] == '.')
    i++;
  return v[i] == '\0' || (v[i] == '-' && v[i + 1] != '\0');
}

/* Why fields do not make a row, or NULL. */
static const char *malformed(char *const f[5]) {
  if (f[0][0] == '\0' || strchr(f[0], ' ') != NULL ||
      strlen(f[0]) >= sizeof(((struct kiln__tuning_line *)0)->name))
    return "the op is not one word";
  if (f[1][0] == '\0' || strlen(f[1]) > 120)
    return "no device name pattern (or one over 120 characters)";
  if (!version_ok(f[2]))
    return "the kiln version is not a version";
  if (f[3][0] == '\0' || strlen(f[3]) >= KILN_TUNING_TEXT_CAPACITY)
    return "no parameters";
  if (f[4][0] == '\0' || strlen(f[4]) >= KILN_TUNING_TEXT_CAPACITY)
    return "no figures (a row must carry what kiln tune measured)";
  return NULL;
}

size_t kiln__tuning_db_match(const char *device_name,
                             struct kiln__tuning_line **rows, char *why,
                             size_t why_size) {
  const char *db = atomic_load(&test_database);
  if (db == NULL)
    db = kiln__tuning_database;
  why[0] = '\0';
  *rows = NULL;
  size_t count = 0, capacity = 0;
  char line[3 * KILN_TUNING_TEXT_CAPACITY];
  int line_no = 0;
  for (const char *p = db; *p != '\0';) {
    const size_t len = strcspn(p, "\n");
    line_no++;
    const bool too_long = len >= sizeof line;
    snprintf(line, sizeof line, "%.*s", (int)(too_long ? 0 : len), p);
    p += len + (p[len] == '\n');
    const char *s = line;
    while (*s == ' ' || *s == '\t')
      s++;
    if (!too_long && (*s == '#' || *s == '\0'))
      continue;
    char *f[5];
    const char *bad = too_long              ? "longer than a row can be"
                      : !split(line, f)     ? "not five fields separated by \" | \""
                                            : malformed(f);
    if (bad != NULL) {
      if (why[0] == '\0') /* the first: one reason is enough to fix it */
        snprintf(why, why_size, "kiln's tuning database, line %d: %s "
                 "(row skipped)", line_no, bad);
      continue;
    }
    if (fnmatch(f[1], device_name, 0) != 0)
      continue;
    size_t i = 0;
    while (i < count && strcmp((*rows)[i].name, f[0]) != 0)
      i++;
    if (i < count)
      continue; /* an earlier row for the op matched first */
    if (count == capacity) {
      const size_t cap = capacity ? 2 * capacity : 4;
      struct kiln__tuning_line *grown = realloc(*rows, cap * sizeof *grown);
      if (grown == NULL) {
        snprintf(why, why_size, "kiln's tuning database: out of host memory "
                 "at line %d (rows after it skipped)", line_no);
        break;
      }
      *rows = grown;
      capacity = cap;
    }
    struct kiln__tuning_line *r = &(*rows)[count++];
    memset(r, 0, sizeof *r);
    snprintf(r->name, sizeof r->name, "%s", f[0]);
    snprintf(r->params, sizeof r->params, "%s", f[3]);
    snprintf(r->figures, sizeof r->figures, "%s", f[4]);
    snprintf(r->origin, sizeof r->origin, "%.120s (kiln %.40s)", f[1], f[2]);
  }
  return count;
}
