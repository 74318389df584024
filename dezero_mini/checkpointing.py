"""Checkpointing: keep a part of a model's inputs, recompute the rest in backward.

``checkpoint(function, *inputs)`` returns what ``function(*inputs)`` returns,
but the graph holds only ``inputs`` for it: the forward pass runs
``function`` under ``no_grad()``, so every activation inside dies as soon as
the next operation has read it, and backward runs ``function`` again, with
the graph, and backpropagates through that copy (Chen et al., "Training Deep
Nets with Sublinear Memory Cost", 2016; ``torch.utils.checkpoint`` in
PyTorch). A network of n layers cut into about sqrt(n) checkpointed segments
keeps about 2 sqrt(n) activations instead of n, for one more forward pass.

Written on the public API only (a Function in DeZero's way, which keeps its
input Variables and reads them in backward), so that it works whatever the
core does inside.
"""
import numpy as np

from dezero_mini import functions
from dezero_mini.core import Config, Function, Variable, no_grad, using_config


class Checkpoint(Function):
    """``function`` as one node of the graph (see ``checkpoint``)."""

    def __init__(self, function):
        self.function = function

    def forward(self, *xs):
        with no_grad():  # no graph: nothing inside outlives the next operation
            ys = self.function(*[Variable(x) for x in xs])
        arrays = tuple(y.data for y in _outputs(ys))
        return arrays if isinstance(ys, (tuple, list)) else arrays[0]

    def backward(self, *gys):
        if Config.enable_backprop:  # the pass builds a graph: backward(create_graph=True)
            # The copy that backward recomputes starts from new leaves, so a
            # graph of these gradients would not reach the inputs, and a
            # second derivative would silently miss terms: refuse instead.
            raise RuntimeError(
                "Checkpoint.backward: backward(create_graph=True) cannot go through a "
                "checkpoint (it gives first-order gradients only); call the function without "
                "checkpoint() where you need higher-order derivatives")
        inputs = [Variable(x.data) for x in self.inputs]  # the kept inputs, outside any graph
        with using_config("enable_backprop", True):  # this time backward needs the graph
            ys = _outputs(self.function(*inputs))
        pairs = [(y, gy) for y, gy in zip(ys, gys) if gy is not None]
        if len(pairs) == 1:
            y, gy = pairs[0]
            y.grad = gy
            y.backward()
        elif pairs:  # several outputs: a scalar whose gradient in each y is exactly its gy
            with using_config("enable_backprop", True):
                total = None
                for y, gy in pairs:
                    term = functions.sum(y * gy.data)  # d/dy = 1 * gy, not rounded
                    total = term if total is None else total + term
            total.backward()
        return tuple(Variable(np.zeros_like(x.data)) if x.grad is None else x.grad
                     for x in inputs)


def _outputs(ys):
    """The outputs of a checkpointed function as a list of Variables; TypeError otherwise."""
    outputs = list(ys) if isinstance(ys, (tuple, list)) else [ys]
    wrong = [type(y).__name__ for y in outputs if not isinstance(y, Variable)]
    if not outputs or wrong:
        raise TypeError("checkpoint: the function must return a Variable or a tuple of "
                        f"Variables, got {type(ys).__name__}"
                        + (f" of {', '.join(wrong)}" if wrong and outputs != [ys] else ""))
    return outputs


def checkpoint(function, *inputs):
    """Compute ``function(*inputs)`` keeping only ``inputs`` for backward.

    function: any callable on Variables (a Layer, a Model, a few operations)
        that returns a Variable or a tuple of Variables. It runs twice: under
        ``no_grad()`` in the forward pass, and again in backward, with the
        graph; so it must compute the same thing both times (no randomness
        that differs between calls, such as dropout in training mode).
    inputs: the Variables (or arrays) that ``function`` reads. The
        parameters that it uses (a Layer's) get their gradients in backward
        as without checkpointing; any other Variable of the graph that it
        reads must be one of ``inputs``, or no gradient reaches it.

    Returns what ``function`` returns, as part of the graph: backward gives
    gradients equal to the plain gradients up to the order in which
    contributions are summed; bit-identical for a chain (the same
    operations run on the same arrays, but a value read both inside and
    outside the segment, such as a weight shared with other layers, gets the
    segment's contributions in a sum of their own, and floating-point
    addition is not associative: a difference in the last bit). First-order
    only: ``backward(create_graph=True)`` through it raises RuntimeError.
    """
    if not callable(function):
        raise TypeError(f"checkpoint: the first argument must be a callable, "
                        f"got {type(function).__name__}")
    return Checkpoint(function)(*inputs)
