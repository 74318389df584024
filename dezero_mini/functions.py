"""Differentiable functions: ``import dezero_mini.functions as F``.

Each ``backward`` is written with Variables and these same functions, so the
backward pass can itself be differentiated (``backward(create_graph=True)``).
"""
import numpy as np

from dezero_mini import utils
from dezero_mini.core import Function, as_variable
from dezero_mini.core import add, div, mul, neg, pow, rdiv, rsub, sub  # noqa: F401 (re-exported)


# --- Element-wise -----------------------------------------------------------------
class Square(Function):
    def forward(self, x):
        return x**2

    def backward(self, gy):
        (x,) = self.inputs
        return 2 * x * gy


class Exp(Function):
    def forward(self, x):
        return np.exp(x)

    def backward(self, gy):
        return gy * self.outputs[0]()


class Log(Function):
    def forward(self, x):
        return np.log(x)

    def backward(self, gy):
        (x,) = self.inputs
        return gy / x


class Sin(Function):
    def forward(self, x):
        return np.sin(x)

    def backward(self, gy):
        (x,) = self.inputs
        return gy * cos(x)


class Cos(Function):
    def forward(self, x):
        return np.cos(x)

    def backward(self, gy):
        (x,) = self.inputs
        return gy * -sin(x)


class Tanh(Function):
    def forward(self, x):
        return np.tanh(x)

    def backward(self, gy):
        y = self.outputs[0]()
        return gy * (1 - y * y)


class Sigmoid(Function):
    def forward(self, x):
        return np.tanh(x * 0.5) * 0.5 + 0.5  # overflow-free form of 1 / (1 + e^-x)

    def backward(self, gy):
        y = self.outputs[0]()
        return gy * y * (1 - y)


def square(x):
    return Square()(x)


def exp(x):
    return Exp()(x)


def log(x):
    return Log()(x)


def sin(x):
    return Sin()(x)


def cos(x):
    return Cos()(x)


def tanh(x):
    return Tanh()(x)


def sigmoid(x):
    return Sigmoid()(x)


# --- Shapes -----------------------------------------------------------------------
class Reshape(Function):
    def __init__(self, shape):
        self.shape = shape

    def forward(self, x):
        self.x_shape = x.shape
        return x.reshape(self.shape)

    def backward(self, gy):
        return reshape(gy, self.x_shape)


class Transpose(Function):
    def __init__(self, axes=None):
        self.axes = axes

    def forward(self, x):
        return x.transpose(self.axes)

    def backward(self, gy):
        if self.axes is None:
            return transpose(gy)
        inverse = tuple(np.argsort([a % len(self.axes) for a in self.axes]))
        return transpose(gy, inverse)


def reshape(x, shape):
    if x.shape == shape:
        return as_variable(x)
    return Reshape(shape)(x)


def transpose(x, axes=None):
    return Transpose(axes)(x)


# --- Sums and broadcasting ---------------------------------------------------------------
class Sum(Function):
    def __init__(self, axis=None, keepdims=False):
        self.axis, self.keepdims = axis, keepdims

    def forward(self, x):
        self.x_shape = x.shape
        return x.sum(axis=self.axis, keepdims=self.keepdims)

    def backward(self, gy):
        gy = utils.reshape_sum_backward(gy, self.x_shape, self.axis, self.keepdims)
        return broadcast_to(gy, self.x_shape)


class SumTo(Function):
    def __init__(self, shape):
        self.shape = shape

    def forward(self, x):
        self.x_shape = x.shape
        return utils.sum_to(x, self.shape)

    def backward(self, gy):
        return broadcast_to(gy, self.x_shape)


class BroadcastTo(Function):
    def __init__(self, shape):
        self.shape = shape

    def forward(self, x):
        self.x_shape = x.shape
        return np.broadcast_to(x, self.shape).copy()

    def backward(self, gy):
        return sum_to(gy, self.x_shape)


def sum(x, axis=None, keepdims=False):
    return Sum(axis, keepdims)(x)


def sum_to(x, shape):
    if x.shape == shape:
        return as_variable(x)
    return SumTo(shape)(x)


def broadcast_to(x, shape):
    if x.shape == shape:
        return as_variable(x)
    return BroadcastTo(shape)(x)


# --- Linear algebra ----------------------------------------------------------------------
class MatMul(Function):
    def forward(self, x, W):
        return x @ W

    def backward(self, gy):
        x, W = self.inputs
        return matmul(gy, W.T), matmul(x.T, gy)


def matmul(x, W):
    return MatMul()(x, W)


def linear(x, W, b=None):
    """``x @ W + b`` (the bias broadcast over the batch)."""
    y = matmul(x, W)
    return y if b is None else y + b


# --- Losses ------------------------------------------------------------------------------
class MeanSquaredError(Function):
    def forward(self, x0, x1):
        if x0.shape != x1.shape:
            raise ValueError("prediction and target must have the same shape")
        diff = x0 - x1
        return np.array((diff**2).sum() / diff.size)

    def backward(self, gy):
        x0, x1 = self.inputs
        diff = x0 - x1
        gx0 = gy * diff * (2.0 / diff.size)
        return gx0, -gx0


def mean_squared_error(x0, x1):
    return MeanSquaredError()(x0, x1)
