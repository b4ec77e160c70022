"""kiln.Packed: a matmul operand kept packed (kiln_packed)."""

from . import _kiln
from ._dtype import _DTYPE_NAME
from ._device import Device, default_device


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
