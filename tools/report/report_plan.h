/* Internal to kiln report: the whole run (device, steps, where things go). */
#ifndef KILN_TOOLS_REPORT_PLAN_H
#define KILN_TOOLS_REPORT_PLAN_H

#include <limits.h>

#include "report.h"

#define REPORT_MAX_STEPS 24

/* The groups of steps (--steps): each a bit of report.groups. */
enum {
  REPORT_INFO = 1u << 0,   /* kiln info (and nvidia-smi) */
  REPORT_TESTS = 1u << 1,  /* the build tree's device tests */
  REPORT_TUNE = 1u << 2,   /* kiln tune on every op, gemm_mma on NVIDIA */
  REPORT_BENCH = 1u << 3,  /* kiln bench */
  REPORT_CUBLAS = 1u << 4, /* kiln-compare-cublas */
  REPORT_TRAIN = 1u << 5,  /* the MLP, CNN and GPT-2 trainers */
  REPORT_ALL = (1u << 6) - 1,
};

typedef struct report {
  char out[PATH_MAX], logdir[PATH_MAX + 8];
  char kiln[PATH_MAX];      /* this executable */
  char build[PATH_MAX];     /* the build tree, or "" (build_why says why) */
  char build_why[PATH_MAX + 128];
  bool quick;
  unsigned groups; /* REPORT_* bits: the steps to run */
  /* The GPT-2 trainer's data (--gpt-data), or a text file the report
   * writes (gpt_data_temp: removed at the end). */
  char gpt_data[PATH_MAX];
  bool gpt_data_temp;
  char fmnist_data[PATH_MAX]; /* --fmnist-data, or "": Debian's folder */
  double start, deadline, tune_budget;
  /* The device: selector for the steps ("P:D"), what it is. */
  char selector[32];
  char device_name[256], device_vendor[256], driver[256], platform[256];
  char device_version[256], stable_id[128], profile[32];
  int device_type; /* kiln_device_type */
  unsigned vendor_id;
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
  /* kiln info's "GEMM (matrix units) used" after tuning, or "". */
  char mma_verdict[512];
  int db_row_count;
} report;

/* report_plan.c: find the device (false: none, diagnosis says why); plan
 * the steps; after them, keep the tuning file and its rows. */
bool report_find_device(report *r, const char *selector);
void report_plan(report *r);
void report_collect_tuning(report *r);
/* After the "info after tuning" step: keep its matrix-unit verdict. */
void report_read_verdict(report *r, const step *s);
/* --steps NAMES: the groups' bits, or 0 (a usage error, printed). */
unsigned report_parse_groups(const char *text);
/* After a step of that kind ran: a refusal that means "does not apply"
 * becomes STEP_SKIPPED with the refusal as its reason. */
void report_classify(step *s, const char *kind);
/* report_write.c: summary.md and report.json; false when not written. */
bool report_write(report *r);

#endif
