/* PoCL's CPU devices (pthread, basic): OpenCL on the host CPU, what CI runs.
 *
 * Facts behind this profile are measured in PLATFORM-FACTS.md: __local memory
 * is ordinary global memory, barriers are expensive, a*b+c is never fused
 * into FMA, and the default local size for a small range is one work-group
 * on one thread. PoCL's GPU drivers (pocl-cuda, level0) report a GPU type and
 * fall through to the vendor profiles, which fit them better. */
#include "kiln/kiln.h"
#include "backend.h"

static bool match(const struct kiln_backend_probe *probe) {
  return probe->type == KILN_DEVICE_CPU &&
         kiln__backend_is_pocl(probe->platform_name);
}

static const struct kiln_tuning tuning = {
    /* Few work-items, each owning a long contiguous chunk or a register
     * tile: GPU-style kernels run 100-400x slower here. */
    .family = KILN_FAMILY_CPU,
    /* PoCL runs a work-group as one task on one thread, looping over its
     * work-items with vectors of up to 16 floats; 256 items amortise the
     * per-group scheduling cost and stay a multiple of every vector width. */
    .elementwise_wg = 256,
    /* Reductions: each work-item reduces a long chunk in vector
     * accumulators; 16 items per group give the final pass little to do. */
    .reduce_wg = 16,
    /* GEMM register tile (gemm_mr x gemm_nr) and k blocking are left 0:
     * derived from the preferred float vector width, which tells AVX2 (8,
     * 6 x 16 tiles in 12 of 16 ymm registers) from AVX-512 (16, 8 x 32 in
     * 16 of 32 zmm). Measured on an AVX2 EPYC: 6 x 16 with KC 256 ran at
     * 95-120% of OpenBLAS sgemm; 4 x 16 at 60%. */
    /* Transpose: 128x128 tiles per work-item (16x16 blocks of 8x8
     * register transposes) ran at 0.64-0.79 of an OpenMP copy's GB/s at
     * 4096^2 (kiln-compare medians, AVX2 EPYC); 256x256 measured the same
     * within noise, 64x64 slightly below, and smaller matrices get more
     * work-items from 128. */
    .transpose_tile = 128,
};

const struct kiln_backend kiln_backend_pocl = {
    .name = "pocl",
    .description = "PoCL on the host CPU (CPU-style kernels, explicit fma)",
    .match = match,
    /* No flags: -cl-mad-enable and -cl-fast-relaxed-math do not make PoCL 3.1
     * fuse multiply-adds (the kernels call fma() instead), and relaxed math
     * would change results. */
    .build_options = "",
    /* PoCL's pthread device reports CL_KERNEL_PREFERRED_WORK_GROUP_SIZE_MULTIPLE
     * 8 on AVX2 and AVX-512 hosts: the work-group loop is vectorised 8 wide. */
    .wg_multiple = 8,
    /* PoCL serialises CL_PROGRAM_BINARIES once, on first query, with the
     * machine code of the kernels launched so far: saving right after the
     * build would make every later process recompile each kernel at its
     * first launch (measured: warm/cold start 0.12-0.15 instead of
     * 0.03-0.05 with a deferred save). Builds into a cold kernel cache
     * shared by several processes fail now and then with no error in the
     * log (tests/parallel_builds.sh). Its cl_khr_command_buffer replays
     * 100 small kernels in 1.2-2x the time of enqueueing them one by one
     * from kiln's prepared list (kiln bench --op sequence), so recorded
     * sequences use the list unless asked otherwise. */
    .quirks = KILN_QUIRK_LOCAL_MEM_EMULATED | KILN_QUIRK_NO_MAD_FUSION |
              KILN_QUIRK_SERIAL_DEFAULT_LOCAL_SIZE |
              KILN_QUIRK_LAZY_PROGRAM_BINARY |
              KILN_QUIRK_SPURIOUS_BUILD_FAILURE |
              KILN_QUIRK_SLOW_COMMAND_BUFFER,
    .tuning = &tuning,
};
