/* Internal to kiln report: the whole run (device, steps, where things go). */
#ifndef KILN_TOOLS_REPORT_PLAN_H
#define KILN_TOOLS_REPORT_PLAN_H

#include <limits.h>

#include "report.h"

#define REPORT_MAX_STEPS 16

typedef struct report {
  char out[PATH_MAX], logdir[PATH_MAX + 8];
  char kiln[PATH_MAX];      /* this executable */
  char build[PATH_MAX];     /* the build tree, or "" (build_why says why) */
  char build_why[PATH_MAX + 128];
  bool quick;
  double start, deadline, tune_budget;
  /* The device: selector for the steps ("P:D"), what it is. */
  char selector[32];
  char device_name[256], device_vendor[256], driver[256], platform[256];
  char device_version[256], stable_id[128], profile[32];
  int device_type; /* kiln_device_type */
  bool device_fp16;
  json_t *info;    /* kiln info --json's document, or NULL */
  /* Why there is no report on a GPU (no device, or NVIDIA's OpenCL not
   * visible), with the fix; "" otherwise. */
  char diagnosis[4096];
  step steps[REPORT_MAX_STEPS];
  const char *kinds[REPORT_MAX_STEPS]; /* figure parser per step */
  size_t nsteps;
  /* The tuning file to ship and its database rows. */
  char tuning_file[PATH_MAX + 16], db_rows[PATH_MAX + 32];
  char tuning_why[512];
  int db_row_count;
} report;

/* report_plan.c: find the device (false: none, diagnosis says why); plan
 * the steps; after them, keep the tuning file and its rows. */
bool report_find_device(report *r, const char *selector);
void report_plan(report *r);
void report_collect_tuning(report *r);
/* After a step of that kind ran: a refusal that means "does not apply"
 * becomes STEP_SKIPPED with the refusal as its reason. */
void report_classify(step *s, const char *kind);
/* report_write.c: summary.md and report.json; false when not written. */
bool report_write(report *r);

#endif
