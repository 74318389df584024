"""dezero_mini.planning: stage 09's planner on dezero_mini's own Functions.

Each kernel gives its Function's forward bits (float32 and float64), a
model's planned forward gives ``model(x)``'s bits under ``no_grad()``, each
planned backward (Add, Sub, Mul, Sum, softmax cross-entropy, a model's
training step) gives eager backward's bits, the plan passes the course's
instruments (``dezero_mini.memory.plans``: no block between unordered
nodes, none written over while still read, between the lower bound and the
naive total), the run allocates nothing but what the plan said, and tracing
leaves ``Function.__call__`` as it found it.
"""
import tracemalloc

import numpy as np
import pytest

import dezero_mini as dz
from dezero_mini import Function
from dezero_mini.memory.plans import lower_bound, naive_total, unordered_sharing, written_over
from dezero_mini.planning import (KERNELS, Executor, plan_inference, plan_memory, plan_training,
                                  trace)

F = dz.functions
UNARY = {"Neg": dz.neg, "Exp": F.exp, "Tanh": F.tanh, "Sigmoid": F.sigmoid, "ReLU": F.relu}
BINARY = {"Add": dz.add, "Sub": dz.sub, "Mul": dz.mul, "MatMul": F.matmul}


def eager(fn, *arrays):
    with dz.no_grad():
        return fn(*[dz.Variable(a) for a in arrays]).data


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", sorted(KERNELS))
def test_each_kernel_gives_its_functions_bits(name, dtype):
    rng = np.random.RandomState(0)
    x = (rng.randn(6, 4) * 30).astype(dtype)  # the tails too: exp and sigmoid overflow there
    if name in UNARY:
        fn, arrays = UNARY[name], (x,)
    elif name == "Linear":
        W, b = rng.randn(4, 5).astype(dtype), rng.randn(5).astype(dtype)
        fn, arrays = (lambda v: F.linear(v, W, b)), (x,)
    elif name == "MatMul":
        W = rng.randn(4, 5).astype(dtype)
        fn, arrays = (lambda v: F.matmul(v, W)), (x,)
    else:
        fn, arrays = BINARY[name], (x, rng.randn(6, 4).astype(dtype))
    with np.errstate(over="ignore"):
        want = eager(fn, *arrays)
        got = Executor(plan_memory(trace(fn, *arrays)))(*arrays)[0]
    assert got.dtype == want.dtype and np.array_equal(got, want, equal_nan=True)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("activation", [F.relu, F.sigmoid, F.tanh], ids=lambda f: f.__name__)
def test_a_models_planned_forward_gives_its_bits(activation, dtype):
    np.random.seed(0)
    model = dz.models.MLP((64, 64, 64, 10), activation=activation)
    x = np.random.randn(32, 20).astype(dtype)
    want = eager(model, x)
    run = plan_inference(model, x)
    assert np.array_equal(run(x), want)
    x2 = np.random.randn(32, 20).astype(dtype)  # a second batch, the same blocks
    assert np.array_equal(run(x2), eager(model, x2))
    graph, plan = run.graph, run.plan
    assert unordered_sharing(plan) == [] and written_over(plan) == []
    assert lower_bound(graph) <= plan.total <= naive_total(graph)
    # every activation written in place over the Linear before it, and two blocks
    # of 32 x 64 taking turns (the last Linear's 32 x 10 fits in a free one)
    assert [graph.nodes[n].name for n in plan.inplace_nodes] == [activation.__name__] * 3
    assert plan.total == 2 * 32 * 64 * np.dtype(dtype).itemsize


def test_python_numbers_keep_their_weak_dtype():
    fn = lambda v: F.tanh(v * 2.0 + 1.0) - v + F.exp(-v) * v  # noqa: E731
    x = np.random.RandomState(1).randn(4, 3).astype(np.float32)
    run = plan_inference(fn, x)
    assert run(x).dtype == np.float32 and np.array_equal(run(x), eager(fn, x))


def test_a_run_allocates_only_what_the_plan_says():
    np.random.seed(0)
    model = dz.models.MLP((256, 256, 10), activation=F.relu)
    x = np.random.randn(128, 64).astype(np.float32)
    eager(model, x)  # the weights are made at the first call
    tracemalloc.start()
    try:
        start = tracemalloc.get_traced_memory()[0]
        run = plan_inference(model, x)
        made = tracemalloc.get_traced_memory()[0] - start
        run(x)
        tracemalloc.reset_peak()
        before = tracemalloc.get_traced_memory()[0]
        run(x)
        peak = tracemalloc.get_traced_memory()[1] - before
    finally:
        tracemalloc.stop()
    assert run.plan.total == 2 * 128 * 256 * 4  # two activations: in place, then shared
    assert run.plan.total <= made < run.plan.total + 64 * 1024
    # numpy's own scratch only: a ufunc that broadcasts (the bias add) iterates
    # through a buffer of np.getbufsize() elements
    assert peak < np.getbufsize() * 4 + 4 * 1024


def test_tracing_puts_function_call_back_even_after_an_error():
    original = Function.__call__
    with pytest.raises(TypeError, match=r"plan: Div has no kernel in dezero_mini\.planning"):
        trace(lambda v: v / 2.0, np.ones(3))
    assert Function.__call__ is original
    assert dz.Config.enable_backprop


def test_a_subclass_of_a_builtin_is_not_planned_as_the_builtin():
    class Loud(F.ReLU):
        def forward(self, x):
            return np.maximum(x, 0) * 2

    with pytest.raises(TypeError, match="plan: Loud has no kernel"):
        trace(lambda v: Loud()(v), np.ones(3))


def test_inputs_of_another_shape_or_number_are_errors():
    run = plan_inference(lambda v: F.tanh(v), np.ones((2, 3)))
    with pytest.raises(ValueError, match=r"Executor: an input of shape \(3, 2\)"):
        run(np.ones((3, 2)))
    with pytest.raises(TypeError, match="Executor: 2 arrays given, the graph takes 1; input 2 "
                                        "and after are not inputs of the graph"):
        run.executor(np.ones((2, 3)), np.ones((2, 3)))
    with pytest.raises(TypeError, match=r"Executor: 0 arrays given, the graph takes 1; input 1 "
                                        r"is missing \(traced as an array of shape \(2, 3\) "
                                        r"and dtype float64\)"):
        run.executor()
    with pytest.raises(TypeError, match="Executor: input 1 must be a numpy array or a Variable, "
                                        "got list"):
        run([[1.0] * 3] * 2)


# --- training ---------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("activation", [F.relu, F.sigmoid, F.tanh], ids=lambda f: f.__name__)
def test_a_planned_training_step_gives_backwards_bits_step_after_step(activation, dtype):
    rng = np.random.RandomState(1)
    x, t = rng.randn(16, 12).astype(dtype), rng.randn(16, 8).astype(dtype)
    models = []
    for _ in range(2):  # the same weights: a Linear makes them at its first call
        np.random.seed(0)
        models.append(dz.models.MLP((48, 48, 8), activation=activation))
        eager(models[-1], x)
    planned_model, eager_model = models
    step = plan_training(planned_model, F.mean_squared_error, x, t)
    assert unordered_sharing(step.plan) == [] and written_over(step.plan) == []
    assert lower_bound(step.graph) <= step.plan.total < naive_total(step.graph)
    for _ in range(3):  # SGD in place on both: the plan reads the parameters by reference
        loss, grads = step(x, t)
        eager_model.cleargrads()
        eager_loss = F.mean_squared_error(eager_model(x), t)
        eager_loss.backward()
        assert np.array_equal(loss, eager_loss.data)
        for p, q, g in zip(step.params, eager_model.params(), grads):
            assert np.array_equal(g, q.grad.data)
            p.data -= 0.1 * g
            q.data -= 0.1 * q.grad.data


def test_relu_in_training_runs_in_place():
    """The ReLU's mask is read from its output, so its input dies at the ReLU."""
    np.random.seed(0)
    model = dz.models.MLP((32, 32, 4), activation=F.relu)
    x, t = np.random.randn(8, 6), np.random.randn(8, 4)
    step = plan_training(model, F.mean_squared_error, x, t)
    names = [step.graph.nodes[n].name for n in step.plan.inplace_nodes]
    assert names.count("relu") == 2


def test_a_function_without_a_planned_backward_is_named():
    np.random.seed(0)
    model = dz.models.MLP((8, 3), activation=F.relu)
    x, t = np.random.randn(4, 5), np.random.randn(4, 3)
    with pytest.raises(TypeError, match=r"plan: Neg has no backward in dezero_mini\.planning"):
        plan_training(model, lambda y, t: F.mean_squared_error(-y, t), x, t)


def planned_and_eager(loss, feeds, params):
    """``loss(*Variables of feeds)`` and the gradient of each of ``params``:
    planned (trace, plan_memory, Executor) and eager (backward)."""
    planned = [np.array(a) for a in Executor(plan_memory(trace(loss, *feeds, wrt=params)))(*feeds)]
    for p in params:
        p.cleargrad()
    result = loss(*[dz.Variable(a) for a in feeds])
    result.backward()
    return planned, [result.data] + [p.grad.data for p in params]


#: Expressions of a feed v (6, 4) and parameters a (6, 4) and b (4,) that exercise
#: each backward: broadcasting (b), a number on either side (not one that float32
#: holds exactly: in float64 it would round otherwise), a value read twice.
ARITHMETIC = {
    "Add": lambda v, a, b: F.tanh(v + b) + (a + 0.1) + a,
    "Sub": lambda v, a, b: (v - b) - (0.1 - a) - a,
    "Mul": lambda v, a, b: a * b * a + v * 0.3 * b,
}


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", sorted(ARITHMETIC))
def test_the_backward_of_add_sub_and_mul_gives_eagers_bits(name, dtype):
    rng = np.random.RandomState(2)
    v, t = rng.randn(6, 4).astype(dtype), rng.randn(6, 4).astype(dtype)
    a, b = dz.Variable(rng.randn(6, 4).astype(dtype)), dz.Variable(rng.randn(4).astype(dtype))
    expression = ARITHMETIC[name]
    planned, eager_run = planned_and_eager(
        lambda v, t: F.mean_squared_error(expression(v, a, b), t), (v, t), [a, b])
    assert [g.dtype for g in planned] == [dtype] * 3
    assert [g.shape for g in planned] == [(), (6, 4), (4,)]
    assert all(np.array_equal(p, e) for p, e in zip(planned, eager_run))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("axis, keepdims", [(None, False), (0, False), (1, True), (-1, False),
                                            ((0, 2), False), ((2, 0), True)])
def test_sum_gives_eagers_bits_forward_and_backward(axis, keepdims, dtype):
    rng = np.random.RandomState(5)
    x = rng.randn(7, 8, 9).astype(dtype)  # sums of enough numbers to round differently in float64

    def fn(v):
        return F.sum(v, axis, keepdims)

    got = Executor(plan_memory(trace(fn, x)))(x)[0]
    want = eager(fn, x)
    assert got.dtype == want.dtype and np.array_equal(got, want)
    a = dz.Variable(x)
    w = np.asarray(rng.randn(*want.shape), dtype=dtype)
    planned, eager_run = planned_and_eager(lambda w: F.sum(fn(a) * w), (w,), [a])
    assert [g.shape for g in planned] == [(), (7, 8, 9)]
    assert all(np.array_equal(p, e) for p, e in zip(planned, eager_run))


def _classifier_pair(activation, x):
    """Two MLPs with the same weights (a Linear makes them at its first call)."""
    models = []
    for _ in range(2):
        np.random.seed(0)
        models.append(dz.models.MLP((24, 5), activation=activation))
        eager(models[-1], x)
    return models


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_softmax_cross_entropy_training_gives_eagers_bits_step_after_step(dtype):
    rng = np.random.RandomState(3)
    x, t = (rng.randn(16, 12) * 4).astype(dtype), rng.randint(0, 5, size=16)
    planned_model, eager_model = _classifier_pair(F.tanh, x)
    step = plan_training(planned_model, F.softmax_cross_entropy, x, t)
    assert unordered_sharing(step.plan) == [] and written_over(step.plan) == []
    assert lower_bound(step.graph) <= step.plan.total < naive_total(step.graph)
    for batch in range(3):
        t = rng.randint(0, 5, size=16)  # other labels each time: the plan reads them afresh
        loss, grads = step(x, t)
        eager_model.cleargrads()
        eager_loss = F.softmax_cross_entropy(eager_model(x), t)
        eager_loss.backward()
        assert loss.dtype == dtype and np.array_equal(loss, eager_loss.data)
        for p, q, g in zip(step.params, eager_model.params(), grads):
            assert np.array_equal(g, q.grad.data)
            p.data -= 0.5 * g
            q.data -= 0.5 * q.grad.data


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_softmax_cross_entropy_gives_eagers_bits_in_the_tails(dtype):
    rng = np.random.RandomState(4)
    scores = (rng.randn(8, 6) * 300).astype(dtype)  # exp overflows without the maximum taken out
    t = rng.randint(0, 6, size=(8, 1))  # a column of labels
    s = dz.Variable(scores)
    planned, eager_run = planned_and_eager(lambda t: F.softmax_cross_entropy(s, t), (t,), [s])
    assert all(np.array_equal(p, e) for p, e in zip(planned, eager_run))
    # an infinite score off the label: logsumexp sets the row's maximum to 0, so
    # the loss is inf (taking inf out would give inf - inf, nan)
    scores[2, (t[2, 0] + 1) % 6] = np.inf
    with np.errstate(over="ignore", invalid="ignore"):  # exp(inf), inf - inf
        want = eager(F.softmax_cross_entropy, scores, t)
        got = Executor(plan_memory(trace(F.softmax_cross_entropy, scores, t)))(scores, t)[0]
    assert np.isposinf(want) and got.dtype == want.dtype and np.array_equal(got, want)


def test_labels_out_of_range_are_an_error_in_the_planned_run_too():
    np.random.seed(0)
    model = dz.models.MLP((8, 3), activation=F.relu)
    x, t = np.random.randn(4, 5), np.array([0, 1, 2, 1])
    step = plan_training(model, F.softmax_cross_entropy, x, t)
    with pytest.raises(ValueError, match=r"plan: SoftmaxCrossEntropy: labels t must hold 4 "
                                         r"class indices in \[0, 3\), got 4 from 0 to 3"):
        step(x, np.array([0, 1, 3, 1]))


def test_mixed_dtypes_in_training_are_named():
    a = dz.Variable(np.ones((2, 3), np.float32))
    b = dz.Variable(np.ones(3, np.float64))
    with pytest.raises(TypeError, match="plan: mixed dtypes are not planned: a gradient of "
                                        "float64 for an array of float32"):
        trace(lambda v: F.mean_squared_error(a + b, v), np.ones((2, 3)), wrt=[a, b])
