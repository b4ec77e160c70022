/* The kiln-info/1 JSON document: every property under its OpenCL name, with
 * typed values, built with jansson so the output is always valid JSON.
 *
 * Value conventions (documented in README.md):
 *   strings         JSON strings (invalid UTF-8 replaced by '?')
 *   lists           CL_*_EXTENSIONS and CL_DEVICE_BUILT_IN_KERNELS as arrays
 *   numbers         integers; a cl_ulong above 2^63-1 as a decimal string
 *   booleans        true / false
 *   bitfields       arrays of flag names (unknown bits as "0x...")
 *   enums           the value's name
 *   versions        "MAJOR.MINOR.PATCH"
 *   name+version    arrays of {"name": ..., "version": "M.m.p"}
 *   UUID / LUID     lowercase hex strings
 *   PCI bus info    "DDDD:BB:DD.F"
 * A value that is a JSON object is never a property's value: it is
 * {"error": "CL_INVALID_VALUE", "code": -30} for a failed query (with
 * "detail" when kiln rejected the answer) or {"unsupported": "needs OpenCL
 * 2.0"} for a query the device's version or extensions do not offer. */
#include "info.h"

#include <ctype.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* jansson refuses invalid UTF-8 and returns NULL; every string is sanitised
 * first, and a NULL would still be replaced rather than dropped. */
static json_t *jstr(const char *text) {
  if (text == NULL)
    return json_null();
  char *copy = strdup(text);
  if (copy == NULL)
    return json_null();
  info_sanitize_utf8(copy);
  json_t *s = json_string(copy);
  free(copy);
  return s ? s : json_string("?");
}

static json_t *jstrn(const char *text, size_t len) {
  char *copy = malloc(len + 1);
  if (copy == NULL)
    return json_null();
  memcpy(copy, text, len);
  copy[len] = '\0';
  json_t *s = jstr(copy);
  free(copy);
  return s;
}

static json_t *juint(unsigned long long v) {
  if (v > (unsigned long long)INT64_MAX) {
    char buf[24];
    snprintf(buf, sizeof(buf), "%llu", v);
    return json_string(buf);
  }
  return json_integer((json_int_t)v);
}

static json_t *jversion(cl_version v) {
  char buf[40];
  snprintf(buf, sizeof(buf), "%u.%u.%u", (unsigned)CL_VERSION_MAJOR(v),
           (unsigned)CL_VERSION_MINOR(v), (unsigned)CL_VERSION_PATCH(v));
  return json_string(buf);
}

static const char *flag_name(const info_flag *flags, unsigned long long v) {
  for (const info_flag *f = flags; f && f->name; f++)
    if (f->value == v)
      return f->name;
  return NULL;
}

static json_t *jbits(const info_flag *flags, unsigned long long v) {
  json_t *a = json_array();
  unsigned long long rest = v;
  for (const info_flag *f = flags; f && f->name; f++) {
    if (f->value != 0 && (v & f->value) == f->value) {
      json_array_append_new(a, json_string(f->name));
      rest &= ~f->value;
    }
  }
  if (rest != 0) {
    char buf[24];
    snprintf(buf, sizeof(buf), "0x%llx", rest);
    json_array_append_new(a, json_string(buf));
  }
  return a;
}

/* Split text on sep (or on any whitespace when sep is 0), dropping empties. */
static json_t *jsplit(const char *text, char sep) {
  json_t *a = json_array();
  const char *p = text;
  while (*p) {
    while (*p && (sep ? *p == sep : isspace((unsigned char)*p)))
      p++;
    const char *s = p;
    while (*p && !(sep ? *p == sep : isspace((unsigned char)*p)))
      p++;
    /* Trim blanks around ';'-separated names too. */
    const char *e = p;
    while (sep && s < e && isspace((unsigned char)*s))
      s++;
    while (sep && e > s && isspace((unsigned char)e[-1]))
      e--;
    if (e > s)
      json_array_append_new(a, jstrn(s, (size_t)(e - s)));
  }
  return a;
}

json_t *info_json_value(const info_prop *prop, const info_result *r) {
  if (r->state == INFO_UNSUPPORTED)
    return json_pack("{s:s}", "unsupported", r->detail);
  if (r->state == INFO_ERROR) {
    json_t *o = json_object();
    if (r->cl_error != 0) {
      json_object_set_new(o, "error", json_string(kiln_cl_error_name(r->cl_error)));
      json_object_set_new(o, "code", json_integer(r->cl_error));
    } else {
      json_object_set_new(o, "error", json_string("bad-answer"));
    }
    if (r->detail[0])
      json_object_set_new(o, "detail", jstr(r->detail));
    return o;
  }
  const unsigned char *d = r->data;
  switch (prop->type) {
  case T_STR:
    return jstr((const char *)d);
  case T_STR_LIST:
    return jsplit((const char *)d, 0);
  case T_STR_SEMI:
    return jsplit((const char *)d, ';');
  case T_UINT: case T_HEX_UINT: {
    cl_uint v;
    memcpy(&v, d, sizeof(v));
    return json_integer((json_int_t)v);
  }
  case T_ULONG: case T_MEM: {
    cl_ulong v;
    memcpy(&v, d, sizeof(v));
    return juint((unsigned long long)v);
  }
  case T_SIZE: {
    size_t v;
    memcpy(&v, d, sizeof(v));
    return juint((unsigned long long)v);
  }
  case T_SIZE_ARRAY: {
    json_t *a = json_array();
    for (size_t i = 0; i < r->size / sizeof(size_t); i++) {
      size_t v;
      memcpy(&v, d + i * sizeof(v), sizeof(v));
      json_array_append_new(a, juint((unsigned long long)v));
    }
    return a;
  }
  case T_BOOL: {
    cl_bool v;
    memcpy(&v, d, sizeof(v));
    return json_boolean(v != 0);
  }
  case T_BITS: {
    cl_ulong v;
    memcpy(&v, d, sizeof(v));
    return jbits(prop->flags, (unsigned long long)v);
  }
  case T_ENUM: {
    cl_uint v;
    memcpy(&v, d, sizeof(v));
    const char *name = flag_name(prop->flags, v);
    if (name)
      return json_string(name);
    char buf[16];
    snprintf(buf, sizeof(buf), "0x%x", (unsigned)v);
    return json_string(buf);
  }
  case T_PARTITION: {
    json_t *a = json_array();
    for (size_t i = 0; i < r->size / sizeof(cl_device_partition_property); i++) {
      cl_device_partition_property v;
      memcpy(&v, d + i * sizeof(v), sizeof(v));
      if (v == 0)
        break;
      const char *name = flag_name(prop->flags, (unsigned long long)v);
      char buf[24];
      snprintf(buf, sizeof(buf), "0x%llx", (unsigned long long)v);
      json_array_append_new(a, json_string(name ? name : buf));
    }
    return a;
  }
  case T_VERSION: {
    cl_version v;
    memcpy(&v, d, sizeof(v));
    return jversion(v);
  }
  case T_NAME_VERSION: {
    json_t *a = json_array();
    for (size_t i = 0; i < r->size / sizeof(cl_name_version); i++) {
      cl_name_version nv;
      memcpy(&nv, d + i * sizeof(nv), sizeof(nv));
      nv.name[CL_NAME_VERSION_MAX_NAME_SIZE - 1] = '\0';
      json_t *o = json_object();
      json_object_set_new(o, "name", jstr(nv.name));
      json_object_set_new(o, "version", jversion(nv.version));
      json_array_append_new(a, o);
    }
    return a;
  }
  case T_UUID: case T_LUID: {
    char buf[33];
    size_t n = prop->type == T_UUID ? 16 : 8;
    for (size_t i = 0; i < n; i++)
      snprintf(buf + 2 * i, 3, "%02x", d[i]);
    return json_string(buf);
  }
  case T_PCI_BUS: {
    cl_device_pci_bus_info_khr v;
    memcpy(&v, d, sizeof(v));
    char buf[48];
    snprintf(buf, sizeof(buf), "%04x:%02x:%02x.%x", (unsigned)v.pci_domain,
             (unsigned)v.pci_bus, (unsigned)v.pci_device,
             (unsigned)v.pci_function);
    return json_string(buf);
  }
  }
  return json_null();
}

/* Fill obj with every property of the subject's table. */
static void add_props(json_t *obj, const info_subject *subject) {
  for (size_t i = 0; i < info_prop_count(subject->target); i++) {
    const info_prop *p = info_prop_at(subject->target, i);
    info_result r;
    info_query(subject, p, &r);
    json_object_set_new(obj, p->name, info_json_value(p, &r));
    info_result_free(&r);
  }
}

json_t *info_json_kiln(const info_device *dev) {
  if (dev->kdev == NULL)
    return json_pack("{s:s}", "error",
                     "kiln skipped this device (see \"errors\")");
  const kiln_device_info *info = kiln_device_get_info(dev->kdev);
  json_t *o = json_object();
  char sel[48];
  snprintf(sel, sizeof(sel), "%zu:%zu", info->platform_index, info->device_index);
  json_object_set_new(o, "selector", json_string(sel));
  json_object_set_new(o, "stable_id", jstr(info->stable_id));
  json_object_set_new(o, "profile", jstr(info->profile));
  json_object_set_new(o, "type", jstr(kiln_device_type_name(info->type)));
  json_t *quirks = json_array();
  for (unsigned bit = 1; bit != 0; bit <<= 1) {
    if (info->quirks & bit) {
      const char *name = kiln_quirk_name(bit);
      char buf[24];
      snprintf(buf, sizeof(buf), "0x%x", bit);
      json_array_append_new(quirks, json_string(name ? name : buf));
    }
  }
  json_object_set_new(o, "quirks", quirks);
  json_object_set_new(o, "cl_version", json_integer(info->cl_version));
  json_object_set_new(o, "fp16", json_boolean(info->fp16));
  json_object_set_new(o, "fp64", json_boolean(info->fp64));
  json_object_set_new(o, "subgroups", json_boolean(info->subgroups));
  if (dev->explain != NULL) {
    json_object_set_new(o, "taken", json_boolean(dev->taken));
    json_object_set_new(o, "reason", jstr(dev->explain));
  }
  if (dev->check >= 0) {
    json_t *c = json_object();
    json_object_set_new(c, "result", json_string(dev->check ? "PASS" : "FAIL"));
    json_object_set_new(c, "ms", json_real(dev->check_ms));
    if (dev->check_detail)
      json_object_set_new(c, "detail", jstr(dev->check_detail));
    json_object_set_new(o, "check", c);
  }
  return o;
}

static json_t *platform_json(const info_model *model, const info_platform *plat,
                             size_t index) {
  json_t *o = json_object();
  json_object_set_new(o, "index", json_integer((json_int_t)index));
  char *version = info_query_string(INFO_PLATFORM, plat->id, CL_PLATFORM_VERSION);
  char *exts = info_query_string(INFO_PLATFORM, plat->id, CL_PLATFORM_EXTENSIONS);
  info_subject subject = {INFO_PLATFORM, plat->id, info_parse_version(version),
                          exts};
  add_props(o, &subject);
  free(version);
  free(exts);
  json_t *devices = json_array();
  for (size_t d = 0; d < plat->device_count; d++) {
    const info_device *dev = &plat->devices[d];
    if (!info_device_shown(model, dev))
      continue;
    json_t *dj = json_object();
    json_object_set_new(dj, "index", json_integer((json_int_t)dev->index));
    char *dversion = info_query_string(INFO_DEVICE, dev->id, CL_DEVICE_VERSION);
    char *dexts = info_query_string(INFO_DEVICE, dev->id, CL_DEVICE_EXTENSIONS);
    info_subject ds = {INFO_DEVICE, dev->id, info_parse_version(dversion), dexts};
    add_props(dj, &ds);
    free(dversion);
    free(dexts);
    json_object_set_new(dj, "kiln", info_json_kiln(dev));
    json_array_append_new(devices, dj);
  }
  json_object_set_new(o, "devices", devices);
  return o;
}

static json_t *errors_json(const info_model *model) {
  json_t *a = json_array();
  if (model->platform_error != 0) {
    json_array_append_new(a, json_pack("{s:n,s:n,s:s,s:s,s:i,s:s}",
        "platform", "device", "call", "clGetPlatformIDs",
        "error", kiln_cl_error_name(model->platform_error),
        "code", model->platform_error,
        "message", "the ICD loader found no usable platform "
                   "(run `kiln info --doctor`)"));
  }
  if (model->list == NULL) {
    json_array_append_new(a, json_pack("{s:n,s:n,s:s,s:s,s:i,s:s}",
        "platform", "device", "call", "kiln_device_list_create",
        "error", "KILN_ERROR", "code", 0, "message", kiln_last_error()));
    return a;
  }
  size_t n = kiln_device_list_get_problem_count(model->list);
  for (size_t i = 0; i < n; i++) {
    const kiln_device_problem *p = kiln_device_list_get_problem(model->list, i);
    if (p == NULL || info_problem_repeats_platform_error(model, p))
      continue;
    json_t *o = json_object();
    /* A problem before any platform (the loader's) has no platform. */
    bool no_platform = p->platform_index == SIZE_MAX;
    json_object_set_new(o, "platform", no_platform ? json_null()
                                                   : json_integer((json_int_t)p->platform_index));
    json_object_set_new(o, "platform_name", no_platform ? json_null()
                                                        : jstr(p->platform_name));
    json_object_set_new(o, "device", p->device_index == SIZE_MAX
                                         ? json_null()
                                         : json_integer((json_int_t)p->device_index));
    json_object_set_new(o, "call", jstr(p->call));
    json_object_set_new(o, "error", json_string(kiln_cl_error_name(p->cl_error)));
    json_object_set_new(o, "code", json_integer(p->cl_error));
    json_object_set_new(o, "message", jstr(p->message));
    json_array_append_new(a, o);
  }
  return a;
}

json_t *info_json_document(const info_model *model, json_t *doctor) {
  json_t *doc = json_object();
  json_object_set_new(doc, "schema", json_string("kiln-info/1"));
  json_object_set_new(doc, "kiln_version", json_string(kiln_version()));
  if (model->selector != NULL || model->explain) {
    json_object_set_new(doc, "selector",
                        model->selection
                            ? jstr(kiln_selection_get_selector(model->selection))
                            : jstr(model->selector));
  }
  json_t *plats = json_array();
  for (size_t p = 0; p < model->platform_count; p++) {
    const info_platform *plat = &model->platforms[p];
    /* Under --select, a platform with nothing taken is left out. */
    if (model->selector != NULL && !model->explain) {
      bool any = false;
      for (size_t d = 0; d < plat->device_count; d++)
        any = any || info_device_shown(model, &plat->devices[d]);
      if (!any)
        continue;
    }
    json_array_append_new(plats, platform_json(model, plat, p));
  }
  json_object_set_new(doc, "platforms", plats);
  json_object_set_new(doc, "errors", errors_json(model));
  if (doctor != NULL)
    json_object_set_new(doc, "doctor", doctor);
  return doc;
}
