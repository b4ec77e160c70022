/* Enumeration next to broken drivers. tests/meson.build runs this binary once
 * per FAKE_ICD_MODE with OCL_ICD_VENDORS pointing at a directory holding the
 * fake driver (tests/fake_icd) and PoCL's .icd, because the ICD loader reads
 * its environment once per process. Each run executes the one test for its
 * mode (and a mode-independent one); without a known mode it fails.
 *
 * In every mode the healthy PoCL device must still be enumerated, and the
 * fake platform's failure must be in the problem list naming the call. */
#include "harness.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/internal.h"

#define FAKE_PLATFORM "kiln fake ICD"
#define FAKE_VENDOR_ID 0x1234u

static kiln_device_list *list;

static const char *mode(void) {
  const char *m = getenv("FAKE_ICD_MODE");
  return m != NULL ? m : "";
}

/* Run only in mode m; list is enumerated fresh for each test. */
static bool in_mode(const char *m) {
  if (strcmp(mode(), m) != 0)
    return false;
  assert_kiln_ok(kiln_device_list_create(&list));
  return true;
}

static int teardown(void **state) {
  (void)state;
  kiln_device_list_destroy(list);
  list = NULL;
  return 0;
}

/* PoCL is in the vendor directory when the build machine has it. */
static bool pocl_expected(void) {
  const char *dir = getenv("OCL_ICD_VENDORS");
  char path[4096];
  snprintf(path, sizeof path, "%s/pocl.icd", dir ? dir : "");
  return dir != NULL && access(path, R_OK) == 0;
}

static void assert_pocl_survives(void) {
  if (!pocl_expected())
    return;
  size_t found = 0;
  for (size_t i = 0; i < kiln_device_list_get_count(list); i++) {
    const kiln_device_info *in =
        kiln_device_get_info(kiln_device_list_get(list, i));
    if (kiln__backend_is_pocl(in->platform_name)) {
      found++;
      assert_true(strlen(in->name) > 0);
      assert_string_equal(in->profile, "pocl");
      assert_true(in->compute_units >= 1);
    }
  }
  if (found == 0)
    fail_msg("mode %s: the PoCL device was not enumerated", mode());
  /* And it can be selected. */
  const kiln_device *d = NULL;
  assert_kiln_ok(kiln_device_select(list, "pocl", &d));
}

/* The fake devices in the list (recognised by their vendor id). */
static size_t fake_devices(const kiln_device_info *out[8]) {
  size_t n = 0;
  for (size_t i = 0; i < kiln_device_list_get_count(list) && n < 8; i++) {
    const kiln_device_info *in =
        kiln_device_get_info(kiln_device_list_get(list, i));
    if (in->vendor_id == FAKE_VENDOR_ID)
      out[n++] = in;
  }
  return n;
}

static const kiln_device_problem *problem_with_call(const char *call,
                                                    size_t nth) {
  for (size_t i = 0; i < kiln_device_list_get_problem_count(list); i++) {
    const kiln_device_problem *p = kiln_device_list_get_problem(list, i);
    if (strcmp(p->call, call) == 0 && nth-- == 0)
      return p;
  }
  return NULL;
}

/* problem_with_call for a problem that must exist: fails the test when it
 * does not, and never returns NULL (cmocka's fail_msg jumps out of the test,
 * but compilers cannot know that, and would see a NULL dereference). */
static const kiln_device_problem *required_problem(const char *call,
                                                   size_t nth) {
  static const kiln_device_problem none = {0};
  const kiln_device_problem *p = problem_with_call(call, nth);
  if (p == NULL)
    fail_msg("no device problem #%zu names %s", nth, call);
  return p != NULL ? p : &none;
}

static void test_healthy(void **state) {
  (void)state;
  assert_true(in_mode("healthy"));
  assert_pocl_survives();
  const kiln_device_info *fake[8];
  assert_int_equal(fake_devices(fake), 3);
  for (size_t i = 0; i < 3; i++) {
    assert_string_equal(fake[i]->name, "Fake GPU");
    assert_string_equal(fake[i]->platform_name, FAKE_PLATFORM);
    assert_int_equal(fake[i]->type, KILN_DEVICE_GPU);
    assert_int_equal(fake[i]->device_index, i);
    assert_int_equal(fake[i]->cl_version, 120);
    assert_int_equal(fake[i]->platform_cl_version, 120);
    assert_int_equal(fake[i]->global_mem_bytes, 1u << 30);
    assert_int_equal(fake[i]->max_work_group_size, 256);
    assert_int_equal(fake[i]->max_work_item_sizes[2], 64);
    assert_int_equal(fake[i]->compute_units, 4);
    assert_true(fake[i]->fp64);
    assert_string_equal(fake[i]->profile, "generic");
    /* A 1.2 platform: the queue must be created the 1.2 way. */
    assert_true(fake[i]->quirks & KILN_QUIRK_LEGACY_QUEUE_CREATE);
  }
  /* Each stable-id path: uuid, PCI bus, hash. */
  assert_string_equal(fake[0]->stable_id,
                      "uuid-a0a1a2a3a4a5a6a7a8a9aaabacadaeaf");
  assert_true(fake[0]->fp16);
  assert_string_equal(fake[1]->stable_id, "pci-0000:42:00.0");
  assert_false(fake[1]->fp16); /* no cl_khr_fp16 despite a half config */
  assert_true(strncmp(fake[2]->stable_id, "hash-", 5) == 0);
  assert_string_equal(fake[0]->extensions,
                      "cl_khr_fp64 cl_khr_fp16 cl_khr_device_uuid");
  for (size_t i = 0; i < kiln_device_list_get_problem_count(list); i++)
    assert_string_not_equal(
        kiln_device_list_get_problem(list, i)->platform_name, FAKE_PLATFORM);
  /* The selector sees it as the GPU it claims to be. */
  kiln_selection *sel = NULL;
  assert_kiln_ok(kiln_selection_create(list, "gpu", &sel));
  assert_int_equal(kiln_selection_get_count(sel), 3);
  kiln_selection_destroy(sel);
  const kiln_device *d = NULL;
  assert_kiln_ok(kiln_device_select(list, "uuid:a0a1a2a3a4a5a6a7a8a9aaabacadaeaf",
                                    &d));
  assert_ptr_equal(kiln_device_get_info(d), fake[0]);
  /* It cannot create a context: a clean error, not a crash. */
  kiln_context *ctx = NULL;
  kiln_status st = kiln_context_create(d, NULL, &ctx);
  assert_int_not_equal(st, KILN_OK);
  assert_null(ctx);
  assert_true(strlen(kiln_last_error()) > 0);
}

static void test_platform_fail(void **state) {
  (void)state;
  assert_true(in_mode("platform-fail"));
  assert_pocl_survives();
  const kiln_device_info *fake[8];
  assert_int_equal(fake_devices(fake), 0);
  const kiln_device_problem *p = required_problem("clGetPlatformInfo", 0);
  assert_string_equal(p->platform_name, ""); /* the name query failed */
  assert_int_equal(p->device_index, SIZE_MAX);
  assert_int_equal(p->cl_error, CL_INVALID_VALUE);
  assert_non_null(strstr(p->message, "CL_PLATFORM_NAME"));
  assert_non_null(strstr(p->message, "CL_INVALID_VALUE"));
  assert_non_null(strstr(p->message, "skipped"));
}

static void test_device_fail(void **state) {
  (void)state;
  assert_true(in_mode("device-fail"));
  assert_pocl_survives();
  const kiln_device_info *fake[8];
  assert_int_equal(fake_devices(fake), 0);
  for (size_t i = 0; i < 3; i++) {
    const kiln_device_problem *p = required_problem("clGetDeviceInfo", i);
    assert_string_equal(p->platform_name, FAKE_PLATFORM);
    assert_int_equal(p->device_index, i);
    assert_int_equal(p->cl_error, CL_INVALID_VALUE);
    assert_non_null(strstr(p->message, "clGetDeviceInfo(CL_DEVICE_NAME)"));
    assert_non_null(strstr(p->message, FAKE_PLATFORM));
  }
  assert_null(problem_with_call("clGetDeviceInfo", 3));
}

static void test_no_devices(void **state) {
  (void)state;
  assert_true(in_mode("no-devices"));
  assert_pocl_survives();
  const kiln_device_info *fake[8];
  assert_int_equal(fake_devices(fake), 0);
  bool found = false;
  const kiln_device_problem *p;
  for (size_t i = 0; (p = problem_with_call("clGetDeviceIDs", i)) != NULL; i++) {
    if (strcmp(p->platform_name, FAKE_PLATFORM) != 0)
      continue;
    found = true;
    assert_int_equal(p->device_index, SIZE_MAX);
    assert_int_equal(p->cl_error, CL_DEVICE_NOT_FOUND);
    assert_non_null(strstr(p->message, "CL_DEVICE_NOT_FOUND"));
  }
  assert_true(found);
}

static void test_empty_strings(void **state) {
  (void)state;
  assert_true(in_mode("empty-strings"));
  assert_pocl_survives();
  const kiln_device_info *fake[8];
  assert_int_equal(fake_devices(fake), 3);
  for (size_t i = 0; i < 3; i++) {
    assert_string_equal(fake[i]->name, "");
    assert_string_equal(fake[i]->vendor, "");
    assert_string_equal(fake[i]->platform_name, "");
    assert_string_equal(fake[i]->extensions, "");
    assert_string_equal(fake[i]->device_version, "");
    assert_int_equal(fake[i]->cl_version, 0);
    assert_false(fake[i]->fp16);
    assert_true(strncmp(fake[i]->stable_id, "hash-", 5) == 0);
    for (size_t j = 0; j < i; j++)
      assert_string_not_equal(fake[i]->stable_id, fake[j]->stable_id);
  }
  /* Selection and its messages cope with empty names. */
  const kiln_device *d = NULL;
  assert_kiln_status(kiln_device_select(list, "gpu,name:zzz", &d),
                     KILN_ERR_NO_DEVICE);
  assert_last_error_contains("name '' does not contain 'zzz'");
}

static void test_long_strings(void **state) {
  (void)state;
  assert_true(in_mode("long-strings"));
  assert_pocl_survives();
  const kiln_device_info *fake[8];
  assert_int_equal(fake_devices(fake), 3);
  for (size_t i = 0; i < 3; i++) {
    assert_int_equal(strlen(fake[i]->name), 100 * 1024);
    assert_int_equal(strlen(fake[i]->platform_name), 100 * 1024);
    assert_true(strncmp(fake[i]->name, "abcdefghijklmnopqrstuvwxyzabc", 29) ==
                0);
    assert_string_equal(fake[i]->vendor, "Fake Vendor");
  }
  /* Messages stay bounded. */
  const kiln_device *d = NULL;
  assert_kiln_status(kiln_device_select(list, "cpu,gpu", &d),
                     KILN_ERR_NO_DEVICE);
  assert_true(strlen(kiln_last_error()) < 4096);
  kiln_selection *sel = NULL;
  assert_kiln_ok(kiln_selection_create(list, "name:xyz", &sel));
  for (size_t i = 0; i < kiln_device_list_get_count(list); i++)
    assert_true(strlen(kiln_selection_get_explanation(sel, i, NULL)) < 2048);
  kiln_selection_destroy(sel);
}

/* Drivers whose size queries lie still yield the right strings. */
static void check_sizes_mode(const char *m) {
  assert_true(in_mode(m));
  assert_pocl_survives();
  const kiln_device_info *fake[8];
  assert_int_equal(fake_devices(fake), 3);
  assert_string_equal(fake[0]->name, "Fake GPU");
  assert_string_equal(fake[0]->platform_name, FAKE_PLATFORM);
  assert_string_equal(fake[0]->stable_id,
                      "uuid-a0a1a2a3a4a5a6a7a8a9aaabacadaeaf");
  assert_string_equal(fake[1]->extensions, "cl_khr_fp64 cl_khr_pci_bus_info");
  assert_int_equal(fake[2]->cl_version, 120);
}

static void test_zero_sizes(void **state) {
  (void)state;
  check_sizes_mode("zero-sizes");
}

static void test_short_sizes(void **state) {
  (void)state;
  check_sizes_mode("short-sizes");
}

/* A vendor directory with an .icd naming a missing library and one naming a
 * library that is not a driver: the loader skips them, PoCL remains. */
static void test_broken_vendors(void **state) {
  (void)state;
  assert_true(in_mode("broken-vendors"));
  assert_pocl_survives();
  const kiln_device_info *fake[8];
  assert_int_equal(fake_devices(fake), 0);
}

/* No platform at all: an empty list and one problem, not a failure. */
static void test_no_platforms(void **state) {
  (void)state;
  assert_true(in_mode("no-platforms"));
  assert_int_equal(kiln_device_list_get_count(list), 0);
  assert_int_equal(kiln_device_list_get_problem_count(list), 1);
  const kiln_device_problem *p = kiln_device_list_get_problem(list, 0);
  assert_string_equal(p->call, "clGetPlatformIDs");
  assert_int_equal(p->cl_error, CL_PLATFORM_NOT_FOUND_KHR);
  assert_int_equal(p->platform_index, SIZE_MAX);
  assert_int_equal(p->device_index, SIZE_MAX);
  assert_non_null(strstr(p->message, "OCL_ICD_VENDORS"));
  const kiln_device *d = NULL;
  assert_kiln_status(kiln_device_select(list, NULL, &d), KILN_ERR_NO_DEVICE);
  assert_last_error_contains("no OpenCL device was found");
  assert_last_error_contains("CL_PLATFORM_NOT_FOUND_KHR");
  kiln_selection *sel = NULL;
  assert_kiln_ok(kiln_selection_create(list, "all", &sel));
  assert_int_equal(kiln_selection_get_count(sel), 0);
  kiln_selection_destroy(sel);
}

/* Whatever the mode, a second enumeration agrees with the first. */
static void test_stable_across_enumerations(void **state) {
  (void)state;
  assert_kiln_ok(kiln_device_list_create(&list));
  kiln_device_list *again = NULL;
  assert_kiln_ok(kiln_device_list_create(&again));
  assert_int_equal(kiln_device_list_get_count(list),
                   kiln_device_list_get_count(again));
  assert_int_equal(kiln_device_list_get_problem_count(list),
                   kiln_device_list_get_problem_count(again));
  for (size_t i = 0; i < kiln_device_list_get_count(list); i++)
    assert_string_equal(
        kiln_device_get_info(kiln_device_list_get(list, i))->stable_id,
        kiln_device_get_info(kiln_device_list_get(again, i))->stable_id);
  kiln_device_list_destroy(again);
}

int main(void) {
  /* Only the current mode's test is run: cmocka prints a skipped test as
   * "not ok ... # SKIP", which meson's TAP reader counts as a failure. */
  static const struct {
    const char *mode;
    struct CMUnitTest test;
  } all[] = {
      {"healthy", cmocka_unit_test_teardown(test_healthy, teardown)},
      {"platform-fail", cmocka_unit_test_teardown(test_platform_fail, teardown)},
      {"device-fail", cmocka_unit_test_teardown(test_device_fail, teardown)},
      {"no-devices", cmocka_unit_test_teardown(test_no_devices, teardown)},
      {"empty-strings", cmocka_unit_test_teardown(test_empty_strings, teardown)},
      {"long-strings", cmocka_unit_test_teardown(test_long_strings, teardown)},
      {"zero-sizes", cmocka_unit_test_teardown(test_zero_sizes, teardown)},
      {"short-sizes", cmocka_unit_test_teardown(test_short_sizes, teardown)},
      {"broken-vendors",
       cmocka_unit_test_teardown(test_broken_vendors, teardown)},
      {"no-platforms", cmocka_unit_test_teardown(test_no_platforms, teardown)},
  };
  struct CMUnitTest tests[2];
  size_t n = 0;
  for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
    if (strcmp(all[i].mode, mode()) == 0)
      tests[n++] = all[i].test;
  if (n == 0) {
    fprintf(stderr, "# FAKE_ICD_MODE='%s' is not a known mode; run this test "
                    "through meson, which sets it\n", mode());
    return 1;
  }
  tests[n++] = (struct CMUnitTest)cmocka_unit_test_teardown(
      test_stable_across_enumerations, teardown);
  return kiln_test_run("fake_icd", tests, n, false);
}
