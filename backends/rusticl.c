/* Mesa's rusticl on llvmpipe, its software (CPU) device.
 *
 * rusticl on a real GPU (radeonsi, iris) reports a GPU type and falls through
 * to the AMD or Intel profile, which fit the hardware; only the llvmpipe
 * device is taken here. llvmpipe runs work-items as SIMD lanes, like a GPU
 * (it vectorises across work-items), so GPU-family kernels suit it, but its
 * profiling timer reports a resolution of 0 and its __local memory is plain
 * host memory. */
#include "kiln/kiln.h"
#include "backend.h"

static bool match(const struct kiln_backend_probe *probe) {
  return probe->type == KILN_DEVICE_CPU &&
         kiln__backend_is_rusticl(probe->platform_name);
}

static const struct kiln_tuning tuning = {
    /* llvmpipe maps work-items to SIMD lanes and work-groups to threads: the
     * GPU shape, not PoCL's one-thread-per-group loop. */
    .family = KILN_FAMILY_GPU,
};

const struct kiln_backend kiln_backend_rusticl = {
    .name = "rusticl",
    .description = "Mesa rusticl on llvmpipe (software CPU device)",
    .match = match,
    /* No flags: rusticl compiles through clang with the OpenCL defaults,
     * which already contract a*b+c. */
    .build_options = "",
    /* llvmpipe reports CL_DEVICE_PREFERRED_WORK_GROUP_SIZE_MULTIPLE 32. */
    .wg_multiple = 32,
    /* Mesa 22.3.6: clFinish skips commands that were already flushed, and
     * llvmpipe caps every loop at 65535 iterations (tests/test_quirks.c
     * shows both, so a driver that fixes them makes that test say so). */
    .quirks = KILN_QUIRK_LOCAL_MEM_EMULATED | KILN_QUIRK_COARSE_PROFILING |
              KILN_QUIRK_FINISH_SKIPS_FLUSHED | KILN_QUIRK_LOOP_LIMIT_65535,
    .tuning = &tuning,
};
