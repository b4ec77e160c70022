/* libFuzzer target: the device selector parser and evaluator
 * (kiln_selection_create, kiln_device_select) on a fixed list of made-up
 * devices covering every profile, type and id kind. Whatever the text, kiln
 * must not crash, must leave *out NULL on failure with a message, report
 * syntax errors with a column, and explain every device on success. */
#include "fuzz_common.h"
#include "core/internal.h"

static kiln_device_list *list;

static struct kiln_device made_up(const char *name, const char *vendor,
                                  uint32_t vendor_id, kiln_device_type type,
                                  const char *platform, const char *stable_id,
                                  const char *extensions, uint64_t mem,
                                  uint32_t cu, size_t pi, size_t di) {
  struct kiln_device d;
  memset(&d, 0, sizeof d);
  d.info.name = name;
  d.info.vendor = vendor;
  d.info.vendor_id = vendor_id;
  d.info.type = type;
  d.info.platform_name = platform;
  d.info.stable_id = stable_id;
  d.info.extensions = extensions;
  d.info.driver_version = "1.0";
  d.info.device_version = "OpenCL 3.0";
  d.info.global_mem_bytes = mem;
  d.info.compute_units = cu;
  d.info.fp16 = strstr(extensions, "cl_khr_fp16") != NULL;
  d.info.fp64 = strstr(extensions, "cl_khr_fp64") != NULL;
  d.info.platform_index = pi;
  d.info.device_index = di;
  return d;
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc, (void)argv;
  /* The empty selector falls back to KILN_DEVICE: keep it out of the run. */
  unsetenv("KILN_DEVICE");
  const struct kiln_device devices[] = {
      made_up("NVIDIA H100 80GB HBM3", "NVIDIA Corporation", 0x10de,
              KILN_DEVICE_GPU, "NVIDIA CUDA",
              "uuid-0123456789abcdef0123456789abcdef",
              "cl_khr_fp64 cl_khr_fp16 cl_khr_device_uuid", 80ull << 30, 132,
              0, 0),
      made_up("gfx1100", "Advanced Micro Devices, Inc.", 0x1002,
              KILN_DEVICE_GPU, "AMD Accelerated Parallel Processing",
              "pci-0000:03:00.0", "cl_khr_fp64 cl_khr_pci_bus_info",
              24ull << 30, 48, 1, 0),
      made_up("Intel(R) Arc(TM) A770 Graphics", "Intel(R) Corporation",
              0x8086, KILN_DEVICE_GPU, "Intel(R) OpenCL Graphics",
              "hash-00112233aabbccdd", "cl_khr_fp16 cl_khr_subgroups",
              16ull << 30, 512, 2, 0),
      made_up("pthread-haswell-AMD EPYC", "AuthenticAMD", 0x1022,
              KILN_DEVICE_CPU, "Portable Computing Language",
              "hash-ffeeddccbbaa9988", "cl_khr_fp64", 6ull << 30, 2, 3, 0),
      made_up("llvmpipe (LLVM 15.0.6, 256 bits)", "Mesa", 0, KILN_DEVICE_CPU,
              "rusticl", "hash-0000000000000001", "", 2ull << 30, 8, 4, 0),
      made_up("Oclgrind Simulator", "Oclgrind", 0x42, KILN_DEVICE_ACCELERATOR,
              "Oclgrind", "hash-0000000000000002", "", 1ull << 30, 1, 5, 0),
  };
  if (kiln__device_list_synthetic(devices, sizeof devices / sizeof devices[0],
                                  &list) != KILN_OK)
    abort();
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size > 4096)
    return 0;
  char *text = malloc(size + 1);
  FUZZ_ASSERT(text != NULL);
  memcpy(text, data, size);
  text[size] = '\0';

  kiln_selection *sel = (kiln_selection *)&sel; /* must be overwritten */
  kiln_status s = kiln_selection_create(list, text, &sel);
  if (s == KILN_OK) {
    FUZZ_ASSERT(sel != NULL);
    size_t n = kiln_selection_get_count(sel);
    FUZZ_ASSERT(n <= kiln_device_list_get_count(list));
    for (size_t i = 0; i < n; i++)
      FUZZ_ASSERT(kiln_selection_get(sel, i) != NULL);
    FUZZ_ASSERT(kiln_selection_get(sel, n) == NULL);
    size_t taken = 0;
    for (size_t i = 0; i < kiln_device_list_get_count(list); i++) {
      bool t = false;
      const char *why = kiln_selection_get_explanation(sel, i, &t);
      FUZZ_ASSERT(why != NULL && why[0] != '\0');
      taken += t;
    }
    FUZZ_ASSERT(taken == n);
    FUZZ_ASSERT(kiln_selection_get_explanation(sel, 99, NULL) == NULL);
    FUZZ_ASSERT(kiln_selection_get_selector(sel) != NULL);
    kiln_selection_destroy(sel);
  } else {
    FUZZ_ASSERT(sel == NULL);
    FUZZ_ASSERT(kiln_last_error()[0] != '\0');
    FUZZ_ASSERT(s == KILN_ERR_SELECTOR_SYNTAX ||
                s == KILN_ERR_OUT_OF_HOST_MEMORY);
    if (s == KILN_ERR_SELECTOR_SYNTAX)
      FUZZ_ASSERT(strstr(kiln_last_error(), "column") != NULL);
  }

  const kiln_device *dev = (const kiln_device *)&dev;
  s = kiln_device_select(list, text, &dev);
  FUZZ_ASSERT(s == KILN_OK ? dev != NULL : dev == NULL);
  free(text);
  return 0;
}
