/* Devices: enumeration through the OpenCL ICD loader, device facts, and
 * selection with the selector grammar shared by the API, KILN_DEVICE and the
 * CLI. */
#ifndef KILN_DEVICE_H
#define KILN_DEVICE_H

#if !defined(KILN_H_INSIDE) && !defined(KILN_COMPILATION)
#error "Only <kiln/kiln.h> can be included directly."
#endif

#include "kiln/kiln_common.h"

KILN_BEGIN_DECLS

typedef enum kiln_device_type {
  KILN_DEVICE_OTHER = 0,
  KILN_DEVICE_CPU = 1,
  KILN_DEVICE_GPU = 2,
  KILN_DEVICE_ACCELERATOR = 3,
} kiln_device_type;

/* Known driver quirks, recorded by the matched backend profile. Bits, so a
 * device may have several. kiln_quirk_name() names one bit. */
typedef enum kiln_quirk {
  /* __local memory is ordinary cached global memory (PoCL): tiling through it
   * only costs barriers. */
  KILN_QUIRK_LOCAL_MEM_EMULATED = 1u << 0,
  /* a*b+c and mad() are not fused into FMA; kernels must call fma(). */
  KILN_QUIRK_NO_MAD_FUSION = 1u << 1,
  /* With no local size the driver runs a small range as one work-group on
   * one thread: kiln passes an explicit local size. */
  KILN_QUIRK_SERIAL_DEFAULT_LOCAL_SIZE = 1u << 2,
  /* clCreateCommandQueueWithProperties hangs or is missing on the platform:
   * use clCreateCommandQueue. Set for every device of a 1.x platform (the
   * call arrived in 2.0; Oclgrind's 1.2 platform hangs in it). */
  KILN_QUIRK_LEGACY_QUEUE_CREATE = 1u << 3,
  /* Profiling timestamps have no useful resolution. */
  KILN_QUIRK_COARSE_PROFILING = 1u << 4,
  /* The program binary (CL_PROGRAM_BINARIES) is serialised once, when first
   * queried, and includes the code compiled at each kernel's first launch
   * (PoCL): kiln's cache saves such a program when it is released, after
   * its kernels ran, instead of right after the build. */
  KILN_QUIRK_LAZY_PROGRAM_BINARY = 1u << 5,
  /* clFinish returns at once when every command has already been flushed
   * (by clFlush or a wait), though they have not completed, and a command's
   * event may still read as submitted after a later command of the same
   * flush completed (Mesa 22.3 rusticl): kiln_queue_finish and
   * kiln_queue_destroy flush, then enqueue a marker and wait for it. */
  KILN_QUIRK_FINISH_SKIPS_FLUSHED = 1u << 6,
  /* Every loop in a kernel stops after 65535 iterations, silently (Mesa's
   * llvmpipe loop limiter): op kernels keep each work-item's loops shorter,
   * and user kernels must too. */
  KILN_QUIRK_LOOP_LIMIT_65535 = 1u << 7,
  /* clBuildProgram now and then fails with CL_BUILD_PROGRAM_FAILURE and a
   * log that holds no error when several processes build the same source
   * into one cold kernel cache at once (PoCL 3.1: 1 in 128 bare OpenCL
   * builds, 3 in 64 runs of `kiln demo`, 8 processes at a time): kiln
   * builds again, at most twice, and notes it in the cache diagnostic. */
  KILN_QUIRK_SPURIOUS_BUILD_FAILURE = 1u << 8,
  /* cl_khr_command_buffer is offered but a recorded sequence replays
   * slower through it than as a list of enqueues (PoCL 3.1: 1.2-2x as
   * long for 100 small kernels): kiln_sequence_begin with flags 0 replays
   * the prepared list. */
  KILN_QUIRK_SLOW_COMMAND_BUFFER = 1u << 9,
} kiln_quirk;

/* What kiln knows about one device. Strings are never NULL ("" when the
 * driver did not say) and are owned by the device record. */
typedef struct kiln_device_info {
  const char *name;
  const char *vendor;
  const char *driver_version;
  const char *device_version;    /* "OpenCL 3.0 PoCL ..." */
  const char *opencl_c_version;  /* "OpenCL C 1.2 ..." */
  const char *extensions;        /* space-separated, normalised */
  const char *platform_name;
  const char *platform_vendor;
  const char *platform_version;
  /* Stable across runs and processes: "uuid-<32 hex>" from cl_khr_device_uuid,
   * else "pci-DDDD:BB:DD.F" from cl_khr_pci_bus_info, else
   * "hash-<16 hex>" of platform name, device name, driver version and the
   * device's position among identical devices. */
  const char *stable_id;
  /* Name of the matched backend profile ("nvidia", "amd", "intel", "pocl",
   * "rusticl", "generic"); KILN_PROFILE or kiln_context_options.profile
   * override it for contexts, not here. */
  const char *profile;
  uint32_t vendor_id;
  kiln_device_type type;
  uint32_t compute_units;
  uint32_t clock_mhz;
  uint64_t global_mem_bytes;
  uint64_t local_mem_bytes;
  uint64_t constant_mem_bytes;
  uint64_t max_alloc_bytes;
  uint32_t mem_base_addr_align_bits;
  size_t max_work_group_size;
  uint32_t max_work_item_dims;
  size_t max_work_item_sizes[3];
  /* Preferred vector widths, in elements. */
  uint32_t vector_width_char, vector_width_short, vector_width_int,
      vector_width_long, vector_width_float, vector_width_double,
      vector_width_half;
  uint32_t cl_version;   /* device OpenCL version, major * 100 + minor * 10 */
  uint32_t platform_cl_version;
  bool fp16;       /* cl_khr_fp16 with a non-zero half FP config */
  bool fp64;
  bool subgroups;  /* cl_khr_subgroups or OpenCL 3.0 with sub-groups */
  unsigned quirks; /* kiln_quirk bits of the matched profile, plus
                      KILN_QUIRK_LEGACY_QUEUE_CREATE on 1.x platforms */
  size_t platform_index;
  size_t device_index; /* within its platform */
} kiln_device_info;

/* A platform or device that failed a query during enumeration. It is
 * recorded here and skipped; enumeration goes on. */
typedef struct kiln_device_problem {
  size_t platform_index;
  const char *platform_name;  /* "" if even the name query failed */
  /* Index of the device within the platform, or SIZE_MAX when the problem
   * concerns the platform itself (for example no devices). */
  size_t device_index;
  const char *call;           /* the failing OpenCL call, "clGetDeviceIDs" */
  int32_t cl_error;
  const char *message;        /* a full sentence */
} kiln_device_problem;

/* Enumerate every platform and device the ICD loader offers. Succeeds with an
 * empty list (and problems recorded) when nothing usable is found; fails only
 * on host memory exhaustion or a NULL out. The list owns its devices: every
 * kiln_device pointer obtained from it is valid until it is destroyed.
 * Contexts copy what they need, so they may outlive the list.
 * Thread-safe; the list is immutable and may be read from many threads. */
KILN_API kiln_status kiln_device_list_create(kiln_device_list **out);
/* Free the list once no thread reads it and no selection borrows it. */
KILN_API void kiln_device_list_destroy(kiln_device_list *list);

KILN_API size_t kiln_device_list_get_count(const kiln_device_list *list);
/* Borrowed; NULL when index is out of range. */
KILN_API const kiln_device *kiln_device_list_get(const kiln_device_list *list,
                                                 size_t index);
KILN_API size_t
kiln_device_list_get_problem_count(const kiln_device_list *list);
/* Borrowed; NULL when index is out of range. */
KILN_API const kiln_device_problem *
kiln_device_list_get_problem(const kiln_device_list *list, size_t index);

/* Borrowed, lives as long as the device; NULL for a NULL device. */
KILN_API const kiln_device_info *kiln_device_get_info(const kiln_device *device);

/* "CPU", "GPU", "accelerator", "other". */
KILN_API const char *kiln_device_type_name(kiln_device_type type);
/* Name of a single kiln_quirk bit ("local-mem-emulated"), NULL otherwise. */
KILN_API const char *kiln_quirk_name(unsigned quirk_bit);

/*
 * Selection.
 *
 * Grammar (whitespace around terms is ignored, keywords are case-insensitive):
 *   selector := alternative ( '|' alternative )*   first alternative that
 *                                                 matches any device wins
 *   alternative := term ( ',' term )*              a device must match all
 *   term :=  gpu | cpu | accelerator
 *          | nvidia | amd | intel | pocl | rusticl  (vendor or implementation)
 *          | P:D                 platform index P, device index D
 *          | name:TEXT           case-insensitive substring of the device name
 *          | id:STABLE-ID        exact stable id (see kiln_device_info)
 *          | uuid:HEX            cl_khr_device_uuid, 32 hex digits
 *          | profile:NAME        the matched backend profile
 *          | fp16 | fp64 | subgroups
 *          | mem>=SIZE           global memory; SIZE is digits with an
 *                                optional K, M, G or T suffix (binary units)
 *          | cu>=N               compute units
 *          | all                 every device
 *   TEXT runs to the next ',' or '|'.
 * An empty or NULL selector means the KILN_DEVICE environment variable when it
 * is set and not empty, else the default: every GPU if there is one, else
 * every CPU device.
 * A syntax error returns KILN_ERR_SELECTOR_SYNTAX; the last error gives the
 * 1-based column of the offending character and what was expected.
 */
typedef struct kiln_selection kiln_selection;

/* Evaluate selector against every device of list. Devices that match are
 * "taken", in list order. Succeeds even when nothing is taken (count 0);
 * the selection keeps a reason for every device of the list.
 * The selection borrows list: destroy it first. Thread-safe; a selection is
 * immutable and may be read from many threads. */
KILN_API kiln_status kiln_selection_create(const kiln_device_list *list,
                                           const char *selector,
                                           kiln_selection **out);
KILN_API void kiln_selection_destroy(kiln_selection *selection);
KILN_API size_t kiln_selection_get_count(const kiln_selection *selection);
/* The index-th taken device (borrowed), or NULL. */
KILN_API const kiln_device *kiln_selection_get(const kiln_selection *selection,
                                               size_t index);
/* For device list_index of the list: whether it was taken, and why or why
 * not ("taken: matches gpu" / "refused: type is CPU, not GPU (term 1, column
 * 1)"). Returns NULL for an out-of-range index. Borrowed. */
KILN_API const char *
kiln_selection_get_explanation(const kiln_selection *selection,
                               size_t list_index, bool *taken);
/* The selector actually evaluated, after KILN_DEVICE and the default were
 * applied ("<default>" for the default rule). Borrowed. */
KILN_API const char *
kiln_selection_get_selector(const kiln_selection *selection);

/* Convenience: the first device the selector takes. KILN_ERR_NO_DEVICE, with
 * the reasons in the last error, when it takes none. Thread-safe. */
KILN_API kiln_status kiln_device_select(const kiln_device_list *list,
                                        const char *selector,
                                        const kiln_device **out);

KILN_END_DECLS

#endif
