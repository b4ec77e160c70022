/* Kernel handles: creation, work-group queries, and launch with validated
 * work sizes. The arguments (types, setters) live in kernel_args.c. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

/* ---- create / destroy -------------------------------------------------- */

/* The kernel names of program as "a, b, c" into buf. */
static void kernel_names(cl_program program, char *buf, size_t capacity) {
  size_t size = 0;
  buf[0] = '\0';
  if (clGetProgramInfo(program, CL_PROGRAM_KERNEL_NAMES, 0, NULL, &size) !=
          CL_SUCCESS ||
      size == 0)
    return;
  char *names = malloc(size + 1);
  if (names == NULL)
    return;
  if (clGetProgramInfo(program, CL_PROGRAM_KERNEL_NAMES, size, names, NULL) ==
      CL_SUCCESS) {
    names[size] = '\0';
    size_t used = 0;
    for (const char *p = names; *p != '\0' && used + 3 < capacity; p++) {
      if (*p == ';') {
        buf[used++] = ',';
        buf[used++] = ' ';
      } else {
        buf[used++] = *p;
      }
    }
    buf[used] = '\0';
  }
  free(names);
}

kiln_status kiln_kernel_create(kiln_program *program, const char *name,
                               kiln_kernel **out) {
  if (out != NULL)
    *out = NULL;
  if (program == NULL || name == NULL || out == NULL)
    return kiln__fail(KILN_ERR_NULL_POINTER, "kiln_kernel_create: %s is NULL",
                      program == NULL ? "program" : name == NULL ? "name" : "out");
  if (!program->built)
    return kiln__fail(KILN_ERR_INVALID_STATE,
                      "kiln_kernel_create: the program is not built; call "
                      "kiln_program_build first");
  const struct kiln_device *device = program->ctx->device;
  cl_int err = CL_SUCCESS;
  cl_kernel cl = clCreateKernel(program->cl, name, &err);
  if (err == CL_INVALID_KERNEL_NAME) {
    char names[1024];
    kernel_names(program->cl, names, sizeof names);
    return kiln__fail(KILN_ERR_NOT_FOUND,
                      "kiln_kernel_create: the program has no kernel named "
                      "'%s'; its kernels are: %s",
                      name, names[0] != '\0' ? names : "(none)");
  }
  if (err != CL_SUCCESS)
    return kiln__fail_cl(err, "clCreateKernel", device, "kernel '%s'", name);

  kiln_status st = KILN_OK;
  cl_uint num_args = 0;
  kiln_kernel *kernel = calloc(1, sizeof *kernel);
  if (kernel == NULL)
    goto nomem;
  kernel->cl = cl;
  err = clGetKernelInfo(cl, CL_KERNEL_NUM_ARGS, sizeof num_args, &num_args,
                        NULL);
  if (err != CL_SUCCESS) {
    st = kiln__fail_cl(err, "clGetKernelInfo", device,
                       "CL_KERNEL_NUM_ARGS of kernel '%s'", name);
    goto fail;
  }
  kernel->num_args = num_args;
  kernel->name = strdup(name);
  kernel->args = calloc(num_args > 0 ? num_args : 1, sizeof *kernel->args);
  if (kernel->name == NULL || kernel->args == NULL)
    goto nomem;
  kiln__kernel_query_args(kernel, device);
  /* Per-kernel limits: register-heavy kernels may allow smaller groups
   * than the device, and reqd_work_group_size fixes the group. */
  if (clGetKernelWorkGroupInfo(cl, device->id, CL_KERNEL_WORK_GROUP_SIZE,
                               sizeof kernel->max_group, &kernel->max_group,
                               NULL) != CL_SUCCESS)
    kernel->max_group = 0;
  if (clGetKernelWorkGroupInfo(cl, device->id, CL_KERNEL_COMPILE_WORK_GROUP_SIZE,
                               sizeof kernel->required, kernel->required,
                               NULL) != CL_SUCCESS)
    memset(kernel->required, 0, sizeof kernel->required);
  kernel->program = program;
  atomic_fetch_add(&program->children, 1);
  kiln__context_child_added(program->ctx);
  *out = kernel;
  return KILN_OK;
nomem:
  st = kiln__fail(KILN_ERR_OUT_OF_HOST_MEMORY,
                  "kiln_kernel_create: cannot allocate kernel '%s'", name);
fail:
  if (kernel != NULL) {
    free(kernel->name);
    free(kernel->args);
    free(kernel);
  }
  clReleaseKernel(cl);
  return st;
}

kiln_status kiln_kernel_destroy(kiln_kernel *kernel) {
  if (kernel == NULL)
    return KILN_OK;
  kiln_program *program = kernel->program;
  clReleaseKernel(kernel->cl);
  free(kernel->name);
  free(kernel->args);
  free(kernel);
  atomic_fetch_sub(&program->children, 1);
  kiln__context_child_removed(program->ctx);
  return KILN_OK;
}

uint32_t kiln_kernel_get_arg_count(const kiln_kernel *kernel) {
  return kernel != NULL ? kernel->num_args : 0;
}

/* One clGetKernelWorkGroupInfo query of kernel into value (size bytes),
 * zeroed first so that a driver writing fewer bytes leaves a defined value. */
static kiln_status work_group_info(const kiln_kernel *kernel,
                                   cl_kernel_work_group_info param,
                                   const char *param_name, void *value,
                                   size_t size) {
  const struct kiln_device *device = kernel->program->ctx->device;
  memset(value, 0, size);
  cl_int err = clGetKernelWorkGroupInfo(kernel->cl, device->id, param, size,
                                        value, NULL);
  if (err != CL_SUCCESS)
    return kiln__fail_cl(err, "clGetKernelWorkGroupInfo", device,
                         "kiln_kernel_get_info: %s of kernel '%s'", param_name,
                         kernel->name);
  return KILN_OK;
}

kiln_status kiln_kernel_get_info(const kiln_kernel *kernel,
                                 kiln_kernel_info *out) {
  if (kernel == NULL || out == NULL)
    return kiln__fail(KILN_ERR_NULL_POINTER, "kiln_kernel_get_info: %s is NULL",
                      kernel == NULL ? "kernel" : "out");
  kiln_kernel_info info = {.name = kernel->name, .num_args = kernel->num_args};
  cl_ulong local = 0, private_bytes = 0;
  kiln_status st = work_group_info(kernel, CL_KERNEL_WORK_GROUP_SIZE,
                                   "CL_KERNEL_WORK_GROUP_SIZE",
                                   &info.work_group_size,
                                   sizeof info.work_group_size);
  if (st == KILN_OK)
    st = work_group_info(kernel, CL_KERNEL_PREFERRED_WORK_GROUP_SIZE_MULTIPLE,
                         "CL_KERNEL_PREFERRED_WORK_GROUP_SIZE_MULTIPLE",
                         &info.preferred_multiple,
                         sizeof info.preferred_multiple);
  if (st == KILN_OK)
    st = work_group_info(kernel, CL_KERNEL_COMPILE_WORK_GROUP_SIZE,
                         "CL_KERNEL_COMPILE_WORK_GROUP_SIZE",
                         info.required_size, sizeof info.required_size);
  if (st == KILN_OK)
    st = work_group_info(kernel, CL_KERNEL_LOCAL_MEM_SIZE,
                         "CL_KERNEL_LOCAL_MEM_SIZE", &local, sizeof local);
  if (st == KILN_OK)
    st = work_group_info(kernel, CL_KERNEL_PRIVATE_MEM_SIZE,
                         "CL_KERNEL_PRIVATE_MEM_SIZE", &private_bytes,
                         sizeof private_bytes);
  if (st != KILN_OK)
    return st;
  info.local_mem_bytes = local;
  info.private_mem_bytes = private_bytes;
  for (uint32_t i = 0; i < kernel->num_args; i++)
    info.local_arg_bytes += kernel->args[i].local_bytes;
  *out = info;
  return KILN_OK;
}

/* ---- launch -------------------------------------------------------------- */

/* The largest divisor of n that is at most cap (>= 1), preferring multiples
 * of multiple when one is at least half as large: vectorising drivers run
 * such groups without a scalar remainder loop. */
static size_t divisor_at_most(size_t n, size_t cap, size_t multiple) {
  if (cap >= n)
    return n;
  if (cap < 1)
    return 1;
  size_t best = 1;
  for (size_t d = cap; d >= 1; d--) {
    if (n % d == 0) {
      best = d;
      break;
    }
  }
  if (multiple > 1 && best % multiple != 0) {
    for (size_t d = cap - cap % multiple; d >= multiple && d * 2 >= best;
         d -= multiple)
      if (n % d == 0)
        return d;
  }
  return best;
}

/* A local size for drivers that, given none, run a small range as one
 * work-group on one thread (KILN_QUIRK_SERIAL_DEFAULT_LOCAL_SIZE): groups
 * as large as the limits allow while every compute unit still gets at least
 * one, dimension 0 first. */
static void choose_local_size(const struct kiln_device *device,
                              const kiln_kernel *kernel,
                              const struct kiln_backend *backend,
                              uint32_t work_dim, const size_t *global,
                              size_t *local) {
  size_t total = 1;
  for (uint32_t d = 0; d < work_dim; d++)
    total = kiln__mul_overflows(total, global[d], &total) ? SIZE_MAX : total;
  size_t units = device->info.compute_units > 0 ? device->info.compute_units : 1;
  size_t target = total / units;
  size_t max_group = device->info.max_work_group_size > 0
                         ? device->info.max_work_group_size
                         : 1;
  if (kernel->max_group > 0 && kernel->max_group < max_group)
    max_group = kernel->max_group;
  if (target > max_group)
    target = max_group;
  if (target < 1)
    target = 1;
  size_t product = 1;
  for (uint32_t d = 0; d < work_dim; d++) {
    size_t cap = target / product;
    size_t item_max = device->info.max_work_item_sizes[d];
    if (item_max > 0 && cap > item_max)
      cap = item_max;
    local[d] = divisor_at_most(global[d], cap, d == 0 ? backend->wg_multiple : 1);
    product *= local[d];
  }
}

static kiln_status check_sizes(const struct kiln_device *device,
                               const kiln_kernel *kernel, uint32_t work_dim,
                               const size_t *global, const size_t *local) {
  static const char fn[] = "kiln_kernel_launch";
  uint32_t max_dims = device->info.max_work_item_dims > 0
                          ? device->info.max_work_item_dims
                          : 3;
  if (work_dim < 1 || work_dim > 3 || work_dim > max_dims)
    return kiln__fail(KILN_ERR_INVALID_ARGUMENT,
                      "%s: work_dim %u is out of range: it must be 1 to %u", fn,
                      work_dim, max_dims < 3 ? max_dims : 3);
  size_t total = 1;
  for (uint32_t d = 0; d < work_dim; d++) {
    if (global[d] == 0)
      return kiln__fail(KILN_ERR_INVALID_SIZE,
                        "%s: global_size[%u] is 0; every dimension needs at "
                        "least one work-item",
                        fn, d);
    if (kiln__mul_overflows(total, global[d], &total))
      return kiln__fail(KILN_ERR_INVALID_SIZE,
                        "%s: the global size's work-item count overflows "
                        "size_t at dimension %u",
                        fn, d);
  }
  if (local == NULL)
    return KILN_OK;
  size_t group = 1;
  for (uint32_t d = 0; d < work_dim; d++) {
    size_t item_max = device->info.max_work_item_sizes[d];
    if (local[d] == 0)
      return kiln__fail(KILN_ERR_INVALID_SIZE, "%s: local_size[%u] is 0", fn, d);
    if (global[d] % local[d] != 0)
      return kiln__fail(KILN_ERR_INVALID_SIZE,
                        "%s: local_size[%u] = %zu does not divide "
                        "global_size[%u] = %zu",
                        fn, d, local[d], d, global[d]);
    if (item_max > 0 && local[d] > item_max)
      return kiln__fail(KILN_ERR_INVALID_SIZE,
                        "%s: local_size[%u] = %zu exceeds the device's max "
                        "work-item size %zu in dimension %u",
                        fn, d, local[d], item_max, d);
    if (kiln__mul_overflows(group, local[d], &group))
      group = SIZE_MAX;
  }
  if (device->info.max_work_group_size > 0 &&
      group > device->info.max_work_group_size)
    return kiln__fail(KILN_ERR_INVALID_SIZE,
                      "%s: the local size's %zu work-items exceed the "
                      "device's max work-group size %zu",
                      fn, group, device->info.max_work_group_size);
  if (kernel->max_group > 0 && group > kernel->max_group)
    return kiln__fail(KILN_ERR_INVALID_SIZE,
                      "%s: the local size's %zu work-items exceed the max "
                      "work-group size %zu of kernel '%s' on this device",
                      fn, group, kernel->max_group, kernel->name);
  if (kernel->required[0] != 0)
    for (uint32_t d = 0; d < work_dim; d++)
      if (local[d] != kernel->required[d])
        return kiln__fail(KILN_ERR_INVALID_SIZE,
                          "%s: kernel '%s' requires the local size (%zu, %zu, "
                          "%zu) (reqd_work_group_size) but local_size[%u] = %zu",
                          fn, kernel->name, kernel->required[0],
                          kernel->required[1], kernel->required[2], d, local[d]);
  return KILN_OK;
}

/* Trace one launch: the kernel's name, global and local sizes (local null
 * when the driver chose). */
static void trace_launch(const kiln_queue *queue, const kiln_kernel *kernel,
                         uint32_t work_dim, const size_t *global_size,
                         const size_t *local_size, cl_event ev,
                         uint64_t host_ns) {
  json_t *global = json_array(), *local = local_size != NULL ? json_array()
                                                             : json_null();
  for (uint32_t d = 0; d < work_dim; d++) {
    json_array_append_new(global, json_integer((json_int_t)global_size[d]));
    if (local_size != NULL)
      json_array_append_new(local, json_integer((json_int_t)local_size[d]));
  }
  kiln__trace_commands(queue, "kiln.kernel", kernel->name,
                       json_pack("{s:s, s:o, s:o}", "kernel", kernel->name,
                                 "global", global, "local", local),
                       ev, ev, host_ns);
}

/* A launch on a recording queue: checked like one that runs, then handed
 * to the recorder with every buffer argument. Recorded launches run at
 * replay, so they take no wait list and give no event. */
static kiln_status record_launch(kiln_queue *queue, kiln_kernel *kernel,
                                 uint32_t work_dim, const size_t *global_size,
                                 const size_t *local_size, size_t num_wait,
                                 kiln_event **out_event) {
  static const char fn[] = "kiln_kernel_launch";
  if (num_wait > 0 || out_event != NULL)
    return kiln__fail(KILN_ERR_INVALID_STATE,
                      "%s: the queue is recording a sequence; recorded "
                      "launches take no wait list and give no event (pass "
                      "them to kiln_sequence_replay)",
                      fn);
  for (uint32_t i = 0; i < kernel->num_args; i++)
    if (!kernel->args[i].set)
      return kiln__fail(KILN_ERR_INVALID_STATE,
                        "%s: argument %u of kernel '%s' is not set; a "
                        "recording captures every argument at launch",
                        fn, i, kernel->name);
  struct kiln__recorder *rec = queue->recorder;
  for (uint32_t i = 0; i < kernel->num_args; i++)
    if (kernel->args[i].buffer != NULL) {
      kiln_status st = rec->use_buffer(rec, kernel->args[i].buffer);
      if (st != KILN_OK)
        return st;
    }
  return rec->launch(rec, kernel->cl, kernel, work_dim, global_size,
                     local_size);
}

kiln_status kiln_kernel_launch(kiln_queue *queue, kiln_kernel *kernel,
                               uint32_t work_dim, const size_t *global_size,
                               const size_t *local_size, size_t num_wait,
                               kiln_event *const *wait_list,
                               kiln_event **out_event) {
  static const char fn[] = "kiln_kernel_launch";
  if (out_event != NULL)
    *out_event = NULL;
  if (queue == NULL || kernel == NULL || global_size == NULL)
    return kiln__fail(KILN_ERR_NULL_POINTER, "%s: %s is NULL", fn,
                      queue == NULL    ? "queue"
                      : kernel == NULL ? "kernel"
                                       : "global_size");
  kiln_context *ctx = queue->ctx;
  if (kernel->program->ctx != ctx)
    return kiln__fail(KILN_ERR_WRONG_CONTEXT,
                      "%s: kernel '%s' belongs to another context than the "
                      "queue",
                      fn, kernel->name);
  const struct kiln_device *device = ctx->device;
  kiln_status st = check_sizes(device, kernel, work_dim, global_size, local_size);
  if (st != KILN_OK)
    return st;
  size_t chosen[3] = {1, 1, 1};
  if (local_size == NULL && kernel->required[0] != 0) {
    /* Some drivers (PoCL 3.1) refuse a NULL local size even when the kernel
     * fixes it; pass the required one, checked like a caller's. */
    for (uint32_t d = 0; d < work_dim; d++)
      chosen[d] = kernel->required[d];
    st = check_sizes(device, kernel, work_dim, global_size, chosen);
    if (st != KILN_OK)
      return st;
    local_size = chosen;
  } else if (local_size == NULL && ctx->backend != NULL &&
      (ctx->backend->quirks & KILN_QUIRK_SERIAL_DEFAULT_LOCAL_SIZE) != 0) {
    choose_local_size(device, kernel, ctx->backend, work_dim, global_size,
                      chosen);
    local_size = chosen;
  }

  if (queue->recorder != NULL)
    return record_launch(queue, kernel, work_dim, global_size, local_size,
                         num_wait, out_event);

  cl_event inline_waits[KILN__WAIT_INLINE];
  cl_event *waits = NULL;
  st = kiln__wait_list(queue, num_wait, wait_list, inline_waits, &waits);
  if (st != KILN_OK)
    return st;
  cl_event ev = NULL;
  bool traced = kiln__trace_enabled();
  uint64_t host_ns = traced ? kiln__now_ns() : 0;
  cl_int err = clEnqueueNDRangeKernel(queue->cl, kernel->cl, work_dim, NULL,
                                      global_size, local_size, (cl_uint)num_wait,
                                      num_wait > 0 ? waits : NULL,
                                      out_event != NULL || traced ? &ev : NULL);
  kiln__wait_list_free(waits, inline_waits);
  if (err == CL_INVALID_KERNEL_ARGS)
    return kiln__kernel_fail_unset_args(kernel, err, device);
  if (err != CL_SUCCESS)
    return kiln__fail_cl(err, "clEnqueueNDRangeKernel", device,
                         "kernel '%s' over %u dimension%s", kernel->name,
                         work_dim, work_dim == 1 ? "" : "s");
  if (traced)
    trace_launch(queue, kernel, work_dim, global_size, local_size, ev,
                 host_ns);
  if (ev == NULL)
    return KILN_OK;
  return kiln__event_out(queue, ev, out_event);
}
