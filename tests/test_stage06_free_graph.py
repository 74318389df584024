"""Stage 06: backward frees the graph as it goes, unless retain_graph=True.

Checked on stage 06 and every later stage (dezero_mini included): what a
Function saved for its backward is released while backward still runs; a
second backward through a freed graph is a clear error; retain_graph=True
keeps the graph and gives the same gradients; parameters keep their data
and gradients; on the standard workload, the backward peak and what is held
when backward returns are lower than stage 05's.
"""
import weakref

import numpy as np
import pytest

from conftest import load, stages_from
from dezero_mini.memory import Workload, grad_array, record_step_timeline, watch

FREEING = stages_from(6)


def probe_class(module, seen):
    """A Function that passes its input through and, when its backward runs,
    writes into ``seen`` which of the watched Variables are still alive."""

    class Probe(module.Function):
        def forward(self, x):
            return x.copy()

        def backward(self, gy):
            seen.append({name: ref() is not None for name, ref in seen[0].items()})
            return gy

    return Probe


@pytest.mark.parametrize("stage", ["step05_no_grad", *FREEING])
def test_intermediate_values_are_freed_before_backward_returns(stage, gc_disabled):
    """y = sum(square(exp(probe(x)))): when the probe's backward runs (last),
    stage 06 has already freed exp's and square's outputs; stage 05 has not."""
    m = load(stage)
    seen = [{}]
    x = m.Variable(np.linspace(-1.0, 1.0, 1000))
    h = m.exp(probe_class(m, seen)()(x))
    s = m.square(h)
    seen[0].update(h=weakref.ref(h), s=weakref.ref(s))
    loss = m.sum(s)
    del h, s  # the user holds only x and the loss
    loss.backward()
    frees = stage != "step05_no_grad"
    assert seen[1] == {"h": not frees, "s": not frees}
    assert x.grad is not None  # the leaf the user holds keeps its gradient


@pytest.mark.parametrize("stage", FREEING)
def test_second_backward_through_a_freed_graph_says_how_to_keep_it(stage):
    m = load(stage)
    x = m.Variable(np.array([1.0, 2.0]))
    loss = m.sum(m.exp(x) * x)
    loss.backward()
    with pytest.raises(RuntimeError, match=r"retain_graph=True") as error:
        loss.backward()
    assert "backward" in str(error.value) and "freed" in str(error.value)


@pytest.mark.parametrize("stage", FREEING)
def test_a_graph_shared_by_two_losses_is_freed_by_the_first_backward(stage):
    m = load(stage)
    x = m.Variable(np.array([0.5, 1.5]))
    h = m.exp(x)
    a, b = m.sum(h * 2.0), m.sum(h * 3.0)
    a.backward()
    with pytest.raises(RuntimeError, match=r"retain_graph=True"):
        b.backward()  # it reaches exp, which a's backward has freed


@pytest.mark.parametrize("stage", FREEING)
def test_retain_graph_allows_a_second_backward_with_the_same_gradients(stage):
    m = load(stage)
    x = m.Variable(np.array([0.3, -1.2, 2.0]))
    loss = m.sum(m.sigmoid(x * x) * x)
    loss.backward(retain_graph=True)
    first = grad_array(x.grad).copy()
    x.cleargrad()
    loss.backward(retain_graph=True)
    second = grad_array(x.grad).copy()
    x.cleargrad()
    loss.backward()  # the last one may free it
    np.testing.assert_array_equal(first, second)
    np.testing.assert_array_equal(first, grad_array(x.grad))
    with pytest.raises(RuntimeError):
        loss.backward()


@pytest.mark.parametrize("stage", FREEING)
def test_parameters_keep_their_data_and_gradients(stage):
    workload = Workload(load(stage))
    before = [p.data.copy() for p in workload.parameters]
    workload.cleargrads()
    loss = workload.loss(0)
    loss.backward()
    for p, data in zip(workload.parameters, before):
        np.testing.assert_array_equal(p.data, data)
        assert p.grad is not None and grad_array(p.grad).shape == p.data.shape
        assert p.creator is None


@pytest.mark.parametrize("stage", ["step06_free_graph", "step07_user_held_graphs"])
def test_training_is_bit_identical_to_stage05(stage):
    """Freeing changes when memory is released, never a gradient."""
    before, after = Workload(load("step05_no_grad")), Workload(load(stage))
    for i in range(30):
        assert before.train_step(i) == after.train_step(i)
    for p, q in zip(before.parameters, after.parameters):
        np.testing.assert_array_equal(p.data, q.data)
        np.testing.assert_array_equal(p.grad, q.grad)


def freed_during_backward(module):
    """Bytes of the arrays that backward frees on the standard workload: every
    Variable of one batch's graph but the parameters (which the model holds)."""
    workload = Workload(module)
    parameters = {id(p) for p in workload.parameters}
    loss = workload.loss(0)  # held while we look
    return sum(v.data.nbytes for v in watch(loss).alive()
               if hasattr(v, "creator") and id(v) not in parameters)


@pytest.mark.parametrize("stage", FREEING)
def test_step_timeline_holds_less_than_stage05(stage):
    before = record_step_timeline(load("step05_no_grad"))
    after = record_step_timeline(load(stage))
    freed = freed_during_backward(load(stage))
    assert freed > 400 * 1024  # the activations of a batch: x, 2 x 3 hidden, output, target
    assert after.after_backward <= before.after_backward - freed
    assert after.backward_peak < before.backward_peak
    # Op by op: from the third op of backward on, stage 06 holds less at every sample.
    b05 = [e.traced for e in before.events if e.phase == "backward"]
    b06 = [e.traced for e in after.events if e.phase == "backward"]
    assert len(b05) == len(b06)
    assert all(late < early for early, late in zip(b05[3:], b06[3:]))


def test_retain_graph_true_gives_back_the_stage05_timeline():
    """The saving comes from freeing during backward, nothing else."""
    kept = record_step_timeline(load("step06_free_graph"), retain_graph=True)
    freed = record_step_timeline(load("step06_free_graph"))
    assert freed.after_backward < kept.after_backward - 400 * 1024
