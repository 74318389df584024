"""Stage 09: memory_planning: plan every buffer before allocating any.

With a static graph the whole run is known in advance, so memory can be
planned before anything is allocated, as MXNet does: ``trace`` records one
run (and, for training, its backward) as nodes over numbered buffers;
``plan_memory`` gives each buffer a lifetime by counting its readers, writes
in place over an input that dies at a node, shares dead buffers' blocks (best
fit), and never between nodes that could run in parallel (coloured paths);
``Executor`` runs the plan in preallocated arrays, to the eager run's bits.
The lesson, notebooks/09_memory_planning.ipynb, tells the whole story.

The framework itself is stage 08's, unchanged: while ``trace`` runs, it
wraps ``Function.__call__`` to record each call, and puts it back after.

Run ``python steps/step09_memory_planning.py``.
"""
import contextlib
import heapq
import itertools
import os
import weakref

import numpy as np

from dezero_mini.planning import check_feeds  # the Executor's argument checks, said once

STAGE = "09"
STAGE_TITLE = "memory_planning"


# --- Configuration: build the graph or not, check what backward reads -------------
class Config:
    enable_backprop = True
    check_saved = os.environ.get("DEZERO_MINI_CHECK_SAVED") == "1"


@contextlib.contextmanager
def using_config(name, value):
    old_value = getattr(Config, name)
    setattr(Config, name, value)
    try:
        yield
    finally:  # restore even if the block raises
        setattr(Config, name, old_value)


def no_grad():
    return using_config("enable_backprop", False)


# --- Variable -------------------------------------------------------------------
class Variable:
    __array_priority__ = 200  # so that ndarray * Variable calls Variable.__rmul__

    def __init__(self, data, name=None):
        if not isinstance(data, np.ndarray):
            raise TypeError(
                f"Variable: data must be a numpy.ndarray, got {type(data).__name__}"
            )
        self.data = data
        self.name = name
        self.grad = None
        self.creator = None
        self.generation = 0

    @property
    def shape(self):
        return self.data.shape

    @property
    def ndim(self):
        return self.data.ndim

    @property
    def size(self):
        return self.data.size

    @property
    def dtype(self):
        return self.data.dtype

    def __len__(self):
        return len(self.data)

    def __repr__(self):
        body = str(self.data).replace("\n", "\n" + " " * 9)
        return f"variable({body})"

    def set_creator(self, func):
        self.creator = func
        self.generation = func.generation + 1

    def cleargrad(self):
        self.grad = None

    def detach(self):
        """A new Variable with the same array and no creator: outside any graph."""
        return Variable(self.data, name=self.name)

    def item(self):
        """The value of a one-element Variable as a Python number."""
        if self.data.size != 1:
            raise ValueError(
                f"item: only a Variable of one element has a single value; "
                f"this one has shape {self.data.shape} ({self.data.size} elements)"
            )
        return self.data.item()

    def __float__(self):
        return float(self.item())

    def backward(self, retain_grad=False, retain_graph=False):
        if self.grad is None:
            self.grad = np.ones_like(self.data)
        # The gradients of the outputs of the Functions still to run, by
        # Function: the Variables in between may be gone (nothing in the graph
        # holds them), so the gradients cannot wait on them. A heap ordered by
        # generation (newest first) runs each Function after all its users.
        order = itertools.count()
        pending, grads = [], {}

        def send(edge, g):
            node, index = edge
            if index is None:  # a leaf Variable: its gradient stays on it
                node.grad = g if node.grad is None else node.grad + g
                return
            if node not in grads:
                grads[node] = [None] * len(node.outputs)
                heapq.heappush(pending, (-node.generation, next(order), node))
            gys = grads[node]
            gys[index] = g if gys[index] is None else gys[index] + g

        if self.creator is None:
            return  # a leaf: its gradient is the one just set
        send(edge_to(self), self.grad)
        if not retain_grad:
            self.grad = None  # it is in grads now; nobody reads it again
        while pending:
            _, _, f = heapq.heappop(pending)
            if f.next_functions is None:
                raise RuntimeError(
                    f"backward: {type(f).__name__} has already freed its inputs: an earlier "
                    "backward() went through this graph and let go of it to save memory. "
                    "Call backward(retain_graph=True) the first time if you need to go "
                    "through the graph a second time."
                )
            gys = grads.pop(f)
            if retain_grad:  # the outputs that someone still holds keep their gradients
                for output, gy in zip(f.outputs, gys):
                    if output() is not None:
                        output().grad = gy
            gxs = backward_checked(f, gys) if Config.check_saved else f.backward(*gys)
            if not isinstance(gxs, tuple):
                gxs = (gxs,)
            for edge, gx in zip(f.next_functions, gxs):
                send(edge, gx)
            if not retain_graph:
                f.release()  # its backward has run: what it saved for it can go
            gys = gxs = None  # would keep the last arrays alive while the next function runs


def edge_to(x):
    """Where backward sends the gradient of ``x``: (its creator, which output),
    or (x, None) for a leaf, which keeps its gradient itself."""
    if x.creator is None:
        return x, None
    return x.creator, x.creator.outputs.index(weakref.ref(x))


def as_array(x):
    return np.array(x) if np.isscalar(x) else x


def as_variable(obj):
    return obj if isinstance(obj, Variable) else Variable(as_array(obj))


# --- Function -------------------------------------------------------------------
class Function:
    # No per-object __dict__: a graph node is its slots. A subclass that
    # declares no __slots__ (a learner's Function) gets a __dict__ back.
    __slots__ = ("generation", "next_functions", "outputs", "inputs", "__weakref__")
    # The attributes that forward fills for backward to read, named once;
    # None: DeZero's way, the Function keeps self.inputs (every input Variable).
    saves = None
    # Saved values (or "inputs[i]") that backward reads only on some paths.
    reads_sometimes = ()

    def __call__(self, *inputs):
        inputs = [as_variable(x) for x in inputs]
        xs = [x.data for x in inputs]
        try:
            ys = self.forward(*xs)
        except ValueError as e:
            shapes = ", ".join(str(x.shape) for x in xs)
            raise ValueError(f"{type(self).__name__}: inputs of shapes {shapes}: {e}") from e
        if not isinstance(ys, tuple):
            ys = (ys,)
        outputs = [Variable(as_array(y)) for y in ys]
        if Config.enable_backprop:  # only backward needs the graph
            self.generation = max(x.generation for x in inputs)
            self.next_functions = [edge_to(x) for x in inputs]  # Functions, not arrays
            for output in outputs:
                output.set_creator(self)  # Variable -> Function ...
            if self.saves is None:
                self.inputs = inputs  # DeZero's way: keep them all, read or not
            self.outputs = [weakref.ref(output) for output in outputs]  # no cycle
        return outputs if len(outputs) > 1 else outputs[0]

    def release(self):
        """Let go of everything backward needed: the saved values and the graph behind."""
        self.next_functions = self.inputs = None
        for name in self.saves or ():
            setattr(self, name, None)

    def forward(self, *xs):
        raise NotImplementedError

    def backward(self, *gys):
        raise NotImplementedError


# --- Check mode: does each Function hold only what its backward reads? ----------------
class WatchedInput:
    """Stands for an input Variable during a checked backward; notes what is read."""

    def __init__(self, variable, name, reads):
        self._variable, self._name, self._reads = variable, name, reads

    def __getattr__(self, attribute):
        only_shape = attribute in ("shape", "ndim", "size", "dtype")
        self._reads[self._name] = self._reads.get(self._name, True) and only_shape
        return getattr(self._variable, attribute)


class WatchedFunction:
    """Stands for a Function during its backward and notes which saved values
    (attributes named in ``saves``) and which inputs it reads."""

    def __init__(self, function, reads):
        object.__setattr__(self, "_function", function)
        object.__setattr__(self, "_reads", reads)

    def __getattr__(self, name):
        value = getattr(self._function, name)
        if name == "inputs" and value is not None:
            return [WatchedInput(x, f"inputs[{i}]", self._reads) for i, x in enumerate(value)]
        if name in (self._function.saves or ()):
            self._reads[name] = False  # read, and not just for its shape
        if callable(value) and getattr(value, "__self__", None) is self._function:
            return value.__func__.__get__(self)  # its own methods read through the stand-in
        return value


def held_values(f):
    """What ``f`` keeps for its backward: the names of its non-empty saved
    values, or inputs[i] for each input of a Function written DeZero's way."""
    if f.saves is None:
        return [f"inputs[{i}]" for i in range(len(f.inputs or ()))]
    return [name for name in f.saves if getattr(f, name, None) is not None]


def backward_checked(f, gys):
    """``f.backward(*gys)``, run on a stand-in that notes what it reads; raises
    RuntimeError naming the Function and what it holds without reading."""
    reads = {}  # name -> True when only the shape was read
    gxs = type(f).backward(WatchedFunction(f, reads), *gys)
    held = [name for name in held_values(f) if name not in f.reads_sometimes]
    unread = [name for name in held if name not in reads]
    shape_only = [name for name in held if reads.get(name) is True]
    if unread or shape_only:
        problems = ([f"holds {', '.join(unread)} that its backward never reads"] if unread
                    else []) + ([f"holds the arrays of {', '.join(shape_only)} but its "
                                 "backward reads only their shapes"] if shape_only else [])
        raise RuntimeError(
            f"check_saved: {type(f).__name__} {'; '.join(problems)}. Keep only what "
            "backward reads (name it in saves and set it in forward); if a value is read "
            "only on some paths, list it in reads_sometimes."
        )
    return gxs


def reduce_to_shape(x, shape):
    """Sum the array ``x`` over the axes that broadcasting added to ``shape``."""
    lead = x.ndim - len(shape)
    axes = tuple(range(lead)) + tuple(
        lead + i for i, n in enumerate(shape) if n == 1 and x.shape[lead + i] != 1
    )
    return x.sum(axis=axes, keepdims=True).reshape(shape)


# --- Arithmetic (with broadcasting) ------------------------------------------------
class Add(Function):
    __slots__ = saves = ("x0_shape", "x1_shape")  # shapes, not arrays

    def forward(self, x0, x1):
        self.x0_shape, self.x1_shape = x0.shape, x1.shape
        return x0 + x1

    def backward(self, gy):
        return reduce_to_shape(gy, self.x0_shape), reduce_to_shape(gy, self.x1_shape)


class Sub(Function):
    __slots__ = saves = ("x0_shape", "x1_shape")

    def forward(self, x0, x1):
        self.x0_shape, self.x1_shape = x0.shape, x1.shape
        return x0 - x1

    def backward(self, gy):
        return reduce_to_shape(gy, self.x0_shape), reduce_to_shape(-gy, self.x1_shape)


class Mul(Function):
    __slots__ = saves = ("x0", "x1")  # each one's gradient needs the other

    def forward(self, x0, x1):
        self.x0, self.x1 = x0, x1
        return x0 * x1

    def backward(self, gy):
        x0, x1 = self.x0, self.x1
        gx0, gx1 = gy * x1, gy * x0
        return reduce_to_shape(gx0, x0.shape), reduce_to_shape(gx1, x1.shape)


class Div(Function):
    __slots__ = saves = ("x0", "x1")

    def forward(self, x0, x1):
        self.x0, self.x1 = x0, x1
        return x0 / x1

    def backward(self, gy):
        x0, x1 = self.x0, self.x1
        gx0 = gy / x1
        gx1 = -gy * x0 / x1**2
        return reduce_to_shape(gx0, x0.shape), reduce_to_shape(gx1, x1.shape)


class Neg(Function):
    __slots__ = saves = ()  # nothing: -gy needs no input

    def forward(self, x):
        return -x

    def backward(self, gy):
        return -gy


class Pow(Function):
    __slots__ = ("c", "x")
    saves = ("x",)

    def __init__(self, c):
        self.c = c

    def forward(self, x):
        self.x = x
        return x**self.c

    def backward(self, gy):
        return self.c * self.x ** (self.c - 1) * gy


class Square(Function):
    __slots__ = saves = ("x",)

    def forward(self, x):
        self.x = x
        return x**2

    def backward(self, gy):
        return 2 * self.x * gy


# --- Element-wise functions ---------------------------------------------------------
class Exp(Function):
    __slots__ = saves = ("y",)  # the output: its derivative is itself

    def forward(self, x):
        self.y = np.exp(x)
        return self.y

    def backward(self, gy):
        return gy * self.y


class Sigmoid(Function):
    __slots__ = saves = ("y",)

    def forward(self, x):
        self.y = np.tanh(x * 0.5) * 0.5 + 0.5  # overflow-free form of 1 / (1 + e^-x)
        return self.y

    def backward(self, gy):
        y = self.y
        return gy * y * (1 - y)


class Tanh(Function):
    __slots__ = saves = ("y",)

    def forward(self, x):
        self.y = np.tanh(x)
        return self.y

    def backward(self, gy):
        y = self.y
        return gy * (1 - y * y)


# --- Shapes and reductions ----------------------------------------------------------
class Reshape(Function):
    __slots__ = ("shape", "x_shape")
    saves = ("x_shape",)

    def __init__(self, shape):
        self.shape = shape

    def forward(self, x):
        self.x_shape = x.shape
        return x.reshape(self.shape)

    def backward(self, gy):
        return gy.reshape(self.x_shape)


class Transpose(Function):
    __slots__ = saves = ()

    def forward(self, x):
        return x.T

    def backward(self, gy):
        return gy.T


class Sum(Function):
    __slots__ = ("axis", "keepdims", "x_shape")
    saves = ("x_shape",)

    def __init__(self, axis=None, keepdims=False):
        self.axis, self.keepdims = axis, keepdims

    def forward(self, x):
        self.x_shape = x.shape
        return x.sum(axis=self.axis, keepdims=self.keepdims)

    def backward(self, gy):
        shape = self.x_shape
        if not self.keepdims and self.axis is not None:
            axes = self.axis if isinstance(self.axis, tuple) else (self.axis,)
            gy = np.expand_dims(gy, tuple(a % len(shape) for a in axes))
        return np.broadcast_to(gy, shape).copy()


class SumTo(Function):
    __slots__ = ("shape", "x_shape")
    saves = ("x_shape",)

    def __init__(self, shape):
        self.shape = shape

    def forward(self, x):
        self.x_shape = x.shape
        return reduce_to_shape(x, self.shape)

    def backward(self, gy):
        return np.broadcast_to(gy, self.x_shape).copy()


class BroadcastTo(Function):
    __slots__ = ("shape", "x_shape")
    saves = ("x_shape",)

    def __init__(self, shape):
        self.shape = shape

    def forward(self, x):
        self.x_shape = x.shape
        return np.broadcast_to(x, self.shape).copy()

    def backward(self, gy):
        return reduce_to_shape(gy, self.x_shape)


# --- Linear algebra and loss ----------------------------------------------------------
class MatMul(Function):
    __slots__ = saves = ("x", "W")  # each one's gradient needs the other

    def forward(self, x, W):
        self.x, self.W = x, W
        return x @ W

    def backward(self, gy):
        return gy @ self.W.T, self.x.T @ gy


class MeanSquaredError(Function):
    __slots__ = saves = ("diff",)  # one array instead of both inputs

    def forward(self, x0, x1):
        if x0.shape != x1.shape:
            raise ValueError("prediction and target must have the same shape")
        self.diff = x0 - x1
        return np.array((self.diff**2).sum() / self.diff.size)

    def backward(self, gy):
        diff = self.diff
        gx0 = gy * diff * (2.0 / diff.size)
        return gx0, -gx0


def add(x0, x1):
    return Add()(x0, x1)


def sub(x0, x1):
    return Sub()(x0, x1)


def rsub(x0, x1):
    return Sub()(x1, x0)


def mul(x0, x1):
    return Mul()(x0, x1)


def div(x0, x1):
    return Div()(x0, x1)


def rdiv(x0, x1):
    return Div()(x1, x0)


def neg(x):
    return Neg()(x)


def pow(x, c):
    return Pow(c)(x)


def square(x):
    return Square()(x)


def exp(x):
    return Exp()(x)


def sigmoid(x):
    return Sigmoid()(x)


def tanh(x):
    return Tanh()(x)


def reshape(x, shape):
    return Reshape(shape)(x)


def transpose(x):
    return Transpose()(x)


def sum(x, axis=None, keepdims=False):
    return Sum(axis, keepdims)(x)


def sum_to(x, shape):
    return SumTo(shape)(x)


def broadcast_to(x, shape):
    return BroadcastTo(shape)(x)


def matmul(x, W):
    return MatMul()(x, W)


def mean_squared_error(x0, x1):
    return MeanSquaredError()(x0, x1)


Variable.__add__ = Variable.__radd__ = add
Variable.__sub__, Variable.__rsub__ = sub, rsub
Variable.__mul__ = Variable.__rmul__ = mul
Variable.__truediv__, Variable.__rtruediv__ = div, rdiv
Variable.__neg__ = neg
Variable.__pow__ = pow
Variable.__matmul__ = matmul


# --- A static graph: nodes over numbered buffers ----------------------------------------
class Buffer:
    """One array of the static graph: its shape and dtype, no data yet."""

    def __init__(self, shape, dtype):
        self.shape, self.dtype = tuple(shape), np.dtype(dtype)
        self.nbytes = int(np.prod(self.shape, dtype=np.int64)) * self.dtype.itemsize


class Node:
    """One step of the graph: ``kernel(out, *inputs)`` writes the buffer
    ``output`` from the buffers ``inputs``; ``inplace`` lists the inputs that
    the kernel may read while writing over them (element-wise kernels)."""

    def __init__(self, name, kernel, inputs, output, inplace):
        self.name, self.kernel = name, kernel
        self.inputs, self.output, self.inplace = list(inputs), output, tuple(inplace)


class Graph:
    """Nodes in the order they run, over numbered buffers. ``feeds``: the
    buffers given at each run; ``leaves``: buffers bound once to an array
    (parameters, constants); ``outputs``: the buffers a run returns."""

    def __init__(self):
        self.buffers, self.nodes, self.feeds, self.outputs = [], [], [], []
        self.leaves = {}

    def buffer(self, shape, dtype):
        self.buffers.append(Buffer(shape, dtype))
        return len(self.buffers) - 1

    def op(self, name, kernel, inputs, shape, dtype=None, inplace=()):
        """Add a node that writes a new buffer of ``shape``; return the buffer."""
        if dtype is None:
            dtype = np.result_type(*(self.buffers[b].dtype for b in inputs))
        output = self.buffer(shape, dtype)
        self.nodes.append(Node(name, kernel, inputs, output, inplace))
        return output

    def shape(self, b):
        return self.buffers[b].shape

    def readers(self):
        """For each buffer, the nodes that read it (a node twice if it reads it twice)."""
        readers = [[] for _ in self.buffers]
        for n, node in enumerate(self.nodes):
            for b in node.inputs:
                readers[b].append(n)
        return readers


# --- Lowering: each Function as kernels that write into a given array -------------------
def elementwise(ufunc, *constants):
    """A kernel out = ufunc(inputs..., constants...), which may run in place."""
    return lambda out, *xs: ufunc(*xs, *constants, out=out)


def one_minus(out, x):
    np.subtract(1, x, out=out)


def sigmoid_kernel(out, x):  # Sigmoid.forward's formula, one ufunc at a time
    np.multiply(x, 0.5, out=out)
    np.tanh(out, out=out)
    np.multiply(out, 0.5, out=out)
    np.add(out, 0.5, out=out)


def reduce_grad(g, gy, shape):
    """The gradient ``gy`` summed to ``shape`` (reduce_to_shape): gy itself
    when nothing was broadcast, else a reduction node."""
    if g.shape(gy) == tuple(shape):
        return gy
    lead = len(g.shape(gy)) - len(shape)
    axes = tuple(range(lead)) + tuple(lead + i for i, n in enumerate(shape) if n == 1
                                      and g.shape(gy)[lead + i] != 1)
    kept = tuple(1 if i in axes else n for i, n in enumerate(g.shape(gy)))

    def reduce(out, x):
        np.sum(x, axis=axes, keepdims=True, out=out.reshape(kept))

    return g.op("sum_to", reduce, [gy], shape)


def times(g, a, b):
    shape = np.broadcast_shapes(g.shape(a), g.shape(b))
    return g.op("mul", elementwise(np.multiply), [a, b], shape, inplace=(0, 1))


# Each rule: forward(g, f, xs, shape) -> (y, saved); backward(g, f, xs, y, saved, gy) -> gxs.
def add_rule():
    def forward(g, f, xs, shape):
        return g.op("add", elementwise(np.add), xs, shape, inplace=(0, 1)), None

    def backward(g, f, xs, y, saved, gy):
        return [reduce_grad(g, gy, g.shape(x)) for x in xs]

    return forward, backward


def sub_rule():
    def forward(g, f, xs, shape):
        return g.op("sub", elementwise(np.subtract), xs, shape, inplace=(0, 1)), None

    def backward(g, f, xs, y, saved, gy):
        minus = g.op("neg", elementwise(np.negative), [gy], g.shape(gy), inplace=(0,))
        return [reduce_grad(g, gy, g.shape(xs[0])), reduce_grad(g, minus, g.shape(xs[1]))]

    return forward, backward


def mul_rule():
    def forward(g, f, xs, shape):
        return g.op("mul", elementwise(np.multiply), xs, shape, inplace=(0, 1)), None

    def backward(g, f, xs, y, saved, gy):
        x0, x1 = xs
        return [reduce_grad(g, times(g, gy, x1), g.shape(x0)),
                reduce_grad(g, times(g, gy, x0), g.shape(x1))]

    return forward, backward


def unary_rule(name, kernel, derivative):
    """An element-wise Function whose backward reads its output y."""
    def forward(g, f, xs, shape):
        return g.op(name, kernel, xs, shape, inplace=(0,)), None

    def backward(g, f, xs, y, saved, gy):
        return [derivative(g, y, gy)]

    return forward, backward


def sigmoid_derivative(g, y, gy):  # gy * y * (1 - y)
    return times(g, times(g, gy, y), g.op("one_minus", one_minus, [y], g.shape(y), inplace=(0,)))


def tanh_derivative(g, y, gy):  # gy * (1 - y * y)
    return times(g, gy, g.op("one_minus", one_minus, [times(g, y, y)], g.shape(y), inplace=(0,)))


def matmul_rule():
    def forward(g, f, xs, shape):
        return g.op("matmul", elementwise(np.matmul), xs, shape), None  # never in place

    def backward(g, f, xs, y, saved, gy):
        x, W = xs
        gx = g.op("matmul_gx", lambda out, gy, W: np.matmul(gy, W.T, out=out), [gy, W],
                  g.shape(x))
        gW = g.op("matmul_gW", lambda out, x, gy: np.matmul(x.T, gy, out=out), [x, gy],
                  g.shape(W))
        return [gx, gW]

    return forward, backward


def sum_rule():
    def forward(g, f, xs, shape):
        def kernel(out, x):
            np.sum(x, axis=f.axis, keepdims=f.keepdims, out=out)

        return g.op("sum", kernel, xs, shape), None

    def backward(g, f, xs, y, saved, gy):
        shape = g.shape(xs[0])
        axes = () if f.keepdims or f.axis is None else (
            f.axis if isinstance(f.axis, tuple) else (f.axis,))

        def spread(out, gy):
            np.copyto(out, np.expand_dims(gy, tuple(a % len(shape) for a in axes)))

        return [g.op("sum_grad", spread, [gy], shape)]

    return forward, backward


def mean_squared_error_rule():
    def forward(g, f, xs, shape):
        diff = g.op("sub", elementwise(np.subtract), xs, g.shape(xs[0]), inplace=(0, 1))
        square_ = g.op("square", elementwise(np.square), [diff], g.shape(diff), inplace=(0,))
        total = g.op("sum", lambda out, x: np.sum(x, out=out), [square_], ())
        size = int(np.prod(g.shape(diff)))
        return g.op("mean", elementwise(np.divide, size), [total], (), inplace=(0,)), diff

    def backward(g, f, xs, y, diff, gy):
        scale = 2.0 / int(np.prod(g.shape(diff)))
        gx0 = g.op("scale", elementwise(np.multiply, scale), [times(g, gy, diff)], g.shape(diff),
                   inplace=(0,))
        return [gx0, g.op("neg", elementwise(np.negative), [gx0], g.shape(gx0), inplace=(0,))]

    return forward, backward


LOWERING = {
    Add: add_rule(), Sub: sub_rule(), Mul: mul_rule(), MatMul: matmul_rule(),
    Exp: unary_rule("exp", elementwise(np.exp), lambda g, y, gy: times(g, gy, y)),
    Sigmoid: unary_rule("sigmoid", sigmoid_kernel, sigmoid_derivative),
    Tanh: unary_rule("tanh", elementwise(np.tanh), tanh_derivative),
    Sum: sum_rule(), MeanSquaredError: mean_squared_error_rule(),
}


# --- Tracing: run once, record the Function calls as a static graph -------------------
class Tracer:
    """Lowers each Function call that ``trace`` records into nodes of ``graph``."""

    def __init__(self, graph):
        self.graph, self.buffer_of, self.calls = graph, {}, []
        self.seen = []  # keeps each traced Variable alive, so that its id stays its own

    def buffer(self, x):
        if id(x) not in self.buffer_of:  # a leaf made before the trace: bind its array
            self.bind(x, self.graph.buffer(x.shape, x.dtype))
            self.graph.leaves[self.buffer_of[id(x)]] = x.data
        return self.buffer_of[id(x)]

    def bind(self, x, b):
        self.buffer_of[id(x)] = b
        self.seen.append(x)

    def record(self, f, inputs, outputs):
        rule = LOWERING.get(type(f))
        if rule is None or len(outputs) != 1:
            known = ", ".join(sorted(cls.__name__ for cls in LOWERING))
            raise TypeError(f"trace: {type(f).__name__} has no static form; the planner "
                            f"knows {known}")
        xs = [self.buffer(x) for x in inputs]
        y, saved = rule[0](self.graph, f, xs, outputs[0].shape)
        self.bind(outputs[0], y)
        self.calls.append((f, xs, y, saved))


def trace(fn, *feeds, wrt=()):
    """Run ``fn`` once on Variables of the arrays ``feeds`` and return its
    static Graph. Its outputs: ``fn``'s result, then, for training, the
    gradient of that result with respect to each Variable of ``wrt``."""
    graph = Graph()
    tracer = Tracer(graph)
    variables = [Variable(np.asarray(a)) for a in feeds]
    for x in variables:
        tracer.bind(x, graph.buffer(x.shape, x.dtype))
        graph.feeds.append(tracer.buffer_of[id(x)])
    call = Function.__call__  # stage 08's, as it is: wrapped only while fn runs

    def recorded(f, *inputs):
        inputs = [as_variable(x) for x in inputs]  # a constant too gets its buffer
        outputs = call(f, *inputs)
        tracer.record(f, inputs, outputs if isinstance(outputs, list) else [outputs])
        return outputs

    Function.__call__ = recorded
    try:
        with no_grad():
            result = tracer.buffer(fn(*variables))
    finally:
        Function.__call__ = call
    graph.outputs.append(result)
    if wrt:
        grads = backward_graph(graph, tracer.calls, result, [tracer.buffer(p) for p in wrt])
        graph.outputs.extend(grads)
    return prune(graph)


def backward_graph(graph, calls, result, targets):
    """Append the nodes of backward, from ``result`` down to the buffers
    ``targets``; return the buffer of each target's gradient. The Functions
    are taken in the order that eager backward runs them (the newest
    generation first), so that a gradient summed over several uses of a
    value is summed in the same order, to the same bits."""
    needed, creator, generation = set(targets), {}, {}  # needed: on a path to a target
    for call in calls:
        f, xs, y, saved = call
        if needed.intersection(xs):
            needed.add(y)
        creator[y] = (max(generation.get(x, 0) for x in xs), call)
        generation[y] = creator[y][0] + 1
    grads, pending, order = {}, [], itertools.count()

    def send(x, gx):
        if x not in needed:
            return
        if x in grads:
            gx = graph.op("accumulate", elementwise(np.add), [grads[x], gx], graph.shape(x),
                          inplace=(0, 1))
        elif x in creator:
            heapq.heappush(pending, (-creator[x][0], next(order), x))
        grads[x] = gx

    send(result, graph.op("ones", lambda out: out.fill(1), [], graph.shape(result),
                          dtype=graph.buffers[result].dtype))
    while pending:
        _, _, y = heapq.heappop(pending)
        f, xs, _, saved = creator[y][1]
        for x, gx in zip(xs, LOWERING[type(f)][1](graph, f, xs, y, saved, grads[y])):
            send(x, gx)
    missing = [k for k, b in enumerate(targets) if b not in grads]
    if missing:
        raise ValueError(f"trace: wrt[{missing[0]}] does not take part in the result")
    return [grads[b] for b in targets]


def prune(graph):
    """Drop the nodes whose results nobody uses (the gradient of a feed)."""
    used, kept = set(graph.outputs), []
    for node in reversed(graph.nodes):
        if node.output in used:
            used.update(node.inputs)
            kept.append(node)
    graph.nodes = kept[::-1]
    return graph


# --- Planning: lifetimes by reference counting, then blocks of storage -----------------
def colour_paths(graph):
    """MXNet's heuristic for "could these two nodes run in parallel?": colour
    the longest path of the graph, then the longest path of what is left, and
    so on. Nodes of one colour lie on one path, so they run one after another."""
    producer = {node.output: n for n, node in enumerate(graph.nodes)}
    before = [sorted({producer[b] for b in node.inputs if b in producer}) for node in graph.nodes]
    colour = [None] * len(graph.nodes)
    for c in itertools.count():
        length, previous = {}, {}
        for n in range(len(graph.nodes)):  # nodes run in a topological order
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
    """Where each buffer lives: ``storage_of[b]`` (None for feeds and
    leaves), and the bytes of each block of storage, ``sizes``."""

    def __init__(self, graph, storage_of, sizes, inplace_nodes):
        self.graph, self.storage_of, self.sizes = graph, storage_of, sizes
        self.inplace_nodes = inplace_nodes  # the nodes that wrote over an input

    @property
    def total(self):
        """Bytes allocated for the whole run: the planned peak."""
        return int(np.sum(self.sizes, dtype=np.int64))


def plan_memory(graph, inplace=True, share=True, parallel=True):
    """Give every buffer that a node writes a block of storage, before
    anything is allocated, by simulating the run with a reference count per
    buffer (its readers still to run). ``inplace``, ``share`` and ``parallel``
    switch the three rules on or off (lesson 09 measures each)."""
    readers = graph.readers()
    count = [len(r) + (b in graph.outputs) for b, r in enumerate(readers)]
    colour = colour_paths(graph) if parallel else [0] * len(graph.nodes)

    def freeable(b, n):  # may the block of b be written by node n's path?
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
                sizes[block] = max(size, out.nbytes)  # nothing is allocated yet
        if block is None:
            sizes.append(out.nbytes)
            block = len(sizes) - 1
        storage_of[node.output] = block
        for b in set(node.inputs):  # the reference counts: this node has read them
            count[b] -= node.inputs.count(b)
            if count[b] == 0 and storage_of[b] not in (None, block) and freeable(b, n):
                free.append((storage_of[b], colour[n]))
        if count[node.output] == 0:  # written and never read
            free.append((block, colour[n]))
    return Plan(graph, storage_of, sizes, inplace_nodes)


class Executor:
    """Run a Plan: allocate its blocks once, then run every node into them."""

    def __init__(self, plan):
        graph = plan.graph
        self.graph, self.blocks = graph, [np.empty(size, np.uint8) for size in plan.sizes]
        self.arrays = [None] * len(graph.buffers)
        for b, block in enumerate(plan.storage_of):
            if block is not None:
                buffer = graph.buffers[b]
                self.arrays[b] = (self.blocks[block][:buffer.nbytes].view(buffer.dtype)
                                  .reshape(buffer.shape))
        for b, array in graph.leaves.items():
            self.arrays[b] = array  # by reference: an update in place is seen

    def __call__(self, *feeds):
        """The graph's outputs for these arrays (views of the plan's blocks:
        the next call writes over them)."""
        for b, array in zip(self.graph.feeds, check_feeds(self.graph, feeds)):
            self.arrays[b] = array
        arrays = self.arrays
        for node in self.graph.nodes:
            node.kernel(arrays[node.output], *[arrays[b] for b in node.inputs])
        outputs = [arrays[b] for b in self.graph.outputs]
        for b in self.graph.feeds:
            arrays[b] = None  # the caller's arrays are theirs to free
        return outputs


if __name__ == "__main__":
    import sys

    from dezero_mini.memory.plans import mlp_network, naive_total

    stage = sys.modules[__name__]
    network = mlp_network(stage)  # the course's standard workload: an MLP and its loss
    for training in (False, True):
        graph = network.trace(stage, training)
        plan = plan_memory(graph)
        same = all(np.array_equal(a, b) for a, b in
                   zip(Executor(plan)(*network.feeds), network.eager(stage, training)))
        print(f"{'training' if training else 'inference':9}: {len(graph.nodes)} nodes, "
              f"{naive_total(graph) / 1024:.0f} KiB if every buffer had its own array, "
              f"{plan.total / 1024:.0f} KiB planned ({naive_total(graph) / plan.total:.1f}x "
              f"less); the same bits as eager: {same}")
