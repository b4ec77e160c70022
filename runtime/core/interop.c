/* Opt-in OpenCL interop (kiln/kiln_cl.h): the raw handles behind kiln
 * objects, and adopting a cl_mem made outside kiln. */
#include "internal.h"
#include "kiln/kiln_cl.h"

cl_platform_id kiln_device_get_cl_platform(const kiln_device *device) {
  return device != NULL ? device->platform : NULL;
}

cl_device_id kiln_device_get_cl_device(const kiln_device *device) {
  return device != NULL ? device->id : NULL;
}

cl_context kiln_context_get_cl_context(const kiln_context *ctx) {
  return ctx != NULL ? ctx->cl : NULL;
}

cl_command_queue kiln_queue_get_cl_queue(const kiln_queue *queue) {
  return queue != NULL ? queue->cl : NULL;
}

cl_mem kiln_buffer_get_cl_mem(const kiln_buffer *buffer) {
  return buffer != NULL ? buffer->cl : NULL;
}

cl_event kiln_event_get_cl_event(const kiln_event *event) {
  return event != NULL ? event->cl : NULL;
}

cl_program kiln_program_get_cl_program(const kiln_program *program) {
  return program != NULL ? program->cl : NULL;
}

cl_kernel kiln_kernel_get_cl_kernel(const kiln_kernel *kernel) {
  return kernel != NULL ? kernel->cl : NULL;
}

kiln_status kiln_buffer_wrap_cl(kiln_context *ctx, cl_mem mem,
                                kiln_buffer **out) {
  static const char fn[] = "kiln_buffer_wrap_cl";
  if (out == NULL)
    return kiln__fail(KILN_ERR_NULL_POINTER, "%s: out is NULL", fn);
  *out = NULL;
  if (ctx == NULL)
    return kiln__fail(KILN_ERR_NULL_POINTER, "%s: ctx is NULL", fn);
  if (mem == NULL)
    return kiln__fail(KILN_ERR_NULL_POINTER, "%s: mem is NULL", fn);

  cl_mem_object_type type = 0;
  cl_int err = clGetMemObjectInfo(mem, CL_MEM_TYPE, sizeof type, &type, NULL);
  if (err != CL_SUCCESS)
    return kiln__fail_cl(err, "clGetMemObjectInfo", ctx->device,
                         "%s: CL_MEM_TYPE of mem", fn);
  if (type != CL_MEM_OBJECT_BUFFER)
    return kiln__fail(KILN_ERR_INVALID_ARGUMENT,
                      "%s: mem is not a buffer (CL_MEM_TYPE 0x%x); images and "
                      "pipes cannot be wrapped",
                      fn, (unsigned)type);
  /* A cl_mem of another cl_context would fail at the first enqueue with
   * CL_INVALID_CONTEXT, far from where the mistake was made. */
  cl_context owner = NULL;
  err = clGetMemObjectInfo(mem, CL_MEM_CONTEXT, sizeof owner, &owner, NULL);
  if (err != CL_SUCCESS)
    return kiln__fail_cl(err, "clGetMemObjectInfo", ctx->device,
                         "%s: CL_MEM_CONTEXT of mem", fn);
  if (owner != ctx->cl)
    return kiln__fail(KILN_ERR_WRONG_CONTEXT,
                      "%s: mem belongs to another OpenCL context than ctx's "
                      "(kiln_context_get_cl_context)",
                      fn);
  size_t size = 0;
  err = clGetMemObjectInfo(mem, CL_MEM_SIZE, sizeof size, &size, NULL);
  cl_mem_flags cl_flags = 0;
  if (err == CL_SUCCESS)
    err = clGetMemObjectInfo(mem, CL_MEM_FLAGS, sizeof cl_flags, &cl_flags,
                             NULL);
  if (err != CL_SUCCESS)
    return kiln__fail_cl(err, "clGetMemObjectInfo", ctx->device,
                         "%s: CL_MEM_SIZE / CL_MEM_FLAGS of mem", fn);
  unsigned flags = KILN_MEM_READ_WRITE;
  if (cl_flags & CL_MEM_READ_ONLY)
    flags = KILN_MEM_READ_ONLY;
  else if (cl_flags & CL_MEM_WRITE_ONLY)
    flags = KILN_MEM_WRITE_ONLY;
  err = clRetainMemObject(mem);
  if (err != CL_SUCCESS)
    return kiln__fail_cl(err, "clRetainMemObject", ctx->device, "%s", fn);
  /* Wrapped as a root buffer even when mem is an OpenCL sub-buffer: kiln
   * cannot name its parent, and OpenCL still checks copies between the two
   * for overlap. */
  return kiln__buffer_wrap(ctx, mem, size, flags, NULL, 0, fn, out);
}
