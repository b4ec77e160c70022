/* Programs: creation, builds that succeed and fail (log in the last error and
 * in kiln_program_get_build_log), state errors and destroy rules. The same
 * sources recur across tests so that kiln's cache (a directory under the
 * build tree, see meson.build) keeps the suite quick. */
#include "harness.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char good_source[] =
    "__kernel void scale(__global float *x, float a) {\n"
    "  size_t i = get_global_id(0);\n"
    "  x[i] = x[i] * a;\n"
    "}\n";

/* The error is on line 3; the identifier lets tests find it in the log. */
static const char bad_source[] =
    "__kernel void broken(__global float *x) {\n"
    "  size_t i = get_global_id(0);\n"
    "  x[i] = kiln_undeclared_identifier_42 * 2.0f;\n"
    "}\n";

static void test_create_bad_input(void **state) {
  (void)state;
  kiln_program *program = (kiln_program *)1;
  assert_kiln_status(kiln_program_create(NULL, good_source, 0, &program),
                     KILN_ERR_NULL_POINTER);
  assert_last_error_contains("ctx");
  assert_null(program);
  FOR_EACH_TEST_DEVICE(d) {
    kiln_context *ctx;
    kiln_test_open(d, &ctx, NULL);
    assert_kiln_status(kiln_program_create(ctx, NULL, 0, &program),
                       KILN_ERR_NULL_POINTER);
    assert_last_error_contains("source");
    assert_kiln_status(kiln_program_create(ctx, good_source, 0, NULL),
                       KILN_ERR_NULL_POINTER);
    assert_last_error_contains("out");
    assert_kiln_status(kiln_program_create(ctx, "", 0, &program),
                       KILN_ERR_INVALID_SIZE);
    assert_last_error_contains("empty");
    /* A length running past the string's NUL. */
    assert_kiln_status(
        kiln_program_create(ctx, good_source, sizeof good_source, &program),
        KILN_ERR_INVALID_ARGUMENT);
    assert_last_error_contains("NUL");
    assert_kiln_ok(kiln_context_destroy(ctx));
  }
}

static void test_build_bad_input(void **state) {
  (void)state;
  assert_kiln_status(kiln_program_build(NULL, NULL, 0), KILN_ERR_NULL_POINTER);
  assert_last_error_contains("program is NULL");
  assert_string_equal(kiln_program_get_build_log(NULL), "");
  assert_false(kiln_program_is_from_cache(NULL));
  assert_kiln_ok(kiln_program_destroy(NULL));
  FOR_EACH_TEST_DEVICE(d) {
    kiln_context *ctx;
    kiln_test_open(d, &ctx, NULL);
    kiln_program *program;
    assert_kiln_ok(kiln_program_create(ctx, good_source, 0, &program));
    assert_string_equal(kiln_program_get_build_log(program), "");
    assert_kiln_status(kiln_program_build(program, NULL, 0x80),
                       KILN_ERR_INVALID_ARGUMENT);
    assert_last_error_contains("unknown flags 0x80");
    /* Kernels need a built program. */
    kiln_kernel *kernel = (kiln_kernel *)1;
    assert_kiln_status(kiln_kernel_create(program, "scale", &kernel),
                       KILN_ERR_INVALID_STATE);
    assert_last_error_contains("not built");
    assert_null(kernel);
    assert_kiln_ok(kiln_program_build(program, NULL, 0));
    assert_kiln_status(kiln_program_build(program, NULL, 0),
                       KILN_ERR_INVALID_STATE);
    assert_last_error_contains("already built");
    assert_kiln_ok(kiln_program_destroy(program));
    assert_kiln_ok(kiln_context_destroy(ctx));
  }
}

static void test_build_failure(void **state) {
  (void)state;
  FOR_EACH_TEST_DEVICE(d) {
    kiln_context *ctx;
    kiln_test_open(d, &ctx, NULL);
    const kiln_device_info *info = kiln_context_get_device_info(ctx);
    kiln_program *program;
    assert_kiln_ok(kiln_program_create(ctx, bad_source, 0, &program));
    assert_kiln_status(kiln_program_build(program, NULL, 0),
                       KILN_ERR_BUILD_FAILED);
    assert_last_error_contains("clBuildProgram failed");
    assert_last_error_contains("CL_BUILD_PROGRAM_FAILURE (-11)");
    assert_last_error_contains(info->name);
    assert_last_error_contains("build log excerpt");
    assert_last_error_contains("kiln_undeclared_identifier_42");
    assert_last_error_contains("Hint:");
    assert_int_equal(kiln_last_cl_error(), -11);
    /* The compiler names the user's source and its line (3), not a file
     * of the driver's: "<source>:3:..." (clang-based compilers) or
     * "<source>(3)" (EDG-based ones). */
    assert_true(strstr(kiln_last_error(), "<source>:3:") != NULL ||
                strstr(kiln_last_error(), "<source>(3)") != NULL);
    assert_null(strstr(kiln_last_error(), "tempfile"));
    /* The full log stays on the program, and the program is not built. */
    const char *log = kiln_program_get_build_log(program);
    assert_non_null(strstr(log, "kiln_undeclared_identifier_42"));
    kiln_kernel *kernel;
    assert_kiln_status(kiln_kernel_create(program, "broken", &kernel),
                       KILN_ERR_INVALID_STATE);
    assert_kiln_ok(kiln_program_destroy(program));

    /* create_built leaves *out NULL, the excerpt in the last error and the
     * full log in kiln_last_build_log, which the hint names. */
    program = (kiln_program *)1;
    assert_kiln_status(kiln_program_create_built(ctx, bad_source, NULL, &program),
                       KILN_ERR_BUILD_FAILED);
    assert_null(program);
    assert_last_error_contains("kiln_undeclared_identifier_42");
    assert_last_error_contains("kiln_last_build_log");
    assert_non_null(strstr(kiln_last_build_log(), "kiln_undeclared_identifier_42"));
    /* A successful build leaves the last failure's log alone. */
    kiln_program *good;
    assert_kiln_ok(kiln_program_create_built(ctx, good_source, NULL, &good));
    assert_kiln_ok(kiln_program_destroy(good));
    assert_non_null(strstr(kiln_last_build_log(), "kiln_undeclared_identifier_42"));

    /* Options the compiler refuses are a build failure naming them. */
    assert_kiln_status(
        kiln_program_create_built(ctx, good_source, "-kiln-bogus-option", &program),
        KILN_ERR_BUILD_FAILED);
    assert_last_error_contains("-kiln-bogus-option");
    assert_kiln_ok(kiln_context_destroy(ctx));
  }
}

/* kiln_last_build_log is per thread: a failure on another thread leaves
 * this thread's log alone, and that thread sees its own. */
struct failing_build {
  kiln_context *ctx;
  bool found_own;
};

static void *fail_a_build(void *arg) {
  struct failing_build *fb = arg;
  kiln_program *p = NULL;
  kiln_status st = kiln_program_create_built(
      fb->ctx, "__kernel void other(void) { other_thread_undeclared_7; }\n",
      NULL, &p);
  fb->found_own = st == KILN_ERR_BUILD_FAILED && p == NULL &&
                  strstr(kiln_last_build_log(), "other_thread_undeclared_7");
  return NULL;
}

static void test_last_build_log_per_thread(void **state) {
  (void)state;
  FOR_EACH_TEST_DEVICE(d) {
    kiln_context *ctx;
    kiln_test_open(d, &ctx, NULL);
    kiln_program *p = NULL;
    assert_kiln_status(kiln_program_create_built(ctx, bad_source, NULL, &p),
                       KILN_ERR_BUILD_FAILED);
    struct failing_build fb = {.ctx = ctx};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, fail_a_build, &fb), 0);
    assert_int_equal(pthread_join(t, NULL), 0);
    assert_true(fb.found_own);
    assert_non_null(strstr(kiln_last_build_log(), "kiln_undeclared_identifier_42"));
    assert_null(strstr(kiln_last_build_log(), "other_thread_undeclared_7"));
    assert_kiln_ok(kiln_context_destroy(ctx));
  }
}

static void test_long_log_is_bounded(void **state) {
  (void)state;
  /* Hundreds of errors: the last error quotes only the first lines. */
  size_t cap = 64 * 1024, used = 0;
  char *source = malloc(cap);
  assert_non_null(source);
  used += (size_t)snprintf(source + used, cap - used,
                           "__kernel void many(__global int *x) {\n");
  for (int i = 0; i < 200; i++)
    used += (size_t)snprintf(source + used, cap - used,
                             "  x[%d] = undeclared_%d;\n", i, i);
  snprintf(source + used, cap - used, "}\n");
  FOR_EACH_TEST_DEVICE(d) {
    kiln_context *ctx;
    kiln_test_open(d, &ctx, NULL);
    kiln_program *program;
    assert_kiln_ok(kiln_program_create(ctx, source, 0, &program));
    assert_kiln_status(kiln_program_build(program, NULL, KILN_BUILD_NO_CACHE),
                       KILN_ERR_BUILD_FAILED);
    assert_last_error_contains("undeclared_0");
    assert_last_error_contains("[...]");
    assert_true(strlen(kiln_last_error()) < 3000);
    assert_true(strlen(kiln_program_get_build_log(program)) >
                strlen(kiln_last_error()));
    assert_kiln_ok(kiln_program_destroy(program));
    assert_kiln_ok(kiln_context_destroy(ctx));
  }
  free(source);
}

static void test_build_and_destroy_rules(void **state) {
  (void)state;
  FOR_EACH_TEST_DEVICE(d) {
    kiln_context *ctx;
    kiln_test_open(d, &ctx, NULL);
    kiln_program *program;
    assert_kiln_ok(kiln_program_create_built(ctx, good_source, "-DUNUSED=1",
                                             &program));
    assert_non_null(kiln_program_get_build_log(program));
    kiln_kernel *kernel;
    assert_kiln_ok(kiln_kernel_create(program, "scale", &kernel));
    assert_int_equal(kiln_kernel_get_arg_count(kernel), 2);
    /* Neither the program nor the context goes while the kernel lives. */
    assert_kiln_status(kiln_program_destroy(program), KILN_ERR_BUSY);
    assert_last_error_contains("1 kernel");
    assert_kiln_status(kiln_context_destroy(ctx), KILN_ERR_BUSY);
    assert_kiln_ok(kiln_kernel_destroy(kernel));
    assert_kiln_ok(kiln_kernel_destroy(NULL));
    assert_kiln_ok(kiln_program_destroy(program));
    assert_kiln_ok(kiln_context_destroy(ctx));
  }
}

static void test_no_cache_flag(void **state) {
  (void)state;
  FOR_EACH_TEST_DEVICE(d) {
    kiln_context *ctx;
    kiln_test_open(d, &ctx, NULL);
    /* Built once through the cache, so an entry exists ... */
    kiln_program *program;
    assert_kiln_ok(kiln_program_create_built(ctx, good_source, NULL, &program));
    assert_kiln_ok(kiln_program_destroy(program));
    /* ... which KILN_BUILD_NO_CACHE does not read. */
    assert_kiln_ok(kiln_program_create(ctx, good_source, 0, &program));
    assert_kiln_ok(kiln_program_build(program, NULL, KILN_BUILD_NO_CACHE));
    assert_false(kiln_program_is_from_cache(program));
    assert_kiln_ok(kiln_program_destroy(program));
    assert_kiln_ok(kiln_context_destroy(ctx));
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_create_bad_input),
      cmocka_unit_test(test_build_bad_input),
      cmocka_unit_test(test_build_failure),
      cmocka_unit_test(test_last_build_log_per_thread),
      cmocka_unit_test(test_long_log_is_bounded),
      cmocka_unit_test(test_build_and_destroy_rules),
      cmocka_unit_test(test_no_cache_flag),
  };
  return KILN_TEST_RUN("program", tests, true);
}
