"""Which Variables of a graph hold a gradient, and whether anyone can read it.

A gradient is worth its bytes only if someone reads it, and one reads a
gradient through a name: ``x.grad``, a model's parameters. A number or an
array written into a formula (``y * 1.0001``) is an input of its Function
too; in the course's step files the Function makes it a Variable, a leaf,
and backward gives it a gradient that it keeps while the graph lives,
though the user holds no name for it. ``graph_gradients(y, held=[x])`` walks
the graph behind ``y`` and counts the gradients, those of the Variables in
``held`` and the others, with their bytes; and, in ``dezero_mini``, the
inputs that have no edge at all: None in ``next_functions``, a constant for
which the graph holds nothing.

It works on every stage: the graph is walked through each Function's
``inputs`` (the Variables it keeps) and, where there are some, its
``next_functions`` (``(creator, output index)``, ``(leaf, None)`` or None).
In dezero_mini backward lets go of the graph unless ``retain_graph=True``:
walk a graph kept that way.
"""
import weakref
from dataclasses import dataclass

from dezero_mini.memory.workload import grad_array
from dezero_mini.validation import describe, expect_variable


@dataclass(frozen=True)
class GraphGradients:
    """What the graph behind a Variable holds, after backward.

    ``functions``, ``variables``: the Functions reached and the Variables
    they hold or that are still alive (the root, the inputs, the outputs);
    ``gradients``, ``gradient_bytes``: how many of those Variables hold a
    gradient, and the bytes of its array (``nbytes``; each array object
    costs about a hundred bytes more); ``unheld_gradients``,
    ``unheld_bytes``: the same for the Variables that are not in ``held``
    and are not the root, whose gradients nobody can read;
    ``no_edge``: inputs with neither a Variable nor an edge (None in
    ``next_functions``): constants, which get no gradient at all."""

    functions: int
    variables: int
    gradients: int
    gradient_bytes: int
    unheld_gradients: int
    unheld_bytes: int
    no_edge: int

    def __str__(self):
        return (f"{self.functions} Functions, {self.variables} Variables; gradients held: "
                f"{self.gradients} ({self.gradient_bytes:,} bytes of data), of which nobody can "
                f"read {self.unheld_gradients} ({self.unheld_bytes:,} bytes); inputs with no "
                f"edge: {self.no_edge}")


def _inputs_of(f):
    """The Variables and Functions that ``f`` leads to, and how many of its
    inputs have no edge."""
    variables = [x for x in (getattr(f, "inputs", None) or ()) if x is not None]
    functions, no_edge = [], 0
    for edge in getattr(f, "next_functions", None) or ():
        if edge is None:
            no_edge += 1
        elif edge[1] is None:  # (leaf, None)
            variables.append(edge[0])
        else:  # (creator, output index)
            functions.append(edge[0])
    return variables, functions, no_edge


def graph_gradients(root, held=()):
    """Count the gradients that the graph behind the Variable ``root`` holds.

    held: the Variables that the caller holds names for (the inputs and the
        parameters whose gradients it will read). Every other Variable
        except ``root`` counts as unheld: nothing outside the graph names
        it, so its gradient can never be read.

    Returns a :class:`GraphGradients`. Keeps no reference to the graph.
    """
    expect_variable(root, "graph_gradients", "root")
    if hasattr(held, "creator"):  # one Variable alone
        held = [held]
    elif not isinstance(held, (list, tuple, set, frozenset)):
        raise TypeError("graph_gradients: held must be a list of the Variables you hold, "
                        f"got {describe(held)}")
    held_ids = {id(v) for v in held}
    variables = {id(root): root}
    functions, no_edge = {}, 0
    pending = [root.creator] if root.creator is not None else []
    while pending:
        f = pending.pop()
        if id(f) in functions:
            continue
        functions[id(f)] = f
        inputs, creators, none = _inputs_of(f)
        no_edge += none
        # (weak references from stage 03 on; stages 01 and 02 hold them strongly)
        outputs = [ref() if isinstance(ref, weakref.ref) else ref
                   for ref in (getattr(f, "outputs", None) or ())]
        for v in inputs + outputs:
            if v is not None:
                variables.setdefault(id(v), v)
                if v.creator is not None:
                    pending.append(v.creator)
        pending.extend(creators)

    gradients = gradient_bytes = unheld = unheld_bytes = 0
    for key, v in variables.items():
        if v.grad is None:
            continue
        nbytes = grad_array(v.grad).nbytes
        gradients += 1
        gradient_bytes += nbytes
        if key not in held_ids and v is not root:
            unheld += 1
            unheld_bytes += nbytes
    return GraphGradients(functions=len(functions), variables=len(variables), gradients=gradients,
                          gradient_bytes=gradient_bytes, unheld_gradients=unheld,
                          unheld_bytes=unheld_bytes, no_edge=no_edge)
