"""The op library against NumPy in float64, with the C tests' tolerances
(tests/test_op_*.c)."""

import math

import numpy as np
import pytest

import kiln
from util import FLOATS, U, close, depth, storage_tol, stored

SIZES = [1, 7, 1000, 4099]


def gelu(x):
    return 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))


UNARY_REF = {
    "neg": (np.negative, 0), "abs": (np.abs, 0), "exp": (np.exp, 3), "log": (np.log, 3),
    "sqrt": (np.sqrt, 3), "relu": (lambda x: np.maximum(x, 0), 0),
    "sigmoid": (lambda x: 1 / (1 + np.exp(-x)), 8), "tanh": (np.tanh, 5), "gelu": (gelu, None),
}


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("op", sorted(UNARY_REF))
def test_unary(dev, rng, dtype, op):
    n = 1000
    x = rng.uniform(-4, 4, n)
    if op in ("log", "sqrt"):
        x = np.abs(x) + 0.01
    x = stored(x, dtype)
    a = kiln.asarray(x, dtype, device=dev)
    got = getattr(kiln, op)(a).numpy()
    ref, k = UNARY_REF[op]
    r = ref(x)
    t = storage_tol(dtype, r)
    if k is None:  # gelu
        t = t + 16 * U * (np.abs(r) + np.abs(x))
    else:
        t = t + k * 2 * U * np.abs(r)
    close(got, r, t, "%s %s" % (op, dtype))
    # in place, through kiln.unary
    kiln.unary(op, a, a)
    close(a.numpy(), r, t, "%s in place" % op)


BIN = {"add": (np.add, 0.5), "sub": (np.subtract, 0.5), "mul": (np.multiply, 0.5),
       "div": (np.divide, 2.5), "max": (np.fmax, 0), "min": (np.fmin, 0)}


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("op", sorted(BIN))
def test_binary(dev, rng, dtype, op):
    n = 1001
    a = stored(rng.uniform(-10, 10, n), dtype)
    b = stored(rng.uniform(0.5, 10, n) * rng.choice([-1, 1], n), dtype)
    ka, kb = kiln.asarray(a, dtype, device=dev), kiln.asarray(b, dtype, device=dev)
    ref, k = BIN[op]
    r = ref(a, b)
    t = storage_tol(dtype, r) + k * 2 * U * np.abs(r)
    close(kiln.binary(op, ka, kb).numpy(), r, t, "%s %s" % (op, dtype))
    s = 3.25
    r = ref(a, s)
    t = storage_tol(dtype, r) + k * 2 * U * np.abs(r)
    close(kiln.binary(op, ka, s).numpy(), r, t, "%s scalar" % op)
    named = {"add": kiln.add, "sub": kiln.subtract, "mul": kiln.multiply,
             "div": kiln.divide, "max": kiln.maximum, "min": kiln.minimum}[op]
    close(named(ka, kb).numpy(), ref(a, b),
          storage_tol(dtype, ref(a, b)) + k * 2 * U * np.abs(ref(a, b)))


@pytest.mark.parametrize("n", SIZES)
def test_axpy_scale(dev, rng, n):
    x = rng.standard_normal(n).astype(np.float32)
    y = rng.standard_normal(n).astype(np.float32)
    kx, ky = kiln.asarray(x, device=dev), kiln.asarray(y, device=dev)
    assert kiln.axpy(2.5, kx, ky) is ky
    r = 2.5 * x.astype(np.float64) + y
    close(ky.numpy(), r, U * np.abs(r) + 1e-30, "axpy")  # one fma rounding
    kiln.scale(ky, -0.5)
    close(ky.numpy(), -0.5 * r, U * np.abs(r) + 2 * U * np.abs(0.5 * r) + 1e-30, "scale")


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16", "int32", "uint32"])
def test_fill(dev, dtype):
    a = kiln.empty(37, dtype, device=dev)
    v = 7 if dtype in ("int32", "uint32") else -1.25
    kiln.fill(a, v)
    np.testing.assert_array_equal(a.numpy(), [v] * 37)


@pytest.mark.parametrize("src", FLOATS)
@pytest.mark.parametrize("dst", FLOATS)
def test_cast(dev, rng, src, dst):
    x = stored(rng.standard_normal(999) * 1000, src)
    got = kiln.cast(kiln.asarray(x, src, device=dev), dst).numpy()
    np.testing.assert_array_equal(got.astype(np.float64), stored(x, dst))


def _ref_reduce(op, x):
    n = x.size
    d, sabs = depth(n), np.abs(x).sum()
    if op == "sum":
        return x.sum(), d * U * sabs
    if op == "mean":
        m = x.sum() / n
        return m, d * U * sabs / n + U * abs(m)
    if op == "nrm2":
        v = math.sqrt((x * x).sum())
        return v, (d / 2 + 3) * U * v
    if op == "min":
        return x.min(), 0.0
    if op == "max":
        return x.max(), 0.0
    return float(np.argmax(x)), 0.0


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("op", ["sum", "mean", "nrm2", "min", "max", "argmax"])
@pytest.mark.parametrize("n", SIZES)
def test_reduce(dev, rng, dtype, op, n):
    x = stored(rng.standard_normal(n), dtype)
    a = kiln.asarray(x, dtype, device=dev)
    got = kiln.reduce(op, a)
    assert got.shape == (1,) and got.dtype == ("uint32" if op == "argmax" else "float32")
    want, tol = _ref_reduce(op, x)
    close(got.numpy()[0], want, tol, "%s n=%d" % (op, n))


@pytest.mark.parametrize("shape", [(1, 1), (5, 7), (33, 129), (300, 3)], ids=str)
@pytest.mark.parametrize("op", ["sum", "mean", "max", "argmax"])
def test_reduce_axes(dev, rng, shape, op):
    x = stored(rng.standard_normal(shape), "float32")
    a = kiln.asarray(x, device=dev)
    for axis in (0, 1):
        got = kiln.reduce(op, a, axis=axis).numpy()
        for i in range(shape[1 - axis]):
            v = x[:, i] if axis == 0 else x[i]
            want, tol = _ref_reduce(op, v)
            close(got[i], want, tol, "%s axis %d [%d]" % (op, axis, i))
    named = {"sum": kiln.sum, "mean": kiln.mean, "max": kiln.amax, "argmax": kiln.argmax}[op]
    assert named(a, axis=1).shape == (shape[0],)
    with pytest.raises(ValueError):
        kiln.reduce(op, a, axis=2)
    with pytest.raises(ValueError):
        kiln.reduce(op, a.reshape(-1), axis=0)


def test_min_nrm2_dot(dev, rng):
    x = rng.standard_normal(513)
    y = rng.standard_normal(513)
    kx, ky = kiln.asarray(x, device=dev), kiln.asarray(y, device=dev)
    x, y = stored(x, "float32"), stored(y, "float32")
    assert kiln.amin(kx).numpy()[0] == x.min()
    close(kiln.nrm2(kx).numpy()[0], *_ref_reduce("nrm2", x))
    r = (x * y).sum()
    close(kiln.dot(kx, ky).numpy()[0], r, (depth(513) + 1) * U * np.abs(x * y).sum())


@pytest.mark.parametrize("dtype", ["float32", "int32", "uint32"])
@pytest.mark.parametrize("n", [1, 100, 5000])
def test_cumsum(dev, rng, dtype, n):
    if dtype == "float32":
        x = stored(rng.standard_normal(n), dtype)
    else:
        x = rng.integers(0, 1000, n).astype(np.int32 if dtype == "int32" else np.uint32)
    a = kiln.asarray(x, dtype, device=dev)
    inc = kiln.cumsum(a).numpy()
    exc = kiln.cumsum(a, exclusive=True).numpy()
    ref = np.cumsum(x.astype(np.float64))
    if dtype == "float32":
        tol = n * U * np.cumsum(np.abs(x)) + 1e-30
        close(inc, ref, tol, "inclusive")
        close(exc[1:], ref[:-1], tol[:-1], "exclusive")
        assert exc[0] == 0
    else:
        np.testing.assert_array_equal(inc, ref)
        np.testing.assert_array_equal(exc, np.concatenate([[0], ref[:-1]]))


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("shape", [(1, 1), (3, 10), (64, 1000)], ids=str)
def test_softmax(dev, rng, dtype, shape):
    x = stored(rng.standard_normal(shape) * 5, dtype)
    got = kiln.softmax(kiln.asarray(x, dtype, device=dev)).numpy()
    m = x.max(axis=1, keepdims=True)
    e = np.exp(x - m)
    want = e / e.sum(axis=1, keepdims=True)
    dmax = np.abs(x - m).max(axis=1, keepdims=True)
    tol = (dmax + shape[1] + 20) * U * want + storage_tol(dtype, want)
    close(got, want, tol, "softmax")
    v = kiln.softmax(kiln.asarray(x[0], dtype, device=dev)).numpy()  # a vector: one row
    close(v, want[0], tol[0])


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("affine", [False, True])
def test_layernorm(dev, rng, dtype, affine):
    rows, cols, eps = 9, 300, 1e-5
    x = stored(rng.standard_normal((rows, cols)) * 3 + 1, dtype)
    g = stored(rng.standard_normal(cols), dtype) if affine else None
    b = stored(rng.standard_normal(cols), dtype) if affine else None
    kg = kiln.asarray(g, dtype, device=dev) if affine else None
    kb = kiln.asarray(b, dtype, device=dev) if affine else None
    got = kiln.layernorm(kiln.asarray(x, dtype, device=dev), kg, kb, eps).numpy()
    mean = x.mean(axis=1, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=1, keepdims=True)
    rstd = 1 / np.sqrt(var + np.float32(eps))
    gv = g if affine else 1.0
    core = (x - mean) * rstd * gv
    want = core + (b if affine else 0.0)
    delta = U * np.abs(x).sum(axis=1, keepdims=True)
    tol = (rstd * np.abs(gv) * delta + (cols / 2 + 10) * U * np.abs(core) + U * np.abs(want)
           + storage_tol(dtype, want))
    close(got, want, tol, "layernorm")


@pytest.mark.parametrize("dtype", ["float32", "float16", "int32"])
def test_transpose(dev, rng, dtype):
    x = (rng.standard_normal((37, 53)) * 100).astype(np.float32)
    if dtype == "int32":
        x = x.astype(np.int32)
    a = kiln.asarray(x, dtype, device=dev)
    want = a.numpy().T
    np.testing.assert_array_equal(kiln.transpose(a).numpy(), want)
    np.testing.assert_array_equal(kiln.transpose(a[:, 3:20]).numpy(), a.numpy()[:, 3:20].T)


def gemm_tol(a, b, k, alpha=1.0, beta=0.0, c0=None, bias=None):
    bound = abs(alpha) * (np.abs(a) @ np.abs(b))
    if beta:
        bound = bound + abs(beta) * np.abs(c0)
    if bias is not None:
        bound = bound + np.abs(bias)
    return 2.0 * (k + 4) * U * bound + 1e-30


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("mnk", [(1, 1, 1), (5, 7, 3), (64, 65, 66), (1, 1024, 300),
                                 (200, 9, 130)], ids=str)
def test_matmul(dev, rng, dtype, mnk):
    m, n, k = mnk
    a = stored(rng.standard_normal((m, k)), dtype)
    b = stored(rng.standard_normal((k, n)), dtype)
    ka, kb = kiln.asarray(a, dtype, device=dev), kiln.asarray(b, dtype, device=dev)
    want = a @ b
    close(kiln.matmul(ka, kb).numpy(), want, gemm_tol(a, b, k), "matmul")
    # transposed views (column-major operands) and gemm's alpha/beta
    kat = kiln.asarray(np.ascontiguousarray(a.T), dtype, device=dev)
    kbt = kiln.asarray(np.ascontiguousarray(b.T), dtype, device=dev)
    c0 = rng.standard_normal((m, n)).astype(np.float32)
    kc = kiln.asarray(c0, device=dev)
    kiln.gemm(kat.T, kbt.T, kc, alpha=0.5, beta=2.0)
    want = 0.5 * a @ b + 2.0 * c0
    close(kc.numpy(), want, gemm_tol(a, b, k, 0.5, 2.0, c0), "gemm with views")


@pytest.mark.parametrize("act", [None, "relu", "gelu"])
def test_matmul_epilogue(dev, rng, act):
    m, n, k = 33, 17, 40
    a = stored(rng.standard_normal((m, k)), "float32")
    b = stored(rng.standard_normal((k, n)), "float32")
    bias = stored(rng.standard_normal(n), "float32")
    got = kiln.matmul(kiln.asarray(a, device=dev), kiln.asarray(b, device=dev),
                      bias=kiln.asarray(bias, device=dev), activation=act).numpy()
    want = a @ b + bias
    tol = gemm_tol(a, b, k, bias=bias)
    if act == "relu":
        want = np.maximum(want, 0)
    elif act == "gelu":
        tol = 1.13 * tol + 16 * U * (np.abs(gelu(want)) + 1)
        want = gelu(want)
    close(got, want, tol, "epilogue %s" % act)
    with pytest.raises(ValueError, match="activation"):
        kiln.matmul(kiln.asarray(a, device=dev), kiln.asarray(b, device=dev), activation="elu")


def test_matmul_batched(dev, rng):
    batch, m, n, k = 3, 4, 5, 6
    a = stored(rng.standard_normal((batch, m, k)), "float32")
    b = stored(rng.standard_normal((k, n)), "float32")
    got = kiln.matmul(kiln.asarray(a, device=dev), kiln.asarray(b, device=dev))
    assert got.shape == (batch, m, n)
    close(got.numpy(), a @ b, gemm_tol(a.reshape(-1, k), b, k).reshape(batch, m, n), "batched")
