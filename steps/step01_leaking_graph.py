"""Stage 01: a working autograd framework that leaks memory twice.

1. A global graph registry (like the ``TcGraph`` of the nnengine-pro
   framework, whose memory leak a write-up traced) records every Variable
   and every Function ever made and never forgets them.
2. A Variable holds its ``creator`` Function and the Function holds its
   ``outputs``: each pair is a reference cycle, which reference counting
   alone can never free.

Run ``python steps/step01_leaking_graph.py`` to watch the registry grow.
"""
import heapq
import itertools

import numpy as np

STAGE = "01"
STAGE_TITLE = "leaking graph"


# --- The global graph registry: the first leak --------------------------------
class GraphRegistry:
    """Every Variable and Function the program has made, kept for a backend
    that would compile the whole graph. Nothing ever removes an entry."""

    def __init__(self):
        self.variables = []
        self.functions = []

    def clear(self):
        self.variables.clear()
        self.functions.clear()


REGISTRY = GraphRegistry()


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
        REGISTRY.variables.append(self)

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

    def backward(self):
        if self.grad is None:
            self.grad = np.ones_like(self.data)
        # A heap ordered by generation (newest first) visits each function
        # once, after every function that uses its outputs.
        order = itertools.count()
        pending, seen = [], set()

        def push(f):
            if f is not None and f not in seen:
                seen.add(f)
                heapq.heappush(pending, (-f.generation, next(order), f))

        push(self.creator)
        while pending:
            f = heapq.heappop(pending)[2]
            gys = [output.grad for output in f.outputs]
            gxs = f.backward(*gys)
            if not isinstance(gxs, tuple):
                gxs = (gxs,)
            for x, gx in zip(f.inputs, gxs):
                x.grad = gx if x.grad is None else x.grad + gx
                push(x.creator)


def as_array(x):
    return np.array(x) if np.isscalar(x) else x


def as_variable(obj):
    return obj if isinstance(obj, Variable) else Variable(as_array(obj))


# --- Function -------------------------------------------------------------------
class Function:
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
        self.generation = max(x.generation for x in inputs)
        for output in outputs:
            output.set_creator(self)  # Variable -> Function ...
        self.inputs = inputs
        self.outputs = outputs  # ... and Function -> Variable: a cycle
        REGISTRY.functions.append(self)
        return outputs if len(outputs) > 1 else outputs[0]

    def forward(self, *xs):
        raise NotImplementedError

    def backward(self, *gys):
        raise NotImplementedError


def reduce_to_shape(x, shape):
    """Sum the array ``x`` over the axes that broadcasting added to ``shape``."""
    lead = x.ndim - len(shape)
    axes = tuple(range(lead)) + tuple(
        lead + i for i, n in enumerate(shape) if n == 1 and x.shape[lead + i] != 1
    )
    return x.sum(axis=axes, keepdims=True).reshape(shape)


# --- Arithmetic (with broadcasting) ------------------------------------------------
class Add(Function):
    def forward(self, x0, x1):
        return x0 + x1

    def backward(self, gy):
        x0, x1 = self.inputs
        return reduce_to_shape(gy, x0.shape), reduce_to_shape(gy, x1.shape)


class Sub(Function):
    def forward(self, x0, x1):
        return x0 - x1

    def backward(self, gy):
        x0, x1 = self.inputs
        return reduce_to_shape(gy, x0.shape), reduce_to_shape(-gy, x1.shape)


class Mul(Function):
    def forward(self, x0, x1):
        return x0 * x1

    def backward(self, gy):
        x0, x1 = self.inputs
        gx0, gx1 = gy * x1.data, gy * x0.data
        return reduce_to_shape(gx0, x0.shape), reduce_to_shape(gx1, x1.shape)


class Div(Function):
    def forward(self, x0, x1):
        return x0 / x1

    def backward(self, gy):
        x0, x1 = self.inputs
        gx0 = gy / x1.data
        gx1 = -gy * x0.data / x1.data**2
        return reduce_to_shape(gx0, x0.shape), reduce_to_shape(gx1, x1.shape)


class Neg(Function):
    def forward(self, x):
        return -x

    def backward(self, gy):
        return -gy


class Pow(Function):
    def __init__(self, c):
        self.c = c

    def forward(self, x):
        return x**self.c

    def backward(self, gy):
        x = self.inputs[0].data
        return self.c * x ** (self.c - 1) * gy


class Square(Function):
    def forward(self, x):
        return x**2

    def backward(self, gy):
        return 2 * self.inputs[0].data * gy


# --- Element-wise functions ---------------------------------------------------------
class Exp(Function):
    def forward(self, x):
        return np.exp(x)

    def backward(self, gy):
        return gy * self.outputs[0].data


class Sigmoid(Function):
    def forward(self, x):
        return np.tanh(x * 0.5) * 0.5 + 0.5  # overflow-free form of 1 / (1 + e^-x)

    def backward(self, gy):
        y = self.outputs[0].data
        return gy * y * (1 - y)


class Tanh(Function):
    def forward(self, x):
        return np.tanh(x)

    def backward(self, gy):
        y = self.outputs[0].data
        return gy * (1 - y * y)


# --- Shapes and reductions ----------------------------------------------------------
class Reshape(Function):
    def __init__(self, shape):
        self.shape = shape

    def forward(self, x):
        return x.reshape(self.shape)

    def backward(self, gy):
        return gy.reshape(self.inputs[0].shape)


class Transpose(Function):
    def forward(self, x):
        return x.T

    def backward(self, gy):
        return gy.T


class Sum(Function):
    def __init__(self, axis=None, keepdims=False):
        self.axis, self.keepdims = axis, keepdims

    def forward(self, x):
        return x.sum(axis=self.axis, keepdims=self.keepdims)

    def backward(self, gy):
        shape = self.inputs[0].shape
        if not self.keepdims and self.axis is not None:
            axes = self.axis if isinstance(self.axis, tuple) else (self.axis,)
            gy = np.expand_dims(gy, tuple(a % len(shape) for a in axes))
        return np.broadcast_to(gy, shape).copy()


class SumTo(Function):
    def __init__(self, shape):
        self.shape = shape

    def forward(self, x):
        return reduce_to_shape(x, self.shape)

    def backward(self, gy):
        return np.broadcast_to(gy, self.inputs[0].shape).copy()


class BroadcastTo(Function):
    def __init__(self, shape):
        self.shape = shape

    def forward(self, x):
        return np.broadcast_to(x, self.shape).copy()

    def backward(self, gy):
        return reduce_to_shape(gy, self.inputs[0].shape)


# --- Linear algebra and loss ----------------------------------------------------------
class MatMul(Function):
    def forward(self, x, W):
        return x @ W

    def backward(self, gy):
        x, W = self.inputs
        return gy @ W.data.T, x.data.T @ gy


class MeanSquaredError(Function):
    def forward(self, x0, x1):
        if x0.shape != x1.shape:
            raise ValueError("prediction and target must have the same shape")
        diff = x0 - x1
        return np.array((diff**2).sum() / diff.size)

    def backward(self, gy):
        x0, x1 = self.inputs
        diff = x0.data - x1.data
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


if __name__ == "__main__":
    import gc

    def live_objects():
        return len([o for o in gc.get_objects() if isinstance(o, (Variable, Function))])

    gc.disable()  # leave freeing to reference counting alone, as in the lessons
    rng = np.random.RandomState(0)
    W = Variable(rng.randn(100, 100) * 0.1, name="W")
    for batch in range(1, 6):
        W.cleargrad()
        x = Variable(rng.randn(64, 100))
        loss = sum(sigmoid(matmul(x, W)))
        loss.backward()
        del x, loss  # the user lets go of this batch's graph
        print(f"after batch {batch}: {live_objects()} Variables and Functions alive")
    print(f"gc.collect() found {gc.collect()} unreachable objects; {live_objects()} still alive")
    held = len(REGISTRY.variables), len(REGISTRY.functions)
    print("the registry holds %d Variables and %d Functions" % held)
