"""Play with a lesson's memory plot and reference graph: ``explore(3)``.

Each lesson has one cell that calls ``explore(N)``. What the reader may
change (the stage, the number of batches, the batch size, the collector,
``retain_grad``, ...) and what is drawn is *data*: an ``Exploration`` in
``dezero_mini/memory/explorations/stageNN.py``. A new stage gets its
interactive cell by adding that module; nothing here changes.

In Jupyter with ipywidgets installed, ``explore`` shows the controls, and
every change redraws the memory plot and the reference graph. Where no one
can turn a knob (the notebooks executed by the tests and by ``make book``,
which set ``DEZERO_MINI_STATIC=1``; a kernel without ipywidgets; a plain
script) it shows the figure and the graph for the default values, and one
line that says how to make them interactive.
"""
from __future__ import annotations

import contextlib
import gc
import importlib
import inspect
import os
import pkgutil
import re
from dataclasses import dataclass, field
from typing import Callable, Union

import numpy as np

from dezero_mini.memory.inference import measure_inference
from dezero_mini.memory.plotting import _pyplot, plot_timeline, plot_training
from dezero_mini.memory.recorder import record_training
from dezero_mini.memory.refgraph import reference_graph, watch
from dezero_mini.memory.stages import load_stage
from dezero_mini.memory.timeline import record_step_timeline

#: Set (to anything but "" or "0") by tools/run_notebooks.py for the kernels it
#: starts: nobody is there to turn a knob, so the cell shows its static figure.
STATIC_ENV = "DEZERO_MINI_STATIC"
HOW_TO_PLAY = ("In Jupyter this cell has controls ({what}): open the notebook there (`make lab`){extra} "
               "to change them and see the plot and the graph redrawn.")


# ------------------------------------------------------------------ the controls


@dataclass(frozen=True)
class Choice:
    """One value out of ``options`` (a drop-down list)."""

    label: str
    options: tuple
    default: object

    def __post_init__(self):
        if self.default not in self.options:
            raise ValueError(f"Choice {self.label!r}: default {self.default!r} is not one of {self.options}")

    def widget(self, widgets):
        return widgets.Dropdown(options=list(self.options), value=self.default, description=self.label,
                                style={"description_width": "initial"})


@dataclass(frozen=True)
class Slider:
    """An integer from ``low`` to ``high`` in steps of ``step``."""

    label: str
    low: int
    high: int
    default: int
    step: int = 1

    def __post_init__(self):
        if not self.low <= self.default <= self.high:
            raise ValueError(f"Slider {self.label!r}: default {self.default} is not in [{self.low}, {self.high}]")

    def widget(self, widgets):
        # continuous_update=False: a run is measured once, when the slider is let go.
        return widgets.IntSlider(min=self.low, max=self.high, step=self.step, value=self.default,
                                 description=self.label, continuous_update=False,
                                 style={"description_width": "initial"})


@dataclass(frozen=True)
class Toggle:
    """On or off (a check box)."""

    label: str
    default: bool = False

    def widget(self, widgets):
        return widgets.Checkbox(value=self.default, description=self.label, indent=False)


Control = Union[Choice, Slider, Toggle]


# ------------------------------------------------------------ what is measured


def _backward_kwargs(values, module=None):
    """retain_grad / retain_graph from ``values``, those that ``module``'s
    backward takes (an earlier stage shown for comparison has neither)."""
    chosen = {name: values[name] for name in ("retain_grad", "retain_graph") if name in values}
    if module is None:
        return chosen
    accepted = inspect.signature(module.Variable.backward).parameters
    return {name: value for name, value in chosen.items() if name in accepted}


def _compared(values):
    """The stage chosen, and the one before it when ``compare`` is on."""
    stage = values["stage"]
    number = 99 if stage == "dezero_mini" else int(stage)
    if values.get("compare") and 1 < number < 99:
        return [number - 1, stage]
    return [stage]


def training_plot(values, signals=("live_objects", "traced_current")):
    """Memory across batches (``record_training``), the chosen stage (and the
    previous one when ``compare`` is on). Values used: stage, batches,
    batch_size, gc_enabled, retain_grad, retain_graph, compare."""
    records = []
    for stage in _compared(values):
        module = load_stage(stage)
        kwargs = _backward_kwargs(values, module) if stage == values["stage"] else {}
        records.append(record_training(
            module, values.get("batches", 40), gc_enabled=values.get("gc_enabled", False), rss=False,
            batch_size=values.get("batch_size", 256), backward_kwargs=kwargs,
            count_objects="live_objects" in signals))
        _clear_registry(module)
        gc.collect()  # stage 01's graphs, cyclic garbage once the registry lets go of them
    title = (f"{values.get('batches', 40)} batches of {values.get('batch_size', 256)} samples, "
             f"collector {'on' if values.get('gc_enabled') else 'off'}")
    return plot_training(records, signals=signals, title=title)


def timeline_plot(values):
    """One training batch op by op (``record_step_timeline``). Values used:
    stage, batch_size, retain_grad, retain_graph, compare."""
    timelines = []
    for stage in _compared(values):
        module = load_stage(stage)
        kwargs = _backward_kwargs(values, module) if stage == values["stage"] else {}
        timelines.append(record_step_timeline(module, batch_size=values.get("batch_size", 256),
                                              count_objects=False, **kwargs))
    return plot_timeline(timelines, title=f"One training batch of {values.get('batch_size', 256)} "
                                          "samples, op by op")


def inference_plot(values):
    """The peak of one inference pass against the network's depth, with the
    graph and under ``no_grad()`` (``measure_inference``). Values used:
    stage, depth, batch_size."""
    plt = _pyplot()
    depths = sorted({1, 2, 4, values.get("depth", 8)} | set(range(4, values.get("depth", 8) + 1, 4)))
    fig, ax = plt.subplots(figsize=(7.5, 3.6), constrained_layout=True)
    for no_grad, label in ((False, "with the graph"), (True, "under no_grad()")):
        peaks = [measure_inference(values["stage"], no_grad=no_grad, depth=depth,
                                   batch=values.get("batch_size", 256))["peak_in_activations"]
                 for depth in depths]
        ax.plot(depths, peaks, marker="o", label=label)
    ax.set_xlabel("layers in the network")
    ax.set_ylabel("peak of one pass (activations)")
    ax.set_title(f"Stage {values['stage']}: one inference pass, batch {values.get('batch_size', 256)}")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    return fig


def loop_plot(values):
    """A training loop of ``user_loops`` leaking or fixed. Values used:
    stage, loop, fixed, batches."""
    from dezero_mini.memory.user_loops import LOOPS, record_loop

    record = record_loop(values["loop"], values["stage"], fixed=values.get("fixed", False),
                         batches=values.get("batches", 20))
    title = f"{LOOPS[values['loop']].title}, {'fixed' if values.get('fixed') else 'leaking'}"
    return plot_training([record], signals=("live_objects", "traced_current"), title=title)


#: The figures an Exploration can name by a word; it may also give a callable.
PLOTS = {"training": training_plot, "timeline": timeline_plot, "inference": inference_plot,
         "loop": loop_plot}


# ------------------------------------------------------------ the small graph


def _clear_registry(module):
    registry = getattr(module, "REGISTRY", None)
    if registry is not None:
        registry.clear()


def small_graph(values):
    """The reference graph of ``loss = sum(sigmoid(x @ W + b))`` on the chosen
    stage. Values used (each optional): ``no_grad`` (build it under
    ``no_grad()``), ``backward`` (run backward, with ``retain_grad`` and
    ``retain_graph`` when given), ``fixed`` (keep ``float(loss)`` in
    ``total_loss`` instead of the Variable), ``let_go`` (drop the name
    ``loss`` first; what survives is drawn from weak references)."""
    module = load_stage(values["stage"])
    rng = np.random.RandomState(1)
    x = module.Variable(rng.randn(4, 3), name="x")
    W = module.Variable(rng.randn(3, 2), name="W")
    b = module.Variable(np.zeros(2), name="b")
    building = module.no_grad() if values.get("no_grad") and hasattr(module, "no_grad") \
        else contextlib.nullcontext()
    with building:
        loss = module.sum(module.sigmoid(module.matmul(x, W) + b))
    loss.name = "loss"
    watched = watch(loss)
    if values.get("backward") and loss.creator is not None:
        loss.backward(**_backward_kwargs(values, module))
    names = {"x": x, "W": W, "b": b}
    if "fixed" in values:  # the loop of lesson 07: what does total_loss keep?
        names["total_loss"] = float(loss.data) if values["fixed"] else loss + 0.0
    if not values.get("let_go"):
        names["loss"] = loss
    del loss
    graph = reference_graph(names, watched, title=f"stage {values['stage']}: loss = sum(sigmoid(x @ W + b)), "
                                                  + _graph_caption(values))
    _clear_registry(module)
    gc.collect()
    return graph


def _graph_caption(values):
    words = []
    if values.get("no_grad"):
        words.append("under no_grad()")
    if values.get("backward"):
        words.append("after backward(" + ", ".join(f"{k}={v}" for k, v in _backward_kwargs(values).items()) + ")")
    if "fixed" in values:
        words.append("total_loss += float(loss)" if values["fixed"] else "total_loss = loss + 0")
    if values.get("let_go"):
        words.append("after del loss")
    return ", ".join(words) or "while the names exist"


# ------------------------------------------------------------ the exploration


@dataclass
class Exploration:
    """What the interactive cell of one lesson lets the reader change.

    stage: the lesson's stage number. controls: name -> Choice/Slider/Toggle;
    the names are the values passed to ``plot`` and ``graph`` (``stage``,
    ``batches``, ``batch_size``, ``gc_enabled``, ``retain_grad``,
    ``retain_graph``, ``compare``, ``no_grad``, ``depth``, ``loop``,
    ``fixed``, ``let_go``, ``backward``). fixed: values that the reader does
    not change but ``plot``/``graph`` read. plot: a word of ``PLOTS`` or a
    callable ``plot(values) -> Figure``. graph: ``small_graph``, another
    callable ``graph(values) -> ReferenceGraph``, or None.
    """

    stage: int
    controls: dict
    plot: Union[str, Callable] = "training"
    graph: Union[Callable, None] = small_graph
    fixed: dict = field(default_factory=dict)

    def __post_init__(self):
        if isinstance(self.plot, str) and self.plot not in PLOTS:
            raise ValueError(f"stage {self.stage}: plot {self.plot!r} is not one of {sorted(PLOTS)}")
        overlap = set(self.controls) & set(self.fixed)
        if overlap:
            raise ValueError(f"stage {self.stage}: {sorted(overlap)} are both controls and fixed values")

    def defaults(self):
        """The values of the static figure: each control's default, and the fixed values."""
        return {**self.fixed, **{name: control.default for name, control in self.controls.items()}}

    def figure(self, values):
        plot = PLOTS[self.plot] if isinstance(self.plot, str) else self.plot
        return plot(values)

    def what(self):
        """The controls in words, for the line under the static figure."""
        return "; ".join(control.label for control in self.controls.values())


_STAGE_MODULE = re.compile(r"^stage(\d\d)$")


def explorations():
    """Every lesson's Exploration, by stage number (from ``explorations/stageNN.py``)."""
    from dezero_mini.memory import explorations as package

    found = {}
    for info in pkgutil.iter_modules(package.__path__):
        if _STAGE_MODULE.match(info.name):
            data = importlib.import_module(f"{package.__name__}.{info.name}").EXPLORATION
            found[data.stage] = data
    return dict(sorted(found.items()))


def get_exploration(stage):
    """The Exploration of ``stage``; ValueError naming the stages that have one."""
    found = explorations()
    if stage not in found:
        raise ValueError(f"stage {stage} has no exploration; add dezero_mini/memory/explorations/"
                         f"stage{stage:02d}.py (stages with one: {', '.join(map(str, found))})")
    return found[stage]


# ------------------------------------------------------------ showing it


def _interactive_reason():
    """None when widgets can be shown here, else why not (in words)."""
    if os.environ.get(STATIC_ENV, "") not in ("", "0"):
        return "static"
    try:
        from IPython import get_ipython
    except ImportError:
        return "no IPython"
    shell = get_ipython()
    if shell is None or not hasattr(shell, "kernel"):
        return "no kernel"
    try:
        import ipywidgets  # noqa: F401
    except ImportError:
        return "no ipywidgets"
    return None


def _show(exploration, values, display):
    """Draw the figure and the graph for ``values`` into the current output."""
    plt = _pyplot()
    fig = exploration.figure(values)
    display(fig)
    plt.close(fig)  # shown once: the inline backend would show it again at the end of the cell
    if exploration.graph is not None:
        display(exploration.graph(values))


def explore(stage, *, interactive=None, **values):
    """The interactive cell of the lesson of ``stage``.

    ``values`` override control defaults (``explore(3, batches=20)``).
    ``interactive``: None decides by itself (widgets in a live Jupyter
    kernel with ipywidgets; the static figure where nobody can change a
    value); True/False force it. Returns None (the cell shows what it draws;
    ``explorer`` returns the widgets without showing them).
    """
    from IPython.display import Markdown, display

    exploration = get_exploration(stage)
    unknown = set(values) - set(exploration.controls)
    if unknown:
        raise TypeError(f"explore({stage}): no control named {sorted(unknown)}; "
                        f"its controls: {', '.join(exploration.controls)}")
    start = {**exploration.defaults(), **values}
    reason = _interactive_reason() if interactive is None else (None if interactive else "static")
    if reason is None:
        display(_widget_box(exploration, start, display))
        return None
    _show(exploration, start, display)
    extra = " with ipywidgets installed (`pip install -e '.[widgets]'`)" if reason == "no ipywidgets" else ""
    display(Markdown("*" + HOW_TO_PLAY.format(what=exploration.what(), extra=extra) + "*"))
    return None


def _widget_box(exploration, start, display):
    import ipywidgets as widgets

    controls = {name: control.widget(widgets) for name, control in exploration.controls.items()}
    for name, widget in controls.items():
        widget.value = start[name]
    output = widgets.Output()

    def redraw(**chosen):
        output.clear_output(wait=True)
        with output:
            _show(exploration, {**exploration.fixed, **chosen}, display)

    box = widgets.VBox([widgets.HBox(list(controls.values()), layout=widgets.Layout(flex_flow="row wrap")),
                        output])
    box.controls, box.output = controls, output
    widgets.interactive_output(redraw, controls)
    return box


def explorer(stage, **values):
    """The widgets of ``explore(stage)`` (controls above an output that every
    change redraws), not shown: ``box.controls`` by name, ``box.output``."""
    from IPython.display import display

    exploration = get_exploration(stage)
    return _widget_box(exploration, {**exploration.defaults(), **values}, display)
