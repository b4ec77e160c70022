/* kiln trace: what a trace file that KILN_TRACE wrote says. summarize
 * prints the table KILN_TRACE_SUMMARY=1 delivers at a program's exit, from
 * the file: the library builds it (kiln_trace_summarize, the same code as
 * the summary at exit), this command picks the width and words the
 * errors. */
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "commands.h"

static void usage(FILE *out) {
  fputs(
      "usage: kiln trace summarize [--wide] FILE\n"
      "       kiln trace [-h | --help]\n"
      "\n"
      "commands:\n"
      "  summarize FILE      the table that KILN_TRACE_SUMMARY=1 prints at\n"
      "                      exit, from a trace file that KILN_TRACE wrote:\n"
      "                      ops, kernels, transfers and builds by total\n"
      "                      time, with calls, mean time, MB moved, GB/s\n"
      "                      and GFLOP/s\n"
      "\n"
      "options:\n"
      "      --wide          do not fit lines to the terminal's width (or to\n"
      "                      80 columns when not a terminal)\n"
      "  -h, --help          this help\n"
      "\n"
      "environment: KILN_DEVICE (checked, as by every command).\n"
      "\n"
      "exit status: 0 success, 1 the file cannot be read or holds no kiln\n"
      "trace (empty, not JSON, cut short, another program's), 2 usage\n"
      "error.\n",
      out);
}

static int cmd_summarize(int argc, char **argv) {
  static const char prog[] = "kiln trace summarize";
  cli args;
  const int rc = cli_parse_help_only(&args, prog, argc, argv, usage);
  if (rc >= 0)
    return rc;
  if (optind >= argc)
    return cli_usage_error(prog, "FILE is missing: the trace file that "
                                 "KILN_TRACE wrote");
  const char *path = argv[optind++];
  if (cli_no_operands(&args) != CLI_OK ||
      cli_check_selector(prog, NULL) != CLI_OK)
    return CLI_USAGE;
  const int width = cli_width();
  if (kiln_trace_summarize(path, stdout,
                           width >= CLI_UNLIMITED ? 0 : (size_t)width) !=
      KILN_OK) {
    /* The message names the library's function; this command says it. */
    const char *why = kiln_last_error();
    static const char fn[] = "kiln_trace_summarize: ";
    if (strncmp(why, fn, sizeof fn - 1) == 0)
      why += sizeof fn - 1;
    fprintf(stderr, "%s: %s\n", prog, why);
    return CLI_FAILURE;
  }
  return CLI_OK;
}

int kiln_cmd_trace(int argc, char **argv) {
  static const cli_command subs[] = {{"summarize", cmd_summarize}};
  return cli_run_command("kiln trace", argc, argv, subs, 1, 1, usage);
}
