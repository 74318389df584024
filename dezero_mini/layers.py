"""Layers: objects that own Parameters (``import dezero_mini.layers as L``).

A Layer finds its parameters by attribute: assigning a Parameter or another
Layer to an attribute registers it, so ``params()`` walks the whole tree of
sub-layers without any list to keep up to date.

Memory: a Layer remembers the Variables of its last call only through weak
references (``layer.inputs`` / ``layer.outputs``). A model that is kept alive
between batches therefore never keeps the last batch's graph alive with it.
"""
import os
import weakref

import numpy as np

from dezero_mini import functions as F
from dezero_mini.core import Parameter


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
        attribute path (``"l1/W"``). Plain arrays only: no pickle."""
        arrays = {}
        for key, param in self._named_params().items():
            if param.data is None:
                raise ValueError(
                    f"save_weights: parameter {key!r} has no data yet (a layer with a "
                    "lazy input size is initialised by its first call; run one forward "
                    "pass before saving)"
                )
            arrays[key] = param.data
        try:
            np.savez_compressed(path, **arrays)
        except BaseException:
            # Do not leave half a file that a later load_weights would trip over.
            target = os.fspath(path)
            if not target.endswith(".npz"):
                target += ".npz"
            if os.path.exists(target):
                os.remove(target)
            raise

    def load_weights(self, path):
        """Set every parameter from the ``.npz`` file ``path`` that
        ``save_weights`` wrote. Nothing changes unless every key is present with
        the right shape (a parameter of a lazy layer not yet called takes the
        shape from the file)."""
        params_dict = self._named_params()
        with np.load(path, allow_pickle=False) as npz:
            missing = [k for k in params_dict if k not in npz.files]
            if missing:
                raise KeyError(
                    f"load_weights: {os.fspath(path)!r} has no array for parameter(s) "
                    f"{missing}; it holds {sorted(npz.files)}"
                )
            unexpected = sorted(set(npz.files) - set(params_dict))
            if unexpected:
                raise KeyError(
                    f"load_weights: {os.fspath(path)!r} holds array(s) {unexpected} that "
                    f"match no parameter of this {type(self).__name__}; its parameters "
                    f"are {list(params_dict)}"
                )
            arrays = {k: npz[k] for k in params_dict}
        for key, param in params_dict.items():
            if param.data is not None and arrays[key].shape != param.data.shape:
                raise ValueError(
                    f"load_weights: parameter {key!r} has shape {param.data.shape}, "
                    f"the file has {arrays[key].shape}"
                )
        for key, param in params_dict.items():
            param.data = arrays[key]


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
        self.in_size = in_size
        self.out_size = out_size
        self.dtype = dtype
        self.W = Parameter(None, name="W")
        if in_size is not None:
            self._init_W()
        self.b = None if nobias else Parameter(np.zeros(out_size, dtype=dtype), name="b")

    def _init_W(self):
        # Scaled so that each output starts with about the variance of one input.
        scale = np.sqrt(1.0 / self.in_size)
        self.W.data = (np.random.randn(self.in_size, self.out_size) * scale).astype(self.dtype)

    def forward(self, x):
        if self.W.data is None:
            self.in_size = x.shape[1]
            self._init_W()
        return F.linear(x, self.W, self.b)
