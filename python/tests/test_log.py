"""kiln's log from Python: the bridge to the logging module (on from import,
kiln.log_to_python), the messages kiln keeps without it
(kiln.trace_diagnostic), and an interpreter that exits cleanly while kiln
still has something to say: KILN_TRACE_SUMMARY=1's table comes from kiln's
exit-time destructor, after Python has finalised. kiln reads KILN_LOG and
KILN_TRACE once per process, so each case runs in a fresh interpreter."""

import json
import logging
import os
import subprocess
import sys

import kiln

# Collects the records of logger "kiln" and prints them with the
# diagnostic. A message logged on an OpenCL callback thread reaches logging
# at the main thread's next Python instruction: the loop waits for it.
COLLECT = """
import json, logging, time
import kiln
records = []
class Keep(logging.Handler):
    def emit(self, r):
        records.append([r.name, r.levelname, r.getMessage()])
logging.getLogger("kiln").addHandler(Keep())
logging.getLogger("kiln").setLevel(logging.DEBUG)
was = [kiln.log_to_python(BRIDGE), kiln.log_to_python(BRIDGE)]
x = kiln.asarray([[1.0, 2.0], [3.0, 4.0]])
kiln.matmul(x, x).numpy()
for _ in range(500):
    if any("KILN_TRACE" in r[2] for r in records) or "KILN_TRACE" in kiln.trace_diagnostic():
        break
    time.sleep(0.01)
print(json.dumps({"records": records, "diag": kiln.trace_diagnostic(), "was": was}))
"""


def run(dev, code, **env_vars):
    env = {k: v for k, v in os.environ.items()
           if k not in ("KILN_LOG", "KILN_TRACE", "KILN_TRACE_SUMMARY", "KILN_TUNING")}
    env["KILN_DEVICE"] = dev.info["selector"]
    env.update(env_vars)
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                          text=True, timeout=300)


def collect(dev, bridge, **env_vars):
    r = run(dev, COLLECT.replace("BRIDGE", repr(bridge)), **env_vars)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1]), r.stderr


def test_warning_and_info_reach_logging(dev, tmp_path):
    """An unwritable KILN_TRACE (a warning, from whichever thread writes the
    trace) and KILN_TUNING=off under KILN_LOG=info (info, when the GEMM
    looks for its tuning file) reach logger "kiln" at WARNING and INFO, and
    are not kept."""
    path = str(tmp_path / "missing" / "t.json")
    out, err = collect(dev, True, KILN_TRACE=path, KILN_LOG="info", KILN_TUNING="off")
    assert out["was"] == [True, True]           # on from import
    trace = ("KILN_TRACE: cannot open '%s': No such file or directory; "
             "no trace is written" % path)
    assert out["records"].count(["kiln", "WARNING", trace]) == 1, out
    assert ["kiln", "INFO", "tuning file ignored: KILN_TUNING=off: tuning files are "
            "ignored"] in out["records"], out
    assert all(r[0] == "kiln" and r[1] in ("WARNING", "INFO") for r in out["records"])
    # The trace's own problem stays readable; no log message is kept.
    assert out["diag"] == trace
    assert "KILN_TRACE" not in err                # the handler took it, not stderr


def test_without_the_bridge_messages_are_kept(dev, tmp_path):
    """log_to_python(False): nothing reaches logging; kiln keeps the
    messages for trace_diagnostic(), after the trace's problem."""
    path = str(tmp_path / "missing" / "t.json")
    out, err = collect(dev, False, KILN_TRACE=path, KILN_LOG="bogus")
    assert out["was"] == [True, False]
    assert out["records"] == []
    lines = out["diag"].split("\n")
    assert lines[0] == ("KILN_TRACE: cannot open '%s': No such file or directory; "
                        "no trace is written" % path)
    assert ("warning: KILN_LOG=bogus is not off, error, warn, info or debug; "
            "using warn") in lines[1:]
    assert "KILN_" not in err


def test_levels(caplog):
    """kiln's levels map to logging's (kiln logs no error or debug message
    yet: the sink is called as the bridge calls it)."""
    with caplog.at_level(logging.DEBUG, logger="kiln"):
        for level in (1, 2, 3, 4):
            kiln._log_sink(level, "level %d" % level)
        kiln._kiln._log_flush()
    got = [(r.name, r.levelno, r.getMessage()) for r in caplog.records
           if r.getMessage().startswith("level ")]
    assert got == [("kiln", logging.ERROR, "level 1"), ("kiln", logging.WARNING, "level 2"),
                   ("kiln", logging.INFO, "level 3"), ("kiln", logging.DEBUG, "level 4")]
    assert isinstance(kiln.trace_diagnostic(), str)
    assert kiln.log_to_python(True) is True      # on from import, and stays on


RAISING = """
import sys, time
import kiln
seen = []
sys.unraisablehook = lambda u: seen.append(str(u.exc_value))
def bad(level, text):
    raise RuntimeError("sink failed: " + text)
kiln._kiln._log_bridge(bad)
kiln.exp(kiln.asarray([1.0])).numpy()
for _ in range(500):
    if seen:
        break
    time.sleep(0.01)
print(seen)
"""


def test_a_failing_sink_raises_nowhere(dev, tmp_path):
    """An exception in the sink never reaches the code the delivery
    interrupted: it goes to sys.unraisablehook and the program goes on."""
    r = run(dev, RAISING, KILN_TRACE=str(tmp_path / "missing" / "t.json"))
    assert r.returncode == 0, r.stderr
    assert "sink failed: KILN_TRACE: cannot open" in r.stdout, r.stdout + r.stderr


# Ops on the main thread and on a daemon thread that is still enqueueing
# when the interpreter finalises; an atexit hook registered before kiln's
# (so run after it) still calls kiln and asks for the bridge, which stays
# off. KILN_TRACE_SUMMARY=1's table is then delivered by kiln's destructor.
EXIT = """
import atexit, threading
def late():
    import kiln
    print("late", float(kiln.exp(kiln.asarray([0.0])).numpy()[0]), kiln.log_to_python(True))
atexit.register(late)
import kiln
x = kiln.asarray([1.0] * 1000)
def spin():
    while True:
        kiln.exp(x).numpy()
threading.Thread(target=spin, daemon=True).start()
for _ in range(20):
    kiln.exp(x).numpy()
print("main done")
"""


def test_exit_with_summary_and_busy_thread(dev, tmp_path):
    """The interpreter exits with status 0 with the bridge installed, a
    thread still calling kiln and KILN_TRACE_SUMMARY=1: the table is
    written to stderr after Python's exit as the kiln tool writes it, and
    nothing crashes. Also with an unwritable KILN_TRACE, whose warning comes
    from the thread that writes the trace."""
    for extra in ({}, {"KILN_TRACE": str(tmp_path / "missing" / "t.json")}):
        r = run(dev, EXIT, KILN_TRACE_SUMMARY="1", **extra)
        assert r.returncode == 0, r.stderr
        assert r.stdout.splitlines() == ["main done", "late 1.0 False"], r.stdout
        assert "kiln: trace summary of process" in r.stderr, r.stderr
        assert "op unary.exp" in r.stderr
        assert "Fatal Python error" not in r.stderr and "Traceback" not in r.stderr
