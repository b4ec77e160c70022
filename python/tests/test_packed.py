"""kiln.Packed (kiln_packed): matmul with a packed operand gives the
unpacked matmul's results bit for bit, on shapes that take the CPU
family's panels (m and n above the switch point) and shapes that read the
copy in place (few rows), for either role, column-major weights, batches
and bfloat16; and every misuse raises the C library's status: before the
first pack, another shape, another context, the other role, closed."""

import numpy as np
import pytest

import kiln


def upload(rng, shape, dev, dtype="float32"):
    return kiln.asarray(rng.standard_normal(shape).astype(np.float32), dtype, device=dev)


def same(got, want, what):
    g, w = got.numpy(), want.numpy()
    assert g.shape == w.shape, what
    assert np.array_equal(g, w), "%s: packed differs from unpacked in %d of %d" % (
        what, int(np.sum(g != w)), g.size)


# (m, k, n): above the switch point (panels), few rows (in place), odd sizes.
@pytest.mark.parametrize("mkn", [(130, 77, 129), (257, 33, 67), (3, 50, 40), (9, 300, 70)])
def test_packed_b_is_bit_identical(dev, rng, mkn):
    m, k, n = mkn
    x, w = upload(rng, (m, k), dev), upload(rng, (k, n), dev)
    with kiln.Packed(dev, w, role="b") as wp:
        assert wp.shape == (k, n) and wp.role == "b" and wp.dtype == "float32"
        assert wp.pack(w) is None
        same(kiln.matmul(x, wp), kiln.matmul(x, w), "b %s" % (mkn,))
        # pack again after the weights change: the new data is used
        kiln.scale(w.reshape(-1), -0.5)
        ev = wp.pack(w, event=True)
        same(kiln.matmul(x, wp, wait=[ev]), kiln.matmul(x, w), "b repacked %s" % (mkn,))
    assert wp.closed


def test_packed_linear_layer(dev, rng):
    """PyTorch's Linear layout: w (out, in) row-major, used as w.T
    (column-major), with bias and ReLU fused."""
    m, k, n = 70, 200, 67
    x, w, bias = upload(rng, (m, k), dev), upload(rng, (n, k), dev), upload(rng, n, dev)
    wp = kiln.Packed(dev, w.T)
    assert wp.column_major and wp.shape == (k, n)
    wp.pack(w.T)
    same(kiln.matmul(x, wp, bias=bias, activation="relu"),
         kiln.matmul(x, w.T, bias=bias, activation="relu"), "linear")
    wp.close()


def test_packed_a_batches_and_bf16(dev, rng):
    a, b = upload(rng, (97, 61), dev), upload(rng, (61, 45), dev)
    ap = kiln.Packed(dev, a, role="a")
    ap.pack(a)
    same(kiln.matmul(ap, b), kiln.matmul(a, b), "a")
    # a batch of x against one packed b: every entry shares it
    x, w = upload(rng, (2, 33, 40), dev), upload(rng, (40, 35), dev)
    wp = kiln.Packed(dev, w)
    wp.pack(w)
    got = kiln.matmul(x, wp)
    assert got.shape == (2, 33, 35)
    same(got, kiln.matmul(x, w), "batched")
    xb, wb = upload(rng, (66, 70), dev, "bfloat16"), upload(rng, (70, 65), dev, "bfloat16")
    wbp = kiln.Packed(dev, wb)
    assert wbp.dtype == "bfloat16"
    wbp.pack(wb)
    same(kiln.matmul(xb, wbp), kiln.matmul(xb, wb), "bf16")


def test_packed_misuse(dev, rng):
    x, w = upload(rng, (20, 16), dev), upload(rng, (16, 12), dev)
    wp = kiln.Packed(dev, w)
    with pytest.raises(kiln.InvalidStateError, match="pack"):
        kiln.matmul(x, wp)                                  # before the first pack
    with pytest.raises(kiln.ShapeMismatchError):
        wp.pack(upload(rng, (16, 13), dev))                 # another shape
    with pytest.raises(kiln.ShapeMismatchError):
        wp.pack(upload(rng, (12, 16), dev).T)               # another layout
    wp.pack(w)
    with pytest.raises(kiln.ShapeMismatchError):
        kiln.matmul(upload(rng, (20, 15), dev), wp)         # inner sizes differ
    with pytest.raises(kiln.InvalidArgumentError):
        kiln.matmul(wp, upload(rng, (12, 5), dev))          # b packed, used as a
    with pytest.raises(TypeError, match="both kiln.Packed"):
        kiln.matmul(wp, wp)
    with pytest.raises(TypeError, match="kiln.Array or kiln.Packed"):
        kiln.matmul(x, "w", kiln.zeros((20, 12), device=dev))
    with pytest.raises(TypeError, match="kiln.Array"):
        kiln.softmax(wp, kiln.zeros((16, 12), device=dev))  # only matmul takes one
    other = kiln.Device(dev.info["selector"])               # another context
    try:
        with pytest.raises(kiln.WrongContextError):
            kiln.matmul(kiln.asarray(x.numpy(), device=other), wp)
        wq = kiln.Packed(other, w)
        with pytest.raises(kiln.WrongContextError):
            wq.pack(w)                                      # w's queue: dev's context
        wq.close()
    finally:
        other.close()
    with pytest.raises(ValueError, match="role"):
        kiln.Packed(dev, w, role="c")
    with pytest.raises(ValueError, match="2-D"):
        kiln.Packed(dev, upload(rng, (2, 3, 4), dev))
    with pytest.raises(TypeError):
        kiln.Packed(dev, np.zeros((3, 4), np.float32))
    with pytest.raises(TypeError, match="queue"):
        wp.pack(w, queue="q")
    wp.close()
    wp.close()                                              # twice is fine
    with pytest.raises(kiln.InvalidStateError, match="closed"):
        kiln.matmul(x, wp)
    with pytest.raises(kiln.InvalidStateError, match="closed"):
        wp.pack(w)
