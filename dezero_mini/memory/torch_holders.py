"""Who holds a leaked tensor: the chain of references from a root of the program down to it.

The search goes from the leaked objects back (``gc.get_referrers``), one
layer of referrers at a time, so that no depth limit below a name hides a
holder and every kind of holder is found the same way: a list, a dict that
gains a key per step, an object's attribute, an ``nn.Module``'s buffer or
attribute (``model.encoder.layers[1].attn.maps``), a class attribute, a
function's default argument or closure cell (a forward hook's list), a saved
exception's traceback and its frames. It stops at a root: a module's globals
(``history``, a global of train.py), a running function's locals, or, where
no Python object refers to the tensor at all, nothing (a graph held in C++).

:func:`holder_chains` returns the chains; :func:`describe` writes one as a
path (``Trainer.history[29]``) and the kinds of its links
(``type -> list -> Tensor``); :func:`storing_lines` finds the lines of the
script and its own modules that store into the holder's name.
"""
import ast
import gc
import re
import sys
import types
from dataclasses import dataclass
from pathlib import Path

#: Frames of these packages are the watcher's or the library's, never a holder.
MACHINERY = ("torch", "dezero_mini", "runpy", "importlib", "numpy", "_pytest", "pytest",
             "pluggy", "IPython", "ipykernel", "threading", "multiprocessing")
MAX_LAYERS = 40  # a chain longer than this is not a learner's


@dataclass
class Chain:
    """Objects from a root (``objects[0]``) down to a leaked object
    (``objects[-1]``); ``root`` says what the root is (``a global of
    train.py``, ``a local of train() at train.py:12``) and ``name`` the
    name it has there."""

    objects: list
    root: str
    name: str


def _machinery_frame(frame):
    return (frame.f_globals.get("__name__") or "").partition(".")[0] in MACHINERY


def _module_names(script_module):
    """id of a module's globals -> how a report names that module."""
    names = {}
    for name, module in list(sys.modules.items()):
        attributes = getattr(module, "__dict__", None)
        if isinstance(attributes, dict) and not name.partition(".")[0] in MACHINERY:
            names[id(attributes)] = f"a global of {name}"
    if script_module is not None:
        names[id(script_module.__dict__)] = (
            f"a global of {Path(getattr(script_module, '__file__', 'the script')).name}")
    return names


def _root_of(item, child, modules, frames):
    """(what the root is, the name of ``child`` there) when ``item`` is a root, else None."""
    if isinstance(item, dict) and id(item) in modules:
        return modules[id(item)], _key_of(item, child)
    if isinstance(item, types.FrameType) and id(item) in frames:
        code = item.f_code
        name = next((key for key, value in item.f_locals.items() if value is child), "?")
        return f"a local of {code.co_name}() at {Path(code.co_filename).name}:{item.f_lineno}", name
    return None


def _key_of(mapping, child):
    for key, value in list(mapping.items()):
        if value is child:
            return key if isinstance(key, str) else _short(key)
    return "<a key>"


def _short(value):
    """A label for a key that never builds a tensor's repr."""
    if isinstance(value, (str, int, float, bool, type(None))):
        return repr(value)
    return f"<{type(value).__name__}>"


def holder_chains(leaked, script_module=None, limit=3):
    """Up to ``limit`` chains from distinct roots down to objects of
    ``leaked``, shortest first, each a ``Chain``. A running frame of the
    script is a root; so is any module's globals. The referrers met on the
    way are kept alive only while the search runs."""
    frames = {}
    for top in list(sys._current_frames().values()):
        frame = top
        while frame is not None:
            if not _machinery_frame(frame) and frame.f_code.co_name != "<module>":
                frames[id(frame)] = frame
            frame = frame.f_back
    modules = _module_names(script_module)
    # A running frame keeps its locals where the collector does not look:
    # they are matched by identity instead.
    local_of = {}
    for frame in frames.values():
        code = frame.f_code
        for name, value in frame.f_locals.items():
            local_of.setdefault(id(value), (
                frame, f"a local of {code.co_name}() at {Path(code.co_filename).name}:"
                       f"{frame.f_lineno}", name))
    ours = {id(frames), id(local_of)}
    frontier = list(leaked)
    parent_of = {}  # id(object) -> the object one step closer to the leaked one
    kept = {id(item): item for item in frontier}
    ours.update((id(kept), id(frontier), id(leaked), id(parent_of)))
    chains, roots_seen = [], set()
    here = sys._getframe()
    for _ in range(MAX_LAYERS):
        if not frontier or len(chains) >= limit:
            break
        for item in frontier:
            if id(item) in local_of:
                frame, root, name = local_of[id(item)]
                if (id(frame), name) not in roots_seen:
                    roots_seen.add((id(frame), name))
                    chains.append(Chain([frame, *_down_from(item, parent_of)], root, name))
        referrers = gc.get_referrers(*frontier)
        ours.add(id(referrers))
        by_id = {id(item): item for item in frontier}
        ours.add(id(by_id))
        next_frontier = []
        for item in referrers:
            if id(item) in kept or id(item) in ours or _is_watcher_object(item, here):
                continue
            child = next((by_id[id(referent)] for referent in gc.get_referents(item)
                          if id(referent) in by_id), None)
            if child is None:
                continue
            kept[id(item)] = item
            parent_of[id(item)] = child
            root = _root_of(item, child, modules, frames)
            if root is not None:
                if (id(item), root[1]) not in roots_seen:
                    roots_seen.add((id(item), root[1]))
                    chains.append(Chain(_down_from(item, parent_of), *root))
                continue
            if isinstance(item, (types.ModuleType,)):
                continue
            next_frontier.append(item)
        frontier = next_frontier
        ours.add(id(frontier))
    del here
    return chains[:limit]


def _is_watcher_object(item, here):
    """The watcher's own frames and containers: never a holder."""
    if isinstance(item, types.FrameType):
        return item is here or _machinery_frame(item) or item.f_code.co_name == "<module>"
    return False


def _down_from(root, parent_of):
    objects = [root]
    while id(objects[-1]) in parent_of:
        objects.append(parent_of[id(objects[-1])])
    return objects


def _label(holder, child):
    """How ``child`` is reached from ``holder`` in a path (``.cache``, ``[3]``, ``['loss']``)."""
    if isinstance(holder, dict):
        for key, value in list(holder.items()):
            if value is child:
                return f"[{_short(key)}]"
        return ".<a key>"
    if isinstance(holder, (list, tuple)) or type(holder).__name__ == "deque":
        for index, value in enumerate(holder):
            if value is child:
                return f"[{index}]"
    if isinstance(holder, (set, frozenset)):
        return ".<an item of a set>"
    if isinstance(holder, type) and isinstance(child, dict):
        return ""  # the class's own attributes: the next link names one
    if isinstance(holder, types.FunctionType):
        if child is holder.__defaults__:
            return ".__defaults__"
        if child is holder.__kwdefaults__:
            return ".__kwdefaults__"
        for cell, name in zip(holder.__closure__ or (), holder.__code__.co_freevars):
            if cell is child:
                return f".<closure cell {name!r}>"
        return ""
    if type(holder).__name__ == "cell":
        return ""
    if isinstance(holder, types.MethodType):
        return ".__self__" if holder.__self__ is child else ".__func__"
    if isinstance(holder, types.TracebackType):
        return ".tb_frame" if holder.tb_frame is child else ".tb_next"
    if isinstance(holder, BaseException):
        return ".__traceback__" if holder.__traceback__ is child else ".<exception>"
    if isinstance(holder, types.FrameType):
        name = next((key for key, value in holder.f_locals.items() if value is child), None)
        code = holder.f_code
        return (f".<local {name!r} of {code.co_name}() at "
                f"{Path(code.co_filename).name}:{holder.f_lineno}>")
    attributes = getattr(holder, "__dict__", None)
    if attributes is child:
        return ""  # the next link names the attribute
    if isinstance(attributes, dict):
        for key, value in list(attributes.items()):
            if value is child:
                return f".{key}"
    return f".<{type(holder).__name__}>"


def describe(chain):
    """(the path of ``chain``: ``model.encoder.layers[1].attn.maps[3]``, the
    kinds of its links: ``Sequential -> list -> Tensor``)."""
    objects = chain.objects
    path, kinds = str(chain.name), []
    attribute_dict = module_dict = False  # the link before reached an __dict__, a Module's dict
    for index, (holder, child) in enumerate(zip(objects, objects[1:])):
        label = _label(holder, child) if holder is not objects[0] else ""
        if isinstance(holder, types.FunctionType) and child is holder.__closure__:
            cell = objects[index + 2] if index + 2 < len(objects) else None
            names = [name for item, name in zip(child, holder.__code__.co_freevars)
                     if item is cell]
            label = f".<closure cell {names[0]!r}>" if names else ".__closure__"
        elif isinstance(holder, tuple) and index > 0 and \
                isinstance(objects[index - 1], types.FunctionType) and \
                objects[index - 1].__closure__ is holder:
            label = ""  # named with the function's link
        key = label[2:-2] if label.startswith("['") and label.endswith("']") else None
        if key is not None and (attribute_dict or module_dict):
            label = f".{key}" if key.isidentifier() else f"[{key}]"
        module_dict = label[1:] in _MODULE_DICTS  # model._modules['encoder'] is model.encoder
        attribute_dict = getattr(holder, "__dict__", None) is child or (
            isinstance(holder, type) and isinstance(child, dict))
        if not module_dict:
            path += label
        if not (attribute_dict or module_dict or type(child).__name__ == "cell"):
            kinds.append(child.__name__ if isinstance(child, type) else type(child).__name__)
    return path, " -> ".join(kinds)


_MODULE_DICTS = ("_modules", "_buffers", "_parameters")


def holder_kind(chain):
    """What kind of holder ``chain`` goes through, for the fix: "buffer",
    "exception", "default", "closure", "container", "attribute" or "name"."""
    objects = chain.objects
    for holder, child in zip(objects, objects[1:]):
        if isinstance(holder, (types.TracebackType, BaseException)):
            return "exception"
    for holder, child in zip(objects, objects[1:]):
        if isinstance(holder, types.FunctionType):
            return "default" if child is holder.__defaults__ or \
                child is holder.__kwdefaults__ else "closure"
    import torch

    for holder in objects:
        if isinstance(holder, torch.nn.Module):
            buffers = holder.__dict__.get("_buffers", {})
            parameters = holder.__dict__.get("_parameters", {})
            if any(value is objects[-1] for value in (*buffers.values(),
                                                      *parameters.values())):
                return "buffer"
    if any(isinstance(holder, (list, tuple, dict, set, frozenset)) or
           type(holder).__name__ == "deque" for holder in objects[1:-1]):
        return "container"
    if len(objects) > 2:
        return "attribute"
    return "name"


def last_name(path):
    """The last name of a path (``history`` of ``trainer.history[3]``), the
    one a line of the script stores into; None for a path without one."""
    marked = re.findall(r"<(?:closure cell|local) '([A-Za-z_][A-Za-z0-9_]*)'", path)
    if marked:  # a closure's variable, a frame's local
        return marked[-1]
    names = []
    for piece in path.replace("[", ".[").split("."):
        if piece and not piece.startswith("[") and not piece.startswith("<") and \
                piece.isidentifier():
            names.append(piece)
    return names[-1] if names else None


def storing_lines(name, files, limit=2):
    """``(file name, line, source)`` of the statements of ``files`` that store
    into ``name``: ``name = ...``, ``name += ...``, ``x.name = ...``,
    ``name[k] = ...``, ``name.append(...)`` (and the other adding methods),
    most specific first (what adds to a container before what rebinds it)."""
    adding = {"append", "extend", "insert", "add", "update", "setdefault", "appendleft",
              "__setitem__", "put", "register_buffer"}
    found = []
    for path in files:
        try:
            text = Path(path).read_text()
            tree = ast.parse(text)
        except (OSError, SyntaxError, ValueError, UnicodeDecodeError):
            continue
        lines = text.splitlines()

        def names(node):
            return (isinstance(node, ast.Name) and node.id == name) or \
                (isinstance(node, ast.Attribute) and node.attr == name)

        for node in ast.walk(tree):
            rank = None
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
                    node.func.attr in adding and names(node.func.value):
                rank = 0
            elif isinstance(node, ast.AugAssign) and (
                    names(node.target) or (isinstance(node.target, ast.Subscript)
                                           and names(node.target.value))):
                rank = 0
            elif isinstance(node, ast.Assign) and any(
                    isinstance(target, ast.Subscript) and names(target.value)
                    for target in node.targets):
                rank = 0
            elif isinstance(node, ast.Assign) and any(names(target) for target in node.targets):
                # x = f(x) carries the old value along: before a plain x = ...
                rank = 0 if any(names(part) for part in ast.walk(node.value)) else 1
            if rank is not None:
                found.append((rank, Path(path).name, node.lineno,
                              lines[node.lineno - 1].strip()))
    found.sort(key=lambda item: (item[0], item[1], item[2]))
    return [item[1:] for item in found[:limit]]
