/* Subcommands of the kiln CLI. Each takes the arguments after its own name
 * (argv[0] is the subcommand name) and returns the process exit code:
 * 0 success, 1 failure, 2 usage error. */
#ifndef KILN_TOOLS_COMMANDS_H
#define KILN_TOOLS_COMMANDS_H

int kiln_cmd_info(int argc, char **argv);  /* cmd_info.c */
int kiln_cmd_demo(int argc, char **argv);  /* cmd_demo.c */
int kiln_cmd_cache(int argc, char **argv); /* cmd_cache.c */
int kiln_cmd_bench(int argc, char **argv); /* cmd_bench.c */
int kiln_cmd_tune(int argc, char **argv);  /* cmd_tune.c */

#endif
