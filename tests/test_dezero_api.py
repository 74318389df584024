"""DeZero's public API in dezero_mini: each name DeZero has is here with
DeZero's signature, or is a row of docs/differences.md's table "DeZero's API and
dezero_mini" that says why not; and each name added for DeZero does what
DeZero's does (gradient checks for the functions)."""
import inspect
import re
from pathlib import Path

import numpy as np
import pytest

import dezero_mini as dezero
import dezero_mini.functions as F
import dezero_mini.layers as L
from dezero_mini import Variable, cuda, models, optimizers, utils
from dezero_mini.utils import gradient_check

DIFFERENCES = Path(__file__).resolve().parents[1] / "docs" / "differences.md"

# DeZero's signatures (its final release), as written in its source. A name
# whose signature dezero_mini shares is checked to have exactly these
# parameters, in this order, with these defaults; dezero_mini may add
# parameters after them only with defaults (``numerical_grad``'s ``eps``).
DEZERO_SIGNATURES = {
    "functions": {
        "sin": "(x)", "cos": "(x)", "tanh": "(x)", "exp": "(x)", "log": "(x)",
        "reshape": "(x, shape)", "transpose": "(x, axes=None)", "get_item": "(x, slices)",
        "expand_dims": "(x, axis)", "flatten": "(x)",
        "sum": "(x, axis=None, keepdims=False)", "sum_to": "(x, shape)",
        "broadcast_to": "(x, shape)", "average": "(x, axis=None, keepdims=False)",
        "mean": "(x, axis=None, keepdims=False)", "matmul": "(x, W)",
        "linear": "(x, W, b=None)", "linear_simple": "(x, W, b=None)",
        "sigmoid_simple": "(x)", "sigmoid": "(x)", "relu": "(x)",
        "softmax_simple": "(x, axis=1)", "softmax": "(x, axis=1)",
        "log_softmax": "(x, axis=1)", "leaky_relu": "(x, slope=0.2)",
        "mean_squared_error_simple": "(x0, x1)", "mean_squared_error": "(x0, x1)",
        "softmax_cross_entropy_simple": "(x, t)", "softmax_cross_entropy": "(x, t)",
        "sigmoid_cross_entropy": "(x, t)", "binary_cross_entropy": "(p, t)",
        "accuracy": "(y, t)", "dropout": "(x, dropout_ratio=0.5)",
        "batch_nrom": "(x, gamma, beta, mean, var, decay=0.9, eps=2e-5)",
        "batch_norm": "(x, gamma, beta, mean, var, decay=0.9, eps=2e-5)",
        "embed_id": "(x, W)", "max": "(x, axis=None, keepdims=False)",
        "min": "(x, axis=None, keepdims=False)", "clip": "(x, x_min, x_max)",
        "add": "(x0, x1)", "sub": "(x0, x1)", "rsub": "(x0, x1)", "mul": "(x0, x1)",
        "div": "(x0, x1)", "neg": "(x)", "pow": "(x, c)",
        "conv2d": "(x, W, b=None, stride=1, pad=0)",
        "deconv2d": "(x, W, b=None, stride=1, pad=0, outsize=None)",
        "conv2d_simple": "(x, W, b=None, stride=1, pad=0)",
        "im2col": "(x, kernel_size, stride=1, pad=0, to_matrix=True)",
        "col2im": "(x, input_shape, kernel_size, stride=1, pad=0, to_matrix=True)",
        "pooling": "(x, kernel_size, stride=1, pad=0)",
        "pooling_simple": "(x, kernel_size, stride=1, pad=0)",
        "average_pooling": "(x, kernel_size, stride=1, pad=0)",
    },
    "layers": {
        "Layer": "()", "Linear": "(out_size, nobias=False, dtype=np.float32, in_size=None)",
        "RNN": "(hidden_size, in_size=None)", "LSTM": "(hidden_size, in_size=None)",
        "EmbedID": "(in_size, out_size)", "BatchNorm": "()",
        "Conv2d": "(out_channels, kernel_size, stride=1, pad=0, nobias=False, dtype=np.float32, "
                  "in_channels=None)",
        "Deconv2d": "(out_channels, kernel_size, stride=1, pad=0, nobias=False, dtype=np.float32, "
                    "in_channels=None)",
    },
    "models": {
        "Model": "()", "Sequential": "(*layers)",
        "MLP": "(fc_output_sizes, activation=F.sigmoid)",
    },
    "optimizers": {
        "Optimizer": "()", "SGD": "(lr=0.01)", "MomentumSGD": "(lr=0.01, momentum=0.9)",
        "AdaGrad": "(lr=0.001, eps=1e-8)", "AdaDelta": "(rho=0.95, eps=1e-6)",
        "Adam": "(alpha=0.001, beta1=0.9, beta2=0.999, eps=1e-8)",
        "RMSProp": "(lr=0.001, rho=0.9, eps=1e-8)",
        "WeightDecay": "(rate)", "ClipGrad": "(max_norm)", "FreezeParam": "(*layers)",
    },
    "utils": {
        "get_dot_graph": "(output, verbose=True)",
        "plot_dot_graph": "(output, verbose=True, to_file='graph.png')",
        "sum_to": "(x, shape)", "reshape_sum_backward": "(gy, x_shape, axis, keepdims)",
        "logsumexp": "(x, axis=1)", "max_backward_shape": "(x, axis)",
        "gradient_check": "(f, x, *args, rtol=1e-4, atol=1e-5, **kwargs)",
        "numerical_grad": "(f, x, *args, **kwargs)", "array_equal": "(a, b)",
        "array_allclose": "(a, b, rtol=1e-4, atol=1e-5)", "get_file": "(url, file_name=None)",
        "pair": "(x)", "get_conv_outsize": "(input_size, kernel_size, stride, pad)",
        "get_deconv_outsize": "(size, k, s, p)",
    },
    "datasets": {
        "Dataset": "(train=True, transform=None, target_transform=None)",
        "get_spiral": "(train=True)", "Spiral": "(train=True, transform=None, target_transform=None)",
        "MNIST": "(train=True, transform=MNIST_TRANSFORM, target_transform=None)",
        "SinCurve": "(train=True, transform=None, target_transform=None)",
    },
    "transforms": {
        "Compose": "(transforms=[])", "Normalize": "(mean=0, std=1)", "Flatten": "()",
        "AsType": "(dtype=np.float32)", "ToFloat": "(dtype=np.float32)", "ToInt": "(dtype=int)",
    },
    "dataloaders": {
        "DataLoader": "(dataset, batch_size, shuffle=True, gpu=False)",
        "SeqDataLoader": "(dataset, batch_size, gpu=False)",
    },
    "cuda": {"get_array_module": "(x)", "as_numpy": "(x)", "as_cupy": "(x)"},
    "core": {
        "Variable": "(data, name=None)", "Parameter": "(data, name=None)", "Function": "()",
        "using_config": "(name, value)", "no_grad": "()", "test_mode": "()",
        "as_variable": "(obj)", "as_array": "(x, array_module=np)", "setup_variable": "()",
        "add": "(x0, x1)", "mul": "(x0, x1)", "neg": "(x)", "sub": "(x0, x1)",
        "rsub": "(x0, x1)", "div": "(x0, x1)", "rdiv": "(x0, x1)", "pow": "(x, c)",
    },
    "core_simple": {
        "Variable": "(data, name=None)", "Function": "()", "using_config": "(name, value)",
        "no_grad": "()", "as_variable": "(obj)", "as_array": "(x, array_module=np)",
        "setup_variable": "()", "add": "(x0, x1)", "mul": "(x0, x1)", "neg": "(x)",
        "sub": "(x0, x1)", "rsub": "(x0, x1)", "div": "(x0, x1)", "rdiv": "(x0, x1)",
        "pow": "(x, c)",
    },
}

# DeZero's names that dezero_mini leaves out; each is a row of the table in docs/differences.md.
NOT_INCLUDED = {
    "models": ["VGG16", "ResNet", "SqueezeNet"],
    "utils": ["show_progress", "cache_dir"],
    "datasets": ["BigData", "CIFAR10", "ImageNet", "Shakespear", "load_cache_npz",
                 "save_cache_npz"],
    "transforms": ["Convert", "Resize", "CenterCrop", "ToArray", "ToPIL",
                   "RandomHorizontalFlip"],
}

MODULES = {
    "functions": F, "layers": L, "models": models, "optimizers": optimizers, "utils": utils,
    "datasets": dezero.datasets, "transforms": dezero.transforms,
    "dataloaders": dezero.dataloaders, "cuda": cuda, "core": dezero.core,
    "core_simple": __import__("dezero_mini.core_simple", fromlist=["x"]),
}


def _dezero_signature(text):
    namespace = {"np": np, "F": F, "MNIST_TRANSFORM": object()}
    exec(f"def f{text}: pass", namespace)  # noqa: S102  (the strings above, nothing else)
    return inspect.signature(namespace["f"])


def _same_default(ours, theirs):
    if isinstance(theirs, list) and isinstance(ours, (list, tuple)):
        return list(ours) == theirs  # transforms=[] (DeZero) and () (a default that cannot change)
    return ours is theirs or ours == theirs


CASES = [(module, name, text) for module, names in DEZERO_SIGNATURES.items()
         for name, text in names.items()]


@pytest.mark.parametrize("module,name,text", CASES, ids=[f"{m}.{n}" for m, n, _ in CASES])
def test_dezero_name_exists_with_dezeros_signature(module, name, text):
    obj = getattr(MODULES[module], name, None)
    assert obj is not None, f"dezero_mini.{module} has no {name}"
    theirs = list(_dezero_signature(text).parameters.values())
    ours = list(inspect.signature(obj).parameters.values())
    # A keyword-only addition (``numerical_grad``'s eps) goes anywhere, with a default.
    added = [p for p in ours if p.kind == p.KEYWORD_ONLY and p.name not in {t.name for t in theirs}]
    assert all(p.default is not p.empty for p in added), (module, name, added)
    ours = [p for p in ours if p not in added]
    assert [p.name for p in ours[:len(theirs)]] == [p.name for p in theirs], (module, name)
    for mine, their in zip(ours, theirs):
        assert mine.kind == their.kind, (module, name, mine.name)
        if their.default is not inspect.Parameter.empty and name != "MNIST":
            assert _same_default(mine.default, their.default), (module, name, mine.name)
    for extra in ours[len(theirs):]:  # an addition must not change how DeZero code calls it
        assert extra.default is not inspect.Parameter.empty or extra.kind in (
            inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD), (module, name, extra)


def _readme_section():
    text = DIFFERENCES.read_text(encoding="utf-8")
    match = re.search(r"^## DeZero's API and dezero_mini\n(.*?)(?=^## |\Z)", text, re.M | re.S)
    assert match, "docs/differences.md has no section \"DeZero's API and dezero_mini\""
    return match.group(1)


@pytest.mark.parametrize("module,name", [(m, n) for m, names in NOT_INCLUDED.items() for n in names])
def test_each_name_left_out_is_absent_and_a_row_of_the_readme_table(module, name):
    assert not hasattr(MODULES[module], name), f"{module}.{name} exists: move it to DEZERO_SIGNATURES"
    rows = [line for line in _readme_section().splitlines() if line.startswith("|")]
    assert any(f"`{name}" in row or f".{name}`" in row or f", {name}" in row
               or f"{name}," in row for row in rows), f"no row in docs/differences.md for {module}.{name}"


def test_readme_table_says_what_why_for_every_row():
    rows = [line for line in _readme_section().splitlines() if line.startswith("| ")]
    header, body = rows[0], rows[1:]
    assert [c.strip() for c in header.strip("|").split("|")] == [
        "name", "DeZero", "dezero_mini", "why"]
    assert len(body) >= 15
    for row in body:
        cells = [c.strip() for c in row.strip().strip("|").split("|")]
        assert len(cells) == 4 and all(cells), row


# --- The "simple" functions -----------------------------------------------------------
def test_softmax_simple_matches_softmax_and_its_gradient():
    x = np.random.RandomState(0).randn(4, 5)
    np.testing.assert_allclose(F.softmax_simple(x).data, F.softmax(x).data, rtol=1e-12)
    np.testing.assert_allclose(F.softmax_simple(x, axis=0).data, F.softmax(x, axis=0).data)
    w = np.random.RandomState(1).randn(4, 5)  # a weighted sum: softmax's rows sum to 1
    assert gradient_check(lambda v: F.softmax_simple(v) * w, x)
    assert gradient_check(lambda v: F.softmax_simple(v, axis=0) * w, x)


def test_softmax_simple_does_not_overflow_on_large_scores():
    y = F.softmax_simple(np.array([[1000.0, 0.0], [0.0, -1000.0]]))
    np.testing.assert_allclose(y.data, [[1.0, 0.0], [1.0, 0.0]], atol=1e-12)


def test_softmax_cross_entropy_simple_matches_the_one_function_version():
    rng = np.random.RandomState(2)
    x, t = rng.randn(6, 4), np.array([0, 3, 1, 2, 3, 0])
    simple, fused = F.softmax_cross_entropy_simple(x, t), F.softmax_cross_entropy(x, t)
    assert simple.shape == () and np.isclose(simple.data, fused.data, rtol=1e-12)
    assert gradient_check(F.softmax_cross_entropy_simple, x, t)
    xv = Variable(x.copy())
    F.softmax_cross_entropy_simple(xv, Variable(t)).backward()
    xf = Variable(x.copy())
    F.softmax_cross_entropy(xf, t).backward()
    np.testing.assert_allclose(xv.grad.data, xf.grad.data, rtol=1e-10)


def test_softmax_cross_entropy_simple_keeps_float32_and_checks_labels():
    x = np.random.RandomState(3).randn(3, 4).astype(np.float32)
    loss = F.softmax_cross_entropy_simple(x, np.array([1, 2, 3]))
    assert loss.dtype == np.float32
    with pytest.raises(ValueError, match=r"labels t must be in \[0, 4\)"):
        F.softmax_cross_entropy_simple(x, np.array([1, 2, 4]))
    with pytest.raises(TypeError, match="softmax_cross_entropy_simple: labels t must be integers"):
        F.softmax_cross_entropy_simple(x, np.array([1.0, 2.0, 3.0]))


def test_sigmoid_linear_and_mse_simple_match_their_one_function_versions():
    rng = np.random.RandomState(4)
    x, W, b, t = rng.randn(5, 3), rng.randn(3, 2), rng.randn(2), rng.randn(5, 2)
    np.testing.assert_allclose(F.sigmoid_simple(x).data, F.sigmoid(x).data, rtol=1e-12)
    np.testing.assert_allclose(F.linear_simple(x, W, b).data, F.linear(x, W, b).data)
    np.testing.assert_allclose(F.linear_simple(x, W).data, x @ W)
    np.testing.assert_allclose(F.mean_squared_error_simple(x @ W, t).data,
                               F.mean_squared_error(x @ W, t).data)
    assert gradient_check(F.sigmoid_simple, x)
    assert gradient_check(F.linear_simple, x, W, b)
    assert gradient_check(lambda w: F.linear_simple(x, w, b), W)
    assert gradient_check(F.mean_squared_error_simple, x, rng.randn(5, 3))
    with pytest.raises(ValueError, match="mean_squared_error_simple: .* same shape"):
        F.mean_squared_error_simple(x, t)


# --- Binary losses, embeddings, batch normalisation ---------------------------------
def test_sigmoid_and_binary_cross_entropy_values_and_gradients():
    rng = np.random.RandomState(5)
    x, t = rng.randn(6, 1), np.array([0, 1, 1, 0, 1, 0])
    p = 1 / (1 + np.exp(-x.ravel()))
    expected = -np.mean(t * np.log(p) + (1 - t) * np.log(1 - p))
    assert np.isclose(F.sigmoid_cross_entropy(x, t).data, expected)
    assert np.isclose(F.binary_cross_entropy(p.reshape(6, 1), t).data, expected)
    assert gradient_check(F.sigmoid_cross_entropy, x, t)
    assert gradient_check(F.binary_cross_entropy, p.reshape(6, 1) * 0.9 + 0.05, t)
    with pytest.raises(ValueError, match="sigmoid_cross_entropy: 5 targets for 6 predictions"):
        F.sigmoid_cross_entropy(x, t[:5])


def test_embed_id_picks_rows_and_scatters_the_gradient_back():
    W = np.random.RandomState(6).randn(5, 3)
    ids = np.array([1, 3, 1])
    np.testing.assert_array_equal(F.embed_id(ids, W).data, W[ids])
    assert gradient_check(lambda w: F.embed_id(ids, w), W)
    layer = L.EmbedID(5, 3)
    y = layer(ids)
    y.backward()
    np.testing.assert_array_equal(layer.W.grad.data.sum(axis=1), [0, 6, 0, 3, 0])


@pytest.mark.parametrize("shape", [(8, 3), (4, 3, 2, 2)])
def test_batch_norm_normalises_per_channel_and_its_gradient(shape):
    rng = np.random.RandomState(7)
    x = rng.randn(*shape) * 3 + 2
    gamma, beta = rng.rand(3) + 0.5, rng.randn(3)
    mean, var = np.zeros(3), np.ones(3)
    y = F.batch_norm(x, gamma, beta, mean, var).data
    axes = (0,) if len(shape) == 2 else (0, 2, 3)
    channel = (1, 3) if len(shape) == 2 else (1, 3, 1, 1)
    normalised = (y - beta.reshape(channel)) / gamma.reshape(channel)
    np.testing.assert_allclose(normalised.mean(axis=axes), 0, atol=1e-10)
    np.testing.assert_allclose(normalised.var(axis=axes), 1, atol=1e-3)
    assert not np.allclose(mean, 0)  # the running averages moved towards the batch's
    w = rng.randn(*shape)  # a weighted sum: the plain sum's gradient is zero
    assert gradient_check(lambda v: F.batch_norm(v, gamma, beta, mean.copy(), var.copy()) * w, x)
    assert gradient_check(lambda g: F.batch_norm(x, g, beta, mean.copy(), var.copy()) * w, gamma)
    assert gradient_check(lambda b: F.batch_norm(x, gamma, b, mean.copy(), var.copy()) * w, beta)
    with dezero.test_mode():
        assert gradient_check(lambda v: F.batch_norm(v, gamma, beta, mean, var) * w, x)
    assert F.batch_nrom is F.batch_norm


def test_batch_norm_layer_uses_running_averages_in_test_mode():
    np.random.seed(0)
    layer = L.BatchNorm()
    x = np.random.randn(50, 4).astype(np.float32) * 2 + 5
    for _ in range(100):
        layer(x)
    assert layer.avg_mean.data.dtype == np.float32
    np.testing.assert_allclose(layer.avg_mean.data, x.mean(axis=0), rtol=1e-3)
    with dezero.test_mode():
        y = layer(x).data
    np.testing.assert_allclose(y.mean(axis=0), 0, atol=1e-2)
    assert {p.name for p in layer.params()} == {"avg_mean", "avg_var", "gamma", "beta"}


# --- Recurrent layers ---------------------------------------------------------------
def test_rnn_carries_its_state_and_reset_forgets_it():
    np.random.seed(0)
    rnn = L.RNN(4)
    x = np.ones((2, 3))
    h1 = rnn(x)
    h2 = rnn(x)
    assert h1.shape == (2, 4) and not np.allclose(h1.data, h2.data)
    rnn.reset_state()
    np.testing.assert_allclose(rnn(x).data, h1.data)
    loss = F.sum(rnn(x))
    loss.backward()
    assert all(p.grad is not None for p in rnn.params())


def test_rnn_and_lstm_gradients_through_two_steps():
    rng = np.random.RandomState(8)
    xs = rng.randn(2, 3, 2)
    for make in (lambda: L.RNN(3, in_size=2), lambda: L.LSTM(3, in_size=2)):
        np.random.seed(1)
        layer = make()

        def two_steps(x0, layer=layer):
            layer.reset_state()
            layer(x0)
            return layer(xs[1])

        assert gradient_check(two_steps, xs[0])


def test_lstm_shapes_and_unchain_backward_frees_earlier_steps():
    np.random.seed(0)
    lstm = L.LSTM(5)
    x = np.random.randn(2, 3)
    for _ in range(3):
        y = lstm(x)
    assert y.shape == (2, 5) and lstm.c.shape == (2, 5)
    y.unchain_backward()
    # The last step's Function links only to leaves now (the Variables it read
    # that are still alive, unchained); the cell state, alive, is a leaf: the
    # earlier steps are cut off.
    edges = [edge for edge in lstm.h.creator.next_functions if edge is not None]
    assert lstm.h.creator is not None and lstm.c.creator is None
    assert all(index is None and node.creator is None for node, index in edges)


# --- Models and optimizers ------------------------------------------------------------
def test_sequential_applies_layers_and_functions_in_order_and_owns_the_parameters():
    np.random.seed(0)
    model = models.Sequential(L.Linear(4), F.relu, L.Linear(2))
    x = np.random.randn(3, 5)
    y = model(x)
    expected = model.l2(F.relu(model.l0(x)))
    np.testing.assert_allclose(y.data, expected.data)
    assert len(list(model.params())) == 4
    with pytest.raises(TypeError, match="Sequential: item 1 is a int"):
        models.Sequential(L.Linear(2), 3)


def _quadratic_model():
    model = models.Sequential(L.Linear(1, in_size=2))
    return model


@pytest.mark.parametrize("make", [lambda: optimizers.AdaDelta(),
                                  lambda: optimizers.RMSProp(lr=0.01)])
def test_adadelta_and_rmsprop_reduce_a_loss(make):
    np.random.seed(0)
    x = np.random.randn(20, 2)
    t = x @ np.array([[1.5], [-2.0]]) + 0.5
    model = _quadratic_model()
    opt = make().setup(model)
    losses = []
    for _ in range(300):
        loss = F.mean_squared_error(model(x), t)
        model.cleargrads()
        loss.backward()
        opt.update()
        losses.append(float(loss.data))
    assert losses[-1] < 0.5 * losses[0]


def test_freeze_param_keeps_a_layer_as_it_is():
    np.random.seed(0)
    model = models.MLP((3, 1))
    opt = optimizers.SGD(0.1).setup(model)
    opt.add_hook(optimizers.FreezeParam(model.l0))
    loss = F.sum(model(np.random.randn(4, 2)))  # (the first call makes the weights)
    before0, before1 = model.l0.W.data.copy(), model.l1.W.data.copy()
    model.cleargrads()
    loss.backward()
    opt.update()
    np.testing.assert_array_equal(model.l0.W.data, before0)
    assert model.l0.W.grad is None
    assert not np.array_equal(model.l1.W.data, before1)


# --- cuda, utils, transforms ----------------------------------------------------------
def test_cuda_stub_runs_get_array_module_code_on_numpy():
    x = Variable(np.array([1.0, 2.0]))
    assert cuda.get_array_module(x) is np and cuda.get_array_module(x.data) is np
    assert dezero.cuda.gpu_enable is False
    xp = cuda.get_array_module(x)
    np.testing.assert_allclose(xp.exp(x.data), np.exp([1.0, 2.0]))
    assert cuda.as_numpy(x) is x.data
    assert isinstance(cuda.as_numpy(3.0), np.ndarray) and cuda.as_numpy(3.0).shape == ()
    with pytest.raises(RuntimeError, match="as_cupy: dezero_mini runs on the CPU only"):
        cuda.as_cupy(x)
    with pytest.raises(RuntimeError, match="Linear.to_gpu: dezero_mini runs on the CPU only"):
        L.Linear(2).to_gpu()


def test_core_simple_names_are_the_core():
    from dezero_mini import core_simple

    assert core_simple.no_grad is dezero.no_grad and core_simple.Function is dezero.Function
    assert issubclass(core_simple.Variable, Variable)
    assert not hasattr(core_simple.Variable(np.array(1.0)), "__dict__")  # the core's slots only


def test_core_simple_gradients_are_arrays_as_in_dezeros_simple_core():
    """DeZero's simple core keeps gradients as ndarrays; its programs read
    them so (``x.data -= lr * x.grad``). The results of operations are the
    core's Variables, and gradients still add up over two backwards."""
    from dezero_mini.core_simple import Variable as SimpleVariable

    x = SimpleVariable(np.array(3.0))
    y = x ** 2 + x
    assert type(y) is Variable
    y.backward()
    assert type(x.grad) is np.ndarray and x.grad == 7.0
    (x * 2).backward()
    assert type(x.grad) is np.ndarray and x.grad == 9.0  # accumulated, as in DeZero
    x.cleargrad()
    assert x.grad is None
    x.grad = np.array(1.5)  # set by hand, as a program may
    assert type(x.grad) is np.ndarray and x.grad == 1.5


def test_utils_helpers():
    a = Variable(np.array([1.0, 2.0]))
    assert utils.array_equal(a, np.array([1.0, 2.0]))
    assert not utils.array_equal(a, np.array([1.0, 2.5]))
    assert utils.array_allclose(a, np.array([1.0, 2.0 + 1e-6]))
    assert not utils.array_allclose(a, np.array([1.0, 2.1]))
    assert utils.max_backward_shape(np.zeros((2, 3, 4)), 1) == [2, 1, 4]
    assert utils.max_backward_shape(np.zeros((2, 3)), None) == [1, 1]
    assert utils.max_backward_shape(np.zeros((2, 3)), (-1,)) == [2, 1]
    assert utils.pair(3) == (3, 3) and utils.pair((1, 2)) == (1, 2)
    with pytest.raises(ValueError, match="pair: expected an int or a tuple of two ints"):
        utils.pair((1, 2, 3))
    assert utils.get_conv_outsize(28, 3, 1, 1) == 28 and utils.get_conv_outsize(28, 2, 2, 0) == 14
    assert utils.get_deconv_outsize(14, 2, 2, 0) == 28


# utils.array_allclose of two shapes: as DeZero's where the shapes differ only in
# axes of size 1 (its TestSumTo.test_forward1 compares sum_to's (1,) with a 0-d
# sum); a ValueError naming both shapes where NumPy would broadcast into more
# elements than either holds (a shape bug a test would otherwise pass).
ALLCLOSE_SHAPES = [  # (a, b, expected: True, False or "refused")
    (np.array([3.0]), np.array(3.0), True),
    (np.array(3.0), np.array([3.0]), True),
    (np.array([[3.0]]), np.array(3.0 + 1e-7), True),
    (np.array([3.0]), np.array(4.0), False),
    (np.ones((3, 1)), np.ones(3), True),
    (np.ones((1, 3, 1)), np.ones((3,)), True),
    (np.arange(3.0).reshape(3, 1), np.array([0.0, 1.0, 2.5]), False),
    (np.ones((2, 3)), np.ones((2, 3)), True),
    (np.ones(3), np.ones((3, 3)), "refused"),
    (np.ones((2, 3)), np.ones(3), "refused"),
    (np.ones((2, 3)), np.ones((3, 2)), "refused"),  # same count, another order
    (np.ones(1), np.ones((3, 3)), "refused"),
    (np.ones(0), np.ones((0, 3)), "refused"),
    (np.ones((0,)), np.ones((0, 1)), True),
]


@pytest.mark.parametrize("a, b, expected", ALLCLOSE_SHAPES)
def test_array_allclose_compares_shapes_that_differ_in_size_one_axes_and_refuses_broadcasts(
        a, b, expected):
    if expected == "refused":
        with pytest.raises(ValueError, match=r"utils\.array_allclose: shapes .* and .* hold "
                           r"different elements.*broadcast"):
            utils.array_allclose(a, b)
        with pytest.raises(ValueError, match="array_allclose"):
            utils.array_allclose(Variable(b), Variable(a))
    else:
        assert utils.array_allclose(a, b) is expected
        assert utils.array_allclose(Variable(b), a) is expected


def test_utils_get_file_returns_the_cached_path_as_a_string(monkeypatch, tmp_path):
    monkeypatch.setenv("DEZERO_MINI_DATA", str(tmp_path))
    (tmp_path / "data.txt").write_text("x")
    assert utils.get_file("https://example.invalid/data.txt") == str(tmp_path / "data.txt")


def test_normalize_takes_one_value_per_channel_like_dezero():
    from dezero_mini.transforms import Normalize

    image = np.ones((3, 2, 2)) * np.array([1.0, 2.0, 3.0]).reshape(3, 1, 1)
    out = Normalize(mean=[1.0, 2.0, 3.0], std=[1.0, 2.0, 3.0])(image)
    np.testing.assert_allclose(out, 0.0)
    np.testing.assert_allclose(Normalize(0.5, 2.0)(np.array([1.5])), [0.5])


def test_sum_to_refuses_a_shape_that_reduction_cannot_reach():
    # DeZero returns something for sum_to((2, 3) -> (2,)); here it is an error
    # (a row of the table in docs/differences.md).
    with pytest.raises(ValueError):
        F.sum_to(np.ones((2, 3)), (2,))


def test_mnist_show_draws_a_grid_of_digits(tmp_path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from dezero_mini.datasets import MNIST, MNISTSample

    for cls in (MNIST, MNISTSample):
        assert str(inspect.signature(cls.show)) == "(self, row=10, col=10)"
    dataset = object.__new__(MNISTSample)  # the arrays alone, without reading its file
    dataset.data = np.arange(6 * 28 * 28, dtype=np.uint8).reshape(6, 1, 28, 28)
    np.random.seed(0)
    figure = dataset.show(row=2, col=3)
    image = figure.axes[0].images[0].get_array()
    assert image.shape == (56, 84)
    assert figure.axes[0].get_title() == "MNISTSample: 6 digits at random"
    plt.close(figure)


def test_is_simple_core_is_false_as_in_dezero_with_its_full_core():
    """DeZero's programs of steps 28 and 29 read it."""
    assert dezero.is_simple_core is False


# (prediction shape, target shape, allowed?): allowed when broadcasting only
# repeats one of them; refused when it pairs every prediction with every target.
MSE_SHAPES = [
    ((1, 1), (1,), True),  # DeZero's step 59: the RNN's (1, 1) output against a (1,) target
    ((4, 1), (1,), True),  # one target for every prediction
    ((4, 3), (3,), True),  # one target row for every row
    ((1,), (4,), True),  # one prediction for every target
    ((4,), (4, 1), False),  # (4, 4): every prediction against every target
    ((4, 1), (1, 4), False),
    ((4, 1), (4,), False),
    ((2,), (3,), False),  # no broadcast at all
]


@pytest.mark.parametrize("shape0, shape1, allowed", MSE_SHAPES)
@pytest.mark.parametrize("mse", [F.mean_squared_error, F.mean_squared_error_simple])
def test_mean_squared_error_refuses_exactly_the_broadcasts_that_pair_everything(
        mse, shape0, shape1, allowed):
    rng = np.random.RandomState(0)
    x0, x1 = rng.randn(*shape0), rng.randn(*shape1)
    if not allowed:
        with pytest.raises(ValueError, match=f"prediction of shape {re.escape(str(shape0))} and "
                                             f"target of shape {re.escape(str(shape1))}"):
            mse(x0, x1)
        return
    diff = x0 - x1
    np.testing.assert_allclose(mse(x0, x1).data, np.mean(diff**2))
    assert gradient_check(lambda a, b: mse(a, b), x0, x1)


@pytest.mark.parametrize("reset_loss", [True, False], ids=["loss reset", "loss kept as in the book"])
def test_a_book_style_rnn_on_a_sine_curve_trains(reset_loss):
    """A program in the style of DeZero's step 59 (written here, not copied):
    the RNN's (1, 1) output against the curve's (1,) target, truncated
    backpropagation every few steps. It stopped at the shape check before.
    The book does not set ``loss = 0`` after a window: the next window adds
    to the old loss, whose creator the freeing backward let go, so
    ``unchain_backward`` makes that loss a leaf (it raised "Add has already
    let go" at the second window before)."""
    np.random.seed(0)
    train_set = dezero.datasets.SinCurve(train=True)

    class SimpleRNN(dezero.Model):
        def __init__(self, hidden_size, out_size):
            super().__init__()
            self.rnn = L.RNN(hidden_size)
            self.fc = L.Linear(out_size)

        def reset_state(self):
            self.rnn.reset_state()

        def forward(self, x):
            return self.fc(self.rnn(x))

    model = SimpleRNN(10, 1)
    optimizer = optimizers.Adam().setup(model)
    losses = []
    for epoch in range(3):
        model.reset_state()
        loss, count, total = 0, 0, 0.0
        for x, t in [train_set[i] for i in range(60)]:
            y = model(x.reshape(1, 1))
            loss += F.mean_squared_error(y, t)
            count += 1
            if count % 20 == 0:
                model.cleargrads()
                loss.backward()
                loss.unchain_backward()
                optimizer.update()
                total += float(loss.data)
                if reset_loss:
                    loss = 0
        losses.append(total)
    assert np.all(np.isfinite(losses)) and losses[-1] < losses[0], losses


def test_a_book_style_program_that_reads_is_simple_core_runs():
    """In the style of DeZero's steps 28-29 (written here): pick the simple
    core's names when the package says it is not the simple core, then
    minimise Rosenbrock's function by gradient descent."""
    if not dezero.is_simple_core:
        from dezero_mini.core_simple import Variable as SimpleVariable
        from dezero_mini.core_simple import setup_variable
        setup_variable()

    def rosenbrock(x0, x1):
        return 100 * (x1 - x0 ** 2) ** 2 + (x0 - 1) ** 2

    x0, x1 = SimpleVariable(np.array(0.0)), SimpleVariable(np.array(2.0))
    a, b = 0.0, 2.0  # the same descent with the derivatives written out
    for _ in range(1000):
        y = rosenbrock(x0, x1)
        x0.cleargrad()
        x1.cleargrad()
        y.backward()
        x0.data -= 0.001 * x0.grad  # an ndarray, as in DeZero's simple core
        x1.data -= 0.001 * x1.grad
        a, b = a - 0.001 * (-400 * a * (b - a * a) + 2 * (a - 1)), b - 0.001 * 200 * (b - a * a)
    np.testing.assert_allclose([x0.data, x1.data], [a, b], rtol=1e-9)
    assert 0.6 < a < 1 and 0.4 < b < 1  # on its way to the minimum at (1, 1)
