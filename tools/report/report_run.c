/* kiln report's steps: each a child process in its own process group (so a
 * time limit ends its children too: meson test's tests, a driver's compiler
 * processes), stdout and stderr in log files, killed at its limit. */
#define _GNU_SOURCE
#include "report.h"
#include "commands.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

volatile sig_atomic_t report_interrupted;

const char *step_status_name(step_status st) {
  static const char *const names[] = {"pending", "ok", "failed", "timeout",
                                      "skipped"};
  return names[st];
}

bool step_arg(step *s, const char *text) {
  size_t n = 0;
  while (s->argv[n] != NULL)
    n++;
  if (n == REPORT_MAX_ARGS)
    return false;
  s->argv[n] = strdup(text);
  return s->argv[n] != NULL;
}

bool step_env(step *s, const char *name, const char *value) {
  size_t n = 0;
  while (s->env[n] != NULL)
    n++;
  if (n == REPORT_MAX_ENV || asprintf(&s->env[n], "%s=%s", name, value) < 0) {
    s->env[n] = NULL;
    return false;
  }
  return true;
}

void step_skip(step *s, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(s->reason, sizeof s->reason, fmt, ap);
  va_end(ap);
  s->status = STEP_SKIPPED;
  s->exit_code = -1;
}

void step_free(step *s) {
  for (size_t i = 0; s->argv[i] != NULL; i++)
    free(s->argv[i]);
  for (size_t i = 0; s->env[i] != NULL; i++)
    free(s->env[i]);
  json_decref(s->figures);
}

void step_figure(step *s, const char *name, double value, const char *unit) {
  if (s->figures == NULL)
    s->figures = json_array();
  json_array_append_new(s->figures, json_pack("{s:s, s:f, s:s}", "name", name,
                                              "value", value, "unit", unit));
}

/* Append word to buf, single-quoted when the shell would split or expand
 * it, so that the recorded command can be pasted back. */
static void append_quoted(char *buf, size_t size, const char *word) {
  size_t used = strlen(buf);
  const bool plain = word[0] != '\0' &&
                     strspn(word, "abcdefghijklmnopqrstuvwxyz"
                                  "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
                                  "_-./:=,+@%") == strlen(word);
  if (used > 0 && used + 1 < size)
    buf[used++] = ' ';
  if (plain) {
    snprintf(buf + used, size - used, "%s", word);
    return;
  }
  if (used + 1 < size)
    buf[used++] = '\'';
  for (const char *c = word; *c && used + 5 < size; c++) {
    if (*c == '\'') {
      memcpy(buf + used, "'\\''", 4);
      used += 4;
    } else {
      buf[used++] = *c;
    }
  }
  if (used + 1 < size)
    buf[used++] = '\'';
  buf[used < size ? used : size - 1] = '\0';
}

/* environ with s's NAME=VALUE pairs in place of the variables they name. */
static char **child_environ(const step *s) {
  size_t n = 0, extra = 0;
  while (environ[n] != NULL)
    n++;
  while (s->env[extra] != NULL)
    extra++;
  char **envp = calloc(n + extra + 1, sizeof *envp);
  if (envp == NULL)
    return NULL;
  size_t k = 0;
  for (size_t i = 0; i < n; i++) {
    bool replaced = false;
    for (size_t j = 0; j < extra; j++) {
      const size_t len = (size_t)(strchr(s->env[j], '=') - s->env[j]) + 1;
      replaced = replaced || strncmp(environ[i], s->env[j], len) == 0;
    }
    if (!replaced)
      envp[k++] = environ[i];
  }
  for (size_t j = 0; j < extra; j++)
    envp[k++] = s->env[j];
  return envp;
}

static void sleep_ms(long ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

/* Wait for pid up to seconds; true when it ended (*wstatus set). */
static bool wait_for(pid_t pid, double seconds, int *wstatus) {
  const double until = tools_now() + seconds;
  for (;;) {
    const pid_t r = waitpid(pid, wstatus, WNOHANG);
    if (r == pid || (r < 0 && errno != EINTR))
      return true;
    if (tools_now() >= until || report_interrupted)
      return false;
    sleep_ms(20);
  }
}

void step_run(step *s, const char *logdir, double deadline) {
  s->command[0] = '\0';
  for (size_t i = 0; s->env[i] != NULL; i++)
    append_quoted(s->command, sizeof s->command, s->env[i]);
  for (size_t i = 0; s->argv[i] != NULL; i++)
    append_quoted(s->command, sizeof s->command, s->argv[i]);
  s->exit_code = -1;
  if (s->status == STEP_SKIPPED)
    return;
  const double left = deadline - tools_now();
  if (report_interrupted) {
    step_skip(s, "the report was interrupted");
    return;
  }
  if (left < 5) {
    step_skip(s, "the report's time limit was reached before this step");
    return;
  }
  const double limit = s->limit_s < left ? s->limit_s : left;
  char file[64];
  snprintf(file, sizeof file, "%s", s->name);
  for (char *c = file; *c; c++)
    if (*c == ' ' || *c == '/')
      *c = '-';
  snprintf(s->log, sizeof s->log, "%s/%s.log", logdir, file);
  if (s->stdout_apart)
    snprintf(s->out, sizeof s->out, "%s/%s.out", logdir, file);
  const int log_fd = open(s->log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  const int out_fd = s->stdout_apart
                         ? open(s->out, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644)
                         : log_fd;
  char **envp = child_environ(s);
  int errpipe[2] = {-1, -1};
  if (log_fd < 0 || out_fd < 0 || envp == NULL || pipe2(errpipe, O_CLOEXEC) != 0) {
    snprintf(s->reason, sizeof s->reason, "cannot set up the step: %s",
             strerror(errno));
    s->status = STEP_FAILED;
    goto done;
  }
  dprintf(log_fd, "$ %s\n", s->command);
  const double start = tools_now();
  const pid_t pid = fork();
  if (pid == 0) {
    /* The child: only async-signal-safe calls until exec. */
    setpgid(0, 0);
    signal(SIGINT, SIG_DFL);
    signal(SIGTERM, SIG_DFL);
    const int devnull = open("/dev/null", O_RDONLY);
    dup2(devnull, STDIN_FILENO);
    dup2(out_fd, STDOUT_FILENO);
    dup2(log_fd, STDERR_FILENO);
    execvpe(s->argv[0], s->argv, envp);
    const int err = errno;
    (void)!write(errpipe[1], &err, sizeof err);
    _exit(127);
  }
  close(errpipe[1]);
  errpipe[1] = -1;
  if (pid < 0) {
    snprintf(s->reason, sizeof s->reason, "fork: %s", strerror(errno));
    s->status = STEP_FAILED;
    goto done;
  }
  setpgid(pid, pid); /* also here: no race with the kill below */
  int wstatus = 0;
  bool ended = wait_for(pid, limit, &wstatus);
  if (!ended) {
    /* SIGINT first: kiln tune then saves what it has found, meson test
     * ends its tests; then SIGKILL for whatever is left. */
    kill(-pid, SIGINT);
    if (!wait_for(pid, 10, &wstatus)) {
      kill(-pid, SIGKILL);
      waitpid(pid, &wstatus, 0);
    }
    kill(-pid, SIGKILL); /* the group's stragglers */
  }
  s->seconds = tools_now() - start;
  int exec_errno = 0;
  if (read(errpipe[0], &exec_errno, sizeof exec_errno) == sizeof exec_errno) {
    step_skip(s, "%s cannot be run: %s", s->argv[0], strerror(exec_errno));
  } else if (!ended) {
    s->status = STEP_TIMEOUT;
    if (report_interrupted)
      snprintf(s->reason, sizeof s->reason, "the report was interrupted");
    else
      snprintf(s->reason, sizeof s->reason,
               "killed at its time limit of %.0f s", limit);
  } else if (WIFEXITED(wstatus)) {
    s->exit_code = WEXITSTATUS(wstatus);
    s->status = s->exit_code == 0 ? STEP_OK : STEP_FAILED;
    if (s->exit_code != 0)
      snprintf(s->reason, sizeof s->reason, "exit status %d (see the log)",
               s->exit_code);
  } else {
    s->status = STEP_FAILED;
    snprintf(s->reason, sizeof s->reason, "killed by signal %d",
             WIFSIGNALED(wstatus) ? WTERMSIG(wstatus) : 0);
  }
done:
  free(envp);
  if (errpipe[0] >= 0)
    close(errpipe[0]);
  if (errpipe[1] >= 0)
    close(errpipe[1]);
  if (out_fd >= 0 && out_fd != log_fd)
    close(out_fd);
  if (log_fd >= 0)
    close(log_fd);
}
