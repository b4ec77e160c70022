/* Types, status codes and the export macro shared by every kiln header. */
#ifndef KILN_COMMON_H
#define KILN_COMMON_H

#if !defined(KILN_H_INSIDE) && !defined(KILN_COMPILATION)
#error "Only <kiln/kiln.h> can be included directly."
#endif

#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>

#ifdef __cplusplus
#define KILN_BEGIN_DECLS extern "C" {
#define KILN_END_DECLS }
#else
#define KILN_BEGIN_DECLS
#define KILN_END_DECLS
#endif

#if defined(__GNUC__) && defined(KILN_COMPILATION)
#define KILN_API __attribute__((visibility("default")))
#else
#define KILN_API
#endif

KILN_BEGIN_DECLS

/* Opaque handles. Each is created by kiln_<object>_create (or a named variant)
 * and destroyed by kiln_<object>_destroy, except events, which are shared by
 * the command that produces them and its waiters and so are reference counted
 * (kiln_event_retain / kiln_event_release). */
typedef struct kiln_device_list kiln_device_list;
typedef struct kiln_device kiln_device;
typedef struct kiln_context kiln_context;
typedef struct kiln_queue kiln_queue;
typedef struct kiln_event kiln_event;
typedef struct kiln_buffer kiln_buffer;
typedef struct kiln_program kiln_program;
typedef struct kiln_kernel kiln_kernel;
typedef struct kiln_packed kiln_packed;

/* XX(name, value, description). The one table from which the enum,
 * kiln_status_name() and kiln_status_string() are all generated. Values are
 * kiln's own and stable across releases; the raw OpenCL error, when there was
 * one, is kept aside in kiln_last_cl_error(). One mistake, one status in
 * every function: an object of another context than the one the call works
 * in (a buffer, event or kernel with a queue of another context, a buffer
 * set as an argument of another context's kernel, a wrapped cl_mem of
 * another cl_context) is always KILN_ERR_WRONG_CONTEXT; sizes, counts or
 * dtypes that disagree are KILN_ERR_SHAPE_MISMATCH. */
#define KILN_STATUS_MAP(XX)                                                    \
  XX(OK, 0, "success")                                                         \
  XX(ERR_INVALID_ARGUMENT, -1, "invalid argument")                             \
  XX(ERR_NULL_POINTER, -2, "a required pointer or handle is NULL")             \
  XX(ERR_INVALID_SIZE, -3, "invalid size (zero, overflowing or over a limit)") \
  XX(ERR_OUT_OF_RANGE, -4, "offset or size outside the object's bounds")       \
  XX(ERR_OUT_OF_HOST_MEMORY, -5, "out of host memory")                         \
  XX(ERR_OUT_OF_DEVICE_MEMORY, -6, "out of device memory")                     \
  XX(ERR_NO_PLATFORM, -7, "no OpenCL platform found")                          \
  XX(ERR_NO_DEVICE, -8, "no device matches")                                   \
  XX(ERR_SELECTOR_SYNTAX, -9, "device selector syntax error")                  \
  XX(ERR_BUILD_FAILED, -10, "program build failed")                            \
  XX(ERR_NOT_FOUND, -11, "no such kernel, profile or entry")                   \
  XX(ERR_BUSY, -12, "object still has live children")                          \
  XX(ERR_UNSUPPORTED, -13, "not supported by this device")                     \
  XX(ERR_SHAPE_MISMATCH, -14, "mismatched shapes or dtypes")                   \
  XX(ERR_IO, -15, "file input/output failed")                                  \
  XX(ERR_CORRUPT, -16, "corrupt or mismatched data")                           \
  XX(ERR_INVALID_STATE, -17, "operation not valid in the object's state")      \
  XX(ERR_OPENCL, -18, "OpenCL call failed")                                    \
  XX(ERR_EXEC_FAILED, -19, "a command failed on the device")                   \
  XX(ERR_COMM, -20, "communication between processes failed or timed out")     \
  XX(ERR_WRONG_CONTEXT, -21, "object of another context")

typedef enum kiln_status {
#define KILN_STATUS_ENUM_(name, value, text) KILN_##name = value,
  KILN_STATUS_MAP(KILN_STATUS_ENUM_)
#undef KILN_STATUS_ENUM_
} kiln_status;

KILN_END_DECLS

#endif
