"""kiln.Array: NumPy round trips for every dtype and awkward shapes,
views, host transfers with events, creation functions."""

import numpy as np
import pytest

import kiln
from util import stored

SHAPES = [(1,), (7,), (1023,), (1025,), (3, 5), (1, 1), (17, 1), (1, 33), (3, 5, 7),
          (2, 3, 4, 5), (65537,)]
NP = {"float32": np.float32, "float16": np.float16, "int32": np.int32, "uint32": np.uint32}


def sample(rng, shape, dtype):
    if dtype in ("int32", "uint32"):
        info = np.iinfo(NP[dtype])
        return rng.integers(info.min, info.max, size=shape, dtype=NP[dtype], endpoint=True)
    x = rng.standard_normal(shape).astype(np.float32) * 100
    return x.astype(NP[dtype]) if dtype == "float16" else x


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16", "int32", "uint32"])
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_roundtrip(dev, rng, dtype, shape):
    x = sample(rng, shape, dtype)
    a = kiln.asarray(x, dtype, device=dev)
    assert a.shape == shape and a.dtype == dtype and a.ndim == len(shape)
    assert a.size == x.size and a.nbytes == x.size * a.itemsize and a.is_contiguous
    back = a.numpy()
    if dtype == "bfloat16":
        assert back.dtype == np.float32
        np.testing.assert_array_equal(back, stored(x, "bfloat16"))
    else:
        assert back.dtype == x.dtype
        np.testing.assert_array_equal(back, x)
    out = np.empty(shape, np.float32 if dtype == "bfloat16" else x.dtype)
    assert a.copy_to_host(out=out) is out
    np.testing.assert_array_equal(out, back)
    np.testing.assert_array_equal(np.asarray(a), back)


def test_empty_and_zero_size(dev):
    for shape in [(0,), (0, 5), (3, 0), ()]:
        a = kiln.zeros(shape, device=dev)
        assert a.shape == shape
        assert a.numpy().shape == shape
    z = kiln.asarray(np.zeros((0, 3), np.float32), device=dev)
    assert z.numpy().shape == (0, 3)


def test_dtype_rules(dev):
    assert kiln.asarray(np.arange(3.0), device=dev).dtype == "float32"  # float64 narrows
    assert kiln.asarray(np.arange(3), device=dev).dtype == "int32"
    assert kiln.asarray(np.arange(3, dtype=np.uint64), device=dev).dtype == "uint32"
    assert kiln.asarray([1, 2], "f16", device=dev).dtype == "float16"
    bits = np.array([0x3f80, 0xc000], np.uint16)  # bf16 1.0, -2.0
    np.testing.assert_array_equal(kiln.asarray(bits, "bfloat16", device=dev).numpy(), [1, -2])
    for bad in (np.array([True]), np.array([1j])):
        with pytest.raises(TypeError, match="no kiln counterpart"):
            kiln.asarray(bad, device=dev)
    with pytest.raises(TypeError, match="not one of kiln's"):
        kiln.empty(3, "float64", device=dev)
    assert kiln.dtype_code(np.float16) == 1 and kiln.dtype_code("u32") == 4
    assert kiln.float32 == "float32" and kiln.bfloat16 == "bfloat16"


def test_create(dev):
    np.testing.assert_array_equal(kiln.full((2, 3), 7.5, device=dev).numpy(), np.full((2, 3), 7.5))
    np.testing.assert_array_equal(kiln.full(4, -3, "int32", device=dev).numpy(), [-3] * 4)
    np.testing.assert_array_equal(kiln.full(3, 1.5, "bfloat16", device=dev).numpy(), [1.5] * 3)
    e = kiln.empty((4, 4), "uint32", device=dev)
    assert e.shape == (4, 4) and e.dtype == "uint32" and e.queue is dev.queue
    l = kiln.empty_like(e)
    assert l.shape == e.shape and l.dtype == "uint32"
    assert kiln.empty_like(e, "float16").dtype == "float16"
    with pytest.raises(ValueError, match="negative"):
        kiln.empty((2, -1), device=dev)
    with pytest.raises(ValueError, match="dimensions"):
        kiln.empty((1,) * 9, device=dev)
    with pytest.raises(TypeError):
        kiln.empty("abc", device=dev)
    with pytest.raises(kiln.InvalidSizeError):
        kiln.empty((1 << 40, 1 << 40), device=dev)
    with pytest.raises(kiln.Error):
        kiln.empty(1 << 62, device=dev)  # past the device's max allocation
    with pytest.raises(TypeError):
        kiln.zeros(3, device="pocl")


def test_views(dev, rng):
    x = rng.standard_normal((6, 5)).astype(np.float32)
    a = kiln.asarray(x, device=dev)
    np.testing.assert_array_equal(a.T.numpy(), x.T)
    assert a.T.strides == (1, 5) and not a.T.is_contiguous
    np.testing.assert_array_equal(a[2:5].numpy(), x[2:5])
    np.testing.assert_array_equal(a[1].numpy(), x[1])
    np.testing.assert_array_equal(a[-1, 1:4].numpy(), x[-1, 1:4])
    np.testing.assert_array_equal(a[:, 2:4].numpy(), x[:, 2:4])
    assert a[2:2].shape == (0, 5)
    np.testing.assert_array_equal(a.reshape(3, 10).numpy(), x.reshape(3, 10))
    np.testing.assert_array_equal(a.reshape(-1).numpy(), x.reshape(-1))
    np.testing.assert_array_equal(a.reshape((10, -1)).numpy(), x.reshape(10, -1))
    assert len(a) == 6
    with pytest.raises(ValueError):
        a.reshape(7, 5)
    with pytest.raises(ValueError):
        a.T.reshape(30)
    with pytest.raises(IndexError):
        a[6]
    with pytest.raises(IndexError):
        a[::2]
    with pytest.raises(IndexError):
        a[1, 2, 3]
    with pytest.raises(TypeError):
        a["x"]
    with pytest.raises(kiln.OutOfRangeError):
        a._view(0, (7, 5), (5, 1))
    with pytest.raises(ValueError):
        a._view(-1, (1,), (1,))
    with pytest.raises(ValueError):
        a._view(0, (2,), (-1,))
    # setitem: a scalar, host data, another array
    a[0] = 1.0
    a[1] = np.arange(5, dtype=np.float32)
    a[2:4] = kiln.zeros((2, 5), device=dev)
    x[0], x[1], x[2:4] = 1.0, np.arange(5), 0
    np.testing.assert_array_equal(a.numpy(), x)
    a.T[1:3] = 9.0  # a non-contiguous view: filled through a temporary
    x.T[1:3] = 9.0
    np.testing.assert_array_equal(a.numpy(), x)


def test_copy(dev, rng):
    x = rng.standard_normal((4, 6)).astype(np.float32)
    a = kiln.asarray(x, device=dev)
    np.testing.assert_array_equal(kiln.copy(a).numpy(), x)
    np.testing.assert_array_equal(kiln.copy(a.T).numpy(), x.T)
    np.testing.assert_array_equal(kiln.copy(a[:, 1:4]).numpy(), x[:, 1:4])
    out = kiln.empty((6, 4), device=dev)
    kiln.copy(a.T, out=out)
    np.testing.assert_array_equal(out.numpy(), x.T)


def test_async_transfers(dev, rng):
    x = rng.standard_normal(100000).astype(np.float32)
    a = kiln.empty(x.shape, device=dev)
    ev = a.copy_from_host_async(x)
    assert isinstance(ev, kiln.Event)
    y = kiln.multiply(a, 2.0, wait=[ev])
    out = np.empty_like(x)
    ev2 = y.copy_to_host_async(out)
    ev2.wait()
    assert ev2.state == "complete"
    np.testing.assert_array_equal(out, x * 2)
    b, ev3 = kiln.asarray(x, device=dev, blocking=False)
    kiln.wait_all([ev3])
    np.testing.assert_array_equal(b.numpy(), x)
    # An event dropped before completion waits for its transfer first.
    big = np.ones(1 << 20, np.float32)
    c = kiln.empty(big.shape, device=dev)
    c.copy_from_host_async(big)
    np.testing.assert_array_equal(c.numpy()[:3], [1, 1, 1])
    with pytest.raises(TypeError):
        a.copy_to_host_async(np.empty(100000, np.float64))
    with pytest.raises(ValueError):
        a.copy_to_host_async(np.empty(5, np.float32))
    with pytest.raises(ValueError):
        a.copy_to_host(out=np.empty((200000,), np.float32)[::2])
    with pytest.raises(ValueError):
        a.copy_from_host(np.ones(3, np.float32))
    with pytest.raises(TypeError):
        kiln.wait_all([1])
    with pytest.raises(TypeError):
        kiln.exp(a, wait=[1])


def test_64mib_roundtrip(dev, rng):
    x = rng.standard_normal(16 << 20).astype(np.float32)
    a = kiln.asarray(x, device=dev)
    np.testing.assert_array_equal(a.numpy(), x)


def test_large_copies_of_views(dev, rng):
    """numpy() of a large view (offset, non-contiguous, float16 and bfloat16)
    through read_new, whose destination starts at the device data's offset
    within a page on a CPU device; a blocking copy_to_host / copy_from_host
    of a large array (mapped on a CPU device) followed by an op."""
    x = rng.standard_normal((1031, 1029)).astype(np.float32)
    a = kiln.asarray(x, device=dev)
    np.testing.assert_array_equal(a[3:].numpy(), x[3:])
    np.testing.assert_array_equal(a[5:, 2:1000].numpy(), x[5:, 2:1000])
    np.testing.assert_array_equal(a.T.numpy(), x.T)
    h = kiln.asarray(x, dtype="float16", device=dev)
    np.testing.assert_array_equal(h[1:].numpy(), x[1:].astype(np.float16))
    b = kiln.asarray(x, dtype="bfloat16", device=dev)
    np.testing.assert_array_equal(b[7:].numpy(), kiln.asarray(x[7:], dtype="bfloat16",
                                                                device=dev).numpy())
    y = np.empty_like(x)
    kiln.exp(a, out=a)
    a.copy_to_host(out=y)
    np.testing.assert_allclose(y, np.exp(x.astype(np.float64)), rtol=1e-6)
    a.copy_from_host(x)
    kiln.scale(a, 2.0)
    np.testing.assert_array_equal(a.numpy(), 2 * x)
    if dev.info["type"] == "CPU":
        seen = []
        n = x.size - 1029
        kiln._kiln.read_new(a, 1029, n, lambda o, k: seen.append(o) or np.empty(k, np.float32))
        assert 0 <= seen[0] < 4096 and seen[0] % 4 == 0
        assert a[1:].numpy().__array_interface__["data"][0] % 4096 == seen[0]
    for bad in [(-1, 4), (0, 0), (0, x.size + 1)]:
        with pytest.raises(ValueError):
            kiln._kiln.read_new(a, bad[0], bad[1], lambda o, n: np.empty(n, np.float32))
    with pytest.raises(ValueError, match="bytes"):
        kiln._kiln.read_new(a, 0, 4, lambda o, n: np.empty(n + 1, np.float32))
    with pytest.raises(TypeError):
        kiln._kiln.read_new(a, 0, 4, lambda o, n: "not a buffer")
    with pytest.raises(ZeroDivisionError):
        kiln._kiln.read_new(a, 0, 4, lambda o, n: 1 // 0)


def test_array_keeps_context_alive(dev):
    d = kiln.Device(dev.info["selector"])
    a = kiln.full(8, 3.0, device=d)
    ctx = a.context
    del d  # the Device object goes; the array keeps its context and queue
    np.testing.assert_array_equal(kiln.add(a, a).numpy(), [6.0] * 8)
    assert ctx.info["name"] == dev.name


def test_pooled_buffer_used_on_another_queue(dev):
    """An array from one queue's pool, read by ops on another queue and
    dropped at once: its block is not handed out again before that queue's
    commands have run (the binding orders the release after them)."""
    q2 = dev.new_queue()
    n = 1 << 20
    outs = []
    for i in range(12):
        x = kiln.full(n, float(i), device=dev)            # dev.queue's pool
        dev.sync()
        big = kiln.empty((256, 256), queue=q2)
        kiln.matmul(big, big, kiln.empty((256, 256), queue=q2))  # keep q2 busy
        outs.append(kiln.add(x, 0.0, out=kiln.empty(n, queue=q2)))  # reads x on q2
        del x                                                # dropped before q2 ran
        y = kiln.full(n, -1.0, device=dev)                   # would take x's block
        dev.sync()
        del y
    q2.sync()
    for i, o in enumerate(outs):
        got = o.numpy()
        assert got[0] == i and got[-1] == i, (i, got[0], got[-1])


def test_asarray_of_an_array(dev):
    a = kiln.full(3, 2.0, device=dev)
    assert kiln.asarray(a) is a
    assert kiln.asarray(a, device=dev) is a
    q = dev.new_queue()
    b = kiln.asarray(a, queue=q)
    assert b.queue is q and b.numpy().tolist() == [2.0] * 3
    h = kiln.asarray(a, "float16")
    assert h.dtype == "float16" and h.numpy().tolist() == [2.0] * 3
    other = kiln.Device(dev.info["selector"])
    with pytest.raises(kiln.WrongContextError, match="another context"):
        kiln.asarray(a, device=other)
