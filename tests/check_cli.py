#!/usr/bin/env python3
"""CLI behaviour of the kiln tool that test_info.c does not cover, run on the
built binary:

- help_env: `kiln --help` lists every environment variable that libkiln and
  the kiln tool read (every getenv("...") in runtime/ and tools/, except the
  developer tool kiln-compare, which is not installed);
- select_nothing: `kiln info --select` that takes nothing exits 1 and says
  on stderr that no device matched, with each device's reason;
- doctor_vendors_file: with OCL_ICD_VENDORS naming one .icd file, the doctor
  does not blame /etc/OpenCL/vendors for drivers it does not load;
- json_no_platform: `kiln info --json` with OCL_ICD_VENDORS at an empty
  directory lists the clGetPlatformIDs error once (text report too);
- warm_progress: `kiln cache warm` on a terminal (a pty, several widths, and
  $COLUMNS when the terminal reports no width) never writes past the last
  column and leaves no progress line behind;
- tune_cpu: on a CPU-family device (PoCL), `kiln tune --op gemm,transpose`
  with a tiny budget tunes the CPU family's spaces (gemm_cpu,
  transpose_cpu), writes the device's tuning file, and `kiln info` (a new
  context) shows the tuned parameters coming from it.

The grammar every subcommand shares (docs/cli.md, kiln(1)):

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
- verdicts: `kiln info --explain --check` sums its verdicts up at the end;
- cache_defects: `kiln cache ls` and `stats` do not create a missing cache
  directory; `kiln cache clear` that cannot remove an entry says so once,
  on stderr, and prints no "removed" line;
- list_values: an empty item in --op or --size (`gemm,,`) is a usage
  error, and a size out of range says the limit and what it counts;
- examples_help: every example program answers --help with exit 0, one
  line per option, within 80 columns, and an unknown option with exit 2;
- trace_summarize: `kiln trace summarize FILE` on a trace that KILN_TRACE
  wrote prints the rows of the table KILN_TRACE_SUMMARY=1 printed at the
  run's exit (same kinds of work, same calls), within 80 columns; on a
  made-up trace its figures and the placing of a long name (own line;
  --wide: on its row), a trace streamed without its closing bracket read;
  a missing, empty, cut short, non-JSON or foreign file exits 1 with the
  reason;
- doctor_width: `kiln info --doctor` fits 80 columns when not a terminal
  (findings with long paths), and --wide keeps each line whole;
- tune_reset: `kiln tune --reset` with no tuning file says there was none
  and exits 0 (before, it claimed a removal); with one, removes it;
- log_handlers: libkiln never prints, so the tool's handler (tools/cli)
  and the examples' (examples/log_stderr.h) write its log on stderr as the
  library once did: one "kiln: warning: KILN_TRACE: cannot open" for an
  unwritable trace, the unusable cache with KILN_LOG=warn and nothing
  without a variable, KILN_TRACE_SUMMARY=1's table after "kiln: ";
  KILN_TRACE_SUMMARY=PATH writes the table to PATH ("%p": the process id)
  and not to stderr.

usage: check_cli.py KILN_BIN SOURCE_ROOT [TEST...]
"""
import os
import pty
import re
import select
import struct
import subprocess
import sys
import tempfile
import time

import fcntl
import termios

KILN = SOURCE = None
# Developer tools that are not installed and read their own variables.
NOT_KILN = {"tools/bench/compare.c", "tools/bench/compare_cublas.c"}


def run(args, env=None, ok=(0,)):
    full = dict(os.environ)
    full.pop("KILN_DEVICE", None)
    full.update(env or {})
    p = subprocess.run([KILN] + args, capture_output=True, text=True, env=full,
                       timeout=300)
    if p.returncode not in ok:
        raise AssertionError(f"kiln {' '.join(args)}: exit {p.returncode}\n"
                             f"{p.stdout}{p.stderr}")
    return p


def env_vars_read(source, rooms=("runtime", "tools")):
    """{variable: file} for every getenv("NAME") under the rooms (shared
    with check_man.py)."""
    names = {}
    for room in rooms:
        for dirpath, _, files in os.walk(os.path.join(source, room)):
            for f in files:
                path = os.path.join(dirpath, f)
                rel = os.path.relpath(path, source)
                if not f.endswith((".c", ".h")) or rel in NOT_KILN:
                    continue
                with open(path, encoding="utf-8") as fh:
                    for name in re.findall(r'getenv\("([A-Z0-9_]+)"\)', fh.read()):
                        names.setdefault(name, rel)
    return names


def help_env_vars(help_text):
    """The variables the environment section of `kiln --help` lists: the
    names that begin its entries, two spaces in ("  A, B   meaning")."""
    section = help_text.split("\nenvironment", 1)[1].split("\nexit status", 1)[0]
    names = set()
    for entry in re.findall(r"^  ([A-Z][A-Z0-9_]*(?:, [A-Z][A-Z0-9_]*)*)", section, re.M):
        names.update(entry.split(", "))
    return names


def test_help_env():
    listed = help_env_vars(run(["--help"]).stdout)
    missing = {n: f for n, f in env_vars_read(SOURCE).items() if n not in listed}
    assert not missing, ("kiln --help's environment list lacks "
                         + ", ".join(f"{n} (read in {f})" for n, f in sorted(missing.items())))


def test_select_nothing():
    p = run(["info", "--select", "name:NOPE-no-such-device"], ok=(1,))
    assert "no device matches 'name:NOPE-no-such-device'" in p.stderr, p.stderr
    # One reason per device kiln knows, as --explain words them.
    listed = run(["info", "-l"], ok=(0, 1)).stdout
    devices = len(re.findall(r"-- Device #", listed))
    reasons = re.findall(r"^  \d+:\d+ .*: (refused|skipped)", p.stderr, re.M)
    assert len(reasons) == devices, (devices, p.stderr)
    if devices == 0:
        assert "no OpenCL device" in p.stderr, p.stderr


def test_doctor_vendors_file():
    pocl = "/etc/OpenCL/vendors/pocl.icd"
    if not os.access(pocl, os.R_OK):
        print("# doctor_vendors_file: no pocl.icd, skipped")
        return
    p = run(["info", "--doctor", "--wide"], env={"OCL_ICD_VENDORS": pocl}, ok=(0, 1))
    for line in p.stdout.splitlines():
        if "is installed but" in line:
            assert "/etc/OpenCL/vendors names" not in line, line
            assert f"reads only OCL_ICD_VENDORS={pocl}" in line, line
    assert "echo " not in p.stdout, p.stdout  # no "register it in the directory" hint


def test_json_no_platform():
    import json
    with tempfile.TemporaryDirectory() as empty:
        env = {"OCL_ICD_VENDORS": empty}
        doc = json.loads(run(["info", "--json"], env=env, ok=(1,)).stdout)
        calls = [e["call"] for e in doc["errors"]]
        assert calls.count("clGetPlatformIDs") == 1, doc["errors"]
        assert all(e["platform"] is None for e in doc["errors"]), doc["errors"]
        text = run(["info"], env=env, ok=(1,)).stdout
        assert text.count("CL_PLATFORM_NOT_FOUND_KHR") == 1, text


def terminal(data, width):
    """Replay output on a width-column terminal; return (screen lines,
    whether a line that was then rewritten in place, by a carriage return,
    reached the last column). Ordinary lines, ended by a newline, may wrap."""
    lines, row, col, overflow, full = [[]], 0, 0, False, False
    i = 0
    while i < len(data):
        c = data[i]
        if data.startswith("\x1b[K", i):
            del lines[row][col:]
            i += 3
            continue
        if c == "\r":
            if full and not data.startswith("\r\n", i):
                overflow = True
            col, full = 0, False
        elif c == "\n":
            row, col, full = row + 1, 0, False
            if row == len(lines):
                lines.append([])
        elif c >= " ":
            if col >= width - 1:
                full = True
            if col >= width:  # the terminal wraps: the old line is stuck
                row, col = row + 1, 0
                if row == len(lines):
                    lines.append([])
            line = lines[row]
            line.extend(" " * (col + 1 - len(line)))
            line[col] = c
            col += 1
        i += 1
    return ["".join(l) for l in lines], overflow


def run_on_pty(args, cols, env=None):
    """Run kiln with args on a pty of cols columns (0: the terminal reports
    no width); return (output, exit code)."""
    pid, fd = pty.fork()
    if pid == 0:
        os.environ.pop("KILN_DEVICE", None)
        os.environ.update(env or {})
        os.execv(KILN, [KILN] + args)
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", 24, cols, 0, 0))
    out, deadline = b"", time.time() + 600
    while time.time() < deadline:
        r, _, _ = select.select([fd], [], [], 1)
        if not r:
            continue
        try:
            b = os.read(fd, 65536)
        except OSError:
            break
        if not b:
            break
        out += b
    _, status = os.waitpid(pid, 0)
    return out.decode("utf-8", "replace"), os.waitstatus_to_exitcode(status)


def warm_on_pty(cols, env):
    return run_on_pty(["cache", "warm"], cols, env)


def test_warm_progress():
    cache = os.environ.get("KILN_CACHE_DIR") or tempfile.mkdtemp()
    # (terminal width, $COLUMNS, the width the tool must keep to)
    for cols, columns, width in ((40, None, 40), (24, None, 24), (120, None, 120),
                                 (0, "30", 30)):
        env = {"KILN_CACHE_DIR": cache}
        if columns:
            env["COLUMNS"] = columns
        out, rc = warm_on_pty(cols, env)
        if rc != 0 and "no device" in out.lower() and os.environ.get("KILN_REQUIRE_DEVICE") != "1":
            print("# warm_progress: no OpenCL device, skipped")
            return
        assert rc == 0, out
        screen, overflow = terminal(out, width)
        where = f"width {width}:\n" + "\n".join(screen)
        assert "\r" in out and "/" in out, "no progress line drawn: " + where
        assert not overflow, "a progress line reached the last column at " + where
        ghosts = [l for l in screen if re.search(r"\d+/\d+ (compiling|cached|compiled)", l)]
        assert not ghosts, "progress lines left on the screen at " + where
        assert any("warmed 1 device" in l or "warmed " in l for l in screen), where


def test_tune_cpu():
    env = {"KILN_CACHE_DIR": tempfile.mkdtemp()}
    info = run(["info", "--wide"], env, ok=(0, 1))
    if "GEMM (CPU) params" not in info.stdout or \
            "(GPU family)" in info.stdout.split("GEMM (CPU) params")[1].split("\n")[0]:
        if os.environ.get("KILN_REQUIRE_DEVICE") == "1" and info.returncode:
            raise AssertionError("kiln info failed:\n" + info.stdout + info.stderr)
        print("# tune_cpu: no CPU-family device, skipped")
        return
    p = run(["tune", "--op", "gemm,transpose", "--budget", "3", "--size", "64",
             "--jobs", "1", "--wide"], env)
    tuned = re.findall(r"^tuned:\s+(.*)$", p.stdout, re.M)
    assert "op gemm_cpu" in p.stdout and "op transpose_cpu" in p.stdout, p.stdout
    assert len(tuned) == 2, p.stdout
    info = run(["info", "--wide"], env).stdout
    for label, params in zip(("GEMM (CPU) params", "Transpose (CPU) params"), tuned):
        line = re.search(re.escape(label) + r"\s+(.*)", info)
        assert line and line.group(1) == "file: " + params, \
            f"{label}: want file: {params}\n{info}"


# ---- the grammar every subcommand shares ------------------------------------

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


def no_device_reason(p):
    return p.returncode == 1 and "no " in p.stderr.lower() and "device" in p.stderr.lower()


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


def long_lines(text, width):
    return [l for l in text.replace("\r", "\n").splitlines() if len(l) > width]


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


def test_verdicts():
    p = run(["info", "--device", "pocl", "--explain", "--check"], ok=(0, 1))
    if p.returncode != 0:
        if os.environ.get("KILN_REQUIRE_DEVICE") == "1":
            raise AssertionError(p.stdout + p.stderr)
        print("# verdicts: no PoCL device, skipped")
        return
    lines = p.stdout.rstrip("\n").splitlines()
    tail = "\n".join(lines[-8:])
    assert "Summary (selector pocl):" in tail, tail
    summary = p.stdout.split("Summary (selector pocl):", 1)[1]
    assert re.search(r"taken: .*; check PASS \(\d+ ms\)", summary.replace("\n      ", " ")), summary


def test_cache_defects():
    base = tempfile.mkdtemp()
    missing = os.path.join(base, "not", "yet")
    for cmd in (["cache", "ls"], ["cache", "stats"]):
        p = run(cmd, env={"KILN_CACHE_DIR": missing})
        assert not os.path.exists(os.path.join(base, "not")), \
            f"kiln {' '.join(cmd)} created {missing}"
    assert "no entries" in run(["cache", "ls"], env={"KILN_CACHE_DIR": missing}).stdout
    # An entry that cannot be removed (a directory by an entry's name: root
    # cannot unlink it either).
    cache = os.path.join(base, "cache")
    stuck = os.path.join(cache, "0" * 32 + ".kbin")
    os.makedirs(stuck)
    with open(os.path.join(stuck, "x"), "w") as f:
        f.write("x")
    p = run(["cache", "clear"], env={"KILN_CACHE_DIR": cache}, ok=(1,))
    assert "removed" not in p.stdout, p.stdout
    assert p.stderr.count("cannot remove") == 1 and stuck in p.stderr, p.stderr
    os.remove(os.path.join(stuck, "x"))
    os.rmdir(stuck)
    p = run(["cache", "clear"], env={"KILN_CACHE_DIR": cache})
    assert "removed 0 entries" in p.stdout, p.stdout


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


# ---- kiln trace summarize, the doctor's width, tune --reset ------------------

SUMMARY_ROW = re.compile(r"^ +[\d.]+ +[\d.]+% +(\d+) +[\d.]+ +\S+ +\S+ +\S+  (.+)$", re.M)


def summary_rows(text):
    """{what: calls} of a summary table's rows."""
    return {what: int(calls) for calls, what in SUMMARY_ROW.findall(text)}


def test_trace_summarize():
    import json
    work = tempfile.mkdtemp()
    # A made-up trace: two kernels (one with a name too long for its
    # column), an op with bytes and flops, a lane name, another tool's event.
    long_name = "a_kernel_whose_name_is_far_too_long_for_the_column"
    events = [
        {"name": "thread_name", "ph": "M", "pid": 1, "tid": 1,
         "args": {"name": "queue 1 on X"}},
        {"name": "gemm", "cat": "kiln.op", "ph": "X", "ts": 0, "dur": 1000.0,
         "pid": 1, "tid": 1, "args": {"bytes": 2e6, "flops": 4e6}},
        {"name": "gemm", "cat": "kiln.op", "ph": "X", "ts": 5000, "dur": 3000.0,
         "pid": 1, "tid": 1, "args": {"bytes": 2e6, "flops": 4e6}},
        {"name": long_name, "cat": "kiln.kernel", "ph": "X", "ts": 9000,
         "dur": 500.0, "pid": 1, "tid": 1, "args": {}},
        {"name": "V8.GC", "cat": "v8", "ph": "X", "ts": 0, "dur": 99999.0,
         "pid": 2, "tid": 1},
    ]
    made = os.path.join(work, "made.json")
    with open(made, "w") as f:
        f.write("[\n" + ",\n".join(json.dumps(e) for e in events) + "\n]\n")
    p = run(["trace", "summarize", made])
    assert p.stdout.startswith("2 kinds of work, 4.500 ms in all\n"), p.stdout
    row = re.search(r"^ +4\.00 +88\.9% +2 +2000\.0 +4\.0 +1\.0 +2\.0  op gemm$",
                    p.stdout, re.M)
    assert row, "op gemm: want 4.00 ms, 88.9%, 2 calls, 2000.0 us, 4.0 MB, " \
                "1.0 GB/s, 2.0 GFLOP/s:\n" + p.stdout
    assert f"\n    kernel {long_name}\n" in p.stdout, p.stdout
    assert not long_lines(p.stdout, 80), p.stdout
    wide = run(["trace", "summarize", "--wide", made]).stdout
    assert re.search(rf"  -  kernel {long_name}$", wide, re.M), wide
    # Streamed to a pipe: no closing bracket; still read.
    streamed = os.path.join(work, "streamed.json")
    with open(made) as f, open(streamed, "w") as g:
        g.write(f.read().rstrip().rstrip("]").rstrip())
    assert run(["trace", "summarize", streamed]).stdout == p.stdout

    # Files that hold no kiln trace: exit 1, with the reason.
    def refused(name, text, want):
        path = os.path.join(work, name)
        if text is not None:
            with open(path, "w") as f:
                f.write(text)
        q = run(["trace", "summarize", path], ok=(1,))
        assert want in q.stderr and q.stdout == "", f"{name}: {q.stderr}{q.stdout}"
    with open(made) as f:
        whole = f.read()
    refused("missing.json", None, "cannot read")
    refused("empty.json", "", "is empty")
    refused("cut.json", whole[:len(whole) // 2], "is cut short")
    refused("text.json", "not json at all\n", "is not JSON")
    refused("object.json", '{"answer": 42}\n', "is JSON but not a trace")
    refused("foreign.json", json.dumps(events[-1:]), "none of kiln's")

    # A real run: the file's table has the rows (kinds of work and calls) of
    # the one KILN_TRACE_SUMMARY printed at the run's exit.
    trace = os.path.join(work, "run.json")
    demo = run(["demo", "--size", "1024"], ok=(0, 1),
               env={"KILN_TRACE": trace, "KILN_TRACE_SUMMARY": "1"})
    if demo.returncode != 0:
        if os.environ.get("KILN_REQUIRE_DEVICE") == "1":
            raise AssertionError(demo.stdout + demo.stderr)
        print("# trace_summarize: no device, the real run skipped")
        return
    at_exit = summary_rows(demo.stderr.split("kiln: trace summary of process", 1)[1])
    from_file = run(["trace", "summarize", trace]).stdout
    assert summary_rows(from_file) == at_exit and at_exit, \
        f"at exit:\n{demo.stderr}\nfrom the file:\n{from_file}"
    assert any(w.startswith("op ") for w in at_exit), at_exit
    assert any(w.startswith("build ") for w in at_exit), at_exit
    assert not long_lines(from_file, 80), from_file
    refused("run-cut.json", open(trace).read()[:-40], "is cut short")


def test_doctor_width():
    # Long paths make long findings, with or without a device.
    vendors = os.path.join(tempfile.mkdtemp(), "an-empty-vendors-directory-" + "x" * 60)
    os.makedirs(vendors)
    env = {"OCL_ICD_VENDORS": vendors}
    narrow = run(["info", "--doctor"], env=env, ok=(1,)).stdout
    wide = run(["info", "--doctor", "--wide"], env=env, ok=(1,)).stdout
    assert not long_lines(narrow, 80), "\n".join(long_lines(narrow, 80))
    assert long_lines(wide, 80), "--wide wrapped the findings:\n" + wide
    # The same text, only the line breaks differ (a path is cut across lines).
    assert "".join(narrow.split()) == "".join(wide.split()), (narrow, wide)


def test_tune_reset():
    work = tempfile.mkdtemp()
    path = os.path.join(work, "tuning.txt")
    p = run(["tune", "--reset"], env={"KILN_TUNING": path}, ok=(0, 1))
    if p.returncode != 0 and no_device_reason(p) and \
            os.environ.get("KILN_REQUIRE_DEVICE") != "1":
        print("# tune_reset: no device, skipped")
        return
    assert p.returncode == 0, p.stdout + p.stderr
    said = " ".join(p.stdout.split())
    assert "has no tuning file" in said and "nothing removed" in said and \
        "removed the" not in said, p.stdout
    with open(path, "w") as f:
        f.write("kiln tuning file\n")
    p = run(["tune", "--reset", "--wide"], env={"KILN_TUNING": path})
    assert "removed the tuning file of" in p.stdout and path in p.stdout, p.stdout
    assert not os.path.exists(path), "the tuning file is still there"


def test_log_handlers():
    demo = ["demo", "--size", "1024"]
    bad = "/nonexistent/kiln/x.json"
    p = run(demo, ok=(0, 1), env={"KILN_TRACE": bad})
    if p.returncode != 0:
        if os.environ.get("KILN_REQUIRE_DEVICE") == "1":
            raise AssertionError(p.stdout + p.stderr)
        print("# log_handlers: no device, skipped")
        return
    want = f"kiln: warning: KILN_TRACE: cannot open '{bad}': "
    assert p.stderr.count(want) == 1 and p.stderr.count("kiln: ") == 1, p.stderr
    no_cache = {"KILN_CACHE_DIR": "/proc/version/kiln"}
    p = run(demo, env=no_cache)
    assert "kiln: " not in p.stderr, p.stderr
    p = run(demo, env={**no_cache, "KILN_LOG": "warn"})
    assert p.stderr.count("kiln: warning: program cache: working without the "
                          "program cache: ") == 1, p.stderr

    work = tempfile.mkdtemp()
    p = run(demo, env={"KILN_TRACE_SUMMARY": os.path.join(work, "summary-%p.txt")})
    assert "trace summary" not in p.stderr, p.stderr
    made = os.listdir(work)
    assert len(made) == 1 and re.fullmatch(r"summary-\d+\.txt", made[0]), made
    with open(os.path.join(work, made[0])) as f:
        table = f.read()
    pid = made[0][len("summary-"):-len(".txt")]
    assert table.startswith(f"trace summary of process {pid}: "), table
    assert summary_rows(table) and not long_lines(table, 80), table

    where = os.environ.get("KILN_EXAMPLES_DIR")
    if not where or not os.path.isfile(os.path.join(where, "ops")):
        print("# log_handlers: examples not built, their handler skipped")
        return
    env = dict(os.environ, KILN_TRACE=bad, KILN_TRACE_SUMMARY="1")
    env.pop("KILN_LOG", None)
    q = subprocess.run([os.path.join(where, "ops")], capture_output=True,
                       text=True, env=env, timeout=300)
    assert q.returncode == 0, q.stdout + q.stderr
    assert q.stderr.count(want) == 1, q.stderr
    rows = summary_rows(q.stderr.split("kiln: trace summary of process ", 1)[-1])
    assert any(w.startswith("op ") for w in rows), q.stderr


def main():
    global KILN, SOURCE
    KILN, SOURCE = sys.argv[1], sys.argv[2]
    wanted = sys.argv[3:]
    tests = [(n[5:], f) for n, f in globals().items() if n.startswith("test_")]
    failed = 0
    print(f"1..{len(tests)}")
    for i, (name, fn) in enumerate(tests, 1):
        if wanted and name not in wanted:
            print(f"ok {i} {name} # SKIP not asked for")
            continue
        try:
            fn()
            print(f"ok {i} {name}")
        except AssertionError as e:
            failed += 1
            print(f"not ok {i} {name}")
            for line in str(e).splitlines():
                print(f"# {line}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
