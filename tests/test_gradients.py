"""Every operation of every stage against a numerical gradient.

Backward is checked with a random upstream gradient ``w`` (set as the output's
``grad`` before ``backward``), against central differences of ``sum(f(x) * w)``:
a random projection catches errors that an all-ones upstream gradient hides
(a transposed or mis-summed gradient often sums to the right total).
"""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import ALL_STAGES, load

# (case id, function of (module, *inputs), input shapes, inputs must be positive)
CASES = [
    ("add", lambda m, a, b: m.add(a, b), [(3, 4), (3, 4)], False),
    ("add-broadcast-bias", lambda m, a, b: m.add(a, b), [(3, 4), (4,)], False),
    ("add-broadcast-both", lambda m, a, b: a + b, [(3, 1), (1, 4)], False),
    ("sub-broadcast", lambda m, a, b: m.sub(a, b), [(2, 3, 4), (3, 1)], False),
    ("sub-broadcast-first", lambda m, a, b: m.sub(a, b), [(4,), (3, 4)], False),
    ("rsub-scalar", lambda m, a: 2.0 - a, [(3, 4)], False),
    ("mul-broadcast", lambda m, a, b: m.mul(a, b), [(3, 4), (4,)], False),
    ("mul-broadcast-first", lambda m, a, b: m.mul(a, b), [(3, 1), (3, 4)], False),
    ("rmul-array", lambda m, a: np.arange(4.0) * a, [(3, 4)], False),
    ("div-broadcast", lambda m, a, b: m.div(a, b), [(3, 4), (3, 1)], True),
    ("div-broadcast-first", lambda m, a, b: m.div(a, b), [(4,), (3, 4)], True),
    ("rdiv-scalar", lambda m, a: 1.0 / a, [(3, 4)], True),
    ("neg", lambda m, a: -a, [(3, 4)], False),
    ("pow", lambda m, a: m.pow(a, 3), [(3, 4)], False),
    ("pow-operator", lambda m, a: a**2.5, [(3, 4)], True),
    ("square", lambda m, a: m.square(a), [(3, 4)], False),
    ("exp", lambda m, a: m.exp(a), [(3, 4)], False),
    ("sigmoid", lambda m, a: m.sigmoid(a), [(3, 4)], False),
    ("tanh", lambda m, a: m.tanh(a), [(3, 4)], False),
    ("matmul", lambda m, a, b: m.matmul(a, b), [(3, 4), (4, 2)], False),
    ("matmul-operator", lambda m, a, b: a @ b, [(2, 3), (3, 5)], False),
    ("sum-all", lambda m, a: m.sum(a), [(3, 4)], False),
    ("sum-axis0", lambda m, a: m.sum(a, axis=0), [(3, 4)], False),
    ("sum-axis-1-keepdims", lambda m, a: m.sum(a, axis=-1, keepdims=True), [(2, 3, 4)], False),
    ("sum-axes", lambda m, a: m.sum(a, axis=(0, 2)), [(2, 3, 4)], False),
    ("sum_to", lambda m, a: m.sum_to(a, (1, 4)), [(3, 4)], False),
    ("sum_to-lead", lambda m, a: m.sum_to(a, (4,)), [(2, 3, 4)], False),
    ("broadcast_to", lambda m, a: m.broadcast_to(a, (3, 4)), [(4,)], False),
    ("broadcast_to-col", lambda m, a: m.broadcast_to(a, (2, 3, 4)), [(3, 1)], False),
    ("reshape", lambda m, a: m.reshape(a, (4, 3)), [(3, 4)], False),
    ("transpose", lambda m, a: m.transpose(a), [(3, 4)], False),
    ("mean_squared_error", lambda m, a, b: m.mean_squared_error(a, b), [(5, 2), (5, 2)], False),
    (
        "mlp-layer",
        lambda m, x, W, b: m.sigmoid(m.add(m.matmul(x, W), b)),
        [(5, 3), (3, 4), (4,)],
        False,
    ),
    ("shared-input", lambda m, a: m.mul(m.exp(a), m.tanh(a)) + a * a, [(3, 4)], False),
]


def grad_array(g):
    """Gradients are arrays in the step modules and Variables in dezero_mini.
    (Not ``getattr(g, "data", g)``: an ndarray's ``.data`` is a memoryview.)"""
    return g if isinstance(g, np.ndarray) else g.data


def make_inputs(shapes, positive, seed):
    rng = np.random.RandomState(seed)
    arrays = [np.asarray(rng.randn(*shape)) for shape in shapes]
    return [np.abs(a) + 0.5 for a in arrays] if positive else arrays


def numerical_gradients(module, fn, arrays, upstream, eps=1e-6):
    """Central differences of sum(fn(inputs) * upstream) for every input."""

    def objective():
        y = fn(module, *[module.Variable(a.copy()) for a in arrays])
        return float(np.sum(y.data * upstream))

    grads = []
    for a in arrays:
        g = np.zeros_like(a)
        for index in np.ndindex(*a.shape):
            saved = a[index]
            a[index] = saved + eps
            plus = objective()
            a[index] = saved - eps
            minus = objective()
            a[index] = saved
            g[index] = (plus - minus) / (2 * eps)
        grads.append(g)
    return grads


def check_gradients(module, fn, shapes, positive, seed=0):
    arrays = make_inputs(shapes, positive, seed)
    inputs = [module.Variable(a.copy()) for a in arrays]
    y = fn(module, *inputs)
    upstream = np.asarray(np.random.RandomState(seed + 1).randn(*y.shape))
    y.grad = upstream if module.STAGE != "dezero_mini" else module.Variable(upstream)
    y.backward()
    expected = numerical_gradients(module, fn, arrays, upstream)
    for i, (x, g) in enumerate(zip(inputs, expected)):
        assert x.grad is not None, f"input {i} got no gradient"
        got = grad_array(x.grad)
        assert got.shape == x.shape, f"input {i}: gradient shape {got.shape}, input {x.shape}"
        np.testing.assert_allclose(got, g, rtol=1e-5, atol=1e-7, err_msg=f"input {i}")


@pytest.mark.parametrize("stage", ALL_STAGES)
@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_gradient_matches_numerical(stage, case):
    _, fn, shapes, positive = case
    check_gradients(load(stage), fn, shapes, positive)


@pytest.mark.parametrize("stage", ALL_STAGES)
@settings(max_examples=25, deadline=None)
@given(
    rows=st.integers(1, 4),
    cols=st.integers(1, 4),
    small_shape=st.sampled_from(["row", "col", "scalar", "full"]),
    small_first=st.booleans(),
    seed=st.integers(0, 2**16),
)
def test_broadcasting_ops_over_shapes(stage, rows, cols, small_shape, small_first, seed):
    """Property: add, sub, mul and div broadcast an operand of any compatible
    shape, on either side, and its gradient comes back summed to that shape."""
    module = load(stage)
    small = {"row": (cols,), "col": (rows, 1), "scalar": (), "full": (rows, cols)}[small_shape]

    def fn(m, a, b):
        # Each operand stands on the left of some operation and on the right
        # of another; the denominator is at least 1.
        return m.div(m.mul(m.sub(m.add(a, b), b), a), m.add(m.square(m.mul(b, a)), 1.0))

    shapes = [small, (rows, cols)] if small_first else [(rows, cols), small]
    check_gradients(module, fn, shapes, False, seed=seed)


@pytest.mark.parametrize("stage", ALL_STAGES)
def test_gradients_accumulate_over_shared_uses(stage):
    """A Variable used twice gets the sum of both gradients, not the last one."""
    module = load(stage)
    x = module.Variable(np.array([3.0]))
    y = module.add(module.mul(x, x), x)  # y = x^2 + x, dy/dx = 2x + 1
    y.backward()
    np.testing.assert_allclose(grad_array(x.grad), [7.0])
