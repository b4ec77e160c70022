/* What the tools share: the subcommands of the kiln CLI and the tools'
 * clock. Each subcommand takes the arguments after its own name (argv[0] is
 * the subcommand name) and returns the process exit code (cli/cli.h: 0
 * success, 1 failure, 2 usage error); cli/cli.h is the grammar they share. */
#ifndef KILN_TOOLS_COMMANDS_H
#define KILN_TOOLS_COMMANDS_H

#include <time.h>

int kiln_cmd_info(int argc, char **argv);  /* cmd_info.c */
int kiln_cmd_demo(int argc, char **argv);  /* cmd_demo.c */
int kiln_cmd_cache(int argc, char **argv); /* cmd_cache.c */
int kiln_cmd_bench(int argc, char **argv); /* cmd_bench.c */
int kiln_cmd_tune(int argc, char **argv);  /* cmd_tune.c */
int kiln_cmd_report(int argc, char **argv); /* cmd_report.c */
int kiln_cmd_trace(int argc, char **argv);  /* cmd_trace.c */

/* Seconds on the monotonic clock since an arbitrary start: every timing in
 * the tools (inline, as the separate benchmark programs share it too). */
static inline double tools_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

#endif
