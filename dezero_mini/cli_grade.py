"""The ``grade`` and ``progress`` commands: a class's grades, a learner's progress.

``grade N SUBMISSIONS... --csv grades.csv`` checks many submissions against
stage N in parallel (``dezero_mini.grading.batch``) and writes one row per
student; ``progress [DIR]`` checks a learner's own stage files, one line per
stage (``dezero_mini.grading.learner_progress``). Both run ``check`` with its
contracts and points, and take its options (``add_run_options``).
"""
import signal
import sys
import time
from pathlib import Path

from dezero_mini.cli_check import (add_run_options, add_scoring_options, output_path,
                                   stage_number, stage_options)
from dezero_mini.contracts import stages
from dezero_mini.contracts.runner import check_file
from dezero_mini.grading import batch
from dezero_mini.grading.learner_progress import progress, progress_line, progress_summary


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
        rows = batch.grade_all(grading, submissions,
                               report_line=lambda line: print(line, file=sys.stderr, flush=True))
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


def run_progress(args):
    """``progress``: one line per stage for the learner's files in DIR."""
    folder = args.dir
    if not folder.is_dir():
        print(f"dezero_mini progress: error: the folder {str(folder)!r} does not exist",
              file=sys.stderr)
        return 2
    print(f"your stage files in {folder}:", flush=True)

    def check(number, path):
        return check_file(number, path, timeout=args.timeout, total_timeout=args.total_timeout,
                          batches=args.batches)

    items = progress(folder, check, on_stage=lambda item: print(progress_line(item), flush=True))
    print(progress_summary(items))
    return 0


def add_grade(commands, make_parser):
    from dezero_mini.cli import positive_int  # (cli imports this module)

    known = ", ".join(str(stage.number) for stage in stages())
    parser = make_parser(commands, "grade", "grade many submissions of a stage into a CSV", (
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
    parser.add_argument("stage", type=stage_number, metavar="N", help=f"the stage ({known})")
    parser.add_argument("submissions", nargs="+", metavar="SUBMISSION",
                        help="a student's stage file, or a folder that holds it")
    parser.add_argument("--csv", type=output_path("CSV file"), required=True, metavar="PATH",
                        help="the grades, one row per student")
    parser.add_argument("--jobs", type=positive_int, default=batch.default_jobs(), metavar="J",
                        help="submissions checked at once (default: the processors, "
                             "%(default)s here)")
    add_scoring_options(parser)
    add_run_options(parser)
    parser.set_defaults(run=run_grade, parser=parser)


def add_progress(commands, make_parser):
    parser = make_parser(commands, "progress", "see which stages your own files pass", (
        "For each stage of the course, look for your file in DIR (stepNN_<name>.py,\n"
        "as `start` writes it) and check it: one line per stage with the contracts\n"
        "that pass, the points, and the names of those that fail; a stage without\n"
        "a file says how to start it.\n\n"
        "examples:\n"
        "  %(prog)s\n"
        "  %(prog)s ~/course --batches 50"))
    parser.add_argument("dir", type=Path, nargs="?", default=Path("."), metavar="DIR",
                        help="the folder with your stage files (default: the current folder)")
    add_run_options(parser)
    parser.set_defaults(run=run_progress, parser=parser)
