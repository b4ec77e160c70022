/* A reader for the .npy files of tests/fixtures/ (NumPy's format, versions
 * 1.0 to 3.0): float64 ('<f8', little-endian), C order, up to NPY_MAX_DIMS
 * dimensions; the bytes are swapped on a big-endian host. Header-only, no
 * dependencies beyond libc. */
#ifndef KILN_TEST_NPY_H
#define KILN_TEST_NPY_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NPY_MAX_DIMS 6

struct npy_array {
  double *data; /* malloc'd; count elements */
  size_t count;
  size_t ndim;
  size_t shape[NPY_MAX_DIMS];
};

/* Read path into *a. Returns 0, or -1 with a message in err (errlen bytes)
 * when the file is missing, truncated or not a C-order float64 array. */
static inline int npy_read(const char *path, struct npy_array *a, char *err,
                           size_t errlen) {
  memset(a, 0, sizeof *a);
  FILE *f = fopen(path, "rb");
  if (f == NULL) {
    snprintf(err, errlen, "%s: cannot open", path);
    return -1;
  }
  unsigned char pre[12];
  char *hdr = NULL;
  int rc = -1;
  if (fread(pre, 1, 10, f) != 10 || memcmp(pre, "\x93NUMPY", 6) != 0 ||
      pre[6] < 1 || pre[6] > 3) {
    snprintf(err, errlen, "%s: not a .npy file of version 1 to 3", path);
    goto out;
  }
  size_t hlen = (size_t)pre[8] | (size_t)pre[9] << 8;
  if (pre[6] >= 2) { /* a 4-byte header length */
    if (fread(pre + 10, 1, 2, f) != 2) {
      snprintf(err, errlen, "%s: truncated header", path);
      goto out;
    }
    hlen |= (size_t)pre[10] << 16 | (size_t)pre[11] << 24;
  }
  hdr = calloc(hlen + 1, 1);
  if (hdr == NULL || fread(hdr, 1, hlen, f) != hlen) {
    snprintf(err, errlen, "%s: truncated header", path);
    goto out;
  }
  if (strstr(hdr, "'descr': '<f8'") == NULL ||
      strstr(hdr, "'fortran_order': False") == NULL) {
    snprintf(err, errlen, "%s: not a C-order '<f8' array: %s", path, hdr);
    goto out;
  }
  const char *p = strstr(hdr, "'shape': (");
  if (p == NULL) {
    snprintf(err, errlen, "%s: no shape in %s", path, hdr);
    goto out;
  }
  p += strlen("'shape': (");
  a->count = 1;
  while (*p != ')') {
    char *end;
    unsigned long long d = strtoull(p, &end, 10);
    if (end == p || a->ndim == NPY_MAX_DIMS) {
      snprintf(err, errlen, "%s: bad shape in %s", path, hdr);
      goto out;
    }
    a->shape[a->ndim++] = (size_t)d;
    a->count *= (size_t)d;
    p = end;
    while (*p == ',' || *p == ' ')
      p++;
  }
  a->data = malloc((a->count ? a->count : 1) * sizeof *a->data);
  if (a->data == NULL ||
      fread(a->data, sizeof *a->data, a->count, f) != a->count) {
    snprintf(err, errlen, "%s: truncated data (%zu elements expected)", path,
             a->count);
    free(a->data);
    a->data = NULL;
    goto out;
  }
  const uint16_t probe = 1;
  if (*(const unsigned char *)&probe == 0) /* big-endian host */
    for (size_t i = 0; i < a->count; i++) {
      unsigned char *b = (unsigned char *)&a->data[i];
      for (int j = 0; j < 4; j++) {
        unsigned char t = b[j];
        b[j] = b[7 - j];
        b[7 - j] = t;
      }
    }
  rc = 0;
out:
  free(hdr);
  fclose(f);
  return rc;
}

#endif
