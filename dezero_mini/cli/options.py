"""What the commands' parsers share: how a command's parser is made, the
stage argument, and the option groups of the commands that run ``check``
(``check``, ``grade``, ``progress``). The value types of the options are :mod:`dezero_mini.arguments`.
"""
import argparse
import sys

from dezero_mini.arguments import (add_sandbox_option, at_least_two, known_stage_numbers, seconds,
                                   stage_number, weights_file)
from dezero_mini.atomic import output_target_problem
from dezero_mini.contracts.bench import BATCHES, batches_problem
from dezero_mini.contracts.runner import DEFAULT_TIMEOUT, DEFAULT_TOTAL_TIMEOUT
from dezero_mini.contracts.scoring import Weights, WeightsError, display_points, select_contracts


class AtMostTheProcessors(argparse.Action):
    """``--jobs J``: more at once than the processors this process may use
    only makes each check slower (each runs a training), so that checks run
    out of their time limits and fail for the machine, not the file. Such a
    J is taken as the processors, with a note on standard error."""

    def __call__(self, parser, namespace, values, option_string=None):
        from dezero_mini.grading.batch import default_jobs  # (the processors, counted once)

        processors = default_jobs()
        if values > processors:
            print(f"{parser.prog}: note: {option_string} {values} is more than the {processors} "
                  f"processor{'s' if processors > 1 else ''} this process may use; "
                  f"running {processors} at a time", file=sys.stderr)
            values = processors
        setattr(namespace, self.dest, values)


class HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Keeps the line breaks of descriptions and examples (option help is
    still wrapped to the width of the terminal)."""


def command_parser(commands, name, summary, description):
    """The parser of one command, ``name``, added to ``commands`` (argparse's
    subparsers): ``summary`` in the list of commands, ``description`` (with
    its examples) in the command's own --help."""
    return commands.add_parser(name, help=summary, description=description,
                               formatter_class=HelpFormatter)


def add_stage_argument(parser):
    """The positional N: the stage a command works on (``check``, ``grade``, ``start``)."""
    parser.add_argument("stage", type=stage_number, metavar="N",
                        help=f"the stage ({known_stage_numbers()})")


def add_scoring_options(parser):
    """--contract and --weights: which contracts, and their points (``check``, ``grade``)."""
    parser.add_argument("--contract", action="append", metavar="NAME", help=(
        "run only this contract (repeat it for several); the others are left out of the "
        "report and of the total"))
    parser.add_argument("--weights", type=weights_file, metavar="FILE", help=(
        "points per contract, from a .toml or .json file (keys: new, inherited, "
        f"[contracts], [stages.N]); default: {display_points(Weights().new)} for a contract "
        f"new in the stage, {display_points(Weights().inherited)} for an inherited one"))


def add_run_options(parser):
    """--timeout, --total-timeout and --batches: how each check runs (``check``, ``grade``, ``progress``)."""
    parser.add_argument("--timeout", type=seconds, default=DEFAULT_TIMEOUT,
                        metavar="SECONDS", help=(
        "time allowed to load the file and to each contract (default: %(default)g)"))
    parser.add_argument("--total-timeout", type=seconds, default=DEFAULT_TOTAL_TIMEOUT,
                        metavar="SECONDS", help=(
        "time allowed to the whole check; the contracts it leaves fail as not run "
        "(default: %(default)g)"))
    parser.add_argument("--batches", type=at_least_two, default=BATCHES, metavar="N", help=(
        "batches of the training run that the memory contracts record "
        "(default: %(default)s, as in the course's tests; fewer is faster and less sure)"))


def sandbox_note(program, mode):
    """The one line that ``program`` prints (on standard error) when the file
    runs without the sandbox in ``mode`` "auto", or None."""
    from dezero_mini.contracts import bubblewrap

    problem = bubblewrap.sandbox_problem() if mode == "auto" else None
    if problem:
        return f"{program}: note: running the file without its sandbox: {problem}"
    return None


def refuse_to_overwrite_inputs(args, outputs, inputs):
    """argparse's error (exit 2) when an output of the command cannot be
    written, in the most precise words: the one check of an output
    (:func:`dezero_mini.atomic.output_target_problem`), with the command's
    inputs, so that an output that is, or links to, one of them is said to
    be the command's input (``grade --csv`` given a submission once replaced
    the student's file). Every command with an output calls it before its
    work: the argument type left a name that leads to an existing file to
    this check. ``outputs`` are ``(option, path)`` pairs, ``inputs``
    ``(what, path)`` pairs; paths that are None (an option not given) are
    left out. The suffixes are those of the option's type (``output_file``)."""
    inputs = list(inputs)
    for option, path in outputs:
        if path is None:
            continue
        problem = output_target_problem(path, output_suffixes(args.parser, option), inputs)
        if problem is not None:
            args.parser.error(f"argument {option}: {problem}")


def output_suffixes(parser, option):
    """The suffixes that the option ``option`` of ``parser`` takes (its type
    is ``arguments.output_file(...)``); () when any name will do."""
    for action in parser._actions:
        if option in action.option_strings:
            return getattr(action.type, "output_suffixes", ())
    return ()


def refuse_batches_beyond_limits(args, numbers):
    """argparse's error (exit 2) for a ``--batches`` that the checker cannot run
    for one of the stages ``numbers`` (``bench.batches_problem``): a correct
    file would fail for the checker's own memory limit, and be blamed for it."""
    for number in numbers:
        problem = batches_problem(number, args.batches)
        if problem is not None:
            args.parser.error(f"argument --batches: {problem}")


def stage_options(args):
    """Check the options that depend on the stage (``--contract``, ``--weights``,
    ``--batches``) against it; argparse's error (exit 2) when they do not fit.
    Returns ``(names, weights)`` for ``check_file``."""
    refuse_batches_beyond_limits(args, [args.stage])
    try:
        select_contracts(args.stage, args.contract)
        if args.weights is not None:
            args.weights.points_at(args.stage, select_contracts(args.stage, args.contract))
    except WeightsError as error:
        args.parser.error(f"argument --weights: {error}")
    except ValueError as error:
        args.parser.error(f"argument --contract: {error}")
    return args.contract, args.weights
