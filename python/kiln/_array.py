"""kiln.Array: a device array (views, host transfers, DLPack) and the
conversion of host data to its host dtype."""

import builtins as _builtins

import numpy as _np

from . import _kiln
from ._dtype import _DTYPE_NAME, _NP
from ._ops import copy, fill, _copy_new

# Host copies of at least this many bytes are placed at the device memory's
# offset within a page (Array._host_empty).
_ALIGN_MIN_BYTES = 1 << 20

kDLCPU = 1
kDLOpenCL = 4


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
