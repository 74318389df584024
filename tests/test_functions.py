"""dezero_mini.functions (F) and dezero_mini.utils: every function against a
numerical gradient, properties over random shapes and values, second
derivatives, the losses against direct numpy formulas, dropout's two modes,
errors that name the operation, and the drawing of the computational graph.
"""
import shutil
import weakref

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from test_gradients import check_gradients

import dezero_mini as dz
import dezero_mini.functions as F
from dezero_mini import utils
from dezero_mini.memory.refgraph import GraphvizNotFound

LABELS = np.array([2, 0, 3, 3, 1])  # for scores of shape (5, 4)


def seeded_dropout(a, ratio=0.3):
    """Dropout with the same mask at every call (the numerical gradient calls
    the function many times)."""
    np.random.seed(1234)
    return F.dropout(a, ratio)


# (case id, function of (module, *inputs), input shapes, inputs must be positive)
CASES = [
    # element-wise
    ("square", lambda m, a: F.square(a), [(3, 4)], False),
    ("exp", lambda m, a: F.exp(a), [(3, 4)], False),
    ("log", lambda m, a: F.log(a), [(3, 4)], True),
    ("sin", lambda m, a: F.sin(a), [(3, 4)], False),
    ("cos", lambda m, a: F.cos(a), [(3, 4)], False),
    ("tanh", lambda m, a: F.tanh(a), [(3, 4)], False),
    ("sigmoid", lambda m, a: F.sigmoid(a), [(3, 4)], False),
    ("relu", lambda m, a: F.relu(a), [(3, 4)], False),
    ("leaky_relu", lambda m, a: F.leaky_relu(a, 0.1), [(3, 4)], False),
    ("clip", lambda m, a: F.clip(a, -0.5, 0.7), [(4, 5)], False),
    ("clip-upper-only", lambda m, a: F.clip(a, None, 0.3), [(4, 5)], False),
    # arithmetic re-exported from core
    ("add-broadcast", lambda m, a, b: F.add(a, b), [(3, 4), (4,)], False),
    ("sub-broadcast", lambda m, a, b: F.sub(a, b), [(3, 1), (3, 4)], False),
    ("mul-broadcast", lambda m, a, b: F.mul(a, b), [(2, 3, 4), (3, 1)], False),
    ("div-broadcast", lambda m, a, b: F.div(a, b), [(3, 4), (4,)], True),
    ("neg", lambda m, a: F.neg(a), [(3, 4)], False),
    ("pow", lambda m, a: F.pow(a, 3), [(3, 4)], False),
    # softmax family
    ("softmax", lambda m, a: F.softmax(a), [(3, 4)], False),
    ("softmax-axis0", lambda m, a: F.softmax(a, axis=0), [(3, 4)], False),
    ("softmax-3d-last", lambda m, a: F.softmax(a, axis=-1), [(2, 3, 4)], False),
    ("log_softmax", lambda m, a: F.log_softmax(a), [(3, 4)], False),
    ("log_softmax-axis0", lambda m, a: F.log_softmax(a, axis=0), [(3, 4)], False),
    # shapes
    ("reshape", lambda m, a: F.reshape(a, (4, 3)), [(3, 4)], False),
    ("reshape-minus-one", lambda m, a: F.reshape(a, (2, -1)), [(3, 4)], False),
    ("reshape-method", lambda m, a: a.reshape(12), [(3, 4)], False),
    ("transpose", lambda m, a: F.transpose(a), [(3, 4)], False),
    ("transpose-axes", lambda m, a: F.transpose(a, (2, 0, 1)), [(2, 3, 4)], False),
    ("transpose-negative-axes", lambda m, a: F.transpose(a, (0, -1, -2)), [(2, 3, 4)], False),
    ("expand_dims", lambda m, a: F.expand_dims(a, 1), [(3, 4)], False),
    ("flatten", lambda m, a: F.flatten(a), [(2, 3, 4)], False),
    ("get_item-int", lambda m, a: F.get_item(a, 1), [(3, 4)], False),
    ("get_item-scalar", lambda m, a: F.get_item(a, (1, 2)), [(3, 4)], False),
    ("get_item-slice", lambda m, a: F.get_item(a, np.s_[1:, ::2]), [(3, 4)], False),
    ("get_item-ellipsis-newaxis", lambda m, a: a[..., None, 1], [(2, 3, 4)], False),
    ("get_item-repeated", lambda m, a: F.get_item(a, [0, 2, 0, 0]), [(3, 4)], False),
    ("get_item-pairs", lambda m, a: a[np.arange(5), LABELS], [(5, 4)], False),
    ("get_item-mixed", lambda m, a: a[:, [1, 1, 3]], [(3, 4)], False),
    ("get_item-mask", lambda m, a: a[np.array([True, False, True])], [(3, 4)], False),
    ("broadcast_to", lambda m, a: F.broadcast_to(a, (3, 4)), [(4,)], False),
    ("broadcast_to-middle", lambda m, a: F.broadcast_to(a, (2, 3, 4)), [(2, 1, 4)], False),
    ("sum_to", lambda m, a: F.sum_to(a, (3, 1)), [(3, 4)], False),
    ("sum_to-lead", lambda m, a: F.sum_to(a, (1, 4)), [(2, 3, 4)], False),
    # reductions
    ("sum", lambda m, a: F.sum(a), [(3, 4)], False),
    ("sum-axis1", lambda m, a: F.sum(a, axis=1), [(3, 4)], False),
    ("sum-axis-neg-keepdims", lambda m, a: F.sum(a, axis=-2, keepdims=True), [(2, 3, 4)], False),
    ("sum-axes-tuple", lambda m, a: F.sum(a, axis=(0, 2)), [(2, 3, 4)], False),
    ("sum-all-keepdims", lambda m, a: F.sum(a, keepdims=True), [(2, 3)], False),
    ("max", lambda m, a: F.max(a), [(3, 4)], False),
    ("max-axis1", lambda m, a: F.max(a, axis=1), [(3, 4)], False),
    ("max-axis0-keepdims", lambda m, a: F.max(a, axis=0, keepdims=True), [(3, 4)], False),
    ("max-axes-tuple", lambda m, a: F.max(a, axis=(0, 2)), [(2, 3, 4)], False),
    ("max-method", lambda m, a: a.max(axis=-1), [(2, 3, 4)], False),
    ("min", lambda m, a: F.min(a), [(3, 4)], False),
    ("min-axis1-keepdims", lambda m, a: F.min(a, axis=1, keepdims=True), [(3, 4)], False),
    ("min-method", lambda m, a: a.min(axis=0), [(3, 4)], False),
    ("average", lambda m, a: F.average(a, axis=0), [(3, 4)], False),
    ("mean-all", lambda m, a: F.mean(a), [(3, 4)], False),
    # linear algebra
    ("matmul", lambda m, a, b: F.matmul(a, b), [(3, 4), (4, 2)], False),
    ("matmul-method", lambda m, a, b: a.dot(b), [(3, 4), (4, 2)], False),
    ("linear", lambda m, x, W, b: F.linear(x, W, b), [(5, 3), (3, 4), (4,)], False),
    ("linear-row-bias", lambda m, x, W, b: F.linear(x, W, b), [(5, 3), (3, 4), (1, 4)], False),
    ("linear-no-bias", lambda m, x, W: F.linear(x, W), [(5, 3), (3, 4)], False),
    ("linear-batched", lambda m, x, W, b: F.linear(x, W, b), [(2, 5, 3), (3, 4), (4,)], False),
    # matmul with NumPy's rules: stacks of matrices, broadcast batch axes, 1-D operands
    ("matmul-batched", lambda m, a, b: F.matmul(a, b), [(2, 3, 4), (2, 4, 5)], False),
    ("matmul-batch-broadcast", lambda m, a, b: a @ b, [(2, 1, 3, 4), (3, 4, 2)], False),
    ("matmul-batch-broadcast-right", lambda m, a, b: a @ b, [(3, 4), (2, 4, 2)], False),
    ("matmul-1d-left", lambda m, a, b: F.matmul(a, b), [(4,), (4, 2)], False),
    ("matmul-1d-right", lambda m, a, b: F.matmul(a, b), [(3, 4), (4,)], False),
    ("matmul-1d-both", lambda m, a, b: F.matmul(a, b), [(4,), (4,)], False),
    ("matmul-1d-batched", lambda m, a, b: F.matmul(a, b), [(4,), (2, 4, 3)], False),
    ("matmul-batched-1d", lambda m, a, b: F.matmul(a, b), [(2, 3, 4), (4,)], False),
    # a Variable as the exponent, and joining Variables
    ("pow-variable-exponent", lambda m, a, b: a**b, [(3, 4), (3, 4)], True),
    ("pow-variable-exponent-broadcast", lambda m, a, b: F.pow(a, b), [(3, 4), (4,)], True),
    ("rpow", lambda m, a: 2.0**a, [(3, 4)], False),
    ("rpow-array-base", lambda m, a: np.array([0.5, 1.5, 2.0, 3.0]) ** a, [(3, 4)], False),
    ("concat", lambda m, a, b: F.concat([a, b], axis=1), [(3, 2), (3, 4)], False),
    ("concat-negative-axis", lambda m, a, b, c: F.concat((a, b, c), axis=-2), [(2, 1, 3), (2, 2, 3), (2, 1, 3)],
     False),
    ("stack", lambda m, a, b: F.stack([a, b]), [(3, 4), (3, 4)], False),
    ("stack-last", lambda m, a, b: F.stack([a, b * a], axis=-1), [(3, 4), (3, 4)], False),
    # losses and regularisation
    ("mean_squared_error", lambda m, a, b: F.mean_squared_error(a, b), [(5, 2), (5, 2)], False),
    ("softmax_cross_entropy", lambda m, a: F.softmax_cross_entropy(a, LABELS), [(5, 4)], False),
    (
        "softmax_cross_entropy-column-labels",
        lambda m, a: F.softmax_cross_entropy(a, LABELS.reshape(5, 1)),
        [(5, 4)],
        False,
    ),
    ("dropout-train", lambda m, a: seeded_dropout(a), [(4, 5)], False),
    (
        "mlp",
        lambda m, x, W1, b1, W2: F.softmax_cross_entropy(
            F.linear(F.dropout(F.relu(F.linear(x, W1, b1)), 0.0), W2), LABELS
        ),
        [(5, 3), (3, 6), (6,), (6, 4)],
        False,
    ),
]


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_gradient_matches_numerical(case):
    _, fn, shapes, positive = case
    check_gradients(dz, fn, shapes, positive)


@pytest.mark.parametrize("seed", range(3))
def test_gradient_check_helper_on_the_losses(seed):
    rng = np.random.RandomState(seed)
    assert utils.gradient_check(lambda a: F.softmax_cross_entropy(a, LABELS), rng.randn(5, 4))
    assert utils.gradient_check(lambda a: F.log_softmax(a, axis=0), rng.randn(3, 2))


# --- higher-order derivatives -----------------------------------------------------
@pytest.mark.parametrize(
    "fn, second",
    [
        (F.tanh, lambda x: -2 * np.tanh(x) * (1 - np.tanh(x) ** 2)),
        (F.sin, lambda x: -np.sin(x)),
        (F.cos, lambda x: -np.cos(x)),
        (F.exp, np.exp),
        (F.sigmoid, lambda x: (s := 1 / (1 + np.exp(-x))) * (1 - s) * (1 - 2 * s)),
        (lambda x: F.log(x * x + 1), lambda x: (2 - 2 * x**2) / (x**2 + 1) ** 2),
    ],
    ids=["tanh", "sin", "cos", "exp", "sigmoid", "log"],
)
def test_second_derivative(fn, second):
    data = np.linspace(-2.0, 2.0, 7)
    x = dz.Variable(data.copy())
    y = fn(x)
    y.backward(create_graph=True)
    gx = x.grad
    x.cleargrad()
    F.sum(gx).backward()
    np.testing.assert_allclose(x.grad.data, second(data), rtol=1e-7, atol=1e-10)


def test_third_derivative_of_sin():
    x = dz.Variable(np.array(0.7))
    y = F.sin(x)
    for _ in range(3):
        x.cleargrad()
        y.backward(create_graph=True)
        y = x.grad
    np.testing.assert_allclose(y.data, -np.cos(0.7))


SECOND_ORDER = [
    ("softmax", lambda a: F.softmax(a)),
    ("log_softmax", lambda a: F.log_softmax(a, axis=0)),
    ("softmax_cross_entropy", lambda a: F.softmax_cross_entropy(a, LABELS[:3])),
    ("sigmoid-linear", lambda a: F.sigmoid(F.linear(a, dz.Variable(np.eye(4)[:, :2]), None))),
    ("square-of-get_item", lambda a: F.square(a[[0, 0, 2]])),
    ("tanh-of-max", lambda a: F.tanh(F.max(a, axis=1))),
    ("exp-of-sum_to", lambda a: F.exp(F.sum_to(a, (1, 4)))),
    ("relu-times-x", lambda a: F.relu(a) * a),
    # Every formula that reads its inputs, or calls another function, in both
    # kinds (arrays in a plain pass, Variables with create_graph):
    ("transpose-axes-times-x", lambda a: F.transpose(a, (1, 0)) ** 2 * F.transpose(a)),
    ("reshape-squared", lambda a: F.reshape(a, (2, 6)) ** 3),
    ("broadcast_to-times-x", lambda a: F.broadcast_to(F.sum(a, axis=0), (3, 4)) * a),
    ("sum-axis-keepdims", lambda a: F.sum(a * a, axis=1, keepdims=True) * a),
    ("div-broadcast", lambda a: a / (F.exp(a[0]) + 1.0)),
    ("pow-3", lambda a: F.pow(a, 3)),
    ("sub-broadcast-squared", lambda a: (a - F.sum(a, axis=0)) ** 2),
    ("matmul-own-transpose", lambda a: F.matmul(a, F.transpose(a)) * 0.5),
    ("mean_squared_error", lambda a: F.mean_squared_error(F.sin(a), a * a)),
    ("clip-times-x", lambda a: F.clip(a, -0.5, 0.5) * a),
    ("slice-squared", lambda a: a[1:, ::2] ** 2),
    ("leaky_relu-times-x", lambda a: F.leaky_relu(a, 0.1) * a),
    ("min-squared", lambda a: F.min(a * a, axis=0) * F.sum(a, axis=0)),
    ("cos-exp", lambda a: F.cos(F.exp(a * 0.5))),
    ("matmul-batched", lambda a: F.matmul(F.reshape(a, (3, 2, 2)), F.reshape(F.sin(a), (3, 2, 2)))),
    ("matmul-1d", lambda a: F.matmul(a[0], F.transpose(a)) * a[1, :3]),
    ("pow-variable-exponent", lambda a: (a * a + 1.0) ** F.tanh(a)),
    ("rpow", lambda a: 1.5 ** (a * a)),
    ("concat-stack", lambda a: F.stack([F.concat([a, a * a], axis=1), F.concat([a * a, a], axis=1)], axis=1)),
    ("sigmoid-tails", lambda a: F.sigmoid(a * 20.0)),
]


@pytest.mark.parametrize("case", SECOND_ORDER, ids=[c[0] for c in SECOND_ORDER])
def test_backward_can_be_differentiated(case):
    """The gradient of <grad f(x), v> (a Hessian-vector product, through
    create_graph) matches central differences of that gradient."""
    _, fn = case
    rng = np.random.RandomState(0)
    data = rng.randn(3, 4)

    def grad_dot_v(x):
        y = fn(x)
        y.grad = dz.Variable(np.asarray(np.random.RandomState(1).randn(*y.shape)))
        y.backward(create_graph=True)
        return F.sum(x.grad * np.random.RandomState(2).randn(*x.shape))

    x = dz.Variable(data.copy())
    out = grad_dot_v(x)
    x.cleargrad()
    out.backward()
    expected = utils.numerical_grad(grad_dot_v, data.copy(), eps=1e-6)
    np.testing.assert_allclose(x.grad.data, expected, rtol=1e-5, atol=1e-7)


# --- properties over shapes and values ---------------------------------------------------
def matrices(min_side=1, max_side=5, elements=None):
    elements = elements or st.floats(-30, 30, allow_nan=False, width=64)
    return hnp.arrays(
        np.float64, hnp.array_shapes(min_dims=2, max_dims=2, min_side=min_side, max_side=max_side),
        elements=elements,
    )


@settings(max_examples=60, deadline=None)
@given(x=matrices(), shift=st.floats(-1e3, 1e3), axis=st.sampled_from([0, 1, -1]))
def test_softmax_sums_to_one_and_ignores_a_constant(x, shift, axis):
    y = F.softmax(dz.Variable(x), axis=axis).data
    assert np.all(y >= 0)
    np.testing.assert_allclose(y.sum(axis=axis), 1.0, rtol=1e-12)
    shifted = F.softmax(dz.Variable(x + shift), axis=axis).data
    np.testing.assert_allclose(shifted, y, rtol=1e-6, atol=1e-12)


@settings(max_examples=60, deadline=None)
@given(x=matrices(), axis=st.sampled_from([0, 1]))
def test_log_softmax_is_log_of_softmax(x, axis):
    v = dz.Variable(x)
    np.testing.assert_allclose(
        F.log_softmax(v, axis).data, F.log(F.softmax(v, axis)).data, rtol=1e-9, atol=1e-9
    )


@settings(max_examples=30, deadline=None)
@given(x=matrices(), scale=st.sampled_from([1e3, 1e6, 1e300]))
def test_log_softmax_and_loss_stay_finite_for_huge_scores(x, scale):
    with np.errstate(over="raise", invalid="raise", divide="raise"):
        big = dz.Variable(x * scale)
        assert np.all(np.isfinite(F.log_softmax(big).data))
        t = np.zeros(x.shape[0], dtype=np.int64)
        loss = F.softmax_cross_entropy(big, t)
        assert np.isfinite(loss.data)


@settings(max_examples=60, deadline=None)
@given(
    data=st.data(),
    rows=st.integers(1, 5),
    cols=st.integers(1, 3),
)
def test_get_item_gradient_scatter_adds_repeated_indices(data, rows, cols):
    index = data.draw(st.lists(st.integers(0, rows - 1), min_size=1, max_size=8))
    x = dz.Variable(np.random.RandomState(rows).randn(rows, cols))
    w = np.random.RandomState(len(index)).randn(len(index), cols)
    y = x[index]
    np.testing.assert_array_equal(y.data, x.data[index])
    y.grad = dz.Variable(w)
    y.backward()
    expected = np.zeros((rows, cols))
    for k, i in enumerate(index):  # a plain loop: every use adds its gradient
        expected[i] += w[k]
    np.testing.assert_allclose(x.grad.data, expected, rtol=1e-12)


@st.composite
def broadcastable_pair(draw):
    """A small shape and a bigger one it broadcasts to (leading axes added,
    some axes of size 1 stretched)."""
    big = draw(hnp.array_shapes(min_dims=1, max_dims=4, min_side=1, max_side=4))
    lead = draw(st.integers(0, len(big) - 1))
    small = tuple(1 if draw(st.booleans()) else n for n in big[lead:])
    return small, big


@settings(max_examples=80, deadline=None)
@given(shapes=broadcastable_pair(), seed=st.integers(0, 2**16))
def test_broadcast_to_and_sum_to_are_adjoint(shapes, seed):
    """<broadcast_to(x), y> == <x, sum_to(y)>, and each is the other's gradient."""
    small, big = shapes
    rng = np.random.RandomState(seed)
    x, y = rng.randn(*small), rng.randn(*big)
    bx = F.broadcast_to(dz.Variable(x), big)
    sy = F.sum_to(dz.Variable(y), small)
    assert bx.shape == big and sy.shape == small
    np.testing.assert_allclose(np.sum(bx.data * y), np.sum(x * sy.data), rtol=1e-10, atol=1e-10)
    check_gradients(dz, lambda m, a: F.broadcast_to(a, big), [small], False, seed=seed)
    check_gradients(dz, lambda m, a: F.sum_to(a, small), [big], False, seed=seed)


@settings(max_examples=60, deadline=None)
@given(
    shape=hnp.array_shapes(min_dims=1, max_dims=3, min_side=1, max_side=4),
    data=st.data(),
    keepdims=st.booleans(),
    reduce=st.sampled_from(["sum", "max", "min", "average"]),
    seed=st.integers(0, 2**16),
)
def test_reductions_over_any_axes(shape, data, keepdims, reduce, seed):
    ndim = len(shape)
    axis = data.draw(
        st.one_of(
            st.none(),
            st.integers(-ndim, ndim - 1),
            st.lists(st.integers(0, ndim - 1), min_size=1, max_size=ndim, unique=True).map(tuple),
        )
    )
    fn = getattr(F, reduce)
    x = np.random.RandomState(seed).randn(*shape)
    y = fn(dz.Variable(x), axis=axis, keepdims=keepdims)
    reference = {"sum": np.sum, "max": np.max, "min": np.min, "average": np.mean}[reduce]
    np.testing.assert_allclose(y.data, reference(x, axis=axis, keepdims=keepdims), rtol=1e-12)
    check_gradients(dz, lambda m, a: fn(a, axis=axis, keepdims=keepdims), [shape], False, seed=seed)


@settings(max_examples=40, deadline=None)
@given(x=matrices(), bounds=st.tuples(st.floats(-10, 10), st.floats(-10, 10)))
def test_clip_bounds_and_gradient_mask(x, bounds):
    lo, hi = sorted(bounds)
    v = dz.Variable(x)
    y = F.clip(v, lo, hi)
    assert np.all(y.data >= lo) and np.all(y.data <= hi)
    F.sum(y).backward()
    np.testing.assert_array_equal(v.grad.data, ((x >= lo) & (x <= hi)) * 1.0)


def test_max_gives_the_gradient_to_every_tied_maximum():
    x = dz.Variable(np.array([[1.0, 3.0, 3.0], [2.0, 0.0, -1.0]]))
    F.sum(F.max(x, axis=1)).backward()
    np.testing.assert_array_equal(x.grad.data, [[0, 1, 1], [1, 0, 0]])


NAN = np.nan


# (function, axis, input, gradient): PyTorch's max()/min() and max(dim)/min(dim)
# give the gradient to the NaN (checked against torch 2.13 CPU); ties get the
# whole gradient each, as in DeZero (the table of differences).
NAN_CASES = [
    (F.max, None, [NAN, 1.0, 3.0], [1, 0, 0]),
    (F.min, None, [NAN, 1.0, 3.0], [1, 0, 0]),
    (F.max, 1, [[NAN, 1.0], [2.0, 3.0]], [[1, 0], [0, 1]]),
    (F.min, 0, [[NAN, 1.0], [2.0, 3.0]], [[1, 1], [0, 0]]),
    (F.max, None, [NAN, NAN, 1.0], [1, 1, 0]),  # (PyTorch: 0.5 each, as for any tie)
]


@pytest.mark.parametrize("function, axis, x, expected", NAN_CASES)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_max_and_min_propagate_nan_and_give_it_the_gradient(function, axis, x, expected, dtype):
    v = dz.Variable(np.array(x, dtype))
    y = function(v, axis=axis)
    np.testing.assert_array_equal(y.data, np.max(v.data, axis) if function is F.max
                                  else np.min(v.data, axis))
    F.sum(y).backward()
    np.testing.assert_array_equal(v.grad.data, np.array(expected, dtype))


# --- losses against numpy formulas ---------------------------------------------------------
def numpy_cross_entropy(x, t):
    p = np.exp(x) / np.exp(x).sum(axis=1, keepdims=True)
    return -np.mean(np.log(p[np.arange(len(t)), t]))


@settings(max_examples=50, deadline=None)
@given(
    n=st.integers(1, 6),
    c=st.integers(1, 5),
    seed=st.integers(0, 2**16),
    dtype=st.sampled_from([np.float64, np.float32]),
)
def test_softmax_cross_entropy_matches_numpy(n, c, seed, dtype):
    rng = np.random.RandomState(seed)
    x = (rng.randn(n, c) * 3).astype(dtype)
    t = rng.randint(0, c, size=n)
    v = dz.Variable(x)
    loss = F.softmax_cross_entropy(v, t)
    assert loss.shape == () and loss.dtype == dtype
    tol = 1e-12 if dtype == np.float64 else 1e-5
    np.testing.assert_allclose(loss.data, numpy_cross_entropy(x.astype(np.float64), t), rtol=tol, atol=tol)
    loss.backward()
    p = np.exp(x - x.max(1, keepdims=True))
    p /= p.sum(1, keepdims=True)
    p[np.arange(n), t] -= 1
    assert v.grad.dtype == dtype
    np.testing.assert_allclose(v.grad.data, p / n, rtol=1e-4, atol=1e-6)


def test_softmax_cross_entropy_keeps_no_probabilities_in_the_graph():
    """One Function between the scores and the loss: the graph holds x and t."""
    x = dz.Variable(np.random.RandomState(0).randn(5, 4))
    loss = F.softmax_cross_entropy(x, LABELS)
    f = loss.creator
    assert isinstance(f, F.SoftmaxCrossEntropy)
    assert f.next_functions == [(x, None), None]  # x is a leaf; the labels get no gradient
    assert f.x is x.data and f.t is LABELS and not hasattr(f, "__dict__")


def test_mean_squared_error_value():
    a, b = np.arange(6.0).reshape(3, 2), np.ones((3, 2))
    np.testing.assert_allclose(F.mean_squared_error(a, b).data, np.mean((a - b) ** 2))


def test_accuracy_is_a_variable_without_a_graph():
    y = dz.Variable(np.array([[0.1, 0.9, 0.0], [0.8, 0.1, 0.1], [0.2, 0.3, 0.5], [0.0, 1.0, 0.0]]))
    t = np.array([1, 0, 0, 2])
    acc = F.accuracy(y, t)
    assert isinstance(acc, dz.Variable) and acc.creator is None
    np.testing.assert_allclose(acc.data, 0.5)
    np.testing.assert_allclose(F.accuracy(y.data, dz.Variable(np.array([1, 0, 2, 1]))).data, 1.0)


# --- linear: one node ----------------------------------------------------------------------
def test_linear_is_one_function_that_keeps_no_product():
    rng = np.random.RandomState(0)
    x, W, b = (dz.Variable(rng.randn(*s)) for s in [(5, 3), (3, 4), (4,)])
    y = F.linear(x, W, b)
    assert isinstance(y.creator, F.Linear)
    assert y.creator.next_functions == [(x, None), (W, None), (b, None)]
    assert x.creator is None  # nothing between the inputs and y
    np.testing.assert_allclose(y.data, x.data @ W.data + b.data)
    f = y.creator  # keeps x and W (each one's gradient needs the other), b's shape, no product
    assert f.x is x.data and f.W is W.data and f.b_shape == (4,) and not hasattr(f, "__dict__")
    y32 = F.linear(x.data.astype(np.float32), W.data.astype(np.float32), b.data.astype(np.float32))
    assert y32.dtype == np.float32


def test_get_item_of_a_view_does_not_keep_the_whole_array():
    big = np.zeros((1000, 100))
    with dz.no_grad():
        row = F.get_item(dz.Variable(big), 3)
    assert not np.shares_memory(row.data, big)


# --- dropout -------------------------------------------------------------------------------
def test_dropout_in_train_mode_is_inverted_dropout_with_numpy_global_rng():
    x = np.random.RandomState(0).randn(200, 50)
    np.random.seed(7)
    y = F.dropout(dz.Variable(x), 0.3)
    np.random.seed(7)
    keep = np.random.rand(*x.shape) > 0.3
    np.testing.assert_allclose(y.data, np.where(keep, x / 0.7, 0.0))
    assert 0.25 < 1 - keep.mean() < 0.35
    F.sum(y).backward()


def test_dropout_in_test_mode_is_the_identity_without_a_graph():
    x = dz.Variable(np.arange(6.0))
    with dz.test_mode():
        y = F.dropout(x, 0.9)
    assert y is x or (y.creator is None and np.array_equal(y.data, x.data))
    assert dz.Config.train  # restored after the block
    z = F.dropout(x, 0.9)
    assert z.creator is not None


def test_dropout_keeps_the_dtype():
    x = dz.Variable(np.ones((10, 10), dtype=np.float32))
    assert F.dropout(x, 0.5).dtype == np.float32


# --- errors that name the operation --------------------------------------------------------
@pytest.mark.parametrize(
    "call, error, pattern",
    [
        (lambda: F.softmax_cross_entropy(np.ones((3, 4)), np.array([0, 1])), ValueError,
         r"^SoftmaxCrossEntropy: .*one class index per row of x \(3\), got shape \(2,\)"),
        (lambda: F.softmax_cross_entropy(np.ones((3, 4)), np.array([0.0, 1.0, 2.0])), TypeError,
         r"^SoftmaxCrossEntropy: labels t must be integers .*float64"),
        (lambda: F.softmax_cross_entropy(np.ones((3, 4)), np.array([0, 4, 1])), ValueError,
         r"^SoftmaxCrossEntropy: inputs of shapes \(3, 4\), \(3,\): labels t must be in "
         r"\[0, 4\), got values from 0 to 4$"),
        (lambda: F.softmax_cross_entropy(np.ones(4), np.array([0])), ValueError,
         r"^SoftmaxCrossEntropy: .*scores x must be 2-D"),
        (lambda: F.clip(np.ones(3), 1.0, -1.0), ValueError,
         r"^Clip: x_min \(1.0\) is greater than x_max \(-1.0\)"),
        (lambda: F.reshape(dz.Variable(np.ones((3, 4))), (5, 2)), ValueError,
         r"^Reshape: inputs of shapes \(3, 4\): cannot reshape array of size 12 into shape \(5,\s?2\)"),
        (lambda: F.dropout(np.ones(3), 1.0), ValueError, r"^dropout: dropout_ratio must be in \[0, 1\)"),
        (lambda: F.accuracy(np.ones((3, 2)), np.array([0, 1])), ValueError,
         r"^accuracy: .*shapes \(3, 2\) and \(2,\)"),
        # a label that no class has was counted as a miss, without a word
        (lambda: F.accuracy(np.ones((2, 3)), np.array([0, 7])), ValueError,
         r"^accuracy: labels t must be in \[0, 3\), got values from 0 to 7"),
        (lambda: F.accuracy(np.ones((2, 3)), np.array([0.0, 1.0])), TypeError,
         r"^accuracy: labels t must be integers .*float64"),
        # 0-d inputs where an axis is needed: IndexError 'tuple index out of range',
        # 'not enough values to unpack' or AxisError, naming no function
        (lambda: F.flatten(np.array(0.5)), ValueError, r"^flatten: .*a 0-d value has no axis"),
        (lambda: F.pooling(np.array(0.5), 2), ValueError,
         r"^Pooling: .*needs images x of shape \(N, C, H, W\), got shape \(\)"),
        (lambda: F.average_pooling(np.ones((3, 4)), 2), ValueError,
         r"^AveragePooling: .*needs images x of shape \(N, C, H, W\), got shape \(3, 4\)"),
        (lambda: F.conv2d_simple(np.array(0.5), np.ones((1, 1, 1, 1))), ValueError,
         r"^conv2d_simple: needs images x"),
        (lambda: F.pooling_simple(np.array(0.5), 2), ValueError, r"^pooling_simple: needs images x"),
        (lambda: F.pooling_simple(np.ones((1, 1, 4, 0)), 2), ValueError,
         r"^pooling_simple: a kernel of \(2, 2\) .* does not fit"),
        (lambda: F.conv2d_simple(np.ones((1, 1, 2, 2)), np.array(0.5)), ValueError,
         r"^conv2d_simple: needs kernels W of shape \(OC, C, KH, KW\), got shape \(\)"),
        (lambda: F.softmax_simple(np.array(0.5)), ValueError,
         r"^softmax_simple: axis 1 is out of range"),
        (lambda: F.softmax_cross_entropy_simple(np.array(0.5), np.array([0])), ValueError,
         r"^softmax_cross_entropy_simple: scores x must be 2-D"),
        (lambda: F.matmul(np.ones((2, 3)), np.ones((2, 3))), ValueError, r"^MatMul: inputs of shapes"),
        (lambda: F.linear(np.ones((2, 3)), np.ones((2, 3))), ValueError, r"^Linear: inputs of shapes"),
    ],
    ids=["sce-length", "sce-dtype", "sce-range", "sce-1d", "clip", "reshape", "dropout",
         "accuracy", "accuracy-range", "accuracy-dtype", "flatten-0d", "pooling-0d",
         "average_pooling-2d", "conv2d_simple-0d", "pooling_simple-0d",
         "pooling_simple-empty", "conv2d_simple-W-0d", "softmax_simple-0d",
         "sce_simple-0d", "matmul", "linear"],
)
def test_errors_name_the_operation(call, error, pattern):
    with pytest.raises(error, match=pattern):
        call()


# --- Variable methods ----------------------------------------------------------------------
def test_variable_indexing_and_reduction_methods():
    x = dz.Variable(np.arange(12.0).reshape(3, 4))
    assert x[1].shape == (4,) and isinstance(x[1].creator, F.GetItem)
    assert x[:, 1:3].shape == (3, 2)
    assert x.max().data == 11.0 and x.min(axis=1).data.tolist() == [0.0, 4.0, 8.0]
    assert x.max(axis=0, keepdims=True).shape == (1, 4)
    assert x.dot(np.ones((4, 2))).shape == (3, 2)
    assert x[dz.Variable(np.array([0, 2]))].shape == (2, 4)  # a Variable as the index


# --- utils -------------------------------------------------------------------------------------
@settings(max_examples=40, deadline=None)
@given(x=matrices(), axis=st.sampled_from([0, 1]))
def test_logsumexp_matches_the_direct_formula(x, axis):
    got = utils.logsumexp(x, axis)
    assert got.shape == tuple(1 if i == axis else n for i, n in enumerate(x.shape))
    np.testing.assert_allclose(got, np.log(np.exp(x).sum(axis=axis, keepdims=True)), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(utils.logsumexp(x + 1e4, axis), got + 1e4, rtol=1e-12)


def small_graph():
    x = dz.Variable(np.ones((2, 3)), name="x")
    W = dz.Variable(np.ones((3, 4), dtype=np.float32), name="W")
    y = F.tanh(F.matmul(x, W))
    y.name = "y"
    return x, W, y


def node_line(text, label):
    return [line for line in text.splitlines() if f'label="{label}"' in line]


def test_get_dot_graph_text():
    x, W, y = small_graph()
    text = utils.get_dot_graph(y)
    assert text.startswith("digraph") and text.rstrip().endswith("}")
    (x_line,) = node_line(text, "x: (2, 3) float64")
    (w_line,) = node_line(text, "W: (3, 4) float32")
    assert "color=orange" in x_line and "color=orange" in w_line
    assert node_line(text, "y: (2, 4) float64")
    (mm,) = node_line(text, "MatMul")
    (th,) = node_line(text, "Tanh")
    assert "shape=box" in mm and "shape=box" in th
    mm = y.creator.next_functions[0][0]
    edges = {tuple(line.split(" -> ")) for line in map(str.strip, text.splitlines()) if "->" in line}
    ids = {name: str(id(obj)) for name, obj in
           [("x", x), ("W", W), ("y", y), ("mm", mm), ("th", y.creator)]}
    # The product between MatMul and Tanh is gone (nothing holds it): the
    # edge goes from Function to Function.
    assert edges == {
        (ids["x"], ids["mm"]), (ids["W"], ids["mm"]), (ids["mm"], ids["th"]), (ids["th"], ids["y"]),
    }
    assert text.count("color=orange") == 3 and text.count("shape=box") == 2
    h = F.matmul(x, W)  # held by a name: drawn between the two
    with_h = utils.get_dot_graph(F.tanh(h))
    assert f"{id(h.creator)} -> {id(h)}" in with_h and f"{id(h)} -> " in with_h


def test_get_dot_graph_without_details_and_without_graph():
    x, W, _ = small_graph()
    h = F.matmul(x, W)  # held, so drawn, and without a name
    quiet = utils.get_dot_graph(F.tanh(h), verbose=False)
    assert "float64" not in quiet and 'label="x"' in quiet and 'label=""' in quiet
    with dz.no_grad():
        z = F.exp(x)
    assert utils.get_dot_graph(z).count("->") == 0


def test_get_dot_graph_escapes_quotes_in_names():
    x = dz.Variable(np.ones(2), name='say "hi"')
    assert r'label="say \"hi\": (2,) float64"' in utils.get_dot_graph(x)


needs_dot = pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz's dot is not installed")


@needs_dot
@pytest.mark.parametrize("suffix, magic", [(".png", b"\x89PNG"), (".svg", b"<")])
def test_plot_dot_graph_writes_the_file(tmp_path, suffix, magic):
    _, _, y = small_graph()
    path = tmp_path / ("graph" + suffix)
    utils.plot_dot_graph(y, to_file=str(path))
    assert path.read_bytes().lstrip()[: len(magic)] == magic
    if suffix == ".svg":
        assert "MatMul" in path.read_text()


def test_plot_dot_graph_without_dot_says_how_to_install_it(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", "")
    _, _, y = small_graph()
    path = tmp_path / "graph.png"
    with pytest.raises(GraphvizNotFound, match=r"apt-get install graphviz.*get_dot_graph") as info:
        utils.plot_dot_graph(y, to_file=str(path))
    assert isinstance(info.value, RuntimeError)
    assert "plot_dot_graph" in str(info.value)
    assert not path.exists()
    assert "Tanh" in utils.get_dot_graph(y)  # the text needs no dot


def test_plot_dot_graph_needs_a_format():
    _, _, y = small_graph()
    with pytest.raises(ValueError, match="plot_dot_graph: .*extension"):
        utils.plot_dot_graph(y, to_file="graph")


def test_functions_keep_graphs_free_of_cycles():
    """Every function's graph is freed by reference counting alone (the
    course's stage 03 property), including the ones that read their output."""
    import gc

    was = gc.isenabled()
    gc.disable()
    try:
        x = dz.Variable(np.random.RandomState(0).randn(5, 4))
        loss = F.softmax_cross_entropy(F.log_softmax(F.softmax(F.sigmoid(x)) + x[:, ::-1]), LABELS)
        loss.backward(retain_graph=True)  # kept, so that the walk below can follow the links
        creators = []
        f = loss.creator
        while f is not None:
            creators.append(weakref.ref(f))
            edge = f.next_functions[0]
            f = edge[0] if edge is not None and edge[1] is not None else None
        assert len(creators) >= 5
        del loss, f
        assert all(ref() is None for ref in creators)
    finally:
        if was:
            gc.enable()


@pytest.mark.parametrize(
    "fn",
    [F.square, F.tanh, F.sigmoid, F.relu, F.softmax, F.log_softmax, F.exp, F.sin,
     lambda a: F.max(a, axis=1), lambda a: F.clip(a, -0.5, 0.5), lambda a: a[[0, 0, 1]],
     lambda a: F.average(a, axis=0), lambda a: F.softmax_cross_entropy(a, LABELS[:3]),
     lambda a: F.dropout(a), lambda a: F.mean_squared_error(a, np.zeros((3, 4), np.float32)),
     lambda a: F.linear(a, np.ones((4, 2), np.float32), np.ones(2, np.float32))],
    ids=["square", "tanh", "sigmoid", "relu", "softmax", "log_softmax", "exp", "sin", "max",
         "clip", "get_item", "average", "softmax_cross_entropy", "dropout", "mse", "linear"],
)
def test_float32_stays_float32_forward_and_backward(fn):
    x = dz.Variable(np.random.RandomState(0).randn(3, 4).astype(np.float32))
    y = fn(x)
    assert y.dtype == np.float32
    y.backward()
    assert x.grad.dtype == np.float32


# --- PyTorch's answers where the suite did not look ------------------------------------------
def test_batched_matmul_gradient_transposes_the_last_two_axes_only():
    a = np.arange(8.0).reshape(2, 2, 2)
    x, w = dz.Variable(a), dz.Variable(a[::-1].copy())
    F.sum(F.matmul(x, w)).backward()
    np.testing.assert_array_equal(x.grad.data[0], [[9, 13], [9, 13]])
    np.testing.assert_array_equal(x.grad.data, np.ones((2, 2, 2)) @ np.swapaxes(a[::-1], -1, -2))


@pytest.mark.parametrize(
    "expression",
    [lambda x: x * 2.0, lambda x: 2.0 * x, lambda x: x + 1, lambda x: 1.5 - x, lambda x: x / 3.0,
     lambda x: 3.0 / x, lambda x: x**2, lambda x: x**0.5, lambda x: 2.0**x, lambda x: x - True],
    ids=["mul", "rmul", "add-int", "rsub", "div", "rdiv", "pow-int", "pow-float", "rpow", "sub-bool"],
)
@pytest.mark.parametrize("shape", [(3,), ()], ids=["1-d", "0-d"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int64])
def test_a_python_number_takes_the_dtype_numpy_gives(expression, shape, dtype):
    data = np.full(shape, 2, dtype=dtype)
    x = dz.Variable(data.copy())
    y = expression(x)
    assert y.dtype == np.asarray(expression(data)).dtype
    if np.issubdtype(dtype, np.floating):
        y.backward()
        assert x.grad.dtype == dtype and x.grad.shape == shape


@pytest.mark.parametrize(
    "fn", [lambda x, w: x**3, lambda x, w: w / x, lambda x, w: x / w, lambda x, w: F.sigmoid(x) * 0.5 / w],
    ids=["pow", "div-by-x", "div", "sigmoid-scaled"],
)
def test_higher_order_gradients_keep_float32(fn):
    x = dz.Variable(np.array([0.5, 1.5], np.float32))
    w = dz.Variable(np.array([2.0, 3.0], np.float32))
    F.sum(fn(x, w)).backward(create_graph=True)
    gx = x.grad
    assert gx.dtype == np.float32 and (w.grad is None or w.grad.dtype == np.float32)
    x.cleargrad()
    w.cleargrad()
    F.sum(gx).backward()
    grads = [v.grad for v in (x, w) if v.grad is not None]  # (d/dx of x / w is free of x)
    assert grads and all(g.dtype == np.float32 for g in grads)


@pytest.mark.parametrize("reduce", [F.sum, F.mean, F.max, F.min])
@pytest.mark.parametrize("axis", [np.int64(1), np.int32(-1), (np.int64(0), 1)], ids=["int64", "int32", "tuple"])
def test_numpy_integer_axes_work_forward_and_backward(reduce, axis):
    data = np.random.RandomState(0).randn(3, 4)
    check_gradients(dz, lambda m, a: reduce(a, axis=axis), [(3, 4)], False)
    reference = {F.sum: np.sum, F.mean: np.mean, F.max: np.max, F.min: np.min}[reduce]
    np.testing.assert_allclose(reduce(data, axis=axis).data, reference(data, axis=axis))


def test_sum_to_a_shape_that_is_not_a_reduction_is_an_error():
    with pytest.raises(ValueError, match=r"^SumTo: .*cannot sum an array of shape \(2, 3\) to shape \(3, 2\)"):
        F.sum_to(dz.Variable(np.ones((2, 3))), (3, 2))
    with pytest.raises(ValueError, match=r"sum_to: cannot sum an array of shape \(3,\) to shape \(2, 3\)"):
        utils.sum_to(np.ones(3), (2, 3))


@pytest.mark.parametrize("axis", [3, 5, -4, -5])
def test_expand_dims_rejects_axes_out_of_range(axis):
    with pytest.raises(ValueError, match=rf"^expand_dims: axis {axis} is out of range .*\(allowed: -3 to 2\)"):
        F.expand_dims(dz.Variable(np.ones((2, 3))), axis)
    assert F.expand_dims(np.ones((2, 3)), -3).shape == (1, 2, 3)
    assert F.expand_dims(np.ones((2, 3)), 2).shape == (2, 3, 1)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_sigmoid_is_accurate_in_both_tails(dtype):
    x = np.concatenate([-np.logspace(-3, np.log10(80 if dtype == np.float32 else 700), 200), [0.0],
                        np.logspace(-3, 2, 50)]).astype(dtype)
    reference = 1 / (1 + np.exp(-x.astype(np.longdouble)))  # wider than float64 where the machine has it
    y = F.sigmoid(x).data
    assert y.dtype == dtype
    np.testing.assert_allclose(y, reference.astype(dtype), rtol=4 * np.finfo(dtype).eps, atol=0)


def test_log_of_sigmoid_keeps_the_left_tail():
    x = dz.Variable(np.array([-40.0, -30.0, 0.0, 5.0]))
    y = F.log(F.sigmoid(x))
    np.testing.assert_allclose(y.data, [-40.0, -30.0, -np.log(2), -np.log1p(np.exp(-5.0))], rtol=1e-12)
    F.sum(y).backward()
    np.testing.assert_allclose(x.grad.data, [1.0, 1.0, 0.5, 1 / (1 + np.exp(5.0))], rtol=1e-12)


def test_mean_over_no_element_is_nan_as_in_pytorch():
    empty = dz.Variable(np.zeros((0, 3)))
    assert np.isnan(F.mean(empty).data)
    assert np.isnan(F.mean(empty, axis=0).data).all() and F.mean(empty, axis=0).shape == (3,)
    assert F.mean(empty, axis=1).shape == (0,)
    y = F.mean(empty)
    y.backward()
    assert empty.grad.shape == (0, 3)


def test_losses_on_zero_rows_are_nan_with_empty_gradients():
    x = dz.Variable(np.zeros((0, 3)))
    # (mean_squared_error_simple raised ZeroDivisionError, naming no operation)
    for mean_squared_error in (F.mean_squared_error, F.mean_squared_error_simple):
        loss = mean_squared_error(x, np.zeros((0, 3)))
        assert np.isnan(loss.data)
        loss.backward()
        assert x.grad.shape == (0, 3)
        x.cleargrad()
    loss = F.softmax_cross_entropy(x, np.zeros(0, dtype=np.int64))
    assert np.isnan(loss.data)
    loss.backward()
    assert x.grad.shape == (0, 3)


@pytest.mark.parametrize("fn", [F.softmax, F.log_softmax, F.softmax_simple])
@pytest.mark.parametrize("shape, axis", [((2, 0), 1), ((0, 3), 1), ((0, 3), 0)])
def test_softmax_over_empty_arrays(fn, shape, axis):
    x = dz.Variable(np.zeros(shape))
    y = fn(x, axis=axis)
    assert y.shape == shape
    F.sum(y).backward()
    assert x.grad.shape == shape


@pytest.mark.parametrize("axis", [0, -1])
def test_softmax_of_a_0d_array_is_one(axis):
    x = dz.Variable(np.array(2.5))
    y = F.softmax(x, axis=axis)
    assert y.shape == () and y.data == 1.0
    np.testing.assert_allclose(F.log_softmax(x, axis=axis).data, 0.0)
    y.backward()
    assert x.grad.shape == () and x.grad.data == 0.0
    with pytest.raises(ValueError, match=r"^Softmax: .*axis 1 is out of range for an array of 0 dimensions"):
        F.softmax(x)  # the default axis=1 (batch, classes) does not exist


def test_power_zero_has_gradient_zero_at_zero():
    x = dz.Variable(np.array([0.0, 2.0]))
    y = x**0
    np.testing.assert_array_equal(y.data, [1.0, 1.0])
    F.sum(y).backward(create_graph=True)
    np.testing.assert_array_equal(x.grad.data, [0.0, 0.0])
    c = dz.Variable(np.array([0.0, 0.0]))
    x.cleargrad()
    F.sum(x**c).backward()
    np.testing.assert_array_equal(x.grad.data, [0.0, 0.0])
    np.testing.assert_allclose(c.grad.data, [0.0, np.log(2.0)])  # d/dc 0**c is 0 for c >= 0 (PyTorch)


def test_variable_exponents_and_reflected_power():
    x = dz.Variable(np.array([1.0, 2.0]))
    y = dz.Variable(np.array([3.0, 0.5]))
    z = x**y
    np.testing.assert_allclose(z.data, [1.0, np.sqrt(2.0)])
    F.sum(z).backward()
    np.testing.assert_allclose(x.grad.data, [3.0, 0.5 / np.sqrt(2.0)])
    np.testing.assert_allclose(y.grad.data, [0.0, np.sqrt(2.0) * np.log(2.0)])
    x.cleargrad()
    F.sum(2.0**x).backward()
    np.testing.assert_allclose(x.grad.data, [2 * np.log(2.0), 4 * np.log(2.0)])
    assert isinstance((2.0**x).creator, F.Power) and isinstance((x**2).creator, F.Pow)


def test_concat_and_stack_follow_numpy():
    a, b = np.arange(6.0).reshape(2, 3), np.ones((2, 3), np.float32)
    np.testing.assert_array_equal(F.concat([a, b], axis=-1).data, np.concatenate([a, b], axis=-1))
    np.testing.assert_array_equal(F.stack([a, b], axis=1).data, np.stack([a, b], axis=1))
    va, vb = dz.Variable(a), dz.Variable(b)
    F.sum(F.stack([va, vb], axis=2) * 2.0).backward()
    assert vb.grad.dtype == np.float32 and va.grad.dtype == np.float64  # each its own dtype
    with pytest.raises(ValueError, match=r"^Concat: .*needs at least one array"):
        F.concat([])
    with pytest.raises(ValueError, match=r"^Stack: inputs of shapes \(2, 3\), \(3,\)"):
        F.stack([a, np.ones(3)])
    with pytest.raises(ValueError, match=r"^Concat: .*axis 2 is out of range"):
        F.concat([a, b], axis=2)


def test_mixed_precision_gives_the_float64_gradients_in_float32():
    """Float32 weights (as L.Linear makes them) with float64 data: as in
    PyTorch, each gradient takes its input's dtype, and the values are those
    of float64 throughout, to float32 precision."""
    rng = np.random.RandomState(0)
    x64 = rng.randn(5, 3)
    layer = dz.layers.Linear(4, in_size=3)
    assert layer.W.dtype == np.float32
    W32 = layer.W
    y = F.sum(F.matmul(x64, W32)) + 0.5 * F.sum(W32**2)
    y.backward()
    assert W32.grad.dtype == np.float32
    W64 = dz.Variable(W32.data.astype(np.float64))
    (F.sum(F.matmul(x64, W64)) + 0.5 * F.sum(W64**2)).backward()
    np.testing.assert_allclose(W32.grad.data, W64.grad.data, rtol=1e-6, atol=1e-6)
    # A gradient of the wrong shape is still an error that names the Function
    # (for a Variable: a constant's gradient is dropped unread, unchecked).

    class WrongShape(dz.Function):
        def forward(self, x):
            return x.astype(np.float64)

        def backward(self, gy):
            return gy[:1]

    with pytest.raises(ValueError, match=r"^WrongShape.backward: gradient of shape \(1,\) for a Variable of "
                                         r"shape \(3,\)"):
        F.sum(WrongShape()(dz.Variable(np.ones(3, np.float32)))).backward()


# --- every error names its Function, forward or backward -----------------------------------
class _RaisesInBackward(dz.Function):
    def forward(self, x):
        return x

    def backward(self, gy):
        return np.ones(3)[[7]]  # NumPy's bare IndexError


@pytest.mark.parametrize(
    "call, error, pattern",
    [
        (lambda: dz.Variable(np.ones((3, 4)))[10], IndexError,
         r"^GetItem: inputs of shapes \(3, 4\): index 10 is out of bounds"),
        (lambda: F.sum(np.ones((3, 4)), axis=np.int64(2)), np.exceptions.AxisError,
         r"^Sum: .*axis 2 is out of range for an array of 2 dimensions"),
        (lambda: F.max(np.ones((3, 4)), axis=1.0), TypeError, r"^Max: .*axis must be an integer"),
        (lambda: F.mean(np.ones((3, 4)), axis=(1, -1)), ValueError, r"^Sum: .*names axis 1 twice"),
        (lambda: F.max(np.ones((0, 4)), axis=0), ValueError, r"^Max: inputs of shapes \(0, 4\): zero-size"),
        (lambda: F.matmul(np.ones(3), np.ones(4)), ValueError, r"^MatMul: inputs of shapes \(3,\), \(4,\)"),
        (lambda: _RaisesInBackward()(np.ones(2)).backward(), IndexError,
         r"^_RaisesInBackward.backward: index 7 is out of bounds"),
    ],
    ids=["index", "axis-range", "axis-type", "axis-twice", "max-of-nothing", "matmul-1d", "backward"],
)
def test_every_error_of_a_function_names_it(call, error, pattern):
    with pytest.raises(error, match=pattern) as info:
        call()
    assert info.value.__cause__ is not None, "the original error must not be lost"


# --- differences from PyTorch, on purpose (docs/differences.md: "Differences from PyTorch and DeZero") --------
def test_every_tied_maximum_gets_the_whole_gradient():
    """PyTorch's max() without dim splits the gradient among ties (0.5 each
    here) and max(dim) gives it to one of them; dezero_mini, like DeZero,
    gives each tied element the whole gradient."""
    x = dz.Variable(np.array([[1.0, 3.0, 3.0]]))
    F.max(x).backward()
    np.testing.assert_array_equal(x.grad.data, [[0.0, 1.0, 1.0]])
    x.cleargrad()
    F.sum(F.min(-x, axis=1)).backward()
    np.testing.assert_array_equal(x.grad.data, [[0.0, -1.0, -1.0]])


def test_backward_of_a_non_scalar_seeds_with_ones():
    """PyTorch refuses backward() on a non-scalar without a gradient; DeZero
    (and dezero_mini) start from ones, which is the gradient of sum(y)."""
    x = dz.Variable(np.array([1.0, 2.0, 3.0]))
    y = x * x
    y.backward()
    np.testing.assert_array_equal(x.grad.data, [2.0, 4.0, 6.0])


def test_a_numpy_scalar_keeps_its_dtype_as_in_numpy_a_python_number_does_not():
    """docs/differences.md: ``float32 * np.float64(2)`` is float64 (NumPy,
    NEP 50; PyTorch keeps float32), ``float32 * 2.0`` float32, and the
    gradient of x keeps x's dtype either way."""
    for scalar, dtype in ((np.float64(2), np.float64), (2.0, np.float32), (np.float32(2), np.float32)):
        x = dz.Variable(np.ones(3, np.float32))
        y = x * scalar
        assert y.dtype == dtype == (x.data * scalar).dtype, (scalar, y.dtype)
        F.sum(y).backward()
        assert x.grad.dtype == np.float32
