"""Memory against depth: a deep chain of residual layers, plain or checkpointed.

``DeepChain(module, depth=..., segments=...)`` is the standard workload's
task learned by a network with ``depth`` residual layers
``h = h + tanh(h W_k + b_k)`` between its first and last layers. With
``segments=None`` the graph is the plain one: each layer keeps two
activations for backward (its input, kept by ``matmul``, and the tanh's
output). With ``segments=s`` the chain is cut into ``s`` runs of layers of
(nearly) equal length, each run but the last wrapped in the stage's
``checkpoint``: the graph keeps the inputs of the runs, and backward
recomputes one run at a time. (The last run's backward comes first, right
after the forward pass: recomputing it would cost time and save nothing,
so it keeps its graph, as PyTorch's ``checkpoint_sequential`` does.)

``step_peak(workload)``: the traced peak of one forward and backward pass
above what was traced when it began, collector off.

``plot_explored_checkpoints`` and ``checkpointed_graph`` draw the
interactive cell of the lesson (``explore(10)``).
"""
import gc
import math
import numbers
import time
import tracemalloc

import numpy as np

from dezero_mini.memory.gctime import time_runs
from dezero_mini.memory.probes import collector, tracing
from dezero_mini.memory.refgraph import reference_graph, watch
from dezero_mini.memory.stages import load_stage
from dezero_mini.memory.workload import Workload
from dezero_mini.validation import expect, whole_number


def sqrt_segments(depth):
    """The number of segments that minimises the memory of a checkpointed
    chain of ``depth`` layers, to first order: about sqrt(depth)."""
    depth = whole_number(depth, "sqrt_segments", "depth", at_least=1)
    return max(1, round(math.sqrt(depth)))


class DeepChain(Workload):
    """The standard workload with ``depth`` residual layers of width
    ``hidden`` after its first layer, checkpointed in ``segments`` runs
    (None: no checkpoint). See the module's docstring.

    The layers start near the identity (weights of scale 1/sqrt(hidden *
    depth)), so that a chain of a thousand layers neither explodes nor
    vanishes, and it still learns.
    """

    def __init__(self, module, *, depth=64, segments=None, batch_size=1024, hidden=8,
                 dtype=np.float32, **settings):
        # A wide batch and a narrow layer: an activation (32 KiB) weighs 128 times
        # a layer's weights, so memory is the activations', and 1,024 layers take
        # well under a second. float32, as deep learning trains (and DeZero's
        # layers): numpy's float64 tanh costs several times its float32 one.
        super().__init__(module, batch_size=batch_size, hidden=hidden, **settings)
        depth = whole_number(depth, "DeepChain", "depth", at_least=1)
        if segments is not None and not 1 <= whole_number(segments, "DeepChain", "segments") <= depth:
            raise ValueError(f"DeepChain: segments must be None or from 1 to depth ({depth}), "
                             f"got {segments!r}")
        if segments is not None and not hasattr(self.module, "checkpoint"):
            raise ValueError(f"DeepChain: {self.module.__name__} has no checkpoint(); "
                             "use segments=None")
        self.depth, self.segments, self.dtype = int(depth), segments, np.dtype(dtype)
        Variable = self.module.Variable
        self.layers = [(Variable(W.data.astype(self.dtype), name=W.name),
                        Variable(b.data.astype(self.dtype), name=b.name)) for W, b in self.layers]
        rng = np.random.RandomState([self.seed, 3])
        scale = 1 / np.sqrt(self.hidden * self.depth)
        self.chain = [(Variable((rng.randn(self.hidden, self.hidden) * scale).astype(self.dtype),
                                name=f"chain_W{k}"),
                       Variable(np.zeros(self.hidden, self.dtype), name=f"chain_b{k}"))
                      for k in range(1, self.depth + 1)]

    def batch(self, i):
        x, t = super().batch(i)
        return x.astype(self.dtype), t.astype(self.dtype)

    @property
    def activation_nbytes(self):
        """Bytes of one activation of the chain: ``batch_size * hidden`` of ``dtype``."""
        return self.batch_size * self.hidden * self.dtype.itemsize

    @property
    def parameters(self):
        return super().parameters + [p for layer in self.chain for p in layer]

    def run(self, first, last):
        """Layers ``first`` to ``last - 1`` of the chain as one ``ChainSegment``."""
        return ChainSegment(self.module, self.chain[first:last])

    @property
    def boundaries(self):
        """Where the segments start and end: ``[0, ..., depth]``."""
        count = self.segments or 1
        return [self.depth * k // count for k in range(count + 1)]

    def forward(self, x, hidden=None):
        m = self.module
        (W1, b1), (W2, b2), (W3, b3) = self.layers
        h = m.sigmoid(m.add(m.matmul(x, W1), b1))
        for first, last in zip(self.boundaries[:-1], self.boundaries[1:]):
            if self.segments is None or last == self.depth:
                # The last segment's backward runs first, right after the forward
                # pass: recomputing it would cost time and save nothing.
                h = self.run(first, last)(h)
            else:
                h = m.checkpoint(self.run(first, last), h)
            if hidden is not None:
                hidden.append(h)
        h = m.sigmoid(m.add(m.matmul(h, W2), b2))
        return m.add(m.matmul(h, W3), b3)

    def describe(self):
        return {**super().describe(), "depth": self.depth, "segments": self.segments,
                "dtype": self.dtype.name}


class ChainSegment:
    """A run of residual layers as one callable object ``h -> h``: what
    ``checkpoint`` usually gets, a Layer-like object that holds its
    parameters (a closure would do as well)."""

    def __init__(self, module, layers):
        self.add, self.tanh, self.matmul = module.add, module.tanh, module.matmul
        self.layers = layers  # [(W, b), ...]

    def __call__(self, h):
        for W, b in self.layers:
            h = self.add(h, self.tanh(self.add(self.matmul(h, W), b)))
        return h


def step_peak(workload, i=0):
    """The traced peak of one forward and backward pass of batch ``i``, in
    bytes above what was traced when it began (the collector off; the
    parameters' gradients are cleared first, so they count)."""
    expect(workload, Workload, "step_peak", "workload", "a Workload (DeepChain, ResidualStack, ...)")
    expect(i, numbers.Integral, "step_peak", "i", "the index of a batch, a whole number")
    workload.cleargrads()
    with tracing(), collector(False):
        gc.collect()
        start = tracemalloc.get_traced_memory()[0]
        tracemalloc.reset_peak()
        loss = workload.loss(i)
        loss.backward()
        peak = tracemalloc.get_traced_memory()[1]
        del loss
    return peak - start


# --- the interactive cell of the lesson (dezero_mini/memory/explorations/stage10.py) ---------
#: Where a chain may put its checkpoints: none, a segment every k layers, about sqrt(n) segments.
POLICIES = ("none", "every k layers", "sqrt(n) segments")


def policy_segments(policy, depth, every=8):
    """The ``segments`` of a ``DeepChain`` of ``depth`` layers for one of
    ``POLICIES`` (``every``: the k of "every k layers"); None for no checkpoint."""
    if policy == "none":
        return None
    if policy == "every k layers":
        if int(every) < 1:
            raise ValueError(f"policy_segments: k must be at least 1, got {every!r}")
        return min(depth, -(-depth // int(every)))
    if policy == "sqrt(n) segments":
        return sqrt_segments(depth)
    raise ValueError(f"policy_segments: policy must be one of {POLICIES}, got {policy!r}")


def _policy_label(policy, depth, every):
    segments = policy_segments(policy, depth, every)
    if segments is None:
        return "no checkpoint"
    name = f"every {every} layers" if policy == "every k layers" else "sqrt(n) segments"
    return f"{name} ({segments} segment{'s' if segments > 1 else ''})"


def plot_explored_checkpoints(values):
    """The figure of ``explore(10)``: left, the peak of one training step
    against depth, from 16 layers up to ``depth`` (doubling), with no
    checkpoint and with the chosen ``policy``; right, the CPU time of one
    training step at ``depth`` (fastest of 3, collector on). Values used:
    stage, depth, policy, every."""
    from dezero_mini.memory.plotting import _pyplot

    module = load_stage(values["stage"])
    depth, every = values["depth"], values["every"]
    depths = [d for d in (2 ** k for k in range(4, 11)) if d < depth] + [depth]
    policies = ["none"] + ([values["policy"]] if values["policy"] != "none" else [])
    fig, (left, right) = _pyplot().subplots(1, 2, figsize=(10.0, 3.8), constrained_layout=True,
                                            gridspec_kw={"width_ratios": [3, 2]})
    chains = []
    for policy in policies:
        peaks = [step_peak(DeepChain(module, depth=d, segments=policy_segments(policy, d, every)))
                 for d in depths]
        left.plot(depths, np.array(peaks) / 2 ** 20, marker="o",
                  label=f"{_policy_label(policy, depth, every)}: {peaks[-1] / 2 ** 20:.1f} MiB")
        chains.append(DeepChain(module, depth=depth, segments=policy_segments(policy, depth, every)))
    left.set_xscale("log", base=2)
    left.set_yscale("log")
    left.set_xticks(depths, [str(d) for d in depths])
    left.yaxis.set_major_formatter("{x:g}")
    left.yaxis.set_minor_formatter("{x:g}")
    left.set_xlabel("layers (log scale)")
    left.set_ylabel("traced peak of one step (MiB, log scale)")
    left.set_title("Peak of one training step (collector off)")
    left.grid(alpha=0.3)
    left.legend(fontsize=8, title=f"at {depth} layers", title_fontsize=8)
    timings = time_runs([(lambda c=c: c.train_step(0), "on") for c in chains], repeats=3,
                        clock=time.process_time)
    labels = [_policy_label(policy, depth, every).replace(" (", "\n(") for policy in policies]
    bars = right.bar(labels, [t.seconds * 1000 for t in timings], color=["C0", "C1"][:len(chains)])
    right.bar_label(bars, fmt="%.0f ms", fontsize=8)
    right.set_ylabel("CPU time, fastest of 3 (ms)")
    right.set_title(f"One step of {depth} layers, collector on")
    right.tick_params(axis="x", labelsize=8)
    return fig


def checkpointed_graph(values):
    """The reference graph of ``loss = sum(h)`` after ``graph_layers`` layers
    ``h = tanh(h @ W)`` (one ``W``), cut into segments by the chosen
    ``policy`` and ``every`` as ``DeepChain`` cuts its chain: each segment
    but the last in one ``checkpoint``. Values used: stage, graph_layers,
    policy, every, backward (draw it after ``loss.backward()``)."""
    module = load_stage(values["stage"])
    layers = values["graph_layers"]
    segments = policy_segments(values["policy"], layers, values["every"])
    x = module.Variable(np.linspace(-1, 1, 8).reshape(2, 4), name="x")
    W = module.Variable(np.eye(4) * 0.5, name="W")

    def run(count):
        def layers_of_tanh(h):
            for _ in range(count):
                h = module.tanh(module.matmul(h, W))
            return h
        return layers_of_tanh

    bounds = [layers * k // (segments or 1) for k in range((segments or 1) + 1)]
    h = x
    for first, last in zip(bounds[:-1], bounds[1:]):
        h = run(last - first)(h) if segments is None or last == layers else \
            module.checkpoint(run(last - first), h)
    loss = module.sum(h)
    loss.name = "loss"
    del h  # the last activation is the graph's, not a name of the reader's
    watched = watch(loss)
    if values.get("backward"):
        loss.backward()
    cut = ("no checkpoint" if segments is None else
           "one segment, the last, which is never checkpointed" if segments == 1 else
           f"{segments} segments, all but the last checkpointed")
    return reference_graph({"x": x, "W": W, "loss": loss}, watched,
                           title=f"{layers} layers h = tanh(h @ W), {cut}"
                                 + (", after backward" if values.get("backward") else ""))
