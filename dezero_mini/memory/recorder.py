"""Record the three memory signals while a stage trains.

* ``record_training``: per batch, the live Variables and Functions, the
  traced bytes (tracemalloc current after the batch, peak within it), the
  process RSS, and the cyclic collector's work; then one explicit
  ``gc.collect()``.
* ``record_step_timeline``: one batch, op by op: traced bytes after every
  Function call of the forward pass and at the start of every Function's
  backward.
* ``measure_inference``: the traced peak of one forward pass of a deep MLP,
  with and without ``no_grad()``, in units of one activation.

The instruments try not to disturb what they measure: per-batch figures go
into numpy arrays allocated before the first batch (so the record itself does
not grow the traced memory), the counting of objects happens between batches
(outside the window of the batch's peak), and nothing that the records keep
refers to a Variable or Function.
"""
import contextlib
import csv
import gc
import time
import tracemalloc

import numpy as np

from dezero_mini.memory.counting import count_live_objects
from dezero_mini.memory.stages import load_stage, stage_label
from dezero_mini.memory.workload import Workload

MIB = 1024 * 1024

#: The per-batch signals of a TrainingRecord, in CSV column order.
SIGNALS = (
    "live_variables",
    "live_functions",
    "live_objects",
    "traced_current",
    "traced_peak",
    "rss",
    "gc_collections",
    "gc_collected",
    "loss",
    "seconds",
)
_FLOAT_SIGNALS = {"loss", "seconds"}


# --- helpers ------------------------------------------------------------------------
@contextlib.contextmanager
def _tracing():
    """Trace allocations inside the block; stop afterwards only if we started
    (a caller that traces already keeps its trace)."""
    started = not tracemalloc.is_tracing()
    if started:
        tracemalloc.start()
    try:
        yield
    finally:
        if started:
            tracemalloc.stop()


@contextlib.contextmanager
def _collector(enabled):
    """Switch the cyclic collector on or off inside the block; restore after."""
    was_enabled = gc.isenabled()
    (gc.enable if enabled else gc.disable)()
    try:
        yield
    finally:
        (gc.enable if was_enabled else gc.disable)()


class _GcWatch:
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


def _rss_reader(source=True):
    """A function returning the process RSS in bytes, or None (source False).

    ``True`` / ``"psutil"`` (the default): read through one long-lived
    psutil.Process, after checking that memory_profiler's default backend
    reports the same RSS. Why not memory_profiler on every batch:
    ``memory_usage`` builds a new psutil.Process per call, and those small
    allocations end up in CPython's free lists, which tracemalloc still
    counts: a 5-15 KiB ramp in the traced signal of a stage that is flat.
    ``"memory_profiler"``: sample with ``memory_usage`` every batch anyway
    (and accept that ramp).
    If memory_profiler is missing or fails (no release since 2022), psutil
    alone is used.
    """
    if not source:
        return None
    if source not in (True, "psutil", "memory_profiler"):
        raise ValueError(f"rss must be True, False, 'psutil' or 'memory_profiler', not {source!r}")
    read_psutil = _psutil_reader()
    try:
        read_mp = _memory_profiler_reader()
        # The two read the same counter; pages may come and go in between.
        if abs(read_mp() - read_psutil()) > 64 * MIB:
            raise RuntimeError("memory_profiler and psutil disagree about RSS")
    except Exception:  # noqa: BLE001  (any failure of memory_profiler: fall back)
        return read_psutil
    return read_mp if source == "memory_profiler" else read_psutil


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


def _kwargs_text(kwargs):
    return ", ".join(f"{k}={v!r}" for k, v in kwargs.items())


# --- training record -----------------------------------------------------------------
class TrainingRecord:
    """The signals of a training run, one value per batch.

    Attributes: ``label``, ``stage``, ``gc_enabled``, ``workload`` (its
    settings), one numpy array per name in ``SIGNALS`` (``rss`` is None when
    not recorded; bytes are bytes, times seconds), ``final_collected`` (what
    ``gc.collect()`` returned after the last batch: objects freed),
    ``live_after_collect`` (live Variables + Functions after it) and
    ``elapsed`` (wall seconds, instruments included).
    """

    def __init__(self, label, stage, signals, *, final_collected=None,
                 live_after_collect=None, gc_enabled=False, workload=None, elapsed=None):
        self.label = label
        self.stage = stage
        for name in SIGNALS:
            setattr(self, name, signals.get(name))
        self.final_collected = final_collected
        self.live_after_collect = live_after_collect
        self.gc_enabled = gc_enabled
        self.workload = workload
        self.elapsed = elapsed

    @property
    def batches(self):
        return len(self.live_objects)

    def signal(self, name):
        """The array of a signal, by name (ValueError for an unknown name or
        a signal that was not recorded)."""
        if name not in SIGNALS:
            raise ValueError(f"unknown signal {name!r}; signals: {', '.join(SIGNALS)}")
        values = getattr(self, name)
        if values is None:
            raise ValueError(f"{name!r} was not recorded in {self.label!r}")
        return values

    def slope(self, signal):
        """Least-squares growth of a signal per batch (units per batch)."""
        values = np.asarray(self.signal(signal), dtype=np.float64)
        if len(values) < 2:
            return float("nan")
        return float(np.polyfit(np.arange(len(values)), values, 1)[0])

    def to_csv(self, path):
        """Write a header and one row per batch (``batch`` first, then the
        recorded signals). Floats are written exactly (``repr``)."""
        columns = [name for name in SIGNALS if getattr(self, name) is not None]
        with open(path, "w", newline="") as f:
            writer = csv.writer(f)
            writer.writerow(["batch", *columns])
            for i in range(self.batches):
                writer.writerow([i, *(repr(getattr(self, c)[i].item()) for c in columns)])
        return path

    @classmethod
    def from_csv(cls, path, label=None, stage=None):
        """Read a record written by ``to_csv`` (the per-batch signals only)."""
        with open(path, newline="") as f:
            rows = list(csv.reader(f))
        header, body = rows[0], rows[1:]
        signals = {}
        for k, name in enumerate(header[1:], start=1):
            dtype = np.float64 if name in _FLOAT_SIGNALS else np.int64
            signals[name] = np.array([float(r[k]) if dtype is np.float64 else int(r[k]) for r in body],
                                     dtype=dtype)
        return cls(label if label is not None else str(path), stage, signals)

    def summary(self):
        """The figures of the run as a plain dict (bytes in bytes)."""
        out = {
            "label": self.label,
            "stage": self.stage,
            "batches": self.batches,
            "gc_enabled": self.gc_enabled,
            "objects_per_batch": self.slope("live_objects"),
            "traced_bytes_per_batch": self.slope("traced_current"),
            "traced_peak_max": int(self.traced_peak.max()),
            "live_objects_first": int(self.live_objects[0]),
            "live_objects_last": int(self.live_objects[-1]),
            "gc_collections": int(self.gc_collections.sum()),
            "gc_collected": int(self.gc_collected.sum()),
            "final_collected": self.final_collected,
            "live_after_collect": self.live_after_collect,
            "loss_first": float(self.loss[0]),
            "loss_last": float(self.loss[-1]),
            "seconds_in_batches": float(self.seconds.sum()),
            "elapsed": self.elapsed,
        }
        if self.rss is not None:
            out["rss_growth"] = int(self.rss[-1] - self.rss[0])
        return out

    def __repr__(self):
        text = (f"TrainingRecord({self.label!r}: {self.batches} batches, "
                f"{self.slope('live_objects'):+.1f} objects/batch, "
                f"{self.slope('traced_current') / 1024:+.1f} KiB/batch traced")
        if self.final_collected is not None:
            text += (f", gc.collect() freed {self.final_collected}, "
                     f"{self.live_after_collect} alive after")
        return text + ")"


def _record_batch(i, workload, module, backward_kwargs, signals, watch, read_rss):
    """Train batch ``i`` and write its figures into row ``i`` of ``signals``."""
    collections_before, collected_before = int(watch.counts[0]), int(watch.counts[1])
    tracemalloc.reset_peak()  # the peak *within* this batch
    t0 = time.perf_counter()
    signals["loss"][i] = workload.train_step(i, **backward_kwargs)
    signals["seconds"][i] = time.perf_counter() - t0
    # Read before counting objects: gc.get_objects() builds a large list.
    current, peak = tracemalloc.get_traced_memory()
    signals["traced_current"][i] = current
    signals["traced_peak"][i] = peak
    live = count_live_objects(module)
    signals["live_variables"][i] = live["variables"]
    signals["live_functions"][i] = live["functions"]
    signals["live_objects"][i] = live["total"]
    if read_rss is not None:
        signals["rss"][i] = read_rss()
    # Collections are attributed to the batch in whose stretch they ran.
    signals["gc_collections"][i] = int(watch.counts[0]) - collections_before
    signals["gc_collected"][i] = int(watch.counts[1]) - collected_before


def record_training(stage_or_module, batches=200, *, gc_enabled=False, rss=True,
                    trim=True, workload=None, label=None, backward_kwargs=None,
                    **workload_kwargs):
    """Train ``batches`` batches of the standard workload and record the
    memory signals after each one. Returns a ``TrainingRecord``.

    stage_or_module: anything ``load_stage`` accepts, or a module.
    gc_enabled: run with the cyclic collector on (False: reference counting
        alone frees memory, so a cycle leak shows as growth). The
        collector's previous state is restored afterwards.
    rss: also sample the process RSS: True (psutil, cross-checked with
        memory_profiler once), "memory_profiler" (memory_usage every batch),
        or False.
    trim: when sampling RSS, first return freed heap memory to the OS
        (``trim_heap``), so that RSS growth is not hidden by memory that an
        earlier run freed.
    workload: a ``Workload`` to train (else one is made from ``workload_kwargs``).
    backward_kwargs: keyword arguments for ``loss.backward`` (e.g.
        ``{"retain_grad": True}``).

    tracemalloc is started if it is not running (and then stopped at the
    end). The heap is collected once before the first batch so that earlier
    garbage does not show up in this record. After the last batch, with the
    collector still in the recorded state, ``gc.collect()`` is called once:
    its return value (objects freed) is ``record.final_collected``.
    """
    module = load_stage(stage_or_module)
    if workload is None:
        workload = Workload(module, **workload_kwargs)
    elif workload_kwargs:
        raise TypeError("record_training: pass either workload= or workload settings, not both")
    backward_kwargs = dict(backward_kwargs or {})
    if label is None:
        label = stage_label(module)
        extras = ["gc on"] if gc_enabled else []
        if backward_kwargs:
            extras.append(_kwargs_text(backward_kwargs))
        if extras:
            label += ", " + ", ".join(extras)
    read_rss = _rss_reader(rss)

    # Preallocated: filling them allocates nothing that tracemalloc would see.
    signals = {name: np.zeros(batches, dtype=np.float64 if name in _FLOAT_SIGNALS else np.int64)
               for name in SIGNALS}
    if not rss:
        signals["rss"] = None

    started = time.perf_counter()
    gc.collect()  # a clean floor: earlier garbage is not this run's
    if read_rss is not None and trim:
        trim_heap()
    with _tracing(), _collector(gc_enabled):
        with _GcWatch() as watch:
            for i in range(batches):
                _record_batch(i, workload, module, backward_kwargs, signals, watch, read_rss)
        # After the watch has gone (the explicit collection is reported on its
        # own) but with the collector still in the recorded state.
        final_collected = gc.collect()
        live_after_collect = count_live_objects(module)["total"]
    elapsed = time.perf_counter() - started
    return TrainingRecord(
        label,
        getattr(module, "STAGE", module.__name__),
        signals,
        final_collected=final_collected,
        live_after_collect=live_after_collect,
        gc_enabled=gc_enabled,
        workload=workload.describe(),
        elapsed=elapsed,
    )


# --- per-operation timeline of one step -------------------------------------------------
class TimelineEvent:
    """One sample of a timeline: after a forward op, or at the start of an
    op's backward. ``traced`` is in bytes above the traced memory at the
    start of the step; ``live_objects`` is -1 when not counted."""

    __slots__ = ("index", "phase", "op", "traced", "live_objects")

    def __init__(self, index, phase, op, traced, live_objects):
        self.index, self.phase, self.op = index, phase, op
        self.traced, self.live_objects = traced, live_objects

    def __repr__(self):
        return f"TimelineEvent({self.index}, {self.phase}, {self.op}, {self.traced} B)"


class Timeline:
    """One training batch, op by op.

    ``events``: the samples, in order. ``forward_peak`` / ``backward_peak``:
    tracemalloc's peak during the forward pass / during ``loss.backward()``
    (it sees temporaries inside ops that no sample catches), and
    ``after_backward``: traced bytes when backward has returned. All bytes
    are relative to ``baseline``, the traced memory when the step began
    (parameters and everything else already alive are not counted).
    """

    def __init__(self, label, stage, events, *, forward_peak, backward_peak,
                 after_backward, baseline, retain_grad=None):
        self.label = label
        self.stage = stage
        self.events = events
        self.forward_peak = forward_peak
        self.backward_peak = backward_peak
        self.after_backward = after_backward
        self.baseline = baseline
        self.retain_grad = retain_grad

    @property
    def traced(self):
        return np.array([e.traced for e in self.events], dtype=np.int64)

    @property
    def phases(self):
        return [e.phase for e in self.events]

    @property
    def ops(self):
        return [e.op for e in self.events]

    def __repr__(self):
        return (f"Timeline({self.label!r}: {len(self.events)} events, "
                f"forward peak {self.forward_peak / MIB:.2f} MiB, "
                f"backward peak {self.backward_peak / MIB:.2f} MiB)")


class _OpSampler:
    """Samples traced bytes (and live objects) into preallocated storage.

    Its own work is kept out of the peaks: the peak is read before each
    sample and tracemalloc's peak is reset after it, so the large list that
    ``gc.get_objects()`` builds never counts as the framework's memory.
    """

    def __init__(self, module, count_objects, max_events):
        self.module = module
        self.count_objects = count_objects
        self.traced = np.zeros(max_events, dtype=np.int64)
        self.live = np.full(max_events, -1, dtype=np.int64)
        self.ops = [None] * max_events
        self.phases = [None] * max_events
        self.n = 0
        self.phase = None
        self.baseline = 0
        self.phase_peak = 0

    def start(self):
        self.baseline = tracemalloc.get_traced_memory()[0]
        tracemalloc.reset_peak()
        self.phase_peak = 0

    def _read(self):
        current, peak = tracemalloc.get_traced_memory()
        self.phase_peak = max(self.phase_peak, peak)
        return current

    def sample(self, op):
        current = self._read()
        if self.n < len(self.ops):
            self.traced[self.n] = current - self.baseline
            if self.count_objects:
                self.live[self.n] = count_live_objects(self.module)["total"]
            self.ops[self.n] = op
            self.phases[self.n] = self.phase
            self.n += 1
        tracemalloc.reset_peak()

    def end_phase(self):
        """The peak of the phase that ends (bytes above the baseline)."""
        self._read()
        peak, self.phase_peak = self.phase_peak - self.baseline, 0
        tracemalloc.reset_peak()
        return peak

    def events(self):
        return [TimelineEvent(k, self.phases[k], self.ops[k], int(self.traced[k]), int(self.live[k]))
                for k in range(self.n)]


def _function_classes(function_cls):
    """``function_cls`` and every subclass of it, depth first."""
    found, stack = [], [function_cls]
    while stack:
        cls = stack.pop()
        if cls not in found:
            found.append(cls)
            stack.extend(cls.__subclasses__())
    return found


@contextlib.contextmanager
def _ops_patched(module, sampler):
    """Temporarily wrap ``__call__`` (sample after a forward op returns) and
    ``backward`` (sample before an op's backward runs) of the module's
    Function classes; every original is put back on exit."""

    def wrap_call(original):
        def __call__(self, *args, **kwargs):
            outputs = original(self, *args, **kwargs)
            if sampler.phase == "forward":  # not Functions called inside a backward
                sampler.sample(type(self).__name__)
            return outputs

        return __call__

    def wrap_backward(original):
        def backward(self, *gys, **kwargs):
            if sampler.phase == "backward":
                sampler.sample(type(self).__name__)
            return original(self, *gys, **kwargs)

        return backward

    originals = []  # (class, attribute, the function found in its __dict__)
    try:
        for cls in _function_classes(module.Function):
            for name, wrap in (("__call__", wrap_call), ("backward", wrap_backward)):
                if name in cls.__dict__:
                    original = cls.__dict__[name]
                    originals.append((cls, name, original))
                    setattr(cls, name, wrap(original))
        yield
    finally:
        for cls, name, original in reversed(originals):
            setattr(cls, name, original)


def record_step_timeline(stage_or_module, *, retain_grad=None, workload=None, batch_index=0,
                         count_objects=True, label=None, max_events=10_000, **workload_kwargs):
    """Run ONE training batch and sample memory at every operation.

    Forward: after each Function call returns. Backward: at the start of
    each Function's backward, and once when ``loss.backward()`` returns.
    ``retain_grad`` is passed to ``backward`` only when it is not None
    (stages 01-03 have no such parameter). The cyclic collector is off during
    the step (its state is restored). Returns a ``Timeline``; it keeps no
    reference to the graph. ``count_objects=False`` skips counting live
    objects at each event (faster in a large process).
    """
    module = load_stage(stage_or_module)
    if workload is None:
        workload = Workload(module, **workload_kwargs)
    elif workload_kwargs:
        raise TypeError("record_step_timeline: pass either workload= or workload settings, not both")
    backward_kwargs = {} if retain_grad is None else {"retain_grad": retain_grad}
    if label is None:
        label = stage_label(module) + (f", {_kwargs_text(backward_kwargs)}" if backward_kwargs else "")
    sampler = _OpSampler(module, count_objects, max_events)

    workload.cleargrads()
    with _tracing(), _collector(False), _ops_patched(module, sampler):
        sampler.start()
        sampler.phase = "forward"
        sampler.sample("(start)")
        loss = workload.loss(batch_index)
        forward_peak = sampler.end_phase()
        sampler.phase = "backward"
        loss.backward(**backward_kwargs)
        sampler.sample("(end)")
        sampler.phase = None  # the SGD update is not part of the timeline
        backward_peak = sampler.end_phase()
        after_backward = int(sampler.traced[sampler.n - 1])
        workload.update()
        del loss  # the graph goes here (or stays, on stages 01-02)
    return Timeline(
        label,
        getattr(module, "STAGE", module.__name__),
        sampler.events(),
        forward_peak=forward_peak,
        backward_peak=backward_peak,
        after_backward=after_backward,
        baseline=sampler.baseline,
        retain_grad=retain_grad,
    )


# --- inference ------------------------------------------------------------------------
OPS_PER_LAYER = 3  # matmul, add, sigmoid


def _deep_forward(module, x, layers):
    """A uniform MLP's forward pass. Each result replaces the previous one
    under the same name, so, without a graph, an activation dies as soon as
    the next op has consumed it: nothing here keeps more than the framework
    does."""
    h = x
    for W, b in layers:
        h = module.matmul(h, W)
        h = module.add(h, b)
        h = module.sigmoid(h)
    return h


def measure_inference(stage_or_module, *, no_grad=True, depth=8, width=256, batch=256, seed=0):
    """The traced peak of one inference pass of a deep uniform MLP
    (``depth`` layers of ``width`` units, all float64), above the traced
    memory just before the pass (the parameters and the input exist then).

    ``no_grad=True`` runs the pass inside ``module.no_grad()`` when the stage
    has it (else plainly: see ``result["no_grad"]``). Returns a dict:
    ``peak_bytes``, ``retained_bytes`` (still traced after the pass: the
    output, and the graph if one was built), ``activation_bytes`` (one
    batch x width array), ``parameter_bytes``, ``peak_in_activations`` =
    peak_bytes / activation_bytes (and ``retained_in_activations``), with
    the settings. Without a graph the peak is about 3 activations (an op's
    input and output, and a temporary of numpy's sigmoid); with one it is
    about ``depth * OPS_PER_LAYER``.
    """
    module = load_stage(stage_or_module)
    rng = np.random.RandomState(seed)
    layers = [(module.Variable(rng.randn(width, width) / np.sqrt(width)), module.Variable(np.zeros(width)))
              for _ in range(depth)]
    x = module.Variable(rng.randn(batch, width))
    use_no_grad = bool(no_grad) and hasattr(module, "no_grad")
    context = module.no_grad() if use_no_grad else contextlib.nullcontext()
    activation_bytes = batch * width * np.dtype(np.float64).itemsize
    with _tracing(), _collector(False), context:
        baseline = tracemalloc.get_traced_memory()[0]
        tracemalloc.reset_peak()
        y = _deep_forward(module, x, layers)
        current, peak = tracemalloc.get_traced_memory()
        del y
    peak_bytes, retained_bytes = peak - baseline, current - baseline
    return {
        "stage": getattr(module, "STAGE", module.__name__),
        "no_grad": use_no_grad,
        "depth": depth,
        "width": width,
        "batch": batch,
        "ops_per_layer": OPS_PER_LAYER,
        "peak_bytes": peak_bytes,
        "retained_bytes": retained_bytes,
        "activation_bytes": activation_bytes,
        "parameter_bytes": sum(W.data.nbytes + b.data.nbytes for W, b in layers),
        "peak_in_activations": peak_bytes / activation_bytes,
        "retained_in_activations": retained_bytes / activation_bytes,
    }
