/* kiln: the command-line tool. Dispatches to one subcommand per file
 * (commands.h); the grammar and exit codes they share are cli.h's. */
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "commands.h"
#include "kiln/kiln.h"

typedef struct command {
  const char *name;
  int (*run)(int argc, char **argv);
  const char *summary;
} command;

static const command commands[] = {
    {"info", kiln_cmd_info, "report platforms and devices (text, list, JSON, doctor)"},
    {"demo", kiln_cmd_demo, "build and run a small kernel, check it, print timings"},
    {"cache", kiln_cmd_cache, "list, clear or warm the program cache"},
    {"bench", kiln_cmd_bench, "measure op throughput against the device's peaks"},
    {"tune", kiln_cmd_tune, "search kernel parameters for a device, with a correctness gate"},
    {"report", kiln_cmd_report, "measure a device in one run (tests, tune, bench) into a folder"},
    {"trace", kiln_cmd_trace, "summarize a trace file that KILN_TRACE wrote"},
};

#define COMMAND_COUNT (sizeof(commands) / sizeof(commands[0]))

static void usage(FILE *out) {
  fprintf(out,
          "usage: kiln [-V | --version] [-h | --help] <command> [options]\n"
          "       kiln help <command>\n"
          "\n"
          "kiln is a portable, vendor-neutral GPU compute runtime over OpenCL.\n"
          "\n"
          "commands:\n");
  for (size_t i = 0; i < COMMAND_COUNT; i++)
    fprintf(out, "  %-8s %s\n", commands[i].name, commands[i].summary);
  fprintf(out,
          "\n"
          "Run `kiln <command> --help` for a command's options. Options mean\n"
          "the same in every command that takes them:\n"
          "  -d, --device SEL   the device (selector grammar as KILN_DEVICE)\n"
          "  -j, --json         a JSON document instead of text\n"
          "  -J, --jobs N       N threads\n"
          "  -l, --list         list instead of run\n"
          "  -o, --op NAMES     the ops, comma-separated\n"
          "  -s, --size SPECS   the sizes, comma-separated\n"
          "  -r, --runs N       timed runs\n"
          "      --wide         do not fit text to the terminal (or to 80\n"
          "                     columns when output is not a terminal)\n"
          "  -h, --help         the command's help\n"
          "Long options are spelt out in full; a misspelt (or abbreviated)\n"
          "command or option gets a suggestion.\n"
          "\n"
          "environment (kiln(1) and kiln(3) say more):\n"
          "  KILN_DEVICE        device selector used when none is given\n"
          "                     (for example gpu, cpu, pocl, 0:1, name:A100)\n"
          "  KILN_BACKEND       force a backend profile (nvidia, amd, intel,\n"
          "                     pocl, generic); KILN_PROFILE, its old name,\n"
          "                     is still read\n"
          "  KILN_CACHE_DIR     program cache directory (default\n"
          "                     $XDG_CACHE_HOME/kiln, else $HOME/.cache/kiln)\n"
          "  KILN_CACHE         0, off, no or false: no program cache\n"
          "  KILN_CACHE_MAX_MB  program cache size cap in MiB (default 512)\n"
          "  KILN_TUNING        off: ignore tuning files; a path: read that\n"
          "                     file instead of the device's own\n"
          "  KILN_TRACE         write a Chrome trace-event JSON file of every op,\n"
          "                     kernel, transfer and build (%%p: process id)\n"
          "  KILN_TRACE_SUMMARY 1: at exit, a table on stderr of what ran, by\n"
          "                     total time (calls, mean, MB, GB/s, GFLOP/s);\n"
          "                     a path: the table in that file (%%p: pid);\n"
          "                     kiln trace summarize FILE: the same from a\n"
          "                     KILN_TRACE file\n"
          "  KILN_LOG           off, error, warn, info or debug: diagnostics on\n"
          "                     stderr (unset: off; warn with KILN_TRACE*)\n"
          "  XDG_CACHE_HOME, HOME\n"
          "                     where the default cache directory lies\n"
          "  POCL_CACHE_DIR     PoCL's kernel cache: when PoCL cannot create it\n"
          "                     (HOME not writable) it lists no device, which\n"
          "                     kiln's errors and kiln info --doctor explain\n"
          "  OCL_ICD_VENDORS, OPENCL_VENDOR_PATH, OCL_ICD_FILENAMES\n"
          "                     read by the OpenCL ICD loader and checked by\n"
          "                     kiln info --doctor\n"
          "  COLUMNS            terminal width when the terminal does not\n"
          "                     report one\n"
          "\n"
          "exit status (every command):\n"
          "  0  success: the work was done and every check passed\n"
          "  1  failure: no usable device, a check failed, an I/O error\n"
          "  2  usage error: an unknown command or option, a bad value, a\n"
          "     selector (--device or KILN_DEVICE) that does not parse\n");
}

/* The command called name, or NULL after an error that suggests the
 * nearest one ("kiln inf": did you mean info?). */
static const command *find(const char *name) {
  const char *names[COMMAND_COUNT + 1];
  for (size_t i = 0; i < COMMAND_COUNT; i++) {
    if (strcmp(commands[i].name, name) == 0)
      return &commands[i];
    names[i] = commands[i].name;
  }
  names[COMMAND_COUNT] = "help";
  cli_unknown_command("kiln", name, names, COMMAND_COUNT + 1);
  return NULL;
}

int main(int argc, char **argv) {
  cli_log_to_stderr();
  if (argc < 2) {
    usage(stderr);
    return CLI_USAGE;
  }
  const char *arg = argv[1];
  if (strcmp(arg, "--help") == 0 || strcmp(arg, "-h") == 0) {
    usage(stdout);
    return 0;
  }
  if (strcmp(arg, "--version") == 0 || strcmp(arg, "-V") == 0) {
    /* The library actually loaded may differ from the headers compiled
     * against; say both when they do. */
    if (strcmp(kiln_version(), KILN_VERSION_STRING) == 0)
      printf("kiln %s\n", kiln_version());
    else
      printf("kiln %s (library %s)\n", KILN_VERSION_STRING, kiln_version());
    return 0;
  }
  if (strcmp(arg, "help") == 0) {
    if (argc < 3) {
      usage(stdout);
      return 0;
    }
    const command *cmd = find(argv[2]);
    if (cmd == NULL)
      return CLI_USAGE;
    char help[] = "--help";
    char *sub_argv[] = {argv[2], help, NULL};
    return cmd->run(2, sub_argv);
  }
  if (arg[0] == '-') {
    static const char *const options[] = {"--help", "--version"};
    const char *near = cli_suggest(arg, options, 2);
    if (near != NULL)
      return cli_usage_error("kiln", "unknown option '%s'; did you mean '%s'?",
                             arg, near);
    return cli_usage_error("kiln", "unknown option '%s'", arg);
  }
  const command *cmd = find(arg);
  if (cmd == NULL)
    return CLI_USAGE;
  /* A trace that cannot be written (another process writing the same
   * KILN_TRACE file, say) is reported once by the library's log, which
   * KILN_TRACE turns on at level warn. */
  return cmd->run(argc - 1, argv + 1);
}
