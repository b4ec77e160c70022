/* Status names, OpenCL error names and the thread-local last error.
 *
 * The message lives in thread-local storage so that concurrent threads never
 * see each other's failures; it is overwritten only by the next failure on the
 * same thread. */
#include <stdio.h>
#include <string.h>

#include "internal.h"

#define MESSAGE_CAPACITY 4096

static _Thread_local char last_message[MESSAGE_CAPACITY];
static _Thread_local kiln_status last_status_value = KILN_OK;
static _Thread_local cl_int last_cl_value = 0;

const char *kiln_status_name(kiln_status status) {
  switch (status) {
#define NAME_CASE(name, value, text) \
  case KILN_##name:                  \
    return "KILN_" #name;
    KILN_STATUS_MAP(NAME_CASE)
#undef NAME_CASE
  }
  return "KILN_UNKNOWN_STATUS";
}

const char *kiln_status_string(kiln_status status) {
  switch (status) {
#define TEXT_CASE(name, value, text) \
  case KILN_##name:                  \
    return text;
    KILN_STATUS_MAP(TEXT_CASE)
#undef TEXT_CASE
  }
  return "unknown status";
}

const char *kiln_last_error(void) { return last_message; }
kiln_status kiln_last_status(void) { return last_status_value; }
int32_t kiln_last_cl_error(void) { return last_cl_value; }

void kiln_clear_error(void) {
  last_message[0] = '\0';
  last_status_value = KILN_OK;
  last_cl_value = 0;
}

const char *kiln_version(void) { return KILN_VERSION_STRING; }

/* Every error code defined by the Khronos headers (core and extensions), plus
 * the vendor codes drivers are known to return. Generated from the headers
 * once; kept as data so the name never depends on which headers a user has. */
static const struct {
  cl_int code;
  const char *name;
} cl_error_names[] = {
    {-1, "CL_DEVICE_NOT_FOUND"},
    {-2, "CL_DEVICE_NOT_AVAILABLE"},
    {-3, "CL_COMPILER_NOT_AVAILABLE"},
    {-4, "CL_MEM_OBJECT_ALLOCATION_FAILURE"},
    {-5, "CL_OUT_OF_RESOURCES"},
    {-6, "CL_OUT_OF_HOST_MEMORY"},
    {-7, "CL_PROFILING_INFO_NOT_AVAILABLE"},
    {-8, "CL_MEM_COPY_OVERLAP"},
    {-9, "CL_IMAGE_FORMAT_MISMATCH"},
    {-10, "CL_IMAGE_FORMAT_NOT_SUPPORTED"},
    {-11, "CL_BUILD_PROGRAM_FAILURE"},
    {-12, "CL_MAP_FAILURE"},
    {-13, "CL_MISALIGNED_SUB_BUFFER_OFFSET"},
    {-14, "CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST"},
    {-15, "CL_COMPILE_PROGRAM_FAILURE"},
    {-16, "CL_LINKER_NOT_AVAILABLE"},
    {-17, "CL_LINK_PROGRAM_FAILURE"},
    {-18, "CL_DEVICE_PARTITION_FAILED"},
    {-19, "CL_KERNEL_ARG_INFO_NOT_AVAILABLE"},
    {-30, "CL_INVALID_VALUE"},
    {-31, "CL_INVALID_DEVICE_TYPE"},
    {-32, "CL_INVALID_PLATFORM"},
    {-33, "CL_INVALID_DEVICE"},
    {-34, "CL_INVALID_CONTEXT"},
    {-35, "CL_INVALID_QUEUE_PROPERTIES"},
    {-36, "CL_INVALID_COMMAND_QUEUE"},
    {-37, "CL_INVALID_HOST_PTR"},
    {-38, "CL_INVALID_MEM_OBJECT"},
    {-39, "CL_INVALID_IMAGE_FORMAT_DESCRIPTOR"},
    {-40, "CL_INVALID_IMAGE_SIZE"},
    {-41, "CL_INVALID_SAMPLER"},
    {-42, "CL_INVALID_BINARY"},
    {-43, "CL_INVALID_BUILD_OPTIONS"},
    {-44, "CL_INVALID_PROGRAM"},
    {-45, "CL_INVALID_PROGRAM_EXECUTABLE"},
    {-46, "CL_INVALID_KERNEL_NAME"},
    {-47, "CL_INVALID_KERNEL_DEFINITION"},
    {-48, "CL_INVALID_KERNEL"},
    {-49, "CL_INVALID_ARG_INDEX"},
    {-50, "CL_INVALID_ARG_VALUE"},
    {-51, "CL_INVALID_ARG_SIZE"},
    {-52, "CL_INVALID_KERNEL_ARGS"},
    {-53, "CL_INVALID_WORK_DIMENSION"},
    {-54, "CL_INVALID_WORK_GROUP_SIZE"},
    {-55, "CL_INVALID_WORK_ITEM_SIZE"},
    {-56, "CL_INVALID_GLOBAL_OFFSET"},
    {-57, "CL_INVALID_EVENT_WAIT_LIST"},
    {-58, "CL_INVALID_EVENT"},
    {-59, "CL_INVALID_OPERATION"},
    {-60, "CL_INVALID_GL_OBJECT"},
    {-61, "CL_INVALID_BUFFER_SIZE"},
    {-62, "CL_INVALID_MIP_LEVEL"},
    {-63, "CL_INVALID_GLOBAL_WORK_SIZE"},
    {-64, "CL_INVALID_PROPERTY"},
    {-65, "CL_INVALID_IMAGE_DESCRIPTOR"},
    {-66, "CL_INVALID_COMPILER_OPTIONS"},
    {-67, "CL_INVALID_LINKER_OPTIONS"},
    {-68, "CL_INVALID_DEVICE_PARTITION_COUNT"},
    {-69, "CL_INVALID_PIPE_SIZE"},
    {-70, "CL_INVALID_DEVICE_QUEUE"},
    {-71, "CL_INVALID_SPEC_ID"},
    {-72, "CL_MAX_SIZE_RESTRICTION_EXCEEDED"},
    {-1000, "CL_INVALID_GL_SHAREGROUP_REFERENCE_KHR"},
    {-1001, "CL_PLATFORM_NOT_FOUND_KHR"},
    {-1002, "CL_INVALID_D3D10_DEVICE_KHR"},
    {-1003, "CL_INVALID_D3D10_RESOURCE_KHR"},
    {-1004, "CL_D3D10_RESOURCE_ALREADY_ACQUIRED_KHR"},
    {-1005, "CL_D3D10_RESOURCE_NOT_ACQUIRED_KHR"},
    {-1006, "CL_INVALID_D3D11_DEVICE_KHR"},
    {-1007, "CL_INVALID_D3D11_RESOURCE_KHR"},
    {-1008, "CL_D3D11_RESOURCE_ALREADY_ACQUIRED_KHR"},
    {-1009, "CL_D3D11_RESOURCE_NOT_ACQUIRED_KHR"},
    {-1010, "CL_INVALID_DX9_MEDIA_ADAPTER_KHR"},
    {-1011, "CL_INVALID_DX9_MEDIA_SURFACE_KHR"},
    {-1012, "CL_DX9_MEDIA_SURFACE_ALREADY_ACQUIRED_KHR"},
    {-1013, "CL_DX9_MEDIA_SURFACE_NOT_ACQUIRED_KHR"},
    {-1057, "CL_DEVICE_PARTITION_FAILED_EXT"},
    {-1058, "CL_INVALID_PARTITION_COUNT_EXT"},
    {-1059, "CL_INVALID_PARTITION_NAME_EXT"},
    {-1092, "CL_EGL_RESOURCE_NOT_ACQUIRED_KHR"},
    {-1093, "CL_INVALID_EGL_OBJECT_KHR"},
    {-1094, "CL_INVALID_ACCELERATOR_INTEL"},
    {-1095, "CL_INVALID_ACCELERATOR_TYPE_INTEL"},
    {-1096, "CL_INVALID_ACCELERATOR_DESCRIPTOR_INTEL"},
    {-1097, "CL_ACCELERATOR_TYPE_NOT_SUPPORTED_INTEL"},
    {-1098, "CL_INVALID_VA_API_MEDIA_ADAPTER_INTEL"},
    {-1099, "CL_INVALID_VA_API_MEDIA_SURFACE_INTEL"},
    {-1100, "CL_VA_API_MEDIA_SURFACE_ALREADY_ACQUIRED_INTEL"},
    {-1101, "CL_VA_API_MEDIA_SURFACE_NOT_ACQUIRED_INTEL"},
    {-1108, "CL_COMMAND_TERMINATED_ITSELF_WITH_FAILURE_ARM"},
    {-1121, "CL_CONTEXT_TERMINATED_KHR"},
    {-1138, "CL_INVALID_COMMAND_BUFFER_KHR"},
    {-1139, "CL_INVALID_SYNC_POINT_WAIT_LIST_KHR"},
    {-1140, "CL_INCOMPATIBLE_COMMAND_QUEUE_KHR"},
    {-1141, "CL_INVALID_MUTABLE_COMMAND_KHR"},
    {-1142, "CL_INVALID_SEMAPHORE_KHR"},
    /* Not in the Khronos headers: NVIDIA's driver returns it for an
     * unspecified internal failure (a crashed kernel, for example). */
    {-9999, "CL_NVIDIA_UNKNOWN_ERROR_9999"},
};

const char *kiln_cl_error_name(int32_t cl_error) {
  if (cl_error == CL_SUCCESS)
    return "CL_SUCCESS";
  for (size_t i = 0; i < sizeof cl_error_names / sizeof cl_error_names[0]; i++)
    if (cl_error_names[i].code == cl_error)
      return cl_error_names[i].name;
  return "CL_UNKNOWN_ERROR";
}

kiln_status kiln__status_from_cl(cl_int err) {
  switch (err) {
  case CL_SUCCESS:
    return KILN_OK;
  case CL_OUT_OF_HOST_MEMORY:
    return KILN_ERR_OUT_OF_HOST_MEMORY;
  case CL_MEM_OBJECT_ALLOCATION_FAILURE:
  case CL_OUT_OF_RESOURCES:
    return KILN_ERR_OUT_OF_DEVICE_MEMORY;
  case CL_INVALID_BUFFER_SIZE:
  case CL_INVALID_ARG_SIZE:
  case CL_INVALID_WORK_GROUP_SIZE:
  case CL_INVALID_WORK_ITEM_SIZE:
  case CL_INVALID_GLOBAL_WORK_SIZE:
  case CL_MAX_SIZE_RESTRICTION_EXCEEDED:
    return KILN_ERR_INVALID_SIZE;
  case CL_BUILD_PROGRAM_FAILURE:
  case CL_COMPILE_PROGRAM_FAILURE:
  case CL_LINK_PROGRAM_FAILURE:
  case CL_INVALID_BUILD_OPTIONS:
  case CL_INVALID_COMPILER_OPTIONS:
  case CL_INVALID_LINKER_OPTIONS:
  case CL_COMPILER_NOT_AVAILABLE:
  case CL_LINKER_NOT_AVAILABLE:
    return KILN_ERR_BUILD_FAILED;
  case CL_DEVICE_NOT_FOUND:
  case CL_DEVICE_NOT_AVAILABLE:
    return KILN_ERR_NO_DEVICE;
  case CL_PLATFORM_NOT_FOUND_KHR:
    return KILN_ERR_NO_PLATFORM;
  case CL_INVALID_KERNEL_NAME:
    return KILN_ERR_NOT_FOUND;
  case CL_INVALID_BINARY:
    return KILN_ERR_CORRUPT;
  case CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST:
    return KILN_ERR_EXEC_FAILED;
  case CL_MISALIGNED_SUB_BUFFER_OFFSET:
    return KILN_ERR_INVALID_ARGUMENT;
  case CL_PROFILING_INFO_NOT_AVAILABLE:
  case CL_INVALID_OPERATION:
  case CL_INVALID_PROGRAM_EXECUTABLE:
    return KILN_ERR_INVALID_STATE;
  default:
    return KILN_ERR_OPENCL;
  }
}

/* A hint for the codes whose cause is not obvious from the name. */
static const char *cl_hint(cl_int err) {
  switch (err) {
  case CL_PLATFORM_NOT_FOUND_KHR:
    return "the ICD loader found no platform: check the vendors directory "
           "(OCL_ICD_VENDORS when set, else /etc/OpenCL/vendors) and that the "
           "vendor library an .icd names exists (run 'kiln info --doctor')";
  case CL_DEVICE_NOT_FOUND:
    return "the platform has no device of the requested type";
  case CL_OUT_OF_RESOURCES:
  case CL_MEM_OBJECT_ALLOCATION_FAILURE:
    return "the device ran out of memory or another resource; free buffers "
           "or use smaller sizes";
  case CL_OUT_OF_HOST_MEMORY:
    return "the driver could not allocate host memory";
  case CL_INVALID_WORK_GROUP_SIZE:
  case CL_INVALID_WORK_ITEM_SIZE:
    return "the local size must divide the global size and fit the device's "
           "work-group limits (see 'kiln info')";
  case CL_INVALID_KERNEL_ARGS:
    return "every kernel argument must be set before launch";
  case CL_INVALID_ARG_SIZE:
    return "a scalar argument's size must equal its declared type's size";
  case CL_BUILD_PROGRAM_FAILURE:
    return "see the full build log (kiln_program_get_build_log, or "
           "kiln_last_build_log when kiln_program_create_built returned no "
           "program)";
  case CL_INVALID_BINARY:
    return "a cached binary does not fit this device or driver; clear the "
           "cache with 'kiln cache clear'";
  case CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST:
    return "a command this one waited for failed";
  case CL_MISALIGNED_SUB_BUFFER_OFFSET:
    return "sub-buffer offsets must be multiples of the device's base address "
           "alignment";
  default:
    return NULL;
  }
}

static void record(kiln_status status, cl_int cl_err, const char *text) {
  last_status_value = status;
  last_cl_value = cl_err;
  if (text != last_message)
    snprintf(last_message, sizeof last_message, "%s", text);
}

kiln_status kiln__fail(kiln_status status, const char *fmt, ...) {
  char text[MESSAGE_CAPACITY];
  va_list args;
  va_start(args, fmt);
  vsnprintf(text, sizeof text, fmt, args);
  va_end(args);
  record(status, 0, text);
  return status;
}

kiln_status kiln_set_last_error(kiln_status status, const char *message) {
  if (message == NULL)
    return kiln__fail(KILN_ERR_NULL_POINTER,
                      "kiln_set_last_error: message is NULL");
  /* Only a status of the table that is an error may be recorded: a caller
   * reading kiln_last_status() must never see success or an unnamed value. */
  if (status >= 0 || strcmp(kiln_status_name(status), "KILN_UNKNOWN_STATUS") == 0)
    return kiln__fail(KILN_ERR_INVALID_ARGUMENT,
                      "kiln_set_last_error: status %d is not a kiln error "
                      "status", (int)status);
  record(status, 0, message);
  return status;
}

kiln_status kiln__fail_cl(cl_int err, const char *call,
                          const struct kiln_device *device, const char *fmt,
                          ...) {
  char text[MESSAGE_CAPACITY];
  size_t used = 0;
  int n = snprintf(text, sizeof text, "%s failed: %s (%d)", call,
                   kiln_cl_error_name(err), (int)err);
  used = n > 0 ? (size_t)n : 0;
  if (device != NULL && used < sizeof text) {
    n = snprintf(text + used, sizeof text - used, " on device '%s' (%s)",
                 device->info.name, device->info.platform_name);
    used += n > 0 ? (size_t)n : 0;
  }
  if (fmt != NULL && fmt[0] != '\0' && used + 2 < sizeof text) {
    text[used++] = ':';
    text[used++] = ' ';
    va_list args;
    va_start(args, fmt);
    n = vsnprintf(text + used, sizeof text - used, fmt, args);
    va_end(args);
    used += n > 0 ? (size_t)n : 0;
  }
  const char *hint = cl_hint(err);
  if (hint != NULL && used < sizeof text)
    snprintf(text + used, sizeof text - used, ". Hint: %s", hint);
  kiln_status status = kiln__status_from_cl(err);
  record(status, err, text);
  return status;
}
