"""kiln from Python: devices, arrays, the op library and your own kernels.

    import numpy as np, kiln
    x = kiln.asarray(np.arange(8, dtype=np.float32))   # on the default device
    y = kiln.exp(x)                                       # asynchronous
    print(y.numpy())                                      # waits, copies back

Every op is enqueued on the queue of its output array and returns at once;
``numpy()``, ``copy_to_host()``, ``sync()`` and ``Event.wait()`` wait.
Failures raise ``kiln.Error`` subclasses carrying the C library's status
and message (``kiln_last_error()``). See docs/python.md.
"""

import atexit as _atexit
import builtins as _builtins
import logging as _logging
import operator as _operator
import threading as _threading

import numpy as _np

from . import _kiln
from ._kiln import (  # noqa: F401  (the error hierarchy and the core types)
    Error, InvalidArgumentError, NullPointerError, InvalidSizeError,
    OutOfRangeError, OutOfHostMemoryError, OutOfDeviceMemoryError,
    NoPlatformError, NoDeviceError, SelectorSyntaxError, BuildFailedError,
    NotFoundError, BusyError, UnsupportedError, ShapeMismatchError, IoError,
    CorruptError, InvalidStateError, OpenclError, ExecFailedError, CommError,
    WrongContextError, Context, Queue, Event, Kernel,
)

__version__ = "0.2.0"

# Friendlier names for two of the generated classes.
BuildError = BuildFailedError
OpenCLError = OpenclError

float32, float16, bfloat16, int32, uint32 = ("float32", "float16", "bfloat16",
                                             "int32", "uint32")
# Host copies of at least this many bytes are placed at the device memory's
# offset within a page (Array._host_empty).
_ALIGN_MIN_BYTES = 1 << 20
_DTYPE_CODE = {"float32": 0, "float16": 1, "bfloat16": 2, "int32": 3, "uint32": 4}
_DTYPE_NAME = {v: k for k, v in _DTYPE_CODE.items()}
_ALIASES = {"f32": "float32", "f16": "float16", "bf16": "bfloat16",
            "i32": "int32", "u32": "uint32", "half": "float16",
            "float": "float32"}
# numpy dtype of the host side of each kiln dtype (bfloat16: raw bits).
_NP = {0: _np.dtype(_np.float32), 1: _np.dtype(_np.float16),
       2: _np.dtype(_np.uint16), 3: _np.dtype(_np.int32),
       4: _np.dtype(_np.uint32)}
# numpy dtypes asarray takes and what they become.
_FROM_NP = {"float32": 0, "float16": 1, "int32": 3, "uint32": 4,
            "float64": 0, "int64": 3, "uint64": 4}

kDLCPU = 1
kDLOpenCL = 4


def dtype_code(dtype):
    """The kiln_dtype value of a dtype name ('float32', 'bf16', ...) or numpy dtype."""
    if isinstance(dtype, str):
        name = _ALIASES.get(dtype, dtype)
        if name in _DTYPE_CODE:
            return _DTYPE_CODE[name]
    else:
        try:
            name = _np.dtype(dtype).name
        except TypeError:
            name = None
        if name in ("float32", "float16", "int32", "uint32"):
            return _DTYPE_CODE[name]
    raise TypeError("dtype %r is not one of kiln's: float32, float16, bfloat16, "
                    "int32, uint32" % (dtype,))


def version():
    """The version of the libkiln actually loaded ("0.2.0")."""
    return _kiln.version()


def last_error():
    """(status name, message) of the last failure of a kiln call on this thread."""
    return _kiln.last_error()


def trace_diagnostic():
    """What kiln's trace and log said that nobody received, or "":
    ``kiln_trace_diagnostic()``: why ``KILN_TRACE`` writes no trace, then,
    while the log is not sent to Python (``log_to_python(False)``), the last
    four messages kiln kept, one per line after their level."""
    return _kiln.trace_diagnostic()


# kiln_log_level -> logging's levels.
_LOG_LEVELS = {1: _logging.ERROR, 2: _logging.WARNING, 3: _logging.INFO,
               4: _logging.DEBUG}
_logger = _logging.getLogger("kiln")


def _log_sink(level, text):
    _logger.log(_LOG_LEVELS.get(level, _logging.WARNING), text)


def log_to_python(on=True):
    """Send kiln's log to Python's ``logging`` (logger "kiln": kiln's error,
    warn, info and debug as ERROR, WARNING, INFO, DEBUG), or with False
    back to kiln's default (messages kept for ``trace_diagnostic()``).
    On from import. ``KILN_LOG`` chooses what kiln says (warn and error
    when unset), the logger what is shown. Messages logged on other threads
    (OpenCL callbacks) are delivered on the main thread at its next Python
    instruction, and at exit. Returns whether it was on."""
    return _kiln._log_bridge(_log_sink if on else None)


log_to_python(True)
# Runs before logging's own exit hook (registered earlier, atexit is last
# in, first out): delivers what is queued, then leaves kiln without Python.
_atexit.register(_kiln._log_at_exit)


def devices(selector=None):
    """Every device kiln sees (or those `selector` takes), as dicts with the
    facts of ``kiln info --json``'s kiln view: name, vendor, versions,
    stable_id, profile, selector ('P:D'), type, compute_units, memory sizes,
    fp16, fp64, subgroups, quirks, index (position in kiln's list)."""
    return _kiln.devices(selector)


def explain(selector=None):
    """[(device name, taken, reason)] for every device under `selector`
    (None: KILN_DEVICE, else the default rule), like ``kiln info --explain``."""
    return _kiln.explain(selector)


class LocalMemory:
    """A ``__local`` kernel argument of `nbytes` bytes."""

    def __init__(self, nbytes):
        nbytes = int(nbytes)
        if nbytes <= 0:
            raise ValueError("LocalMemory needs nbytes > 0, got %d" % nbytes)
        self._kiln_local_bytes = nbytes


class Device:
    """A device with a kiln context and a default queue.

    ``Device()`` takes the first device of ``KILN_DEVICE`` (else a GPU, else
    the CPU); ``Device("pocl")``, ``Device("gpu,fp16")``, ``Device("0:1")``
    use kiln's selector grammar. ``with kiln.Device(...) as dev:`` closes it
    at the end (waits for its queue and refuses new work); memory goes back
    when the last Array of it goes. Arrays keep their device alive.
    """

    def __init__(self, selector=None, *, profile=None, no_cache=False, profiling=False):
        self.context = Context(selector, profile, no_cache)
        self.queue = Queue(self.context, profiling)

    @property
    def info(self):
        """Device facts (dict; see devices())."""
        return self.context.info

    @property
    def name(self):
        """The device's name."""
        return self.context.info["name"]

    @property
    def index(self):
        """Position in kiln's device list (the DLPack device index)."""
        return self.context.index

    def new_queue(self, profiling=False, pool_limit=0):
        """Another in-order queue of this device (with its own memory pool)."""
        return Queue(self.context, profiling, pool_limit)

    def sync(self):
        """Wait for everything enqueued on the default queue."""
        self.queue.sync()

    def tuning_info(self, op):
        """Which tuned parameters op runs with on this device
        (kiln_tuning_get_info): a dict of source ('set', 'file', 'database',
        'profile', ...), params, figures, path, ignored (why a tuning file
        or database row is not used), database and used (whether the
        space's kernels run here). op: 'gemm', 'gemm_cpu', 'gemm_mma',
        'transpose', 'transpose_cpu', 'reduce', 'elementwise'."""
        return self.context.tuning_info(op)

    def close(self):
        """Wait for the default queue, close it and refuse new work."""
        if not self.queue.closed:
            self.queue.sync()
        self.queue.close()
        self.context.close()

    @property
    def closed(self):
        """Whether close() was called."""
        return self.context.closed

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __repr__(self):
        return "<kiln.Device %d %r (%s)>" % (self.index, self.name, self.info["profile"])


_default = None
_default_lock = _threading.Lock()


def default_device():
    """The device used when none is given: Device() made at first use
    (KILN_DEVICE honoured)."""
    global _default
    with _default_lock:
        if _default is None or _default.closed:
            _default = Device()
        return _default


def _queue_of(device=None, queue=None):
    if queue is not None:
        if not isinstance(queue, Queue):
            raise TypeError("queue must be a kiln.Queue")
        return queue
    if device is None:
        return default_device().queue
    if isinstance(device, Device):
        return device.queue
    if isinstance(device, str):
        raise TypeError("pass a kiln.Device, not a selector string, "
                        "so that its context is shared: kiln.Device(%r)" % device)
    raise TypeError("device must be a kiln.Device")


def _shape_tuple(shape):
    if isinstance(shape, (int, _np.integer)):
        return (int(shape),)
    if isinstance(shape, (str, bytes)):
        raise TypeError("shape must be an int or a sequence of ints, not %s" % type(shape).__name__)
    return tuple(_operator.index(s) for s in shape)


class Array(_kiln.ArrayBase):
    """A device array: a buffer of the device, an offset, a shape, strides in
    elements (C-contiguous, or views: transposes and row slices) and a
    dtype; work on it runs on its ``queue``. Made by kiln.asarray, empty,
    zeros, full, from_dlpack and the ops; not constructed directly.
    It keeps its device (context) alive."""

    __slots__ = ()

    @property
    def dtype(self):
        """'float32', 'float16', 'bfloat16', 'int32' or 'uint32'."""
        return _DTYPE_NAME[self._dtype_code]

    @property
    def nbytes(self):
        """size * itemsize."""
        return self.size * self.itemsize

    @property
    def device(self):
        """The kiln Context the array lives in (see Device.context)."""
        return self.context

    def __len__(self):
        if self.ndim == 0:
            raise TypeError("len() of a 0-d array")
        return self.shape[0]

    def __repr__(self):
        return "<kiln.Array shape=%s dtype=%s on %r>" % (
            self.shape, self.dtype, self.context.info["name"])

    # -- views --------------------------------------------------------------
    @property
    def T(self):
        """The transpose as a view (reversed shape and strides): a row-major
        matrix's T is column-major, which matmul takes as is."""
        return self._view(self.offset, self.shape[::-1], self.strides[::-1])

    def reshape(self, *shape):
        """A view of another shape (the array must be contiguous); one
        entry may be -1."""
        if len(shape) == 1 and not isinstance(shape[0], (int, _np.integer)):
            shape = tuple(shape[0])
        shape = [int(s) for s in shape]
        if shape.count(-1) > 1:
            raise ValueError("at most one -1 in a shape")
        if -1 in shape:
            rest = 1
            for s in shape:
                if s != -1:
                    rest *= s
            if rest == 0 or self.size % rest:
                raise ValueError("cannot reshape %s into %s" % (self.shape, tuple(shape)))
            shape[shape.index(-1)] = self.size // rest
        n = 1
        for s in shape:
            n *= s
        if n != self.size:
            raise ValueError("cannot reshape size %d into %s" % (self.size, tuple(shape)))
        if not self.is_contiguous:
            raise ValueError("reshape needs a contiguous array; kiln.copy() it first")
        strides, acc = [], 1
        for s in reversed(shape):
            strides.append(acc)
            acc *= s
        return self._view(self.offset, shape, strides[::-1])

    def with_queue(self, queue):
        """The same data with its work on another queue of its context;
        that queue's later commands follow what was enqueued on the data's
        queue so far."""
        return self._view(self.offset, self.shape, self.strides, queue)

    def __getitem__(self, key):
        """Basic slicing along the first axes with step 1, and ints."""
        if not isinstance(key, tuple):
            key = (key,)
        if len(key) > self.ndim:
            raise IndexError("too many indices for a %d-d array" % self.ndim)
        offset = self.offset
        shape, strides = [], []
        for axis, k in enumerate(key):
            n, st = self.shape[axis], self.strides[axis]
            if isinstance(k, (int, _np.integer)):
                k = int(k)
                if k < -n or k >= n:
                    raise IndexError("index %d out of range for axis %d of size %d" % (k, axis, n))
                offset += (k % n) * st
            elif isinstance(k, slice):
                start, stop, step = k.indices(n)
                if step != 1:
                    raise IndexError("kiln views take slices of step 1")
                length = max(0, stop - start)
                offset += start * st if length else 0
                shape.append(length)
                strides.append(st)
            else:
                raise TypeError("kiln arrays take int and slice indices, got %r" % (k,))
        shape += list(self.shape[len(key):])
        strides += list(self.strides[len(key):])
        return self._view(offset, shape, strides)

    def __setitem__(self, key, value):
        view = self[key]
        if isinstance(value, Array):
            copy(value, out=view)
        elif _np.isscalar(value):
            fill(view, value)
        else:
            view.copy_from_host(value)

    # -- host transfers ------------------------------------------------------
    def _host_dtype(self):
        return _NP[self._dtype_code]

    def numpy(self):
        """A new numpy array with the contents (waits for the work before
        it). bfloat16 comes back as float32 (exactly: widening is exact);
        float16 as numpy.float16."""
        if self.size == 0:
            raw = _np.empty(self.shape, self._host_dtype())
        elif self.is_contiguous:
            raw = _kiln.read_new(self, self.offset, self.size, self._host_empty).reshape(self.shape)
        else:
            raw = _np.empty(self.shape, self._host_dtype())
            lo, span = self._span()
            flat = _kiln.read_new(self, lo, span, self._host_empty)
            isz = flat.itemsize
            raw[...] = _np.lib.stride_tricks.as_strided(
                flat[self.offset - lo:], self.shape, [s * isz for s in self.strides])
        if self._dtype_code == 2:
            return _bf16_to_f32(raw)
        return raw

    def _host_empty(self, page_offset, count):
        """A new 1-D host array of count elements for a copy (numpy()).
        A large one starts at page_offset within its 4 KiB page (where the
        data lies on a CPU device; -1: anywhere), since PoCL's copies into
        new memory at another offset took up to twice as long."""
        dt = self._host_dtype()
        n = dt.itemsize * count
        if page_offset < 0 or n < _ALIGN_MIN_BYTES:
            return _np.empty(count, dt)
        raw = _np.empty(n + 4096, _np.uint8)
        k = (page_offset - raw.__array_interface__["data"][0]) % 4096
        return raw[k:k + n].view(dt)

    def __array__(self, dtype=None, copy=None):
        a = self.numpy()
        return a if dtype is None else a.astype(dtype)

    def _span(self):
        if self.size == 0:
            return self.offset, 0
        hi = self.offset + 1 + _builtins.sum((n - 1) * s for n, s in zip(self.shape, self.strides))
        return self.offset, hi - self.offset

    def _check_host(self, host, writable):
        if not isinstance(host, _np.ndarray):
            raise TypeError("expected a numpy.ndarray, got %s" % type(host).__name__)
        want = self._host_dtype()
        if host.dtype != want:
            raise TypeError("a %s array needs a host array of %s, got %s"
                            % (self.dtype, want, host.dtype))
        if host.size != self.size:
            raise ValueError("host array has %d elements, the array %d" % (host.size, self.size))
        if not host.flags.c_contiguous or (writable and not host.flags.writeable):
            raise ValueError("the host array must be C-contiguous%s"
                             % (" and writable" if writable else ""))
        if not self.is_contiguous:
            raise ValueError("transfers into or out of a view need a contiguous array; "
                             "use numpy() or kiln.copy()")

    def copy_to_host(self, out=None):
        """Copy into `out` (a C-contiguous numpy array of the host dtype and
        size; a float32 one for bfloat16 converts) and return it; a new
        array like numpy() when out is None."""
        if out is None:
            return self.numpy()
        if self._dtype_code == 2 and isinstance(out, _np.ndarray) and out.dtype == _np.float32:
            bits = _np.empty(out.shape, _np.uint16)
            self._check_host(bits, True)
            _kiln.read(self, bits, self.offset, self.size)
            _kiln.convert(bits, out, 2)
            return out
        self._check_host(out, True)
        _kiln.read(self, out, self.offset, self.size)
        return out

    def copy_to_host_async(self, out, wait=None):
        """Start copying into `out` (host dtype, C-contiguous; bfloat16 as
        uint16 bits) and return the Event; `out` is held until the event
        is waited for or dropped."""
        self._check_host(out, True)
        return _kiln.read(self, out, self.offset, self.size, False, wait)

    def copy_from_host(self, src):
        """Copy host data (anything numpy.asarray takes, of the array's
        size; floats round for float16/bfloat16) into the array; waits."""
        host = _host_data(src, self._dtype_code).reshape(-1)
        self._check_host(host, False)
        _kiln.write(self, host, True)

    def copy_from_host_async(self, src, wait=None):
        """Start copying `src` (a C-contiguous numpy array of the host dtype)
        into the array; returns the Event, which holds `src` until waited for."""
        self._check_host(src, False)
        return _kiln.write(self, src, False, wait, True)

    # -- DLPack ---------------------------------------------------------------
    def __dlpack_device__(self):
        """(kDLOpenCL = 4, the device's index in kiln's device list)."""
        return (kDLOpenCL, self.context.index)

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        """A DLPack capsule. On the device (default): data is the cl_mem,
        byte_offset the view's offset, after the array's queue has finished
        (stream is not used: OpenCL has no DLPack stream). dl_device=(kDLCPU,
        0): a host copy, flagged IS_COPIED in a versioned capsule (so
        ``numpy.from_dlpack(arr, device="cpu")`` works on NumPy >= 2.1). A
        versioned capsule (DLPack 1.0) when max_version >= (1, 0)."""
        to_cpu = False
        if dl_device is not None:
            kind, index = dl_device
            if kind == kDLCPU:
                to_cpu = True
            elif kind != kDLOpenCL or index != self.context.index:
                raise BufferError("kiln exports to the CPU (1, 0) or its own device (4, %d), "
                                  "not %r" % (self.context.index, tuple(dl_device)))
        if to_cpu and copy is False:
            raise BufferError("a kiln array reaches the CPU only as a copy (copy=False asked)")
        src = self
        if copy and not to_cpu:
            src = _copy_new(self)
        versioned = max_version is not None and tuple(max_version)[0] >= 1
        return _kiln.dlpack(src, to_cpu, versioned)

    def host(self):
        """An object whose __dlpack__ gives a host copy (device CPU): for
        consumers that refuse OpenCL capsules and take no dl_device, e.g.
        ``numpy.from_dlpack(arr.host())`` on NumPy < 2.1 or
        ``torch.from_dlpack(arr.host())`` (bfloat16 included)."""
        return _HostExport(self)


class _HostExport:
    __slots__ = ("_array",)

    def __init__(self, array):
        self._array = array

    def __dlpack_device__(self):
        return (kDLCPU, 0)

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        versioned = max_version is not None and tuple(max_version)[0] >= 1
        return _kiln.dlpack(self._array, True, versioned)


_kiln.set_array_class(Array)


def _bf16_to_f32(bits):
    out = _np.empty(bits.shape, _np.float32)
    _kiln.convert(_np.ascontiguousarray(bits), out, 2)
    return out


def _host_data(obj, code):
    """obj as a C-contiguous numpy array of the host dtype of kiln dtype code."""
    a = _np.asarray(obj)
    if code == 2:
        if a.dtype == _np.uint16:
            return _np.ascontiguousarray(a)
        f = _np.ascontiguousarray(a, dtype=_np.float32)
        bits = _np.empty(f.shape, _np.uint16)
        _kiln.convert(f, bits, 0)
        return bits
    return _np.ascontiguousarray(a, dtype=_NP[code])


def empty(shape, dtype="float32", *, device=None, queue=None):
    """An uninitialised array (memory from the queue's pool)."""
    return _kiln.empty(_queue_of(device, queue), _shape_tuple(shape), dtype_code(dtype))


def tuning_knobs(op):
    """op's tuning parameter space (kiln_tuning_get_knob): a list of
    (name, description, values tried) tuples; NotFoundError for an op
    without one."""
    return _kiln.tuning_knobs(op)


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


class Program(_kiln.Program):
    """OpenCL C built for a device through kiln's program cache:
    ``kiln.Program(source, device=None, options=None).kernel("name")``.
    A build that fails raises BuildError whose .build_log is the full log
    (the message has an excerpt)."""

    def __new__(cls, source, device=None, options=None):
        if device is None:
            device = default_device()
        ctx = device.context if isinstance(device, Device) else device
        return super().__new__(cls, ctx, source, options)



class Packed(_kiln.Packed):
    """A matmul operand kept packed (kiln_packed): a layer's weights packed
    once and read by every matmul until they change.

    ``wp = kiln.Packed(dev, w, role="b")`` allocates it for the shape, dtype
    (float32, float16, bfloat16) and layout of w, a 2-D kiln.Array (row-
    or column-major: ``w.T`` of a row-major (out, in) weight is fine); w's
    data is not read. ``wp.pack(w)`` copies w's data in (on w's queue, or
    ``queue=``; ``wait=``, ``event=True`` as for ops), again whenever w
    changes. ``kiln.matmul(x, wp)`` then takes it as b (role "a": as a),
    with results bit for bit those of ``kiln.matmul(x, w)``. A matmul with
    it before the first pack raises InvalidStateError; another shape, dtype
    or layout ShapeMismatchError; another device's queue WrongContextError.
    ``close()`` (or ``with``) releases it at once; GEMMs already enqueued
    complete."""

    def __new__(cls, device, src, role="b"):
        if device is None:
            device = default_device()
        ctx = device.context if isinstance(device, Device) else device
        if role not in ("a", "b"):
            raise ValueError("role must be 'a' or 'b' (matmul's operand), got %r" % (role,))
        return super().__new__(cls, ctx, src, 0 if role == "a" else 1)

    @property
    def dtype(self):
        """The dtype name ('float32', 'float16', 'bfloat16')."""
        return _DTYPE_NAME[self._dtype_code]

    @property
    def ndim(self):
        """2: one matrix (shared by every entry of a batched matmul)."""
        return 2

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __repr__(self):
        return "<kiln.Packed %s %s role %r%s>" % (
            self.shape, self.dtype, self.role, " closed" if self.closed else "")

from ._ops import *  # noqa: E402,F401,F403
from ._ops import __all__ as _ops_all  # noqa: E402
from ._ops import copy, cast, fill, _copy_new  # noqa: E402,F401

__all__ = [
    "Error", "InvalidArgumentError", "NullPointerError", "InvalidSizeError",
    "OutOfRangeError", "OutOfHostMemoryError", "OutOfDeviceMemoryError",
    "NoPlatformError", "NoDeviceError", "SelectorSyntaxError", "BuildFailedError",
    "BuildError", "NotFoundError", "BusyError", "UnsupportedError",
    "ShapeMismatchError", "IoError", "CorruptError", "InvalidStateError",
    "OpenclError", "OpenCLError", "ExecFailedError", "CommError", "WrongContextError",
    "Context", "Queue", "Event", "Kernel", "Program", "LocalMemory", "Device",
    "Array", "default_device", "devices", "explain", "version", "last_error",
    "dtype_code", "empty", "empty_like", "zeros", "full", "asarray", "from_dlpack",
    "sync", "wait_all", "float32", "float16", "bfloat16", "int32", "uint32",
    "kDLCPU", "kDLOpenCL", "tuning_knobs", "pinned_empty", "Packed",
    "trace_diagnostic", "log_to_python",
] + list(_ops_all)

