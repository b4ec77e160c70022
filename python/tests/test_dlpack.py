"""DLPack: export (OpenCL capsules, host copies), import (NumPy, PyTorch
CPU, kiln's own capsules)."""

import numpy as np
import pytest

import kiln
from util import stored

NUMPY_21 = tuple(int(v) for v in np.__version__.split(".")[:2]) >= (2, 1)


def test_dlpack_device(dev):
    a = kiln.zeros(3, device=dev)
    assert a.__dlpack_device__() == (kiln.kDLOpenCL, dev.index) == (4, dev.index)


def test_numpy_refuses_opencl_capsule(dev):
    a = kiln.zeros(3, device=dev)
    with pytest.raises((BufferError, RuntimeError, TypeError, ValueError)):
        np.from_dlpack(a)


@pytest.mark.parametrize("dtype", ["float32", "float16", "int32", "uint32"])
def test_to_numpy_through_host_copy(dev, rng, dtype):
    x = (rng.standard_normal((4, 5)) * 50).astype({"float32": np.float32, "float16": np.float16,
                                                    "int32": np.int32, "uint32": np.uint32}[dtype])
    a = kiln.asarray(x, device=dev)
    np.testing.assert_array_equal(np.from_dlpack(a.host()), x)
    np.testing.assert_array_equal(np.from_dlpack(a.T.host()), x.T)  # strides kept
    np.testing.assert_array_equal(np.from_dlpack(a[1:3, 2:].host()), x[1:3, 2:])
    if NUMPY_21:
        np.testing.assert_array_equal(np.from_dlpack(a, device="cpu"), x)


def test_versioned_capsules(dev):
    a = kiln.asarray(np.arange(6, dtype=np.float32), device=dev)
    c = a.__dlpack__(max_version=(1, 0), dl_device=(kiln.kDLCPU, 0))
    assert "dltensor_versioned" in repr(c)
    assert "dltensor_versioned" in repr(a.__dlpack__(max_version=(1, 2)))
    assert '"dltensor"' in repr(a.__dlpack__())
    with pytest.raises(BufferError, match="copy"):
        a.__dlpack__(dl_device=(kiln.kDLCPU, 0), copy=False)
    with pytest.raises(BufferError):
        a.__dlpack__(dl_device=(2, 0))  # CUDA
    with pytest.raises(BufferError):
        a.__dlpack__(dl_device=(kiln.kDLOpenCL, dev.index + 1))
    # an unconsumed capsule is freed by its destructor (no leak, no crash)
    del c


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16", "int32", "uint32"])
def test_roundtrip_through_own_capsule(dev, rng, dtype):
    x = stored(rng.standard_normal(10), "float32" if dtype != "bfloat16" else "bfloat16")
    if dtype in ("int32", "uint32"):
        x = np.arange(10)
    a = kiln.asarray(x, dtype, device=dev)
    # An OpenCL capsule of the same context shares memory (wrapped cl_mem).
    b = kiln.from_dlpack(a.__dlpack__(), device=dev)
    assert b is not a and b.dtype == dtype
    np.testing.assert_array_equal(b.numpy(), a.numpy())
    kiln.fill(b, 1)
    np.testing.assert_array_equal(a.numpy(), np.ones(10))
    # A host-copy capsule goes back up as a copy.
    c = kiln.from_dlpack(a.__dlpack__(dl_device=(kiln.kDLCPU, 0)), device=dev)
    np.testing.assert_array_equal(c.numpy(), a.numpy())
    # An Array passes through.
    assert kiln.from_dlpack(a) is a


def test_view_capsule_offset(dev):
    a = kiln.asarray(np.arange(20, dtype=np.float32).reshape(4, 5), device=dev)
    v = kiln.from_dlpack(a[2:].__dlpack__(max_version=(1, 0)), device=dev)
    np.testing.assert_array_equal(v.numpy(), np.arange(10, 20).reshape(2, 5))


def test_from_numpy(dev, rng):
    x = rng.standard_normal((6, 7)).astype(np.float32)
    np.testing.assert_array_equal(kiln.from_dlpack(x, device=dev).numpy(), x)
    np.testing.assert_array_equal(kiln.from_dlpack(x.T, device=dev).numpy(), x.T)  # gathered
    np.testing.assert_array_equal(kiln.from_dlpack(x[::2, 1:], device=dev).numpy(), x[::2, 1:])
    i = np.arange(5, dtype=np.int32)
    assert kiln.from_dlpack(i, device=dev).dtype == "int32"
    with pytest.raises(BufferError, match="dtype"):
        kiln.from_dlpack(np.arange(3.0), device=dev)  # float64
    with pytest.raises(TypeError):
        kiln.from_dlpack(3, device=dev)
    cap = x.__dlpack__()
    kiln.from_dlpack(cap, device=dev)
    with pytest.raises(TypeError, match="unused"):
        kiln.from_dlpack(cap, device=dev)  # consumed already


def test_wrong_context(dev):
    other = kiln.Device(dev.info["selector"])
    a = kiln.zeros(4, device=dev)
    with pytest.raises(kiln.WrongContextError):
        kiln.from_dlpack(a, device=other)
    with pytest.raises(kiln.WrongContextError):
        kiln.from_dlpack(a.__dlpack__(), device=other)


def test_torch(dev, rng):
    torch = pytest.importorskip("torch")
    x = rng.standard_normal((3, 4)).astype(np.float32)
    a = kiln.asarray(x, device=dev)
    t = torch.from_dlpack(a.host())
    np.testing.assert_array_equal(t.numpy(), x)
    bf = kiln.asarray(x, "bfloat16", device=dev)
    tb = torch.from_dlpack(bf.host())
    assert tb.dtype == torch.bfloat16
    np.testing.assert_array_equal(tb.float().numpy(), bf.numpy())
    back = kiln.from_dlpack(torch.arange(12, dtype=torch.float32).reshape(3, 4).t(), device=dev)
    np.testing.assert_array_equal(back.numpy(), np.arange(12, dtype=np.float32).reshape(3, 4).T)
    back = kiln.from_dlpack(tb, device=dev)
    assert back.dtype == "bfloat16"
    np.testing.assert_array_equal(back.numpy(), bf.numpy())


def test_deleter_called_without_rename(dev):
    """A consumer that calls the deleter but leaves the capsule's name (as
    PyTorch does when it refuses an OpenCL tensor) must not make the capsule
    delete it twice."""
    import ctypes
    import gc
    import sys
    a = kiln.zeros(3, device=dev)
    before = sys.getrefcount(a)
    get = ctypes.pythonapi.PyCapsule_GetPointer
    get.restype = ctypes.c_void_p
    get.argtypes = [ctypes.py_object, ctypes.c_char_p]
    for versioned, name, off in ((False, b"dltensor", 56), (True, b"dltensor_versioned", 16)):
        cap = a.__dlpack__(max_version=(1, 0) if versioned else None)
        assert sys.getrefcount(a) == before + 1
        p = get(cap, name)
        deleter = ctypes.CFUNCTYPE(None, ctypes.c_void_p)(ctypes.c_void_p.from_address(p + off).value)
        deleter(p)
        assert sys.getrefcount(a) == before
        del cap
        gc.collect()
        assert sys.getrefcount(a) == before
    np.testing.assert_array_equal(a.numpy(), [0, 0, 0])
