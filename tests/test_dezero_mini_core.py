"""What dezero_mini adds over the step modules: DeZero's core conventions."""
import weakref

import numpy as np
import pytest

import dezero_mini as dz
import dezero_mini.functions as F
from dezero_mini.utils import gradient_check, numerical_grad


def test_gradients_are_variables_without_a_graph_by_default():
    x = dz.Variable(np.array([1.0, 2.0]))
    y = F.sum(x * x)
    y.backward()
    assert isinstance(x.grad, dz.Variable)
    assert x.grad.creator is None  # backward ran with graph building off
    np.testing.assert_allclose(x.grad.data, [2.0, 4.0])


def test_second_derivative_with_create_graph():
    x = dz.Variable(np.array(2.0))
    y = x**4 - 2 * x**2  # y' = 4x^3 - 4x = 24, y'' = 12x^2 - 4 = 44
    y.backward(create_graph=True)
    gx = x.grad
    np.testing.assert_allclose(gx.data, 24.0)
    x.cleargrad()
    gx.backward()
    np.testing.assert_allclose(x.grad.data, 44.0)


def test_unchain_backward_frees_the_graph_behind_a_variable():
    x = dz.Variable(np.ones((3, 3)))
    h = F.exp(x)
    y = F.sigmoid(h)
    creator = weakref.ref(h.creator)
    y.unchain_backward()
    assert h.creator is None
    assert creator() is None  # nothing else kept the Exp function alive


@pytest.mark.parametrize(
    "fn, shape",
    [(F.sin, (3,)), (F.cos, (3,)), (lambda x: F.log(x * x + 1.0), (2, 3)), (F.linear, (2, 3))],
    ids=["sin", "cos", "log", "linear-no-bias"],
)
def test_gradient_check_helper(fn, shape):
    rng = np.random.RandomState(0)
    if fn is F.linear:
        W = dz.Variable(rng.randn(3, 4))
        assert gradient_check(lambda x: F.linear(x, W, dz.Variable(np.ones(4))), rng.randn(*shape))
    else:
        assert gradient_check(fn, rng.randn(*shape))


def test_gradient_check_catches_a_wrong_backward(capsys):
    class WrongSquare(dz.Function):
        def forward(self, x):
            return x**2

        def backward(self, gy):
            return gy * self.inputs[0]  # missing the factor 2

    assert not gradient_check(lambda x: WrongSquare()(x), np.array([1.0, 2.0]))
    assert "max |diff|" in capsys.readouterr().out


def test_numerical_grad_of_a_known_function():
    grad = numerical_grad(lambda x: x * x * x, np.array([1.0, -2.0]))
    np.testing.assert_allclose(grad, [3.0, 12.0], rtol=1e-6)


def test_transpose_and_reshape_methods():
    x = dz.Variable(np.arange(6.0).reshape(2, 3))
    assert x.T.shape == (3, 2)
    assert x.reshape(3, 2).shape == (3, 2)
    assert x.reshape((6,)).shape == (6,)
    assert x.transpose(1, 0).shape == (3, 2)
    assert x.sum(axis=0).shape == (3,)


def test_using_config_rejects_an_unknown_setting():
    with pytest.raises(AttributeError, match="using_config: Config has no setting 'enable_backprob'"):
        with dz.using_config("enable_backprob", False):
            pass


def test_a_one_output_function_keeps_one_weak_reference_as_its_outputs():
    """The collector traverses every object a graph keeps, in each full
    collection: a Function of one output keeps a single weak reference that
    is also its list of outputs (core._OneOutput), not a list around one.
    Its edges are in its own slots (see the table below): ``y * 1.0001``
    keeps 2 (it kept 5, then 4)."""
    import gc

    x = dz.Variable(np.ones(3))
    y = x * 2.0
    outputs = y.creator.outputs
    assert len(outputs) == 1 and outputs[0]() is y and outputs[-1]() is y
    assert [ref() for ref in outputs] == [y] and outputs.index(weakref.ref(y)) == 0
    with pytest.raises(IndexError):
        outputs[1]
    n_ops = 500
    gc.collect()
    before = len(gc.get_objects())
    z = x
    for _ in range(n_ops):
        z = z * 1.0001
    gc.collect()
    assert (len(gc.get_objects()) - before) / n_ops <= 2.01
    z.backward()
    np.testing.assert_allclose(x.grad.data, 1.0001 ** n_ops)


#: (op, objects that the cyclic collector tracks per op of a graph of it): the
#: Function and the weak reference to its output; the edges of its first two
#: inputs in its slots, those after them in one tuple (core.Function). With a
#: list of edges and a tuple per Variable input there were 4 to 6.
TRACKED_PER_OP = [
    ("z * 1.0001", lambda z, a: z * 1.0001, 2),
    ("z * a", lambda z, a: z * a, 2),
    ("a + z", lambda z, a: a + z, 2),
    ("z + z", lambda z, a: z + z, 2),
    ("sin(z)", lambda z, a: F.sin(z), 2),
    ("z - 1.0", lambda z, a: z - 1.0, 2),
    ("z ** 2", lambda z, a: z ** 2, 2),
    ("linear(x, W, z): a third input", lambda z, a: F.linear(np.ones((1, 3)), np.ones((3, 3)), z), 3),
]


@pytest.mark.parametrize("op, tracked", [(op, tracked) for _, op, tracked in TRACKED_PER_OP],
                         ids=[name for name, _, _ in TRACKED_PER_OP])
def test_objects_tracked_by_the_collector_per_op(op, tracked):
    import gc

    a = dz.Variable(np.ones(3))
    z = dz.Variable(np.ones(3))
    n_ops = 300
    gc.collect()
    before = len(gc.get_objects())
    for _ in range(n_ops):
        z = op(z, a)
    gc.collect()  # (also untracks the tuples of numbers: saved shapes)
    assert (len(gc.get_objects()) - before) / n_ops <= tracked + 0.01
    next_functions = z.creator.next_functions  # the edges, as a list when read
    assert next_functions[0] is None or isinstance(next_functions[0], tuple)
    z.backward()
