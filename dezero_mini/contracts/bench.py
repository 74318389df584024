"""The experiments that several contracts read, run once per stage module.

``bench(module)`` returns the module's ``Bench``: the training record
(``BATCHES`` batches, collector off), the size of one batch's graph, and what
the cyclic collector finds after a few batches are each measured the first
time a contract asks and kept (figures only, never the framework's objects).
Every contract that reads the record's signals (live objects, traced bytes,
what the final collection frees) reads this one run.
"""
import gc
import weakref
from functools import cached_property

import numpy as np

from dezero_mini.memory.counting import count_live_objects
from dezero_mini.memory.probes import collector
from dezero_mini.contracts.sandbox import MIB, Limits
from dezero_mini.contracts.figures import digest_of, stream_figures
from dezero_mini.memory.recorder import (RECORD_BYTES_PER_BATCH, SIGNALS, TrainingRecord,
                                         record_training)
from dezero_mini.memory.true_types import is_instance
from dezero_mini.memory.workload import Workload, grad_array

#: Batches of the training record that the contracts read, by default
#: (``configure(batches=...)`` changes it for a process: the checker's
#: ``--batches``). 50, not 200 (the record is most of a check's time, traced
#: by tracemalloc): every verdict that reads it is as sure at 50. The traced
#: bytes of the course's correct files are flat (slope at most 0.005 KiB per
#: batch at 10 batches, 0.000 from 50 on; dezero_mini 0.014 at 10, 0.001 at 50),
#: against a limit of 1 KiB; a leaking stage keeps its graph, 915 KiB a
#: batch at any count; live objects are compared batch by batch, so any
#: growth at all shows (``benchmarks/check_times.py --margins`` prints these).
BATCHES = 50
_settings = {"batches": BATCHES, "stream": None}
KIB = 1024

_benches = weakref.WeakKeyDictionary()
#: The copies of records that contracts read since ``copies_read()`` last emptied it.
_copies_read = []


def _copied(values):
    """A copy of ``values`` that no Python code can write to: an array over
    ``bytes`` (NumPy refuses to make it writeable)."""
    if values is None:
        return None
    values = np.ascontiguousarray(values)
    return np.frombuffer(values.tobytes(), dtype=values.dtype)


def records_read():
    """The digests (``figures.digest_of``) of the records that contracts
    read since the last call (``Bench.record``'s copies), each taken twice:
    when the copy was handed out and now. The worker sends them with the
    contract's result, and forgets them."""
    digests = [digest for copy, handed_out in _copies_read
               for digest in (handed_out, digest_of(copy))]
    _copies_read.clear()
    return digests

#: What one batch of the standard run leaves alive in a stage whose graphs
#: leak by design, with the collector off as the record runs: stage 01's
#: registry and stage 02's cycles keep each batch's whole graph (915 KiB a
#: batch, measured with tracemalloc; tests/test_checker_limits.py holds every
#: stage's reference to it). A correct file of those stages grows so.
LEAKED_BYTES_PER_BATCH = {1: 920 * KIB, 2: 920 * KIB}
#: The worker's address space before any record: the interpreter, NumPy and the
#: framework (193-210 MiB measured, docs/classroom.md), with room to spare.
WORKER_BASE_MIB = 256
#: Records that may be alive at once in a worker (the bench's and a contract's own).
RECORDS_AT_ONCE = 4


def largest_batches(number, limits=Limits()):
    """The most ``--batches`` that a correct file of stage ``number`` can run
    within the worker's memory limit (``limits.memory_mib``)."""
    room = (limits.memory_mib - WORKER_BASE_MIB) * MIB
    per_batch = RECORDS_AT_ONCE * RECORD_BYTES_PER_BATCH + LEAKED_BYTES_PER_BATCH.get(number, 0)
    return max(room // per_batch, 0)


def batches_problem(number, batches, limits=Limits()):
    """Why ``batches`` is more than the checker can run for stage ``number``
    (a correct file would fail for the worker's memory limit, the checker's
    own limit, not the file's fault), as a sentence with the fix; None when it can."""
    largest = largest_batches(number, limits)
    if batches <= largest:
        return None
    return (f"{batches:,} batches is more than the checker can run for stage {number:02d}: a "
            f"correct file would need more than the {limits.memory_mib:,} MiB the check allows "
            f"it; give at most {largest:,}")


class CollectorRun(Exception):
    """The file ran the cyclic collector itself (``gc.collect()``) while a
    measurement had it off: what the measurement then counts was freed by
    the collector, not by reference counting. The worker reports it as
    tampering (a class of the checker's: one of the file's cannot pass for it)."""


def collections_so_far():
    """How many collections the interpreter has run, of every generation
    (``gc.get_stats()``: counters in the collector itself, which no callback
    or patch of the file's reaches, and which a collection started from any
    thread raises)."""
    return sum(generation["collections"] for generation in gc.get_stats())


class CollectorOff:
    """A measurement's watch on the collector that it switched off:
    ``check(where)`` raises ``CollectorRun`` when a collection has run since
    the watch began (or since the last ``restart()``), and ``tracked()``
    is how many objects of the kinds the collector tracks were made and not
    freed since then (the collector's own count of allocations, which only a
    collection resets: while it is off, a graph that stays alive keeps
    raising it, whatever its classes are)."""

    def __init__(self):
        self.restart()

    def restart(self):
        self._collections, self._allocated = collections_so_far(), gc.get_count()[0]

    def check(self, where):
        ran = collections_so_far() - self._collections
        if ran:
            raise CollectorRun(
                f"the file ran the cyclic collector itself (gc.collect()) while the measurement "
                f"had it off ({ran} collection{'s' if ran != 1 else ''} {where}): what it would "
                "count was freed by the collector, not by reference counting")

    def tracked(self):
        return gc.get_count()[0] - self._allocated


def configure(*, batches, stream=None):
    """Set how many batches the training records of later benches have, and
    where their figures go as they are taken: ``stream(**event)`` (the
    worker's signed channel, ``dezero_mini.contracts.figures``), or None."""
    if int(batches) < 2:
        raise ValueError(f"configure: batches must be at least 2, got {batches!r}")
    _settings["batches"] = int(batches)
    _settings["stream"] = stream


def bench(module):
    """The ``Bench`` of ``module``, made on first use."""
    if module not in _benches:
        _benches[module] = Bench(module)
    return _benches[module]


def forget_graphs(module):
    """Free what a measurement left alive: clear a stage-01-style registry
    (``REGISTRY.clear()``, if the module has one) and collect the cycles."""
    registry = getattr(module, "REGISTRY", None)
    if callable(getattr(registry, "clear", None)):
        registry.clear()
    gc.collect()


class Bench:
    """Cached measurements of one stage module (see the module docstring)."""

    def __init__(self, module):
        self.module = module
        self.batches = _settings["batches"]
        self._record = None

    @property
    def record(self):
        """The training record of ``self.batches`` batches, collector off
        (``record_training``, made on first use), with ``tracked_objects``
        (one figure per batch, after it: the objects of the kinds that the
        collector tracks made since the first batch ended, whatever their
        classes). ``CollectorRun`` when the file collects between the first
        batch's end and the last's.

        Each batch's figures leave the process as they are taken (when the
        worker gave a stream: ``figures.stream_figures``), before more of the
        file's code runs. Each read returns a copy of the figures, which the
        worker sends with the contract's result (``records_read``): the parent
        holds them against what was streamed, so a file that rewrites the
        record after its figures were taken is found out."""
        if self._record is None:
            self._record = self._take_record()
        copy = TrainingRecord(self._record.label, self._record.stage,
                              {name: _copied(getattr(self._record, name)) for name in SIGNALS},
                              final_collected=self._record.final_collected,
                              live_after_collect=self._record.live_after_collect,
                              gc_enabled=self._record.gc_enabled,
                              workload=self._record.workload, elapsed=self._record.elapsed)
        copy.tracked_objects = _copied(self._record.tracked_objects)
        if _settings["stream"] is not None:  # (a worker's: it empties the list per contract)
            _copies_read.append((copy, digest_of(copy)))
        return copy

    def _take_record(self):
        tracked = np.zeros(self.batches, dtype=np.int64)
        watch = []
        stream = _settings["stream"]

        def on_figures(batch, figures):  # (the record's own collections come before and after)
            if batch is not None and watch:
                watch[0].check(f"during batches 2 to {batch + 1}")
                tracked[batch] = figures["tracked_objects"] = watch[0].tracked()
            elif batch is not None:
                figures["tracked_objects"] = 0
            if stream is not None:
                stream_figures(stream, batch, figures)
            if not watch:  # after the first send, which leaves a few tracked objects
                watch.append(CollectorOff())  # alive (7 with stage 03's reference): no batch's

        try:
            record = record_training(self.module, batches=self.batches, gc_enabled=False,
                                     rss=False, on_figures=on_figures)
        finally:
            forget_graphs(self.module)  # the record keeps the figures, not the objects
        record.tracked_objects = tracked
        return record

    @cached_property
    def graph_size(self):
        """How many Variables and Functions one training batch makes: those
        alive after backward while the loss is still held, minus those
        alive before (the whole graph is reachable from the loss then)."""
        workload = Workload(self.module)
        try:
            with collector(False):
                watch = CollectorOff()
                before = count_live_objects(self.module)["total"]
                loss = workload.loss(0)
                loss.backward()
                made = count_live_objects(self.module)["total"] - before
                del loss
                watch.check("during one batch")
        finally:
            forget_graphs(self.module)
        return made

    def framework_objects_found_by_collector(self, batches=20):
        """Run ``batches`` with the collector off, then let it collect once
        and return how many Variables and Functions it had to free
        (DEBUG_SAVEALL keeps them in ``gc.garbage`` so that we can look)."""
        return self.found_by_collector(batches)[0]

    def found_by_collector(self, batches=20):
        """``(framework objects, others)``: what the collection after
        ``batches`` batches with the collector off had to free: how many
        Variables and Functions, and ``{type name: how many}`` of every other
        object (a graph made of classes other than the two the file names
        is a graph all the same)."""
        module = self.module
        gc.collect()
        callbacks = list(gc.callbacks)
        with collector(False):
            try:
                watch = CollectorOff()
                workload = Workload(module)
                for i in range(batches):
                    workload.train_step(i)
                watch.check(f"during {batches} batches")
                classes = (module.Variable, module.Function)
                # No callback of anyone's runs in this collection (one could
                # empty gc.garbage before it is read), and what it saved is
                # read by each object's real type.
                gc.callbacks.clear()
                gc.set_debug(gc.DEBUG_SAVEALL)
                gc.collect()
                saved = list(gc.garbage)
                others = {}
                for obj in saved:
                    if not is_instance(obj, classes):
                        name = type(obj).__name__
                        others[name] = others.get(name, 0) + 1
                return sum(1 for obj in saved if is_instance(obj, classes)), others
            finally:
                gc.set_debug(0)
                gc.garbage.clear()
                gc.callbacks[:] = callbacks
                forget_graphs(module)


def min_growth(record):
    """The smallest growth of live objects from one batch to the next."""
    return int(np.diff(record.live_objects).min())


def array(gradient):
    """A gradient as an array (a Variable in dezero_mini), or None."""
    return None if gradient is None else np.asarray(grad_array(gradient))
