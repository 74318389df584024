"""Low-level probes shared by the instruments: tracing, the collector, RSS.

Each is a small context manager or reader that restores whatever state it
changes, so that an instrument leaves the process as it found it.
"""
import contextlib
import gc
import tracemalloc
import warnings

import numpy as np
from dezero_mini.validation import expect_callable

MIB = 1024 * 1024

class TracesCleared(RuntimeError):
    """tracemalloc's traces were cleared (``tracemalloc.clear_traces()``, or
    a stop and a start) or tracing was stopped inside a ``tracing()`` block:
    the traced bytes read there mean nothing."""


@contextlib.contextmanager
def tracing():
    """Trace allocations inside the block; stop afterwards only if we started
    (a caller that traces already keeps its trace).

    A small block allocated on entry must still be traced on exit: code run
    inside that clears the traces (which also zeroes the traced-memory
    figures) or stops tracing raises TracesCleared, rather than leaving
    figures that say less memory is held than is."""
    started = not tracemalloc.is_tracing()
    if started:
        tracemalloc.start()
    sentinel = bytearray(64)
    try:
        yield
    finally:
        intact = tracemalloc.is_tracing() and tracemalloc.get_object_traceback(sentinel) is not None
        del sentinel
        if started:
            tracemalloc.stop()
    if not intact:
        raise TracesCleared("tracemalloc's traces were cleared or tracing was stopped while it "
                            "measured (tracemalloc.clear_traces(), or tracemalloc.stop())")


@contextlib.contextmanager
def collector(enabled):
    """Switch the cyclic collector on or off inside the block; restore after."""
    was_enabled = gc.isenabled()
    (gc.enable if enabled else gc.disable)()
    try:
        yield
    finally:
        (gc.enable if was_enabled else gc.disable)()


class GcWatch:
    """Counts the collector's runs and the objects they free, through
    ``gc.callbacks``. The counters live in a preallocated array."""

    def __init__(self):
        self.counts = np.zeros(2, dtype=np.int64)  # [collections, objects collected]

    def __call__(self, phase, info):
        if phase == "stop":
            self.counts[0] += 1
            self.counts[1] += info["collected"]

    def __enter__(self):
        gc.callbacks.append(self)
        return self

    def __exit__(self, *exc):
        gc.callbacks.remove(self)


# Two reads of the same counter, a moment apart, differ only by the pages that
# came and went in between: a few hundred KiB in a notebook. More means that
# the two do not read the same thing.
RSS_AGREEMENT = 8 * MIB


def _memory_profiler_reader():
    """RSS in bytes through memory_profiler's ``memory_usage(-1, interval=0)``.

    With ``proc=-1`` and no timeout it takes exactly one sample of this
    process with its default backend ("psutil": ``memory_info().rss``); with
    ``interval=0`` it does not sleep afterwards (the default 0.1 s would
    dominate a batch). It reports MiB; MiB * 2**20 gives the bytes back
    exactly. About 0.2 ms a call.
    """
    from memory_profiler import memory_usage

    def read():
        return int(round(memory_usage(-1, interval=0)[0] * MIB))

    return read


def _psutil_reader():
    """RSS in bytes from one long-lived ``psutil.Process``: the same number
    that memory_profiler's default backend reads."""
    import psutil

    process = psutil.Process()
    return lambda: process.memory_info().rss


def _no_rss_reader(why):
    """A reader that reads None, for where the process RSS cannot be read."""
    def read():
        return None

    read.available = False
    read.missing = why
    return read


def rss_reader(source=True):
    """A function returning the process RSS in bytes, or None (source False).

    ``True`` / ``"psutil"`` (the default): read through one long-lived
    psutil.Process, after checking that memory_profiler's default backend
    reports the same RSS. Why not memory_profiler on every batch:
    ``memory_usage`` builds a new psutil.Process per call, and those small
    allocations end up in CPython's free lists, which tracemalloc still
    counts: a 5-15 KiB ramp in the traced signal of a stage that is flat.
    ``"memory_profiler"``: sample with ``memory_usage`` every batch anyway
    (and accept that ramp).
    If memory_profiler is missing, fails (no release since 2022) or reads a
    number more than ``RSS_AGREEMENT`` away from psutil's, psutil alone is
    used, and a ``RuntimeWarning`` says so and why.
    Where psutil is missing too (a browser's Python: it has no WebAssembly
    build), the reader reads None: ``read_rss.available`` is False and
    ``read_rss.missing`` says why, and the recorder records no RSS.
    """
    if not source:
        return None
    if source not in (True, "psutil", "memory_profiler"):
        raise ValueError(f"rss must be True, False, 'psutil' or 'memory_profiler', not {source!r}")
    try:
        read_psutil = _psutil_reader()
    except ImportError:
        return _no_rss_reader("psutil cannot be imported here")
    try:
        read_mp = _memory_profiler_reader()
        by_mp, by_psutil = read_mp(), read_psutil()
        apart = abs(by_mp - by_psutil)
    except Exception as error:  # noqa: BLE001  (any failure of memory_profiler: fall back, and say so)
        problem = f"memory_profiler could not read it ({type(error).__name__}: {error})"
    else:
        if apart <= RSS_AGREEMENT:
            return read_mp if source == "memory_profiler" else read_psutil
        problem = (f"memory_profiler read {by_mp / MIB:.1f} MiB and psutil {by_psutil / MIB:.1f} MiB, "
                   f"more than {RSS_AGREEMENT / MIB:.0f} MiB apart")
    warnings.warn(f"RSS: {problem}; reading RSS through psutil alone", RuntimeWarning, stacklevel=2)
    return read_psutil


_LIBC = []  # the C library, loaded once (a CDLL object is a reference cycle)


def trim_heap():
    """Ask the C allocator to give freed memory back to the OS (glibc's
    ``malloc_trim(0)``). Returns True if it could be asked.

    Freed arrays go back to the allocator, not always to the OS: after a
    leaking run has been cleaned up, RSS stays high, and the next leaking
    run in the same process reuses that memory without any RSS growth.
    Trimming first makes the RSS of consecutive records comparable.
    """
    if not _LIBC:
        import ctypes
        import ctypes.util

        try:
            libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
            _LIBC.append(libc.malloc_trim)
        except (OSError, AttributeError):  # not glibc (macOS, Windows, musl)
            _LIBC.append(None)
    if _LIBC[0] is None:
        return False
    _LIBC[0](0)
    return True


def traced_left_by(call):
    """The bytes that ``call()`` allocated and had not freed when it returned,
    by tracemalloc, with the cyclic collector off: what the call leaves
    behind, such as the gradients that a backward pass stores."""
    expect_callable(call, "traced_left_by", "call", "a function to call without arguments")
    with collector(False), tracing():
        before = tracemalloc.get_traced_memory()[0]
        call()
        return tracemalloc.get_traced_memory()[0] - before


def kwargs_text(kwargs):
    """``retain_grad=True, ...``: settings as they read in a label."""
    return ", ".join(f"{k}={v!r}" for k, v in kwargs.items())
