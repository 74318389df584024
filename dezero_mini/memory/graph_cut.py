"""The nnengine-pro write-up's two fixes, for any stage of the course.

The write-up (an untitled Chinese account of a memory leak in the
``nnengine-pro`` framework) found two things keeping every batch alive: a
global registry of tensors (its ``TcGraph``), and references between
operators and tensors. Its fixes were to empty the registry after every
forward pass, and, after every backward pass, to walk the graph breadth first
from the loss and cut every reference between an operator and its tensors,
leaving only the model's parameters.

``breadth_first_cut`` is that walk, written for the course's frameworks;
``writeup_step`` is a training step with either fix switched on, for
``record_training(step=...)``. Stage 06 of the course does the cut inside
backward instead, Function by Function.
"""
from collections import deque

from dezero_mini.memory.workload import Workload


def breadth_first_cut(root):
    """Cut the graph behind the Variable ``root``, breadth first: every
    Function reached forgets its inputs and outputs, and every Variable
    reached forgets its creator. Leaves (parameters, inputs) are not
    changed; a Variable that the user still holds keeps its data and
    becomes a leaf. Returns how many Functions were cut."""
    cut = 0
    queue = deque([root])
    while queue:
        variable = queue.popleft()
        creator = variable.creator
        if creator is None:
            continue
        queue.extend(creator.inputs or ())
        creator.inputs = []
        creator.outputs = []
        variable.creator = None
        cut += 1
    return cut


def writeup_step(workload, *, empty_registry=False, cut=False):
    """A training step for ``record_training(step=...)``: the standard
    ``workload`` step, then the write-up's fixes that are switched on.

    empty_registry: empty the stage's global ``REGISTRY`` after the forward
        pass (stage 01 has one; other stages have nothing to empty).
    cut: after backward, ``breadth_first_cut`` the graph from the loss.
    """
    if not isinstance(workload, Workload):
        raise TypeError(f"writeup_step: expected a Workload, got {type(workload).__name__}")
    registry = getattr(workload.module, "REGISTRY", None)
    if empty_registry and registry is None:
        raise ValueError(f"writeup_step: {workload.module.__name__} has no REGISTRY to empty")

    def step(i):
        workload.cleargrads()
        loss = workload.loss(i)
        if empty_registry:
            registry.clear()
        loss.backward()
        if cut:
            breadth_first_cut(loss)
        workload.update()
        return float(loss.data)

    return step
