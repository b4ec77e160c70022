/* Internal interfaces of `kiln info`: the property tables (info_props.c), the
 * JSON document (info_json.c), the device check (info_check.c), the doctor
 * (doctor.c) and the report model that cmd_info.c builds for them. */
#ifndef KILN_TOOLS_INFO_H
#define KILN_TOOLS_INFO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include <jansson.h>

#include "kiln/kiln.h"
#include "kiln/kiln_cl.h"
/* Extension queries (cl_khr_device_uuid, cl_nv_device_attribute_query, ...). */
#include <CL/cl_ext.h>

/* ---- property tables (info_props.c) ---- */

typedef enum info_target { INFO_PLATFORM, INFO_DEVICE } info_target;

typedef enum info_type {
  T_STR,         /* char[] */
  T_STR_LIST,    /* char[], whitespace-separated list (extensions) */
  T_STR_SEMI,    /* char[], ';'-separated list (built-in kernels) */
  T_UINT,        /* cl_uint */
  T_HEX_UINT,    /* cl_uint, shown in hex in text (vendor id) */
  T_ULONG,       /* cl_ulong */
  T_MEM,         /* cl_ulong, a size in bytes */
  T_SIZE,        /* size_t */
  T_SIZE_ARRAY,  /* size_t[] */
  T_BOOL,        /* cl_bool */
  T_BITS,        /* cl_bitfield (cl_ulong) with a flag table */
  T_ENUM,        /* cl_uint with a value table */
  T_PARTITION,   /* cl_device_partition_property[] (intptr_t), 0-terminated */
  T_VERSION,     /* cl_version */
  T_NAME_VERSION, /* cl_name_version[] */
  T_UUID,        /* cl_uchar[16] */
  T_LUID,        /* cl_uchar[8] */
  T_PCI_BUS,     /* cl_device_pci_bus_info_khr */
} info_type;

typedef struct info_flag {
  unsigned long long value;
  const char *name;
} info_flag;

typedef struct info_prop {
  const char *name;      /* OpenCL name, spelled as `clinfo --raw` does */
  const char *label;     /* human label for the text report */
  unsigned param;        /* cl_platform_info / cl_device_info value */
  info_type type;
  /* Gate: the query is made when the device (or platform) version is at
   * least min_version (major*100 + minor*10; 0 = always), or when extension
   * is non-NULL and present. With both 0/NULL it is always made. */
  unsigned min_version;
  const char *extension;
  const info_flag *flags; /* T_BITS, T_ENUM, T_PARTITION */
} info_prop;

typedef enum info_state {
  INFO_OK,          /* data/size hold the answer, validated for the type */
  INFO_UNSUPPORTED, /* gated out: not queried; detail says why */
  INFO_ERROR,       /* the query failed: cl_error and/or detail */
} info_state;

typedef struct info_result {
  info_state state;
  int cl_error;         /* 0 when the failure was not an OpenCL error */
  char detail[128];     /* "needs OpenCL 2.0", "returned 3 bytes, expected 4" */
  unsigned char *data;  /* malloc'd; for strings NUL-terminated */
  size_t size;          /* bytes returned by the driver */
} info_result;

/* What gating needs to know about the queried object. */
typedef struct info_subject {
  info_target target;
  void *handle;           /* cl_platform_id or cl_device_id */
  unsigned version;       /* parsed from CL_*_VERSION, 0 if unknown */
  const char *extensions; /* space-separated, may be NULL */
} info_subject;

size_t info_prop_count(info_target target);
const info_prop *info_prop_at(info_target target, size_t index);
/* NULL when no property has that name. */
const info_prop *info_prop_find(info_target target, const char *name);

/* Query one property, never trusting the driver: sizes are checked against
 * the type, strings are bounded and terminated. */
void info_query(const info_subject *subject, const info_prop *prop,
                info_result *out);
void info_result_free(info_result *result);

/* A string property as a malloc'd C string, or NULL if the query failed. */
char *info_query_string(info_target target, void *handle, unsigned param);

/* "OpenCL 3.0 PoCL" -> 300; 0 when it does not parse. */
unsigned info_parse_version(const char *text);
/* Whether the space-separated list has the exact word. */
bool info_has_extension(const char *list, const char *name);

/* Text of a result for the human report (malloc'd, never NULL). */
char *info_format_text(const info_prop *prop, const info_result *result);

/* Replace bytes that are not valid UTF-8 (and control characters other than
 * tab/newline) with '?', in place, so every string can go into JSON. */
void info_sanitize_utf8(char *text);

/* ---- report model (cmd_info.c) ---- */

typedef struct info_device {
  cl_device_id id;
  size_t index;              /* within its platform */
  const kiln_device *kdev;   /* kiln's record, NULL if kiln skipped it */
  size_t list_index;         /* index in kiln's list when kdev != NULL */
  bool taken;                /* by the selector (true without --select) */
  const char *explain;       /* kiln_selection_get_explanation, or NULL */
  int check;                 /* -1 not run, 0 FAIL, 1 PASS */
  char *check_detail;        /* malloc'd, or NULL */
  double check_ms;
} info_device;

typedef struct info_platform {
  cl_platform_id id;
  int device_error;          /* clGetDeviceIDs's error, 0 when fine */
  size_t device_count;
  info_device *devices;
} info_platform;

typedef struct info_model {
  int platform_error;        /* clGetPlatformIDs's error, 0 when fine */
  size_t platform_count;
  info_platform *platforms;
  kiln_device_list *list;    /* NULL if kiln's enumeration failed */
  kiln_selection *selection; /* NULL without --select/--explain */
  const char *selector;      /* as given, or NULL */
  bool explain;
  bool checked;              /* --check ran */
} info_model;

/* Whether a device is shown under the selection options in force: a
 * predicate on the model, inline so that the text report (cmd_info.c) and
 * the JSON document (info_json.c) share it without calling each other. */
static inline bool info_device_shown(const info_model *model,
                                     const info_device *device) {
  if (model->explain || model->selector == NULL)
    return true;
  return device->kdev != NULL && device->taken;
}

/* Whether a problem kiln's enumeration recorded is the clGetPlatformIDs
 * failure the tool found itself (model->platform_error), which both reports
 * give once, in the tool's words (they point at --doctor). */
static inline bool info_problem_repeats_platform_error(
    const info_model *model, const kiln_device_problem *problem) {
  return model->platform_error != 0 && problem->platform_index == SIZE_MAX &&
         problem->cl_error == model->platform_error;
}

/* ---- JSON (info_json.c) ---- */

json_t *info_json_value(const info_prop *prop, const info_result *result);
/* The whole kiln-info/1 document. doctor may be NULL. */
json_t *info_json_document(const info_model *model, json_t *doctor);
/* kiln's own view of a device ("kiln" object). */
json_t *info_json_kiln(const info_device *device);

/* ---- device check (info_check.c) ---- */

/* Build and run one small kernel on device; true on PASS. detail gets a
 * description of the failure (with a build log excerpt) or of the result. */
bool info_check_device(const kiln_device *device, char *detail,
                       size_t detail_size, double *elapsed_ms);

/* ---- doctor (doctor.c) ---- */

/* Run every diagnosis, print the findings to out (text) or collect them into
 * *json_out (when json_out is non-NULL). Returns 0 when nothing is wrong, 1
 * when a problem was found. Must run before anything else in the process
 * touches OpenCL: it forks to probe each ICD library in isolation. */
int info_doctor(FILE *out, json_t **json_out);

#endif
