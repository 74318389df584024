"""Values that would poison training are refused where they enter, in one
sentence that names the function and the value; the values that train keep
working. Optimizer settings (nan, inf, negative, not a number), a weight of
the wrong number of dimensions (``load_weights``, ``W.data = ...``), a
backward that returns more gradients than its Function has inputs, ids
outside an embedding's table, and a weights file whose header promises more
data than it holds (read before the data: a MemoryError before).
"""
import io
import math
import zipfile

import numpy as np
import pytest

import dezero_mini as dz
import dezero_mini.functions as F
import dezero_mini.layers as L
from dezero_mini import optimizers
from dezero_mini.models import MLP

NAN, INF = math.nan, math.inf

# --- Optimizer settings -----------------------------------------------------------------
#: (make the optimizer or hook, the setting, a bad value, the error)
BAD_SETTINGS = [
    (lambda v: optimizers.SGD(lr=v), "lr", NAN, ValueError),
    (lambda v: optimizers.SGD(lr=v), "lr", INF, ValueError),
    (lambda v: optimizers.SGD(lr=v), "lr", -0.1, ValueError),
    (lambda v: optimizers.SGD(lr=v), "lr", "0.1", TypeError),
    (lambda v: optimizers.SGD(lr=v), "lr", None, TypeError),
    (lambda v: optimizers.MomentumSGD(lr=v), "lr", NAN, ValueError),
    (lambda v: optimizers.MomentumSGD(momentum=v), "momentum", NAN, ValueError),
    (lambda v: optimizers.MomentumSGD(momentum=v), "momentum", 1.5, ValueError),
    (lambda v: optimizers.AdaGrad(lr=v), "lr", -INF, ValueError),
    (lambda v: optimizers.AdaGrad(eps=v), "eps", NAN, ValueError),
    (lambda v: optimizers.Adam(alpha=v), "alpha", NAN, ValueError),
    (lambda v: optimizers.Adam(alpha=v), "alpha", np.float32(INF), ValueError),
    (lambda v: optimizers.Adam(beta1=v), "beta1", 1.0, ValueError),
    (lambda v: optimizers.Adam(beta2=v), "beta2", NAN, ValueError),
    (lambda v: optimizers.Adam(eps=v), "eps", [1e-8], TypeError),
    (lambda v: optimizers.RMSProp(lr=v), "lr", NAN, ValueError),
    (lambda v: optimizers.RMSProp(rho=v), "rho", -1, ValueError),
    (lambda v: optimizers.AdaDelta(rho=v), "rho", NAN, ValueError),
    (lambda v: optimizers.WeightDecay(v), "rate", NAN, ValueError),
    (lambda v: optimizers.WeightDecay(v), "rate", INF, ValueError),
    (lambda v: optimizers.ClipGrad(v), "max_norm", NAN, ValueError),
    (lambda v: optimizers.SGD(lr=v), "lr", True, TypeError),
]


@pytest.mark.parametrize("make, setting, value, error", BAD_SETTINGS,
                         ids=[f"{i}-{s}={v!r}" for i, (_, s, v, _) in enumerate(BAD_SETTINGS)])
def test_a_setting_that_poisons_training_is_refused_when_made(make, setting, value, error):
    with pytest.raises(error, match=rf"{setting} must be .*got"):
        make(value)


@pytest.mark.parametrize("make, setting, value, error", BAD_SETTINGS,
                         ids=[f"{i}-{s}={v!r}" for i, (_, s, v, _) in enumerate(BAD_SETTINGS)])
def test_a_setting_that_poisons_training_is_refused_when_changed(make, setting, value, error):
    """``optimizer.lr = ...`` (a schedule) is checked as the constructor is."""
    made = make(0.5)
    with pytest.raises(error, match=setting):
        setattr(made, setting, value)


@pytest.mark.parametrize("make", [
    lambda: optimizers.SGD(lr=0), lambda: optimizers.SGD(lr=1), lambda: optimizers.SGD(np.float32(0.1)),
    lambda: optimizers.MomentumSGD(momentum=0), lambda: optimizers.Adam(alpha=0.01, beta1=0),
    lambda: optimizers.WeightDecay(0), lambda: optimizers.ClipGrad(5)])
def test_the_settings_that_train_still_train(make):
    model = MLP((4, 1))
    made = make()
    optimizer = made if isinstance(made, optimizers.Optimizer) else optimizers.SGD(0.1)
    optimizer.setup(model)
    if not isinstance(made, optimizers.Optimizer):
        optimizer.add_hook(made)
    x, t = np.random.default_rng(0).random((8, 2)), np.zeros((8, 1))
    loss = F.mean_squared_error(model(x), t)
    loss.backward()
    optimizer.update()
    assert all(np.isfinite(p.data).all() for p in model.params())


# --- Weights of the wrong number of dimensions -------------------------------------------
def _weights_file(tmp_path, arrays):
    path = tmp_path / "w.npz"
    np.savez(path, **arrays)
    return path


MLP_ARRAYS = {"l0/W": np.zeros((2, 3), "f4"), "l0/b": np.zeros(3, "f4"),
              "l1/W": np.zeros((3, 1), "f4"), "l1/b": np.zeros(1, "f4")}
WRONG_DIMENSIONS = [
    ("l0/W", np.zeros(6, "f4")),  # the case: 1-D where Linear wants 2-D
    ("l0/W", np.zeros((2, 3, 1), "f4")),
    ("l0/b", np.zeros((1, 3), "f4")),
    ("l1/W", np.zeros(3, "f4")),
]


@pytest.mark.parametrize("key, array", WRONG_DIMENSIONS, ids=[f"{k}{a.shape}" for k, a in WRONG_DIMENSIONS])
def test_a_lazy_layer_refuses_a_weight_of_other_dimensions(tmp_path, key, array):
    path = _weights_file(tmp_path, {**MLP_ARRAYS, key: array})
    model = MLP((3, 1))  # lazy: no weight has data before the first call
    with pytest.raises(ValueError, match=rf"load_weights: parameter '{key}' has (\d dimensions|shape)"):
        model.load_weights(path)
    assert all(p.data is None for name, p in model._named_params().items() if name.endswith("W"))


def test_a_lazy_layer_loads_weights_of_the_right_dimensions(tmp_path):
    model = MLP((3, 1))
    model.load_weights(_weights_file(tmp_path, MLP_ARRAYS))
    assert model(np.zeros((5, 2))).shape == (5, 1)


@pytest.mark.parametrize("make, name, array", [
    (lambda: L.Linear(3), "W", np.zeros(6)),
    (lambda: L.Linear(3, in_size=2), "W", np.zeros(6)),
    (lambda: L.Linear(3), "b", np.zeros((1, 3))),
    (lambda: L.EmbedID(4, 2), "W", np.zeros(8)),
    (lambda: L.Conv2d(2, 3), "W", np.zeros((2, 3, 3))),
    (lambda: L.BatchNorm(), "gamma", np.ones((1, 3))),
], ids=["lazy Linear.W", "Linear.W", "Linear.b", "EmbedID.W", "Conv2d.W", "BatchNorm.gamma"])
def test_setting_a_parameter_to_other_dimensions_is_refused(make, name, array):
    layer = make()
    with pytest.raises(ValueError, match=f"Parameter '{name}': its data must have"):
        getattr(layer, name).data = array


def test_a_parameter_without_a_declared_shape_takes_any_data():
    p = dz.Parameter(np.zeros(3))
    p.data = np.zeros((2, 2))  # DeZero's own Parameter: any array
    assert p.shape == (2, 2)


# --- A weights file whose header promises more than it holds -----------------------------
def _npy(shape, data=b""):
    buffer = io.BytesIO()
    np.lib.format.write_array_header_1_0(
        buffer, {"descr": "<f4", "fortran_order": False, "shape": shape})
    return buffer.getvalue() + data


@pytest.mark.parametrize("shape", [(10**6, 10**6), (2**31, 3), (3, 2**40)])
@pytest.mark.parametrize("lazy", [True, False], ids=["lazy", "built"])
def test_a_header_that_promises_too_much_is_refused_before_its_data(tmp_path, shape, lazy):
    path = tmp_path / "bomb.npz"
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("l0/W.npy", _npy(shape, b"\0" * 24))
        for key in ("l0/b", "l1/W", "l1/b"):
            archive.writestr(f"{key}.npy", _npy(MLP_ARRAYS[key].shape,
                                                MLP_ARRAYS[key].tobytes()))
    model = MLP((3, 1))
    if not lazy:
        model(np.zeros((1, 2), "f4"))
    with pytest.raises(ValueError, match="bomb.npz"):
        model.load_weights(path)


# --- A backward that returns more gradients than inputs ----------------------------------
class Returns(dz.Function):
    def __init__(self, count):
        self.count = count

    def forward(self, *xs):
        return sum(xs)

    def backward(self, gy):
        return tuple(gy for _ in range(self.count)) if self.count != 1 else gy


@pytest.mark.parametrize("inputs, returned", [(1, 2), (1, 3), (2, 3)])
def test_a_backward_with_more_gradients_than_inputs_is_named(inputs, returned):
    xs = [dz.Variable(np.ones(2)) for _ in range(inputs)]
    y = Returns(returned)(*xs)
    with pytest.raises(ValueError, match=rf"Returns.backward returned {returned} gradients, "
                                         rf"but Returns has {inputs} input"):
        y.backward()


@pytest.mark.parametrize("inputs, returned", [(1, 1), (2, 2), (2, 1)])
def test_a_backward_with_as_many_or_fewer_gradients_runs_as_in_dezero(inputs, returned):
    xs = [dz.Variable(np.ones(2)) for _ in range(inputs)]
    Returns(returned)(*xs).backward()
    assert xs[0].grad is not None


# --- Ids outside an embedding's table ---------------------------------------------------------
@pytest.mark.parametrize("ids, error", [
    (np.array([0, -1]), IndexError), (np.array([4]), IndexError), (np.array([[1, 2], [3, 99]]), IndexError),
    (np.array([0.0, 1.0]), TypeError), (np.array([True, False, True, False]), TypeError),
], ids=["-1", "vocab", "2-D, too large", "floats", "bools"])
def test_ids_outside_the_table_are_refused(ids, error):
    with pytest.raises(error, match="embed_id"):
        F.embed_id(ids, dz.Variable(np.zeros((4, 2))))
    with pytest.raises(error, match="embed_id"):
        L.EmbedID(4, 2)(ids)


def test_ids_inside_the_table_are_looked_up():
    W = dz.Variable(np.arange(8.0).reshape(4, 2))
    y = F.embed_id(np.array([[0, 3], [3, 1]]), W)
    assert y.shape == (2, 2, 2) and y.data[0, 1].tolist() == [6.0, 7.0]
    assert F.embed_id(np.array([], dtype=int), W).shape == (0, 2)
