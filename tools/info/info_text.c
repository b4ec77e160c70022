/* Text of property values for the human report of `kiln info`: sizes with
 * binary units, bitfields as their flag names joined by " | ", versions as
 * MAJOR.MINOR.PATCH, and failures as "(error: ...)". */
#include "info.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

/* Longest string the text report shows whole. */
#define TEXT_MAX 2048

/* ---- text formatting ---- */

typedef struct strbuf {
  char *text;
  size_t len, cap;
} strbuf;

static void sb_add(strbuf *b, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void sb_add(strbuf *b, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(NULL, 0, fmt, ap);
  va_end(ap);
  if (n < 0)
    return;
  if (b->len + (size_t)n + 1 > b->cap) {
    size_t cap = (b->cap ? b->cap * 2 : 64);
    while (cap < b->len + (size_t)n + 1)
      cap *= 2;
    char *t = realloc(b->text, cap);
    if (t == NULL)
      return;
    b->text = t;
    b->cap = cap;
  }
  va_start(ap, fmt);
  vsnprintf(b->text + b->len, b->cap - b->len, fmt, ap);
  va_end(ap);
  b->len += (size_t)n;
}

static char *sb_take(strbuf *b) {
  if (b->text == NULL)
    return strdup("");
  return b->text;
}

static void add_mem(strbuf *b, unsigned long long bytes) {
  static const char *units[] = {"KiB", "MiB", "GiB", "TiB", "PiB"};
  sb_add(b, "%llu", bytes);
  if (bytes < 1024)
    return;
  double v = (double)bytes;
  size_t u = 0;
  v /= 1024.0;
  while (v >= 1024.0 && u + 1 < sizeof(units) / sizeof(units[0])) {
    v /= 1024.0;
    u++;
  }
  sb_add(b, " (%.4g %s)", v, units[u]);
}

static void add_bits(strbuf *b, const info_flag *flags, unsigned long long v) {
  bool first = true;
  unsigned long long rest = v;
  for (const info_flag *f = flags; f && f->name; f++) {
    if (f->value != 0 && (v & f->value) == f->value) {
      sb_add(b, "%s%s", first ? "" : " | ", f->name);
      rest &= ~f->value;
      first = false;
    }
  }
  if (rest != 0)
    sb_add(b, "%s0x%llx", first ? "" : " | ", rest);
  else if (first)
    sb_add(b, "(none)");
}

static const char *flag_name(const info_flag *flags, unsigned long long v) {
  for (const info_flag *f = flags; f && f->name; f++)
    if (f->value == v)
      return f->name;
  return NULL;
}

static void add_version(strbuf *b, cl_version v) {
  sb_add(b, "%u.%u.%u", (unsigned)CL_VERSION_MAJOR(v),
         (unsigned)CL_VERSION_MINOR(v), (unsigned)CL_VERSION_PATCH(v));
}

char *info_format_text(const info_prop *prop, const info_result *r) {
  strbuf b = {0};
  if (r->state == INFO_UNSUPPORTED) {
    sb_add(&b, "(unsupported: %s)", r->detail);
    return sb_take(&b);
  }
  if (r->state == INFO_ERROR) {
    if (r->cl_error != 0)
      sb_add(&b, "(error: %s %d%s%s)", kiln_cl_error_name(r->cl_error),
             r->cl_error, r->detail[0] ? ", " : "", r->detail);
    else
      sb_add(&b, "(error: %s)", r->detail);
    return sb_take(&b);
  }
  const unsigned char *d = r->data;
  switch (prop->type) {
  case T_STR: {
    /* A driver's over-long string would bury the report; the JSON keeps
     * it whole. */
    size_t len = strlen((const char *)d);
    if (len > TEXT_MAX)
      sb_add(&b, "%.*s[... %zu bytes in all]", TEXT_MAX, (const char *)d, len);
    else
      sb_add(&b, "%s", (const char *)d);
    break;
  }
  case T_STR_SEMI: {
    /* "a;b;c" reads (and wraps) better as "a; b; c". */
    for (const char *p = (const char *)d; *p; p++) {
      if (*p == ';')
        sb_add(&b, "; ");
      else
        sb_add(&b, "%c", *p);
    }
    break;
  }
  case T_STR_LIST: {
    /* One space between words, whatever the driver used. */
    const char *p = (const char *)d;
    bool first = true;
    while (*p) {
      while (*p && isspace((unsigned char)*p))
        p++;
      const char *s = p;
      while (*p && !isspace((unsigned char)*p))
        p++;
      if (p > s) {
        sb_add(&b, "%s%.*s", first ? "" : " ", (int)(p - s), s);
        first = false;
      }
    }
    break;
  }
  case T_UINT: {
    cl_uint v;
    memcpy(&v, d, sizeof(v));
    sb_add(&b, "%u", (unsigned)v);
    break;
  }
  case T_HEX_UINT: {
    cl_uint v;
    memcpy(&v, d, sizeof(v));
    sb_add(&b, "0x%x", (unsigned)v);
    break;
  }
  case T_ULONG: case T_MEM: {
    cl_ulong v;
    memcpy(&v, d, sizeof(v));
    if (prop->type == T_MEM)
      add_mem(&b, (unsigned long long)v);
    else
      sb_add(&b, "%llu", (unsigned long long)v);
    break;
  }
  case T_SIZE: {
    size_t v;
    memcpy(&v, d, sizeof(v));
    sb_add(&b, "%zu", v);
    break;
  }
  case T_SIZE_ARRAY: {
    size_t n = r->size / sizeof(size_t);
    for (size_t i = 0; i < n; i++) {
      size_t v;
      memcpy(&v, d + i * sizeof(v), sizeof(v));
      sb_add(&b, "%s%zu", i ? " " : "", v);
    }
    if (n == 0)
      sb_add(&b, "(none)");
    break;
  }
  case T_BOOL: {
    cl_bool v;
    memcpy(&v, d, sizeof(v));
    sb_add(&b, "%s", v ? "yes" : "no");
    break;
  }
  case T_BITS: {
    cl_ulong v;
    memcpy(&v, d, sizeof(v));
    add_bits(&b, prop->flags, (unsigned long long)v);
    break;
  }
  case T_ENUM: {
    cl_uint v;
    memcpy(&v, d, sizeof(v));
    const char *name = flag_name(prop->flags, v);
    if (name)
      sb_add(&b, "%s", name);
    else
      sb_add(&b, "0x%x", (unsigned)v);
    break;
  }
  case T_PARTITION: {
    size_t n = r->size / sizeof(cl_device_partition_property);
    bool any = false;
    for (size_t i = 0; i < n; i++) {
      cl_device_partition_property v;
      memcpy(&v, d + i * sizeof(v), sizeof(v));
      if (v == 0)
        break;
      const char *name = flag_name(prop->flags, (unsigned long long)v);
      if (name)
        sb_add(&b, "%s%s", any ? " | " : "", name);
      else
        sb_add(&b, "%s0x%llx", any ? " | " : "", (unsigned long long)v);
      any = true;
    }
    if (!any)
      sb_add(&b, "(none)");
    break;
  }
  case T_VERSION: {
    cl_version v;
    memcpy(&v, d, sizeof(v));
    add_version(&b, v);
    break;
  }
  case T_NAME_VERSION: {
    size_t n = r->size / sizeof(cl_name_version);
    for (size_t i = 0; i < n; i++) {
      cl_name_version nv;
      memcpy(&nv, d + i * sizeof(nv), sizeof(nv));
      nv.name[CL_NAME_VERSION_MAX_NAME_SIZE - 1] = '\0';
      info_sanitize_utf8(nv.name);
      sb_add(&b, "%s%s ", i ? ", " : "", nv.name);
      add_version(&b, nv.version);
    }
    if (n == 0)
      sb_add(&b, "(none)");
    break;
  }
  case T_UUID: case T_LUID: {
    size_t n = prop->type == T_UUID ? 16 : 8;
    for (size_t i = 0; i < n; i++)
      sb_add(&b, "%02x", d[i]);
    break;
  }
  case T_PCI_BUS: {
    cl_device_pci_bus_info_khr v;
    memcpy(&v, d, sizeof(v));
    sb_add(&b, "%04x:%02x:%02x.%x", (unsigned)v.pci_domain, (unsigned)v.pci_bus,
           (unsigned)v.pci_device, (unsigned)v.pci_function);
    break;
  }
  }
  return sb_take(&b);
}
