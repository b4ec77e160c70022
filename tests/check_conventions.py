#!/usr/bin/env python3
"""Check the public headers against the API conventions (docs/conventions.md).

Reads every header of include/kiln/ (kiln_mpi.h and kiln_cl.h included)
with comments, preprocessor lines and KILN_BEGIN_DECLS/KILN_API removed, and
fails, naming the header, the symbol and the rule, when:

  prefix    a function, a type (typedef, struct or enum tag, function
            pointer) or an enum value lacks the kiln_ / KILN_ prefix, or a
            macro the header defines lacks KILN_ (except a default given
            under `#ifndef` of its own name, which configures another
            library's headers: CL_TARGET_OPENCL_VERSION in kiln_cl.h);
  params    a function takes more than 12 parameters;
  events    a function that enqueues work does not end with
            `size_t num_wait, kiln_event *const *wait_list,
            kiln_event **out_event`. A function enqueues work when it takes
            a handle that carries a queue: a non-const `kiln_queue *` or a
            `kiln_staging *`. Exempt are the calls that only make, end or
            drain such a handle, or are the documented blocking helpers,
            told by the last word of their name: _create, _destroy, _begin
            (a sequence starts recording: nothing is enqueued), _flush,
            _finish, _sync (a `_sync` helper wraps one asynchronous call
            and takes no events). The non-blocking MPI collectives of
            kiln_mpi.h (kiln_mpi_i*) end with `kiln_mpi_request **out` in the
            out_event place: their completion is a request advanced by
            kiln_mpi_test/wait, not an OpenCL event. Besides, wherever
            num_wait or wait_list appear they must be the first two of those
            three last parameters, so no call takes a wait list without the
            out event or in another place;
  getters   a getter is spelled other than kiln_<object>_get_<property>:
            (a) a function whose name ends in _get is the element of a list
                and must be exactly kiln_<list>_get(const kiln_<list> *,
                size_t index);
            (b) a function that returns a value (neither kiln_status nor
                void) and whose first parameter is `const kiln_<object> *`
                reads that object and must be named kiln_<object>_get,
                kiln_<object>_get_<property>, or, for a yes/no property,
                kiln_<object>_is_/has_/uses_<property>;
  enums     two enums define values for one concept: after removing each
            enum's common value prefix (KILN_REDUCE_ of KILN_REDUCE_SUM),
            two enums share at least two value names and at least half of
            the smaller enum's (KILN_MPI_SUM, _MEAN, _MAX, _MIN beside
            KILN_REDUCE_SUM, ...). Two values in one enum named alike in
            two enums for different things (a binary MAX and a reduction
            MAX) stay below the half. An enum that names a subset of
            another's values by that enum's own constants (KILN_ACT_RELU =
            KILN_UNARY_RELU) is a view of it, same names, same numbers, and
            passes;
  headers   a header is named other than kiln.h or kiln_<room>.h.

Usage: check_conventions.py SOURCE_ROOT
       check_conventions.py --self-test   (proves each rule fails on a
                                           hand-made violation)
"""

import os
import re
import sys
import tempfile

MAX_PARAMS = 12
TRIO = ("size_t num_wait", "kiln_event *const *wait_list",
        "kiln_event **out_event")
REQUEST_OUT = "kiln_mpi_request **out"
EXEMPT_SUFFIXES = ("_create", "_destroy", "_begin", "_flush", "_finish",
                   "_sync")
PREDICATES = ("is", "has", "uses")


def strip_source(text):
    """Remove comments and preprocessor lines; return (code, macros)."""
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    text = re.sub(r"//[^\n]*", " ", text)
    text = re.sub(r"\\\n", " ", text)
    macros, code, guarded = [], [], None
    for line in text.split("\n"):
        s = line.strip()
        if s.startswith("#"):
            m = re.match(r"#\s*define\s+(\w+)", s)
            # `#ifndef X` + `#define X`: a default for a configuration macro
            # (the include guards are KILN_ anyway; CL_TARGET_OPENCL_VERSION
            # configures the Khronos headers), not a symbol of kiln's.
            if m and m.group(1) != guarded:
                macros.append(m.group(1))
            g = re.match(r"#\s*ifndef\s+(\w+)", s)
            guarded = g.group(1) if g else None
            continue
        code.append(line)
    code = "\n".join(code)
    code = re.sub(r"\b(KILN_API|KILN_BEGIN_DECLS|KILN_END_DECLS)\b", " ", code)
    code = re.sub(r"__attribute__\s*\(\(.*?\)\)", " ", code)
    return code, macros


def split_top(text, sep):
    """Split text at sep outside (), [] and {}."""
    parts, depth, cur = [], 0, []
    for c in text:
        if c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
        if c == sep and depth == 0:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(c)
    parts.append("".join(cur))
    return parts


def norm(s):
    s = re.sub(r"\s+", " ", s.strip())
    s = re.sub(r"\s*\*\s*", " *", s)  # "kiln_event *const *wait_list"
    s = re.sub(r"\*\s+(?=[\w*])", "*", s)
    return s.replace("* const", "*const").strip()


def param_name(p):
    m = re.search(r"(\w+)\s*(\[[^\]]*\])?$", p)
    return m.group(1) if m else ""


class Header:
    def __init__(self, name, text):
        self.name = name
        self.functions = []   # (name, return type, [params])
        self.types = []       # type names (typedefs, tags)
        self.enums = []       # (enum name or None, [value names], {value: init})
        code, self.macros = strip_source(text)
        for decl in split_top(code, ";"):
            self.parse(re.sub(r"\s+", " ", decl).strip())

    def parse(self, d):
        if not d:
            return
        # Enums (typedef'd or anonymous), with their values.
        m = re.match(r"(typedef )?enum (\w+ )?\{(.*)\}\s*(\w*)$", d, re.S)
        if m:
            items = [v for v in split_top(m.group(3), ",") if v.strip()]
            values = [re.match(r"\s*(\w+)", v).group(1) for v in items]
            inits = {}
            for v in items:
                mi = re.match(r"\s*(\w+)\s*=\s*(\w+)\s*$", v)
                if mi:
                    inits[mi.group(1)] = mi.group(2)
            name = (m.group(4) or (m.group(2) or "").strip()) or None
            for t in {m.group(2) and m.group(2).strip(), m.group(4)} - {None, ""}:
                self.types.append(t)
            self.enums.append((name, values, inits))
            return
        m = re.match(r"typedef (struct|union) (\w+ )?(\{.*\} )?(\w+)$", d, re.S)
        if m:
            for t in {m.group(2) and m.group(2).strip(), m.group(4)} - {None, ""}:
                self.types.append(t)
            return
        m = re.match(r"typedef .*?\(\s*\*\s*(\w+)\s*\)\s*\(", d)
        if m:
            self.types.append(m.group(1))
            return
        m = re.match(r"typedef .*?(\w+)$", d)
        if m:
            self.types.append(m.group(1))
            return
        m = re.match(r"(struct|union) (\w+)\s*(\{.*\})?$", d, re.S)
        if m:
            self.types.append(m.group(2))
            return
        m = re.match(r"(.*?)\b(\w+)\s*\((.*)\)$", d, re.S)
        if m and "=" not in m.group(1):
            params = [norm(p) for p in split_top(m.group(3), ",")]
            if params == ["void"] or params == [""]:
                params = []
            self.functions.append((m.group(2), norm(m.group(1)), params))
            return
        raise SystemExit("%s: cannot parse declaration: %s" % (self.name, d))


def enum_stems(values):
    """Value names without the enum's common '_'-bounded prefix."""
    return {v[len(prefix_of(values)):] for v in values}


def check_headers(headers):
    """headers: list of Header. Returns a list of violation lines."""
    errors = []

    def err(h, sym, rule, why):
        errors.append("%s: %s: [%s] %s" % (h.name, sym, rule, why))

    for h in headers:
        base = os.path.basename(h.name)
        if base.endswith(".h.in"):
            base = base[:-3]
        if base != "kiln.h" and not re.fullmatch(r"kiln_\w+\.h", base):
            err(h, base, "headers", "a public header is kiln.h or kiln_<room>.h")
        for macro in h.macros:
            if not macro.startswith("KILN_"):
                err(h, macro, "prefix", "macros start with KILN_")
        for t in h.types:
            if not t.startswith("kiln_"):
                err(h, t, "prefix", "types start with kiln_")
        for name, values, _ in h.enums:
            for v in values:
                if not v.startswith("KILN_"):
                    err(h, v, "prefix", "enum values start with KILN_")
        for name, ret, params in h.functions:
            if not name.startswith("kiln_"):
                err(h, name, "prefix", "functions start with kiln_")
            if len(params) > MAX_PARAMS:
                err(h, name, "params", "%d parameters; at most %d (take "
                    "descriptor structs)" % (len(params), MAX_PARAMS))
            check_events(h, name, params, err)
            check_getter(h, name, ret, params, err)

    enums = [(h, n, v, ini) for h in headers for n, v, ini in h.enums
             if len(v) > 0]
    for i in range(len(enums)):
        for j in range(i + 1, len(enums)):
            (h1, n1, v1, i1), (h2, n2, v2, i2) = enums[i], enums[j]
            shared = enum_stems(v1) & enum_stems(v2)
            if (len(shared) >= 2 and 2 * len(shared) >= min(len(v1), len(v2))
                    and not is_view(v1, i1, v2, i2, shared)):
                err(h2, n2 or v2[0], "enums",
                    "defines values for the concept of %s (%s): %s; use that "
                    "enum" % (n1 or v1[0], h1.name, ", ".join(sorted(shared))))
    return errors


def is_view(v1, i1, v2, i2, shared):
    """True when one enum defines each shared value as the other's constant
    of the same name (KILN_ACT_RELU = KILN_UNARY_RELU): one concept, one
    set of numbers, seen through a narrower enum."""
    def by_stem(values):
        return {v[len(prefix_of(values)):]: v for v in values}
    s1, s2 = by_stem(v1), by_stem(v2)
    return (all(i1.get(s1[s]) == s2[s] for s in shared) or
            all(i2.get(s2[s]) == s1[s] for s in shared))


def prefix_of(values):
    if len(values) == 1:
        return values[0][:values[0].rfind("_") + 1]
    prefix = os.path.commonprefix(values)
    return prefix[:prefix.rfind("_") + 1]


def check_events(h, name, params, err):
    enqueues = any(re.fullmatch(r"kiln_(queue|staging) \*\w+", p)
                   for p in params)
    if name.endswith(EXEMPT_SUFFIXES):
        enqueues = False
    names = [param_name(p) for p in params]
    takes_waits = "num_wait" in names or "wait_list" in names
    if not (enqueues or takes_waits):
        return
    tail = tuple(params[-3:])
    request = (os.path.basename(h.name) == "kiln_mpi.h"
               and name.startswith("kiln_mpi_i")
               and tail == TRIO[:2] + (REQUEST_OUT,))
    if tail != TRIO and not request:
        why = ("enqueues work" if enqueues else "takes a wait list")
        err(h, name, "events", "%s but does not end with `%s`" %
            (why, ", ".join(TRIO)))


def check_getter(h, name, ret, params, err):
    if name.endswith("_get"):
        m = re.fullmatch(r"const kiln_(\w+) \*\w+", params[0]) if params else None
        if (not m or name != "kiln_%s_get" % m.group(1) or len(params) != 2
                or not params[1].startswith("size_t ")):
            err(h, name, "getters", "a name ending in _get is the element of "
                "a list: kiln_<list>_get(const kiln_<list> *, size_t index); "
                "a property is kiln_<object>_get_<property>")
        return
    if ret in ("kiln_status", "void") or not params:
        return
    m = re.fullmatch(r"const kiln_(\w+) \*\w+", params[0])
    if not m:
        return
    obj = m.group(1)
    ok = re.fullmatch(r"kiln_%s_(get(_\w+)?|(%s)_\w+)" %
                      (re.escape(obj), "|".join(PREDICATES)), name)
    if not ok:
        err(h, name, "getters", "reads a kiln_%s and returns a value: name it "
            "kiln_%s_get_<property> (or kiln_%s_is_/has_/uses_<property>)"
            % (obj, obj, obj))


def load(root):
    inc = os.path.join(root, "include", "kiln")
    headers = []
    for f in sorted(os.listdir(inc)):
        if f.endswith(".h") or f.endswith(".h.in"):
            with open(os.path.join(inc, f), encoding="utf-8") as fh:
                headers.append(Header(os.path.join("include/kiln", f),
                                      fh.read()))
    return headers


# Each case: (rule, header name, text) that must be reported, or None for a
# header that must pass.
SELF_TESTS = [
    ("params", "kiln_x.h", "KILN_API kiln_status kiln_x_many(int a, int b, "
     "int c, int d, int e, int f, int g, int h, int i, int j, int k, int l, "
     "int m);"),
    ("prefix", "kiln_x.h", "KILN_API kiln_status x_run(kiln_queue *q);"),
    ("prefix", "kiln_x.h", "typedef struct thing thing;"),
    ("prefix", "kiln_x.h", "typedef enum kiln_e { KILN_E_A, E_B } kiln_e;"),
    ("prefix", "kiln_x.h", "#define MAX_THINGS 4\n"),
    ("prefix", "kiln_x.h", "#ifndef OTHER\n#define MAX_THINGS 4\n#endif\n"),
    (None, "kiln_cl.h", "#ifndef CL_TARGET_OPENCL_VERSION\n"
     "#define CL_TARGET_OPENCL_VERSION 300\n#endif\n"),
    ("events", "kiln_x.h", "KILN_API kiln_status kiln_x_run(kiln_queue *q, "
     "size_t n, size_t num_wait, kiln_event *const *wait_list);"),
    ("events", "kiln_x.h", "KILN_API kiln_status kiln_x_run(kiln_queue *q, "
     "size_t num_wait, kiln_event *const *wait_list, kiln_event **out_event, "
     "unsigned flags);"),
    ("events", "kiln_x.h", "KILN_API kiln_status kiln_x_copy(kiln_staging *s,"
     " const void *src);"),
    ("events", "kiln_x.h", "KILN_API kiln_status kiln_x_release_after("
     "kiln_pool *p, size_t num_wait, kiln_event *const *wait_list);"),
    ("events", "kiln_ops.h", "KILN_API kiln_status kiln_iunary(kiln_queue *q,"
     " size_t num_wait, kiln_event *const *wait_list, "
     "kiln_mpi_request **out);"),
    ("getters", "kiln_x.h", "KILN_API kiln_status kiln_pool_stats_get("
     "kiln_pool *pool, kiln_pool_stats *out);"),
    ("getters", "kiln_x.h", "KILN_API size_t kiln_buffer_size("
     "const kiln_buffer *buffer);"),
    ("getters", "kiln_x.h", "KILN_API int kiln_mpi_rank(const kiln_mpi *m);"),
    ("enums", "kiln_x.h", "typedef enum kiln_reduce_op { KILN_REDUCE_SUM, "
     "KILN_REDUCE_MIN, KILN_REDUCE_MAX, KILN_REDUCE_MEAN } kiln_reduce_op;\n"
     "typedef enum kiln_mpi_op { KILN_MPI_SUM, KILN_MPI_MEAN, KILN_MPI_MAX, "
     "KILN_MPI_MIN } kiln_mpi_op;"),
    ("headers", "ops.h", "KILN_API kiln_status kiln_x(void);"),
    ("enums", "kiln_x.h", "typedef enum kiln_unary_op { KILN_UNARY_NEG = 0, "
     "KILN_UNARY_RELU = 5, KILN_UNARY_GELU = 6 } kiln_unary_op;\n"
     "typedef enum kiln_activation { KILN_ACT_NONE = 0, KILN_ACT_RELU = 1, "
     "KILN_ACT_GELU = 2 } kiln_activation;"),
    (None, "kiln_x.h", "typedef enum kiln_unary_op { KILN_UNARY_NEG = 0, "
     "KILN_UNARY_RELU = 5, KILN_UNARY_GELU = 6 } kiln_unary_op;\n"
     "typedef enum kiln_activation { KILN_ACT_NONE = 0, KILN_ACT_RELU = "
     "KILN_UNARY_RELU, KILN_ACT_GELU = KILN_UNARY_GELU } kiln_activation;"),
    (None, "kiln_x.h", "typedef enum kiln_reduce_op { KILN_REDUCE_SUM, "
     "KILN_REDUCE_MIN, KILN_REDUCE_MAX, KILN_REDUCE_MEAN, KILN_REDUCE_NRM2 } "
     "kiln_reduce_op;\ntypedef enum kiln_binary_op { KILN_BINARY_ADD, "
     "KILN_BINARY_SUB, KILN_BINARY_MUL, KILN_BINARY_DIV, KILN_BINARY_MAX, "
     "KILN_BINARY_MIN } kiln_binary_op;\n"
     "KILN_API kiln_status kiln_x_run(kiln_queue *queue, const kiln_range *x,"
     " float alpha, size_t num_wait, kiln_event *const *wait_list, "
     "kiln_event **out_event);\n"
     "KILN_API kiln_status kiln_x_write_sync(kiln_queue *queue, "
     "const void *src, const kiln_range *dst);\n"
     "KILN_API kiln_status kiln_x_flush(kiln_queue *queue);\n"
     "KILN_API const kiln_device *kiln_device_list_get("
     "const kiln_device_list *list, size_t index);\n"
     "KILN_API size_t kiln_buffer_get_size(const kiln_buffer *buffer);\n"
     "KILN_API bool kiln_sequence_uses_command_buffer("
     "const kiln_sequence *seq);\n"),
    (None, "kiln_mpi.h", "KILN_API kiln_status kiln_mpi_iallreduce("
     "kiln_mpi *mpi, kiln_queue *queue, const kiln_range *data, "
     "kiln_reduce_op op, size_t num_wait, kiln_event *const *wait_list, "
     "kiln_mpi_request **out);"),
]


def self_test():
    failed = 0
    for rule, name, text in SELF_TESTS:
        errors = check_headers([Header(name, text)])
        found = [e for e in errors if rule and "[%s]" % rule in e]
        if (rule is None and errors) or (rule is not None and not found):
            failed += 1
            print("self-test FAILED: rule %s on %s:\n  %s\n  reported: %s"
                  % (rule, name, text, errors or "nothing"))
    # And on a tree: a header file that breaks a rule fails the whole check.
    with tempfile.TemporaryDirectory() as root:
        os.makedirs(os.path.join(root, "include", "kiln"))
        with open(os.path.join(root, "include", "kiln", "kiln_x.h"), "w") as f:
            f.write(SELF_TESTS[0][2])
        if main([root]) == 0:
            failed += 1
            print("self-test FAILED: a tree with a violation passed")
    print("self-test: %d case(s), %d failed" % (len(SELF_TESTS) + 1, failed))
    return 1 if failed else 0


def main(argv):
    if argv == ["--self-test"]:
        return self_test()
    if len(argv) != 1:
        print(__doc__.split("\n\n")[-1].strip(), file=sys.stderr)
        return 2
    headers = load(argv[0])
    errors = check_headers(headers)
    for e in errors:
        print(e)
    nfun = sum(len(h.functions) for h in headers)
    print("conventions: %d headers, %d functions, %d violation(s)"
          % (len(headers), nfun, len(errors)))
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
