/* Status names and strings, OpenCL error names, the thread-local last error
 * and the version. Needs no device. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "harness.h"
#include "core/internal.h"

static const kiln_status all_statuses[] = {
#define VALUE_(name, value, text) KILN_##name,
    KILN_STATUS_MAP(VALUE_)
#undef VALUE_
};
static const char *const all_names[] = {
#define NAME_(name, value, text) "KILN_" #name,
    KILN_STATUS_MAP(NAME_)
#undef NAME_
};
#define STATUS_COUNT (sizeof all_statuses / sizeof all_statuses[0])

static void test_status_names_distinct(void **state) {
  (void)state;
  assert_true(STATUS_COUNT >= 20);
  for (size_t i = 0; i < STATUS_COUNT; i++) {
    const char *name = kiln_status_name(all_statuses[i]);
    const char *text = kiln_status_string(all_statuses[i]);
    assert_string_equal(name, all_names[i]);
    assert_true(text[0] != '\0');
    assert_string_not_equal(text, "unknown status");
    for (size_t j = 0; j < i; j++) {
      assert_int_not_equal(all_statuses[i], all_statuses[j]);
      assert_string_not_equal(name, kiln_status_name(all_statuses[j]));
      assert_string_not_equal(text, kiln_status_string(all_statuses[j]));
    }
  }
  assert_int_equal(KILN_OK, 0);
  assert_string_equal(kiln_status_name(KILN_OK), "KILN_OK");
  for (size_t i = 1; i < STATUS_COUNT; i++)
    assert_true(all_statuses[i] < 0);
}

static void test_status_unknown(void **state) {
  (void)state;
  assert_string_equal(kiln_status_name((kiln_status)-12345),
                      "KILN_UNKNOWN_STATUS");
  assert_string_equal(kiln_status_name((kiln_status)7), "KILN_UNKNOWN_STATUS");
  assert_string_equal(kiln_status_string((kiln_status)-12345),
                      "unknown status");
}

static void test_cl_error_names(void **state) {
  (void)state;
  assert_string_equal(kiln_cl_error_name(0), "CL_SUCCESS");
  assert_string_equal(kiln_cl_error_name(-1), "CL_DEVICE_NOT_FOUND");
  assert_string_equal(kiln_cl_error_name(-30), "CL_INVALID_VALUE");
  assert_string_equal(kiln_cl_error_name(-1001), "CL_PLATFORM_NOT_FOUND_KHR");
  assert_string_equal(kiln_cl_error_name(-1121), "CL_CONTEXT_TERMINATED_KHR");
  assert_string_equal(kiln_cl_error_name(-61), "CL_INVALID_BUFFER_SIZE");
  assert_string_equal(kiln_cl_error_name(-12345), "CL_UNKNOWN_ERROR");
  assert_string_equal(kiln_cl_error_name(-29), "CL_UNKNOWN_ERROR");
  assert_string_equal(kiln_cl_error_name(5), "CL_UNKNOWN_ERROR");
}

static void test_last_error_contract(void **state) {
  (void)state;
  kiln_clear_error();
  assert_string_equal(kiln_last_error(), "");
  assert_int_equal(kiln_last_status(), KILN_OK);
  assert_int_equal(kiln_last_cl_error(), 0);

  /* A failure that did not come from OpenCL. */
  assert_kiln_status(kiln_event_wait(NULL), KILN_ERR_NULL_POINTER);
  assert_last_error_contains("kiln_event_wait: event is NULL");
  assert_int_equal(kiln_last_status(), KILN_ERR_NULL_POINTER);
  assert_int_equal(kiln_last_cl_error(), 0);

  /* Successful calls leave the message alone. */
  assert_kiln_ok(kiln_context_destroy(NULL));
  assert_last_error_contains("kiln_event_wait: event is NULL");

  /* An OpenCL failure keeps the raw code aside and maps the status. */
  assert_kiln_status(kiln__fail_cl(CL_INVALID_BUFFER_SIZE, "clCreateBuffer",
                                   NULL, "size %d", 7),
                     KILN_ERR_INVALID_SIZE);
  assert_last_error_contains("clCreateBuffer failed: CL_INVALID_BUFFER_SIZE "
                             "(-61): size 7");
  assert_int_equal(kiln_last_cl_error(), -61);
  assert_int_equal(kiln_last_status(), KILN_ERR_INVALID_SIZE);

  assert_kiln_status(kiln__fail_cl(CL_PLATFORM_NOT_FOUND_KHR,
                                   "clGetPlatformIDs", NULL, "%s", "probe"),
                     KILN_ERR_NO_PLATFORM);
  assert_last_error_contains("Hint:");

  kiln_clear_error();
  assert_string_equal(kiln_last_error(), "");
  assert_int_equal(kiln_last_status(), KILN_OK);
  assert_int_equal(kiln_last_cl_error(), 0);
}

/* Two threads fail differently at the same time; each must read its own
 * message, status and OpenCL code afterwards. */
struct thread_case {
  pthread_barrier_t *barrier;
  int which;
  kiln_status status;
  int32_t cl_error;
  char message[256];
};

static void *fail_in_thread(void *arg) {
  struct thread_case *c = arg;
  kiln_clear_error();
  if (c->which == 0) {
    kiln_event_wait(NULL);
  } else {
    kiln__fail_cl(CL_INVALID_VALUE, "clThreadTwo", NULL, "second thread");
  }
  /* Both have failed before either reads. */
  pthread_barrier_wait(c->barrier);
  c->status = kiln_last_status();
  c->cl_error = kiln_last_cl_error();
  snprintf(c->message, sizeof c->message, "%s", kiln_last_error());
  pthread_barrier_wait(c->barrier);
  return NULL;
}

static void test_last_error_thread_local(void **state) {
  (void)state;
  kiln_clear_error();
  kiln_buffer_create(NULL, 16, 0, NULL); /* the main thread's own failure */
  pthread_barrier_t barrier;
  assert_int_equal(pthread_barrier_init(&barrier, NULL, 2), 0);
  struct thread_case cases[2] = {{.barrier = &barrier, .which = 0},
                                 {.barrier = &barrier, .which = 1}};
  pthread_t threads[2];
  for (int i = 0; i < 2; i++)
    assert_int_equal(
        pthread_create(&threads[i], NULL, fail_in_thread, &cases[i]), 0);
  for (int i = 0; i < 2; i++)
    pthread_join(threads[i], NULL);
  pthread_barrier_destroy(&barrier);

  assert_int_equal(cases[0].status, KILN_ERR_NULL_POINTER);
  assert_int_equal(cases[0].cl_error, 0);
  assert_non_null(strstr(cases[0].message, "kiln_event_wait: event is NULL"));
  assert_int_equal(cases[1].status, KILN_ERR_OPENCL);
  assert_int_equal(cases[1].cl_error, CL_INVALID_VALUE);
  assert_non_null(strstr(cases[1].message, "clThreadTwo failed: "
                                           "CL_INVALID_VALUE (-30)"));
  assert_null(strstr(cases[1].message, "kiln_event_wait"));
  /* The main thread still sees its own. */
  assert_last_error_contains("kiln_buffer_create: out is NULL");
  assert_int_equal(kiln_last_status(), KILN_ERR_NULL_POINTER);
}

/* A library layered on kiln (kiln_mpi) records its failures through the
 * same thread-local last error; success and unknown values are refused. */
static void test_set_last_error(void **state) {
  (void)state;
  kiln_clear_error();
  assert_kiln_status(kiln_set_last_error(KILN_ERR_COMM, "rank 1 hung up"),
                     KILN_ERR_COMM);
  assert_string_equal(kiln_last_error(), "rank 1 hung up");
  assert_int_equal(kiln_last_status(), KILN_ERR_COMM);
  assert_int_equal(kiln_last_cl_error(), 0);
  assert_kiln_status(kiln_set_last_error(KILN_ERR_COMM, NULL),
                     KILN_ERR_NULL_POINTER);
  assert_last_error_contains("message is NULL");
  assert_kiln_status(kiln_set_last_error(KILN_OK, "fine"),
                     KILN_ERR_INVALID_ARGUMENT);
  assert_last_error_contains("status 0 is not a kiln error status");
  assert_kiln_status(kiln_set_last_error((kiln_status)-1000, "x"),
                     KILN_ERR_INVALID_ARGUMENT);
  assert_kiln_status(kiln_set_last_error((kiln_status)7, "x"),
                     KILN_ERR_INVALID_ARGUMENT);
  assert_int_equal(kiln_last_status(), KILN_ERR_INVALID_ARGUMENT);
}

static void test_version(void **state) {
  (void)state;
  assert_string_equal(kiln_version(), KILN_VERSION_STRING);
  unsigned major, minor, patch;
  char extra;
  assert_int_equal(
      sscanf(kiln_version(), "%u.%u.%u%c", &major, &minor, &patch, &extra), 3);
  assert_int_equal(major, KILN_VERSION_MAJOR);
  assert_int_equal(minor, KILN_VERSION_MINOR);
  assert_int_equal(patch, KILN_VERSION_PATCH);
  assert_int_equal(KILN_VERSION_HEX, (major << 16) | (minor << 8) | patch);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_status_names_distinct),
      cmocka_unit_test(test_status_unknown),
      cmocka_unit_test(test_cl_error_names),
      cmocka_unit_test(test_last_error_contract),
      cmocka_unit_test(test_last_error_thread_local),
      cmocka_unit_test(test_set_last_error),
      cmocka_unit_test(test_version),
  };
  return KILN_TEST_RUN("errors", tests, false);
}
