/* User programs and kernels: build OpenCL C source, set arguments, launch. */
#ifndef KILN_PROGRAM_H
#define KILN_PROGRAM_H

#if !defined(KILN_H_INSIDE) && !defined(KILN_COMPILATION)
#error "Only <kiln/kiln.h> can be included directly."
#endif

#include "kiln/kiln_common.h"

KILN_BEGIN_DECLS

enum {
  /* Neither read nor write the persistent program cache for this build. */
  KILN_BUILD_NO_CACHE = 1u << 0,
};

/* Create an unbuilt program from OpenCL C source. source_length 0 means
 * source is NUL-terminated. The source is copied. Thread-safe. */
KILN_API kiln_status kiln_program_create(kiln_context *ctx, const char *source,
                                         size_t source_length,
                                         kiln_program **out);

/* Build for the context's device with options (may be NULL) appended to the
 * profile's default options. Uses the persistent cache unless flags has
 * KILN_BUILD_NO_CACHE or the context disabled it. On failure returns
 * KILN_ERR_BUILD_FAILED with an excerpt of the log in the last error; the full
 * log stays available from kiln_program_get_build_log(). Compilers name the
 * source "<source>" in their messages, with the line numbers of the text
 * given to kiln_program_create ("<source>:2:14: error: ..."), not a file
 * of the driver's. A built program cannot
 * be rebuilt (KILN_ERR_INVALID_STATE). Not thread-safe for one program:
 * build it on one thread (or use kiln_program_create_built) before sharing
 * it; builds of different programs, on one context or several, may run
 * concurrently. */
KILN_API kiln_status kiln_program_build(kiln_program *program,
                                        const char *options, unsigned flags);

/* Convenience: create and build; on a build failure *out is NULL, the log
 * excerpt is in the last error and the full log in kiln_last_build_log().
 * Thread-safe. */
KILN_API kiln_status kiln_program_create_built(kiln_context *ctx,
                                               const char *source,
                                               const char *options,
                                               kiln_program **out);

/* The full log of the last build ("" when there was none). Borrowed; valid
 * until the program is destroyed or built again (not concurrently with
 * kiln_program_build on the same program). */
KILN_API const char *kiln_program_get_build_log(const kiln_program *program);

/* The full log of the last build that failed on the calling thread, for the
 * failures that leave no program to ask (kiln_program_create_built); ""
 * when no build failed on this thread yet, or the driver gave no log. A
 * failing kiln_program_build sets it too. Borrowed: valid until the next
 * build fails on this thread. Thread-safe (one log per thread). */
KILN_API const char *kiln_last_build_log(void);

/* Whether the last build was loaded from kiln's persistent cache. */
KILN_API bool kiln_program_is_from_cache(const kiln_program *program);

/* KILN_ERR_BUSY while kernels made from it are alive. NULL is a no-op. */
KILN_API kiln_status kiln_program_destroy(kiln_program *program);

/* A kernel handle for the __kernel function name of a built program.
 * KILN_ERR_NOT_FOUND when there is no such kernel. Thread-safe: several
 * threads may make kernels from one built program, each then owning its
 * handle (and its arguments). */
KILN_API kiln_status kiln_kernel_create(kiln_program *program, const char *name,
                                        kiln_kernel **out);
KILN_API kiln_status kiln_kernel_destroy(kiln_kernel *kernel);

/* Number of arguments the kernel declares. */
KILN_API uint32_t kiln_kernel_get_arg_count(const kiln_kernel *kernel);

/* What the driver says of one kernel on its device, which may be less than
 * the device allows (a register-heavy kernel takes smaller work-groups:
 * rusticl reports 32 for some kernels on a device of 1024). */
typedef struct kiln_kernel_info {
  const char *name;              /* the __kernel function's name; borrowed */
  uint32_t num_args;
  /* The largest work-group this kernel may be launched with on the device
   * (CL_KERNEL_WORK_GROUP_SIZE). */
  size_t work_group_size;
  /* Work-group sizes that are multiples of this run best
   * (CL_KERNEL_PREFERRED_WORK_GROUP_SIZE_MULTIPLE). */
  size_t preferred_multiple;
  /* reqd_work_group_size(x, y, z) from the source, or zeros. */
  size_t required_size[3];
  /* __local memory the kernel uses as the driver reports it
   * (CL_KERNEL_LOCAL_MEM_SIZE), in bytes: OpenCL counts __local arguments
   * set so far in it, Mesa rusticl only the kernel's own __local variables;
   * local_arg_bytes is the sum of the __local arguments set through
   * kiln_kernel_set_arg_local. */
  uint64_t local_mem_bytes;
  uint64_t local_arg_bytes;
  /* __private memory per work-item (CL_KERNEL_PRIVATE_MEM_SIZE), bytes. */
  uint64_t private_mem_bytes;
} kiln_kernel_info;

/* Fill *out for kernel. A failed driver query is KILN_ERR_OPENCL (or the
 * status its CL error maps to), naming the query. Not concurrently with
 * argument setters on the same kernel (the local memory size depends on
 * them); otherwise thread-safe. */
KILN_API kiln_status kiln_kernel_get_info(const kiln_kernel *kernel,
                                          kiln_kernel_info *out);

/* Argument setters. index must be below kiln_kernel_get_arg_count(). A kernel's
 * arguments are part of its state: set and launch from one thread at a time.
 * The values are captured at launch, so they may change after a launch
 * returns. */
KILN_API kiln_status kiln_kernel_set_arg_buffer(kiln_kernel *kernel,
                                                uint32_t index,
                                                const kiln_buffer *buffer);
/* A __local array of size_bytes (> 0, at most the device's local memory). */
KILN_API kiln_status kiln_kernel_set_arg_local(kiln_kernel *kernel,
                                               uint32_t index,
                                               size_t size_bytes);
/* A by-value argument. size_bytes must equal the size of the parameter's
 * declared type (checked against the declared type where the driver reports
 * it; KILN_ERR_INVALID_SIZE otherwise). */
KILN_API kiln_status kiln_kernel_set_arg_scalar(kiln_kernel *kernel,
                                                uint32_t index,
                                                const void *value,
                                                size_t size_bytes);
KILN_API kiln_status kiln_kernel_set_arg_i32(kiln_kernel *kernel, uint32_t index, int32_t value);
KILN_API kiln_status kiln_kernel_set_arg_u32(kiln_kernel *kernel, uint32_t index, uint32_t value);
KILN_API kiln_status kiln_kernel_set_arg_i64(kiln_kernel *kernel, uint32_t index, int64_t value);
KILN_API kiln_status kiln_kernel_set_arg_u64(kiln_kernel *kernel, uint32_t index, uint64_t value);
KILN_API kiln_status kiln_kernel_set_arg_f32(kiln_kernel *kernel, uint32_t index, float value);
KILN_API kiln_status kiln_kernel_set_arg_f64(kiln_kernel *kernel, uint32_t index, double value);

/* Launch over work_dim (1 to 3) dimensions. global_size entries must be > 0.
 * local_size may be NULL (kiln chooses); otherwise each entry must divide the
 * global size and respect the device's max work-item sizes, and their product
 * the max work-group size. */
KILN_API kiln_status kiln_kernel_launch(kiln_queue *queue, kiln_kernel *kernel,
                                        uint32_t work_dim,
                                        const size_t *global_size,
                                        const size_t *local_size,
                                        size_t num_wait,
                                        kiln_event *const *wait_list,
                                        kiln_event **out_event);

KILN_END_DECLS

#endif
