"""Convolution and pooling for images of shape (N, C, H, W), DeZero's names:
``conv2d``, ``deconv2d``, ``pooling``, ``average_pooling``, and ``im2col`` /
``col2im`` (also available as ``F.conv2d`` and so on). The book's
compositions ``conv2d_simple`` and ``pooling_simple`` are built on ``im2col``
with ``linear`` and ``max``, in ``dezero_mini.functions`` beside those (so
that this module needs nothing of it, and F can hand these names on).

DeZero's versions rest on one idea, im2col: every window that a kernel visits
is copied out into its own column, so that a convolution becomes one matrix
product. A column array holds each input value up to KH*KW times, so it is
the largest array of a convolution. Memory notes:

* ``conv2d``, ``deconv2d`` and the gradient of conv2d with respect to its
  weight never make a column array at all: they sum, over the KH*KW kernel
  offsets, one matrix product of the input shifted by that offset with that
  offset's slice of the weight (``_kernel_offsets``). The largest
  temporary is then one input-sized copy, not a KH*KW-times-the-input
  column array (for a 3x3 kernel, 9 times less), at the price of KH*KW
  smaller products instead of one big one.
* ``pooling`` makes no column array either (a running maximum over the
  offsets, and its gradient added back offset by offset); it keeps for
  backward only the offset of each maximum (one int8 per output).
* ``conv2d_simple`` and ``pooling_simple`` are compositions, as in DeZero's
  book: their column array is a node of the graph, alive until backward.

Padding adds zeros, for pooling too (as in DeZero).
"""
import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from dezero_mini.arrays import get_conv_outsize, get_deconv_outsize, pair
from dezero_mini.core import Function, _apply


# --- Windows as columns: arrays ----------------------------------------------------
def _images_problem(shape):
    """Why ``shape`` is not that of a batch of images (N, C, H, W); None when it is."""
    if len(shape) != 4:
        return f"needs images x of shape (N, C, H, W), got shape {tuple(shape)}"
    return None


def window_geometry(shape, kernel_size, stride, pad, name=None):
    """``(KH, KW), (SH, SW), (PH, PW), (OH, OW)`` of a kernel on an image of ``shape``.

    name: the function to name in the error, for those that are not a
    Function (a Function's error names it and the shapes already). A 0-d or
    2-D x gave IndexError 'tuple index out of range', naming nothing."""
    head = f"{name}: " if name else ""
    problem = _images_problem(shape)
    if problem is not None:
        raise ValueError(head + problem)
    kernel, stride, pad = pair(kernel_size), pair(stride), pair(pad)
    out = tuple(get_conv_outsize(shape[2 + a], kernel[a], stride[a], pad[a]) for a in (0, 1))
    if min(out) < 1:
        raise ValueError(f"{head}a kernel of {kernel} with padding {pad} does not fit an image "
                         f"of {tuple(shape[2:])}")
    return kernel, stride, pad, out


def im2col_array(img, kernel_size, stride, pad, to_matrix=True):
    """The windows of ``img`` (N, C, H, W) as columns: an array of shape
    (N, C, KH, KW, OH, OW), or, with ``to_matrix``, (N*OH*OW, C*KH*KW) with
    one row per window."""
    (kh, kw), (sh, sw), (ph, pw), (oh, ow) = window_geometry(img.shape, kernel_size, stride, pad)
    padded = np.pad(img, ((0, 0), (0, 0), (ph, ph), (pw, pw)))
    windows = sliding_window_view(padded, (kh, kw), axis=(2, 3))  # a view: nothing copied yet
    windows = windows[:, :, : sh * (oh - 1) + 1 : sh, : sw * (ow - 1) + 1 : sw]  # (N, C, OH, OW, KH, KW)
    if to_matrix:
        return windows.transpose(0, 2, 3, 1, 4, 5).reshape(len(img) * oh * ow, -1)
    return np.ascontiguousarray(windows.transpose(0, 1, 4, 5, 2, 3))


def col2im_array(col, img_shape, kernel_size, stride, pad, to_matrix=True):
    """The inverse of ``im2col_array`` as a gradient: every column value is
    added back to the pixel it was copied from (a pixel in several windows
    gets the sum). Returns an array of ``img_shape`` (N, C, H, W)."""
    n, c, h, w = img_shape
    (kh, kw), (sh, sw), (ph, pw), (oh, ow) = window_geometry(img_shape, kernel_size, stride, pad)
    if to_matrix:
        col = col.reshape(n, oh, ow, c, kh, kw).transpose(0, 3, 4, 5, 1, 2)
    img = np.zeros((n, c, h + 2 * ph, w + 2 * pw), dtype=col.dtype)
    for j in range(kh):  # kernel row j of window (y, x) read padded pixel row j + sh*y
        for i in range(kw):
            img[:, :, j : j + sh * oh : sh, i : i + sw * ow : sw] += col[:, :, j, i]
    return img[:, :, ph : ph + h, pw : pw + w]


# --- Convolution without columns: arrays -------------------------------------------
def _padded(img, ph, pw):
    """``img`` with ``ph`` rows and ``pw`` columns of zeros on each side (no copy without)."""
    if ph == 0 and pw == 0:
        return img
    return np.pad(img, ((0, 0), (0, 0), (ph, ph), (pw, pw)))


def _kernel_offsets(kernel, stride, out):
    """For each kernel offset (i, j): the index of a padded image that gives,
    for every window at once, the pixel that the offset reads in that window
    (a strided view of shape (N, C, OH, OW)). A convolution is the sum over
    the offsets of one small matrix product each, with no column array."""
    (kh, kw), (sh, sw), (oh, ow) = kernel, stride, out
    for i in range(kh):
        for j in range(kw):
            rows = slice(i, i + sh * (oh - 1) + 1, sh)
            cols = slice(j, j + sw * (ow - 1) + 1, sw)
            yield i, j, (slice(None), slice(None), rows, cols)


# --- Windows as columns: Functions -------------------------------------------------
class Im2col(Function):
    __slots__ = ("args", "x_shape")
    saves = ("x_shape",)

    def __init__(self, kernel_size, stride, pad, to_matrix):
        self.args = (kernel_size, stride, pad, to_matrix)

    def forward(self, x):
        self.x_shape = x.shape
        return im2col_array(x, *self.args)

    def backward(self, gy):
        return _apply(Col2im(self.x_shape, *self.args), gy)


class Col2im(Function):
    __slots__ = ("img_shape", "args")
    saves = ()

    def __init__(self, img_shape, kernel_size, stride, pad, to_matrix):
        self.img_shape = img_shape
        self.args = (kernel_size, stride, pad, to_matrix)

    def forward(self, x):
        return col2im_array(x, self.img_shape, *self.args)

    def backward(self, gy):
        return _apply(Im2col(*self.args), gy)


def im2col(x, kernel_size, stride=1, pad=0, to_matrix=True):
    """The windows of ``x`` (N, C, H, W) as columns (see ``im2col_array``),
    differentiable: the gradient of a column goes back to its pixel."""
    return Im2col(kernel_size, stride, pad, to_matrix)(x)


def col2im(x, input_shape, kernel_size, stride=1, pad=0, to_matrix=True):
    """Columns summed back into an image of ``input_shape`` (see ``col2im_array``)."""
    return Col2im(input_shape, kernel_size, stride, pad, to_matrix)(x)


# --- Convolution -----------------------------------------------------------------------
class Conv2d(Function):
    """``y[n, o] = sum over c, windows of x[n, c] * W[o, c] + b[o]``: x (N, C, H, W),
    W (OC, C, KH, KW), b (OC,) or none; y (N, OC, OH, OW)."""

    __slots__ = ("stride", "pad", "x", "W", "has_bias")
    saves = ("x", "W", "has_bias")  # each one's gradient needs the other; the bias's needs neither
    saved_from = {"x": "inputs[0]", "W": "inputs[1]"}

    def __init__(self, stride=1, pad=0):
        self.stride, self.pad = stride, pad

    def forward(self, x, W, b=None):
        self.x, self.W, self.has_bias = x, W, b is not None
        if x.ndim != 4 or W.ndim != 4 or x.shape[1] != W.shape[1]:
            raise ValueError(f"conv2d: needs x (N, C, H, W) and W (OC, C, KH, KW) with the same C, "
                             f"got {x.shape} and {W.shape}")
        kernel, stride, (ph, pw), out = window_geometry(x.shape, W.shape[2:], self.stride, self.pad)
        padded = _padded(x, ph, pw)
        y = np.empty((len(x), len(W), *out), dtype=np.result_type(x, W))
        y_channels_last = y.transpose(0, 2, 3, 1)  # a view: the products come as (N, OH, OW, OC)
        # Each product is used in the statement that makes it, so that it is
        # freed before the next one is made (a name would keep two alive).
        for i, j, window in _kernel_offsets(kernel, stride, out):
            if i == 0 and j == 0:
                y_channels_last[...] = np.tensordot(padded[window], W[:, :, i, j], ((1,), (1,)))
            else:
                y_channels_last += np.tensordot(padded[window], W[:, :, i, j], ((1,), (1,)))
        if b is not None:
            y += b.reshape(1, -1, 1, 1)
        return y

    def backward(self, gy):
        x, W = self.x, self.W
        gx = _apply(Deconv2d(self.stride, self.pad, x.shape[2:]), gy, W)
        gW = _apply(Conv2dGradW(W.shape[2:], self.stride, self.pad), x, gy)
        if not self.has_bias:
            return gx, gW
        return gx, gW, gy.sum(axis=(0, 2, 3))


class Deconv2d(Function):
    """The transposed convolution (the gradient of conv2d with respect to its
    input): x (N, C, H, W), W (C, OC, KH, KW), b (OC,) or none; y (N, OC, OH, OW)
    with OH, OW from ``outsize`` or from ``get_deconv_outsize``."""

    __slots__ = ("stride", "pad", "outsize", "x", "W", "has_bias")
    saves = ("x", "W", "has_bias")
    saved_from = {"x": "inputs[0]", "W": "inputs[1]"}

    def __init__(self, stride=1, pad=0, outsize=None):
        self.stride, self.pad, self.outsize = stride, pad, outsize

    def forward(self, x, W, b=None):
        self.x, self.W, self.has_bias = x, W, b is not None
        if x.ndim != 4 or W.ndim != 4 or x.shape[1] != W.shape[0]:
            raise ValueError(f"deconv2d: needs x (N, C, H, W) and W (C, OC, KH, KW) with the same C, "
                             f"got {x.shape} and {W.shape}")
        (kh, kw), (sh, sw), (ph, pw) = W.shape[2:], pair(self.stride), pair(self.pad)
        if self.outsize is None:
            self.outsize = (get_deconv_outsize(x.shape[2], kh, sh, ph),
                            get_deconv_outsize(x.shape[3], kw, sw, pw))
        n, c, h, w = x.shape
        oh, ow = pair(self.outsize)
        kernel, stride, _, windows = window_geometry((n, W.shape[1], oh, ow), (kh, kw),
                                                     self.stride, self.pad)
        if windows != (h, w):
            raise ValueError(f"deconv2d: an output of {(oh, ow)} has {windows} windows of the "
                             f"kernel, not one per input pixel {(h, w)}; give outsize=None or "
                             f"{(get_deconv_outsize(h, kh, sh, ph), get_deconv_outsize(w, kw, sw, pw))}")
        # Each input pixel's contribution, offset by offset, added to the pixel it reaches.
        padded = np.zeros((n, W.shape[1], oh + 2 * ph, ow + 2 * pw), dtype=np.result_type(x, W))
        pixels = np.ascontiguousarray(x.transpose(0, 2, 3, 1)).reshape(-1, c)  # (N*H*W, C)
        for i, j, window in _kernel_offsets(kernel, stride, windows):
            padded[window] += (pixels @ W[:, :, i, j]).reshape(n, h, w, -1).transpose(0, 3, 1, 2)
        y = padded[:, :, ph : ph + oh, pw : pw + ow]
        if b is not None:
            y += b.reshape(1, -1, 1, 1)
        return y

    def backward(self, gy):
        x, W = self.x, self.W
        gx = _apply(Conv2d(self.stride, self.pad), gy, W)
        gW = _apply(Conv2dGradW(W.shape[2:], self.stride, self.pad), gy, x)
        if not self.has_bias:
            return gx, gW
        return gx, gW, gy.sum(axis=(0, 2, 3))


class Conv2dGradW(Function):
    """The gradient of conv2d with respect to W, from its input ``x`` and its
    output's gradient ``gy``: ``gW[o, c] = sum over n, windows of gy[n, o] * x[n, c]``."""

    __slots__ = ("kernel_size", "stride", "pad", "x", "gy")
    saves = ("x", "gy")
    saved_from = {"x": "inputs[0]", "gy": "inputs[1]"}

    def __init__(self, kernel_size, stride, pad):
        self.kernel_size, self.stride, self.pad = pair(tuple(kernel_size)), stride, pad

    def forward(self, x, gy):
        self.x, self.gy = x, gy
        kernel, stride, (ph, pw), out = window_geometry(x.shape, self.kernel_size, self.stride,
                                                        self.pad)
        padded = _padded(x, ph, pw)
        n, oc, c = len(x), gy.shape[1], x.shape[1]
        gy_by_image = gy.reshape(n, oc, -1)  # a view: gy is not copied
        gW = np.empty((oc, c, *kernel), dtype=np.result_type(x, gy))
        for i, j, window in _kernel_offsets(kernel, stride, out):
            pixels = np.ascontiguousarray(padded[window]).reshape(n, c, -1)
            gW[:, :, i, j] = np.matmul(gy_by_image, pixels.transpose(0, 2, 1)).sum(axis=0)
        return gW

    def backward(self, ggW):
        x, gy = self.x, self.gy
        gx = _apply(Deconv2d(self.stride, self.pad, x.shape[2:]), gy, ggW)
        ggy = _apply(Conv2d(self.stride, self.pad), x, ggW)
        return gx, ggy


def conv2d(x, W, b=None, stride=1, pad=0):
    """2-D convolution (cross-correlation, as in every framework) of x
    (N, C, H, W) with W (OC, C, KH, KW), plus b (OC,); see Conv2d."""
    f = Conv2d(stride, pad)
    return f(x, W) if b is None else f(x, W, b)


def deconv2d(x, W, b=None, stride=1, pad=0, outsize=None):
    """Transposed convolution of x (N, C, H, W) with W (C, OC, KH, KW), plus b (OC,)."""
    f = Deconv2d(stride, pad, outsize)
    return f(x, W) if b is None else f(x, W, b)


# --- Pooling ---------------------------------------------------------------------------
class Pooling(Function):
    """Max pooling: the largest value of each window. Keeps, for backward, only
    which element of each window was the largest (one small integer per output)."""

    __slots__ = ("kernel_size", "stride", "pad", "indexes", "x_shape")
    saves = ("indexes", "x_shape")

    def __init__(self, kernel_size, stride=1, pad=0):
        self.kernel_size, self.stride, self.pad = kernel_size, stride, pad

    def forward(self, x):
        # A running maximum over the kernel offsets (see _kernel_offsets): no
        # column array, and the index kept is the offset of the first maximum,
        # a NaN counting as the largest, as NumPy's argmax says.
        kernel, stride, (ph, pw), out = window_geometry(x.shape, self.kernel_size, self.stride,
                                                        self.pad)
        padded = _padded(x, ph, pw)
        index_type = np.int8 if kernel[0] * kernel[1] <= 127 else np.intp
        y = indexes = None
        for offset, (_, _, window) in enumerate(_kernel_offsets(kernel, stride, out)):
            values = padded[window]
            if y is None:
                y, indexes = values.copy(), np.zeros(values.shape, dtype=index_type)
                continue
            larger = values > y
            larger |= np.isnan(values) & ~np.isnan(y)
            np.copyto(y, values, where=larger)
            np.copyto(indexes, offset, where=larger)
        self.indexes, self.x_shape = indexes, x.shape
        return y

    def backward(self, gy):
        return _apply(PoolingGrad(self), gy)


class PoolingGrad(Function):
    """The gradient of max pooling: each output's gradient goes to the element
    that was its window's maximum (summed where windows overlap)."""

    __slots__ = ("pooling",)
    saves = ()  # (reads the Pooling it is the gradient of)

    def __init__(self, pooling):
        self.pooling = pooling

    def forward(self, gy):
        p = self.pooling
        n, c, h, w = p.x_shape
        kernel, stride, (ph, pw), out = window_geometry(p.x_shape, p.kernel_size, p.stride, p.pad)
        padded = np.zeros((n, c, h + 2 * ph, w + 2 * pw), dtype=gy.dtype)
        for offset, (_, _, window) in enumerate(_kernel_offsets(kernel, stride, out)):
            padded[window] += np.where(p.indexes == offset, gy, 0)
        return padded[:, :, ph : ph + h, pw : pw + w]

    def backward(self, ggx):
        return _apply(PoolingWithIndexes(self.pooling), ggx)


class PoolingWithIndexes(Function):
    """The elements of each window that a Pooling found to be the maximum
    (the gradient of PoolingGrad)."""

    __slots__ = ("pooling",)
    saves = ()  # (reads the Pooling it is the gradient of)

    def __init__(self, pooling):
        self.pooling = pooling

    def forward(self, x):
        p = self.pooling
        kernel, stride, (ph, pw), out = window_geometry(x.shape, p.kernel_size, p.stride, p.pad)
        padded = _padded(x, ph, pw)
        y = np.empty(p.indexes.shape, dtype=x.dtype)
        for offset, (_, _, window) in enumerate(_kernel_offsets(kernel, stride, out)):
            np.copyto(y, padded[window], where=p.indexes == offset)
        return y

    def backward(self, gy):
        return _apply(PoolingGrad(self.pooling), gy)


class AveragePooling(Function):
    """Average pooling: the mean of each window (padding zeros included)."""

    __slots__ = ("kernel_size", "stride", "pad", "x_shape")
    saves = ("x_shape",)

    def __init__(self, kernel_size, stride=1, pad=0):
        self.kernel_size, self.stride, self.pad = kernel_size, stride, pad

    def forward(self, x):
        self.x_shape = x.shape
        col = im2col_array(x, self.kernel_size, self.stride, self.pad, to_matrix=False)
        return col.mean(axis=(2, 3))

    def backward(self, gy):
        return _apply(AveragePoolingGrad(self), gy)


class AveragePoolingGrad(Function):
    """The gradient of average pooling: each output's gradient, divided by
    the window's size, to every element of its window."""

    __slots__ = ("pooling",)
    saves = ()  # (reads the Pooling it is the gradient of)

    def __init__(self, pooling):
        self.pooling = pooling

    def forward(self, gy):
        p = self.pooling
        kh, kw = pair(p.kernel_size)
        n, c, oh, ow = gy.shape
        gcol = np.broadcast_to((gy / (kh * kw))[:, :, None, None], (n, c, kh, kw, oh, ow))
        return col2im_array(gcol, p.x_shape, (kh, kw), p.stride, p.pad, to_matrix=False)

    def backward(self, ggx):
        return _apply(AveragePooling(self.pooling.kernel_size, self.pooling.stride,
                                     self.pooling.pad), ggx)


def pooling(x, kernel_size, stride=1, pad=0):
    """Max pooling of x (N, C, H, W) over windows of ``kernel_size``."""
    return Pooling(kernel_size, stride, pad)(x)


def average_pooling(x, kernel_size, stride=1, pad=0):
    """Average pooling of x (N, C, H, W) over windows of ``kernel_size``."""
    return AveragePooling(kernel_size, stride, pad)(x)
