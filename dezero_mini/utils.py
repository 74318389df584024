"""Array helpers for backward passes, and numerical gradient checking."""
import numpy as np


def sum_to(x, shape):
    """Sum the array ``x`` over the axes that broadcasting added to reach
    ``x.shape`` from ``shape`` (the gradient of a broadcast)."""
    lead = x.ndim - len(shape)
    axes = tuple(range(lead)) + tuple(
        lead + i for i, n in enumerate(shape) if n == 1 and x.shape[lead + i] != 1
    )
    y = x.sum(axis=axes, keepdims=True)
    return y.reshape(shape) if lead else y


def reshape_sum_backward(gy, x_shape, axis, keepdims):
    """Give the gradient of ``sum(x, axis)`` back the axes that the sum removed,
    so that it broadcasts against ``x_shape``."""
    ndim = len(x_shape)
    if axis is None:
        axes = tuple(range(ndim))
    elif isinstance(axis, int):
        axes = (axis,)
    else:
        axes = tuple(axis)
    if ndim == 0 or keepdims:
        return gy
    shape = list(gy.shape)
    for a in sorted(a % ndim for a in axes):
        shape.insert(a, 1)
    return gy.reshape(tuple(shape))


def numerical_grad(f, x, *args, eps=1e-4, **kwargs):
    """Central-difference gradient of ``sum(f(x, ...))`` with respect to the
    Variable or array ``x`` (the reference a backward pass is checked against)."""
    from dezero_mini.core import Variable, as_variable

    data = x.data if isinstance(x, Variable) else x
    data = data.astype(np.float64)
    grad = np.zeros_like(data)
    for index in np.ndindex(*data.shape):
        saved = data[index]
        data[index] = saved + eps
        plus = as_variable(f(Variable(data.copy()), *args, **kwargs)).data.sum()
        data[index] = saved - eps
        minus = as_variable(f(Variable(data.copy()), *args, **kwargs)).data.sum()
        data[index] = saved
        grad[index] = (plus - minus) / (2 * eps)
    return grad


def gradient_check(f, x, *args, rtol=1e-4, atol=1e-5, **kwargs):
    """True when backward's gradient of ``sum(f(x, ...))`` matches the
    numerical one; prints where they differ otherwise."""
    from dezero_mini.core import as_variable

    x = as_variable(x)
    x.data = x.data.astype(np.float64)
    x.cleargrad()
    y = f(x, *args, **kwargs)
    y.backward(retain_grad=True)
    analytic = x.grad.data
    numeric = numerical_grad(f, x, *args, **kwargs)
    ok = analytic.shape == numeric.shape and np.allclose(analytic, numeric, rtol, atol)
    if not ok:
        worst = np.abs(analytic - numeric).max() if analytic.shape == numeric.shape else "n/a"
        print(f"gradient_check: shapes {analytic.shape} vs {numeric.shape}, max |diff| {worst}")
    return bool(ok)
