/* What the tests of `kiln info` (test_info.c, test_info_clinfo.c) share:
 * running a program the way users do (KILN_BIN names the built kiln binary)
 * with its standard output captured, and the strict reading of
 * `kiln info --json`. Header-only. */
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
  int status; /* exit status, or 128 + signal */
} run_result;

/* Run argv with env changes ("NAME=value" sets, "NAME" unsets) applied in
 * the child; capture stdout. */
static inline run_result run(const char *const *env, const char *const *argv) {
  run_result r = {NULL, 0, -1};
  int fds[2];
  assert_int_equal(pipe(fds), 0);
  fflush(NULL);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    close(fds[0]);
    dup2(fds[1], STDOUT_FILENO);
    close(fds[1]);
    kiln_test_apply_env(env);
    execv(argv[0], (char *const *)argv);
    fprintf(stderr, "exec %s: %s\n", argv[0], strerror(errno));
    _exit(127);
  }
  close(fds[1]);
  size_t cap = 1 << 16;
  r.out = malloc(cap);
  assert_non_null(r.out);
  const double t0 = kiln_test_now();
  for (;;) {
    struct pollfd pfd = {fds[0], POLLIN, 0};
    int ready = poll(&pfd, 1, 1000);
    long ms = (long)((kiln_test_now() - t0) * 1000);
    if (ms > RUN_TIMEOUT_MS) {
      kill(pid, SIGKILL);
      fail_msg("%s %s hung for %ld ms", argv[0], argv[1] ? argv[1] : "", ms);
    }
    if (ready < 0 && errno == EINTR)
      continue;
    if (ready <= 0)
      continue;
    if (r.len + 4096 > cap) {
      cap *= 2;
      r.out = realloc(r.out, cap);
      assert_non_null(r.out);
    }
    ssize_t got = read(fds[0], r.out + r.len, cap - r.len - 1);
    if (got < 0 && errno == EINTR)
      continue;
    if (got <= 0)
      break;
    r.len += (size_t)got;
  }
  close(fds[0]);
  r.out[r.len] = '\0';
  int status;
  while (waitpid(pid, &status, 0) < 0)
    assert_int_equal(errno, EINTR);
  r.status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return r;
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
