/* Tests of the `kiln info` tool, run as a separate process the way users run
 * it (KILN_BIN names the built binary; FAKE_ICD_LIB the fake vendor driver):
 *
 * - `kiln info --json` parses with a strict parser (its agreement with
 *   `clinfo --raw` is test_info_clinfo.c);
 * - the JSON stays valid, and PoCL stays listed, for every misbehaviour of
 *   the fake ICD;
 * - `--doctor` names a missing library, a library that is not an ICD and a
 *   failing ICD, while `kiln info` still lists PoCL and exits 0;
 * - exit codes and usage errors. */
#include "info_test_util.h"

#include <ctype.h>
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <jansson.h>
#include <xxhash.h>

/* ---- the fake ICD ---- */

static char vendors_dir[256];

static void write_icd(const char *dir, const char *file, const char *lib) {
  char path[512];
  snprintf(path, sizeof(path), "%s/%s", dir, file);
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  fprintf(f, "%s\n", lib);
  assert_int_equal(fclose(f), 0);
}

/* A vendors directory: the fake ICD, PoCL's .icd when installed, and, when
 * broken is set, an .icd naming a missing library and one naming libm. */
static void make_vendors(bool broken) {
  const char *lib = getenv("FAKE_ICD_LIB");
  if (lib == NULL || lib[0] == '\0')
    fail_msg("%s", "FAKE_ICD_LIB is not set (tests/meson.build passes it)");
  snprintf(vendors_dir, sizeof(vendors_dir), "/tmp/kiln-test-info-XXXXXX");
  assert_non_null(mkdtemp(vendors_dir));
  write_icd(vendors_dir, "fake.icd", lib);
  if (have_pocl()) {
    FILE *f = fopen("/etc/OpenCL/vendors/pocl.icd", "r");
    char line[1024] = "";
    assert_non_null(f);
    assert_non_null(fgets(line, sizeof(line), f));
    fclose(f);
    trim(line);
    write_icd(vendors_dir, "pocl.icd", line);
  }
  if (broken) {
    write_icd(vendors_dir, "missing.icd", "libkiln-no-such-driver.so.1");
    write_icd(vendors_dir, "not-an-icd.icd", "libm.so.6");
  }
}

static void remove_vendors(void) {
  static const char *files[] = {"fake.icd", "pocl.icd", "missing.icd",
                                "not-an-icd.icd"};
  for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
    char path[512];
    snprintf(path, sizeof(path), "%s/%s", vendors_dir, files[i]);
    unlink(path);
  }
  rmdir(vendors_dir);
}

/* Whether the document lists a device whose kiln profile is "pocl". */
static bool lists_pocl(json_t *doc) {
  size_t pi, di;
  json_t *plat, *dev;
  json_array_foreach(json_object_get(doc, "platforms"), pi, plat) {
    json_array_foreach(json_object_get(plat, "devices"), di, dev) {
      const char *profile =
          json_string_value(json_object_get(json_object_get(dev, "kiln"), "profile"));
      if (profile && strcmp(profile, "pocl") == 0)
        return true;
    }
  }
  return false;
}

/* Whether any property value anywhere is an {"error": ...} object. */
static bool has_error_value(json_t *doc) {
  size_t pi, di;
  json_t *plat, *dev, *value;
  const char *key;
  json_array_foreach(json_object_get(doc, "platforms"), pi, plat) {
    json_object_foreach(plat, key, value)
      if (json_is_object(value) && json_object_get(value, "error"))
        return true;
    json_array_foreach(json_object_get(plat, "devices"), di, dev) {
      json_object_foreach(dev, key, value)
        if (strcmp(key, "kiln") != 0 && json_is_object(value) &&
            json_object_get(value, "error"))
          return true;
    }
  }
  return false;
}

static void test_fake_icd_modes(void **state) {
  (void)state;
  static const char *modes[] = {"healthy", "platform-fail", "device-fail",
                                "no-devices", "empty-strings", "long-strings",
                                "zero-sizes", "short-sizes"};
  make_vendors(false);
  char vendors_env[300];
  snprintf(vendors_env, sizeof(vendors_env), "OCL_ICD_VENDORS=%s", vendors_dir);
  for (size_t i = 0; i < sizeof(modes) / sizeof(modes[0]); i++) {
    char mode_env[64];
    snprintf(mode_env, sizeof(mode_env), "FAKE_ICD_MODE=%s", modes[i]);
    const char *env[] = {vendors_env, mode_env, "FAKE_ICD_DEVICES=3",
                         "KILN_DEVICE", NULL};
    const char *json_args[] = {kiln_bin(), "info", "--json", NULL};
    run_result r = run(env, json_args);
    json_t *doc = parse_strict(&r);
    check_shape(doc);
    if (have_pocl()) {
      if (!lists_pocl(doc))
        fail_msg("mode %s: the PoCL device is missing", modes[i]);
      assert_int_equal(r.status, 0);
    }
    bool failing = strcmp(modes[i], "platform-fail") == 0 ||
                   strcmp(modes[i], "device-fail") == 0 ||
                   strcmp(modes[i], "short-sizes") == 0;
    if (failing && !has_error_value(doc))
      fail_msg("mode %s: no query shows as an error value", modes[i]);
    json_decref(doc);
    free(r.out);
    /* The text report and the list must survive too. */
    const char *text_args[] = {kiln_bin(), "info", NULL};
    const char *list_args[] = {kiln_bin(), "info", "-l", NULL};
    r = run(env, text_args);
    assert_true(r.status == 0 || (!have_pocl() && r.status == 1));
    assert_non_null(strstr(r.out, "Platform"));
    free(r.out);
    r = run(env, list_args);
    assert_true(r.status == 0 || (!have_pocl() && r.status == 1));
    free(r.out);
  }
  remove_vendors();
}

static void test_doctor_names_broken_entries(void **state) {
  (void)state;
  make_vendors(true);
  char vendors_env[300];
  snprintf(vendors_env, sizeof(vendors_env), "OCL_ICD_VENDORS=%s", vendors_dir);
  const char *env[] = {vendors_env, "FAKE_ICD_MODE=platform-fail",
                       "KILN_DEVICE", NULL};
  /* --wide: one finding per line, whatever the width. */
  const char *doctor_args[] = {kiln_bin(), "info", "--doctor", "--wide", NULL};
  run_result r = run(env, doctor_args);
  assert_int_equal(r.status, 1);
  static const char *want[] = {
      "PROBLEM  missing.icd: cannot load libkiln-no-such-driver.so.1",
      "PROBLEM  not-an-icd.icd: libm.so.6 is not an OpenCL ICD",
      "PROBLEM  fake.icd: ",
  };
  for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++)
    if (strstr(r.out, want[i]) == NULL)
      fail_msg("doctor output lacks \"%s\":\n%s", want[i], r.out);
  if (have_pocl() && strstr(r.out, "ok       pocl.icd: ") == NULL)
    fail_msg("doctor does not report pocl.icd as healthy:\n%s", r.out);
  free(r.out);

  /* The same findings in the JSON document, which must stay valid. */
  const char *json_args[] = {kiln_bin(), "info", "--doctor", "--json", NULL};
  r = run(env, json_args);
  assert_int_equal(r.status, 1);
  json_t *doc = parse_strict(&r);
  json_t *findings = json_object_get(doc, "doctor");
  assert_true(json_is_array(findings));
  size_t problems = 0, i;
  json_t *f;
  json_array_foreach(findings, i, f) {
    if (strcmp(json_string_value(json_object_get(f, "level")), "PROBLEM") == 0)
      problems++;
  }
  assert_true(problems >= 3);
  json_decref(doc);
  free(r.out);

  /* The healthy device is still found and listed, with exit status 0. */
  if (have_pocl()) {
    const char *list_args[] = {kiln_bin(), "info", "-l", NULL};
    r = run(env, list_args);
    assert_int_equal(r.status, 0);
    assert_non_null(strstr(r.out, "[pocl, "));
    free(r.out);
  }
  remove_vendors();
}

static void test_doctor_bad_loader_variables(void **state) {
  (void)state;
  const char *args[] = {kiln_bin(), "info", "--doctor", "--wide", NULL};
  const char *env1[] = {"OCL_ICD_VENDORS=/nonexistent/kiln/vendors.icd", NULL};
  run_result r = run(env1, args);
  assert_int_equal(r.status, 1);
  assert_non_null(strstr(r.out, "PROBLEM  OCL_ICD_VENDORS: "));
  assert_non_null(strstr(r.out, "PROBLEM  ICD loader: "));
  free(r.out);

  char empty[] = "/tmp/kiln-test-info-empty-XXXXXX";
  assert_non_null(mkdtemp(empty));
  char env_empty[300];
  snprintf(env_empty, sizeof(env_empty), "OCL_ICD_VENDORS=%s", empty);
  const char *env2[] = {env_empty, NULL};
  r = run(env2, args);
  assert_int_equal(r.status, 1);
  assert_non_null(strstr(r.out, "is a directory with no .icd files"));
  free(r.out);
  /* And kiln info itself: no platform, no device, exit 1, valid JSON. */
  const char *json_args[] = {kiln_bin(), "info", "--json", NULL};
  r = run(env2, json_args);
  assert_int_equal(r.status, 1);
  json_t *doc = parse_strict(&r);
  assert_int_equal(json_array_size(json_object_get(doc, "platforms")), 0);
  json_decref(doc);
  free(r.out);
  rmdir(empty);
}

static void test_select_and_explain(void **state) {
  (void)state;
  if (kiln_test_device_count() == 0)
    KILN_TEST_SKIP("no OpenCL device");
  const char *env[] = {"KILN_DEVICE", NULL};
  const char *explain[] = {kiln_bin(), "info", "--json", "--explain", NULL};
  run_result r = run(env, explain);
  assert_int_equal(r.status, 0);
  json_t *doc = parse_strict(&r);
  size_t pi, di, taken = 0;
  json_t *plat, *dev;
  json_array_foreach(json_object_get(doc, "platforms"), pi, plat) {
    json_array_foreach(json_object_get(plat, "devices"), di, dev) {
      json_t *k = json_object_get(dev, "kiln");
      if (json_object_get(k, "error"))
        continue;
      assert_true(json_is_boolean(json_object_get(k, "taken")));
      const char *reason = json_string_value(json_object_get(k, "reason"));
      assert_non_null(reason);
      if (json_is_true(json_object_get(k, "taken"))) {
        taken++;
        assert_true(strncmp(reason, "taken", 5) == 0);
      } else {
        assert_true(strncmp(reason, "refused", 7) == 0);
      }
    }
  }
  assert_true(taken > 0);
  json_decref(doc);
  free(r.out);

  /* A selector that takes nothing: no device shown, exit status 1. */
  const char *none[] = {kiln_bin(), "info", "-l", "--select",
                        "name:no-such-device-anywhere", NULL};
  r = run(env, none);
  assert_int_equal(r.status, 1);
  assert_null(strstr(r.out, "Device #"));
  free(r.out);

  /* "all" takes every device. */
  const char *one[] = {kiln_bin(), "info", "--json", "--select", "all", NULL};
  r = run(env, one);
  assert_int_equal(r.status, 0);
  doc = parse_strict(&r);
  assert_true(json_array_size(json_object_get(doc, "platforms")) > 0);
  json_decref(doc);
  free(r.out);
}

static void test_check_and_demo(void **state) {
  (void)state;
  if (kiln_test_device_count() == 0)
    KILN_TEST_SKIP("no OpenCL device");
  const char *env[] = {"KILN_DEVICE", NULL};
  /* --check on the first device kiln takes by default. */
  const char *check[] = {kiln_bin(), "info", "--json", "--check", "--select",
                         "0:0|1:0|2:0|all", NULL};
  run_result r = run(env, check);
  json_t *doc = parse_strict(&r);
  size_t pi, di, checked = 0;
  json_t *plat, *dev;
  json_array_foreach(json_object_get(doc, "platforms"), pi, plat) {
    json_array_foreach(json_object_get(plat, "devices"), di, dev) {
      json_t *c = json_object_get(json_object_get(dev, "kiln"), "check");
      const char *result = json_string_value(json_object_get(c, "result"));
      assert_non_null(result);
      if (strcmp(result, "PASS") != 0)
        fail_msg("--check: %s", json_string_value(json_object_get(c, "detail")));
      checked++;
    }
  }
  assert_int_equal(checked, 1);
  assert_int_equal(r.status, 0);
  json_decref(doc);
  free(r.out);

  const char *demo[] = {kiln_bin(), "demo", "--size", "100000", NULL};
  r = run(env, demo);
  if (r.status != 0 || strstr(r.out, "\nPASS\n") == NULL)
    fail_msg("kiln demo failed (exit %d):\n%s", r.status, r.out);
  assert_non_null(strstr(r.out, "saxpy, 100000 floats"));
  free(r.out);
}

static void test_usage_errors(void **state) {
  (void)state;
  struct {
    const char *args[6];
    int status;
  } cases[] = {
      {{"info", "--bogus", NULL}, 2},
      {{"info", "--select", NULL}, 2},
      {{"info", "--select", "gpu,,", NULL}, 2},
      {{"info", "--list", "--json", NULL}, 2},
      {{"info", "extra", NULL}, 2},
      {{"demo", "--size", "0", NULL}, 2},
      {{"demo", "--size", "12x", NULL}, 2},
      {{"demo", "--device", "(", NULL}, 2},
      {{"no-such-command", NULL}, 2},
      {{"--no-such-option", NULL}, 2},
      {{NULL}, 2},
      {{"--help", NULL}, 0},
      {{"help", "info", NULL}, 0},
      {{"help", "nope", NULL}, 2},
      {{"info", "--help", NULL}, 0},
      {{"demo", "--help", NULL}, 0},
  };
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    const char *argv[8] = {kiln_bin()};
    for (size_t a = 0; cases[i].args[a]; a++)
      argv[a + 1] = cases[i].args[a];
    run_result r = run(NULL, argv);
    if (r.status != cases[i].status)
      fail_msg("kiln %s %s: exit %d, expected %d",
               cases[i].args[0] ? cases[i].args[0] : "",
               cases[i].args[0] && cases[i].args[1] ? cases[i].args[1] : "",
               r.status, cases[i].status);
    free(r.out);
  }
  const char *version[] = {kiln_bin(), "--version", NULL};
  run_result r = run(NULL, version);
  assert_int_equal(r.status, 0);
  char want[64];
  snprintf(want, sizeof(want), "kiln %s\n", KILN_VERSION_STRING);
  assert_string_equal(r.out, want);
  free(r.out);
}

/* Squeeze every run of white space in text to one space: kiln info wraps
 * long values, and a reason may cross lines. */
static void squeeze(char *text) {
  char *w = text;
  for (const char *r = text; *r; r++)
    if (!isspace((unsigned char)*r))
      *w++ = *r;
    else if (w == text || w[-1] != ' ')
      *w++ = ' ';
  *w = '\0';
}

/* kiln info on a tuning file that kiln refuses says why: a FIFO at
 * KILN_TUNING (before the fix kiln info never returned), an op line
 * without parameters (before, dropped with no reason) and a knob given
 * twice (before, the last one won). */
static void test_tuning_file_reasons(void **state) {
  (void)state;
  if (kiln_test_device_count() == 0)
    KILN_TEST_SKIP("no OpenCL device");
  char dir[] = "/tmp/kiln-test-info-tuning-XXXXXX";
  assert_non_null(mkdtemp(dir));
  char path[300], env_tuning[320];
  snprintf(path, sizeof path, "%s/fifo", dir);
  assert_int_equal(mkfifo(path, 0600), 0);
  snprintf(env_tuning, sizeof env_tuning, "KILN_TUNING=%s", path);
  const char *env[] = {env_tuning, "KILN_DEVICE", NULL};
  const char *args[] = {kiln_bin(), "info", NULL};
  run_result r = run(env, args);
  assert_int_equal(r.status, 0);
  squeeze(r.out);
  if (strstr(r.out, "a FIFO, not a regular file") == NULL)
    fail_msg("kiln info does not say the tuning file is a FIFO:\n%s", r.out);
  free(r.out);
  unlink(path);

  const kiln_device_info *di = kiln_device_get_info(kiln_test_device(0));
  static const char *const ops[][2] = {
      {"op gemm\n", "line 5: op gemm has no parameters"},
      {"op gemm MWG=32 NWG=64 KWG=16 MDIMC=8 NDIMC=16 VWM=2 VWN=4 SA=1 SB=1 "
       "PADA=1 PADB=0 DB=1 KWI=2 STRM=0 STRN=1 DWG=8 DWI=2 SWITCH=0 VWM=4\n",
       "VWM is given twice, as 2 and as 4"},
  };
  snprintf(path, sizeof path, "%s/tuning.txt", dir);
  snprintf(env_tuning, sizeof env_tuning, "KILN_TUNING=%s", path);
  for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++) {
    char body[1024], text[1100];
    snprintf(body, sizeof body, "kiln-tuning 1\ndevice %s\ndriver %s\nkiln %s\n%s",
             di->stable_id, di->driver_version, KILN_VERSION_STRING, ops[i][0]);
    snprintf(text, sizeof text, "%schecksum %016llx\n", body,
             (unsigned long long)XXH3_64bits(body, strlen(body)));
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    assert_int_equal(fclose(f), 0);
    const char *one[] = {kiln_bin(), "info", NULL};
    r = run(env, one);
    assert_int_equal(r.status, 0);
    squeeze(r.out);
    if (strstr(r.out, ops[i][1]) == NULL)
      fail_msg("kiln info lacks \"%s\":\n%s", ops[i][1], r.out);
    free(r.out);
  }
  unlink(path);
  rmdir(dir);
}

/* PoCL lists no device when it cannot create its kernel cache (HOME not
 * writable: service accounts, docker --user, CI runners). Root ignores
 * permissions, so the unwritable places are paths under a regular file
 * (/proc/version). The doctor and the "no device" error (kiln demo's
 * text) name the directory, the variable it comes from and what to set,
 * instead of "install an OpenCL driver" (before the fix) with PoCL
 * installed; with POCL_CACHE_DIR set, kiln itself needs no writable HOME
 * (its own cache falls back to building from source). */
static void test_unwritable_home(void **state) {
  (void)state;
  if (!have_pocl())
    KILN_TEST_SKIP("PoCL is not installed");
  static const char *const cases[][4] = {
      /* variable setting, the cache it gives, what to say */
      {"HOME=/proc/version", "/proc/version/.cache/pocl/kcache",
       "(HOME=/proc/version: '/proc/version' is a file, not a directory)",
       ", or HOME to a writable one"},
      {"XDG_CACHE_HOME=/proc/version", "/proc/version/pocl/kcache",
       "(XDG_CACHE_HOME=/proc/version: ",
       ", or XDG_CACHE_HOME to a writable one"},
      {"POCL_CACHE_DIR=/proc/version/x", "/proc/version/x",
       "(POCL_CACHE_DIR=/proc/version/x: ", "set POCL_CACHE_DIR to a writable"},
  };
  const char *doctor[] = {kiln_bin(), "info", "--doctor", NULL};
  const char *demo[] = {"/bin/sh", "-c", "\"$0\" demo 2>&1", kiln_bin(), NULL};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    /* RUSTICL_ENABLE off: with Mesa's rusticl offering llvmpipe (CI's
     * rusticl stage) a device would remain and the commands succeed. */
    const char *env[] = {"XDG_CACHE_HOME", "POCL_CACHE_DIR", "KILN_CACHE_DIR",
                         "KILN_DEVICE",    "RUSTICL_ENABLE", cases[i][0],
                         NULL};
    const char *const *argvs[] = {doctor, demo};
    for (size_t a = 0; a < 2; a++) {
      run_result r = run(env, argvs[a]);
      assert_int_not_equal(r.status, 0);
      squeeze(r.out);
      char want[300];
      snprintf(want, sizeof want, "PoCL cannot create its kernel cache %s %s",
               cases[i][1], cases[i][2]);
      if (strstr(r.out, want) == NULL || strstr(r.out, cases[i][3]) == NULL ||
          strstr(r.out, "POCL_CACHE_DIR=/tmp/pocl-cache-") == NULL)
        fail_msg("%s, kiln %s: lacks \"%s\" or \"%s\":\n%s", cases[i][0],
                 a ? "demo" : "info --doctor", want, cases[i][3], r.out);
      /* The doctor lists Mesa's platforms too; the error names PoCL's. */
      if (strstr(r.out, "install an OpenCL driver") != NULL ||
          (a == 1 && strstr(r.out, "Clover") != NULL))
        fail_msg("%s, kiln %s: advice for a missing driver:\n%s", cases[i][0],
                 a ? "demo" : "info --doctor", r.out);
      free(r.out);
    }
  }
  /* PoCL's cache elsewhere: kiln works with HOME unwritable. */
  char pocl_dir[] = "/tmp/kiln-test-info-pocl-XXXXXX";
  assert_non_null(mkdtemp(pocl_dir));
  char pocl_env[300];
  snprintf(pocl_env, sizeof pocl_env, "POCL_CACHE_DIR=%s", pocl_dir);
  const char *env[] = {"XDG_CACHE_HOME", "KILN_CACHE_DIR", "KILN_DEVICE",
                       "HOME=/proc/version", pocl_env, NULL};
  const char *check[] = {kiln_bin(), "info", "--check", NULL};
  run_result r = run(env, check);
  if (r.status != 0)
    fail_msg("kiln info --check with HOME=/proc/version and %s: status %d\n%s",
             pocl_env, r.status, r.out);
  free(r.out);
  char cmd[400];
  snprintf(cmd, sizeof cmd, "rm -rf %s", pocl_dir);
  assert_int_equal(system(cmd), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_usage_errors),
      cmocka_unit_test(test_fake_icd_modes),
      cmocka_unit_test(test_doctor_names_broken_entries),
      cmocka_unit_test(test_doctor_bad_loader_variables),
      cmocka_unit_test(test_select_and_explain),
      cmocka_unit_test(test_check_and_demo),
      cmocka_unit_test(test_tuning_file_reasons),
      cmocka_unit_test(test_unwritable_home),
  };
  return KILN_TEST_RUN("info", tests, false);
}
