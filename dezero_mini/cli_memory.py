"""The ``memory`` and ``graph`` commands of the command line.

Both only drive the instruments of ``dezero_mini.memory`` (the recorder,
the plot, the reference graph) the way the notebooks do, and print what a
learner should look at.
"""
from pathlib import Path

import numpy as np

from dezero_mini.atomic import atomic_write
from dezero_mini.cli_guard import format_size, machine_memory, output_target_problem
from dezero_mini.memory import (
    load_stage,
    plot_training,
    record_training,
    reference_graph,
    stage_label,
    watch,
)
from dezero_mini.memory.probes import collector
from dezero_mini.memory.recorder import SIGNALS
from dezero_mini.memory.refgraph import format_bytes
from dezero_mini.progress import ProgressLine

#: The stages that ``memory`` compares when none is named: the first stage
#: of the course against the finished framework.
DEFAULT_STAGES = ("1", "dezero_mini")
#: Where ``graph`` draws when no --out is given. A Path, not a string, so that
#: argparse does not check it: with --dot nothing is written, and a folder the
#: user cannot write to is no error then; run_graph checks it otherwise.
DEFAULT_GRAPH_OUT = Path("graph.svg")
#: What one batch adds to a record: one 8-byte number per signal.
RECORD_BYTES_PER_BATCH = 8 * len(SIGNALS)


# --- memory ----------------------------------------------------------------------------
def run_memory(args):
    """``memory``: record each stage, then write the plot and the CSV files."""
    import matplotlib

    matplotlib.use("Agg")  # a file, never a window
    import matplotlib.pyplot as plt

    groups = args.stage or [[load_stage(stage) for stage in DEFAULT_STAGES]]
    modules = unique(module for group in groups for module in group)
    csv_paths = csv_paths_for(args.csv or args.out.with_suffix(".csv"), modules)
    for path in csv_paths:  # the names made from --out or --csv: checked before the run too
        problem = output_target_problem(path, (".csv",))
        if problem is not None:
            args.parser.error(f"--csv {path}: {problem}")
    memory = machine_memory()
    needed = args.batches * RECORD_BYTES_PER_BATCH
    if memory and needed > memory:
        args.parser.error(
            f"--batches {args.batches} needs about {format_size(needed)} to record "
            f"({RECORD_BYTES_PER_BATCH} bytes per batch); this machine has "
            f"{format_size(memory)}: at most {memory // RECORD_BYTES_PER_BATCH:,} batches fit")
    records = []
    for module, csv_path in zip(modules, csv_paths):
        print(f"recording {stage_label(module)}: {args.batches} batches ...", flush=True)
        progress = ProgressLine()
        record = record_training(module, args.batches, gc_enabled=args.gc,
                                 on_batch=batch_progress(progress))
        progress.close()
        registry = getattr(module, "REGISTRY", None)
        if registry is not None:
            # Stage 01 remembers every object it made: forget them, as the
            # lesson does, so that they do not weigh on the next stage's run.
            registry.clear()
        record.to_csv(csv_path)
        records.append(record)
        print(record.report(label=False))
    figure = plot_training(records)
    with atomic_write(args.out) as file:
        figure.savefig(file, format=args.out.suffix.lower().lstrip("."), dpi=120)
    plt.close(figure)  # pyplot keeps every open figure alive
    for path in (args.out, *csv_paths):
        print(f"wrote {path}")
    return 0


def batch_progress(progress):
    """The recorder's ``on_batch`` for a ProgressLine: on a terminal, the line
    ``  batch 57/200`` redrawn as the batches go; elsewhere (a log), a plain
    line at each quarter of the run, so that a long run is never silent."""

    def on_batch(done, batches):
        text = f"  batch {done}/{batches}"
        quarter = max(1, batches // 4)
        if done % quarter == 0 or done == batches:
            progress.step_done(text)
        else:
            progress.update(lambda: text)

    return on_batch


def unique(modules):
    """The modules in order, each once (``--stage 3,03`` is one stage)."""
    seen, out = set(), []
    for module in modules:
        if id(module) not in seen:
            seen.add(id(module))
            out.append(module)
    return out


def csv_paths_for(path, modules):
    """One CSV file per stage: ``path`` itself for a single stage, else
    ``path`` with the stage's module name added (``memory_dezero_mini.csv``)."""
    if len(modules) == 1:
        return [path]
    return [path.with_name(f"{path.stem}_{module.__name__}{path.suffix}") for module in modules]


# --- graph -----------------------------------------------------------------------------
def example_names(module):
    """The computation of the lessons, ``y = sigmoid(x @ W + b)``, made with
    ``module``'s framework: a dict of the user's names ``x``, ``W``, ``b``, ``y``."""
    rng = np.random.RandomState(1)
    x = module.Variable(rng.randn(4, 3), name="x")
    W = module.Variable(rng.randn(3, 2), name="W")
    b = module.Variable(np.zeros(2), name="b")
    y = module.sigmoid(x @ W + b)
    y.name = "y"
    return {"x": x, "W": W, "b": b, "y": y}


def run_graph(args):
    """``graph``: build the example, optionally let go of ``y``, draw it."""
    if not args.dot and args.out is DEFAULT_GRAPH_OUT:
        problem = output_target_problem(args.out, (DEFAULT_GRAPH_OUT.suffix,))
        if problem is not None:
            args.parser.error(f"--out {args.out}: {problem}")
    title = f"{stage_label(args.stage)}: y = sigmoid(x @ W + b)"
    # With the collector off, the garbage of a reference cycle (stage 02)
    # stays to be drawn instead of vanishing at a random moment.
    with collector(False):
        names = example_names(args.stage)
        watched = None
        if args.after_del:
            watched = watch(names.pop("y"))  # the last strong reference to y goes here
            title += ", after del y"
        graph = reference_graph(names, watched, title=title)
    if args.dot:
        print(graph.source, end="")
        return 0
    graph.save(args.out)
    print("\n".join(graph.caption))
    print(f"wrote {args.out}")
    return 0
