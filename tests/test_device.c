/* Device enumeration: every info field checked against a direct OpenCL query,
 * stable ids, clones, the problem list and NULL handling. */
#include "harness.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/internal.h"

static char *cl_string(cl_device_id d, cl_device_info param) {
  size_t n = 0;
  assert_int_equal(clGetDeviceInfo(d, param, 0, NULL, &n), CL_SUCCESS);
  char *s = calloc(n + 1, 1);
  assert_non_null(s);
  assert_int_equal(clGetDeviceInfo(d, param, n, s, NULL), CL_SUCCESS);
  return s;
}

static cl_ulong cl_scalar(cl_device_id d, cl_device_info param, size_t size) {
  cl_ulong v = 0; /* little-endian: smaller scalars land in the low bytes */
  assert_int_equal(clGetDeviceInfo(d, param, size, &v, NULL), CL_SUCCESS);
  return v;
}

static bool is_hex(const char *s, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
      return false;
  return s[n] == '\0';
}

/* Whole-word search in a space-separated list. */
static bool has_word(const char *list, const char *word) {
  size_t n = strlen(word);
  for (const char *p = list; (p = strstr(p, word)) != NULL; p += n)
    if ((p == list || p[-1] == ' ') && (p[n] == ' ' || p[n] == '\0'))
      return true;
  return false;
}

static void check_device(const kiln_device *d) {
  const kiln_device_info *in = kiln_device_get_info(d);
  assert_non_null(in);
  const char *strings[] = {in->name, in->vendor, in->driver_version,
                           in->device_version, in->opencl_c_version,
                           in->extensions, in->platform_name,
                           in->platform_vendor, in->platform_version,
                           in->stable_id, in->profile};
  for (size_t i = 0; i < sizeof strings / sizeof strings[0]; i++)
    assert_non_null(strings[i]);

  /* Every field equals what the driver says directly. */
  char *s = cl_string(d->id, CL_DEVICE_NAME);
  assert_string_equal(in->name, s);
  free(s);
  s = cl_string(d->id, CL_DEVICE_VENDOR);
  assert_string_equal(in->vendor, s);
  free(s);
  s = cl_string(d->id, CL_DRIVER_VERSION);
  assert_string_equal(in->driver_version, s);
  free(s);
  s = cl_string(d->id, CL_DEVICE_VERSION);
  assert_string_equal(in->device_version, s);
  free(s);
  s = cl_string(d->id, CL_DEVICE_OPENCL_C_VERSION);
  assert_string_equal(in->opencl_c_version, s);
  free(s);
  assert_int_equal(in->vendor_id, cl_scalar(d->id, CL_DEVICE_VENDOR_ID, 4));
  assert_int_equal(in->compute_units,
                   cl_scalar(d->id, CL_DEVICE_MAX_COMPUTE_UNITS, 4));
  assert_int_equal(in->clock_mhz,
                   cl_scalar(d->id, CL_DEVICE_MAX_CLOCK_FREQUENCY, 4));
  assert_int_equal(in->global_mem_bytes,
                   cl_scalar(d->id, CL_DEVICE_GLOBAL_MEM_SIZE, 8));
  assert_int_equal(in->local_mem_bytes,
                   cl_scalar(d->id, CL_DEVICE_LOCAL_MEM_SIZE, 8));
  assert_int_equal(in->constant_mem_bytes,
                   cl_scalar(d->id, CL_DEVICE_MAX_CONSTANT_BUFFER_SIZE, 8));
  assert_int_equal(in->max_alloc_bytes,
                   cl_scalar(d->id, CL_DEVICE_MAX_MEM_ALLOC_SIZE, 8));
  assert_int_equal(in->mem_base_addr_align_bits,
                   cl_scalar(d->id, CL_DEVICE_MEM_BASE_ADDR_ALIGN, 4));
  assert_int_equal(in->max_work_group_size,
                   cl_scalar(d->id, CL_DEVICE_MAX_WORK_GROUP_SIZE,
                             sizeof(size_t)));
  assert_int_equal(in->max_work_item_dims,
                   cl_scalar(d->id, CL_DEVICE_MAX_WORK_ITEM_DIMENSIONS, 4));
  size_t sizes[16] = {0};
  assert_true(in->max_work_item_dims >= 1 && in->max_work_item_dims <= 16);
  assert_int_equal(clGetDeviceInfo(d->id, CL_DEVICE_MAX_WORK_ITEM_SIZES,
                                   in->max_work_item_dims * sizeof(size_t),
                                   sizes, NULL),
                   CL_SUCCESS);
  for (size_t k = 0; k < 3 && k < in->max_work_item_dims; k++)
    assert_int_equal(in->max_work_item_sizes[k], sizes[k]);
  assert_int_equal(in->vector_width_float,
                   cl_scalar(d->id, CL_DEVICE_PREFERRED_VECTOR_WIDTH_FLOAT, 4));
  assert_int_equal(in->vector_width_char,
                   cl_scalar(d->id, CL_DEVICE_PREFERRED_VECTOR_WIDTH_CHAR, 4));
  assert_int_equal(in->vector_width_double,
                   cl_scalar(d->id, CL_DEVICE_PREFERRED_VECTOR_WIDTH_DOUBLE, 4));
  cl_device_type type = cl_scalar(d->id, CL_DEVICE_TYPE, sizeof type);
  if (type & CL_DEVICE_TYPE_GPU)
    assert_int_equal(in->type, KILN_DEVICE_GPU);
  else if (type & CL_DEVICE_TYPE_CPU)
    assert_int_equal(in->type, KILN_DEVICE_CPU);
  cl_platform_id platform =
      (cl_platform_id)(uintptr_t)cl_scalar(d->id, CL_DEVICE_PLATFORM,
                                           sizeof(cl_platform_id));
  assert_ptr_equal(platform, d->platform);

  /* Sane values. */
  assert_true(in->compute_units >= 1);
  assert_true(in->global_mem_bytes > 0);
  assert_true(in->max_alloc_bytes > 0);
  assert_true(in->max_work_group_size >= 1);
  assert_true(in->cl_version >= 100 && in->cl_version <= 990);
  assert_true(in->platform_cl_version >= 100);
  assert_int_equal(in->cl_version / 100,
                   (unsigned)(in->device_version[7] - '0'));
  assert_true(strncmp(in->device_version, "OpenCL ", 7) == 0);

  /* Extensions: single spaces, no ends; capability flags follow them. */
  const char *e = in->extensions;
  assert_null(strstr(e, "  "));
  if (e[0] != '\0') {
    assert_true(e[0] != ' ' && e[strlen(e) - 1] != ' ');
  }
  assert_null(strchr(e, '\t'));
  if (in->fp16)
    assert_true(has_word(e, "cl_khr_fp16"));
  cl_device_fp_config dbl = 0;
  if (clGetDeviceInfo(d->id, CL_DEVICE_DOUBLE_FP_CONFIG, sizeof dbl, &dbl,
                      NULL) != CL_SUCCESS)
    dbl = 0;
  assert_int_equal(in->fp64, dbl != 0);
  if (has_word(e, "cl_khr_subgroups"))
    assert_true(in->subgroups);

  /* Stable id in one of the documented shapes. */
  const char *id = in->stable_id;
  if (strncmp(id, "uuid-", 5) == 0) {
    assert_int_equal(strlen(id), 5 + 32);
    assert_true(is_hex(id + 5, 32));
    assert_true(has_word(e, "cl_khr_device_uuid"));
  } else if (strncmp(id, "pci-", 4) == 0) {
    assert_int_equal(strlen(id), strlen("pci-DDDD:BB:DD.F"));
    assert_true(has_word(e, "cl_khr_pci_bus_info"));
  } else {
    assert_true(strncmp(id, "hash-", 5) == 0);
    assert_true(is_hex(id + 5, 16));
  }

  /* The profile is a real one and its quirks are recorded. */
  assert_non_null(d->backend);
  assert_ptr_equal(kiln__backend_find(in->profile), d->backend);
  assert_int_equal(in->quirks & d->backend->quirks, d->backend->quirks);
  assert_int_equal(in->quirks & ~(d->backend->quirks |
                                  (unsigned)KILN_QUIRK_LEGACY_QUEUE_CREATE),
                   0);
}

static void test_enumerate(void **state) {
  (void)state;
  kiln_device_list *list = NULL;
  assert_kiln_ok(kiln_device_list_create(&list));
  assert_non_null(list);
  size_t n = kiln_device_list_get_count(list);
  for (size_t i = 0; i < n; i++) {
    const kiln_device *d = kiln_device_list_get(list, i);
    assert_non_null(d);
    check_device(d);
    /* Indices are increasing: the list follows the loader's order. */
    if (i > 0) {
      const kiln_device_info *a =
          kiln_device_get_info(kiln_device_list_get(list, i - 1));
      const kiln_device_info *b = kiln_device_get_info(d);
      assert_true(a->platform_index < b->platform_index ||
                  (a->platform_index == b->platform_index &&
                   a->device_index < b->device_index));
    }
  }
  assert_null(kiln_device_list_get(list, n));
  assert_null(kiln_device_list_get(list, SIZE_MAX));
  kiln_device_list_destroy(list);
}

/* Whether PoCL is installed where the ICD loader looks for vendors: a
 * pocl.icd in OCL_ICD_VENDORS (a directory, or one .icd file) when that is
 * set, else in /etc/OpenCL/vendors. This is the test's ground truth, taken
 * without kiln: where PoCL is installed (CI installs it) the twin check runs
 * and must pass; only a machine without PoCL (a GPU-only one) skips it. */
static bool pocl_installed(void) {
  const char *vendors = getenv("OCL_ICD_VENDORS");
  if (vendors == NULL || vendors[0] == '\0')
    vendors = "/etc/OpenCL/vendors";
  size_t n = strlen(vendors);
  if (n > 4 && strcmp(vendors + n - 4, ".icd") == 0)
    return strstr(vendors, "pocl") != NULL && access(vendors, R_OK) == 0;
  char path[4096];
  snprintf(path, sizeof path, "%s/pocl.icd", vendors);
  return access(path, R_OK) == 0;
}

/* Pairs of PoCL devices in list that nothing but their order tells apart. */
static size_t pocl_twins(const kiln_device_list *list) {
  size_t twins = 0;
  for (size_t i = 0; i < kiln_device_list_get_count(list); i++)
    for (size_t j = 0; j < i; j++) {
      const kiln_device_info *x =
          kiln_device_get_info(kiln_device_list_get(list, i));
      const kiln_device_info *y =
          kiln_device_get_info(kiln_device_list_get(list, j));
      twins += strcmp(x->profile, "pocl") == 0 &&
               strcmp(x->name, y->name) == 0 &&
               strcmp(x->platform_name, y->platform_name) == 0 &&
               strcmp(x->driver_version, y->driver_version) == 0;
    }
  return twins;
}

/* Ids are the same in a second enumeration and distinct within one, also
 * for identical devices (POCL_DEVICES="pthread pthread"). */
static void test_stable_ids(void **state) {
  (void)state;
  kiln_device_list *a = NULL, *b = NULL;
  assert_kiln_ok(kiln_device_list_create(&a));
  assert_kiln_ok(kiln_device_list_create(&b));
  assert_int_equal(kiln_device_list_get_count(a),
                   kiln_device_list_get_count(b));
  for (size_t i = 0; i < kiln_device_list_get_count(a); i++) {
    const kiln_device_info *x = kiln_device_get_info(kiln_device_list_get(a, i));
    const kiln_device_info *y = kiln_device_get_info(kiln_device_list_get(b, i));
    assert_string_equal(x->stable_id, y->stable_id);
    for (size_t j = 0; j < i; j++)
      assert_string_not_equal(
          kiln_device_get_info(kiln_device_list_get(a, j))->stable_id,
          x->stable_id);
  }
  size_t twins = pocl_twins(a);
  kiln_device_list_destroy(a);
  kiln_device_list_destroy(b);
  /* Under POCL_DEVICES="pthread pthread" the twins must really be there. */
  const char *pocl_devices = getenv("POCL_DEVICES");
  if (pocl_devices == NULL || strchr(pocl_devices, ' ') == NULL)
    return;
  if (!pocl_installed())
    KILN_TEST_SKIP("POCL_DEVICES asks for twin PoCL devices, but PoCL is not "
                   "installed (no pocl.icd where the ICD loader looks)");
  if (twins == 0)
    fail_msg("POCL_DEVICES=\"%s\" and PoCL is installed, but kiln lists no "
             "two identical PoCL devices", pocl_devices);
}

static void test_clone_outlives_list(void **state) {
  (void)state;
  kiln_device_list *list = NULL;
  assert_kiln_ok(kiln_device_list_create(&list));
  if (kiln_device_list_get_count(list) == 0) {
    kiln_device_list_destroy(list);
    KILN_TEST_SKIP("no OpenCL device");
  }
  const kiln_device *d = kiln_device_list_get(list, 0);
  char name[256], id[64], ext[4096], pname[256];
  snprintf(name, sizeof name, "%s", d->info.name);
  snprintf(id, sizeof id, "%s", d->info.stable_id);
  snprintf(ext, sizeof ext, "%s", d->info.extensions);
  snprintf(pname, sizeof pname, "%s", d->info.platform_name);
  size_t cu = d->info.compute_units;
  struct kiln_device *copy = NULL;
  assert_kiln_ok(kiln__device_clone(d, &copy));
  assert_ptr_not_equal(copy->storage, d->storage);
  kiln_device_list_destroy(list);
  assert_string_equal(copy->info.name, name);
  assert_string_equal(copy->info.stable_id, id);
  assert_string_equal(copy->info.extensions, ext);
  assert_string_equal(copy->info.platform_name, pname);
  assert_int_equal(copy->info.compute_units, cu);
  assert_non_null(copy->backend);
  assert_string_equal(copy->info.profile, copy->backend->name);
  /* A clone of a clone is independent again. */
  struct kiln_device *copy2 = NULL;
  assert_kiln_ok(kiln__device_clone(copy, &copy2));
  kiln__device_free(copy);
  assert_string_equal(copy2->info.name, name);
  kiln__device_free(copy2);
  kiln__device_free(NULL);
}

/* Platforms that offer no device (Clover; rusticl without
 * RUSTICL_ENABLE) appear in the problem list, named, with the call. */
static void test_problems(void **state) {
  (void)state;
  kiln_device_list *list = NULL;
  assert_kiln_ok(kiln_device_list_create(&list));
  cl_uint np = 0;
  cl_int err = clGetPlatformIDs(0, NULL, &np);
  if (err != CL_SUCCESS || np == 0) {
    assert_true(kiln_device_list_get_problem_count(list) >= 1);
    assert_string_equal(kiln_device_list_get_problem(list, 0)->call,
                        "clGetPlatformIDs");
    kiln_device_list_destroy(list);
    return;
  }
  cl_platform_id *ps = calloc(np, sizeof *ps);
  assert_non_null(ps);
  assert_int_equal(clGetPlatformIDs(np, ps, NULL), CL_SUCCESS);
  for (cl_uint p = 0; p < np; p++) {
    cl_uint nd = 0;
    cl_int derr = clGetDeviceIDs(ps[p], CL_DEVICE_TYPE_ALL, 0, NULL, &nd);
    if (derr == CL_SUCCESS && nd > 0)
      continue;
    if (derr == CL_SUCCESS)
      derr = CL_DEVICE_NOT_FOUND;
    char pname[256] = "";
    clGetPlatformInfo(ps[p], CL_PLATFORM_NAME, sizeof pname - 1, pname, NULL);
    bool found = false;
    for (size_t i = 0; i < kiln_device_list_get_problem_count(list); i++) {
      const kiln_device_problem *pr = kiln_device_list_get_problem(list, i);
      if (pr->platform_index != p)
        continue;
      found = true;
      assert_string_equal(pr->platform_name, pname);
      assert_int_equal(pr->device_index, SIZE_MAX);
      assert_string_equal(pr->call, "clGetDeviceIDs");
      assert_int_equal(pr->cl_error, derr);
      assert_non_null(strstr(pr->message, pname));
      assert_non_null(strstr(pr->message, kiln_cl_error_name(derr)));
    }
    if (!found)
      fail_msg("platform %u '%s' has no device but no problem names it", p,
               pname);
  }
  /* No device of a problem-free platform is missing. */
  size_t devices = 0;
  for (cl_uint p = 0; p < np; p++) {
    cl_uint nd = 0;
    if (clGetDeviceIDs(ps[p], CL_DEVICE_TYPE_ALL, 0, NULL, &nd) == CL_SUCCESS)
      devices += nd;
  }
  assert_int_equal(kiln_device_list_get_count(list), devices);
  free(ps);
  assert_null(kiln_device_list_get_problem(list, SIZE_MAX));
  assert_null(kiln_device_list_get_problem(
      list, kiln_device_list_get_problem_count(list)));
  kiln_device_list_destroy(list);
}

static void test_null_handling(void **state) {
  (void)state;
  assert_kiln_status(kiln_device_list_create(NULL), KILN_ERR_NULL_POINTER);
  assert_last_error_contains("kiln_device_list_create");
  assert_last_error_contains("out");
  kiln_device_list_destroy(NULL);
  assert_int_equal(kiln_device_list_get_count(NULL), 0);
  assert_null(kiln_device_list_get(NULL, 0));
  assert_int_equal(kiln_device_list_get_problem_count(NULL), 0);
  assert_null(kiln_device_list_get_problem(NULL, 0));
  assert_null(kiln_device_get_info(NULL));

  struct kiln_device *copy = (struct kiln_device *)1;
  assert_kiln_status(kiln__device_clone(NULL, &copy), KILN_ERR_NULL_POINTER);
  assert_null(copy);
  assert_last_error_contains("device is NULL");
  assert_kiln_status(kiln__device_clone(NULL, NULL), KILN_ERR_NULL_POINTER);
  assert_last_error_contains("out is NULL");
}

static void test_names(void **state) {
  (void)state;
  assert_string_equal(kiln_device_type_name(KILN_DEVICE_CPU), "CPU");
  assert_string_equal(kiln_device_type_name(KILN_DEVICE_GPU), "GPU");
  assert_string_equal(kiln_device_type_name(KILN_DEVICE_ACCELERATOR),
                      "accelerator");
  assert_string_equal(kiln_device_type_name(KILN_DEVICE_OTHER), "other");
  assert_string_equal(kiln_device_type_name((kiln_device_type)99), "other");
  assert_string_equal(kiln_quirk_name(KILN_QUIRK_LOCAL_MEM_EMULATED),
                      "local-mem-emulated");
  assert_string_equal(kiln_quirk_name(KILN_QUIRK_NO_MAD_FUSION),
                      "no-mad-fusion");
  assert_string_equal(kiln_quirk_name(KILN_QUIRK_SERIAL_DEFAULT_LOCAL_SIZE),
                      "serial-default-local-size");
  assert_string_equal(kiln_quirk_name(KILN_QUIRK_LEGACY_QUEUE_CREATE),
                      "legacy-queue-create");
  assert_string_equal(kiln_quirk_name(KILN_QUIRK_COARSE_PROFILING),
                      "coarse-profiling");
  assert_null(kiln_quirk_name(0));
  assert_null(kiln_quirk_name(KILN_QUIRK_LOCAL_MEM_EMULATED |
                              KILN_QUIRK_NO_MAD_FUSION));
  assert_null(kiln_quirk_name(1u << 31));
}

/* A synthetic list: strings copied, NULL strings empty, profile matched. */
static void test_synthetic_list(void **state) {
  (void)state;
  struct kiln_device fake[2] = {0};
  fake[0].info.name = "NVIDIA H100";
  fake[0].info.vendor = "NVIDIA Corporation";
  fake[0].info.platform_name = "NVIDIA CUDA";
  fake[0].info.type = KILN_DEVICE_GPU;
  fake[1].info.name = "pthread";
  fake[1].info.vendor = "GenuineIntel";
  fake[1].info.vendor_id = 0x8086;
  fake[1].info.platform_name = "Portable Computing Language";
  fake[1].info.type = KILN_DEVICE_CPU;
  kiln_device_list *list = NULL;
  assert_kiln_ok(kiln__device_list_synthetic(fake, 2, &list));
  assert_int_equal(kiln_device_list_get_count(list), 2);
  const kiln_device_info *a = kiln_device_get_info(kiln_device_list_get(list, 0));
  const kiln_device_info *b = kiln_device_get_info(kiln_device_list_get(list, 1));
  assert_string_equal(a->profile, "nvidia");
  assert_string_equal(a->driver_version, "");
  assert_ptr_not_equal(a->name, fake[0].info.name);
  assert_string_equal(b->profile, "pocl");
  assert_int_equal(b->quirks, kiln__backend_find("pocl")->quirks);
  kiln_device_list_destroy(list);
  assert_kiln_status(kiln__device_list_synthetic(NULL, 1, &list),
                     KILN_ERR_NULL_POINTER);
  assert_kiln_status(kiln__device_list_synthetic(fake, 1, NULL),
                     KILN_ERR_NULL_POINTER);
  assert_kiln_ok(kiln__device_list_synthetic(NULL, 0, &list));
  assert_int_equal(kiln_device_list_get_count(list), 0);
  kiln_device_list_destroy(list);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_enumerate),
      cmocka_unit_test(test_stable_ids),
      cmocka_unit_test(test_clone_outlives_list),
      cmocka_unit_test(test_problems),
      cmocka_unit_test(test_null_handling),
      cmocka_unit_test(test_names),
      cmocka_unit_test(test_synthetic_list),
  };
  return KILN_TEST_RUN("device", tests, false);
}
