"""Stage 09's memory planner for dezero_mini: plan a static graph before allocating it.

The same planner as ``steps/step09_memory_planning.py`` (MXNet's design: a
static graph, lifetimes by counting readers, in-place, best-fit sharing, no
sharing between nodes that could run in parallel), for dezero_mini's own
Functions, with the stage's API (``dezero_mini.trace``, ``plan_memory``,
``Executor``: stage 09's contracts hold on dezero_mini) and two shortcuts
for a model::

    import dezero_mini as dz
    from dezero_mini.planning import plan_inference

    model = dz.models.MLP((4096, 4096, 10), activation=dz.functions.relu)
    run = plan_inference(model, x)   # traces model(x) once, plans, allocates
    y = run(x)                       # the same bits as model(x) under no_grad()
    run.plan.total                   # the bytes allocated for every activation

What it relies on in dezero_mini, so that a rewrite of the core keeps it
working: the public Function classes (``Linear``, ``MatMul``, ``Add``,
``Sub``, ``Mul``, ``Neg``, ``Exp``, ``Tanh``, ``Sigmoid``, ``ReLU``,
``Sum``, ``MeanSquaredError``, ``SoftmaxCrossEntropy``: looked up by name in
``dezero_mini.functions`` and ``dezero_mini.core``, and only those found are
planned), the fact that calling a Function goes through
``Function.__call__(self, *inputs)`` and returns a Variable, a Variable's
``data``, and ``no_grad()``. While ``trace`` runs, ``Function.__call__`` is
wrapped to record each call with its inputs as given (a number written into
a formula too, which the graph of Functions does not keep), and put back
after, as stage 09's ``trace`` does; so the core needs no hook and pays
nothing for planning. Each kernel repeats its Function's forward
formula one numpy operation at a time, in the same order, so that the
planned result is the same bits; a test (``tests/test_planning.py``) holds
each one to it.

``trace(fn, *feeds, wrt=params)`` and ``plan_training(model, loss_fn, x,
t)`` plan a whole training step the same way, for the Functions whose
backward it knows (``GRADIENTS``: Linear, MatMul, Add, Sub, Mul, Sum,
Sigmoid, Tanh, Exp, ReLU, MeanSquaredError, SoftmaxCrossEntropy); they rely in
addition on ``model.params()`` and on dezero_mini's backward order (newest
generation first), which matters only where a value is used more than once.
"""
import heapq
import itertools

import numpy as np

from dezero_mini import core
from dezero_mini import functions as F
from dezero_mini.core import Function, Variable, no_grad
from dezero_mini.validation import expect, expect_callable


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


def readers(graph):
    """For each buffer of ``graph``, the nodes that read it, in order (a node
    twice if it reads the buffer twice). Any graph with ``buffers`` and
    ``nodes`` that name their ``inputs`` will do: ``dezero_mini.memory.plans``
    runs it on a learner's Graph too, which need not have this as a method."""
    found = [[] for _ in graph.buffers]
    for n, node in enumerate(graph.nodes):
        for b in node.inputs:
            found[b].append(n)
    return found


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


def _mean_squared_error(g, function, xs, shape, dtype):
    """MeanSquaredError.forward as nodes: diff, diff ** 2, its sum, times 1 / n."""
    diff = g.op("sub", _binary(np.subtract), xs, g.buffers[xs[0]].shape, dtype, (0, 1))
    square = g.op("square", lambda out, d: np.square(d, out=out), [diff], g.buffers[diff].shape,
                  dtype, (0,))
    total = g.op("sum", lambda out, s: np.sum(s, out=out), [square], (), dtype)
    inverse = 1.0 / _count(g, diff)  # utils.inverse_count
    return g.op("mean", lambda out, s: np.multiply(s, inverse, out=out), [total], (), dtype,
                (0,)), diff


def _count(g, b):
    return int(np.prod(g.buffers[b].shape, dtype=np.int64))


def _softmax_cross_entropy(g, function, xs, shape, dtype):
    """SoftmaxCrossEntropy.forward as nodes: logsumexp of each row (utils.logsumexp:
    the row's maximum, finite, taken out before exp), the score at each label,
    their difference, its sum, times -1 / n. Saved for backward: the labels' flat
    indices."""
    x, t = xs
    (n, classes), scores = g.buffers[x].shape, g.buffers[x].dtype
    if not np.issubdtype(scores, np.floating) or n == 0:
        raise TypeError(f"plan: SoftmaxCrossEntropy is planned for a non-empty batch of "
                        f"floating-point scores, got {n} rows of {scores}")
    row = (n, 1)
    top = g.op("max", _finite_row_max, [x], row, scores)
    e = g.op("sub", _binary(np.subtract), [x, top], (n, classes), scores, (0,))
    e = g.op("exp", lambda out, v: np.exp(v, out=out), [e], (n, classes), scores, (0,))
    log_z = g.op("sum", _row_sum, [e], row, scores)
    log_z = g.op("log", lambda out, v: np.log(v, out=out), [log_z], row, scores, (0,))
    log_z = g.op("add", _binary(np.add), [log_z, top], row, scores, (0, 1))  # s += m
    index = g.op("label_index", _label_index(n, classes), [t], (n,), np.intp)
    picked = g.op("pick", lambda out, v, i: np.take(v.reshape(-1), i, out=out, mode="clip"),
                  [x, index], (n,), scores)
    picked = g.op("sub", lambda out, p, z: np.subtract(p, z.reshape(-1), out=out),
                  [picked, log_z], (n,), scores, (0,))
    total = g.op("sum", lambda out, v: np.sum(v, out=out), [picked], (), scores)
    inverse = 1.0 / n  # utils.inverse_count

    def negative_mean(out, v):  # -picked.sum() * inverse_count(n)
        np.negative(v, out=out)
        np.multiply(out, inverse, out=out)

    return g.op("mean", negative_mean, [total], (), dtype, (0,)), index


def _finite_row_max(out, x):
    """Each row's maximum, 0 where it is not finite (utils.logsumexp: a row of
    -inf stays -inf, not nan)."""
    np.max(x, axis=1, keepdims=True, out=out)
    out[~np.isfinite(out)] = 0  # (two masks of one byte a row: numpy's scratch)


def _row_sum(out, x):
    np.sum(x, axis=1, keepdims=True, out=out)


def _label_index(n, classes):
    """A kernel: the flat index of each row's label in the (n, classes) scores,
    after the check of SoftmaxCrossEntropy.forward (the eager run raises on a
    label out of range; the planned one must not read another row instead)."""
    row_starts = np.arange(n, dtype=np.intp) * classes

    def kernel(out, t):
        if t.size != n or t.min() < 0 or t.max() >= classes:
            raise ValueError(f"plan: SoftmaxCrossEntropy: labels t must hold {n} class "
                             f"indices in [0, {classes}), got {t.size} from {t.min()} to "
                             f"{t.max()}")
        np.add(row_starts, t.reshape(-1), out=out)

    return kernel


def _sum(g, function, xs, shape, dtype):
    """Sum.forward, ``x.sum(axis, keepdims)``, as one node; saved for backward:
    the shape of the result with the summed axes kept (of size 1)."""
    axis, keepdims = function.axis, function.keepdims  # (forward has normalised axis)
    x_shape = g.buffers[xs[0]].shape
    summed = range(len(x_shape)) if axis is None else [
        a % len(x_shape) for a in (axis if isinstance(axis, tuple) else (axis,))]
    kept = tuple(1 if i in summed else n for i, n in enumerate(x_shape))
    return g.op("sum", lambda out, v: np.sum(v, axis=axis, keepdims=keepdims, out=out), xs,
                shape, dtype), kept


#: Functions lowered as nodes that need more than a kernel (the Function's settings,
#: several nodes, a saved buffer): name -> lowering(graph, function, xs, shape, dtype)
#: -> (y, saved).
LOWERINGS = {"MeanSquaredError": _mean_squared_error,
             "SoftmaxCrossEntropy": _softmax_cross_entropy, "Sum": _sum}


def _kernel_of(function):
    """The kernel of a Function, if it is a built-in one that the planner knows
    (a class of that name in dezero_mini.functions or dezero_mini.core: a
    subclass, or a learner's own Function of the same name, is not)."""
    name = type(function).__name__
    builtins = [getattr(module, name, None) for module in (F, core)]
    if type(function) in builtins:
        return KERNELS.get(name) or LOWERINGS.get(name)
    return None


# --- tracing --------------------------------------------------------------------------------
class _Tracer:
    def __init__(self, graph):
        self.graph, self.buffer_of, self.seen, self.calls = graph, {}, [], []

    def buffer(self, x, inputs):
        """The buffer of an input of a Function call: a traced Variable's, or a
        new leaf bound to the array (a parameter, a constant)."""
        if isinstance(x, Variable):
            if id(x) not in self.buffer_of:
                self.bind(x, self.graph.buffer(x.data.shape, x.data.dtype))
                self.graph.leaves[self.buffer_of[id(x)]] = x.data
            return self.buffer_of[id(x)]
        array = _constant(x, inputs)
        b = self.graph.buffer(array.shape, array.dtype)
        self.graph.leaves[b] = array
        return b

    def bind(self, x, b):
        self.buffer_of[id(x)] = b
        self.seen.append(x)  # alive while tracing: its id stays its own

    def record(self, function, inputs, output):
        found = _kernel_of(function)
        if found is None or not isinstance(output, Variable):
            known = ", ".join(sorted({**KERNELS, **LOWERINGS}))
            raise TypeError(f"plan: {type(function).__name__} has no kernel in "
                            f"dezero_mini.planning; it knows {known}")
        shape, dtype = output.data.shape, output.data.dtype
        xs = [self.buffer(x, inputs) for x in inputs]
        if callable(found):  # several nodes
            y, saved = found(self.graph, function, xs, shape, dtype)
        else:
            kernel, inplace = found
            y, saved = self.graph.op(type(function).__name__.lower(), kernel, xs, shape, dtype,
                                     inplace), None
        self.bind(output, y)
        self.calls.append((type(function).__name__, xs, y, saved))


def _constant(x, inputs):
    """The array of a constant written into a formula (``y * 2.0``, ``x +
    np.ones(3)``), as a Function call gives it to forward: an array as it is;
    a Python number in the dtype that NumPy gives it next to the Variables
    among ``inputs`` (it is "weak", NEP 50: ``float32 * 2.0`` is float32)."""
    if isinstance(x, np.ndarray):
        return x
    if type(x) in (bool, int, float, complex):
        dtypes = [v.data.dtype for v in inputs if isinstance(v, Variable)]
        return np.array(x, dtype=np.result_type(*dtypes, type(x)(0)) if dtypes else None)
    return np.asarray(x)


def trace(fn, *feeds, wrt=()):
    """Run ``fn`` once on Variables of the arrays ``feeds`` (under
    ``no_grad()``) and return its static Graph: a node per Function call
    (MeanSquaredError: four, SoftmaxCrossEntropy: eleven). Its outputs: ``fn``'s result, then, when
    ``wrt`` names Variables (parameters), the gradient of the result with
    respect to each, traced as backward nodes (``GRADIENTS``)."""
    expect_callable(fn, "trace", "fn", "a function of Variables (one forward pass)")
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
    if wrt:
        targets = [tracer.buffer_of.get(id(p)) for p in wrt]
        graph.outputs += _backward_graph(graph, tracer.calls, graph.outputs[0], targets)
    return _prune(graph)


# --- backward: each Function's backward formula as nodes ---------------------------------
def _node(g, name, kernel, inputs, like, inplace=()):
    """A node whose result has the shape and dtype of buffer ``like``."""
    return g.op(name, kernel, inputs, g.buffers[like].shape, g.buffers[like].dtype, inplace)


def _times(g, a, b):
    return _node(g, "mul", _binary(np.multiply), [a, b], a, (0, 1))


def _one_minus(g, y):  # _const(1, y) - y: a 1 of y's dtype
    one = np.asarray(1, dtype=g.buffers[y].dtype)
    return _node(g, "one_minus", lambda out, v: np.subtract(one, v, out=out), [y], y, (0,))


def _sum_to(g, gy, like):
    """utils.sum_to(gy, shape of like): gy itself when the shapes agree."""
    shape, gy_shape = g.buffers[like].shape, g.buffers[gy].shape
    if shape == gy_shape:
        return gy
    lead = len(gy_shape) - len(shape)
    axes = tuple(range(lead)) + tuple(lead + i for i, n in enumerate(shape)
                                      if n == 1 and gy_shape[lead + i] != 1)
    kept = tuple(1 if i in axes else n for i, n in enumerate(gy_shape))
    return _node(g, "sum_to", lambda out, v: np.sum(v, axis=axes, keepdims=True,
                                                     out=out.reshape(kept)), [gy], like)


def _matmul_grads(g, xs, y, saved, gy):
    x, W = xs[:2]
    if len(g.buffers[x].shape) != 2 or len(g.buffers[W].shape) != 2:
        raise TypeError("plan: only the gradients of 2-D matrix products are planned")
    gx = _node(g, "matmul_gx", lambda out, gy, W: np.matmul(gy, W.T, out=out), [gy, W], x)
    gW = _node(g, "matmul_gW", lambda out, x, gy: np.matmul(x.T, gy, out=out), [x, gy], W)
    return [gx, gW] + [_sum_to(g, gy, b) for b in xs[2:]]


def _mean_squared_error_grads(g, xs, y, diff, gy):  # gy * diff * 2/n, and its negative
    scale = np.asarray(2.0 * (1.0 / _count(g, diff)), dtype=g.buffers[diff].dtype)
    gx0 = _node(g, "scale", lambda out, v: np.multiply(v, scale, out=out),
                [_node(g, "mul", _binary(np.multiply), [gy, diff], diff)], diff, (0,))
    return [gx0, _node(g, "neg", lambda out, v: np.negative(v, out=out), [gx0], gx0, (0,))]


def _add_grads(g, xs, y, saved, gy):  # Add.backward: gy, summed back to each input's shape
    return [_sum_to(g, gy, x) for x in xs]


def _sub_grads(g, xs, y, saved, gy):  # Sub.backward: gy and -gy, each summed back
    minus = _node(g, "neg", lambda out, v: np.negative(v, out=out), [gy], gy, (0,))
    return [_sum_to(g, gy, xs[0]), _sum_to(g, minus, xs[1])]


def _mul_grads(g, xs, y, saved, gy):  # Mul.backward: gy * x1 and gy * x0, each summed back
    x0, x1 = xs
    return [_sum_to(g, _times(g, gy, x1), x0), _sum_to(g, _times(g, gy, x0), x1)]


def _sum_grads(g, xs, y, kept, gy):  # Sum.backward: gy with the summed axes back, broadcast
    return [_node(g, "sum_grad", lambda out, v: np.copyto(out, v.reshape(kept)), [gy], xs[0])]


def _softmax_cross_entropy_grads(g, xs, y, index, gy):
    """SoftmaxCrossEntropy.backward: (softmax(x) - one_hot(t)) * (gy * 1/n), the
    softmax recomputed from x as Softmax.forward does; the labels get no gradient."""
    x = xs[0]
    (n, classes), scores = g.buffers[x].shape, g.buffers[x].dtype
    row = (n, 1)
    top = g.op("max", lambda out, v: np.max(v, axis=1, keepdims=True, out=out), [x], row, scores)
    e = _node(g, "sub", _binary(np.subtract), [x, top], x, (0,))
    e = _node(g, "exp", lambda out, v: np.exp(v, out=out), [e], x, (0,))
    total = g.op("sum", _row_sum, [e], row, scores)
    probabilities = _node(g, "divide", _binary(np.divide), [e, total], x, (0,))  # y /= sum

    def one_hot(out, i):
        out.fill(0)
        out.reshape(-1)[i] = 1

    labels = _node(g, "one_hot", one_hot, [index], x)
    diff = _node(g, "sub", _binary(np.subtract), [probabilities, labels], x, (0, 1))
    inverse = np.asarray(1.0 / n, dtype=scores)  # _const(utils.inverse_count(n), x)
    scale = _node(g, "scale", lambda out, v: np.multiply(v, inverse, out=out), [gy], gy, (0,))
    return [_node(g, "mul", _binary(np.multiply), [diff, scale], x, (0,))]


def _relu_grads(g, xs, y, saved, gy):
    """ReLU.backward's gy * (x > 0), with the mask read from the output:
    y > 0 exactly where x > 0, so the input can die at the ReLU (in place)."""
    mask = g.op("positive", lambda out, v: np.greater(v, 0, out=out), [y], g.buffers[y].shape,
                np.bool_)
    return [_node(g, "mul", _binary(np.multiply), [gy, mask], gy, (0,))]


#: name -> gradients(graph, input buffers, output buffer, saved, gy) -> a buffer per input,
#: each the same numpy operations, in the same order, as the Function's backward.
GRADIENTS = {
    "Linear": _matmul_grads,
    "MatMul": _matmul_grads,
    "Sigmoid": lambda g, xs, y, saved, gy: [_times(g, _times(g, gy, y), _one_minus(g, y))],
    "Tanh": lambda g, xs, y, saved, gy: [_times(g, gy, _one_minus(g, _times(g, y, y)))],
    "Exp": lambda g, xs, y, saved, gy: [_times(g, gy, y)],
    "ReLU": _relu_grads,
    "Add": _add_grads,
    "Sub": _sub_grads,
    "Mul": _mul_grads,
    "Sum": _sum_grads,
    "MeanSquaredError": _mean_squared_error_grads,
    "SoftmaxCrossEntropy": _softmax_cross_entropy_grads,
}


def _backward_graph(graph, calls, result, targets):
    """The nodes of backward from ``result`` to the buffers ``targets``, in
    the order of dezero_mini's backward (newest generation first, ties in the
    order reached), so that gradients summed over several uses agree to the
    bit; the buffer of each target's gradient."""
    needed, creator, generation = {t for t in targets if t is not None}, {}, {}
    for call in calls:
        name, xs, y, saved = call
        if needed.intersection(xs):
            needed.add(y)
        creator[y] = (max([generation.get(x, 0) for x in xs], default=0), call)
        generation[y] = creator[y][0] + 1
    grads, pending, order = {}, [], itertools.count()

    def send(x, gx):
        if x not in needed:
            return
        if graph.buffers[gx].dtype != graph.buffers[x].dtype:  # eager casts it, sometimes
            raise TypeError(f"plan: mixed dtypes are not planned: a gradient of "
                            f"{graph.buffers[gx].dtype} for an array of {graph.buffers[x].dtype}")
        if x in grads:
            gx = _node(graph, "accumulate", _binary(np.add), [grads[x], gx], x, (0, 1))
        elif x in creator:
            heapq.heappush(pending, (-creator[x][0], next(order), x))
        grads[x] = gx

    dtype = graph.buffers[result].dtype
    send(result, graph.op("ones", lambda out: out.fill(1), [], graph.buffers[result].shape, dtype))
    while pending:
        _, _, y = heapq.heappop(pending)
        name, xs, _, saved = creator[y][1]
        if name not in GRADIENTS:
            raise TypeError(f"plan: {name} has no backward in dezero_mini.planning; it "
                            f"differentiates {', '.join(sorted(GRADIENTS))}")
        for x, gx in zip(xs, GRADIENTS[name](graph, xs, y, saved, grads[y])):
            send(x, gx)
    missing = [k for k, b in enumerate(targets) if b not in grads]
    if missing:
        raise ValueError(f"plan: wrt[{missing[0]}] does not take part in the result")
    return [grads[b] for b in targets]


def _prune(graph):
    """Drop the nodes whose results nobody uses (the gradient of the input)."""
    used, kept = set(graph.outputs), []
    for node in reversed(graph.nodes):
        if node.output in used:
            used.update(node.inputs)
            kept.append(node)
    graph.nodes = kept[::-1]
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
    expect(graph, Graph, "plan_memory", "graph", "a Graph (what trace() returns)")
    read_by = readers(graph)
    count = [len(r) + (b in graph.outputs) for b, r in enumerate(read_by)]
    colour = colour_paths(graph) if parallel else [0] * len(graph.nodes)

    def freeable(b, n):
        return not parallel or all(colour[r] == colour[n] for r in read_by[b])

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


def check_feeds(graph, feeds):
    """The arrays to run ``graph`` on, one per buffer of ``graph.feeds``, each
    checked against the shape and dtype it was traced with (a Variable gives
    its array). An Executor calls it first: ``zip()`` would drop an extra
    input without a word, and a missing or wrong one would fail deep inside a
    kernel, far from the cause. TypeError or ValueError naming the input."""
    traced = [graph.buffers[b] for b in graph.feeds]
    if len(feeds) > len(traced):
        raise TypeError(f"Executor: {len(feeds)} arrays given, the graph takes "
                        f"{len(traced)}; input {len(traced) + 1} and after are not "
                        "inputs of the graph")
    if len(feeds) < len(traced):
        missing = traced[len(feeds)]
        raise TypeError(f"Executor: {len(feeds)} arrays given, the graph takes "
                        f"{len(traced)}; input {len(feeds) + 1} is missing (traced as an "
                        f"array of shape {missing.shape} and dtype {missing.dtype})")
    arrays = []
    for k, (buffer, array) in enumerate(zip(traced, feeds), 1):
        if not isinstance(array, np.ndarray) and isinstance(getattr(array, "data", None),
                                                            np.ndarray):
            array = array.data  # a Variable, of dezero_mini or of a stage
        if not isinstance(array, np.ndarray):
            raise TypeError(f"Executor: input {k} must be a numpy array or a Variable, "
                            f"got {type(array).__name__}")
        if array.shape != buffer.shape or array.dtype != buffer.dtype:
            raise ValueError(f"Executor: an input of shape {array.shape} and dtype "
                             f"{array.dtype}; the plan was made for {buffer.shape} "
                             f"{buffer.dtype}")
        arrays.append(array)
    return arrays


class Executor:
    """Allocate a Plan's blocks once; each call runs every node into them."""

    def __init__(self, plan):
        expect(plan, Plan, "Executor", "plan", "a Plan (what plan_memory returns)")
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
        for b, array in zip(self.graph.feeds, check_feeds(self.graph, feeds)):
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


class PlannedTraining:
    """One training step of ``loss_fn(model(x), t)``, traced once and planned:
    ``step(x, t)`` returns the loss and the gradient of each of
    ``model.params()`` (arrays: views of the plan's storage). The parameters
    are read by reference, so an optimizer that updates ``p.data`` in place
    is seen by the next step."""

    def __init__(self, model, loss_fn, x, t, **planner):
        self.params = list(model.params())
        self.graph = trace(lambda x, t: loss_fn(model(x), t), x, t, wrt=self.params)
        self.plan = plan_memory(self.graph, **planner)
        self.executor = Executor(self.plan)

    def __call__(self, x, t):
        loss, *grads = self.executor(x, t)
        return loss, grads


def plan_training(model, loss_fn, x, t, **planner):
    """Trace, plan and allocate one training step (forward and backward) of
    ``loss_fn(model(x), t)``: a ``PlannedTraining``. The Functions of the
    model and the loss need a backward in ``GRADIENTS`` (Linear, MatMul,
    Add, Sub, Mul, Sum, Sigmoid, Tanh, Exp, ReLU, MeanSquaredError,
    SoftmaxCrossEntropy)."""
    if not list(model.params()):
        with no_grad():
            model(x)  # a Linear layer makes its weights at the first call
    return PlannedTraining(model, loss_fn, x, t, **planner)


def plan_inference(model, x, **planner):
    """Trace ``model(x)`` (any callable of one Variable made of dezero_mini's
    planned Functions), plan it and allocate it: a ``PlannedInference``.
    ``planner``: keyword arguments of ``plan_memory``."""
    return PlannedInference(model, x, **planner)
