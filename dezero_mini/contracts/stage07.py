"""Stage 07, user_held_graphs: the leaks that live in the training loop.

The framework is stage 06's (its contracts hold here too); what it gains
are the two ways to keep a value without its graph, as in PyTorch:
``detach()`` and ``item()``. The leaking loops of the lesson are user code,
not the framework's: they are tested in ``tests/test_stage07_*.py``.
"""
import re

import numpy as np

from dezero_mini.contracts import Measurement, Stage
from dezero_mini.contracts.bench import array
from dezero_mini.memory.true_types import is_instance

STAGE = Stage(
    number=7,
    name="user_held_graphs",
    title="user_held_graphs",
    idea=("The framework no longer leaks; a training loop can: any name, list or "
          "attribute that keeps a Variable built from a batch keeps its whole graph. "
          "detach() and item() keep the value without the graph."),
    change=("Give Variable two methods, as in PyTorch: detach(), a new Variable that "
            "shares the array and stands outside any graph, and item(), the value of a "
            "one-element Variable as a Python number (float(v) the same); item() on "
            "more than one element raises ValueError naming item and the shape."),
)


def _describe(value):
    return f"{type(value).__module__}.{type(value).__qualname__}".replace("builtins.", "")


@STAGE.contract(hint="""
    A detached Variable is the same numbers outside any graph: the array can be
    shared (nothing is copied), but nothing that made the original may be reachable
    from it, and no gradient may flow back through it.""")
def detach_shares_the_array_and_has_no_graph(module):
    """detach() returns a new Variable with the same array and no creator; no gradient flows through it."""
    x = module.Variable(np.array([1.0, 2.0]))
    y = module.exp(x)
    d = y.detach()
    problems = []
    if d is y:
        problems.append("detach() returned the Variable itself")
    if not is_instance(d, module.Variable):
        problems.append(f"detach() returned a {_describe(d)}")
    else:
        if d.data is not y.data:
            problems.append("the array is not shared (a copy, or another array)")
        if d.creator is not None:
            problems.append("the detached Variable has a creator")
        try:
            module.sum(module.mul(d, x)).backward()
        except Exception as error:
            problems.append(f"sum(y.detach() * x).backward() raised {type(error).__name__}: "
                            f"{error}")
        else:
            if not np.array_equal(array(x.grad), np.exp([1.0, 2.0])):
                problems.append(f"x.grad of sum(y.detach() * x) is {array(x.grad)}, "
                                "not exp(x) alone: a gradient went through exp")
            if d.grad is None:
                problems.append("the detached Variable got no gradient (it is a leaf now)")
            if y.grad is not None:
                problems.append("the original Variable got a gradient")
    return Measurement.from_problems(
        problems,
        expected="d is not y, d.data is y.data, d.creator None; sum(d * x).backward() gives "
                 "x.grad == exp(x), d.grad set, y.grad None")


@STAGE.contract(hint="""
    What a loop keeps for logging must hold nothing of the graph: not a Variable, and
    not a numpy array either, but a plain Python number of the type of the element,
    as numpy's own item() gives it.""")
def item_gives_a_python_number(module):
    """item() and float() give a plain Python number; item() of several elements raises ValueError."""
    problems = []
    for data, wanted in ((np.array(2.5), 2.5), (np.array([[3.0]]), 3.0), (np.array(3), 3)):
        try:
            got = module.Variable(data).item()
        except Exception as error:
            problems.append(f"Variable({data.tolist()!r}).item() raised "
                            f"{type(error).__name__}: {error}")
            continue
        if type(got) is not type(wanted) or got != wanted:
            problems.append(f"Variable({data.tolist()!r}).item() is {got!r} ({_describe(got)}), "
                            f"not {type(wanted).__name__} {wanted!r}")
    try:
        got = float(module.Variable(np.array([4.0])))
        if got != 4.0:
            problems.append(f"float(Variable([4.0])) is {got!r}")
    except Exception as error:
        problems.append(f"float(Variable([4.0])) raised {type(error).__name__}: {error}")
    try:
        module.Variable(np.array([1.0, 2.0])).item()
        problems.append("item() of two elements did not raise")
    except ValueError as error:
        if not re.search(r"item: .* shape \(2,\)", str(error)):
            problems.append(f"item() of two elements: ValueError {str(error)!r} does not "
                            "say 'item: ' and then name the shape (2,)")
    return Measurement.from_problems(
        problems,
        expected="2.5 (float), 3.0 (float), 3 (int); float() gives 4.0; two elements: "
                 "ValueError 'item: ... shape (2,) ...'")
