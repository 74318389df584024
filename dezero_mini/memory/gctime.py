"""What the cyclic collector costs in time.

The collector starts a collection when enough container objects (Variables,
Functions, lists, weak references...) have been allocated, and a full
collection traverses every tracked object of the process: the whole graph
that a forward pass is building, and everything imported so far. None of it
is garbage once the graph has no cycle (stage 03), so on a big graph that is
time spent for nothing. ``time_runs`` measures it, with each collection timed
through ``gc.callbacks``.
"""
import gc
import time
from dataclasses import dataclass

from dezero_mini.validation import describe, expect_each, whole_number

# How a run treats the collector: on as users run, off, or on with every
# object alive before the run frozen (``gc.freeze()``: left out of every
# collection, as a program can do after building its model).
COLLECTOR_MODES = ("on", "off", "frozen")


class CollectionTimer:
    """Adds up, inside a ``with`` block, the collections that ran, how long
    they took, how many were full (generation 2) collections, and how many
    objects they freed. ``clock``: what it reads the time from (see
    ``time_runs``)."""

    def __init__(self, clock=time.perf_counter):
        self.clock = clock
        self.seconds = 0.0
        self.collections = 0
        self.full_collections = 0
        self.collected = 0
        self._start = None

    def __call__(self, phase, info):
        if phase == "start":
            self._start = self.clock()
        elif self._start is not None:
            self.seconds += self.clock() - self._start
            self.collections += 1
            self.full_collections += info["generation"] == 2
            self.collected += info["collected"]
            self._start = None

    def __enter__(self):
        gc.callbacks.append(self)
        return self

    def __exit__(self, *exc):
        gc.callbacks.remove(self)


@dataclass
class CollectorTiming:
    """The fastest call of one run: its wall time in seconds, and what the
    collector did during it."""

    seconds: float
    collector_seconds: float
    collections: int
    full_collections: int
    collected: int  # objects that the collections freed

    @property
    def collector_share(self):
        """The fraction of the wall time spent in collections."""
        return self.collector_seconds / self.seconds


def time_runs(runs, repeats=3, clock=time.perf_counter):
    """Time each ``(fn, mode)`` of ``runs`` (``mode`` one of
    ``COLLECTOR_MODES``) ``repeats`` times and return, per run, the
    ``CollectorTiming`` of its fastest call.

    The runs take turns, one call each per round, so that a change in the
    machine's load falls on all of them alike and their ratios stay fair; the
    minimum is the steadier estimate on a shared machine (noise only ever
    adds time). Every call starts from a collected heap, so that it pays
    nothing for the garbage of the one before, and the collector's state is
    restored after each call.

    clock: ``time.perf_counter``, the wall time (the default), or
    ``time.process_time``, the CPU time of this process, which other
    processes on a busy machine disturb much less (a single-threaded run
    spends its wall time on the CPU, or waiting for it)."""
    runs = expect_each(runs, tuple, "time_runs", "runs", "a pair (function, mode)")
    repeats = whole_number(repeats, "time_runs", "repeats", at_least=1)
    for position, run in enumerate(runs):
        if len(run) != 2 or not callable(run[0]):
            raise TypeError(f"time_runs: runs[{position}] must be a pair (function, mode), "
                            f"got {describe(run)}")
    for _, mode in runs:
        if mode not in COLLECTOR_MODES:
            raise ValueError(f"time_runs: mode must be one of {COLLECTOR_MODES}, got {mode!r}")
    best = [None] * len(runs)
    was_enabled = gc.isenabled()
    try:
        for _ in range(repeats):
            for i, (fn, mode) in enumerate(runs):
                gc.collect()
                (gc.disable if mode == "off" else gc.enable)()
                if mode == "frozen":
                    gc.freeze()
                try:
                    with CollectionTimer(clock) as timer:
                        start = clock()
                        fn()
                        seconds = clock() - start
                finally:
                    if mode == "frozen":
                        gc.unfreeze()
                if best[i] is None or seconds < best[i].seconds:
                    best[i] = CollectorTiming(seconds, timer.seconds, timer.collections,
                                              timer.full_collections, timer.collected)
    finally:
        (gc.enable if was_enabled else gc.disable)()
    return best
