#!/usr/bin/env python3
"""The documents stay true to the code.

snippets: every ```c block of README.md and docs/*.md that follows the line
  `<!-- compiled: tests/check_docs.py -->` compiles against kiln's headers
  (with -Wall -Wextra -Werror), as the body of a function, after
  tests/docs_prelude.h declares the buffers, queues and sizes the snippets
  name. A renamed function, a changed parameter list or a wrong enum in a
  page fails here. (README.md's first program is compiled and run by
  tests/readme_example.sh.)

links: every relative link of README.md and docs/*.md names a file of the
  source tree, and a `#fragment` names a heading of that page (GitHub's
  spelling: lower case, punctuation dropped, spaces as hyphens).

usage: check_docs.py snippets SOURCE_ROOT BUILD_ROOT CC [CC ARGS...]
       check_docs.py links SOURCE_ROOT
       check_docs.py --self-test
"""
import glob
import os
import re
import subprocess
import sys
import tempfile

MARK = "<!-- compiled: tests/check_docs.py -->"


def pages(source):
    return [os.path.join(source, "README.md")] + sorted(
        glob.glob(os.path.join(source, "docs", "*.md")))


def marked_blocks(text):
    """(line number, code) of each ```c block right after MARK."""
    lines = text.splitlines()
    out, i = [], 0
    while i < len(lines):
        if lines[i].strip() == MARK:
            j = i + 1
            if j >= len(lines) or not re.match(r"^```c\s*$", lines[j]):
                out.append((i + 1, None))  # a mark with no c block after it
                i += 1
                continue
            k = j + 1
            while k < len(lines) and not lines[k].startswith("```"):
                k += 1
            out.append((j + 2, "\n".join(lines[j + 1:k])))
            i = k
        i += 1
    return out


def check_snippets(source, build, cc):
    problems, count = [], 0
    prelude = os.path.abspath(os.path.join(source, "tests", "docs_prelude.h"))
    with tempfile.TemporaryDirectory() as tmp:
        for page in pages(source):
            rel = os.path.relpath(page, source)
            with open(page, encoding="utf-8") as f:
                blocks = marked_blocks(f.read())
            for line, code in blocks:
                if code is None:
                    problems.append(f"{rel}:{line}: the compiled mark has no ```c block after it")
                    continue
                count += 1
                unit = os.path.join(tmp, "snippet.c")
                with open(unit, "w", encoding="utf-8") as f:
                    f.write(f'#include "{prelude}"\n')
                    f.write("void docs_snippet(void);\nvoid docs_snippet(void) {\n")
                    f.write(f'#line {line} "{rel}"\n')
                    f.write(code + "\n}\n")
                cmd = [*cc, "-std=c11", "-fsyntax-only", "-Wall", "-Wextra", "-Werror",
                       "-Wno-unused-variable", "-Wno-unused-but-set-variable",
                       "-I", os.path.join(source, "include"),
                       "-I", os.path.join(build, "include"), unit]
                p = subprocess.run(cmd, capture_output=True, text=True)
                if p.returncode != 0:
                    problems.append(f"{rel}:{line}: the snippet does not compile:\n"
                                    + p.stderr.strip())
    return problems, count


def slug(heading):
    """GitHub's anchor of a heading."""
    h = heading.strip().lower()
    h = re.sub(r"[^\w\- ]", "", h)
    return h.replace(" ", "-")


def anchors(path):
    with open(path, encoding="utf-8") as f:
        text = f.read()
    text = re.sub(r"^```.*?^```", "", text, flags=re.M | re.S)
    return {slug(m.group(1)) for m in re.finditer(r"^#+\s+(.*)$", text, re.M)}


def check_links(source):
    problems, count = [], 0
    for page in pages(source):
        rel = os.path.relpath(page, source)
        with open(page, encoding="utf-8") as f:
            text = f.read()
        text = re.sub(r"^```.*?^```", "", text, flags=re.M | re.S)
        for m in re.finditer(r"\[[^\]]*\]\(([^)\s]+)\)", text):
            target = m.group(1)
            if re.match(r"^[a-z]+:", target):
                continue  # https:, mailto:
            count += 1
            path, _, frag = target.partition("#")
            dest = os.path.normpath(os.path.join(os.path.dirname(page), path)) if path else page
            if not os.path.exists(dest):
                problems.append(f"{rel}: link to {target}: no file {os.path.relpath(dest, source)}")
                continue
            if frag and dest.endswith(".md") and frag not in anchors(dest):
                problems.append(f"{rel}: link to {target}: {os.path.relpath(dest, source)} "
                                f"has no heading #{frag}")
    return problems, count


def self_test():
    with tempfile.TemporaryDirectory() as tmp:
        os.makedirs(os.path.join(tmp, "docs"))
        with open(os.path.join(tmp, "README.md"), "w") as f:
            f.write("# T\n\n## Two words\n\n[a](docs/a.md#real-one) [b](docs/missing.md) "
                    "[c](docs/a.md#nowhere) [d](#two-words) [e](https://example.org)\n")
        with open(os.path.join(tmp, "docs", "a.md"), "w") as f:
            f.write("# A\n\n## Real one?\n\n```sh\n# not a heading\n```\n\n"
                    f"{MARK}\n```c\nint x = 1;\n```\n\n{MARK}\ntext\n")
        problems, count = check_links(tmp)
        assert count == 4, count
        assert len(problems) == 2, problems
        assert "no file docs/missing.md" in problems[0], problems
        assert "no heading #nowhere" in problems[1], problems
        with open(os.path.join(tmp, "docs", "a.md")) as f:
            blocks = marked_blocks(f.read())
        assert blocks == [(11, "int x = 1;"), (14, None)], blocks
        assert slug("Measuring a GPU: `kiln report`") == "measuring-a-gpu-kiln-report"
        assert slug("No devices?") == "no-devices"
    print("check_docs: self-test passed")
    return 0


def main(argv):
    if argv[1:] == ["--self-test"]:
        return self_test()
    if len(argv) >= 5 and argv[1] == "snippets":
        problems, count = check_snippets(argv[2], argv[3], argv[4:])
        what = f"{count} snippets compiled"
    elif len(argv) == 3 and argv[1] == "links":
        problems, count = check_links(argv[2])
        what = f"{count} links checked"
    else:
        print(__doc__, file=sys.stderr)
        return 2
    for p in problems:
        print("docs: " + p, file=sys.stderr)
    print(f"docs: {what}, {len(problems)} problem(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
