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
import sys
import textwrap
from pathlib import Path

from dezero_mini.browser import processes_unavailable
from dezero_mini.contracts import contracts_at, get_stage, stages
from dezero_mini.contracts.bench import BATCHES
from dezero_mini.contracts.runner import DEFAULT_TIMEOUT, check_file
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
    if not folder.is_dir():
        print(f"dezero_mini start: error: the folder {str(folder)!r} does not exist",
              file=sys.stderr)
        return 2
    target = folder / stage.file_name
    if target.exists():
        print(f"dezero_mini start: error: {target} exists already; not overwriting it. "
              "Move it away or give another folder.", file=sys.stderr)
        return 2
    try:
        source = stage_path(max(stage.builds_on, 1))
    except ValueError as error:
        print(f"dezero_mini start: error: {error}", file=sys.stderr)
        return 2
    target.write_text(start_header(stage, source.name) + source.read_text())
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
            lines.append(f"{status}  {result.name:<{width}}  expected {result.expected}; "
                         f"measured {result.measured}")
            if not result.passed:
                lines.append(f"      {'':<{width}}  hint: {result.hint}")
        passed = sum(result.passed for result in report.results)
        lines.append(f"{passed} of {len(report.results)} contracts pass "
                     f"({report.seconds:.1f} s)")
    if report.output.strip():
        lines.append("what the file printed" + (" (the beginning)" if report.output_truncated
                                                else "") + ":")
        lines.extend("  | " + line for line in report.output.rstrip().splitlines())
    return "\n".join(lines)


def run_check(args):
    """``check``: hold a file to a stage's contracts; exit 0, 1 or 2 (2 also
    where no process can be started, as in a browser: the file runs in one)."""
    unavailable = processes_unavailable()
    if unavailable:
        print(f"dezero_mini check: {unavailable}, and check runs your file in a process of its "
              "own: run it on a local install of the course (pip install the repository, "
              "then dezero_mini check N FILE).", file=sys.stderr)
        return 2
    report = check_file(args.stage, args.file, timeout=args.timeout, batches=args.batches)
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
    from dezero_mini.cli import positive_float  # (cli imports this module)

    known = ", ".join(str(stage.number) for stage in stages())
    parser = make_parser(commands, "check", "hold your stage file to its memory contract", (
        "Load FILE as stage N of the framework and run every contract of the stage\n"
        "on it (the same ones that the course's tests hold steps/ to): one line per\n"
        "contract, with what was expected and what was measured, and a hint for\n"
        "each one that fails. The file runs in a separate process, with a time\n"
        "limit per contract.\n\n"
        "exit status: 0 every contract passes, 1 a contract fails, 2 the file\n"
        "cannot be loaded or lacks a name that the stage needs.\n\n"
        "examples:\n"
        "  %(prog)s 3 step03_weakref_outputs.py\n"
        "  %(prog)s 5 step05_no_grad.py --json > result.json"))
    parser.add_argument("stage", type=stage_number, metavar="N", help=f"the stage ({known})")
    parser.add_argument("file", type=Path, metavar="FILE", help="your stage file")
    parser.add_argument("--json", action="store_true", help=(
        "print the results as JSON (for graders): the file, the stage, status, exit_code, "
        "and per contract its name, passed, expected, measured, hint"))
    parser.add_argument("--timeout", type=positive_float, default=DEFAULT_TIMEOUT,
                        metavar="SECONDS", help=(
        "time allowed to load the file and to each contract (default: %(default)g)"))
    parser.add_argument("--batches", type=batch_count, default=BATCHES, metavar="N", help=(
        "batches of the training run that the memory contracts record "
        "(default: %(default)s, as in the course's tests; fewer is faster and less sure)"))
    parser.set_defaults(run=run_check, parser=parser)
