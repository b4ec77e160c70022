"""Host references and tolerances, as tests/op_test_util.h derives them."""

import numpy as np

import kiln

U = 2.0 ** -24  # unit roundoff of f32
EPS = {"float32": 2.0 ** -24, "float16": 2.0 ** -11, "bfloat16": 2.0 ** -8}
TINY = {"float32": 2.0 ** -126, "float16": 2.0 ** -14, "bfloat16": 2.0 ** -126}
FLT_MIN = 2.0 ** -126
FLOATS = ["float32", "float16", "bfloat16"]


def storage_tol(dtype, r):
    """util_storage_tol: the store's rounding in f16/bf16, FLT_MIN in f32."""
    t = FLT_MIN + np.zeros_like(r, dtype=np.float64)
    if dtype != "float32":
        t = t + 2 * EPS[dtype] * np.abs(r) + TINY[dtype] * EPS[dtype]
    return t


def stored(x, dtype):
    """x as float64 after rounding to dtype (what the device reads), with
    the host conversions that round as the device does."""
    x = np.ascontiguousarray(x, np.float32)
    if dtype == "float16":
        return x.astype(np.float16).astype(np.float64)
    if dtype == "bfloat16":
        bits = np.empty(x.shape, np.uint16)
        kiln._kiln.convert(x, bits, 0)
        out = np.empty(x.shape, np.float32)
        kiln._kiln.convert(bits, out, 2)
        return out.astype(np.float64)
    return x.astype(np.float64)


def close(got, want, tol, what=""):
    got = np.asarray(got, np.float64)
    want = np.asarray(want, np.float64)
    bad = ~((np.abs(got - want) <= tol) | (np.isnan(got) & np.isnan(want)))
    if bad.any():
        i = np.argwhere(bad)[0]
        i = tuple(i) if got.ndim else ()
        t = tol[i] if np.ndim(tol) else tol
        raise AssertionError("%s at %s: got %.9g, want %.9g (tolerance %.3g); %d bad"
                             % (what, i, got[i], want[i], t, int(bad.sum())))


def depth(n):
    return n / 16 + 8192
