/* kiln tune: search an op's parameter space on one device, keep only
 * candidates that pass the correctness gate, and save the fastest to the
 * device's tuning file (kiln/kiln_tune.h), which every program on the
 * machine then reads. The library searches (kiln_tuning_search), the ops'
 * gates and timings (tune_op_*.c) check and time; this file is the command
 * line and the report. */
#include "cli/cli.h"
#include "commands.h"
#include "tune.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static void usage(FILE *out) {
  fprintf(out,
          "usage: kiln tune [--device SEL] [--op NAMES] [--size SPECS]\n"
          "                 [--budget SECONDS] [--jobs N]\n"
          "                 [--compile-timeout SECONDS] [--run-timeout SECONDS]\n"
          "                 [--json] [--export FILE] [--wide]\n"
          "       kiln tune [--device SEL] --list\n"
          "       kiln tune [--device SEL] --reset\n"
          "\n"
          "Search the kernel parameters of an op on one device: every\n"
          "candidate must first pass a correctness gate (awkward shapes\n"
          "checked against a float64 host reference) and is then timed at\n"
          "each size; the fastest is saved to the device's tuning file in\n"
          "kiln's cache directory, which every context on the device reads.\n"
          "Ctrl-C stops the search and keeps what was found.\n"
          "\n"
          "options:\n"
          "  -d, --device SEL     device selector (as KILN_DEVICE)\n"
          "  -o, --op NAMES       ops to tune, comma-separated (default gemm):\n"
          "                       gemm, transpose, reduce (also sum, dot,\n"
          "                       nrm2), elementwise (also axpy, scale): the\n"
          "                       GPU-family kernels; gemm_mma: f16/bf16 GEMM\n"
          "                       on NVIDIA's, AMD's and Intel's matrix\n"
          "                       units; conv2d (also conv): the implicit\n"
          "                       GEMM convolution; gemm_cpu, transpose_cpu:\n"
          "                       the CPU family's (PoCL). gemm and transpose\n"
          "                       tune the space of the device's family\n"
          "  -s, --size SPECS     sizes to time, N or MxNxK, comma-separated\n"
          "                       (at most 8 sizes, each number 1 to 2^30;\n"
          "                       default per op: gemm 512,1024; gemm_cpu\n"
          "                       1024,2048; gemm_mma 1024,4096; conv2d\n"
          "                       NxCxK (28x28 images) 32x1x32,32x32x64;\n"
          "                       transpose N x N 1024,2048, transpose_cpu\n"
          "                       1024,4096; others N elements\n"
          "                       4194304,16777216)\n"
          "  -b, --budget SECONDS search time per op, all included (default\n"
          "                       120)\n"
          "  -J, --jobs N         build the next candidates on N threads while\n"
          "                       one is timed (default: the number of CPUs)\n"
          "  -C, --compile-timeout SECONDS\n"
          "                       reject a candidate whose build runs longer\n"
          "                       (default 60)\n"
          "  -R, --run-timeout SECONDS\n"
          "                       reject a candidate whose launch runs longer\n"
          "                       and stop: the device is busy with it\n"
          "                       (default 20)\n"
          "  -j, --json           print a kiln-tune/1 JSON document\n"
          "  -x, --export FILE    also write the result to FILE (to send)\n"
          "  -l, --list           print each space and the parameters in\n"
          "                       effect on the device, and exit\n"
          "      --reset          remove the device's tuning file, and exit\n"
          "      --wide           do not fit lines to the terminal's width (or\n"
          "                       to 80 columns when not a terminal)\n"
          "  -h, --help           this help\n"
          "\n"
          "exit status: 0 when every op was tuned (or listed, or reset), 1\n"
          "otherwise (no usable device included), 2 on a usage error (a\n"
          "selector that does not parse included).\n");
}

static volatile sig_atomic_t stop_flag;

/* Ctrl-C. SIGINT is blocked in every thread (the mask is set before the
 * driver starts its threads, which inherit it) and taken by this one with
 * sigwait: a driver's compiler (LLVM, in PoCL and Mesa) installs its own
 * SIGINT handler when it first runs, which would kill the process, and a
 * blocked signal never reaches a handler. The first Ctrl-C ends the
 * search, which then saves what it found; a second one kills as usual. */
static void *sigint_thread(void *arg) {
  sigset_t *set = arg;
  int sig = 0;
  if (sigwait(set, &sig) == 0)
    stop_flag = 1;
  if (sigwait(set, &sig) == 0) {
    signal(SIGINT, SIG_DFL);
    pthread_sigmask(SIG_UNBLOCK, set, NULL);
    raise(SIGINT);
  }
  return NULL;
}

static void watch_sigint(void) {
  static sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  pthread_t thread;
  if (pthread_sigmask(SIG_BLOCK, &set, NULL) == 0 &&
      pthread_create(&thread, NULL, sigint_thread, &set) == 0)
    pthread_detach(thread);
}

struct progress {
  const tune_op *op;
  bool tty;
  int columns;
  size_t last_line;
  double last_best;
};

static void show_progress(void *user, size_t tried, size_t rejected,
                          size_t skipped, double best, const char *params) {
  struct progress *pr = user;
  (void)params;
  char line[256];
  snprintf(line, sizeof line, "%s: tried %zu, rejected %zu, skipped %zu, "
           "best %.2f %s", pr->op->name, tried, rejected, skipped, best,
           pr->op->unit);
  if (pr->tty) {
    /* One line rewritten in place, never wider than the terminal (a
     * wrapped line cannot be rewritten). */
    const int width = pr->columns > 1 ? pr->columns - 1 : 79;
    fprintf(stderr, "\r%-*.*s", width, width, line);
    fflush(stderr);
  } else if (best != pr->last_best || tried >= pr->last_line + 25) {
    fprintf(stderr, "kiln tune: %s\n", line);
    pr->last_line = tried;
  }
  pr->last_best = best;
}

/* The sizes of text into o; false, with a message naming what is wrong,
 * when they do not parse. */
static bool parse_sizes(const char *text, kiln_tuning_search_options *o) {
  if (cli_check_list("kiln tune", "--size", text) != CLI_OK)
    return false;
  char buf[256];
  snprintf(buf, sizeof buf, "%s", text);
  o->size_count = 0;
  for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok != NULL;
       tok = strtok_r(NULL, ",", &save)) {
    unsigned long a = 0, b = 0, c = 0;
    char tail = 0;
    const int n = sscanf(tok, "%lux%lux%lu%c", &a, &b, &c, &tail);
    if (n == 1 && strchr(tok, 'x') == NULL)
      b = c = a;
    else if (n != 3) {
      cli_usage_error("kiln tune", "--size '%s' is not N or MxNxK", tok);
      return false;
    }
    if (o->size_count == KILN_TUNING_MAX_SIZES) {
      cli_usage_error("kiln tune", "--size gives more than %d sizes",
                      KILN_TUNING_MAX_SIZES);
      return false;
    }
    /* Each op has its own limit (tune_op.max_size, checked per op). */
    if (a == 0 || b == 0 || c == 0 || a > (1ul << 30) || b > (1ul << 30) ||
        c > (1ul << 30) || strchr(tok, '-') != NULL) {
      cli_usage_error("kiln tune", "--size '%s': each number must be from 1 "
                      "to 2^30 (1073741824)", tok);
      return false;
    }
    o->sizes[o->size_count][0] = a;
    o->sizes[o->size_count][1] = b;
    o->sizes[o->size_count][2] = c;
    o->size_count++;
  }
  return o->size_count > 0;
}

static bool parse_seconds(const char *option, const char *text, double *out) {
  char *end = NULL;
  *out = strtod(text, &end);
  if (end == text || *end != '\0' || !(*out > 0.0) || *out > 1e6) {
    cli_usage_error("kiln tune", "%s '%s' is not a number of seconds from "
                    "0 to 1000000", option, text);
    return false;
  }
  return true;
}

/* printf, then the line wrapped to the output's width, continuation lines
 * indented by indent. */
static void print_wrapped(int indent, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void print_wrapped(int indent, const char *fmt, ...) {
  char line[2 * KILN_TUNING_TEXT_CAPACITY];
  va_list args;
  va_start(args, fmt);
  vsnprintf(line, sizeof line, fmt, args);
  va_end(args);
  cli_wrap(stdout, line, 0, indent, cli_width());
}

static void list_space(kiln_context *ctx, const tune_op *op) {
  print_wrapped(2, "%s (%s%s%sthe %s-family kernel; timed: %s):", op->name,
                op->aliases[0] ? "also " : "", op->aliases,
                op->aliases[0] ? "; " : "", op->family, op->timed);
  kiln_tuning_knob k;
  for (size_t i = 0; kiln_tuning_get_knob(op->name, i, &k) == KILN_OK; i++) {
    char values[512];
    size_t len = 0;
    values[0] = '\0';
    for (size_t j = 0; j < k.count && len < sizeof values; j++)
      len += (size_t)snprintf(values + len, sizeof values - len, "%s%u",
                              j ? "," : "", k.values[j]);
    print_wrapped(10, "  %-7s %s  %s", k.name, values, k.what);
  }
  kiln_tuning_info t;
  if (kiln_tuning_get_info(ctx, op->name, &t) == KILN_OK) {
    print_wrapped(2, "in effect: %s%s%s", t.source, t.params[0] ? ": " : "",
                  t.params);
    print_wrapped(2, "tuning file: %s", t.path[0] ? t.path : "(none)");
    if (t.figures[0])
      print_wrapped(2, "tuned: %s", t.figures);
    if (t.ignored[0])
      print_wrapped(2, "ignored: %s", t.ignored);
  }
}

/* "N", "RxC" or "MxNxK": the numbers of size that op reads. */
static void size_name(const tune_op *op, const size_t *size, char *buf,
                      size_t len) {
  if (op->dims == 1)
    snprintf(buf, len, "%zu", size[0]);
  else if (op->dims == 2)
    snprintf(buf, len, "%zux%zu", size[0], size[1]);
  else
    snprintf(buf, len, "%zux%zux%zu", size[0], size[1], size[2]);
}

static void report(const tune_op *op, const kiln_tuning_search_options *o,
                   const kiln_tuning_result *r, const char *device, bool json,
                   const char *saved) {
  if (json) {
    printf("{\"schema\": \"kiln-tune/1\", \"device\": \"");
    for (const char *c = device; *c; c++)
      if (*c != '"' && *c != '\\' && (unsigned char)*c >= 0x20)
        putchar(*c);
    printf("\", \"op\": \"%s\", \"unit\": \"%s\", \"before\": \"%s\", "
           "\"tuned\": \"%s\", "
           "\"tried\": %zu, \"rejected\": %zu, \"rejected_gate\": %zu, "
           "\"rejected_slow\": %zu, \"rejected_timeout\": %zu, "
           "\"skipped\": %zu, "
           "\"exhaustive\": %s, \"interrupted\": %s, \"kept_default\": %s, "
           "\"file\": \"%s\", "
           "\"sizes\": [",
           op->name, op->unit, r->default_params, r->best_params, r->tried,
           r->rejected, r->rejected_gate, r->rejected_slow,
           r->rejected_timeout, r->skipped, r->exhaustive ? "true" : "false",
           r->interrupted ? "true" : "false",
           r->kept_default ? "true" : "false", saved);
    for (size_t i = 0; i < o->size_count; i++)
      printf("%s{\"m\": %zu, \"n\": %zu, \"k\": %zu, \"before_gflops\": %.3f, "
             "\"tuned_gflops\": %.3f}",
             i ? ", " : "", o->sizes[i][0], o->sizes[i][1], o->sizes[i][2],
             r->default_figures[i], r->best_figures[i]);
    printf("]}\n");
    return;
  }
  print_wrapped(2, "device: %s", device);
  print_wrapped(2, "op %s (timed: %s): %zu candidates tried, %zu rejected "
                "(%zu by the gate or a failed build, %zu too slow, %zu past "
                "a timeout), %zu skipped (invalid on the device)%s%s",
                op->name, op->timed, r->tried, r->rejected, r->rejected_gate,
                r->rejected_slow, r->rejected_timeout, r->skipped,
                r->exhaustive ? ", exhaustive" : ", random + local search",
                r->interrupted ? ", interrupted" : "");
  if (r->kept_default)
    print_wrapped(2, "kept the default: the best found was not faster when "
                  "timed again against it, alternately");
  if (r->last_rejection[0])
    print_wrapped(2, "last rejection: %s", r->last_rejection);
  char before[32], tuned[32];
  snprintf(before, sizeof before, "before %s", op->unit);
  snprintf(tuned, sizeof tuned, "tuned %s", op->unit);
  print_wrapped(8, "before: %s", r->default_params);
  print_wrapped(8, "tuned:  %s", r->best_params);
  printf("\n%-16s %14s %14s %7s\n", "size", before, tuned, "ratio");
  for (size_t i = 0; i < o->size_count; i++) {
    char size[64];
    size_name(op, o->sizes[i], size, sizeof size);
    printf("%-16s %14.2f %14.2f %7.2f\n", size, r->default_figures[i],
           r->best_figures[i], r->best_figures[i] / r->default_figures[i]);
  }
  print_wrapped(2, "saved: %s", saved);
}

/* The ops named by text (comma-separated names or aliases), each once. */
static bool parse_ops(const char *text, const tune_op **out, size_t *count) {
  *count = 0;
  if (cli_check_list("kiln tune", "--op", text) != CLI_OK)
    return false;
  char buf[256];
  snprintf(buf, sizeof buf, "%s", text);
  *count = 0;
  for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok != NULL;
       tok = strtok_r(NULL, ",", &save)) {
    const tune_op *op = tune_op_find(tok);
    if (op == NULL) {
      const char *names[32];
      size_t n = 0;
      for (; tune_op_at(n) != NULL && n < 32; n++)
        names[n] = tune_op_at(n)->name;
      const char *near = cli_suggest(tok, names, n);
      cli_usage_error("kiln tune", "--op '%s': no parameter space%s%s%s (ops: "
                      "gemm, transpose, reduce or sum, dot, nrm2, elementwise "
                      "or axpy, scale, gemm_cpu, transpose_cpu)", tok,
                      near ? "; did you mean '" : "", near ? near : "",
                      near ? "'?" : "");
      return false;
    }
    bool seen = false;
    for (size_t i = 0; i < *count; i++)
      seen = seen || out[i] == op;
    if (!seen && *count < 8)
      out[(*count)++] = op;
  }
  if (*count == 0)
    cli_usage_error("kiln tune", "--op '%s' names no op", text);
  return *count > 0;
}

/* op, or its twin when ctx's device runs the other family's kernel, whose
 * space is the twin (gemm on PoCL: gemm_cpu). */
static const tune_op *family_op(kiln_context *ctx, const tune_op *op) {
  kiln_tuning_info t;
  if (op->twin != NULL && kiln_tuning_get_info(ctx, op->name, &t) == KILN_OK &&
      t.params[0] == '\0')
    return tune_op_find(op->twin);
  return op;
}

/* Search op's space on ctx, save the best to the device's tuning file (and
 * export_path), and report. 0, or 1 with the message printed. *stuck when
 * a launch ran past the run timeout: q still runs it, so the caller must
 * neither use nor destroy it (destroying would wait for it). */
static int tune_one(kiln_context *ctx, kiln_queue *q, const tune_op *op,
                    kiln_tuning_search_options *o, bool json, const char *export_path,
                    bool *stuck) {
  const char *name = kiln_context_get_device_info(ctx)->name;
  kiln_tuning_info t;
  if (kiln_tuning_get_info(ctx, op->name, &t) != KILN_OK) {
    fprintf(stderr, "kiln tune: %s\n", kiln_last_error());
    return 1;
  }
  if (t.params[0] == '\0') {
    fprintf(stderr, "kiln tune: %s runs the CPU-family %s kernels (profile "
                    "%s), which have no parameter space; set KILN_BACKEND to "
                    "a GPU profile (nvidia, amd, intel) to tune the "
                    "GPU-family kernels on it\n",
            name, op->name, kiln_context_get_profile(ctx));
    return 1;
  }
  for (size_t i = 0; i < o->size_count; i++)
    if (o->sizes[i][0] > op->max_size || o->sizes[i][1] > op->max_size ||
        o->sizes[i][2] > op->max_size) {
      fprintf(stderr, "kiln tune: %s: --size %zux%zux%zu: each at most %zu "
                      "for this op\n", op->name, o->sizes[i][0],
              o->sizes[i][1], o->sizes[i][2], op->max_size);
      return 1;
    }
  struct progress pr = {.op = op, .tty = isatty(STDERR_FILENO) == 1,
                        .columns = 80};
  if (pr.tty)
    pr.columns = cli_terminal_columns(STDERR_FILENO);
  tune_binding binding = {.op = op, .progress = show_progress,
                          .progress_user = &pr};
  tune_bind(&binding, o);
  o->stop = &stop_flag;
  kiln_tuning_result r;
  char why[512];
  const bool ok =
      kiln_tuning_search(q, op->name, o, &r, 0, NULL, NULL) == KILN_OK;
  if (!ok) { /* the message without the function's name */
    const char *e = kiln_last_error(), *fn = "kiln_tuning_search: ";
    snprintf(why, sizeof why, "%s",
             strncmp(e, fn, strlen(fn)) == 0 ? e + strlen(fn) : e);
  }
  if (pr.tty)
    fprintf(stderr, "\r%*s\r", pr.columns > 1 ? pr.columns - 1 : 79, "");
  *stuck = r.stuck;
  if (r.stuck) {
    /* What was found is saved; the process's exit ends the rest. */
    fprintf(stderr, "kiln tune: %s: %s; the device is still running it, so "
                    "the search stopped there\n",
            op->name, r.last_rejection[0] ? r.last_rejection : why);
    if (!ok)
      return 1;
  } else if (!ok) {
    fprintf(stderr, "kiln tune: %s: %s\n", op->name, why);
    return 1;
  }
  char figures[KILN_TUNING_TEXT_CAPACITY];
  size_t used = (size_t)snprintf(figures, sizeof figures,
                                 "%s before -> tuned:", op->unit);
  for (size_t i = 0; i < o->size_count && used < sizeof figures; i++) {
    char size[64];
    size_name(op, o->sizes[i], size, sizeof size);
    used += (size_t)snprintf(figures + used, sizeof figures - used,
                             " %s %.2f -> %.2f;", size, r.default_figures[i],
                             r.best_figures[i]);
  }
  if (used < sizeof figures)
    snprintf(figures + used, sizeof figures - used,
             " %zu tried, %zu rejected", r.tried, r.rejected);
  if (kiln_tuning_save(ctx, op->name, r.best_params, figures, NULL) !=
          KILN_OK ||
      (export_path != NULL &&
       kiln_tuning_save(ctx, op->name, r.best_params, figures, export_path) !=
           KILN_OK)) {
    fprintf(stderr, "kiln tune: %s\n", kiln_last_error());
    return 1;
  }
  kiln_tuning_set(ctx, op->name, NULL);
  kiln_tuning_get_info(ctx, op->name, &t);
  report(op, o, &r, name, json, t.path);
  fflush(stdout); /* each op's report as soon as it is done */
  return 0;
}

int kiln_cmd_tune(int argc, char **argv) {
  enum { OPT_RESET = 256 };
  static const struct option long_opts[] = {
      {"device", required_argument, 0, 'd'}, {"op", required_argument, 0, 'o'},
      {"size", required_argument, 0, 's'},   {"budget", required_argument, 0, 'b'},
      {"json", no_argument, 0, 'j'},         {"export", required_argument, 0, 'x'},
      {"list", no_argument, 0, 'l'},         {"reset", no_argument, 0, OPT_RESET},
      {"jobs", required_argument, 0, 'J'},
      {"compile-timeout", required_argument, 0, 'C'},
      {"run-timeout", required_argument, 0, 'R'},
      {"help", no_argument, 0, 'h'},         {0, 0, 0, 0}};
  const char *selector = NULL, *ops = "gemm", *export_path = NULL;
  bool json = false, list = false, reset = false, sizes_given = false;
  bool stuck = false; /* a launch ran past the run timeout and still runs */
  kiln_tuning_search_options o;
  memset(&o, 0, sizeof o);
  o.budget_s = 120.0;
  o.seed = 1;
  o.exhaustive_max = 256;
  parse_sizes("512,1024", &o);
  const long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  o.jobs = cpus > 1 ? (unsigned)(cpus < 64 ? cpus : 64) : 1;
  o.compile_timeout_s = TUNE_COMPILE_TIMEOUT;
  o.run_timeout_s = TUNE_RUN_TIMEOUT;
  cli args;
  cli_begin(&args, "kiln tune", argc, argv, "d:o:s:b:jx:lhJ:C:R:", long_opts);
  for (int c; (c = cli_next(&args)) != -1;) {
    switch (c) {
    case 'd': selector = optarg; break;
    case 'o': ops = optarg; break;
    case 's':
      sizes_given = true;
      if (!parse_sizes(optarg, &o))
        return CLI_USAGE;
      break;
    case 'b':
      if (!parse_seconds("--budget", optarg, &o.budget_s))
        return 2;
      break;
    case 'C':
      if (!parse_seconds("--compile-timeout", optarg, &o.compile_timeout_s))
        return 2;
      break;
    case 'R':
      if (!parse_seconds("--run-timeout", optarg, &o.run_timeout_s))
        return 2;
      break;
    case 'J': {
      char *end = NULL;
      const long n = strtol(optarg, &end, 10);
      if (end == optarg || *end != '\0' || n < 1 || n > 256)
        return cli_usage_error("kiln tune", "--jobs '%s' is not a number of "
                               "threads from 1 to 256", optarg);
      o.jobs = (unsigned)n;
      break;
    }
    case 'j': json = true; break;
    case 'x': export_path = optarg; break;
    case 'l': list = true; break;
    case OPT_RESET: reset = true; break;
    case 'h': usage(stdout); return CLI_OK;
    default: return CLI_USAGE;
    }
  }
  if (cli_no_operands(&args) != CLI_OK)
    return CLI_USAGE;
  const tune_op *todo[8];
  size_t ntodo = 0;
  if (!parse_ops(ops, todo, &ntodo))
    return CLI_USAGE;

  /* Before the driver starts any thread (see sigint_thread). */
  if (!list && !reset)
    watch_sigint();
  int status = 1;
  kiln_device_list *devs = NULL;
  kiln_context *ctx = NULL;
  kiln_queue *q = NULL;
  const kiln_device *device = NULL;
  /* No persistent cache for the candidates' programs: hundreds of one-off
   * entries would crowd out the programs that matter, and on drivers that
   * save a program's binary only when it is released
   * (KILN_QUIRK_LAZY_PROGRAM_BINARY: PoCL) writing them all at the end cost
   * more than the budget itself (a 30 s tune ran 85 s, 4 to 6 minutes
   * under load). Programs that use the result build it afresh. */
  kiln_context_options copts = {.flags = KILN_CONTEXT_NO_CACHE};
  status = cli_select_device("kiln tune", selector, &devs, &device);
  if (status != CLI_OK)
    goto done;
  status = CLI_FAILURE;
  if (kiln_context_create(device, &copts, &ctx) != KILN_OK ||
      kiln_queue_create(ctx, 0, &q) != KILN_OK) {
    fprintf(stderr, "kiln tune: %s\n", kiln_last_error());
    goto done;
  }
  const char *name = kiln_context_get_device_info(ctx)->name;
  if (list) {
    for (size_t i = 0; tune_op_at(i) != NULL; i++)
      list_space(ctx, tune_op_at(i));
    status = 0;
    goto done;
  }
  if (reset) {
    /* Say what was done: a file removed, or none there to remove. */
    kiln_tuning_info ti;
    const bool known =
        kiln_tuning_get_info(ctx, tune_op_at(0)->name, &ti) == KILN_OK &&
        ti.path[0] != '\0';
    struct stat st;
    const bool none = known && lstat(ti.path, &st) != 0 && errno == ENOENT;
    if (!none && kiln_tuning_reset(ctx, NULL) != KILN_OK) {
      fprintf(stderr, "kiln tune: %s\n", kiln_last_error());
      goto done;
    }
    char line[KILN_TUNING_PATH_CAPACITY + 256];
    if (none)
      snprintf(line, sizeof line, "%s has no tuning file (%s): nothing removed",
               name, ti.path);
    else
      snprintf(line, sizeof line, "removed the tuning file of %s%s%s%s", name,
               known ? " (" : "", known ? ti.path : "", known ? ")" : "");
    cli_wrap(stdout, line, 0, 2, cli_width());
    status = 0;
    goto done;
  }
  status = 0;
  for (size_t i = 0; i < ntodo && status == 0 && !stop_flag && !stuck; i++) {
    const tune_op *op = family_op(ctx, todo[i]);
    kiln_tuning_search_options oi = o;
    if (!sizes_given)
      parse_sizes(op->sizes, &oi);
    if (i > 0 && !json)
      printf("\n");
    status = tune_one(ctx, q, op, &oi, json, export_path, &stuck);
  }
  if (stuck)
    q = NULL; /* left to the process's exit, see tune_one */
done:
  if (q != NULL)
    kiln_queue_destroy(q);
  /* KILN_ERR_BUSY while a build of the search still runs in the driver's
   * compiler, or while a stuck queue lives. A build that was in flight when
   * the budget ran out ends soon: wait for it, up to the compile timeout
   * (not for a stuck launch, nor after Ctrl-C). What still runs then, a
   * build the search gave up on, is left to the process's exit
   * (runtime/tune/build_pool.c). */
  if (ctx != NULL) {
    const double until =
        tools_now() + (stuck || stop_flag ? 0.0 : o.compile_timeout_s);
    kiln_status gone;
    while ((gone = kiln_context_destroy(ctx)) == KILN_ERR_BUSY &&
           tools_now() < until && !stop_flag) {
      const struct timespec pause = {0, 20 * 1000 * 1000};
      nanosleep(&pause, NULL);
    }
    if (gone == KILN_ERR_BUSY && status == 0)
      fprintf(stderr, "kiln tune: leaving a build or a launch that ran past "
                      "its timeout to the process's exit\n");
  }
  kiln_device_list_destroy(devs);
  return status;
}
