/* Facts that recognise a device, shared by the profiles' match() functions
 * and the selector: vendor from its name or PCI id, PoCL and rusticl from
 * the platform name. Below the profiles, which call these, and the registry
 * (registry.c), which lists the profiles. */
#include <string.h>
#include <strings.h>

#include "backend.h"

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
