"""The ``memory`` command: record the memory of stages of the course, plot it.

It only drives the instruments of ``dezero_mini.memory`` (the recorder and
the plot) the way the notebooks do, and prints what a learner should look at.
"""
import sys

from dezero_mini.arguments import STAGE_NUMBERS, output_file, positive_int, stage_modules
from dezero_mini.atomic import atomic_write
from dezero_mini.cli.guard import format_size, machine_memory
from dezero_mini.cli.options import command_parser, refuse_to_overwrite_inputs
from dezero_mini.environment import import_matplotlib
from dezero_mini.memory import load_stage, plot_training, record_training, stage_label
from dezero_mini.memory.recorder import RECORD_BYTES_PER_BATCH
from dezero_mini.progress import progress_bar

#: The stages that ``memory`` compares when none is named: the first stage
#: of the course against the finished framework.
DEFAULT_STAGES = ("1", "dezero_mini")
PLOT_FORMATS = (".png", ".svg", ".pdf")
#: What one batch adds to a record: one 8-byte number per signal.


def run_memory(args):
    """``memory``: record each stage, then write the plot and the CSV files."""
    matplotlib = import_matplotlib()
    matplotlib.use("Agg")  # a file, never a window
    import matplotlib.pyplot as plt

    groups = args.stage or [[load_stage(stage) for stage in DEFAULT_STAGES]]
    modules = unique(module for group in groups for module in group)
    csv_paths = csv_paths_for(args.csv or args.out.with_suffix(".csv"), modules)
    # Every output, the names made from --out or --csv too, checked before the run.
    refuse_to_overwrite_inputs(
        args, [("--out", args.out), *(("--csv", path) for path in csv_paths)],
        [(f"the file of {stage_label(module)}", getattr(module, "__file__", None))
         for module in modules])
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
        # On a terminal, a bar of the batches (gone when the stage's report is printed);
        # in a pipe or a log, a plain line at each quarter of the run instead.
        with progress_bar(args.batches, f"  {stage_label(module)}", stream=sys.stdout,
                          unit="batch") as bar:
            record = record_training(module, args.batches, gc_enabled=args.gc,
                                     on_batch=batch_progress(bar))
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


def batch_progress(bar, stream=None):
    """The recorder's ``on_batch`` for a ``progress_bar``: on a terminal the bar
    moves on a batch; where it is not drawn (a pipe, a log), the line
    ``  batch 50/200`` is printed at each quarter of the run, so that a long
    run is never silent."""
    def on_batch(done, batches):
        if not bar.disable:
            bar.update(done - bar.n)
            return
        quarter = max(1, batches // 4)
        if done % quarter == 0 or done == batches:
            print(f"  batch {done}/{batches}", file=stream or sys.stdout, flush=True)

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


def add_parser(commands):
    """Add ``memory`` to the command line's ``commands``."""
    parser = command_parser(commands, "memory", "plot the memory of stages of the course", (
        "Train the standard small network (the one of the lessons) with one or\n"
        "more stages of the course and record, after every batch, the live\n"
        "Variables and Functions, the traced bytes (tracemalloc) and the process\n"
        "memory (RSS). The cyclic garbage collector is off unless --gc is given,\n"
        "so a reference cycle shows as growth. Writes the plot and the figures.\n\n"
        "examples:\n"
        "  %(prog)s\n"
        "  %(prog)s --stage 2 --gc --batches 400\n"
        "  %(prog)s --stage 1,2,3,dezero_mini --out stages.png"))
    parser.add_argument("--stage", type=stage_modules, action="append", metavar="STAGE", help=(
        f"a stage: its number ({STAGE_NUMBERS}), its name (weakref_outputs, "
        "step03_weakref_outputs) or dezero_mini. Give several, separated by commas or by "
        "repeating --stage, to compare them in one plot. Default: "
        f"{','.join(DEFAULT_STAGES)}, the first stage against the finished framework."))
    parser.add_argument("--batches", type=positive_int, default=200, metavar="N", help=(
        "batches to train and record (default: %(default)s)"))
    parser.add_argument("--out", type=output_file(*PLOT_FORMATS), default="memory.png",
                        metavar="PATH", help=("the plot: .png, .svg or .pdf (default: %(default)s); "
                                              "never a stage's file"))
    parser.add_argument("--csv", type=output_file(".csv"), metavar="PATH", help=(
        "the figures, one row per batch, one file per stage (default: the plot's name, "
        "ending in .csv). With several stages, each file name gets the stage's name added: "
        "memory_step01_leaking_graph.csv, memory_dezero_mini.csv. "
        "TrainingRecord.from_csv reads them back; never a stage's file."))
    parser.add_argument("--gc", action="store_true", help=(
        "keep the cyclic garbage collector on while recording (stage 2 then shows a "
        "sawtooth instead of a slope)"))
    parser.set_defaults(run=run_memory, parser=parser)
