"""Errors as exceptions with the C library's status and message; user
kernels; the binding never crashes on bad input."""

import gc

import numpy as np
import pytest

import kiln

SRC = """
__kernel void saxpy(__global float *y, __global const float *x, float a, int n) {
  size_t i = get_global_id(0);
  if (i < (size_t)n) y[i] = a * x[i] + y[i];
}
__kernel void local_sum(__global float *out, __local float *tmp) {
  size_t l = get_local_id(0);
  tmp[l] = (float)l;
  barrier(CLK_LOCAL_MEM_FENCE);
  if (l == 0) {
    float s = 0;
    for (size_t k = 0; k < get_local_size(0); k++) s += tmp[k];
    out[get_group_id(0)] = s;
  }
}
"""
WIDE = """#pragma OPENCL EXTENSION cl_khr_fp64 : enable
__kernel void wide(__global ulong *out, ulong v, double d) { out[0] = v + (ulong)d; }
"""


def test_error_hierarchy():
    assert issubclass(kiln.ShapeMismatchError, kiln.Error)
    assert issubclass(kiln.ShapeMismatchError, ValueError)
    assert issubclass(kiln.OutOfRangeError, IndexError)
    assert issubclass(kiln.NullPointerError, TypeError)
    assert kiln.BuildError is kiln.BuildFailedError
    assert kiln.OpenCLError is kiln.OpenclError
    for name in ("NoDeviceError", "WrongContextError", "InvalidStateError", "BusyError",
                 "ExecFailedError", "UnsupportedError", "NotFoundError"):
        assert issubclass(getattr(kiln, name), kiln.Error)
    assert "KILN_ERR_WRONG_CONTEXT" in kiln.WrongContextError.__doc__


def test_shape_mismatch_carries_status_and_message(dev):
    a, b = kiln.zeros(4, device=dev), kiln.zeros(5, device=dev)
    with pytest.raises(kiln.ShapeMismatchError) as e:
        kiln.add(a, b)
    err = e.value
    assert err.status == -14 and err.status_name == "KILN_ERR_SHAPE_MISMATCH"
    assert "kiln_binary" in err.message and "disagree" in err.message
    assert str(err) == err.message
    assert kiln.last_error() == ("KILN_ERR_SHAPE_MISMATCH", err.message)
    with pytest.raises(kiln.ShapeMismatchError, match="a.cols|inner|disagree"):
        kiln.matmul(kiln.zeros((2, 3), device=dev), kiln.zeros((4, 2), device=dev))
    with pytest.raises(kiln.InvalidArgumentError, match="dtype|f32|i32"):
        kiln.exp(kiln.zeros(3, "int32", device=dev))
    with pytest.raises(kiln.InvalidArgumentError, match="eps"):
        kiln.layernorm(kiln.zeros((2, 3), device=dev), eps=-1.0)


def test_wrong_context(dev):
    other = kiln.Device(dev.info["selector"])
    a, b = kiln.zeros(4, device=dev), kiln.zeros(4, device=other)
    with pytest.raises(kiln.WrongContextError, match="context"):
        kiln.add(a, b)
    with pytest.raises(kiln.WrongContextError):
        a.with_queue(other.queue)
    prog = kiln.Program(SRC, device=dev)
    with pytest.raises(kiln.WrongContextError):
        prog.kernel("saxpy")(other.queue, 4, b, b, 1.0, 4)
    with pytest.raises(kiln.WrongContextError):
        prog.kernel("saxpy")(dev.queue, 4, a, b, 1.0, 4)
    ev = other.queue.marker()
    with pytest.raises(kiln.WrongContextError):
        kiln.exp(a, a, wait=[ev])


def test_closed_queue(dev):
    q = dev.new_queue()
    a = kiln.zeros(4, queue=q)
    q.close()
    for call in (lambda: kiln.exp(a, a), lambda: a.numpy(), lambda: q.sync(),
                 lambda: q.marker(), lambda: a.__dlpack__(), lambda: kiln.zeros(2, queue=q),
                 lambda: q.flush()):
        with pytest.raises(kiln.InvalidStateError, match="closed"):
            call()
    # the data is still there through an open queue
    np.testing.assert_array_equal(a.with_queue(dev.queue).numpy(), [0, 0, 0, 0])


def test_build_failure(dev):
    with pytest.raises(kiln.BuildError) as e:
        kiln.Program("__kernel void f(__global float *x) { x[0] = undeclared_thing; }",
                     device=dev)
    err = e.value
    assert err.status_name == "KILN_ERR_BUILD_FAILED"
    assert "undeclared_thing" in err.build_log
    assert "<source>:1" in err.build_log
    assert "clBuildProgram" in err.message
    with pytest.raises(kiln.BuildError):
        kiln.Program("__kernel void f() {}", device=dev, options="-not-an-option")


def test_kernels(dev, rng):
    prog = kiln.Program(SRC, device=dev)
    assert isinstance(prog.from_cache, bool)
    assert isinstance(prog.build_log, str)
    k = prog.kernel("saxpy")
    assert k.num_args == 4
    info = k.info()
    assert info["name"] == "saxpy" and info["num_args"] == 4 and info["work_group_size"] >= 1
    n = 1000
    x, y = rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)
    kx, ky = kiln.asarray(x, device=dev), kiln.asarray(y, device=dev)
    ev = k(dev.queue, 1024, ky, kx, np.float32(2.0), np.int32(n), event=True)
    ev.wait()
    np.testing.assert_allclose(ky.numpy(), 2 * x + y, rtol=1e-6, atol=1e-6)
    k(dev.queue, (1024,), ky, kx, -2.0, n, local_size=(16,), wait=[ev])
    np.testing.assert_allclose(ky.numpy(), y, rtol=1e-5, atol=1e-5)
    out = kiln.zeros(4, device=dev)
    prog.kernel("local_sum")(dev.queue, 32, out, kiln.LocalMemory(8 * 4), local_size=8)
    np.testing.assert_array_equal(out.numpy(), [28.0] * 4)
    if dev.info["fp64"]:
        w = kiln.empty(2, "uint32", device=dev)  # 8 bytes: one ulong
        kiln.Program(WIDE, device=dev).kernel("wide")(dev.queue, 1, w, np.uint64(1 << 33),
                                                      np.float64(5.0))
        assert int(w.numpy().view(np.uint64)[0]) == (1 << 33) + 5
    with pytest.raises(kiln.NotFoundError, match="nope"):
        prog.kernel("nope")
    with pytest.raises(TypeError, match="4 arguments"):
        k(dev.queue, 4, ky)
    with pytest.raises(TypeError, match="kiln.Queue"):
        k(None, 4, ky, kx, 1.0, 4)
    with pytest.raises(TypeError):
        k(dev.queue)
    with pytest.raises(ValueError, match="> 0"):
        k(dev.queue, 0, ky, kx, 1.0, 4)
    with pytest.raises(ValueError, match="> 0"):
        k(dev.queue, (4, -1), ky, kx, 1.0, 4)
    with pytest.raises(ValueError):
        k(dev.queue, (1, 2, 3, 4), ky, kx, 1.0, 4)
    with pytest.raises(TypeError, match="argument 2"):
        k(dev.queue, 4, ky, kx, "s", 4)
    with pytest.raises(OverflowError):
        k(dev.queue, 4, ky, kx, 1.0, 1 << 40)
    with pytest.raises(kiln.InvalidSizeError):
        k(dev.queue, 4, ky, kx, np.float64(1.0), 4)  # 8 bytes for a float parameter
    with pytest.raises(ValueError, match="offset"):
        k(dev.queue, 4, ky[1:], kx, 1.0, 4)
    with pytest.raises(TypeError, match="keyword"):
        k(dev.queue, 4, ky, kx, 1.0, 4, bogus=1)
    with pytest.raises(ValueError):
        kiln.LocalMemory(0)
    with pytest.raises(TypeError):
        kiln.Kernel()
    with pytest.raises(TypeError):
        kiln.Event()


def test_no_crash_on_bad_input(dev):
    a = kiln.zeros((3, 4), device=dev)
    bad_inputs = [None, 1, "x", object(), np.zeros(3), [a]]
    ops = [lambda v: kiln.exp(v), lambda v: kiln._kiln.binary(0, a.reshape(-1), v, a.reshape(-1)),
           lambda v: kiln.matmul(a, v), lambda v: kiln.axpy(1.0, v, a),
           lambda v: kiln.softmax(v), lambda v: kiln.sum(v), lambda v: kiln.grad_norm([v]),
           lambda v: kiln.adamw_step(v, v, v, v, lr=0.1, step=1),
           lambda v: kiln._kiln.unary(0, v, v), lambda v: kiln._kiln.read(v, v, 0, 1),
           lambda v: kiln._kiln.dlpack(v, False, False),
           lambda v: kiln._kiln.from_capsule(dev.queue, v)]
    for op in ops:
        for v in bad_inputs:
            with pytest.raises((TypeError, ValueError, AttributeError, kiln.Error)):
                op(v)
    with pytest.raises(TypeError):
        kiln.Queue(None)
    with pytest.raises(TypeError):
        kiln.Program(123, device=dev)
    with pytest.raises(TypeError):
        kiln._kiln.ArrayBase()
    with pytest.raises(ValueError, match="negative"):
        kiln._kiln.read(a, np.empty(1, np.float32), -1, 1)
    with pytest.raises(ValueError):
        kiln.Queue(dev.context, False, -1)
    with pytest.raises(ValueError, match="contiguous"):
        kiln.exp(a.T)
    with pytest.raises(ValueError, match="row- nor column-major"):
        kiln.matmul(kiln.zeros((2, 3, 4), device=dev).T, a)
    with pytest.raises(ValueError):
        kiln._kiln.fail(0, "x")
    gc.collect()


def test_reference_cycles_free_in_order(dev):
    """Dropping the device before its arrays, programs, kernels and events
    is fine: each holds what it was made from."""
    d = kiln.Device(dev.info["selector"])
    a = kiln.zeros(8, device=d)
    k = kiln.Program(SRC, device=d).kernel("saxpy")
    ev = d.queue.marker()
    q = d.queue
    del d
    gc.collect()
    k(q, 8, a, a, 1.0, 8)
    ev.wait()
    del q
    np.testing.assert_array_equal(a.numpy(), np.zeros(8))


def test_program_cache(dev):
    """A second build of the same source on a new context comes from kiln's
    program cache (the meson test gives it its own KILN_CACHE_DIR)."""
    src = "__kernel void k_cache_probe(__global float *x) { x[get_global_id(0)] *= 3.0f; }"
    d1 = kiln.Device(dev.info["selector"])
    p1 = kiln.Program(src, device=d1)
    a = kiln.full(4, 1.0, device=d1)
    p1.kernel("k_cache_probe")(d1.queue, 4, a)  # PoCL saves the binary after a launch
    d1.sync()
    del p1
    gc.collect()
    d2 = kiln.Device(dev.info["selector"])
    p2 = kiln.Program(src, device=d2)
    b = kiln.full(4, 2.0, device=d2)
    p2.kernel("k_cache_probe")(d2.queue, 4, b)
    np.testing.assert_array_equal(b.numpy(), [6.0] * 4)
    import os
    if os.environ.get("KILN_CACHE", "1") not in ("0", "off", "no", "false"):
        assert p2.from_cache


def test_threads_own_queues(dev, rng):
    """Contexts, programs and arrays are shared between threads; each thread
    uses its own queue (the C library's rule)."""
    import threading
    x = rng.standard_normal(4096).astype(np.float32)
    shared = kiln.asarray(x, device=dev)
    dev.sync()
    errors, results = [], {}

    def work(t):
        try:
            q = dev.new_queue()
            out = kiln.empty(4096, queue=q)
            for _ in range(50):
                kiln.multiply(shared, float(t), out=out)
                kiln.exp(out, out=out)
            results[t] = out.numpy()
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(t,)) for t in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert not errors, errors
    for t in range(4):
        np.testing.assert_allclose(results[t], np.exp(x.astype(np.float64) * t), rtol=1e-5)
