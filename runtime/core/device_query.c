/* Robust queries of one platform or device: drivers are not trusted, so
 * strings are read as size query, allocate, value query, NUL-terminate, with
 * absurd sizes capped, and an empty, over-long or inconsistent answer is an
 * error code, never a crash. */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "device_query.h"

/* Longest string kiln reads from a driver. Real answers are at most a few
 * KiB (extension lists); a larger size is a broken driver. */
#define MAX_INFO_STRING ((size_t)1 << 20)
/* Buffer tried when a driver reports a size of 0 for a string, which the
 * specification forbids (the NUL alone needs 1 byte). */
#define ZERO_SIZE_RETRY 4096

static cl_int get_info(const struct kiln__query_target *t, cl_uint param,
                       size_t size, void *value, size_t *size_ret) {
  if (t->device != NULL)
    return clGetDeviceInfo(t->device, param, size, value, size_ret);
  return clGetPlatformInfo(t->platform, param, size, value, size_ret);
}

cl_int kiln__query_string(const struct kiln__query_target *t, cl_uint param,
                          char **out) {
  *out = NULL;
  size_t size = 0;
  cl_int err = get_info(t, param, 0, NULL, &size);
  if (err != CL_SUCCESS)
    return err;
  if (size == 0)
    size = ZERO_SIZE_RETRY;
  /* A driver may report a size the value query then disagrees with: try
   * again with the size the failed value query returned, a few times. */
  for (int attempt = 0; attempt < 3; attempt++) {
    if (size > MAX_INFO_STRING)
      return CL_INVALID_VALUE;
    char *buf = calloc(size + 1, 1);
    if (buf == NULL)
      return CL_OUT_OF_HOST_MEMORY;
    size_t got = 0;
    err = get_info(t, param, size, buf, &got);
    if (err == CL_SUCCESS) {
      buf[size] = '\0'; /* whatever the driver wrote, it ends here */
      *out = buf;
      return CL_SUCCESS;
    }
    free(buf);
    if (err != CL_INVALID_VALUE || got <= size)
      return err;
    size = got;
  }
  return err;
}

cl_int kiln__query_scalar(const struct kiln__query_target *t, cl_uint param,
                          void *value, size_t size) {
  memset(value, 0, size);
  return get_info(t, param, size, value, NULL);
}

uint32_t kiln__parse_cl_version(const char *text) {
  unsigned major = 0, minor = 0;
  if (text == NULL || sscanf(text, "OpenCL %u.%u", &major, &minor) != 2)
    return 0;
  if (major > 99 || minor > 9)
    return 0;
  return (uint32_t)(major * 100 + minor * 10);
}

void kiln__normalise_spaces(char *s) {
  size_t w = 0;
  bool pending = false;
  for (size_t r = 0; s[r] != '\0'; r++) {
    if (isspace((unsigned char)s[r])) {
      pending = w > 0;
      continue;
    }
    if (pending)
      s[w++] = ' ';
    pending = false;
    s[w++] = s[r];
  }
  s[w] = '\0';
}

bool kiln__has_extension(const char *list, const char *ext) {
  size_t n = strlen(ext);
  for (const char *p = list; (p = strstr(p, ext)) != NULL; p += n)
    if ((p == list || p[-1] == ' ') && (p[n] == ' ' || p[n] == '\0'))
      return true;
  return false;
}
