"""dezero_mini's backward frees the graph as in PyTorch (retain_graph=False by
default), and double backprop keeps working (create_graph=True keeps the
graph unless told otherwise)."""
import numpy as np
import pytest

import dezero_mini as dz
import dezero_mini.functions as F
from dezero_mini import utils


def test_backward_frees_what_every_function_it_ran_kept():
    x = dz.Variable(np.array([0.5, -1.0]))
    h = F.tanh(x)
    hh = h * h
    y = F.sum(hh)
    assert h.creator.y is not None and hh.creator.x0 is not None  # kept for backward
    y.backward()
    for f in (h.creator, hh.creator, y.creator):  # the links and the saved values are gone
        assert f.next_functions is None
        assert all(getattr(f, name, None) is None for name in f.saves), type(f).__name__
    assert x.grad is not None and x.creator is None  # the leaf keeps its gradient


def test_second_backward_names_retain_graph():
    x = dz.Variable(np.array([0.5, -1.0]))
    y = F.sum(F.exp(x))
    y.backward()
    with pytest.raises(RuntimeError, match=r"Sum has already let go of its inputs.*retain_graph=True"):
        y.backward()


def test_retain_graph_gives_the_same_gradients_twice():
    x = dz.Variable(np.array([0.5, -1.0, 2.0]))
    y = F.sum(F.sigmoid(x) * x)
    y.backward(retain_graph=True)
    first = x.grad.data.copy()
    x.cleargrad()
    y.backward()
    np.testing.assert_array_equal(first, x.grad.data)


def test_create_graph_keeps_the_graph_for_double_backprop():
    """tanh'' through the first graph: gx = 1 - y*y refers to y, the output of
    the first graph's Tanh, so gx.backward() goes through that Tanh again."""
    x = dz.Variable(np.array(0.7))
    y = F.tanh(x)
    y.backward(create_graph=True)
    gx = x.grad
    x.cleargrad()
    gx.backward()
    t = np.tanh(0.7)
    np.testing.assert_allclose(x.grad.data, -2 * t * (1 - t * t))


def test_create_graph_with_retain_graph_false_frees_the_first_graph():
    x = dz.Variable(np.array(0.7))
    y = F.tanh(x)
    y.backward(create_graph=True, retain_graph=False)
    gx = x.grad
    x.cleargrad()
    with pytest.raises(RuntimeError, match="retain_graph=True"):
        gx.backward()


def test_newtons_method_with_double_backprop_converges():
    """DeZero's step 33: minimise y = x^4 - 2x^2 with the second derivative."""
    x = dz.Variable(np.array(2.0))
    for _ in range(10):
        y = x**4 - 2 * x**2
        x.cleargrad()
        y.backward(create_graph=True)
        gx = x.grad
        x.cleargrad()
        gx.backward()
        x.data = x.data - gx.data / x.grad.data
    np.testing.assert_allclose(x.data, 1.0)


def test_higher_derivatives_of_tanh_in_a_loop():
    """DeZero's step 35: each gx.backward(create_graph=True) keeps its graph."""
    x = dz.Variable(np.array(1.0))
    y = F.tanh(x)
    x.name = "x"
    y.backward(create_graph=True)
    for _ in range(3):
        gx = x.grad
        x.cleargrad()
        gx.backward(create_graph=True)
    t = np.tanh(1.0)
    fourth = 8 * t * (1 - t * t) * (2 - 3 * t * t)  # d^4/dx^4 tanh(x) = 8 t (1-t^2)(2-3t^2)
    np.testing.assert_allclose(x.grad.data, fourth)


def test_unchain_backward_and_drawing_after_a_freeing_backward():
    x = dz.Variable(np.ones(3), name="x")
    y = F.sum(F.exp(x))
    y.backward()
    text = utils.get_dot_graph(y)
    assert "(freed by backward)" in text
    y.unchain_backward()  # nothing left to cut but its freed creator: not an error
    assert y.creator is None  # a leaf now, whose value the next graph may start from
