"""The memory plot of a PyTorch loop: what grows, step by step, and what is cached on purpose.

Three panels, one point per training step: the autograd nodes that outlive
their step and the tensors with a graph (a leak of graphs rises here), the
bytes of the tensors with a graph and of those without one (a cache of
detached values rises in the second only), and resident memory since the
first step (device memory too, on a GPU), which rises for both and cannot
tell them apart on its own.

* ``record_torch_script(path, ...)``: run a script, return its ``TorchRecord``;
* ``plot_torch_runs(records)``: the figure of one or more records;
* ``write_plot(path, series, label)``: the figure of a watched run, written
  whole or not at all (``leaks --plot FILE``).
"""
import io
import sys
from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class TorchRecord:
    """A PyTorch loop, step by step: ``rss`` (bytes, or None without psutil),
    ``device`` (bytes, or None without a GPU), the autograd ``nodes`` that
    outlived their step, ``saved_bytes`` (the bytes of the tensors with a
    graph), ``graph_tensors`` and ``plain_bytes`` (the tensors without a graph)."""

    label: str
    rss: list
    device: list
    nodes: list
    saved_bytes: list
    graph_tensors: list = field(default_factory=list)
    plain_bytes: list = field(default_factory=list)


def record_of(series, label):
    """The ``TorchRecord`` of a watched series of ``StepCount``s."""
    counts = series.counts
    return TorchRecord(label=label, rss=[count.rss for count in counts],
                       device=[count.device for count in counts],
                       nodes=[count.old_nodes for count in counts],
                       saved_bytes=[count.graph_bytes for count in counts],
                       graph_tensors=[count.graph_tensors for count in counts],
                       plain_bytes=[count.plain_bytes for count in counts])


def record_torch_script(path, *script_args, steps=50, label=None):
    """Run the PyTorch script ``path`` for ``steps`` steps and return its
    ``TorchRecord``. RuntimeError when the script fails or makes no step."""
    from dezero_mini.memory.torch_leaks import watch_script

    run = watch_script(path, script_args=script_args, steps=steps + 1,  # the first starts the watch
                       every_step=True)
    if run.error is not None:
        raise RuntimeError(f"{Path(path).name} raised {type(run.error).__name__}: "
                           f"{run.error}") from run.error
    if run.series is None or not run.series.counts:
        raise RuntimeError(f"{Path(path).name} made no training step and no loop round")
    return record_of(run.series, label or " ".join([Path(path).name, *script_args]))


def plot_torch_runs(records, title="A PyTorch loop, step by step"):
    """Side by side, for each ``TorchRecord``: what outlives its step, the
    bytes with and without a graph, and resident memory growth (device bytes
    too on a GPU), per step. Returns the matplotlib figure."""
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(1, 3, figsize=(15, 3.9))
    with_device = any(value is not None for record in records for value in record.device)
    for record in records:
        steps = range(1, len(record.nodes) + 1)
        axes[0].plot(steps, record.nodes, label=f"{record.label}: nodes kept")
        if record.graph_tensors:
            axes[0].plot(steps, record.graph_tensors, linestyle=":",
                         label=f"{record.label}: tensors with a graph")
        axes[1].plot(steps, [value / 2**10 for value in record.saved_bytes],
                     label=f"{record.label}: with a graph (kept graphs)")
        if record.plain_bytes:
            axes[1].plot(steps, [value / 2**10 for value in record.plain_bytes], linestyle="--",
                         label=f"{record.label}: without (detached caches)")
        if all(value is not None for value in record.rss):
            axes[2].plot(steps, [(value - record.rss[0]) / 2**20 for value in record.rss],
                         label=f"{record.label}: resident")
        if with_device:
            axes[2].plot(steps, [(value or 0) / 2**20 for value in record.device],
                         linestyle="--", label=f"{record.label}: device (untested without a GPU)")
    axes[0].set(title="what outlives its step (graphs kept)", xlabel="training step",
                ylabel="autograd nodes, tensors")
    axes[1].set(title="tensors made since the first step, by storage", xlabel="training step",
                ylabel="KiB")
    axes[2].set(title="resident memory, growth since the first step", xlabel="training step",
                ylabel="MiB")
    for axis in axes:
        axis.legend(fontsize="small")
    figure.suptitle(title)
    figure.tight_layout()
    return figure


def write_plot(path, series, label):
    """Draw the watched ``series`` into the image file ``path`` (its suffix
    says the format), atomically."""
    import matplotlib

    if "matplotlib.pyplot" not in sys.modules:
        matplotlib.use("Agg")  # no window: a file is asked for
    import matplotlib.pyplot as plt

    from dezero_mini.atomic import write_bytes

    figure = plot_torch_runs([record_of(series, label)],
                             title=f"{label}: {series.name}, step by step")
    buffer = io.BytesIO()
    figure.savefig(buffer, format=Path(path).suffix.lstrip(".").lower())
    plt.close(figure)
    write_bytes(path, buffer.getvalue())
