"""Training loops that leak although the framework does not (stage 07).

Since stage 06 a framework of the course frees each graph by itself: during
backward, and as soon as the user lets go of the loss. What it cannot free is
a graph that the user's own code still reaches: a Variable is its whole graph
(its ``creator``, whose ``inputs`` have creators, and so on), so a name, a
list, a dict or an attribute that keeps one Variable built from a batch
keeps what that Variable still reaches. The blog post "Tensor是如何让你的内存/
显存泄漏的" (2022) traces the same leaks in PyTorch; PyTorch's FAQ ("My model
reports cuda runtime error(2): out of memory") warns about the first one.

Each loop here is a small class with the leaking line and its fix, so that
the lesson, the tests and anyone's experiments run the same code::

    record = record_loop("total_loss", 7, batches=30)          # leaking
    fixed = record_loop("total_loss", 7, batches=30, fixed=True)

    loop = LOOPS["total_loss"](load_stage(7), batch_size=4, hidden=3)
    loop.step(0); loop.step(1)
    reference_graph(loop.roots())      # who keeps the graphs alive

``step(i)`` runs batch ``i`` and returns its loss as a float; ``roots()``
returns the names of the user's code that may hold a graph, for
``reference_graph``. The fixed versions use ``item()`` and ``detach()``,
which the framework has from stage 07 on (``dezero_mini`` too: every loop
runs on it as on stage 07); the leaking ones run on any stage from 03 on
(on stage 05 they keep more: its backward frees nothing).
"""
import numpy as np

from dezero_mini.memory.counting import count_live_objects
from dezero_mini.memory.recorder import record_training
from dezero_mini.memory.stages import load_stage
from dezero_mini.memory.workload import Workload


class UserLoop:
    """A training (or evaluation) loop of the standard workload, written
    the way a user would, in a leaking or a fixed version.

    module: a stage (anything ``load_stage`` accepts). fixed: run the fixed
    version. Other keyword arguments make the ``Workload``.
    """

    name = None  # the key in LOOPS
    title = None  # one line for a plot's legend
    leaking_line = None  # the line of user code that keeps the graphs
    fixed_line = None  # the same line, fixed

    def __init__(self, module, fixed=False, **workload_kwargs):
        self.module = load_stage(module)
        self.fixed = fixed
        self.workload = Workload(self.module, **workload_kwargs)

    @property
    def label(self):
        return f"{self.fixed_line if self.fixed else self.leaking_line}"

    def step(self, i):
        """Run batch ``i``; return its loss as a float."""
        raise NotImplementedError

    def roots(self):
        """The user's names that may keep graphs alive: ``{name: value}``."""
        raise NotImplementedError

    def _batch_variables(self, i):
        x, t = self.workload.batch(i)
        return self.module.Variable(x), self.module.Variable(t)

    def _train(self, loss):
        """Backward and the SGD update, as in ``Workload.train_step``."""
        loss.backward()
        self.workload.update()


class TotalLossLoop(UserLoop):
    """``total_loss += loss``: the losses of an epoch summed as Variables and
    differentiated once at the end (the blog post's "very pythonic" loop).
    Until that backward, every batch's graph is alive: the sum holds every
    loss, each loss its graph.

    The fix: backward on each batch's loss (the gradients add up in the
    parameters: the gradient of the sum, one graph alive at a time) and a
    number for the total: ``total_loss += loss.item()``.

    epoch_batches: after that many batches, end the epoch (the backward of
    the leaking version, the update of both). None: only ``end_epoch()``.
    """

    name = "total_loss"
    title = "1. a total of the losses"
    leaking_line = "total_loss += loss"
    fixed_line = "total_loss += loss.item()"

    def __init__(self, module, fixed=False, epoch_batches=None, **workload_kwargs):
        super().__init__(module, fixed, **workload_kwargs)
        self.epoch_batches = epoch_batches
        self.total_loss = 0
        self.epoch_losses = []  # the mean loss of each finished epoch, as numbers
        self._batches_in_epoch = 0

    def step(self, i):
        loss = self.workload.loss(i)
        if self.fixed:
            loss.backward()
            self.total_loss += loss.item()
        else:
            self.total_loss += loss  # the graph of every batch stays until end_epoch()
        self._batches_in_epoch += 1
        if self.epoch_batches is not None and self._batches_in_epoch == self.epoch_batches:
            self.end_epoch()
        return float(loss.data)

    def end_epoch(self):
        """Backward through the sum (leaking version), update, start over."""
        if self._batches_in_epoch == 0:
            return
        if not self.fixed:
            self.total_loss.backward()
        self.workload.update()
        self.workload.cleargrads()
        total = self.total_loss if self.fixed else float(self.total_loss.data)
        self.epoch_losses.append(total / self._batches_in_epoch)
        self.total_loss, self._batches_in_epoch = 0, 0

    def roots(self):
        return {"total_loss": self.total_loss}


class RunningSumLoop(UserLoop):
    """``val += x``: a statistic kept in a Variable (here the running sum of
    the inputs, as for normalising them later) and updated with the
    framework's arithmetic. Every update is an operation of the graph: the
    new sum's creator holds the old sum and the batch's input, so the chain
    of sums keeps every input (and the gradient that backward left in it).

    The fix: update the array, ``input_sum.data += x.data.sum(axis=0)`` (or
    make the update under ``no_grad()``).
    """

    name = "running_sum"
    title = "2. a running statistic in a Variable"
    leaking_line = "input_sum += sum(x, axis=0)"
    fixed_line = "input_sum.data += x.data.sum(axis=0)"

    def __init__(self, module, fixed=False, **workload_kwargs):
        super().__init__(module, fixed, **workload_kwargs)
        self.input_sum = self.module.Variable(np.zeros(self.workload.in_features), name="input_sum")

    def step(self, i):
        self.workload.cleargrads()
        x, t = self._batch_variables(i)
        loss = self.module.mean_squared_error(self.workload.forward(x), t)
        self._train(loss)
        if self.fixed:
            self.input_sum.data += x.data.sum(axis=0)
        else:
            self.input_sum += self.module.sum(x, axis=0)  # a new node of a graph, every batch
        return float(loss.data)

    def roots(self):
        return {"input_sum": self.input_sum}


class HistoryLoop(UserLoop):
    """Losses and outputs kept in a dict of lists for logging, in an
    evaluation loop (no backward, and no ``no_grad()``): every batch's loss
    and prediction stay, and with them every batch's graph.

    The fix: keep numbers, ``loss.item()``, and what you need of the
    outputs as numbers too (``detach()`` would keep the arrays without the
    graph; see ``LastOutputLoop``).
    """

    name = "history"
    title = "3. losses and outputs kept for logging"
    leaking_line = 'history["loss"].append(loss)'
    fixed_line = 'history["loss"].append(loss.item())'

    def __init__(self, module, fixed=False, **workload_kwargs):
        super().__init__(module, fixed, **workload_kwargs)
        self.history = {"loss": [], "mean_prediction": []}

    def step(self, i):
        x, t = self._batch_variables(i)
        y = self.workload.forward(x)
        loss = self.module.mean_squared_error(y, t)
        if self.fixed:
            self.history["loss"].append(loss.item())
            self.history["mean_prediction"].append(float(y.data.mean()))
        else:
            self.history["loss"].append(loss)
            self.history["mean_prediction"].append(self.module.sum(y) / len(y))
        return float(loss.data)

    def roots(self):
        return {"history": self.history}


class LastOutputLoop(UserLoop):
    """A model object that keeps its last output in an attribute
    (``self.last = y``, for a progress report) and its first hidden
    activation in a cache keyed by batch (to plot later). The attribute
    keeps one batch alive at a time; the cache keeps one per batch. Backward
    has freed the graph behind them (stage 06), but each cached Variable
    still holds its array and its creator.

    The fix: ``self.last = y.detach()`` (the array, no graph) and a number
    in the cache (``float(h.data.mean())``): what the plot needs.
    """

    name = "last_output"
    title = "4. an attribute and a cache of outputs"
    leaking_line = "self.last = y; self.cache[i] = h"
    fixed_line = "self.last = y.detach(); self.cache[i] = float(h.data.mean())"

    def __init__(self, module, fixed=False, **workload_kwargs):
        super().__init__(module, fixed, **workload_kwargs)
        self.model = _Model(self.workload, fixed)

    def step(self, i):
        self.workload.cleargrads()
        x, t = self._batch_variables(i)
        loss = self.module.mean_squared_error(self.model(x, i), t)
        self._train(loss)
        return float(loss.data)

    def roots(self):
        return {"model": self.model}


class _Model:
    """The workload's network as a user's model class that remembers things."""

    def __init__(self, workload, fixed):
        self.workload = workload
        self.fixed = fixed
        self.last = None
        self.cache = {}

    def __call__(self, x, batch):
        hidden = []
        y = self.workload.forward(x, hidden=hidden)
        if self.fixed:
            self.last = y.detach()
            self.cache[batch] = float(hidden[0].data.mean())
        else:
            self.last = y
            self.cache[batch] = hidden[0]
        return y


#: The four loops of stage 07, by name, in the lesson's order.
LOOPS = {loop.name: loop for loop in (TotalLossLoop, RunningSumLoop, HistoryLoop, LastOutputLoop)}


def record_loop(name, stage, *, fixed=False, batches=30, rss=False, **kwargs):
    """Run the loop ``name`` of ``LOOPS`` on a stage for ``batches`` batches
    under ``record_training`` (collector off) and return the record, labelled
    with the loop's line. Other keyword arguments go to the loop (workload
    sizes, ``epoch_batches``). Nothing of the loop is kept afterwards."""
    loop = LOOPS[name](stage, fixed=fixed, **kwargs)
    return record_training(loop.module, batches, workload=loop.workload, step=loop.step,
                           rss=rss, label=loop.label)


def objects_per_forward(stage, **workload_kwargs):
    """How many Variables and Functions one forward pass of the standard
    workload makes (the loss and everything it reaches but the parameters):
    the size of "one graph" that a leak per batch is measured in."""
    workload = Workload(stage, **workload_kwargs)
    before = count_live_objects(workload.module)["total"]
    loss = workload.loss(0)
    made = count_live_objects(workload.module)["total"] - before
    del loss
    return made
