/* Opt-in OpenCL interop: the raw handles behind kiln objects, and wrapping a
 * cl_mem made elsewhere. Include after <kiln/kiln.h>; this header, unlike the
 * rest of kiln's, needs the Khronos OpenCL headers. */
#ifndef KILN_CL_H
#define KILN_CL_H

#include "kiln/kiln.h"

#ifndef CL_TARGET_OPENCL_VERSION
#define CL_TARGET_OPENCL_VERSION 300
#endif
#include <CL/cl.h>

KILN_BEGIN_DECLS

/* Borrowed handles: retain them (clRetain*) to keep them past the kiln
 * object's life. Thread-safe to obtain. A raw queue or kernel falls under
 * the same one-thread-at-a-time rule as its kiln handle: kiln sets its op
 * kernels' arguments on the queue's thread, so do not enqueue on
 * kiln_queue_get_cl_queue() from another thread while kiln uses the queue. */
KILN_API cl_platform_id kiln_device_get_cl_platform(const kiln_device *device);
KILN_API cl_device_id kiln_device_get_cl_device(const kiln_device *device);
KILN_API cl_context kiln_context_get_cl_context(const kiln_context *ctx);
KILN_API cl_command_queue kiln_queue_get_cl_queue(const kiln_queue *queue);
KILN_API cl_mem kiln_buffer_get_cl_mem(const kiln_buffer *buffer);
KILN_API cl_event kiln_event_get_cl_event(const kiln_event *event);
KILN_API cl_program kiln_program_get_cl_program(const kiln_program *program);
KILN_API cl_kernel kiln_kernel_get_cl_kernel(const kiln_kernel *kernel);

/* Wrap a cl_mem of ctx's OpenCL context as a kiln buffer; kiln retains it and
 * releases its reference on kiln_buffer_destroy. Thread-safe. */
KILN_API kiln_status kiln_buffer_wrap_cl(kiln_context *ctx, cl_mem mem,
                                         kiln_buffer **out);

KILN_END_DECLS

#endif
