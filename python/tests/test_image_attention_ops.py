"""The image ops (kiln_ops_conv.h, kiln_ops_image.h) and attention
(kiln_ops_attention.h) from Python against NumPy float64 references: the
binding's shapes, defaults and argument order. The ops' own accuracy on
awkward shapes is the C tests' (test_op_conv, test_op_image_pool,
test_op_image_bn, test_op_attention); the tolerances here are the f32 bound for a sum of k
terms, k u sum|terms| (u = 2^-24), with margin."""

import numpy as np
import pytest

import kiln
from util import U, close


def asf(x, dev):
    return kiln.asarray(np.ascontiguousarray(x, np.float32), device=dev)


def f32(x):
    return np.asarray(x, np.float32).astype(np.float64)


def conv_ref(x, w, stride, pad):
    n, c, h, wd = x.shape
    oc, _, kh, kw = w.shape
    xp = np.pad(x, ((0, 0), (0, 0), (pad[0], pad[0]), (pad[1], pad[1])))
    oh = (h + 2 * pad[0] - kh) // stride[0] + 1
    ow = (wd + 2 * pad[1] - kw) // stride[1] + 1
    y = np.zeros((n, oc, oh, ow))
    mag = np.zeros_like(y)
    for i in range(oh):
        for j in range(ow):
            patch = xp[:, :, i * stride[0]:i * stride[0] + kh, j * stride[1]:j * stride[1] + kw]
            y[:, :, i, j] = np.einsum("nchw,ochw->no", patch, w)
            mag[:, :, i, j] = np.einsum("nchw,ochw->no", np.abs(patch), np.abs(w))
    return y, mag, xp


def test_conv2d_and_gradients(dev, rng):
    x = f32(rng.standard_normal((2, 3, 7, 6)))
    w = f32(rng.standard_normal((4, 3, 3, 2)))
    b = f32(rng.standard_normal(4))
    stride, pad = (2, 1), (1, 0)
    y, mag, xp = conv_ref(x, w, stride, pad)
    k = 3 * 3 * 2
    kx, kw_, kb = asf(x, dev), asf(w, dev), asf(b, dev)
    got = kiln.conv2d(kx, kw_, stride=stride, padding=pad, bias=kb, activation="relu")
    want = np.maximum(y + b[None, :, None, None], 0)
    close(got.numpy(), want, 2 * (k + 2) * U * (mag + np.abs(b)[None, :, None, None]) + 1e-30,
          "conv2d")
    dy = f32(rng.standard_normal(y.shape))
    # Reference gradients: scatter each output's gradient back over its window.
    dxp = np.zeros_like(xp)
    dw = np.zeros_like(w)
    for i in range(y.shape[2]):
        for j in range(y.shape[3]):
            sl = (slice(None), slice(None), slice(i * stride[0], i * stride[0] + 3),
                  slice(j * stride[1], j * stride[1] + 2))
            dxp[sl] += np.einsum("no,ochw->nchw", dy[:, :, i, j], w)
            dw += np.einsum("no,nchw->ochw", dy[:, :, i, j], xp[sl])
    dx = dxp[:, :, pad[0]:pad[0] + 7, pad[1]:pad[1] + 6]
    kdy = asf(dy, dev)
    gdx = kiln.conv2d_backward_data(kdy, kw_, x.shape, stride=stride, padding=pad).numpy()
    db = kiln.empty((4,), "float32", device=dev)
    gdw = kiln.conv2d_backward_weights(kx, kdy, w.shape, db, stride=stride, padding=pad)
    scale_x = np.abs(dy).max() * np.abs(w).sum()
    scale_w = np.abs(dy).sum() * np.abs(x).max()
    close(gdx, dx, 4 * 8 * U * scale_x, "conv2d dx")
    close(gdw.numpy(), dw, 4 * 64 * U * scale_w, "conv2d dw")
    close(db.numpy(), dy.sum(axis=(0, 2, 3)), 4 * 64 * U * np.abs(dy).sum(), "conv2d db")


@pytest.mark.parametrize("op", ["max", "mean"])
def test_pool2d(dev, rng, op):
    x = f32(rng.standard_normal((2, 3, 6, 5)))
    kx = asf(x, dev)
    got = kiln.pool2d(op, kx, 2).numpy()
    win = x[:, :, :6, :4].reshape(2, 3, 3, 2, 2, 2)
    want = win.max(axis=(3, 5)) if op == "max" else win.mean(axis=(3, 5))
    close(got, want, 8 * U * np.abs(want) + 1e-30, "pool2d " + op)
    dy = f32(rng.standard_normal(want.shape))
    gdx = kiln.pool2d_backward(op, kx, asf(dy, dev), kernel=2).numpy()
    dx = np.zeros_like(x)
    for i in range(3):
        for j in range(2):
            blk = x[:, :, 2 * i:2 * i + 2, 2 * j:2 * j + 2].reshape(2, 3, 4)
            if op == "max":
                onehot = np.zeros_like(blk)
                np.put_along_axis(onehot, blk.argmax(axis=2)[..., None], 1.0, axis=2)
                g = onehot * dy[:, :, i, j][..., None]
            else:
                g = np.repeat(dy[:, :, i, j][..., None] / 4, 4, axis=2)
            dx[:, :, 2 * i:2 * i + 2, 2 * j:2 * j + 2] = g.reshape(2, 3, 2, 2)
    close(gdx, dx, 8 * U * np.abs(dx) + 1e-30, "pool2d_backward " + op)


def test_batchnorm(dev, rng):
    x = f32(rng.standard_normal((3, 4, 5, 5)) * 2 + 1)
    g, b = f32(rng.uniform(0.5, 1.5, 4)), f32(rng.standard_normal(4))
    kx, kg, kb = asf(x, dev), asf(g, dev), asf(b, dev)
    rm, rv = asf(np.zeros(4), dev), asf(np.ones(4), dev)
    y, saved = kiln.batchnorm_train(kx, kg, kb, rm, rv, saved="new")
    m = x.mean(axis=(0, 2, 3))
    var = x.var(axis=(0, 2, 3))
    rstd = 1 / np.sqrt(var + 1e-5)
    xhat = (x - m[None, :, None, None]) * rstd[None, :, None, None]
    want = xhat * g[None, :, None, None] + b[None, :, None, None]
    tol = 1e-5 * (np.abs(want) + np.abs(g)[None, :, None, None] * np.abs(xhat) + 1)
    close(y.numpy(), want, tol, "batchnorm_train")
    count = 3 * 5 * 5
    close(rm.numpy(), 0.1 * m, 1e-6 + 1e-5 * np.abs(m), "running_mean")
    close(rv.numpy(), 0.9 + 0.1 * var * count / (count - 1), 1e-5, "running_var")
    close(saved.numpy(), np.concatenate([m, rstd]), 1e-5 * np.concatenate(
        [np.abs(m) + 1, rstd]), "saved")
    yi = kiln.batchnorm_inference(kx, rm, rv, kg, kb).numpy()
    rmh, rvh = rm.numpy().astype(np.float64), rv.numpy().astype(np.float64)
    wanti = ((x - rmh[None, :, None, None]) / np.sqrt(rvh + 1e-5)[None, :, None, None]
             * g[None, :, None, None] + b[None, :, None, None])
    close(yi, wanti, 1e-5 * (np.abs(wanti) + 1), "batchnorm_inference")
    dy = f32(rng.standard_normal(x.shape))
    dx, dg, dbeta = kiln.batchnorm_backward(kx, saved, asf(dy, dev), kg, "new", "new", "new")
    dbeta_w = dy.sum(axis=(0, 2, 3))
    dg_w = (dy * xhat).sum(axis=(0, 2, 3))
    dx_w = (g * rstd)[None, :, None, None] * (
        dy - dbeta_w[None, :, None, None] / count - xhat * dg_w[None, :, None, None] / count)
    close(dbeta.numpy(), dbeta_w, 1e-4 * np.abs(dy).sum(axis=(0, 2, 3)), "dbeta")
    close(dg.numpy(), dg_w, 1e-4 * np.abs(dy * xhat).sum(axis=(0, 2, 3)), "dgamma")
    close(dx.numpy(), dx_w, 1e-4 * (np.abs(dx_w) + 1), "batchnorm dx")


def attention_ref(qkv, heads, causal=True):
    b, t, c3 = qkv.shape
    c = c3 // 3
    hs = c // heads
    q, k, v = qkv[..., :c], qkv[..., c:2 * c], qkv[..., 2 * c:]
    split = lambda a: a.reshape(b, t, heads, hs).transpose(0, 2, 1, 3)
    q, k, v = split(q), split(k), split(v)
    s = q @ k.transpose(0, 1, 3, 2) / np.sqrt(hs)
    if causal:
        s = np.where(np.tril(np.ones((t, t), bool)), s, -np.inf)
    p = np.exp(s - s.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    o = p @ v
    return o.transpose(0, 2, 1, 3).reshape(b, t, c), (q, k, v, p)


def test_attention(dev, rng):
    b, t, c, heads = 2, 7, 16, 2
    qkv = f32(rng.standard_normal((b, t, 3 * c)))
    kq = asf(qkv, dev)
    lse = kiln.empty((b * heads * t,), "float32", device=dev)
    out = kiln.attention(kq, heads, lse=lse)
    want, (q, k, v, p) = attention_ref(qkv, heads)
    close(out.numpy(), want, 1e-5 * (np.abs(want) + 1), "attention")
    dout = f32(rng.standard_normal((b, t, c)))
    dqkv = kiln.attention_backward(kq, out, asf(dout, dev), lse, heads).numpy()
    hs = c // heads
    do = dout.reshape(b, t, heads, hs).transpose(0, 2, 1, 3)
    dv = p.transpose(0, 1, 3, 2) @ do
    dp = do @ v.transpose(0, 1, 3, 2)
    ds = p * (dp - (dp * p).sum(-1, keepdims=True)) / np.sqrt(hs)
    dq, dk = ds @ k, ds.transpose(0, 1, 3, 2) @ q
    merge = lambda a: a.transpose(0, 2, 1, 3).reshape(b, t, c)
    want_d = np.concatenate([merge(dq), merge(dk), merge(dv)], axis=-1)
    close(dqkv, want_d, 1e-4 * (np.abs(want_d) + 1), "attention_backward")
    # The key/value cache: prompt of t - 1 positions, then the last one.
    kc = kiln.empty((b * heads, 16, hs), "float32", device=dev)
    vc = kiln.empty((b * heads, 16, hs), "float32", device=dev)
    kiln.attention_cache_append(kq[:, :, c:2 * c], kq[:, :, 2 * c:], kc, vc, heads, 0)
    last = kiln.attention_decode(kq[:, t - 1:, :c], kc, vc, heads, t).numpy()
    close(last, out.numpy()[:, t - 1:], 0, "decode = the forward's last row")
