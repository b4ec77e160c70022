/* Contexts: one OpenCL context on one device, the profile in force, and the
 * count of live children that makes destroying a busy context fail instead
 * of leaving dangling handles. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

/* Every context flag kiln knows; anything else is a caller error, not a
 * silently ignored bit. */
#define CONTEXT_FLAGS_KNOWN (KILN_CONTEXT_NO_CACHE)

/* Write "pocl, rusticl, ..." (the registry's names, in order) into buf. */
static void profile_names(char *buf, size_t capacity) {
  size_t used = 0;
  buf[0] = '\0';
  for (size_t i = 0; i < kiln__backend_count && used < capacity; i++) {
    int n = snprintf(buf + used, capacity - used, "%s%s", i == 0 ? "" : ", ",
                     kiln__backends[i]->name);
    if (n < 0)
      break;
    used += (size_t)n;
  }
}

/* The profile in force: options first, then KILN_BACKEND (KILN_PROFILE,
 * its old name, when KILN_BACKEND is unset), then the profile enumeration
 * matched. An empty string counts as unset everywhere, so `KILN_BACKEND=
 * prog` behaves like not setting it. KILN_PROFILE was renamed because a
 * user looking for profiling tried KILN_PROFILE=1. */
static kiln_status resolve_profile(const struct kiln_device *device,
                                   const kiln_context_options *options,
                                   const struct kiln_backend **out) {
  const char *name = NULL;
  const char *source = NULL;
  if (options != NULL && options->profile != NULL &&
      options->profile[0] != '\0') {
    name = options->profile;
    source = "kiln_context_options.profile";
  } else {
    static const char *const vars[] = {"KILN_BACKEND", "KILN_PROFILE"};
    for (size_t i = 0; i < 2 && name == NULL; i++) {
      const char *env = getenv(vars[i]);
      if (env != NULL && env[0] != '\0') {
        name = env;
        source = i == 0 ? "the KILN_BACKEND environment variable"
                        : "the KILN_PROFILE environment variable, the old "
                          "name of KILN_BACKEND";
      }
    }
  }
  if (name == NULL) {
    *out = device->backend != NULL ? device->backend
                                   : kiln__backend_find("generic");
    if (*out == NULL)
      return kiln__fail(KILN_ERR_NOT_FOUND,
                        "kiln_context_create: device '%s' has no matched "
                        "profile and no 'generic' profile is registered",
                        device->info.name);
    return KILN_OK;
  }
  *out = kiln__backend_find(name);
  if (*out == NULL) {
    char names[256];
    profile_names(names, sizeof names);
    /* A number is someone looking for profiling. */
    const bool number = name[strspn(name, "0123456789")] == '\0';
    return kiln__fail(KILN_ERR_NOT_FOUND,
                      "kiln_context_create: unknown profile '%s' (from %s); "
                      "valid profiles: %s%s",
                      name, source, names,
                      number ? " (it selects a backend profile; to see what "
                               "ran, set KILN_TRACE=FILE.json)"
                             : "");
  }
  return KILN_OK;
}

kiln_status kiln_context_create(const kiln_device *device,
                                const kiln_context_options *options,
                                kiln_context **out) {
  if (out == NULL)
    return kiln__fail(KILN_ERR_NULL_POINTER, "kiln_context_create: out is NULL");
  *out = NULL;
  if (device == NULL)
    return kiln__fail(KILN_ERR_NULL_POINTER,
                      "kiln_context_create: device is NULL");
  unsigned flags = options != NULL ? options->flags : 0;
  if ((flags & ~(unsigned)CONTEXT_FLAGS_KNOWN) != 0)
    return kiln__fail(KILN_ERR_INVALID_ARGUMENT,
                      "kiln_context_create: options->flags has unknown bits "
                      "0x%x",
                      flags & ~(unsigned)CONTEXT_FLAGS_KNOWN);

  const struct kiln_backend *backend = NULL;
  kiln_status status = resolve_profile(device, options, &backend);
  if (status != KILN_OK)
    return status;

  kiln_context *ctx = calloc(1, sizeof *ctx);
  if (ctx == NULL)
    return kiln__fail(KILN_ERR_OUT_OF_HOST_MEMORY,
                      "kiln_context_create: out of host memory");
  ctx->backend = backend;
  ctx->flags = flags;
  atomic_init(&ctx->children, 0);

  status = kiln__device_clone(device, &ctx->device);
  if (status != KILN_OK)
    goto fail;

  /* Naming the platform explicitly: some ICDs refuse a NULL property list
   * when several platforms are installed. */
  cl_context_properties props[] = {
      CL_CONTEXT_PLATFORM, (cl_context_properties)device->platform, 0};
  cl_int err = CL_SUCCESS;
  /* No notification callback: kiln never prints, and errors reach the caller
   * through the failing call's status anyway. */
  ctx->cl = clCreateContext(props, 1, &device->id, NULL, NULL, &err);
  if (err != CL_SUCCESS || ctx->cl == NULL) {
    status = kiln__fail_cl(err != CL_SUCCESS ? err : CL_OUT_OF_HOST_MEMORY,
                           "clCreateContext", device, "kiln_context_create");
    goto fail;
  }

  *out = ctx;
  return KILN_OK;

fail:
  if (ctx->cl != NULL)
    clReleaseContext(ctx->cl);
  kiln__device_free(ctx->device);
  free(ctx);
  return status;
}

kiln_status kiln_context_create_default(const char *selector,
                                        kiln_context **out) {
  if (out == NULL)
    return kiln__fail(KILN_ERR_NULL_POINTER,
                      "kiln_context_create_default: out is NULL");
  *out = NULL;
  kiln_device_list *list = NULL;
  kiln_status status = kiln_device_list_create(&list);
  if (status != KILN_OK)
    return status;
  const kiln_device *device = NULL;
  status = kiln_device_select(list, selector, &device);
  if (status == KILN_OK)
    status = kiln_context_create(device, NULL, out);
  /* The context holds its own copy of the device, so the list can go. */
  kiln_device_list_destroy(list);
  return status;
}

kiln_status kiln_context_destroy(kiln_context *ctx) {
  if (ctx == NULL)
    return KILN_OK;
  size_t children = atomic_load(&ctx->children);
  if (children > 0)
    return kiln__fail(KILN_ERR_BUSY,
                      "kiln_context_destroy: %zu object%s made from this "
                      "context (queues, buffers, programs, kernels, events) "
                      "%s still alive; destroy or release %s first",
                      children, children == 1 ? "" : "s",
                      children == 1 ? "is" : "are",
                      children == 1 ? "it" : "them");
  /* The rooms' state may hold programs of this cl_context: release it
   * first, the highest room's first. */
  for (size_t i = KILN__SLOTS; i-- > 0;) {
    struct kiln__attached *state = atomic_load(&ctx->attached[i]);
    if (state != NULL)
      state->destroy(state);
  }
  clReleaseContext(ctx->cl);
  kiln__device_free(ctx->device);
  free(ctx);
  return KILN_OK;
}

const kiln_device_info *kiln_context_get_device_info(const kiln_context *ctx) {
  return ctx != NULL ? &ctx->device->info : NULL;
}

const char *kiln_context_get_profile(const kiln_context *ctx) {
  return ctx != NULL ? ctx->backend->name : NULL;
}

void kiln__context_child_added(kiln_context *ctx) {
  atomic_fetch_add(&ctx->children, 1);
}

void kiln__context_child_removed(kiln_context *ctx) {
  atomic_fetch_sub(&ctx->children, 1);
}

struct kiln__attached *kiln__context_attach(kiln_context *ctx,
                                            enum kiln__slot slot,
                                            struct kiln__attached *state) {
  struct kiln__attached *current = NULL;
  if (atomic_compare_exchange_strong_explicit(&ctx->attached[slot], &current,
                                              state, memory_order_acq_rel,
                                              memory_order_acquire))
    return state;
  return current;
}
