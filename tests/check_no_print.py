#!/usr/bin/env python3
"""libkiln never prints (docs/conventions.md, Errors): its diagnostics go to
the application's log handler (kiln_log_set_handler) or are kept for
kiln_trace_diagnostic(), never to stderr or stdout. Two checks, each of
which fails on the log.c that wrote "kiln: warning: ..." to stderr:

- imports: the shared libraries given import none of the symbols that can
  only write to the standard streams or a terminal-bound fd: the `stderr`
  and `stdout` stream objects, printf, vprintf, puts, putchar, perror,
  dprintf, vdprintf (an fd, in practice 1 or 2), the err/warn and error
  families, psignal, syslog (and their _FORTIFY_SOURCE __*_chk forms).
  fprintf, fputs and fwrite stay legitimate: kiln uses them on files the
  user named (KILN_TRACE's trace, the KILN_TRACE_SUMMARY file, the tuning
  file) and on the FILE a caller hands kiln_trace_summarize, so the stream
  objects are what tells printing apart;
- sources: no .c or .h file under runtime/ and backends/ (what the
  libraries are built from)
  names stderr, stdout, STDERR_FILENO or STDOUT_FILENO, calls one of the
  functions above, or writes to fd 1 or 2, outside comments and string
  literals. This catches a use that a build option would inline or a
  library not given here would hide.

usage: check_no_print.py SOURCE_ROOT LIB.so [LIB.so...]
       check_no_print.py --self-test   (each check fails on a violation)
"""
import os
import re
import subprocess
import sys

PRINTERS = ["printf", "vprintf", "puts", "putchar", "putchar_unlocked",
            "perror", "dprintf", "vdprintf", "err", "errx", "verr", "verrx",
            "warn", "warnx", "vwarn", "vwarnx", "error", "error_at_line",
            "psignal", "psiginfo", "syslog", "vsyslog"]
STREAMS = ["stderr", "stdout"]
FORBIDDEN_IMPORTS = set(STREAMS + PRINTERS) | {
    "__printf_chk", "__vprintf_chk", "__dprintf_chk", "__vdprintf_chk",
    "__syslog_chk", "__vsyslog_chk", "_IO_2_1_stderr_", "_IO_2_1_stdout_",
    "_IO_putc"}
ROOMS = ("runtime", "backends")

SOURCE_RULES = [
    (re.compile(r"\b(stderr|stdout|STDERR_FILENO|STDOUT_FILENO)\b"),
     "names a standard stream"),
    (re.compile(r"(?<![\w.>])(" + "|".join(PRINTERS) + r")\s*\("),
     "calls a function that prints"),
    (re.compile(r"\b(write|dprintf|vdprintf)\s*\(\s*[12]\s*,"),
     "writes to fd 1 or 2"),
]


def strip(code):
    """code with comments and string and character literals blanked (line
    breaks kept, so line numbers stay right)."""
    pattern = re.compile(r'//[^\n]*|/\*.*?\*/|"(?:\\.|[^"\\\n])*"|'
                         r"'(?:\\.|[^'\\\n])*'", re.S)
    return pattern.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)), code)


def source_problems(name, code):
    out = []
    for lineno, line in enumerate(strip(code).split("\n"), 1):
        for rule, why in SOURCE_RULES:
            m = rule.search(line)
            if m:
                out.append(f"{name}:{lineno}: {why}: {m.group(0).strip()}")
    return out


def import_problems(name, nm_output):
    out = []
    for line in nm_output.splitlines():
        fields = line.split()
        if len(fields) >= 2 and fields[-2] in ("U", "w"):
            symbol = fields[-1].split("@")[0]
            if symbol in FORBIDDEN_IMPORTS:
                out.append(f"{name} imports {symbol}")
    return out


def check(root, libs):
    problems = []
    for lib in libs:
        nm = subprocess.run(["nm", "-D", "--undefined-only", lib],
                            capture_output=True, text=True, check=True)
        problems += import_problems(lib, nm.stdout)
    for room in ROOMS:
        for dirpath, _, files in os.walk(os.path.join(root, room)):
            for f in sorted(files):
                if f.endswith((".c", ".h")):
                    path = os.path.join(dirpath, f)
                    with open(path, encoding="utf-8") as fh:
                        problems += source_problems(
                            os.path.relpath(path, root), fh.read())
    return problems


def self_test():
    # The log.c that printed, and what the library legitimately does.
    old = ('static void deliver(const char *text) {\n'
           '  fprintf(stderr, "kiln: %s\\n", text);\n  fflush(stderr);\n}\n')
    assert len(source_problems("log.c", old)) == 2, source_problems("log.c", old)
    for bad in ['  printf("x");', '  puts(s);', '  perror("open");',
                '  write(2, s, n);', '  dprintf(1, "%d", x);',
                '  FILE *f = stdout;', '  int fd = STDERR_FILENO;']:
        assert source_problems("x.c", bad), bad
    good = ('/* writes nothing to stderr; printf("...") in a comment */\n'
            'snprintf(b, n, "stderr %d", x); fprintf(trace_file, "[");\n'
            'fputs(text, f); vsnprintf(b, n, f, ap); write(fd, b, n);\n'
            'char c = \'"\'; kiln__log(KILN__LOG_WARN, "puts(x)");\n'
            '// stdout\nint error_count = 0; s->warn(x);\n')
    assert not source_problems("y.c", good), source_problems("y.c", good)
    old_nm = ("                 U fprintf@GLIBC_2.2.5\n"
              "                 U stderr@GLIBC_2.2.5\n"
              "                 U fputs@GLIBC_2.2.5\n")
    assert import_problems("libkiln.so", old_nm) == \
        ["libkiln.so imports stderr"], import_problems("libkiln.so", old_nm)
    assert import_problems("l", "  U __printf_chk@GLIBC_2.3.4\n  w puts\n") == \
        ["l imports __printf_chk", "l imports puts"]
    assert not import_problems("l", "  U fwrite@GLIBC_2.2.5\n  U fflush\n")
    print("check_no_print: self-test passed")
    return 0


def main():
    if sys.argv[1:] == ["--self-test"]:
        return self_test()
    if len(sys.argv) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    problems = check(sys.argv[1], sys.argv[2:])
    if problems:
        print("check_no_print: libkiln may print (docs/conventions.md, "
              "Errors: the library never prints; route diagnostics through "
              "kiln__log, runtime/core/log.c):", file=sys.stderr)
        for p in problems:
            print("  " + p, file=sys.stderr)
        return 1
    print(f"check_no_print: {', '.join(sys.argv[2:])} and the sources of "
          f"{' and '.join(r + '/' for r in ROOMS)} print nothing")
    return 0


if __name__ == "__main__":
    sys.exit(main())
