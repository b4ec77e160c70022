/* The registry of backend profiles, in matching order.
 *
 * Order matters: the first profile whose match() accepts a device wins.
 * PoCL comes before the vendor profiles because PoCL on an Intel or AMD CPU
 * reports that CPU's vendor (and PoCL 3.1 reports Intel's vendor id 0x8086
 * even on AMD CPUs), yet it needs CPU-style kernels, not Intel's or AMD's
 * GPU tuning. rusticl-on-CPU comes early for the same reason. generic accepts
 * everything and must stay last. */
#include <string.h>
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

bool kiln__contains_nocase(const char *haystack, const char *needle) {
  if (haystack == NULL || needle == NULL)
    return false;
  size_t n = strlen(needle);
  for (const char *h = haystack; *h != '\0'; h++)
    if (strncasecmp(h, needle, n) == 0)
      return true;
  return n == 0;
}

enum kiln_vendor kiln__backend_vendor(uint32_t vendor_id, const char *vendor) {
  /* Spellings seen in CL_DEVICE_VENDOR: "NVIDIA Corporation", "Advanced
   * Micro Devices, Inc.", "AuthenticAMD" (PoCL, AMD CPU), "Intel(R)
   * Corporation", "GenuineIntel" (PoCL, Intel CPU). */
  if (kiln__contains_nocase(vendor, "nvidia"))
    return KILN_VENDOR_NVIDIA;
  if (kiln__contains_nocase(vendor, "advanced micro devices") ||
      kiln__contains_nocase(vendor, "authenticamd") ||
      kiln__contains_nocase(vendor, "amd"))
    return KILN_VENDOR_AMD;
  if (kiln__contains_nocase(vendor, "intel"))
    return KILN_VENDOR_INTEL;
  /* PCI vendor ids: 0x1022 is AMD's CPU id, 0x1002 its GPU (ATI) id. */
  switch (vendor_id) {
  case 0x10de:
    return KILN_VENDOR_NVIDIA;
  case 0x1002:
  case 0x1022:
    return KILN_VENDOR_AMD;
  case 0x8086:
    return KILN_VENDOR_INTEL;
  default:
    return KILN_VENDOR_UNKNOWN;
  }
}

bool kiln__backend_is_pocl(const char *platform_name) {
  return kiln__contains_nocase(platform_name, "Portable Computing Language") ||
         kiln__contains_nocase(platform_name, "pocl");
}

bool kiln__backend_is_rusticl(const char *platform_name) {
  return kiln__contains_nocase(platform_name, "rusticl");
}
