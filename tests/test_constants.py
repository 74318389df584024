"""Constants get no gradient; ``requires_grad`` says which Variables do.

A number or an array written into a formula (``y * 2 + 1``) is an input
of its Function that nobody holds a name for, so a gradient for it could
never be read: it reaches forward as an array, with no Variable and no edge
of the graph, and backward neither computes its gradient nor keeps one. Every Variable the user makes still gets its gradient, as in DeZero,
unless the user sets its ``requires_grad`` to False, as in PyTorch.
"""
import numpy as np
import pytest

import dezero_mini as dz
import dezero_mini.functions as F


def _constants_of(y):
    """How many inputs of y's graph backward was not asked to differentiate:
    the edges of ``next_functions`` that lead nowhere (None). The graph holds
    no Variable for them, so nothing could keep a gradient (the graph must
    have been kept with retain_graph=True)."""
    found, funcs = 0, [y.creator]
    while funcs:
        f = funcs.pop()
        for edge in f.next_functions:
            if edge is None:
                found += 1
            elif edge[1] is not None:  # (creator, output index); (leaf, None) ends there
                funcs.append(edge[0])
    return found


def test_a_variable_requires_grad_by_default_as_in_dezero():
    assert dz.Variable(np.ones(2)).requires_grad
    assert dz.Parameter(np.ones(2)).requires_grad
    assert (dz.Variable(np.ones(2)) * 2).requires_grad  # results too


@pytest.mark.parametrize("make_formula", [
    lambda x: x * 2.0 + 1.0,
    lambda x: 3.0 - x / 2.0,
    lambda x: 2.0 / x - np.full(3, 0.5) * x,
    lambda x: F.sum(x * np.arange(3.0)) + 0.5,
    lambda x: (x + np.ones((2, 3))) * np.float64(1.5),  # a constant that broadcasts x
])
def test_constants_hold_no_gradient_after_backward(make_formula):
    x = dz.Variable(np.array([0.5, 1.5, 2.5]))
    y = make_formula(x)
    y.backward(retain_graph=True)  # keep the graph, to look at its constants afterwards
    assert _constants_of(y), "the formula has constants, and the graph keeps nothing of them"
    assert x.grad is not None


@pytest.mark.parametrize("op", ["add", "sub", "mul", "div"])
@pytest.mark.parametrize("constant_first", [False, True])
def test_the_formula_computes_no_gradient_for_a_constant(op, constant_first):
    """Not only dropped: never computed (a constant that x broadcasts would
    cost a sum_to for nothing)."""
    x = dz.Variable(np.array([[1.0, 2.0], [3.0, 4.0]]))
    c = np.array(2.0)
    fn = {"add": dz.core.add, "sub": dz.core.sub, "mul": dz.core.mul, "div": dz.core.div}[op]
    y = fn(c, x) if constant_first else fn(x, c)
    grads = y.creator.backward(np.ones((2, 2)))
    assert grads[0 if constant_first else 1] is None
    assert grads[1 if constant_first else 0].shape == (2, 2)


@pytest.mark.parametrize("seed", range(5))
def test_gradients_of_the_users_variables_are_unchanged(seed):
    """The same formula with its constants made Variables by the user (which
    then get gradients, as in DeZero) gives every other Variable the same
    gradient, bit for bit."""
    rng = np.random.RandomState(seed)
    x0, w0, c0 = rng.rand(4, 3) + 0.5, rng.rand(3) + 0.5, rng.rand(3) + 0.5

    def formula(x, w, c, k):
        h = F.tanh(x * w + c) * k - c / (x + k)
        return F.sum(h ** 2 + F.exp(-h) * w)

    x, w = dz.Variable(x0), dz.Variable(w0)
    formula(x, w, c0, 0.7).backward()
    x_ref, w_ref = dz.Variable(x0), dz.Variable(w0)
    c_ref, k_ref = dz.Variable(c0), dz.Variable(np.array(0.7))
    formula(x_ref, w_ref, c_ref, k_ref).backward()
    np.testing.assert_array_equal(x.grad.data, x_ref.grad.data)
    np.testing.assert_array_equal(w.grad.data, w_ref.grad.data)
    assert c_ref.grad is not None and k_ref.grad is not None  # DeZero's behaviour kept


def test_double_backprop_through_constants():
    x = dz.Variable(np.array([1.0, 2.0]))
    y = x * x * 3.0 + 1.0
    y.backward(create_graph=True)
    gx = x.grad  # 6x, a Variable with a graph
    np.testing.assert_allclose(gx.data, [6.0, 12.0])
    x.cleargrad()
    F.sum(gx).backward()
    np.testing.assert_allclose(x.grad.data, [6.0, 6.0])


def test_a_function_of_constants_only_runs_backward_without_error():
    y = F.exp(np.array([0.0, 1.0]))
    y.backward(retain_graph=True)
    assert y.creator.next_functions == [None]  # nothing to receive a gradient


def test_requires_grad_false_on_a_users_variable():
    """As in PyTorch: an input that needs no gradient (the data of a batch,
    a frozen weight) gets none; the others are unchanged."""
    x, w = dz.Variable(np.array([1.0, 2.0])), dz.Variable(np.array([3.0, 4.0]))
    x.requires_grad = False
    F.sum(x * w).backward()
    assert x.grad is None
    np.testing.assert_array_equal(w.grad.data, [1.0, 2.0])


def test_requires_grad_false_on_a_result_stops_the_gradient_there():
    """A computed Variable that needs no gradient passes none on to what it
    was computed from (as detach() would)."""
    x = dz.Variable(np.array([1.0, 2.0]))
    h = x * 2.0
    h.requires_grad = False
    F.sum(h * x).backward()
    np.testing.assert_array_equal(x.grad.data, [2.0, 4.0])  # through the second factor only
    assert h.grad is None


def test_a_constant_is_not_made_a_variable(monkeypatch):
    """A number or an array in a formula reaches forward as an array: making
    a Variable for it (which nobody could use) was a fifth of such an op's
    time. Only the two results are Variables here."""
    made = []
    original_init = dz.Variable.__init__

    def counting_init(self, *args, **kwargs):
        made.append(type(self).__name__)
        original_init(self, *args, **kwargs)

    x = dz.Variable(np.array([1.0, 2.0]))
    monkeypatch.setattr(dz.Variable, "__init__", counting_init)
    y = x * 2.0 + np.array([1.0, 1.0])
    monkeypatch.undo()
    assert made == ["Variable", "Variable"]
    y.backward()
    np.testing.assert_array_equal(x.grad.data, [2.0, 2.0])


def test_a_function_written_dezero_s_way_still_gets_variables_for_constants():
    class Scale(dz.Function):  # keeps self.inputs, as in DeZero
        def forward(self, x, k):
            return x * k

        def backward(self, gy):
            x, k = self.inputs
            return gy * k, gy * x

    x = dz.Variable(np.array([1.0, 2.0]))
    y = Scale()(x, 3.0)
    assert all(isinstance(v, dz.Variable) for v in y.creator.inputs)
    assert y.creator.inputs[1].requires_grad is False
    y.backward()
    np.testing.assert_array_equal(x.grad.data, [3.0, 3.0])


def test_an_input_that_is_not_a_number_or_an_array_is_an_error_that_names_the_function():
    x = dz.Variable(np.array([1.0, 2.0]))
    with pytest.raises(TypeError, match=r"^Mul: an input must be a Variable, a numpy array or a "
                                        r"number, got list"):
        x * [1.0, 2.0]


@pytest.mark.parametrize("layer", ["matmul", "linear"])
@pytest.mark.parametrize("x_shape, W_shape", [((4, 3), (3, 2)), ((3,), (3, 2)), ((2, 4, 3), (3, 2)),
                                              ((4, 3), (3,))])
@pytest.mark.parametrize("constant", ["x", "W"])
def test_a_layer_with_a_constant_operand_keeps_and_computes_only_the_gradient_needed(
        layer, x_shape, W_shape, constant):
    """A batch of data (a constant x) needs no gradient: x @ W then keeps no W
    for it and skips the product gy @ W.T; a frozen weight (a constant W)
    keeps no x. The other gradient is the same, bit for bit, as when both
    operands are Variables."""
    if layer == "linear" and len(W_shape) == 1:
        pytest.skip("a Linear layer's weight is a matrix")
    rng = np.random.RandomState(0)
    x0, W0 = rng.rand(*x_shape), rng.rand(*W_shape)
    b0 = rng.rand(W_shape[-1]) if layer == "linear" else None

    def run(x, W):
        b = None if b0 is None else dz.Variable(b0)
        y = F.matmul(x, W) if layer == "matmul" else F.linear(x, W, b)
        F.sum(y * y).backward(retain_graph=True)
        return y.creator, b

    both = [dz.Variable(x0), dz.Variable(W0)]
    run(*both)
    operands = [x0, dz.Variable(W0)] if constant == "x" else [dz.Variable(x0), W0]
    f, b = run(*operands)
    kept_for_the_constant = f.W if constant == "x" else f.x
    assert kept_for_the_constant is None
    variable = operands[1] if constant == "x" else operands[0]
    reference = both[1] if constant == "x" else both[0]
    np.testing.assert_array_equal(variable.grad.data, reference.grad.data)
    if b is not None:
        assert b.grad is not None


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int64])
@pytest.mark.parametrize("number", [2, 0.5, -0.0])
@pytest.mark.parametrize("op", ["add", "sub", "rsub", "mul", "div", "rdiv"])
@pytest.mark.parametrize("build", [True, False])
def test_a_python_number_takes_the_dtype_numpy_gives_it_and_its_value(dtype, number, op, build):
    """A Python number is "weak" (NEP 50): ``float32 * 0.5`` is float32, as
    in NumPy, with or without a graph (the arithmetic Functions then get the
    number itself, otherwise a 0-d array of that dtype); the values are
    NumPy's to the bit, the sign of ``-0.0`` included, and so is the
    gradient's dtype."""
    data = np.array([1.0, -2.0, 3.0]).astype(dtype)
    fn = {"add": (dz.core.add, np.add, False), "sub": (dz.core.sub, np.subtract, False),
          "rsub": (dz.core.rsub, np.subtract, True), "mul": (dz.core.mul, np.multiply, False),
          "div": (dz.core.div, np.divide, False), "rdiv": (dz.core.rdiv, np.divide, True)}
    ours, numpys, reflected = fn[op]
    with np.errstate(divide="ignore", invalid="ignore"):
        expected = numpys(number, data) if reflected else numpys(data, number)
        x = dz.Variable(data)
        with dz.using_config("enable_backprop", build):
            y = ours(x, number)
    assert y.dtype == expected.dtype
    np.testing.assert_array_equal(y.data, expected)
    assert np.array_equal(np.signbit(y.data), np.signbit(expected))
    if build and np.issubdtype(dtype, np.floating):
        with np.errstate(divide="ignore", invalid="ignore"):
            F.sum(y).backward()
        assert x.grad.dtype == dtype
