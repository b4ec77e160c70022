/* The table of what ran (trace_table.h), and kiln_trace_summarize, which
 * builds it from a trace file: the file is read whole (a trace streamed
 * to a pipe lacks its closing bracket, which is then added), parsed with
 * jansson, and checked to be kiln's before anything is written, so that a
 * file of another kind gets a reason instead of an empty table. */
#include "trace_table.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "internal.h"

bool kiln__trace_table_add(kiln__trace_table *t, const char *cat,
                           const char *name, double ns, const json_t *args) {
  char what[sizeof t->rows[0].what];
  if (strncmp(cat, "kiln.", 5) == 0)
    cat += 5;
  const size_t n = strlen(cat);
  if (strncmp(name, cat, n) == 0 && name[n] == ' ')
    snprintf(what, sizeof what, "%s", name); /* "build gemm", not twice */
  else
    snprintf(what, sizeof what, "%s %s", cat, name);
  size_t i = 0;
  while (i < t->count && strcmp(t->rows[i].what, what) != 0)
    i++;
  if (i == t->count) {
    if (t->count == t->capacity) {
      const size_t cap = t->capacity ? 2 * t->capacity : 32;
      kiln__trace_row *grown = realloc(t->rows, cap * sizeof *grown);
      if (grown == NULL)
        return false;
      t->rows = grown;
      t->capacity = cap;
    }
    t->rows[t->count++] = (kiln__trace_row){.calls = 0};
    memcpy(t->rows[i].what, what, sizeof what);
  }
  kiln__trace_row *r = &t->rows[i];
  r->calls++;
  r->ns += ns;
  t->ns += ns;
  const json_t *bytes = json_object_get(args, "bytes"),
               *flops = json_object_get(args, "flops");
  if (json_is_number(bytes))
    r->bytes += json_number_value(bytes);
  if (json_is_number(flops))
    r->flops += json_number_value(flops);
  return true;
}

static int by_time(const void *a, const void *b) {
  const kiln__trace_row *x = a, *y = b;
  return x->ns < y->ns ? 1 : x->ns > y->ns ? -1 : strcmp(x->what, y->what);
}

/* amount / scale with one decimal, or "-" when there is no amount. */
static void amount_text(char *out, size_t size, double amount, double scale) {
  if (amount > 0 && scale > 0)
    snprintf(out, size, "%.1f", amount / scale);
  else
    snprintf(out, size, "-");
}

/* The columns before "what" (then two blanks and the name). */
#define NUMBERS_FORMAT "%9.2f %5.1f%% %7lu %9.1f %8s %6s %7s"
#define HEADER_FORMAT "%9s %6s %7s %9s %8s %6s %7s  %s\n"

void kiln__trace_table_print(kiln__trace_table *t, FILE *out, size_t width) {
  if (t->count > 1)
    qsort(t->rows, t->count, sizeof *t->rows, by_time);
  fprintf(out, "%zu kind%s of work, %.3f ms in all\n", t->count,
          t->count == 1 ? "" : "s", t->ns / 1e6);
  fprintf(out, HEADER_FORMAT, "total ms", "share", "calls", "mean us", "MB",
          "GB/s", "GFLOP/s", "what");
  for (size_t i = 0; i < t->count; i++) {
    const kiln__trace_row *r = &t->rows[i];
    char mb[24], gbps[24], gflops[24];
    amount_text(mb, sizeof mb, r->bytes, 1e6);
    /* Giga-units per second: amount per nanosecond. */
    amount_text(gbps, sizeof gbps, r->bytes, r->ns);
    amount_text(gflops, sizeof gflops, r->flops, r->ns);
    const int printed =
        fprintf(out, NUMBERS_FORMAT, r->ns / 1e6,
                t->ns > 0 ? 100.0 * r->ns / t->ns : 0.0, r->calls,
                r->ns / 1e3 / (double)r->calls, mb, gbps, gflops);
    const size_t name = strlen(r->what),
                 used = (size_t)(printed > 0 ? printed : 0) + 2;
    if (width == 0 || used + name <= width)
      fprintf(out, "  %s\n", r->what);
    else
      fprintf(out, "\n    %.*s\n", width > 5 ? (int)(width - 4) : 1, r->what);
  }
  if (t->count == 0)
    fprintf(out, "  (nothing ran)\n");
}

void kiln__trace_table_free(kiln__trace_table *t) {
  free(t->rows);
  *t = (kiln__trace_table){.rows = NULL};
}

/* ---- kiln_trace_summarize ----------------------------------------------- */

static const char fn[] = "kiln_trace_summarize";

/* The whole file at path, NUL-terminated, in *text (*size bytes). */
static kiln_status read_whole(const char *path, char **text, size_t *size) {
  char why[256];
  int fd = kiln__open_regular(path, why, sizeof why);
  if (fd < 0)
    return kiln__fail(KILN_ERR_IO, "%s: cannot read %s: %s", fn, path, why);
  size_t used = 0, cap = 1 << 16;
  char *buf = malloc(cap + 2);
  ssize_t got = 0;
  while (buf != NULL && ((got = read(fd, buf + used, cap - used)) > 0 ||
                         (got < 0 && errno == EINTR))) {
    if (got < 0)
      continue;
    used += (size_t)got;
    if (used == cap) {
      char *grown = cap <= SIZE_MAX / 4 ? realloc(buf, 2 * cap + 2) : NULL;
      if (grown == NULL) {
        free(buf);
        buf = NULL;
        break;
      }
      buf = grown;
      cap *= 2;
    }
  }
  const int err = errno;
  close(fd);
  if (buf == NULL)
    return kiln__fail(KILN_ERR_OUT_OF_HOST_MEMORY,
                      "%s: %s does not fit in memory", fn, path);
  if (got < 0) {
    free(buf);
    return kiln__fail(KILN_ERR_IO, "%s: cannot read %s: %s", fn, path,
                      strerror(err));
  }
  buf[used] = '\0';
  *text = buf;
  *size = used;
  return KILN_OK;
}

/* Whether text, after blanks, starts with c; and ends with c. */
static bool starts_with(const char *text, char c) {
  return text[strspn(text, " \t\r\n")] == c;
}
static bool ends_with(const char *text, size_t size, char c) {
  while (size > 0 && strchr(" \t\r\n", text[size - 1]) != NULL)
    size--;
  return size > 0 && text[size - 1] == c;
}

/* The events of the trace in text, parsed (the caller decrefs *root). A
 * trace streamed to a pipe has no closing bracket: text has room for one. */
static kiln_status parse(const char *path, char *text, size_t size,
                         json_t **root, json_t **events) {
  if (text[strspn(text, " \t\r\n")] == '\0')
    return kiln__fail(KILN_ERR_CORRUPT,
                      "%s: %s is empty, not a trace (KILN_TRACE writes its "
                      "file at the first traced event)",
                      fn, path);
  json_error_t error;
  *root = json_loadb(text, size, 0, &error);
  if (*root == NULL &&
      json_error_code(&error) == json_error_premature_end_of_input &&
      starts_with(text, '[') && ends_with(text, size, '}')) {
    text[size] = ']'; /* streamed: the events are whole, the array open */
    json_error_t again;
    *root = json_loadb(text, size + 1, 0, &again);
  }
  if (*root == NULL) {
    if (json_error_code(&error) == json_error_premature_end_of_input)
      return kiln__fail(KILN_ERR_CORRUPT,
                        "%s: %s is cut short: its JSON ends at line %d, "
                        "column %d, inside %s (a copy taken while it was "
                        "written?)",
                        fn, path, error.line, error.column,
                        starts_with(text, '[') ? "an event" : "a value");
    return kiln__fail(KILN_ERR_CORRUPT,
                      "%s: %s is not JSON: %s at line %d, column %d", fn, path,
                      error.text, error.line, error.column);
  }
  *events =
      json_is_array(*root) ? *root : json_object_get(*root, "traceEvents");
  if (!json_is_array(*events))
    return kiln__fail(KILN_ERR_CORRUPT,
                      "%s: %s is JSON but not a trace: a trace is an array "
                      "of events (or an object with \"traceEvents\"), as "
                      "KILN_TRACE writes",
                      fn, path);
  return KILN_OK;
}

/* Add the kiln events of events to t. */
static kiln_status tabulate(const char *path, const json_t *events,
                            kiln__trace_table *t) {
  size_t index;
  const json_t *ev;
  json_array_foreach(events, index, ev) {
    const char *ph = json_string_value(json_object_get(ev, "ph")),
               *cat = json_string_value(json_object_get(ev, "cat"));
    if (!json_is_object(ev))
      return kiln__fail(KILN_ERR_CORRUPT,
                        "%s: %s: element %zu is not an event (a JSON "
                        "object): not a trace",
                        fn, path, index);
    if (ph == NULL || strcmp(ph, "X") != 0 || cat == NULL ||
        strncmp(cat, "kiln.", 5) != 0)
      continue; /* lane names, or another program's events */
    const char *name = json_string_value(json_object_get(ev, "name"));
    const json_t *dur = json_object_get(ev, "dur");
    if (name == NULL || !json_is_number(dur) || json_number_value(dur) < 0)
      return kiln__fail(KILN_ERR_CORRUPT,
                        "%s: %s: event %zu (%.40s) has no name or no "
                        "duration (\"dur\")",
                        fn, path, index, cat);
    if (!kiln__trace_table_add(t, cat, name, 1000.0 * json_number_value(dur),
                               json_object_get(ev, "args")))
      return kiln__fail(KILN_ERR_OUT_OF_HOST_MEMORY, "%s: no memory for %s", fn,
                        path);
  }
  if (t->count == 0)
    return kiln__fail(KILN_ERR_CORRUPT,
                      "%s: %s holds %zu trace event%s but none of kiln's "
                      "(categories kiln.op, kiln.kernel, kiln.transfer, "
                      "kiln.build): not a trace KILN_TRACE wrote",
                      fn, path, json_array_size(events),
                      json_array_size(events) == 1 ? "" : "s");
  return KILN_OK;
}

KILN_API kiln_status kiln_trace_summarize(const char *path, FILE *out,
                                          size_t width) {
  if (path == NULL)
    return kiln__fail(KILN_ERR_NULL_POINTER, "%s: path is NULL", fn);
  if (out == NULL)
    return kiln__fail(KILN_ERR_NULL_POINTER, "%s: out is NULL", fn);
  char *text = NULL;
  size_t size = 0;
  json_t *root = NULL, *events = NULL;
  kiln__trace_table table = {.rows = NULL};
  kiln_status s = read_whole(path, &text, &size);
  if (s == KILN_OK)
    s = parse(path, text, size, &root, &events);
  if (s == KILN_OK)
    s = tabulate(path, events, &table);
  if (s == KILN_OK)
    kiln__trace_table_print(&table, out, width);
  kiln__trace_table_free(&table);
  json_decref(root);
  free(text);
  return s;
}
