"""The memory of one inference pass, in units of one activation.

Stage 05's lesson: without a graph, an activation dies as soon as the next
operation has consumed it, so a deep network's inference holds a few
activations at a time instead of all of them.
"""
import contextlib
import tracemalloc

import numpy as np

from dezero_mini.memory.probes import collector, tracing
from dezero_mini.memory.stages import load_stage
from dezero_mini.validation import whole_number


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
    for name, size in (("depth", depth), ("width", width), ("batch", batch)):
        whole_number(size, "measure_inference", name, at_least=1)
    rng = np.random.RandomState(seed)
    layers = [(module.Variable(rng.randn(width, width) / np.sqrt(width)), module.Variable(np.zeros(width)))
              for _ in range(depth)]
    x = module.Variable(rng.randn(batch, width))
    use_no_grad = bool(no_grad) and hasattr(module, "no_grad")
    context = module.no_grad() if use_no_grad else contextlib.nullcontext()
    activation_bytes = batch * width * np.dtype(np.float64).itemsize
    with tracing(), collector(False), context:
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
