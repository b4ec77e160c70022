"""Every public name has a docstring and a stub in kiln/__init__.pyi, and
every C op of kiln._kiln has a Python function."""

import ast
import os
import shutil
import subprocess

import pytest

import kiln


def stub_names():
    path = os.path.join(os.path.dirname(kiln.__file__), "__init__.pyi")
    tree = ast.parse(open(path).read())
    names = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names.update(t.id for t in targets if isinstance(t, ast.Name))
    return names


def test_all_names_documented_and_stubbed():
    stubs = stub_names()
    missing = [n for n in kiln.__all__ if n not in stubs]
    assert not missing, "not in __init__.pyi: %s" % missing
    for n in kiln.__all__:
        obj = getattr(kiln, n)
        if isinstance(obj, (str, int)):
            continue
        assert obj.__doc__ and obj.__doc__.strip(), "%s has no docstring" % n
        if isinstance(obj, type):
            for attr, val in vars(obj).items():
                if not attr.startswith("_") and callable(val) or isinstance(val, property):
                    if not attr.startswith("_"):
                        assert getattr(val, "__doc__", None), "%s.%s has no docstring" % (n, attr)


def test_every_c_op_is_bound():
    c_ops = {n for n, v in vars(kiln._kiln).items() if callable(v) and v.__doc__
             and v.__doc__.startswith("kiln_")}
    wrapped = {"copy": "copy", "unary": "unary", "binary": "binary", "binary_scalar": "binary",
               "reduce_rows": "reduce", "reduce_cols": "reduce", "scan": "cumsum",
               "softmax_rows": "softmax", "layernorm_rows": "layernorm",
               "softmax_rows_backward": "softmax_backward",
               "layernorm_rows_backward": "layernorm_backward",
               "attention_forward": "attention"}
    for op in c_ops:
        assert hasattr(kiln, wrapped.get(op, op)), op
    assert len(c_ops) >= 48


def test_extension_exports_only_its_init():
    """The extension's C files share their names hidden: the shared object
    exports PyInit__kiln alone (nm -D; skipped without binutils)."""
    if not shutil.which("nm"):
        pytest.skip("no nm")
    out = subprocess.run(["nm", "-D", "--defined-only", kiln._kiln.__file__],
                         capture_output=True, text=True, check=True).stdout
    names = {line.split()[-1] for line in out.splitlines() if line.split()[1:2] != ["A"]}
    assert names == {"PyInit__kiln"}, sorted(names)
