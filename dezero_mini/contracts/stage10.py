"""Stage 10, checkpointing: keep some activations, recompute the rest in backward.

Stage 10 starts from stage 08's framework (``builds_on=8``: stage 09's
planner is another road) and adds ``checkpoint(function, *inputs)``: the
forward pass runs ``function`` under ``no_grad()`` and keeps only its
inputs; backward runs it again, with the graph, and backpropagates through
that copy (Chen et al., "Training Deep Nets with Sublinear Memory Cost",
2016). A chain of n layers cut into about sqrt(n) segments keeps memory
that grows like sqrt(n), and the gradients are the plain ones.
"""
import weakref

import numpy as np

from dezero_mini.contracts import Measurement, Stage, plainly_equal
from dezero_mini.contracts.bench import array
from dezero_mini.memory.depth import DeepChain, sqrt_segments, step_peak
from dezero_mini.memory.refgraph import format_bytes

STAGE = Stage(
    number=10,
    name="checkpointing",
    title="checkpointing",
    builds_on=8,
    idea=("Keep only some activations and recompute the rest during backward: "
          "checkpoint(function, *inputs) runs function without a graph and keeps its "
          "inputs; backward runs it again with the graph and backpropagates through it. "
          "Cut n layers into sqrt(n) segments: memory like sqrt(n), for one more forward "
          "pass, and the same gradients."),
    change=("Add a Function Checkpoint(function) and checkpoint(function, *inputs) = "
            "Checkpoint(function)(*inputs). Its forward keeps the input arrays (its only "
            "saved value) and runs function on new Variables of them under no_grad(), "
            "returning the output's array. Its backward makes new Variables of the saved "
            "arrays, runs function on them again with Config.enable_backprop True, sets the "
            "output's grad to the gradient it received, calls backward on it, and returns "
            "the new Variables' gradients (the parameters that function used got theirs on "
            "the way)."),
    needs=("checkpoint",),
)

#: The chain of the gradient contract: small, with two checkpointed segments
#: and a plain last one.
_SMALL = {"depth": 12, "segments": 3, "batch_size": 16, "hidden": 8}
#: The depth of the memory contract, and how much less the checkpointed peak must be.
DEPTH, AT_MOST = 256, 1 / 3


def _gradients(module, segments):
    """The gradients of x and of every parameter of the small chain, by name."""
    chain = DeepChain(module, **{**_SMALL, "segments": segments})
    x_data, t = chain.batch(0)
    x = module.Variable(x_data)
    module.mean_squared_error(chain.forward(x), module.Variable(t)).backward()
    grads = {"x": array(x.grad)}
    grads.update({p.name: array(p.grad) for p in chain.parameters})
    return grads


@STAGE.contract(hint="""
    Backward through a checkpoint must run the very operations that the plain graph
    would, on the very same arrays, and the gradient must reach everything the segment
    read: its inputs (returned by the Checkpoint's backward) and the parameters used
    inside it (through the backward of the recomputed segment). Where does the
    gradient that the Checkpoint received enter the recomputed segment?""")
def checkpointed_gradients_equal_plain(module):
    """In a chain of 12 layers with two checkpointed segments, x and every parameter get the plain gradients, to the bit."""
    plain = _gradients(module, None)
    try:
        checkpointed = _gradients(module, _SMALL["segments"])
    except Exception as error:
        return Measurement(passed=False, expected="the plain gradients",
                           measured=f"raised {type(error).__name__}: {error}")
    problems = []
    for name, expected in plain.items():
        found = checkpointed[name]
        if found is None:
            problems.append(f"{name} has no gradient")
        elif not np.array_equal(found, expected):
            problems.append(f"{name}'s gradient differs (by up to "
                            f"{np.max(np.abs(found - expected)):.3g})")
    return Measurement(
        passed=not problems,
        expected=f"the plain gradients of x and of all {len(plain) - 1} parameters, "
                 "bit for bit",
        measured="; ".join(problems[:4]) + (f" (and {len(problems) - 4} more)"
                                             if len(problems) > 4 else "") or "equal")


@STAGE.contract(hint="""
    In the forward pass nobody will differentiate the segment's inside, so it needs no
    graph. In backward the segment's inside is needed again, with its graph this time:
    run it once more, and only once, with backprop enabled, whatever mode backward runs
    in.""")
def runs_once_without_the_graph_and_once_with(module):
    """checkpoint runs the function once under no_grad in the forward pass and once with the graph in backward."""
    modes = []

    def segment(h):
        modes.append(module.Config.enable_backprop)
        return module.tanh(module.mul(h, h))

    x = module.Variable(np.array([0.5, -1.0, 2.0]))
    y = module.checkpoint(segment, x)
    after_forward = list(modes)
    module.sum(y).backward()
    expected_grad = 2 * x.data * (1 - np.tanh(x.data ** 2) ** 2)
    right = x.grad is not None and np.allclose(array(x.grad), expected_grad)
    passed = (plainly_equal(after_forward, [False]) and plainly_equal(modes, [False, True])
              and right)
    return Measurement(
        passed=passed,
        expected="enable_backprop False in the forward call, True in the one call of "
                 "backward; x.grad right",
        measured=f"calls with enable_backprop {after_forward} after the forward pass, "
                 f"{modes} after backward; x.grad {'right' if right else 'wrong or missing'}")


@STAGE.contract(hint="""
    What keeps an activation inside the segment alive after the forward pass? A graph
    (a Function that saved it for its backward) or a name that holds it. A checkpoint
    needs only its inputs to run the segment again.""")
def keeps_nothing_inside_the_segment(module):
    """Once checkpoint returns, no array computed inside the segment is alive except its output."""
    inside = []

    def segment(h):
        for _ in range(4):
            h = module.exp(module.mul(h, module.Variable(np.array(0.5))))
            inside.append(weakref.ref(h.data))
        return h

    x = module.Variable(np.linspace(-1.0, 1.0, 1000))
    y = module.checkpoint(segment, x)
    kept = [ref for ref in inside[:4][:-1] if ref() is not None]
    total = sum(ref().nbytes for ref in kept)
    del y
    return Measurement(
        passed=not kept,
        expected="none of the 3 intermediate arrays of the forward call alive",
        measured=f"{len(kept)} alive ({format_bytes(total)})" if kept else "none alive")


@STAGE.contract(hint="""
    With s checkpoints in a chain of n layers, backward holds the s segment inputs plus
    the graph of one segment at a time: about n/s + s activations instead of n. Does
    the forward pass keep more than the segments' inputs, or does backward rebuild more
    than one segment at a time?""")
def peak_at_256_layers_a_third_of_plain(module):
    """One training step of a 256-layer chain in 16 checkpointed segments peaks at most at a third of the plain peak."""
    plain = step_peak(DeepChain(module, depth=DEPTH))
    try:
        checkpointed = step_peak(DeepChain(module, depth=DEPTH, segments=sqrt_segments(DEPTH)))
    except Exception as error:
        return Measurement(passed=False, expected=f"<= {format_bytes(plain * AT_MOST)}",
                           measured=f"raised {type(error).__name__}: {error}")
    return Measurement(
        passed=checkpointed <= plain * AT_MOST,
        expected=f"<= {format_bytes(plain * AT_MOST)} (a third of the plain "
                 f"{format_bytes(plain)})",
        measured=f"{format_bytes(checkpointed)} ({checkpointed / plain:.2f} of plain)")
