"""Stage 10: checkpointing: keep some activations, recompute the rest in backward.

Stage 08's framework, plus one Function. ``checkpoint(function, *inputs)``
makes a segment of layers one node of the graph: forward runs it under
``no_grad()`` and keeps only the inputs; backward runs it again with the
graph and backpropagates through that copy. With about sqrt(n) segments of
n layers, memory grows like sqrt(n), for one more forward pass (Chen et al.,
"Training Deep Nets with Sublinear Memory Cost", 2016). The lesson,
notebooks/10_checkpointing.ipynb, measures it and says when the gradients
are bit-identical to the plain ones (a chain) and when only equal up to the
order of a sum.

Run ``python steps/step10_checkpointing.py``.
"""
import contextlib
import heapq
import itertools
import os
import weakref

import numpy as np

STAGE = "10"
STAGE_TITLE = "checkpointing"


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


# --- Checkpointing: keep a segment's inputs, recompute the segment in backward -------
class Checkpoint(Function):
    """``function`` as one node of the graph: its forward runs ``function``
    without a graph and keeps only the inputs' arrays; its backward runs it
    again, with the graph, and backpropagates through that copy."""

    __slots__ = ("function", "xs")
    saves = ("xs",)

    def __init__(self, function):
        self.function = function

    def forward(self, *xs):
        self.xs = xs
        with no_grad():  # each activation inside dies once the next operation has read it
            y = self.function(*[Variable(x) for x in xs])
        if not isinstance(y, Variable):
            raise TypeError(f"checkpoint: the function must return one Variable, "
                            f"got {type(y).__name__}")
        return y.data

    def backward(self, gy):
        inputs = [Variable(x) for x in self.xs]
        with using_config("enable_backprop", True):  # this time backward needs the graph
            y = self.function(*inputs)
        y.grad = gy
        y.backward()  # the segment's own backward: its inputs and parameters get gradients
        return tuple(np.zeros_like(x.data) if x.grad is None else x.grad for x in inputs)


def checkpoint(function, *inputs):
    """``function(*inputs)``, keeping only ``inputs`` for backward, which
    recomputes the rest. ``function`` must return one Variable and read no
    Variable of the graph except ``inputs`` (parameters, leaves, are fine):
    pass every other one as an input."""
    return Checkpoint(function)(*inputs)


if __name__ == "__main__":
    import sys

    from dezero_mini.memory.depth import DeepChain, sqrt_segments, step_peak

    stage, depth = sys.modules[__name__], 256
    segments = sqrt_segments(depth)
    plain, cut = DeepChain(stage, depth=depth), DeepChain(stage, depth=depth, segments=segments)
    plain_peak, peak = step_peak(plain), step_peak(cut)  # one training step each
    print(f"{depth} residual layers, one training step: peak {plain_peak / 2**20:.1f} MiB plain, "
          f"{peak / 2**20:.1f} MiB in {segments} checkpointed segments "
          f"({plain_peak / peak:.1f}x less)")
    print("a chain: the gradient of every parameter is the same, to the bit:",
          all(np.array_equal(p.grad, q.grad) for p, q in zip(plain.parameters, cut.parameters)))
