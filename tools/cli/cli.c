/* The grammar every subcommand of the kiln CLI shares (cli.h). */
#include "cli.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

enum { OPT_WIDE = 0x1000 };

static bool wide;

void cli_begin(cli *c, const char *prog, int argc, char **argv,
               const char *shorts, const struct option *longs) {
  memset(c, 0, sizeof *c);
  c->prog = prog;
  c->argc = argc;
  c->argv = argv;
  snprintf(c->shorts, sizeof c->shorts, ":%s", shorts);
  size_t n = 0;
  const size_t room = sizeof c->longs / sizeof c->longs[0] - 2;
  for (; longs != NULL && longs[n].name != NULL && n < room; n++)
    c->longs[n] = longs[n];
  c->longs[n++] = (struct option){"wide", no_argument, NULL, OPT_WIDE};
  c->longs[n] = (struct option){NULL, 0, NULL, 0};
  optind = 1;
  opterr = 0;
}

int cli_usage_error(const char *prog, const char *fmt, ...) {
  fprintf(stderr, "%s: ", prog);
  va_list args;
  va_start(args, fmt);
  vfprintf(stderr, fmt, args);
  va_end(args);
  fprintf(stderr, " (see %s --help)\n", prog);
  return CLI_USAGE;
}

/* The long option the argument names, with "--" and without "=VALUE". */
static void option_word(const char *arg, char *buf, size_t cap) {
  snprintf(buf, cap, "%s", arg);
  char *eq = strchr(buf, '=');
  if (eq != NULL)
    *eq = '\0';
}

/* The candidates' spellings with "--", for suggestions. */
static size_t long_names(const cli *c, const char **names, char (*spelled)[48],
                         size_t cap) {
  size_t n = 0;
  for (; c->longs[n].name != NULL && n < cap; n++) {
    snprintf(spelled[n], sizeof spelled[n], "--%s", c->longs[n].name);
    names[n] = spelled[n];
  }
  return n;
}

/* The argument that named the long option getopt_long just took, when it
 * did not spell the name out in full (0 when it did): getopt_long also
 * takes a unique prefix (--re for --reset), which the grammar refuses, as
 * an option added later would change its meaning. */
static int abbreviated(const cli *c, int index) {
  const struct option *o = &c->longs[index];
  int at = optind - 1;
  if (o->has_arg == required_argument && at > 0 &&
      strchr(c->argv[at], '=') == NULL && strncmp(c->argv[at], "--", 2) != 0)
    at--; /* "--opt VALUE": the value came last */
  if (at < 1 || at >= c->argc)
    return 0;
  char word[128];
  option_word(c->argv[at], word, sizeof word);
  return strncmp(word, "--", 2) == 0 && strcmp(word + 2, o->name) != 0 ? at : 0;
}

int cli_next(cli *c) {
  for (;;) {
    const int prev = optind;
    int index = -1;
    const int opt = getopt_long(c->argc, c->argv, c->shorts, c->longs, &index);
    const int abbr = index >= 0 && opt != '?' && opt != ':' ? abbreviated(c, index) : 0;
    if (abbr > 0) {
      char word[128];
      option_word(c->argv[abbr], word, sizeof word);
      cli_usage_error(c->prog, "unknown option '%s'; did you mean '--%s'?",
                      word, c->longs[index].name);
      return CLI_BAD;
    }
    if (opt == OPT_WIDE) {
      wide = true;
      continue;
    }
    if (opt != '?' && opt != ':')
      return opt;
    /* The argument at fault: a short option's letter, else the word
     * getopt_long stopped at. */
    const int at = optind > prev ? optind - 1 : prev;
    const char *arg = at < c->argc ? c->argv[at] : "";
    char shown[128];
    if (optopt != 0 && strncmp(arg, "--", 2) != 0)
      snprintf(shown, sizeof shown, "-%c", optopt);
    else
      option_word(arg, shown, sizeof shown);
    if (opt == ':') {
      cli_usage_error(c->prog, "%s needs a value", shown);
      return CLI_BAD;
    }
    const char *names[40];
    char spelled[40][48];
    const size_t n = long_names(c, names, spelled, 40);
    for (size_t i = 0; i < n; i++)
      if (strcmp(names[i], shown) == 0) {
        cli_usage_error(c->prog, "%s takes no value", shown);
        return CLI_BAD;
      }
    const char *near =
        strncmp(shown, "--", 2) == 0 ? cli_suggest(shown, names, n) : NULL;
    if (near != NULL)
      cli_usage_error(c->prog, "unknown option '%s'; did you mean '%s'?", shown,
                      near);
    else
      cli_usage_error(c->prog, "unknown option '%s'", shown);
    return CLI_BAD;
  }
}

int cli_parse_help_only(cli *c, const char *prog, int argc, char **argv,
                        void (*usage)(FILE *out)) {
  static const struct option longopts[] = {{"help", no_argument, NULL, 'h'},
                                           {NULL, 0, NULL, 0}};
  cli_begin(c, prog, argc, argv, "h", longopts);
  for (int opt; (opt = cli_next(c)) != -1;) {
    if (opt == 'h') {
      usage(stdout);
      return CLI_OK;
    }
    return CLI_USAGE;
  }
  return -1;
}

int cli_unknown_command(const char *prog, const char *word,
                        const char *const *names, size_t count) {
  const char *near = cli_suggest(word, names, count);
  if (near != NULL)
    return cli_usage_error(prog, "unknown command '%s'; did you mean '%s'?",
                           word, near);
  return cli_usage_error(prog, "unknown command '%s'", word);
}

int cli_run_command(const char *prog, int argc, char **argv,
                    const cli_command *cmds, size_t count, size_t suggested,
                    void (*usage)(FILE *out)) {
  if (argc < 2) {
    usage(stderr);
    return CLI_USAGE;
  }
  const char *word = argv[1];
  if (strcmp(word, "-h") == 0 || strcmp(word, "--help") == 0 ||
      strcmp(word, "help") == 0) {
    usage(stdout);
    return CLI_OK;
  }
  const char *names[CLI_MAX_COMMANDS];
  for (size_t i = 0; i < count && i < CLI_MAX_COMMANDS; i++) {
    if (strcmp(word, cmds[i].name) == 0)
      return cmds[i].run(argc - 1, argv + 1);
    names[i] = cmds[i].name;
  }
  return cli_unknown_command(prog, word, names,
                             suggested < count ? suggested : count);
}

int cli_no_operands(const cli *c) {
  if (optind < c->argc)
    return cli_usage_error(c->prog, "unexpected argument '%s'",
                           c->argv[optind]);
  return CLI_OK;
}

/* Optimal string alignment distance (a swap of two neighbours costs 1),
 * for words of at most 63 characters. */
static size_t distance(const char *a, const char *b) {
  size_t la = strlen(a), lb = strlen(b);
  if (la > 63 || lb > 63)
    return SIZE_MAX;
  size_t d[64][64];
  for (size_t i = 0; i <= la; i++)
    d[i][0] = i;
  for (size_t j = 0; j <= lb; j++)
    d[0][j] = j;
  for (size_t i = 1; i <= la; i++)
    for (size_t j = 1; j <= lb; j++) {
      size_t best = d[i - 1][j - 1] + (a[i - 1] != b[j - 1]);
      if (d[i - 1][j] + 1 < best)
        best = d[i - 1][j] + 1;
      if (d[i][j - 1] + 1 < best)
        best = d[i][j - 1] + 1;
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] &&
          d[i - 2][j - 2] + 1 < best)
        best = d[i - 2][j - 2] + 1;
      d[i][j] = best;
    }
  return d[la][lb];
}

const char *cli_suggest(const char *word, const char *const *candidates,
                        size_t count) {
  /* A prefix of exactly one candidate ("inf": info), else the nearest by
   * edit distance if it is near enough to be a typo. */
  const char *prefixed = NULL;
  size_t prefixes = 0;
  const size_t len = strlen(word);
  for (size_t i = 0; i < count && len >= 2; i++)
    if (strncmp(candidates[i], word, len) == 0) {
      prefixed = candidates[i];
      prefixes++;
    }
  if (prefixes == 1)
    return prefixed;
  const char *best = NULL;
  size_t best_d = SIZE_MAX;
  for (size_t i = 0; i < count; i++) {
    const size_t d = distance(word, candidates[i]);
    if (d < best_d) {
      best_d = d;
      best = candidates[i];
    }
  }
  const size_t limit = len <= 4 ? 1 : len <= 8 ? 2 : 3;
  return best_d <= limit ? best : NULL;
}

bool cli_is_wide(void) { return wide; }

int cli_terminal_columns(int fd) {
  struct winsize ws;
  if (ioctl(fd, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0)
    return ws.ws_col;
  const char *env = getenv("COLUMNS");
  if (env != NULL) {
    char *end = NULL;
    const long v = strtol(env, &end, 10);
    if (end != env && *end == '\0' && v > 0 && v < 10000)
      return (int)v;
  }
  return 80;
}

int cli_width(void) {
  if (wide)
    return CLI_UNLIMITED;
  if (isatty(STDOUT_FILENO))
    return cli_terminal_columns(STDOUT_FILENO);
  return 80;
}

void cli_wrap(FILE *out, const char *text, int first_col, int indent,
              int width) {
  int col = first_col;
  bool fresh = true, wrapped = false; /* nothing on this line yet */
  const char *p = text;
  while (*p != '\0') {
    const size_t gap = strspn(p, " ");
    p += gap;
    if (*p == '\0')
      break;
    size_t word = strcspn(p, " ");
    /* Blanks between words stay as they are unless the line breaks. */
    const bool breaks = !fresh && col + (int)(gap + word) > width;
    const bool too_long_here = fresh && !wrapped && col > indent &&
                               col + (int)word > width &&
                               indent + (int)word <= width;
    if (breaks || too_long_here) {
      fprintf(out, "\n%*s", indent, "");
      col = indent;
      fresh = wrapped = true;
    } else if (!fresh || !wrapped) {
      fprintf(out, "%*s", (int)gap, "");
      col += (int)gap;
    }
    /* A word longer than a whole line (a path) is cut across lines. */
    while (col + (int)word > width && width - col > 0 && fresh) {
      const int take = width - col;
      fprintf(out, "%.*s\n%*s", take, p, indent, "");
      p += take;
      word -= (size_t)take;
      col = indent;
      wrapped = true;
    }
    fprintf(out, "%.*s", (int)word, p);
    col += (int)word;
    p += word;
    fresh = false;
  }
  fputc('\n', out);
}

void cli_item(FILE *out, int *col, const char *sep, const char *item,
              int indent, int width) {
  const int len = (int)strlen(item);
  if (*col > indent && *col + (int)strlen(sep) + len > width) {
    fprintf(out, "%s\n%*s%s", strchr(sep, ';') != NULL ? ";" : "", indent,
            "", item);
    *col = indent + len;
    return;
  }
  fprintf(out, "%s%s", sep, item);
  *col += (int)strlen(sep) + len;
}

int cli_check_list(const char *prog, const char *option, const char *text) {
  const size_t len = strlen(text);
  if (len == 0)
    return cli_usage_error(prog, "%s is empty", option);
  if (text[0] == ',' || text[len - 1] == ',' || strstr(text, ",,") != NULL)
    return cli_usage_error(prog, "%s '%s' has an empty item (items are "
                                 "separated by single commas)",
                           option, text);
  return CLI_OK;
}

int cli_select_device(const char *prog, const char *selector,
                      kiln_device_list **list, const kiln_device **out) {
  *list = NULL;
  *out = NULL;
  if (kiln_device_list_create(list) != KILN_OK) {
    fprintf(stderr, "%s: %s\n", prog, kiln_last_error());
    return CLI_FAILURE;
  }
  const kiln_status s = kiln_device_select(*list, selector, out);
  if (s == KILN_OK)
    return CLI_OK;
  fprintf(stderr, "%s: %s\n", prog, kiln_last_error());
  return s == KILN_ERR_SELECTOR_SYNTAX ? CLI_USAGE : CLI_FAILURE;
}

int cli_check_selector(const char *prog, const char *selector) {
  const char *env = getenv("KILN_DEVICE");
  if (selector == NULL && (env == NULL || env[0] == '\0'))
    return CLI_OK;
  kiln_device_list *list = NULL;
  kiln_selection *selection = NULL;
  int rc = CLI_OK;
  if (kiln_device_list_create(&list) == KILN_OK &&
      kiln_selection_create(list, selector, &selection) ==
          KILN_ERR_SELECTOR_SYNTAX) {
    fprintf(stderr, "%s: %s\n", prog, kiln_last_error());
    rc = CLI_USAGE;
  }
  kiln_selection_destroy(selection);
  kiln_device_list_destroy(list);
  return rc;
}

static void log_line(kiln_log_level level, const char *message, void *data) {
  static const char *const word[] = {"", "error", "warning", "info", "debug"};
  (void)data;
  if (strchr(message, '\n') != NULL || level < KILN_LOG_ERROR ||
      level > KILN_LOG_DEBUG)
    fprintf(stderr, "kiln: %s\n", message);
  else
    fprintf(stderr, "kiln: %s: %s\n", word[level], message);
  fflush(stderr);
}

void cli_log_to_stderr(void) {
  static const char *const asked[] = {"KILN_LOG", "KILN_TRACE",
                                      "KILN_TRACE_SUMMARY"};
  for (size_t i = 0; i < sizeof asked / sizeof asked[0]; i++) {
    const char *v = getenv(asked[i]);
    if (v != NULL && v[0] != '\0') {
      kiln_log_set_handler(log_line, NULL);
      return;
    }
  }
}
