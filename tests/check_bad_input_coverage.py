#!/usr/bin/env python3
"""Fail when a public kiln function has no bad-input test.

Usage: check_bad_input_coverage.py [--verbose] [ROOT]
       check_bad_input_coverage.py --self-test

ROOT is the repository (default: the parent of this script's directory).
Every function declared `KILN_API` in include/kiln/*.h is looked up in the
test sources tests/*.c (comments removed). An *assertion* is one invocation
of a cmocka or harness macro whose name starts with `assert_` (for example
assert_kiln_status, assert_int_equal, assert_null), taken with its whole
balanced argument list, so a call spread over several lines counts as one.

A function counts as covered by the first rule that applies:

  status   It returns kiln_status, and some assertion both calls it
           (`name(` appears) and names an error status (a `KILN_ERR_`
           identifier): `assert_kiln_status(kiln_buffer_create(NULL, 64, 0,
           &b), KILN_ERR_NULL_POINTER)`. An assertion that only expects
           KILN_OK does not count, with one exception:
  null-ok  It returns kiln_status and some assertion calls it with NULL as
           its only argument: `assert_kiln_ok(kiln_queue_destroy(NULL))`
           (destroying NULL is documented as a no-op returning KILN_OK).
  value    It returns something else (a pointer, size, bool, string), and
           some assertion calls it with a bad argument among its own
           arguments, the assertion checking the defined result:
           `assert_null(kiln_device_list_get(list, 99999))`,
           `assert_int_equal(kiln_buffer_get_size(NULL), 0)`.
  no-crash It returns void, and a statement calls it with a bad argument:
           `kiln_event_release(NULL);` (the test passing shows it did not
           crash).
  no-input It takes no parameters (`(void)`), so no input can be bad.

A bad argument is one of: NULL; SIZE_MAX, UINT32_MAX, UINT64_MAX, INT32_MAX,
INT_MAX; a negative integer literal; an integer literal of 1000 or more
(an out-of-range index or enum value); a high bit, `1u << 31` (a shift by
16 or more); or a cast of an integer literal to a kiln enum type,
`(kiln_dtype)99`.

--self-test runs the checker on a small made-up tree with known answers,
so that the check itself is shown able to fail.

With --verbose every function is listed with the rule and the file:line of
the first evidence. Exit status: 0 when every function is covered, 1
otherwise (the uncovered ones are listed), 2 on a usage or parse error.
"""

import os
import re
import sys

BAD_TOKEN = re.compile(
    r"(?<![\w.])(?:NULL|SIZE_MAX|UINT32_MAX|UINT64_MAX|INT32_MAX|INT_MAX)\b"
    r"|(?<![\w.)\]])-\s*\d+"
    r"|(?<![\w.])(?:\d{4,}|0[xX][0-9a-fA-F]{3,})[uUlL]*\b"
    r"|\b\d+[uUlL]*\s*<<\s*(?:1[6-9]|[2-9]\d)\b"
    r"|\(\s*kiln_\w+\s*\)\s*-?\s*(?:\d+|0[xX][0-9a-fA-F]+)")

DECL = re.compile(r"\bKILN_API\b(?P<ret>[^;(]*?)\b(?P<name>kiln_\w+)\s*\(",
                  re.S)


def strip_comments(text):
    """Remove /* */ and // comments, keeping newlines (for line numbers) and
    string literals intact."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c == '"' or c == "'":
            j = i + 1
            while j < n and text[j] != c:
                j += 2 if text[j] == "\\" else 1
            out.append(text[i:j + 1])
            i = j + 1
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append("\n" * text.count("\n", i, j))
            i = j
        elif text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
        else:
            out.append(c)
            i += 1
    return "".join(out)


def balanced(text, open_index):
    """Index just past the parenthesis matching text[open_index] == '('."""
    depth = 0
    i = open_index
    n = len(text)
    while i < n:
        c = text[i]
        if c == '"' or c == "'":
            j = i + 1
            while j < n and text[j] != c:
                j += 2 if text[j] == "\\" else 1
            i = j
        elif c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1
    return -1


def parse_declarations(include_dir):
    functions = {}
    for entry in sorted(os.listdir(include_dir)):
        if not entry.endswith(".h"):
            continue
        path = os.path.join(include_dir, entry)
        with open(path, encoding="utf-8") as f:
            text = strip_comments(f.read())
        for m in DECL.finditer(text):
            name = m.group("name")
            open_index = m.end() - 1
            close = balanced(text, open_index)
            if close < 0:
                raise ValueError("%s: unbalanced declaration of %s" % (path, name))
            params = " ".join(text[open_index + 1:close - 1].split())
            ret = " ".join(m.group("ret").split())
            functions[name] = {
                "header": entry,
                "returns_status": "kiln_status" in ret,
                "returns_void": ret in ("void",),
                "no_params": params in ("void", ""),
            }
    return functions


def calls_of(name, text):
    """Yield (start, args_text) for every call name(...) in text."""
    for m in re.finditer(r"(?<![\w.>])" + re.escape(name) + r"\s*\(", text):
        close = balanced(text, m.end() - 1)
        if close > 0:
            yield m.start(), text[m.end():close - 1]


def line_of(text, index):
    return text.count("\n", 0, index) + 1


def scan_tests(tests_dir):
    """(path, text, assertions): assertions are (start, full_text)."""
    sources = []
    for entry in sorted(os.listdir(tests_dir)):
        if not entry.endswith(".c"):
            continue
        path = os.path.join(tests_dir, entry)
        with open(path, encoding="utf-8") as f:
            text = strip_comments(f.read())
        assertions = []
        for m in re.finditer(r"\bassert_\w+\s*\(", text):
            close = balanced(text, m.end() - 1)
            if close > 0:
                assertions.append((m.start(), text[m.start():close]))
        sources.append((entry, text, assertions))
    return sources


def statements(text):
    """Top-level-ish statements: text split at ';' and braces."""
    start = 0
    for m in re.finditer(r"[;{}]", text):
        yield start, text[start:m.start() + 1]
        start = m.end()


def evidence(name, info, sources):
    if info["no_params"]:
        return "no-input", None
    for entry, text, assertions in sources:
        if info["returns_status"]:
            for start, body in assertions:
                if "KILN_ERR_" in body and any(calls_of(name, body)):
                    return "status", "%s:%d" % (entry, line_of(text, start))
            for start, body in assertions:
                if any(args.strip() == "NULL" for _, args in calls_of(name, body)):
                    return "null-ok", "%s:%d" % (entry, line_of(text, start))
        elif info["returns_void"]:
            for start, stmt in statements(text):
                for _, args in calls_of(name, stmt):
                    if BAD_TOKEN.search(args):
                        offset = start + len(stmt) - len(stmt.lstrip())
                        return "no-crash", "%s:%d" % (entry, line_of(text, offset))
        else:
            for start, body in assertions:
                for _, args in calls_of(name, body):
                    if BAD_TOKEN.search(args):
                        return "value", "%s:%d" % (entry, line_of(text, start))
    return None, None


SELF_TEST_HEADER = """
/* A made-up public header. KILN_API in a comment is ignored: KILN_API int x(); */
KILN_API kiln_status kiln_good(kiln_thing *t, size_t n);
KILN_API kiln_status kiln_only_ok(kiln_thing *t);
KILN_API kiln_status kiln_thing_destroy(kiln_thing *t);
KILN_API size_t kiln_good_count(const kiln_thing *t);
KILN_API size_t kiln_count_unchecked(const kiln_thing *t);
KILN_API const char *kiln_good_name(kiln_kind k);
KILN_API void kiln_good_release(kiln_thing *t);
KILN_API void kiln_release_unchecked(kiln_thing *t);
KILN_API const char *kiln_no_args(void);
KILN_API kiln_status
kiln_multi_line(kiln_thing *t,
                size_t n);
KILN_API kiln_status kiln_commented_out(kiln_thing *t);
"""

SELF_TEST_SOURCE = """
static void t(void **state) {
  assert_kiln_status(kiln_good(t,
                               SIZE_MAX), KILN_ERR_INVALID_SIZE);
  assert_kiln_ok(kiln_only_ok(NULL));
  assert_kiln_ok(kiln_only_ok(t));
  assert_kiln_ok(kiln_thing_destroy(NULL));
  assert_int_equal(kiln_good_count(NULL), 0);
  size_t n = kiln_count_unchecked(NULL);
  assert_null(kiln_good_name((kiln_kind)99));
  kiln_good_release(NULL);
  kiln_release_unchecked(t);
  kiln_status s = kiln_multi_line(t, 0);
  assert_int_equal(s, KILN_ERR_INVALID_SIZE);
  /* assert_kiln_status(kiln_commented_out(NULL), KILN_ERR_NULL_POINTER); */
  // assert_kiln_status(kiln_commented_out(NULL), KILN_ERR_NULL_POINTER);
  assert_kiln_ok(kiln_commented_out(t)); /* "KILN_ERR_X" in a comment */
}
"""


def self_test():
    """Check the rules on a made-up header and test file; 0 when every
    function gets the expected verdict (None: uncovered)."""
    import tempfile
    expected = {
        "kiln_good": "status",
        "kiln_only_ok": "null-ok",
        "kiln_thing_destroy": "null-ok",
        "kiln_good_count": "value",
        "kiln_count_unchecked": None,   # not inside an assertion
        "kiln_good_name": "value",
        "kiln_good_release": "no-crash",
        "kiln_release_unchecked": None,  # no bad argument
        "kiln_no_args": "no-input",
        "kiln_multi_line": None,  # status checked through a variable only
        "kiln_commented_out": None,  # the bad-input asserts are comments
    }
    with tempfile.TemporaryDirectory() as root:
        os.makedirs(os.path.join(root, "include", "kiln"))
        os.makedirs(os.path.join(root, "tests"))
        with open(os.path.join(root, "include", "kiln", "made_up.h"), "w") as f:
            f.write(SELF_TEST_HEADER)
        with open(os.path.join(root, "tests", "test_made_up.c"), "w") as f:
            f.write(SELF_TEST_SOURCE)
        functions = parse_declarations(os.path.join(root, "include", "kiln"))
        sources = scan_tests(os.path.join(root, "tests"))
    bad = 0
    if sorted(functions) != sorted(expected):
        print("self-test: parsed %s" % sorted(functions))
        bad += 1
    for name, want in sorted(expected.items()):
        if name not in functions:
            continue
        got, _ = evidence(name, functions[name], sources)
        if got != want:
            print("self-test: %s: got %s, want %s" % (name, got, want))
            bad += 1
    print("# self-test: %s" % ("FAILED" if bad else "ok"))
    return 1 if bad else 0


def main(argv):
    verbose = False
    args = []
    for a in argv[1:]:
        if a == "--self-test":
            return self_test()
        if a in ("-v", "--verbose"):
            verbose = True
        elif a.startswith("-"):
            print(__doc__, file=sys.stderr)
            return 2
        else:
            args.append(a)
    root = args[0] if args else os.path.dirname(
        os.path.dirname(os.path.abspath(__file__)))
    try:
        functions = parse_declarations(os.path.join(root, "include", "kiln"))
        sources = scan_tests(os.path.join(root, "tests"))
    except (OSError, ValueError) as e:
        print("check_bad_input_coverage: %s" % e, file=sys.stderr)
        return 2
    if not functions:
        print("check_bad_input_coverage: no KILN_API declarations found",
              file=sys.stderr)
        return 2
    missing = []
    for name in sorted(functions):
        info = functions[name]
        rule, where = evidence(name, info, sources)
        if rule is None:
            missing.append(name)
            kind = ("an assertion calling it and naming a KILN_ERR_ status"
                    if info["returns_status"] else
                    "a call with a bad argument (NULL, out of range)"
                    + ("" if info["returns_void"] else " inside an assertion"))
            print("MISSING  %-34s (%s) needs %s" % (name, info["header"], kind))
        elif verbose:
            print("ok       %-34s %-8s %s" % (name, rule, where or ""))
    covered = len(functions) - len(missing)
    print("# %d of %d public functions have a bad-input test" %
          (covered, len(functions)))
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
