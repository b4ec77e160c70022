"""Devices: the device list, kiln.Device (a context and its default queue),
the default device and the queue a call runs on."""

import threading as _threading

from . import _kiln
from ._kiln import Context, Queue


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


def tuning_knobs(op):
    """op's tuning parameter space (kiln_tuning_get_knob): a list of
    (name, description, values tried) tuples; NotFoundError for an op
    without one."""
    return _kiln.tuning_knobs(op)


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
