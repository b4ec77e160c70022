/* The registry of backend profiles, in matching order.
 *
 * Order matters: the first profile whose match() accepts a device wins.
 * PoCL comes before the vendor profiles because PoCL on an Intel or AMD CPU
 * reports that CPU's vendor (and PoCL 3.1 reports Intel's vendor id 0x8086
 * even on AMD CPUs), yet it needs CPU-style kernels, not Intel's or AMD's
 * GPU tuning. rusticl-on-CPU comes early for the same reason. generic accepts
 * everything and must stay last. */
#include <strings.h>

#include "backend.h"

extern const struct kiln_backend kiln_backend_pocl;
extern const struct kiln_backend kiln_backend_rusticl;
extern const struct kiln_backend kiln_backend_nvidia;
extern const struct kiln_backend kiln_backend_amd;
extern const struct kiln_backend kiln_backend_intel;
extern const struct kiln_backend kiln_backend_generic;

const struct kiln_backend *const kiln__backends[] = {
    &kiln_backend_pocl,  &kiln_backend_rusticl, &kiln_backend_nvidia,
    &kiln_backend_amd,   &kiln_backend_intel,   &kiln_backend_generic,
};

const size_t kiln__backend_count =
    sizeof kiln__backends / sizeof kiln__backends[0];

const struct kiln_backend *
kiln__backend_match(const struct kiln_backend_probe *probe) {
  if (probe == NULL)
    return &kiln_backend_generic;
  for (size_t i = 0; i < kiln__backend_count; i++)
    if (kiln__backends[i]->match(probe))
      return kiln__backends[i];
  return &kiln_backend_generic;
}

const struct kiln_backend *kiln__backend_find(const char *name) {
  if (name == NULL)
    return NULL;
  for (size_t i = 0; i < kiln__backend_count; i++)
    if (strcasecmp(kiln__backends[i]->name, name) == 0)
      return kiln__backends[i];
  return NULL;
}
