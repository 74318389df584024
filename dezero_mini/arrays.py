"""Helpers on NumPy arrays that need no Variable: axes, the gradient of a
broadcast (``sum_to``), and the sizes of convolutions.

The framework stands on them (``core``, ``functions``, ``functions_conv``)
and so does DeZero's ``utils``, which hands them on under DeZero's names:
they import nothing of dezero_mini, so every arrow points down to here.
"""
import numpy as np

_AxisError = getattr(np, "exceptions", np).AxisError  # np.exceptions from numpy 1.25 on


def normalize_axes(axis, ndim):
    """``axis`` (None, an integer of Python or NumPy, or a sequence of them,
    negative counting from the end) as None or a tuple of distinct axes in
    ``[0, ndim)``: the one form that every reduction stores. A 0-d array
    accepts 0 and -1 and reduces over nothing (``()``), as in NumPy and
    PyTorch."""
    if axis is None:
        return None
    try:
        axes = (axis,) if isinstance(axis, (int, np.integer)) else tuple(axis)
    except TypeError:
        raise TypeError(f"axis must be an integer or a tuple of integers, got {axis!r}") from None
    bound = ndim if ndim else 1
    result = []
    for a in axes:
        if isinstance(a, (bool, np.bool_)) or not isinstance(a, (int, np.integer)):
            raise TypeError(f"axis must be an integer or a tuple of integers, got {axis!r}")
        if not -bound <= a < bound:
            raise _AxisError(f"axis {int(a)} is out of range for an array of {ndim} dimensions "
                             f"(allowed: {-bound} to {bound - 1})")
        a = int(a) % bound
        if a in result:
            raise ValueError(f"axis {axis!r} names axis {a} twice")
        result.append(a)
    return tuple(result) if ndim else ()


def sum_to(x, shape):
    """Sum the array ``x`` over the axes that broadcasting added to reach
    ``x.shape`` from ``shape`` (the gradient of a broadcast).

    ``shape`` must be one that broadcasts to ``x.shape`` (each of its axes 1
    or the same as ``x``'s); anything else is a ValueError. (DeZero returns
    an array of some other shape instead, which fails later, far from here.)"""
    lead = x.ndim - len(shape)
    if lead < 0 or any(n != 1 and n != m for n, m in zip(shape, x.shape[lead:])):
        raise ValueError(f"sum_to: cannot sum an array of shape {x.shape} to shape {tuple(shape)}: "
                         "that shape does not broadcast to it (each axis must be 1 or equal)")
    axes = tuple(range(lead)) + tuple(
        lead + i for i, n in enumerate(shape) if n == 1 and x.shape[lead + i] != 1
    )
    y = x.sum(axis=axes, keepdims=True)
    return y.reshape(shape) if lead else y


def reshape_sum_backward(gy, x_shape, axis, keepdims):
    """Give the gradient of ``sum(x, axis)`` back the axes that the sum removed,
    so that it broadcasts against ``x_shape``."""
    ndim = len(x_shape)
    axes = normalize_axes(axis, ndim)
    if axes is None:
        axes = tuple(range(ndim))
    if ndim == 0 or keepdims:
        return gy
    shape = list(gy.shape)
    for a in sorted(axes):
        shape.insert(a, 1)
    return gy.reshape(tuple(shape))


def inverse_count(n):
    """``1 / n`` for a mean over ``n`` elements, and nan for ``n == 0``: the
    mean of nothing is nan, as in NumPy and PyTorch (without the division by
    zero)."""
    return 1.0 / n if n else float("nan")


def logsumexp(x, axis=1):
    """``log(sum(exp(x), axis))`` of an array, with the summed axis kept (size 1),
    computed without overflow: the maximum is taken out before ``exp``."""
    x = np.asarray(x)
    if not np.issubdtype(x.dtype, np.floating):
        x = x.astype(np.float64)
    if x.size == 0:  # log(0) = -inf over an empty axis, as in PyTorch
        with np.errstate(divide="ignore"):
            return np.log(np.exp(x).sum(axis=axis, keepdims=True))
    m = np.asarray(x.max(axis=axis, keepdims=True))
    m[~np.isfinite(m)] = 0  # rows of -inf (or inf) stay -inf (inf), not nan
    e = np.asarray(x - m)  # (asarray: 0-d arithmetic gives a numpy scalar, which has no out=)
    np.exp(e, out=e)
    s = np.asarray(e.sum(axis=axis, keepdims=True))
    np.log(s, out=s)
    s += m
    return s


def max_backward_shape(x, axis):
    """The shape of ``max(x, axis)`` with the reduced axes kept as size 1 (the
    shape in which its gradient broadcasts back onto ``x``)."""
    if axis is None:
        axes = range(x.ndim)
    elif isinstance(axis, int):
        axes = (axis % x.ndim,)
    else:
        axes = tuple(a % x.ndim for a in axis)
    return [1 if i in axes else n for i, n in enumerate(x.shape)]


def pair(x):
    """``(x, x)`` for an int, ``x`` itself for a pair (a kernel size, a stride)."""
    if isinstance(x, (int, np.integer)):
        return (int(x), int(x))
    if isinstance(x, tuple) and len(x) == 2 and all(
            isinstance(n, (int, np.integer)) and not isinstance(n, bool) for n in x):
        return x
    raise ValueError(f"pair: expected an int or a tuple of two ints, got {x!r}")


def get_conv_outsize(input_size, kernel_size, stride, pad):
    """The output size of a convolution or pooling along one axis. A stride
    or a kernel of less than 1, or a negative padding, is a ValueError that
    names it (a stride of 0 was a ZeroDivisionError; a negative one, a
    negative size further on)."""
    for argument, value, least in (("kernel_size", kernel_size, 1), ("stride", stride, 1),
                                   ("pad", pad, 0)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < least:
            raise ValueError(f"get_conv_outsize: {argument} must be a whole number of at least "
                             f"{least}, got {value!r}")
    return (input_size + pad * 2 - kernel_size) // stride + 1


def get_deconv_outsize(size, k, s, p):
    """The output size of a transposed convolution along one axis."""
    return s * (size - 1) + k - 2 * p
