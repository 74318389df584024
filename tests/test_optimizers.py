"""Optimizers and their hooks: the update rules, in-place updates without a
graph, skipped parameters, state that does not outlive its parameter."""
import math

import numpy as np
import pytest

import dezero_mini.functions as F
import dezero_mini.layers as L
from dezero_mini import Layer, Parameter, Variable, optimizers

TARGET = np.array([1.0, -2.0, 0.5])


class Quadratic(Layer):
    """loss = sum((w - TARGET)^2), minimum 0 at w = TARGET; ``unused`` gets no gradient."""

    def __init__(self):
        super().__init__()
        self.w = Parameter(np.array([4.0, 3.0, -3.0]), name="w")
        self.unused = Parameter(np.array([7.0]), name="unused")

    def forward(self):
        return F.sum((self.w - TARGET) ** 2)


def step(model, optimizer):
    loss = model()
    model.cleargrads()
    loss.backward()
    optimizer.update()
    return float(loss.data)


@pytest.mark.parametrize(
    "make",
    [
        lambda: optimizers.SGD(lr=0.1),
        lambda: optimizers.MomentumSGD(lr=0.05, momentum=0.9),
        lambda: optimizers.AdaGrad(lr=0.5),
        lambda: optimizers.Adam(alpha=0.1),
    ],
    ids=["SGD", "MomentumSGD", "AdaGrad", "Adam"],
)
def test_each_optimizer_minimises_a_quadratic(make):
    model = Quadratic()
    optimizer = make().setup(model)
    first = step(model, optimizer)
    for _ in range(300):
        last = step(model, optimizer)
    assert last < 1e-3 * first
    np.testing.assert_allclose(model.w.data, TARGET, atol=0.05)
    np.testing.assert_array_equal(model.unused.data, [7.0])  # no gradient: skipped


def test_the_default_hyperparameters_are_dezeros():
    assert optimizers.SGD().lr == 0.01
    m = optimizers.MomentumSGD()
    assert (m.lr, m.momentum) == (0.01, 0.9)
    a = optimizers.AdaGrad()
    assert (a.lr, a.eps) == (0.001, 1e-8)
    adam = optimizers.Adam()
    assert (adam.alpha, adam.beta1, adam.beta2, adam.eps) == (0.001, 0.9, 0.999, 1e-8)


def _with_grad(values, grad):
    model = Layer()
    model.w = Parameter(np.array(values, dtype=np.float64))
    model.w.grad = Variable(np.array(grad, dtype=np.float64))
    return model


def test_update_rules_step_by_step():
    g = np.array([2.0, -4.0])
    model = _with_grad([1.0, 1.0], g)
    optimizers.SGD(lr=0.1).setup(model).update()
    np.testing.assert_allclose(model.w.data, 1 - 0.1 * g)

    model = _with_grad([1.0, 1.0], g)
    opt = optimizers.MomentumSGD(lr=0.1, momentum=0.5).setup(model)
    opt.update()  # v = -0.1 g
    opt.update()  # v = 0.5 * (-0.1 g) - 0.1 g
    np.testing.assert_allclose(model.w.data, 1 - 0.1 * g - 0.15 * g)

    model = _with_grad([1.0, 1.0], g)
    opt = optimizers.AdaGrad(lr=0.1, eps=0).setup(model)
    opt.update()  # h = g^2: the step is lr * sign(g)
    opt.update()  # h = 2 g^2: lr * sign(g) / sqrt(2)
    np.testing.assert_allclose(model.w.data, 1 - 0.1 * np.sign(g) * (1 + 1 / math.sqrt(2)))


def test_adam_first_step_is_alpha_and_lr_has_the_bias_correction():
    g = np.array([2.0, -4.0])
    model = _with_grad([1.0, 1.0], g)
    adam = optimizers.Adam(alpha=0.01, beta1=0.9, beta2=0.999, eps=0).setup(model)
    adam.update()
    assert adam.t == 1
    np.testing.assert_allclose(model.w.data, 1 - 0.01 * np.sign(g))  # bias-corrected: alpha * sign(g)
    assert adam.lr == pytest.approx(0.01 * math.sqrt(1 - 0.999) / (1 - 0.9))
    adam.update()
    assert adam.lr == pytest.approx(0.01 * math.sqrt(1 - 0.999**2) / (1 - 0.9**2))


def test_updates_are_in_place_and_build_no_graph():
    model = L.Linear(2, in_size=3)
    x = np.ones((4, 3), dtype=np.float32)
    F.sum(model(x)).backward()
    arrays = [p.data for p in model.params()]
    for optimizer in (optimizers.SGD(), optimizers.MomentumSGD(), optimizers.AdaGrad(), optimizers.Adam()):
        optimizer.setup(model).update()
    for p, array in zip(model.params(), arrays):
        assert p.data is array and p.data.dtype == np.float32
        assert p.creator is None


def test_setup_returns_the_optimizer_and_checks_its_target():
    model = Quadratic()
    optimizer = optimizers.SGD()
    assert optimizer.setup(model) is optimizer and optimizer.target is model
    with pytest.raises(TypeError, match="Layer"):
        optimizers.SGD().setup([model.w])
    with pytest.raises(RuntimeError, match="setup"):
        optimizers.SGD().update()


def test_state_belongs_to_live_parameters_only(gc_disabled):
    model = Layer()
    model.l = L.Linear(2, in_size=2)
    optimizer = optimizers.Adam().setup(model)

    def train_step():
        F.sum(model.l(np.ones((1, 2), dtype=np.float32))).backward()
        optimizer.update()
        model.cleargrads()

    train_step()
    assert len(optimizer._state) == 2
    old_W = model.l.W
    model.l = L.Linear(2, in_size=2)  # the old layer and its parameters die
    del old_W
    train_step()
    live = {id(p) for p in model.params()}
    assert set(optimizer._state) == live  # the dead parameters' state was dropped


def test_state_is_not_inherited_through_a_reused_id():
    model = _with_grad([0.0], [1.0])
    optimizer = optimizers.MomentumSGD(lr=1.0, momentum=0.5).setup(model)
    stranger = Parameter(np.zeros(1))
    # As if model.w had the id of a dead parameter whose momentum is still stored:
    optimizer._state[id(model.w)] = (lambda: stranger, {"v": np.array([100.0])})
    optimizer.update()
    np.testing.assert_allclose(model.w.data, [-1.0])  # a fresh v, not 100


# --- Hooks --------------------------------------------------------------------------------
def test_weight_decay_shrinks_the_weights():
    model = _with_grad([2.0, -4.0], [0.0, 0.0])
    optimizer = optimizers.SGD(lr=0.1).setup(model)
    optimizer.add_hook(optimizers.WeightDecay(0.5))
    optimizer.update()
    np.testing.assert_allclose(model.w.data, [2.0 * 0.95, -4.0 * 0.95])


def test_clip_grad_bounds_the_global_norm():
    model = Layer()
    model.a = Parameter(np.zeros(2))
    model.b = Parameter(np.zeros(1))
    model.a.grad = Variable(np.array([3.0, 4.0]))
    model.b.grad = Variable(np.array([12.0]))  # global norm 13
    optimizer = optimizers.SGD(lr=1.0).setup(model)
    optimizer.add_hook(optimizers.ClipGrad(1.3))
    optimizer.update()
    step = np.concatenate([model.a.data, model.b.data])
    assert np.linalg.norm(step) == pytest.approx(1.3, rel=1e-5)
    np.testing.assert_allclose(step, -np.array([3.0, 4.0, 12.0]) / 10, rtol=1e-5)


def test_clip_grad_leaves_small_gradients_alone():
    model = _with_grad([0.0, 0.0], [0.3, 0.4])
    optimizer = optimizers.SGD(lr=1.0).setup(model)
    optimizer.add_hook(optimizers.ClipGrad(1.0))
    optimizer.update()
    np.testing.assert_allclose(model.w.data, [-0.3, -0.4])


def test_hooks_do_not_change_a_gradient_shared_by_two_parameters_twice():
    # backward may give two inputs the same gradient Variable (W + b passes it
    # on unchanged): a hook must change each parameter's gradient once.
    model = Layer()
    model.W = Parameter(np.ones(2))
    model.b = Parameter(np.ones(2))
    model.W.grad = model.b.grad = Variable(np.array([6.0, 8.0]))  # norm 10
    optimizer = optimizers.SGD(lr=1.0).setup(model)
    optimizer.add_hook(optimizers.ClipGrad(5.0 * math.sqrt(2)))  # global norm 10 sqrt(2) -> halve
    optimizer.add_hook(optimizers.WeightDecay(1.0))
    optimizer.update()
    for p in (model.W, model.b):
        np.testing.assert_allclose(p.data, 1 - (np.array([3.0, 4.0]) + 1), rtol=1e-5)


def test_hooks_see_only_parameters_with_a_gradient():
    model = Quadratic()
    seen = []
    optimizer = optimizers.SGD().setup(model)
    optimizer.add_hook(lambda params: seen.append([id(p) for p in params]))
    step(model, optimizer)
    assert seen == [[id(model.w)]]


# --- Updates block by block: the same numbers, a small temporary -----------------------
ALL_OPTIMIZERS = {
    "SGD": lambda: optimizers.SGD(lr=0.1),
    "MomentumSGD": lambda: optimizers.MomentumSGD(lr=0.05),
    "AdaGrad": lambda: optimizers.AdaGrad(lr=0.5),
    "Adam": lambda: optimizers.Adam(alpha=0.1),
    "AdaDelta": lambda: optimizers.AdaDelta(),
    "RMSProp": lambda: optimizers.RMSProp(lr=0.01),
}


class OneWeight(Layer):
    def __init__(self, shape, dtype):
        super().__init__()
        self.W = Parameter(np.random.RandomState(0).randn(*shape).astype(dtype))


def three_updates(optimizer, shape, dtype=np.float32):
    """W after three updates with fixed gradients."""
    model = OneWeight(shape, dtype)
    optimizer.setup(model)
    rng = np.random.RandomState(1)
    for _ in range(3):
        model.W.grad = Variable(rng.randn(*shape).astype(dtype))
        optimizer.update()
    return model.W.data


@pytest.mark.parametrize("name", ALL_OPTIMIZERS)
def test_a_blocked_update_gives_the_numbers_of_a_whole_array_update(name, monkeypatch):
    shape = (300, 517)  # more elements than a block, rows that do not divide evenly
    assert np.prod(shape) > optimizers.BLOCK_ELEMENTS
    blocked = three_updates(ALL_OPTIMIZERS[name](), shape)
    monkeypatch.setattr(optimizers, "BLOCK_ELEMENTS", 10**9)  # one block: the whole array
    whole = three_updates(ALL_OPTIMIZERS[name](), shape)
    np.testing.assert_array_equal(blocked, whole)


@pytest.mark.parametrize("name", ALL_OPTIMIZERS)
def test_an_update_makes_no_temporary_the_size_of_the_weight(name, gc_disabled):
    import tracemalloc

    shape = (1024, 1024)  # 4 MiB of float32
    optimizer = ALL_OPTIMIZERS[name]()
    model = OneWeight(shape, np.float32)
    optimizer.setup(model)
    model.W.grad = Variable(np.ones(shape, np.float32))
    optimizer.update()  # the state arrays (momentum, averages) are made on the first update
    tracemalloc.start()
    optimizer.update()
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    weight_bytes = model.W.data.nbytes
    assert peak < weight_bytes / 4, f"{name}: update peak {peak} B for a {weight_bytes} B weight"


def test_blocks_of_small_and_zero_dimensional_arrays_are_the_arrays():
    for array in (np.zeros(()), np.zeros(5), np.zeros((0, 3))):
        assert [part[0] is array for part in optimizers.blocks(array)] == [True]
