/* Robust OpenCL info queries on one platform or device (device_query.c),
 * for device enumeration. Not installed. */
#ifndef KILN_DEVICE_QUERY_H
#define KILN_DEVICE_QUERY_H

#include "internal.h"

/* One object to query: a platform or a device. */
struct kiln__query_target {
  cl_platform_id platform;
  cl_device_id device; /* NULL: query the platform */
};

/* Read a string property into a fresh NUL-terminated allocation. Returns the
 * CL error of the failing query; *out is NULL only on failure (allocation
 * failure is reported as CL_OUT_OF_HOST_MEMORY). */
cl_int kiln__query_string(const struct kiln__query_target *t, cl_uint param,
                          char **out);
/* Read a fixed-size property; value is zeroed first so that a driver writing
 * fewer bytes leaves a defined value. */
cl_int kiln__query_scalar(const struct kiln__query_target *t, cl_uint param,
                          void *value, size_t size);
/* "OpenCL 3.0 PoCL" -> 300. 0 when the string does not follow the format. */
uint32_t kiln__parse_cl_version(const char *text);
/* Collapse every run of whitespace into one space, trimming both ends, in
 * place (PoCL's extension string holds runs of spaces). */
void kiln__normalise_spaces(char *s);

#endif
