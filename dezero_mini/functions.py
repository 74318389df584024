"""Differentiable functions: ``import dezero_mini.functions as F``.

Each ``backward`` is written once, with operators and methods that numpy
arrays and Variables share: it runs on arrays in an ordinary backward pass
(fast: no Variable or Function is made for a gradient) and on Variables with
``backward(create_graph=True)``, where the backward pass is itself
differentiated. Constants that a backward needs (masks of relu, clip, max,
dropout) are plain arrays: they take part in the product but have no
gradient of their own.

Memory notes, since this is a course about memory:

* a Function keeps only what its backward reads, named in its ``saves``
  (also its ``__slots__``) and set in ``forward`` (stage 08 of the course):
  shapes for sums, reshapes and broadcasts, a mask of one byte an element
  for relu, clip, max and dropout, the output for exp, tanh, sigmoid and
  softmax (their derivatives are easiest in terms of it), the inputs for
  products; never an input Variable, so a Variable the user lets go of is
  freed at once;
* ``Config.check_saved`` checks it: every Function here passes;
* ``linear`` and ``softmax_cross_entropy`` are single Functions, so the graph
  holds neither ``x @ W`` nor the probabilities between forward and backward.
"""
import builtins  # (this module defines its own sum, max and min)
import math
import numbers

import numpy as np

from dezero_mini import arrays, functions_conv
from dezero_mini import validation  # (a module: its helpers are no functions of F)
from dezero_mini.core import (  # noqa: F401 (re-exported)
    Cast,
    Config,
    Function,
    Pow,
    Power,
    Variable,
    _FLOAT64,
    _INEXACT_DTYPES,
    _apply,
    _gradient_targets,
    _in_gradient_dtype,
    _number_array,
    _sum_to,
    _unary,
    add,
    as_array,
    as_variable,
    div,
    mul,
    neg,
    pow,
    rdiv,
    rpow,
    rsub,
    sub,
)
# Convolution and pooling live in their own module (as in DeZero) and are
# part of F: ``F.conv2d``, ``F.pooling``, ...
from dezero_mini.functions_conv import (  # noqa: F401 (re-exported)
    average_pooling,
    col2im,
    conv2d,
    deconv2d,
    im2col,
    pooling,
)


def _data(x):
    """The array behind a Variable, or the array itself."""
    return x.data if isinstance(x, Variable) else x


def _const(value, like):
    """A 0-d array of ``like``'s dtype: a bare Python number would become a
    float64 array in a Variable operation and turn float32 gradients into
    float64 (NumPy 2 promotes 0-d arrays like any other array). For integer
    and bool ``like`` it is float64, as NumPy's mean of integers is: in their
    dtype, the 1/3 of a mean over three would be 0."""
    dtype = like.dtype
    if dtype.__class__ not in _INEXACT_DTYPES:
        dtype = _FLOAT64
    array = _number_array(value, dtype)  # (made once: see core)
    return np.asarray(value, dtype=dtype) if array is None else array


def _inexact_dtype(dtype):
    """The dtype in which NumPy's ``exp`` computes on ``dtype``: integers and
    bools as floats (float16 for 8-bit ones, float64 for int64), floats
    unchanged."""
    return dtype if np.issubdtype(dtype, np.inexact) else np.result_type(dtype, np.float16)


def _as_inexact(x):
    """The Variable ``x`` in the dtype NumPy's ``exp`` computes it in
    (``_inexact_dtype``), through a Cast node, so that its gradient still
    reaches ``x``; ``x`` itself when it holds floats."""
    if np.issubdtype(x.dtype, np.inexact):
        return x
    return Cast(_inexact_dtype(x.dtype))(x)


def _inexact(x):
    """``x`` (an array) as NumPy's ``exp`` would compute it (``_inexact_dtype``).
    For functions that subtract before ``exp``: on uint8 the subtraction
    itself would wrap (0 - 3 is 253) and give nan."""
    return x.astype(_inexact_dtype(x.dtype), copy=False)


# A backward formula runs on arrays in an ordinary backward pass and on
# Variables when the pass builds a graph (see Function). Operators and the
# methods ``sum``, ``reshape``, ``transpose`` and ``T`` work on both kinds; a
# formula that needs another function calls core's ``_apply`` or one of the
# helpers below.
def _sin(x):
    return sin(x) if isinstance(x, Variable) else np.sin(x)


def _cos(x):
    return cos(x) if isinstance(x, Variable) else np.cos(x)


def _exp(x):
    return exp(x) if isinstance(x, Variable) else np.exp(x)


def _broadcast_to(x, shape):
    return x if x.shape == shape else _apply(BroadcastTo(shape), x)


# --- Element-wise -----------------------------------------------------------------
class Square(Function):
    __slots__ = saves = ("x",)
    saved_from = {"x": "inputs[0]"}

    def forward(self, x):
        self.x = x
        return x**2

    def backward(self, gy):
        x = self.x
        return _const(2, x) * x * gy


class Exp(Function):
    __slots__ = saves = ("y",)  # the output, not the input: exp is its own derivative
    saved_from = {"y": "outputs[0]"}

    def forward(self, x):
        self.y = np.exp(x)
        return self.y

    def backward(self, gy):
        return gy * self.y


class Log(Function):
    __slots__ = saves = ("x",)
    saved_from = {"x": "inputs[0]"}

    def forward(self, x):
        self.x = x
        return np.log(x)

    def backward(self, gy):
        x = self.x
        return gy / x


class Sin(Function):
    __slots__ = saves = ("x",)
    saved_from = {"x": "inputs[0]"}

    def forward(self, x):
        self.x = x
        return np.sin(x)

    def backward(self, gy):
        x = self.x
        return gy * _cos(x)


class Cos(Function):
    __slots__ = saves = ("x",)
    saved_from = {"x": "inputs[0]"}

    def forward(self, x):
        self.x = x
        return np.cos(x)

    def backward(self, gy):
        x = self.x
        return gy * -_sin(x)


class Tanh(Function):
    __slots__ = saves = ("y",)  # the output: tanh' = 1 - y^2
    saved_from = {"y": "outputs[0]"}

    def forward(self, x):
        self.y = np.tanh(x)
        return self.y

    def backward(self, gy):
        y = self.y
        return gy * (_const(1, y) - y * y)


class Sigmoid(Function):
    """``1 / (1 + e^-x)``, accurate to the last bit in both tails: the left
    tail is ``1 / e^-x`` (``sigmoid(-40)`` is 4.2e-18, so ``log(sigmoid(-40))``
    is -40). The form ``0.5 + 0.5 tanh(x / 2)`` loses it: ``tanh`` rounds to
    -1 there, and 0.5 - 0.5 cancels to 0."""

    __slots__ = saves = ("y",)  # the output: sigmoid' = y (1 - y)
    saved_from = {"y": "outputs[0]"}

    def forward(self, x):
        x = _inexact(x)  # as np.exp computes it: -x on uint8 would wrap around
        with np.errstate(over="ignore"):  # e^-x is inf below -709 (float64), and 1 / inf the right 0
            self.y = 1 / (1 + np.exp(-x))
        return self.y

    def backward(self, gy):
        y = self.y
        return gy * y * (_const(1, y) - y)


class ReLU(Function):
    # The output, not the input or a mask: y > 0 exactly where x > 0, and the
    # output is usually kept anyway (the next layer's input), so this costs
    # nothing; a mask would be a quarter of a float32 array more, made even
    # under no_grad().
    __slots__ = saves = ("y",)

    def forward(self, x):
        self.y = np.maximum(x, 0).astype(x.dtype, copy=False)
        return self.y

    def backward(self, gy):
        y = self.y
        if isinstance(gy, Variable) or gy.ndim == 0:
            return gy * (y > 0)
        # Block by block along the first axis, so that the mask ``y > 0`` is
        # about 64 KiB at a time: y, gy and gx are alive together here, and a
        # whole mask on top was the peak of a CNN's training step.
        gx = np.empty_like(gy)
        block = builtins.max(1, 65536 * len(gy) // builtins.max(gy.size, 1))  # rows
        for start in range(0, len(gy), block):
            rows = slice(start, start + block)
            np.multiply(gy[rows], y[rows] > 0, out=gx[rows])
        return gx


class LeakyReLU(Function):
    __slots__ = ("slope", "mask")
    saves = ("mask",)

    def __init__(self, slope):
        self.slope = slope

    def forward(self, x):
        self.mask = x > 0
        return np.where(self.mask, x, x * self.slope).astype(x.dtype, copy=False)

    def backward(self, gy):
        return gy * np.where(self.mask, 1.0, self.slope).astype(gy.dtype, copy=False)


class Clip(Function):
    __slots__ = ("x_min", "x_max", "inside")
    saves = ("inside",)  # where the gradient passes: one byte an element

    def __init__(self, x_min, x_max):
        if x_min is not None and x_max is not None and np.any(np.asarray(x_min) > np.asarray(x_max)):
            raise ValueError(f"Clip: x_min ({x_min}) is greater than x_max ({x_max})")
        self.x_min, self.x_max = x_min, x_max

    def forward(self, x):
        inside = np.ones(x.shape, dtype=bool)
        if self.x_min is not None:
            inside &= x >= self.x_min
        if self.x_max is not None:
            inside &= x <= self.x_max
        self.inside = inside
        return np.clip(x, self.x_min, self.x_max)

    def backward(self, gy):
        return gy * self.inside


square = _unary(Square, "square")
exp = _unary(Exp, "exp")
log = _unary(Log, "log")
sin = _unary(Sin, "sin")
cos = _unary(Cos, "cos")
tanh = _unary(Tanh, "tanh")
sigmoid = _unary(Sigmoid, "sigmoid")
relu = _unary(ReLU, "relu")


def leaky_relu(x, slope=0.2):
    return LeakyReLU(slope)(x)


def clip(x, x_min, x_max):
    """Limit ``x`` to ``[x_min, x_max]``; the gradient is zero where it was cut.
    A bound of nan is a ValueError: NumPy would make every output nan."""
    for argument, bound in (("x_min", x_min), ("x_max", x_max)):
        if bound is not None and not isinstance(bound, Variable):
            try:
                poisoned = bool(np.isnan(np.asarray(bound, dtype=np.float64)).any())
            except (TypeError, ValueError):
                raise TypeError(f"clip: {argument} must be a number or an array of numbers, "
                                f"got {validation.describe(bound)}") from None
            if poisoned:
                raise ValueError(f"clip: {argument} is nan; every output would be nan")
    return Clip(x_min, x_max)(x)


# --- Softmax ----------------------------------------------------------------------
class Softmax(Function):
    __slots__ = ("axis", "y")
    saves = ("y",)
    saved_from = {"y": "outputs[0]"}

    def __init__(self, axis=1):
        self.axis = axis

    def forward(self, x):
        self.axis = arrays.normalize_axes(self.axis, x.ndim)
        x = _inexact(x)  # the result is a float, as np.exp's is
        if x.size == 0:
            self.y = np.exp(x)
            return self.y  # nothing to normalise (and max() of nothing is an error)
        # (asarray: for a 0-d x numpy gives a scalar, which has no out=)
        y = np.asarray(x - x.max(axis=self.axis, keepdims=True))  # exp() cannot overflow
        np.exp(y, out=y)
        y /= y.sum(axis=self.axis, keepdims=True)
        self.y = y
        return y

    def backward(self, gy):
        y = self.y
        gx = y * gy
        return gx - y * gx.sum(axis=self.axis, keepdims=True)


class LogSoftmax(Function):
    __slots__ = ("axis", "y")
    saves = ("y",)
    saved_from = {"y": "outputs[0]"}

    def __init__(self, axis=1):
        self.axis = axis

    def forward(self, x):
        self.axis = arrays.normalize_axes(self.axis, x.ndim)
        self.y = x - arrays.logsumexp(x, self.axis)
        return self.y

    def backward(self, gy):
        y = self.y
        return gy - _exp(y) * gy.sum(axis=self.axis, keepdims=True)


def softmax(x, axis=1):
    return Softmax(axis)(x)


def log_softmax(x, axis=1):
    return LogSoftmax(axis)(x)


# --- Shapes -----------------------------------------------------------------------
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
    __slots__ = ("axes",)
    saves = ()

    def __init__(self, axes=None):
        self.axes = axes

    def forward(self, x):
        return x.transpose(self.axes)

    def backward(self, gy):
        if self.axes is None:
            return gy.transpose()
        inverse = tuple(np.argsort([a % len(self.axes) for a in self.axes]))
        return gy.transpose(inverse)


def _plain_index(slices):
    """``slices`` with Variables replaced by their arrays (index with a Variable
    of labels, as ``x[np.arange(N), t]``)."""
    if isinstance(slices, tuple):
        return tuple(_data(s) for s in slices)
    return _data(slices)


def _is_basic_index(slices):
    """True when indexing selects each element at most once (no index arrays):
    the gradient can then be assigned instead of scatter-added."""
    parts = slices if isinstance(slices, tuple) else (slices,)
    return all(p is None or p is Ellipsis or isinstance(p, (int, np.integer, slice)) for p in parts)


class GetItem(Function):
    __slots__ = ("slices", "x_shape")
    saves = ("x_shape",)

    def __init__(self, slices):
        self.slices = slices

    def forward(self, x):
        self.x_shape = x.shape
        y = x[self.slices]
        # Basic indexing returns a view, which would keep all of x alive for
        # as long as y is; a copy holds only the selected elements.
        return y.copy() if isinstance(y, np.ndarray) and y.base is not None else y

    def backward(self, gy):
        return _apply(GetItemGrad(self.slices, self.x_shape), gy)


class GetItemGrad(Function):
    """The gradient of ``x[slices]``: ``gy`` scatter-added into zeros of
    ``x``'s shape (an element selected twice gets both gradients)."""

    __slots__ = ("slices", "in_shape")
    saves = ()

    def __init__(self, slices, in_shape):
        self.slices, self.in_shape = slices, in_shape

    def forward(self, gy):
        gx = np.zeros(self.in_shape, dtype=gy.dtype)
        if _is_basic_index(self.slices):
            gx[self.slices] = gy
        else:
            np.add.at(gx, self.slices, gy)
        return gx

    def backward(self, ggx):
        return ggx[self.slices]


class BroadcastTo(Function):
    __slots__ = ("shape", "x_shape")
    saves = ("x_shape",)

    def __init__(self, shape):
        self.shape = shape

    def forward(self, x):
        self.x_shape = x.shape
        return np.broadcast_to(x, self.shape).copy()

    def backward(self, gy):
        return _sum_to(gy, self.x_shape)


class SumTo(Function):
    __slots__ = ("shape", "x_shape")
    saves = ("x_shape",)

    def __init__(self, shape):
        self.shape = shape

    def forward(self, x):
        self.x_shape = x.shape
        return arrays.sum_to(x, self.shape)

    def backward(self, gy):
        return _broadcast_to(gy, self.x_shape)


class Concat(Function):
    """The inputs joined along an existing axis (``np.concatenate``,
    ``torch.cat``); each input's gradient is its own slice of ``gy``."""

    __slots__ = ("axis", "ends")
    saves = ("ends",)

    def __init__(self, axis=0):
        self.axis = axis

    def forward(self, *xs):
        if not xs:
            raise ValueError("needs at least one array")
        if xs[0].ndim == 0:
            raise ValueError("0-d arrays cannot be concatenated (stack() makes a new axis)")
        (self.axis,) = arrays.normalize_axes(self.axis, xs[0].ndim)
        y = np.concatenate(xs, axis=self.axis)
        self.ends = np.cumsum([x.shape[self.axis] for x in xs]).tolist()
        return y

    def backward(self, gy):
        lead = (slice(None),) * self.axis
        return tuple(gy[lead + (slice(start, end),)]
                     for start, end in zip([0] + self.ends[:-1], self.ends))


class Stack(Concat):
    """The inputs (all of one shape) joined along a new axis (``np.stack``,
    ``torch.stack``); each input's gradient is its own index of ``gy``."""

    __slots__ = ("count",)
    saves = ("count",)

    def forward(self, *xs):
        if not xs:
            raise ValueError("needs at least one array")
        (self.axis,) = arrays.normalize_axes(self.axis, xs[0].ndim + 1)
        self.count = len(xs)
        return np.stack(xs, axis=self.axis)

    def backward(self, gy):
        lead = (slice(None),) * self.axis
        return tuple(gy[lead + (i,)] for i in range(self.count))


def concat(xs, axis=0):
    """Join a sequence of Variables (or arrays) along ``axis``."""
    return Concat(axis)(*xs)


def stack(xs, axis=0):
    """Join a sequence of Variables (or arrays) of one shape along a new ``axis``."""
    return Stack(axis)(*xs)


def _as_shape(shape, function="reshape"):
    """``shape`` as a tuple of whole numbers: one, or a tuple or list of them
    (DeZero's forms); a TypeError naming ``function`` for anything else."""
    if isinstance(shape, (int, np.integer)) and not isinstance(shape, bool):
        return (int(shape),)
    if isinstance(shape, (tuple, list)) and all(
            isinstance(n, (int, np.integer)) and not isinstance(n, bool) for n in shape):
        return tuple(int(n) for n in shape)
    raise TypeError(f"{function}: shape must be a whole number or a tuple of them, "
                    f"got {validation.describe(shape)}")


def reshape(x, shape):
    shape = _as_shape(shape)
    if x.shape == shape:
        return as_variable(x)
    return Reshape(shape)(x)


def transpose(x, axes=None):
    return Transpose(axes)(x)


def get_item(x, slices):
    """``x[slices]`` (any numpy index); its gradient scatters back into x."""
    return GetItem(_plain_index(slices))(x)


def expand_dims(x, axis):
    """``x`` with a new axis of size 1 at ``axis`` (in ``[-ndim - 1, ndim]``)."""
    x = as_variable(x)
    shape = list(x.shape)
    if not isinstance(axis, (int, np.integer)) or not -len(shape) - 1 <= axis <= len(shape):
        raise arrays._AxisError(f"expand_dims: axis {axis!r} is out of range for an array of shape "
                               f"{x.shape} (allowed: {-len(shape) - 1} to {len(shape)})")
    shape.insert(axis if axis >= 0 else len(shape) + axis + 1, 1)
    return reshape(x, tuple(shape))


def flatten(x):
    """Keep the first axis (the batch), flatten the others."""
    x = as_variable(x)
    if x.ndim == 0:  # (x.shape[0] was IndexError 'tuple index out of range')
        raise ValueError("flatten: keeps the first axis (the batch) and flattens the others; "
                         "a 0-d value has no axis: reshape it to (1, 1) first")
    return reshape(x, (x.shape[0], -1))


def broadcast_to(x, shape):
    shape = _as_shape(shape, "broadcast_to")
    if x.shape == shape:
        return as_variable(x)
    return BroadcastTo(shape)(x)


def sum_to(x, shape):
    """Sum ``x`` down to ``shape``, the inverse of ``broadcast_to``: ``shape``
    must broadcast to ``x.shape``, or this raises a ValueError (where DeZero
    returns an array of another shape without a word)."""
    shape = _as_shape(shape, "sum_to")
    if x.shape == shape:
        return as_variable(x)
    return SumTo(shape)(x)


# --- Reductions -------------------------------------------------------------------
class Sum(Function):
    __slots__ = ("axis", "keepdims", "x_shape")
    saves = ("x_shape",)

    def __init__(self, axis=None, keepdims=False):
        self.axis, self.keepdims = axis, keepdims

    def forward(self, x):
        self.x_shape = x.shape
        self.axis = arrays.normalize_axes(self.axis, x.ndim)
        return x.sum(axis=self.axis, keepdims=self.keepdims)

    def backward(self, gy):
        gy = arrays.reshape_sum_backward(gy, self.x_shape, self.axis, self.keepdims)
        return _broadcast_to(gy, self.x_shape)


class Max(Function):
    """The gradient goes to the elements equal to the maximum (to each of
    them when there is a tie). A NaN is the maximum of what it is in, as in
    NumPy and PyTorch, and the gradient goes to it (to each NaN), as
    PyTorch's ``max()`` and ``max(dim)`` give it (``amax(dim)`` makes the
    whole row's gradient NaN instead)."""

    __slots__ = ("axis", "keepdims", "mask")
    saves = ("mask",)  # where the extreme is: one byte an element, not the input's array

    _reduce = staticmethod(np.max)

    def __init__(self, axis=None, keepdims=False):
        self.axis, self.keepdims = axis, keepdims

    def forward(self, x):
        self.axis = arrays.normalize_axes(self.axis, x.ndim)
        extreme = self._reduce(x, axis=self.axis, keepdims=True)
        self.mask = x == extreme
        if extreme.dtype.kind in "fc" and np.isnan(extreme).any():  # NaN == NaN is False
            self.mask |= np.isnan(x) & np.isnan(extreme)
        return extreme if self.keepdims else extreme.squeeze(self.axis)

    def backward(self, gy):
        mask = self.mask
        gy = arrays.reshape_sum_backward(gy, mask.shape, self.axis, self.keepdims)
        return _broadcast_to(gy, mask.shape) * mask


class Min(Max):
    __slots__ = ()
    _reduce = staticmethod(np.min)


def sum(x, axis=None, keepdims=False):
    return Sum(axis, keepdims)(x)


def max(x, axis=None, keepdims=False):
    return Max(axis, keepdims)(x)


def min(x, axis=None, keepdims=False):
    return Min(axis, keepdims)(x)


def average(x, axis=None, keepdims=False):
    """The mean over ``axis`` (all axes by default); nan over no element."""
    x = as_variable(x)
    y = sum(x, axis, keepdims)
    axes = arrays.normalize_axes(axis, x.ndim)
    count = x.size if axes is None else int(np.prod([x.shape[a] for a in axes]))
    return y * _const(arrays.inverse_count(count), y)


mean = average


# --- Linear algebra ----------------------------------------------------------------------
def _matrix_transpose(x):
    """``x`` (an array or a Variable) with its last two axes swapped: the
    transpose of each matrix of a batch. (``.T`` reverses every axis, which is
    the same thing only for 2-D.)"""
    if x.ndim == 2:
        return x.T
    return x.transpose(*range(x.ndim - 2), x.ndim - 1, x.ndim - 2)


def _matmul_backward(gy, x, W, x_shape, W_shape):
    """The gradients of ``x @ W`` with NumPy's rules (arrays or Variables): a
    1-D ``x`` is a row and a 1-D ``W`` a column, whose added axis the product
    drops; leading (batch) axes broadcast, and their gradients are summed
    back to each operand's shape.

    Each gradient reads the other operand: ``x`` is None when W needs no
    gradient (so x was not kept), ``W`` None when x needs none, and that
    gradient is None. A layer fed a batch of data (a constant) thus skips the
    product that x's gradient would cost: a third of the layer's backward."""
    x_matrix, W_matrix = x_shape, W_shape  # the operands' shapes as matrices
    if len(W_shape) == 1:
        W_matrix = W_shape + (1,)
        gy = gy.reshape(gy.shape + (1,))
    if len(x_shape) == 1:
        x_matrix = (1,) + x_shape
        gy = gy.reshape(gy.shape[:-1] + (1,) + gy.shape[-1:])
    gx = gW = None
    if W is not None:
        if W_matrix != W_shape:
            W = W.reshape(W_matrix)
        gx = _sum_to(gy @ _matrix_transpose(W), x_matrix)
        if gx.shape != x_shape:
            gx = gx.reshape(x_shape)
    if x is not None:
        if x_matrix != x_shape:
            x = x.reshape(x_matrix)
        gW = _sum_to(_matrix_transpose(x) @ gy, W_matrix)
        if gW.shape != W_shape:
            gW = gW.reshape(W_shape)
    return gx, gW


class MatMul(Function):
    """``x @ W`` with NumPy's (and PyTorch's) rules: 1-D operands, and
    stacks of matrices whose batch axes broadcast."""

    # Each operand's gradient reads the other one: an operand is kept only
    # when its partner needs a gradient (see Mul).
    __slots__ = saves = ("x", "W", "x_shape", "W_shape")
    saved_from = {"x": "inputs[0]", "W": "inputs[1]"}

    def forward(self, x, W):
        _keep_operands(self, x, W)
        return x @ W

    def backward(self, gy):
        return _matmul_backward(gy, self.x, self.W, self.x_shape, self.W_shape)


def _keep_operands(f, x, W):
    """What the gradients of ``x @ W`` that are needed read (MatMul, Linear)."""
    to_x, to_W = _gradient_targets(f)
    f.x_shape, f.W_shape = x.shape, W.shape
    f.x = x if to_W is not None else None
    f.W = W if to_x is not None else None


class Linear(Function):
    """``x @ W + b`` as one Function: the product ``x @ W`` is never a node of
    the graph, so it is freed as soon as the bias has been added."""

    __slots__ = saves = ("x", "W", "x_shape", "W_shape", "b_shape")  # (see MatMul)
    saved_from = {"x": "inputs[0]", "W": "inputs[1]"}

    def forward(self, x, W, b=None):
        _keep_operands(self, x, W)
        # The bias: only its shape, for its gradient, if it needs one.
        edges = self.next_functions  # (None when forward runs on its own: keep everything)
        needs_b = b is not None and (edges is None or edges[2] is not None)
        self.b_shape = b.shape if needs_b else None
        y = x @ W
        if b is not None:
            if np.broadcast_shapes(y.shape, b.shape) == y.shape and np.can_cast(
                b.dtype, y.dtype, casting="same_kind"
            ):
                y += b  # in place: no second (N, out) array
            else:
                y = y + b
        return y

    def backward(self, gy):
        gx, gW = _matmul_backward(gy, self.x, self.W, self.x_shape, self.W_shape)
        if self.b_shape is None:  # no bias, or one that needs no gradient
            return gx, gW
        return gx, gW, _sum_to(gy, self.b_shape)


def matmul(x, W):
    return MatMul()(x, W)


def linear(x, W, b=None):
    """``x @ W + b`` (the bias broadcast over the batch), one node of the graph."""
    return Linear()(x, W) if b is None else Linear()(x, W, b)


# --- Losses ------------------------------------------------------------------------------
class MeanSquaredError(Function):
    # Both inputs rather than their difference: the target is the user's
    # array (held anyway), and with create_graph the difference must be a
    # node of the graph, recomputed from the two.
    __slots__ = saves = ("x0", "x1")
    saved_from = {"x0": "inputs[0]", "x1": "inputs[1]"}

    def forward(self, x0, x1):
        _check_paired_shapes(x0.shape, x1.shape)
        self.x0, self.x1 = x0, x1
        diff = _in_gradient_dtype(x0) - _in_gradient_dtype(x1)  # (integers would wrap)
        return np.asarray((diff**2).sum() * arrays.inverse_count(diff.size))

    def backward(self, gy):
        x0, x1 = self.x0, self.x1
        diff = _in_gradient_dtype(x0) - _in_gradient_dtype(x1)
        gx0 = gy * diff * _const(2.0 * arrays.inverse_count(diff.size), diff)
        return _sum_to(gx0, x0.shape), _sum_to(-gx0, x1.shape)


def _check_paired_shapes(shape0, shape1):
    """Refuse a prediction and a target whose broadcast pairs elements that do
    not correspond: when the broadcast has more elements than either input
    ((N,) against (N, 1) gives (N, N): every prediction against every
    target). A broadcast that only repeats one of them is allowed: (1, 1)
    against (1,), (N, 3) against one target row (3,), (N, 1) against a
    number."""
    try:
        shape = np.broadcast_shapes(shape0, shape1)
    except ValueError:
        raise ValueError(f"prediction of shape {shape0} and target of shape {shape1} do not "
                         "broadcast; give them the same shape") from None
    if math.prod(shape) > builtins.max(math.prod(shape0), math.prod(shape1)):
        raise ValueError(f"prediction of shape {shape0} and target of shape {shape1} broadcast to "
                         f"{shape}, which pairs every prediction with every target; give them "
                         f"the same shape (t.reshape(y.shape))")


def mean_squared_error(x0, x1):
    return MeanSquaredError()(x0, x1)


def _check_labels(name, x, t, in_function=False):
    """Labels for a batch of scores ``x`` of shape (N, C): N integers in [0, C).

    in_function: called from a Function's forward, whose errors are named
    with the Function and the input shapes already: the shape errors leave
    ``name`` out (it would come twice, and hide the shapes)."""
    if not np.issubdtype(t.dtype, np.integer):
        raise TypeError(f"{name}: labels t must be integers (class indices), got dtype {t.dtype}")
    head = "" if in_function else f"{name}: "
    if x.ndim != 2:
        raise ValueError(f"{head}scores x must be 2-D (batch, classes), got shape {x.shape}")
    n, c = x.shape
    if t.size != n or (t.ndim > 1 and t.shape != (n, 1)):
        raise ValueError(f"{head}labels t must hold one class index per row of x ({n}), "
                         f"got shape {t.shape}")
    if n and (t.min() < 0 or t.max() >= c):
        raise ValueError(f"{head}labels t must be in [0, {c}), got values from {t.min()} to "
                         f"{t.max()}")


class SoftmaxCrossEntropy(Function):
    """Mean over the batch of ``-log softmax(x)[i, t[i]]``, computed through
    logsumexp so that large scores neither overflow nor give log(0)."""

    __slots__ = saves = ("x", "t")  # the scores and the labels (which get no gradient)
    saved_from = {"x": "inputs[0]"}

    def forward(self, x, t):
        _check_labels("SoftmaxCrossEntropy", x, t, in_function=True)
        # Integer and bool scores in float64, their gradient's dtype: in their
        # own dtype the loss was truncated (0.29 of int8 scores was 0), and in
        # np.exp's (float16 for 8-bit integers) the gradient lost digits.
        x = _in_gradient_dtype(x)
        self.x, self.t = x, t
        n = x.shape[0]
        log_z = arrays.logsumexp(x, axis=1)  # (N, 1)
        picked = x[np.arange(n), t.ravel()] - log_z.ravel()
        return np.array(-picked.sum() * arrays.inverse_count(n), dtype=x.dtype)

    def backward(self, gy):
        x = _in_gradient_dtype(self.x)  # (with create_graph, the input Variable itself: see forward)
        n = x.shape[0]
        one_hot = np.zeros(x.shape, dtype=x.dtype)
        one_hot[np.arange(n), self.t.ravel()] = 1
        # The labels get no gradient.
        return (_apply(Softmax(axis=1), x) - one_hot) * (gy * _const(arrays.inverse_count(n), x))


def softmax_cross_entropy(x, t):
    """Cross-entropy of the scores ``x`` (N, C) against integer labels ``t`` (N,)."""
    return SoftmaxCrossEntropy()(x, t)


def accuracy(y, t):
    """Fraction of rows of ``y`` whose largest score is at the label ``t``: a
    Variable, but not a node of any graph (accuracy has no gradient)."""
    y, t = _data(y), np.asarray(_data(t))
    if y.ndim != 2 or t.size != y.shape[0]:
        raise ValueError(
            f"accuracy: needs scores y of shape (N, classes) and N labels t, "
            f"got shapes {y.shape} and {t.shape}"
        )
    # the labels softmax_cross_entropy takes: a label 7 of 3 classes is no miss, but a bug
    _check_labels("accuracy", y, t)
    pred = y.argmax(axis=1)
    return Variable(as_array((pred == t.ravel()).mean()))


# --- Regularisation ---------------------------------------------------------------
class Dropout(Function):
    """Inverted dropout: zero each element with probability ``ratio`` and scale
    the others by ``1 / (1 - ratio)``, so that test time needs no rescaling."""

    __slots__ = ("ratio", "mask", "scale")
    saves = ("mask", "scale")

    def __init__(self, ratio):
        self.ratio = ratio

    def forward(self, x):
        keep = np.random.rand(*x.shape) > self.ratio  # numpy's global RNG, as DeZero
        self.scale = np.asarray(1.0 / (1.0 - self.ratio), dtype=x.dtype)
        self.mask = keep  # one byte an element, kept for backward
        y = x * keep
        y *= self.scale
        return y

    def backward(self, gy):
        return gy * self.mask * self.scale


def dropout(x, dropout_ratio=0.5):
    """Dropout in training (``Config.train``); the identity in ``test_mode()``."""
    validation.expect(dropout_ratio, numbers.Real, "dropout", "dropout_ratio", "a number in [0, 1)")
    if not 0.0 <= dropout_ratio < 1.0:
        raise ValueError(f"dropout: dropout_ratio must be in [0, 1), got {dropout_ratio}")
    if not Config.train:
        return as_variable(x)
    return Dropout(dropout_ratio)(x)


# --- The rest of DeZero's functions ------------------------------------------------
# DeZero's book first writes several functions as compositions of smaller ones
# (the "_simple" versions), then as one Function each. Both are here, so that
# the book's code runs. A composition is a chain of nodes: every intermediate
# Variable stays alive with the graph until backward, which is the memory
# that the one-Function versions above save.
def sigmoid_simple(x):
    """``1 / (1 + exp(-x))`` as three nodes of the graph (``sigmoid`` is one)."""
    x = as_variable(x)
    x = _as_inexact(x)  # (-x of bools is refused by NumPy, of uint8 wraps around)
    return _const(1, x.data) / (_const(1, x.data) + exp(-x))


def softmax_simple(x, axis=1):
    """Softmax along ``axis`` as ``exp(x) / sum(exp(x))``: two Functions and
    the intermediate ``exp(x)`` alive in the graph (``softmax`` is one node).

    The row maximum is taken out first, as a constant (softmax does not
    change when a constant is added along ``axis``), so that large scores do
    not overflow ``exp``; DeZero's version leaves it in, and gives nan there.
    """
    x = _as_inexact(as_variable(x))  # floats, as np.exp gives (x - max could wrap)
    try:
        axis = arrays.normalize_axes(axis, x.ndim)  # (np.max's AxisError named no function)
    except ValueError as error:
        raise ValueError(f"softmax_simple: {error}") from None
    if x.size == 0:  # nothing to normalise (and max() of nothing is an error), as softmax
        return exp(x)
    shifted = x - x.data.max(axis=axis, keepdims=True)
    y = exp(shifted)
    return y / sum(y, axis=axis, keepdims=True)


def softmax_cross_entropy_simple(x, t):
    """Cross-entropy of the scores ``x`` (N, C) against integer labels ``t``
    (N,), built from ``softmax``, ``clip``, ``log`` and indexing, as in
    DeZero's book. The probabilities are clipped to ``[1e-15, 1]`` so that
    ``log`` never sees 0. Gives the same loss as ``softmax_cross_entropy``
    (where no probability is below 1e-15), with four more nodes alive.
    """
    x = as_variable(x)
    labels = np.asarray(_data(t))
    _check_labels("softmax_cross_entropy_simple", x.data, labels)
    n = x.shape[0]
    p = clip(softmax(x), 1e-15, 1.0)
    log_p = log(p)
    picked = log_p[np.arange(n), labels.ravel()]
    return sum(picked) * _const(-1.0 / n, x.data)


def linear_simple(x, W, b=None):
    """``matmul(x, W) + b`` as two nodes. DeZero's version then sets the
    product's ``data`` to None to free it early; here it is kept (this
    framework's backward checks every gradient against its input's array),
    so use ``linear``, one node that never keeps the product, to save it."""
    t = matmul(x, W)
    return t if b is None else t + b


def mean_squared_error_simple(x0, x1):
    """``mean_squared_error`` from smaller functions (sub, square, sum, mul):
    the same value, the mean over every element, with ``diff`` alive in the graph."""
    x0, x1 = as_variable(x0), as_variable(x1)
    try:
        _check_paired_shapes(x0.shape, x1.shape)
    except ValueError as e:
        raise ValueError(f"mean_squared_error_simple: {e}") from None
    # Integers and bools as float64, as mean_squared_error computes them: in
    # their dtype, x0 - x1 of bools is refused by NumPy and of uint8 wraps around.
    x0, x1 = (Cast(_FLOAT64)(x) if not np.issubdtype(x.dtype, np.inexact) else x
              for x in (x0, x1))
    diff = x0 - x1
    return sum(diff**2) * _const(arrays.inverse_count(diff.size), diff.data)  # nan over nothing


def _targets_like(name, x, t):
    """``t`` as an array of ``x``'s shape and dtype (binary targets, 0 or 1)."""
    t = np.asarray(_data(t))
    if t.size != x.size:
        raise ValueError(f"{name}: {t.size} targets for {x.size} predictions (shape {x.shape})")
    return t.reshape(x.shape).astype(x.dtype, copy=False)


def sigmoid_cross_entropy(x, t):
    """Binary cross-entropy of the scores ``x`` (sigmoid is applied here)
    against targets ``t`` of 0s and 1s, summed and divided by ``len(x)``,
    as in DeZero. ``t`` may have ``x``'s shape or be flat."""
    x = as_variable(x)
    t = _targets_like("sigmoid_cross_entropy", x.data, t)
    return _binary_cross_entropy(clip(sigmoid(x), 1e-15, 1.0), t)


def binary_cross_entropy(p, t):
    """Binary cross-entropy of probabilities ``p`` (in (0, 1)) against targets
    ``t`` of 0s and 1s, summed and divided by ``len(p)``; ``p`` is clipped to
    ``[1e-15, 0.999]`` first, as in DeZero."""
    p = as_variable(p)
    t = _targets_like("binary_cross_entropy", p.data, t)
    return _binary_cross_entropy(clip(p, 1e-15, 0.999), t)


def _binary_cross_entropy(p, t):
    """``-sum(t log p + (1 - t) log(1 - p)) / len(p)`` of a Variable ``p`` of
    probabilities and an array ``t`` of its shape and dtype."""
    one = _const(1, p.data)
    tlog_p = t * log(p) + (one - t) * log(one - p)
    return sum(tlog_p) * _const(-1.0 / len(p), p.data)


def embed_id(x, W):
    """The rows ``W[x]`` of an embedding matrix for integer ids ``x``; the
    gradient is scatter-added back into the rows that were used.

    An id outside ``[0, len(W))`` is an IndexError, as in PyTorch: NumPy
    would read ``W[-1]`` as the last row, which is no id of the table."""
    ids = x.data if isinstance(x, Variable) else np.asarray(x)
    rows = (W.data if isinstance(W, Variable) else np.asarray(W)).shape[0]
    if not np.issubdtype(ids.dtype, np.integer):  # bools would select rows by mask
        raise TypeError(f"embed_id: the ids must be integers, got an array of {ids.dtype}")
    if ids.size and not (0 <= ids.min() and ids.max() < rows):
        wrong = ids[(ids < 0) | (ids >= rows)].flat[0]
        raise IndexError(f"embed_id: id {wrong} is outside the table's {rows} rows "
                         f"(ids go from 0 to {rows - 1})")
    return get_item(W, x)


class BatchNorm(Function):
    """Batch normalisation over the first axis (and, for images (N, C, H, W),
    over N, H and W): ``gamma * (x - mean) / sqrt(var + eps) + beta``.

    In training (``Config.train``) the batch's own mean and variance are used,
    and the running averages ``mean`` and ``var`` (arrays, updated in place)
    move towards them by ``1 - decay``; in ``test_mode()`` the running
    averages are used. The graph keeps one array of ``x``'s size for backward
    (the normalised input) and the inverse standard deviation per channel.
    """

    __slots__ = ("avg_mean", "avg_var", "decay", "eps", "training", "gamma", "inv_std", "xc")
    saves = ("gamma", "inv_std", "xc", "training")
    saved_from = {"gamma": "inputs[1]"}

    def __init__(self, mean, var, decay, eps):
        self.avg_mean, self.avg_var = mean, var
        self.decay, self.eps = decay, eps

    @staticmethod
    def _as_rows(x):
        """``x`` as (rows, channels): images move their channel axis last."""
        if x.ndim == 4:
            return x.transpose(0, 2, 3, 1).reshape(-1, x.shape[1])
        return x

    @staticmethod
    def _as_input(rows, shape):
        if len(shape) == 4:
            n, c, h, w = shape
            return rows.reshape(n, h, w, c).transpose(0, 3, 1, 2)
        return rows

    def forward(self, x, gamma, beta):
        if x.ndim not in (2, 4):
            raise ValueError(f"batch_norm: x must be 2-D (N, C) or 4-D (N, C, H, W), got {x.shape}")
        rows = self._as_rows(x)
        self.training = Config.train
        if self.training:
            mean, var = rows.mean(axis=0), rows.var(axis=0)
            m = len(rows)
            unbiased = var * (m / (m - 1)) if m > 1 else var  # (``max`` is F.max here)
            self.avg_mean *= self.decay
            self.avg_mean += (1 - self.decay) * mean
            self.avg_var *= self.decay
            self.avg_var += (1 - self.decay) * unbiased
        else:
            mean, var = self.avg_mean, self.avg_var
        self.inv_std = (1 / np.sqrt(var + self.eps)).astype(x.dtype, copy=False)
        self.xc = ((rows - mean) * self.inv_std).astype(x.dtype, copy=False)
        self.gamma = gamma
        return self._as_input(gamma * self.xc + beta, x.shape)

    def backward(self, gy):
        if isinstance(gy, Variable):  # backward(create_graph=True)
            # xc and inv_std are kept as arrays, not as functions of x, so a
            # graph of these gradients would miss the terms through them
            # (gamma's gradient reads xc; in training the batch's statistics
            # depend on x): a second derivative silently wrong, refused instead.
            raise RuntimeError(
                "BatchNorm.backward: backward(create_graph=True) through batch_norm is not "
                "supported (a second derivative would miss the terms through the normalised "
                "input, kept as an array); call backward() without create_graph")
        gamma = self.gamma
        gy_rows = _apply(_Rows(), gy) if gy.ndim == 4 else gy
        xc = self.xc
        gbeta = gy_rows.sum(axis=0)
        ggamma = (gy_rows * xc).sum(axis=0)
        if self.training:  # the batch's statistics depend on x too
            n = len(xc)
            gx = (gy_rows - gbeta * _const(1.0 / n, xc) - xc * ggamma * _const(1.0 / n, xc))
        else:  # the running averages are constants
            gx = gy_rows
        gx = gx * (gamma * self.inv_std)
        if gy.ndim == 4:
            gx = _apply(_Rows(inverse_shape=gy.shape), gx)
        return gx, ggamma, gbeta


class _Rows(Function):
    """(N, C, H, W) -> (N*H*W, C), or back when ``inverse_shape`` is given: the
    layout change of batch_norm for images, differentiable."""

    __slots__ = ("inverse_shape", "shape")
    saves = ("shape",)

    def __init__(self, inverse_shape=None):
        self.inverse_shape = inverse_shape

    def forward(self, x):
        if self.inverse_shape is None:
            self.shape = x.shape
            return BatchNorm._as_rows(x).copy()
        return np.ascontiguousarray(BatchNorm._as_input(x, self.inverse_shape))

    def backward(self, gy):
        if self.inverse_shape is None:
            return _apply(_Rows(inverse_shape=self.shape), gy)
        return _apply(_Rows(), gy)


def batch_norm(x, gamma, beta, mean, var, decay=0.9, eps=2e-5):
    """Batch normalisation (see BatchNorm); ``mean`` and ``var`` are the
    running averages, arrays of one value per channel, updated in training."""
    return BatchNorm(mean, var, decay, eps)(x, gamma, beta)


batch_nrom = batch_norm  # DeZero's own spelling, which its BatchNorm layer calls


# --- The book's first convolution and pooling -------------------------------------------
def conv2d_simple(x, W, b=None, stride=1, pad=0):
    """``conv2d`` as the book first writes it: im2col, then ``linear``, then
    a reshape; the column array is a node of the graph, alive until backward."""
    x, W = as_variable(x), as_variable(W)
    if W.ndim != 4:
        raise ValueError(f"conv2d_simple: needs kernels W of shape (OC, C, KH, KW), got shape "
                         f"{W.shape}")
    _, _, _, (oh, ow) = functions_conv.window_geometry(x.shape, W.shape[2:], stride, pad,
                                                       name="conv2d_simple")
    n, oc = x.shape[0], W.shape[0]
    kernel = W.shape[2:]
    col = im2col(x, kernel, stride, pad, to_matrix=True)  # (N*OH*OW, C*KH*KW)
    t = linear(col, W.reshape(oc, -1).transpose(), b)
    return t.reshape(n, oh, ow, oc).transpose(0, 3, 1, 2)


def pooling_simple(x, kernel_size, stride=1, pad=0):
    """Max pooling as the book first writes it: im2col, a max over each row,
    a reshape; the column array is a node of the graph, alive until backward."""
    x = as_variable(x)
    kh, kw = arrays.pair(kernel_size)
    _, _, _, (oh, ow) = functions_conv.window_geometry(x.shape, (kh, kw), stride, pad,
                                                       name="pooling_simple")
    n, c = x.shape[:2]
    col = im2col(x, (kh, kw), stride, pad, to_matrix=True)  # (N*OH*OW, C*KH*KW)
    y = max(col.reshape(-1, kh * kw), axis=1)
    return y.reshape(n, oh, ow, c).transpose(0, 3, 1, 2)
