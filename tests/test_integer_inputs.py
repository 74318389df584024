"""Integer and bool Variables, the way PyTorch treats them: only
floating-point values carry gradients.

A Variable of integers or bools is data: operations on it run as NumPy runs
them, backward passes it by (its ``grad`` stays None, never a wrapped
number such as 255 for ``-x`` on uint8, or 2 for ``x + x`` on bools),
``requires_grad = True`` on it is an error, and so is ``backward()`` on a
result that is itself integers or bools. Every floating-point input gets a
gradient of its own dtype.
"""
import numpy as np
import pytest

import dezero_mini.functions as F
from dezero_mini import Parameter, Variable

DTYPES = [np.bool_, np.int8, np.uint8, np.int32, np.int64, np.float16, np.float32, np.float64]

# name -> (operation of x and a float64 Variable w, NumPy's forward on arrays)
OPERATIONS = {
    "neg": (lambda x, w: -x, lambda x, w: -x),  # (NumPy and PyTorch refuse it on bools)
    "x + x": (lambda x, w: x + x, lambda x, w: x + x),
    "x * x": (lambda x, w: x * x, lambda x, w: x * x),
    "x * 2.5": (lambda x, w: x * 2.5, lambda x, w: x * 2.5),
    "x * w": (lambda x, w: x * w, lambda x, w: x * w),
    "x / w": (lambda x, w: x / w, lambda x, w: x / w),
    "w ** x": (lambda x, w: w ** x, lambda x, w: w ** x),
    "exp": (lambda x, w: F.exp(x), lambda x, w: np.exp(x)),
    "sum": (lambda x, w: F.sum(x), lambda x, w: np.sum(x)),
    "max": (lambda x, w: F.max(x), lambda x, w: np.max(x)),
    "x[1:]": (lambda x, w: x[1:], lambda x, w: x[1:]),
    "reshape": (lambda x, w: F.reshape(x, (3, 1)), lambda x, w: x.reshape(3, 1)),
    "matmul": (lambda x, w: F.matmul(F.reshape(x, (1, 3)), F.reshape(w, (3, 1))),
               lambda x, w: x.reshape(1, 3) @ w.reshape(3, 1)),
}


def _is_float(dtype):
    return np.issubdtype(dtype, np.floating)


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("name", sorted(OPERATIONS))
def test_only_floating_point_values_get_gradients(name, dtype):
    operation, numpy_forward = OPERATIONS[name]
    x_array = np.array([1, 2, 0]).astype(dtype)  # 0: -x wraps on uint8, x + x saturates on bools
    w_array = np.array([0.5, -1.5, 2.0])
    x, w = Variable(x_array), Variable(w_array)
    assert x.requires_grad is _is_float(dtype)
    try:
        with np.errstate(all="ignore"):
            expected = numpy_forward(x_array, w_array)
    except TypeError as refused:  # NumPy refuses it (-x on bools): so does the Function
        with pytest.raises(TypeError, match=str(refused)[:30]):
            operation(x, w)
        return
    y = operation(x, w)
    np.testing.assert_array_equal(y.data, expected)  # the forward is NumPy's, dtype and all
    assert y.dtype == np.asarray(expected).dtype
    loss = F.sum(y)
    if not _is_float(loss.dtype):  # integers or bools all the way: nothing to differentiate
        with pytest.raises(RuntimeError, match=f"backward: this Variable holds {loss.dtype} values; "
                                               "only floating-point values have gradients"):
            loss.backward()
        assert x.grad is None
        return
    loss.backward()
    if _is_float(dtype):
        assert x.grad is not None and x.grad.dtype == dtype, (x.grad, dtype)
    else:
        assert x.grad is None  # never 255, 2, or an int64 array
    if w.grad is not None:  # w took part: its gradient is float64, of w's shape
        assert w.grad.dtype == np.float64 and w.grad.shape == w.shape


@pytest.mark.parametrize("dtype", [np.bool_, np.int8, np.uint8, np.int64])
def test_requires_grad_on_integers_is_an_error(dtype):
    x = Variable(np.ones(3, dtype))
    with pytest.raises(RuntimeError, match=f"requires_grad: only Variables of floating-point .* "
                                           f"this one holds {np.dtype(dtype).name}"):
        x.requires_grad = True
    x.requires_grad = False  # saying what is already so is fine
    assert x.requires_grad is False


def test_an_integer_parameter_is_left_alone_by_backward():
    counts = Parameter(np.array([3, 4]))
    scale = Parameter(np.array([0.5, 0.25], np.float32))
    F.sum(counts * scale).backward()
    assert counts.grad is None
    np.testing.assert_array_equal(scale.grad.data, np.array([3, 4], np.float32))
    assert scale.grad.dtype == np.float32


def test_data_replaced_by_integers_after_the_graph_is_an_error():
    x = Variable(np.array([1.0, 2.0]))
    y = F.sum(x * np.array([2.0, 3.0], np.float32))
    x.data = np.array([1, 2])
    with pytest.raises(RuntimeError, match="now holds int64; only floating-point Variables have "
                                           "gradients"):
        y.backward()


def _numpy_softmax(x):
    e = np.exp(x - x.max(axis=1, keepdims=True).astype(np.float64))
    return e / e.sum(axis=1, keepdims=True)


# Functions whose forward on integers or bools must be NumPy's value, not one
# computed in the integer dtype (name -> operation, NumPy's value in float64).
# Found by a sweep: the mean of [1, 2, 0] as int64 was 0 (1/3 made an int64
# constant), softmax_simple of uint8 was nan (x - max wrapped around).
FLOAT_RESULTS = {
    "mean": (F.mean, lambda x: np.mean(x)),
    "average over an axis": (lambda x: F.average(x, axis=1), lambda x: np.mean(x, axis=1)),
    "mean_squared_error_simple": (lambda x: F.mean_squared_error_simple(x, np.zeros_like(x)),
                                  lambda x: np.mean(x.astype(np.float64) ** 2)),
    "softmax": (F.softmax, _numpy_softmax),
    "softmax_simple": (F.softmax_simple, _numpy_softmax),
}


@pytest.mark.parametrize("dtype", [np.bool_, np.int8, np.uint8, np.int32, np.int64],
                         ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("name", sorted(FLOAT_RESULTS))
def test_integer_inputs_give_numpys_floating_point_values(name, dtype):
    operation, expected = FLOAT_RESULTS[name]
    x_array = np.array([[1, 2, 0], [3, 0, 1]]).astype(dtype)
    y = operation(Variable(x_array))
    assert np.issubdtype(y.dtype, np.floating), y.dtype
    rtol = 1e-3 if y.dtype == np.float16 else 1e-12  # np.exp of 8-bit integers is float16
    np.testing.assert_allclose(y.data, expected(x_array), rtol=rtol)
