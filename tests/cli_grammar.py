"""The grammar every subcommand of the kiln tool shares (docs/cli.md,
kiln(1)), checked by the `cli` test (check_cli.py runs these):

- same_options: a short option means the same long one in every
  subcommand's --help, and a long one has the same short one (or none)
  everywhere; every subcommand takes -h/--help and --wide, every one that
  uses a device -d/--device;
- exit_codes: 2 for a usage error in every subcommand (an unknown option,
  a missing value, a --device or a KILN_DEVICE that does not parse, an
  unknown command), 0 for --help, with --wide accepted;
- did_you_mean: a misspelt command, option or op gets the nearest one; an
  abbreviated long option is refused with its full name;
- width: text output fits 80 columns when not a terminal (the report, the
  list, --explain, bench rows, tune --list, the cache, every --help) and
  the report a 40- and a 60-column terminal; --wide lifts the limit;
- list_values: an empty item in --op or --size (`gemm,,`) is a usage
  error, and a size out of range says the limit and what it counts;
- examples_help: every example program answers --help with exit 0, one
  line per option, within 80 columns, and an unknown option with exit 2.
"""
import os
import re
import subprocess
import tempfile

from cli_util import long_lines, run, run_on_pty


# Every subcommand (and cache's commands), with arguments that keep a run
# short should a check below fail to stop it.
SUBCOMMANDS = {
    "info": ["info"],
    "demo": ["demo", "--size", "1024"],
    "bench": ["bench", "--op", "sum", "--size", "1024", "--runs", "5"],
    "tune": ["tune", "--list"],
    "report": ["report", "--quick", "--time-limit", "1"],
    "cache ls": ["cache", "ls"],
    "cache stats": ["cache", "stats"],
    "cache clear": ["cache", "clear"],
    "cache warm": ["cache", "warm"],
    "cache bench": ["cache", "bench", "--runs", "1", "--workload", "first-kernel"],
    "trace summarize": ["trace", "summarize", "/nonexistent/kiln-trace.json"],
}
NO_DEVICE = {"cache ls", "cache stats", "cache clear", "trace summarize"}


def command_words(name, args):
    """The words that name the command: two for cache's and trace's."""
    return args[:2] if name.startswith(("cache", "trace")) else args[:1]


def help_options(text):
    """{long: short or None} of the options a --help defines: lines that
    begin with "-x, --long", "--long", or a synopsis "[-x | --long"."""
    found = {}
    for short, long in re.findall(r"^\s+(?:-([a-zA-Z]), )?--([a-z][a-z0-9-]*)", text, re.M):
        found[long] = short or found.get(long)
    for short, long in re.findall(r"\[-([a-zA-Z]) \| --([a-z][a-z0-9-]*)", text):
        found[long] = short
    return found


def test_same_options():
    short_of, long_of, problems = {}, {}, []
    for name, args in SUBCOMMANDS.items():
        opts = help_options(run(command_words(name, args) + ["--help"]).stdout)
        for want in ("help", "wide") + (() if name in NO_DEVICE else ("device",)):
            if want not in opts:
                problems.append(f"kiln {name} --help lacks --{want}")
        for want, short in (("help", "h"), ("device", "d"), ("json", "j"), ("jobs", "J")):
            if want in opts and opts[want] != short:
                problems.append(f"kiln {name}: --{want} is -{opts[want]}, not -{short}")
        for long, short in opts.items():
            if long in short_of and short_of[long][0] != short:
                problems.append(f"--{long} is -{short} in {name} but "
                                f"-{short_of[long][0]} in {short_of[long][1]}")
            short_of.setdefault(long, (short, name))
            if short and short in long_of and long_of[short][0] != long:
                problems.append(f"-{short} is --{long} in {name} but "
                                f"--{long_of[short][0]} in {long_of[short][1]}")
            if short:
                long_of.setdefault(short, (long, name))
    assert not problems, "\n".join(problems)


def test_exit_codes():
    problems = []

    def expect(args, rc, env=None, text=None):
        p = run(args, env, ok=range(256))
        if p.returncode != rc or (text and text not in p.stderr):
            problems.append(f"kiln {' '.join(args)}{' with ' + str(env) if env else ''}: "
                            f"exit {p.returncode}, want {rc}"
                            f"{' and ' + repr(text) if text else ''}: {p.stderr.strip()[:300]}")

    expect([], 2)
    expect(["help", "nope"], 2)
    out = tempfile.mkdtemp()
    for name, args in SUBCOMMANDS.items():
        args = args + (["--out", out + "/r"] if name == "report" else [])
        cmd = command_words(name, args)
        expect(cmd + ["--help", "--wide"], 0)
        expect(args + ["--no-such-option"], 2, text="unknown option '--no-such-option'")
        expect(args + ["extra-operand"], 2, text="unexpected argument")
        expect(args, 2, env={"KILN_DEVICE": "garbage"}, text="KILN_DEVICE")
        if name not in NO_DEVICE:
            expect(args + ["--device"], 2, text="needs a value")
            expect(args + ["--device", "bad["], 2, text="selector")
            expect(args + ["-d", "bad["], 2, text="selector")
    if os.path.exists(out + "/r"):
        problems.append("kiln report made its folder on a usage error")
    assert not problems, "\n".join(problems)


def test_did_you_mean():
    cases = [(["inf"], "did you mean 'info'?"),
             (["--hepl"], "did you mean '--help'?"),
             (["cache", "lss"], "did you mean 'ls'?"),
             (["info", "--jsno"], "did you mean '--json'?"),
             (["info", "--devce", "pocl"], "did you mean '--device'?"),
             (["tune", "--budgte", "1"], "did you mean '--budget'?"),
             (["bench", "--op", "sun"], "did you mean 'sum'?"),
             (["tune", "--op", "gemn"], "did you mean 'gemm'?"),
             (["demo", "--wdie"], "did you mean '--wide'?"),
             # An abbreviation is refused: --re must not reset the tuning.
             (["tune", "--re"], "did you mean '--reset'?"),
             (["demo", "--devic", "pocl"], "did you mean '--device'?"),
             (["info", "--json=x"], "--json takes no value")]
    problems = []
    for args, want in cases:
        p = run(args, ok=range(256))
        if p.returncode != 2 or want not in p.stderr:
            problems.append(f"kiln {' '.join(args)}: exit {p.returncode}: {p.stderr.strip()}")
    assert not problems, "\n".join(problems)


def test_width():
    problems = []
    texts = [(["--help"], run(["--help"]).stdout)]
    for name, args in SUBCOMMANDS.items():
        cmd = command_words(name, args)
        texts.append((cmd + ["--help"], run(cmd + ["--help"]).stdout))
    device = run(["info", "-l", "--device", "all"], ok=(0, 1)).returncode == 0
    runs = [["info"], ["info", "-l"], ["info", "--explain"], ["cache", "ls"],
            ["cache", "stats"]]
    if device:
        runs += [["info", "--explain", "--check"], ["tune", "--list"],
                 ["demo", "--size", "1024"],
                 ["bench", "--op", "pool,h2d,d2h,launch,sum", "--size", "4096",
                  "--runs", "5"]]
    elif os.environ.get("KILN_REQUIRE_DEVICE") == "1":
        raise AssertionError("no device")
    else:
        print("# width: no OpenCL device, the device commands skipped")
    for args in runs:
        p = run(args, ok=(0, 1))
        texts.append((args, p.stdout))
    for args, text in texts:
        for line in long_lines(text, 80):
            problems.append(f"kiln {' '.join(args)}: {len(line)} columns: {line}")
    # On a narrow terminal, the report fits it (labels wider than their
    # column included).
    for cols in (40, 60):
        out, rc = run_on_pty(["info", "--explain"], cols)
        for line in long_lines(out, cols):
            problems.append(f"kiln info on {cols} columns: {len(line)}: {line}")
    # --wide: a long line stays whole (the report's longest value).
    wide = run(["info", "--wide"], ok=(0, 1)).stdout
    narrow = run(["info"], ok=(0, 1)).stdout
    if narrow.count("\n") > 0 and long_lines(wide, 80) == [] and wide == narrow:
        print("# width: nothing in the report is wider than 80 columns; --wide not shown")
    elif len(wide.splitlines()) >= len(narrow.splitlines()):
        problems.append("kiln info --wide wraps as much as without it")
    assert not problems, "\n".join(problems[:40])


def test_list_values():
    problems = []
    # --list and small sizes: a tool that took the value would not run long.
    for args, want in [(["tune", "--list", "--op", "gemm,,"], "empty item"),
                       (["tune", "--list", "--op", ",gemm"], "empty item"),
                       (["tune", "--list", "--op", "gemm,"], "empty item"),
                       (["bench", "--runs", "5", "--size", "64", "--op", "sum,,dot"],
                        "empty item"),
                       (["bench", "--runs", "5", "--op", "sum", "--size", "64,,128"],
                        "empty item"),
                       (["tune", "--list", "--size", "64,,128"], "empty item"),
                       (["tune", "--list", "--size", "99999999999999"], "from 1 to 2^30"),
                       (["bench", "--op", "sum", "--size", "99999999999999"],
                        "from 1 to 2^40"),
                       (["tune", "--list", "--size", "1,2,3,4,5,6,7,8,9"],
                        "more than 8 sizes"),
                       (["bench", "--op", "sum", "--size", ",".join(["8"] * 17)],
                        "more than 16 sizes"),
                       (["demo", "--size", "0"], "number of floats")]:
        p = run(args, ok=range(256))
        if p.returncode != 2 or want not in p.stderr:
            problems.append(f"kiln {' '.join(args)}: exit {p.returncode}: {p.stderr.strip()}")
    assert not problems, "\n".join(problems)


def test_examples_help():
    where = os.environ.get("KILN_EXAMPLES_DIR")
    if not where or not os.path.isdir(where):
        print("# examples_help: examples not built, skipped")
        return
    problems, seen = [], 0
    for name in sorted(os.listdir(where)):
        path = os.path.join(where, name)
        if not (os.path.isfile(path) and os.access(path, os.X_OK)) or "." in name:
            continue
        seen += 1
        p = subprocess.run([path, "--help"], capture_output=True, text=True, timeout=60)
        if p.returncode != 0 or "usage:" not in p.stdout:
            problems.append(f"{name} --help: exit {p.returncode}: {p.stderr.strip()}")
        problems += [f"{name} --help: {len(l)} columns: {l}" for l in long_lines(p.stdout, 80)]
        # One line per option: every option the usage line names has its own.
        for opt in re.findall(r"\[(--[a-z-]+)", p.stdout.split("\n", 1)[0]):
            if not re.search(rf"^\s+{re.escape(opt)}\b", p.stdout, re.M):
                problems.append(f"{name} --help: no line for {opt}")
        q = subprocess.run([path, "--no-such-option"], capture_output=True, text=True,
                           timeout=60)
        if q.returncode != 2:
            problems.append(f"{name} --no-such-option: exit {q.returncode}")
    assert seen >= 4, f"only {seen} example programs in {where}"
    assert not problems, "\n".join(problems)
