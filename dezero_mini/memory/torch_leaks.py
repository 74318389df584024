"""Run a PyTorch script, measure what it holds at each training step, and name what grows.

**Growth first.** At each training step :class:`~dezero_mini.memory.torch_census.Census`
counts what the process holds: live tensors with and without a ``grad_fn``
and their bytes (once per storage), the autograd nodes reachable from them
and, among those, the nodes made before the previous step, resident memory
(and device memory on a GPU). A leak is growth that persists
(:func:`judge`): after a warm-up of two steps, the nodes (or the tensors
with a graph) that outlive a step have grown at almost every one of the
last N steps. So a graph that is let go at each step is never a leak however
long it is (a sequence that grows on purpose), the optimizer's state made at
its first step is warm-up, and a loop whose graphs grow is never called
clean, even where no name is found for what holds them.

**Names second.** When something grows, the tensors whose graph reaches
nodes of earlier steps are followed back through their referrers
(:mod:`dezero_mini.memory.torch_holders`) to a global, a class, a running
function's locals, through containers, modules, closures, default
arguments and tracebacks; the report gives the chain, the line of the
script that stores into the holder, the bytes kept per step (the tensors
the graph saved for backward and the tensors the holder keeps) and the fix.

**What a step is.** An optimizer step (``torch.optim``'s global step hook)
where there is one; else a round of the script's loop that calls
``backward`` (``for w in params: w -= lr * w.grad`` inside it is not that
loop: no backward between its rounds); else a ``backward`` call whose loop
is in another module; else, for a script that never calls backward, the
rounds of its loops. The step budget (``steps``) counts training steps only,
so a data-loading loop before the first step does not spend it.

**Any shape of script.** torch may come from the script's own modules
(:func:`imports_torch` follows them); DataLoader workers (other processes)
are not watched and never report; a script that raises, calls ``sys.exit``
or ``os._exit`` after some steps is judged on the steps it made.

* ``watch_script(path, ...)``: run the script, return a ``ScriptRun``;
* ``judge(counts, consecutive)``: what grows, as a ``Growth``;
* ``record_torch_script`` and ``plot_torch_runs``: the memory plot.
"""
import ast
import gc
import os
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from dezero_mini.memory.loop_marks import (ENTER, ROUND, compile_with_loop_marks,
                                          new_main_module, script_as_main)

DEFAULT_STEPS = 30
WARM_UP = 2  # steps left out of the judgement: the optimizer's state, caches filled once
DEFAULT_CONSECUTIVE = 5
#: The fewest steps that can be judged: the first step starts the watch (it
#: is never counted), WARM_UP more are left out, and growth needs three
#: counts (two differences) to persist. ``leaks --steps`` takes no fewer.
MIN_STEPS = 1 + WARM_UP + 3


def most_consecutive(steps):
    """The most steps in a row that a budget of ``steps`` training steps can
    compare (``leaks --consecutive``): the differences between its counts
    after the warm-up."""
    return steps - 1 - WARM_UP - 1
#: A loop that never calls backward is followed for at most this many rounds
#: (x the step budget): a data-loading loop of a million rounds is not watched whole.
IDLE_ROUNDS_FACTOR = 4
#: Counting a step is skipped when watching would cost more than this share
#: of the script's own time (CPU time: what a loaded machine changes least).
MAX_OVERHEAD = 0.1


def imports_torch(source, path=None, depth=3):
    """Whether the script imports torch, itself or through its own modules
    (files next to it that it imports, ``depth`` levels deep)."""
    if any(_is_torch(name) for name in _imported_names(source)):
        return True
    if path is None:
        return False
    for module in script_modules(source, path, depth):
        try:
            if any(_is_torch(name) for name in _imported_names(module.read_bytes())):
                return True
        except OSError:
            continue
    return False


def _is_torch(name):
    return name.partition(".")[0] == "torch"


def _imported_names(source):
    """The modules that ``source`` imports by absolute name; [] when it is no Python."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return []
    names = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.append(node.module)
    return names


def script_modules(source, path, depth=3):
    """The script's own modules: the files of its folder that it imports
    (``helper.py``, ``pkg/__init__.py``), and theirs, ``depth`` levels deep,
    as paths. What ``leaks`` reads besides the script (an output must be
    none of them)."""
    folder = Path(path).resolve().parent
    found, sources = [], [source]
    for _ in range(depth):
        imported = []
        for text in sources:
            for name in _imported_names(text):
                if _is_torch(name):
                    continue
                parts = name.split(".")
                for candidate in (folder.joinpath(*parts).with_suffix(".py"),
                                  folder.joinpath(*parts, "__init__.py"),
                                  folder / f"{parts[0]}.py"):
                    try:
                        if candidate not in found and candidate.is_file():
                            found.append(candidate)
                            imported.append(candidate.read_bytes())
                    except OSError:
                        continue
        sources = imported
    return found


class _BudgetReached(BaseException):
    """Raised from the step hook to stop the script: not an Exception, so
    that the script's own ``except Exception`` does not swallow it."""


class _HardExit(BaseException):
    """What ``os._exit(code)`` raises while a script is watched: the process
    must live on to judge the steps the script made."""

    def __init__(self, code):
        super().__init__(code)
        self.code = code


@dataclass
class StepSeries:
    """The steps of one source (the optimizer, a loop of the script, the
    backward calls): ``counts``, a ``StepCount`` per step."""

    name: str
    unit: str
    training: bool = True
    counts: list = field(default_factory=list)
    steps: int = 0  # counted or not


@dataclass
class Growth:
    """What grows over the steps judged: ``leaking`` (a graph outlives its
    step at almost every step), per step: the old ``nodes``, the tensors with a
    graph (``graph_tensors``, ``graph_bytes``), the tensors without one
    (``plain_tensors``, ``plain_bytes``) and resident memory (``rss``), and
    ``detached_cache`` (tensors without a graph grow: a cache, a leak of
    memory but not of graphs)."""

    leaking: bool
    steps: int
    nodes: float = 0.0
    graph_tensors: float = 0.0
    graph_bytes: float = 0.0
    plain_tensors: float = 0.0
    plain_bytes: float = 0.0
    rss: object = None
    detached_cache: bool = False
    hooks: float = 0.0  # hooks registered per step and never removed
    hooks_pile_up: bool = False  # no graph grows, but the hooks do


def _persists(values, consecutive):
    """Growth that persists: the last ``consecutive`` differences of ``values``
    are positive but at most one, and the last is above the first."""
    window = values[-(consecutive + 1):]
    rises = sum(later > earlier for earlier, later in zip(window, window[1:]))
    return window[-1] > window[0] and rises >= consecutive - 1


def judge(counts, consecutive=DEFAULT_CONSECUTIVE):
    """The ``Growth`` of the ``StepCount``s ``counts`` (their warm-up left out);
    None when there are too few steps to judge (fewer than ``consecutive``
    after the warm-up, and fewer than 3)."""
    judged = counts[WARM_UP:]
    consecutive = min(consecutive, len(judged) - 1)
    if consecutive < 2:
        return None
    window = judged[-(consecutive + 1):]
    first, last = window[0], window[-1]

    steps = max(last.step - first.step, 1)  # counts may skip steps (see _Watch._step)

    def per_step(name):
        return (getattr(last, name) - getattr(first, name)) / steps

    old_nodes = [count.old_nodes for count in judged]
    old_tensors = [count.old_graph_tensors for count in judged]
    plain = [count.plain_tensors for count in judged]
    leaking = _persists(old_nodes, consecutive) or _persists(old_tensors, consecutive)
    rss = per_step("rss") if first.rss is not None and last.rss is not None else None
    return Growth(leaking=leaking, steps=steps, nodes=per_step("old_nodes"),
                  graph_tensors=per_step("graph_tensors"), graph_bytes=per_step("graph_bytes"),
                  plain_tensors=per_step("plain_tensors"), plain_bytes=per_step("plain_bytes"),
                  rss=rss, detached_cache=not leaking and _persists(plain, consecutive),
                  hooks=per_step("hooks"),
                  hooks_pile_up=not leaking and _persists([count.hooks for count in judged],
                                                          consecutive))


class _Watch:
    """Counts at each training step, follows the loops and backward calls,
    stops the script at the step budget, and finds the holders once, at the
    end, while the script's frames are still alive."""

    def __init__(self, module, script_name, loop_lines, loop_depths, steps, consecutive,
                 every_step=False):
        from dezero_mini.memory.torch_census import Census

        self.module, self.script_name, self.steps = module, script_name, steps
        self.consecutive = consecutive
        self.every_step = every_step
        self.ours = self.theirs = self.last_cost = 0.0  # seconds: watching, the script, a count
        self.returned = None  # when the last step hook returned
        self.pid = os.getpid()  # DataLoader workers (forked) are other processes: not watched
        try:
            import psutil

            process = psutil.Process()
        except ImportError:  # (a browser): no resident memory to read
            process = None
        self.census = Census(process)
        self.optimizer = StepSeries("the optimizer's steps", "step")
        self.backward = StepSeries("the backward() calls", "backward() call")
        self.loops = [StepSeries(f"the rounds of the loop at {script_name}:{line}", "step")
                      for line in loop_lines]
        self.loop_depths = loop_depths
        self.fresh = [True] * len(loop_lines)  # the loop's next round is its first of this run
        self.backward_at_round = [0] * len(loop_lines)
        self.backward_calls = 0
        self.rounds = 0  # of any loop of the script
        self.rounds_at_backward = 0
        self.training_started = False
        self.finding = None  # the holders and bytes, found once

    # --- the sources of steps

    def on_optimizer_step(self, optimizer, args, kwargs):
        if os.getpid() == self.pid:
            self._step(self.optimizer)

    def on_backward(self):
        if os.getpid() != self.pid:
            return
        self.backward_calls += 1
        seen = self.rounds != self.rounds_at_backward
        self.rounds_at_backward = self.rounds
        if not seen and not self.optimizer.steps and self.backward_calls > 1:
            self._step(self.backward)

    def on_enter(self, number):
        self.fresh[number] = True

    def on_round(self, number):
        """Loop ``number`` starts a round; unless it is the first of this run
        of the loop, the previous round ended: a training step when a backward
        ran in it (and the optimizer does not mark the steps)."""
        if os.getpid() != self.pid:
            return
        self.rounds += 1
        backward_calls = self.backward_calls
        trained = backward_calls != self.backward_at_round[number]
        self.backward_at_round[number] = backward_calls
        if self.fresh[number]:
            self.fresh[number] = False
            return
        if self.optimizer.steps:  # the optimizer marks the steps
            return
        series = self.loops[number]
        if trained:
            series.training = True
            self._step(series)
        elif not backward_calls and len(series.counts) < IDLE_ROUNDS_FACTOR * self.steps:
            series.training = False
            self._step(series)

    def _step(self, series):
        """A step of ``series``: count it, unless counting now would make
        watching cost more than ``MAX_OVERHEAD`` of the script's own time
        (then the step is skipped: a leak still grows at the next count).
        The first steps, enough for a verdict, are always counted."""
        started = time.process_time()
        if self.returned is not None:
            self.theirs += started - self.returned
        series.steps += 1
        starting = series.training and not self.training_started
        if starting:
            self.training_started = True
            for loop in self.loops:  # the rounds of loops that never trained are data loading
                if not loop.training:
                    loop.counts.clear()
        if starting or not self.census.started:
            # Everything alive now is the program before the step counted next: its
            # objects are left out of the counts (again when idle loops started it).
            self.census.start(series.steps)
            self.returned = time.process_time()  # (starting is paid once, not per step)
            return
        if self.every_step or len(series.counts) <= WARM_UP + self.consecutive or \
                self.ours + self.last_cost <= MAX_OVERHEAD * self.theirs:
            series.counts.append(self.census.take(series.steps))
            self.last_cost = time.process_time() - started
        self.returned = time.process_time()
        self.ours += self.returned - started
        if series.training and series.steps >= self.steps:
            self.conclude()
            raise _BudgetReached()

    def followed(self):
        """The series to judge: the optimizer's steps where there were any,
        else the loop that trained most (the outermost of equals), else the
        backward calls, else the loop that went round most."""
        if self.optimizer.steps:
            return self.optimizer
        trained = [(len(loop.counts), -depth, loop)
                   for loop, depth in zip(self.loops, self.loop_depths)
                   if loop.training and loop.counts]
        if trained:
            return max(trained, key=lambda item: item[:2])[2]
        if self.backward.counts:
            return self.backward
        idle = [loop for loop in self.loops if loop.counts]
        return max(idle, key=lambda loop: len(loop.counts), default=None)

    def conclude(self):
        """Judge the series followed and, when it grows, find what holds
        the growth, now, while the script's frames are alive."""
        if self.finding is not None or os.getpid() != self.pid:
            return
        series = self.followed()
        growth = judge(series.counts, self.consecutive) if series else None
        self.finding = Finding(series=series, growth=growth)
        if growth is not None and (growth.leaking or growth.detached_cache
                                   or growth.hooks_pile_up):
            from dezero_mini.memory.torch_findings import find_holders

            find_holders(self.finding, self.census, self.module, self.consecutive)

    def hard_exit(self, real_exit):
        """A stand-in for ``os._exit`` while the script runs: judge first
        (a forked child exits as it asked)."""

        def judge_then_raise(code):
            if os.getpid() != self.pid:
                real_exit(code)
            self.conclude()
            raise _HardExit(code)

        return judge_then_raise


@dataclass
class Holder:
    """One holder of the growth: its ``path`` (``trainer.history[29]``),
    ``root`` (``a global of train.py``), ``links`` (``Trainer -> list ->
    Tensor``), ``kind`` (for the fix), ``lines`` that store into it,
    whether the leaked tensors are 0-d (``scalar``), what holds the root
    when it is a suspended generator or coroutine (``held_by``), and how
    many results or hooks it has (``size``: of a cache, a hook dict)."""

    path: str
    root: str
    links: str
    kind: str
    lines: list
    scalar: bool
    held_by: object = None
    size: object = None


@dataclass
class Finding:
    """The verdict of a run: the ``series`` followed, its ``growth``, and,
    when something grows, its ``holders``, the bytes kept per step, each a
    ``{device: bytes}`` (``held_per_step``: the tensors with a graph that
    the holder keeps; ``saved_per_step``: what their graphs' nodes saved for
    backward besides those), how many of the nodes made in the steps judged
    had their saved tensors freed by backward (``freed_nodes`` of
    ``window_nodes``), and the leaked tensors and nodes (``tensors``,
    ``nodes``)."""

    series: object
    growth: object
    holders: list = field(default_factory=list)
    saved_per_step: dict = field(default_factory=dict)
    held_per_step: dict = field(default_factory=dict)
    freed_nodes: int = 0
    window_nodes: int = 0
    tensors: int = 0
    nodes: int = 0
    #: what kind of object holds the growth when no holder is named
    unnamed: str = ""


@dataclass
class ScriptRun:
    """How a watched script ran: ``finding`` (the verdict), ``stopped`` (by
    the step budget), ``error`` (the script's own exception), ``exit_code``
    (of ``sys.exit``; None when it ended by itself), ``exit_message``
    (``sys.exit("text")``), ``cut_off`` (``os._exit``), ``seconds`` (of the
    run) and ``counts`` of every series."""

    finding: object = None
    stopped: bool = False
    error: object = None
    exit_code: object = None
    exit_message: object = None
    cut_off: bool = False
    seconds: float = 0.0

    @property
    def series(self):
        return self.finding.series if self.finding else None


def watch_script(path, source=None, script_args=(), steps=DEFAULT_STEPS,
                 consecutive=DEFAULT_CONSECUTIVE, every_step=False):
    """Run the PyTorch script ``path`` as ``__main__`` (with ``script_args``
    in ``sys.argv``), counting what it holds at each training step, until it
    ends or ``steps`` training steps have run, and judge it. SyntaxError when
    it cannot be compiled; ImportError when torch is missing."""
    import torch
    import torch.optim.optimizer as optimizer_module

    from dezero_mini.memory.torch_holders import count_atexit_registrations

    path = Path(path)
    source = path.read_bytes() if source is None else source
    code, loops = compile_with_loop_marks(source, str(path), mark_entries=True)
    module = new_main_module(path)
    watch = _Watch(module, path.name, [loop.line for loop in loops],
                   [loop.depth for loop in loops], steps, consecutive, every_step)
    module.__dict__[ROUND] = watch.on_round
    module.__dict__[ENTER] = watch.on_enter
    handle = optimizer_module.register_optimizer_step_post_hook(watch.on_optimizer_step)
    real_backward = torch.autograd.backward

    def backward(*args, **kwargs):
        result = real_backward(*args, **kwargs)
        watch.on_backward()
        return result

    torch.autograd.backward = backward
    count_atexit_registrations()  # (atexit keeps them in C: only its count grows)
    real_exit = os._exit
    os._exit = watch.hard_exit(real_exit)
    run = ScriptRun()
    started = time.perf_counter()
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
        torch.autograd.backward = real_backward
        handle.remove()
    try:
        if os.getpid() == watch.pid:
            watch.conclude()  # (done already when the budget or os._exit ended the script)
    finally:
        watch.census.stop()
        if run.error is not None:  # the frames of its traceback were holders: let them go
            gc.collect()
    run.finding = watch.finding
    run.seconds = time.perf_counter() - started
    return run


# The memory plot lives in torch_plot; lesson 07 imports it from here.
from dezero_mini.memory.torch_plot import TorchRecord, plot_torch_runs, record_torch_script  # noqa: E402,F401,I001

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
