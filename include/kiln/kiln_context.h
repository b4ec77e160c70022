/* Contexts: one device, the owner of every queue, buffer, program and event
 * made on it. */
#ifndef KILN_CONTEXT_H
#define KILN_CONTEXT_H

#if !defined(KILN_H_INSIDE) && !defined(KILN_COMPILATION)
#error "Only <kiln/kiln.h> can be included directly."
#endif

#include "kiln/kiln_common.h"
#include "kiln/kiln_device.h"

KILN_BEGIN_DECLS

enum {
  /* Do not read or write the persistent program cache for this context. */
  KILN_CONTEXT_NO_CACHE = 1u << 0,
};

typedef struct kiln_context_options {
  /* Force this backend profile ("nvidia", "amd", "intel", "pocl", "generic")
   * instead of the matched one. NULL: the KILN_PROFILE environment variable
   * when set, else the matched profile. An empty string counts as unset,
   * here and in KILN_PROFILE. An unknown name fails with KILN_ERR_NOT_FOUND
   * and the last error lists the valid names. */
  const char *profile;
  unsigned flags; /* KILN_CONTEXT_* */
} kiln_context_options;

/* Create a context on device. options may be NULL (all defaults). The context
 * copies what it needs from the device, so the device list may be destroyed
 * afterwards. Thread-safe. */
KILN_API kiln_status kiln_context_create(const kiln_device *device,
                                         const kiln_context_options *options,
                                         kiln_context **out);

/* Enumerate devices, select with selector (NULL: KILN_DEVICE, else the
 * default rule, see kiln_device.h) and create a context on the first device
 * taken. Thread-safe. */
KILN_API kiln_status kiln_context_create_default(const char *selector,
                                                 kiln_context **out);

/* Destroy a context. Returns KILN_ERR_BUSY, and destroys nothing, while any
 * queue, buffer, program, kernel or event made from it is still alive.
 * NULL is a no-op returning KILN_OK. Not thread-safe with respect to other
 * calls on the same context. */
KILN_API kiln_status kiln_context_destroy(kiln_context *ctx);

/* The context's device, as a copy owned by the context. Borrowed. */
KILN_API const kiln_device_info *
kiln_context_get_device_info(const kiln_context *ctx);
/* Name of the profile in force (after options and KILN_PROFILE). Borrowed. */
KILN_API const char *kiln_context_get_profile(const kiln_context *ctx);

KILN_END_DECLS

#endif
