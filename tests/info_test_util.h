/* What the tests of `kiln info` (test_info.c, test_info_clinfo.c) share:
 * running a program the way users do (KILN_BIN names the built kiln binary)
 * with its standard output captured, and the strict reading of
 * `kiln info --json`; test_log.c runs its children with run_capture.
 * Header-only. */
#ifndef KILN_INFO_TEST_UTIL_H
#define KILN_INFO_TEST_UTIL_H

#include "harness.h"

#include <ctype.h>
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <jansson.h>

#define RUN_TIMEOUT_MS 120000

typedef struct run_result {
  char *out; /* stdout, NUL-terminated */
  size_t len;
  char *err; /* stderr, NUL-terminated (run_capture's with_err), else NULL */
  size_t err_len;
  int status; /* exit status, or 128 + signal */
  pid_t pid;
} run_result;

/* Read once from fd into *buf (*len bytes of *cap); false at its end. */
static inline bool run_read(int fd, char **buf, size_t *len, size_t *cap) {
  if (*len + 4096 > *cap) {
    *cap *= 2;
    *buf = realloc(*buf, *cap);
    assert_non_null(*buf);
  }
  ssize_t got = read(fd, *buf + *len, *cap - *len - 1);
  if (got < 0 && errno == EINTR)
    return true;
  if (got <= 0)
    return false;
  *len += (size_t)got;
  return true;
}

/* Run argv with env changes ("NAME=value" sets, "NAME" unsets) applied in
 * the child; capture stdout, and stderr too when with_err (else it goes
 * where the test's goes). Killed, failing the test, after RUN_TIMEOUT_MS. */
static inline run_result run_capture(const char *const *env,
                                     const char *const *argv, bool with_err) {
  run_result r = {NULL, 0, NULL, 0, -1, -1};
  int fds[2], efds[2] = {-1, -1};
  assert_int_equal(pipe(fds), 0);
  if (with_err)
    assert_int_equal(pipe(efds), 0);
  fflush(NULL);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    close(fds[0]);
    dup2(fds[1], STDOUT_FILENO);
    close(fds[1]);
    if (with_err) {
      close(efds[0]);
      dup2(efds[1], STDERR_FILENO);
      close(efds[1]);
    }
    kiln_test_apply_env(env);
    execv(argv[0], (char *const *)argv);
    fprintf(stderr, "exec %s: %s\n", argv[0], strerror(errno));
    _exit(127);
  }
  close(fds[1]);
  if (with_err)
    close(efds[1]);
  size_t cap = 1 << 16, err_cap = 1 << 13;
  r.out = malloc(cap);
  assert_non_null(r.out);
  if (with_err) {
    r.err = malloc(err_cap);
    assert_non_null(r.err);
  }
  /* poll(2) passes over a negative fd: stderr's when not captured, and
   * either once at its end. */
  struct pollfd pfd[2] = {{fds[0], POLLIN, 0}, {efds[0], POLLIN, 0}};
  const double t0 = kiln_test_now();
  while (pfd[0].fd >= 0 || pfd[1].fd >= 0) {
    int ready = poll(pfd, 2, 1000);
    long ms = (long)((kiln_test_now() - t0) * 1000);
    if (ms > RUN_TIMEOUT_MS) {
      kill(pid, SIGKILL);
      fail_msg("%s %s hung for %ld ms", argv[0], argv[1] ? argv[1] : "", ms);
    }
    if (ready <= 0)
      continue;
    if (pfd[0].revents != 0 && !run_read(pfd[0].fd, &r.out, &r.len, &cap)) {
      close(pfd[0].fd);
      pfd[0].fd = -1;
    }
    if (pfd[1].revents != 0 &&
        !run_read(pfd[1].fd, &r.err, &r.err_len, &err_cap)) {
      close(pfd[1].fd);
      pfd[1].fd = -1;
    }
  }
  r.out[r.len] = '\0';
  if (with_err)
    r.err[r.err_len] = '\0';
  int status;
  while (waitpid(pid, &status, 0) < 0)
    assert_int_equal(errno, EINTR);
  r.status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  r.pid = pid;
  return r;
}

/* run_capture of stdout alone. */
static inline run_result run(const char *const *env, const char *const *argv) {
  return run_capture(env, argv, false);
}

static inline const char *kiln_bin(void) {
  const char *bin = getenv("KILN_BIN");
  if (bin == NULL || bin[0] == '\0')
    fail_msg("%s", "KILN_BIN is not set (tests/meson.build passes the kiln binary)");
  return bin;
}

static inline bool have_pocl(void) {
  return access("/etc/OpenCL/vendors/pocl.icd", R_OK) == 0;
}

/* Parse strictly: jansson rejects anything that is not JSON, and with
 * JSON_REJECT_DUPLICATES also an object with a repeated key. */
static inline json_t *parse_strict(const run_result *r) {
  json_error_t err;
  json_t *doc = json_loadb(r->out, r->len, JSON_REJECT_DUPLICATES, &err);
  if (doc == NULL)
    fail_msg("kiln info --json output is not valid JSON: %s at line %d, "
             "column %d", err.text, err.line, err.column);
  assert_string_equal(json_string_value(json_object_get(doc, "schema")),
                      "kiln-info/1");
  assert_string_equal(json_string_value(json_object_get(doc, "kiln_version")),
                      kiln_version());
  assert_true(json_is_array(json_object_get(doc, "platforms")));
  assert_true(json_is_array(json_object_get(doc, "errors")));
  return doc;
}

/* Every device object carries a "kiln" object, and every value is a
 * property value or an {"error"} / {"unsupported"} object. */
static inline void check_shape(json_t *doc) {
  size_t pi, di;
  json_t *plat, *dev;
  json_array_foreach(json_object_get(doc, "platforms"), pi, plat) {
    assert_true(json_is_array(json_object_get(plat, "devices")));
    json_array_foreach(json_object_get(plat, "devices"), di, dev) {
      assert_true(json_is_object(json_object_get(dev, "kiln")));
      const char *key;
      json_t *value;
      json_object_foreach(dev, key, value) {
        if (strcmp(key, "kiln") == 0 || !json_is_object(value))
          continue;
        bool error = json_is_string(json_object_get(value, "error"));
        bool unsupported = json_is_string(json_object_get(value, "unsupported"));
        if (!error && !unsupported)
          fail_msg("%s is an object but neither an error nor unsupported", key);
      }
    }
  }
}

/* Strip s of trailing white space and of leading blanks, in place. */
static inline void trim(char *s) {
  size_t n = strlen(s);
  while (n > 0 && isspace((unsigned char)s[n - 1]))
    s[--n] = '\0';
  size_t lead = strspn(s, " \t");
  memmove(s, s + lead, strlen(s + lead) + 1);
}

#endif
