"""Plots of the memory signals: per batch, and op by op within one batch.

matplotlib is imported inside the functions, so ``import dezero_mini.memory``
stays light. Figures are made with pyplot (so that a notebook's inline
backend shows them); they are returned, never shown: in a notebook write
``fig = plot_training(...)`` (the inline backend displays the figure at the
end of the cell; returning it as the cell's value would show it twice). In a
script or a test, ``plt.close(fig)`` when done: pyplot keeps every open
figure alive.
"""
import os
import sys

from dezero_mini.environment import import_matplotlib
from dezero_mini.validation import expect_each

MIB = 1024 * 1024

# signal -> (panel title, y label, divisor)
_SIGNALS = {
    "live_objects": ("Live framework objects", "live Variables + Functions (objects)", 1),
    "live_variables": ("Live Variables", "live Variables (objects)", 1),
    "live_functions": ("Live Functions", "live Functions (objects)", 1),
    "traced_current": ("Traced memory after each batch", "tracemalloc current (MiB)", MIB),
    "traced_peak": ("Peak traced memory within each batch", "tracemalloc peak within batch (MiB)", MIB),
    "rss": ("Process memory (RSS)", "process RSS (MiB)", MIB),
    "gc_collections": ("Automatic collections", "gc collections", 1),
    "gc_collected": ("Objects freed by automatic collections", "objects freed by gc (objects)", 1),
    "loss": ("Training loss", "loss (mean squared error)", 1),
    "seconds": ("Time per batch", "time per batch (s)", 1),
}


def _pyplot():
    """pyplot, on the Agg backend when there is nowhere to show a window.

    Inside IPython/Jupyter, or when a backend was chosen already (pyplot
    imported, MPLBACKEND set), the choice is left alone."""
    matplotlib = import_matplotlib()
    headless = sys.platform.startswith("linux") and not (
        os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"))
    chosen = "matplotlib.pyplot" in sys.modules or os.environ.get("MPLBACKEND")
    if headless and not chosen and "IPython" not in sys.modules:
        matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _as_list(items):
    return list(items) if isinstance(items, (list, tuple)) else [items]


def _colors(n):
    matplotlib = import_matplotlib()

    cycle = matplotlib.rcParams["axes.prop_cycle"].by_key().get("color", ["C0"])
    return [cycle[k % len(cycle)] for k in range(n)]


def plot_training(records, signals=("live_objects", "traced_current", "rss"), title=None):
    """One panel per signal, side by side; one line per TrainingRecord.

    records: a TrainingRecord or a list of them (their labels go in the
    legend). signals: names of ``TrainingRecord`` signals (see
    ``recorder.SIGNALS``); a record that lacks a signal (RSS not recorded)
    is left out of that panel. Returns the matplotlib Figure.
    """
    from dezero_mini.memory.recorder import TrainingRecord

    records = expect_each(records, TrainingRecord, "plot_training", "records",
                          "a TrainingRecord (what record_training returns)")
    plt = _pyplot()
    signals = _as_list(signals)
    unknown = [s for s in signals if s not in _SIGNALS]
    if unknown:
        raise ValueError(f"cannot plot {unknown}; signals: {', '.join(_SIGNALS)}")
    width = min(4.2 * len(signals), 13.0)  # fits a notebook's width
    fig, axes = plt.subplots(1, len(signals), figsize=(width, 3.6), squeeze=False,
                             constrained_layout=True)
    colors = _colors(len(records))
    for ax, signal in zip(axes[0], signals):
        panel_title, ylabel, divisor = _SIGNALS[signal]
        why_missing = set()
        for record, color in zip(records, colors):
            values = getattr(record, signal, None)
            if values is None:
                if signal == "rss" and getattr(record, "rss_missing", None):
                    why_missing.add(record.rss_missing)
                continue
            ax.plot(range(len(values)), values / divisor, color=color, label=record.label,
                    linewidth=1.6)
        ax.set_title(panel_title, fontsize=10)
        ax.set_xlabel("batch")
        ax.set_ylabel(ylabel)
        ax.grid(alpha=0.3)
        if ax.get_lines():
            ax.legend(fontsize=8)
        else:
            ax.text(0.5, 0.5, "not recorded" + "".join(f"\n({why})" for why in sorted(why_missing)),
                    transform=ax.transAxes, ha="center", color="gray")
    if title is None:
        title = "Memory across batches: " + " vs ".join(r.label for r in records)
    fig.suptitle(title)
    return fig


def plot_timeline(timelines, title=None):
    """Traced memory op by op during one training batch, one line per Timeline.

    Forward samples are filled circles, backward samples open triangles, the
    start of backward a dotted vertical line; each timeline's backward peak
    (tracemalloc's peak during ``backward()``, which includes temporaries
    inside ops that no sample sees) is a dashed horizontal line. Returns the
    matplotlib Figure.
    """
    plt = _pyplot()
    from matplotlib.lines import Line2D

    from dezero_mini.memory.timeline import Timeline

    timelines = expect_each(timelines, Timeline, "plot_timeline", "timelines",
                            "a Timeline (what record_step_timeline returns)")
    fig, ax = plt.subplots(figsize=(9.0, 4.2), constrained_layout=True)
    colors = _colors(len(timelines))
    for timeline, color in zip(timelines, colors):
        traced = timeline.traced / MIB
        phases = timeline.phases
        index = range(len(traced))
        ax.plot(index, traced, color=color, linewidth=1.4, label=timeline.label)
        fwd = [k for k, p in enumerate(phases) if p == "forward"]
        bwd = [k for k, p in enumerate(phases) if p == "backward"]
        ax.plot(fwd, traced[fwd], "o", color=color, markersize=4)
        ax.plot(bwd, traced[bwd], "^", color=color, markersize=5, markerfacecolor="none")
        if bwd:
            ax.axvline(bwd[0] - 0.5, color=color, linestyle=":", linewidth=1)
        ax.axhline(timeline.backward_peak / MIB, color=color, linestyle="--", linewidth=1,
                   label=f"{timeline.label}: backward peak {timeline.backward_peak / MIB:.2f} MiB")
    handles, _ = ax.get_legend_handles_labels()
    handles += [
        Line2D([], [], color="gray", marker="o", linestyle="none", markersize=4,
               label="after a forward op"),
        Line2D([], [], color="gray", marker="^", linestyle="none", markerfacecolor="none",
               label="start of an op's backward"),
    ]
    ax.legend(handles=handles, fontsize=8, loc="upper left")
    longest = max(timelines, key=lambda t: len(t.events))
    if len(longest.events) <= 60:  # name the ops while the names stay legible
        ax.set_xticks(range(len(longest.events)))
        ax.set_xticklabels(longest.ops, rotation=90, fontsize=7)
    ax.set_xlabel("operation, in the order they ran (forward, then backward)")
    ax.set_ylabel("tracemalloc current above step start (MiB)")
    ax.grid(alpha=0.3)
    if title is None:
        title = "Memory op by op in one training batch: " + " vs ".join(t.label for t in timelines)
    ax.set_title(title)
    return fig
