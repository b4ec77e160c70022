/* The fallback profile: any OpenCL device no other profile claims (Intel's
 * CPU runtime, Oclgrind, ARM Mali, Qualcomm Adreno, ...). Its tuning row holds
 * the defaults that a 0 field in any other row stands for, so its values are
 * chosen to be safe everywhere rather than fast anywhere. */
#include "kiln/kiln.h"
#include "backend.h"

static bool match(const struct kiln_backend_probe *probe) {
  (void)probe;
  return true;
}

static const struct kiln_tuning tuning = {
    .family = KILN_FAMILY_GPU,
    /* 64 work-items: a multiple of every SIMD width in use (8 to 64) and
     * under the work-group limit of every GPU we know of (Mali: 256+). */
    .elementwise_wg = 64,
    .reduce_wg = 64,
    /* 8x8 = 64 work-items and 2 x 256 floats of __local per tile: fits
     * devices with the OpenCL minimum of 16 KiB local memory. */
    .gemm_tile = 8,
    /* 2x2 outputs per work-item: 16x16 tiles of C, a few registers, so
     * small GPUs keep their occupancy. */
    .gemm_block = 2,
    .transpose_tile = 8,
};

const struct kiln_backend kiln_backend_generic = {
    .name = "generic",
    .description = "any other OpenCL device (conservative defaults)",
    .match = match,
    /* No flags: only what every OpenCL 1.2 compiler accepts is safe, and
     * nothing is known to be needed. */
    .build_options = "",
    /* 64 rather than 1: it is a multiple of every known SIMD width (8, 16,
     * 32, 64), so padding a range to it never splits a hardware thread,
     * while 1 gives no guidance at all. */
    .wg_multiple = 64,
    .quirks = 0,
    .tuning = &tuning,
};
