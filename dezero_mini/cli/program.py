"""The command line: ``python -m dezero_mini`` (installed as ``dezero_mini``).

The commands, one per thing the course does, each a module of this package
with its parser (``add_parser``) and its work (``run_<command>``):

* ``train``: train a small network with the finished framework, and watch
  its memory stay flat epoch after epoch;
* ``memory``: record the memory of the standard training run for one or
  more stages of the course, and write the plot and the figures as CSV;
* ``graph``: draw the reference graph of a small computation, before or
  after the user lets go of its result;
* ``leaks``: run the learner's own script and say which graphs its loop
  keeps alive, and through which name (exit 1 when they grow);
* ``start`` and ``check``: rebuild a stage yourself and hold your file to
  the stage's memory contract;
* ``grade`` and ``progress``: a class's submissions of a stage into one CSV,
  and a learner's own files, stage by stage.

``main(argv)`` returns the exit code: 0 when it worked, 1 when something it
needs is missing (Graphviz's ``dot``), 2 for arguments it cannot use (the
usual code of command-line tools; argparse exits with it by itself), 130
when interrupted with Ctrl-C, 143 when ended by SIGTERM and 141 when the
reader of its output went away (``... | head``), as Unix tools report; 1
with one line when its output cannot be written (``> /dev/full``). A
file it was writing is then left as it was before (``dezero_mini.atomic``).
"""
import argparse
import sys

import dezero_mini
from dezero_mini.cli import check, grade, graph, leaks, memory, progress, start, train
from dezero_mini.cli.guard import (
    EXIT_SIGTERM,
    Terminated,
    end_for_lost_output,
    flush_stdout,
    output_stream_problem,
    sigterm_raises,
)
from dezero_mini.cli.options import HelpFormatter
from dezero_mini.environment import SettingError
from dezero_mini.memory import GraphvizNotFound
from dezero_mini import shadowing
from dezero_mini.startup import EXIT_USAGE, current_folder, interrupts_raise, startup_problem
from dezero_mini.startup import say

#: The commands, in the order of ``--help``.
COMMANDS = (train, memory, graph, leaks, start, check, grade, progress)


def build_parser(prog="dezero_mini"):
    """The argument parser of the command line, with its commands."""
    parser = argparse.ArgumentParser(
        prog=prog, formatter_class=HelpFormatter,
        description=("dezero_mini: a small autograd framework, and the instruments of the\n"
                     "course \"where does the memory go?\". Run a command with --help to\n"
                     "see its options."))
    parser.add_argument("--version", action="version",
                        version=f"dezero_mini {dezero_mini.__version__}")
    commands = parser.add_subparsers(title="commands", dest="command", metavar="COMMAND")
    for command in COMMANDS:
        command.add_parser(commands)
    return parser


def main(argv=None, prog="dezero_mini"):
    """Run the command line with ``argv`` (default: ``sys.argv[1:]``).

    Returns the exit code. argparse itself exits (SystemExit) for --help,
    --version and bad arguments.
    """
    problem = startup_problem()  # main() called without the package's start (tests, a script)
    folder = current_folder()
    if problem is None and folder is not None:
        problem = shadowing.stand_in_problem(folder)  # a learner's module imported already
    if problem is not None:
        print(f"{prog}: error: {problem}", file=sys.stderr)
        return EXIT_USAGE
    warning = shadowing.shadowing_warning(folder) if folder is not None else None
    if warning is not None:  # ignored here, but the learner's own scripts would import it
        say(f"{prog}: {warning}")
    parser = build_parser(prog)
    args, unrecognized = parser.parse_known_args(argv)
    if unrecognized:  # as parse_args, unless the command knows what was meant
        explain = getattr(args, "explain_unrecognized", None)
        explanation = explain(unrecognized) if explain else None
        if explanation:
            args.parser.error(explanation)
        parser.error(f"unrecognized arguments: {' '.join(unrecognized)}")
    if args.command is None:
        parser.print_help(sys.stderr)
        names = [command.__name__.rpartition(".")[2] for command in COMMANDS]
        print(f"\n{prog}: error: choose a command: {', '.join(names[:-1])} or {names[-1]}",
              file=sys.stderr)
        return 2
    command = f"{prog} {args.command}"
    problem = output_stream_problem()
    if problem is not None:
        print(f"{command}: error: {problem}", file=sys.stderr)
        return getattr(args, "lost_output_status", 1)
    interrupts_raise()  # Ctrl-C: until here the package's start ended it, now the except below
    try:
        with sigterm_raises():
            code = args.run(args)
            flush_stdout()  # a full disk found here, not at exit
            return code
    except SettingError as error:  # read where it is used (MPLBACKEND, by Matplotlib)
        print(f"{command}: error: {error}", file=sys.stderr)
        return EXIT_USAGE
    except GraphvizNotFound as error:
        print(f"{command}: error: {error}.\n"
              "To see the graph without Graphviz, use --dot: it prints the DOT text.",
              file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"\n{shadowing.interrupted_line(command)}", file=sys.stderr)
        return shadowing.EXIT_INTERRUPTED
    except Terminated:
        print(f"\n{command}: terminated (SIGTERM)", file=sys.stderr)
        return EXIT_SIGTERM
    except MemoryError:
        print(f"{command}: error: out of memory; try smaller sizes (--hidden, --batch-size, "
              "--batches) or free memory for it", file=sys.stderr)
        return 1
    except OSError as error:
        # The reader of our output has gone (`... | head -2`), or the disk
        # under it is full (`> /dev/full`).
        status = end_for_lost_output(error, command, getattr(args, "lost_output_status", 1))
        if status is not None:
            return status
        if error.filename is None:  # not a file of the user's: a defect, keep its traceback
            raise
        print(f"{command}: error: {error.strerror or error}: {error.filename}", file=sys.stderr)
        return 1
