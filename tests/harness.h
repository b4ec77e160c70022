/* Shared test harness: which devices the tests run on, and assertion helpers
 * that print kiln's last error when a call fails.
 *
 * Devices come from the selector in KILN_TEST_DEVICE (default "all").
 * When no device is taken every test is skipped, unless KILN_REQUIRE_DEVICE=1,
 * which makes that a failure (CI sets it). */
#ifndef KILN_TEST_HARNESS_H
#define KILN_TEST_HARNESS_H

#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <string.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "kiln/kiln.h"

#define assert_kiln_ok(expr)                                                \
  do {                                                                      \
    kiln_status s_ = (expr);                                                \
    if (s_ != KILN_OK)                                                      \
      fail_msg("%s returned %s: %s", #expr, kiln_status_name(s_),           \
               kiln_last_error());                                          \
  } while (0)

#define assert_kiln_status(expr, expected)                                  \
  do {                                                                      \
    kiln_status s_ = (expr);                                                \
    if (s_ != (expected))                                                   \
      fail_msg("%s returned %s, expected %s (last error: %s)", #expr,       \
               kiln_status_name(s_), kiln_status_name(expected),            \
               kiln_last_error());                                          \
  } while (0)

/* Assert that the last error mentions text (case-sensitive substring). */
#define assert_last_error_contains(text)                                    \
  do {                                                                      \
    if (strstr(kiln_last_error(), (text)) == NULL)                          \
      fail_msg("last error \"%s\" does not mention \"%s\"",                 \
               kiln_last_error(), (text));                                  \
  } while (0)

/* The devices under test, in list order. Valid during kiln_test_run. */
size_t kiln_test_device_count(void);
const kiln_device *kiln_test_device(size_t index);

/* A context and an in-order queue (profiling on) for test device index.
 * Fails the test on error. */
void kiln_test_open(size_t index, kiln_context **ctx, kiln_queue **queue);
/* The same, with the other kernel family forced through the profile when
 * other is set ("nvidia" on a device whose profile is of the CPU family,
 * "pocl" on one of the GPU family). */
void kiln_test_open_family(size_t index, bool other, kiln_context **ctx,
                           kiln_queue **queue);
/* Destroy the queue and context, asserting both succeed (so a leaked child
 * shows up as KILN_ERR_BUSY). */
void kiln_test_close(kiln_context *ctx, kiln_queue *queue);

/* Point KILN_TRACE at a fresh file name under the test's cache directory
 * (KILN_CACHE_DIR when meson gives one, else the working directory) and
 * put its path in path. KILN_TRACE is read once per process: call from
 * main() before anything runs. Returns false when the directory cannot be
 * made. */
bool kiln_test_trace_to(const char *name, char *path, size_t size);

/* Apply env changes in a child before exec: "NAME=value" sets, "NAME"
 * unsets; env (NULL-terminated) may be NULL. */
void kiln_test_apply_env(const char *const *env);

/* Run a cmocka group over the devices under test. Tests that need no device
 * still run when there is none. Returns the process exit status. */
int kiln_test_run(const char *group, const struct CMUnitTest *tests,
                  size_t count, bool needs_device);

#define KILN_TEST_RUN(group, tests, needs_device) \
  kiln_test_run(group, tests, sizeof(tests) / sizeof((tests)[0]), needs_device)

/* Loop over every device under test: `FOR_EACH_TEST_DEVICE(i) { ... }`. */
#define FOR_EACH_TEST_DEVICE(i) \
  for (size_t i = 0; i < kiln_test_device_count(); i++)

/* Skip the rest of the current test (a void test function) and print why,
 * as a TAP comment: "# SKIP test_name: reason". cmocka's skip() is not used
 * for this: it prints "not ok N # SKIP", which meson's TAP reader (1.0)
 * counts as a failure. The test is then reported as passed; the reason is in
 * the test log. */
#define KILN_TEST_SKIP(reason)                                              \
  do {                                                                      \
    kiln_test_print_skip(__func__, (reason));                               \
    return;                                                                 \
  } while (0)
void kiln_test_print_skip(const char *test, const char *reason);

/* Seconds on the monotonic clock since an arbitrary start. */
double kiln_test_now(void);

/* Fill with deterministic pseudo-random floats in [lo, hi). */
void kiln_test_fill_random(float *data, size_t count, float lo, float hi,
                           uint32_t seed);

/* Descriptors for op calls (kiln/kiln_tensor.h), as pointers to compound
 * literals that live until the end of the enclosing block:
 * kiln_unary(q, op, range_of(x, 0, n, KILN_F32), range_of(y, 0, n,
 * KILN_F32), 0, NULL, NULL). matrix_of is a packed row-major matrix,
 * matrix_ld the same with a leading dimension. */
#define range_of(buf, off, n, dt) (&(kiln_range){(buf), (off), (n), (dt)})
/* A byte span as a range, for tests that move raw bytes (host arrays of
 * whatever type) in and out of buffers: whole u32 elements where offset and
 * size allow, else f16 (2-byte) ones. Buffer transfers count elements of a
 * dtype; the bytes moved are the same. */
#define KILN_TEST_UNIT(off, bytes)                                             \
  ((((off) | (bytes)) % 4 == 0) ? (size_t)4 : (size_t)2)
#define bytes_of(buf, off, bytes)                                              \
  (&(kiln_range){(buf), (off) / KILN_TEST_UNIT(off, bytes),                    \
                 (bytes) / KILN_TEST_UNIT(off, bytes),                         \
                 KILN_TEST_UNIT(off, bytes) == 4 ? KILN_U32 : KILN_F16})
#define matrix_ld(buf, off, r_, c_, ld_, dt)                                   \
  (&(kiln_matrix){.buffer = (buf),                                             \
                  .offset = (off),                                             \
                  .rows = (r_),                                                \
                  .cols = (c_),                                                \
                  .ld = (ld_),                                                 \
                  .dtype = (dt)})
#define matrix_of(buf, off, r_, c_, dt) matrix_ld(buf, off, r_, c_, 0, dt)

#endif
