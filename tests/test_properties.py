"""Properties that every differentiable function of dezero_mini keeps, over
drawn shapes, axes, dtypes and values (hypothesis).

Shapes: 0-d, empty, 1-D to 4-D, pairs that broadcast on either side, and
the operands of ``matmul`` with NumPy's rules (1-D, batched, broadcast batch
axes). Axes: None, Python and NumPy integers, negative, tuples. Dtypes:
float32 and float64 Variables, NumPy arrays and Python numbers on either side
of an operator. Values: smooth, far in the tails, zeros, ties.

For every function and every example:

* the output has the dtype and shape that NumPy gives for the same
  expression on arrays (Python numbers are "weak" there, NEP 50);
* backward gives every input a gradient of its own dtype and shape, also
  when the inputs' dtypes differ (mixed precision);
* the gradients of a ``create_graph=True`` pass can be differentiated again,
  and those gradients keep the dtype and shape too;
* on smooth float64 values, the gradient matches central differences (with a
  random upstream gradient, which catches transposed or mis-summed
  gradients that an all-ones one would hide).

The figures in a failure come with hypothesis's shrunk example, and its
``seed`` argument replays it.
"""
import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import dezero_mini as dz
import dezero_mini.functions as F

FLOATS = [np.float32, np.float64]
SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])

dtypes = st.sampled_from(FLOATS)
seeds = st.integers(0, 2**16)
kinds = st.sampled_from(["smooth", "tails", "zeros", "ties"])


def make_array(shape, dtype, kind, seed, low=-2.0, high=2.0):
    """Values of one ``kind``: smooth in [low, high], far in the tails (where
    exp overflows and sigmoid underflows), half zeros, or ties."""
    rng = np.random.RandomState(seed)
    if kind == "smooth":
        a = rng.uniform(low, high, shape)
    elif kind == "tails":
        top = 80.0 if dtype == np.float32 else 700.0
        a = rng.choice([-1.0, 1.0], shape) * rng.uniform(20.0, top, shape)
    elif kind == "zeros":
        a = np.where(rng.rand(*shape) < 0.5, 0.0, rng.uniform(low, high, shape))
    else:
        a = rng.choice([low, (low + high) / 2, high], shape)
    return np.asarray(a, dtype=dtype)


def numpy_result(expression, *arrays):
    """What NumPy gives for ``expression`` on plain arrays (warnings of tails
    and zeros aside)."""
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        return np.asarray(expression(*arrays))


def central_differences(fn, arrays, upstream, eps=1e-6):
    """d/d(arrays) of sum(fn(*arrays) * upstream), by central differences, in float64."""
    grads = []
    for a in arrays:
        g = np.zeros_like(a)
        for index in np.ndindex(*a.shape):
            saved = a[index]
            values = []
            for step in (eps, -eps):
                a[index] = saved + step
                values.append(np.sum(fn(*[dz.Variable(b.copy()) for b in arrays]).data * upstream))
            a[index] = saved
            g[index] = (values[0] - values[1]) / (2 * eps)
        grads.append(g)
    return grads


def check(fn, arrays, reference=None, numeric=False, seed=0):
    """The properties of the module docstring for ``fn``, a function of the
    Variables made from ``arrays`` (``reference``: the same expression on
    arrays; ``numeric``: also compare with central differences)."""
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")  # overflow in the tails is not the subject here
        xs = [dz.Variable(a.copy()) for a in arrays]
        y = fn(*xs)
        if reference is not None:
            expected = numpy_result(reference, *arrays)
            assert (y.dtype, y.shape) == (expected.dtype, expected.shape), "output differs from NumPy's"
        upstream = np.asarray(np.random.RandomState(seed + 1).standard_normal(y.shape), dtype=y.dtype)
        y.grad = dz.Variable(upstream)
        y.backward()
        for i, x in enumerate(xs):
            assert x.grad is not None, f"input {i} got no gradient"
            assert (x.grad.dtype, x.grad.shape) == (x.dtype, x.shape), f"gradient of input {i}"

        # Higher order: differentiate <grad, v> once more.
        for x in xs:
            x.cleargrad()
        y = fn(*xs)
        y.grad = dz.Variable(upstream)
        y.backward(create_graph=True)
        first = [x.grad for x in xs]
        for i, g in enumerate(first):
            assert (g.dtype, g.shape) == (xs[i].dtype, xs[i].shape), f"create_graph gradient of input {i}"
        for x in xs:
            x.cleargrad()
        total = None
        for g in first:
            term = F.sum(g * g)
            total = term if total is None else total + term
        if total.creator is not None:  # (a linear function's gradient is a constant)
            total.backward()
            for i, x in enumerate(xs):
                if x.grad is not None:
                    assert (x.grad.dtype, x.grad.shape) == (x.dtype, x.shape), f"second-order gradient {i}"

    if numeric and all(a.dtype == np.float64 for a in arrays):
        xs = [dz.Variable(a.copy()) for a in arrays]
        y = fn(*xs)
        y.grad = dz.Variable(upstream)
        y.backward()
        expected = central_differences(fn, [a.copy() for a in arrays], upstream)
        for i, (x, g) in enumerate(zip(xs, expected)):
            np.testing.assert_allclose(x.grad.data, g, rtol=1e-5, atol=1e-7, err_msg=f"input {i}")


shapes = hnp.array_shapes(min_dims=0, max_dims=4, min_side=0, max_side=3)


# --- element-wise ----------------------------------------------------------------------------
# name: (dezero_mini, the same on arrays, the range of smooth values); KINKED: no numeric check
UNARY = {
    "neg": (lambda x: -x, lambda a: -a, (-2, 2)),
    "square": (F.square, np.square, (-2, 2)),
    "exp": (F.exp, np.exp, (-2, 2)),
    "log": (F.log, np.log, (0.5, 3)),
    "sin": (F.sin, np.sin, (-2, 2)),
    "cos": (F.cos, np.cos, (-2, 2)),
    "tanh": (F.tanh, np.tanh, (-2, 2)),
    "sigmoid": (F.sigmoid, lambda a: 1 / (1 + np.exp(-a)), (-2, 2)),
    "log-sigmoid": (lambda x: F.log(F.sigmoid(x)), lambda a: -np.log1p(np.exp(-a)), (-2, 2)),
    "relu": (F.relu, lambda a: np.maximum(a, 0), (-2, 2)),
    "leaky_relu": (lambda x: F.leaky_relu(x, 0.1), lambda a: np.where(a > 0, a, a * 0.1), (-2, 2)),
    "clip": (lambda x: F.clip(x, -0.5, 0.7), lambda a: np.clip(a, -0.5, 0.7), (-2, 2)),
    "pow-2": (lambda x: x**2, lambda a: a**2, (-2, 2)),
    "pow-3": (lambda x: F.pow(x, 3), lambda a: a**3, (-2, 2)),
    "pow-0": (lambda x: x**0, lambda a: a**0, (-2, 2)),
    "pow-half": (lambda x: x**0.5, lambda a: a**0.5, (0.5, 3)),
    "rpow": (lambda x: 2.0**x, lambda a: 2.0**a, (-2, 2)),
    "rdiv": (lambda x: 1.0 / x, lambda a: 1.0 / a, (0.5, 3)),
    "rsub-int": (lambda x: 3 - x, lambda a: 3 - a, (-2, 2)),
    "mul-python": (lambda x: x * 0.5 + 1, lambda a: a * 0.5 + 1, (-2, 2)),
}
KINKED = {"relu", "leaky_relu", "clip"}


@SETTINGS
@given(name=st.sampled_from(sorted(UNARY)), shape=shapes, dtype=dtypes, kind=kinds, seed=seeds)
def test_elementwise(name, shape, dtype, kind, seed):
    fn, reference, (low, high) = UNARY[name]
    if low > 0 and kind != "smooth":
        kind = "ties"  # stay in the domain (log, sqrt, 1/x)
    a = make_array(shape, dtype, kind, seed, low, high)
    numeric = kind == "smooth" and name not in KINKED
    check(fn, [a], reference, numeric=numeric, seed=seed)
    # The values, against NumPy in float64: accurate in the tails too (log of sigmoid at -40 is -40).
    expected = numpy_result(reference, a.astype(np.float64)).astype(dtype)
    with np.errstate(all="ignore"):
        got = fn(dz.Variable(a)).data
    tolerance = 8 * np.finfo(dtype).eps
    np.testing.assert_allclose(got, expected, rtol=tolerance, atol=tolerance)  # (log of 1 - tiny: 0)


# --- arithmetic with broadcasting, Python numbers and arrays on either side -------------------------
OPERATORS = {
    "add": (lambda p, q: p + q, (-2, 2), (-2, 2)),
    "sub": (lambda p, q: p - q, (-2, 2), (-2, 2)),
    "mul": (lambda p, q: p * q, (-2, 2), (-2, 2)),
    "div": (lambda p, q: p / q, (-2, 2), (0.5, 2)),
    "pow": (lambda p, q: p**q, (0.5, 2), (-2, 2)),
}
# What stands on each side: a Variable, a NumPy array, or a Python number.
operands = st.sampled_from(["variable", "variable", "array", "int", "float"])


@SETTINGS
@given(
    op=st.sampled_from(sorted(OPERATORS)),
    pair=hnp.mutually_broadcastable_shapes(num_shapes=2, min_dims=0, max_dims=4, min_side=0, max_side=3),
    sides=st.tuples(operands, operands),
    dtype_pair=st.tuples(dtypes, dtypes),
    kind=st.sampled_from(["smooth", "zeros", "ties"]),
    seed=seeds,
)
def test_arithmetic(op, pair, sides, dtype_pair, kind, seed):
    if "variable" not in sides:
        sides = ("variable", sides[1])
    fn, *ranges = OPERATORS[op]
    if op in ("div", "pow") and kind == "zeros":
        kind = "smooth"  # no division by zero, no 0 ** negative
    values, variables = [], []
    for i, (side, shape, dtype, (low, high)) in enumerate(zip(sides, pair.input_shapes, dtype_pair, ranges)):
        if side == "int":
            values.append(int(high))  # 2: inside each operand's range
        elif side == "float":
            values.append(float(high) - 0.25)
        else:
            values.append(make_array(shape, dtype, kind, seed + i, low, high))
            if side == "variable":
                variables.append(i)

    def with_variables(*xs):
        operands_now = list(values)
        for i, x in zip(variables, xs):
            operands_now[i] = x
        return fn(*operands_now)

    check(with_variables, [values[i] for i in variables], lambda *arrays: fn(*values),
          numeric=kind == "smooth", seed=seed)


# --- matmul with NumPy's rules ----------------------------------------------------------------
@SETTINGS
@given(
    shapes=hnp.mutually_broadcastable_shapes(signature="(m?,n),(n,p?)->(m?,p?)", max_dims=4, min_side=1,
                                             max_side=3),
    dtype_pair=st.tuples(dtypes, dtypes),
    seed=seeds,
)
def test_matmul(shapes, dtype_pair, seed):
    a, b = (make_array(s, d, "smooth", seed + i) for i, (s, d) in enumerate(zip(shapes.input_shapes, dtype_pair)))
    check(F.matmul, [a, b], np.matmul, numeric=True, seed=seed)


@SETTINGS
@given(batch=hnp.array_shapes(min_dims=0, max_dims=2, min_side=1, max_side=3),
       sizes=st.tuples(st.integers(1, 3), st.integers(1, 3)), bias=st.booleans(), dtype=dtypes, seed=seeds)
def test_linear(batch, sizes, bias, dtype, seed):
    n_in, n_out = sizes
    arrays = [make_array(batch + (n_in,), dtype, "smooth", seed), make_array((n_in, n_out), dtype, "smooth", seed + 1)]
    if bias:
        arrays.append(make_array((n_out,), dtype, "smooth", seed + 2))
    check(F.linear, arrays, lambda x, W, *b: x @ W + (b[0] if b else 0), numeric=True, seed=seed)


# --- reductions over any axes ------------------------------------------------------------------
@st.composite
def shape_and_axis(draw, min_side=0):
    shape = draw(hnp.array_shapes(min_dims=0, max_dims=4, min_side=min_side, max_side=3))
    ndim = len(shape)
    integer = st.sampled_from([int, np.int64, np.int32])
    one = st.tuples(st.integers(-max(ndim, 1), max(ndim, 1) - 1), integer).map(lambda p: p[1](p[0]))
    choices = [st.none(), one]
    if ndim:
        choices.append(st.permutations(range(ndim)).flatmap(
            lambda axes: st.integers(1, ndim).map(lambda k: tuple(a - ndim if a % 2 else a for a in axes[:k]))))
    return shape, draw(st.one_of(*choices))


REDUCTIONS = {"sum": (F.sum, np.sum), "mean": (F.mean, np.mean), "max": (F.max, np.max), "min": (F.min, np.min)}


@SETTINGS
@given(name=st.sampled_from(sorted(REDUCTIONS)), shape_axis=shape_and_axis(), keepdims=st.booleans(),
       dtype=dtypes, kind=kinds, seed=seeds)
def test_reductions(name, shape_axis, keepdims, dtype, kind, seed):
    shape, axis = shape_axis
    fn, reference = REDUCTIONS[name]
    a = make_array(shape, dtype, kind, seed)
    if name in ("max", "min"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                np.max(a, axis=axis)
            except ValueError:  # the maximum of nothing: an error in NumPy and PyTorch too
                with pytest.raises(ValueError, match=f"^{type(fn(np.ones(1)).creator).__name__}: "):
                    fn(a, axis=axis, keepdims=keepdims)
                return
    check(lambda x: fn(x, axis=axis, keepdims=keepdims), [a],
          # (np.mean rejects axis 0 of a 0-d array, which np.sum and PyTorch accept)
          lambda b: reference(b, axis=axis if b.ndim else None, keepdims=keepdims),
          numeric=kind == "smooth", seed=seed)  # (ties of max/min: see test_functions)


# --- softmax and log_softmax, over an axis that may be empty, and of 0-d arrays ----------------------
@SETTINGS
@given(fn=st.sampled_from([F.softmax, F.log_softmax]), shape_axis=shape_and_axis(), dtype=dtypes,
       kind=kinds, seed=seeds)
def test_softmax_family(fn, shape_axis, dtype, kind, seed):
    shape, axis = shape_axis
    a = make_array(shape, dtype, kind, seed)
    check(lambda x: fn(x, axis=axis), [a], lambda b: b, numeric=kind == "smooth", seed=seed)
    y = fn(a, axis=axis).data
    if fn is F.softmax and a.size:
        np.testing.assert_allclose(y.sum(axis=axis), 1.0, rtol=1e-5 if dtype == np.float32 else 1e-12)
    assert np.all(np.isfinite(y)), "softmax of finite scores is finite, even in the tails"


# --- shapes ----------------------------------------------------------------------------------
@st.composite
def shape_cases(draw):
    """(name, function, input shape, the same on arrays) for a shape function."""
    name = draw(st.sampled_from(["reshape", "transpose", "broadcast_to", "sum_to", "get_item",
                                 "expand_dims", "flatten"]))
    shape = draw(hnp.array_shapes(min_dims=1 if name in ("get_item", "flatten") else 0, max_dims=4,
                                  min_side=0, max_side=3))
    ndim = len(shape)
    if name == "reshape":
        target = (-1,) if draw(st.booleans()) else (int(np.prod(shape)),)
        return name, lambda x: F.reshape(x, target), shape, lambda a: a.reshape(target)
    if name == "transpose":
        axes = tuple(draw(st.permutations(range(ndim))))
        return name, lambda x: F.transpose(x, axes or None), shape, lambda a: a.transpose(axes or None)
    if name in ("broadcast_to", "sum_to"):
        small, big = draw(hnp.mutually_broadcastable_shapes(num_shapes=1, base_shape=shape, max_dims=4,
                                                            min_side=0, max_side=3)).input_shapes[0], shape
        big = np.broadcast_shapes(small, big)
        if name == "broadcast_to":
            return name, lambda x: F.broadcast_to(x, big), small, lambda a: np.broadcast_to(a, big)
        return name, lambda x: F.sum_to(x, small), big, lambda a: np.zeros(small, a.dtype)
    if name == "get_item":
        index = draw(st.one_of(
            st.integers(-shape[0], shape[0] - 1) if shape[0] else st.just(slice(None)),
            st.builds(slice, st.integers(-3, 3) | st.none(), st.integers(-3, 3) | st.none(),
                      st.sampled_from([None, 1, 2, -1])),
            st.lists(st.integers(0, shape[0] - 1), min_size=0, max_size=4).map(lambda i: np.array(i, np.intp))
            if shape[0]
            else st.just(Ellipsis),
        ))
        return name, lambda x: x[index], shape, lambda a: a[index]
    if name == "expand_dims":
        axis = draw(st.integers(-ndim - 1, ndim))
        return name, lambda x: F.expand_dims(x, axis), shape, lambda a: np.expand_dims(a, axis)
    shape = tuple(n or 1 for n in shape)  # (NumPy cannot flatten (0, 3) with -1 either)
    return name, F.flatten, shape, lambda a: a.reshape(a.shape[0], -1)


@SETTINGS
@given(case=shape_cases(), dtype=dtypes, seed=seeds)
def test_shape_functions(case, dtype, seed):
    _, fn, shape, reference = case
    check(fn, [make_array(shape, dtype, "smooth", seed)], reference, numeric=True, seed=seed)


@SETTINGS
@given(data=st.data(), count=st.integers(1, 3), dtype_list=st.lists(dtypes, min_size=3, max_size=3),
       stack=st.booleans(), seed=seeds)
def test_concat_and_stack(data, count, dtype_list, stack, seed):
    shape = data.draw(hnp.array_shapes(min_dims=0 if stack else 1, max_dims=3, min_side=0, max_side=3))
    ndim = len(shape)
    if stack:
        axis = data.draw(st.integers(-ndim - 1, ndim))
        shapes_ = [shape] * count
        fn, reference = (lambda *xs: F.stack(xs, axis=axis)), (lambda *arrays: np.stack(arrays, axis=axis))
    else:
        axis = data.draw(st.integers(-ndim, ndim - 1))
        sizes = data.draw(st.lists(st.integers(0, 3), min_size=count, max_size=count))
        shapes_ = [shape[:axis % ndim] + (n,) + shape[axis % ndim + 1:] for n in sizes]
        fn, reference = (lambda *xs: F.concat(xs, axis=axis)), (lambda *arrays: np.concatenate(arrays, axis=axis))
    arrays = [make_array(s, d, "smooth", seed + i) for i, (s, d) in enumerate(zip(shapes_, dtype_list))]
    check(fn, arrays, reference, numeric=True, seed=seed)


# --- losses ----------------------------------------------------------------------------------
@SETTINGS
@given(n=st.integers(0, 4), c=st.integers(1, 4), dtype=dtypes, kind=kinds, seed=seeds)
def test_losses(n, c, dtype, kind, seed):
    x = make_array((n, c), dtype, kind, seed)
    target = make_array((n, c), dtype, "smooth", seed + 1)
    check(lambda v: F.mean_squared_error(v, target), [x], lambda a: np.mean((a - target) ** 2),
          numeric=kind == "smooth", seed=seed)
    labels = np.random.RandomState(seed).randint(0, c, size=n)
    check(lambda v: F.softmax_cross_entropy(v, labels), [x], lambda a: np.asarray(0, a.dtype),
          numeric=kind == "smooth", seed=seed)
