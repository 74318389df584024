"""What the command line checks before the work, and how it ends when stopped.

A command that trains for minutes and then fails to write its result has
lost the result. So every output file is checked when the arguments are read
(:func:`dezero_mini.atomic.output_target_problem`, through the argument types
of :mod:`dezero_mini.arguments`), and the commands refuse sizes that cannot
fit in :func:`machine_memory` with an estimate, before anything is allocated
(``train``'s ``--hidden``, ``memory``'s ``--batches``).

And however a command ends, it ends with one line, never a traceback:
SIGTERM becomes :class:`Terminated` (an exception, so that ``finally``
blocks run and a file being written is left as it was: exit 143, as a
process killed by SIGTERM reports to a shell), a closed standard output
(``... | head -2``) ends the command quietly with exit 141 as ``yes | head``
does, and a MemoryError anywhere becomes one line and exit 1.
"""
import contextlib
import os
import signal
import sys
import threading

#: Exit statuses of the usual Unix endings: 128 + the signal's number.
EXIT_SIGPIPE = 128 + 13
EXIT_SIGTERM = 128 + 15


class Terminated(BaseException):
    """SIGTERM arrived: raised in the main thread so that the command unwinds
    (temporary files removed, old files intact) and exits 143. A
    BaseException, like KeyboardInterrupt, so that ``except Exception`` in
    the middle of the work does not swallow it."""


def _raise_terminated(signum, frame):
    raise Terminated()


@contextlib.contextmanager
def sigterm_raises():
    """Within the block, SIGTERM raises :class:`Terminated` in the main thread
    (outside the main thread, signals cannot be handled: nothing changes)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGTERM, _raise_terminated)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def silence_closed_stdout():
    """After a BrokenPipeError on stdout, or a write that the disk refused
    (``> /dev/full``): point file descriptor 1 at the null device so that Python's own flush at exit does not fail (and print a
    second error). Only when sys.stdout is the process's real stdout."""
    with contextlib.suppress(OSError, ValueError, AttributeError):
        if sys.stdout.fileno() != 1:
            return
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 1)
        os.close(devnull)


# --- Sizes ----------------------------------------------------------------------------
def machine_memory():
    """The bytes of memory of this machine (physical), or None when unknown."""
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None


def format_size(nbytes):
    """``76 GB``, ``512 MB``: a size for a message, in decimal units."""
    for unit, scale in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6)):
        if nbytes >= scale:
            return f"{nbytes / scale:,.0f} {unit}"
    return f"{nbytes / 1e3:,.0f} kB"
