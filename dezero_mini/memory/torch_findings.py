"""What holds the growth of a PyTorch loop, and how many bytes it keeps per step.

Called once, at the end of a watched run, while the script's frames are
alive (:meth:`dezero_mini.memory.torch_leaks._Watch.conclude`): the leaked
tensors are the live tensors whose graph reaches autograd nodes made before
the steps judged ended (for a cache of detached tensors, the tensors
without a graph made during the run). A tensor whose graph contains another
leaked tensor's node only follows it (``val_loss`` computed from a hidden
state that is never detached) and is left out of the search, which goes
from the others back to their roots (:func:`dezero_mini.memory.torch_holders.holder_chains`).
"""
import gc
import sys
import types
from pathlib import Path

import torch

from dezero_mini.memory.torch_census import (LEAF_SEQUENCE, bytes_by_device, device_of,
                                             saved_storages, storage_key, walk_graph)
from dezero_mini.memory.torch_holders import (MACHINERY, describe, holder_chains, holder_kind,
                                              holder_path, holder_root, holder_size, last_name,
                                              referred_from_cpp, storing_lines)

#: At most this many leaked tensors are followed back (a list of 10,000 losses
#: is found from any of them).
MAX_TARGETS = 64


def find_holders(finding, census, script_module, consecutive):
    """Fill ``finding``'s holders, bytes per step and tensor counts."""
    from dezero_mini.memory.torch_leaks import WARM_UP

    marks = census.marks
    graph, plain, python_nodes = census.live_objects()
    hook_dicts = census.grown_hook_dicts()
    census.stop()  # the referrers of before the start are frozen: searched only once given back
    if finding.growth.hooks_pile_up:  # no graph grows: the hooks do; name the fullest dict
        hooks = hook_dicts[0][2]
        finding.tensors = 0
        finding.holders = _holders([hooks], script_module)
        return
    if not finding.growth.leaking:  # a cache of detached tensors: name its holder
        finding.tensors = len(plain)
        finding.holders = _holders(_largest_collection(plain, (graph, plain)), script_module)
        return
    # The nodes made during the steps judged, and those that outlived them.
    window = max(2, min(consecutive, len(marks) - 1 - WARM_UP))
    start, end = marks[-1 - window], marks[-2]
    nodes = walk_graph([tensor.grad_fn for tensor in graph] + python_nodes)
    old = [node for node in nodes if node._sequence_nr() <= end]
    made_in_window = [node for node in old if start < node._sequence_nr() <= end]
    first = marks[0]  # the program's graphs of before the watch are not the loop's
    finding.nodes = len([node for node in old if first < node._sequence_nr() != LEAF_SEQUENCE])
    # What holds graphs of before the steps judged: not the last step's loss.
    reaching = [tensor for tensor in graph if _reaches_before(tensor, start, first)]
    finding.tensors = len(reaching)
    # A ctx of a custom Function that the script keeps is a head of its own
    # (not when it is only the grad_fn of a tensor: that tensor is the head).
    grad_fns = {id(tensor.grad_fn) for tensor in graph}
    reaching += [node for node in python_nodes if id(node) not in grad_fns and
                 _reaches_before(node, start, first)]
    heads = _leaders(_held_by_python(reaching, (graph, plain, reaching, python_nodes, nodes)))
    heads.sort(key=lambda head: _node_of(head)._sequence_nr())  # the oldest first
    finding.holders = _holders(heads[:MAX_TARGETS], script_module)
    if not finding.holders:  # what kind of object holds them, though no name does
        finding.unnamed = (
            "no Python object refers to them: PyTorch keeps them from C++ (saved by a graph "
            "that something keeps, or by a hook of an autograd node)" if not heads else
            f"{len(heads)} of them are referred to by Python objects ("
            + ", ".join(sorted({type(item).__name__ for head in heads[:MAX_TARGETS]
                                for item in gc.get_referrers(head)
                                if not isinstance(item, (list, types.FrameType))}) or ["lists"])
            + ") that no global, running frame, class or module reaches")
    # After the search for holders (the lists made here refer to the tensors).
    # Per step: the tensors with a graph made in the window that the holder
    # keeps, then what their graphs saved for backward besides them, each
    # storage once, by device. The window's steps are read from the marks:
    # counts may skip steps.
    steps = _steps_between(census, window)
    old_storages = census.old_storages
    held = _held_storages(graph, (graph, plain, reaching, heads), start, end, old_storages)
    freed = []
    saved = saved_storages(made_in_window, old_storages, freed)
    finding.held_per_step = bytes_by_device(held, steps)
    finding.saved_per_step = bytes_by_device(
        {pointer: value for pointer, value in saved.items() if pointer not in held}, steps)
    finding.freed_nodes, finding.window_nodes = len(freed), len(made_in_window)


def _held_storages(graph, ours, start, end, old_storages):
    """{storage address: (bytes, device)} of the tensors with a graph made
    between the sequence numbers ``start`` and ``end`` that a Python object
    refers to (the holder's), not those that only their graph keeps alive
    (an MLP's hidden activation, saved by the next layer's node, is counted
    with what the graph saved). ``ours``: the finder's own lists, not
    holders. Called after the search for holders: its lists would be
    referrers of the tensors there."""
    made = [tensor for tensor in graph if start < tensor.grad_fn._sequence_nr() <= end]
    held = {}
    for tensor in _held_by_python(made, (*ours, made)):
        pointer, nbytes = storage_key(tensor)
        if pointer not in old_storages:
            held[pointer] = (nbytes, device_of(tensor))
    return held


def _steps_between(census, window):
    """The training steps between the marks that open and close the window
    (at least 1)."""
    steps = census.mark_steps
    first, last = steps[-1 - window], steps[-2]
    if first is None or last is None:
        return window - 1 or 1
    return max(last - first, 1)


def _largest_collection(tensors, ours):
    """The tensors of the container (list, dict, deque, set, object) that
    holds most of ``tensors``: a cache that grows holds more than the step's
    own batch does."""
    members = {id(tensor) for tensor in tensors}
    leave_out = {id(item) for item in ours}
    best_items = []
    for referrer in gc.get_referrers(*tensors):
        if id(referrer) in leave_out or isinstance(referrer, types.FrameType):
            continue
        items = [item for item in gc.get_referents(referrer) if id(item) in members]
        if len(items) > len(best_items):
            best_items = items
    return best_items[:MAX_TARGETS] if len(best_items) > 1 else []


def _reaches_before(head, mark, first=-1):
    """Whether the graph of ``head`` (a tensor, or an autograd node made in
    Python) has a node made before the sequence number ``mark`` and after
    ``first`` (the start of the watch: a graph of before it is the
    program's, not the loop's)."""
    return any(first < node._sequence_nr() <= mark and node._sequence_nr() != LEAF_SEQUENCE
               for node in walk_graph([_node_of(head)]))


def _node_of(head):
    """The autograd node of a head: a tensor's grad_fn, a ctx itself."""
    return head.grad_fn if isinstance(head, torch.Tensor) else head


def _held_by_python(tensors, ours):
    """The ``tensors`` that a Python object refers to (not only ``ours``, the
    finder's own lists, or a frame of the finder). PyTorch keeps the Python
    object of a tensor that its graph saved alive as long as the graph (an
    MLP's hidden activations): those are held in C++ and followed through
    the tensors that hold their graph."""
    if not tensors:
        return []
    leave_out = {id(item) for item in ours} | {id(tensors)}
    referred = set()
    for referrer in gc.get_referrers(*tensors):
        if id(referrer) in leave_out or (isinstance(referrer, types.FrameType)
                                         and _machinery(referrer)):
            continue
        referred.update(id(item) for item in gc.get_referents(referrer))
    referred.update(referred_from_cpp())  # a parameter's .grad
    for top in list(sys._current_frames().values()):  # running frames: their locals
        frame = top
        while frame is not None:
            if not _machinery(frame):
                referred.update(id(value) for value in frame.f_locals.values())
            frame = frame.f_back
    return [tensor for tensor in tensors if id(tensor) in referred]


def _machinery(frame):
    return (frame.f_globals.get("__name__") or "").partition(".")[0] in MACHINERY


def _leaders(heads):
    """The heads whose graph holds no other head's node: the others only
    follow them."""
    own = {id(_node_of(tensor)): tensor for tensor in heads}
    followers = set()
    for tensor in heads:
        for node in walk_graph([_node_of(tensor)])[1:]:
            other = own.get(id(node))
            if other is not None and other is not tensor:
                followers.add(id(tensor))
                break
    return [tensor for tensor in heads if id(tensor) not in followers]


def _holders(targets, script_module):
    """A ``Holder`` for each root that holds some of ``targets``."""
    from dezero_mini.memory.torch_leaks import Holder

    if not targets:
        return []
    scalar = all(getattr(tensor, "dim", lambda: 1)() == 0 for tensor in targets)
    files = _script_files(script_module)
    holders, named = [], set()
    for chain in holder_chains(targets, script_module):
        links = describe(chain)[1]
        kind = holder_kind(chain)
        path = holder_path(chain, kind)
        if (kind, path) in named:  # (atexit's argument tuples: one holder, one line)
            continue
        named.add((kind, path))
        name = last_name(path)
        lines = storing_lines(name, files) if name else []
        holders.append(Holder(path=path, root=holder_root(chain, kind), links=links, kind=kind,
                              lines=lines, scalar=scalar, held_by=chain.held_by,
                              size=holder_size(chain, kind)))
    return holders


def _script_files(script_module):
    """The script and the modules of its folder that it imported."""
    script = Path(getattr(script_module, "__file__", "") or ".").resolve()
    files = [script]
    for module in list(sys.modules.values()):
        filename = getattr(module, "__file__", None)
        name = getattr(module, "__name__", "") or ""
        if not filename or name.partition(".")[0] in MACHINERY:
            continue
        try:
            resolved = Path(filename).resolve()
        except (OSError, ValueError):
            continue
        if resolved.parent == script.parent and resolved != script and resolved.suffix == ".py":
            files.append(resolved)
    return files
