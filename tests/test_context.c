/* Contexts: creation on every test device, the live-children rule, the
 * profile in force (options, KILN_PROFILE) and create_default. */
#include <stdio.h>
#include <stdlib.h>

#include "harness.h"
#include "core/internal.h"

static const char *const forced_profiles[] = {"nvidia", "amd", "intel", "pocl",
                                              "generic"};
#define FORCED_COUNT (sizeof forced_profiles / sizeof forced_profiles[0])

static void test_create_destroy_every_device(void **state) {
  (void)state;
  unsetenv("KILN_PROFILE");
  FOR_EACH_TEST_DEVICE(i) {
    const kiln_device *device = kiln_test_device(i);
    const kiln_device_info *dinfo = kiln_device_get_info(device);
    kiln_context *ctx = NULL;
    assert_kiln_ok(kiln_context_create(device, NULL, &ctx));
    assert_non_null(ctx);
    const kiln_device_info *info = kiln_context_get_device_info(ctx);
    assert_non_null(info);
    /* The context's copy, not the list's record. */
    assert_ptr_not_equal(info, dinfo);
    assert_string_equal(info->name, dinfo->name);
    assert_string_equal(info->stable_id, dinfo->stable_id);
    assert_int_equal(info->max_alloc_bytes, dinfo->max_alloc_bytes);
    assert_string_equal(kiln_context_get_profile(ctx), dinfo->profile);
    assert_int_equal(atomic_load(&ctx->children), 0);
    assert_kiln_ok(kiln_context_destroy(ctx));

    /* Options with no profile and no flags behave like NULL options. */
    kiln_context_options options = {0};
    assert_kiln_ok(kiln_context_create(device, &options, &ctx));
    assert_string_equal(kiln_context_get_profile(ctx), dinfo->profile);
    assert_kiln_ok(kiln_context_destroy(ctx));

    options.flags = KILN_CONTEXT_NO_CACHE;
    assert_kiln_ok(kiln_context_create(device, &options, &ctx));
    assert_int_equal(ctx->flags, KILN_CONTEXT_NO_CACHE);
    assert_kiln_ok(kiln_context_destroy(ctx));
  }
}

static void test_bad_arguments(void **state) {
  (void)state;
  kiln_context *ctx = (kiln_context *)(uintptr_t)1;
  assert_kiln_status(kiln_context_create(NULL, NULL, &ctx),
                     KILN_ERR_NULL_POINTER);
  assert_last_error_contains("kiln_context_create: device is NULL");
  assert_null(ctx);
  assert_kiln_status(kiln_context_create(kiln_test_device(0), NULL, NULL),
                     KILN_ERR_NULL_POINTER);
  assert_last_error_contains("kiln_context_create: out is NULL");
  kiln_context_options options = {.flags = 0x80};
  assert_kiln_status(kiln_context_create(kiln_test_device(0), &options, &ctx),
                     KILN_ERR_INVALID_ARGUMENT);
  assert_last_error_contains("unknown bits 0x80");
  assert_null(ctx);

  assert_kiln_ok(kiln_context_destroy(NULL));
  assert_null(kiln_context_get_device_info(NULL));
  assert_null(kiln_context_get_profile(NULL));
}

/* Destroying a context with one live child fails and names the count; it
 * succeeds once the child is gone. */
static void expect_busy(kiln_context *ctx, size_t children) {
  char text[64];
  snprintf(text, sizeof text, "%zu object", children);
  assert_kiln_status(kiln_context_destroy(ctx), KILN_ERR_BUSY);
  assert_last_error_contains("kiln_context_destroy: ");
  assert_last_error_contains(text);
  assert_last_error_contains("still alive");
}

static void test_busy_with_children(void **state) {
  (void)state;
  FOR_EACH_TEST_DEVICE(i) {
    kiln_context *ctx = NULL;
    assert_kiln_ok(kiln_context_create(kiln_test_device(i), NULL, &ctx));

    kiln_queue *queue = NULL;
    assert_kiln_ok(kiln_queue_create(ctx, 0, &queue));
    expect_busy(ctx, 1);

    kiln_buffer *buffer = NULL;
    assert_kiln_ok(kiln_buffer_create(ctx, 256, 0, &buffer));
    expect_busy(ctx, 2);

    kiln_buffer *view = NULL;
    assert_kiln_ok(kiln_buffer_create_sub(buffer, 0, 64, 0, &view));
    expect_busy(ctx, 3);

    kiln_event *event = NULL;
    assert_kiln_ok(kiln_queue_marker(queue, 0, NULL, &event));
    expect_busy(ctx, 4);
    assert_kiln_ok(kiln_event_wait(event));

    /* The context is still usable after a refused destroy. */
    uint32_t value = 0x12345678u, back = 0;
    assert_kiln_ok(kiln_buffer_write_sync(
        queue, &value, &(kiln_range){buffer, 1, 1, KILN_U32}));
    assert_kiln_ok(kiln_buffer_read_sync(
        queue, &(kiln_range){buffer, 1, 1, KILN_U32}, &back));
    assert_int_equal(back, value);

    assert_kiln_ok(kiln_buffer_destroy(view));
    assert_kiln_ok(kiln_buffer_destroy(buffer));
    expect_busy(ctx, 2);
    assert_kiln_ok(kiln_queue_destroy(queue));
    /* The event outlives its queue and still pins the context. */
    expect_busy(ctx, 1);
    kiln_event *again = kiln_event_retain(event);
    assert_ptr_equal(again, event);
    kiln_event_release(event);
    expect_busy(ctx, 1);
    kiln_event_release(again);
    assert_int_equal(atomic_load(&ctx->children), 0);
    assert_kiln_ok(kiln_context_destroy(ctx));
  }
}

static void test_profile_forced_by_options(void **state) {
  (void)state;
  /* Options win over the environment. */
  setenv("KILN_PROFILE", "amd", 1);
  FOR_EACH_TEST_DEVICE(i) {
    for (size_t p = 0; p < FORCED_COUNT; p++) {
      kiln_context_options options = {.profile = forced_profiles[p]};
      kiln_context *ctx = NULL;
      assert_kiln_ok(kiln_context_create(kiln_test_device(i), &options, &ctx));
      assert_string_equal(kiln_context_get_profile(ctx), forced_profiles[p]);
      assert_ptr_equal(ctx->backend, kiln__backend_find(forced_profiles[p]));
      /* The device record keeps the matched profile. */
      assert_string_equal(kiln_context_get_device_info(ctx)->profile,
                          kiln_device_get_info(kiln_test_device(i))->profile);
      assert_kiln_ok(kiln_context_destroy(ctx));
    }
    /* Every registered profile can be forced, in any letter case. */
    for (size_t p = 0; p < kiln__backend_count; p++) {
      char upper[32];
      snprintf(upper, sizeof upper, "%s", kiln__backends[p]->name);
      for (char *c = upper; *c; c++)
        if (*c >= 'a' && *c <= 'z')
          *c = (char)(*c - 'a' + 'A');
      kiln_context_options options = {.profile = upper};
      kiln_context *ctx = NULL;
      assert_kiln_ok(kiln_context_create(kiln_test_device(i), &options, &ctx));
      assert_string_equal(kiln_context_get_profile(ctx),
                          kiln__backends[p]->name);
      assert_kiln_ok(kiln_context_destroy(ctx));
    }
  }
  unsetenv("KILN_PROFILE");
}

static void test_profile_forced_by_env(void **state) {
  (void)state;
  FOR_EACH_TEST_DEVICE(i) {
    for (size_t p = 0; p < FORCED_COUNT; p++) {
      setenv("KILN_PROFILE", forced_profiles[p], 1);
      kiln_context *ctx = NULL;
      assert_kiln_ok(kiln_context_create(kiln_test_device(i), NULL, &ctx));
      assert_string_equal(kiln_context_get_profile(ctx), forced_profiles[p]);
      assert_kiln_ok(kiln_context_destroy(ctx));
    }
    /* Set but empty counts as unset. */
    setenv("KILN_PROFILE", "", 1);
    kiln_context *ctx = NULL;
    assert_kiln_ok(kiln_context_create(kiln_test_device(i), NULL, &ctx));
    assert_string_equal(kiln_context_get_profile(ctx),
                        kiln_device_get_info(kiln_test_device(i))->profile);
    assert_kiln_ok(kiln_context_destroy(ctx));
  }
  unsetenv("KILN_PROFILE");
}

static void test_profile_unknown(void **state) {
  (void)state;
  unsetenv("KILN_PROFILE");
  kiln_context *ctx = (kiln_context *)(uintptr_t)1;
  kiln_context_options options = {.profile = "voodoo"};
  assert_kiln_status(kiln_context_create(kiln_test_device(0), &options, &ctx),
                     KILN_ERR_NOT_FOUND);
  assert_null(ctx);
  assert_last_error_contains("unknown profile 'voodoo'");
  assert_last_error_contains("kiln_context_options.profile");
  for (size_t p = 0; p < FORCED_COUNT; p++)
    assert_last_error_contains(forced_profiles[p]);

  setenv("KILN_PROFILE", "voodoo3", 1);
  assert_kiln_status(kiln_context_create(kiln_test_device(0), NULL, &ctx),
                     KILN_ERR_NOT_FOUND);
  assert_last_error_contains("unknown profile 'voodoo3'");
  assert_last_error_contains("KILN_PROFILE");
  assert_last_error_contains("nvidia, ");
  assert_last_error_contains("generic");
  /* create_default reports the same failure. */
  assert_kiln_status(kiln_context_create_default("all", &ctx),
                     KILN_ERR_NOT_FOUND);
  assert_last_error_contains("voodoo3");
  assert_last_error_contains("the old name of KILN_BACKEND");
  /* KILN_BACKEND, the new name, wins over the old one. */
  setenv("KILN_BACKEND", "voodoo4", 1);
  assert_kiln_status(kiln_context_create(kiln_test_device(0), NULL, &ctx),
                     KILN_ERR_NOT_FOUND);
  assert_last_error_contains("unknown profile 'voodoo4' (from the "
                             "KILN_BACKEND environment variable)");
  setenv("KILN_BACKEND", "amd", 1);
  assert_kiln_ok(kiln_context_create(kiln_test_device(0), NULL, &ctx));
  assert_string_equal(kiln_context_get_profile(ctx), "amd");
  assert_kiln_ok(kiln_context_destroy(ctx));
  /* KILN_PROFILE=1, tried by someone looking for profiling, says where. */
  unsetenv("KILN_BACKEND");
  setenv("KILN_PROFILE", "1", 1);
  assert_kiln_status(kiln_context_create(kiln_test_device(0), NULL, &ctx),
                     KILN_ERR_NOT_FOUND);
  assert_last_error_contains("to see what ran, set KILN_TRACE");
  unsetenv("KILN_PROFILE");
}

static void test_create_default(void **state) {
  (void)state;
  unsetenv("KILN_PROFILE");
  const char *selector = getenv("KILN_TEST_DEVICE");
  if (selector == NULL || selector[0] == '\0')
    selector = "all";
  kiln_context *ctx = NULL;
  assert_kiln_ok(kiln_context_create_default(selector, &ctx));
  /* The first device the selector takes, as the harness saw it. */
  assert_string_equal(kiln_context_get_device_info(ctx)->stable_id,
                      kiln_device_get_info(kiln_test_device(0))->stable_id);
  /* Usable after the device list is gone. */
  kiln_queue *queue = NULL;
  kiln_buffer *buffer = NULL;
  assert_kiln_ok(kiln_queue_create(ctx, 0, &queue));
  assert_kiln_ok(kiln_buffer_create(ctx, 64, 0, &buffer));
  uint64_t value = 0x1122334455667788ull, back = 0;
  assert_kiln_ok(kiln_buffer_write_sync(queue, &value,
                                        &(kiln_range){buffer, 2, 2, KILN_U32}));
  assert_kiln_ok(kiln_buffer_read_sync(
      queue, &(kiln_range){buffer, 2, 2, KILN_U32}, &back));
  assert_true(back == value);
  assert_kiln_ok(kiln_buffer_destroy(buffer));
  assert_kiln_ok(kiln_queue_destroy(queue));
  assert_kiln_ok(kiln_context_destroy(ctx));

  ctx = (kiln_context *)(uintptr_t)1;
  assert_kiln_status(kiln_context_create_default("gpu,,cpu", &ctx),
                     KILN_ERR_SELECTOR_SYNTAX);
  assert_null(ctx);
  assert_kiln_status(
      kiln_context_create_default("name:no-such-device-anywhere", &ctx),
      KILN_ERR_NO_DEVICE);
  assert_null(ctx);
  assert_kiln_status(kiln_context_create_default("all", NULL),
                     KILN_ERR_NULL_POINTER);
  assert_last_error_contains("kiln_context_create_default: out is NULL");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_create_destroy_every_device),
      cmocka_unit_test(test_bad_arguments),
      cmocka_unit_test(test_busy_with_children),
      cmocka_unit_test(test_profile_forced_by_options),
      cmocka_unit_test(test_profile_forced_by_env),
      cmocka_unit_test(test_profile_unknown),
      cmocka_unit_test(test_create_default),
  };
  return KILN_TEST_RUN("context", tests, true);
}
