"""One training batch, operation by operation.

``record_step_timeline`` samples the traced bytes after every Function call
of the forward pass and at the start of every Function's backward, by
wrapping the stage's Function methods for the length of one step (the step
files themselves stay untouched). Stage 04's lesson reads its backward peak.
"""
import contextlib
import tracemalloc

import numpy as np

from dezero_mini.memory.counting import LiveObjectCounter
from dezero_mini.memory.probes import MIB, collector, kwargs_text, tracing
from dezero_mini.memory.stages import load_stage, stage_label
from dezero_mini.memory.workload import Workload


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
    def at_backward_start(self):
        """Traced bytes when the first Function's backward starts: what the
        graph holds (with the loss's gradient), nothing freed yet."""
        return next(e.traced for e in self.events if e.phase == "backward")

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
        # Made here, before tracemalloc's baseline is read in start().
        self.count_live = LiveObjectCounter(module) if count_objects else None
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
            if self.count_live is not None:
                self.live[self.n] = self.count_live()["total"]
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


def record_step_timeline(stage_or_module, *, retain_grad=None, retain_graph=None, workload=None,
                         batch_index=0, count_objects=True, label=None, max_events=10_000,
                         **workload_kwargs):
    """Run ONE training batch and sample memory at every operation.

    Forward: after each Function call returns. Backward: at the start of
    each Function's backward, and once when ``loss.backward()`` returns.
    ``retain_grad`` (stage 04 on) and ``retain_graph`` (stage 06 on) are
    passed to ``backward`` only when they are not None. The cyclic collector is off during
    the step (its state is restored). Returns a ``Timeline``; it keeps no
    reference to the graph. ``count_objects=False`` skips counting live
    objects at each event (faster in a large process).
    """
    module = load_stage(stage_or_module)
    if workload is None:
        workload = Workload(module, **workload_kwargs)
    elif workload_kwargs:
        raise TypeError("record_step_timeline: pass either workload= or workload settings, not both")
    backward_kwargs = {name: value for name, value in
                       (("retain_grad", retain_grad), ("retain_graph", retain_graph))
                       if value is not None}
    if label is None:
        label = stage_label(module) + (f", {kwargs_text(backward_kwargs)}" if backward_kwargs else "")
    sampler = _OpSampler(module, count_objects, max_events)

    workload.cleargrads()
    with tracing(), collector(False), _ops_patched(module, sampler):
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
