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
from dezero_mini.cli.options import (add_run_options, add_scoring_options, add_stage_argument,
                                     command_parser, stage_options)
from dezero_mini.grading import batch
from dezero_mini.progress import progress_bar


def run_grade(args):
    """``grade``: check every submission, write the CSV; 0 when it is written."""
    names, weights = stage_options(args)
    try:
        submissions = batch.find_submissions(args.stage, args.submissions)
    except batch.SubmissionError as error:
        args.parser.error(f"argument SUBMISSION: {error}")
    grading = batch.Grading(number=args.stage, names=names, weights=weights,
                            timeout=args.timeout, total_timeout=args.total_timeout,
                            batches=args.batches, jobs=args.jobs)
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
        "its path is checked before grading starts.\n\n"
        "examples:\n"
        "  %(prog)s 3 submissions/* --csv grades.csv\n"
        "  %(prog)s 5 alice/ bob/ --jobs 4 --weights weights.toml --csv stage05.csv"))
    add_stage_argument(parser)
    parser.add_argument("submissions", nargs="+", metavar="SUBMISSION",
                        help="a student's stage file, or a folder that holds it")
    parser.add_argument("--csv", type=output_file(), required=True, metavar="PATH",
                        help="the grades, one row per student")
    parser.add_argument("--jobs", type=positive_int, default=batch.default_jobs(), metavar="J",
                        help="submissions checked at once (default: the processors, "
                             "%(default)s here)")
    add_scoring_options(parser)
    add_run_options(parser)
    parser.set_defaults(run=run_grade, parser=parser)
