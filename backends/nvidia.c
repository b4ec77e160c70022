/* NVIDIA GPUs through NVIDIA's own OpenCL driver (libnvidia-opencl). */
#include "kiln/kiln.h"
#include "backend.h"

static bool match(const struct kiln_backend_probe *probe) {
  return probe->type == KILN_DEVICE_GPU &&
         kiln__backend_vendor(probe->vendor_id, probe->vendor) ==
             KILN_VENDOR_NVIDIA;
}

static const struct kiln_tuning tuning = {
    .family = KILN_FAMILY_GPU,
    /* 256 = 8 warps: enough to hide latency per SM scheduler, and the block
     * size NVIDIA's occupancy calculator favours for simple kernels. */
    .elementwise_wg = 256,
    .reduce_wg = 256,
    /* 16x16 tiles of 256 work-items fit every NVIDIA GPU's 1024-item limit
     * and 48 KiB of shared memory with room for double buffering. */
    .gemm_tile = 16,
    /* 4x4 outputs per work-item (64x64 tiles of C): 16 accumulators keep
     * the FMA units busy between __local reads without spilling. */
    .gemm_block = 4,
    /* 32 = one warp per tile row: coalesced reads and writes of 128 bytes. */
    .transpose_tile = 32,
};

const struct kiln_backend kiln_backend_nvidia = {
    .name = "nvidia",
    .description = "NVIDIA GPUs (NVIDIA OpenCL driver)",
    .match = match,
    /* No flags: NVIDIA's compiler contracts a*b+c into FMA by default and
     * optimises at its highest level without -cl-nv-opt-level. */
    .build_options = "",
    /* A warp is 32 work-items; a group that is not a multiple of it leaves
     * lanes idle. */
    .wg_multiple = 32,
    .quirks = 0,
    .tuning = &tuning,
};
