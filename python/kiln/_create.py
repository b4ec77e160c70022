"""Making arrays (empty, zeros, full, asarray, from_dlpack), pinned host
memory (pinned_empty), and waiting for queues and events (sync, wait_all)."""

import operator as _operator

import numpy as _np

from . import _kiln
from ._kiln import Queue
from ._dtype import dtype_code, _NP, _FROM_NP
from ._device import Device, default_device, _queue_of
from ._array import Array, _host_data
from ._ops import cast, fill


def _shape_tuple(shape):
    if isinstance(shape, (int, _np.integer)):
        return (int(shape),)
    if isinstance(shape, (str, bytes)):
        raise TypeError("shape must be an int or a sequence of ints, not %s" % type(shape).__name__)
    return tuple(_operator.index(s) for s in shape)


def empty(shape, dtype="float32", *, device=None, queue=None):
    """An uninitialised array (memory from the queue's pool)."""
    return _kiln.empty(_queue_of(device, queue), _shape_tuple(shape), dtype_code(dtype))


def pinned_empty(shape, dtype="float32", *, device=None, queue=None):
    """An uninitialised numpy array in pinned (page-locked) host memory of
    the device (kiln_pinned): transfers from and into it (asarray,
    copy_from_host, copy_to_host(out=...)) can run by DMA on GPUs. The
    memory is freed when the array (and every view of it) is gone. dtype:
    a kiln dtype (bfloat16 as its uint16 bits)."""
    q = _queue_of(device, queue)
    shape = _shape_tuple(shape)
    if any(n < 0 for n in shape):
        raise ValueError("negative dimension in shape %r" % (shape,))
    dt = _NP[dtype_code(dtype)]
    n = dt.itemsize * _np.prod(shape, dtype=_np.int64)
    mem = _kiln.Pinned(q, int(n) if n else dt.itemsize)
    return _np.frombuffer(mem, dt, count=int(n) // dt.itemsize).reshape(shape)


def empty_like(a, dtype=None):
    """An uninitialised array of a's shape (and dtype), on a's queue."""
    return _kiln.empty(a.queue, a.shape, a._dtype_code if dtype is None else dtype_code(dtype))


def zeros(shape, dtype="float32", *, device=None, queue=None):
    """An array of zeros."""
    a = empty(shape, dtype, device=device, queue=queue)
    if a.size:
        fill(a, 0)
    return a


def full(shape, value, dtype="float32", *, device=None, queue=None):
    """An array filled with value (rounded to dtype)."""
    a = empty(shape, dtype, device=device, queue=queue)
    if a.size:
        fill(a, value)
    return a


def asarray(obj, dtype=None, *, device=None, queue=None, blocking=True):
    """A device array from numpy data (or anything numpy.asarray takes).

    dtype: kiln dtype of the result; None keeps float32, float16, int32 and
    uint32, and narrows float64 to float32, int64 to int32 and uint64 to
    uint32. 'bfloat16' rounds floats to nearest even (as the device does);
    uint16 input is taken as raw bfloat16 bits. A kiln.Array is returned as
    is when it already lives on that queue with that dtype.
    blocking=False starts the upload and returns (array, event); the source
    is held until the event completes."""
    if isinstance(obj, Array):
        q = obj.queue if queue is None and device is None else _queue_of(device, queue)
        if obj.context is not q.context:
            _kiln.fail(-21, "asarray: the array belongs to another context than the target "
                       "device; copy it through the host (numpy())")
        a = obj if obj.queue is q else obj.with_queue(q)
        if dtype is None or dtype_code(dtype) == obj._dtype_code:
            return a
        return cast(a, dtype)
    q = _queue_of(device, queue)
    a = _np.asarray(obj)
    if dtype is None:
        if a.dtype.name not in _FROM_NP:
            raise TypeError("numpy dtype %s has no kiln counterpart (float32, float16, "
                            "bfloat16, int32, uint32)" % a.dtype)
        code = _FROM_NP[a.dtype.name]
    else:
        code = dtype_code(dtype)
    host = _host_data(a, code)
    out = _kiln.empty(q, host.shape, code)
    if not blocking:
        return out, _kiln.write(out, host, False, None, True)
    if host.size:
        _kiln.write(out, host, True)
    return out


def from_dlpack(x, *, device=None, queue=None):
    """An Array from a DLPack producer (an object with __dlpack__) or a
    capsule. CPU tensors (NumPy, PyTorch CPU, any strides) are copied to the
    device; OpenCL tensors of the same context share memory (a cl_mem of
    another context raises WrongContextError). dtypes: float32, float16,
    bfloat16, int32, uint32."""
    if isinstance(x, Array):
        if device is None and queue is None:
            return x
        q = _queue_of(device, queue)
        if x.context is not q.context:
            _kiln.fail(-21, "from_dlpack: the array belongs to another context than the "
                       "target device; copy it through the host")
        return x.with_queue(q)
    q = _queue_of(device, queue)
    if hasattr(x, "__dlpack__"):
        try:
            cap = x.__dlpack__(max_version=(1, 0))
        except TypeError:
            cap = x.__dlpack__()
    else:
        cap = x
    return _kiln.from_capsule(q, cap)


def sync(*items):
    """Wait for the queues of the given arrays, queues or devices (the
    default device when none)."""
    if not items:
        default_device().sync()
        return
    seen = []
    for it in items:
        q = it.queue if isinstance(it, (Array, Device)) else it
        if not isinstance(q, Queue):
            raise TypeError("sync takes kiln.Array, kiln.Queue or kiln.Device, got %s"
                            % type(it).__name__)
        if not any(q is s for s in seen):
            seen.append(q)
            q.sync()


def wait_all(events):
    """Wait for every kiln.Event of a sequence (the first failure raises)."""
    _kiln.wait_all(list(events))
