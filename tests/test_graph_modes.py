"""Stage 04's retain_grad and stage 05's no_grad, on their stage and every later one."""
import threading
import weakref

import numpy as np
import pytest

from conftest import load, stages_from
from test_gradients import grad_array


def small_graph(module, seed=0):
    rng = np.random.RandomState(seed)
    x = module.Variable(rng.randn(4, 3), name="x")
    W = module.Variable(rng.randn(3, 2), name="W")
    h = module.matmul(x, W)
    s = module.sigmoid(h)
    loss = module.sum(s)
    return x, W, h, s, loss


# --- stage 04: retain_grad ----------------------------------------------------------
@pytest.mark.parametrize("stage", stages_from(4))
def test_backward_drops_intermediate_gradients(stage):
    module = load(stage)
    x, W, h, s, loss = small_graph(module)
    loss.backward()
    assert h.grad is None and s.grad is None and loss.grad is None
    # The leaves keep theirs, and they are right: d sum(sigmoid(xW)) / dW.
    y = 1 / (1 + np.exp(-(x.data @ W.data)))
    np.testing.assert_allclose(grad_array(W.grad), x.data.T @ (y * (1 - y)))
    np.testing.assert_allclose(grad_array(x.grad), (y * (1 - y)) @ W.data.T)


@pytest.mark.parametrize("stage", stages_from(4))
def test_retain_grad_true_keeps_intermediate_gradients(stage):
    module = load(stage)
    x, W, h, s, loss = small_graph(module)
    loss.backward(retain_grad=True)
    np.testing.assert_allclose(grad_array(s.grad), np.ones((4, 2)))
    assert grad_array(h.grad).shape == (4, 2)


@pytest.mark.parametrize("stage", stages_from(1)[:3])
def test_stages_before_04_keep_every_gradient(stage):
    """The contrast the lesson of stage 04 starts from."""
    module = load(stage)
    x, W, h, s, loss = small_graph(module)
    loss.backward()
    assert h.grad is not None and s.grad is not None


# --- stage 05: no_grad ------------------------------------------------------------------
@pytest.mark.parametrize("stage", stages_from(5))
def test_no_grad_builds_no_graph(stage):
    module = load(stage)
    x = module.Variable(np.ones((2, 3)))
    f = getattr(module, "functions", module).Sigmoid()  # dezero_mini keeps it in F
    with module.no_grad():
        y = f(x)
        z = module.add(module.matmul(y, module.Variable(np.ones((3, 2)))), 1.0)
    assert y.creator is None and z.creator is None
    assert not hasattr(f, "inputs") and not hasattr(f, "outputs")
    # Nothing holds the Function any more: reference counting has freed it.
    ref = weakref.ref(f)
    del f
    assert ref() is None


@pytest.mark.parametrize("stage", stages_from(5))
def test_no_grad_restores_the_mode_after_an_exception(stage):
    module = load(stage)
    assert module.Config.enable_backprop is True
    with pytest.raises(RuntimeError, match="inside"):
        with module.no_grad():
            assert module.Config.enable_backprop is False
            raise RuntimeError("inside the block")
    assert module.Config.enable_backprop is True
    x = module.Variable(np.ones(3))
    assert module.exp(x).creator is not None


@pytest.mark.parametrize("stage", stages_from(5))
def test_using_config_nests(stage):
    module = load(stage)
    with module.using_config("enable_backprop", False):
        with module.using_config("enable_backprop", True):
            assert module.Config.enable_backprop is True
        assert module.Config.enable_backprop is False
    assert module.Config.enable_backprop is True


def test_dezero_mini_grad_mode_is_local_to_a_thread():
    module = load("dezero_mini")
    seen = {}
    inside, release = threading.Event(), threading.Event()

    def worker():
        inside.wait()
        seen["other thread"] = module.Config.enable_backprop
        release.set()

    thread = threading.Thread(target=worker)
    thread.start()
    with module.no_grad():
        inside.set()
        release.wait(timeout=10)
        seen["this thread"] = module.Config.enable_backprop
    thread.join()
    assert seen == {"other thread": True, "this thread": False}
