"""The command line: ``python -m dezero_mini`` (installed as ``dezero_mini``).

The commands, one per thing the course does:

* ``train``: train a small network with the finished framework, and watch
  its memory stay flat epoch after epoch;
* ``memory``: record the memory of the standard training run for one or
  more stages of the course, and write the plot and the figures as CSV;
* ``graph``: draw the reference graph of a small computation, before or
  after the user lets go of its result;
* ``leaks``: run the learner's own script and say which graphs its loop
  keeps alive, and through which name (exit 1 when they grow);
* ``start`` and ``check`` (in ``cli_check``): rebuild a stage yourself and
  hold your file to the stage's memory contract;
* ``grade`` and ``progress`` (in ``cli_grade``): a class's submissions of a
  stage into one CSV, and a learner's own files, stage by stage.

``main(argv)`` returns the exit code: 0 when it worked, 1 when something it
needs is missing (Graphviz's ``dot``), 2 for arguments it cannot use (the
usual code of command-line tools; argparse exits with it by itself), 130
when interrupted with Ctrl-C, 143 when ended by SIGTERM and 141 when the
reader of its output went away (``... | head``), as Unix tools report. A
file it was writing is then left as it was before (``dezero_mini.atomic``).
"""
import argparse
import sys
from pathlib import Path

import dezero_mini
from dezero_mini.cli_check import add_check, add_start
from dezero_mini.cli_grade import add_grade, add_progress
from dezero_mini.cli_guard import (
    EXIT_SIGPIPE,
    EXIT_SIGTERM,
    Terminated,
    output_target_problem,
    sigterm_raises,
    silence_closed_stdout,
)
from dezero_mini.cli_leaks import run_leaks
from dezero_mini.cli_memory import DEFAULT_GRAPH_OUT, DEFAULT_STAGES, run_graph, run_memory
from dezero_mini.cli_train import ACTIVATIONS, DEFAULT_LR, OPTIMIZERS, TASKS, run_train
from dezero_mini.memory import STAGES, GraphvizNotFound, load_stage

GRAPH_FORMATS = (".svg", ".png", ".pdf", ".dot", ".gv")  # what ReferenceGraph.save writes
PLOT_FORMATS = (".png", ".svg", ".pdf")
STAGE_NUMBERS = f"{STAGES[0][0]} to {STAGES[-1][0]}" if STAGES else "none found"


# --- Argument types: each names what was wrong; argparse adds the option ---------
def positive_int(text):
    """A whole number of at least 1 (epochs, batches, sizes)."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a whole number of at least 1, got {text!r}")
    return value


def at_least_two(text):
    """A whole number of at least 2 (``leaks --consecutive``: growth is
    judged on what the iterations between the first and the last made)."""
    value = positive_int(text)
    if value < 2:
        raise argparse.ArgumentTypeError(f"must be a whole number of at least 2, got {text!r}")
    return value


def seed_int(text):
    """A seed for NumPy's random generator: a whole number from 0 to 2**32 - 1."""
    try:
        value = int(text)
    except ValueError:
        value = -1
    if not 0 <= value < 2**32:
        raise argparse.ArgumentTypeError(
            f"must be a whole number from 0 to 4294967295, got {text!r}")
    return value


def positive_float(text):
    """A number above zero (a learning rate)."""
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not value > 0 or value == float("inf"):  # also refuses nan
        raise argparse.ArgumentTypeError(f"must be a number above 0, got {text!r}")
    return value


def layer_sizes(text):
    """Hidden layer widths separated by commas: ``"10"`` or ``"30,30"``."""
    parts = [part.strip() for part in text.split(",")]
    if not all(part.isdecimal() and int(part) > 0 for part in parts):
        raise argparse.ArgumentTypeError(
            f"must be one or more widths above 0 separated by commas, like 10 or 30,30; "
            f"got {text!r}")
    return tuple(int(part) for part in parts)


def stage_modules(text):
    """One or more stages separated by commas, as modules (``"1,dezero_mini"``)."""
    modules = []
    for part in text.split(","):
        try:
            modules.append(load_stage(part.strip()))
        except ValueError as error:  # load_stage's message lists the valid stages
            raise argparse.ArgumentTypeError(str(error)) from None
    return modules


def one_stage(text):
    """Exactly one stage, as a module."""
    if "," in text:
        raise argparse.ArgumentTypeError(f"takes one stage, got {text!r}")
    return stage_modules(text)[0]


def output_file(*suffixes):
    """An argument type for a file to write: one of ``suffixes``, not a folder,
    in a folder that exists and that the user can write to (checked before any
    long run, not after it)."""

    def convert(text):
        problem = output_target_problem(text, suffixes)
        if problem is not None:
            raise argparse.ArgumentTypeError(problem)
        return Path(text)

    return convert


# --- The parser ---------------------------------------------------------------------
class _HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Keeps the line breaks of descriptions and examples (option help is
    still wrapped to the width of the terminal)."""


def _subparser(commands, name, summary, description):
    return commands.add_parser(name, help=summary, description=description,
                               formatter_class=_HelpFormatter)


def _defaults_text(defaults, field=None):
    """``default: 0.3 for sgd, 0.01 for adam``: a default that depends on a choice."""
    values = {name: getattr(value, field) if field else value for name, value in defaults.items()}
    return "default: " + ", ".join(f"{value} for {name}" for name, value in values.items())


def _add_train(commands):
    parser = _subparser(commands, "train", "train a small network and watch its memory", (
        "Train a multi-layer perceptron with dezero_mini and show, epoch by epoch,\n"
        "the loss, the accuracy and the memory: how many Variables and Functions\n"
        "are alive, and the bytes that Python and NumPy hold (tracemalloc).\n"
        "Both stay flat: each batch's graph is freed once the batch is done.\n\n"
        "examples:\n"
        "  %(prog)s\n"
        "  %(prog)s --dataset spiral --hidden 10 --activation sigmoid --optimizer sgd --epochs 300\n"
        "  %(prog)s --dataset mnist --data-dir ~/mnist --save mnist.npz"))
    parser.add_argument("--dataset", choices=list(TASKS), default="mnist-sample", help=(
        "mnist-sample: 5,000 real MNIST digits (4,000 to train, 1,000 to test) shipped "
        "with dezero_mini (read offline, checked by its SHA-256); "
        "spiral: 300 points in 3 classes (made in code); sincurve: predict the next value "
        "of a noisy sine wave (regression); mnist: the full MNIST, read from "
        "--data-dir (never downloaded). Default: %(default)s."))
    parser.add_argument("--data-dir", type=Path, metavar="DIR", help=(
        "for --dataset mnist: the folder with train-images-idx3-ubyte.gz and "
        "train-labels-idx1-ubyte.gz (and, to measure the test accuracy, the t10k- files); "
        "the names without .gz work too"))
    parser.add_argument("--epochs", type=positive_int, metavar="N", help=(
        f"passes over the training set ({_defaults_text(TASKS, 'epochs')})"))
    parser.add_argument("--batch-size", type=positive_int, metavar="N", help=(
        f"samples per batch ({_defaults_text(TASKS, 'batch_size')})"))
    parser.add_argument("--hidden", type=layer_sizes, default="30,30", metavar="SIZES", help=(
        "widths of the hidden layers, separated by commas (default: %(default)s)"))
    parser.add_argument("--activation", choices=list(ACTIVATIONS), default="relu", help=(
        "the function between layers (default: %(default)s)"))
    parser.add_argument("--optimizer", choices=list(OPTIMIZERS), default="adam", help=(
        "how the weights are updated (default: %(default)s)"))
    parser.add_argument("--lr", type=positive_float, help=(
        f"learning rate ({_defaults_text(DEFAULT_LR)})"))
    parser.add_argument("--seed", type=seed_int, default=0, metavar="N", help=(
        "seeds the initial weights and the order of the batches: the same seed gives "
        "the same run (default: %(default)s)"))
    parser.add_argument("--save", type=output_file(".npz"), metavar="PATH.npz", help=(
        "write the trained weights to this file (model.load_weights reads it)"))
    parser.set_defaults(run=run_train, parser=parser)


def _add_memory(commands):
    parser = _subparser(commands, "memory", "plot the memory of stages of the course", (
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
                        metavar="PATH", help="the plot: .png, .svg or .pdf (default: %(default)s)")
    parser.add_argument("--csv", type=output_file(".csv"), metavar="PATH", help=(
        "the figures, one row per batch, one file per stage (default: the plot's name, "
        "ending in .csv). With several stages, each file name gets the stage's name added: "
        "memory_step01_leaking_graph.csv, memory_dezero_mini.csv. "
        "TrainingRecord.from_csv reads them back."))
    parser.add_argument("--gc", action="store_true", help=(
        "keep the cyclic garbage collector on while recording (stage 2 then shows a "
        "sawtooth instead of a slope)"))
    parser.set_defaults(run=run_memory, parser=parser)


def _add_graph(commands):
    parser = _subparser(commands, "graph", "draw the objects that keep memory alive", (
        "Compute y = sigmoid(x @ W + b) with the framework of a stage and draw\n"
        "its reference graph: every Variable and Function alive, with the size\n"
        "of its arrays; every reference, labelled with the attribute that holds\n"
        "it; strong references solid, weak references dashed, references on a\n"
        "cycle red, and objects that nothing reaches any more (garbage) grey.\n\n"
        "examples:\n"
        "  %(prog)s --stage 2 --after-del --out stage02.svg\n"
        "  %(prog)s --stage 1 --dot > stage01.dot"))
    parser.add_argument("--stage", type=one_stage, default="dezero_mini", help=(
        f"the stage: its number ({STAGE_NUMBERS}), its name, or dezero_mini "
        "(default: %(default)s)"))
    parser.add_argument("--after-del", action="store_true", help=(
        "draw the picture after `del y`, keeping the names x, W and b. The cyclic "
        "garbage collector is off, so garbage stays to be seen."))
    parser.add_argument("--out", type=output_file(*GRAPH_FORMATS), default=DEFAULT_GRAPH_OUT,
                        metavar="PATH", help=(
        "the picture; its format comes from the name: .svg, .png, .pdf (these need "
        "Graphviz's dot program) or .dot (default: %(default)s)"))
    parser.add_argument("--dot", action="store_true", help=(
        "print the DOT text instead of writing a picture (needs no Graphviz)"))
    parser.set_defaults(run=run_graph, parser=parser)


def _add_leaks(commands):
    parser = _subparser(commands, "leaks", "find what your own training loop keeps alive", (
        "Run SCRIPT (with ARGS) as python would, and watch the Variables and\n"
        "Functions of dezero_mini or of a stage module that it makes. An\n"
        "iteration is one round of a for or while loop of the script itself\n"
        "(each loop judged on its own), or one backward() call where the loop\n"
        "is in another module. When the live objects have grown at several\n"
        "iterations in a row, and at the end, print what the\n"
        "loop keeps alive: objects and bytes per iteration, and the shortest\n"
        "chain of references from a name of the script (total_loss,\n"
        "trainer.history['loss'][3], a closure, ...) to the largest surviving graph.\n\n"
        "A script that imports torch is judged by the autograd graphs that its\n"
        "names hold at each optimizer step (PyTorch keeps a graph's tensors in its\n"
        "C++ nodes, where counting Python objects cannot see them): a name whose\n"
        "graph grew at several steps in a row is reported with the graph's nodes,\n"
        "its saved bytes, and the fix that fits.\n\n"
                "exit status: the script's own when it fails (1 for an exception, N for\n"
        "sys.exit(N)); else 0 nothing grows, 1 something grows; 2 the script cannot\n"
        "be run (missing, or a syntax error)\n\n"
        "examples:\n"
        "  %(prog)s train.py\n"
        "  %(prog)s --consecutive 3 train.py --epochs 2"))
    parser.add_argument("--consecutive", type=at_least_two, default=5, metavar="N", help=(
        "report when the live objects have grown at N iterations in a row "
        "(default: %(default)s)"))
    parser.add_argument("--framework", choices=("auto", "dezero_mini", "torch"), default="auto",
                        help=("what the script uses: auto (the default) runs a script that "
                              "imports torch as a PyTorch script, any other as a dezero_mini one"))
    parser.add_argument("--steps", type=positive_int, default=30, metavar="N", help=(
        "PyTorch scripts: stop the script after N optimizer steps (or loop rounds, "
        "without an optimizer) and judge them (default: %(default)s)"))
    parser.add_argument("script", metavar="SCRIPT", help="the Python script to run")
    parser.add_argument("script_args", nargs=argparse.REMAINDER, metavar="ARGS",
                        help="arguments for the script")
    parser.set_defaults(run=run_leaks, parser=parser)


def build_parser(prog="dezero_mini"):
    """The argument parser of the command line, with its commands."""
    parser = argparse.ArgumentParser(
        prog=prog, formatter_class=_HelpFormatter,
        description=("dezero_mini: a small autograd framework, and the instruments of the\n"
                     "course \"where does the memory go?\". Run a command with --help to\n"
                     "see its options."))
    parser.add_argument("--version", action="version",
                        version=f"dezero_mini {dezero_mini.__version__}")
    commands = parser.add_subparsers(title="commands", dest="command", metavar="COMMAND")
    _add_train(commands)
    _add_memory(commands)
    _add_graph(commands)
    _add_leaks(commands)
    add_start(commands, _subparser)
    add_check(commands, _subparser)
    add_grade(commands, _subparser)
    add_progress(commands, _subparser)
    return parser


def main(argv=None, prog="dezero_mini"):
    """Run the command line with ``argv`` (default: ``sys.argv[1:]``).

    Returns the exit code. argparse itself exits (SystemExit) for --help,
    --version and bad arguments.
    """
    parser = build_parser(prog)
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help(sys.stderr)
        print(f"\n{prog}: error: choose a command: train, memory, graph, leaks, start, check, "
              "grade or progress",
              file=sys.stderr)
        return 2
    command = f"{prog} {args.command}"
    try:
        with sigterm_raises():
            return args.run(args)
    except GraphvizNotFound as error:
        print(f"{command}: error: {error}.\n"
              "To see the graph without Graphviz, use --dot: it prints the DOT text.",
              file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"\n{command}: interrupted", file=sys.stderr)
        return 130
    except Terminated:
        print(f"\n{command}: terminated (SIGTERM)", file=sys.stderr)
        return EXIT_SIGTERM
    except BrokenPipeError:
        # The reader of our output has gone (`... | head -2`): stop quietly, as
        # Unix tools do when SIGPIPE ends them.
        silence_closed_stdout()
        return EXIT_SIGPIPE
    except MemoryError:
        print(f"{command}: error: out of memory; try smaller sizes (--hidden, --batch-size, "
              "--batches) or free memory for it", file=sys.stderr)
        return 1
    except OSError as error:
        if error.filename is None:  # not a file of the user's: a defect, keep its traceback
            raise
        print(f"{command}: error: {error.strerror or error}: {error.filename}", file=sys.stderr)
        return 1
