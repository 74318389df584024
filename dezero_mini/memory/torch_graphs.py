"""Which names of a PyTorch program keep an autograd graph alive, and how big it is.

In PyTorch the intermediate results of a graph are not Python objects: they
are held inside the C++ nodes of the autograd graph (``tensor.grad_fn``,
linked by ``node.next_functions``), each node keeping the tensors its
backward needs (its ``_saved_*`` attributes). So ``gc.get_objects()`` sees a
loop that keeps every batch's graph (``total_loss += loss``) as two tensors
with a ``grad_fn``, however many batches it has kept. What grows is the graph
behind them. This module looks at it from the names the learner wrote:

* ``named_graphs(namespaces)``: for every name of the learner's code (the
  script's globals, the locals of its running frames, the cells of its
  closures) it follows what the name holds, through lists, tuples, dicts,
  sets, deques and object attributes (``model.cache``), down to the tensors
  that have a ``grad_fn``, and measures the graph behind them
  (``GraphSize``: nodes, and the bytes of the tensors those nodes save,
  counted once per storage; a parameter's own storage is not counted, since
  the model keeps it anyway).

It needs nothing from PyTorch but what every tensor exposes (``grad_fn``,
``next_functions``, the saved attributes) and is imported only when PyTorch is.
"""
from __future__ import annotations

import types
from collections import deque
from dataclasses import dataclass, field

import torch

#: How deep the search goes below a name: ``model.cache[3]`` is three links.
MAX_DEPTH = 4
#: How many items of one container are looked at (the graph of a list of a
#: million floats is not worth a million steps).
MAX_ITEMS = 10_000
_CONTAINERS = (list, tuple, set, frozenset, deque)


@dataclass(frozen=True)
class GraphSize:
    """The autograd graph behind some tensors: ``nodes``, and ``saved_bytes``,
    the bytes of the tensors its nodes keep for backward (0 once backward has
    freed them: the nodes stay, their saved tensors do not)."""

    nodes: int
    saved_bytes: int
    #: ids of the nodes (alive while the graph is), to tell whether one
    #: graph contains another (compare=False: not part of equality)
    node_ids: frozenset = field(default=frozenset(), compare=False, repr=False)


@dataclass(frozen=True)
class HeldGraph:
    """What one name holds: ``path`` (``total_loss``, ``model.cache``,
    ``history['loss']``), ``where`` (the script, or the function and line of
    the frame), the kind of object the name holds (``kind``: "tensor",
    "container" or "object"), whether the tensors found are 0-d (a number that
    should have been a Python number), and the graph's size."""

    path: str
    where: str
    kind: str
    scalar: bool
    size: GraphSize
    #: ids of the grad_fn of the tensors found (the heads of the graph)
    heads: frozenset = field(default=frozenset(), compare=False, repr=False)


def _storage_key(tensor):
    try:
        storage = tensor.untyped_storage()
        return storage.data_ptr(), storage.nbytes()
    except (RuntimeError, NotImplementedError):  # a sparse or meta tensor
        return id(tensor), tensor.numel() * tensor.element_size()


_SAVED_NAMES = {}  # type of node -> the names of its saved attributes (dir() is slow)


def _saved_tensors(node):
    """The tensors ``node`` keeps for its backward (none once freed)."""
    names = _SAVED_NAMES.get(type(node))
    if names is None:
        names = _SAVED_NAMES[type(node)] = tuple(
            name for name in dir(node) if name.startswith("_saved_"))
    for name in names:
        try:
            value = getattr(node, name)
        except RuntimeError:  # freed by a backward without retain_graph
            continue
        values = value if isinstance(value, (tuple, list)) else (value,)
        for item in values:
            if isinstance(item, torch.Tensor):
                yield item


def graph_size(tensors):
    """The ``GraphSize`` of the union of the graphs behind ``tensors``."""
    seen, parameters, saved = set(), set(), {}
    stack = [t.grad_fn for t in tensors if t.grad_fn is not None]
    while stack:
        node = stack.pop()
        if node is None or id(node) in seen:
            continue
        seen.add(id(node))
        variable = getattr(node, "variable", None)  # AccumulateGrad: a leaf (a parameter)
        if isinstance(variable, torch.Tensor):
            parameters.add(_storage_key(variable)[0])
        for tensor in _saved_tensors(node):
            pointer, nbytes = _storage_key(tensor)
            saved[pointer] = nbytes
        stack.extend(next_node for next_node, _ in node.next_functions)
    return GraphSize(nodes=len(seen), saved_bytes=sum(
        nbytes for pointer, nbytes in saved.items() if pointer not in parameters),
        node_ids=frozenset(seen))


def _children(value):
    """(label, child) pairs of what ``value`` holds that may lead to a tensor."""
    if isinstance(value, dict):
        for index, (key, item) in enumerate(value.items()):
            if index >= MAX_ITEMS:
                return
            yield f"[{key!r}]", item
    elif isinstance(value, _CONTAINERS):
        ordered = not isinstance(value, (set, frozenset))
        for index, item in enumerate(value):
            if index >= MAX_ITEMS:
                return
            yield (f"[{index}]" if ordered else ".<an item of a set>"), item
    elif isinstance(value, types.FunctionType):
        for cell, name in zip(value.__closure__ or (), value.__code__.co_freevars):
            try:
                yield f".<closure cell {name!r}>", cell.cell_contents
            except ValueError:  # an empty cell
                continue
    elif isinstance(value, (types.ModuleType, type, types.BuiltinFunctionType,
                            types.MethodType, types.CodeType, types.FrameType)):
        return
    else:
        attributes = getattr(value, "__dict__", None)
        if isinstance(attributes, dict):
            for name, item in list(attributes.items())[:MAX_ITEMS]:
                if isinstance(value, torch.nn.Module) and name in ("_parameters", "_buffers"):
                    continue  # leaves: no graph behind them
                if isinstance(value, torch.nn.Module) and name == "_modules":
                    for child_name, child in item.items():
                        yield f".{child_name}", child
                    continue
                yield f".{name}", item


def tensors_under(value, depth=MAX_DEPTH):
    """The tensors with a ``grad_fn`` that ``value`` holds within ``depth``
    links, as a dict {id: tensor}."""
    found, seen = {}, set()
    frontier = [value]
    for _ in range(depth + 1):
        next_frontier = []
        for item in frontier:
            if id(item) in seen:
                continue
            seen.add(id(item))
            if isinstance(item, torch.Tensor):
                if item.grad_fn is not None:
                    found[id(item)] = item
                continue
            next_frontier.extend(child for _, child in _children(item))
        frontier = next_frontier
    return found


def _held_paths(name, value, depth=MAX_DEPTH):
    """The most precise ``(path, value, tensors)`` below the name ``name``
    that hold graphs: an object's attributes (``model.cache``) and a dict's
    values (``history['loss']``) are looked into, so that the report names
    the attribute or key that keeps the graph; a tensor, a list, a tuple or
    a set is reported whole (``losses``, not ``losses[3]``). Each part of
    ``value`` is walked once."""
    if isinstance(value, torch.Tensor):
        return [(name, value, {id(value): value})] if value.grad_fn is not None else []
    if isinstance(value, _CONTAINERS) or depth == 0:
        tensors = tensors_under(value, depth)
        return [(name, value, tensors)] if tensors else []
    found = []
    for label, child in _children(value):
        found.extend(_held_paths(name + label, child, depth - 1))
    return found


def _kind(value):
    if isinstance(value, torch.Tensor):
        return "tensor"
    if isinstance(value, (dict, list, tuple, set, frozenset, deque)):
        return "container"
    return "object"


def named_graphs(namespaces):
    """Every name in ``namespaces`` (an iterable of ``(mapping, where)``) that
    holds tensors with a ``grad_fn``: a list of ``HeldGraph``, the first name
    of each object only (a local that is also a global counts once)."""
    held, taken = [], set()
    for namespace, where in namespaces:
        for name, value in list(namespace.items()):
            if not isinstance(name, str) or (name.startswith("__") and name.endswith("__")):
                continue
            if isinstance(value, (types.ModuleType, type)):
                continue
            for path, item, tensors in _held_paths(name, value):
                if id(item) in taken:
                    continue
                taken.add(id(item))
                scalar = all(t.dim() == 0 for t in tensors.values())
                held.append(HeldGraph(path=path, where=where, kind=_kind(item), scalar=scalar,
                                      size=graph_size(tensors.values()),
                                      heads=frozenset(id(t.grad_fn) for t in tensors.values())))
    return held
