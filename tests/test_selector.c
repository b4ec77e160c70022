/* The selector grammar: every term on a made-up list of devices (an NVIDIA,
 * AMD and Intel GPU, PoCL, rusticl and an accelerator), combinations, the
 * '|' fallback, error columns, explanations, KILN_DEVICE and the default
 * rule. */
#include "harness.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/internal.h"

static kiln_device_list *list; /* the made-up devices below */

enum { NV, AMD, ARC, POCL, RUSTICL, FPGA, COUNT };

static struct kiln_device make(size_t p, size_t d, kiln_device_type type,
                               const char *name, const char *vendor,
                               uint32_t vendor_id, const char *platform,
                               const char *id, uint64_t mem_gib, uint32_t cu) {
  struct kiln_device dev = {0};
  dev.info.name = name;
  dev.info.vendor = vendor;
  dev.info.vendor_id = vendor_id;
  dev.info.platform_name = platform;
  dev.info.stable_id = id;
  dev.info.type = type;
  dev.info.global_mem_bytes = mem_gib << 30;
  dev.info.compute_units = cu;
  dev.info.platform_index = p;
  dev.info.device_index = d;
  return dev;
}

static int setup(void **state) {
  (void)state;
  struct kiln_device devs[COUNT];
  devs[NV] = make(0, 0, KILN_DEVICE_GPU, "NVIDIA H100 80GB HBM3",
                  "NVIDIA Corporation", 0x10de, "NVIDIA CUDA",
                  "uuid-00112233445566778899aabbccddeeff", 80, 132);
  devs[NV].info.fp16 = devs[NV].info.fp64 = devs[NV].info.subgroups = true;
  devs[AMD] = make(1, 0, KILN_DEVICE_GPU, "gfx90a:sramecc+:xnack-",
                   "Advanced Micro Devices, Inc.", 0x1002,
                   "AMD Accelerated Parallel Processing", "pci-0000:c1:00.0",
                   64, 104);
  devs[AMD].info.fp16 = devs[AMD].info.fp64 = true;
  devs[ARC] = make(2, 0, KILN_DEVICE_GPU, "Intel(R) Arc(TM) A770 Graphics",
                   "Intel(R) Corporation", 0x8086, "Intel(R) OpenCL Graphics",
                   "hash-0123456789abcdef", 16, 512);
  devs[ARC].info.fp16 = devs[ARC].info.subgroups = true;
  devs[POCL] = make(3, 0, KILN_DEVICE_CPU, "pthread-cascadelake-Intel Xeon",
                    "GenuineIntel", 0x8086, "Portable Computing Language",
                    "hash-fedcba9876543210", 8, 2);
  devs[POCL].info.fp64 = true;
  devs[RUSTICL] = make(4, 0, KILN_DEVICE_CPU, "llvmpipe (LLVM 15.0.6, 256 bits)",
                       "Mesa/X.org", 0, "rusticl", "hash-1111111111111111", 2,
                       8);
  devs[FPGA] = make(5, 1, KILN_DEVICE_ACCELERATOR, "xilinx_u250", "Xilinx",
                    0x10ee, "Xilinx", "hash-2222222222222222", 4, 1);
  return kiln__device_list_synthetic(devs, COUNT, &list) == KILN_OK ? 0 : -1;
}

static int teardown(void **state) {
  (void)state;
  kiln_device_list_destroy(list);
  list = NULL;
  return 0;
}

/* The taken devices as "0,3" (list indices), from sel. */
static void taken_set(const kiln_selection *sel, char *out, size_t cap) {
  out[0] = '\0';
  size_t used = 0;
  for (size_t i = 0; i < kiln_selection_get_count(sel); i++)
    for (size_t j = 0; j < kiln_device_list_get_count(list); j++)
      if (kiln_selection_get(sel, i) == kiln_device_list_get(list, j))
        used += (size_t)snprintf(out + used, cap - used, "%s%zu",
                                 i ? "," : "", j);
}

#define expect(selector, want) expect_at(selector, want, __LINE__)

static void expect_at(const char *selector, const char *want, int line) {
  kiln_selection *sel = NULL;
  kiln_status st = kiln_selection_create(list, selector, &sel);
  if (st != KILN_OK)
    fail_msg("line %d: selector \"%s\" failed: %s", line, selector,
             kiln_last_error());
  char got[128];
  taken_set(sel, got, sizeof got);
  if (strcmp(got, want) != 0)
    fail_msg("line %d: selector \"%s\" took {%s}, expected {%s}", line,
             selector, got, want);
  /* Every device has a reason that agrees with the taken flag. */
  for (size_t i = 0; i < kiln_device_list_get_count(list); i++) {
    bool taken = false;
    const char *why = kiln_selection_get_explanation(sel, i, &taken);
    assert_non_null(why);
    assert_true(strncmp(why, taken ? "taken: " : "refused: ",
                        taken ? 7 : 9) == 0);
  }
  kiln_selection_destroy(sel);
}

static void test_type_and_vendor_terms(void **state) {
  (void)state;
  expect("gpu", "0,1,2");
  expect("cpu", "3,4");
  expect("accelerator", "5");
  expect("nvidia", "0");
  expect("amd", "1");
  /* PoCL on an Intel CPU is Intel hardware. */
  expect("intel", "2,3");
  expect("pocl", "3");
  expect("rusticl", "4");
  expect("all", "0,1,2,3,4,5");
  expect("GPU", "0,1,2");
  expect("PoCL", "3");
  expect("NVIDIA", "0");
}

static void test_index_name_id_terms(void **state) {
  (void)state;
  expect("3:0", "3");
  expect("5:1", "5");
  expect("5:0", "");
  expect("0:1", "");
  expect("99:99", "");
  expect("name:arc", "2");
  expect("name:ARC(tm)", "2");
  expect("name: Arc(TM) A770 ", "2");
  expect("name:pthread", "3");
  expect("name:no such device", "");
  expect("id:hash-0123456789abcdef", "2");
  expect("id:HASH-0123456789ABCDEF", "2");
  expect("id:pci-0000:c1:00.0", "1");
  expect("id:hash-0000000000000000", "");
  expect("uuid:00112233445566778899aabbccddeeff", "0");
  expect("uuid:00112233-4455-6677-8899-AABBCCDDEEFF", "0");
  expect("uuid:ffffffffffffffffffffffffffffffff", "");
  expect("profile:nvidia", "0");
  expect("profile:AMD", "1");
  expect("profile:intel", "2");
  expect("profile:pocl", "3");
  expect("profile:rusticl", "4");
  expect("profile:generic", "5");
}

static void test_capability_terms(void **state) {
  (void)state;
  expect("fp16", "0,1,2");
  expect("fp64", "0,1,3");
  expect("subgroups", "0,2");
  expect("mem>=16G", "0,1,2");
  expect("mem>=16g", "0,1,2");
  expect("mem>=16GiB", "0,1,2");
  expect("mem>=16GB", "0,1,2");
  expect("mem>=17179869184", "0,1,2");
  expect("mem>=17179869185", "0,1");
  expect("mem>=2048M", "0,1,2,3,4,5");
  expect("mem>=1T", "");
  expect("mem>=0", "0,1,2,3,4,5");
  expect("mem >= 8G", "0,1,2,3");
  expect("cu>=100", "0,1,2");
  expect("cu>=8", "0,1,2,4");
  expect("cu>=1000", "");
}

static void test_combinations(void **state) {
  (void)state;
  expect("gpu,fp64", "0,1");
  expect("  gpu  ,  fp64  ", "0,1");
  expect("cpu,intel", "3");
  expect("gpu,intel", "2");
  expect("gpu,fp16,subgroups,mem>=32G", "0");
  expect("name:Intel,cpu", "3");
  /* '|': the first alternative that takes any device wins, whole. */
  expect("nvidia|amd", "0");
  expect("amd|gpu", "1");
  expect("name:zzz|cpu", "3,4");
  expect("gpu,name:zzz|pocl|cpu", "3");
  expect("name:zzz|uuid:ffffffffffffffffffffffffffffffff", "");
  expect("nvidia,cpu | rusticl", "4");
  expect("all|nvidia", "0,1,2,3,4,5");
}

#define expect_syntax(selector, text) expect_syntax_at(selector, text, __LINE__)

static void expect_syntax_at(const char *selector, const char *text, int line) {
  kiln_selection *sel = (kiln_selection *)1;
  kiln_status st = kiln_selection_create(list, selector, &sel);
  if (st != KILN_ERR_SELECTOR_SYNTAX)
    fail_msg("line %d: selector \"%s\" returned %s, expected a syntax error",
             line, selector, kiln_status_name(st));
  assert_null(sel);
  if (strstr(kiln_last_error(), text) == NULL)
    fail_msg("line %d: selector \"%s\": error \"%s\" lacks \"%s\"", line,
             selector, kiln_last_error(), text);
  /* The message quotes the selector itself. */
  char quoted[256];
  snprintf(quoted, sizeof quoted, "selector \"%s\": ", selector);
  assert_non_null(strstr(kiln_last_error(), quoted));
}

static void test_syntax_errors(void **state) {
  (void)state;
  kiln_selection *sel = NULL;
  assert_kiln_status(kiln_selection_create(list, "gpu,,x", &sel),
                     KILN_ERR_SELECTOR_SYNTAX);
  assert_string_equal(kiln_last_error(),
                      "selector \"gpu,,x\": expected a term at column 5");
  assert_int_equal(kiln_last_status(), KILN_ERR_SELECTOR_SYNTAX);
  expect_syntax("gpu,", "expected a term at column 5");
  expect_syntax("gpu|", "expected a term at column 5");
  expect_syntax("|gpu", "expected a term at column 1");
  expect_syntax("gpu||cpu", "expected a term at column 5");
  expect_syntax("gpu, ,cpu", "expected a term at column 6");
  expect_syntax("gpux", "unknown term 'gpux' at column");
  expect_syntax("gpux", "column 1");
  expect_syntax("gpu, fp64,  bogus", "unknown term 'bogus'");
  expect_syntax("gpu, fp64,  bogus", "column 13");
  expect_syntax("gpu x", "expected ',', '|' or the end after a term at column 5");
  expect_syntax("gpu;cpu", "at column 4");
  expect_syntax("mem>=", "expected a size");
  expect_syntax("mem>=", "column 6");
  expect_syntax("mem>=abc", "after 'mem>=' at column 6");
  expect_syntax("mem>8G", "expected '>=' after 'mem' at column 4");
  expect_syntax("mem>=8X", "at column 7");
  expect_syntax("mem>=99999999999999T", "size too large");
  expect_syntax("mem>=99999999999999999999999", "at column 6");
  expect_syntax("cu>=", "expected a number after 'cu>=' at column 5");
  expect_syntax("cu>=4294967296", "too large");
  expect_syntax("1:", "expected a device index after 'P:' at column 3");
  expect_syntax("1x", "expected ':' after the platform index at column 2");
  expect_syntax("1", "at column 2");
  expect_syntax("99999999999999999999999:0", "platform index");
  expect_syntax("name:", "expected text after ':' at column 6");
  expect_syntax("name:   |gpu", "expected text after ':' at column 9");
  expect_syntax("name", "expected ':' after the keyword at column 5");
  expect_syntax("uuid:123", "32 hexadecimal digits");
  expect_syntax("uuid:0011223344556677889900aabbccddeeff", "32 hexadecimal");
  expect_syntax("uuid:zz112233445566778899aabbccddeeff", "column 6");
  expect_syntax("profile:cuda", "unknown profile 'cuda'");
  expect_syntax("profile:cuda", "column 9");
  expect_syntax("gpu|>", "expected a term at column 5");
}

static const char *explain(kiln_selection *sel, size_t i, bool *taken) {
  const char *why = kiln_selection_get_explanation(sel, i, taken);
  assert_non_null(why);
  return why;
}

static void test_explain(void **state) {
  (void)state;
  kiln_selection *sel = NULL;
  bool taken = true;
  assert_kiln_ok(kiln_selection_create(list, "gpu", &sel));
  assert_string_equal(explain(sel, NV, &taken), "taken: matches gpu");
  assert_true(taken);
  assert_string_equal(explain(sel, POCL, &taken),
                      "refused: type is CPU, not GPU (term 'gpu', column 1)");
  assert_false(taken);
  assert_string_equal(
      explain(sel, FPGA, NULL),
      "refused: type is accelerator, not GPU (term 'gpu', column 1)");
  assert_null(kiln_selection_get_explanation(sel, COUNT, &taken));
  assert_null(kiln_selection_get_explanation(sel, SIZE_MAX, NULL));
  assert_string_equal(kiln_selection_get_selector(sel), "gpu");
  kiln_selection_destroy(sel);

  assert_kiln_ok(kiln_selection_create(list, "gpu,pocl", &sel));
  assert_string_equal(
      explain(sel, NV, &taken),
      "refused: platform is 'NVIDIA CUDA', not PoCL (term 'pocl', column 5)");
  assert_string_equal(
      explain(sel, POCL, &taken),
      "refused: type is CPU, not GPU (term 'gpu', column 1)");
  kiln_selection_destroy(sel);

  assert_kiln_ok(kiln_selection_create(list, "cpu, pocl", &sel));
  assert_string_equal(explain(sel, POCL, &taken), "taken: matches cpu, pocl");
  assert_true(taken);
  kiln_selection_destroy(sel);

  /* Reasons name what the device has and what the term wanted. */
  assert_kiln_ok(kiln_selection_create(
      list, "nvidia,mem>=100G,cu>=200,fp16,name:H200", &sel));
  assert_non_null(strstr(explain(sel, AMD, NULL),
                         "vendor is 'Advanced Micro Devices, Inc.' (id "
                         "0x1002), not NVIDIA (term 'nvidia', column 1)"));
  assert_non_null(strstr(explain(sel, NV, NULL),
                         "global memory 80 GiB < 100 GiB (term 'mem>=100G', "
                         "column 8)"));
  kiln_selection_destroy(sel);
  assert_kiln_ok(kiln_selection_create(list, "cu>=200", &sel));
  assert_non_null(strstr(explain(sel, NV, NULL), "132 compute units < 200"));
  kiln_selection_destroy(sel);
  assert_kiln_ok(kiln_selection_create(list, "fp64", &sel));
  assert_non_null(strstr(explain(sel, ARC, NULL), "no fp64"));
  kiln_selection_destroy(sel);
  assert_kiln_ok(kiln_selection_create(list, "uuid:00112233445566778899aabbccddeeff", &sel));
  assert_non_null(strstr(explain(sel, POCL, NULL), "no UUID"));
  kiln_selection_destroy(sel);
  assert_kiln_ok(kiln_selection_create(list, "1:0", &sel));
  assert_non_null(strstr(explain(sel, NV, NULL), "is device 0:0, not 1:0"));
  kiln_selection_destroy(sel);
  assert_kiln_ok(kiln_selection_create(list, "profile:amd", &sel));
  assert_non_null(strstr(explain(sel, NV, NULL), "profile is nvidia, not amd"));
  kiln_selection_destroy(sel);

  /* A later alternative decided: the refusal says so. */
  assert_kiln_ok(kiln_selection_create(list, "name:zzz|cpu", &sel));
  const char *why = explain(sel, NV, &taken);
  assert_false(taken);
  assert_non_null(strstr(why, "type is GPU, not CPU (term 'cpu', column 10)"));
  assert_non_null(strstr(why, "alternative 2"));
  assert_string_equal(explain(sel, RUSTICL, &taken), "taken: matches cpu");
  kiln_selection_destroy(sel);

  /* No alternative took anything: every alternative's reason is given. */
  assert_kiln_ok(kiln_selection_create(list, "gpu,name:zzz|rusticl", &sel));
  assert_int_equal(kiln_selection_get_count(sel), 1);
  kiln_selection_destroy(sel);
  assert_kiln_ok(kiln_selection_create(list, "gpu,name:zzz|accelerator,fp64",
                                       &sel));
  assert_int_equal(kiln_selection_get_count(sel), 0);
  why = explain(sel, NV, NULL);
  assert_non_null(strstr(why, "name 'NVIDIA H100 80GB HBM3' does not contain "
                              "'zzz'"));
  assert_non_null(strstr(why, " | type is GPU, not accelerator"));
  assert_non_null(strstr(explain(sel, FPGA, NULL), "no fp64"));
  kiln_selection_destroy(sel);
}

static void test_kiln_device_env(void **state) {
  (void)state;
  kiln_selection *sel = NULL;
  char got[128];
  assert_int_equal(setenv("KILN_DEVICE", "amd", 1), 0);
  assert_kiln_ok(kiln_selection_create(list, NULL, &sel));
  taken_set(sel, got, sizeof got);
  assert_string_equal(got, "1");
  assert_string_equal(kiln_selection_get_selector(sel), "amd");
  kiln_selection_destroy(sel);
  assert_kiln_ok(kiln_selection_create(list, "", &sel));
  taken_set(sel, got, sizeof got);
  assert_string_equal(got, "1");
  kiln_selection_destroy(sel);
  assert_kiln_ok(kiln_selection_create(list, "   ", &sel));
  taken_set(sel, got, sizeof got);
  assert_string_equal(got, "1");
  kiln_selection_destroy(sel);
  /* An explicit selector wins over the environment. */
  assert_kiln_ok(kiln_selection_create(list, "nvidia", &sel));
  taken_set(sel, got, sizeof got);
  assert_string_equal(got, "0");
  kiln_selection_destroy(sel);
  /* A bad KILN_DEVICE says where it came from. */
  assert_int_equal(setenv("KILN_DEVICE", "gpu,,", 1), 0);
  assert_kiln_status(kiln_selection_create(list, NULL, &sel),
                     KILN_ERR_SELECTOR_SYNTAX);
  assert_last_error_contains("KILN_DEVICE selector \"gpu,,\"");
  assert_last_error_contains("column 5");
  const kiln_device *d = NULL;
  assert_kiln_status(kiln_device_select(list, NULL, &d),
                     KILN_ERR_SELECTOR_SYNTAX);
  /* Empty or blank KILN_DEVICE means the default rule. */
  assert_int_equal(setenv("KILN_DEVICE", " ", 1), 0);
  assert_kiln_ok(kiln_selection_create(list, NULL, &sel));
  assert_string_equal(kiln_selection_get_selector(sel), "<default>");
  kiln_selection_destroy(sel);
  assert_int_equal(unsetenv("KILN_DEVICE"), 0);
}

static void test_default_rule(void **state) {
  (void)state;
  assert_int_equal(unsetenv("KILN_DEVICE"), 0);
  kiln_selection *sel = NULL;
  char got[128];
  assert_kiln_ok(kiln_selection_create(list, NULL, &sel));
  taken_set(sel, got, sizeof got);
  assert_string_equal(got, "0,1,2");
  assert_string_equal(kiln_selection_get_selector(sel), "<default>");
  assert_non_null(strstr(explain(sel, NV, NULL), "taken: default rule"));
  assert_non_null(strstr(explain(sel, POCL, NULL),
                         "refused: default rule takes only GPUs"));
  kiln_selection_destroy(sel);

  /* No GPU: every CPU, not the accelerator. */
  struct kiln_device cpus[3] = {0};
  for (size_t i = 0; i < 3; i++) {
    cpus[i] = *kiln_device_list_get(list, POCL + i);
    cpus[i].backend = NULL;
  }
  kiln_device_list *cpu_list = NULL;
  assert_kiln_ok(kiln__device_list_synthetic(cpus, 3, &cpu_list));
  assert_kiln_ok(kiln_selection_create(cpu_list, "", &sel));
  assert_int_equal(kiln_selection_get_count(sel), 2);
  assert_ptr_equal(kiln_selection_get(sel, 0), kiln_device_list_get(cpu_list, 0));
  assert_ptr_equal(kiln_selection_get(sel, 1), kiln_device_list_get(cpu_list, 1));
  assert_non_null(strstr(kiln_selection_get_explanation(sel, 0, NULL),
                         "no GPU present, so every CPU"));
  assert_non_null(strstr(kiln_selection_get_explanation(sel, 2, NULL),
                         "type is accelerator, not CPU"));
  kiln_selection_destroy(sel);
  kiln_device_list_destroy(cpu_list);
}

static void test_device_select(void **state) {
  (void)state;
  const kiln_device *d = NULL;
  assert_kiln_ok(kiln_device_select(list, "cpu", &d));
  assert_ptr_equal(d, kiln_device_list_get(list, POCL));
  assert_kiln_ok(kiln_device_select(list, "name:zzz|intel", &d));
  assert_ptr_equal(d, kiln_device_list_get(list, ARC));
  assert_kiln_status(kiln_device_select(list, "nvidia,cpu", &d),
                     KILN_ERR_NO_DEVICE);
  assert_null(d);
  assert_last_error_contains("no device matches selector \"nvidia,cpu\"");
  assert_last_error_contains("0:0 'NVIDIA H100 80GB HBM3' refused: type is GPU");
  assert_last_error_contains("4:0 'llvmpipe");
  assert_kiln_status(kiln_device_select(list, "gpu,,", &d),
                     KILN_ERR_SELECTOR_SYNTAX);
  assert_kiln_status(kiln_device_select(list, "gpu", NULL),
                     KILN_ERR_NULL_POINTER);
  assert_last_error_contains("out");
  assert_kiln_status(kiln_device_select(NULL, "gpu", &d),
                     KILN_ERR_NULL_POINTER);
  assert_last_error_contains("list");

  kiln_device_list *empty = NULL;
  assert_kiln_ok(kiln__device_list_synthetic(NULL, 0, &empty));
  assert_kiln_status(kiln_device_select(empty, "all", &d), KILN_ERR_NO_DEVICE);
  assert_last_error_contains("no OpenCL device was found");
  kiln_selection *sel = NULL;
  assert_kiln_ok(kiln_selection_create(empty, NULL, &sel));
  assert_int_equal(kiln_selection_get_count(sel), 0);
  assert_null(kiln_selection_get(sel, 0));
  assert_null(kiln_selection_get_explanation(sel, 0, NULL));
  kiln_selection_destroy(sel);
  kiln_device_list_destroy(empty);
}

static void test_null_handling(void **state) {
  (void)state;
  kiln_selection *sel = (kiln_selection *)1;
  assert_kiln_status(kiln_selection_create(NULL, "gpu", &sel),
                     KILN_ERR_NULL_POINTER);
  assert_null(sel);
  assert_last_error_contains("kiln_selection_create: list is NULL");
  assert_kiln_status(kiln_selection_create(list, "gpu", NULL),
                     KILN_ERR_NULL_POINTER);
  assert_last_error_contains("kiln_selection_create: out is NULL");
  assert_int_equal(kiln_selection_get_count(NULL), 0);
  assert_null(kiln_selection_get(NULL, 0));
  assert_null(kiln_selection_get_explanation(NULL, 0, NULL));
  assert_null(kiln_selection_get_selector(NULL));
  kiln_selection_destroy(NULL);
  assert_kiln_ok(kiln_selection_create(list, "gpu", &sel));
  assert_null(kiln_selection_get(sel, 3));
  assert_null(kiln_selection_get(sel, SIZE_MAX));
  kiln_selection_destroy(sel);
}

/* On the real devices: "all" takes each one, and 'P:D' and 'id:' find it. */
static void test_real_devices(void **state) {
  (void)state;
  kiln_device_list *real = NULL;
  assert_kiln_ok(kiln_device_list_create(&real));
  kiln_selection *sel = NULL;
  assert_kiln_ok(kiln_selection_create(real, "all", &sel));
  assert_int_equal(kiln_selection_get_count(sel),
                   kiln_device_list_get_count(real));
  kiln_selection_destroy(sel);
  for (size_t i = 0; i < kiln_device_list_get_count(real); i++) {
    const kiln_device_info *in =
        kiln_device_get_info(kiln_device_list_get(real, i));
    char selector[128];
    const kiln_device *d = NULL;
    snprintf(selector, sizeof selector, "%zu:%zu", in->platform_index,
             in->device_index);
    assert_kiln_ok(kiln_device_select(real, selector, &d));
    assert_ptr_equal(d, kiln_device_list_get(real, i));
    snprintf(selector, sizeof selector, "id:%s", in->stable_id);
    assert_kiln_ok(kiln_device_select(real, selector, &d));
    assert_ptr_equal(d, kiln_device_list_get(real, i));
    snprintf(selector, sizeof selector, "profile:%s", in->profile);
    assert_kiln_ok(kiln_device_select(real, selector, &d));
  }
  kiln_device_list_destroy(real);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_type_and_vendor_terms, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_index_name_id_terms, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_capability_terms, setup, teardown),
      cmocka_unit_test_setup_teardown(test_combinations, setup, teardown),
      cmocka_unit_test_setup_teardown(test_syntax_errors, setup, teardown),
      cmocka_unit_test_setup_teardown(test_explain, setup, teardown),
      cmocka_unit_test_setup_teardown(test_kiln_device_env, setup, teardown),
      cmocka_unit_test_setup_teardown(test_default_rule, setup, teardown),
      cmocka_unit_test_setup_teardown(test_device_select, setup, teardown),
      cmocka_unit_test_setup_teardown(test_null_handling, setup, teardown),
      cmocka_unit_test(test_real_devices),
  };
  return KILN_TEST_RUN("selector", tests, false);
}
