/* kiln report: one command that measures everything kiln can measure on a
 * device, each step a child process with a time limit (report_run.c), and
 * writes a folder: summary.md, report.json, the step logs and the tuning
 * file to ship (report_write.c). In C rather than a script: a bare GPU
 * machine (a CUDA container image) may have no Python, and the kiln tool
 * is there whenever kiln is. */
#define _GNU_SOURCE
#include "cli/cli.h"
#include "commands.h"
#include "report.h"
#include "report_plan.h"

#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kiln/kiln.h"

static void on_signal(int sig) {
  (void)sig;
  report_interrupted = 1;
}

static void usage(FILE *out) {
  fprintf(out,
          "usage: kiln report [--device SEL] [--out DIR] [--quick]\n"
          "                   [--time-limit SECONDS] [--tune-budget SECONDS]\n"
          "                   [--steps GROUPS] [--gpt-data FILE]\n"
          "                   [--fmnist-data DIR]\n"
          "                   [--build DIR] [--wide]\n"
          "\n"
          "Measure a device in one run and write a folder: summary.md,\n"
          "report.json (device, driver, kiln version, every figure with the\n"
          "command that produced it, each step's status, duration and log),\n"
          "the step logs under logs/, the tuning file kiln tune wrote\n"
          "(tuning.txt) and its rows in the format of kiln's tuning database\n"
          "(tuning_db_rows.txt). The steps, each a child process with a time\n"
          "limit: kiln info; the device tests of the build tree (meson test);\n"
          "kiln tune on every op, the budget divided among them (gemm_mma,\n"
          "the matrix units, on NVIDIA's OpenCL); kiln bench (f32, f16 and\n"
          "bf16 GEMM included); kiln-compare-cublas where it was built (SGEMM\n"
          "with TF32 off, bf16 and f16 GEMM); the trainers in f32 and bf16:\n"
          "the Fashion-MNIST MLP for one epoch and CNN on 16384 examples,\n"
          "GPT-2 at the 124M shape for 6 steps. A step that fails or cannot\n"
          "run is\n"
          "recorded with its reason and the report goes on. It never uses the\n"
          "network. On a CPU device it runs at a small scale (as --quick).\n"
          "When no OpenCL GPU is found on a machine with an NVIDIA driver, it\n"
          "says how to make NVIDIA's OpenCL platform visible.\n"
          "\n"
          "options:\n"
          "  -d, --device SEL     device selector (as KILN_DEVICE; default: a\n"
          "                       GPU if there is one, else the CPU device)\n"
          "  -O, --out DIR        the folder to write (default kiln-report)\n"
          "  -q, --quick          small scale: tiny tune budget, small sizes,\n"
          "                       a few test programs, a trainer subset\n"
          "  -t, --time-limit SECONDS\n"
          "                       the whole report's limit (default 540)\n"
          "  -S, --steps GROUPS   run only these groups of steps, comma-\n"
          "                       separated: info, tests, tune, bench,\n"
          "                       cublas, train, all (default all; on a GPU\n"
          "                       all of them take more than 9 minutes:\n"
          "                       tools/gpu-session.sh runs three\n"
          "                       parts)\n"
          "      --gpt-data FILE  the GPT-2 trainer's text (default: a text\n"
          "                       of pseudo-random words written to /tmp)\n"
          "      --fmnist-data DIR\n"
          "                       Fashion-MNIST's gzip'd IDX files (default\n"
          "                       /usr/share/datasets/fashion-mnist)\n"
          "      --tune-budget SECONDS\n"
          "                       kiln tune's time for all ops together\n"
          "                       (default 200, 12 at the small scale)\n"
          "  -B, --build DIR      the build tree with the tests and examples\n"
          "                       (default: the one this kiln was built in)\n"
          "      --wide           do not fit lines to the terminal's width (or\n"
          "                       to 80 columns when not a terminal)\n"
          "  -h, --help           this help\n"
          "\n"
          "exit status: 0 when every step that ran passed, 1 when one failed\n"
          "or timed out or no report could be made (no usable device\n"
          "included), 2 on a usage error (a selector that does not parse\n"
          "included).\n");
}

static bool parse_seconds(const char *option, const char *text, double *out) {
  char *end = NULL;
  errno = 0;
  const double v = strtod(text, &end);
  if (errno != 0 || end == text || *end != '\0' || !(v >= 1 && v <= 86400)) {
    cli_usage_error("kiln report", "%s wants seconds from 1 to 86400, not "
                    "'%s'", option, text);
    return false;
  }
  *out = v;
  return true;
}

/* The build tree this kiln runs from: BUILD/tools/kiln with
 * BUILD/meson-private. */
static void find_build(report *r, const char *given) {
  if (given != NULL) {
    if (realpath(given, r->build) == NULL) {
      snprintf(r->build_why, sizeof r->build_why, "--build %s: %s", given,
               strerror(errno));
      r->build[0] = '\0';
    }
    return;
  }
  char dir[PATH_MAX];
  snprintf(dir, sizeof dir, "%s", r->kiln);
  for (int up = 0; up < 2; up++) {
    char *slash = strrchr(dir, '/');
    if (slash == NULL)
      break;
    *slash = '\0';
  }
  char probe[PATH_MAX + 32];
  struct stat st;
  snprintf(probe, sizeof probe, "%s/meson-private", dir);
  if (stat(probe, &st) == 0 && S_ISDIR(st.st_mode))
    snprintf(r->build, sizeof r->build, "%s", dir);
  else
    snprintf(r->build_why, sizeof r->build_why,
             "this kiln (%s) is not in a meson build tree and --build was "
             "not given", r->kiln);
}

int kiln_cmd_report(int argc, char **argv) {
  /* --tune-budget has no short form: -b is kiln tune's --budget. */
  enum { OPT_TUNE_BUDGET = 256, OPT_GPT_DATA, OPT_FMNIST_DATA };
  static const struct option opts[] = {
      {"device", required_argument, 0, 'd'},
      {"out", required_argument, 0, 'O'},
      {"quick", no_argument, 0, 'q'},
      {"time-limit", required_argument, 0, 't'},
      {"tune-budget", required_argument, 0, OPT_TUNE_BUDGET},
      {"build", required_argument, 0, 'B'},
      {"steps", required_argument, 0, 'S'},
      {"gpt-data", required_argument, 0, OPT_GPT_DATA},
      {"fmnist-data", required_argument, 0, OPT_FMNIST_DATA},
      {"help", no_argument, 0, 'h'},
      {0, 0, 0, 0}};
  static report r; /* large: steps with their paths */
  memset(&r, 0, sizeof r);
  const char *selector = NULL, *out = "kiln-report", *build = NULL;
  double time_limit = 540, tune_budget = 0;
  cli args;
  r.groups = REPORT_ALL;
  cli_begin(&args, "kiln report", argc, argv, "d:O:qt:B:S:h", opts);
  for (int c; (c = cli_next(&args)) != -1;) {
    switch (c) {
    case 'd': selector = optarg; break;
    case 'O': out = optarg; break;
    case 'q': r.quick = true; break;
    case 't':
      if (!parse_seconds("--time-limit", optarg, &time_limit))
        return 2;
      break;
    case OPT_TUNE_BUDGET:
      if (!parse_seconds("--tune-budget", optarg, &tune_budget))
        return 2;
      break;
    case 'B': build = optarg; break;
    case 'S':
      if ((r.groups = report_parse_groups(optarg)) == 0)
        return CLI_USAGE;
      break;
    case OPT_GPT_DATA:
    case OPT_FMNIST_DATA:
      if (realpath(optarg, c == OPT_GPT_DATA ? r.gpt_data : r.fmnist_data) ==
          NULL) {
        cli_usage_error("kiln report", "--%s %s: %s",
                        c == OPT_GPT_DATA ? "gpt-data" : "fmnist-data", optarg,
                        strerror(errno));
        return CLI_USAGE;
      }
      break;
    case 'h': usage(stdout); return CLI_OK;
    default: return CLI_USAGE;
    }
  }
  if (cli_no_operands(&args) != CLI_OK ||
      cli_check_selector("kiln report", selector) != CLI_OK)
    return CLI_USAGE;
  r.start = tools_now();
  r.deadline = r.start + time_limit;
  if (mkdir(out, 0755) != 0 && errno != EEXIST) {
    fprintf(stderr, "kiln report: cannot create %s: %s\n", out, strerror(errno));
    return 1;
  }
  if (realpath(out, r.out) == NULL) {
    fprintf(stderr, "kiln report: %s: %s\n", out, strerror(errno));
    return 1;
  }
  snprintf(r.logdir, sizeof r.logdir, "%s/logs", r.out);
  if (mkdir(r.logdir, 0755) != 0 && errno != EEXIST) {
    fprintf(stderr, "kiln report: cannot create %s: %s\n", r.logdir,
            strerror(errno));
    return 1;
  }
  const ssize_t n = readlink("/proc/self/exe", r.kiln, sizeof r.kiln - 1);
  r.kiln[n > 0 ? n : 0] = '\0';
  if (n <= 0)
    snprintf(r.kiln, sizeof r.kiln, "kiln");
  find_build(&r, build);
  signal(SIGINT, on_signal);
  signal(SIGTERM, on_signal);

  const bool found = report_find_device(&r, selector);
  if (found) {
    if (r.device_type != KILN_DEVICE_GPU)
      r.quick = true; /* a CPU proves the report runs, at a small scale */
    if (tune_budget == 0)
      tune_budget = r.quick ? 12 : 200;
    r.tune_budget = tune_budget;
    report_plan(&r);
    for (size_t i = 0; i < r.nsteps; i++) {
      step *s = &r.steps[i];
      fprintf(stderr, "kiln report: %s ...\n", s->name);
      step_run(s, r.logdir, r.deadline);
      report_classify(s, r.kinds[i]);
      if (strcmp(r.kinds[i], "verdict") == 0)
        report_read_verdict(&r, s);
      report_parse_figures(s, r.kinds[i]);
      fprintf(stderr, "kiln report: %s: %s%s%s (%.1f s)\n", s->name,
              step_status_name(s->status), s->reason[0] ? ": " : "",
              s->reason, s->seconds);
    }
    report_collect_tuning(&r);
    if (r.gpt_data_temp)
      unlink(r.gpt_data);
  }
  const bool written = report_write(&r);
  int status = found && written ? 0 : 1;
  for (size_t i = 0; i < r.nsteps; i++) {
    if (r.steps[i].status == STEP_FAILED || r.steps[i].status == STEP_TIMEOUT)
      status = 1;
    step_free(&r.steps[i]);
  }
  json_decref(r.info);
  if (written)
    printf("kiln report: wrote %s/summary.md and %s/report.json\n", r.out,
           r.out);
  return status;
}
