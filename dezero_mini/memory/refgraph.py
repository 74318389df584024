"""The reference graph: a picture of the objects that hold the memory.

A computational graph drawn as math (``y = sigmoid(x*w + b)``) does not say
why memory is still in use. This module draws the *objects*: every Variable
and Function that is alive, every reference between them (labelled with the
attribute that holds it), the names of the user's code and the global
registry of stage 01 that reach into the graph. Strong references are solid,
weak references dashed, references on a cycle red; objects that are alive but
that no name and no registry reaches any more are grey: they are garbage that
only the cyclic collector can free.

    watched = watch(y)            # weak references to y's whole graph
    del y
    reference_graph({"x": x}, watched, title="after del y")   # shows in Jupyter

The functions work on any stage of the course (``steps/stepNN_*.py``) and on
``dezero_mini`` alike: framework objects are recognised by their class names
(``Variable``, ``Function`` and their subclasses) or, failing that, by their
attributes (``creator`` + ``data``, ``inputs`` + ``outputs``).
"""
import functools
import gc
import html
import inspect
import json
import re
import sys
import types
import uuid
import weakref
from collections import deque, namedtuple
from collections.abc import Mapping
from pathlib import Path

from dezero_mini import atomic
from dezero_mini.browser import in_browser, processes_unavailable
from dezero_mini.validation import describe

__all__ = [
    "Edge",
    "GraphvizNotFound",
    "Node",
    "ReferenceGraph",
    "Watched",
    "reference_graph",
    "watch",
]

Node = namedtuple("Node", "id kind title label garbage")
Node.__doc__ = """A node: kind is 'variable', 'function', 'name' or 'registry'."""
Edge = namedtuple("Edge", "src_id dst_id label weak on_cycle")
Edge.__doc__ = """A reference from src to dst, held by the attribute ``label``."""

INSTALL_HINT = (
    "the `dot` program of Graphviz is not installed: apt-get install graphviz "
    "(Debian/Ubuntu), brew install graphviz (macOS), or see "
    "https://graphviz.org/download/; the DOT text is still available as .source"
)

# Graphviz compiled to WebAssembly: what the reference graph is drawn with in a browser,
# where the `dot` program cannot be started. The page loads it from the network.
WASM_GRAPHVIZ_URL = "https://cdn.jsdelivr.net/npm/@hpcc-js/wasm-graphviz@1.29.2/dist/index.js"

# How deep to look into the user's containers and objects (``model.layers[0].W``
# is depth 3). Deeper paths are rare and a limit keeps a stray name (a shell,
# a big namespace) from dragging the walk through half the interpreter.
_MAX_DEPTH = 4
_LEAF_TYPES = (str, bytes, bytearray, int, float, complex, bool, type(None), range, slice,
               set, frozenset)  # sets: no stable order, so no reproducible labels
_OPAQUE_TYPES = (type, types.ModuleType, types.FrameType, types.CodeType,
                 types.TracebackType, types.GeneratorType, types.CoroutineType)
# Objects of the interactive machinery, not of the user's code: the shell
# behind IPython's `exit` would lead back to every name a second time. Its
# containers (`Out`, `_`) are still walked: the output cache does keep graphs
# alive, and the picture should show it.
_MACHINERY = {"IPython", "ipykernel", "traitlets", "jupyter_client", "zmq", "tornado",
              "asyncio", "threading", "logging"}


class GraphvizNotFound(RuntimeError):
    """Rendering needs the ``dot`` program of Graphviz, which is missing."""


def _collector_paused(func):
    """Run func with the cyclic collector paused: our allocations could
    otherwise start a collection, and looking at the objects would free some
    of them (the very garbage the picture is meant to show). Never collects."""

    @functools.wraps(func)
    def paused(*args, **kwargs):
        was_enabled = gc.isenabled()
        gc.disable()  # first, before this call allocates anything
        try:
            return func(*args, **kwargs)
        finally:
            if was_enabled:
                gc.enable()

    return paused


# --- Recognising framework objects and their references ------------------------------
def _kind(obj):
    """'variable', 'function' or None. Class names first (so that a Parameter,
    or a Function subclass defined in a notebook, counts), then duck typing on
    the instance's own attributes (never on properties, which could run code)."""
    for cls in type(obj).__mro__:
        if cls.__name__ == "Variable":
            return "variable"
        if cls.__name__ == "Function":
            return "function"
    attrs = dict(_attributes(obj))
    if "creator" in attrs and "data" in attrs:
        return "variable"
    if "inputs" in attrs and "outputs" in attrs:
        return "function"
    return None


def _attributes(obj):
    """The instance attributes of obj as (name, value) pairs, in a stable order.

    A class may keep something in slots of its own and name the attribute
    that stands for them in ``_slots_shown_as`` (``{slot: attribute}``):
    dezero_mini's Function keeps its edges flat and shows them as
    ``next_functions``, the list that it gives when read. Then the attribute
    is shown in place of those slots (``_stored_attributes`` gives them)."""
    shown_as = getattr(type(obj), "_slots_shown_as", None)
    if not isinstance(shown_as, dict):
        return _stored_attributes(obj)
    items = [(name, value) for name, value in _stored_attributes(obj) if name not in shown_as]
    return items + [(name, getattr(obj, name, None)) for name in dict.fromkeys(shown_as.values())]


def _stored_attributes(obj):
    """The instance attributes of obj as they are stored: its ``__dict__``,
    then its slots."""
    try:
        items = list(vars(obj).items())
    except TypeError:
        items = []
    for cls in type(obj).__mro__:
        slots = cls.__dict__.get("__slots__", ())
        for slot in (slots,) if isinstance(slots, str) else slots:
            if slot not in ("__dict__", "__weakref__") and hasattr(obj, slot):
                items.append((slot, getattr(obj, slot)))
    return items


def _is_array(value):
    return hasattr(value, "nbytes") and hasattr(value, "shape") and hasattr(value, "dtype")


def _is_leaf(value):
    """Values that cannot hold a framework object worth drawing."""
    return (isinstance(value, _LEAF_TYPES + _OPAQUE_TYPES + (Watched, ReferenceGraph))
            or inspect.isroutine(value) or _is_array(value))


def _walk(value, label, weak, depth, seen, out):
    """Append (target, label, weak) to out for every framework object that value
    reaches through containers, weak references and plain objects. ``weak`` is
    True when the path passes through a weakref.ref: it does not keep the
    target alive."""
    if _is_leaf(value):
        return
    if _kind(value) is not None:
        out.append((value, label, weak))
        return
    if depth >= _MAX_DEPTH or id(value) in seen:
        return
    seen.add(id(value))
    if isinstance(value, weakref.ref):
        target = value()
        if target is not None:  # a dead weak reference reaches nothing
            # dezero_mini's Function of one output keeps one weak reference
            # that is also the list of its outputs (core._OneOutput): outputs[0]
            indexed = "[0]" if hasattr(type(value), "__getitem__") else ""
            _walk(target, label + indexed, True, depth + 1, seen, out)
    elif isinstance(value, (list, tuple)):
        for i, item in enumerate(value):
            _walk(item, f"{label}[{i}]", weak, depth + 1, seen, out)
    elif isinstance(value, dict):
        for key, item in list(value.items()):
            _walk(item, f"{label}[{key!r}]", weak, depth + 1, seen, out)
    elif type(value).__module__.partition(".")[0] not in _MACHINERY:
        for name, item in _attributes(value):
            _walk(item, f"{label}.{name}", weak, depth + 1, seen, out)


def _references(obj, prefix=""):
    """Every (target, label, weak) reference held by the attributes of obj."""
    out, seen = [], {id(obj)}
    for name, value in _attributes(obj):
        _walk(value, prefix + name, False, 0, seen, out)
    return out


def _registries(obj):
    """The module-level REGISTRY of the modules that define obj's classes."""
    found = []
    for cls in type(obj).__mro__:
        registry = getattr(sys.modules.get(cls.__module__), "REGISTRY", None)
        if registry is not None and not any(r is registry for r, _ in found):
            found.append((registry, cls.__module__))
    return found


# --- Labels -----------------------------------------------------------------------------
def format_bytes(nbytes):
    """A byte count for people: ``512 B``, ``48.2 KiB``, ``1.3 MiB``."""
    if nbytes < 1024:
        return f"{nbytes} B"
    for unit in ("KiB", "MiB", "GiB"):
        nbytes /= 1024
        if nbytes < 1024 or unit == "GiB":
            return f"{nbytes:.1f} {unit}"


def _array_text(a):
    return f"{tuple(a.shape)} {a.dtype}, {format_bytes(int(a.nbytes))}"


def _short_repr(value):
    """repr() of simple values only: repr of other objects has addresses, which
    would make the DOT text differ from run to run."""
    if isinstance(value, (int, float, bool, str)) or (
            isinstance(value, tuple) and all(isinstance(v, (int, type(None))) for v in value)):
        text = repr(value)
        return text if len(text) <= 24 else text[:21] + "..."
    return type(value).__name__


def _describe(obj, kind):
    """(title, label lines, {id(array): bytes} of the arrays held) of a
    framework object. Arrays are told apart by id so that an array held twice
    (a Variable's data that a Function also saved) is counted once."""
    cls = type(obj).__name__
    held = {}
    if kind == "variable":
        name = getattr(obj, "name", None)
        title = f"{cls} {name!r}" if name else cls
        data = getattr(obj, "data", None)
        lines = [title, _array_text(data) if _is_array(data) else "data: None"]
        grad = getattr(obj, "grad", None)
        # An ndarray in the step modules, a Variable in dezero_mini (careful:
        # ndarray.data exists too, a memoryview).
        grad = grad if _is_array(grad) else getattr(grad, "data", None)
        if _is_array(grad):
            lines.append(f"grad: {format_bytes(int(grad.nbytes))}")
        held.update((id(a), int(a.nbytes)) for a in (data, grad) if _is_array(a))
        return title, lines, held
    lines = [cls]
    for name, value in _attributes(obj):
        if name in ("inputs", "outputs", "generation") or value is None or _references_any(value):
            continue
        arrays = [value] if _is_array(value) else (
            list(value) if isinstance(value, (list, tuple)) and value
            and all(_is_array(v) for v in value) else [])
        if arrays:
            nbytes = sum(int(a.nbytes) for a in arrays)
            held.update((id(a), int(a.nbytes)) for a in arrays)
            text = (_array_text(value) if _is_array(value)
                    else f"{len(arrays)} arrays, {format_bytes(nbytes)}")
            lines.append(f"holds {name}: {text}")
        else:
            lines.append(f"{name}={_short_repr(value)}")
    return cls, lines, held


def _references_any(value):
    out = []
    _walk(value, "", False, 0, set(), out)
    return bool(out)


# --- watch() -----------------------------------------------------------------------------
class Watched:
    """Weak references to the framework objects of one or more graphs, taken by
    :func:`watch`. Keeps nothing alive; tells how many objects have been freed."""

    __slots__ = ("_refs", "__weakref__")

    def __init__(self, refs):
        self._refs = refs  # [(weakref.ref, kind)], in discovery order

    def __len__(self):
        return len(self._refs)

    def alive(self):
        """The watched objects that are still alive (strong references: drop the
        list when done with it)."""
        return [obj for obj in (ref() for ref, _ in self._refs) if obj is not None]

    def freed(self):
        """How many watched objects have been freed: {'variables': n, 'functions': m}."""
        counts = {"variables": 0, "functions": 0}
        for ref, kind in self._refs:
            if ref() is None:
                counts[kind + "s"] += 1
        return counts

    def __repr__(self):
        freed = self.freed()
        return (f"<Watched: {len(self)} objects, {len(self) - sum(freed.values())} alive, freed "
                f"{freed['variables']} Variables, {freed['functions']} Functions>")


@_collector_paused
def watch(*objects):
    """Take weak references to every framework object reachable from objects
    (Variables, Functions, or containers of them) through the framework's own
    references: creator, inputs, outputs (strong or weak) and any other
    attribute holding framework objects. Returns a :class:`Watched` to pass to
    :func:`reference_graph` after the user has let go of the objects."""
    found, queue = {}, deque()
    for value in objects:
        out = []
        _walk(value, "", False, 0, set(), out)
        queue.extend(target for target, _, _ in out)
    while queue:
        obj = queue.popleft()
        if id(obj) not in found:
            found[id(obj)] = obj
            queue.extend(target for target, _, _ in _references(obj))
    refs = []
    for obj in found.values():
        try:
            refs.append((weakref.ref(obj), _kind(obj)))
        except TypeError:  # a class without weak reference support cannot be watched
            pass
    found.clear()
    return Watched(refs)


# --- reference_graph() ------------------------------------------------------------------
class _Builder:
    """Walks the objects once, holding them only for the duration of the call.
    Plain data attributes and no stored bound methods or closures: a reference
    cycle here would keep the user's graph alive until the collector runs."""

    def __init__(self):
        self.index = {}  # id(obj) -> node index (objects are held in self.held meanwhile)
        self.held = []
        self.nodes = []  # [id, kind, title, label lines, {id(array): bytes}]
        self.edges = []  # [src index, dst index, label, weak]
        self.counters = {"variable": 0, "function": 0, "name": 0, "registry": 0}
        self.queue = deque()

    def add(self, obj, kind, title=None, lines=None, arrays=None):
        if obj is not None and id(obj) in self.index:
            return self.index[id(obj)]
        if kind in ("variable", "function"):
            title, lines, arrays = _describe(obj, kind)
            self.queue.append(obj)
        prefix = {"variable": "v", "function": "f", "name": "u", "registry": "r"}[kind]
        node_id = f"{prefix}{self.counters[kind]}"  # discovery order: reproducible
        self.counters[kind] += 1
        self.nodes.append([node_id, kind, title, lines, arrays or {}])
        if obj is not None:
            self.index[id(obj)] = len(self.nodes) - 1
            self.held.append(obj)
        return len(self.nodes) - 1

    def link(self, src, refs):
        for target, label, weak in refs:
            self.edges.append([src, self.add(target, _kind(target)), label, weak])

    def drain(self):
        while self.queue:
            obj = self.queue.popleft()
            self.link(self.index[id(obj)], _references(obj))


@_collector_paused
def reference_graph(names, watched=None, title=None, *, max_objects=150, highlight=()):
    """The graph of the framework objects that the user's names (a dict such as
    ``{"x": x, "y": y}``), the stage-01 ``REGISTRY`` and the still-alive objects
    of ``watched`` reach. Names whose values reach no framework object are left
    out, so ``globals()`` works too. Objects that no name and no registry
    reaches through strong references are marked as garbage. At most
    ``max_objects`` Variables and Functions are drawn (the registry of a long
    run holds thousands); garbage and cycles are computed on all of them.
    The names in ``highlight`` are drawn as filled green boxes: the root of
    a chain that keeps a graph alive (see ``dezero_mini.memory.find_leaks``).

    Building the graph neither runs nor needs the cyclic collector: it is
    paused during the call so that drawing does not free what it draws."""
    if names is not None and not isinstance(names, Mapping):
        raise TypeError(f"reference_graph: names must be a dict of names and values, such as "
                        f"{{'x': x, 'y': y}} or globals(), got {describe(names)}")
    b = _Builder()
    try:
        for name, value in (names or {}).items():
            out = []
            _walk(value, str(name), False, 0, set(), out)
            if out:  # a name that leads to no framework object is not drawn
                b.link(b.add(None, "name", str(name), [str(name)]), out)
        b.drain()
        for obj in watched.alive() if watched is not None else ():
            b.add(obj, _kind(obj))
        b.drain()
        # The registry of the module that defines the objects' classes (stage
        # 01). It is found from the objects, so it is drawn even after the
        # user has deleted every name: that is the point of the lesson.
        seen_registries, i = set(), 0
        while i < len(b.held):  # held grows while registries are walked
            for registry, module in _registries(b.held[i]):
                if id(registry) not in seen_registries:
                    seen_registries.add(id(registry))
                    counts = [f"{k}: {len(v)}" for k, v in _attributes(registry)
                              if isinstance(v, (list, tuple, dict))]
                    node = b.add(None, "registry", "REGISTRY", ["REGISTRY", module, *counts])
                    b.link(node, _references(registry, "registry."))
                    b.drain()
            i += 1
        freed = watched.freed() if watched is not None else None
        graph = _finish(b.nodes, b.edges, freed, title, max_objects)
        if highlight:
            graph.highlight = {str(name) for name in highlight}
            graph.source = graph._dot()
        return graph
    finally:
        b.held.clear()  # drop our strong references even if something raised
        b.index.clear()
        b.queue.clear()


def _strongly_connected(n, adjacency):
    """Component number of each of n nodes (iterative Tarjan over adjacency)."""
    index, low, on_stack = [None] * n, [0] * n, [False] * n
    component, stack, counter, count = [-1] * n, [], 0, 0
    for root in range(n):
        if index[root] is not None:
            continue
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack[root] = True
        work = [(root, 0)]
        while work:
            v, i = work[-1]
            if i < len(adjacency[v]):
                work[-1] = (v, i + 1)
                w = adjacency[v][i]
                if index[w] is None:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on_stack[w] = True
                    work.append((w, 0))
                elif on_stack[w]:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                while True:
                    w = stack.pop()
                    on_stack[w] = False
                    component[w] = count
                    if w == v:
                        break
                count += 1
    return component


def _finish(nodes, edges, freed, title, max_objects):
    """Reachability, cycles and the drawn subset; returns the ReferenceGraph."""
    n = len(nodes)
    strong = [[] for _ in range(n)]
    for src, dst, _, weak in edges:
        if not weak:  # a weak reference neither keeps alive nor closes a cycle
            strong[src].append(dst)
    reached = [kind in ("name", "registry") for _, kind, *_ in nodes]
    stack = [i for i in range(n) if reached[i]]
    while stack:
        for w in strong[stack.pop()]:
            if not reached[w]:
                reached[w] = True
                stack.append(w)
    component = _strongly_connected(n, strong)
    sizes = {}
    for c in component:
        sizes[c] = sizes.get(c, 0) + 1
    cyclic = {c for c, size in sizes.items() if size > 1}
    cyclic |= {component[v] for v in range(n) if v in strong[v]}  # self-reference
    framework = [i for i in range(n) if nodes[i][1] in ("variable", "function")]
    drawn = set(i for i in range(n) if nodes[i][1] not in ("variable", "function"))
    drawn |= set(framework[:max_objects])
    node_list = [Node(nid, kind, t, "\n".join(lines + (["garbage: unreachable"]
                      if kind in ("variable", "function") and not reached[i] else [])),
                      kind in ("variable", "function") and not reached[i])
                 for i, (nid, kind, t, lines, _) in enumerate(nodes) if i in drawn]
    edge_list = [Edge(nodes[s][0], nodes[d][0], label, weak,
                      not weak and component[s] == component[d] and component[s] in cyclic)
                 for s, d, label, weak in edges if s in drawn and d in drawn]
    garbage = [node.id for node in node_list if node.garbage]
    nbytes, kept = {}, set()  # every array once; those that a reached object holds
    for i in framework:
        nbytes.update(nodes[i][4])
        kept.update(nodes[i][4] if reached[i] else ())
    alive_bytes = sum(nbytes.values())
    garbage_bytes = sum(size for array, size in nbytes.items() if array not in kept)
    n_var = sum(nodes[i][1] == "variable" for i in framework)
    caption = [title] if title else []
    caption.append(f"alive: {n_var} Variables and {len(framework) - n_var} Functions "
                   f"holding {format_bytes(alive_bytes)} of arrays; reference cycles: {len(cyclic)}")
    caption.append(f"garbage (alive, but unreachable): {sum(not reached[i] for i in framework)} "
                   f"objects holding {format_bytes(garbage_bytes)}")
    if freed is not None:
        caption.append(f"freed since watch(): {freed['variables']} Variables, "
                       f"{freed['functions']} Functions")
    if len(framework) > max_objects:
        caption.append(f"not drawn: {len(framework) - max_objects} more objects "
                       f"(max_objects={max_objects})")
    return ReferenceGraph(node_list, edge_list, garbage, len(cyclic), freed, title, caption)


# --- The result and its rendering ---------------------------------------------------------
def _quote(text):
    """A DOT string literal (line breaks become DOT's \\n)."""
    text = text.replace("\\", "\\\\").replace('"', '\\"')
    return '"' + text.replace("\n", "\\n") + '"'


def _attrs(**attrs):
    """key=value pairs; plain words and numbers unquoted (``style=dashed``)."""
    return ", ".join(f"{key}={_value(str(value))}" for key, value in attrs.items())


def _value(text):
    plain = re.fullmatch(r"[A-Za-z_][A-Za-z_0-9]*|-?[0-9]*\.?[0-9]+", text)
    reserved = text.lower() in ("node", "edge", "graph", "digraph", "subgraph", "strict")
    return text if plain and not reserved else _quote(text)


_STYLE = {
    "variable": dict(shape="box", style="rounded,filled", fillcolor="#fdeeb5"),
    "function": dict(shape="box", style="filled", fillcolor="#cfe3f6"),
    "name": dict(shape="box", style="rounded,bold", color="#2b7a3d", fontcolor="#2b7a3d",
                 fontname="Courier-Bold"),
    "registry": dict(shape="folder", style="filled", fillcolor="#e7dcf5"),
}
_ROOT = dict(style="rounded,filled,bold", fillcolor="#d4f2dc", penwidth="2")
_GARBAGE = dict(fillcolor="#d0d0d0", fontcolor="#505050", color="#808080")
_CYCLE = dict(color="#d62728", fontcolor="#d62728", penwidth="2.2")
_NAME_EDGE = dict(color="#2b7a3d", fontcolor="#2b7a3d")


class ReferenceGraph:
    """The objects and references found by :func:`reference_graph`.

    ``nodes`` (list of Node), ``edges`` (list of Edge), ``garbage`` (ids of the
    garbage nodes), ``cycles`` (number of reference cycles: strongly connected
    components over the strong references), ``freed`` (counts of watched
    objects freed, or None), ``caption`` (its lines), ``source`` (the DOT
    text). Holds no reference to the objects themselves. ``highlight``: the
    titles of the name boxes drawn as roots."""

    highlight = frozenset()

    def __init__(self, nodes, edges, garbage, cycles, freed, title, caption):
        self.nodes, self.edges, self.garbage = nodes, edges, garbage
        self.cycles, self.freed, self.title, self.caption = cycles, freed, title, caption
        self.source = self._dot()

    def node(self, node_id):
        """The Node with this id."""
        return next(node for node in self.nodes if node.id == node_id)

    def _dot(self):
        kinds = {n.id: n.kind for n in self.nodes}
        pairs = {(e.src_id, e.dst_id) for e in self.edges}
        out = ["digraph refgraph {",
               "  graph [" + _attrs(fontname="Helvetica", fontsize=11, nodesep=0.3, ranksep=0.35,
                                    labelloc="b", label="\n".join(self.caption)) + "];",
               "  node [" + _attrs(fontname="Helvetica", fontsize=10, margin="0.1,0.04") + "];",
               "  edge [" + _attrs(fontname="Helvetica", fontsize=9, arrowsize=0.7) + "];"]
        for n in self.nodes:
            attrs = {"label": n.label, **_STYLE[n.kind], **(_GARBAGE if n.garbage else {})}
            if n.kind == "name" and n.title in self.highlight:
                attrs.update(_ROOT)
            out.append(f"  {n.id} [{_attrs(**attrs)}];")
        for e in self.edges:
            attrs = dict(label=e.label)
            if e.weak:
                attrs["style"] = "dashed"
            if e.on_cycle:
                attrs.update(_CYCLE)
            if kinds[e.src_id] == "name":
                attrs.update(_NAME_EDGE)
            # Layout only: rank the picture along creator/inputs (from the
            # output back to the inputs, the way references are followed), not
            # along a function's reference back to its own output.
            if kinds[e.src_id] == "function" and (e.dst_id, e.src_id) in pairs:
                attrs["constraint"] = "false"
            if kinds[e.src_id] == "registry":
                attrs.update(color="#7a5fa8", fontcolor="#7a5fa8")
            out.append(f"  {e.src_id} -> {e.dst_id} [{_attrs(**attrs)}];")
        garbage_note = {"label": "garbage: alive, but no name\nor registry reaches it",
                        **_STYLE["variable"], **_GARBAGE}
        out += [
            "  subgraph cluster_legend {",
            "    graph [" + _attrs(label="legend", fontsize=9, style="rounded",
                               color="#b0b0b0") + "];",
            "    node [" + _attrs(shape="point", width=0.04, color="#606060") + "];",
            "    edge [" + _attrs(fontsize=8, minlen=1) + "];",
            # Each sample edge between two points on one rank: drawn flat, so
            # that the legend stays a small box of three lines.
            "    { rank=same; legend_a1; legend_b1; }",
            "    { rank=same; legend_a2; legend_b2; }",
            "    { rank=same; legend_a3; legend_b3; }",
            "    legend_a1 -> legend_b1 [" + _attrs(label="strong reference") + "];",
            "    legend_a2 -> legend_b2 [" + _attrs(label="weak reference", style="dashed") + "];",
            "    legend_a3 -> legend_b3 [" + _attrs(label="on a reference cycle", **_CYCLE) + "];",
            "    legend_n [" + _attrs(label="a name in user code", fontsize=8,
                                  **_STYLE["name"]) + "];",
            "    legend_a1 -> legend_a2 -> legend_a3 -> legend_g -> legend_n [style=invis];",
            "    legend_g [" + _attrs(**garbage_note, fontsize=8, width=0) + "];",
            "  }",
            "}",
        ]
        return "\n".join(out) + "\n"

    def _pipe(self, fmt):
        unavailable = processes_unavailable()
        if unavailable:  # `dot` is a program: nothing to try
            raise GraphvizNotFound(f"{unavailable}, and Graphviz's `dot` is a program; "
                                   "the DOT text is still available as .source")
        try:
            import graphviz
        except ImportError as e:
            raise GraphvizNotFound("the Python package `graphviz` is not installed: "
                                   "pip install graphviz; " + INSTALL_HINT) from e
        try:
            return graphviz.Source(self.source).pipe(format=fmt)
        except graphviz.ExecutableNotFound as e:
            raise GraphvizNotFound(INSTALL_HINT) from e
        except OSError as e:  # dot is there, but no process can be started (a browser, a sandbox)
            why = processes_unavailable() or f"the `dot` program could not be started ({e})"
            raise GraphvizNotFound(f"{why}; the DOT text is still available as .source") from e

    def svg(self):
        """The picture as SVG text (needs the ``dot`` program)."""
        return self._pipe("svg").decode("utf-8")

    def save(self, path):
        """Write the picture; the format comes from the extension: .svg, .png,
        .pdf (need ``dot``) or .dot/.gv (the DOT text). Returns the path."""
        path = Path(path)
        fmt = path.suffix.lower().lstrip(".")
        if fmt in ("dot", "gv"):
            atomic.write_text(path, self.source)
        elif fmt in ("svg", "png", "pdf"):
            atomic.write_bytes(path, self._pipe(fmt))
        else:
            raise ValueError(f"save: unknown format {path.suffix!r}; use .svg, .png, .pdf or .dot")
        return path

    def wasm_html(self):
        """HTML that draws the picture in the page with Graphviz compiled to
        WebAssembly (loaded from the network by the page): how the graph is
        shown in a browser's Python, which cannot start ``dot``. Without the
        network it shows a line that says so, and the DOT text."""
        element = f"dezero-mini-refgraph-{uuid.uuid4().hex}"  # unique across kernel restarts too
        # JSON with every "<" escaped: no text of a label can end the script early.
        dot = json.dumps(self.source).replace("<", "\\u003c")
        failed = json.dumps("The reference graph is drawn by Graphviz for WebAssembly, which "
                            "the page loads from the network: connect to the internet and run "
                            "the cell again. Its DOT text:")
        return (
            f'<div id="{element}"><p>Drawing the reference graph with Graphviz for WebAssembly '
            f'(needs internet)...</p><pre>{html.escape(self.source)}</pre></div>\n'
            "<script>\n(async () => {\n"
            f"  const target = document.getElementById({json.dumps(element)});\n"
            "  if (!target) return;\n"
            f"  const dot = {dot};\n"
            "  try {\n"
            f"    const {{ Graphviz }} = await import({json.dumps(WASM_GRAPHVIZ_URL)});\n"
            "    const graphviz = await Graphviz.load();\n"
            '    target.innerHTML = graphviz.layout(dot, "svg", "dot");\n'
            "  } catch (error) {\n"
            f"    const note = document.createElement('p');\n"
            f"    note.textContent = {failed} + ' (' + error + ')';\n"
            "    target.replaceChildren(note, target.querySelector('pre'));\n"
            "  }\n})();\n</script>\n"
        )

    def _repr_mimebundle_(self, include=None, exclude=None):
        """Jupyter display: the SVG picture, or, when it cannot be rendered, a
        text that says why followed by the DOT text (never raises). In a
        browser's Python (the preview of the book), HTML that draws it with
        Graphviz for WebAssembly (``wasm_html``), with the DOT text as plain text."""
        if in_browser():
            return {"text/html": self.wasm_html(), "text/plain": f"{repr(self)}\n\n{self.source}"}
        try:
            return {"image/svg+xml": self.svg(), "text/plain": repr(self)}
        except Exception as e:  # a notebook cell must not fail because of a picture
            return {"text/plain": f"{repr(self)}\n{e}\n\n{self.source}"}

    def __repr__(self):
        return (f"<ReferenceGraph: {len(self.nodes)} nodes, {len(self.edges)} edges, "
                f"{self.cycles} cycles, {len(self.garbage)} garbage>")
