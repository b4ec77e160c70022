#include "harness.h"

#include "core/internal.h" /* the profile's kernel family */

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static kiln_device_list *device_list;
static kiln_selection *selection;

size_t kiln_test_device_count(void) {
  return selection ? kiln_selection_get_count(selection) : 0;
}

const kiln_device *kiln_test_device(size_t index) {
  return kiln_selection_get(selection, index);
}

void kiln_test_open(size_t index, kiln_context **ctx, kiln_queue **queue) {
  assert_kiln_ok(kiln_context_create(kiln_test_device(index), NULL, ctx));
  if (queue != NULL)
    assert_kiln_ok(kiln_queue_create(*ctx, KILN_QUEUE_PROFILING, queue));
}

void kiln_test_open_family(size_t index, bool other, kiln_context **ctx,
                           kiln_queue **queue) {
  kiln_test_open(index, ctx, queue);
  if (!other)
    return;
  const char *forced =
      (*ctx)->backend->tuning->family == KILN_FAMILY_CPU ? "nvidia" : "pocl";
  kiln_test_close(*ctx, *queue);
  kiln_context_options opts = {.profile = forced};
  assert_kiln_ok(kiln_context_create(kiln_test_device(index), &opts, ctx));
  assert_kiln_ok(kiln_queue_create(*ctx, KILN_QUEUE_PROFILING, queue));
}

void kiln_test_close(kiln_context *ctx, kiln_queue *queue) {
  assert_kiln_ok(kiln_queue_destroy(queue));
  assert_kiln_ok(kiln_context_destroy(ctx));
}

bool kiln_test_trace_to(const char *name, char *path, size_t size) {
  const char *dir = getenv("KILN_CACHE_DIR");
  snprintf(path, size, "%s%s%s", dir != NULL ? dir : "",
           dir != NULL ? "/" : "", name);
  if (dir != NULL) {
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "mkdir -p '%s'", dir);
    if (system(cmd) != 0)
      return false;
  }
  remove(path);
  setenv("KILN_TRACE", path, 1);
  return true;
}

double kiln_test_now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

void kiln_test_fill_random(float *data, size_t count, float lo, float hi,
                           uint32_t seed) {
  uint32_t state = seed ? seed : 1u;
  for (size_t i = 0; i < count; i++) {
    /* xorshift32: deterministic across platforms, unlike rand(). */
    state ^= state << 13;
    state ^= state >> 17;
    state ^= state << 5;
    data[i] = lo + (hi - lo) * (float)(state >> 8) / (float)(1u << 24);
  }
}

void kiln_test_print_skip(const char *test, const char *reason) {
  printf("# SKIP %s: %s\n", test, reason);
  fflush(stdout);
}

static bool require_device(void) {
  const char *v = getenv("KILN_REQUIRE_DEVICE");
  return v != NULL && strcmp(v, "1") == 0;
}

/* Select the devices under test; 0 on success, 1 on a hard failure. */
static int select_devices(void) {
  const char *selector = getenv("KILN_TEST_DEVICE");
  if (selector == NULL || selector[0] == '\0')
    selector = "all";
  if (kiln_device_list_create(&device_list) != KILN_OK) {
    fprintf(stderr, "# device enumeration failed: %s\n", kiln_last_error());
    return 1;
  }
  if (kiln_selection_create(device_list, selector, &selection) != KILN_OK) {
    fprintf(stderr, "# KILN_TEST_DEVICE=%s: %s\n", selector, kiln_last_error());
    return 1;
  }
  for (size_t i = 0; i < kiln_test_device_count(); i++) {
    const kiln_device_info *info = kiln_device_get_info(kiln_test_device(i));
    fprintf(stderr, "# testing on %zu:%zu %s (%s, profile %s)\n",
            info->platform_index, info->device_index, info->name,
            info->platform_name, info->profile);
  }
  return 0;
}

int kiln_test_run(const char *group, const struct CMUnitTest *tests,
                  size_t count, bool needs_device) {
  if (select_devices() != 0)
    return 1;
  int failed;
  if (needs_device && kiln_test_device_count() == 0) {
    if (require_device()) {
      fprintf(stderr, "# no device matches KILN_TEST_DEVICE and "
                      "KILN_REQUIRE_DEVICE=1\n");
      return 1;
    }
    /* A TAP plan of zero tests with a SKIP directive: meson reports the
     * whole binary as skipped, not passed and not failed. (cmocka's own
     * skip() prints "not ok ... # SKIP", which meson 1.0 counts as a
     * failure.) */
    printf("1..0 # SKIP %s: no device matches KILN_TEST_DEVICE\n", group);
    kiln_selection_destroy(selection);
    kiln_device_list_destroy(device_list);
    return 0;
  }
  failed = _cmocka_run_group_tests(group, tests, count, NULL, NULL);
  kiln_selection_destroy(selection);
  kiln_device_list_destroy(device_list);
  return failed ? 1 : 0;
}

void kiln_test_apply_env(const char *const *env) {
  for (size_t i = 0; env != NULL && env[i] != NULL; i++) {
    const char *eq = strchr(env[i], '=');
    if (eq == NULL) {
      unsetenv(env[i]);
    } else {
      char name[256];
      snprintf(name, sizeof name, "%.*s", (int)(eq - env[i]), env[i]);
      setenv(name, eq + 1, 1);
    }
  }
}
