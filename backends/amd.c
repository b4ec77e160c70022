/* AMD GPUs through ROCm's OpenCL runtime (or the older AMDGPU-PRO one). */
#include "kiln/kiln.h"
#include "backend.h"

static bool match(const struct kiln_backend_probe *probe) {
  return probe->type == KILN_DEVICE_GPU &&
         kiln__backend_vendor(probe->vendor_id, probe->vendor) ==
             KILN_VENDOR_AMD;
}

static const struct kiln_tuning tuning = {
    .family = KILN_FAMILY_GPU,
    /* 256 = four GCN wavefronts (eight RDNA wave32s) per group, ROCm's
     * default work-group size. */
    .elementwise_wg = 256,
    .reduce_wg = 256,
    /* 16x16 tiles: 256 work-items, within the 256-item limit ROCm applies to
     * kernels compiled without an attribute. */
    .gemm_tile = 16,
    /* 4x4 outputs per work-item: 64x64 tiles of C reuse each __local value
     * four times from registers, within GCN's 256-VGPR budget at full
     * occupancy. */
    .gemm_block = 4,
    /* 16x16 = 256 items for the same reason; LDS bank conflicts are avoided
     * by padding in the kernel, not by a larger tile. */
    .transpose_tile = 16,
};

const struct kiln_backend kiln_backend_amd = {
    .name = "amd",
    .description = "AMD GPUs (ROCm OpenCL runtime)",
    .match = match,
    /* No -cl-mad-enable: ROCm's clang contracts a*b+c into FMA by default
     * (full rate since GCN), so it would only lower accuracy.
     * KILN_AMD_GPU names the vendor to kernels with vendor forms: the
     * matrix-unit GEMM (cl_kernels/gemm_mma.cl) takes its MFMA form, and
     * runtime/tune/space_mma.c selects it for contexts of this profile. */
    .build_options = "-DKILN_AMD_GPU=1",
    /* A GCN/CDNA wavefront is 64 work-items; RDNA's wave32 divides 64, so
     * 64 never leaves lanes idle on either. */
    .wg_multiple = 64,
    .quirks = 0,
    .tuning = &tuning,
};
