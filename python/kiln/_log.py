"""What the loaded libkiln says: its version, its last error, its trace
diagnostic and its log (sent to Python's logging)."""

import logging as _logging

from . import _kiln


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
