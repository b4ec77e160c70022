/* Kernel arguments: what the driver says each argument is (its address
 * space and declared type), the typed setters checked against that, and the
 * message naming the arguments never set. kernel.c creates kernels and
 * launches them; this file owns kernel->args. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
/* ---- argument types ------------------------------------------------------ */

struct scalar_type {
  const char *name;
  size_t size; /* 0: the device's address width (size_t and friends) */
};

static const struct scalar_type scalar_types[] = {
    {"char", 1},      {"uchar", 1},      {"unsigned char", 1},
    {"short", 2},     {"ushort", 2},     {"unsigned short", 2},
    {"int", 4},       {"uint", 4},       {"unsigned int", 4},
    {"long", 8},      {"ulong", 8},      {"unsigned long", 8},
    {"float", 4},     {"double", 8},     {"half", 2},
    {"size_t", 0},    {"ptrdiff_t", 0},  {"intptr_t", 0},
    {"uintptr_t", 0}, {"unsigned", 4},
};

/* Pointer width of the device, for size_t arguments. */
static size_t address_bytes(const struct kiln_device *device) {
  cl_uint bits = 0;
  if (clGetDeviceInfo(device->id, CL_DEVICE_ADDRESS_BITS, sizeof bits, &bits,
                      NULL) != CL_SUCCESS ||
      (bits != 32 && bits != 64))
    return 0;
  return bits / 8;
}

/* The size of a by-value argument of declared type name ("float4"), or 0
 * when kiln does not know it (structs, typedefs, images): the driver then
 * checks the size itself. */
static size_t type_size(const char *type, const struct kiln_device *device) {
  for (size_t i = 0; i < sizeof scalar_types / sizeof scalar_types[0]; i++) {
    size_t n = strlen(scalar_types[i].name);
    if (strncmp(type, scalar_types[i].name, n) != 0)
      continue;
    const char *rest = type + n;
    size_t base = scalar_types[i].size;
    if (base == 0)
      base = address_bytes(device);
    if (*rest == '\0')
      return base;
    /* Vector types; three-component vectors occupy four components. */
    char *end = NULL;
    unsigned long width = strtoul(rest, &end, 10);
    if (end == rest || *end != '\0' || scalar_types[i].size == 0)
      continue;
    switch (width) {
    case 2:
    case 4:
    case 8:
    case 16:
      return base * width;
    case 3:
      return base * 4;
    default:
      return 0;
    }
  }
  return 0;
}

/* Fill kernel->args from the driver's argument info; leave arg_info false
 * when the driver gives none (programs from some binaries). */
void kiln__kernel_query_args(kiln_kernel *kernel,
                             const struct kiln_device *device) {
  kernel->arg_info = kernel->num_args > 0;
  for (uint32_t i = 0; i < kernel->num_args; i++) {
    struct kiln__kernel_arg *arg = &kernel->args[i];
    cl_kernel_arg_address_qualifier address = 0;
    char type[sizeof arg->type];
    if (clGetKernelArgInfo(kernel->cl, i, CL_KERNEL_ARG_ADDRESS_QUALIFIER,
                           sizeof address, &address, NULL) != CL_SUCCESS ||
        clGetKernelArgInfo(kernel->cl, i, CL_KERNEL_ARG_TYPE_NAME, sizeof type,
                           type, NULL) != CL_SUCCESS) {
      /* Type names longer than the buffer fail too: keep the address. */
      kernel->arg_info = false;
      for (uint32_t j = 0; j < kernel->num_args; j++)
        kernel->args[j] = (struct kiln__kernel_arg){0};
      return;
    }
    type[sizeof type - 1] = '\0';
    arg->address = (unsigned)address;
    snprintf(arg->type, sizeof arg->type, "%s", type);
    if (address == CL_KERNEL_ARG_ADDRESS_PRIVATE)
      arg->size = type_size(type, device);
  }
}

/* ---- argument setters --------------------------------------------------- */

static const char *address_name(unsigned address) {
  switch (address) {
  case CL_KERNEL_ARG_ADDRESS_GLOBAL:
    return "a __global pointer";
  case CL_KERNEL_ARG_ADDRESS_CONSTANT:
    return "a __constant pointer";
  case CL_KERNEL_ARG_ADDRESS_LOCAL:
    return "a __local pointer";
  default:
    return "by value";
  }
}

/* Common checks: handle and index. */
static kiln_status check_index(const char *fn, const kiln_kernel *kernel,
                               uint32_t index) {
  if (kernel == NULL)
    return kiln__fail(KILN_ERR_NULL_POINTER, "%s: kernel is NULL", fn);
  if (index >= kernel->num_args)
    return kiln__fail(KILN_ERR_OUT_OF_RANGE,
                      "%s: argument index %u is out of range: kernel '%s' has "
                      "%u argument%s",
                      fn, index, kernel->name, kernel->num_args,
                      kernel->num_args == 1 ? "" : "s");
  return KILN_OK;
}

static kiln_status set_arg(const char *fn, kiln_kernel *kernel, uint32_t index,
                           size_t size, const void *value) {
  cl_int err = clSetKernelArg(kernel->cl, index, size, value);
  if (err != CL_SUCCESS)
    return kiln__fail_cl(err, "clSetKernelArg", kernel->program->ctx->device,
                         "%s: argument %u of kernel '%s' (%zu bytes)", fn,
                         index, kernel->name, size);
  kernel->args[index].set = true;
  kernel->args[index].buffer = NULL; /* kiln_kernel_set_arg_buffer sets it */
  /* Only __local arguments are set without a value. */
  kernel->args[index].local_bytes = value == NULL ? size : 0;
  return KILN_OK;
}

kiln_status kiln_kernel_set_arg_buffer(kiln_kernel *kernel, uint32_t index,
                                       const kiln_buffer *buffer) {
  static const char fn[] = "kiln_kernel_set_arg_buffer";
  kiln_status st = check_index(fn, kernel, index);
  if (st != KILN_OK)
    return st;
  if (buffer == NULL)
    return kiln__fail(KILN_ERR_NULL_POINTER, "%s: buffer is NULL (argument %u "
                      "of kernel '%s')", fn, index, kernel->name);
  if (buffer->ctx != kernel->program->ctx)
    return kiln__fail(KILN_ERR_WRONG_CONTEXT,
                      "%s: buffer for argument %u of kernel '%s' belongs to "
                      "another context",
                      fn, index, kernel->name);
  const struct kiln__kernel_arg *arg = &kernel->args[index];
  if (kernel->arg_info && arg->address != CL_KERNEL_ARG_ADDRESS_GLOBAL &&
      arg->address != CL_KERNEL_ARG_ADDRESS_CONSTANT)
    return kiln__fail(KILN_ERR_INVALID_ARGUMENT,
                      "%s: argument %u of kernel '%s' is declared '%s' (%s), "
                      "not a __global or __constant pointer",
                      fn, index, kernel->name, arg->type,
                      address_name(arg->address));
  st = set_arg(fn, kernel, index, sizeof(cl_mem), &buffer->cl);
  if (st == KILN_OK)
    kernel->args[index].buffer = (kiln_buffer *)(uintptr_t)buffer;
  return st;
}

kiln_status kiln_kernel_set_arg_local(kiln_kernel *kernel, uint32_t index,
                                      size_t size_bytes) {
  static const char fn[] = "kiln_kernel_set_arg_local";
  kiln_status st = check_index(fn, kernel, index);
  if (st != KILN_OK)
    return st;
  const struct kiln_device *device = kernel->program->ctx->device;
  if (size_bytes == 0)
    return kiln__fail(KILN_ERR_INVALID_SIZE,
                      "%s: size_bytes is 0 for argument %u of kernel '%s'", fn,
                      index, kernel->name);
  if (size_bytes > device->info.local_mem_bytes)
    return kiln__fail(KILN_ERR_INVALID_SIZE,
                      "%s: size_bytes %zu for argument %u of kernel '%s' "
                      "exceeds the device's %llu bytes of local memory",
                      fn, size_bytes, index, kernel->name,
                      (unsigned long long)device->info.local_mem_bytes);
  const struct kiln__kernel_arg *arg = &kernel->args[index];
  if (kernel->arg_info && arg->address != CL_KERNEL_ARG_ADDRESS_LOCAL)
    return kiln__fail(KILN_ERR_INVALID_ARGUMENT,
                      "%s: argument %u of kernel '%s' is declared '%s' (%s), "
                      "not a __local pointer",
                      fn, index, kernel->name, arg->type,
                      address_name(arg->address));
  return set_arg(fn, kernel, index, size_bytes, NULL);
}

static kiln_status set_scalar(const char *fn, kiln_kernel *kernel,
                              uint32_t index, const void *value, size_t size) {
  kiln_status st = check_index(fn, kernel, index);
  if (st != KILN_OK)
    return st;
  if (value == NULL)
    return kiln__fail(KILN_ERR_NULL_POINTER,
                      "%s: value is NULL (argument %u of kernel '%s')", fn,
                      index, kernel->name);
  if (size == 0)
    return kiln__fail(KILN_ERR_INVALID_SIZE,
                      "%s: size_bytes is 0 for argument %u of kernel '%s'", fn,
                      index, kernel->name);
  const struct kiln__kernel_arg *arg = &kernel->args[index];
  if (kernel->arg_info && arg->address != CL_KERNEL_ARG_ADDRESS_PRIVATE)
    return kiln__fail(KILN_ERR_INVALID_ARGUMENT,
                      "%s: argument %u of kernel '%s' is declared '%s' (%s), "
                      "not a by-value argument",
                      fn, index, kernel->name, arg->type,
                      address_name(arg->address));
  if (kernel->arg_info && arg->size != 0 && arg->size != size)
    return kiln__fail(KILN_ERR_INVALID_SIZE,
                      "%s: argument %u of kernel '%s' is declared '%s' "
                      "(%zu bytes) but %zu bytes were given",
                      fn, index, kernel->name, arg->type, arg->size, size);
  return set_arg(fn, kernel, index, size, value);
}

kiln_status kiln_kernel_set_arg_scalar(kiln_kernel *kernel, uint32_t index,
                                       const void *value, size_t size_bytes) {
  return set_scalar("kiln_kernel_set_arg_scalar", kernel, index, value,
                    size_bytes);
}

kiln_status kiln_kernel_set_arg_i32(kiln_kernel *kernel, uint32_t index,
                                    int32_t value) {
  return set_scalar("kiln_kernel_set_arg_i32", kernel, index, &value,
                    sizeof value);
}

kiln_status kiln_kernel_set_arg_u32(kiln_kernel *kernel, uint32_t index,
                                    uint32_t value) {
  return set_scalar("kiln_kernel_set_arg_u32", kernel, index, &value,
                    sizeof value);
}

kiln_status kiln_kernel_set_arg_i64(kiln_kernel *kernel, uint32_t index,
                                    int64_t value) {
  return set_scalar("kiln_kernel_set_arg_i64", kernel, index, &value,
                    sizeof value);
}

kiln_status kiln_kernel_set_arg_u64(kiln_kernel *kernel, uint32_t index,
                                    uint64_t value) {
  return set_scalar("kiln_kernel_set_arg_u64", kernel, index, &value,
                    sizeof value);
}

kiln_status kiln_kernel_set_arg_f32(kiln_kernel *kernel, uint32_t index,
                                    float value) {
  return set_scalar("kiln_kernel_set_arg_f32", kernel, index, &value,
                    sizeof value);
}

kiln_status kiln_kernel_set_arg_f64(kiln_kernel *kernel, uint32_t index,
                                    double value) {
  return set_scalar("kiln_kernel_set_arg_f64", kernel, index, &value,
                    sizeof value);
}

/* After CL_INVALID_KERNEL_ARGS: "argument(s) 1, 3" that kiln never set. */
kiln_status kiln__kernel_fail_unset_args(kiln_kernel *kernel, cl_int err,
                                        const struct kiln_device *device) {
  char list[256];
  size_t used = 0, unset = 0;
  list[0] = '\0';
  for (uint32_t i = 0; i < kernel->num_args; i++) {
    if (kernel->args[i].set)
      continue;
    unset++;
    if (used + 16 < sizeof list) {
      int n = snprintf(list + used, sizeof list - used, "%s%u",
                       unset > 1 ? ", " : "", i);
      used += n > 0 ? (size_t)n : 0;
    }
  }
  if (unset == 0)
    return kiln__fail_cl(err, "clEnqueueNDRangeKernel", device,
                         "kernel '%s' has an argument the driver considers "
                         "unset",
                         kernel->name);
  kiln__fail_cl(err, "clEnqueueNDRangeKernel", device,
                "kernel '%s': argument%s %s %s not set", kernel->name,
                unset == 1 ? "" : "s", list, unset == 1 ? "is" : "are");
  return KILN_ERR_INVALID_ARGUMENT;
}
