"""The ``progress`` command: a learner's own stage files, checked stage by stage.

``progress [DIR]`` looks for the learner's file of each stage in DIR and
checks it, one line per stage (``dezero_mini.grading.learner_progress``),
with the run options of ``check`` (``add_run_options``), ``--jobs`` stages at a
time (in one process: its start is paid once, not once per stage).
"""
import sys
import threading
from pathlib import Path

from dezero_mini.arguments import positive_int
from dezero_mini.cli.options import (AtMostTheProcessors, add_run_options, command_parser,
                                     refuse_batches_beyond_limits)
from dezero_mini.contracts import stages
from dezero_mini.contracts.runner import check_file
from dezero_mini.grading.batch import default_jobs
from dezero_mini.grading.learner_progress import progress, progress_line, progress_summary
from dezero_mini.printable import printable


def run_progress(args):
    """``progress``: one line per stage for the learner's files in DIR."""
    refuse_batches_beyond_limits(args, [stage.number for stage in stages()])
    folder = args.dir
    if not folder.is_dir():
        print(f"dezero_mini progress: error: the folder {str(folder)!r} does not exist",
              file=sys.stderr)
        return 2
    print(f"your stage files in {printable(folder, newlines=False)}:", flush=True)

    stopped = threading.Event()  # Ctrl-C: the checks of the other threads end too

    def check(number, path):  # (self-study: the course's own files too, noted as such)
        return check_file(number, path, timeout=args.timeout, total_timeout=args.total_timeout,
                          batches=args.batches, allow_reference=True, stop=stopped)

    items = progress(folder, check, on_stage=lambda item: print(progress_line(item), flush=True),
                     jobs=args.jobs, stop=stopped.set)
    print(progress_summary(items))
    return 0


def add_parser(commands):
    """Add ``progress`` to the command line's ``commands``."""
    parser = command_parser(commands, "progress", "see which stages your own files pass", (
        "For each stage of the course, look for your file in DIR (stepNN_<name>.py,\n"
        "as `start` writes it) and check it: one line per stage with the contracts\n"
        "that pass, the points, and the names of those that fail; a stage without\n"
        "a file says how to start it.\n\n"
        "examples:\n"
        "  %(prog)s\n"
        "  %(prog)s ~/course --batches 20 --jobs 1"))
    parser.add_argument("dir", type=Path, nargs="?", default=Path("."), metavar="DIR",
                        help="the folder with your stage files (default: the current folder)")
    parser.add_argument("--jobs", type=positive_int, action=AtMostTheProcessors,
                        default=default_jobs(), metavar="J", help=(
        "how many stages are checked at once, each in a worker of its own (default: the "
        "processors this process may use, %(default)s here)"))
    add_run_options(parser)
    parser.set_defaults(run=run_progress, parser=parser)
