"""Models: Layers that are whole networks (``from dezero_mini import models``)."""
import numpy as np

from dezero_mini import functions as F
from dezero_mini import layers as L
from dezero_mini import utils
from dezero_mini.layers import Layer
from dezero_mini.validation import expect_callable, expect_each, whole_number


class Model(Layer):
    """A Layer that is a whole network; subclasses define ``forward``."""

    def plot(self, *inputs, to_file="model.png"):
        """Run ``forward(*inputs)`` and draw the graph that it built into
        ``to_file`` (needs Graphviz's ``dot``)."""
        y = self.forward(*inputs)
        return utils.plot_dot_graph(y, verbose=True, to_file=to_file)


class MLP(Model):
    """A multi-layer perceptron: one Linear layer per entry of
    ``fc_output_sizes``, with ``activation`` between them (not after the last).

    The layers are the attributes ``l0``, ``l1``, ... (the keys that
    ``save_weights`` writes: ``"l0/W"``, ``"l0/b"``, ...).
    """

    def __init__(self, fc_output_sizes, activation=F.sigmoid):
        super().__init__()
        fc_output_sizes = expect_each(fc_output_sizes, (int, np.integer), "MLP", "fc_output_sizes",
                                      "a whole number")
        if not fc_output_sizes:  # forward would have no layer to end with
            raise ValueError("MLP: fc_output_sizes must name at least one layer, got an empty "
                             "list")
        for i, size in enumerate(fc_output_sizes):
            whole_number(size, "MLP", f"fc_output_sizes[{i}]", at_least=1)
        self.activation = expect_callable(activation, "MLP", "activation",
                                          "a function (F.sigmoid, F.relu, ...)")
        self.layers = []
        for i, out_size in enumerate(fc_output_sizes):
            layer = L.Linear(out_size)
            setattr(self, f"l{i}", layer)
            self.layers.append(layer)

    def forward(self, x):
        *hidden, last = self.layers
        for layer in hidden:
            # Two statements, not activation(layer(x)): rebinding x lets the
            # previous activation go before the next one is made, so that
            # under no_grad() two activations are alive at a time, not three.
            x = layer(x)
            x = self.activation(x)
        return last(x)


class Sequential(Model):
    """The layers (or functions) given, applied one after another:
    ``Sequential(L.Linear(10), F.relu, L.Linear(1))``. Layers among them are
    registered as ``l0``, ``l1``, ... (their parameters are the model's)."""

    def __init__(self, *layers):
        super().__init__()
        self.layers = []
        for i, layer in enumerate(layers):
            if not callable(layer):
                raise TypeError(f"Sequential: item {i} is a {type(layer).__name__}, "
                                "not a layer or function")
            self.layers.append(layer)
            if isinstance(layer, Layer):
                setattr(self, f"l{i}", layer)

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
        return x
