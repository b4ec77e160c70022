"""The training ops (kiln_ops_train.h) against NumPy float64."""

import numpy as np
import pytest

import kiln
from util import FLOATS, U, close, depth, storage_tol, stored


def asf(x, dev, dtype="float32"):
    return kiln.asarray(x, dtype, device=dev)


@pytest.mark.parametrize("axis", ["row", "col"])
@pytest.mark.parametrize("op", ["add", "mul", "sub"])
def test_binary_broadcast(dev, rng, axis, op):
    a = stored(rng.standard_normal((7, 9)), "float32")
    b = stored(rng.standard_normal(9 if axis == "row" else 7), "float32")
    bb = b[None, :] if axis == "row" else b[:, None]
    want = {"add": a + bb, "mul": a * bb, "sub": a - bb}[op]
    got = kiln.binary_broadcast(op, asf(a, dev), asf(b, dev), axis=axis).numpy()
    close(got, want, U * np.abs(want) + 1e-30, op)


@pytest.mark.parametrize("op", ["relu", "sigmoid", "tanh", "gelu"])
def test_unary_backward(dev, rng, op):
    x = stored(rng.uniform(-3, 3, 500), "float32")
    dy = stored(rng.standard_normal(500), "float32")
    kx, kdy = asf(x, dev), asf(dy, dev)
    got = kiln.unary_backward(op, kx, kdy).numpy()
    if op == "relu":
        want = dy * (x > 0)
    elif op == "sigmoid":
        s = 1 / (1 + np.exp(-x))
        want = dy * s * (1 - s)
    elif op == "tanh":
        want = dy * (1 - np.tanh(x) ** 2)
    else:
        c = np.sqrt(2 / np.pi)
        t = np.tanh(c * (x + 0.044715 * x ** 3))
        want = dy * (0.5 * (1 + t) + 0.5 * x * (1 - t * t) * c * (1 + 3 * 0.044715 * x * x))
    close(got, want, 64 * U * (np.abs(want) + np.abs(dy)) + 1e-30, op)
    if op == "relu":  # from the output: the same where y > 0
        y = kiln.relu(kx)
        close(kiln.unary_backward("relu", y, kdy, from_output=True).numpy(), want, 1e-30)


@pytest.mark.parametrize("dtype", FLOATS)
def test_softmax_cross_entropy(dev, rng, dtype):
    rows, cols = 37, 10
    x = stored(rng.standard_normal((rows, cols)) * 3, dtype)
    labels = rng.integers(0, cols, rows).astype(np.uint32)
    kx, kl = asf(x, dev, dtype), kiln.asarray(labels, device=dev)
    loss = kiln.empty(rows, device=dev)
    mean = kiln.softmax_cross_entropy(kx, kl, loss)
    m = x.max(axis=1, keepdims=True)
    lse = np.log(np.exp(x - m).sum(axis=1)) + m[:, 0]
    want = lse - x[np.arange(rows), labels]
    tol = (cols + 20) * U * (np.abs(lse) + np.abs(x).max(axis=1)) + 1e-6
    close(loss.numpy(), want, tol, "loss")
    close(mean.numpy()[0], want.mean(), tol.max(), "mean")
    dl = kiln.softmax_cross_entropy_backward(kx, kl, None, 0.5).numpy()
    p = np.exp(x - lse[:, None])
    onehot = np.eye(cols)[labels]
    wantd = (p - onehot) * 0.5
    close(dl, wantd, (cols + 20) * U * np.abs(wantd) + storage_tol(dtype, wantd) + 1e-7, "dlogits")
    cnt = kiln.accuracy_count(kx, kl)
    assert cnt.dtype == "uint32"
    assert cnt.numpy()[0] == (x.argmax(axis=1) == labels).sum()
    kiln.accuracy_count(kx, kl, cnt, accumulate=True)
    assert cnt.numpy()[0] == 2 * (x.argmax(axis=1) == labels).sum()


def test_softmax_and_layernorm_backward(dev, rng):
    x = stored(rng.standard_normal((5, 12)), "float32")
    dy = stored(rng.standard_normal((5, 12)), "float32")
    ky = kiln.softmax(asf(x, dev))
    y = ky.numpy().astype(np.float64)
    got = kiln.softmax_backward(ky, asf(dy, dev)).numpy()
    want = y * (dy - (dy * y).sum(axis=1, keepdims=True))
    close(got, want, 64 * U * (np.abs(y) * np.abs(dy).sum(axis=1, keepdims=True)) + 1e-30)
    # layernorm backward against a finite difference of the forward in float64
    eps = 1e-5
    g = stored(rng.standard_normal(12), "float32")
    dscale, dbias = kiln.empty(12, device=dev), kiln.empty(12, device=dev)
    dx = kiln.layernorm_backward(asf(x, dev), asf(dy, dev), asf(g, dev), eps,
                                 dscale=dscale, dbias=dbias).numpy()

    def fwd(xx):
        mu = xx.mean(axis=1, keepdims=True)
        var = ((xx - mu) ** 2).mean(axis=1, keepdims=True)
        return (xx - mu) / np.sqrt(var + eps)

    xhat = fwd(x)
    h = 1e-6
    num = np.zeros_like(x)
    for i in range(x.shape[0]):
        for j in range(x.shape[1]):
            xp, xm = x.copy(), x.copy()
            xp[i, j] += h
            xm[i, j] -= h
            num[i, j] = ((fwd(xp) - fwd(xm)) * g * dy).sum() / (2 * h)
    close(dx, num, 1e-4 * (np.abs(num).max() + 1), "layernorm dx")
    close(dscale.numpy(), (dy * xhat).sum(axis=0), 1e-5 * 12, "dscale")
    close(dbias.numpy(), dy.sum(axis=0), 1e-5 * 12, "dbias")


def test_gather_scatter(dev, rng):
    table = stored(rng.standard_normal((10, 4)), "float32")
    idx = np.array([3, 3, 0, 9, 5], np.int32)
    kt, ki = asf(table, dev), kiln.asarray(idx, device=dev)
    np.testing.assert_array_equal(kiln.gather_rows(kt, ki).numpy(), table[idx])
    x = stored(rng.standard_normal((5, 4)), "float32")
    kiln.scatter_add_rows(asf(x, dev), ki, kt)
    want = table.copy()
    np.add.at(want, idx, x)
    close(kt.numpy(), want, 4 * U * (np.abs(table) + 2 * np.abs(x).max()) + 1e-30)


def test_random(dev):
    a = kiln.empty(4096, "uint32", device=dev)
    kiln.random_bits(a, seed=5)
    bits = a.numpy()
    b = kiln.empty(96, "uint32", device=dev)
    kiln.random_bits(b, 5, 4000)  # element i is stream element offset + i
    np.testing.assert_array_equal(b.numpy(), bits[4000:])
    u = kiln.random_uniform(kiln.empty(10000, device=dev), 1, 0, -2.0, 3.0).numpy()
    assert u.min() >= -2 and u.max() < 3 and abs(u.mean() - 0.5) < 0.1
    z = kiln.random_normal(kiln.empty(10000, device=dev), 2, 0, 1.0, 2.0).numpy()
    assert abs(z.mean() - 1) < 0.1 and abs(z.std() - 2) < 0.1
    m = kiln.dropout_mask(kiln.empty(10000, device=dev), 3, 0, 0.25).numpy()
    assert set(np.unique(m)) <= {0.0, np.float32(1 / 0.75)}
    assert abs((m == 0).mean() - 0.25) < 0.03
    x = kiln.full(10000, 2.0, device=dev)
    d = kiln.dropout(x, 3, 0, 0.25).numpy()
    np.testing.assert_allclose(d, 2 * m, rtol=1e-6)


def test_sgd_step(dev, rng):
    n = 1000
    w = stored(rng.standard_normal(n), "float32")
    g = stored(rng.standard_normal(n), "float32")
    kw, kg, kv = asf(w, dev), asf(g, dev), kiln.zeros(n, device=dev)
    for _ in range(2):
        kiln.sgd_step(kw, kg, kv, lr=0.1, momentum=0.9, weight_decay=0.01)
    v, ww = np.zeros(n), w.copy()
    for _ in range(2):
        gg = g + 0.01 * ww
        v = 0.9 * v + gg
        ww = ww - 0.1 * v
    close(kw.numpy(), ww, 32 * U * (np.abs(w) + np.abs(g)) + 1e-30, "sgd")
    with pytest.raises(kiln.InvalidArgumentError, match="grad_scale"):
        kiln.sgd_step(kw, kg, kv, lr=0.1, grad_scale=0.0)


def test_adamw_step(dev, rng):
    n = 1000
    w = stored(rng.standard_normal(n), "float32")
    g = stored(rng.standard_normal(n), "float32")
    kw, kg = asf(w, dev), asf(g, dev)
    km, kv = kiln.zeros(n, device=dev), kiln.zeros(n, device=dev)
    lr, b1, b2, eps, wd = 1e-2, 0.9, 0.999, 1e-8, 0.01
    copy = kiln.empty(n, "bfloat16", device=dev)
    for t in (1, 2):
        kiln.adamw_step(kw, kg, km, kv, lr=lr, step=t, weight_decay=wd, w_copy=copy)
    m = np.zeros(n)
    v = np.zeros(n)
    ww = w.copy()
    for t in (1, 2):
        ww = ww * (1 - lr * wd)
        m = m + (1 - b1) * (g - m)
        v = b2 * v + (1 - b2) * g * g
        ww = ww - (lr / (1 - b1 ** t)) * m / (np.sqrt(v) / np.sqrt(1 - b2 ** t) + eps)
    close(kw.numpy(), ww, 1e-5 * (np.abs(w) + lr), "adamw")
    np.testing.assert_array_equal(copy.numpy(), stored(kw.numpy(), "bfloat16"))


def test_grad_norm_clip_nonfinite(dev, rng):
    xs = [stored(rng.standard_normal(n), "float32") for n in (10, 300, 1)]
    ks = [asf(x, dev) for x in xs]
    total = np.sqrt(sum((x * x).sum() for x in xs))
    norm = kiln.grad_norm(ks)
    close(norm.numpy()[0], total, (depth(311) / 2 + 3) * U * total, "norm")
    kiln.clip_grad_norm(ks, 1.0, norm)
    close(np.sqrt(sum((k.numpy().astype(np.float64) ** 2).sum() for k in ks)), 1.0, 1e-5, "clipped")
    assert kiln.has_nonfinite(ks).numpy()[0] == 0
    ks[1][5] = np.inf
    assert kiln.has_nonfinite(ks).numpy()[0] == 1
    nonf = kiln.clip_grad_norm([asf(np.ones(4), dev)], 1.0)
    close(nonf.numpy()[0], 2.0, 1e-6)
