"""What the command line checks before the work, and how it ends when stopped.

A command that trains for minutes and then fails to write its result has
lost the result. So every output file is checked when the arguments are read
(:func:`dezero_mini.atomic.output_target_problem`, through the argument types
of :mod:`dezero_mini.arguments`, and once more with the command's inputs,
:func:`dezero_mini.cli.options.refuse_to_overwrite_inputs`), every number
is held to its range, and the commands refuse sizes that cannot
fit in :func:`machine_memory` with an estimate, before anything is allocated
(``train``'s ``--hidden``, ``memory``'s ``--batches``).

And however a command ends, it ends with one line, never a traceback:
SIGTERM becomes :class:`Terminated` (an exception, so that ``finally``
blocks run and a file being written is left as it was: exit 143, as a
process killed by SIGTERM reports to a shell), a closed standard output
(``... | head -2``) ends the command quietly with exit 141 as ``yes | head``
does, an output that the disk refuses (``> /dev/full``) and a MemoryError
anywhere become one line and exit 1.
"""
import contextlib
import errno
import os
import signal
import sys
import threading

from dezero_mini import stopping
from dezero_mini.stopping import Terminated  # noqa: F401  (the command line's name for it)

#: Exit statuses of the usual Unix endings: 128 + the signal's number.
EXIT_SIGPIPE = 128 + 13
EXIT_SIGTERM = 128 + 15

#: The errors of a write that the place written to refused: a full disk
#: (``> /dev/full``), a quota, a file too large, a failing device.
OUTPUT_WRITE_ERRORS = frozenset({errno.ENOSPC, errno.EIO, errno.EDQUOT, errno.EFBIG})


def _raise_terminated(signum, frame):
    raise Terminated()


def _remember_swallowed_stops(previous_hook):
    """A ``sys.unraisablehook`` that remembers a KeyboardInterrupt or
    :class:`Terminated` that a finalizer could not raise (they are the
    user's stop, not an error to print), and hands anything else on."""
    def hook(unraisable):
        if unraisable.exc_type is not None and issubclass(unraisable.exc_type,
                                                          (KeyboardInterrupt, Terminated)):
            stopping.request(unraisable.exc_type)
        else:
            previous_hook(unraisable)
    return hook


@contextlib.contextmanager
def sigterm_raises():
    """Within the block, SIGTERM raises :class:`Terminated` in the main thread.
    A stop (SIGTERM, Ctrl-C) whose exception lands in a finalizer, where
    Python can only print it and go on, is remembered and obeyed
    (:mod:`dezero_mini.stopping`): by the writer before it renames a file
    into place, and here when the block ends. A stop that the code catches
    itself (a script's ``except KeyboardInterrupt``) is its own business.
    Outside the main thread, signals cannot be handled: nothing changes."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    stopping.forget()
    previous = signal.signal(signal.SIGTERM, _raise_terminated)
    previous_hook = sys.unraisablehook
    sys.unraisablehook = _remember_swallowed_stops(previous_hook)
    try:
        yield
        stopping.obey()  # a stop that a finalizer swallowed: obeyed now, not ignored
    finally:
        signal.signal(signal.SIGTERM, previous)
        sys.unraisablehook = previous_hook
        stopping.forget()


def silence_closed_stdout():
    """After a BrokenPipeError on stdout, or a write that the disk refused
    (``> /dev/full``): point file descriptor 1 at the null device so that
    Python's own flush at exit does not fail (and print a second error).
    Only when sys.stdout is the process's real stdout."""
    with contextlib.suppress(OSError, ValueError, AttributeError):
        if sys.stdout.fileno() == 1:
            silence(sys.stdout)


def silence(stream):
    """Point ``stream``'s file descriptor at the null device: what it still
    holds, and whatever is written to it later, goes nowhere, without an
    error. For an output whose reader has gone or whose disk is full."""
    with contextlib.suppress(OSError, ValueError, AttributeError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(devnull, stream.fileno())
        finally:
            os.close(devnull)


#: The exit status of check and leaks when their output cannot be written: an
#: error, not their verdict (1 is "failed" for check, "a leak" for leaks).
EXIT_NO_VERDICT = 2


def end_for_lost_output(error, command, status=1):
    """The exit status when ``error`` (an OSError) says that the command's
    output is gone, else None: a closed pipe (``... | head``) ends quietly
    with 141, as Unix tools do; a full disk or a failing device (``>
    /dev/full``) with one line and ``status``: 1, or 2 for a command whose
    1 is a verdict (check's "failed", leaks' "a leak"), since no verdict was
    delivered. Either way stdout is silenced, so that nothing more is tried
    on it."""
    if isinstance(error, BrokenPipeError):
        silence_closed_stdout()
        return EXIT_SIGPIPE
    if error.filename is None and error.errno in OUTPUT_WRITE_ERRORS:
        silence_closed_stdout()
        print(f"{command}: error: cannot write the output: {error.strerror}", file=sys.stderr)
        return status
    return None


def flush_stdout():
    """Write what stdout still holds now, so that a full disk is found by the
    command and not by Python's own flush at exit; a stdout that a script
    run by the command has closed (or replaced by None) holds nothing to write."""
    with contextlib.suppress(ValueError, AttributeError):  # closed, or None
        sys.stdout.flush()


def output_stream_problem():
    """Why the command cannot write its output, before it starts; None when it can.

    A standard output closed outright (``cmd >&-``, not a pipe that closes
    later) is ``sys.stdout is None``: Python's ``print`` then drops every
    line without a word, and file descriptor 1 is free for the next file
    opened, where the command's output would land. One rule for every
    command: refuse to start. And a terminal that cannot show a character
    of a file's name (``PYTHONIOENCODING=ascii``, ``LANG=C``, a name with
    bytes that are not UTF-8) gets it escaped (``\\xe9``), as stderr does,
    not a UnicodeEncodeError after the work."""
    if sys.stdout is None:
        return ("cannot write the output: standard output is closed (>&-); send it somewhere, "
                "for example > /dev/null")
    with contextlib.suppress(AttributeError, ValueError):  # not a TextIOWrapper; closed
        sys.stdout.reconfigure(errors="backslashreplace")
    return None


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
