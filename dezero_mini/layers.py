"""Layers: objects that own Parameters (``import dezero_mini.layers as L``).

A Layer finds its parameters by attribute: assigning a Parameter or another
Layer to an attribute registers it, so ``params()`` walks the whole tree of
sub-layers without any list to keep up to date.

Memory: a Layer remembers the Variables of its last call only through weak
references (``layer.inputs`` / ``layer.outputs``). A model that is kept alive
between batches therefore never keeps the last batch's graph alive with it.
"""
import io
import os
import weakref
import zipfile
import zlib

import numpy as np

from dezero_mini import functions as F
from dezero_mini import atomic
from dezero_mini.atomic import deferred_signals
from dezero_mini.core import Parameter
from dezero_mini.utils import pair
from dezero_mini.validation import whole_number


def _sizes(layer, **sizes):
    """Check the sizes a layer is made with (whole numbers of at least 1; None
    where a size comes from the first call), naming the layer, not the
    Linear layers it is made of."""
    for argument, value in sizes.items():
        if value is not None:
            whole_number(value, layer, argument, at_least=1)


def _random_weights(layer, shape):
    """Standard normal weights of ``shape``; a MemoryError that names the
    layer and the shape when they cannot fit (not NumPy's bare one)."""
    try:
        return np.random.randn(*shape)
    except MemoryError:
        count = int(np.prod(shape, dtype=object))
        raise MemoryError(f"{layer}: weights of shape {tuple(shape)} ({count:,} numbers) do "
                          "not fit in memory; use smaller sizes") from None



def _weak(obj):
    """A weak reference to ``obj``, or a callable that gives None for objects
    that cannot be weakly referenced (Python numbers)."""
    try:
        return weakref.ref(obj)
    except TypeError:
        return lambda: None


class Layer:
    """Base class of every layer and model.

    Subclasses define ``forward(*inputs)``; calling the layer runs it.
    """

    def __init__(self):
        self._params = {}  # attribute names of Parameters and Layers, in order

    def __setattr__(self, name, value):
        if "_params" not in self.__dict__:  # a subclass forgot super().__init__()
            object.__setattr__(self, "_params", {})
        if isinstance(value, (Parameter, Layer)):
            self._params[name] = None
        else:
            self._params.pop(name, None)  # e.g. ``self.b = None`` after a Parameter
        object.__setattr__(self, name, value)

    def __delattr__(self, name):
        self._params.pop(name, None)
        object.__delattr__(self, name)

    def __call__(self, *inputs):
        outputs = self.forward(*inputs)
        if not isinstance(outputs, tuple):
            outputs = (outputs,)
        # Weak: the layer outlives the batch, the batch's graph must not.
        self.inputs = [_weak(x) for x in inputs]
        self.outputs = [_weak(y) for y in outputs]
        return outputs if len(outputs) > 1 else outputs[0]

    def forward(self, *inputs):
        raise NotImplementedError(f"{type(self).__name__}.forward")

    def params(self):
        """Every Parameter of this layer and of its sub-layers (each once)."""
        seen = set()
        for obj in self._walk():
            if id(obj) not in seen:
                seen.add(id(obj))
                yield obj

    def _walk(self):
        for name in self._params:
            obj = self.__dict__[name]
            if isinstance(obj, Layer):
                yield from obj._walk()
            else:
                yield obj

    def cleargrads(self):
        for param in self.params():
            param.cleargrad()

    def to_cpu(self):
        """Parameters always live in NumPy arrays here; kept for DeZero code."""
        return self

    def to_gpu(self):
        """Always raises: dezero_mini runs on the CPU only (see dezero_mini.cuda)."""
        raise RuntimeError(f"{type(self).__name__}.to_gpu: dezero_mini runs on the CPU only "
                           "(NumPy arrays); there is no GPU to move the parameters to")

    # --- Weights on disk ------------------------------------------------------------
    def _flatten_params(self, params_dict, parent_key=""):
        """Fill ``params_dict`` with ``"l1/W" -> Parameter`` entries."""
        for name in self._params:
            obj = self.__dict__[name]
            key = parent_key + "/" + name if parent_key else name
            if isinstance(obj, Layer):
                obj._flatten_params(params_dict, key)
            else:
                params_dict[key] = obj

    def _named_params(self):
        params_dict = {}
        self._flatten_params(params_dict)
        return params_dict

    def save_weights(self, path):
        """Write every parameter to the ``.npz`` file ``path`` under its
        attribute path (``"l1/W"``). Plain arrays only: no pickle. Returns the
        path written: ``path`` itself when it ends in ``.npz`` (in any case,
        ``W.NPZ`` too), else ``path`` with ``.npz`` added, as NumPy and DeZero do.
        The file is replaced only once it is complete: an interrupt leaves the
        old one as it was."""
        arrays = {}
        for key, param in self._named_params().items():
            if param.data is None:
                raise ValueError(
                    f"save_weights: parameter {key!r} has no data yet (a layer with a "
                    "lazy input size is initialised by its first call; run one forward "
                    "pass before saving)"
                )
            arrays[key] = param.data
        target = weights_path(path)
        archive = io.BytesIO()
        with deferred_signals():  # an interrupt inside NumPy's zip writer becomes a ValueError
            np.savez_compressed(archive, **arrays)
        atomic.write_bytes(target, archive.getbuffer())
        return target

    def load_weights(self, path):
        """Set every parameter from the ``.npz`` file ``path`` that
        ``save_weights`` wrote. Nothing changes unless every key is present with
        the shape and the dtype of its parameter (a parameter of a lazy layer not
        yet called takes the shape from the file, and must get floating-point
        values). A file that is not a complete weights file (empty, cut short,
        another format) raises ValueError naming it; pickled data is never loaded."""
        params_dict = self._named_params()
        name = os.fspath(path)

        def fits(key, shape, dtype):  # from the array's header, before its data is read
            param = params_dict[key]
            if param.data is not None and shape != param.data.shape:
                raise ValueError(
                    f"load_weights: parameter {key!r} has shape {param.data.shape}, "
                    f"the file {name!r} has {shape}"
                )
            expected = param.data.dtype if param.data is not None else None
            if expected is not None and dtype != expected:
                raise ValueError(
                    f"load_weights: parameter {key!r} is {expected}, the file "
                    f"{name!r} has {dtype}; save the weights from a model "
                    f"of the same dtype, or convert the file's arrays with astype({expected})"
                )
            if param.ndim_expected not in (None, len(shape)):  # a lazy layer's parameter
                raise ValueError(
                    f"load_weights: parameter {key!r} has {param.ndim_expected} dimensions, "
                    f"the file {name!r} has shape {shape}"
                )
            if expected is None and not np.issubdtype(dtype, np.floating):
                raise ValueError(
                    f"load_weights: parameter {key!r} needs floating-point values, the file "
                    f"{name!r} has {dtype}"
                )

        arrays = read_weights(path, params_dict, type(self).__name__, fits)
        for key, param in params_dict.items():
            param.data = arrays[key]


def weights_path(path):
    """The name ``save_weights`` writes for ``path``: itself when it ends in
    ``.npz`` (any case), else with ``.npz`` added."""
    text = os.fspath(path)
    if text.lower().endswith(".npz"):
        return path
    return text + ".npz"


def read_weights(path, params_dict, owner, fits=None):
    """``{key: array}`` for every key of ``params_dict`` from the ``.npz`` file
    ``path``; KeyError for a missing or an unexpected array, ValueError (naming
    the file) for a file that is not a complete, pickle-free ``.npz``.

    Each array's header (shape, dtype) is read first and given to
    ``fits(key, shape, dtype)``, which raises when it does not fit; so does
    a header that promises more bytes than the archive holds. Only then is
    the data read: a header of a few bytes cannot make this allocate
    gigabytes (a MemoryError instead of an error naming the file)."""
    name = os.fspath(path)
    try:
        with open(path, "rb") as file:
            if not zipfile.is_zipfile(file):
                size = os.fstat(file.fileno()).st_size
                raise ValueError("empty file" if size == 0 else
                                 f"{size} bytes that are not a .npz archive")
            file.seek(0)
            with zipfile.ZipFile(file) as archive:
                members = {member.filename.removesuffix(".npy"): member
                           for member in archive.infolist() if member.filename.endswith(".npy")}
                missing = [k for k in params_dict if k not in members]
                if missing:
                    raise KeyError(
                        f"load_weights: {name!r} has no array for parameter(s) "
                        f"{missing}; it holds {sorted(members)}"
                    )
                unexpected = sorted(set(members) - set(params_dict))
                if unexpected:
                    raise KeyError(
                        f"load_weights: {name!r} holds array(s) {unexpected} that "
                        f"match no parameter of this {owner}; its parameters "
                        f"are {list(params_dict)}"
                    )
                for key in params_dict:
                    shape, dtype = _npy_header(archive, members[key])
                    if fits is not None:
                        fits(key, shape, dtype)
                    _holds_what_it_promises(members[key], shape, dtype)
                return {key: _npy_data(archive, members[key]) for key in params_dict}
    except KeyError:
        raise
    except (ValueError, EOFError, zipfile.BadZipFile, zlib.error) as error:
        if str(error).startswith("load_weights:"):  # fits' own sentence, complete
            raise
        raise ValueError(f"load_weights: {name!r} is not a weights file written by "
                         f"save_weights: {error or type(error).__name__}") from None


def _npy_header(archive, member):
    """``(shape, dtype)`` from the header of the ``.npy`` ``member``; a
    ValueError for an object dtype (pickled data)."""
    fmt = np.lib.format
    with archive.open(member) as stream:
        version = fmt.read_magic(stream)
        read_header = fmt.read_array_header_1_0 if version == (1, 0) else fmt.read_array_header_2_0
        shape, _, dtype = read_header(stream)
    if dtype.hasobject:
        raise ValueError(f"{member.filename} holds Python objects (pickled data), not numbers")
    return shape, dtype


def _holds_what_it_promises(member, shape, dtype):
    """A ValueError when the header of ``member`` promises more data than it holds."""
    promised = int(np.prod(shape, dtype=object)) * dtype.itemsize
    if promised > member.file_size:
        raise ValueError(f"{member.filename} promises {promised:,} bytes of data for shape "
                         f"{shape} but holds {member.file_size:,}")


def _npy_data(archive, member):
    with archive.open(member) as stream:
        return np.lib.format.read_array(stream, allow_pickle=False)


class Linear(Layer):
    """A fully connected layer: ``y = x @ W + b``.

    out_size: the number of outputs.
    nobias: no bias ``b`` when True.
    dtype: the dtype of ``W`` and ``b``.
    in_size: the number of inputs; when None, ``W`` is made by the first call,
        from the shape of its input (``x.shape[1]``).
    """

    def __init__(self, out_size, nobias=False, dtype=np.float32, in_size=None):
        super().__init__()
        whole_number(out_size, "Linear", "out_size", at_least=1)
        if in_size is not None:
            whole_number(in_size, "Linear", "in_size", at_least=1)
        self.in_size = in_size
        self.out_size = out_size
        self.dtype = dtype
        self.W = Parameter(None, name="W", ndim=2)
        if in_size is not None:
            self._init_W()
        self.b = None if nobias else Parameter(np.zeros(out_size, dtype=dtype), name="b", ndim=1)

    def _init_W(self):
        # Scaled so that each output starts with about the variance of one input.
        scale = np.sqrt(1.0 / self.in_size)
        weights = _random_weights("Linear", (self.in_size, self.out_size))
        self.W.data = (weights * scale).astype(self.dtype)

    def forward(self, x):
        if self.W.data is None:
            self.in_size = x.shape[1]
            self._init_W()
        return F.linear(x, self.W, self.b)


# --- Recurrent layers ---------------------------------------------------------------
class RNN(Layer):
    """An Elman recurrent layer: ``h = tanh(x @ Wx + bx + h_prev @ Wh)``.

    hidden_size: the size of the hidden state ``h``.
    in_size: the size of each input; None to take it from the first call.

    Memory: ``self.h`` is the last output, and it keeps the whole graph of
    every earlier step alive (it is an input of the next step). Truncated
    backpropagation through time cuts it after each backward with
    ``loss.unchain_backward()``; ``reset_state()`` forgets it between sequences.
    """

    def __init__(self, hidden_size, in_size=None):
        super().__init__()
        _sizes("RNN", hidden_size=hidden_size, in_size=in_size)
        self.x2h = Linear(hidden_size, in_size=in_size)
        self.h2h = Linear(hidden_size, in_size=hidden_size, nobias=True)
        self.h = None

    def reset_state(self):
        self.h = None

    def forward(self, x):
        if self.h is None:
            h_new = F.tanh(self.x2h(x))
        else:
            h_new = F.tanh(self.x2h(x) + self.h2h(self.h))
        self.h = h_new
        return h_new


class LSTM(Layer):
    """A long short-term memory layer: forget, input and output gates and a
    cell ``c`` that carries information across steps.

    hidden_size: the size of ``h`` and ``c``; in_size: of each input (None:
    from the first call). As with RNN, ``self.h`` and ``self.c`` keep the
    graph of earlier steps alive until ``unchain_backward()`` or ``reset_state()``.
    """

    def __init__(self, hidden_size, in_size=None):
        super().__init__()
        _sizes("LSTM", hidden_size=hidden_size, in_size=in_size)
        size = hidden_size
        self.x2f = Linear(size, in_size=in_size)
        self.x2i = Linear(size, in_size=in_size)
        self.x2o = Linear(size, in_size=in_size)
        self.x2u = Linear(size, in_size=in_size)
        self.h2f = Linear(size, in_size=size, nobias=True)
        self.h2i = Linear(size, in_size=size, nobias=True)
        self.h2o = Linear(size, in_size=size, nobias=True)
        self.h2u = Linear(size, in_size=size, nobias=True)
        self.reset_state()

    def reset_state(self):
        self.h = None
        self.c = None

    def _gate(self, from_x, from_h, x, activation):
        if self.h is None:
            return activation(from_x(x))
        return activation(from_x(x) + from_h(self.h))

    def forward(self, x):
        f = self._gate(self.x2f, self.h2f, x, F.sigmoid)
        i = self._gate(self.x2i, self.h2i, x, F.sigmoid)
        o = self._gate(self.x2o, self.h2o, x, F.sigmoid)
        u = self._gate(self.x2u, self.h2u, x, F.tanh)
        c_new = i * u if self.c is None else f * self.c + i * u
        h_new = o * F.tanh(c_new)
        self.h, self.c = h_new, c_new
        return h_new


# --- Embedding and normalisation --------------------------------------------------------
class EmbedID(Layer):
    """A lookup table: ``layer(ids)`` is ``W[ids]``, one row of ``out_size``
    values per id in ``[0, in_size)``. ``W`` starts as standard normal values
    (float64, as in DeZero)."""

    def __init__(self, in_size, out_size):
        super().__init__()
        _sizes("EmbedID", in_size=in_size, out_size=out_size)
        self.W = Parameter(_random_weights("EmbedID", (in_size, out_size)), name="W", ndim=2)

    def forward(self, x):
        return F.embed_id(x, self.W)


class BatchNorm(Layer):
    """Batch normalisation (``F.batch_norm``) with a scale ``gamma`` and a shift
    ``beta`` per channel, learnt, and the running mean and variance that
    ``test_mode()`` uses. All four are Parameters, so that ``save_weights``
    keeps them; the running averages never get a gradient. The sizes come
    from the first call (``x.shape[1]`` channels)."""

    def __init__(self):
        super().__init__()
        self.avg_mean = Parameter(None, name="avg_mean", ndim=1)
        self.avg_var = Parameter(None, name="avg_var", ndim=1)
        self.gamma = Parameter(None, name="gamma", ndim=1)
        self.beta = Parameter(None, name="beta", ndim=1)

    def _init_params(self, x):
        channels, dtype = x.shape[1], x.dtype
        self.avg_mean.data = np.zeros(channels, dtype=dtype)
        self.avg_var.data = np.ones(channels, dtype=dtype)
        self.gamma.data = np.ones(channels, dtype=dtype)
        self.beta.data = np.zeros(channels, dtype=dtype)

    def forward(self, x):
        if self.avg_mean.data is None:
            if np.ndim(getattr(x, "data", x)) not in (2, 4):  # x.shape[1] is the channels
                raise ValueError(f"BatchNorm: x must be (N, C) or (N, C, H, W), got shape "
                                 f"{np.shape(getattr(x, 'data', x))}")
            self._init_params(x)
        return F.batch_norm(x, self.gamma, self.beta, self.avg_mean.data, self.avg_var.data)


# --- Convolution ----------------------------------------------------------------------
class Conv2d(Layer):
    """A 2-D convolution layer (``F.conv2d``): W of shape (out_channels,
    in_channels, KH, KW), scaled so that each output starts with about the
    variance of one input, and a bias per output channel unless ``nobias``.
    in_channels: None to take it from the first call (``x.shape[1]``)."""

    def __init__(self, out_channels, kernel_size, stride=1, pad=0, nobias=False,
                 dtype=np.float32, in_channels=None):
        super().__init__()
        _sizes(type(self).__name__, out_channels=out_channels, in_channels=in_channels)
        for axis, size in enumerate(pair(kernel_size)):
            whole_number(size, type(self).__name__, f"kernel_size[{axis}]", at_least=1)
        self.in_channels = in_channels
        self.out_channels = out_channels
        self.kernel_size = kernel_size
        self.stride = stride
        self.pad = pad
        self.dtype = dtype
        self.W = Parameter(None, name="W", ndim=4)
        if in_channels is not None:
            self._init_W()
        self.b = None if nobias else Parameter(np.zeros(out_channels, dtype=dtype), name="b", ndim=1)

    def _weight_shape(self):
        return (self.out_channels, self.in_channels, *pair(self.kernel_size))

    def _init_W(self):
        kh, kw = pair(self.kernel_size)
        scale = np.sqrt(1.0 / (self.in_channels * kh * kw))
        self.W.data = (np.random.randn(*self._weight_shape()) * scale).astype(self.dtype)

    def forward(self, x):
        if self.W.data is None:
            self.in_channels = x.shape[1]
            self._init_W()
        return F.conv2d(x, self.W, self.b, self.stride, self.pad)


class Deconv2d(Conv2d):
    """A transposed convolution layer (``F.deconv2d``): W of shape
    (in_channels, out_channels, KH, KW); otherwise as Conv2d."""

    def _weight_shape(self):
        return (self.in_channels, self.out_channels, *pair(self.kernel_size))

    def forward(self, x):
        if self.W.data is None:
            self.in_channels = x.shape[1]
            self._init_W()
        return F.deconv2d(x, self.W, self.b, self.stride, self.pad)
