"""Stage 05, no_grad: inference builds no graph at all."""
import weakref

import numpy as np

from dezero_mini.contracts import Measurement, Stage, plainly_equal
from dezero_mini.memory.inference import measure_inference
from dezero_mini.memory.timeline import _function_classes

STAGE = Stage(
    number=5,
    name="no_grad",
    title="no_grad",
    idea=("Config.enable_backprop, using_config and no_grad: inference and evaluation "
          "build no graph, so each activation is freed as soon as the next one is made."),
    change=("Add a Config with a switch enable_backprop, a context manager "
            "using_config(name, value) that sets a Config attribute inside a with-block, "
            "and no_grad() built on it. When the switch is off, a Function computes its "
            "outputs and builds no graph."),
    needs=("Config", "using_config", "no_grad", "exp"),
)


class _CalledFunctions:
    """Within the block, remember every Function called (weakly) and whether
    it held inputs or outputs when its call returned."""

    def __init__(self, module):
        self.module = module
        self.seen = []  # (weak reference, held inputs or outputs)
        self._originals = []

    def __enter__(self):
        seen = self.seen

        def wrap(original):
            def __call__(self, *args, **kwargs):
                result = original(self, *args, **kwargs)
                held = any(getattr(self, name, None) for name in ("inputs", "outputs"))
                seen.append((weakref.ref(self), held))
                return result
            return __call__

        for cls in _function_classes(self.module.Function):
            if "__call__" in cls.__dict__:
                original = cls.__dict__["__call__"]
                self._originals.append((cls, original))
                setattr(cls, "__call__", wrap(original))
        return self

    def __exit__(self, *exc):
        for cls, original in reversed(self._originals):
            setattr(cls, "__call__", original)


@STAGE.contract(hint="""
    Inside no_grad() a Function computes its outputs and nothing else: the outputs
    get no creator and the Function keeps neither inputs nor outputs, so nothing
    holds it once it has returned.""")
def no_grad_builds_no_graph(module):
    """Under no_grad(), outputs have no creator and no Function holds or outlives anything."""
    x = module.Variable(np.ones((2, 3)))
    with _CalledFunctions(module) as called:
        with module.no_grad():
            y = module.sigmoid(x)
            z = module.add(module.matmul(y, module.Variable(np.ones((3, 2)))), 1.0)
    problems = [f"{name}.creator is set" for name, v in (("y", y), ("z", z))
                if v.creator is not None]
    if not called.seen:
        problems.append("no Function was called")
    holding = sum(held for _, held in called.seen)
    alive = sum(ref() is not None for ref, _ in called.seen)
    if holding:
        problems.append(f"{holding} Functions kept inputs or outputs")
    if alive:
        problems.append(f"{alive} of {len(called.seen)} Functions still alive")
    return Measurement.from_problems(
        problems,
        expected="no creator; no Function keeps inputs/outputs or stays alive")


@STAGE.contract(hint="""
    The mode must come back however the with-block ends: when the block raises, the
    code after the yield of a context manager does not run unless it is protected.""")
def no_grad_restores_after_exception(module):
    """After an exception inside no_grad(), backprop is enabled again and graphs are built."""
    before = module.Config.enable_backprop
    inside = None
    try:
        with module.no_grad():
            inside = module.Config.enable_backprop
            raise RuntimeError("inside the block")
    except RuntimeError as error:
        if str(error) != "inside the block":
            raise
    after = module.Config.enable_backprop
    builds = module.exp(module.Variable(np.ones(3))).creator is not None
    module.Config.enable_backprop = True  # so that a failure here does not spoil the next contract
    return Measurement(
        passed=before is True and inside is False and after is True and builds,
        expected="True before, False inside, True after the exception; exp() has a creator",
        measured=f"{before} before, {inside} inside, {after} after; "
                 f"exp() {'has' if builds else 'has no'} creator")


@STAGE.contract(hint="""
    Each using_config block must put back the value that it found when it began, not
    a fixed one, so that blocks can nest.""")
def using_config_nests(module):
    """using_config blocks nest: each restores the value that it found."""
    seen = []
    with module.using_config("enable_backprop", False):
        with module.using_config("enable_backprop", True):
            seen.append(module.Config.enable_backprop)
        seen.append(module.Config.enable_backprop)
    seen.append(module.Config.enable_backprop)
    module.Config.enable_backprop = True
    return Measurement(passed=plainly_equal(seen, [True, False, True]),
                       expected="inner True, outer False, after True",
                       measured=f"inner {seen[0]}, outer {seen[1]}, after {seen[2]}")


@STAGE.contract(hint="""
    An evaluation pass under no_grad() should hold a couple of activations at a time:
    each activation must be free as soon as the next operation has consumed it.""")
def inference_holds_few_activations(module):
    """A deep inference pass under no_grad() peaks at <= 3.5 activations, half of the graph's peak."""
    free = measure_inference(module, no_grad=True)["peak_in_activations"]
    graph = measure_inference(module, no_grad=False)["peak_in_activations"]
    return Measurement(
        passed=free <= 3.5 and graph >= 2 * free,
        expected=f"<= 3.5 activations, and <= half the {graph:.1f} of a pass with a graph",
        measured=f"{free:.1f} activations")
