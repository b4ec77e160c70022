/* `kiln info --json`, run as a separate process the way users run it
 * (KILN_BIN names the built binary), read with a strict parser, agrees with
 * `clinfo --raw` on platforms, device names, compute units, memory sizes,
 * work-group size, max allocation and extensions (PoCL, and rusticl with
 * RUSTICL_ENABLE=llvmpipe when it is installed). The rest of `kiln info`
 * is test_info.c. */
#include "info_test_util.h"

#include <stdlib.h>
#include <string.h>

/* ---- clinfo --raw ---- */

#define MAX_P 16
#define MAX_D 16

typedef struct raw_device {
  char name[8192];
  long long cu, global_mem, local_mem, wg, max_alloc;
  char extensions[8192];
} raw_device;

typedef struct raw_platform {
  char name[8192];
  size_t ndev;
  raw_device dev[MAX_D];
} raw_platform;

/* The second part of clinfo --raw: "[SUFFIX/<star>]  CL_PLATFORM_NAME  name"
 * starts a platform; "[SUFFIX/N]  CL_NAME  value" is device N's property. */
static size_t parse_clinfo(char *text, raw_platform *plats) {
  size_t np = 0;
  for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
    if (line[0] != '[')
      continue;
    char *close = strchr(line, ']');
    char *slash = strchr(line, '/');
    if (close == NULL || slash == NULL || slash > close)
      continue;
    char *p = close + 1;
    p += strspn(p, " \t");
    size_t nlen = strspn(p, "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_");
    char prop[128];
    snprintf(prop, sizeof(prop), "%.*s", (int)nlen, p);
    char value[8192];
    snprintf(value, sizeof(value), "%s", p + nlen);
    trim(value);
    if (slash[1] == '*') {
      if (strcmp(prop, "CL_PLATFORM_NAME") == 0 && np < MAX_P) {
        memset(&plats[np], 0, sizeof(plats[np]));
        snprintf(plats[np].name, sizeof(plats[np].name), "%s", value);
        np++;
      }
      continue;
    }
    if (np == 0)
      continue;
    raw_platform *plat = &plats[np - 1];
    size_t d = strtoul(slash + 1, NULL, 10);
    if (d >= MAX_D)
      continue;
    if (d + 1 > plat->ndev)
      plat->ndev = d + 1;
    raw_device *dev = &plat->dev[d];
    if (strcmp(prop, "CL_DEVICE_NAME") == 0)
      snprintf(dev->name, sizeof(dev->name), "%s", value);
    else if (strcmp(prop, "CL_DEVICE_MAX_COMPUTE_UNITS") == 0)
      dev->cu = atoll(value);
    else if (strcmp(prop, "CL_DEVICE_GLOBAL_MEM_SIZE") == 0)
      dev->global_mem = atoll(value);
    else if (strcmp(prop, "CL_DEVICE_LOCAL_MEM_SIZE") == 0)
      dev->local_mem = atoll(value);
    else if (strcmp(prop, "CL_DEVICE_MAX_WORK_GROUP_SIZE") == 0)
      dev->wg = atoll(value);
    else if (strcmp(prop, "CL_DEVICE_MAX_MEM_ALLOC_SIZE") == 0)
      dev->max_alloc = atoll(value);
    else if (strcmp(prop, "CL_DEVICE_EXTENSIONS") == 0)
      snprintf(dev->extensions, sizeof(dev->extensions), "%s", value);
  }
  return np;
}

static int cmp_str(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Compare clinfo's extension string with kiln's JSON list, as sets. */
static void check_extensions(const char *where, char *clinfo_list, json_t *list) {
  assert_true(json_is_array(list));
  char *words[512];
  size_t n = 0;
  for (char *w = strtok(clinfo_list, " \t"); w && n < 512; w = strtok(NULL, " \t"))
    words[n++] = w;
  const char *mine[512];
  size_t m = json_array_size(list);
  assert_true(m <= 512);
  for (size_t i = 0; i < m; i++)
    mine[i] = json_string_value(json_array_get(list, i));
  qsort(words, n, sizeof(words[0]), cmp_str);
  qsort(mine, m, sizeof(mine[0]), cmp_str);
  if (n != m)
    fail_msg("%s: clinfo lists %zu extensions, kiln %zu", where, n, m);
  for (size_t i = 0; i < n; i++)
    if (mine[i] == NULL || strcmp(words[i], mine[i]) != 0)
      fail_msg("%s: extension %s (clinfo) vs %s (kiln)", where, words[i],
               mine[i] ? mine[i] : "(not a string)");
}

static void check_number(const char *where, const char *prop, long long want,
                         json_t *dev) {
  json_t *v = json_object_get(dev, prop);
  if (!json_is_integer(v))
    fail_msg("%s: %s is not an integer", where, prop);
  if (json_integer_value(v) != want)
    fail_msg("%s: %s is %lld in kiln, %lld in clinfo", where, prop,
             (long long)json_integer_value(v), want);
}

/* Run both tools under env and compare. Returns the number of devices. */
static size_t compare_with_clinfo(const char *const *env) {
  const char *kargs[] = {kiln_bin(), "info", "--json", NULL};
  const char *cargs[] = {"/usr/bin/clinfo", "--raw", NULL};
  run_result k = run(env, kargs);
  run_result c = run(env, cargs);
  json_t *doc = parse_strict(&k);
  check_shape(doc);
  static raw_platform plats[MAX_P];
  size_t np = parse_clinfo(c.out, plats);
  json_t *jplats = json_object_get(doc, "platforms");
  assert_int_equal(json_array_size(jplats), np);
  size_t devices = 0;
  for (size_t p = 0; p < np; p++) {
    json_t *jp = json_array_get(jplats, p);
    char name[512];
    snprintf(name, sizeof(name), "%s",
             json_string_value(json_object_get(jp, "CL_PLATFORM_NAME")));
    trim(name);
    assert_string_equal(name, plats[p].name);
    json_t *jdevs = json_object_get(jp, "devices");
    assert_int_equal(json_array_size(jdevs), plats[p].ndev);
    for (size_t d = 0; d < plats[p].ndev; d++) {
      raw_device *rd = &plats[p].dev[d];
      json_t *jd = json_array_get(jdevs, d);
      char where[640];
      snprintf(where, sizeof(where), "platform %zu device %zu (%.512s)", p, d,
               rd->name);
      char dname[512];
      snprintf(dname, sizeof(dname), "%s",
               json_string_value(json_object_get(jd, "CL_DEVICE_NAME")));
      trim(dname);
      assert_string_equal(dname, rd->name);
      check_number(where, "CL_DEVICE_MAX_COMPUTE_UNITS", rd->cu, jd);
      check_number(where, "CL_DEVICE_GLOBAL_MEM_SIZE", rd->global_mem, jd);
      check_number(where, "CL_DEVICE_LOCAL_MEM_SIZE", rd->local_mem, jd);
      check_number(where, "CL_DEVICE_MAX_WORK_GROUP_SIZE", rd->wg, jd);
      check_number(where, "CL_DEVICE_MAX_MEM_ALLOC_SIZE", rd->max_alloc, jd);
      check_extensions(where, rd->extensions,
                       json_object_get(jd, "CL_DEVICE_EXTENSIONS"));
      devices++;
    }
  }
  /* kiln's exit code follows the devices it can use. */
  assert_int_equal(k.status, devices > 0 ? 0 : 1);
  json_decref(doc);
  free(k.out);
  free(c.out);
  return devices;
}

/* The comparison runs on the system's vendors directory (the loader
 * variables unset), where PoCL is the device every machine with PoCL has.
 * A machine without PoCL (a GPU-only one, whose driver is often named by
 * OCL_ICD_VENDORS alone) skips it; one with PoCL must compare at least its
 * device, so a kiln that loses it fails. */
static void test_json_matches_clinfo(void **state) {
  (void)state;
  if (access("/usr/bin/clinfo", X_OK) != 0)
    KILN_TEST_SKIP("clinfo is not installed (/usr/bin/clinfo)");
  if (!have_pocl())
    KILN_TEST_SKIP("PoCL is not installed (no /etc/OpenCL/vendors/pocl.icd)");
  /* PoCL derives its memory sizes from the memory free when it starts,
   * which moves between two runs on a busy machine; a limit below that makes
   * both tools see the same numbers. */
  const char *env[] = {"OCL_ICD_VENDORS", "OPENCL_VENDOR_PATH",
                       "POCL_MEMORY_LIMIT=2", NULL};
  size_t devices = compare_with_clinfo(env);
  assert_true(devices > 0);
}

static void test_json_matches_clinfo_rusticl(void **state) {
  (void)state;
  if (access("/usr/bin/clinfo", X_OK) != 0)
    KILN_TEST_SKIP("clinfo is not installed (/usr/bin/clinfo)");
  if (access("/etc/OpenCL/vendors/rusticl.icd", R_OK) != 0)
    KILN_TEST_SKIP("rusticl is not installed "
                   "(no /etc/OpenCL/vendors/rusticl.icd)");
  const char *env[] = {"RUSTICL_ENABLE=llvmpipe", "OCL_ICD_VENDORS",
                       "OPENCL_VENDOR_PATH", "POCL_MEMORY_LIMIT=2", NULL};
  size_t devices = compare_with_clinfo(env);
  assert_true(devices >= 1);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_json_matches_clinfo),
      cmocka_unit_test(test_json_matches_clinfo_rusticl),
  };
  return KILN_TEST_RUN("info_clinfo", tests, false);
}
