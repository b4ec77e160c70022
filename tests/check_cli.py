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

The shared grammar is cli_grammar.py; kiln trace summarize and the log
handlers are cli_trace_log.py; the helpers are cli_util.py. Every check
of the three runs as one TAP test case here.

More of the tool (docs/cli.md, kiln(1)):

- verdicts: `kiln info --explain --check` sums its verdicts up at the end;
- cache_defects: `kiln cache ls` and `stats` do not create a missing cache
  directory; `kiln cache clear` that cannot remove an entry says so once,
  on stderr, and prints no "removed" line;
- doctor_width: `kiln info --doctor` fits 80 columns when not a terminal
  (findings with long paths), and --wide keeps each line whole;
- tune_reset: `kiln tune --reset` with no tuning file says there was none
  and exits 0 (before, it claimed a removal); with one, removes it.

usage: check_cli.py KILN_BIN SOURCE_ROOT [TEST...]
"""
import os
import re
import sys
import tempfile

# The helper modules beside this file: no __pycache__ left in the source tree.
sys.dont_write_bytecode = True
import cli_grammar  # noqa: E402
import cli_trace_log  # noqa: E402
import cli_util  # noqa: E402
from cli_util import (  # noqa: E402
    env_vars_read, help_env_vars, long_lines, no_device_reason, run,
    run_on_pty, terminal)


def test_help_env():
    listed = help_env_vars(run(["--help"]).stdout)
    missing = {n: f for n, f in env_vars_read(cli_util.SOURCE).items() if n not in listed}
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


def main():
    cli_util.KILN, cli_util.SOURCE = sys.argv[1], sys.argv[2]
    wanted = sys.argv[3:]
    tests = [(n[5:], f)
             for module in (sys.modules[__name__], cli_grammar, cli_trace_log)
             for n, f in vars(module).items() if n.startswith("test_")]
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
