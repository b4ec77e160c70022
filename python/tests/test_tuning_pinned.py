"""Tuning information (kiln_tuning_get_info, kiln_tuning_get_knob) and
pinned host memory (kiln_pinned) from Python."""

import gc

import numpy as np
import pytest

import kiln


def family_gemm(dev):
    """The GEMM space whose kernels the device runs: 'gemm' (GPU family) or
    'gemm_cpu' (PoCL; rusticl's llvmpipe, a CPU, runs the GPU family)."""
    return "gemm" if dev.tuning_info("gemm")["params"] else "gemm_cpu"


def test_tuning_info(dev):
    fields = {"source", "params", "figures", "path", "ignored", "database", "used"}
    for op in ("gemm", "gemm_cpu", "transpose", "reduce", "elementwise"):
        info = dev.tuning_info(op)
        assert set(info) == fields and info["source"], (op, info)
    op = family_gemm(dev)
    info = dev.tuning_info(op)
    # The device's own family runs the space's kernels: parameters in effect.
    assert "=" in info["params"] and "family" not in info["source"], info
    other = dev.tuning_info("gemm_cpu" if op == "gemm" else "gemm")
    assert other["params"] == "" and "family" in other["source"], other
    with pytest.raises(kiln.NotFoundError, match="no_such_op"):
        dev.tuning_info("no_such_op")
    with pytest.raises(TypeError):
        dev.tuning_info(None)


def test_tuning_knobs(dev):
    knobs = kiln.tuning_knobs("gemm")
    assert knobs and all(isinstance(n, str) and isinstance(w, str) and len(v) >= 1
                         and list(v) == sorted(v) for n, w, v in knobs)
    op = family_gemm(dev)
    params = dev.tuning_info(op)["params"]
    assert {kv.split("=")[0] for kv in params.split()} == {n for n, _, _ in kiln.tuning_knobs(op)}
    with pytest.raises(kiln.NotFoundError):
        kiln.tuning_knobs("softmax")


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16", "int32", "uint32"])
def test_pinned_round_trip(dev, rng, dtype):
    h = kiln.pinned_empty((37, 5), dtype, device=dev)
    assert h.shape == (37, 5) and h.flags.writeable and h.flags.c_contiguous
    src = (rng.standard_normal((37, 5)) * 100).astype(h.dtype) if h.dtype.kind == "f" else \
        rng.integers(0, 1000, (37, 5)).astype(h.dtype)
    h[...] = src
    a = kiln.asarray(h, dtype=dtype, device=dev)
    out = kiln.pinned_empty((37, 5), dtype, device=dev)
    ev = a.copy_to_host_async(out)
    ev.wait()
    np.testing.assert_array_equal(out, src)
    a.copy_from_host(h)
    a.copy_to_host(out=out) if dtype != "bfloat16" else None
    np.testing.assert_array_equal(out, src)


def test_pinned_lifetime_and_errors(dev):
    h = kiln.pinned_empty(1 << 20, device=dev)
    view = h[10:20]
    del h
    gc.collect()
    view[:] = 3.0  # the memory lives while a view does
    assert view.sum() == 30.0
    base = view.base
    while not isinstance(base, kiln._kiln.Pinned):
        base = base.base if hasattr(base, "base") else base.obj
    assert base.nbytes == 4 << 20 and base.queue is dev.queue
    assert kiln.pinned_empty(0, device=dev).shape == (0,)
    with pytest.raises(ValueError):
        kiln.pinned_empty(-1, device=dev)
    with pytest.raises(ValueError):
        kiln._kiln.Pinned(dev.queue, 0)
    with pytest.raises(TypeError):
        kiln._kiln.Pinned(None, 16)
    with pytest.raises(TypeError):
        kiln.pinned_empty(4, device="pocl")
    q = dev.new_queue()
    q.close()
    with pytest.raises(kiln.InvalidStateError):
        kiln.pinned_empty(4, queue=q)
    for _ in range(200):
        kiln.pinned_empty(4096, device=dev)
    gc.collect()
