"""Layers and models: parameters found by attribute, lazy Linear, weak
references to the last call, weights on disk without pickle, and an MLP that
learns the spiral."""
import shutil
import zipfile

import numpy as np
import pytest

import dezero_mini as dezero
import dezero_mini.functions as F
import dezero_mini.layers as L
from dezero_mini import DataLoader, Layer, Model, Parameter, Variable, optimizers, utils
from dezero_mini.datasets import Spiral
from dezero_mini.models import MLP


class Two(Layer):
    def __init__(self):
        super().__init__()
        self.p = Parameter(np.ones(2), name="p")
        self.inner = L.Linear(3, in_size=2)
        self.not_a_param = Variable(np.zeros(1))
        self.number = 4

    def forward(self, x):
        return self.inner(x * self.p)


# --- Layer ---------------------------------------------------------------------------------
def test_params_are_found_by_attribute_recursively():
    layer = Two()
    params = list(layer.params())
    assert [id(p) for p in params] == [id(layer.p), id(layer.inner.W), id(layer.inner.b)]
    assert sorted(layer._named_params()) == ["inner/W", "inner/b", "p"]


def test_reassigning_an_attribute_unregisters_it():
    layer = Two()
    layer.p = None
    del layer.inner
    assert list(layer.params()) == []


def test_a_shared_parameter_is_listed_once():
    layer = Two()
    layer.q = layer.p
    assert sum(p is layer.p for p in layer.params()) == 1


def test_cleargrads_clears_every_parameter():
    layer = Two()
    y = F.sum(layer(np.ones((4, 2))))
    y.backward()
    assert all(p.grad is not None for p in layer.params())
    layer.cleargrads()
    assert all(p.grad is None for p in layer.params())


def test_a_layer_holds_its_last_inputs_and_outputs_weakly(gc_disabled):
    layer = L.Linear(3)
    x = Variable(np.ones((2, 4), dtype=np.float32))
    y = layer(x)
    assert layer.inputs[0]() is x and layer.outputs[0]() is y
    del x, y  # reference counting alone must free them: the layer does not keep the batch
    assert layer.inputs[0]() is None and layer.outputs[0]() is None


def test_a_layer_can_be_called_with_plain_arrays():
    y = L.Linear(2)(np.ones((1, 3), dtype=np.float32))
    assert y.shape == (1, 2)


# --- Linear -------------------------------------------------------------------------------
def test_linear_makes_W_on_first_call_from_the_input_size():
    np.random.seed(0)
    layer = L.Linear(200)
    assert layer.W.data is None and layer.b.data.shape == (200,)
    x = np.random.randn(5, 400).astype(np.float32)
    y = layer(x)
    assert layer.W.shape == (400, 200) and layer.W.dtype == np.float32
    assert layer.in_size == 400
    assert layer.W.data.std() == pytest.approx(np.sqrt(1 / 400), rel=0.05)
    np.testing.assert_allclose(y.data, x @ layer.W.data + layer.b.data, rtol=1e-5)
    W = layer.W.data
    layer(x)
    assert layer.W.data is W  # made once


def test_linear_with_in_size_nobias_and_dtype():
    layer = L.Linear(3, nobias=True, dtype=np.float64, in_size=4)
    assert layer.W.shape == (4, 3) and layer.W.dtype == np.float64
    assert layer.b is None and list(layer.params()) == [layer.W]


def test_linear_gradients_reach_W_and_b():
    layer = L.Linear(3, in_size=2)
    x = np.arange(8, dtype=np.float32).reshape(4, 2)
    F.sum(layer(x)).backward()
    np.testing.assert_allclose(layer.W.grad.data, x.sum(axis=0)[:, None].repeat(3, 1))
    np.testing.assert_allclose(layer.b.grad.data, np.full(3, 4.0))


# --- Weights on disk ----------------------------------------------------------------------
def _mlp_and_input(seed=0):
    np.random.seed(seed)
    model = MLP((5, 3))
    x = np.random.randn(7, 4).astype(np.float32)
    return model, x


def test_save_and_load_weights_round_trip(tmp_path):
    model, x = _mlp_and_input(0)
    expected = model(x).data
    path = tmp_path / "mlp.npz"
    model.save_weights(path)

    with np.load(path, allow_pickle=False) as npz:  # plain arrays, no pickle
        assert sorted(npz.files) == ["l0/W", "l0/b", "l1/W", "l1/b"]
    with zipfile.ZipFile(path) as z:
        assert all(name.endswith(".npy") for name in z.namelist())

    fresh, _ = _mlp_and_input(1)  # other random weights, not yet called (lazy)
    fresh.load_weights(path)
    np.testing.assert_array_equal(fresh(x).data, expected)

    called, _ = _mlp_and_input(2)
    called(x)
    assert not np.array_equal(called(x).data, expected)
    called.load_weights(path)
    np.testing.assert_array_equal(called(x).data, expected)


def test_load_weights_reports_a_missing_key_and_changes_nothing(tmp_path):
    model, x = _mlp_and_input(0)
    model(x)
    path = tmp_path / "w.npz"
    np.savez(path, **{"l0/W": model.l0.W.data, "l0/b": model.l0.b.data})
    other, _ = _mlp_and_input(1)
    other(x)
    before = [p.data.copy() for p in other.params()]
    with pytest.raises(KeyError, match="l1/W"):
        other.load_weights(path)
    for p, old in zip(other.params(), before):
        np.testing.assert_array_equal(p.data, old)


def test_load_weights_reports_a_shape_mismatch_and_changes_nothing(tmp_path):
    model, x = _mlp_and_input(0)
    model(x)
    model.save_weights(tmp_path / "w.npz")
    wider = MLP((6, 3))
    wider(x)
    before = [p.data.copy() for p in wider.params()]
    with pytest.raises(ValueError, match=r"l0/W.*\(4, 6\).*\(4, 5\)"):
        wider.load_weights(tmp_path / "w.npz")
    for p, old in zip(wider.params(), before):
        np.testing.assert_array_equal(p.data, old)


def test_load_weights_refuses_unknown_arrays_and_pickles(tmp_path):
    model, x = _mlp_and_input(0)
    model(x)
    arrays = {k: p.data for k, p in model._named_params().items()}
    np.savez(tmp_path / "extra.npz", extra=np.zeros(1), **arrays)
    with pytest.raises(KeyError, match="extra"):
        model.load_weights(tmp_path / "extra.npz")
    arrays["l0/W"] = np.array([{"a": 1}], dtype=object)  # needs pickle to load
    np.savez(tmp_path / "pickled.npz", **arrays)
    with pytest.raises(ValueError, match="pickle"):
        model.load_weights(tmp_path / "pickled.npz")


def test_save_weights_before_a_lazy_layer_is_initialised_is_a_clear_error(tmp_path):
    with pytest.raises(ValueError, match="l0/W.*forward"):
        MLP((5, 3)).save_weights(tmp_path / "w.npz")
    assert list(tmp_path.iterdir()) == []


# --- Models -------------------------------------------------------------------------------
def test_mlp_layers_and_activation():
    calls = []

    def activation(x):
        calls.append(x.shape)
        return F.tanh(x)

    model = MLP((8, 6, 2), activation=activation)
    assert isinstance(model, Model) and [type(l) for l in model.layers] == [L.Linear] * 3
    y = model(np.ones((3, 5), dtype=np.float32))
    assert y.shape == (3, 2)
    assert calls == [(3, 8), (3, 6)]  # between the layers, not after the last
    assert len(list(model.params())) == 6


def test_mlp_inference_holds_two_activations_at_a_time(gc_disabled):
    """Under no_grad() nothing keeps an activation but the name x: rebinding
    it before the activation function runs lets the layer before go."""
    import tracemalloc

    width, batch = 512, 256
    model = MLP((width, width, width, 10), activation=F.relu)
    # float32 like the weights: a float64 x would make a float64 copy of each W
    x = np.random.RandomState(0).rand(batch, width).astype(np.float32)
    with dezero.no_grad():
        model(x)  # the weights are made by the first call
        tracemalloc.start()
        model(x)
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    activation = batch * width * 4
    assert 2 * activation <= peak < 2.5 * activation, peak / activation


def test_model_plot_draws_the_graph_of_forward(tmp_path, monkeypatch):
    seen = {}

    def fake_plot(y, verbose=True, to_file="graph.png"):
        seen.update(y=y, verbose=verbose, to_file=to_file)

    monkeypatch.setattr(utils, "plot_dot_graph", fake_plot)
    model, x = _mlp_and_input()
    model.plot(x, to_file=str(tmp_path / "m.png"))
    assert seen["y"].shape == (7, 3) and seen["to_file"] == str(tmp_path / "m.png")


@pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz's dot is not installed")
def test_model_plot_writes_a_file(tmp_path):
    model, x = _mlp_and_input()
    model.plot(x, to_file=str(tmp_path / "m.svg"))
    assert (tmp_path / "m.svg").read_text().lstrip().startswith(("<?xml", "<svg"))


def test_the_names_dezero_code_uses():
    assert dezero.Layer is Layer and dezero.Model is Model and dezero.DataLoader is DataLoader
    assert dezero.layers is L and dezero.models.MLP is MLP
    assert dezero.optimizers.SGD and dezero.datasets.Spiral is Spiral


# --- End to end ---------------------------------------------------------------------------
def test_mlp_learns_the_spiral():
    """DeZero's spiral example: MLP((10, 3)), SGD(lr=1.0), batches of 30."""
    np.random.seed(0)
    train = Spiral(train=True)
    loader = DataLoader(train, batch_size=30)
    model = MLP((10, 3))
    optimizer = optimizers.SGD(lr=1.0).setup(model)
    first_losses, last_losses = [], []
    for epoch in range(300):
        for x, t in loader:
            loss = F.softmax_cross_entropy(model(x), t)
            model.cleargrads()
            loss.backward()
            optimizer.update()
            if epoch == 0:
                first_losses.append(float(loss.data))
            if epoch == 299:
                last_losses.append(float(loss.data))
    with dezero.no_grad():
        accuracy = float(F.accuracy(model(train.data), train.label).data)
    assert np.mean(last_losses) < 0.5 * np.mean(first_losses)
    assert accuracy >= 0.95, accuracy
