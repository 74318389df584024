"""What a PyTorch process holds at one training step, counted cheaply enough to count at every step.

A leak of a PyTorch loop is growth that persists: tensors, and above all
autograd nodes, made at one step and still alive steps later. PyTorch keeps a
graph's intermediate results in its C++ nodes, where counting Python objects
sees nothing (``total_loss += loss`` keeps one tensor and a graph that grows
by a few nodes every step), so a step is counted twice over:

* **the tensors**: live ``torch.Tensor`` objects with and without a
  ``grad_fn``, and their bytes, counted once per storage;
* **the autograd nodes** reachable from the tensors that have a ``grad_fn``,
  and among them the **old** ones: nodes made before the previous step (every
  node has a sequence number, given in order of creation, so "made before
  the previous step" is a comparison with the number read at that step). A
  loop that lets its graphs go has no old nodes however long its graph is
  (a sequence that grows on purpose); a loop that keeps them gains old nodes
  at every step.

Only objects made after the watch started are looked at: at the first step
:meth:`Census.start` moves every object alive then into the collector's
permanent generation (``gc.freeze()``), so that ``gc.get_objects()`` returns
the objects made since, and a step costs time in proportion to what the loop
made and kept, not to the size of the program (torch alone is 150,000
objects). The tensors alive at the start that could still gain a graph (a
buffer updated in place, a parameter that does not require grad updated
outside ``no_grad``) are followed by weak reference. :meth:`Census.stop`
gives the frozen objects back to the collector.
"""
import gc
import os
import weakref
from bisect import bisect_right
from dataclasses import dataclass

import torch

from dezero_mini.memory.tracking import subclasses

#: The sequence number of a leaf's AccumulateGrad node: not "made" at any step.
LEAF_SEQUENCE = 2**64 - 1


@dataclass(frozen=True)
class StepCount:
    """What the process holds at one step: tensors with a graph (``graph_tensors``,
    ``graph_bytes``) and without one (``plain_tensors``, ``plain_bytes``),
    the autograd ``nodes`` reachable from them and the ``old_nodes`` among
    them (made before the previous step; ``old_graph_tensors``: the tensors
    whose own node is), resident memory (``rss``, None
    without psutil) and device memory (``device``, None without a GPU)."""

    step: int
    graph_tensors: int
    old_graph_tensors: int
    graph_bytes: int
    plain_tensors: int
    plain_bytes: int
    nodes: int
    old_nodes: int
    rss: object
    device: object
    hooks: int = 0  # hooks on the modules and tensors of before the start, and torch's global ones


def storage_key(tensor):
    """(the address of ``tensor``'s storage, its bytes); the tensor's own id
    and size for a tensor without one (sparse, meta)."""
    try:
        storage = tensor.untyped_storage()
        return storage.data_ptr(), storage.nbytes()
    except (RuntimeError, NotImplementedError, TypeError):
        return id(tensor), tensor.numel() * tensor.element_size()


def walk_graph(grad_fns):
    """Every node reachable from ``grad_fns``, once: a list of nodes (held
    while the list is, so that their ids stay theirs)."""
    nodes, seen = [], set()
    stack = [node for node in grad_fns if node is not None]
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        nodes.append(node)
        for next_node, _ in node.next_functions:
            if next_node is not None and id(next_node) not in seen:
                stack.append(next_node)
    return nodes


def sequence_now():
    """The autograd sequence number of a node made now (every later node's is larger)."""
    with torch.enable_grad():
        return (_PROBE * 1).grad_fn._sequence_nr()


_PROBE = torch.ones((), requires_grad=True)
_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


def _open_statm():
    try:
        return os.open("/proc/self/statm", os.O_RDONLY)
    except (OSError, AttributeError):
        return None


class Census:
    """Counts what the process holds at each step (:meth:`take`), from
    :meth:`start` to :meth:`stop`.

    A count costs time in proportion to what changed since the last one,
    not to what the loop has kept (a leak keeps more at every step, and a
    count that walked it all would cost more at every step):

    * the tensors are picked out of ``gc.get_objects()`` by a set lookup of
      their type, without a call per object;
    * the autograd nodes reachable from a tensor's ``grad_fn`` are walked
      once: the sequence numbers they reach are kept per root node
      (``_closures``), and a later walk that meets a root of the last count
      takes its set instead of walking below it (a node's inputs never
      change; sequence numbers are never reused). Roots already reached from
      a newer root are not walked at all (an RNN's hidden states, each
      reaching the one before);
    * the storage of each new tensor is read once, then kept by id until the
      tensor dies (a weak reference's callback forgets it);
    * the storages of the tensors alive at the start (parameters, data) are
      left out of the bytes while those tensors live: a weak reference's
      callback gives the address back when one dies, so that a new tensor
      the allocator puts at the same address is counted.
    """

    def __init__(self, process=None):
        self.process = process  # psutil.Process, or None
        self._statm = _open_statm()  # Linux: resident memory in one read, no psutil per step
        self.started = False
        self.old_tensors = []  # weak references to tensors of before the start that may gain a graph
        self._old_storages = {}  # address of a storage of before the start -> its live tensors
        self._old_references = []  # (their weak references, whose callbacks keep that count)
        self.marks = []  # the sequence number read at each step
        self.mark_steps = []  # the step of each mark (None for a start)
        self._froze = False
        self.cuda = torch.cuda.is_available()  # asked once: not a question per step
        self._closures = {}  # sequence number of a root node -> (its sequence numbers, its leaves)
        self._storages = {}  # id(tensor) -> (weak reference, storage address, bytes)
        self._node_kinds = frozenset()  # the ctx classes of the custom autograd Functions
        self._functions_seen = 0  # how many Functions were defined when they were read
        self._node_types_age = NODE_TYPES_EVERY  # calls since the Functions were listed
        self._hook_owners = []  # (weak reference to a module or tensor, its hook dicts' names)
        self.hooks_at_start = {}  # (id of the owner, hook dict's name) -> its hooks at the start

    @property
    def old_storages(self):
        """The addresses of the storages of before the start still in use."""
        return {pointer for pointer, alive in self._old_storages.items() if alive > 0}

    def _keep_old_storage(self, tensor):
        pointer = storage_key(tensor)[0]
        storages = self._old_storages
        storages[pointer] = storages.get(pointer, 0) + 1

        def forget(_reference, pointer=pointer):
            storages[pointer] -= 1

        try:
            self._old_references.append(weakref.ref(tensor, forget))
        except TypeError:  # a tensor type without weak references: kept for the whole run
            pass

    def start(self, step=None):
        """Take the objects alive now out of the counts (call again to do the
        same with what was made since: the training loop starts after data
        loading). A full collection first, so that garbage is not frozen."""
        gc.collect()
        objects = gc.get_objects()
        for item in self._tensors(objects):
            self._keep_old_storage(item)
            if not item.requires_grad or item.grad_fn is not None:
                self.old_tensors.append(weakref.ref(item))
            if item.requires_grad and item.grad_fn is None:  # a parameter: hooks go on it
                self._hook_owners.append((weakref.ref(item), TENSOR_HOOKS))
        for item in objects:  # (by the real type: isinstance would ask lazy proxies)
            if issubclass(type(item), torch.nn.Module):
                self._hook_owners.append((weakref.ref(item), MODULE_HOOKS))
        del objects
        self.hooks_at_start = {(id(owner), name): len(hooks)
                               for owner, name, hooks in self.hook_dicts()}
        gc.freeze()
        self._froze = self.started = True
        self.marks.append(sequence_now())  # the nodes made before now are old at the next step
        self.mark_steps.append(step)

    def stop(self):
        """Give the frozen objects back to the collector."""
        if self._froze:
            gc.unfreeze()
            self._froze = False
        if self._statm is not None:
            os.close(self._statm)
            self._statm = None

    def resident_bytes(self):
        """The process's resident memory: /proc/self/statm where there is one
        (a few microseconds), else psutil, else None."""
        if self._statm is not None:
            try:
                return int(os.pread(self._statm, 128, 0).split()[1]) * _PAGE
            except (OSError, ValueError, IndexError):
                pass
        return self.process.memory_info().rss if self.process else None

    def _tensors(self, objects):
        """The tensors among ``objects``: a set lookup of each one's type among
        torch.Tensor and its subclasses (read anew each time: a script may
        define one), no call per object."""
        kinds = tensor_types()
        return [item for item in objects if type(item) in kinds]

    def live_tensors(self):
        """(tensors with a grad_fn, tensors without one) made since the start,
        and the old tensors that have gained a grad_fn since."""
        graph, plain, _ = self.live_objects()
        return graph, plain

    def live_objects(self):
        """(tensors with a grad_fn, tensors without one, the autograd nodes
        made in Python: the ctx of the script's custom ``autograd.Function``
        calls) made since the start, and the old tensors that have gained a
        grad_fn since. A ctx kept by the script (a list of them) keeps its
        call's graph where no tensor does. One pass over the objects, a set
        lookup of each one's type; without custom Functions, the same pass
        as for the tensors alone."""
        # Garbage of the young generations (cycles the collector has not reached
        # yet) would make the counts depend on when it last ran: it goes first.
        if gc.isenabled():
            gc.collect(1)
        tensor_kinds = tensor_types()
        node_kinds = self._node_types()
        graph, plain, nodes = [], [], []
        if node_kinds:
            found = [item for item in gc.get_objects()
                     if type(item) in tensor_kinds or type(item) in node_kinds]
            nodes = [item for item in found if type(item) in node_kinds]
            found = [item for item in found if type(item) in tensor_kinds]
        else:
            found = [item for item in gc.get_objects() if type(item) in tensor_kinds]
        for item in found:
            (graph if item.grad_fn is not None else plain).append(item)
        for reference in self.old_tensors:
            tensor = reference()
            if tensor is not None and tensor.grad_fn is not None:
                graph.append(tensor)
        return graph, plain, nodes

    def _node_types(self):
        """The classes of the ctx of the script's custom autograd Functions
        (one per Function; torch's own are left out: their ctx lives only
        while its graph does). Read again every ``NODE_TYPES_EVERY`` calls
        (listing the Functions costs more than the rest of a small count): a
        Function is defined once, most often before its loop."""
        self._node_types_age += 1
        if self._node_types_age >= NODE_TYPES_EVERY:
            self._node_types_age = 0
            made = _BACKWARD_FUNCTION.__subclasses__()
            if len(made) != self._functions_seen:
                self._functions_seen = len(made)
                self._node_kinds = frozenset(
                    kind for kind in made
                    if not getattr(getattr(kind, "_forward_cls", None), "__module__",
                                   "torch").startswith("torch"))
        return self._node_kinds

    def reachable(self, roots):
        """(the sorted sequence numbers of the nodes reachable from the nodes
        ``roots``, how many leaf nodes they reach), reusing the sets of the
        last count's roots."""
        numbered = sorted(((root._sequence_nr(), root) for root in roots),
                          key=lambda pair: pair[0], reverse=True)  # the newest first
        previous, closures = self._closures, {}
        numbers, leaves = set(), set()
        for number, root in numbered:
            if number in numbers or number in closures:
                continue  # reached from a newer root: its nodes are counted already
            closure = previous.get(number)
            if closure is None:
                closure = _closure(root, number, previous)
            closures[number] = closure
            numbers |= closure[0]
            leaves |= closure[1]
        self._closures = closures
        return sorted(numbers), len(leaves)

    def hook_dicts(self):
        """``(owner, attribute, dict)`` of every hook dict that the script can
        fill without keeping a tensor: those of the modules and parameters
        alive at the start and torch's global module hooks. A hook
        registered at every step and never removed is a leak of its own
        (each one also runs at every forward or backward), even when it
        keeps nothing of the step."""
        for reference, names in self._hook_owners:
            owner = reference()
            if owner is None:
                continue
            for name in names:
                hooks = getattr(owner, name, None)
                if hooks:
                    yield owner, name, hooks
        for name in GLOBAL_MODULE_HOOKS:
            hooks = getattr(torch.nn.modules.module, name, None)
            if hooks:
                yield torch.nn.modules.module, name, hooks

    def grown_hook_dicts(self):
        """The hook dicts of ``hook_dicts``, those that gained the most hooks
        since the start first."""
        at_start = self.hooks_at_start
        return sorted(self.hook_dicts(),
                      key=lambda found: at_start.get((id(found[0]), found[1]), 0) - len(found[2]))

    def hook_count(self):
        """How many hooks ``hook_dicts`` hold now (a sum of lengths: a few
        microseconds for a model of tens of layers)."""
        return sum(len(hooks) for _, _, hooks in self.hook_dicts())

    def take(self, step):
        """The ``StepCount`` of now, ``step`` its number."""
        graph, plain, nodes = self.live_objects()
        before = self.marks[-1] if self.marks else -1
        first = self.marks[0] if self.marks else -1  # graphs of before the watch: the program's
        roots = [tensor.grad_fn for tensor in graph]
        numbers, leaves = self.reachable(roots + nodes)
        old = bisect_right(numbers, before) - bisect_right(numbers, first)
        # The newest node alive now: every node made after this step has a larger number.
        self.marks.append(max(numbers[-1] if numbers else before, before))
        self.mark_steps.append(step)
        old_tensors = sum(first < root._sequence_nr() <= before for root in roots)
        return StepCount(
            step=step, graph_tensors=len(graph), old_graph_tensors=old_tensors,
            graph_bytes=self._bytes(graph),
            plain_tensors=len(plain), plain_bytes=self._bytes(plain),
            nodes=len(numbers) + leaves, old_nodes=old, rss=self.resident_bytes(),
            device=torch.cuda.memory_allocated() if self.cuda else None,
            hooks=self.hook_count())

    def storage_of(self, tensor):
        """``storage_key(tensor)``, read once per tensor while it lives."""
        key = id(tensor)
        entry = self._storages.get(key)
        if entry is not None and entry[0]() is tensor:
            return entry[1], entry[2]
        pointer, nbytes = storage_key(tensor)
        storages = self._storages

        def forget(_reference, key=key):
            if storages.get(key, (None,))[0] is _reference:
                del storages[key]

        try:
            storages[key] = (weakref.ref(tensor, forget), pointer, nbytes)
        except TypeError:
            pass
        return pointer, nbytes

    def _bytes(self, tensors):
        sizes, old = {}, self._old_storages
        for tensor in tensors:
            pointer, nbytes = self.storage_of(tensor)
            if old.get(pointer, 0) <= 0:
                sizes[pointer] = nbytes
        return sum(sizes.values())


#: The hook dicts of a tensor and of a module, and torch's global ones for modules.
TENSOR_HOOKS = ("_backward_hooks", "_post_accumulate_grad_hooks")
MODULE_HOOKS = ("_forward_hooks", "_forward_pre_hooks", "_backward_hooks", "_backward_pre_hooks")
GLOBAL_MODULE_HOOKS = ("_global_forward_hooks", "_global_forward_pre_hooks",
                       "_global_backward_hooks", "_global_backward_pre_hooks")


def tensor_types():
    """torch.Tensor and its subclasses, read anew (a script may define one)."""
    return {torch.Tensor, *subclasses(torch.Tensor)}


_BACKWARD_FUNCTION = torch.autograd.function.BackwardCFunction
#: The script's custom autograd Functions are listed again every this many counts.
NODE_TYPES_EVERY = 8


def _closure(root, number, known):
    """(the sequence numbers of the nodes reachable from ``root``, whose own
    is ``number``, the ids of the variables of the leaves it reaches), taking
    the sets of ``known`` roots instead of walking below them."""
    numbers, leaves = {number}, set()
    stack = [next_node for next_node, _ in root.next_functions if next_node is not None]
    while stack:
        node = stack.pop()
        sequence = node._sequence_nr()
        if sequence == LEAF_SEQUENCE:
            leaves.add(id(getattr(node, "variable", node)))
            continue
        if sequence in numbers:
            continue
        numbers.add(sequence)
        reused = known.get(sequence)
        if reused is not None:
            numbers |= reused[0]
            leaves |= reused[1]
            continue
        stack.extend(next_node for next_node, _ in node.next_functions if next_node is not None)
    return numbers, leaves


_SAVED_NAMES = {}  # type of node -> the names of its saved attributes (dir() is slow)


def saved_tensors(node, freed=None):
    """The tensors ``node`` keeps for its backward (none once backward freed
    them; then ``freed``, a list, gets the node)."""
    names = _SAVED_NAMES.get(type(node))
    if names is None:
        names = _SAVED_NAMES[type(node)] = tuple(
            name for name in dir(node) if name.startswith("_saved_"))
    for name in names:
        try:
            value = getattr(node, name)
        except RuntimeError:  # freed by a backward without retain_graph
            if freed is not None and (not freed or freed[-1] is not node):
                freed.append(node)
            continue
        for item in value if isinstance(value, (tuple, list)) else (value,):
            if isinstance(item, torch.Tensor):
                yield item


def device_of(tensor):
    """The device of ``tensor`` as text (``cpu``, ``cuda:0``)."""
    try:
        return str(tensor.device)
    except (RuntimeError, AttributeError):
        return "unknown device"


def saved_storages(nodes, leave_out=(), freed=None):
    """{storage address: (bytes, device)} of the tensors that ``nodes`` keep
    for backward, leaving out the storages in ``leave_out`` (the parameters');
    the nodes whose saved tensors backward freed go to ``freed`` (a list)."""
    storages = {}
    for node in nodes:
        for tensor in saved_tensors(node, freed):
            pointer, nbytes = storage_key(tensor)
            if pointer not in leave_out:
                storages[pointer] = (nbytes, device_of(tensor))
    return storages


def bytes_by_device(storages, divide_by=1):
    """{device: bytes} of ``storages`` ({address: (bytes, device)}), each
    divided by ``divide_by`` (steps)."""
    totals = {}
    for nbytes, device in storages.values():
        totals[device] = totals.get(device, 0) + nbytes / divide_by
    return totals


def saved_bytes(nodes, leave_out=()):
    """The bytes of the tensors that ``nodes`` keep for backward, once per
    storage, leaving out the storages in ``leave_out`` (the parameters')."""
    return sum(nbytes for nbytes, _ in saved_storages(nodes, leave_out).values())
