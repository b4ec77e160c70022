"""Your own kernels: kiln.Program (OpenCL C through kiln's program cache)
and LocalMemory (a __local kernel argument)."""

from . import _kiln
from ._device import Device, default_device


class LocalMemory:
    """A ``__local`` kernel argument of `nbytes` bytes."""

    def __init__(self, nbytes):
        nbytes = int(nbytes)
        if nbytes <= 0:
            raise ValueError("LocalMemory needs nbytes > 0, got %d" % nbytes)
        self._kiln_local_bytes = nbytes


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
