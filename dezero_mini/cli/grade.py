"""The ``grade`` command: a class's submissions of a stage, checked into one CSV.

``grade N SUBMISSIONS... --csv grades.csv`` checks many submissions against
stage N in parallel (``dezero_mini.grading.batch``) and writes one row per
student. It runs ``check`` with its contracts and points, and takes its
options (``add_scoring_options``, ``add_run_options``).
"""
import signal
import sys
import time

from dezero_mini.arguments import output_file, positive_int
from dezero_mini.cli.options import (AtMostTheProcessors, add_run_options, add_sandbox_option,
                                     add_scoring_options, add_stage_argument, command_parser,
                                     refuse_to_overwrite_inputs, sandbox_note, stage_options)
from dezero_mini.contracts import bubblewrap
from dezero_mini.grading import batch, container
from dezero_mini.progress import progress_bar


def run_grade(args):
    """``grade``: check every submission, write the CSV; 0 when it is written."""
    names, weights = stage_options(args)
    try:
        submissions = batch.find_submissions(args.stage, args.submissions)
    except batch.SubmissionError as error:
        args.parser.error(f"argument SUBMISSION: {error}")
    refuse_to_overwrite_inputs(args, [("--csv", args.csv)], [
        *(("a submission", submission.file) for submission in submissions),
        ("the weights file", weights.path if weights else None)])
    isolation = None
    if args.isolation == "container":  # the container is the sandbox
        try:
            isolation = container.ContainerIsolation.prepare(
                args.engine, args.base_image,
                tell=lambda line: print(f"dezero_mini grade: {line}", file=sys.stderr, flush=True))
        except container.ContainerError as error:
            print(f"dezero_mini grade: error: {error}", file=sys.stderr)
            return 2
    problem = (bubblewrap.sandbox_problem()
               if args.sandbox == "required" and isolation is None else None)
    if problem:
        print(f"dezero_mini grade: error: the sandbox cannot run here: {problem}; to grade "
              "without it (each file then runs as you, and can reach your files and "
              "processes) pass --sandbox auto", file=sys.stderr)
        return 2
    note = sandbox_note("dezero_mini grade", args.sandbox) if isolation is None else None
    if note:
        print(note, file=sys.stderr)
    grading = batch.Grading(number=args.stage, names=names, weights=weights,
                            timeout=args.timeout, total_timeout=args.total_timeout,
                            batches=args.batches, jobs=args.jobs, sandbox=args.sandbox,
                            isolation=isolation)
    started = time.monotonic()
    try:
        # A bar of the submissions graded on a terminal (standard error); each one's line
        # printed above it, and alone in a pipe.
        with progress_bar(len(submissions), f"grading stage {args.stage}", unit="submission") as bar:
            def report_line(line):
                bar.write(line, file=sys.stderr)
                bar.update(1)

            rows = batch.grade_all(grading, submissions, report_line=report_line)
    except batch.GradingStopped as stop:
        name = signal.Signals(stop.signum).name
        print(f"dezero_mini grade: stopped by {name}: every check it started was ended; no "
              "grades written", file=sys.stderr)
        return 128 + stop.signum
    try:
        batch.write_csv(args.csv, args.stage, rows, names)
    except OSError as error:  # checked before grading; the disk may still fill up
        print(f"dezero_mini grade: error: cannot write {str(args.csv)!r}: "
              f"{error.strerror or error}; the grades follow on standard output",
              file=sys.stderr)
        print(batch.csv_text(args.stage, rows, names), end="")
        return 2
    print(batch.summary(rows, time.monotonic() - started, args.jobs) + f"; wrote {args.csv}")
    return 0


def add_parser(commands):
    """Add ``grade`` to the command line's ``commands``."""
    parser = command_parser(commands, "grade", "grade many submissions of a stage into a CSV", (
        "Check every submission against stage N, JOBS at a time, and write one row\n"
        "per student to the CSV: status, points, max_points, contracts passed and\n"
        "total, seconds, and the points of each contract. A submission is a\n"
        "student's stage file or a folder that holds it (stepNN_<name>.py); a\n"
        "folder without it gets a row with status \"missing\" and 0 points. The\n"
        "CSV is written when every submission is graded, whole or not at all;\n"
        "its path is checked before grading starts. With --isolation container,\n"
        "each submission is checked in a Podman or Docker container of its own,\n"
        "from an image of the course that grade builds the first time.\n\n"
        "examples:\n"
        "  %(prog)s 3 submissions/* --csv grades.csv\n"
        "  %(prog)s 5 alice/ bob/ --jobs 4 --weights weights.toml --csv stage05.csv\n"
        "  %(prog)s 3 submissions/* --isolation container --csv grades.csv"))
    add_stage_argument(parser)
    parser.add_argument("submissions", nargs="+", metavar="SUBMISSION",
                        help="a student's stage file, or a folder that holds it")
    parser.add_argument("--csv", type=output_file(), required=True, metavar="PATH",
                        help="the grades, one row per student; never a submission or the "
                             "--weights file")
    parser.add_argument("--jobs", type=positive_int, action=AtMostTheProcessors,
                        default=batch.default_jobs(), metavar="J",
                        help="submissions checked at once (default: the processors, "
                             "%(default)s here)")
    parser.add_argument("--isolation", choices=("process", "container"), default="process",
                        help="where each check runs: a process of this machine (default), or "
                             "a container of its own, without network, as nobody")
    parser.add_argument("--engine", choices=container.ENGINES, help=(
        "the container engine of --isolation container (default: the first of "
        f"{', '.join(container.ENGINES)} found on PATH)"))
    parser.add_argument("--base-image", default=container.DEFAULT_BASE, metavar="IMAGE", help=(
        "the image that the grading image is built on, when it must be built: python3 with "
        "venv and pip (default: %(default)s)"))
    add_scoring_options(parser)
    add_run_options(parser)
    add_sandbox_option(parser, "required", grading=True)
    parser.set_defaults(run=run_grade, parser=parser)
