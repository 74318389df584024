"""The core of dezero_mini: Variable, Function, the graph switches, arithmetic.

This is the framework of stage 05 of the course, cleaned up:

* ``Function.outputs`` are weak references, so a graph has no reference
  cycle and is freed by reference counting alone (stage 03);
* ``backward(retain_grad=False)`` drops intermediate gradients as soon as
  they have been used (stage 04);
* ``no_grad()`` / ``using_config`` switch graph building off (stage 05).

Gradients are Variables, as in DeZero, so that ``backward(create_graph=True)``
can build the graph of the backward pass for higher-order derivatives.
"""
import contextlib
import heapq
import itertools
import threading
import weakref

import numpy as np


# --- Configuration ----------------------------------------------------------------
class _Config(threading.local):
    """Switches read by every Function call.

    A ``threading.local`` subclass: the class attributes are the defaults in
    every thread, and a ``no_grad()`` block in one thread does not change the
    mode of another.
    """

    enable_backprop = True  # build the graph that backward needs
    train = True  # layers such as dropout behave differently at test time


Config = _Config()


@contextlib.contextmanager
def using_config(name, value):
    """Set ``Config.<name>`` to ``value`` inside the block; restore it after,
    even when the block raises."""
    if not hasattr(Config, name):
        raise AttributeError(f"using_config: Config has no setting {name!r}")
    old_value = getattr(Config, name)
    setattr(Config, name, value)
    try:
        yield
    finally:
        setattr(Config, name, old_value)


def no_grad():
    """A block in which Functions build no graph (for inference and updates)."""
    return using_config("enable_backprop", False)


def test_mode():
    """A block in which layers run in inference mode (``Config.train`` False)."""
    return using_config("train", False)


# --- Variable ---------------------------------------------------------------------
class Variable:
    """A node of the graph that holds an array (``data``) and its gradient."""

    __array_priority__ = 200  # so that ndarray * Variable calls Variable.__rmul__

    def __init__(self, data, name=None):
        if data is not None and not isinstance(data, np.ndarray):
            raise TypeError(
                f"Variable: data must be a numpy.ndarray or None, got {type(data).__name__}"
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
        if self.data is None:
            return "variable(None)"
        body = str(self.data).replace("\n", "\n" + " " * 9)
        return f"variable({body})"

    def set_creator(self, func):
        self.creator = func
        self.generation = func.generation + 1

    def cleargrad(self):
        self.grad = None

    def unchain(self):
        """Forget the creator: this Variable becomes a leaf of any later graph."""
        self.creator = None

    def unchain_backward(self):
        """Cut every creator link behind this Variable, freeing the graph."""
        funcs = [self.creator] if self.creator is not None else []
        while funcs:
            f = funcs.pop()
            for x in f.inputs:
                if x.creator is not None:
                    funcs.append(x.creator)
                    x.unchain()

    def backward(self, retain_grad=False, create_graph=False):
        """Compute the gradient of this Variable with respect to every
        Variable that it was computed from.

        retain_grad: keep the gradients of intermediate Variables (by default
            each is dropped once its Function has passed it on).
        create_graph: build the graph of the backward pass, so that the
            gradients can be differentiated again.
        """
        if self.grad is None:
            self.grad = Variable(np.ones_like(self.data))
        # A heap ordered by generation (newest first) visits each function
        # once, after every function that uses its outputs; O(log n) a push.
        order = itertools.count()
        pending, seen = [], set()

        def push(f):
            if f is not None and f not in seen:
                seen.add(f)
                heapq.heappush(pending, (-f.generation, next(order), f))

        push(self.creator)
        while pending:
            f = heapq.heappop(pending)[2]
            gys = [output().grad for output in f.outputs]
            with using_config("enable_backprop", create_graph):
                gxs = f.backward(*gys)
                if not isinstance(gxs, tuple):
                    gxs = (gxs,)
                for x, gx in zip(f.inputs, gxs):
                    x.grad = gx if x.grad is None else x.grad + gx
                    push(x.creator)
            if not retain_grad:
                for output in f.outputs:
                    output().grad = None  # passed on to the inputs; nobody reads it again

    def reshape(self, *shape):
        if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
            shape = shape[0]
        from dezero_mini import functions

        return functions.reshape(self, tuple(shape))

    def transpose(self, *axes):
        if len(axes) == 1 and isinstance(axes[0], (tuple, list)) or axes == (None,):
            axes = axes[0]
        from dezero_mini import functions

        return functions.transpose(self, axes or None)

    @property
    def T(self):
        from dezero_mini import functions

        return functions.transpose(self)

    def sum(self, axis=None, keepdims=False):
        from dezero_mini import functions

        return functions.sum(self, axis, keepdims)


class Parameter(Variable):
    """A Variable that a Layer owns and an optimizer updates."""


def as_array(x, array_module=np):
    """Turn a Python or NumPy scalar into a 0-d array; leave arrays alone."""
    return array_module.array(x) if np.isscalar(x) else x


def as_variable(obj):
    """Wrap an array or a scalar in a Variable; leave Variables alone."""
    return obj if isinstance(obj, Variable) else Variable(as_array(obj))


# --- Function ---------------------------------------------------------------------
class Function:
    """An operation of the graph. Subclasses define ``forward`` on arrays and
    ``backward`` on Variables (so that backward itself can be differentiated).
    """

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
            for output in outputs:
                output.set_creator(self)
            self.inputs = inputs
            self.outputs = [weakref.ref(output) for output in outputs]  # no cycle
        return outputs if len(outputs) > 1 else outputs[0]

    def forward(self, *xs):
        raise NotImplementedError(f"{type(self).__name__}.forward")

    def backward(self, *gys):
        raise NotImplementedError(f"{type(self).__name__}.backward")


# --- Arithmetic, with broadcasting ------------------------------------------------------
def _sum_to(gx, shape):
    """Bring a gradient back to the shape of a broadcast input."""
    if gx.shape == shape:
        return gx
    from dezero_mini import functions

    return functions.sum_to(gx, shape)


class Add(Function):
    def forward(self, x0, x1):
        self.x0_shape, self.x1_shape = x0.shape, x1.shape
        return x0 + x1

    def backward(self, gy):
        return _sum_to(gy, self.x0_shape), _sum_to(gy, self.x1_shape)


class Mul(Function):
    def forward(self, x0, x1):
        return x0 * x1

    def backward(self, gy):
        x0, x1 = self.inputs
        return _sum_to(gy * x1, x0.shape), _sum_to(gy * x0, x1.shape)


class Neg(Function):
    def forward(self, x):
        return -x

    def backward(self, gy):
        return -gy


class Sub(Function):
    def forward(self, x0, x1):
        self.x0_shape, self.x1_shape = x0.shape, x1.shape
        return x0 - x1

    def backward(self, gy):
        return _sum_to(gy, self.x0_shape), _sum_to(-gy, self.x1_shape)


class Div(Function):
    def forward(self, x0, x1):
        return x0 / x1

    def backward(self, gy):
        x0, x1 = self.inputs
        gx0 = gy / x1
        gx1 = gy * (-x0 / x1**2)
        return _sum_to(gx0, x0.shape), _sum_to(gx1, x1.shape)


class Pow(Function):
    def __init__(self, c):
        self.c = c

    def forward(self, x):
        return x**self.c

    def backward(self, gy):
        (x,) = self.inputs
        return self.c * x ** (self.c - 1) * gy


def add(x0, x1):
    return Add()(x0, x1)


def mul(x0, x1):
    return Mul()(x0, x1)


def neg(x):
    return Neg()(x)


def sub(x0, x1):
    return Sub()(x0, x1)


def rsub(x0, x1):
    return Sub()(x1, x0)


def div(x0, x1):
    return Div()(x0, x1)


def rdiv(x0, x1):
    return Div()(x1, x0)


def pow(x, c):
    return Pow(c)(x)


def setup_variable():
    """Give Variable its operators (called once when the package is imported)."""
    from dezero_mini import functions

    Variable.__add__ = Variable.__radd__ = add
    Variable.__mul__ = Variable.__rmul__ = mul
    Variable.__neg__ = neg
    Variable.__sub__, Variable.__rsub__ = sub, rsub
    Variable.__truediv__, Variable.__rtruediv__ = div, rdiv
    Variable.__pow__ = pow
    Variable.__matmul__ = functions.matmul
    Variable.__rmatmul__ = lambda self, other: functions.matmul(other, self)
