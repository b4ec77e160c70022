/* Internal to kiln report (cmd_report.c, report_run.c, report_write.c): the
 * steps it runs as child processes and what each left behind. */
#ifndef KILN_TOOLS_REPORT_H
#define KILN_TOOLS_REPORT_H

#include <jansson.h>
#include <signal.h>
#include <stdbool.h>
#include <stddef.h>

#define REPORT_MAX_ARGS 80
#define REPORT_MAX_ENV 4

typedef enum step_status {
  STEP_PENDING, /* not run yet */
  STEP_OK,
  STEP_FAILED,  /* ran and exited non-zero, or died */
  STEP_TIMEOUT, /* killed at its time limit */
  STEP_SKIPPED, /* not run: reason says why */
} step_status;

typedef struct step {
  char name[48];          /* "tune gemm", ... (also names its log file) */
  char *argv[REPORT_MAX_ARGS + 1];
  char *env[REPORT_MAX_ENV + 1]; /* NAME=VALUE set for the child only */
  bool stdout_apart;      /* stdout to logs/NAME.out, parsed afterwards */
  double limit_s;         /* its own limit (the report's deadline cuts it) */
  /* What happened. */
  step_status status;
  char reason[512];
  int exit_code;          /* -1: none (skipped, killed, did not start) */
  double seconds;
  char log[1024], out[1024]; /* paths: stderr (and stdout unless apart) */
  char command[2048];     /* the exact command line, shell-quoted */
  json_t *figures;        /* array of {name, value, unit}, filled by parsers */
} step;

/* Set by SIGINT or SIGTERM to the report (report_run.c): the running
 * step's group is ended and the rest skipped. Its children are in their own
 * process groups, so a Ctrl-C at the terminal reaches only the report. */
extern volatile sig_atomic_t report_interrupted;

/* Add argument text (copied) to s's argv; false when full. */
bool step_arg(step *s, const char *text);
bool step_env(step *s, const char *name, const char *value);
/* Skip s with a reason (printf format). */
void step_skip(step *s, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Run s in its own process group with stdout/stderr into logs under dir,
 * killing it at min(limit_s, deadline - now). Fills status and the rest;
 * an executable that cannot be started (not found) is STEP_SKIPPED. */
void step_run(step *s, const char *logdir, double deadline);
void step_free(step *s);
const char *step_status_name(step_status st);
/* Append {name, value, unit} to s->figures. */
void step_figure(step *s, const char *name, double value, const char *unit);

/* report_figures.c: fill s->figures from its output; kind is "bench",
 * "tune", "cublas", "trainer" (train_fashion_mnist) or "gpt" (train_gpt). */
void report_parse_figures(step *s, const char *kind);
/* Write backends/tuning_db.c rows for the tuning file's ops to rows_path:
 * their count, or -1 when the file cannot be read or written. */
int report_db_rows(const char *tuning_path, const char *device_name,
                   const char *rows_path);

#endif
