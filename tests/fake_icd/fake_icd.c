/* A fake OpenCL vendor driver ("ICD") for testing how kiln copes with broken
 * drivers. The ocl-icd loader accepts it like any vendor library: it exports
 * clIcdGetPlatformIDsKHR and clGetExtensionFunctionAddress, its platform and
 * device objects begin with a dispatch-table pointer, and its platform
 * reports cl_khr_icd and an ICD suffix.
 *
 * Behaviour comes from the environment, read at every call:
 *   FAKE_ICD_MODE     healthy (default)  a consistent GPU that cannot create
 *                                        contexts
 *                     platform-fail      clGetPlatformInfo fails (CL_INVALID_VALUE)
 *                     device-fail        clGetDeviceIDs works, clGetDeviceInfo fails
 *                     no-devices         clGetDeviceIDs returns CL_DEVICE_NOT_FOUND
 *                     empty-strings      every string is ""
 *                     long-strings       platform and device names of 100 KiB
 *                     zero-sizes         every size query answers 0
 *                     short-sizes        size queries answer half the real size
 *   FAKE_ICD_DEVICES  number of devices, 1 to 8 (default 1). Device 0 reports
 *                     cl_khr_device_uuid, device 1 cl_khr_pci_bus_info, the
 *                     others neither, so each stable-id path can be tested.
 *   FAKE_ICD_VENDOR_ID  the devices' vendor id (default 0x1234, no known
 *                     vendor), e.g. 0x10de to look like NVIDIA.
 *
 * The two queries the ICD loader itself makes (CL_PLATFORM_EXTENSIONS and
 * CL_PLATFORM_ICD_SUFFIX_KHR) are always answered correctly, or the loader
 * would drop the platform before kiln could see it misbehave.
 *
 * Every dispatch entry not implemented here returns an error
 * (CL_INVALID_OPERATION, or NULL with *errcode_ret set): calling it never
 * crashes. Not thread-safe beyond what the tests need (state is read-only
 * after the first call). */
#define CL_TARGET_OPENCL_VERSION 300
#define CL_USE_DEPRECATED_OPENCL_1_0_APIS
#define CL_USE_DEPRECATED_OPENCL_1_1_APIS
#define CL_USE_DEPRECATED_OPENCL_1_2_APIS
#define CL_USE_DEPRECATED_OPENCL_2_0_APIS
#include <CL/cl_icd.h>

#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#define EXPORT __attribute__((visibility("default")))
#define MAX_DEVICES 8
#define LONG_STRING (100 * 1024)

struct _cl_platform_id {
  const struct _cl_icd_dispatch *dispatch;
};
struct _cl_device_id {
  const struct _cl_icd_dispatch *dispatch;
  cl_uint index;
};

static struct _cl_icd_dispatch dispatch;
static struct _cl_platform_id platform = {&dispatch};
static struct _cl_device_id devices[MAX_DEVICES];
static char long_string[LONG_STRING + 1];
static pthread_once_t once = PTHREAD_ONCE_INIT;

enum mode {
  HEALTHY, PLATFORM_FAIL, DEVICE_FAIL, NO_DEVICES, EMPTY_STRINGS,
  LONG_STRINGS, ZERO_SIZES, SHORT_SIZES,
};

static enum mode current_mode(void) {
  static const char *const names[] = {
      "healthy",       "platform-fail", "device-fail", "no-devices",
      "empty-strings", "long-strings",  "zero-sizes",  "short-sizes",
  };
  const char *m = getenv("FAKE_ICD_MODE");
  for (size_t i = 0; m != NULL && i < sizeof names / sizeof names[0]; i++)
    if (strcmp(m, names[i]) == 0)
      return (enum mode)i;
  return HEALTHY;
}

static cl_uint device_count(void) {
  const char *n = getenv("FAKE_ICD_DEVICES");
  long v = n != NULL ? strtol(n, NULL, 10) : 1;
  return v < 1 ? 1 : v > MAX_DEVICES ? MAX_DEVICES : (cl_uint)v;
}

static cl_uint vendor_id(void) {
  const char *v = getenv("FAKE_ICD_VENDOR_ID");
  return v != NULL ? (cl_uint)strtoul(v, NULL, 0) : 0x1234;
}

/* ---- answering info queries ---------------------------------------------- */

/* Copy value (size bytes, strings with their NUL) out the way the
 * specification describes, distorted by the mode. */
static cl_int answer(const void *value, size_t size, bool is_string,
                     size_t param_value_size, void *param_value,
                     size_t *param_value_size_ret) {
  enum mode m = current_mode();
  if (is_string && m == EMPTY_STRINGS) {
    value = "";
    size = 1;
  }
  if (param_value != NULL) {
    if (param_value_size < size) {
      /* Say how much is needed, as several real drivers do on failure; a
       * caller that trusted a short size query can retry. */
      if (param_value_size_ret != NULL)
        *param_value_size_ret = size;
      return CL_INVALID_VALUE;
    }
    memcpy(param_value, value, size);
  }
  if (param_value_size_ret != NULL) {
    if (m == ZERO_SIZES)
      *param_value_size_ret = 0;
    else if (m == SHORT_SIZES && param_value == NULL)
      *param_value_size_ret = size / 2;
    else
      *param_value_size_ret = size;
  }
  return CL_SUCCESS;
}

static cl_int answer_string(const char *s, size_t param_value_size,
                            void *param_value, size_t *param_value_size_ret) {
  return answer(s, strlen(s) + 1, true, param_value_size, param_value,
                param_value_size_ret);
}

static const char platform_extensions[] = "cl_khr_icd";

static cl_int CL_API_CALL fake_get_platform_info(cl_platform_id p,
                                                 cl_platform_info param,
                                                 size_t size, void *value,
                                                 size_t *size_ret) {
  if (p != &platform)
    return CL_INVALID_PLATFORM;
  /* What the loader asks: always right, with an exact size. */
  if (param == CL_PLATFORM_EXTENSIONS || param == CL_PLATFORM_ICD_SUFFIX_KHR) {
    const char *s = param == CL_PLATFORM_EXTENSIONS ? platform_extensions
                                                    : "FAKE";
    size_t n = strlen(s) + 1;
    if (value != NULL) {
      if (size < n)
        return CL_INVALID_VALUE;
      memcpy(value, s, n);
    }
    if (size_ret != NULL)
      *size_ret = n;
    return CL_SUCCESS;
  }
  enum mode m = current_mode();
  if (m == PLATFORM_FAIL)
    return CL_INVALID_VALUE;
  switch (param) {
  case CL_PLATFORM_NAME:
    return answer_string(m == LONG_STRINGS ? long_string : "kiln fake ICD",
                         size, value, size_ret);
  case CL_PLATFORM_VENDOR:
    return answer_string("kiln test suite", size, value, size_ret);
  case CL_PLATFORM_VERSION:
    return answer_string("OpenCL 1.2 fake", size, value, size_ret);
  case CL_PLATFORM_PROFILE:
    return answer_string("FULL_PROFILE", size, value, size_ret);
  default:
    return CL_INVALID_VALUE;
  }
}

static cl_int CL_API_CALL fake_get_device_ids(cl_platform_id p,
                                              cl_device_type type,
                                              cl_uint num_entries,
                                              cl_device_id *out,
                                              cl_uint *num_devices) {
  if (p != &platform)
    return CL_INVALID_PLATFORM;
  if ((num_entries == 0 && out != NULL) || (out == NULL && num_devices == NULL))
    return CL_INVALID_VALUE;
  bool wanted = type == CL_DEVICE_TYPE_ALL || (type & CL_DEVICE_TYPE_GPU) ||
                (type & CL_DEVICE_TYPE_DEFAULT);
  if (current_mode() == NO_DEVICES || !wanted) {
    if (num_devices != NULL)
      *num_devices = 0;
    return CL_DEVICE_NOT_FOUND;
  }
  cl_uint n = device_count();
  for (cl_uint i = 0; out != NULL && i < n && i < num_entries; i++)
    out[i] = &devices[i];
  if (num_devices != NULL)
    *num_devices = n;
  return CL_SUCCESS;
}

static bool is_device(cl_device_id d) {
  for (cl_uint i = 0; i < device_count(); i++)
    if (d == &devices[i])
      return true;
  return false;
}

static cl_int CL_API_CALL fake_get_device_info(cl_device_id d,
                                               cl_device_info param,
                                               size_t size, void *value,
                                               size_t *size_ret) {
  if (!is_device(d))
    return CL_INVALID_DEVICE;
  enum mode m = current_mode();
  if (m == DEVICE_FAIL)
    return CL_INVALID_VALUE;
  union {
    cl_uint u;
    cl_ulong ul;
    size_t sz;
    size_t sizes[3];
    cl_bool b;
    cl_device_type type;
    cl_device_fp_config fp;
    cl_platform_id platform;
    cl_uchar uuid[CL_UUID_SIZE_KHR];
    cl_device_pci_bus_info_khr pci;
    cl_command_queue_properties props;
  } v;
  memset(&v, 0, sizeof v);
  size_t n = 0;
#define U(x) (v.u = (x), n = sizeof v.u)
#define UL(x) (v.ul = (x), n = sizeof v.ul)
#define SZ(x) (v.sz = (x), n = sizeof v.sz)
  const char *ext = d->index == 0   ? "cl_khr_fp64 cl_khr_fp16 cl_khr_device_uuid"
                    : d->index == 1 ? "cl_khr_fp64 cl_khr_pci_bus_info"
                                    : "cl_khr_fp64";
  switch (param) {
  case CL_DEVICE_NAME:
    return answer_string(m == LONG_STRINGS ? long_string : "Fake GPU", size,
                         value, size_ret);
  case CL_DEVICE_VENDOR:
    return answer_string("Fake Vendor", size, value, size_ret);
  case CL_DRIVER_VERSION:
    return answer_string("1.0.fake", size, value, size_ret);
  case CL_DEVICE_VERSION:
    return answer_string("OpenCL 1.2 fake", size, value, size_ret);
  case CL_DEVICE_OPENCL_C_VERSION:
    return answer_string("OpenCL C 1.2 fake", size, value, size_ret);
  case CL_DEVICE_PROFILE:
    return answer_string("FULL_PROFILE", size, value, size_ret);
  case CL_DEVICE_EXTENSIONS:
    return answer_string(ext, size, value, size_ret);
  case CL_DEVICE_BUILT_IN_KERNELS:
    return answer_string("", size, value, size_ret);
  case CL_DEVICE_TYPE:
    v.type = CL_DEVICE_TYPE_GPU;
    n = sizeof v.type;
    break;
  case CL_DEVICE_PLATFORM:
    v.platform = &platform;
    n = sizeof v.platform;
    break;
  case CL_DEVICE_VENDOR_ID: U(vendor_id()); break;
  case CL_DEVICE_MAX_COMPUTE_UNITS: U(4); break;
  case CL_DEVICE_MAX_CLOCK_FREQUENCY: U(1000); break;
  case CL_DEVICE_ADDRESS_BITS: U(64); break;
  case CL_DEVICE_GLOBAL_MEM_SIZE: UL(1ull << 30); break;
  case CL_DEVICE_LOCAL_MEM_SIZE: UL(48 * 1024); break;
  case CL_DEVICE_MAX_CONSTANT_BUFFER_SIZE: UL(64 * 1024); break;
  case CL_DEVICE_MAX_MEM_ALLOC_SIZE: UL(256u << 20); break;
  case CL_DEVICE_GLOBAL_MEM_CACHE_SIZE: UL(1u << 20); break;
  case CL_DEVICE_MEM_BASE_ADDR_ALIGN: U(1024); break;
  case CL_DEVICE_MAX_WORK_GROUP_SIZE: SZ(256); break;
  case CL_DEVICE_MAX_WORK_ITEM_DIMENSIONS: U(3); break;
  case CL_DEVICE_MAX_WORK_ITEM_SIZES:
    v.sizes[0] = 256;
    v.sizes[1] = 256;
    v.sizes[2] = 64;
    n = sizeof v.sizes;
    break;
  case CL_DEVICE_PREFERRED_VECTOR_WIDTH_CHAR: U(4); break;
  case CL_DEVICE_PREFERRED_VECTOR_WIDTH_SHORT: U(2); break;
  case CL_DEVICE_PREFERRED_VECTOR_WIDTH_INT:
  case CL_DEVICE_PREFERRED_VECTOR_WIDTH_LONG:
  case CL_DEVICE_PREFERRED_VECTOR_WIDTH_FLOAT:
  case CL_DEVICE_PREFERRED_VECTOR_WIDTH_DOUBLE: U(1); break;
  case CL_DEVICE_PREFERRED_VECTOR_WIDTH_HALF: U(2); break;
  case CL_DEVICE_HALF_FP_CONFIG:
  case CL_DEVICE_SINGLE_FP_CONFIG:
  case CL_DEVICE_DOUBLE_FP_CONFIG:
    v.fp = CL_FP_ROUND_TO_NEAREST | CL_FP_INF_NAN | CL_FP_FMA;
    n = sizeof v.fp;
    break;
  case CL_DEVICE_AVAILABLE:
  case CL_DEVICE_COMPILER_AVAILABLE:
  case CL_DEVICE_LINKER_AVAILABLE:
  case CL_DEVICE_ENDIAN_LITTLE:
    v.b = CL_TRUE;
    n = sizeof v.b;
    break;
  case CL_DEVICE_QUEUE_PROPERTIES:
    v.props = CL_QUEUE_PROFILING_ENABLE;
    n = sizeof v.props;
    break;
  case CL_DEVICE_PROFILING_TIMER_RESOLUTION: SZ(1); break;
  case CL_DEVICE_UUID_KHR:
    if (d->index != 0)
      return CL_INVALID_VALUE;
    for (size_t i = 0; i < CL_UUID_SIZE_KHR; i++)
      v.uuid[i] = (cl_uchar)(0xa0 + i);
    n = sizeof v.uuid;
    break;
  case CL_DEVICE_PCI_BUS_INFO_KHR:
    if (d->index != 1)
      return CL_INVALID_VALUE;
    v.pci = (cl_device_pci_bus_info_khr){0, 0x42, 0, 0};
    n = sizeof v.pci;
    break;
  default:
    return CL_INVALID_VALUE;
  }
#undef U
#undef UL
#undef SZ
  return answer(&v, n, false, size, value, size_ret);
}

/* ---- entries that fail cleanly ------------------------------------------ */

static cl_int CL_API_CALL unsupported(void) { return CL_INVALID_OPERATION; }

/* Typed failures for entries that return a handle: the ABI needs a NULL
 * return value, and callers read *errcode_ret. */
#define FAIL_HANDLE(ret, name, err, ...)                                       \
  static ret CL_API_CALL name(__VA_ARGS__, cl_int *errcode_ret) {              \
    if (errcode_ret != NULL)                                                   \
      *errcode_ret = (err);                                                    \
    return NULL;                                                               \
  }

FAIL_HANDLE(cl_context, fake_create_context, CL_DEVICE_NOT_AVAILABLE,
            const cl_context_properties *a, cl_uint b, const cl_device_id *c,
            void(CL_CALLBACK *d)(const char *, const void *, size_t, void *),
            void *e)
FAIL_HANDLE(cl_context, fake_create_context_from_type, CL_DEVICE_NOT_AVAILABLE,
            const cl_context_properties *a, cl_device_type b,
            void(CL_CALLBACK *d)(const char *, const void *, size_t, void *),
            void *e)
FAIL_HANDLE(cl_command_queue, fake_create_queue, CL_INVALID_CONTEXT,
            cl_context a, cl_device_id b, cl_command_queue_properties c)
FAIL_HANDLE(cl_command_queue, fake_create_queue_props, CL_INVALID_CONTEXT,
            cl_context a, cl_device_id b, const cl_queue_properties *c)
FAIL_HANDLE(cl_mem, fake_create_buffer, CL_INVALID_CONTEXT, cl_context a,
            cl_mem_flags b, size_t c, void *d)
FAIL_HANDLE(cl_mem, fake_create_sub_buffer, CL_INVALID_MEM_OBJECT, cl_mem a,
            cl_mem_flags b, cl_buffer_create_type c, const void *d)
FAIL_HANDLE(cl_program, fake_create_program_src, CL_INVALID_CONTEXT,
            cl_context a, cl_uint b, const char **c, const size_t *d)
FAIL_HANDLE(cl_program, fake_create_program_bin, CL_INVALID_CONTEXT,
            cl_context a, cl_uint b, const cl_device_id *c, const size_t *d,
            const unsigned char **e, cl_int *f)
FAIL_HANDLE(cl_program, fake_create_program_il, CL_INVALID_CONTEXT,
            cl_context a, const void *b, size_t c)
FAIL_HANDLE(cl_kernel, fake_create_kernel, CL_INVALID_PROGRAM, cl_program a,
            const char *b)
FAIL_HANDLE(cl_event, fake_create_user_event, CL_INVALID_CONTEXT,
            cl_context a)
FAIL_HANDLE(void *, fake_map_buffer, CL_INVALID_COMMAND_QUEUE,
            cl_command_queue a, cl_mem b, cl_bool c, cl_map_flags d, size_t e,
            size_t f, cl_uint g, const cl_event *h, cl_event *i)

FAIL_HANDLE(cl_mem, fake_create_buffer_props, CL_INVALID_CONTEXT,
            cl_context a, const cl_mem_properties *b, cl_mem_flags c,
            size_t d, void *e)
FAIL_HANDLE(cl_mem, fake_create_image, CL_INVALID_CONTEXT, cl_context a,
            cl_mem_flags b, const cl_image_format *c, const cl_image_desc *d,
            void *e)
FAIL_HANDLE(cl_mem, fake_create_image_props, CL_INVALID_CONTEXT, cl_context a,
            const cl_mem_properties *b, cl_mem_flags c,
            const cl_image_format *d, const cl_image_desc *e, void *f)
FAIL_HANDLE(cl_mem, fake_create_image2d, CL_INVALID_CONTEXT, cl_context a,
            cl_mem_flags b, const cl_image_format *c, size_t d, size_t e,
            size_t f, void *g)
FAIL_HANDLE(cl_mem, fake_create_image3d, CL_INVALID_CONTEXT, cl_context a,
            cl_mem_flags b, const cl_image_format *c, size_t d, size_t e,
            size_t f, size_t g, size_t h, void *i)
FAIL_HANDLE(cl_mem, fake_create_pipe, CL_INVALID_CONTEXT, cl_context a,
            cl_mem_flags b, cl_uint c, cl_uint d, const cl_pipe_properties *e)
FAIL_HANDLE(cl_sampler, fake_create_sampler, CL_INVALID_CONTEXT, cl_context a,
            cl_bool b, cl_addressing_mode c, cl_filter_mode d)
FAIL_HANDLE(cl_sampler, fake_create_sampler_props, CL_INVALID_CONTEXT,
            cl_context a, const cl_sampler_properties *b)
FAIL_HANDLE(cl_program, fake_create_program_builtin, CL_INVALID_CONTEXT,
            cl_context a, cl_uint b, const cl_device_id *c, const char *d)
FAIL_HANDLE(cl_program, fake_link_program, CL_INVALID_CONTEXT, cl_context a,
            cl_uint b, const cl_device_id *c, const char *d, cl_uint e,
            const cl_program *f,
            void(CL_CALLBACK *g)(cl_program, void *), void *h)
FAIL_HANDLE(cl_kernel, fake_clone_kernel, CL_INVALID_KERNEL, cl_kernel a)
FAIL_HANDLE(void *, fake_map_image, CL_INVALID_COMMAND_QUEUE,
            cl_command_queue a, cl_mem b, cl_bool c, cl_map_flags d,
            const size_t *e, const size_t *f, size_t *g, size_t *h, cl_uint i,
            const cl_event *j, cl_event *k)
FAIL_HANDLE(cl_mem, fake_create_from_gl_buffer, CL_INVALID_CONTEXT,
            cl_context a, cl_mem_flags b, cl_GLuint c)
FAIL_HANDLE(cl_mem, fake_create_from_gl_texture, CL_INVALID_CONTEXT,
            cl_context a, cl_mem_flags b, cl_GLenum c, cl_GLint d, cl_GLuint e)
FAIL_HANDLE(cl_mem, fake_create_from_gl_renderbuffer, CL_INVALID_CONTEXT,
            cl_context a, cl_mem_flags b, cl_GLuint c)
FAIL_HANDLE(cl_event, fake_create_event_from_gl_sync, CL_INVALID_CONTEXT,
            cl_context a, cl_GLsync b)
FAIL_HANDLE(cl_mem, fake_create_from_egl_image, CL_INVALID_CONTEXT,
            cl_context a, CLeglDisplayKHR b, CLeglImageKHR c, cl_mem_flags d,
            const cl_egl_image_properties_khr *e)
FAIL_HANDLE(cl_event, fake_create_event_from_egl_sync, CL_INVALID_CONTEXT,
            cl_context a, CLeglSyncKHR b, CLeglDisplayKHR c)

static void *CL_API_CALL fake_svm_alloc(cl_context a, cl_svm_mem_flags b,
                                        size_t c, cl_uint d) {
  return NULL;
}

static void *CL_API_CALL fake_extension_address_for_platform(cl_platform_id p,
                                                             const char *name) {
  return NULL;
}

/* The ABI-level type every dispatch slot holds. */
typedef void (*slot_fn)(void);

static void set_slot(void *slot, slot_fn fn) { memcpy(slot, &fn, sizeof fn); }

static void init(void) {
  /* Start with every slot failing with CL_INVALID_OPERATION, then fill in
   * what is real. A handle-returning entry must return NULL (an int return
   * would read as a garbage handle), so every one of those gets a typed stub
   * below; the Direct3D slots, plain pointers on Linux, are left failing. */
  slot_fn fail = (slot_fn)unsupported;
  for (size_t off = 0; off + sizeof fail <= sizeof dispatch;
       off += sizeof fail)
    set_slot((char *)&dispatch + off, fail);
  dispatch.clGetPlatformInfo = fake_get_platform_info;
  dispatch.clGetDeviceIDs = fake_get_device_ids;
  dispatch.clGetDeviceInfo = fake_get_device_info;
  dispatch.clCreateContext = fake_create_context;
  dispatch.clCreateContextFromType = fake_create_context_from_type;
  dispatch.clCreateCommandQueue = fake_create_queue;
  dispatch.clCreateCommandQueueWithProperties = fake_create_queue_props;
  dispatch.clCreateBuffer = fake_create_buffer;
  dispatch.clCreateSubBuffer = fake_create_sub_buffer;
  dispatch.clCreateProgramWithSource = fake_create_program_src;
  dispatch.clCreateProgramWithBinary = fake_create_program_bin;
  dispatch.clCreateProgramWithIL = fake_create_program_il;
  dispatch.clCreateKernel = fake_create_kernel;
  dispatch.clCreateUserEvent = fake_create_user_event;
  dispatch.clEnqueueMapBuffer = fake_map_buffer;
  dispatch.clGetExtensionFunctionAddressForPlatform =
      fake_extension_address_for_platform;
  dispatch.clGetExtensionFunctionAddress = clGetExtensionFunctionAddress;
  dispatch.clCreateBufferWithProperties = fake_create_buffer_props;
  dispatch.clCreateImage = fake_create_image;
  dispatch.clCreateImageWithProperties = fake_create_image_props;
  dispatch.clCreateImage2D = fake_create_image2d;
  dispatch.clCreateImage3D = fake_create_image3d;
  dispatch.clCreatePipe = fake_create_pipe;
  dispatch.clCreateSampler = fake_create_sampler;
  dispatch.clCreateSamplerWithProperties = fake_create_sampler_props;
  dispatch.clCreateProgramWithBuiltInKernels = fake_create_program_builtin;
  dispatch.clLinkProgram = fake_link_program;
  dispatch.clCloneKernel = fake_clone_kernel;
  dispatch.clEnqueueMapImage = fake_map_image;
  dispatch.clSVMAlloc = fake_svm_alloc;
  dispatch.clCreateFromGLBuffer = fake_create_from_gl_buffer;
  dispatch.clCreateFromGLTexture = fake_create_from_gl_texture;
  dispatch.clCreateFromGLTexture2D = fake_create_from_gl_texture;
  dispatch.clCreateFromGLTexture3D = fake_create_from_gl_texture;
  dispatch.clCreateFromGLRenderbuffer = fake_create_from_gl_renderbuffer;
  dispatch.clCreateEventFromGLsyncKHR = fake_create_event_from_gl_sync;
  dispatch.clCreateFromEGLImageKHR = fake_create_from_egl_image;
  dispatch.clCreateEventFromEGLSyncKHR = fake_create_event_from_egl_sync;
  for (cl_uint i = 0; i < MAX_DEVICES; i++)
    devices[i] = (struct _cl_device_id){&dispatch, i};
  /* A name that is long and not one repeated byte, so truncation shows. */
  for (size_t i = 0; i < LONG_STRING; i++)
    long_string[i] = (char)('a' + i % 26);
  long_string[LONG_STRING] = '\0';
}

/* ---- the two exported entry points --------------------------------------- */

EXPORT CL_API_ENTRY cl_int CL_API_CALL
clIcdGetPlatformIDsKHR(cl_uint num_entries, cl_platform_id *platforms,
                       cl_uint *num_platforms) {
  pthread_once(&once, init);
  if ((num_entries == 0 && platforms != NULL) ||
      (platforms == NULL && num_platforms == NULL))
    return CL_INVALID_VALUE;
  if (platforms != NULL)
    platforms[0] = &platform;
  if (num_platforms != NULL)
    *num_platforms = 1;
  return CL_SUCCESS;
}

EXPORT CL_API_ENTRY void *CL_API_CALL
clGetExtensionFunctionAddress(const char *name) {
  pthread_once(&once, init);
  slot_fn fn = NULL;
  if (name != NULL && strcmp(name, "clIcdGetPlatformIDsKHR") == 0)
    fn = (slot_fn)clIcdGetPlatformIDsKHR;
  else if (name != NULL && strcmp(name, "clGetPlatformInfo") == 0)
    fn = (slot_fn)fake_get_platform_info;
  void *address = NULL;
  /* Function to object pointer: what this ABI requires, done without the
   * cast ISO C leaves undefined. */
  memcpy(&address, &fn, sizeof address);
  return address;
}
