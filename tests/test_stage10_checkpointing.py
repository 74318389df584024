"""Stage 10: checkpointing, in the step file and in dezero_mini.

The stage's contract (the plain gradients to the bit for a chain, one run without the
graph and one with, nothing kept inside a segment, a third of the plain peak
at 256 layers) is defined once in ``dezero_mini.contracts.stage10`` and run
by ``test_stage_memory.py``; ``test_checker.py`` shows that it fails on
subtly wrong files. Here: numerical gradient checks, ``checkpoint`` inside a
dezero_mini Model, several outputs, bad input, the check mode, a second
backward, how the peak grows with depth, and the machinery that lets stage
10 build on stage 08 (``Stage.builds_on``: ``start``, the book's diff, the
contracts a stage keeps).
"""
import gc
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import dezero_mini
import dezero_mini.functions as F
import dezero_mini.layers as L
from conftest import ROOT, STEPS, load
from dezero_mini import cli
from dezero_mini import contracts
from dezero_mini.contracts import Stage, contracts_at, get_stage, lineage, names_needed_at
from dezero_mini.memory import DeepChain, count_live_objects, grad_array, sqrt_segments, step_peak
from test_gradients import check_gradients

import build_book  # noqa: E402  (tools/ is not a package)

STEP = "step10_checkpointing"
MODULES = [STEP, "dezero_mini"]


def _segment(m):
    """A small segment of two inputs that uses each more than once."""
    return lambda a, b: m.tanh(m.matmul(a, b)) * m.sum(a) + m.exp(m.matmul(a, b))


# --- gradients ---------------------------------------------------------------------------
@pytest.mark.parametrize("name", MODULES)
def test_checkpoint_passes_the_numerical_gradient_check(name):
    m = load(name)
    check_gradients(m, lambda m, a, b: m.checkpoint(_segment(m), a, b), [(3, 4), (4, 2)], False)


def test_dezero_mini_gradient_check_through_a_checkpoint():
    layer = L.Linear(3)
    assert dezero_mini.utils.gradient_check(
        lambda x: dezero_mini.checkpoint(lambda h: F.tanh(layer(h)), x), np.random.randn(4, 2))


@pytest.mark.parametrize("name", MODULES)
def test_gradients_equal_the_plain_ones_bit_for_bit(name):
    m = load(name)

    def grads(checkpointed):
        a = m.Variable(np.linspace(-1, 1, 12).reshape(3, 4))
        b = m.Variable(np.linspace(0.5, -0.5, 8).reshape(4, 2))
        f = _segment(m)
        y = m.checkpoint(f, a, b) if checkpointed else f(a, b)
        m.sum(m.mul(y, y)).backward()
        return grad_array(a.grad), grad_array(b.grad)

    for plain, checkpointed in zip(grads(False), grads(True)):
        assert np.array_equal(plain, checkpointed)


@pytest.mark.parametrize("name", MODULES)
def test_a_value_read_inside_and_outside_a_segment_gets_its_gradient_up_to_summation_order(name):
    """The promise as it is: equal to the plain gradients up to the order in
    which contributions are summed; bit-identical for a chain (the test
    above). W is read before, inside (twice) and after the segment: without
    the checkpoint its three contributions meet in one sum, with it the
    segment's two reach W.grad first, and floating-point addition is not
    associative. In dezero_mini the difference is in the last bit (1.8e-15
    on a largest element of 20.4; the step file's order happens to agree),
    and never more than two units in the last place of the largest element."""
    m = load(name)
    rng = np.random.RandomState(0)
    x_data, W_data = rng.randn(8, 5), rng.randn(5, 5) * 0.5

    def grads(checkpointed):
        x, W = m.Variable(x_data), m.Variable(W_data)

        def segment(h):
            return m.tanh(m.matmul(m.tanh(m.matmul(h, W)), W))

        h = m.matmul(x, W)
        h = m.checkpoint(segment, h) if checkpointed else segment(h)
        y = m.matmul(h, W)
        m.sum(m.mul(y, y)).backward()
        return grad_array(W.grad), grad_array(x.grad)

    (plain_W, plain_x), (checkpointed_W, checkpointed_x) = grads(False), grads(True)
    assert np.array_equal(plain_x, checkpointed_x)  # x is read once, before the segment
    np.testing.assert_allclose(checkpointed_W, plain_W, rtol=0,
                               atol=2 * np.spacing(np.abs(plain_W).max()))


class _Net(dezero_mini.Model):
    """Two hidden layers; with ``checkpointed`` the two are one checkpointed segment."""

    def __init__(self):
        super().__init__()
        self.l1, self.l2, self.l3 = L.Linear(16), L.Linear(16), L.Linear(1)

    def hidden(self, x):
        return F.tanh(self.l2(F.tanh(self.l1(x))))

    def forward(self, x, checkpointed=False):
        h = dezero_mini.checkpoint(self.hidden, x) if checkpointed else self.hidden(x)
        return self.l3(h)


def _model_gradients(checkpointed, x_data):
    np.random.seed(0)  # the layers' initial weights
    model = _Net()
    x = dezero_mini.Variable(x_data)
    F.mean_squared_error(model(x, checkpointed), np.zeros((len(x_data), 1))).backward()
    layers = (model.l1, model.l2, model.l3)
    return [x.grad] + [p.grad for layer in layers for p in (layer.W, layer.b)], model


def test_checkpoint_inside_a_model_gives_every_parameter_its_gradient():
    x = np.random.RandomState(1).randn(8, 5)
    plain, _ = _model_gradients(False, x)
    checkpointed, model = _model_gradients(True, x)
    assert len(checkpointed) == 7  # x, and W and b of three layers
    assert all(g is not None for g in checkpointed)
    for a, b in zip(plain, checkpointed):
        assert np.array_equal(a.data, b.data)


def test_training_with_checkpoints_follows_the_plain_run_exactly():
    """Ten SGD steps of a dezero_mini MLP, its hidden layers checkpointed or
    not: the same losses, to the bit."""
    from dezero_mini import optimizers
    from dezero_mini.models import MLP

    rng = np.random.RandomState(3)
    x, t = rng.randn(32, 4), rng.randn(32, 1)

    def losses(checkpointed):
        np.random.seed(0)
        model = MLP((16, 16, 1))
        optimizer = optimizers.SGD(lr=0.1).setup(model)
        found = []
        for _ in range(10):
            model.cleargrads()
            y = dezero_mini.checkpoint(model, x) if checkpointed else model(x)
            loss = F.mean_squared_error(y, t)
            loss.backward()
            optimizer.update()
            found.append(float(loss.data))
        return found

    plain = losses(False)
    assert plain[-1] < plain[0]
    assert losses(True) == plain


def test_a_checkpoint_on_data_that_needs_no_gradient_still_trains_its_parameters():
    """PyTorch's reentrant checkpoint gives no gradient to the parameters inside
    when no input requires one; here the segment's parameters get theirs."""
    layer = L.Linear(3)
    x = np.random.RandomState(2).randn(4, 2)  # an array: a constant of the graph
    F.sum(dezero_mini.checkpoint(lambda h: F.tanh(layer(h)), x)).backward()
    with_checkpoint = layer.W.grad.data.copy()
    layer.cleargrads()
    F.sum(F.tanh(layer(x))).backward()
    assert np.array_equal(with_checkpoint, layer.W.grad.data)


def test_several_outputs_get_their_own_gradients():
    a = dezero_mini.Variable(np.linspace(-1, 1, 5))

    def two(h):
        return F.tanh(h), h * h

    def grads(checkpointed):
        a.cleargrad()
        u, v = dezero_mini.checkpoint(two, a) if checkpointed else two(a)
        (F.sum(u * 2.0) + F.sum(v * v)).backward()
        return a.grad.data

    assert np.array_equal(grads(False), grads(True))


def test_an_output_that_nobody_uses_needs_no_gradient():
    a = dezero_mini.Variable(np.linspace(-1, 1, 5))
    u, _ = dezero_mini.checkpoint(lambda h: (F.exp(h), F.tanh(h)), a)
    F.sum(u).backward()
    assert np.array_equal(a.grad.data, np.exp(a.data))


@pytest.mark.parametrize("name", MODULES)
def test_an_input_the_segment_ignores_gets_a_zero_gradient(name):
    m = load(name)
    a, b = m.Variable(np.ones(3)), m.Variable(np.ones(3))
    m.sum(m.checkpoint(lambda u, v: m.exp(u), a, b)).backward()
    assert np.array_equal(grad_array(b.grad), np.zeros(3))


@pytest.mark.parametrize("name", MODULES)
def test_a_second_backward_recomputes_again(name):
    m = load(name)
    calls = []
    x = m.Variable(np.array([0.5, 1.5]))

    def segment(h):
        calls.append(1)
        return m.exp(h)

    y = m.sum(m.checkpoint(segment, x))
    y.backward(retain_graph=True)
    y.backward()
    assert len(calls) == 3
    assert np.allclose(grad_array(x.grad), 2 * np.exp(x.data))


def test_the_step_files_checkpoint_passes_the_check_mode():
    m = load(STEP)
    with m.using_config("check_saved", True):
        DeepChain(m, depth=8, segments=3, batch_size=4).train_step(0)


@pytest.mark.parametrize("name", MODULES)
def test_a_function_that_returns_no_variable_is_a_clear_error(name):
    m = load(name)
    with pytest.raises(TypeError, match="checkpoint.*Variable.*got (float|ndarray)"):
        m.checkpoint(lambda h: float(h.data.sum()), m.Variable(np.ones(2)))


def test_create_graph_through_a_checkpoint_is_a_clear_error_and_loses_nothing():
    """The copy that backward recomputes starts from new leaves, so a graph
    of its gradients would not reach x: a second derivative would silently
    miss terms. Refused instead, before anything is changed: a first-order
    backward of the same (kept) graph still gives 3x^2."""
    x = dezero_mini.Variable(np.array([0.5, 1.0]))
    y = F.sum(dezero_mini.checkpoint(lambda h: h ** 3, x))
    with pytest.raises(RuntimeError, match=r"^Checkpoint\.backward: backward\(create_graph=True\) "
                                           r"cannot go through a checkpoint"):
        y.backward(create_graph=True)
    assert x.grad is None
    y.backward()
    np.testing.assert_allclose(x.grad.data, 3 * x.data ** 2)


def test_checkpoint_of_something_not_callable_is_a_clear_error():
    with pytest.raises(TypeError, match="checkpoint: the first argument must be a callable, got int"):
        dezero_mini.checkpoint(3, dezero_mini.Variable(np.ones(2)))


# --- memory --------------------------------------------------------------------------------
@pytest.mark.parametrize("name", MODULES)
def test_the_forward_pass_keeps_one_function_per_segment(name, gc_disabled):
    m = load(name)
    chain = DeepChain(m, depth=64, segments=8, batch_size=8)
    before = count_live_objects(m)["functions"]
    loss = chain.loss(0)
    kept = count_live_objects(m)["functions"] - before
    plain = DeepChain(m, depth=64, batch_size=8).loss(0)
    kept_plain = count_live_objects(m)["functions"] - before - kept
    del loss, plain
    # 7 checkpoints, the last segment's 8 layers of 4 Functions, and the 9 Functions
    # around the chain (3 in the first layer, 5 in the last two, the loss)
    assert kept == 7 + 8 * 4 + 9
    assert kept_plain == 64 * 4 + 9


@pytest.mark.parametrize("name", MODULES)
def test_the_peak_grows_like_the_square_root_of_depth(name):
    """16 times the depth: about 16 times the plain peak, and at most 6 times
    the checkpointed one (sqrt(n) segments: 4 times, less what does not
    depend on depth, plus the parameters' gradients, which grow like n)."""
    m = load(name)
    plain = {n: step_peak(DeepChain(m, depth=n)) for n in (16, 256)}
    checkpointed = {n: step_peak(DeepChain(m, depth=n, segments=sqrt_segments(n)))
                    for n in (16, 256)}
    assert 12 <= plain[256] / plain[16] <= 17
    assert 2 <= checkpointed[256] / checkpointed[16] <= 6


def test_deep_chain_refuses_segments_on_a_stage_without_checkpoint():
    with pytest.raises(ValueError, match="has no checkpoint"):
        DeepChain(load("step08_saved_tensors"), depth=4, segments=2)
    with pytest.raises(ValueError, match="segments must be None or from 1 to depth"):
        DeepChain(load(STEP), depth=4, segments=5)


def test_the_demo_runs():
    done = subprocess.run([sys.executable, str(STEPS / f"{STEP}.py")], capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "the same, to the bit: True" in done.stdout


# --- stage 10 builds on stage 08 -----------------------------------------------------------
def test_stage10_builds_on_stage08():
    assert get_stage(10).builds_on == 8
    assert get_stage(8).builds_on == 7  # the default: the previous number
    assert 9 not in lineage(10) and {8, 7, 1} <= lineage(10)
    assert lineage(contracts.FINISHED) >= {8, 9, 10}


def test_step10_keeps_stage08s_contracts():
    assert {c.name for c in get_stage(8).contracts} <= {c.name for c in contracts_at(10)}


def test_a_stage_beside_the_chain_lends_it_neither_contracts_nor_names(monkeypatch):
    """With a stage 09 of its own (as on main once stage 09 lands), stage 10
    is not held to it; the finished framework is."""
    nine = Stage(number=9, name="memory_planning", title="memory_planning", idea=".",
                 change=".", needs=("plan",))

    @nine.contract(hint="a hint")
    def plans_memory(module):
        """A stage-09 property."""

    monkeypatch.setattr(contracts, "_stages", sorted(
        [*contracts.stages(), nine], key=lambda stage: stage.number))
    assert lineage(10) == {1, 2, 3, 4, 5, 6, 7, 8, 10}
    assert "plans_memory" not in {c.name for c in contracts_at(10)}
    assert "plan" not in names_needed_at(10) and "checkpoint" in names_needed_at(10)
    assert plans_memory.holds_at(9) and plans_memory.holds_at(contracts.FINISHED)
    assert not plans_memory.holds_at(10)


def test_builds_on_must_be_an_earlier_stage():
    with pytest.raises(ValueError, match="builds_on must be an earlier stage"):
        Stage(number=4, name="x", title="x", idea=".", change=".", builds_on=4)


def test_start_10_writes_stage08s_snapshot(tmp_path, capsys):
    assert cli.main(["start", "10", str(tmp_path)]) == 0
    written = (tmp_path / "step10_checkpointing.py").read_text()
    header, _, body = written.partition("# (You may delete this header.)\n\n")
    assert body == (STEPS / "step08_saved_tensors.py").read_text()
    assert "stage 08's snapshot (step08_saved_tensors.py)" in header
    assert "starting from step08_saved_tensors.py" in capsys.readouterr().out


def test_the_books_diff_for_stage10_is_against_step08():
    section = build_book.code_changes(ROOT, 10)
    assert "--- steps/step08_saved_tensors.py\n+++ steps/step10_checkpointing.py" in section
    assert "the framework of stage 08 that this stage builds on" in section
    assert "class Checkpoint(Function):" in section
    assert "against the previous stage's `steps/step07" in build_book.code_changes(ROOT, 8)


def test_the_book_reads_builds_on_without_importing_the_stage(tmp_path):
    """A small repository: stage 03 says it builds on 01; stage 02 says nothing."""
    (tmp_path / "steps").mkdir()
    for n in (1, 2, 3):
        (tmp_path / "steps" / f"step0{n}_s{n}.py").write_text(f"STAGE = '0{n}'\n")
    folder = tmp_path / "dezero_mini" / "contracts"
    folder.mkdir(parents=True)
    (folder / "stage03.py").write_text(
        "import not_a_module_that_exists\nSTAGE = Stage(number=3, name='s3', builds_on=1)\n")
    assert build_book.builds_on(tmp_path, 3) == 1 and build_book.builds_on(tmp_path, 2) == 1
    assert "--- steps/step01_s1.py\n+++ steps/step03_s3.py" in build_book.code_changes(tmp_path, 3)
    assert "--- steps/step01_s1.py\n+++ steps/step02_s2.py" in build_book.code_changes(tmp_path, 2)
