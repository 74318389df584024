"""Stage 09's memory planner for dezero_mini: plan a model's forward before allocating it.

The same planner as ``steps/step09_memory_planning.py`` (MXNet's design: a
static graph, lifetimes by counting readers, in-place, best-fit sharing, no
sharing between nodes that could run in parallel), for dezero_mini's own
Functions::

    import dezero_mini as dz
    from dezero_mini.planning import plan_inference

    model = dz.models.MLP((4096, 4096, 10), activation=dz.functions.relu)
    run = plan_inference(model, x)   # traces model(x) once, plans, allocates
    y = run(x)                       # the same bits as model(x) under no_grad()
    run.plan.total                   # the bytes allocated for every activation

What it relies on in dezero_mini, so that a rewrite of the core keeps it
working: the public Function classes (``Linear``, ``MatMul``, ``Add``,
``Sub``, ``Mul``, ``Neg``, ``Exp``, ``Tanh``, ``Sigmoid``, ``ReLU``: looked up
by name in ``dezero_mini.functions`` and ``dezero_mini.core``, and only those
found are planned), the fact that calling a Function
goes through ``Function.__call__(self, *inputs)`` and returns a Variable, a
Variable's ``data``, and ``no_grad()``. While ``trace`` runs,
``Function.__call__`` is wrapped to record each call, and put back after.
Each kernel repeats its Function's forward formula one numpy operation at a
time, in the same order, so that the planned result is the same bits; a test
(``tests/test_planning.py``) holds each one to it.

Only forward graphs are planned here (inference); training needs a lowering
of each backward formula as well, which the step file has for its own
Functions.
"""
import itertools

import numpy as np

from dezero_mini import core
from dezero_mini import functions as F
from dezero_mini.core import Function, Variable, no_grad


class Buffer:
    """One array of the static graph: shape and dtype, no data yet."""

    def __init__(self, shape, dtype):
        self.shape, self.dtype = tuple(shape), np.dtype(dtype)
        self.nbytes = int(np.prod(self.shape, dtype=np.int64)) * self.dtype.itemsize


class Node:
    """``kernel(out, *inputs)`` writes buffer ``output`` from buffers
    ``inputs``; ``inplace``: the inputs it may write over."""

    def __init__(self, name, kernel, inputs, output, inplace):
        self.name, self.kernel = name, kernel
        self.inputs, self.output, self.inplace = list(inputs), output, tuple(inplace)


class Graph:
    """Nodes in the order they run, over numbered buffers: ``feeds`` (given at
    each run), ``leaves`` (bound once to an array: the parameters),
    ``outputs`` (returned)."""

    def __init__(self):
        self.buffers, self.nodes, self.feeds, self.outputs, self.leaves = [], [], [], [], {}

    def buffer(self, shape, dtype):
        self.buffers.append(Buffer(shape, dtype))
        return len(self.buffers) - 1

    def op(self, name, kernel, inputs, shape, dtype, inplace=()):
        output = self.buffer(shape, dtype)
        self.nodes.append(Node(name, kernel, inputs, output, inplace))
        return output

    def readers(self):
        """For each buffer, the nodes that read it."""
        readers = [[] for _ in self.buffers]
        for n, node in enumerate(self.nodes):
            for b in node.inputs:
                readers[b].append(n)
        return readers


# --- kernels: each Function's forward, into a given array -------------------------------
def _binary(ufunc):
    return lambda out, a, b: ufunc(a, b, out=out)


def _linear(out, x, W, b=None):  # Linear.forward: y = x @ W, then y += b in place
    np.matmul(x, W, out=out)
    if b is not None:
        np.add(out, b, out=out)


def _sigmoid(out, x):  # Sigmoid.forward: 1 / (1 + exp(-x))
    np.negative(x, out=out)
    np.exp(out, out=out)
    np.add(1, out, out=out)
    np.divide(1, out, out=out)


def _relu(out, x):  # ReLU.forward: maximum(x, 0) in x's dtype
    np.maximum(x, 0, out=out)


#: Function class name -> (kernel, the inputs it may write over).
KERNELS = {
    "Linear": (_linear, ()),
    "MatMul": (_binary(np.matmul), ()),
    "Add": (_binary(np.add), (0, 1)),
    "Sub": (_binary(np.subtract), (0, 1)),
    "Mul": (_binary(np.multiply), (0, 1)),
    "Neg": (lambda out, x: np.negative(x, out=out), (0,)),
    "Exp": (lambda out, x: np.exp(x, out=out), (0,)),
    "Tanh": (lambda out, x: np.tanh(x, out=out), (0,)),
    "Sigmoid": (_sigmoid, (0,)),
    "ReLU": (_relu, (0,)),
}


def _kernel_of(function):
    """The kernel of a Function, if it is a built-in one that the planner knows
    (a class of that name in dezero_mini.functions or dezero_mini.core: a
    subclass, or a learner's own Function of the same name, is not)."""
    name = type(function).__name__
    builtins = [getattr(module, name, None) for module in (F, core)]
    if name in KERNELS and type(function) in builtins:
        return KERNELS[name]
    return None


# --- tracing --------------------------------------------------------------------------------
class _Tracer:
    def __init__(self, graph):
        self.graph, self.buffer_of, self.seen = graph, {}, []

    def buffer(self, x):
        """The buffer of an input: a traced Variable's, or a new leaf bound to the
        array (a parameter, a constant)."""
        if isinstance(x, Variable):
            if id(x) not in self.buffer_of:
                self.bind(x, self.graph.buffer(x.data.shape, x.data.dtype))
                self.graph.leaves[self.buffer_of[id(x)]] = x.data
            return self.buffer_of[id(x)]
        array = np.asarray(x)
        b = self.graph.buffer(array.shape, array.dtype)
        self.graph.leaves[b] = array
        return b

    def bind(self, x, b):
        self.buffer_of[id(x)] = b
        self.seen.append(x)  # alive while tracing: its id stays its own

    def record(self, function, inputs, output):
        found = _kernel_of(function)
        if found is None or not isinstance(output, Variable):
            known = ", ".join(sorted(KERNELS))
            raise TypeError(f"plan: {type(function).__name__} has no kernel in "
                            f"dezero_mini.planning; it knows {known}")
        kernel, inplace = found
        scalars = [x for x in inputs if not isinstance(x, (Variable, np.ndarray))]
        if scalars:  # a Python number: the kernel gets it as it is, with its weak dtype
            kernel = _with_scalars(kernel, inputs)
            inputs = [x for x in inputs if isinstance(x, (Variable, np.ndarray))]
            inplace = tuple(range(len(inputs)))
        xs = [self.buffer(x) for x in inputs]
        y = self.graph.op(type(function).__name__.lower(), kernel, xs, output.data.shape,
                          output.data.dtype, inplace)
        self.bind(output, y)


def _with_scalars(kernel, inputs):
    """``kernel`` with the Python numbers among ``inputs`` put back in their places."""
    slots = [None if isinstance(x, (Variable, np.ndarray)) else x for x in inputs]

    def with_numbers(out, *arrays):
        given = iter(arrays)
        return kernel(out, *[next(given) if s is None else s for s in slots])

    return with_numbers


def trace(fn, *feeds):
    """Run ``fn`` once on Variables of the arrays ``feeds`` (under
    ``no_grad()``) and return its static Graph: one node per Function call."""
    graph = Graph()
    tracer = _Tracer(graph)
    variables = [Variable(np.asarray(a)) for a in feeds]
    for x in variables:
        tracer.bind(x, graph.buffer(x.data.shape, x.data.dtype))
        graph.feeds.append(tracer.buffer_of[id(x)])
    original = Function.__call__

    def recording(self, *inputs):
        output = original(self, *inputs)
        tracer.record(self, inputs, output)
        return output

    Function.__call__ = recording
    try:
        with no_grad():
            result = fn(*variables)
    finally:
        Function.__call__ = original
    if not isinstance(result, Variable) or id(result) not in tracer.buffer_of:
        raise TypeError("plan: fn must return a Variable computed from its inputs")
    graph.outputs.append(tracer.buffer_of[id(result)])
    return graph


# --- planning -------------------------------------------------------------------------------
def colour_paths(graph):
    """MXNet's heuristic: colour the longest path, then the longest of what is
    left, and so on; nodes of one colour run one after another."""
    producer = {node.output: n for n, node in enumerate(graph.nodes)}
    before = [sorted({producer[b] for b in node.inputs if b in producer}) for node in graph.nodes]
    colour = [None] * len(graph.nodes)
    for c in itertools.count():
        length, previous = {}, {}
        for n in range(len(graph.nodes)):
            if colour[n] is None:
                best = max((p for p in before[n] if colour[p] is None), default=None,
                           key=lambda p: length[p])
                length[n] = 1 + (length[best] if best is not None else 0)
                previous[n] = best
        if not length:
            return colour
        n = max(length, key=length.get)
        while n is not None:
            colour[n], n = c, previous[n]


class Plan:
    """``storage_of[b]``: the block of each buffer a node writes (None for
    feeds and leaves); ``sizes``: bytes per block; ``total``: their sum."""

    def __init__(self, graph, storage_of, sizes, inplace_nodes):
        self.graph, self.storage_of, self.sizes = graph, storage_of, sizes
        self.inplace_nodes = inplace_nodes

    @property
    def total(self):
        return int(sum(self.sizes))


def plan_memory(graph, inplace=True, share=True, parallel=True):
    """Give each buffer that a node writes a block, before anything is
    allocated (see the step file of stage 09 for the lesson): reference counts
    give lifetimes; a node writes over an input that dies at it (``inplace``)
    or takes the smallest free block that fits (``share``); with
    ``parallel``, blocks move only along one coloured path."""
    readers = graph.readers()
    count = [len(r) + (b in graph.outputs) for b, r in enumerate(readers)]
    colour = colour_paths(graph) if parallel else [0] * len(graph.nodes)

    def freeable(b, n):
        return not parallel or all(colour[r] == colour[n] for r in readers[b])

    storage_of, sizes, free, inplace_nodes = [None] * len(graph.buffers), [], [], []
    for n, node in enumerate(graph.nodes):
        out = graph.buffers[node.output]
        block = None
        for i in node.inplace if inplace else ():
            b = node.inputs[i]
            if (storage_of[b] is not None and count[b] == node.inputs.count(b)
                    and graph.buffers[b].shape == out.shape and graph.buffers[b].dtype == out.dtype
                    and freeable(b, n)):
                block = storage_of[b]
                inplace_nodes.append(n)
                break
        if block is None and share:
            fits = [(sizes[s], s) for s, c in free if c == colour[n]]
            if fits:
                big_enough = [f for f in fits if f[0] >= out.nbytes]
                size, block = min(big_enough) if big_enough else max(fits)
                free.remove((block, colour[n]))
                sizes[block] = max(size, out.nbytes)
        if block is None:
            sizes.append(out.nbytes)
            block = len(sizes) - 1
        storage_of[node.output] = block
        for b in set(node.inputs):
            count[b] -= node.inputs.count(b)
            if count[b] == 0 and storage_of[b] not in (None, block) and freeable(b, n):
                free.append((storage_of[b], colour[n]))
        if count[node.output] == 0:
            free.append((block, colour[n]))
    return Plan(graph, storage_of, sizes, inplace_nodes)


class Executor:
    """Allocate a Plan's blocks once; each call runs every node into them."""

    def __init__(self, plan):
        graph = plan.graph
        self.graph, self.plan = graph, plan
        self.blocks = [np.empty(size, np.uint8) for size in plan.sizes]
        self.arrays = [None] * len(graph.buffers)
        for b, block in enumerate(plan.storage_of):
            if block is not None:
                buffer = graph.buffers[b]
                self.arrays[b] = (self.blocks[block][:buffer.nbytes].view(buffer.dtype)
                                  .reshape(buffer.shape))
        for b, array in graph.leaves.items():
            self.arrays[b] = array  # by reference: parameters updated in place are seen

    def __call__(self, *feeds):
        """The outputs for these arrays: views of the blocks, which the next
        call writes over."""
        if len(feeds) != len(self.graph.feeds):
            raise TypeError(f"Executor: {len(feeds)} arrays given, the graph takes "
                            f"{len(self.graph.feeds)}")
        for b, array in zip(self.graph.feeds, feeds):
            buffer = self.graph.buffers[b]
            array = array.data if isinstance(array, Variable) else array
            if array.shape != buffer.shape or array.dtype != buffer.dtype:
                raise ValueError(f"Executor: an input of shape {array.shape} and dtype "
                                 f"{array.dtype}; the plan was made for {buffer.shape} "
                                 f"{buffer.dtype}")
            self.arrays[b] = array
        arrays = self.arrays
        for node in self.graph.nodes:
            node.kernel(arrays[node.output], *[arrays[b] for b in node.inputs])
        outputs = [arrays[b] for b in self.graph.outputs]
        for b in self.graph.feeds:
            arrays[b] = None
        return outputs


class PlannedInference:
    """A model's forward, traced once and planned: call it with an array of
    the traced shape and dtype; it returns the output array (a view of the
    plan's storage, overwritten by the next call)."""

    def __init__(self, model, x, **planner):
        self.graph = trace(model, x)
        self.plan = plan_memory(self.graph, **planner)
        self.executor = Executor(self.plan)

    def __call__(self, x):
        return self.executor(x)[0]


def plan_inference(model, x, **planner):
    """Trace ``model(x)`` (any callable of one Variable made of dezero_mini's
    planned Functions), plan it and allocate it: a ``PlannedInference``.
    ``planner``: keyword arguments of ``plan_memory``."""
    return PlannedInference(model, x, **planner)
