"""Run a PyTorch script and follow the autograd graphs its names keep, step by step.

PyTorch keeps the intermediate results of a graph inside its C++ autograd
nodes, so counting Python objects shows nothing (``total_loss += loss``
keeps two tensors with a ``grad_fn`` after fifty steps, and a graph of 400
nodes behind them). So at the end of each step this module measures, for
every name of the script, the autograd graph behind it
(:func:`dezero_mini.memory.torch_graphs.named_graphs`); a name whose graph
has grown at each of the last N steps keeps a graph across steps: a leak.

**What a step is.** An optimizer step (``torch.optim``'s global step hook,
``register_optimizer_step_post_hook``): every training loop makes one per
batch, wherever its loop is. A script without an optimizer is followed by
the rounds of its own ``for`` and ``while`` loops
(:mod:`dezero_mini.memory.loop_marks`).

**The step budget** stops the script after N steps of the series followed:
a training run of hours is judged in seconds.

* ``watch_script(path, ...)``: run the script, return a ``ScriptRun``
  (the steps followed, how the script ended);
* ``judge(series, consecutive)``: the names that keep a growing graph, each
  a ``Leak`` with its size, growth per step and the fix that fits;
* ``record_torch_script(path, ...)`` and ``plot_torch_runs(runs)``: the
  memory plot of a PyTorch loop: resident memory (and device bytes on a
  GPU) and the graph nodes that the script's names hold, step by step.
"""
import ast
import os
import sys
from dataclasses import dataclass, field, replace
from pathlib import Path

from dezero_mini.memory.loop_marks import (ROUND, compile_with_loop_marks, new_main_module,
                                          script_as_main)

DEFAULT_STEPS = 30
#: Frames of these packages are machinery: their locals are not the learner's names.
_MACHINERY = ("torch", "dezero_mini", "runpy", "importlib", "numpy", "_pytest", "pytest",
              "pluggy", "IPython", "ipykernel", "threading")


def imports_torch(source):
    """Whether the script's source imports torch (``import torch``,
    ``import torch.nn as nn``, ``from torch import ...``), at any level."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return False
    for node in ast.walk(tree):
        if isinstance(node, ast.Import) and any(
                alias.name.partition(".")[0] == "torch" for alias in node.names):
            return True
        if isinstance(node, ast.ImportFrom) and node.level == 0 and \
                (node.module or "").partition(".")[0] == "torch":
            return True
    return False


class _BudgetReached(BaseException):
    """Raised from the step hook to stop the script: not an Exception, so
    that the script's own ``except Exception`` does not swallow it."""


class _HardExit(BaseException):
    """What ``os._exit(code)`` raises while a script is watched: the process
    must live on to say that the script cut itself off."""

    def __init__(self, code):
        super().__init__(code)
        self.code = code


def _hard_exit(code):
    raise _HardExit(code)


@dataclass
class StepSeries:
    """The steps of one source (the optimizer, or one loop of the script):
    at each, ``snapshots`` {path: HeldGraph}, the process's resident bytes
    (``rss``, None without psutil) and the device bytes (``device``, None
    without a GPU)."""

    name: str
    unit: str
    snapshots: list = field(default_factory=list)
    rss: list = field(default_factory=list)
    device: list = field(default_factory=list)


def _namespaces(script_globals, script_name):
    """The namespaces whose names are the learner's: the script's globals,
    then the locals of its running functions (every thread), innermost first."""
    namespaces = [(script_globals, f"a global of {script_name}")]
    for top in list(sys._current_frames().values()):
        frame = top
        while frame is not None:
            module = (frame.f_globals.get("__name__") or "").partition(".")[0]
            code = frame.f_code
            if module not in _MACHINERY and code.co_name != "<module>":
                where = (f"a local of {code.co_name}() at {Path(code.co_filename).name}:"
                         f"{frame.f_lineno}")
                namespaces.append((dict(frame.f_locals), where))
            frame = frame.f_back
    return namespaces


class _Watch:
    """Takes a snapshot of the named graphs at each step and stops the
    script when the budget is reached."""

    def __init__(self, namespace, script_name, loop_lines, steps):
        self.namespace, self.script_name, self.steps = namespace, script_name, steps
        self.optimizer = StepSeries("the optimizer's steps", "step")
        self.loops = [StepSeries(f"the rounds of the loop at {script_name}:{line}", "iteration")
                      for line in loop_lines]
        self.loop_rounds = [0] * len(loop_lines)
        try:
            import psutil

            self.process = psutil.Process()
        except ImportError:  # (a browser): no resident memory to read
            self.process = None

    def _snapshot(self, series):
        import torch

        from dezero_mini.memory.torch_graphs import named_graphs

        held = named_graphs(_namespaces(self.namespace, self.script_name))
        series.snapshots.append({h.path: h for h in held})
        series.rss.append(self.process.memory_info().rss if self.process else None)
        series.device.append(torch.cuda.memory_allocated()
                             if torch.cuda.is_available() else None)
        if len(series.snapshots) >= self.steps:
            raise _BudgetReached()

    def on_optimizer_step(self, optimizer, args, kwargs):
        self._snapshot(self.optimizer)

    def on_round(self, number):
        self.loop_rounds[number] += 1
        if self.loop_rounds[number] >= 2 and not self.optimizer.snapshots:
            self._snapshot(self.loops[number])

    def followed(self):
        """The series to judge: the optimizer's steps if there were any, else
        the loop that went round most (None for a script without loops)."""
        if self.optimizer.snapshots:
            return self.optimizer
        return max(self.loops, key=lambda series: len(series.snapshots), default=None)


@dataclass
class ScriptRun:
    """How a watched script ran: ``series`` (the steps followed, or None),
    ``stopped`` (by the step budget), ``error`` (the script's own exception),
    ``exit_code`` (of a ``sys.exit`` in the script; None when it ended by
    itself), ``exit_message`` (a ``sys.exit("text")``)."""

    series: object
    stopped: bool = False
    error: object = None
    exit_code: object = None
    exit_message: object = None
    cut_off: bool = False  # os._exit(): the script ended without unwinding


def watch_script(path, source=None, script_args=(), steps=DEFAULT_STEPS):
    """Run the PyTorch script ``path`` as ``__main__`` (with ``script_args``
    in ``sys.argv``), taking a snapshot of its named graphs at each step,
    until it ends or ``steps`` steps have run. SyntaxError when it cannot be
    compiled; ImportError when torch is missing."""
    import torch.optim.optimizer as optimizer_module

    path = Path(path)
    source = path.read_bytes() if source is None else source
    code, loop_lines = compile_with_loop_marks(source, str(path))
    module = new_main_module(path)
    watch = _Watch(module.__dict__, path.name, loop_lines, steps)
    module.__dict__[ROUND] = watch.on_round
    handle = optimizer_module.register_optimizer_step_post_hook(watch.on_optimizer_step)
    real_exit, os._exit = os._exit, _hard_exit
    run = ScriptRun(series=None)
    try:
        with script_as_main(path, module, script_args):
            exec(code, module.__dict__)
    except _BudgetReached:
        run.stopped = True
    except _HardExit as ended:
        run.exit_code, run.cut_off = ended.code, True
    except SystemExit as ended:
        if isinstance(ended.code, int) or ended.code is None:
            run.exit_code = ended.code or 0
        else:
            run.exit_code, run.exit_message = 1, str(ended.code)
    except Exception as error:  # the script's own error (Ctrl-C and SIGTERM go on up)
        run.error = error
    finally:
        os._exit = real_exit
        handle.remove()
    run.series = watch.followed()
    return run


@dataclass(frozen=True)
class Leak:
    """A name whose graph grew at each of the last steps: its ``path`` and
    ``where``, the graph's ``nodes`` and saved bytes at the last step and
    their growth per step, the ``fix`` that fits, and the names whose graph
    grows only because it contains this one's (``followers``)."""

    path: str
    where: str
    nodes: int
    nodes_per_step: float
    saved_bytes: int
    saved_bytes_per_step: float
    fix: str
    followers: tuple = ()


def fix_for(held):
    """The fix that fits what holds the graph: a 0-d tensor that adds up
    losses or a metric, a container that collects tensors, an attribute of
    an object, or a tensor that feeds the next step (a hidden state)."""
    name = held.path
    if held.kind == "tensor" and held.scalar:
        return (f"add up a Python number: `{name} += loss.item()` (or `.item()` of whatever "
                f"is added), or `{name} = {name}.detach()`")
    if held.kind == "container":
        return (f"store numbers (`.item()`) or detached tensors (`.detach()`) in {name}, not "
                "the tensors themselves, or compute what needs no gradient under "
                "`torch.no_grad()`")
    inside_something = any(mark in name for mark in ".[")  # model.last, state['h']
    if held.kind == "object" or (held.kind == "tensor" and inside_something):
        return (f"keep `value.detach()` in {name}, or compute it under `torch.no_grad()` if "
                "no gradient must flow through it")
    return (f"{name} feeds the next step with its whole history: `{name} = {name}.detach()` "
            "at the start of each step (each window of truncated backpropagation), or "
            f"`del {name}` when it is no longer needed")


def judge(series, consecutive):
    """The ``Leak``s of ``series``: the names whose graph grew at each of the
    last ``consecutive`` steps, largest first ([] with too few steps)."""
    snapshots = series.snapshots
    if len(snapshots) < consecutive + 1:
        return []
    window = snapshots[-(consecutive + 1):]
    leaks = []
    for path, held in window[-1].items():
        counts = [snapshot[path].size.nodes if path in snapshot else 0 for snapshot in window]
        if all(later > earlier for earlier, later in zip(counts, counts[1:])):
            first = window[0].get(path)
            first_saved = first.size.saved_bytes if first else 0
            leaks.append(Leak(
                path=path, where=held.where, nodes=held.size.nodes,
                nodes_per_step=(counts[-1] - counts[0]) / consecutive,
                saved_bytes=held.size.saved_bytes,
                saved_bytes_per_step=(held.size.saved_bytes - first_saved) / consecutive,
                fix=fix_for(held)))
    return _fold_followers(leaks, window[-1])


def _fold_followers(leaks, last):
    """A name rebound each step to a value computed from a leaking name
    (``val_loss = f(h_val)``) grows only because its graph contains the
    other's: report it under that name, not as a leak of its own."""

    def contains(outer, inner):
        return last[inner].heads <= last[outer].size.node_ids

    leaders = []
    for leak in sorted(leaks, key=lambda leak: leak.nodes):  # the smallest graph leads
        leader = next((other for other in leaders if contains(leak.path, other.path)), None)
        if leader is None:
            leaders.append(leak)
        else:
            leaders[leaders.index(leader)] = replace(
                leader, followers=(*leader.followers, leak.path))
    return sorted(leaders, key=lambda leak: -leak.nodes)


@dataclass
class TorchRecord:
    """A PyTorch loop, step by step: ``rss`` (bytes, or None without psutil),
    ``device`` (bytes, or None without a GPU), and the graph ``nodes`` and
    ``saved_bytes`` that the script's names hold (summed over the names)."""

    label: str
    rss: list
    device: list
    nodes: list
    saved_bytes: list


def record_torch_script(path, *script_args, steps=50, label=None):
    """Run the PyTorch script ``path`` for ``steps`` steps and return its
    ``TorchRecord``. RuntimeError when the script fails or makes no step."""
    run = watch_script(path, script_args=script_args, steps=steps)
    if run.error is not None:
        raise RuntimeError(f"{Path(path).name} raised {type(run.error).__name__}: "
                           f"{run.error}") from run.error
    series = run.series
    if series is None or not series.snapshots:
        raise RuntimeError(f"{Path(path).name} made no optimizer step and no loop round")
    return TorchRecord(
        label=label or " ".join([Path(path).name, *script_args]), rss=series.rss,
        device=series.device,
        nodes=[sum(h.size.nodes for h in snap.values()) for snap in series.snapshots],
        saved_bytes=[sum(h.size.saved_bytes for h in snap.values())
                     for snap in series.snapshots])


def plot_torch_runs(records, title="A PyTorch loop, step by step"):
    """Side by side, for each ``TorchRecord``: the graph nodes that the
    script's names hold, and the resident memory growth (device bytes too
    on a GPU), per step. Returns the matplotlib figure."""
    import matplotlib.pyplot as plt

    with_device = any(value is not None for record in records for value in record.device)
    panels = 3 if with_device else 2
    figure, axes = plt.subplots(1, panels, figsize=(5 * panels, 3.8))
    for record in records:
        steps = range(1, len(record.nodes) + 1)
        axes[0].plot(steps, record.nodes, label=record.label)
        if all(value is not None for value in record.rss):
            axes[1].plot(steps, [(value - record.rss[0]) / 2**20 for value in record.rss],
                         label=record.label)
        if with_device:
            axes[2].plot(steps, [(value or 0) / 2**20 for value in record.device],
                         label=record.label)
    axes[0].set(title="autograd nodes held by the script's names", xlabel="optimizer step",
                ylabel="nodes")
    axes[1].set(title="resident memory, growth since step 1", xlabel="optimizer step",
                ylabel="MiB")
    if with_device:
        axes[2].set(title="device memory allocated", xlabel="optimizer step", ylabel="MiB")
    for axis in axes:
        axis.legend()
    figure.suptitle(title)
    figure.tight_layout()
    return figure


#: The example of lesson 07's PyTorch section: predictions kept for later,
#: each with its forward graph (examples/pytorch/outputs_list.py).
EXAMPLE_SCRIPT = "outputs_list.py"
EXAMPLE_LABELS = ("predictions kept with their graph", "--fixed: under torch.no_grad()")


def pytorch_example(examples, steps=30):
    """Lesson 07's PyTorch example, run now (PyTorch must be installed):
    ``leaks``' report on the leaking loop of ``examples/outputs_list.py``
    (run as a command, as a learner runs it) and the ``TorchRecord`` of the
    leaking and of the fixed loop, as a dict that ``json`` can store:
    ``{"report", "records", "torch", "python"}``."""
    import platform
    import subprocess

    import torch

    script = Path(examples) / EXAMPLE_SCRIPT
    done = subprocess.run([sys.executable, "-m", "dezero_mini", "leaks", "--steps", "15",
                           str(script)], capture_output=True, text=True, timeout=600)
    records = [record_torch_script(script, *options, steps=steps, label=label)
               for options, label in (((), EXAMPLE_LABELS[0]), (("--fixed",), EXAMPLE_LABELS[1]))]
    return {"report": done.stdout.replace(str(script), script.name),
            "records": [vars(record) for record in records],
            "torch": torch.__version__.split("+")[0], "python": platform.python_version()}
