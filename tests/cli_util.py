"""Helpers of the `cli` test (check_cli.py, cli_grammar.py,
cli_trace_log.py): the kiln binary and source tree under test (set by
check_cli.py's main), running kiln with or without a terminal (a pty of a
given width), replaying output on a terminal, and the environment
variables that libkiln and the kiln tool read (shared with check_man.py).
"""
import os
import pty
import re
import select
import struct
import subprocess
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


def no_device_reason(p):
    return p.returncode == 1 and "no " in p.stderr.lower() and "device" in p.stderr.lower()


def long_lines(text, width):
    return [l for l in text.replace("\r", "\n").splitlines() if len(l) > width]
