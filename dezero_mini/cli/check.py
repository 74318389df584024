"""The ``check`` command: hold a stage file to the stage's contracts.

``check N FILE`` holds a file to stage N's contracts (``dezero_mini.contracts``,
the same ones that the course's tests hold ``steps/`` to) and prints one line
per contract; ``--json`` and ``--gradescope`` give the same report to graders.

For self-study it checks any file, the course's own step files too (lesson
01 checks the file that ``start 1`` writes, unchanged), and says when the
file is the course's own: its result is the course's, which earns no grade.
Grading refuses such a file: ``--json`` (what ``grade`` and the GitHub
Actions workflow read), ``--gradescope``, and the Gradescope autograder.
"""
import signal
import sys
import threading
from pathlib import Path

from dezero_mini.arguments import output_file
from dezero_mini.browser import processes_unavailable
from dezero_mini.cli.guard import EXIT_NO_VERDICT
from dezero_mini.cli.options import (add_run_options, add_sandbox_option, add_scoring_options,
                                     add_stage_argument, command_parser,
                                     refuse_to_overwrite_inputs, sandbox_note, stage_options)
from dezero_mini.contracts.runner import check_file
from dezero_mini.contracts.scoring import Weights, display_points, select_contracts
from dezero_mini.grading import gradescope
from dezero_mini.hints import command_line
from dezero_mini.printable import printable
from dezero_mini.progress import progress_bar


def report_text(report):
    """The report of ``check`` for people: one line per contract, and the
    hint under each one that fails; a line more when the file is the
    course's own. What came from the submission (its name, what it printed,
    what it raised) is shown with its control characters escaped
    (``printable``): it cannot redraw the report."""
    stage_label = f"stage {report.stage:02d} ({report.stage_title})"
    if report.status == "error":
        lines = [f"dezero_mini check: error: {printable(report.message, newlines=False)}"]
        if report.reference is not None:
            lines.append("(grading refuses it; without --json and --gradescope, check gives the "
                         "course's own file its result, for self-study)")
    else:
        lines = [f"checking {printable(report.file, newlines=False)} against {stage_label}: "
                 f"{len(report.results)} contracts"]
        width = max(len(result.name) for result in report.results)
        for result in report.results:
            status = "pass" if result.passed else "FAIL"
            points = f"{display_points(result.points)}/{display_points(result.max_points)}"
            lines.append(f"{status}  {result.name:<{width}}  {points:>5}  expected "
                         f"{printable(result.expected, newlines=False)}; measured "
                         f"{printable(result.measured, newlines=False)}")
            if not result.passed:
                lines.append(f"      {'':<{width}}  {'':>5}  hint: {result.hint}")
    passed = sum(result.passed for result in report.results)
    lines.append(f"{passed} of {len(report.results)} contracts pass, "
                 f"{display_points(report.points)} of {display_points(report.max_points)} "
                 f"points ({report.seconds:.1f} s)")
    if report.reference is not None and report.status != "error":
        lines.append(f"note: this file is the course's own steps/{report.reference} (comments, "
                     "docstrings and layout aside): the result is the course's, and earns no "
                     "grade (grading refuses the file)")
    if report.output.strip():
        lines.append("what the file printed" + (" (the beginning)" if report.output_truncated
                                                else "") + ":")
        lines.extend("  | " + line for line in printable(report.output.rstrip()).split("\n"))
    return "\n".join(lines)


class Interrupted(Exception):
    """``check`` received SIGINT, SIGTERM or SIGHUP."""

    def __init__(self, signum):
        super().__init__(signum)
        self.signum = signum


def _interrupt(signum, frame):
    raise Interrupted(signum)


STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def grading(args):
    """Whether this check gives a grader its report (``--json``, which
    ``grade`` and the GitHub Actions workflow read, or ``--gradescope``):
    then the course's own step files are refused, as not the learner's work."""
    return args.json or args.gradescope is not None


def run_check(args):
    """``check``: hold a file to a stage's contracts; exit 0, 1 or 2, or
    128 + the signal's number when SIGINT, SIGTERM or SIGHUP stops it (the
    worker and every process it started are killed first); 2 also where no
    process can be started (a browser's Python): the file runs in one."""
    unavailable = processes_unavailable()
    if unavailable:
        print(f"dezero_mini check: {unavailable}, and check runs your file in a process of its "
              "own: run it on a local install of the course (pip install the repository, "
              f"then {command_line('check', 'N', 'FILE')}).", file=sys.stderr)
        return 2
    names, weights = stage_options(args)
    mode = args.sandbox or ("required" if args.gradescope is not None else "auto")
    note = sandbox_note("dezero_mini check", mode)
    if note:
        print(note, file=sys.stderr)
    refuse_to_overwrite_inputs(args, [("--gradescope", args.gradescope)], [
        ("the file to check", args.file), ("the weights file", weights.path if weights else None)])
    previous = {}
    if threading.current_thread() is threading.main_thread():  # (only it may set handlers)
        previous = {signum: signal.signal(signum, _interrupt) for signum in STOP_SIGNALS}
    steps = len(select_contracts(args.stage, names))
    try:
        # A bar on a terminal (standard error) while the contracts run: quiet with --json
        # and in a pipe. It counts the contracts done and names the step under way.
        with progress_bar(steps, f"checking stage {args.stage}", quiet=args.json, unit="contract") as bar:
            started = []

            def show(step):
                if step != "loading the file":
                    started.append(step)
                bar.n = max(len(started) - 1, 0)
                bar.set_postfix_str(step)  # (redraws the bar)

            report = check_file(args.stage, args.file, timeout=args.timeout,
                                total_timeout=args.total_timeout, batches=args.batches,
                                allow_reference=args.allow_reference or not grading(args),
                                names=names, weights=weights, sandbox=mode, on_step=show)
    except Interrupted as stop:
        name = signal.Signals(stop.signum).name
        print(f"dezero_mini check: stopped by {name}: the worker and its processes were "
              "killed; no result", file=sys.stderr)
        return 128 + stop.signum
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    if args.gradescope is not None:
        try:
            gradescope.write_results(report, args.gradescope)
        except OSError as error:  # checked before the run; the disk may still fill up
            print(f"dezero_mini check: error: cannot write {str(args.gradescope)!r}: "
                  f"{error.strerror or error}", file=sys.stderr)
            return 2
    if args.json:
        print(report.to_json())
    else:
        print(report_text(report), file=sys.stderr if report.status == "error" else sys.stdout)
    return report.exit_code


def add_parser(commands):
    """Add ``check`` to the command line's ``commands``."""
    parser = command_parser(commands, "check", "hold your stage file to its memory contract", (
        "Load FILE as stage N of the framework and run every contract of the stage\n"
        "on it (the same ones that the course's tests hold steps/ to): one line per\n"
        "contract, with what was expected and what was measured, and a hint for\n"
        "each one that fails. The file runs in a separate process, in bubblewrap's\n"
        "sandbox where it can run (its own namespaces, a read-only course, a\n"
        "private /tmp, a throwaway user; see --sandbox), with resource limits, a\n"
        "time limit per contract and one for the whole check.\n\n"
        f"Each contract carries points ({display_points(Weights().new)} when new in the "
        f"stage, {display_points(Weights().inherited)} when inherited,\n"
        "unless --weights says otherwise), and every contract of the stage is in\n"
        "every report, failed when the file cannot be loaded: the total is the\n"
        "same for every file.\n\n"
        "The course's own step files (start 1 writes one) are checked too, with a\n"
        "line that says so: their result earns no grade. --json and --gradescope,\n"
        "which graders read, refuse them.\n\n"
        "exit status: 0 every contract passes, 1 a contract fails, 2 the file\n"
        "cannot be loaded, lacks or borrows a name that the stage needs, is the\n"
        "course's own file given to a grader, or tampered with the checker; 130,\n"
        "143, 129 when SIGINT, SIGTERM, SIGHUP stop the check.\n\n"
        "examples:\n"
        "  %(prog)s 3 step03_weakref_outputs.py\n"
        "  %(prog)s 3 step03_weakref_outputs.py --contract live_objects_constant\n"
        "  %(prog)s 5 step05_no_grad.py --json > result.json\n"
        "  %(prog)s 5 step05_no_grad.py --gradescope results/results.json"))
    add_stage_argument(parser)
    parser.add_argument("file", type=Path, metavar="FILE", help="your stage file")
    parser.add_argument("--json", action="store_true", help=(
        "print the results as JSON (for graders): the file, the stage, status, exit_code, "
        "points, max_points, and per contract its name, passed, expected, measured, hint, "
        "points, max_points"))
    parser.add_argument("--gradescope", type=output_file(),
                        metavar="PATH", help=(
        "also write Gradescope's results.json there (one test per contract, with its points); "
        "never FILE or the --weights file"))
    parser.add_argument("--allow-reference", action="store_true", help=(
        "with --json or --gradescope, check a file of the course's own steps/ (refused "
        "there: a submission must be the learner's own work); for the course's maintainers"))
    add_scoring_options(parser)
    add_run_options(parser)
    add_sandbox_option(parser, None, grading=False)
    parser.set_defaults(run=run_check, parser=parser, lost_output_status=EXIT_NO_VERDICT)
