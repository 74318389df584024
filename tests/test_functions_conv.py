"""Convolution and pooling (dezero_mini.functions_conv, also as F.conv2d ...):
values against a plain loop, every Function's gradient checked numerically,
and the layers Conv2d and Deconv2d."""
import gc
import tracemalloc

import numpy as np
import pytest

import dezero_mini.functions as F
import dezero_mini.layers as L
from dezero_mini import Variable
from dezero_mini import functions_conv as C
from dezero_mini.utils import gradient_check

rng = np.random.RandomState(0)
X = rng.randn(2, 3, 5, 6)
W = rng.randn(4, 3, 3, 2)
B = rng.randn(4)
GEOMETRIES = [(1, 0), (2, 1), (1, 2), ((2, 1), (0, 1))]  # (stride, pad)


def loop_conv2d(x, w, b, stride, pad):
    """Convolution by its definition, one output pixel at a time."""
    (sh, sw), (ph, pw) = [(v, v) if isinstance(v, int) else v for v in (stride, pad)]
    padded = np.pad(x, ((0, 0), (0, 0), (ph, ph), (pw, pw)))
    kh, kw = w.shape[2:]
    oh = (padded.shape[2] - kh) // sh + 1
    ow = (padded.shape[3] - kw) // sw + 1
    y = np.empty((len(x), len(w), oh, ow))
    for i in range(oh):
        for j in range(ow):
            window = padded[:, :, i * sh:i * sh + kh, j * sw:j * sw + kw]
            y[:, :, i, j] = np.tensordot(window, w, ((1, 2, 3), (1, 2, 3)))
    return y + b.reshape(1, -1, 1, 1)


@pytest.mark.parametrize("stride,pad", GEOMETRIES)
def test_conv2d_matches_the_definition_and_its_simple_version(stride, pad):
    y = F.conv2d(X, W, B, stride, pad)
    np.testing.assert_allclose(y.data, loop_conv2d(X, W, B, stride, pad), rtol=1e-12)
    np.testing.assert_allclose(F.conv2d_simple(X, W, B, stride, pad).data, y.data, rtol=1e-12)
    np.testing.assert_allclose(F.conv2d(X, W, None, stride, pad).data,
                               loop_conv2d(X, W, np.zeros(4), stride, pad), rtol=1e-12)


@pytest.mark.parametrize("stride,pad", GEOMETRIES)
def test_conv2d_gradients(stride, pad):
    assert gradient_check(lambda x: F.conv2d(x, W, B, stride, pad), X)
    assert gradient_check(lambda w: F.conv2d(X, w, B, stride, pad), W)
    assert gradient_check(lambda b: F.conv2d(X, W, b, stride, pad), B)
    assert gradient_check(lambda x: F.conv2d_simple(x, W, B, stride, pad), X)
    assert gradient_check(lambda w: F.conv2d_simple(X, w, None, stride, pad), W)


@pytest.mark.parametrize("stride,pad", [(1, 0), (2, 1)])
def test_deconv2d_is_the_adjoint_of_conv2d_and_its_gradients(stride, pad):
    y = F.conv2d(X, W, None, stride, pad).data
    g = rng.randn(*y.shape)
    # <conv(x), g> == <x, deconv(g)>: deconv2d is conv2d's transpose.
    back = F.deconv2d(g, W, None, stride, pad, outsize=X.shape[2:]).data
    assert np.isclose((y * g).sum(), (X * back).sum())
    Wd = rng.randn(3, 2, 3, 3)
    bd = rng.randn(2)
    assert gradient_check(lambda x: F.deconv2d(x, Wd, bd, stride, pad), X)
    assert gradient_check(lambda w: F.deconv2d(X, w, bd, stride, pad), Wd)
    assert gradient_check(lambda b: F.deconv2d(X, Wd, b, stride, pad), bd)


def test_conv2d_grad_w_has_its_own_gradient_for_double_backprop():
    gy = rng.randn(*F.conv2d(X, W).shape)
    grad_w = lambda x, gy=gy: C.Conv2dGradW((3, 2), 1, 0)(x, gy)  # noqa: E731
    assert gradient_check(grad_w, X)
    assert gradient_check(lambda g: C.Conv2dGradW((3, 2), 1, 0)(X, g), gy)
    # create_graph: d/dW of (d/dx sum(conv(x, W)^2)) . v, against numbers.
    v = rng.randn(*X.shape)

    def inner(w):
        x = Variable(X.copy())
        loss = F.sum(F.conv2d(x, w) ** 2)
        loss.backward(create_graph=True)
        w.cleargrad()  # only the outer backward's gradient is checked
        gx = x.grad
        x.cleargrad()  # x -> x.grad -> its graph -> x would be a cycle, left for the collector
        return F.sum(gx * v)

    assert gradient_check(inner, W)


@pytest.mark.parametrize("kernel,stride,pad", [(2, 2, 0), (3, 1, 1), ((2, 3), (1, 2), 0)])
def test_pooling_values_and_gradients(kernel, stride, pad):
    y = F.pooling(X, kernel, stride, pad)
    np.testing.assert_allclose(F.pooling_simple(X, kernel, stride, pad).data, y.data)
    kh, kw = (kernel, kernel) if isinstance(kernel, int) else kernel
    sh = stride if isinstance(stride, int) else stride[0]
    sw = stride if isinstance(stride, int) else stride[1]
    padded = np.pad(X, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    assert y.data[1, 2, 1, 0] == padded[1, 2, sh:sh + kh, 0:kw].max()
    average = F.average_pooling(X, kernel, stride, pad)
    assert np.isclose(average.data[0, 1, 0, 1], padded[0, 1, 0:kh, sw:sw + kw].mean())
    assert gradient_check(lambda x: F.pooling(x, kernel, stride, pad), X)
    assert gradient_check(lambda x: F.pooling_simple(x, kernel, stride, pad), X)
    assert gradient_check(lambda x: F.average_pooling(x, kernel, stride, pad), X)


def test_pooling_gradient_functions_have_gradients():
    pool = C.Pooling(2, 2)
    pool(Variable(X))
    gy = rng.randn(2, 3, 2, 3)
    assert gradient_check(lambda g: C.PoolingGrad(pool)(g), gy)
    assert gradient_check(lambda x: C.PoolingWithIndexes(pool)(x), X)
    average = C.AveragePooling(2, 2)
    average(Variable(X))
    assert gradient_check(lambda g: C.AveragePoolingGrad(average)(g), gy)
    assert pool.indexes.dtype == np.int8  # one byte an output kept for backward


def test_im2col_and_col2im_are_each_others_gradient():
    col = F.im2col(X, 3, 2, 1)
    assert col.shape == (2 * 3 * 3, 3 * 3 * 3)
    assert F.im2col(X, 3, 2, 1, to_matrix=False).shape == (2, 3, 3, 3, 3, 3)
    assert gradient_check(lambda x: F.im2col(x, 3, 2, 1), X)
    assert gradient_check(lambda c: F.col2im(c, X.shape, 3, 2, 1), col.data)
    # A pixel inside k windows comes back k times (here with ones).
    ones = F.col2im(np.ones(F.im2col(X, 3, 1, 1).shape), X.shape, 3, 1, 1).data
    assert ones[0, 0, 2, 2] == 9 and ones[0, 0, 0, 0] == 4


def test_conv_errors_name_the_function_and_the_shapes():
    with pytest.raises(ValueError, match=r"conv2d: needs x \(N, C, H, W\) and W .* got \(2, 3, 5, 6\) "
                                         r"and \(4, 2, 3, 3\)"):
        F.conv2d(X, np.ones((4, 2, 3, 3)))
    with pytest.raises(ValueError, match=r"does not fit an image of \(5, 6\)"):
        F.pooling(X, 7)


def test_conv_layers_learn_their_input_size_and_train():
    np.random.seed(0)
    x = np.random.randn(4, 3, 8, 8).astype(np.float32)
    conv, deconv = L.Conv2d(5, 3, pad=1), L.Deconv2d(3, 4, stride=2, pad=1)
    h = conv(x)
    assert h.shape == (4, 5, 8, 8) and h.dtype == np.float32 and conv.W.shape == (5, 3, 3, 3)
    y = deconv(F.relu(h))
    assert y.shape == (4, 3, 16, 16) and deconv.W.shape == (5, 3, 4, 4)
    F.sum(y ** 2).backward()
    assert all(p.grad is not None and p.grad.shape == p.shape
               for p in (*conv.params(), *deconv.params()))
    assert L.Conv2d(2, (3, 2), nobias=True, in_channels=3).W.shape == (2, 3, 3, 2)


# --- Memory: no column array -----------------------------------------------------------
def _traced_peak(run):
    """tracemalloc's peak above the start while ``run()`` runs, the collector off."""
    was_enabled = gc.isenabled()
    gc.disable()
    tracemalloc.start()
    try:
        start = tracemalloc.get_traced_memory()[0]
        run()
        return tracemalloc.get_traced_memory()[1] - start
    finally:
        tracemalloc.stop()
        (gc.enable if was_enabled else gc.disable)()


# A 5x5 kernel, padding 2: a column array would hold every input value 25 times.
MEMORY_X = rng.randn(4, 8, 12, 12)
MEMORY_W = rng.randn(8, 8, 5, 5)
MEMORY_GY = rng.randn(4, 8, 12, 12)
COLUMN_BYTES = 25 * MEMORY_X.nbytes
MEMORY_POOL = C.Pooling(5, 1, 2)
MEMORY_POOL.forward(MEMORY_X)  # its indexes, for the gradient Functions
CONV_COMPUTATIONS = {
    "conv2d": lambda: C.Conv2d(1, 2).forward(MEMORY_X, MEMORY_W),
    "deconv2d": lambda: C.Deconv2d(1, 2).forward(MEMORY_GY, MEMORY_W.transpose(1, 0, 2, 3)),
    "weight gradient": lambda: C.Conv2dGradW((5, 5), 1, 2).forward(MEMORY_X, MEMORY_GY),
    "conv2d forward and backward": lambda: F.sum(F.conv2d(Variable(MEMORY_X),
                                                          Variable(MEMORY_W), pad=2)).backward(),
    "max pooling": lambda: C.Pooling(5, 1, 2).forward(MEMORY_X),
    "max pooling's gradient": lambda: C.PoolingGrad(MEMORY_POOL).forward(MEMORY_GY),
    "max pooling's chosen elements": lambda: C.PoolingWithIndexes(MEMORY_POOL).forward(MEMORY_X),
}


@pytest.mark.parametrize("computation", CONV_COMPUTATIONS.values(), ids=CONV_COMPUTATIONS)
def test_convolutions_and_pooling_make_no_column_array(computation):
    """conv2d, its gradients, deconv2d and max pooling work offset by kernel
    offset (functions_conv._kernel_offsets): their temporaries are a few
    input-sized arrays, never the 25-times-the-input column array that im2col
    makes here."""
    computation()  # warm-up: what is made once (caches) is not counted
    peak = _traced_peak(computation)
    assert peak < COLUMN_BYTES / 3, f"peak {peak} B: a column array is {COLUMN_BYTES} B"


def test_deconv2d_refuses_an_outsize_its_input_does_not_fill():
    with pytest.raises(ValueError, match=r"deconv2d: an output of \(9, 9\) has \(7, 7\) windows"
                                         r".* not one per input pixel \(5, 6\)"):
        F.deconv2d(X, rng.randn(3, 2, 3, 3), outsize=(9, 9))


@pytest.mark.parametrize("window,index,value", [
    ([1.0, 3.0, 3.0, 2.0], 1, 3.0),  # a tie: the first maximum, as argmax
    ([1.0, np.nan, 5.0, np.nan], 1, np.nan),  # a NaN is the largest, the first one
], ids=["tie", "nan"])
def test_pooling_keeps_the_offset_of_the_first_maximum(window, index, value):
    pool = C.Pooling(2, 2)
    y = pool.forward(np.array(window).reshape(1, 1, 2, 2))
    assert pool.indexes.ravel().tolist() == [index]
    np.testing.assert_array_equal(y.ravel(), [value])


# ReLU's backward on a CNN's activations: y, gy and gx are alive together, the
# step's peak (benchmarks/peak_memory.py); a whole mask y > 0 was on top of them.
def _relu_of(x):
    relu = F.ReLU()
    relu(Variable(x))
    return relu


@pytest.mark.parametrize("shape", [(64, 8, 6, 6), (3,), (), (1, 5)])
def test_relu_backward_is_gy_where_y_is_positive(shape):
    x = np.asarray(rng.randn(*shape), dtype=np.float32)
    if x.size > 1:
        x.flat[0] = np.nan
    gy = np.asarray(rng.randn(*shape), dtype=np.float32)
    gx = _relu_of(x).backward(gy)
    np.testing.assert_array_equal(gx, gy * (np.maximum(x, 0) > 0))
    assert gx.dtype == gy.dtype and gx.shape == gy.shape


def test_relu_backward_makes_no_whole_mask():
    x = rng.randn(64, 32, 12, 12).astype(np.float32)
    gy = rng.randn(*x.shape).astype(np.float32)
    relu = _relu_of(x)
    relu.backward(gy)  # warm-up
    peak = _traced_peak(lambda: relu.backward(gy))
    whole_mask = x.size  # bytes: one bool an element
    assert peak < gy.nbytes + whole_mask / 2, f"peak {peak} B, the gradient {gy.nbytes} B"
