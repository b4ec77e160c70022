/* Intel GPUs through the compute runtime (NEO). Intel's CPU OpenCL runtime is
 * a CPU device and is left to the generic profile: the GPU tuning here would
 * not fit it. */
#include "kiln/kiln.h"
#include "backend.h"

static bool match(const struct kiln_backend_probe *probe) {
  return probe->type == KILN_DEVICE_GPU &&
         kiln__backend_vendor(probe->vendor_id, probe->vendor) ==
             KILN_VENDOR_INTEL;
}

static const struct kiln_tuning tuning = {
    .family = KILN_FAMILY_GPU,
    /* 256 is the work-group limit of Gen9-Gen12 GPUs; Xe-HPG/HPC allow 1024
     * but gain nothing for streaming kernels. */
    .elementwise_wg = 256,
    .reduce_wg = 256,
    /* 8x8 register-friendly tiles: Intel GPUs have small shared local memory
     * per subslice (64 KiB) shared by many groups. */
    .gemm_tile = 8,
    /* 4x4 outputs per work-item give 32x32 tiles of C from 8x8 groups:
     * Intel's large register files (128 x 32 bytes per thread) hold them. */
    .gemm_block = 4,
    .transpose_tile = 16,
};

const struct kiln_backend kiln_backend_intel = {
    .name = "intel",
    .description = "Intel GPUs (Intel compute runtime, NEO)",
    .match = match,
    /* -cl-intel-greater-than-4GB-buffer-required would allow buffers over
     * 4 GiB but switches every kernel to slower stateless addressing; it
     * belongs to the few builds that need it, not all. KILN_INTEL_GPU
     * names the vendor to kernels with vendor forms: the matrix-unit GEMM
     * (cl_kernels/gemm_mma.cl) takes its DPAS form, and
     * runtime/tune/space_mma.c selects it for contexts of this profile. */
    .build_options = "-DKILN_INTEL_GPU=1",
    /* Kernels compile SIMD8, SIMD16 or SIMD32; 32 is a multiple of each, so
     * a group never ends in a partly filled hardware thread. */
    .wg_multiple = 32,
    .quirks = 0,
    .tuning = &tuning,
};
