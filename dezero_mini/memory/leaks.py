"""Find the graphs that a training loop keeps alive, and who keeps them.

    with find_leaks() as finder:            # around some iterations of a loop
        for x, t in batches:
            loss = F.mean_squared_error(model(x), t)
            model.cleargrads()
            loss.backward()
            optimizer.update()
            total_loss += loss              # the leak: every batch's graph stays
    print(finder.report)                    # what survives, its bytes, who holds it
    finder.report.graph()                   # the chain, drawn by reference_graph

    report = find_leaks(train_step, repeat=5)   # or: call a function several times

**What counts as a leak.** A loop rightly holds the graph of the batch it is
working on: the name ``loss`` keeps it until the next batch rebinds the name.
So the finder needs the iterations of the loop. Inside ``with find_leaks()``
they are the calls of ``backward()`` (a training loop makes one per batch),
or the calls of ``finder.step()`` in a loop that has no backward; in
``find_leaks(fn)`` each call of ``fn`` is one. A Variable or Function *leaks*
when it was made during the marked iterations and is still alive ``slack``
iterations later (default 1: the last batch's graph may stay, the graphs of
batches long gone may not). The parameters a model makes on its first batch
are made before the first mark, so they never count. The count is exact and
deterministic: every framework object is known from birth
(:mod:`dezero_mini.memory.tracking`), no heap is sampled and no collector runs.

**Who holds it.** The survivors fall into graphs, each headed by an object
that no other survivor holds. For each graph, a breadth-first search over
``gc.get_referrers`` goes from the head back towards the roots and stops at
the first name the learner can recognise: a local variable of a running
function, a global of the script or of a module. Each step of the chain says
how it holds the next: an attribute (``.creator``, ``.history``), an index or
key (``[3]``, ``['loss']``), a closure cell, a default argument, a class
attribute, the frame of a suspended generator. Breadth first means the
shortest chain. The finder's own frames and containers, the framework's
frames and the test runner's are skipped.
"""
import bisect
import gc
import re
import sys
import types
import weakref
from collections import deque, namedtuple

from dezero_mini.memory.refgraph import (
    _attributes,
    _describe,
    _stored_attributes,
    _kind,
    _references,
    format_bytes,
    reference_graph,
)
from dezero_mini.memory.tracking import Tracker

__all__ = ["LeakFinder", "LeakReport", "LeakedGraph", "Root", "find_leaks"]

Root = namedtuple("Root", "kind name where")
Root.__doc__ = """A name the learner can recognise: kind 'local' or 'global', its
name, and where (the function and line, or the module)."""

# Frames of these packages are machinery, not the learner's code: their
# locals are never roots, and a chain does not pass through them.
_MACHINERY = ("dezero_mini", "runpy", "importlib", "_pytest", "pytest", "pluggy",
              "IPython", "ipykernel", "asyncio", "threading", "tornado", "traitlets",
              "jupyter_client", "zmq")
_STAGE_MODULE = re.compile(r"step\d\d_\w+$")  # the stage modules of the course
_MAX_DEPTH = 30  # links in a chain
_MAX_VISITED = 50_000  # objects looked at in one search
_MAX_CHAINS = 20  # graphs whose root is searched (the largest)


# --- Roots: the names of the learner's code -------------------------------------------
def _machinery(namespace):
    """True for the globals of the framework (dezero_mini or a stage module),
    of this finder, of the interpreter's and the test runner's machinery."""
    name = namespace.get("__name__") or ""
    return name.partition(".")[0] in _MACHINERY or _STAGE_MODULE.match(name) is not None


def _user_frames():
    """The frames of every thread, innermost first, without the machinery."""
    for top in list(sys._current_frames().values()):
        frame = top
        while frame is not None:
            if not _machinery(frame.f_globals):
                yield frame
            frame = frame.f_back


def _roots(extra_namespaces=()):
    """({id(value): (kind, name, where), the fields of its Root}, ids of the
    namespaces read). The first name found wins: the extra namespaces (a
    script's globals), then the locals of the running frames, innermost
    first, then every module's globals."""
    roots, namespaces = {}, []

    def add(namespace, kind, where):
        namespaces.append(namespace)
        # Every module's globals are read: a few hundred thousand names in a test
        # process or a notebook's kernel, so this is one comprehension, and a Root
        # is made only for the roots a chain ends at. Reversed: where a namespace
        # names an object twice, its first name wins, as a name found earlier does.
        roots.update({key: (kind, name, where)
                      for name, value in reversed(list(namespace.items()))
                      if (key := id(value)) not in roots and isinstance(name, str)
                      and not (name.startswith("__") and name.endswith("__"))})

    for namespace, where in extra_namespaces:
        add(namespace, "global", where)
    for frame in _user_frames():
        code = frame.f_code
        if code.co_name == "<module>":
            add(frame.f_globals, "global", frame.f_globals.get("__name__", "?"))
        else:
            add(frame.f_locals, "local",
                f"{code.co_name}() at {_short_file(code.co_filename)}:{frame.f_lineno}")
    for name, module in list(sys.modules.items()):
        namespace = getattr(module, "__dict__", None)
        if isinstance(namespace, dict):
            add(namespace, "global", name)
    return roots, {id(n) for n in namespaces}


def _short_file(path):
    return path.rsplit("/", 1)[-1]


# --- The search ------------------------------------------------------------------------
def _label(r, child, ignore):
    """How r refers to child, as a piece of a Python expression (``.creator``,
    ``[3]``, ``['loss']``, ``.__closure__``), or None for a reference that
    does not keep anything alive in a way worth following."""
    if isinstance(r, dict):
        for key, value in r.items():
            if value is child:
                return f"[{key!r}]"
        return "[<a key>]"
    if isinstance(r, (list, tuple, deque)):
        for i, value in enumerate(r):
            if value is child:
                return f"[{i}]"
        return None
    if isinstance(r, (set, frozenset)):
        return ".<an item of a set>"
    if isinstance(r, types.CellType):
        return ".cell_contents"
    if isinstance(r, types.FunctionType):
        for attr in ("__defaults__", "__kwdefaults__", "__closure__", "__dict__"):
            if getattr(r, attr, None) is child:
                return "." + attr
        return None  # its code, globals, name: not the learner's data
    if isinstance(r, types.MethodType):
        return ".__self__" if r.__self__ is child else None
    frame_attr = {types.GeneratorType: "gi_frame", types.CoroutineType: "cr_frame",
                  types.AsyncGeneratorType: "ag_frame"}.get(type(r))
    if frame_attr or isinstance(r, types.FrameType):
        frame = getattr(r, frame_attr) if frame_attr else r
        if frame is None:
            return None
        if frame is child:  # Python 3.10: the generator's frame is an object of its own
            return f".{frame_attr}"
        local_names = frame.f_locals
        ignore.add(id(local_names))  # a snapshot that also refers to the locals
        for name, value in local_names.items():
            if value is child:
                prefix = f".{frame_attr}" if frame_attr else ""
                return f"{prefix}.f_locals[{name!r}]"
        return None
    if isinstance(r, type):
        for name, value in vars(r).items():
            if value is child:
                return f".{name}"
        return ".__dict__" if isinstance(child, dict) else None
    if isinstance(r, types.ModuleType):
        return None  # module -> its dict: its globals are roots already
    for name, value in _attributes(r):
        if value is child:
            return f".{name}"
        if name in _shown_attributes(r):  # a list that r makes when read (next_functions)
            for i, item in enumerate(value or ()):
                for j, inner in enumerate(item if isinstance(item, tuple) else ()):
                    if inner is child:
                        return f".{name}[{i}][{j}]"
    for name, value in _stored_attributes(r):  # (the slots behind such a list)
        if value is child:
            return f".{name}"
    if getattr(r, "__dict__", None) is child:
        return ".__dict__"
    return f".<held by {type(r).__name__}>"


def _shown_attributes(obj):
    """The attributes that ``obj``'s class shows in place of slots of its own
    (``_slots_shown_as``, see refgraph's ``_attributes``)."""
    shown_as = getattr(type(obj), "_slots_shown_as", None)
    return shown_as.values() if isinstance(shown_as, dict) else ()


def _search(targets, roots, ignore):
    """For each target, the shortest chain from a root: ``(root id, links,
    objects)`` where ``links[id]`` is ``(id of the next object towards the
    target, label)``, or None when no root reaches it within the limits.
    Breadth first, all targets in step: one ``gc.get_referrers`` per level
    for all of them (a call scans the whole heap), each target keeping its
    own visited set so that two graphs in one list both get their chain."""
    keep = {id(t): t for t in targets}  # every object met, alive during the search
    found = [id(t) if id(t) in roots else None for t in targets]
    links = [{} for _ in targets]
    frontier = {i: [id(t)] for i, t in enumerate(targets) if found[i] is None}
    ignore = set(ignore) | {id(keep), id(targets)}
    for _ in range(_MAX_DEPTH):
        if not frontier or len(keep) > _MAX_VISITED:
            break
        owners = {}  # id of a frontier object -> the targets whose frontier holds it
        for i, ids in frontier.items():
            for object_id in ids:
                owners.setdefault(object_id, []).append(i)
        level = tuple(keep[object_id] for object_id in owners)
        ignore.add(id(level))
        referrers = gc.get_referrers(*level)
        next_frontier, r = {}, None
        for r in referrers:
            rid = id(r)
            if rid in ignore or _skipped(r, level):
                continue
            for child in gc.get_referents(r):
                targets_here = owners.get(id(child))
                if not targets_here:
                    continue
                label = None
                for i in targets_here:
                    if found[i] is not None or rid in links[i] or rid == id(targets[i]):
                        continue
                    label = label or _label(r, child, ignore)
                    if label is None:
                        break
                    keep[rid] = r
                    links[i][rid] = (id(child), label)
                    if rid in roots:
                        found[i] = rid
                    else:
                        next_frontier.setdefault(i, []).append(rid)
        del referrers, level, r
        frontier = {i: ids for i, ids in next_frontier.items() if found[i] is None}
    chains = []
    for i, target in enumerate(targets):
        if found[i] is None:
            chains.append(None)
            continue
        steps, object_id = [], found[i]
        while object_id != id(target):
            next_id, label = links[i][object_id]
            steps.append((keep[object_id], label))
            object_id = next_id
        steps.append((target, None))
        chains.append((Root(*roots[found[i]]), steps))
    keep.clear()
    return chains


def _skipped(r, level):
    """Referrers that are the search itself or the interpreter's machinery."""
    if r is level or (type(r) is tuple and 1 < len(r) == len(level)
                      and all(a is b for a, b in zip(r, level))):
        return True  # the argument tuple of gc.get_referrers(*level), on a Python that shows it
    if isinstance(r, types.FrameType) and _machinery(r.f_globals):
        return True
    return False


# --- Describing a chain ----------------------------------------------------------------
_DICT_ATTRIBUTE = re.compile(r"\.__dict__\[(['\"])([A-Za-z_]\w*)\1\]")


_KEY_OF_ATTRIBUTE = re.compile(r"\[(['\"])([A-Za-z_]\w*)\1\]$")


def _through_instance_dicts(steps):
    """The chain with ``obj .__dict__ ['name']`` written as ``obj .name``:
    the search meets an object's attribute through its ``__dict__`` or
    directly, depending on whether the dict exists yet; a chain is written
    one way."""
    merged, k = [], 0
    while k < len(steps):
        obj, label = steps[k]
        if label == ".__dict__" and k + 1 < len(steps) and steps[k + 1][1]:
            key = _KEY_OF_ATTRIBUTE.match(steps[k + 1][1])
            if key is not None and getattr(obj, "__dict__", None) is steps[k + 1][0]:
                merged.append((obj, "." + key.group(2)))
                k += 2
                continue
        merged.append((obj, label))
        k += 1
    return merged


_EDGE_INDEX = re.compile(r"\[(\d+)\]$")


def _through_edges(steps):
    """The chain with ``f .next_functions [i] [0]`` (a list of edges, an edge,
    the Function at its start) written as one link, ``f
    .next_functions[i][0]``: from stage 08 on, the graph links a Function to
    the Function that computed its input ``i``. dezero_mini's Function keeps
    the edges of its third input on flat in one tuple, ``(node, index, node,
    index, ...)``: ``f ._more_edges [2k]`` is ``f .next_functions[2 + k][0]``."""
    merged, k = [], 0
    while k < len(steps):
        obj, label = steps[k]
        if (label == ".next_functions" and k + 2 < len(steps)
                and isinstance(steps[k + 1][0], list) and isinstance(steps[k + 2][0], tuple)
                and _EDGE_INDEX.match(steps[k + 1][1] or "") and steps[k + 2][1] == "[0]"):
            merged.append((obj, f".next_functions{steps[k + 1][1]}[0]"))
            k += 3
            continue
        flat_index = _EDGE_INDEX.match(steps[k + 1][1] or "") if k + 1 < len(steps) else None
        if (label == "._more_edges" and "next_functions" in _shown_attributes(obj)
                and flat_index and int(flat_index[1]) % 2 == 0):
            merged.append((obj, f".next_functions[{2 + int(flat_index[1]) // 2}][0]"))
            k += 2
            continue
        merged.append((obj, label))
        k += 1
    return merged


def _what(obj):
    """A short description of an object on a chain."""
    kind = _kind(obj)
    if kind == "variable":
        data = getattr(obj, "data", None)
        shape = getattr(data, "shape", None)
        name = getattr(obj, "name", None)
        text = f"{type(obj).__name__} {tuple(shape)}" if shape is not None else type(obj).__name__
        return f"{text} {name!r}" if name else text
    if isinstance(obj, (list, tuple, dict, set)):
        return f"{type(obj).__name__} of {len(obj)}"
    if isinstance(obj, (types.FunctionType, types.GeneratorType)):
        return f"{type(obj).__name__} {obj.__qualname__}"
    if isinstance(obj, type):
        return f"class {obj.__qualname__}"
    return type(obj).__name__


def _notes(steps):
    """Plain words for the links that a Python expression says badly."""
    notes = []
    for (obj, label), (nxt, next_label) in zip(steps, steps[1:]):
        if isinstance(obj, types.FunctionType) and label in (".__closure__", ".__defaults__"):
            index = int(next_label.strip("[]")) if next_label and next_label[1:-1].isdigit() else None
            code = obj.__code__
            if label == ".__closure__" and index is not None:
                notes.append(f"the closure variable {code.co_freevars[index]!r} "
                             f"of {obj.__qualname__}()")
            elif index is not None:
                positional = code.co_varnames[:code.co_argcount]
                name = positional[len(positional) - len(obj.__defaults__) + index]
                notes.append(f"the default value of the parameter {name!r} "
                             f"of {obj.__qualname__}(), made once and shared by every call")
        elif isinstance(obj, types.GeneratorType) and label.startswith(".gi_frame"):
            notes.append(f"a local variable of the suspended generator {obj.__qualname__}()")
        elif isinstance(obj, type) and label:
            attribute = _DICT_ATTRIBUTE.sub(r".\2", label + (next_label or ""))
            if label != ".__dict__":
                attribute = label
            notes.append(f"the class attribute {obj.__qualname__}{attribute}, "
                         "shared by every instance")
        elif isinstance(obj, types.MethodType):
            notes.append(f"the bound method {obj.__func__.__qualname__}, through its __self__")
    if any(label and label.startswith(".next_functions[") for _, label in steps):
        notes.append("f.next_functions[i][0] is the Function that computed f's input i: the "
                     "graph links Functions, not the Variables between them")
    return notes


class LeakedGraph:
    """One surviving graph: its size and the chain from a root to its head.

    ``objects``, ``variables``, ``functions``, ``nbytes`` (of its arrays);
    ``root`` (a :class:`Root`, or None when no name reaches it: garbage of a
    reference cycle, or beyond the search's limits); ``path`` (the chain as
    a Python expression, ``trainer.history['loss'][3]``); ``steps`` (one
    ``(what, label)`` per object of the chain, from the root to the head);
    ``notes`` (closure cells, default arguments... in words). Holds its head
    only through a weak reference."""

    def __init__(self, head, objects, variables, functions, nbytes, chain):
        self._head = weakref.ref(head)
        self.objects, self.variables, self.functions = objects, variables, functions
        self.nbytes = nbytes
        self.root = self.path = None
        self.steps, self.notes = [], []
        if chain is not None:
            self.root, steps = chain
            steps = _through_edges(_through_instance_dicts(steps))
            labels = "".join(label for _, label in steps if label)
            self.path = _DICT_ATTRIBUTE.sub(r".\2", self.root.name + labels)
            self.steps = [(_what(obj), label) for obj, label in steps]
            self.notes = _notes(steps)

    @property
    def head(self):
        """The head of the graph, if it is still alive (else None)."""
        return self._head()

    def held_by(self):
        """One line: who holds this graph."""
        if self.root is None:
            return ("no name reaches it: garbage of a reference cycle (gc.collect() frees it), "
                    "or a holder beyond the search")
        where = (f"a local variable of {self.root.where}" if self.root.kind == "local"
                 else f"a global of {self.root.where}")
        return f"{self.path}  ({self.root.name}: {where})"

    def describe(self):
        """Lines: the size, the holder and the chain, one link a line."""
        lines = [f"{self.objects} objects ({self.variables} Variables, {self.functions} "
                 f"Functions) holding {format_bytes(self.nbytes)} of arrays",
                 f"  {'held by ' if self.root else ''}{self.held_by()}"]
        if self.steps:
            width = max([len(self.root.name)] + [len(label) + 2 for _, label in self.steps if label])
            lines.append(f"    {self.root.name:<{width}}  {self.steps[0][0]}")
            for (_, label), (what, _) in zip(self.steps, self.steps[1:]):
                lines.append(f"    {'  ' + label:<{width}}  {what}")
            lines[-1] += "   <- the graph starts here"
        lines += [f"  ({note})" for note in self.notes]
        return lines

    def __repr__(self):
        return f"<LeakedGraph: {self.objects} objects, {format_bytes(self.nbytes)}, held by {self.path}>"


class LeakReport:
    """What survived the marked iterations of a loop, and who holds it.

    Numbers: ``leaking`` (bool), ``objects``, ``variables``, ``functions``,
    ``nbytes`` (of the arrays they hold), ``iterations`` (how many were
    judged), ``objects_per_iteration``, ``bytes_per_iteration``, ``counts``
    (live framework objects at each mark). ``graphs``: the surviving graphs,
    largest first (:class:`LeakedGraph`; the roots of the ``_MAX_CHAINS``
    largest are searched). ``largest``: the first or None. ``print(report)``
    for the text; ``report.graph()`` for the picture. Keeps nothing alive."""

    def __init__(self, *, iterations, counts, graphs=(), objects=0, variables=0, functions=0,
                 nbytes=0, spread=0, unit="iteration", note=None):
        self.iterations, self.counts, self.unit, self.note = iterations, list(counts), unit, note
        self.graphs = list(graphs)
        self.objects, self.variables, self.functions, self.nbytes = (
            objects, variables, functions, nbytes)
        # Growth means survivors from more than one iteration: one graph
        # kept on purpose (``best = loss``) survives, but does not grow.
        self.spread = spread
        self.leaking = objects > 0 and spread >= min(2, iterations)
        per = iterations if iterations else 1
        self.objects_per_iteration = objects / per
        self.bytes_per_iteration = nbytes / per

    @property
    def largest(self):
        return self.graphs[0] if self.graphs else None

    def lines(self):
        """The text of the report, as a list of lines."""
        if self.note and not self.iterations:
            return [self.note]
        if not self.objects:
            return [f"no leak: nothing made during {self.iterations} {self.unit}s outlived them "
                    f"(live Variables and Functions at each {self.unit}: {_series(self.counts)})"]
        lines = [
            f"{'leak' if self.leaking else 'no growth, but kept'}: {self.objects} Variables and Functions made during {self.iterations} "
            f"{self.unit}s are still alive ({self.variables} Variables, {self.functions} "
            f"Functions, {format_bytes(self.nbytes)} of arrays)",
            f"  growth: {self.objects_per_iteration:.1f} objects and "
            f"{format_bytes(int(self.bytes_per_iteration))} of arrays per {self.unit}"
            if self.leaking else
            f"  all made in one {self.unit} of {self.iterations}: a graph kept on purpose?",
            f"  live Variables and Functions at each {self.unit}: {_series(self.counts)}",
            f"the largest surviving graph (of {len(self.graphs)}): " + self.graphs[0].describe()[0],
            *self.graphs[0].describe()[1:],
        ]
        others = self.graphs[1:]
        if others:
            lines.append(f"{len(others)} more surviving graph{'s' if len(others) > 1 else ''}:")
            for graph in others[:5]:
                lines.append(f"  {graph.objects} object{'s' if graph.objects > 1 else ''}, "
                             f"{format_bytes(graph.nbytes)}: "
                             f"held by {graph.path or '(no name reaches it)'}")
            if len(others) > 5:
                lines.append(f"  ... and {len(others) - 5} more")
        lines.append("fix: keep numbers, not Variables (loss.item() or float(loss)), or keep a "
                     "Variable without its graph (loss.detach())")
        if self.note:
            lines.append(self.note)
        return lines

    def __str__(self):
        return "\n".join(self.lines())

    def __repr__(self):
        return (f"<LeakReport: {'leaking' if self.leaking else 'no leak'}, {self.objects} objects "
                f"over {self.iterations} {self.unit}s, {len(self.graphs)} graphs>")

    def graph(self, index=0, title=None, **kwargs):
        """The reference graph of surviving graph ``index`` (0: the largest),
        with a green name box at the root of its chain (``reference_graph``)."""
        if not self.graphs:
            raise ValueError("LeakReport.graph: nothing survived, there is no graph to draw")
        leaked = self.graphs[index]
        head = leaked.head
        if head is None:
            raise ValueError("LeakReport.graph: the graph has been freed since the report was made")
        name = leaked.path or "(no name reaches it)"
        title = title or f"held by {leaked.path}" if leaked.path else title
        return reference_graph({name: head}, title=title, highlight=(name,), **kwargs)


def _series(counts, shown=8):
    if len(counts) <= shown:
        return ", ".join(map(str, counts))
    return ", ".join(map(str, counts[:3])) + ", ..., " + ", ".join(map(str, counts[-4:]))


# --- From survivors to a report ------------------------------------------------------------
def analyse(survivors, *, iterations, counts, spread=None, unit="iteration",
            extra_namespaces=(), note=None):
    """The report on ``survivors`` (a list of framework objects that outlived
    the iterations): their graphs, largest first, and each one's chain from
    a root. ``spread``: in how many iterations they were made (default:
    all). ``extra_namespaces``: ``[(dict, where)]`` searched first for
    roots (a script's globals once it has finished)."""
    spread = iterations if spread is None else spread
    was_enabled = gc.isenabled()
    gc.disable()  # our allocations must not run the collector in the middle of the search
    try:
        return _analyse(survivors, iterations, counts, spread, unit, extra_namespaces, note)
    finally:
        if was_enabled:
            gc.enable()


def _analyse(survivors, iterations, counts, spread, unit, extra_namespaces, note):
    index = {id(obj): k for k, obj in enumerate(survivors)}
    kinds = [_kind(obj) for obj in survivors]
    children = [[] for _ in survivors]
    held = [False] * len(survivors)
    arrays = []
    for k, obj in enumerate(survivors):
        for target, _, weak in _references(obj):
            j = index.get(id(target))
            if j is not None and not weak and j != k:
                children[k].append(j)
                held[j] = True
        arrays.append(_describe(obj, kinds[k])[2])
    # Heads: held by no other survivor. What is left is on reference cycles
    # (stage 02): the newest object of each stands for it.
    order = [k for k in range(len(survivors)) if not held[k]]
    order += [k for k in reversed(range(len(survivors))) if held[k]]
    covered = [False] * len(survivors)
    groups = []
    for k in order:
        if covered[k]:
            continue
        members, stack = {k}, [k]
        while stack:
            for j in children[stack.pop()]:
                if j not in members:
                    members.add(j)
                    stack.append(j)
        for j in members:
            covered[j] = True
        groups.append((k, members))

    def size(members):
        held_arrays = {}
        for j in members:
            held_arrays.update(arrays[j])
        n_var = sum(kinds[j] == "variable" for j in members)
        return len(members), n_var, len(members) - n_var, sum(held_arrays.values())

    sized = sorted(((size(members), k) for k, members in groups), key=lambda g: (-g[0][0], -g[0][3], g[1]))
    del groups
    targets = [survivors[k] for _, k in sized[:_MAX_CHAINS]]
    roots, namespace_ids = _roots(extra_namespaces)
    chains = _search(targets, roots, namespace_ids | {id(survivors)})
    chains += [None] * (len(sized) - len(chains))
    graphs = [LeakedGraph(survivors[k], *stats, chain) for (stats, k), chain in zip(sized, chains)]
    del targets, chains
    everything = {}
    for held_arrays in arrays:
        everything.update(held_arrays)
    n_var = sum(kind == "variable" for kind in kinds)
    return LeakReport(iterations=iterations, counts=counts, graphs=graphs,
                      objects=len(survivors), variables=n_var, functions=len(survivors) - n_var,
                      nbytes=sum(everything.values()), spread=spread, unit=unit, note=note)


def report_between(tracker, first, last, *, unit="iteration", extra_namespaces=(), note=None,
                   series=None):
    """The report on the objects born between marks ``first`` and ``last``
    that are still alive. The marks are ``series.marks`` (serial numbers)
    and ``series.counts`` (live counts), by default the tracker's own; the
    ``leaks`` command keeps one series per loop of the script."""
    series = tracker if series is None else series
    survivors, spread = survivors_between(tracker, series.marks, first, last)
    try:
        return analyse(survivors, iterations=last - first, counts=series.counts[first:],
                       spread=spread, unit=unit, extra_namespaces=extra_namespaces, note=note)
    finally:
        survivors.clear()


def survivors_between(tracker, marks, first, last):
    """(the tracked objects born between ``marks[first]`` and ``marks[last]``
    that are alive, in how many iterations they were made). Strong
    references: clear the list when done."""
    marks = marks[first:last + 1]
    survivors = tracker.alive_born_between(marks[0], marks[-1])
    # The iteration each survivor was made in: the first mark at or after its birth.
    spread = len({bisect.bisect_left(marks, tracker.serial_of(obj)) for obj in survivors})
    return survivors, spread


# --- The public entry points ---------------------------------------------------------------
class LeakFinder:
    """The context manager of :func:`find_leaks`. ``report`` is set on exit."""

    def __init__(self, *, slack=1, modules=None):
        if not isinstance(slack, int) or slack < 0:
            raise ValueError(f"find_leaks: slack must be a whole number of at least 0, got {slack!r}")
        self.slack = slack
        self.modules = modules
        self.report = None
        self._tracker = None
        self._unit = "backward() call"

    def __enter__(self):
        classes = None
        if self.modules is not None:
            from dezero_mini.memory.stages import load_stage

            classes = [cls for m in self.modules for cls in (load_stage(m).Variable, load_stage(m).Function)]
        self._tracker = Tracker(mark_on_backward=True).start(classes)
        return self

    def step(self):
        """Mark the end of an iteration by hand (then backward() calls no longer mark)."""
        if self._tracker is None:
            raise RuntimeError("find_leaks: step() is for inside the `with find_leaks() as finder:` block")
        if self._tracker.mark_on_backward:
            self._tracker.mark_on_backward = False
            self._tracker.marks.clear()
            self._tracker.counts.clear()
            self._unit = "step"
        self._tracker.mark()

    def __exit__(self, *exc_info):
        tracker, self._tracker = self._tracker, None
        tracker.stop()
        self.report = judge(tracker, self.slack, self._unit)
        return False


def judge(tracker, slack, unit, extra_namespaces=(), series=None):
    """The report over all of a tracker's marks (or ``series``'s) but the
    last ``slack`` iterations: everything made from the first mark on that
    outlived them."""
    series = tracker if series is None else series
    marks = len(series.marks)
    if marks < slack + 2:
        return LeakReport(iterations=0, counts=series.counts, unit=unit, note=(
            f"too few iterations to judge: {marks} {unit}s marked, {slack + 2} needed "
            f"(the first starts the count, and the last {slack} may keep their graphs)"))
    return report_between(tracker, 0, marks - 1 - slack, unit=unit,
                          extra_namespaces=extra_namespaces, series=series)


def find_leaks(fn=None, repeat=5, *, warmup=1, slack=1, modules=None):
    """Find the Variables and Functions that a loop keeps alive, and who keeps them.

    ``find_leaks()`` returns a context manager (:class:`LeakFinder`) to put
    around several iterations of a loop; its ``report`` (a
    :class:`LeakReport`) is ready after the block. The iterations are the
    ``backward()`` calls, or the calls of ``finder.step()``.

    ``find_leaks(fn, repeat)`` calls ``fn()`` ``warmup`` times, then
    ``repeat`` times as the iterations, and returns the report.

    ``slack``: how many of the last iterations may keep their graphs (1: the
    loop's names hold the last batch). ``modules``: the frameworks to watch
    (stage modules, ``"dezero_mini"``); by default every one imported.
    """
    if fn is None:
        return LeakFinder(slack=slack, modules=modules)
    if not callable(fn):
        raise TypeError(f"find_leaks: fn must be callable (one iteration of the loop), "
                        f"got {type(fn).__name__}")
    if not isinstance(repeat, int) or repeat < slack + 1:
        raise ValueError(f"find_leaks: repeat must be a whole number of at least slack + 1 = "
                         f"{slack + 1}, got {repeat!r}")
    for _ in range(warmup):
        fn()
    finder = LeakFinder(slack=slack, modules=modules)
    with finder:
        for _ in range(repeat):
            finder.step()
            fn()
        finder.step()
    finder.report.unit = "call"
    return finder.report
