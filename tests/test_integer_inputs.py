"""Integer and bool Variables, the way DeZero treats them, without its silent errors.

A Variable of integers or bools takes part in backward, as in DeZero, but its
gradient is float64 (NumPy's default float), never its own dtype: DeZero's
gradient of ``x + x`` on bools is True (it should be 2) and of ``-x`` on uint8
255 (it should be -1), and int8 sums wrap. Here every such gradient equals the
one computed from the same values as float64, and every floating-point input
gets a gradient of its own dtype. Operations on integers run as NumPy runs
them (the forward is NumPy's, dtype and all). PyTorch refuses gradients for
integers instead: a row of the table of differences in docs/differences.md.
"""
import re

import numpy as np
import pytest

import dezero_mini.functions as F
from dezero_mini import Parameter, Variable

DTYPES = [np.bool_, np.uint8, np.int8, np.int32, np.int64, np.float16, np.float32, np.float64]

# 100: its square and cube wrap around in int8 (and the square's gradient
# formula would too); 0: -x wraps on uint8, x + x saturates on bools.
VALUES = [100, 3, 0, 2]
SMALL = [5, 3, 0, 2]  # for exp, whose value in float16 (8-bit integers) is inf from 12 on

# name -> (operation of x and a float64 Variable w, the values of x)
OPERATIONS = {
    "neg": (lambda x, w: -x, VALUES),  # (NumPy refuses it on bools: so does the Function)
    "x + x": (lambda x, w: x + x, VALUES),
    "x - w": (lambda x, w: x - w, VALUES),
    "w - x": (lambda x, w: w - x, VALUES),
    "x * x": (lambda x, w: x * x, VALUES),
    "x * w": (lambda x, w: x * w, VALUES),
    "x * 2.5": (lambda x, w: x * 2.5, VALUES),
    "x / w": (lambda x, w: x / w, VALUES),
    "w / x": (lambda x, w: w / x, VALUES),
    "x ** 2": (lambda x, w: x ** 2, VALUES),
    "x ** 4": (lambda x, w: x ** 4, VALUES),
    "x ** w": (lambda x, w: x ** w, VALUES),
    "w ** x": (lambda x, w: w ** x, SMALL),
    "2 ** x": (lambda x, w: 2 ** x, SMALL),
    "exp": (lambda x, w: F.exp(x), SMALL),
    "log": (lambda x, w: F.log(x), VALUES),
    "sin": (lambda x, w: F.sin(x), VALUES),
    "tanh": (lambda x, w: F.tanh(x), VALUES),
    "sigmoid": (lambda x, w: F.sigmoid(x), VALUES),
    "relu": (lambda x, w: F.relu(x), VALUES),
    "clip": (lambda x, w: F.clip(x, 1, 50), VALUES),
    "sum": (lambda x, w: F.sum(x), VALUES),
    "mean": (lambda x, w: F.mean(x), VALUES),
    "max": (lambda x, w: F.max(x), VALUES),
    "x[1:]": (lambda x, w: x[1:], VALUES),
    "x[[0, 0]]": (lambda x, w: x[np.array([0, 0, 3])], VALUES),
    "reshape": (lambda x, w: F.reshape(x, (2, 2)), VALUES),
    "transpose": (lambda x, w: F.transpose(F.reshape(x, (2, 2))), VALUES),
    "broadcast_to": (lambda x, w: F.broadcast_to(x, (3, 4)), VALUES),
    "sum_to": (lambda x, w: F.sum_to(F.reshape(x, (2, 2)), (1, 2)), VALUES),
    "matmul": (lambda x, w: F.matmul(F.reshape(x, (1, 4)), F.reshape(w, (4, 1))), VALUES),
    "linear": (lambda x, w: F.linear(F.reshape(x, (2, 2)), F.reshape(w, (2, 2))), VALUES),
    "softmax": (lambda x, w: F.softmax(F.reshape(x, (2, 2))), VALUES),
    "log_softmax": (lambda x, w: F.log_softmax(F.reshape(x, (2, 2))), VALUES),
    "softmax_simple": (lambda x, w: F.softmax_simple(F.reshape(x, (2, 2))), SMALL),
    "mean_squared_error": (lambda x, w: F.mean_squared_error(x, w), VALUES),
    # Both inputs of the dtype (two bool Variables: x0 - x1 is refused by NumPy,
    # and was, as a TypeError of NumPy's, in the functions that subtract).
    "x - x[::-1]": (lambda x, w: x - x[::-1], VALUES),  # (NumPy refuses it on bools: Sub too)
    "mean_squared_error of two": (lambda x, w: F.mean_squared_error(x, x[::-1]), VALUES),
    "mean_squared_error_simple": (lambda x, w: F.mean_squared_error_simple(x, w), VALUES),
    "mean_squared_error_simple of two": (
        lambda x, w: F.mean_squared_error_simple(x, x[::-1]), VALUES),
    "sigmoid_simple": (lambda x, w: F.sigmoid_simple(x), VALUES),
    "binary_cross_entropy of two": (
        lambda x, w: F.binary_cross_entropy(F.sigmoid(x), x[::-1]), VALUES),
    "concat": (lambda x, w: F.concat([x, x[::-1]]), VALUES),
    "matmul of two": (lambda x, w: F.matmul(F.reshape(x, (1, 4)), F.reshape(x, (4, 1))), VALUES),
    # (computed in float16 for 8-bit integers once: the gradient lost digits)
    "softmax_cross_entropy": (
        lambda x, w: F.softmax_cross_entropy(F.reshape(x, (2, 2)), np.array([1, 0])), SMALL),
}

W = np.array([0.5, -1.5, 2.0, 1.25])


def _is_inexact(dtype):
    return np.issubdtype(dtype, np.inexact)


def _tolerance(dtype):
    """Relative tolerance for values computed in ``dtype`` against float64."""
    return {np.float16: 2e-3, np.float32: 1e-5}.get(np.dtype(dtype).type, 1e-12)


def _gradient(operation, x_array):
    """The forward result and the gradient of ``sum(operation(x, w) * weights)``
    at ``x_array`` (weights that differ by element, so that every element of
    the gradient is checked)."""
    x, w = Variable(x_array), Variable(W.copy())
    with np.errstate(all="ignore"):
        y = operation(x, w)
        weights = np.linspace(1.0, 2.0, y.size).reshape(y.shape)
        F.sum(y * weights).backward()
    return y, x.grad


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("name", sorted(OPERATIONS))
def test_every_number_gets_the_gradient_of_its_values_as_floats(name, dtype):
    operation, values = OPERATIONS[name]
    x_array = np.array(values).astype(dtype)
    assert Variable(x_array).requires_grad is True
    try:
        y, grad = _gradient(operation, x_array)
    except TypeError as refused:  # NumPy refuses it (-x on bools): so does the Function
        with pytest.raises(TypeError), np.errstate(all="ignore"):
            operation(x_array, W)
        # ... in one line that names the Function that refused (Neg, Sub), never
        # NumPy's error alone from inside a function of F.
        assert re.match(r"(Neg|Sub): inputs of shapes ", str(refused)), refused
        return
    _, expected = _gradient(operation, x_array.astype(np.float64))
    expected_dtype = dtype if _is_inexact(dtype) else np.float64
    assert grad is not None and grad.dtype == expected_dtype, (grad, expected_dtype)
    assert grad.shape == x_array.shape
    # The gradient is the float64 one, to the precision and in the range of
    # the dtypes computed in (np.exp of 8-bit integers is float16, as NumPy
    # computes it; 4 * 100 ** 3 is inf in float16).
    rtol = max(_tolerance(dtype), _tolerance(y.dtype))
    with np.errstate(over="ignore"):
        in_range = expected.data.astype(expected_dtype)
    np.testing.assert_allclose(grad.data, in_range, rtol=rtol, atol=rtol)


@pytest.mark.parametrize("dtype", [np.bool_, np.uint8, np.int8, np.int64])
@pytest.mark.parametrize("name, operation, forward", [
    ("neg", lambda x: -x, lambda a: -a),
    ("x + x", lambda x: x + x, lambda a: a + a),
    ("x * x", lambda x: x * x, lambda a: a * a),
    ("sum", F.sum, np.sum),
    ("max", F.max, np.max),
    ("x[1:]", lambda x: x[1:], lambda a: a[1:]),
])
def test_the_forward_is_numpys_and_the_gradient_is_float64(name, operation, forward, dtype):
    """The forward keeps NumPy's dtype and values (int8 wraps there, as in
    NumPy); only the gradient is float64."""
    x_array = np.array([100, 3, 0]).astype(dtype)
    try:
        with np.errstate(all="ignore"):
            expected = forward(x_array)
    except TypeError:
        return  # (-x on bools: the table above holds the Function to NumPy's refusal)
    x = Variable(x_array)
    with np.errstate(all="ignore"):
        y = operation(x)
    np.testing.assert_array_equal(y.data, expected)
    assert y.dtype == np.asarray(expected).dtype
    F.sum(y).backward()
    assert x.grad.dtype == np.float64


@pytest.mark.parametrize("name, operation, values, dtype, gradient", [
    ("x + x on bools", lambda x: x + x, [1, 0], np.bool_, [2.0, 2.0]),  # DeZero: True
    ("-x on uint8", lambda x: -x, [1, 0], np.uint8, [-1.0, -1.0]),  # DeZero: 255
    ("x * 200 on uint8", lambda x: x * 200, [1, 2], np.uint8, [200.0, 200.0]),
    ("1 / x on int8", lambda x: 1 / x, [100, 3], np.int8, [-1 / 100 ** 2, -1 / 3 ** 2]),
    ("x ** 3 on int8", lambda x: x ** 3, [100, 3], np.int8, [3 * 100 ** 2, 3 * 3 ** 2]),
    ("x ** 2 on uint8", lambda x: x ** 2, [0, 3], np.uint8, [0.0, 6.0]),
    ("int8 sum", lambda x: F.sum(x) * 2, [100, 100], np.int8, [2.0, 2.0]),
], ids=lambda case: case if isinstance(case, str) else "")
def test_the_gradients_that_integers_would_get_wrong(name, operation, values, dtype, gradient):
    """DeZero's integer gradients: wrapped around, truncated, or True for 2."""
    x = Variable(np.array(values).astype(dtype))
    with np.errstate(all="ignore"):
        F.sum(operation(x)).backward()
    assert x.grad.dtype == np.float64
    np.testing.assert_allclose(x.grad.data, gradient, rtol=1e-12)


def test_a_leaf_accumulates_in_float64_over_several_backwards():
    x = Variable(np.array([3, 0], np.uint8))
    y = -x
    y.backward(retain_graph=True)
    y.backward()
    assert x.grad.dtype == np.float64
    np.testing.assert_array_equal(x.grad.data, [-2.0, -2.0])  # never 254, never cast back


def test_an_integer_leaf_used_by_float32_and_float64_paths_sums_in_float64():
    x = Variable(np.array([1, 2], np.int8))
    w32 = Variable(np.array([0.1, 0.2], np.float32))
    F.sum(x * w32 + x * 3 + x / 4).backward()
    assert x.grad.dtype == np.float64
    np.testing.assert_allclose(x.grad.data, np.array([0.1, 0.2], np.float32) + 3 + 0.25)
    assert w32.grad.dtype == np.float32


def test_an_integer_seed_set_by_the_user_is_made_float64():
    x = Variable(np.array([True, False]))
    y = x + x
    y.grad = Variable(np.array([3, 5]))
    y.backward()
    np.testing.assert_array_equal(x.grad.data, [6.0, 10.0])
    assert x.grad.dtype == np.float64


def test_second_derivative_of_an_integer_input():
    x = Variable(np.array([100, 3], np.int8))
    y = F.sum(x ** 3)
    y.backward(create_graph=True)
    gx = x.grad
    assert gx.dtype == np.float64
    np.testing.assert_array_equal(gx.data, [30000.0, 27.0])
    x.cleargrad()
    F.sum(gx).backward()
    np.testing.assert_array_equal(x.grad.data, [600.0, 18.0])  # 6x, never wrapped


def test_an_integer_parameter_gets_a_float64_gradient():
    counts = Parameter(np.array([3, 4]))
    scale = Parameter(np.array([0.5, 0.25], np.float32))
    F.sum(counts * scale).backward()
    np.testing.assert_array_equal(counts.grad.data, [0.5, 0.25])
    assert counts.grad.dtype == np.float64
    np.testing.assert_array_equal(scale.grad.data, np.array([3, 4], np.float32))
    assert scale.grad.dtype == np.float32


@pytest.mark.parametrize("data", [np.array(["a", "b"]), np.array([None, 1], dtype=object),
                                  np.array(["2026-01-01"], dtype="datetime64[D]")],
                         ids=["str", "object", "datetime64"])
def test_only_numbers_have_gradients(data):
    # A Variable of non-numbers is refused when it is made (the hostile API
    # table has the rows); one whose data is replaced by them afterwards
    # cannot require a gradient, nor be differentiated.
    with pytest.raises(TypeError, match=rf"Variable: data must be numbers .* {re.escape(str(data.dtype))}"):
        Variable(data)
    x = Variable(np.zeros(data.shape))
    x.data = data
    with pytest.raises(RuntimeError, match=r"requires_grad: only Variables of numbers .* this one "
                                           rf"holds {re.escape(str(data.dtype))}"):
        x.requires_grad = True
    x.requires_grad = False  # saying what is already so is fine
    with pytest.raises(RuntimeError, match=rf"backward: this Variable holds {re.escape(str(data.dtype))} values; "
                                           "only numbers"):
        x.backward()


@pytest.mark.parametrize("dtype", [np.bool_, np.int8, np.uint8, np.int64])
def test_requires_grad_false_makes_an_integer_variable_a_constant(dtype):
    x = Variable(np.ones(3, dtype))
    assert x.requires_grad is True
    x.requires_grad = False
    w = Variable(np.array([1.0, 2.0, 3.0]))
    F.sum(x * w).backward()
    assert x.grad is None and w.grad is not None


def test_data_replaced_by_strings_after_the_graph_is_an_error():
    x = Variable(np.array([1.0, 2.0]))
    y = F.sum(x * np.array([2.0, 3.0], np.float32))
    x.data = np.array(["a", "b"])
    with pytest.raises(RuntimeError, match="now holds <U1; only Variables of numbers have "
                                           "gradients"):
        y.backward()


def _numpy_softmax(x):
    e = np.exp(x - x.max(axis=1, keepdims=True).astype(np.float64))
    return e / e.sum(axis=1, keepdims=True)


def _numpy_cross_entropy(x, labels):
    """The mean of -log softmax(x)[i, labels[i]], in float64."""
    picked = _numpy_softmax(x)[np.arange(len(labels)), labels]
    return -np.mean(np.log(picked))


# Functions whose forward on integers or bools must be NumPy's value, not one
# computed in the integer dtype (name -> operation, NumPy's value in float64).
# Found by a sweep: the mean of [1, 2, 0] as int64 was 0 (1/3 made an int64
# constant), softmax_simple of uint8 was nan (x - max wrapped around), and
# so were sigmoid's -x and mean_squared_error's x0 - x1 on uint8.
FLOAT_RESULTS = {
    "mean": (F.mean, lambda x: np.mean(x)),
    "average over an axis": (lambda x: F.average(x, axis=1), lambda x: np.mean(x, axis=1)),
    # (integer zeros: np.zeros_like of a Variable is an array of objects, which a Variable refuses)
    "mean_squared_error_simple": (lambda x: F.mean_squared_error_simple(x, np.zeros(x.shape, np.uint8)),
                                  lambda x: np.mean(x.astype(np.float64) ** 2)),
    "softmax": (F.softmax, _numpy_softmax),
    "softmax_simple": (F.softmax_simple, _numpy_softmax),
    "sigmoid": (F.sigmoid, lambda x: 1 / (1 + np.exp(-x.astype(np.float64)))),
    "mean_squared_error of two": (lambda x: F.mean_squared_error(x, x[::-1]),
                                  lambda x: np.mean((x.astype(np.float64) - x[::-1]) ** 2)),
    # Wrapped (uint8 0 - 1 is 255) or refused (bools) once: the simple versions
    # subtracted in the inputs' dtype.
    "mean_squared_error_simple of two": (
        lambda x: F.mean_squared_error_simple(x, x[::-1]),
        lambda x: np.mean((x.astype(np.float64) - x[::-1]) ** 2)),
    "sigmoid_simple": (F.sigmoid_simple, lambda x: 1 / (1 + np.exp(-x.astype(np.float64)))),
    # Truncated to the scores' dtype once (0.29 of int8 scores was 0).
    "softmax_cross_entropy": (lambda x: F.softmax_cross_entropy(x, np.array([2, 0])),
                              lambda x: _numpy_cross_entropy(x, [2, 0])),
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
