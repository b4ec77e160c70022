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
NOT_KILN = {"tools/bench/compare.c"}


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


def warm_on_pty(cols, env):
    pid, fd = pty.fork()
    if pid == 0:
        os.environ.pop("KILN_DEVICE", None)
        os.environ.update(env)
        os.execv(KILN, [KILN, "cache", "warm"])
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", 24, cols, 0, 0))
    out, deadline = b"", time.time() + 600
    while time.time() < deadline:
        r, _, _ = select.select([fd], [], [], 1)
        if not r:
            continue
        try:
            b = os.read(fd, 4096)
        except OSError:
            break
        if not b:
            break
        out += b
    _, status = os.waitpid(pid, 0)
    return out.decode("utf-8", "replace"), os.waitstatus_to_exitcode(status)


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
    info = run(["info"], env, ok=(0, 1))
    if "GEMM (CPU) params" not in info.stdout or \
            "(GPU family)" in info.stdout.split("GEMM (CPU) params")[1].split("\n")[0]:
        if os.environ.get("KILN_REQUIRE_DEVICE") == "1" and info.returncode:
            raise AssertionError("kiln info failed:\n" + info.stdout + info.stderr)
        print("# tune_cpu: no CPU-family device, skipped")
        return
    p = run(["tune", "--op", "gemm,transpose", "--budget", "3", "--size", "64",
             "--jobs", "1"], env)
    tuned = re.findall(r"^tuned:\s+(.*)$", p.stdout, re.M)
    assert "op gemm_cpu" in p.stdout and "op transpose_cpu" in p.stdout, p.stdout
    assert len(tuned) == 2, p.stdout
    info = run(["info"], env).stdout
    for label, params in zip(("GEMM (CPU) params", "Transpose (CPU) params"), tuned):
        line = re.search(re.escape(label) + r"\s+(.*)", info)
        assert line and line.group(1) == "file: " + params, \
            f"{label}: want file: {params}\n{info}"


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
