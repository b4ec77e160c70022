/* Where kiln's messages go. The library never prints: without a log
 * handler, the KILN_LOG messages and KILN_TRACE_SUMMARY=1's table reach
 * neither stderr nor stdout (messages are kept for kiln_trace_diagnostic),
 * KILN_TRACE_SUMMARY=PATH writes the table to PATH, and a handler
 * (kiln_log_set_handler) receives what KILN_LOG asks for. Each case runs
 * this binary again with --child MODE (trace_child.h) in an environment of
 * its own. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "info_test_util.h"
#include "trace_child.h"

/* The file at path into text (size bytes, NUL-terminated), then removed;
 * fails the test when it cannot be read. Returns its length. */
static size_t take_file(const char *path, char *text, size_t size) {
  FILE *f = fopen(path, "r");
  if (f == NULL)
    fail_msg("cannot read %s", path);
  size_t n = fread(text, 1, size - 1, f);
  text[n] = '\0';
  fclose(f);
  unlink(path);
  return n;
}

/* Run this binary as a child in mode ("run", "report", "handler", "ring")
 * with env changes ("NAME=value" sets, "NAME" unsets); its stderr and its
 * stdout, NUL-terminated, into err and out (size bytes each, cut to fit).
 * The child must exit 0. Returns its pid. */
static pid_t child_output(const char *mode, const char *const *env, char *err,
                          char *out, size_t size) {
  const char *argv[] = {"/proc/self/exe", "--child", mode, NULL};
  run_result r = run_capture(env, argv, true);
  snprintf(err, size, "%s", r.err);
  snprintf(out, size, "%s", r.out);
  free(r.err);
  free(r.out);
  assert_int_equal(r.status, 0);
  return r.pid;
}

static size_t count_of(const char *text, const char *what) {
  size_t n = 0;
  for (const char *p = text; (p = strstr(p, what)) != NULL; p++)
    n++;
  return n;
}

/* The summary table in text: its heading, the child's fill and its build,
 * every line within 80 columns. */
static void assert_summary(const char *text) {
  static const char *const want[] = {"trace summary of process ",
                                     "total ms  share   calls", "op fill",
                                     "build "};
  for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
    if (strstr(text, want[i]) == NULL)
      fail_msg("the summary lacks \"%s\":\n%s", want[i], text);
  for (const char *line = text; *line;) {
    const char *nl = strchr(line, '\n');
    size_t n = nl ? (size_t)(nl - line) : strlen(line);
    if (n > 80)
      fail_msg("a summary line of %zu columns: %.*s", n, (int)n, line);
    line += n + (nl != NULL);
  }
}

/* KILN_TRACE_SUMMARY without KILN_TRACE and without a log handler: =PATH
 * ("%p" the process id) writes the table of what ran to PATH at exit, =1
 * delivers it nowhere; neither writes a trace file, and nothing reaches
 * stderr or stdout (kiln never prints; before, the table went to stderr).
 * The handler's case is test_log_handler's. */
static void test_trace_summary(void **state) {
  (void)state;
  char err[8192], out[8192], path[256], env_path[300];
  snprintf(env_path, sizeof env_path,
           "KILN_TRACE_SUMMARY=/tmp/kiln-test-summary-%ld-%%p.txt",
           (long)getpid());
  const char *to_file[] = {"KILN_TRACE", "KILN_LOG", env_path, NULL};
  pid_t child = child_output("run", to_file, err, out, sizeof err);
  assert_string_equal(err, "");
  assert_string_equal(out, "");
  snprintf(path, sizeof path, "/tmp/kiln-test-summary-%ld-%ld.txt",
           (long)getpid(), (long)child);
  size_t n = take_file(path, err, sizeof err);
  assert_summary(err);
  assert_true(n > 0 && err[n - 1] == '\n');

  const char *to_handler[] = {"KILN_TRACE", "KILN_LOG", "KILN_TRACE_SUMMARY=1",
                              NULL};
  child_output("run", to_handler, err, out, sizeof err);
  assert_string_equal(err, "");
  assert_string_equal(out, "");

  /* A summary file that cannot be written is a warning of the log. */
  const char *bad[] = {"KILN_TRACE", "KILN_LOG=warn",
                       "KILN_TRACE_SUMMARY=/nonexistent/kiln/summary.txt",
                       NULL};
  child_output("run", bad, err, out, sizeof err);
  assert_string_equal(err, "");
  assert_string_equal(out, "");
}

/* KILN_LOG without a handler: nothing reaches stderr or stdout in any
 * environment (before, the messages below were printed on stderr), and
 * kiln_trace_diagnostic() holds what the log kept: an unwritable
 * KILN_TRACE once (the trace's problem, not repeated as the log's warning;
 * KILN_TRACE turns the log on at warn), the same with KILN_LOG=off but no
 * log line, nothing without any variable, the program cache kiln cannot
 * use with KILN_LOG=warn once for all builds, an unknown level named; and
 * only the last four messages. */
static void test_log(void **state) {
  (void)state;
  char err[8192], out[16384];
  const char *bad_trace[] = {"KILN_LOG", "KILN_TRACE_SUMMARY",
                             "KILN_TRACE=/nonexistent/kiln/x.json", NULL};
  child_output("report", bad_trace, err, out, sizeof err);
  assert_string_equal(err, "");
  if (count_of(out, "KILN_TRACE: cannot open '/nonexistent/kiln/x.json': ") !=
          1 ||
      strncmp(out, "diagnostic: KILN_TRACE: cannot open", 35) != 0)
    fail_msg("not one report of the unwritable trace:\n%s", out);

  const char *off[] = {"KILN_LOG=off", "KILN_TRACE_SUMMARY",
                       "KILN_TRACE=/nonexistent/kiln/x.json", NULL};
  child_output("report", off, err, out, sizeof err);
  assert_string_equal(err, "");
  if (count_of(out, "KILN_TRACE: cannot open") != 1 ||
      strstr(out, "warning:") != NULL)
    fail_msg("KILN_LOG=off: %s", out);
  const char *quiet[] = {"KILN_LOG", "KILN_TRACE", "KILN_TRACE_SUMMARY",
                         "KILN_CACHE_DIR=/proc/version/kiln", NULL};
  child_output("report", quiet, err, out, sizeof err);
  assert_string_equal(err, "");
  assert_string_equal(out, "diagnostic: \n");

  const char *cache[] = {"KILN_LOG=warn", "KILN_TRACE", "KILN_TRACE_SUMMARY",
                         "KILN_CACHE_DIR=/proc/version/kiln", NULL};
  child_output("report", cache, err, out, sizeof err);
  assert_string_equal(err, "");
  if (count_of(out, "warning: program cache: working without the program "
                    "cache: ") != 1)
    fail_msg("not one warning for the unusable cache:\n%s", out);
  const char *unknown[] = {"KILN_LOG=loud", "KILN_TRACE", "KILN_TRACE_SUMMARY",
                           "KILN_CACHE_DIR=/proc/version/kiln", NULL};
  child_output("report", unknown, err, out, sizeof err);
  assert_string_equal(err, "");
  if (strstr(out, "warning: KILN_LOG=loud is not off, error, warn, info or "
                  "debug") == NULL)
    fail_msg("an unknown KILN_LOG is not named:\n%s", out);

  /* Six warnings (and none from the op, with a usable cache): the last
   * four are kept, oldest first. */
  const char *ring[] = {"KILN_LOG=warn", "KILN_TRACE", "KILN_TRACE_SUMMARY",
                        NULL};
  child_output("ring", ring, err, out, sizeof err);
  assert_string_equal(err, "");
  assert_string_equal(out, "diagnostic: warning: message 3\n"
                           "warning: message 4\nwarning: message 5\n"
                           "warning: message 6\n");
}

/* kiln_log_set_handler: the handler receives the messages KILN_LOG asks
 * for (the unwritable trace at warn, the unusable cache) and
 * KILN_TRACE_SUMMARY=1's table at exit, with their levels, and nothing
 * reaches stderr or is kept for kiln_trace_diagnostic (which still has the
 * trace's problem); with KILN_LOG unset a handler gets warnings. */
static void test_log_handler(void **state) {
  (void)state;
  char file[256], env_file[300], text[8192], out[8192], got[16384];
  snprintf(file, sizeof file, "/tmp/kiln-test-log-%ld.txt", (long)getpid());
  snprintf(env_file, sizeof env_file, "KILN_TEST_LOG_FILE=%s", file);
  const char *env[] = {"KILN_LOG=warn",
                       "KILN_TRACE_SUMMARY=1",
                       "KILN_TRACE=/nonexistent/kiln/x.json",
                       "KILN_CACHE_DIR=/proc/version/kiln",
                       env_file,
                       NULL};
  child_output("handler", env, text, out, sizeof text);
  assert_string_equal(text, "");
  if (strncmp(out, "diagnostic: KILN_TRACE: cannot open", 35) != 0 ||
      strstr(out, "warning:") != NULL)
    fail_msg("with a handler the diagnostic is:\n%s", out);
  take_file(file, got, sizeof got);
  static const char *const want[] = {
      "level 2: KILN_TRACE: cannot open '/nonexistent/kiln/x.json': ",
      "level 2: program cache: working without the program cache: ",
      "level 3: trace summary of process ", "op fill"};
  for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
    if (count_of(got, want[i]) != 1)
      fail_msg("the handler did not get \"%s\" once:\n%s", want[i], got);
  /* KILN_LOG unset: a handler gets warnings (the application asked). */
  const char *unset[] = {"KILN_LOG", "KILN_TRACE_SUMMARY",
                         "KILN_TRACE=/nonexistent/kiln/x.json", env_file, NULL};
  child_output("handler", unset, text, out, sizeof text);
  assert_string_equal(text, "");
  take_file(file, got, sizeof got);
  if (count_of(got, "level 2: KILN_TRACE: cannot open") != 1 ||
      strstr(got, "trace summary") != NULL)
    fail_msg("with KILN_LOG unset the handler got:\n%s", got);
  /* A summary file that cannot be written: the handler hears why. */
  const char *bad[] = {"KILN_LOG", "KILN_TRACE",
                       "KILN_TRACE_SUMMARY=/nonexistent/kiln/summary.txt",
                       env_file, NULL};
  child_output("handler", bad, text, out, sizeof text);
  assert_string_equal(text, "");
  take_file(file, got, sizeof got);
  if (count_of(got, "level 2: KILN_TRACE_SUMMARY: cannot write "
                    "'/nonexistent/kiln/summary.txt': ") != 1)
    fail_msg("the unwritable summary file: %s", got);
}

/* Bad input to the trace summary and the log handler: NULL path or stream
 * and a missing file are refused with their status, writing nothing; a
 * NULL handler restores the default and is harmless when none was set. */
static void test_summarize_and_handler_bad_input(void **state) {
  (void)state;
  assert_kiln_status(kiln_trace_summarize(NULL, stdout, 80),
                     KILN_ERR_NULL_POINTER);
  assert_kiln_status(kiln_trace_summarize("/nonexistent/kiln/none.json", NULL, 80),
                     KILN_ERR_NULL_POINTER);
  assert_kiln_status(
      kiln_trace_summarize("/nonexistent/kiln/none.json", stdout, 0),
      KILN_ERR_IO);
  assert_non_null(strstr(kiln_last_error(), "/nonexistent/kiln/none.json"));
  kiln_log_set_handler(NULL, NULL);
  kiln_log_set_handler(NULL, NULL);
}
int main(int argc, char **argv) {
  if (argc == 3 && strcmp(argv[1], "--child") == 0)
    return child_main(argv[2]);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_trace_summary),
      cmocka_unit_test(test_log),
      cmocka_unit_test(test_log_handler),
      cmocka_unit_test(test_summarize_and_handler_bad_input),
  };
  return KILN_TEST_RUN("log", tests, true);
}
