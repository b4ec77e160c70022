/* `kiln cache`: look at, clear, fill and measure the persistent program
 * cache. Uses only the public API (kiln_cache.h).
 *
 *   kiln cache ls | stats | clear | warm [--device SEL] | bench [options]
 *
 * `bench` runs fresh processes (this executable again) with kiln's cache
 * cold and then warm, PoCL's own cache off in both, and reports process
 * start to first result. Its child workload, the hidden `kiln cache
 * first-kernel`, builds a small user kernel, runs it once and checks it. */
#define _XOPEN_SOURCE 700 /* nftw */
#include "cli/cli.h"
#include "commands.h"
#include "progress.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "kiln/kiln.h"

static void usage(FILE *out) {
  fputs("usage: kiln cache <command> [options]\n"
        "\n"
        "commands:\n"
        "  ls                  list entries: last use, size, kernel source, device\n"
        "                      (a missing directory is not created)\n"
        "  stats               directory, state, size, and the last run's hits\n"
        "                      and misses\n"
        "  clear               remove every entry\n"
        "  warm [-d | --device SEL]\n"
        "                      compile every op kernel for the selected devices\n"
        "                      (default: KILN_DEVICE, else the default device)\n"
        "  bench [-d | --device SEL] [-r | --runs N]\n"
        "        [-w | --workload first-kernel|demo|all]\n"
        "                      time fresh processes from start to first result\n"
        "                      with kiln's cache cold and warm (PoCL's cache off)\n"
        "\n"
        "options of every command:\n"
        "      --wide          do not fit lines to the terminal's width (or to\n"
        "                      80 columns when not a terminal)\n"
        "  -h, --help          this help\n"
        "\n"
        "environment: KILN_CACHE_DIR (directory), KILN_CACHE=0 (disable),\n"
        "KILN_CACHE_MAX_MB (size cap, default 512), KILN_DEVICE (checked by\n"
        "every command).\n"
        "\n"
        "exit status: 0 success, 1 failure (clear: an entry could not be\n"
        "removed), 2 usage error (a selector that does not parse included).\n",
        out);
}

static void format_bytes(uint64_t bytes, char *buf, size_t cap) {
  if (bytes >= (10ull << 20))
    snprintf(buf, cap, "%llu MiB", (unsigned long long)(bytes >> 20));
  else if (bytes >= (10ull << 10))
    snprintf(buf, cap, "%llu KiB", (unsigned long long)(bytes >> 10));
  else
    snprintf(buf, cap, "%llu B", (unsigned long long)bytes);
}

static void format_age(int64_t seconds, char *buf, size_t cap) {
  if (seconds < 0)
    seconds = 0;
  if (seconds < 120)
    snprintf(buf, cap, "%llds", (long long)seconds);
  else if (seconds < 7200)
    snprintf(buf, cap, "%lldm", (long long)(seconds / 60));
  else if (seconds < 172800)
    snprintf(buf, cap, "%lldh", (long long)(seconds / 3600));
  else
    snprintf(buf, cap, "%lldd", (long long)(seconds / 86400));
}

/* The options of the commands without their own (--help, --wide): -1 to
 * go on, else the exit code. KILN_DEVICE is checked here too, though these
 * commands use no device: a bad one is an error in every command. */
static int no_options(const char *prog, int argc, char **argv) {
  cli args;
  const int rc = cli_parse_help_only(&args, prog, argc, argv, usage);
  if (rc >= 0)
    return rc;
  if (cli_no_operands(&args) != CLI_OK ||
      cli_check_selector(prog, NULL) != CLI_OK)
    return CLI_USAGE;
  return -1;
}

/* ---- ls, stats, clear ---------------------------------------------------- */

static int cmd_ls(int argc, char **argv) {
  int rc = no_options("kiln cache ls", argc, argv);
  if (rc >= 0)
    return rc;
  kiln_cache_info info;
  kiln_cache_list *list;
  if (kiln_cache_get_info(&info) != KILN_OK ||
      kiln_cache_list_create(&list) != KILN_OK) {
    fprintf(stderr, "kiln cache ls: %s\n", kiln_last_error());
    return 1;
  }
  const int width = cli_width();
  char line[KILN_CACHE_PATH_CAPACITY + KILN_CACHE_TEXT_CAPACITY];
  snprintf(line, sizeof line, "cache directory: %s",
           info.directory[0] ? info.directory : "(none)");
  cli_wrap(stdout, line, 0, 2, width);
  if (info.diagnostic[0] != '\0') {
    snprintf(line, sizeof line, "note: %s", info.diagnostic);
    cli_wrap(stdout, line, 0, 2, width);
  }
  size_t count = kiln_cache_list_get_count(list);
  if (count == 0) {
    printf("no entries\n");
    kiln_cache_list_destroy(list);
    return 0;
  }
  /* The file name (and a damaged entry's note) go on a line of their own
   * when the row would pass the width. */
  printf("%-9s %-9s %-16s %-26s %s\n", "LAST USED", "SIZE", "KERNEL", "DEVICE",
         "FILE");
  int64_t now = (int64_t)time(NULL);
  for (size_t i = 0; i < count; i++) {
    const kiln_cache_entry *e = kiln_cache_list_get(list, i);
    char age[32], size[32];
    format_age(now - e->last_used, age, sizeof age);
    format_bytes(e->size_bytes, size, sizeof size);
    int col = printf("%-9s %-9s %-16s %-26.26s", age, size,
                     e->valid ? e->label : "?", e->valid ? e->device : "(damaged)");
    cli_item(stdout, &col, " ", e->file, 4, width);
    if (!e->valid)
      cli_item(stdout, &col, "  ", "[damaged: rebuilt on next use]", 4, width);
    putchar('\n');
  }
  printf("%zu entr%s, %llu bytes\n", count, count == 1 ? "y" : "ies",
         (unsigned long long)info.bytes);
  kiln_cache_list_destroy(list);
  return 0;
}

static int cmd_stats(int argc, char **argv) {
  int rc = no_options("kiln cache stats", argc, argv);
  if (rc >= 0)
    return rc;
  kiln_cache_info info;
  if (kiln_cache_get_info(&info) != KILN_OK) {
    fprintf(stderr, "kiln cache stats: %s\n", kiln_last_error());
    return 1;
  }
  char bytes[32], cap[32];
  format_bytes(info.bytes, bytes, sizeof bytes);
  format_bytes(info.max_bytes, cap, sizeof cap);
  const int width = cli_width();
  char line[KILN_CACHE_PATH_CAPACITY + KILN_CACHE_TEXT_CAPACITY];
  snprintf(line, sizeof line, "directory:  %s",
           info.directory[0] ? info.directory : "(none)");
  cli_wrap(stdout, line, 0, 12, width);
  printf("state:      %s\n", !info.enabled ? "disabled"
                             : info.usable ? "enabled"
                                           : "enabled but unusable");
  if (info.diagnostic[0] != '\0') {
    snprintf(line, sizeof line, "reason:     %s", info.diagnostic);
    cli_wrap(stdout, line, 0, 12, width);
  }
  printf("entries:    %llu\n", (unsigned long long)info.entries);
  printf("size:       %s of %s (KILN_CACHE_MAX_MB)\n", bytes, cap);
  if (info.last_run_recorded) {
    char age[32];
    format_age((int64_t)time(NULL) - info.last_run_time, age, sizeof age);
    unsigned long long lookups = info.last_run_hits + info.last_run_misses;
    snprintf(line, sizeof line, "last run:   pid %lld, %s ago: %llu hit%s, "
           "%llu miss%s (%.0f%% hits), %llu stored, %llu damaged entr%s "
           "rebuilt",
           (long long)info.last_run_pid, age,
           (unsigned long long)info.last_run_hits,
           info.last_run_hits == 1 ? "" : "s",
           (unsigned long long)info.last_run_misses,
           info.last_run_misses == 1 ? "" : "es",
           lookups ? 100.0 * (double)info.last_run_hits / (double)lookups : 0.0,
           (unsigned long long)info.last_run_stores,
           (unsigned long long)info.last_run_rejected,
           info.last_run_rejected == 1 ? "y" : "ies");
    cli_wrap(stdout, line, 0, 12, width);
  } else {
    printf("last run:   not recorded\n");
  }
  return 0;
}

static int cmd_clear(int argc, char **argv) {
  int rc = no_options("kiln cache clear", argc, argv);
  if (rc >= 0)
    return rc;
  kiln_cache_info info;
  kiln_cache_get_info(&info);
  size_t removed = 0;
  const kiln_status s = kiln_cache_clear(&removed);
  const char *dir = info.directory[0] ? info.directory : "(no directory)";
  /* A failure is said once, on stderr, with what was removed before it:
   * never a "removed" line that reads as success. */
  if (s != KILN_OK) {
    fprintf(stderr, "kiln cache clear: %s (%zu entr%s removed before)\n",
            kiln_last_error(), removed, removed == 1 ? "y" : "ies");
    return CLI_FAILURE;
  }
  char line[KILN_CACHE_PATH_CAPACITY + 64];
  snprintf(line, sizeof line, "removed %zu entr%s from %s", removed,
           removed == 1 ? "y" : "ies", dir);
  cli_wrap(stdout, line, 0, 2, cli_width());
  return CLI_OK;
}

/* ---- warm ---------------------------------------------------------------- */

struct warm_view {
  bool tty;
  const char *device;
  size_t failed;
  /* The terminal's per-device summary: this device's counts. */
  size_t compiled, cached, failed_before;
};

static void on_progress(const kiln_cache_warm_progress *p, void *user) {
  struct warm_view *view = user;
  if (p->finished && p->status != KILN_OK)
    view->failed++;
  else if (p->finished && p->from_cache)
    view->cached++;
  else if (p->finished)
    view->compiled++;
  if (!view->tty && !p->finished)
    return;
  if (!view->tty) {
    if (p->status == KILN_OK)
      printf("%s: %s%s%s%s %s in %.2f s\n", view->device, p->source,
             p->options[0] ? " (" : "", p->options, p->options[0] ? ")" : "",
             p->from_cache ? "loaded from the cache" : "compiled", p->seconds);
    else
      printf("%s: %s%s%s%s FAILED: %s\n", view->device, p->source,
             p->options[0] ? " (" : "", p->options, p->options[0] ? ")" : "",
             kiln_last_error());
    fflush(stdout);
    return;
  }
  /* On a terminal: one line, rewritten in place and fitted to the width
   * read at each update (the window may be resized meanwhile); a failure
   * gets a line of its own above it. */
  size_t done = p->index + (p->finished ? 1 : 0);
  if (p->finished && p->status != KILN_OK) {
    progress_clear(stdout);
    printf("FAILED %s %s: %s\n", p->source, p->options, kiln_last_error());
  }
  char text[256];
  snprintf(text, sizeof text, "%s %s%s%s%s",
           !p->finished           ? "compiling"
           : p->status != KILN_OK ? "FAILED"
           : p->from_cache        ? "cached"
                                  : "compiled",
           p->source, p->options[0] ? " (" : "", p->options,
           p->options[0] ? ")" : "");
  progress_show(stdout, cli_terminal_columns(STDOUT_FILENO), done, p->total,
                text);
  if (p->finished && p->index + 1 == p->total) {
    progress_clear(stdout);
    printf("  %zu program%s: %zu compiled, %zu from the cache, %zu failed\n",
           p->total, p->total == 1 ? "" : "s", view->compiled, view->cached,
           view->failed - view->failed_before);
    view->failed_before = view->failed;
    view->compiled = view->cached = 0;
  }
}

static int cmd_warm(int argc, char **argv) {
  static const struct option longopts[] = {
      {"device", required_argument, NULL, 'd'},
      {"help", no_argument, NULL, 'h'},
      {NULL, 0, NULL, 0}};
  const char *selector = NULL;
  cli args;
  cli_begin(&args, "kiln cache warm", argc, argv, "d:h", longopts);
  for (int c; (c = cli_next(&args)) != -1;) {
    switch (c) {
    case 'd':
      selector = optarg;
      break;
    case 'h':
      usage(stdout);
      return CLI_OK;
    default:
      return CLI_USAGE;
    }
  }
  if (cli_no_operands(&args) != CLI_OK)
    return CLI_USAGE;
  kiln_device_list *list = NULL;
  kiln_selection *selection = NULL;
  int rc = 1;
  if (kiln_device_list_create(&list) != KILN_OK) {
    fprintf(stderr, "kiln cache warm: %s\n", kiln_last_error());
    goto done;
  }
  kiln_status s = kiln_selection_create(list, selector, &selection);
  if (s != KILN_OK) {
    fprintf(stderr, "kiln cache warm: %s\n", kiln_last_error());
    rc = s == KILN_ERR_SELECTOR_SYNTAX ? 2 : 1;
    goto done;
  }
  size_t count = kiln_selection_get_count(selection);
  if (count == 0) {
    fprintf(stderr, "kiln cache warm: no device matches '%s'\n",
            kiln_selection_get_selector(selection));
    goto done;
  }
  kiln_cache_info info;
  kiln_cache_get_info(&info);
  if (!info.enabled || !info.usable)
    fprintf(stderr, "kiln cache warm: warning: nothing will be stored: %s\n",
            info.diagnostic);
  const int width = cli_width();
  char line[KILN_CACHE_PATH_CAPACITY + 256];
  struct warm_view view = {.tty = isatty(STDOUT_FILENO) != 0};
  rc = 0;
  double t0 = tools_now();
  for (size_t i = 0; i < count; i++) {
    const kiln_device_info *dev = kiln_device_get_info(kiln_selection_get(selection, i));
    view.device = dev->name;
    if (view.tty) {
      snprintf(line, sizeof line, "%s (%s):", dev->name, dev->platform_name);
      cli_wrap(stdout, line, 0, 2, width);
    }
    kiln_context *ctx = NULL;
    if (kiln_context_create(kiln_selection_get(selection, i), NULL, &ctx) != KILN_OK) {
      fprintf(stderr, "kiln cache warm: %s: %s\n", dev->name, kiln_last_error());
      rc = 1;
      continue;
    }
    size_t built = 0;
    if (kiln_cache_warm(ctx, on_progress, &view, &built) != KILN_OK)
      rc = 1;
    kiln_context_destroy(ctx);
  }
  kiln_cache_get_info(&info);
  snprintf(line, sizeof line, "warmed %zu device%s in %.1f s: %llu entries, "
           "%llu bytes in %s%s", count, count == 1 ? "" : "s",
           tools_now() - t0, (unsigned long long)info.entries,
           (unsigned long long)info.bytes, info.directory,
           view.failed ? " (some sources FAILED)" : "");
  cli_wrap(stdout, line, 0, 2, width);
done:
  kiln_selection_destroy(selection);
  kiln_device_list_destroy(list);
  return rc;
}

/* ---- the bench's child workload ---------------------------------------- */

static const char first_kernel_source[] =
    "__kernel void first(__global uint *out, uint seed) {\n"
    "  size_t i = get_global_id(0);\n"
    "  out[i] = ((uint)i * 2654435761u) ^ seed;\n"
    "}\n";

/* Hidden `kiln cache first-kernel [--device SEL]`: enumerate, build a small
 * user kernel, run it once, check it. Exit 0 when correct. */
static int cmd_first_kernel(int argc, char **argv) {
  const char *selector = argc >= 3 && strcmp(argv[1], "--device") == 0 ? argv[2] : NULL;
  enum { N = 4096 };
  static uint32_t out[N];
  kiln_device_list *list = NULL;
  const kiln_device *dev;
  kiln_context *ctx = NULL;
  kiln_queue *queue = NULL;
  kiln_program *program = NULL;
  kiln_kernel *kernel = NULL;
  kiln_buffer *buf = NULL;
  size_t global = N;
  int rc = 1;
  if (kiln_device_list_create(&list) != KILN_OK ||
      kiln_device_select(list, selector, &dev) != KILN_OK ||
      kiln_context_create(dev, NULL, &ctx) != KILN_OK ||
      kiln_queue_create(ctx, 0, &queue) != KILN_OK ||
      kiln_program_create_built(ctx, first_kernel_source, NULL, &program) != KILN_OK ||
      kiln_kernel_create(program, "first", &kernel) != KILN_OK ||
      kiln_buffer_create(ctx, sizeof out, 0, &buf) != KILN_OK ||
      kiln_kernel_set_arg_buffer(kernel, 0, buf) != KILN_OK ||
      kiln_kernel_set_arg_u32(kernel, 1, 12345u) != KILN_OK ||
      kiln_kernel_launch(queue, kernel, 1, &global, NULL, 0, NULL, NULL) != KILN_OK ||
      kiln_buffer_read_sync(queue, &(kiln_range){buf, 0, N, KILN_U32}, out) != KILN_OK) {
    fprintf(stderr, "kiln cache first-kernel: %s\n", kiln_last_error());
    goto done;
  }
  rc = 0;
  for (uint32_t i = 0; i < N; i++)
    if (out[i] != ((i * 2654435761u) ^ 12345u)) {
      fprintf(stderr, "kiln cache first-kernel: wrong result at %u\n", i);
      rc = 1;
      break;
    }
  printf("%s (%s)\n", rc == 0 ? "PASS" : "FAIL",
         kiln_program_is_from_cache(program) ? "from cache" : "compiled");
done:
  kiln_buffer_destroy(buf);
  kiln_kernel_destroy(kernel);
  kiln_program_destroy(program);
  kiln_queue_destroy(queue);
  kiln_context_destroy(ctx);
  kiln_device_list_destroy(list);
  return rc;
}

/* ---- bench ------------------------------------------------------------- */

static int remove_one(const char *path, const struct stat *sb, int flag,
                      struct FTW *ftw) {
  (void)sb;
  (void)flag;
  (void)ftw;
  return remove(path);
}

static void remove_tree(const char *dir) {
  nftw(dir, remove_one, 8, FTW_DEPTH | FTW_PHYS);
}

extern char **environ;

/* The environment of a child: ours without the cache variables, plus
 * kiln's cache directory and PoCL's cache turned off (and pointed at an
 * empty directory, so nothing PoCL kept elsewhere can help). */
static char **child_env(const char *kiln_dir, const char *pocl_dir) {
  static const char *const drop[] = {"KILN_CACHE=", "KILN_CACHE_DIR=",
                                     "POCL_KERNEL_CACHE=", "POCL_CACHE_DIR="};
  size_t n = 0;
  while (environ[n] != NULL)
    n++;
  char **env = calloc(n + 4, sizeof *env);
  if (env == NULL)
    return NULL;
  size_t k = 0;
  for (size_t i = 0; i < n; i++) {
    bool skip = false;
    for (size_t j = 0; j < sizeof drop / sizeof drop[0]; j++)
      skip = skip || strncmp(environ[i], drop[j], strlen(drop[j])) == 0;
    if (!skip)
      env[k++] = environ[i];
  }
  size_t a = strlen(kiln_dir) + 16, b = strlen(pocl_dir) + 16;
  env[k] = malloc(a);
  env[k + 1] = malloc(b);
  if (env[k] == NULL || env[k + 1] == NULL) {
    free(env[k]);
    free(env[k + 1]);
    free(env);
    return NULL;
  }
  snprintf(env[k], a, "KILN_CACHE_DIR=%s", kiln_dir);
  snprintf(env[k + 1], b, "POCL_CACHE_DIR=%s", pocl_dir);
  env[k + 2] = (char *)"POCL_KERNEL_CACHE=0";
  env[k + 3] = NULL;
  return env;
}

/* Run this executable with args in a fresh process; its output goes to
 * log. Returns the wall time from fork to exit, or -1 when it failed. */
static double run_child(char *const *args, const char *kiln_dir,
                        const char *pocl_dir, const char *log) {
  char **env = child_env(kiln_dir, pocl_dir);
  if (env == NULL)
    return -1;
  /* Everything the child needs is prepared before fork: between fork and
   * exec only async-signal-safe calls are allowed, and OpenCL drivers run
   * threads in this process. */
  double t0 = tools_now();
  pid_t pid = fork();
  if (pid == 0) {
    int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd >= 0) {
      dup2(fd, STDOUT_FILENO);
      dup2(fd, STDERR_FILENO);
    }
    execve("/proc/self/exe", args, env);
    _exit(127);
  }
  int status = 0;
  bool ok = pid > 0 && waitpid(pid, &status, 0) == pid && WIFEXITED(status) &&
            WEXITSTATUS(status) == 0;
  double wall = tools_now() - t0;
  size_t n = 0;
  while (env[n] != NULL)
    n++;
  free(env[n - 3]);
  free(env[n - 2]);
  free(env);
  return ok ? wall : -1;
}

static void show_log(const char *log) {
  FILE *f = fopen(log, "r");
  if (f == NULL)
    return;
  char line[512];
  while (fgets(line, sizeof line, f) != NULL)
    fprintf(stderr, "    | %s", line);
  fclose(f);
}

static int by_value(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static double median(const double *values, int n) {
  double sorted[16];
  memcpy(sorted, values, (size_t)n * sizeof *values);
  qsort(sorted, (size_t)n, sizeof *sorted, by_value);
  return n % 2 ? sorted[n / 2] : 0.5 * (sorted[n / 2 - 1] + sorted[n / 2]);
}

struct workload {
  const char *name;
  char *args[8];
};

static int cmd_bench(int argc, char **argv) {
  static const struct option longopts[] = {
      {"device", required_argument, NULL, 'd'},
      {"runs", required_argument, NULL, 'r'},
      {"workload", required_argument, NULL, 'w'},
      {"help", no_argument, NULL, 'h'},
      {NULL, 0, NULL, 0}};
  const char *selector = NULL, *which = "all";
  int runs = 3;
  cli args;
  cli_begin(&args, "kiln cache bench", argc, argv, "d:r:w:h", longopts);
  for (int c; (c = cli_next(&args)) != -1;) {
    switch (c) {
    case 'd':
      selector = optarg;
      break;
    case 'r': {
      char *end = NULL;
      long v = strtol(optarg, &end, 10);
      if (end == optarg || *end != '\0' || v < 1 || v > 15)
        return cli_usage_error("kiln cache bench", "--runs wants a number of "
                               "runs from 1 to 15, not '%s'", optarg);
      runs = (int)v;
      break;
    }
    case 'w':
      if (strcmp(optarg, "first-kernel") != 0 && strcmp(optarg, "demo") != 0 &&
          strcmp(optarg, "all") != 0)
        return cli_usage_error("kiln cache bench", "--workload is "
                               "first-kernel, demo or all, not '%s'", optarg);
      which = optarg;
      break;
    case 'h':
      usage(stdout);
      return CLI_OK;
    default:
      return CLI_USAGE;
    }
  }
  if (cli_no_operands(&args) != CLI_OK)
    return CLI_USAGE;
  /* Resolve the device here so that a bad selector is a usage error, and
   * pin the children to it by platform:device index. */
  kiln_device_list *list = NULL;
  const kiln_device *dev = NULL;
  const int selected = cli_select_device("kiln cache bench", selector, &list, &dev);
  if (selected != CLI_OK) {
    kiln_device_list_destroy(list);
    return selected;
  }
  const kiln_device_info *info = kiln_device_get_info(dev);
  char pin[64], name[256];
  snprintf(pin, sizeof pin, "%zu:%zu", info->platform_index, info->device_index);
  snprintf(name, sizeof name, "%s (%s)", info->name, info->platform_name);
  kiln_device_list_destroy(list);

  char base[] = "/tmp/kiln-cache-bench-XXXXXX";
  if (mkdtemp(base) == NULL) {
    fprintf(stderr, "kiln cache bench: cannot create a temporary directory: "
                    "%s\n", strerror(errno));
    return 1;
  }
  struct workload workloads[] = {
      {"first-kernel", {"kiln", "cache", "first-kernel", "--device", pin, NULL}},
      {"demo", {"kiln", "demo", "--device", pin, NULL}},
  };
  enum { WORKLOADS = 2 };
  double times[WORKLOADS][2][16];
  bool ran[WORKLOADS] = {false, false};
  int rc = 0;
  printf("kiln cache bench: %s, %d run%s per row\n", name, runs,
         runs == 1 ? "" : "s");
  printf("each run is a fresh process; PoCL's cache is off "
         "(POCL_KERNEL_CACHE=0, empty POCL_CACHE_DIR)\n");
  printf("cold: empty KILN_CACHE_DIR; warm: the directory the cold run "
         "filled\n\n");
  for (int w = 0; w < WORKLOADS; w++) {
    if (strcmp(which, "all") != 0 && strcmp(which, workloads[w].name) != 0)
      continue;
    ran[w] = true;
    for (int r = 0; r < runs && rc == 0; r++) {
      char kiln_dir[128], log[160];
      snprintf(kiln_dir, sizeof kiln_dir, "%s/kiln-%d-%d", base, w, r);
      snprintf(log, sizeof log, "%s/child.log", base);
      for (int warm = 0; warm < 2; warm++) {
        char pocl_dir[128];
        snprintf(pocl_dir, sizeof pocl_dir, "%s/pocl-%d-%d-%d", base, w, r, warm);
        double t = run_child(workloads[w].args, kiln_dir, pocl_dir, log);
        remove_tree(pocl_dir);
        if (t < 0) {
          fprintf(stderr, "kiln cache bench: the %s %s run failed:\n",
                  warm ? "warm" : "cold", workloads[w].name);
          show_log(log);
          rc = 1;
          break;
        }
        times[w][warm][r] = t;
      }
    }
  }
  remove_tree(base);
  if (rc != 0)
    return rc;

  printf("%-13s %-6s", "workload", "cache");
  for (int r = 0; r < runs; r++)
    printf("  run %-5d", r + 1);
  printf("  %9s\n", "median");
  for (int w = 0; w < WORKLOADS; w++) {
    if (!ran[w])
      continue;
    for (int warm = 0; warm < 2; warm++) {
      printf("%-13s %-6s", workloads[w].name, warm ? "warm" : "cold");
      for (int r = 0; r < runs; r++)
        printf("  %6.0f ms", times[w][warm][r] * 1e3);
      printf("  %6.0f ms\n", median(times[w][warm], runs) * 1e3);
    }
  }
  printf("\n");
  for (int w = 0; w < WORKLOADS; w++) {
    if (!ran[w])
      continue;
    double cold = median(times[w][0], runs), warm = median(times[w][1], runs);
    printf("%-13s warm/cold = %.3f (%.1fx faster)%s\n", workloads[w].name,
           warm / cold, cold / warm,
           warm / cold <= 0.1 ? "" : "  [above the 0.1 target]");
  }
  return 0;
}

int kiln_cmd_cache(int argc, char **argv) {
  static const cli_command subs[] = {
      {"ls", cmd_ls},       {"list", cmd_ls},         {"stats", cmd_stats},
      {"clear", cmd_clear}, {"warm", cmd_warm},       {"bench", cmd_bench},
      {"first-kernel", cmd_first_kernel},
  };
  enum { SUBS = sizeof subs / sizeof subs[0] };
  /* The hidden first-kernel is never suggested. */
  return cli_run_command("kiln cache", argc, argv, subs, SUBS, SUBS - 1,
                         usage);
}
