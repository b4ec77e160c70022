/* The property tables behind `kiln info`, and queries that never trust the
 * driver.
 *
 * One row per standard platform and device query of OpenCL 1.0 to 3.0, plus
 * the common extension queries, in the order `clinfo --raw` prints them, with
 * the names it uses. Each row says when the query is valid (a minimum
 * version, or an extension), so a 1.2 device shows 2.x queries as
 * unsupported instead of whatever a driver returns for an unknown enum. */
#include "info.h"

#include <ctype.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Values of cl_nv_device_attribute_query that the Khronos headers lack
 * (NVIDIA's own cl_ext.h has them; clinfo defines them the same way). */
#define KILN_CL_DEVICE_PCI_BUS_ID_NV 0x4008
#define KILN_CL_DEVICE_PCI_SLOT_ID_NV 0x4009
#define KILN_CL_DEVICE_PCI_DOMAIN_ID_NV 0x400A

/* A driver may claim any size; nothing legitimate is this large, and a
 * bound keeps a broken driver from making us allocate gigabytes. */
#define INFO_MAX_BYTES ((size_t)1 << 20)

static const info_flag device_type_flags[] = {
    {CL_DEVICE_TYPE_DEFAULT, "CL_DEVICE_TYPE_DEFAULT"},
    {CL_DEVICE_TYPE_CPU, "CL_DEVICE_TYPE_CPU"},
    {CL_DEVICE_TYPE_GPU, "CL_DEVICE_TYPE_GPU"},
    {CL_DEVICE_TYPE_ACCELERATOR, "CL_DEVICE_TYPE_ACCELERATOR"},
    {CL_DEVICE_TYPE_CUSTOM, "CL_DEVICE_TYPE_CUSTOM"},
    {0, NULL}};

static const info_flag fp_flags[] = {
    {CL_FP_DENORM, "CL_FP_DENORM"},
    {CL_FP_INF_NAN, "CL_FP_INF_NAN"},
    {CL_FP_ROUND_TO_NEAREST, "CL_FP_ROUND_TO_NEAREST"},
    {CL_FP_ROUND_TO_ZERO, "CL_FP_ROUND_TO_ZERO"},
    {CL_FP_ROUND_TO_INF, "CL_FP_ROUND_TO_INF"},
    {CL_FP_FMA, "CL_FP_FMA"},
    {CL_FP_SOFT_FLOAT, "CL_FP_SOFT_FLOAT"},
    {CL_FP_CORRECTLY_ROUNDED_DIVIDE_SQRT, "CL_FP_CORRECTLY_ROUNDED_DIVIDE_SQRT"},
    {0, NULL}};

static const info_flag exec_flags[] = {
    {CL_EXEC_KERNEL, "CL_EXEC_KERNEL"},
    {CL_EXEC_NATIVE_KERNEL, "CL_EXEC_NATIVE_KERNEL"},
    {0, NULL}};

static const info_flag queue_flags[] = {
    {CL_QUEUE_OUT_OF_ORDER_EXEC_MODE_ENABLE, "CL_QUEUE_OUT_OF_ORDER_EXEC_MODE_ENABLE"},
    {CL_QUEUE_PROFILING_ENABLE, "CL_QUEUE_PROFILING_ENABLE"},
    {CL_QUEUE_ON_DEVICE, "CL_QUEUE_ON_DEVICE"},
    {CL_QUEUE_ON_DEVICE_DEFAULT, "CL_QUEUE_ON_DEVICE_DEFAULT"},
    {0, NULL}};

static const info_flag svm_flags[] = {
    {CL_DEVICE_SVM_COARSE_GRAIN_BUFFER, "CL_DEVICE_SVM_COARSE_GRAIN_BUFFER"},
    {CL_DEVICE_SVM_FINE_GRAIN_BUFFER, "CL_DEVICE_SVM_FINE_GRAIN_BUFFER"},
    {CL_DEVICE_SVM_FINE_GRAIN_SYSTEM, "CL_DEVICE_SVM_FINE_GRAIN_SYSTEM"},
    {CL_DEVICE_SVM_ATOMICS, "CL_DEVICE_SVM_ATOMICS"},
    {0, NULL}};

static const info_flag affinity_flags[] = {
    {CL_DEVICE_AFFINITY_DOMAIN_NUMA, "CL_DEVICE_AFFINITY_DOMAIN_NUMA"},
    {CL_DEVICE_AFFINITY_DOMAIN_L4_CACHE, "CL_DEVICE_AFFINITY_DOMAIN_L4_CACHE"},
    {CL_DEVICE_AFFINITY_DOMAIN_L3_CACHE, "CL_DEVICE_AFFINITY_DOMAIN_L3_CACHE"},
    {CL_DEVICE_AFFINITY_DOMAIN_L2_CACHE, "CL_DEVICE_AFFINITY_DOMAIN_L2_CACHE"},
    {CL_DEVICE_AFFINITY_DOMAIN_L1_CACHE, "CL_DEVICE_AFFINITY_DOMAIN_L1_CACHE"},
    {CL_DEVICE_AFFINITY_DOMAIN_NEXT_PARTITIONABLE, "CL_DEVICE_AFFINITY_DOMAIN_NEXT_PARTITIONABLE"},
    {0, NULL}};

static const info_flag partition_values[] = {
    {CL_DEVICE_PARTITION_EQUALLY, "CL_DEVICE_PARTITION_EQUALLY"},
    {CL_DEVICE_PARTITION_BY_COUNTS, "CL_DEVICE_PARTITION_BY_COUNTS"},
    {CL_DEVICE_PARTITION_BY_AFFINITY_DOMAIN, "CL_DEVICE_PARTITION_BY_AFFINITY_DOMAIN"},
    {0, NULL}};

static const info_flag atomic_flags[] = {
    {CL_DEVICE_ATOMIC_ORDER_RELAXED, "CL_DEVICE_ATOMIC_ORDER_RELAXED"},
    {CL_DEVICE_ATOMIC_ORDER_ACQ_REL, "CL_DEVICE_ATOMIC_ORDER_ACQ_REL"},
    {CL_DEVICE_ATOMIC_ORDER_SEQ_CST, "CL_DEVICE_ATOMIC_ORDER_SEQ_CST"},
    {CL_DEVICE_ATOMIC_SCOPE_WORK_ITEM, "CL_DEVICE_ATOMIC_SCOPE_WORK_ITEM"},
    {CL_DEVICE_ATOMIC_SCOPE_WORK_GROUP, "CL_DEVICE_ATOMIC_SCOPE_WORK_GROUP"},
    {CL_DEVICE_ATOMIC_SCOPE_DEVICE, "CL_DEVICE_ATOMIC_SCOPE_DEVICE"},
    {CL_DEVICE_ATOMIC_SCOPE_ALL_DEVICES, "CL_DEVICE_ATOMIC_SCOPE_ALL_DEVICES"},
    {0, NULL}};

static const info_flag enqueue_flags[] = {
    {CL_DEVICE_QUEUE_SUPPORTED, "CL_DEVICE_QUEUE_SUPPORTED"},
    {CL_DEVICE_QUEUE_REPLACEABLE_DEFAULT, "CL_DEVICE_QUEUE_REPLACEABLE_DEFAULT"},
    {0, NULL}};

static const info_flag cache_values[] = {
    {CL_NONE, "CL_NONE"},
    {CL_READ_ONLY_CACHE, "CL_READ_ONLY_CACHE"},
    {CL_READ_WRITE_CACHE, "CL_READ_WRITE_CACHE"},
    {0, NULL}};

static const info_flag local_mem_values[] = {
    {CL_NONE, "CL_NONE"},
    {CL_LOCAL, "CL_LOCAL"},
    {CL_GLOBAL, "CL_GLOBAL"},
    {0, NULL}};

static const info_flag dot_product_flags[] = {
    {CL_DEVICE_INTEGER_DOT_PRODUCT_INPUT_4x8BIT_PACKED_KHR, "CL_DEVICE_INTEGER_DOT_PRODUCT_INPUT_4x8BIT_PACKED_KHR"},
    {CL_DEVICE_INTEGER_DOT_PRODUCT_INPUT_4x8BIT_KHR, "CL_DEVICE_INTEGER_DOT_PRODUCT_INPUT_4x8BIT_KHR"},
    {0, NULL}};

static const info_flag command_buffer_flags[] = {
    {1u << 0, "CL_COMMAND_BUFFER_CAPABILITY_KERNEL_PRINTF_KHR"},
    {1u << 1, "CL_COMMAND_BUFFER_CAPABILITY_DEVICE_SIDE_ENQUEUE_KHR"},
    {1u << 2, "CL_COMMAND_BUFFER_CAPABILITY_SIMULTANEOUS_USE_KHR"},
    {1u << 3, "CL_COMMAND_BUFFER_CAPABILITY_OUT_OF_ORDER_KHR"},
    {0, NULL}};

static const info_flag terminate_flags[] = {
    {1u << 0, "CL_DEVICE_TERMINATE_CAPABILITY_CONTEXT_KHR"},
    {0, NULL}};

static const info_flag intel_feature_flags[] = {
    {1u << 0, "CL_DEVICE_FEATURE_FLAG_DP4A_INTEL"},
    {1u << 1, "CL_DEVICE_FEATURE_FLAG_DPAS_INTEL"},
    {0, NULL}};

#define P(name, label, type) {#name, label, name, type, 0, NULL, NULL}
#define PV(name, label, type, ver) {#name, label, name, type, ver, NULL, NULL}
#define PX(name, label, type, ext) {#name, label, name, type, 0, ext, NULL}
#define PF(name, label, type, ver, flags) {#name, label, name, type, ver, NULL, flags}

static const info_prop platform_props[] = {
    P(CL_PLATFORM_NAME, "Name", T_STR),
    P(CL_PLATFORM_VENDOR, "Vendor", T_STR),
    P(CL_PLATFORM_VERSION, "Version", T_STR),
    P(CL_PLATFORM_PROFILE, "Profile", T_STR),
    P(CL_PLATFORM_EXTENSIONS, "Extensions", T_STR_LIST),
    {"CL_PLATFORM_EXTENSIONS_WITH_VERSION", "Extensions with version",
     CL_PLATFORM_EXTENSIONS_WITH_VERSION, T_NAME_VERSION, 300,
     "cl_khr_extended_versioning", NULL},
    {"CL_PLATFORM_NUMERIC_VERSION", "Numeric version",
     CL_PLATFORM_NUMERIC_VERSION, T_VERSION, 300, "cl_khr_extended_versioning",
     NULL},
    PX(CL_PLATFORM_ICD_SUFFIX_KHR, "ICD suffix", T_STR, "cl_khr_icd"),
    PV(CL_PLATFORM_HOST_TIMER_RESOLUTION, "Host timer resolution (ns)", T_ULONG, 210),
};

static const info_prop device_props[] = {
    P(CL_DEVICE_NAME, "Name", T_STR),
    P(CL_DEVICE_VENDOR, "Vendor", T_STR),
    P(CL_DEVICE_VENDOR_ID, "Vendor ID", T_HEX_UINT),
    P(CL_DEVICE_VERSION, "Device version", T_STR),
    {"CL_DEVICE_NUMERIC_VERSION", "Numeric version", CL_DEVICE_NUMERIC_VERSION,
     T_VERSION, 300, "cl_khr_extended_versioning", NULL},
    P(CL_DRIVER_VERSION, "Driver version", T_STR),
    PV(CL_DEVICE_OPENCL_C_VERSION, "OpenCL C version", T_STR, 110),
    {"CL_DEVICE_OPENCL_C_ALL_VERSIONS", "OpenCL C versions",
     CL_DEVICE_OPENCL_C_ALL_VERSIONS, T_NAME_VERSION, 300, NULL, NULL},
    PV(CL_DEVICE_OPENCL_C_FEATURES, "OpenCL C features", T_NAME_VERSION, 300),
    PV(CL_DEVICE_LATEST_CONFORMANCE_VERSION_PASSED, "Latest conformance version passed", T_STR, 300),
    PF(CL_DEVICE_TYPE, "Type", T_BITS, 0, device_type_flags),
    P(CL_DEVICE_PROFILE, "Profile", T_STR),
    P(CL_DEVICE_AVAILABLE, "Available", T_BOOL),
    P(CL_DEVICE_COMPILER_AVAILABLE, "Compiler available", T_BOOL),
    PV(CL_DEVICE_LINKER_AVAILABLE, "Linker available", T_BOOL, 120),
    P(CL_DEVICE_MAX_COMPUTE_UNITS, "Max compute units", T_UINT),
    P(CL_DEVICE_MAX_CLOCK_FREQUENCY, "Max clock frequency (MHz)", T_UINT),
    {"CL_DEVICE_COMPUTE_CAPABILITY_MAJOR_NV", "NVIDIA compute capability major",
     CL_DEVICE_COMPUTE_CAPABILITY_MAJOR_NV, T_UINT, 0, "cl_nv_device_attribute_query", NULL},
    {"CL_DEVICE_COMPUTE_CAPABILITY_MINOR_NV", "NVIDIA compute capability minor",
     CL_DEVICE_COMPUTE_CAPABILITY_MINOR_NV, T_UINT, 0, "cl_nv_device_attribute_query", NULL},
    {"CL_DEVICE_REGISTERS_PER_BLOCK_NV", "NVIDIA registers per block",
     CL_DEVICE_REGISTERS_PER_BLOCK_NV, T_UINT, 0, "cl_nv_device_attribute_query", NULL},
    {"CL_DEVICE_WARP_SIZE_NV", "NVIDIA warp size", CL_DEVICE_WARP_SIZE_NV,
     T_UINT, 0, "cl_nv_device_attribute_query", NULL},
    {"CL_DEVICE_GPU_OVERLAP_NV", "NVIDIA copy/kernel overlap",
     CL_DEVICE_GPU_OVERLAP_NV, T_BOOL, 0, "cl_nv_device_attribute_query", NULL},
    {"CL_DEVICE_KERNEL_EXEC_TIMEOUT_NV", "NVIDIA kernel execution timeout",
     CL_DEVICE_KERNEL_EXEC_TIMEOUT_NV, T_BOOL, 0, "cl_nv_device_attribute_query", NULL},
    {"CL_DEVICE_INTEGRATED_MEMORY_NV", "NVIDIA integrated memory",
     CL_DEVICE_INTEGRATED_MEMORY_NV, T_BOOL, 0, "cl_nv_device_attribute_query", NULL},
    {"CL_DEVICE_PCI_BUS_ID_NV", "NVIDIA PCI bus", KILN_CL_DEVICE_PCI_BUS_ID_NV,
     T_UINT, 0, "cl_nv_device_attribute_query", NULL},
    {"CL_DEVICE_PCI_SLOT_ID_NV", "NVIDIA PCI slot", KILN_CL_DEVICE_PCI_SLOT_ID_NV,
     T_UINT, 0, "cl_nv_device_attribute_query", NULL},
    {"CL_DEVICE_PCI_DOMAIN_ID_NV", "NVIDIA PCI domain",
     KILN_CL_DEVICE_PCI_DOMAIN_ID_NV, T_UINT, 0, "cl_nv_device_attribute_query", NULL},
    PX(CL_DEVICE_BOARD_NAME_AMD, "AMD board name", T_STR, "cl_amd_device_attribute_query"),
    PX(CL_DEVICE_SIMD_PER_COMPUTE_UNIT_AMD, "AMD SIMDs per compute unit", T_UINT, "cl_amd_device_attribute_query"),
    PX(CL_DEVICE_SIMD_WIDTH_AMD, "AMD SIMD width", T_UINT, "cl_amd_device_attribute_query"),
    PX(CL_DEVICE_WAVEFRONT_WIDTH_AMD, "AMD wavefront width", T_UINT, "cl_amd_device_attribute_query"),
    PX(CL_DEVICE_GLOBAL_MEM_CHANNELS_AMD, "AMD global memory channels", T_UINT, "cl_amd_device_attribute_query"),
    PX(CL_DEVICE_GFXIP_MAJOR_AMD, "AMD GFXIP major", T_UINT, "cl_amd_device_attribute_query"),
    PX(CL_DEVICE_GFXIP_MINOR_AMD, "AMD GFXIP minor", T_UINT, "cl_amd_device_attribute_query"),
    PX(CL_DEVICE_IP_VERSION_INTEL, "Intel IP version", T_HEX_UINT, "cl_intel_device_attribute_query"),
    PX(CL_DEVICE_ID_INTEL, "Intel device ID", T_HEX_UINT, "cl_intel_device_attribute_query"),
    PX(CL_DEVICE_NUM_SLICES_INTEL, "Intel slices", T_UINT, "cl_intel_device_attribute_query"),
    PX(CL_DEVICE_NUM_SUB_SLICES_PER_SLICE_INTEL, "Intel sub-slices per slice", T_UINT, "cl_intel_device_attribute_query"),
    PX(CL_DEVICE_NUM_EUS_PER_SUB_SLICE_INTEL, "Intel EUs per sub-slice", T_UINT, "cl_intel_device_attribute_query"),
    PX(CL_DEVICE_NUM_THREADS_PER_EU_INTEL, "Intel threads per EU", T_UINT, "cl_intel_device_attribute_query"),
    {"CL_DEVICE_FEATURE_CAPABILITIES_INTEL", "Intel feature capabilities",
     CL_DEVICE_FEATURE_CAPABILITIES_INTEL, T_BITS, 0,
     "cl_intel_device_attribute_query", intel_feature_flags},
    PX(CL_DEVICE_UUID_KHR, "Device UUID", T_UUID, "cl_khr_device_uuid"),
    PX(CL_DRIVER_UUID_KHR, "Driver UUID", T_UUID, "cl_khr_device_uuid"),
    PX(CL_DEVICE_LUID_VALID_KHR, "LUID valid", T_BOOL, "cl_khr_device_uuid"),
    PX(CL_DEVICE_LUID_KHR, "LUID", T_LUID, "cl_khr_device_uuid"),
    PX(CL_DEVICE_NODE_MASK_KHR, "Node mask", T_UINT, "cl_khr_device_uuid"),
    PX(CL_DEVICE_PCI_BUS_INFO_KHR, "PCI bus info", T_PCI_BUS, "cl_khr_pci_bus_info"),
    PV(CL_DEVICE_PARTITION_MAX_SUB_DEVICES, "Max sub-devices", T_UINT, 120),
    PF(CL_DEVICE_PARTITION_PROPERTIES, "Partition types", T_PARTITION, 120, partition_values),
    PF(CL_DEVICE_PARTITION_AFFINITY_DOMAIN, "Partition affinity domains", T_BITS, 120, affinity_flags),
    PF(CL_DEVICE_PARTITION_TYPE, "Partition type of this device", T_PARTITION, 120, partition_values),
    P(CL_DEVICE_MAX_WORK_ITEM_DIMENSIONS, "Max work item dimensions", T_UINT),
    P(CL_DEVICE_MAX_WORK_ITEM_SIZES, "Max work item sizes", T_SIZE_ARRAY),
    P(CL_DEVICE_MAX_WORK_GROUP_SIZE, "Max work group size", T_SIZE),
    PV(CL_DEVICE_PREFERRED_WORK_GROUP_SIZE_MULTIPLE, "Preferred work group size multiple", T_SIZE, 300),
    PX(CL_DEVICE_SUB_GROUP_SIZES_INTEL, "Intel sub-group sizes", T_SIZE_ARRAY, "cl_intel_required_subgroup_size"),
    PV(CL_DEVICE_MAX_NUM_SUB_GROUPS, "Max sub-groups per work group", T_UINT, 210),
    PV(CL_DEVICE_PREFERRED_VECTOR_WIDTH_CHAR, "Preferred vector width char", T_UINT, 0),
    PV(CL_DEVICE_NATIVE_VECTOR_WIDTH_CHAR, "Native vector width char", T_UINT, 110),
    PV(CL_DEVICE_PREFERRED_VECTOR_WIDTH_SHORT, "Preferred vector width short", T_UINT, 0),
    PV(CL_DEVICE_NATIVE_VECTOR_WIDTH_SHORT, "Native vector width short", T_UINT, 110),
    PV(CL_DEVICE_PREFERRED_VECTOR_WIDTH_INT, "Preferred vector width int", T_UINT, 0),
    PV(CL_DEVICE_NATIVE_VECTOR_WIDTH_INT, "Native vector width int", T_UINT, 110),
    PV(CL_DEVICE_PREFERRED_VECTOR_WIDTH_LONG, "Preferred vector width long", T_UINT, 0),
    PV(CL_DEVICE_NATIVE_VECTOR_WIDTH_LONG, "Native vector width long", T_UINT, 110),
    PV(CL_DEVICE_PREFERRED_VECTOR_WIDTH_HALF, "Preferred vector width half", T_UINT, 110),
    PV(CL_DEVICE_NATIVE_VECTOR_WIDTH_HALF, "Native vector width half", T_UINT, 110),
    PV(CL_DEVICE_PREFERRED_VECTOR_WIDTH_FLOAT, "Preferred vector width float", T_UINT, 0),
    PV(CL_DEVICE_NATIVE_VECTOR_WIDTH_FLOAT, "Native vector width float", T_UINT, 110),
    PV(CL_DEVICE_PREFERRED_VECTOR_WIDTH_DOUBLE, "Preferred vector width double", T_UINT, 0),
    PV(CL_DEVICE_NATIVE_VECTOR_WIDTH_DOUBLE, "Native vector width double", T_UINT, 110),
    /* Half precision exists only with cl_khr_fp16; PoCL answers the query
     * with 0 without it, other drivers fail it. */
    {"CL_DEVICE_HALF_FP_CONFIG", "Half precision floating-point",
     CL_DEVICE_HALF_FP_CONFIG, T_BITS, 0, "cl_khr_fp16", fp_flags},
    PF(CL_DEVICE_SINGLE_FP_CONFIG, "Single precision floating-point", T_BITS, 0, fp_flags),
    {"CL_DEVICE_DOUBLE_FP_CONFIG", "Double precision floating-point",
     CL_DEVICE_DOUBLE_FP_CONFIG, T_BITS, 120, "cl_khr_fp64", fp_flags},
    P(CL_DEVICE_ADDRESS_BITS, "Address bits", T_UINT),
    P(CL_DEVICE_ENDIAN_LITTLE, "Little endian", T_BOOL),
    P(CL_DEVICE_GLOBAL_MEM_SIZE, "Global memory size", T_MEM),
    P(CL_DEVICE_ERROR_CORRECTION_SUPPORT, "Error correction support", T_BOOL),
    P(CL_DEVICE_MAX_MEM_ALLOC_SIZE, "Max memory allocation", T_MEM),
    PV(CL_DEVICE_HOST_UNIFIED_MEMORY, "Unified memory for host and device", T_BOOL, 110),
    PF(CL_DEVICE_SVM_CAPABILITIES, "Shared virtual memory capabilities", T_BITS, 200, svm_flags),
    P(CL_DEVICE_MIN_DATA_TYPE_ALIGN_SIZE, "Minimum data type alignment (bytes)", T_UINT),
    P(CL_DEVICE_MEM_BASE_ADDR_ALIGN, "Memory base address alignment (bits)", T_UINT),
    PV(CL_DEVICE_PREFERRED_PLATFORM_ATOMIC_ALIGNMENT, "Preferred platform atomic alignment", T_UINT, 200),
    PV(CL_DEVICE_PREFERRED_GLOBAL_ATOMIC_ALIGNMENT, "Preferred global atomic alignment", T_UINT, 200),
    PV(CL_DEVICE_PREFERRED_LOCAL_ATOMIC_ALIGNMENT, "Preferred local atomic alignment", T_UINT, 200),
    PF(CL_DEVICE_ATOMIC_MEMORY_CAPABILITIES, "Atomic memory capabilities", T_BITS, 300, atomic_flags),
    PF(CL_DEVICE_ATOMIC_FENCE_CAPABILITIES, "Atomic fence capabilities", T_BITS, 300, atomic_flags),
    PV(CL_DEVICE_MAX_GLOBAL_VARIABLE_SIZE, "Max program-scope global variable size", T_SIZE, 200),
    PV(CL_DEVICE_GLOBAL_VARIABLE_PREFERRED_TOTAL_SIZE, "Preferred total size of global variables", T_SIZE, 200),
    PF(CL_DEVICE_GLOBAL_MEM_CACHE_TYPE, "Global memory cache type", T_ENUM, 0, cache_values),
    P(CL_DEVICE_GLOBAL_MEM_CACHE_SIZE, "Global memory cache size", T_MEM),
    P(CL_DEVICE_GLOBAL_MEM_CACHELINE_SIZE, "Global memory cache line size (bytes)", T_UINT),
    P(CL_DEVICE_IMAGE_SUPPORT, "Image support", T_BOOL),
    P(CL_DEVICE_MAX_SAMPLERS, "Max samplers per kernel", T_UINT),
    PV(CL_DEVICE_IMAGE_MAX_BUFFER_SIZE, "Max 1D image size from buffer (pixels)", T_SIZE, 120),
    PV(CL_DEVICE_IMAGE_MAX_ARRAY_SIZE, "Max 1D or 2D image array size", T_SIZE, 120),
    PV(CL_DEVICE_IMAGE_BASE_ADDRESS_ALIGNMENT, "2D image base address alignment", T_UINT, 200),
    PV(CL_DEVICE_IMAGE_PITCH_ALIGNMENT, "2D image pitch alignment", T_UINT, 200),
    P(CL_DEVICE_IMAGE2D_MAX_HEIGHT, "Max 2D image height", T_SIZE),
    P(CL_DEVICE_IMAGE2D_MAX_WIDTH, "Max 2D image width", T_SIZE),
    P(CL_DEVICE_IMAGE3D_MAX_HEIGHT, "Max 3D image height", T_SIZE),
    P(CL_DEVICE_IMAGE3D_MAX_WIDTH, "Max 3D image width", T_SIZE),
    P(CL_DEVICE_IMAGE3D_MAX_DEPTH, "Max 3D image depth", T_SIZE),
    P(CL_DEVICE_MAX_READ_IMAGE_ARGS, "Max read image arguments", T_UINT),
    P(CL_DEVICE_MAX_WRITE_IMAGE_ARGS, "Max write image arguments", T_UINT),
    PV(CL_DEVICE_MAX_READ_WRITE_IMAGE_ARGS, "Max read/write image arguments", T_UINT, 200),
    PV(CL_DEVICE_PIPE_SUPPORT, "Pipe support", T_BOOL, 300),
    PV(CL_DEVICE_MAX_PIPE_ARGS, "Max pipe arguments", T_UINT, 200),
    PV(CL_DEVICE_PIPE_MAX_ACTIVE_RESERVATIONS, "Max active pipe reservations", T_UINT, 200),
    PV(CL_DEVICE_PIPE_MAX_PACKET_SIZE, "Max pipe packet size", T_UINT, 200),
    PF(CL_DEVICE_LOCAL_MEM_TYPE, "Local memory type", T_ENUM, 0, local_mem_values),
    P(CL_DEVICE_LOCAL_MEM_SIZE, "Local memory size", T_MEM),
    P(CL_DEVICE_MAX_CONSTANT_ARGS, "Max constant arguments", T_UINT),
    P(CL_DEVICE_MAX_CONSTANT_BUFFER_SIZE, "Max constant buffer size", T_MEM),
    PV(CL_DEVICE_GENERIC_ADDRESS_SPACE_SUPPORT, "Generic address space support", T_BOOL, 300),
    P(CL_DEVICE_MAX_PARAMETER_SIZE, "Max size of kernel arguments (bytes)", T_SIZE),
    PF(CL_DEVICE_QUEUE_ON_HOST_PROPERTIES, "Queue properties (on host)", T_BITS, 0, queue_flags),
    PF(CL_DEVICE_DEVICE_ENQUEUE_CAPABILITIES, "Device enqueue capabilities", T_BITS, 300, enqueue_flags),
    PF(CL_DEVICE_QUEUE_ON_DEVICE_PROPERTIES, "Queue properties (on device)", T_BITS, 200, queue_flags),
    PV(CL_DEVICE_QUEUE_ON_DEVICE_PREFERRED_SIZE, "Preferred on-device queue size", T_UINT, 200),
    PV(CL_DEVICE_QUEUE_ON_DEVICE_MAX_SIZE, "Max on-device queue size", T_UINT, 200),
    PV(CL_DEVICE_MAX_ON_DEVICE_QUEUES, "Max on-device queues", T_UINT, 200),
    PV(CL_DEVICE_MAX_ON_DEVICE_EVENTS, "Max on-device events", T_UINT, 200),
    {"CL_DEVICE_COMMAND_BUFFER_CAPABILITIES_KHR", "Command buffer capabilities",
     CL_DEVICE_COMMAND_BUFFER_CAPABILITIES_KHR, T_BITS, 0, "cl_khr_command_buffer",
     command_buffer_flags},
    {"CL_DEVICE_COMMAND_BUFFER_REQUIRED_QUEUE_PROPERTIES_KHR",
     "Command buffer required queue properties",
     CL_DEVICE_COMMAND_BUFFER_REQUIRED_QUEUE_PROPERTIES_KHR, T_BITS, 0,
     "cl_khr_command_buffer", queue_flags},
    PV(CL_DEVICE_PREFERRED_INTEROP_USER_SYNC, "Prefers user sync for interop", T_BOOL, 120),
    P(CL_DEVICE_PROFILING_TIMER_RESOLUTION, "Profiling timer resolution (ns)", T_SIZE),
    PF(CL_DEVICE_EXECUTION_CAPABILITIES, "Execution capabilities", T_BITS, 0, exec_flags),
    PV(CL_DEVICE_NON_UNIFORM_WORK_GROUP_SUPPORT, "Non-uniform work groups", T_BOOL, 300),
    PV(CL_DEVICE_WORK_GROUP_COLLECTIVE_FUNCTIONS_SUPPORT, "Work group collective functions", T_BOOL, 300),
    PV(CL_DEVICE_SUB_GROUP_INDEPENDENT_FORWARD_PROGRESS, "Sub-group independent forward progress", T_BOOL, 210),
    {"CL_DEVICE_IL_VERSION", "IL version", CL_DEVICE_IL_VERSION, T_STR, 210,
     "cl_khr_il_program", NULL},
    {"CL_DEVICE_ILS_WITH_VERSION", "ILs with version", CL_DEVICE_ILS_WITH_VERSION,
     T_NAME_VERSION, 300, "cl_khr_extended_versioning", NULL},
    PX(CL_DEVICE_SPIR_VERSIONS, "SPIR versions", T_STR, "cl_khr_spir"),
    PV(CL_DEVICE_PRINTF_BUFFER_SIZE, "printf() buffer size", T_MEM, 120),
    PV(CL_DEVICE_BUILT_IN_KERNELS, "Built-in kernels", T_STR_SEMI, 120),
    {"CL_DEVICE_BUILT_IN_KERNELS_WITH_VERSION", "Built-in kernels with version",
     CL_DEVICE_BUILT_IN_KERNELS_WITH_VERSION, T_NAME_VERSION, 300,
     "cl_khr_extended_versioning", NULL},
    {"CL_DEVICE_INTEGER_DOT_PRODUCT_CAPABILITIES_KHR", "Integer dot product capabilities",
     CL_DEVICE_INTEGER_DOT_PRODUCT_CAPABILITIES_KHR, T_BITS, 0,
     "cl_khr_integer_dot_product", dot_product_flags},
    {"CL_DEVICE_TERMINATE_CAPABILITY_KHR", "Terminate capability",
     CL_DEVICE_TERMINATE_CAPABILITY_KHR, T_BITS, 0, "cl_khr_terminate_context",
     terminate_flags},
    P(CL_DEVICE_REFERENCE_COUNT, "Reference count", T_UINT),
    P(CL_DEVICE_EXTENSIONS, "Extensions", T_STR_LIST),
    {"CL_DEVICE_EXTENSIONS_WITH_VERSION", "Extensions with version",
     CL_DEVICE_EXTENSIONS_WITH_VERSION, T_NAME_VERSION, 300,
     "cl_khr_extended_versioning", NULL},
};

#undef P
#undef PV
#undef PX
#undef PF

size_t info_prop_count(info_target target) {
  return target == INFO_PLATFORM
             ? sizeof(platform_props) / sizeof(platform_props[0])
             : sizeof(device_props) / sizeof(device_props[0]);
}

const info_prop *info_prop_at(info_target target, size_t index) {
  if (index >= info_prop_count(target))
    return NULL;
  return target == INFO_PLATFORM ? &platform_props[index]
                                 : &device_props[index];
}

const info_prop *info_prop_find(info_target target, const char *name) {
  for (size_t i = 0; i < info_prop_count(target); i++) {
    const info_prop *p = info_prop_at(target, i);
    if (strcmp(p->name, name) == 0)
      return p;
  }
  return NULL;
}

unsigned info_parse_version(const char *text) {
  /* "OpenCL 3.0 PoCL ..." (platform and device), "OpenCL C 1.2 ..." */
  if (text == NULL || strncmp(text, "OpenCL ", 7) != 0)
    return 0;
  const char *p = text + 7;
  if (strncmp(p, "C ", 2) == 0)
    p += 2;
  if (!isdigit((unsigned char)p[0]) || p[1] != '.' ||
      !isdigit((unsigned char)p[2]))
    return 0;
  return (unsigned)(p[0] - '0') * 100u + (unsigned)(p[2] - '0') * 10u;
}

bool info_has_extension(const char *list, const char *name) {
  if (list == NULL || name == NULL || name[0] == '\0')
    return false;
  size_t len = strlen(name);
  /* Split on any whitespace: PoCL's list has runs of spaces. */
  for (const char *p = list; *p != '\0';) {
    while (*p != '\0' && isspace((unsigned char)*p))
      p++;
    const char *start = p;
    while (*p != '\0' && !isspace((unsigned char)*p))
      p++;
    if ((size_t)(p - start) == len && memcmp(start, name, len) == 0)
      return true;
  }
  return false;
}

static cl_int raw_query(info_target target, void *handle, unsigned param,
                        size_t size, void *value, size_t *size_ret) {
  if (target == INFO_PLATFORM)
    return clGetPlatformInfo((cl_platform_id)handle, (cl_platform_info)param,
                             size, value, size_ret);
  return clGetDeviceInfo((cl_device_id)handle, (cl_device_info)param, size,
                         value, size_ret);
}

/* The exact size a fixed-size type must have; 0 for variable-size types,
 * whose element size is returned in *elem instead. */
static size_t fixed_size(info_type type, size_t *elem) {
  *elem = 0;
  switch (type) {
  case T_UINT: case T_HEX_UINT: case T_BOOL: case T_ENUM: case T_VERSION:
    return sizeof(cl_uint);
  case T_ULONG: case T_MEM: case T_BITS:
    return sizeof(cl_ulong);
  case T_SIZE:
    return sizeof(size_t);
  case T_UUID:
    return 16;
  case T_LUID:
    return 8;
  case T_PCI_BUS:
    return sizeof(cl_device_pci_bus_info_khr);
  case T_SIZE_ARRAY:
    *elem = sizeof(size_t);
    return 0;
  case T_PARTITION:
    *elem = sizeof(cl_device_partition_property);
    return 0;
  case T_NAME_VERSION:
    *elem = sizeof(cl_name_version);
    return 0;
  case T_STR: case T_STR_LIST: case T_STR_SEMI:
    *elem = 1;
    return 0;
  }
  return 0;
}

static bool is_string(info_type type) {
  return type == T_STR || type == T_STR_LIST || type == T_STR_SEMI;
}

static void set_error(info_result *out, int cl_error, const char *detail) {
  free(out->data);
  out->data = NULL;
  out->size = 0;
  out->state = INFO_ERROR;
  out->cl_error = cl_error;
  snprintf(out->detail, sizeof(out->detail), "%s", detail ? detail : "");
}

void info_query(const info_subject *subject, const info_prop *prop,
                info_result *out) {
  memset(out, 0, sizeof(*out));
  bool by_version = prop->min_version > 0 && subject->version >= prop->min_version;
  bool by_ext = prop->extension != NULL &&
                info_has_extension(subject->extensions, prop->extension);
  bool ungated = prop->min_version == 0 && prop->extension == NULL;
  if (!ungated && !by_version && !by_ext) {
    out->state = INFO_UNSUPPORTED;
    if (prop->min_version > 0 && prop->extension != NULL)
      snprintf(out->detail, sizeof(out->detail), "needs OpenCL %u.%u or %s",
               prop->min_version / 100, prop->min_version / 10 % 10,
               prop->extension);
    else if (prop->min_version > 0)
      snprintf(out->detail, sizeof(out->detail), "needs OpenCL %u.%u",
               prop->min_version / 100, prop->min_version / 10 % 10);
    else
      snprintf(out->detail, sizeof(out->detail), "needs %s", prop->extension);
    return;
  }

  size_t size = 0;
  cl_int err = raw_query(subject->target, subject->handle, prop->param, 0,
                         NULL, &size);
  if (err != CL_SUCCESS) {
    set_error(out, err, NULL);
    return;
  }
  size_t elem;
  size_t want = fixed_size(prop->type, &elem);
  char msg[128];
  if (size > INFO_MAX_BYTES) {
    snprintf(msg, sizeof(msg), "claims %zu bytes, over the %zu-byte limit",
             size, INFO_MAX_BYTES);
    set_error(out, 0, msg);
    return;
  }
  /* Bitfields are 64-bit by the specification, yet NVIDIA's driver answers
   * CL_DEVICE_DEVICE_ENQUEUE_CAPABILITIES with 4 bytes: a 32-bit answer to
   * a bitfield query is widened rather than rejected. */
  bool widen = prop->type == T_BITS && size == sizeof(cl_uint);
  if (want != 0 && size != want && !widen) {
    snprintf(msg, sizeof(msg), "returned %zu bytes, expected %zu", size, want);
    set_error(out, 0, msg);
    return;
  }
  if (want == 0 && elem > 1 && size % elem != 0) {
    snprintf(msg, sizeof(msg), "returned %zu bytes, not a multiple of %zu",
             size, elem);
    set_error(out, 0, msg);
    return;
  }
  /* One spare zero byte so strings are always terminated, even when the
   * driver's are not; calloc so a short second answer leaves zeros. */
  out->data = calloc(size + 1, 1);
  if (out->data == NULL) {
    set_error(out, 0, "out of host memory");
    return;
  }
  if (size > 0) {
    size_t size2 = 0;
    err = raw_query(subject->target, subject->handle, prop->param, size,
                    out->data, &size2);
    if (err != CL_SUCCESS) {
      set_error(out, err, NULL);
      return;
    }
    /* A driver that answers differently the second time is believed only
     * as far as the buffer it was given. */
    if (size2 < size && (want != 0 || (elem > 1 && size2 % elem != 0))) {
      snprintf(msg, sizeof(msg), "returned %zu bytes, then %zu", size, size2);
      set_error(out, 0, msg);
      return;
    }
    if (size2 < size)
      size = size2;
  }
  if (widen) {
    cl_uint narrow;
    cl_ulong wide;
    memcpy(&narrow, out->data, sizeof(narrow));
    wide = narrow;
    unsigned char *d = realloc(out->data, sizeof(wide));
    if (d == NULL) {
      set_error(out, 0, "out of host memory");
      return;
    }
    memcpy(d, &wide, sizeof(wide));
    out->data = d;
    size = sizeof(wide);
  }
  out->size = size;
  if (is_string(prop->type)) {
    out->data[size] = '\0';
    info_sanitize_utf8((char *)out->data);
  }
  out->state = INFO_OK;
}

void info_result_free(info_result *result) {
  if (result == NULL)
    return;
  free(result->data);
  result->data = NULL;
  result->size = 0;
}

char *info_query_string(info_target target, void *handle, unsigned param) {
  info_subject subject = {target, handle, 0, NULL};
  info_prop prop = {"", "", param, T_STR, 0, NULL, NULL};
  info_result r;
  info_query(&subject, &prop, &r);
  if (r.state != INFO_OK) {
    info_result_free(&r);
    return NULL;
  }
  return (char *)r.data;
}

void info_sanitize_utf8(char *text) {
  unsigned char *s = (unsigned char *)text;
  while (*s != '\0') {
    unsigned char c = *s;
    size_t n;
    uint32_t cp;
    if (c < 0x80) {
      if (c < 0x20 && c != '\t' && c != '\n')
        *s = '?';
      s++;
      continue;
    }
    if (c >= 0xC2 && c <= 0xDF) { n = 1; cp = c & 0x1Fu; }
    else if (c >= 0xE0 && c <= 0xEF) { n = 2; cp = c & 0x0Fu; }
    else if (c >= 0xF0 && c <= 0xF4) { n = 3; cp = c & 0x07u; }
    else { *s++ = '?'; continue; }
    size_t i;
    for (i = 1; i <= n; i++) {
      if ((s[i] & 0xC0) != 0x80)
        break;
      cp = (cp << 6) | (s[i] & 0x3Fu);
    }
    /* Reject truncated sequences, overlong forms, surrogates and values
     * past U+10FFFF, exactly the cases a strict JSON parser rejects. */
    bool ok = i > n && !(n == 2 && cp < 0x800) && !(n == 3 && cp < 0x10000) &&
              !(cp >= 0xD800 && cp <= 0xDFFF) && cp <= 0x10FFFF;
    if (!ok) {
      *s++ = '?';
      continue;
    }
    s += n + 1;
  }
}
