"""Who holds a leaked tensor: the chain of references from a root of the program down to it.

The search goes from the leaked objects back (``gc.get_referrers``), one
layer of referrers at a time, so that no depth limit below a name hides a
holder and every kind of holder is found the same way: a list, a dict that
gains a key per step (or a tensor as a key), an object's attribute, an
``nn.Module``'s buffer or attribute (``model.encoder.layers[1].attn.maps``),
a class attribute, a function's default argument or closure cell, a
``functools.partial``, a saved exception's traceback and its frames,
recorded warnings, log records, a ``threading.local``. Where the collector
does not see a reference, the search adds it: a leaf tensor's ``.grad``
(C++), the locals of running frames, the values of the running context's
ContextVars.

It stops at a root: a module's globals (``history``, a global of train.py;
a library's globals last, ``torch.nn.modules.module._global_forward_hooks``),
a running function's locals, a module's parameter or buffer (named by its
module, ``model[0].weight``, never through the optimizer), a suspended
generator or coroutine (named as its function's local; what holds the
generator is searched the same way), or an object that no Python object
refers to (kept from C++: the hook dict of an autograd node).

:func:`holder_chains` returns the chains, the script's own roots first;
:func:`describe` writes one as a path (``Trainer.history[29]``) and the
kinds of its links (``type -> list -> Tensor``); :func:`holder_kind` says
what kind of holder it is (for the fix: a cache, a hook dict, a list...),
:func:`holder_path` how a report names it (``the lru_cache of predict()``,
``model[0].weight._backward_hooks``); :func:`storing_lines` finds the lines
of the script and its own modules that store into the holder's name.
"""
import ast
import atexit
import contextvars
import dataclasses
import functools
import gc
import re
import signal
import sys
import threading
import types
import weakref
from dataclasses import dataclass
from pathlib import Path

#: Frames of these packages are the watcher's or the library's, never a holder.
MACHINERY = ("torch", "dezero_mini", "runpy", "importlib", "numpy", "_pytest", "pytest",
             "pluggy", "IPython", "ipykernel", "threading", "multiprocessing", "asyncio")
#: Packages whose globals are never a root: the watcher's own and the test
#: runner's (a library's globals are, the last resort: a hook dict of torch's).
WATCHER = ("dezero_mini", "runpy", "importlib", "_pytest", "pytest", "pluggy", "IPython",
           "ipykernel")
#: A suspended generator, coroutine or async generator keeps its frame's locals
#: without a frame on any stack: a holder is named as a local of its function.
SUSPENDED = (types.GeneratorType, types.CoroutineType, types.AsyncGeneratorType)
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
    #: how the root is held when it is a suspended generator or coroutine
    #: (``tracker, a global of train.py``), else None
    held_by: object = None
    #: the root is a module's parameter or buffer, named by its module
    parameter: bool = False
    #: no Python object refers to the root: it is kept from C++
    from_cpp: bool = False


def _unnamed(item):
    """How a report names an object that no Python object refers to:
    ``<a dict of 12 hooks kept from C++>``, ``<a list kept from C++>``."""
    if isinstance(item, dict) and item and all(callable(value) for value in item.values()):
        return f"<a dict of {len(item)} hooks kept from C++>"
    return f"<a {type(item).__name__} kept from C++>"


#: The root of a chain whose top no Python object refers to.
FROM_CPP = ("no Python object refers to it: kept from C++, by a hook on an autograd node "
            "(`grad_fn.register_hook`), a tensor that a kept graph saved, or an extension's "
            "object")


def _machinery_frame(frame):
    return (frame.f_globals.get("__name__") or "").partition(".")[0] in MACHINERY


def _module_names(script_module):
    """id of a module's globals -> how a report names that module."""
    names = {}
    for name, module in list(sys.modules.items()):
        attributes = getattr(module, "__dict__", None)
        if isinstance(attributes, dict) and not name.partition(".")[0] in WATCHER:
            names[id(attributes)] = f"a global of {name}"
    if script_module is not None:
        names[id(script_module.__dict__)] = (
            f"a global of {Path(getattr(script_module, '__file__', 'the script')).name}")
    return names


def _module_tensors(script_module, frames):
    """id(tensor) -> (what the root is, its path) for the parameters and
    buffers of the nn.Modules that the script's globals and running frames
    name: a parameter is named by its module (``model[0].weight``), not by
    the optimizer's list of it or a loop variable that was last set to it."""
    import torch

    namespaces = []
    if script_module is not None:
        namespaces.append((f"a global of "
                           f"{Path(getattr(script_module, '__file__', 'the script')).name}",
                           script_module.__dict__))
    for frame in frames.values():
        code = frame.f_code
        namespaces.append((f"a local of {code.co_name}() at {Path(code.co_filename).name}:"
                           f"{frame.f_lineno}", frame.f_locals))
    found = {}
    for root, names in namespaces:
        for name, value in list(names.items()):
            if not isinstance(value, torch.nn.Module):
                continue
            for kind in (value.named_parameters, value.named_buffers):
                for dotted, tensor in kind():
                    path = name + "".join(f"[{part}]" if part.isdigit() else f".{part}"
                                          for part in dotted.split("."))
                    found.setdefault(id(tensor), (root, path))
    return found


def _root_of(item, child, modules, frames):
    """(what the root is, the name of ``child`` there) when ``item`` is a root, else None."""
    if isinstance(item, SUSPENDED):
        return _suspended_root(item, child)
    if isinstance(item, dict) and id(item) in modules:
        module = modules[id(item)].removeprefix("a global of ")
        key = _key_of(item, child)
        if module.partition(".")[0] in MACHINERY:  # a library's: its full name
            return modules[id(item)], f"{module}.{key}"
        return modules[id(item)], key
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


def holder_chains(leaked, script_module=None, limit=3, leave_out=()):
    """Up to ``limit`` chains from distinct roots down to objects of
    ``leaked``, the script's own roots first, each a ``Chain``. A running
    frame of the script is a root; so is any module's globals, a ContextVar
    of the running context, and a suspended generator or coroutine (then
    ``held_by`` says what holds it). ``leave_out``: ids of the caller's own
    containers. The referrers met on the way are kept alive only while the
    search runs."""
    frames = {}
    for top in list(sys._current_frames().values()):
        frame = top
        while frame is not None:
            if not _machinery_frame(frame) and frame.f_code.co_name != "<module>":
                frames[id(frame)] = frame
            frame = frame.f_back
    modules = _module_names(script_module)
    folder = _folder_of(script_module)
    # A running frame keeps its locals where the collector does not look:
    # they are matched by identity instead; so are the values of the
    # ContextVars of the running context (kept by the thread, not by an object).
    local_of = {}
    for frame in frames.values():
        code = frame.f_code
        for name, value in frame.f_locals.items():
            local_of.setdefault(id(value), (
                frame, f"a local of {code.co_name}() at {Path(code.co_filename).name}:"
                       f"{frame.f_lineno}", name))
    for variable, value in _context_values():
        local_of.setdefault(id(value), (
            variable, f"the value of the ContextVar {variable.name!r} in the running context",
            variable.name))
    in_cpp = referred_from_cpp()
    owned = _module_tensors(script_module, frames)  # parameters and buffers, by module
    ours = {id(frames), id(local_of), id(in_cpp), id(owned), *leave_out}
    frontier = list(leaked)
    parent_of = {}  # id(object) -> the object one step closer to the leaked one
    kept = {id(item): item for item in frontier}
    ours.update((id(kept), id(frontier), id(leaked), id(parent_of)))
    chains, roots_seen, orphans = [], set(), []
    # The locals of every running frame (the watcher's too): never "from C++".
    running = {id(item) for item in leaked}
    for top in list(sys._current_frames().values()):
        frame = top
        while frame is not None:
            names = frame.f_locals  # (a snapshot dict of the frame's: not from C++ either)
            running.add(id(names))
            running.update(id(value) for value in names.values())
            frame = frame.f_back
    ours.update((id(orphans), id(running)))
    first_found = None  # the layer where the first chain was found
    here = sys._getframe()

    def add(chain):
        chains.append(chain)
        ours.add(id(chain.objects))

    for layer in range(MAX_LAYERS):
        preferred = sum(_rank(chain, modules, folder) == 0 for chain in chains)
        extra = EXTRA_LAYERS if preferred else 3 * EXTRA_LAYERS  # none of the script's yet
        if not frontier or preferred >= limit or (
                first_found is not None and layer - first_found > extra):
            break
        for item in frontier:
            if id(item) in owned:  # a module's parameter or buffer: a root of its own
                root, path = owned[id(item)]
                if (id(item), path) not in roots_seen:
                    roots_seen.add((id(item), path))
                    add(Chain(_down_from(item, parent_of), root, path, parameter=True))
                continue
            if id(item) in local_of:
                frame, root, name = local_of[id(item)]
                if (id(frame), name) not in roots_seen:
                    roots_seen.add((id(frame), name))
                    add(Chain([frame, *_down_from(item, parent_of)], root, name))
        frontier = [item for item in frontier if id(item) not in owned]
        ours.add(id(frontier))
        if not frontier:
            break
        referrers = gc.get_referrers(*frontier)
        ours.add(id(referrers))
        by_id = {id(item): item for item in frontier}
        ours.add(id(by_id))
        # What refers to the frontier from C++, where the collector does not look.
        hidden = [(holder, item) for item in frontier for holder in in_cpp.get(id(item), ())]
        next_frontier = []
        referred = set()  # ids of the frontier's objects that a Python object refers to
        for item, known_child in [(item, None) for item in referrers] + hidden:
            if id(item) in ours or _is_watcher_object(item, here):
                continue
            children = [known_child] if known_child is not None else [
                by_id[id(referent)] for referent in gc.get_referents(item)
                if id(referent) in by_id]
            referred.update(id(child) for child in children)
            rooted = id(item) in modules or id(item) in frames or isinstance(item, SUSPENDED)
            if id(item) in kept and not rooted:  # (a root may hold several paths)
                continue
            if not children:
                continue
            kept[id(item)] = item
            if rooted:
                for child in children:
                    if id(child) in owned:
                        continue  # named by its module instead (above)
                    root = _root_of(item, child, modules, frames)
                    if root is not None and (id(item), root[1]) not in roots_seen:
                        roots_seen.add((id(item), root[1]))
                        add(Chain([item, *_down_from(child, parent_of)], *root))
                continue
            child = children[0]
            parent_of[id(item)] = child
            if id(item) in owned:  # a root: found at the next layer, not walked above
                next_frontier.append(item)
                continue
            if isinstance(item, (types.ModuleType,)):
                continue
            next_frontier.append(item)
        # What no Python object refers to is kept from C++ (a hook on an
        # autograd node, a graph's saved tensor): the top of a chain without a root.
        for item in frontier:
            if id(item) not in referred and id(item) not in local_of and \
                    len(orphans) < limit and id(item) not in running:
                orphans.append(Chain(_down_from(item, parent_of), FROM_CPP, _unnamed(item),
                                     from_cpp=True))
        frontier = next_frontier
        ours.add(id(frontier))
        if first_found is None and chains:
            first_found = layer
    if not chains:
        chains = orphans
    del here, frontier, kept, parent_of, orphans
    chains.sort(key=lambda chain: _rank(chain, modules, folder))  # (a stable sort)
    # One chain per container that holds the leaked objects: the others reach
    # the same one another way (``trainer.__class__.history`` is ``Trainer.history``).
    containers, distinct = set(), []
    for chain in chains:
        container = id(chain.objects[-2]) if len(chain.objects) > 1 else None
        if container is None or container not in containers:
            containers.add(container)
            distinct.append(chain)
    chains = distinct[:limit]
    for chain in chains:  # who holds a suspended generator or coroutine
        if isinstance(chain.objects[0], SUSPENDED):
            outer = holder_chains(chain.objects[:1], script_module, 1,
                                  (*leave_out, id(chains), *(id(c.objects) for c in chains)))
            if outer:
                path, _ = describe(outer[0])
                chain.held_by = f"{container_of(path)}, {outer[0].root}"
    return chains


def referred_from_cpp():
    """id(object) -> the objects that refer to it from C++, where
    ``gc.get_referrers`` does not see them: a leaf tensor's ``.grad`` (which
    keeps a graph after ``backward(create_graph=True)``). One pass over the
    objects, once per search."""
    from dezero_mini.memory.torch_census import tensor_types

    kinds = tensor_types()
    found = {}
    for item in [item for item in gc.get_objects() if type(item) in kinds]:
        if item.is_leaf and item.requires_grad:
            grad = item.grad
            if grad is not None and grad.grad_fn is not None:
                found.setdefault(id(grad), []).append(item)
    return found


#: Layers searched past the first root found, for a root of the script's
#: own (three times as many while none is found): a library's globals or
#: the optimizer may be reached a few layers before the script's name.
EXTRA_LAYERS = 2


def _context_values():
    """(ContextVar, value) of the running context."""
    try:
        return list(contextvars.copy_context().items())
    except RuntimeError:
        return []


def _folder_of(script_module):
    filename = getattr(script_module, "__file__", None)
    return Path(filename).resolve().parent if filename else None


def _rank(chain, modules, folder):
    """0 for a chain whose root is the script's (its globals, a running frame
    or suspended generator of its folder, a ContextVar), 1 for another
    module's globals; +2 for a chain through an optimizer, which refers to
    the parameters that a module owns (``model[0].weight``, not
    ``optimizer.param_groups[0]['params'][0]``)."""
    root = chain.objects[0]
    rank = 1
    if isinstance(root, types.FrameType) or isinstance(root, SUSPENDED):
        code = root.f_code if isinstance(root, types.FrameType) else _code_of(root)
        rank = 0 if folder is None or Path(code.co_filename).resolve().parent == folder else 1
    elif isinstance(root, dict):
        filename = root.get("__file__") or ""
        rank = 0 if root.get("__name__") == "__main__" or (
            folder is not None and filename and Path(filename).resolve().parent == folder) \
            else 1
    elif type(root).__name__ == "ContextVar":
        rank = 0
    if any(type(item).__module__.startswith("torch.optim") for item in chain.objects[1:3]):
        rank += 2
    return rank


def _code_of(suspended):
    return getattr(suspended, "gi_code", None) or getattr(suspended, "cr_code", None) or \
        getattr(suspended, "ag_code")


def frame_of(suspended):
    """The frame of a suspended generator, coroutine or async generator (None once finished)."""
    for name in ("gi_frame", "cr_frame", "ag_frame"):
        if hasattr(suspended, name):
            return getattr(suspended, name)
    return None


def _suspended_root(item, child):
    """(what the root is, the name of ``child`` there) for a suspended
    generator or coroutine ``item``: one of its function's locals."""
    frame, code = frame_of(item), _code_of(item)
    name = "?"
    if frame is not None:
        name = next((key for key, value in frame.f_locals.items() if value is child), "?")
    what = {types.GeneratorType: "generator", types.CoroutineType: "coroutine"}.get(
        type(item), "async generator")
    where = f"{Path(code.co_filename).name}:{frame.f_lineno if frame else code.co_firstlineno}"
    return f"a local of the suspended {what} {code.co_name}() at {where}", name


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
    if isinstance(holder, SUSPENDED):
        frame, code = frame_of(holder), _code_of(holder)
        name = next((key for key, value in (frame.f_locals if frame else {}).items()
                     if value is child), None)
        return f".<local {name!r} of {code.co_name}()>"
    if is_lru_cache(holder) and isinstance(child, dict) and \
            getattr(holder, "__dict__", None) is not child:
        return ".<cache>"
    label = _tensor_attribute(holder, child)
    if label:
        return label
    if isinstance(holder, functools.partial):
        return next((f".{name}" for name in ("func", "args", "keywords")
                     if getattr(holder, name) is child), ".<partial>")
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
    if isinstance(child, type) and type(holder) is child:
        return ".__class__"
    attributes = getattr(holder, "__dict__", None)
    if attributes is child:
        return ""  # the next link names the attribute
    if isinstance(attributes, dict):
        for key, value in list(attributes.items()):
            if value is child:
                return f".{key}"
    return f".<{type(holder).__name__}>"


def is_lru_cache(item):
    """Whether ``item`` is a function wrapped by ``functools.lru_cache`` or ``functools.cache``."""
    return type(item).__name__ == "_lru_cache_wrapper" and hasattr(item, "cache_info")


#: What a tensor refers to from C++ that a chain may go through.
_TENSOR_ATTRIBUTES = ("_backward_hooks", "_post_accumulate_grad_hooks", "_base")


def _tensor_attribute(holder, child):
    """``._backward_hooks``, ``.grad``...: the attribute of the tensor
    ``holder`` that ``child`` is, else None."""
    import torch

    if not isinstance(holder, torch.Tensor):
        return None
    names = _TENSOR_ATTRIBUTES + (("grad",) if holder.is_leaf else ())
    return next((f".{name}" for name in names if getattr(holder, name, None) is child), None)


def describe(chain):
    """(the path of ``chain``: ``model.encoder.layers[1].attn.maps[3]``, the
    kinds of its links: ``Sequential -> list -> Tensor``)."""
    objects = chain.objects
    path, kinds, labels = str(chain.name), [], []
    if chain.parameter or chain.from_cpp:  # the root is an object itself, not a namespace
        kinds.append(type(objects[0]).__name__)
    attribute_dict = module_dict = False  # the link before reached an __dict__, a Module's dict
    per_thread = 0  # links still inside a threading.local: its per-thread attribute dict
    for index, (holder, child) in enumerate(zip(objects, objects[1:])):
        named_by_root = holder is objects[0] and not chain.parameter
        label = _label(holder, child) if not named_by_root else ""
        if _is_thread_local(holder):
            per_thread = 2  # local -> its dicts by thread -> this thread's attributes
        if per_thread:
            per_thread -= 1
            label = ""
            attribute_dict = per_thread == 0
            continue
        if isinstance(holder, types.FunctionType) and child is holder.__closure__:
            cell = objects[index + 2] if index + 2 < len(objects) else None
            names = [name for item, name in zip(child, holder.__code__.co_freevars)
                     if item is cell]
            label = f".<closure cell {names[0]!r}>" if names else ".__closure__"
        elif isinstance(holder, tuple) and index > 0 and \
                isinstance(objects[index - 1], types.FunctionType) and \
                objects[index - 1].__closure__ is holder:
            label = ""  # named with the function's link
        if isinstance(holder, dict) and _names_hooks(labels[-1] if labels else path):
            label = _hook_label(child, label)
        key = label[2:-2] if label.startswith("['") and label.endswith("']") else None
        if key is not None and (attribute_dict or module_dict):
            label = f".{key}" if key.isidentifier() else f"[{key}]"
        module_dict = label[1:] in _MODULE_DICTS  # model._modules['encoder'] is model.encoder
        attribute_dict = getattr(holder, "__dict__", None) is child or (
            isinstance(holder, type) and isinstance(child, dict))
        if not module_dict:
            labels.append(label)
        if not (attribute_dict or module_dict or type(child).__name__ == "cell"):
            kinds.append(child.__name__ if isinstance(child, type) else type(child).__name__)
    return path + "".join(_linked_list_start(labels)), " -> ".join(_compressed(kinds))


def _names_hooks(label):
    """Whether a path's label names a hook dict (``._forward_hooks``,
    ``_global_backward_hooks``)."""
    return bool(re.search(r"hooks'?\]?$", str(label)))


def _hook_label(hook, label):
    """How a path names a hook of a hook dict: by its function
    (``[<hook save_output>]``), not by its key, the id of its handle, which
    counts every hook the process ever registered and so differs from one
    run of the same script to the next."""
    function = getattr(hook, "__func__", hook)
    name = getattr(function, "__qualname__", None) or type(hook).__name__
    return f"[<hook {name}>]" if callable(hook) else label


def _linked_list_start(labels):
    """``labels`` cut where a run of the same one or two labels repeated three
    times or more starts: the holder of a linked list (a callback wrapping
    the one before: ``.keywords['previous']`` again and again) is where the
    list starts."""
    labels = [label for label in labels if label]
    for start in range(len(labels)):
        for size in (1, 2):
            unit = labels[start:start + size]
            if len(unit) == size and labels[start + size:start + 3 * size] == unit * 2:
                return labels[:start]
    return labels


def _compressed(kinds):
    """The kinds of a chain with a pair repeated in a row said once:
    ``(partial -> dict) x7`` for a callback that wraps the one before."""
    out, index = [], 0
    while index < len(kinds):
        pair = kinds[index:index + 2]
        repeats = 1
        while len(pair) == 2 and kinds[index + 2 * repeats:index + 2 * repeats + 2] == pair:
            repeats += 1
        if repeats > 2:
            out.append(f"({pair[0]} -> {pair[1]}) x{repeats}")
            index += 2 * repeats
        else:
            out.append(kinds[index])
            index += 1
    return out


_MODULE_DICTS = ("_modules", "_buffers", "_parameters")


def _is_thread_local(item):
    """Whether ``item`` is a ``threading.local``: its attributes live in a dict per thread."""
    return type(item).__module__ == "_thread" and type(item).__name__ == "_local" or \
        isinstance(item, threading.local)


def holder_kind(chain):
    """What kind of holder ``chain`` goes through, for the fix: "cpp" (kept
    from C++: no Python object refers to the top), "warning" (recorded
    warnings), "exception", "cache" (an lru_cache's results), "hook" (a hook
    dict that gains a hook per step), "finalize" (the arguments of a
    ``weakref.finalize``), "atexit" (the arguments of an ``atexit.register``,
    kept from C++), "signal" (a signal's handler, kept from C++), "log" (log
    records), "node" (autograd nodes: a custom Function's ctx), "key" (a dict's keys), "grad" (a
    ``.grad`` with a graph), "contextvar", "default", "closure", "buffer",
    "container", "attribute" or "name"."""
    objects = chain.objects
    if chain.from_cpp:
        if signal_of_handler(objects[0]) is not None:
            return "signal"
        return "atexit" if isinstance(objects[0], tuple) and atexit_registrations_grew() \
            else "cpp"
    if _warning_index(objects) is not None:  # (a Warning is an exception without a traceback)
        return "warning"
    for holder, child in zip(objects, objects[1:]):
        if isinstance(holder, (types.TracebackType, BaseException)):
            return "exception"
    if _cache_index(objects) is not None:
        return "cache"
    if _finalizer_index(objects) is not None:
        return "finalize"
    if _hook_index(objects, chain.name) is not None:
        return "hook"
    if _record_index(objects) is not None:
        return "log"
    if _is_node(objects[-1]):
        return "node"
    if len(objects) > 1 and isinstance(objects[-2], dict) and \
            _label(objects[-2], objects[-1]) == ".<a key>":
        return "key"
    if any(_label(holder, child) == ".grad" for holder, child in zip(objects, objects[1:])):
        return "grad"
    if type(objects[0]).__name__ == "ContextVar":
        return "contextvar"
    for holder, child in zip(objects, objects[1:]):
        if isinstance(holder, types.FunctionType):
            return "default" if child is holder.__defaults__ or \
                child is holder.__kwdefaults__ else "closure"
    if chain.parameter and len(objects) == 1:
        return "buffer"  # (a buffer or parameter itself has the graph)
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


def holder_path(chain, kind):
    """How the report names the holder of ``chain`` of ``kind``: the
    container, not its item (``losses``, not ``losses[3]``); the hook dict
    (``model[0].weight._backward_hooks``), the cache (``the lru_cache of
    predict()``), the list of log records (``handler.buffer``)."""
    objects = chain.objects
    if kind == "cpp":
        return chain.name  # (what it holds is in the links)
    if kind == "atexit":
        return "the atexit registrations"
    if kind == "signal":
        return f"the handler of {signal_of_handler(objects[0])}"
    cut = {"cache": _cache_index, "hook": _hook_index, "log": _record_index,
           "warning": _warning_index, "finalize": _finalizer_index}.get(kind)
    if cut is not None:
        index = cut(objects, chain.name) if kind == "hook" else cut(objects)
        end = index + 1 if kind not in ("log", "warning", "finalize") else index
        path = describe(dataclasses.replace(chain, objects=objects[:end]))[0]
        return f"the lru_cache of {path}()" if kind == "cache" else path
    return container_of(describe(chain)[0])


def holder_root(chain, kind):
    """What the root of ``chain`` is, as a report says it: what keeps it from
    C++ named, where it is known (atexit, the signal module)."""
    if kind == "atexit":
        return (f"kept from C++ by atexit until the interpreter exits; "
                f"{atexit._ncallbacks() - (_atexit_at_start or 0)} functions registered since "
                "the script started")
    if kind == "signal":
        return "kept from C++ by the signal module until another handler replaces it"
    return chain.root


def holder_size(chain, kind):
    """How many items the holder has: the cache's results, the hook dict's
    hooks, the finalizers alive, else None."""
    objects = chain.objects
    if kind == "finalize":  # the finalizers of the same function (the process has others)
        index = _finalizer_index(objects)
        registry, function = objects[index - 1], objects[index].func
        return sum(info.func is function for info in list(registry.values()))
    if kind == "cache":
        return objects[_cache_index(objects)].cache_info().currsize
    if kind == "hook":
        return len(objects[_hook_index(objects, chain.name)])
    return None


def _cache_index(objects):
    """The index of the lru_cache wrapper whose cache the chain goes through, else None."""
    for index, (holder, child) in enumerate(zip(objects, objects[1:])):
        if is_lru_cache(holder) and _label(holder, child) == ".<cache>":
            return index
    return None


def _finalizer_index(objects):
    """The index of the ``weakref.finalize`` record (its ``_Info``: the
    function and arguments it will call) that the chain goes through, else None."""
    return next((index for index, item in enumerate(objects)
                 if type(item) is getattr(weakref.finalize, "_Info", None)), None)


#: ``atexit``'s count of registered functions when the watch started
#: (:func:`count_atexit_registrations`): atexit keeps them in C, out of the
#: collector's sight, so its count is all that tells them apart.
_atexit_at_start = None


def count_atexit_registrations():
    """Note how many functions atexit holds now, at the start of a watch."""
    global _atexit_at_start
    _atexit_at_start = atexit._ncallbacks()


def signal_of_handler(item):
    """The name of the signal whose handler ``item`` is (``"SIGUSR1"``), else
    None: the interpreter keeps its handlers in C, where no referrer shows."""
    if not callable(item):
        return None
    for number in sorted(signal.valid_signals()):
        try:
            if signal.getsignal(number) is item:
                return signal.Signals(number).name
        except (ValueError, OSError):
            continue
    return None


def atexit_registrations_grew():
    """Whether the watched script registered functions with atexit (more
    than one: one registered once is no growth)."""
    return _atexit_at_start is not None and atexit._ncallbacks() - _atexit_at_start > 1


def _hook_index(objects, name=""):
    """The index of the hook dict (a module's ``_forward_hooks``, a tensor's
    ``_backward_hooks``) that holds the chain's leaked object through a hook
    and nothing that grows besides: a hook per step, never removed. None
    when there is none (a hook registered once whose list grows is that
    list's leak). The hook dict may end the chain: hooks that keep no tensor
    pile up in it (the census counts them)."""
    found = 1 if len(objects) > 2 and isinstance(objects[1], dict) and \
        str(name).endswith("hooks") else None  # the root names the hook dict
    for index in range(1, len(objects)):
        holder, child = objects[index - 1], objects[index]
        if isinstance(child, dict) and _names_hooks(_label(holder, child)):
            found = index
    if found is None:
        return None
    for holder, child in zip(objects[found + 1:], objects[found + 2:]):
        if isinstance(holder, (list, dict, set)) or type(holder).__name__ == "deque":
            return None  # what grows is that container, not the hook dict
        if isinstance(holder, tuple) and not _is_defaults_or_closure(objects, holder):
            return None
    return found


def _is_defaults_or_closure(objects, item):
    return any(isinstance(function, types.FunctionType) and (
        function.__defaults__ is item or function.__closure__ is item) for function in objects)


def _record_index(objects):
    """The index of the first ``logging.LogRecord`` in the chain, else None."""
    import logging

    return next((index for index, item in enumerate(objects)
                 if isinstance(item, logging.LogRecord) and index > 0), None)


def _warning_index(objects):
    """The index of the first recorded warning (``warnings.catch_warnings(record=True)``)."""
    import warnings

    return next((index for index, item in enumerate(objects)
                 if isinstance(item, warnings.WarningMessage) and index > 0), None)


def _is_node(item):
    """Whether ``item`` is an autograd node made in Python (a custom Function's ctx)."""
    import torch

    return isinstance(item, torch._C._FunctionBase)


def container_of(path, last=True):
    """The holder, not its item: ``snapshots[5][2]`` -> ``snapshots``,
    ``pending[6].args`` (a partial's) -> ``pending``, ``seen.<a key>`` ->
    ``seen``, ``by_step['step3']`` -> ``by_step`` (the items' indices and the
    unnamed objects between them come off the end; a key that names a
    container on the way stays: ``group['history'][3]`` -> ``group['history']``)."""
    index = r"\[[^\[\]]*\]" if last else r"\[(?!')[^\[\]]*\]"
    shorter = re.sub(rf"({index}|\.<[A-Za-z_][A-Za-z0-9_ ]*>|"
                     r"(?<=\])\.(?:args|keywords|func))$", "", path)
    return path if not shorter else shorter if shorter == path else \
        container_of(shorter, last=False)


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
