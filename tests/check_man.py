#!/usr/bin/env python3
"""The man pages say what the tool and the library do:

- every option `kiln X --help` prints (long and short) appears in
  kiln-X(1)'s synopsis, options or commands, and every option those
  sections name is one the help prints; the same for kiln(1) and
  `kiln --help`;
- every command `kiln --help` lists has a page and a place in kiln(1);
  every `kiln cache` command is in kiln-cache(1);
- every environment variable `kiln --help` lists appears in kiln(1)'s
  ENVIRONMENT; every one libkiln reads (getenv in runtime/) in kiln(3)'s;
- each page renders with `man --warnings` (groff -ww without man) and no
  warning;
- `meson install` installs every page;
- kiln(1) and kiln(3) point at the documents installed in share/doc/kiln,
  and every document a page names (README.md, CHANGELOG.md, docs/*.md) is
  one `meson install` puts there.

usage: check_man.py KILN_BIN SOURCE_ROOT BUILD_ROOT
"""
import json
import os
import re
import shutil
import subprocess
import sys

# No __pycache__ of cli_util.py left in the source tree.
sys.dont_write_bytecode = True
from cli_util import env_vars_read, help_env_vars  # noqa: E402

KILN, SOURCE, BUILD = sys.argv[1:4]
PAGES = {
    "kiln.1": "tools/kiln.1",
    "kiln-info.1": "tools/info/kiln-info.1",
    "kiln-bench.1": "tools/bench/kiln-bench.1",
    "kiln-cache.1": "tools/cache/kiln-cache.1",
    "kiln-demo.1": "tools/demo/kiln-demo.1",
    "kiln-tune.1": "tools/tune/kiln-tune.1",
    "kiln-report.1": "tools/report/kiln-report.1",
    "kiln-trace.1": "tools/trace/kiln-trace.1",
    "kiln.3": "docs/man/kiln.3",
}
problems = []


def help_of(*args):
    p = subprocess.run([KILN, *args, "--help"], capture_output=True, text=True)
    assert p.returncode == 0, f"kiln {' '.join(args)} --help: exit {p.returncode}"
    return p.stdout


def sections(page):
    """{SECTION NAME: roff text} of a page."""
    with open(os.path.join(SOURCE, PAGES[page]), encoding="utf-8") as f:
        text = f.read()
    out, name = {}, None
    for line in text.splitlines():
        m = re.match(r'\.SH\s+"?([^"]+)"?', line)
        if m:
            name = m.group(1).strip()
            out[name] = ""
        elif name:
            out[name] += line + "\n"
    return out


def man_options(page):
    """Options a page names in its synopsis and in the tags (the line after
    .TP) of OPTIONS and COMMANDS; the prose may mention other tools'."""
    s = sections(page)
    text = s.get("SYNOPSIS", "")
    for k in ("OPTIONS", "COMMANDS"):
        text += "".join(re.findall(r"^\.TP\n(.*\n)", s.get(k, ""), re.M))
    longs = set(re.findall(r"\\-\\-([a-z][a-z0-9]*(?:\\-[a-z0-9]+)*)", text))
    longs = {l.replace("\\-", "-") for l in longs}
    shorts = set(re.findall(r"(?<![-\\a-zA-Z])\\-([a-zA-Z])\b", text))
    return longs, shorts


def help_options(text):
    longs = set(re.findall(r"(?<![\w-])--([a-z][a-z0-9-]*)", text))
    shorts = set(re.findall(r"(?<![\w-])-([a-zA-Z])\b", text))
    return longs, shorts


def compare(page, help_text, what):
    hl, hs = help_options(help_text)
    ml, ms = man_options(page)
    for o in sorted(hl - ml):
        problems.append(f"{page}: lacks --{o}, which `{what}` prints")
    for o in sorted(ml - hl):
        problems.append(f"{page}: names --{o}, which `{what}` does not print")
    for o in sorted(hs - ms):
        problems.append(f"{page}: lacks -{o}, which `{what}` prints")
    for o in sorted(ms - hs):
        problems.append(f"{page}: names -{o}, which `{what}` does not print")


top = help_of()
# Its own options and those every command shares (all before the
# environment list, whose prose names other commands' options).
compare("kiln.1", top.split("\nenvironment")[0], "kiln --help")
commands = re.findall(r"^  ([a-z]+)  ", top.split("commands:")[1].split("\n\n")[0], re.M)
assert commands, "kiln --help lists no commands"
kiln1 = sections("kiln.1")
for c in commands:
    page = f"kiln-{c}.1"
    if page not in PAGES:
        problems.append(f"`kiln {c}` has no man page {page}")
        continue
    compare(page, help_of(c), f"kiln {c} --help")
    if not re.search(rf"^\.B {c}\b", kiln1.get("COMMANDS", ""), re.M):
        problems.append(f"kiln.1: COMMANDS lacks {c}")
cache_help = help_of("cache")
cache_cmds = re.findall(r"^  ([a-z]+)\b", cache_help.split("commands:")[1].split("\n\n")[0], re.M)
cache_page = sections("kiln-cache.1").get("COMMANDS", "")
for c in cache_cmds:
    if not re.search(rf"^\.BR? {c}\b", cache_page, re.M):
        problems.append(f"kiln-cache.1: COMMANDS lacks {c}")

env_man = kiln1.get("ENVIRONMENT", "").replace("\\-", "-")
for v in sorted(help_env_vars(top)):
    if not re.search(rf"\b{v}\b", env_man):
        problems.append(f"kiln.1: ENVIRONMENT lacks {v}, which `kiln --help` lists")
env3 = sections("kiln.3").get("ENVIRONMENT", "")
for v in sorted(env_vars_read(SOURCE, ("runtime",))):
    if not re.search(rf"\b{v}\b", env3):
        problems.append(f"kiln.3: ENVIRONMENT lacks {v}, which libkiln reads")

# Rendering, as a user's man would.
for page, rel in PAGES.items():
    path = os.path.join(SOURCE, rel)
    if shutil.which("man"):
        cmd = ["man", "--warnings", "-l", path]
    else:
        cmd = ["groff", "-ww", "-man", "-Tutf8", "-z", path]
    p = subprocess.run(cmd, capture_output=True, text=True,
                       env=dict(os.environ, MANWIDTH="80", MAN_KEEP_FORMATTING="0"))
    if p.returncode != 0 or p.stderr.strip():
        problems.append(f"{page}: {' '.join(cmd[:2])} warns: {p.stderr.strip()}")

# Installed: every page is in meson's install plan.
plan = subprocess.run(["meson", "introspect", "--installed", BUILD],
                      capture_output=True, text=True, check=True)
installed = {os.path.basename(v) for v in json.loads(plan.stdout).values()}
for page in PAGES:
    if page not in installed:
        problems.append(f"{page}: not installed (install_man in its meson.build)")

# The documents a page names are installed (share/doc/kiln, meson.build).
plan_map = json.loads(plan.stdout)
docdir = [v for v in plan_map.values() if v.endswith("/share/doc/kiln/README.md")]
docdir = os.path.dirname(docdir[0]) if docdir else None
if docdir is None:
    problems.append("README.md is not installed in share/doc/kiln (meson.build)")
for page, rel in PAGES.items():
    with open(os.path.join(SOURCE, rel), encoding="utf-8") as f:
        text = f.read().replace("\\%", "").replace("\\-", "-")
    if page in ("kiln.1", "kiln.3") and "share/doc/kiln/" not in sections(page).get("SEE ALSO", ""):
        problems.append(f"{page}: SEE ALSO does not point at the installed documents (share/doc/kiln/)")
    for doc in sorted(set(re.findall(r"(?<![\w/.-])((?:docs/[a-z0-9-]+|README|CHANGELOG)\.md)\b", text))):
        if not os.path.exists(os.path.join(SOURCE, doc)):
            problems.append(f"{page}: names {doc}, which is not in the source tree")
        elif docdir is None or os.path.join(docdir, doc) not in plan_map.values() and not (
                doc.startswith("docs/") and
                plan_map.get(os.path.join(os.path.abspath(SOURCE), "docs")) == os.path.join(docdir, "docs")):
            problems.append(f"{page}: names {doc}, which meson install does not put in share/doc/kiln")

for p in problems:
    print("man pages: " + p, file=sys.stderr)
print(f"man pages: {len(PAGES)} pages, {len(commands)} commands checked, "
      f"{len(problems)} problem(s)")
sys.exit(1 if problems else 0)
