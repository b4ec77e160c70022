/* Backend profiles: matching made-up devices of every vendor, lookup by
 * name, and that every profile is complete. No device is needed. */
#include "harness.h"

#include <stdlib.h>
#include <string.h>

#include "core/internal.h"

static const char *match_name(uint32_t vendor_id, const char *vendor,
                              const char *platform, const char *device,
                              kiln_device_type type) {
  struct kiln_backend_probe probe = {
      .vendor_id = vendor_id,
      .vendor = vendor,
      .platform_name = platform,
      .device_name = device,
      .type = (int)type,
  };
  const struct kiln_backend *b = kiln__backend_match(&probe);
  assert_non_null(b);
  return b->name;
}

static void test_vendor_gpus(void **state) {
  (void)state;
  assert_string_equal(match_name(0x10de, "NVIDIA Corporation", "NVIDIA CUDA",
                                 "NVIDIA H100 80GB HBM3", KILN_DEVICE_GPU),
                      "nvidia");
  assert_string_equal(
      match_name(0x1002, "Advanced Micro Devices, Inc.",
                 "AMD Accelerated Parallel Processing", "gfx90a:sramecc+:xnack-",
                 KILN_DEVICE_GPU),
      "amd");
  assert_string_equal(match_name(0x8086, "Intel(R) Corporation",
                                 "Intel(R) OpenCL Graphics",
                                 "Intel(R) Arc(TM) A770 Graphics",
                                 KILN_DEVICE_GPU),
                      "intel");
}

/* A vendor string that names nobody leaves the decision to the PCI id. */
static void test_vendor_id_fallback(void **state) {
  (void)state;
  assert_string_equal(match_name(0x10de, "", "x", "x", KILN_DEVICE_GPU),
                      "nvidia");
  assert_string_equal(match_name(0x1002, NULL, "x", "x", KILN_DEVICE_GPU),
                      "amd");
  assert_string_equal(match_name(0x8086, "unknown", "x", "x", KILN_DEVICE_GPU),
                      "intel");
  assert_string_equal(match_name(0x1234, "unknown", "x", "x", KILN_DEVICE_GPU),
                      "generic");
}

/* PoCL reports the host CPU's vendor (and PoCL 3.1 Intel's id even on AMD):
 * it must still get the pocl profile, not Intel's or AMD's GPU tuning. */
static void test_pocl_before_cpu_vendors(void **state) {
  (void)state;
  assert_string_equal(match_name(0x8086, "GenuineIntel",
                                 "Portable Computing Language",
                                 "pthread-cascadelake-Intel Xeon",
                                 KILN_DEVICE_CPU),
                      "pocl");
  assert_string_equal(match_name(0x8086, "AuthenticAMD",
                                 "Portable Computing Language",
                                 "pthread-haswell-AMD EPYC", KILN_DEVICE_CPU),
                      "pocl");
  assert_string_equal(match_name(0x1022, "AuthenticAMD",
                                 "Portable Computing Language", "cpu",
                                 KILN_DEVICE_CPU),
                      "pocl");
  /* PoCL's CUDA driver is a GPU: the vendor profile fits it better. */
  assert_string_equal(match_name(0x10de, "NVIDIA Corporation",
                                 "Portable Computing Language",
                                 "NVIDIA GeForce RTX 3080", KILN_DEVICE_GPU),
                      "nvidia");
}

static void test_rusticl_and_others(void **state) {
  (void)state;
  assert_string_equal(match_name(0, "Mesa/X.org", "rusticl",
                                 "llvmpipe (LLVM 15.0.6, 256 bits)",
                                 KILN_DEVICE_CPU),
                      "rusticl");
  /* rusticl on radeonsi is an AMD GPU first. */
  assert_string_equal(match_name(0x1002, "AMD", "rusticl",
                                 "AMD Radeon RX 6800 (radeonsi, navi21)",
                                 KILN_DEVICE_GPU),
                      "amd");
  /* Intel's CPU runtime is not an Intel GPU. */
  assert_string_equal(match_name(0x8086, "Intel(R) Corporation",
                                 "Intel(R) OpenCL", "Intel(R) Xeon(R)",
                                 KILN_DEVICE_CPU),
                      "generic");
  assert_string_equal(match_name(0x1022, "AuthenticAMD", "Oclgrind",
                                 "Oclgrind Simulator", KILN_DEVICE_CPU),
                      "generic");
  assert_string_equal(match_name(0x13b5, "ARM", "ARM Platform", "Mali-G78",
                                 KILN_DEVICE_GPU),
                      "generic");
  /* Nothing known at all, or no probe. */
  assert_string_equal(match_name(0, NULL, NULL, NULL, KILN_DEVICE_OTHER),
                      "generic");
  assert_string_equal(kiln__backend_match(NULL)->name, "generic");
}

static void test_vendor_classification(void **state) {
  (void)state;
  assert_int_equal(kiln__backend_vendor(0, "NVIDIA Corporation"),
                   KILN_VENDOR_NVIDIA);
  assert_int_equal(kiln__backend_vendor(0x8086, "AuthenticAMD"),
                   KILN_VENDOR_AMD);
  assert_int_equal(kiln__backend_vendor(0, "GenuineIntel"), KILN_VENDOR_INTEL);
  assert_int_equal(kiln__backend_vendor(0x1022, NULL), KILN_VENDOR_AMD);
  assert_int_equal(kiln__backend_vendor(0, "Mesa/X.org"), KILN_VENDOR_UNKNOWN);
  assert_true(kiln__backend_is_pocl("Portable Computing Language"));
  assert_true(kiln__backend_is_rusticl("rusticl"));
  assert_false(kiln__backend_is_pocl("rusticl"));
  assert_false(kiln__backend_is_rusticl(NULL));
  assert_true(kiln__contains_nocase("pthread-haswell-AMD EPYC", "epyc"));
  assert_false(kiln__contains_nocase("abc", "abcd"));
  assert_false(kiln__contains_nocase(NULL, "a"));
}

static void test_find(void **state) {
  (void)state;
  static const char *const names[] = {"nvidia", "amd",     "intel",
                                      "pocl",   "rusticl", "generic"};
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
    const struct kiln_backend *b = kiln__backend_find(names[i]);
    assert_non_null(b);
    assert_string_equal(b->name, names[i]);
  }
  assert_ptr_equal(kiln__backend_find("NVIDIA"), kiln__backend_find("nvidia"));
  assert_ptr_equal(kiln__backend_find("PoCL"), kiln__backend_find("pocl"));
  assert_null(kiln__backend_find("cuda"));
  assert_null(kiln__backend_find(""));
  assert_null(kiln__backend_find("nvidia "));
  assert_null(kiln__backend_find(NULL));
}

/* Every profile is complete; generic is last and holds non-zero defaults. */
static void test_profiles_complete(void **state) {
  (void)state;
  assert_true(kiln__backend_count >= 6);
  const struct kiln_backend *generic = kiln__backends[kiln__backend_count - 1];
  assert_string_equal(generic->name, "generic");
  const unsigned known_quirks =
      KILN_QUIRK_LOCAL_MEM_EMULATED | KILN_QUIRK_NO_MAD_FUSION |
      KILN_QUIRK_SERIAL_DEFAULT_LOCAL_SIZE | KILN_QUIRK_LEGACY_QUEUE_CREATE |
      KILN_QUIRK_COARSE_PROFILING | KILN_QUIRK_LAZY_PROGRAM_BINARY |
      KILN_QUIRK_FINISH_SKIPS_FLUSHED | KILN_QUIRK_LOOP_LIMIT_65535 |
      KILN_QUIRK_SPURIOUS_BUILD_FAILURE | KILN_QUIRK_SLOW_COMMAND_BUFFER;
  for (size_t i = 0; i < kiln__backend_count; i++) {
    const struct kiln_backend *b = kiln__backends[i];
    assert_non_null(b->name);
    assert_true(strlen(b->name) > 0);
    assert_non_null(b->description);
    assert_true(strlen(b->description) > 0);
    assert_non_null(b->match);
    assert_non_null(b->build_options);
    assert_non_null(b->tuning);
    /* A power of two, so that it divides every larger multiple. */
    assert_true(b->wg_multiple > 0);
    assert_int_equal(b->wg_multiple & (b->wg_multiple - 1), 0);
    assert_int_equal(b->quirks & ~known_quirks, 0);
    for (unsigned bit = 1; bit != 0; bit <<= 1)
      if (b->quirks & bit)
        assert_non_null(kiln_quirk_name(bit));
    for (size_t j = 0; j < i; j++)
      assert_string_not_equal(kiln__backends[j]->name, b->name);
    assert_ptr_equal(kiln__backend_find(b->name), b);
  }
  const struct kiln_tuning *d = generic->tuning;
  assert_int_equal(d->family, KILN_FAMILY_GPU);
  assert_true(d->elementwise_wg > 0);
  assert_true(d->reduce_wg > 0);
  assert_true(d->gemm_tile > 0);
  assert_true(d->transpose_tile > 0);
}

static void test_profile_facts(void **state) {
  (void)state;
  const struct kiln_backend *pocl = kiln__backend_find("pocl");
  assert_int_equal(pocl->quirks, KILN_QUIRK_LOCAL_MEM_EMULATED |
                                     KILN_QUIRK_NO_MAD_FUSION |
                                     KILN_QUIRK_SERIAL_DEFAULT_LOCAL_SIZE |
                                     KILN_QUIRK_LAZY_PROGRAM_BINARY |
                                     KILN_QUIRK_SPURIOUS_BUILD_FAILURE |
                                     KILN_QUIRK_SLOW_COMMAND_BUFFER);
  assert_int_equal(pocl->tuning->family, KILN_FAMILY_CPU);
  assert_int_equal(kiln__backend_find("nvidia")->wg_multiple, 32);
  assert_int_equal(kiln__backend_find("amd")->wg_multiple, 64);
  assert_int_equal(kiln__backend_find("nvidia")->tuning->family,
                   KILN_FAMILY_GPU);
  assert_int_equal(kiln__backend_find("amd")->tuning->family, KILN_FAMILY_GPU);
  assert_int_equal(kiln__backend_find("intel")->tuning->family,
                   KILN_FAMILY_GPU);
  assert_true(kiln__backend_find("rusticl")->quirks &
              KILN_QUIRK_COARSE_PROFILING);
}

/* The profile each real device got is the one its own facts select. */
static void test_real_devices(void **state) {
  (void)state;
  FOR_EACH_TEST_DEVICE(i) {
    const kiln_device *d = kiln_test_device(i);
    const kiln_device_info *in = kiln_device_get_info(d);
    assert_string_equal(in->profile,
                        match_name(in->vendor_id, in->vendor,
                                   in->platform_name, in->name, in->type));
    assert_ptr_equal(d->backend, kiln__backend_find(in->profile));
    assert_int_equal(in->quirks & d->backend->quirks, d->backend->quirks);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_vendor_gpus),
      cmocka_unit_test(test_vendor_id_fallback),
      cmocka_unit_test(test_pocl_before_cpu_vendors),
      cmocka_unit_test(test_rusticl_and_others),
      cmocka_unit_test(test_vendor_classification),
      cmocka_unit_test(test_find),
      cmocka_unit_test(test_profiles_complete),
      cmocka_unit_test(test_profile_facts),
      cmocka_unit_test(test_real_devices),
  };
  return KILN_TEST_RUN("backend", tests, false);
}
