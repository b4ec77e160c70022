/* libFuzzer target: the `kiln bench` peaks file
 * (<cache>/peaks-<stable id>.json, tools/bench/bench_peaks.c). The input becomes
 * the file and is loaded for a made-up device. Loading must not crash, and
 * may accept the file only with positive, finite figures, and a refused
 * file leaves the figures untouched (the caller then measures again). bench_peaks.c is included so that
 * its file-static loader can be called. */
#include "fuzz_common.h"

#include "../../tools/bench/bench_peaks.c"
/* bench_time, which the peaks measurement calls. */
#include "../../tools/bench/bench_clock.c"

static char peaks_path[512];
static kiln_device_info device;

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc, (void)argv;
  snprintf(peaks_path, sizeof peaks_path, "%s/peaks-fuzz.json", fuzz_dir());
  device.stable_id = "hash-0123456789abcdef";
  device.driver_version = "3.1";
  device.name = "fuzz device";
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size > (1u << 16))
    return 0;
  fuzz_write_file(peaks_path, data, size);
  struct bench_peaks peaks;
  memset(&peaks, 0, sizeof peaks);
  if (load(peaks_path, &device, &peaks)) {
    FUZZ_ASSERT(peaks.gbps > 0 && isfinite(peaks.gbps));
    FUZZ_ASSERT(peaks.gflops > 0 && isfinite(peaks.gflops));
  } else {
    FUZZ_ASSERT(peaks.gbps == 0 && peaks.gflops == 0);
  }
  return 0;
}
