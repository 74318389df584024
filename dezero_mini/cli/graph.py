"""The ``graph`` command: draw the objects that keep memory alive.

It builds the lessons' computation ``y = sigmoid(x @ W + b)`` with the
framework of a stage and draws its reference graph with the instruments of
``dezero_mini.memory``, before or after the user lets go of ``y``.
"""
from pathlib import Path

import numpy as np

from dezero_mini.arguments import STAGE_NUMBERS, one_stage, output_file
from dezero_mini.cli.options import command_parser, refuse_to_overwrite_inputs
from dezero_mini.memory import reference_graph, stage_label, watch
from dezero_mini.memory.probes import collector

GRAPH_FORMATS = (".svg", ".png", ".pdf", ".dot", ".gv")  # what ReferenceGraph.save writes
#: Where ``graph`` draws when no --out is given. A Path, not a string, so that
#: argparse does not check it: with --dot nothing is written, and a folder the
#: user cannot write to is no error then; run_graph checks it otherwise.
DEFAULT_GRAPH_OUT = Path("graph.svg")


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
    if not args.dot:  # the default --out too (argparse leaves a default Path unchecked)
        refuse_to_overwrite_inputs(args, [("--out", args.out)], [
            (f"the file of {stage_label(args.stage)}", getattr(args.stage, "__file__", None))])
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


def add_parser(commands):
    """Add ``graph`` to the command line's ``commands``."""
    parser = command_parser(commands, "graph", "draw the objects that keep memory alive", (
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
        "Graphviz's dot program) or .dot (default: %(default)s); never the stage's file"))
    parser.add_argument("--dot", action="store_true", help=(
        "print the DOT text instead of writing a picture (needs no Graphviz)"))
    parser.set_defaults(run=run_graph, parser=parser)
