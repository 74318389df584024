"""dezero_mini's core under stress and misuse: long chains, repeated
backward, no_grad outputs, bad gradients."""
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import dezero_mini as dz
import dezero_mini.functions as F

CHAIN = 100_000


def test_long_chain_backpropagates_and_is_freed_in_a_subprocess():
    """Backward is iterative (no RecursionError), and letting go of a 100k
    chain does not overflow the C stack while CPython frees it. In a
    subprocess, so that a crash fails this test instead of killing pytest."""
    code = textwrap.dedent(f"""
        import numpy as np, dezero_mini as dz, dezero_mini.functions as F
        x = dz.Variable(np.full(3, 0.5))
        y = x
        for _ in range({CHAIN}):
            y = F.sin(y)
        y.backward()
        assert x.grad.data.shape == (3,) and np.all(np.isfinite(x.grad.data))
        del y
        z = x
        for _ in range({CHAIN}):
            z = z * 1.0
        del x, z  # never backpropagated: the whole chain goes at once
        print("freed")
    """)
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, (result.returncode, result.stderr[-2000:])
    assert result.stdout.strip() == "freed"


def test_backward_twice_accumulates_like_dezero():
    x = dz.Variable(np.array([1.0, 2.0]))
    y = F.sum(x * x)
    y.backward(retain_graph=True)
    np.testing.assert_allclose(x.grad.data, [2.0, 4.0])
    y.backward(retain_graph=True)  # the graph was kept; y.grad was dropped, so it restarts from 1
    np.testing.assert_allclose(x.grad.data, [4.0, 8.0])
    x.cleargrad()
    y.backward()
    np.testing.assert_allclose(x.grad.data, [2.0, 4.0])


def test_backward_on_a_no_grad_output_is_a_clear_error():
    x = dz.Variable(np.ones(3))
    with dz.no_grad():
        y = F.sum(F.exp(x))
    with pytest.raises(RuntimeError, match=r"backward: this Variable was computed under no_grad\(\)"):
        y.backward()
    assert x.grad is None


def test_backward_on_a_leaf_is_not_an_error():
    x = dz.Variable(np.ones(3))
    x.backward()
    np.testing.assert_allclose(x.grad.data, np.ones(3))


def test_user_set_grad_of_the_wrong_shape_says_so():
    x = dz.Variable(np.ones(3))
    y = F.exp(x)
    y.grad = dz.Variable(np.ones(4))
    with pytest.raises(ValueError, match=r"backward: the grad that you set: gradient of shape \(4,\) "
                                         r"for a Variable of shape \(3,\)"):
        y.backward()


def test_user_set_grad_of_another_dtype_takes_the_variables_dtype():
    """As in PyTorch: every gradient is cast to its Variable's dtype (a wrong
    shape is still an error, above)."""
    x = dz.Variable(np.ones(3))
    y = F.exp(x)
    y.grad = dz.Variable(np.full(3, 0.5, dtype=np.float32))
    y.backward()
    assert x.grad.dtype == np.float64
    np.testing.assert_allclose(x.grad.data, 0.5 * np.e)


def test_user_set_grad_that_is_not_an_array_says_so():
    x = dz.Variable(np.ones(3))
    y = F.exp(x)
    y.grad = [1.0, 1.0, 1.0]
    with pytest.raises(TypeError, match="must be a Variable or a numpy array, got list"):
        y.backward()


def test_a_backward_that_returns_the_wrong_shape_is_named():
    class Bad(dz.Function):
        def forward(self, x):
            return x * 2

        def backward(self, gy):
            return F.sum(gy)  # shape () instead of (3,)

    x = dz.Variable(np.ones(3))
    with pytest.raises(ValueError, match=r"Bad.backward: gradient of shape \(\) for a Variable of shape \(3,\)"):
        Bad()(x).backward()


def test_a_forward_that_returns_a_list_is_named():
    class Bad(dz.Function):
        def forward(self, x):
            return [1.0, 2.0]

    with pytest.raises(TypeError, match="Bad.forward must return numpy arrays"):
        Bad()(dz.Variable(np.ones(2)))


def test_backward_restores_the_graph_mode_when_a_backward_raises():
    class Broken(dz.Function):
        def forward(self, x):
            return x

        def backward(self, gy):
            raise ZeroDivisionError("inside backward")

    with pytest.raises(ZeroDivisionError):
        Broken()(dz.Variable(np.ones(2))).backward()
    assert dz.Config.enable_backprop is True


# --- what a backward formula receives: arrays, or Variables -------------------------------
class _Recorder(dz.Function):
    """Doubles its input and notes the kind of gradient its backward was given."""

    seen = []

    def forward(self, x):
        return x * 2

    def backward(self, gy):
        type(self).seen.append(type(gy))
        return gy * 2


class _ArrayRecorder(_Recorder):
    array_backward = True
    seen = []


def test_a_function_written_for_dezero_gets_variables_in_backward():
    _Recorder.seen.clear()
    x = dz.Variable(np.ones(3))
    F.sum(_Recorder()(x)).backward()
    assert _Recorder.seen == [dz.Variable]
    np.testing.assert_allclose(x.grad.data, [2.0, 2.0, 2.0])


def test_an_array_backward_gets_arrays_unless_the_pass_builds_a_graph():
    _ArrayRecorder.seen.clear()
    x = dz.Variable(np.ones(3))
    F.sum(_ArrayRecorder()(x)).backward()
    F.sum(_ArrayRecorder()(x)).backward(create_graph=True)
    assert _ArrayRecorder.seen == [np.ndarray, dz.Variable]
    np.testing.assert_allclose(x.grad.data, [4.0, 4.0, 4.0])  # the two passes add up


def test_the_gradients_that_backward_leaves_are_variables_in_both_modes():
    x = dz.Variable(np.array([1.0, 2.0]))
    y = F.sin(x) * x
    y.grad = dz.Variable(np.ones(2))
    y.backward(retain_grad=True)
    assert type(x.grad) is dz.Variable and type(y.grad) is dz.Variable
    assert x.grad.creator is None
    x.cleargrad()
    F.sum(F.sin(x) * x).backward(create_graph=True)
    assert type(x.grad) is dz.Variable and x.grad.creator is not None


def test_a_scalar_used_twice_accumulates_numpy_scalars_into_a_0d_gradient():
    # 0-d arithmetic gives numpy scalars, not arrays: the leaf still gets a 0-d array.
    x = dz.Variable(np.array(3.0))
    y = x * x + x
    y.backward()
    assert isinstance(x.grad.data, np.ndarray) and x.grad.data.shape == ()
    np.testing.assert_allclose(x.grad.data, 7.0)


class _SplitInTwo(dz.Function):
    array_backward = True

    def forward(self, x):
        half = x.shape[0] // 2
        return x[:half].copy(), x[half:].copy()

    def backward(self, g_first, g_second):
        parts = [g if g is not None else np.zeros(2) for g in (g_first, g_second)]
        return np.concatenate(parts)


def test_an_output_that_nobody_holds_gets_no_gradient_and_no_error():
    x = dz.Variable(np.arange(4.0))
    first, _ = _SplitInTwo()(x)
    del _  # the second output is gone: its weak reference in the Function is dead
    F.sum(first * 3.0).backward()
    np.testing.assert_allclose(x.grad.data, [3.0, 3.0, 0.0, 0.0])
