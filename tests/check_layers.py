#!/usr/bin/env python3
"""Check that kiln's rooms stand in layers and its modules call one way.

The rooms, lowest first (docs/architecture.md):

  library: backends -> runtime/core -> runtime/mem -> runtime/program ->
           runtime/tune -> runtime/ops -> runtime/multi
  tools:   tools/commands.h, tools/cli -> tools/{info,bench,cache,demo,tune,report,trace}
           -> tools/kiln.c

A file may include, and a module may call, only its own room and the rooms
below it in its column; the public headers (include/kiln/) and the embedded
kernel sources (cl_kernels/) are open to all. From another room only that
room's header may be included (core/internal.h, mem/mem.h,
program/program.h, tune/tune.h, ops/ops_internal.h, multi/multi.h,
backend.h): the rest of a room's headers are its own.
The tools use the library only through its public headers, and the
subcommands (peers) never reach into each other.

Two checks, each failing with the file and line or the symbols that break
the rule:

  includes  every `#include "..."` in runtime/, backends/, tools/ (needs
            only the source tree);
  calls     every global symbol an object file of libkiln or of the kiln
            tool uses from another, read with nm from the objects that
            build/compile_commands.json lists: no call goes up or sideways,
            and no two modules (.c files) call each other, even through
            others (an import circle).

Usage: check_layers.py SOURCE_ROOT [BUILD_ROOT]   (calls only with BUILD_ROOT)
       check_layers.py --self-test
"""

import json
import os
import re
import subprocess
import sys
import tempfile

# Room name -> (column, rank). A room may use rooms of its column with a
# lower rank; "open" rooms may be used by everyone.
ROOMS = {
    "backends": ("library", 0),
    "runtime/core": ("library", 1),
    "runtime/mem": ("library", 2),
    "runtime/program": ("library", 3),
    "runtime/tune": ("library", 4),
    "runtime/ops": ("library", 5),
    "runtime/multi": ("library", 6),
    # libkiln_mpi: a library of its own above libkiln, which it uses only
    # through the public headers, as the tools do.
    "runtime/mpi": ("mpi", 0),
    "tools/interface": ("tools", 0),
    "tools/cli": ("tools", 0),
    "tools/info": ("tools", 1),
    "tools/bench": ("tools", 1),
    "tools/cache": ("tools", 1),
    "tools/demo": ("tools", 1),
    "tools/scale": ("tools", 1),
    "tools/tune": ("tools", 1),
    "tools/report": ("tools", 1),
    "tools/trace": ("tools", 1),
    "tools/entry": ("tools", 2),
}
OPEN_ROOMS = {"include", "cl_kernels"}
# The one header of each room that the rooms above may include.
ROOM_HEADERS = {
    "backends": "backends/backend.h",
    "runtime/core": "runtime/core/internal.h",
    "runtime/mem": "runtime/mem/mem.h",
    "runtime/program": "runtime/program/program.h",
    "runtime/tune": "runtime/tune/tune.h",
    "runtime/ops": "runtime/ops/ops_internal.h",
    "runtime/multi": "runtime/multi/multi.h",
    "tools/interface": "tools/commands.h",
    "tools/cli": "tools/cli/cli.h",
}
# Headers generated into the build tree, by the name they are included as.
GENERATED = {
    "kiln/kiln_version.h": "include/kiln/kiln_version.h",
    "embedded_kernels.h": "cl_kernels/embedded_kernels.h",
}
# Where `#include "x"` looks after the including file's own directory, as
# the meson.build files set it up.
SEARCH = {
    "library": ["include", "backends", "cl_kernels", "runtime"],
    "tools": ["include", "tools"],
    "mpi": ["include"],
}
SCANNED = ["backends", "runtime", "tools"]
INCLUDE_RE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')


def room_of(path):
    """The room of a path relative to the source root, or None."""
    parts = path.split("/")
    if parts[0] in OPEN_ROOMS:
        return parts[0]
    if parts[0] == "backends":
        return "backends"
    if parts[0] == "runtime" and len(parts) > 2:
        return "runtime/" + parts[1]
    if parts[0] == "tools":
        if len(parts) > 2:
            return "tools/" + parts[1]
        return "tools/interface" if path.endswith(".h") else "tools/entry"
    return None


def allowed(user, used, header=None, symbol=None):
    """Why user may not use room used (None when it may): through header when
    it is an include, through symbol when it is a call."""
    if used is None or used == user or used in OPEN_ROOMS:
        return None
    # The tools and libkiln_mpi call the library's exported (public)
    # functions; its kiln__ functions are hidden from them.
    if (symbol is not None and ROOMS.get(user, ("",))[0] in ("tools", "mpi") and
            ROOMS.get(used, ("",))[0] == "library" and
            not symbol.startswith("kiln__")):
        return None
    if user not in ROOMS or used not in ROOMS:
        return "%s is outside the known rooms" % used
    (user_col, user_rank), (used_col, used_rank) = ROOMS[user], ROOMS[used]
    if user_col != used_col:
        return "%s may not use %s (another column: the tools use only the " \
               "public headers)" % (user, used)
    if used_rank > user_rank:
        return "%s may not use %s, a room above it" % (user, used)
    if used_rank == user_rank:
        return "%s may not use %s, a peer room" % (user, used)
    if header is not None and ROOM_HEADERS.get(used) != header:
        return "%s is private to %s (include %s instead)" % (
            header, used, ROOM_HEADERS.get(used, "nothing"))
    return None


def resolve(root, including, name):
    """The included header's path relative to root, or None if not found."""
    here = os.path.dirname(including)
    candidate = os.path.normpath(os.path.join(here, name))
    if os.path.isfile(os.path.join(root, candidate)):
        return candidate
    column = ROOMS.get(room_of(including), ("library", 0))[0]
    for base in SEARCH[column]:
        candidate = os.path.normpath(os.path.join(base, name))
        if os.path.isfile(os.path.join(root, candidate)):
            return candidate
    return GENERATED.get(name)


def check_includes(root):
    problems = []
    for top in SCANNED:
        for dirpath, _, files in os.walk(os.path.join(root, top)):
            for f in sorted(files):
                if not f.endswith((".c", ".h")):
                    continue
                path = os.path.relpath(os.path.join(dirpath, f), root)
                user = room_of(path)
                with open(os.path.join(root, path), encoding="utf-8") as src:
                    for number, line in enumerate(src, 1):
                        m = INCLUDE_RE.match(line)
                        if not m:
                            continue
                        header = resolve(root, path, m.group(1))
                        if header is None:
                            problems.append("%s:%d: cannot find \"%s\"" %
                                            (path, number, m.group(1)))
                            continue
                        why = allowed(user, room_of(header), header)
                        if why:
                            problems.append("%s:%d: includes %s: %s" %
                                            (path, number, header, why))
    return problems


def symbols(obj):
    """(defined, undefined) global symbols of an object file."""
    out = subprocess.run(["nm", obj], capture_output=True, text=True,
                         check=True).stdout
    defined, undefined = set(), set()
    for line in out.splitlines():
        fields = line.split()
        if len(fields) == 2 and fields[0] == "U":
            undefined.add(fields[1])
        elif len(fields) == 3 and fields[1] in "TDBRCVW":
            defined.add(fields[2])
    return defined, undefined


def modules(root, build):
    """Source path (relative to root) -> object path, for the library and
    the kiln tool, from compile_commands.json."""
    with open(os.path.join(build, "compile_commands.json")) as f:
        commands = json.load(f)
    found = {}
    for entry in commands:
        source = os.path.relpath(
            os.path.normpath(os.path.join(entry["directory"], entry["file"])),
            root)
        output = entry["output"]
        if not os.path.isabs(output):
            output = os.path.join(entry["directory"], output)
        in_library = "libkiln" in output
        in_tool = os.path.basename(os.path.dirname(output)) == "kiln.p"
        if (in_library or in_tool) and room_of(source) in ROOMS:
            found.setdefault(source, output)
    return found


def cycles(edges):
    """Strongly connected components with more than one node (Tarjan)."""
    index, low, stack, on_stack, result = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                result.append(sorted(component))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return result


def check_calls(module_symbols):
    """module_symbols: source -> (defined, undefined)."""
    owner = {}
    for source, (defined, _) in module_symbols.items():
        for sym in defined:
            owner.setdefault(sym, source)
    problems, edges = [], {}
    for source, (_, undefined) in sorted(module_symbols.items()):
        for sym in sorted(undefined):
            target = owner.get(sym)
            if target is None or target == source:
                continue
            edges.setdefault(source, set()).add(target)
            why = allowed(room_of(source), room_of(target), symbol=sym)
            if why:
                problems.append("%s calls %s (%s): %s" %
                                (source, sym, target, why))
    for component in cycles(edges):
        problems.append("import circle: " + " -> ".join(component) +
                        " call each other")
    return problems


def self_test():
    """The rules themselves, on made-up trees and symbol tables: each broken
    rule must be reported, and a clean tree must pass."""
    failures = []

    def expect(what, problems, count):
        if len(problems) != count:
            failures.append("%s: expected %d problem(s), got %r" %
                            (what, count, problems))

    files = {
        "include/kiln/kiln.h": "",
        "backends/backend.h": "",
        "runtime/core/internal.h": '#include "kiln/kiln.h"\n#include "backend.h"\n',
        "runtime/core/private.h": '#include "internal.h"\n',
        "runtime/core/a.c": '#include "private.h"\n',
        "runtime/mem/mem.h": '#include "core/internal.h"\n',
        "runtime/mem/m.c": '#include "mem.h"\n',
        "runtime/program/program.h": '#include "mem/mem.h"\n',
        "runtime/program/b.c": '#include "program.h"\n#include "embedded_kernels.h"\n',
        "runtime/ops/ops_internal.h": '#include "program/program.h"\n',
        "tools/commands.h": "",
        "tools/kiln.c": '#include "commands.h"\n',
        "tools/info/cmd_info.c": '#include "commands.h"\n#include "kiln/kiln.h"\n',
    }
    bad = {
        "runtime/core/up.c": '#include "program/program.h"\n',
        "runtime/ops/private.c": '#include "core/private.h"\n',
        "tools/bench/b.c": '#include "core/internal.h"\n',
        "tools/bench/peer.c": '#include "../info/info.h"\n',
        "tools/info/info.h": "",
        "runtime/program/missing.c": '#include "nowhere.h"\n',
        "runtime/mem/up.c": '#include "program/program.h"\n',
    }
    with tempfile.TemporaryDirectory() as root:
        def write(tree):
            for path, text in tree.items():
                os.makedirs(os.path.dirname(os.path.join(root, path)),
                            exist_ok=True)
                with open(os.path.join(root, path), "w") as f:
                    f.write(text)
        write(files)
        expect("clean tree", check_includes(root), 0)
        write(bad)
        expect("broken tree", check_includes(root), 6)

    lib = {
        "runtime/core/a.c": ({"kiln__core"}, set()),
        "runtime/program/b.c": ({"kiln__program"}, {"kiln__core"}),
        "runtime/ops/c.c": ({"kiln_gemm", "kiln__ops"},
                            {"kiln__program", "kiln__core", "clFinish"}),
        "tools/kiln.c": ({"main"}, {"cmd_info"}),
        "tools/info/cmd_info.c": ({"cmd_info"}, {"kiln_gemm"}),
    }
    expect("clean calls", check_calls(lib), 0)
    internal = dict(lib)
    internal["tools/info/cmd_info.c"] = ({"cmd_info"}, {"kiln__ops"})
    expect("tool calls a kiln__ function", check_calls(internal), 1)
    up = dict(lib)
    up["runtime/core/a.c"] = ({"kiln__core"}, {"kiln__program"})
    # one call up, and the circle core <-> program it closes
    expect("call up", check_calls(up), 2)
    circle = dict(lib)
    circle["runtime/core/x.c"] = ({"kiln__x"}, {"kiln__core"})
    circle["runtime/core/a.c"] = ({"kiln__core"}, {"kiln__x"})
    expect("circle within a room", check_calls(circle), 1)
    peer = dict(lib)
    peer["tools/bench/b.c"] = ({"bench_fn"}, {"cmd_info"})
    expect("peer call", check_calls(peer), 1)

    for failure in failures:
        print("self-test: " + failure)
    return 1 if failures else 0


def main(argv):
    if argv[1:] == ["--self-test"]:
        return self_test()
    if len(argv) not in (2, 3):
        print(__doc__)
        return 2
    root = os.path.abspath(argv[1])
    problems = check_includes(root)
    checked = "includes"
    if len(argv) == 3:
        found = modules(root, os.path.abspath(argv[2]))
        if not found:
            problems.append("no object files of libkiln or kiln found in " +
                            argv[2])
        problems += check_calls({s: symbols(o) for s, o in found.items()})
        checked = "includes and calls of %d modules" % len(found)
    for p in problems:
        print(p)
    print("%s: %d problem(s)" % (checked, len(problems)))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
