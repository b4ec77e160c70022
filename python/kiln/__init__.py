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

# The package's parts, each a private module (they import kiln._kiln and
# one another, never this file).
from ._dtype import float32, float16, bfloat16, int32, uint32, dtype_code
from ._log import version, last_error, trace_diagnostic, log_to_python
from ._log import _log_sink  # noqa: F401  (tests call it)
from ._device import devices, explain, tuning_knobs, Device, default_device
from ._array import Array, kDLCPU, kDLOpenCL
from ._create import (empty, pinned_empty, empty_like, zeros, full, asarray,
                      from_dlpack, sync, wait_all)
from ._program import LocalMemory, Program
from ._packed import Packed
from ._ops import *  # noqa: F401,F403
from ._ops import __all__ as _ops_all

# Named as the package's own (repr, help, pickle), as before the split.
for _obj in (dtype_code, version, last_error, trace_diagnostic, log_to_python, devices,
             explain, tuning_knobs, Device, default_device, Array, empty, pinned_empty,
             empty_like, zeros, full, asarray, from_dlpack, sync, wait_all, LocalMemory,
             Program, Packed):
    _obj.__module__ = __name__
del _obj

log_to_python(True)
# Runs before logging's own exit hook (registered earlier, atexit is last
# in, first out): delivers what is queued, then leaves kiln without Python.
_atexit.register(_kiln._log_at_exit)

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
