"""dezero_mini keeps only what each backward reads: the check mode on every
built-in Function.

``Config.check_saved`` (or ``DEZERO_MINI_CHECK_SAVED=1``) runs each backward
on a stand-in that notes what it reads and raises when a Function holds an
input or a saved value that its backward never read (stage 08 of the course,
after PaddlePaddle's unused-input check). Here every gradient test of
``test_functions.py``, ``test_functions_conv.py`` and ``test_dezero_api.py``
runs again with the check on, first derivatives and, through
``create_graph``, second ones; then a last test asserts that together they
ran the backward of every Function class that dezero_mini defines. The
check's own behaviour on careless Functions is stage 08's contract
(``dezero_mini.contracts.stage08``, run by ``test_stage_memory.py``).
"""
import os
import subprocess
import sys

import numpy as np
import pytest
import test_dezero_api as api
import test_functions as fn
import test_functions_conv as conv
from test_gradients import check_gradients

import dezero_mini as dz
import dezero_mini.functions as F
from dezero_mini import core, functions_conv

#: The Function classes whose backward ran under the check, in this session.
CHECKED = set()


@pytest.fixture(autouse=True)
def check_mode(monkeypatch):
    """The check on, and every class it checks noted in CHECKED."""
    checked = core._backward_checked

    def noting(f, gys):
        CHECKED.add(type(f))
        return checked(f, gys)

    monkeypatch.setattr(core, "_backward_checked", noting)
    with dz.using_config("check_saved", True):
        yield


@pytest.mark.parametrize("case", fn.CASES, ids=[c[0] for c in fn.CASES])
def test_first_derivatives(case):
    _, function, shapes, positive = case
    check_gradients(dz, function, shapes, positive)


@pytest.mark.parametrize("case", fn.SECOND_ORDER, ids=[c[0] for c in fn.SECOND_ORDER])
def test_second_derivatives(case):
    """create_graph gives the saved arrays back as Variables: read all the same."""
    fn.test_backward_can_be_differentiated(case)


def _row_conversion(x):
    """batch_norm's layout change for images, both ways (a create_graph path)."""
    rows = F._Rows()(x)
    return F._Rows(inverse_shape=x.shape)(rows * rows)


def _mixed_precision():
    """Issue 9's program: float32 weights, float64 data."""
    W32 = dz.Variable(np.random.RandomState(0).randn(3, 4).astype(np.float32))
    (F.sum(F.matmul(np.ones((5, 3)), W32)) + 0.5 * F.sum(W32**2)).backward()
    assert W32.grad.dtype == np.float32
    # With create_graph the float64 gradient becomes float32 through a Cast
    # node, which the second backward goes through.
    W32.cleargrad()
    F.sum(F.matmul(np.ones((5, 3)), W32) ** 2).backward(create_graph=True)
    gW = W32.grad
    assert isinstance(gW.creator, core.Cast) and gW.dtype == np.float32
    W32.cleargrad()
    F.sum(gW).backward()
    assert W32.grad.dtype == np.float32


#: The other gradient tests, each a call: convolution and pooling, the
#: functions of DeZero's API, mixed precision, casts in higher orders.
OTHER_TESTS = {
    "conv2d": lambda: conv.test_conv2d_gradients(2, 1),
    "deconv2d": lambda: conv.test_deconv2d_is_the_adjoint_of_conv2d_and_its_gradients(2, 1),
    "conv2d-double-backprop": conv.test_conv2d_grad_w_has_its_own_gradient_for_double_backprop,
    "pooling": lambda: conv.test_pooling_values_and_gradients(3, 1, 1),
    "pooling-gradients": conv.test_pooling_gradient_functions_have_gradients,
    "im2col-col2im": conv.test_im2col_and_col2im_are_each_others_gradient,
    "conv-layers": conv.test_conv_layers_learn_their_input_size_and_train,
    "softmax_simple": api.test_softmax_simple_matches_softmax_and_its_gradient,
    "softmax_cross_entropy_simple": api.test_softmax_cross_entropy_simple_matches_the_one_function_version,
    "simple-versions": api.test_sigmoid_linear_and_mse_simple_match_their_one_function_versions,
    "binary-losses": api.test_sigmoid_and_binary_cross_entropy_values_and_gradients,
    "embed_id": api.test_embed_id_picks_rows_and_scatters_the_gradient_back,
    "batch_norm": lambda: api.test_batch_norm_normalises_per_channel_and_its_gradient((4, 3, 2, 2)),
    "batch_norm-rows": lambda: dz.utils.gradient_check(_row_conversion, np.ones((2, 3, 2, 2)) * 0.5),
    "rnn-lstm": api.test_rnn_and_lstm_gradients_through_two_steps,
    "mixed-precision": lambda: _mixed_precision(),
    "float32-higher-order": lambda: fn.test_higher_order_gradients_keep_float32(
        lambda x, w: F.sigmoid(x) * 0.5 / w),
    "third-derivative": fn.test_third_derivative_of_sin,
}


@pytest.mark.parametrize("name", OTHER_TESTS)
def test_other_gradients(name):
    result = OTHER_TESTS[name]()
    assert result is None or result is True


def _builtin_function_classes():
    """Every Function class that dezero_mini defines."""
    found = set()
    for module in (core, F, functions_conv):
        for value in vars(module).values():
            if isinstance(value, type) and issubclass(value, core.Function) \
                    and value is not core.Function and value.__module__ == module.__name__:
                found.add(value)
    return found


def test_every_builtin_function_names_what_it_saves_and_has_no_dict():
    classes = _builtin_function_classes()
    assert len(classes) >= 45
    for cls in classes:
        assert cls.saves is not None, f"{cls.__name__} keeps self.inputs (DeZero's way)"
        assert "__slots__" in vars(cls), cls.__name__
        assert set(cls.saves) <= {s for c in cls.__mro__ for s in vars(c).get("__slots__", ())}
        assert not hasattr(cls.__new__(cls), "__dict__"), cls.__name__


def test_every_builtin_function_passed_the_check():
    """Run last in this file: the tests above ran the backward of every
    Function class of dezero_mini with the check on (those of them that did
    not run, alone with -k, are run here)."""
    if not _builtin_function_classes() <= CHECKED:
        for case in fn.CASES:
            test_first_derivatives(case)
        for case in fn.SECOND_ORDER:
            test_second_derivatives(case)
        for name in OTHER_TESTS:
            test_other_gradients(name)
    missing = sorted(cls.__name__ for cls in _builtin_function_classes() - CHECKED)
    assert not missing, f"never checked: {missing}"


# --- the check can fail ------------------------------------------------------------------
def test_a_builtin_that_keeps_more_is_named():
    class ExpThatKeepsItsInput(F.Exp):
        __slots__ = ("x",)
        saves = ("y", "x")

        def forward(self, x):
            self.x = x
            return super().forward(x)

    x = dz.Variable(np.array([0.5, 1.0]))
    with pytest.raises(RuntimeError, match=r"^check_saved: ExpThatKeepsItsInput holds x that its "
                                           r"backward never reads"):
        F.sum(ExpThatKeepsItsInput()(x)).backward()


def test_a_function_written_dezeros_way_that_reads_only_shapes_is_named():
    """dezero_mini's Add before it adopted stage 08, written DeZero's way."""

    class OldAdd(dz.Function):
        def forward(self, x0, x1):
            return x0 + x1

        def backward(self, gy):
            x0, x1 = self.inputs
            return F.sum_to(gy, x0.shape), F.sum_to(gy, x1.shape)

    a, b = dz.Variable(np.ones((2, 3))), dz.Variable(np.ones(3))
    with pytest.raises(RuntimeError, match=r"OldAdd holds the arrays of inputs\[0\], inputs\[1\] but "
                                           r"its backward reads only their shapes"):
        F.sum(OldAdd()(a, b)).backward()


def test_a_function_written_dezeros_way_that_reads_its_inputs_passes():
    class Cube(dz.Function):
        def forward(self, x):
            return x**3

        def backward(self, gy):
            (x,) = self.inputs
            return 3 * x**2 * gy  # a Variable formula on the stand-in

    x = dz.Variable(np.array([1.0, 2.0]))
    F.sum(Cube()(x)).backward()
    np.testing.assert_array_equal(x.grad.data, [3.0, 12.0])
    x.cleargrad()
    F.sum(Cube()(x)).backward(create_graph=True)
    gx = x.grad
    x.cleargrad()
    F.sum(gx).backward()
    np.testing.assert_array_equal(x.grad.data, [6.0, 12.0])


def test_the_check_is_off_by_default_and_on_with_the_environment_variable():
    code = "import dezero_mini as dz; print(dz.Config.check_saved)"
    seen = {}
    for value in ("", "1"):
        env = {**os.environ, "DEZERO_MINI_CHECK_SAVED": value}
        done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                              text=True, check=True)
        seen[value] = done.stdout.strip()
    assert seen == {"": "False", "1": "True"}


def test_a_function_written_dezeros_way_may_read_its_output_in_backward():
    """As DeZero's own Exp does (``self.outputs[0]()``): a built-in Function
    that uses such an output keeps the Variable (an edge to it), so it is
    alive when the backward runs, as in DeZero."""

    class DeZeroExp(dz.Function):
        def forward(self, x):
            return np.exp(x)

        def backward(self, gy):
            y = self.outputs[0]()
            return gy * y

    x = dz.Variable(np.array([0.0, 1.0]))
    with dz.using_config("check_saved", False):
        loss = F.sum(DeZeroExp()(x) * 2.0 + 1.0)  # the output is held by nothing but the graph
        loss.backward()
    np.testing.assert_allclose(x.grad.data, 2 * np.exp([0.0, 1.0]))
    # DeZero's way keeps the input too, which this backward never reads: the check says so.
    with pytest.raises(RuntimeError, match=r"DeZeroExp holds inputs\[0\] that its backward never reads"):
        F.sum(DeZeroExp()(x) * 2.0 + 1.0).backward()
