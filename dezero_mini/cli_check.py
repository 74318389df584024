"""The ``start`` and ``check`` commands: rebuild a stage yourself.

``start N [DIR]`` writes ``stepNN_<name>.py``: the file from ``steps/`` of
the stage that stage N builds on (``Stage.builds_on``: the previous one
unless the stage says otherwise), under a header that says what to change
and which contracts the result will be held to. ``check N FILE`` holds a file to
stage N's contracts (``dezero_mini.contracts``, the same ones that the
course's tests hold ``steps/`` to) and prints one line per contract.

Both take their stages from ``dezero_mini.contracts``: a stage with a
module there has both commands.
"""
import argparse
import math
import signal
import sys
import textwrap
import threading
from pathlib import Path

from dezero_mini import atomic
from dezero_mini.cli_guard import output_target_problem
from dezero_mini.browser import processes_unavailable
from dezero_mini.contracts import contracts_at, get_stage, stages
from dezero_mini.contracts.bench import BATCHES
from dezero_mini.contracts.runner import DEFAULT_TIMEOUT, DEFAULT_TOTAL_TIMEOUT, check_file
from dezero_mini.contracts.scoring import Weights, WeightsError, display_points, select_contracts
from dezero_mini.grading import gradescope
from dezero_mini.grading.files import OutputPathError, writable_path
from dezero_mini.memory.stages import stage_path


def stage_number(text):
    """An argument type: the number of a stage that has contracts."""
    known = ", ".join(str(stage.number) for stage in stages())
    try:
        number = int(text)
        get_stage(number)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"must be the number of a stage of the course ({known}), got {text!r}") from None
    return number


def batch_count(text):
    """At least 2 batches: the contracts read the growth from one batch to the next."""
    from dezero_mini.cli import positive_int  # (cli imports this module)

    value = positive_int(text)
    if value < 2:
        raise argparse.ArgumentTypeError(f"must be a whole number of at least 2, got {text!r}")
    return value


def seconds(text):
    """An argument type: a number of seconds above 0 and at most a day (a
    larger one, 1e300 say, would overflow the clock's arithmetic)."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not 0 < value <= MAX_SECONDS:  # also refuses nan and inf
        raise argparse.ArgumentTypeError(
            f"must be a number of seconds above 0 and at most {MAX_SECONDS:g} (a day), "
            f"got {text!r}")
    return value


MAX_SECONDS = 86400.0


def weights_file(text):
    """An argument type: a weights file (``scoring.Weights``), read and checked."""
    try:
        return Weights.from_file(text)
    except WeightsError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def output_path(what):
    """An argument type: a file that can be written (checked before any long run)."""

    def convert(text):
        try:
            return writable_path(text, what)
        except OutputPathError as error:
            raise argparse.ArgumentTypeError(str(error)) from None

    return convert


def stage_options(args):
    """Check the options that depend on the stage (``--contract``, ``--weights``)
    against it; argparse's error (exit 2) when they do not fit. Returns
    ``(names, weights)`` for ``check_file``."""
    try:
        select_contracts(args.stage, args.contract)
        if args.weights is not None:
            args.weights.points_at(args.stage, select_contracts(args.stage, args.contract))
    except WeightsError as error:
        args.parser.error(f"argument --weights: {error}")
    except ValueError as error:
        args.parser.error(f"argument --contract: {error}")
    return args.contract, args.weights


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
    parser.add_argument("--batches", type=batch_count, default=BATCHES, metavar="N", help=(
        "batches of the training run that the memory contracts record "
        "(default: %(default)s, as in the course's tests; fewer is faster and less sure)"))


# --- start ---------------------------------------------------------------------------
def _comment(text, width=78, indent=""):
    return textwrap.fill(" ".join(text.split()), width=width,
                         initial_indent="# " + indent, subsequent_indent="# " + indent)


def start_header(stage, source_name):
    """The comment that ``start`` puts on top of the starting file."""
    if stage.number == 1:
        origin = f"This file is stage 01 of the course ({source_name}), the starting point."
    elif stage.builds_on == stage.number - 1:
        origin = (f"This file is the previous stage's snapshot ({source_name}): make it "
                  f"stage {stage.number:02d}.")
    else:
        origin = (f"This file is stage {stage.builds_on:02d}'s snapshot ({source_name}), the "
                  f"framework that stage {stage.number:02d} builds on: make it stage "
                  f"{stage.number:02d}.")
    lines = [
        f"# dezero_mini course, {stage.label}: your starting point.",
        "#",
        _comment(origin),
        "#",
        _comment(f"The idea: {stage.idea}"),
        "#",
        _comment(f"What to change: {stage.change}"),
        "#",
        "# Then check your file:",
        f"#     python -m dezero_mini check {stage.number} {stage.file_name}",
        "# It is held to these contracts (this stage's and the earlier ones' that still hold):",
    ]
    for contract in contracts_at(stage.number):
        lines.append(_comment(f"{contract.name} (from stage {contract.stage:02d}): "
                              f"{contract.summary}.", indent="  - ")
                     .replace("\n#   - ", "\n#     "))
    lines.append("# (You may delete this header.)")
    return "\n".join(lines) + "\n\n"


def run_start(args):
    """``start``: write the starting file of a stage; never overwrite one."""
    stage = get_stage(args.stage)
    folder = args.dir
    target = folder / stage.file_name
    problem = output_target_problem(target, (".py",))
    if problem is not None:
        print(f"dezero_mini start: error: DIR {str(folder)!r}: {problem}", file=sys.stderr)
        return 2
    exists = f"{target} exists already; not overwriting it. Move it away or give another folder."
    if target.exists():
        print(f"dezero_mini start: error: {exists}", file=sys.stderr)
        return 2
    try:
        source = stage_path(max(stage.builds_on, 1))
    except ValueError as error:
        print(f"dezero_mini start: error: {error}", file=sys.stderr)
        return 2
    try:  # complete or absent, even when interrupted; never over a file made meanwhile
        atomic.write_text(target, start_header(stage, source.name) + source.read_text(),
                          overwrite=False)
    except FileExistsError:
        print(f"dezero_mini start: error: {exists}", file=sys.stderr)
        return 2
    print(f"wrote {target}: {stage.label}, starting from {source.name}")
    print(f"when it is done: python -m dezero_mini check {stage.number} {target}")
    return 0


# --- check ---------------------------------------------------------------------------
def report_text(report):
    """The report of ``check`` for people: one line per contract, and the
    hint under each one that fails."""
    stage_label = f"stage {report.stage:02d} ({report.stage_title})"
    if report.status == "error":
        lines = [f"dezero_mini check: error: {report.message}"]
    else:
        lines = [f"checking {report.file} against {stage_label}: "
                 f"{len(report.results)} contracts"]
        width = max(len(result.name) for result in report.results)
        for result in report.results:
            status = "pass" if result.passed else "FAIL"
            points = f"{display_points(result.points)}/{display_points(result.max_points)}"
            lines.append(f"{status}  {result.name:<{width}}  {points:>5}  expected "
                         f"{result.expected}; measured {result.measured}")
            if not result.passed:
                lines.append(f"      {'':<{width}}  {'':>5}  hint: {result.hint}")
    passed = sum(result.passed for result in report.results)
    lines.append(f"{passed} of {len(report.results)} contracts pass, "
                 f"{display_points(report.points)} of {display_points(report.max_points)} "
                 f"points ({report.seconds:.1f} s)")
    if report.output.strip():
        lines.append("what the file printed" + (" (the beginning)" if report.output_truncated
                                                else "") + ":")
        lines.extend("  | " + line for line in report.output.rstrip().splitlines())
    return "\n".join(lines)


class Interrupted(Exception):
    """``check`` received SIGINT, SIGTERM or SIGHUP."""

    def __init__(self, signum):
        super().__init__(signum)
        self.signum = signum


def _interrupt(signum, frame):
    raise Interrupted(signum)


STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def run_check(args):
    """``check``: hold a file to a stage's contracts; exit 0, 1 or 2, or
    128 + the signal's number when SIGINT, SIGTERM or SIGHUP stops it (the
    worker and every process it started are killed first); 2 also where no
    process can be started (a browser's Python): the file runs in one."""
    unavailable = processes_unavailable()
    if unavailable:
        print(f"dezero_mini check: {unavailable}, and check runs your file in a process of its "
              "own: run it on a local install of the course (pip install the repository, "
              "then dezero_mini check N FILE).", file=sys.stderr)
        return 2
    names, weights = stage_options(args)
    previous = {}
    if threading.current_thread() is threading.main_thread():  # (only it may set handlers)
        previous = {signum: signal.signal(signum, _interrupt) for signum in STOP_SIGNALS}
    try:
        report = check_file(args.stage, args.file, timeout=args.timeout,
                            total_timeout=args.total_timeout, batches=args.batches,
                            allow_reference=args.allow_reference, names=names, weights=weights)
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


# --- the parsers (cli.build_parser adds them) ---------------------------------------------
def add_start(commands, make_parser):
    known = ", ".join(str(stage.number) for stage in stages())
    parser = make_parser(commands, "start", "write the file to start a stage from", (
        "Write stepNN_<name>.py, the starting point to rebuild stage N yourself: the\n"
        "file of the stage it builds on (the previous one unless the stage names\n"
        "another), with a header that says what to change and which contracts\n"
        "`check` will hold it to. Never overwrites a file.\n\n"
        "examples:\n"
        "  %(prog)s 3\n"
        "  %(prog)s 5 ~/course"))
    parser.add_argument("stage", type=stage_number, metavar="N", help=f"the stage ({known})")
    parser.add_argument("dir", type=Path, nargs="?", default=Path("."), metavar="DIR",
                        help="the folder to write into (default: the current folder)")
    parser.set_defaults(run=run_start, parser=parser)


def add_check(commands, make_parser):
    known = ", ".join(str(stage.number) for stage in stages())
    parser = make_parser(commands, "check", "hold your stage file to its memory contract", (
        "Load FILE as stage N of the framework and run every contract of the stage\n"
        "on it (the same ones that the course's tests hold steps/ to): one line per\n"
        "contract, with what was expected and what was measured, and a hint for\n"
        "each one that fails. The file runs in a separate, contained process\n"
        "(isolated, in a scratch folder, with a reduced environment and resource\n"
        "limits), with a time limit per contract and one for the whole check.\n\n"
        f"Each contract carries points ({display_points(Weights().new)} when new in the "
        f"stage, {display_points(Weights().inherited)} when inherited,\n"
        "unless --weights says otherwise), and every contract of the stage is in\n"
        "every report, failed when the file cannot be loaded: the total is the\n"
        "same for every file.\n\n"
        "exit status: 0 every contract passes, 1 a contract fails, 2 the file\n"
        "cannot be loaded, lacks or borrows a name that the stage needs, or\n"
        "tampered with the checker; 130, 143, 129 when SIGINT, SIGTERM, SIGHUP\n"
        "stop the check.\n\n"
        "examples:\n"
        "  %(prog)s 3 step03_weakref_outputs.py\n"
        "  %(prog)s 3 step03_weakref_outputs.py --contract live_objects_constant\n"
        "  %(prog)s 5 step05_no_grad.py --json > result.json\n"
        "  %(prog)s 5 step05_no_grad.py --gradescope results/results.json"))
    parser.add_argument("stage", type=stage_number, metavar="N", help=f"the stage ({known})")
    parser.add_argument("file", type=Path, metavar="FILE", help="your stage file")
    parser.add_argument("--json", action="store_true", help=(
        "print the results as JSON (for graders): the file, the stage, status, exit_code, "
        "points, max_points, and per contract its name, passed, expected, measured, hint, "
        "points, max_points"))
    parser.add_argument("--gradescope", type=output_path("Gradescope results file"),
                        metavar="PATH", help=(
        "also write Gradescope's results.json there (one test per contract, with its points)"))
    parser.add_argument("--allow-reference", action="store_true", help=(
        "check a file of the course's own steps/ (refused by default: a submission "
        "must be the learner's own work); for the course's maintainers"))
    add_scoring_options(parser)
    add_run_options(parser)
    parser.set_defaults(run=run_check, parser=parser)
