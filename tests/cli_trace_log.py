"""kiln trace summarize and the log handlers, checked by the `cli` test
(check_cli.py runs these):

- trace_summarize: `kiln trace summarize FILE` on a trace that KILN_TRACE
  wrote prints the rows of the table KILN_TRACE_SUMMARY=1 printed at the
  run's exit (same kinds of work, same calls), within 80 columns; on a
  made-up trace its figures and the placing of a long name (own line;
  --wide: on its row), a trace streamed without its closing bracket read;
  a missing, empty, cut short, non-JSON or foreign file exits 1 with the
  reason;
- log_handlers: libkiln never prints, so the tool's handler (tools/cli)
  and the examples' (examples/log_stderr.h) write its log on stderr as the
  library once did: one "kiln: warning: KILN_TRACE: cannot open" for an
  unwritable trace, the unusable cache with KILN_LOG=warn and nothing
  without a variable, KILN_TRACE_SUMMARY=1's table after "kiln: ";
  KILN_TRACE_SUMMARY=PATH writes the table to PATH ("%p": the process id)
  and not to stderr.
"""
import os
import re
import subprocess
import tempfile

from cli_util import long_lines, run


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
