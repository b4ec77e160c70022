/* The grammar every subcommand of the kiln CLI shares (docs/cli.md, kiln(1)):
 * option parsing with one wording for every usage error and a "did you
 * mean" for a misspelt option, --wide in every subcommand, the device
 * selector checked the same way everywhere (--device or KILN_DEVICE), the
 * output width, comma-separated lists, and the exit codes. */
#ifndef KILN_TOOLS_CLI_H
#define KILN_TOOLS_CLI_H

#include <getopt.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "kiln/kiln.h"

/* The exit codes of every subcommand. */
enum {
  CLI_OK = 0,      /* the work was done (and every check passed) */
  CLI_FAILURE = 1, /* it failed: no usable device, a check failed, I/O */
  CLI_USAGE = 2,   /* the command line (or KILN_DEVICE) is wrong */
};

/* cli_next's answer after it printed a usage error: return CLI_USAGE. */
#define CLI_BAD (-2)
/* The width cli_width answers under --wide: no limit. */
#define CLI_UNLIMITED 100000

typedef struct cli {
  const char *prog; /* "kiln info": the prefix of every message */
  int argc;
  char **argv;
  struct option longs[40]; /* the caller's options, then --wide */
  char shorts[96];         /* ":" then the caller's short options */
} cli;

/* Start parsing argv (argv[0] the subcommand's name) with getopt_long's
 * short and long options; --wide is added. */
void cli_begin(cli *c, const char *prog, int argc, char **argv,
               const char *shorts, const struct option *longs);
/* The next option as getopt_long returns it (optarg set), -1 after the last
 * one, or CLI_BAD once a usage error (unknown option, with a suggestion;
 * missing value) was printed. --wide is taken here. */
int cli_next(cli *c);
/* CLI_USAGE, with a message, if operands remain after the options; else
 * CLI_OK. */
int cli_no_operands(const cli *c);
/* Print "PROG: MESSAGE (see PROG --help)" to stderr; returns CLI_USAGE. */
int cli_usage_error(const char *prog, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Parse the options of a command whose only ones are -h/--help and --wide:
 * -1 to go on (optind at the first operand), CLI_OK after usage(stdout)
 * for --help, CLI_USAGE after a usage error. */
int cli_parse_help_only(cli *c, const char *prog, int argc, char **argv,
                        void (*usage)(FILE *out));
/* "PROG: unknown command 'WORD'", with the nearest of names suggested
 * ("did you mean 'info'?"); returns CLI_USAGE. */
int cli_unknown_command(const char *prog, const char *word,
                        const char *const *names, size_t count);

/* A command of a group ("kiln cache ls") and the function that runs it
 * with the arguments from its name on. */
typedef struct cli_command {
  const char *name;
  int (*run)(int argc, char **argv);
} cli_command;
#define CLI_MAX_COMMANDS 16
/* Run the command of cmds (count of them) that argv[1] names: usage(stderr)
 * and CLI_USAGE when there is none, usage(stdout) and CLI_OK for -h,
 * --help or help, CLI_USAGE with the nearest of the first suggested
 * commands for an unknown one (the others are hidden). */
int cli_run_command(const char *prog, int argc, char **argv,
                    const cli_command *cmds, size_t count, size_t suggested,
                    void (*usage)(FILE *out));

/* The candidate closest to word (a typo or a prefix), or NULL. */
const char *cli_suggest(const char *word, const char *const *candidates,
                        size_t count);

/* Whether --wide was given. */
bool cli_is_wide(void);
/* Columns of the terminal on fd (TIOCGWINSZ), else $COLUMNS, else 80. */
int cli_terminal_columns(int fd);
/* The width standard output is fitted to: CLI_UNLIMITED under --wide, the
 * terminal's when it is one, else 80. */
int cli_width(void);
/* Print text (no newline in it) to out, wrapped at blanks to width columns,
 * the first line after first_col columns already used, the next ones
 * indented by indent; a word longer than a line is cut. Ends the line. */
void cli_wrap(FILE *out, const char *text, int first_col, int indent,
              int width);

/* Print sep then item at *col, or item alone on a new line indented by
 * indent when it would pass width: rows of items that must not be split
 * (kiln bench's "h2d 1.2 ms 9.8 GB/s (1.00x)"). */
void cli_item(FILE *out, int *col, const char *sep, const char *item,
              int indent, int width);

/* CLI_USAGE, with a message, when a comma-separated list has an empty item
 * ("gemm,,", ",gemm", "gemm,"); else CLI_OK. */
int cli_check_list(const char *prog, const char *option, const char *text);

/* The device the selector (NULL: KILN_DEVICE, else the default) takes, in
 * *list (the caller destroys it): CLI_OK; CLI_USAGE for a selector that
 * does not parse; CLI_FAILURE when no device is taken. A message is
 * printed but for CLI_OK. */
int cli_select_device(const char *prog, const char *selector,
                      kiln_device_list **list, const kiln_device **out);
/* CLI_USAGE, with a message, when the selector (NULL: KILN_DEVICE) does not
 * parse; else CLI_OK. For the subcommands that need no device. */
int cli_check_selector(const char *prog, const char *selector);

/* Install kiln's log handler of the tool (the library never prints): each
 * message on stderr as "kiln: warning: TEXT", a message of several lines
 * (KILN_TRACE_SUMMARY's table) after "kiln: " alone; only when KILN_LOG,
 * KILN_TRACE or KILN_TRACE_SUMMARY is set, so that an unset environment
 * stays silent (a handler alone would turn warnings on). main() calls it
 * first. */
void cli_log_to_stderr(void);

#endif
