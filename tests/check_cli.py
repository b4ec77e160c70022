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
  line per option, within 80 columns, and an unknown option with exit 2.

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
    p = run(["info", "--doctor"], env={"OCL_ICD_VENDORS": pocl}, ok=(0, 1))
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
}
NO_DEVICE = {"cache ls", "cache stats", "cache clear"}


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
        opts = help_options(run(args[:2 if name.startswith("cache") else 1] + ["--help"]).stdout)
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
        cmd = args[:2] if name.startswith("cache") else args[:1]
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
        cmd = args[:2] if name.startswith("cache") else args[:1]
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
