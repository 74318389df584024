"""The standard workload: one small training run that every stage can do.

A regression MLP (two hidden layers of sigmoids, a linear output) learns to
imitate a fixed random "teacher" network from noisy samples. Everything is
made in code from seeded RandomStates, so batch ``i`` is the same array on
every run and every stage.

Only the API that all stages share is used: ``Variable``, ``matmul``,
``add`` (a bias of shape ``(H,)`` broadcast over the batch), ``sigmoid``,
``mean_squared_error``, ``loss.backward(**kw)`` and ``cleargrad()``. The SGD
update is done by hand on ``p.data``.

The default sizes are chosen for the lessons:

* the batch (256) is large next to the width (32): activations dominate
  memory, as in real training, and the parameters are small (17 KiB);
* one batch's graph holds about 1 MiB of arrays (activations plus the
  gradients of every intermediate Variable), so a leak of 200 batches is
  ~200 MiB: obvious in RSS too, not only in tracemalloc;
* a batch costs about a millisecond (2-3 ms under tracemalloc), and the
  loss really falls: from about 1.4 over the first 20 batches to about 0.1
  after 200-300 (the noise floor is 0.01), with ``lr=0.1``.
"""
import contextlib

import numpy as np

from dezero_mini.memory.stages import load_stage
from dezero_mini.validation import expect_variable, number, whole_number

# The teacher is a fixed random tanh network of this width (not a parameter
# of the workload: it defines the task, not the learner).
_TEACHER_WIDTH = 8
_NOISE = 0.1


def grad_array(g):
    """The array of a gradient: an ndarray in the step modules, a Variable in
    dezero_mini. (Not ``getattr(g, "data", g)``: an ndarray has a ``.data``
    attribute too, its raw buffer as a memoryview.)"""
    if isinstance(g, np.ndarray):
        return g
    return expect_variable(g, "grad_array", "g").data


class Workload:
    """A deterministic MLP regression task built from a stage module's API.

    Parameters
    ----------
    module: a stage module, or anything ``load_stage`` accepts (``3``, ``"dezero_mini"``).
    batch_size, in_features, hidden, out_features: the sizes; two hidden
        layers of width ``hidden`` (``hidden_layers`` of them if given).
    lr: the SGD learning rate.
    seed: seeds the initial weights, the teacher and every batch.
    """

    def __init__(self, module, *, batch_size=256, in_features=32, hidden=32,
                 out_features=1, lr=0.1, seed=0, hidden_layers=2):
        module = load_stage(module)
        for name, size in (("batch_size", batch_size), ("in_features", in_features),
                           ("hidden", hidden), ("out_features", out_features)):
            whole_number(size, type(self).__name__, name, at_least=1)
        whole_number(hidden_layers, type(self).__name__, "hidden_layers", at_least=0)
        number(lr, type(self).__name__, "lr", at_least=0)
        self.module = module
        self.batch_size = batch_size
        self.in_features = in_features
        self.hidden = hidden
        self.out_features = out_features
        self.lr = lr
        self.seed = seed
        self.hidden_layers = hidden_layers

        rng = np.random.RandomState(seed)
        sizes = [in_features] + [hidden] * hidden_layers + [out_features]
        self.layers = []
        for k, (n_in, n_out) in enumerate(zip(sizes[:-1], sizes[1:]), start=1):
            W = module.Variable(rng.randn(n_in, n_out) / np.sqrt(n_in), name=f"W{k}")
            b = module.Variable(np.zeros(n_out), name=f"b{k}")
            self.layers.append((W, b))

        # The teacher: y = tanh(x A) c, scaled so that y has unit variance.
        teacher = np.random.RandomState([seed, 1])
        self._A = teacher.randn(in_features, _TEACHER_WIDTH) / np.sqrt(in_features)
        self._c = teacher.randn(_TEACHER_WIDTH, out_features)
        probe = np.tanh(teacher.randn(4096, in_features) @ self._A) @ self._c
        self._c /= probe.std()

    # --- data -----------------------------------------------------------------------
    def batch(self, i):
        """The arrays ``(x, t)`` of batch ``i``: the same on every call."""
        rng = np.random.RandomState([self.seed, 2, i])
        x = rng.randn(self.batch_size, self.in_features)
        t = np.tanh(x @ self._A) @ self._c
        t += _NOISE * rng.randn(*t.shape)
        return x, t

    # --- model ----------------------------------------------------------------------
    @property
    def parameters(self):
        """The Variables that SGD updates: ``[W1, b1, W2, b2, W3, b3]``."""
        return [p for layer in self.layers for p in layer]

    def forward(self, x, hidden=None):
        """The network's output for ``x`` (an array or a Variable). A list
        passed as ``hidden`` receives each hidden activation (a Variable)."""
        m = self.module
        h = x
        last = len(self.layers) - 1
        for k, (W, b) in enumerate(self.layers):
            h = m.add(m.matmul(h, W), b)
            if k < last:
                h = m.sigmoid(h)
                if hidden is not None:
                    hidden.append(h)
        return h

    def loss(self, i):
        """Build the graph of batch ``i`` and return its loss Variable."""
        x, t = self.batch(i)
        m = self.module
        return m.mean_squared_error(self.forward(m.Variable(x)), m.Variable(t))

    def update(self):
        """One SGD step on every parameter that has a gradient."""
        for p in self.parameters:
            g = p.grad
            if g is not None:
                # In place: no new parameter arrays per step.
                p.data -= self.lr * grad_array(g)

    def cleargrads(self):
        for p in self.parameters:
            p.cleargrad()

    # --- one batch --------------------------------------------------------------------
    def train_step(self, i, **backward_kwargs):
        """Train on batch ``i``; return its loss as a float.

        Keyword arguments go to ``loss.backward`` (e.g. ``retain_grad=True``
        on stage 04 and later). Nothing of the graph is kept on return: any
        object still alive afterwards is kept by the framework itself.
        """
        self.cleargrads()
        loss = self.loss(i)
        loss.backward(**backward_kwargs)
        self.update()
        return float(loss.data)

    def inference_step(self, i):
        """The loss of batch ``i`` without training; under ``no_grad()`` when
        the stage has it, so that no graph is built."""
        m = self.module
        no_grad = getattr(m, "no_grad", None)
        with no_grad() if no_grad is not None else contextlib.nullcontext():
            x, t = self.batch(i)
            loss = m.mean_squared_error(self.forward(m.Variable(x)), m.Variable(t))
            return float(loss.data)

    # --- sizes ------------------------------------------------------------------------
    @property
    def activation_nbytes(self):
        """Bytes of one hidden activation: ``batch_size * hidden`` float64."""
        return self.batch_size * self.hidden * np.dtype(np.float64).itemsize

    @property
    def parameter_nbytes(self):
        """Bytes of all the parameters' arrays."""
        return sum(p.data.nbytes for p in self.parameters)

    def describe(self):
        """The settings as a plain dict (for records and reports)."""
        return {
            "batch_size": self.batch_size,
            "in_features": self.in_features,
            "hidden": self.hidden,
            "out_features": self.out_features,
            "lr": self.lr,
            "seed": self.seed,
            "hidden_layers": self.hidden_layers,
        }

    def __repr__(self):
        settings = ", ".join(f"{k}={v}" for k, v in self.describe().items())
        return f"Workload({getattr(self.module, '__name__', self.module)}, {settings})"


class ResidualStack(Workload):
    """The standard workload with a deep stack of residual blocks after its
    first hidden layer: ``h = tanh(h + b_k) + h``, ``depth`` times.

    Only additions and element-wise functions: the workload where what a
    Function keeps for its backward matters most (stage 08). A Function
    that keeps its inputs holds three arrays per block (``h`` twice over,
    ``h + b_k`` and the tanh); one that keeps only what its backward reads
    holds one (tanh's output).
    """

    def __init__(self, module, *, depth=32, **settings):
        super().__init__(module, **settings)
        self.depth = whole_number(depth, type(self).__name__, "depth", at_least=0)
        self.blocks = [self.module.Variable(np.zeros(self.hidden), name=f"block{k}")
                       for k in range(1, depth + 1)]

    @property
    def parameters(self):
        return super().parameters + self.blocks

    def forward(self, x, hidden=None):
        m = self.module
        (W1, b1), (W2, b2), (W3, b3) = self.layers
        h = m.sigmoid(m.add(m.matmul(x, W1), b1))
        for b in self.blocks:
            h = m.add(m.tanh(m.add(h, b)), h)
            if hidden is not None:
                hidden.append(h)
        h = m.sigmoid(m.add(m.matmul(h, W2), b2))
        return m.add(m.matmul(h, W3), b3)

    def describe(self):
        return {**super().describe(), "depth": self.depth}
