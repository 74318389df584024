"""The ``start`` command: write the file to rebuild a stage from.

``start N [DIR]`` writes ``stepNN_<name>.py``: the file from ``steps/`` of
the stage that stage N builds on (``Stage.builds_on``: the previous one
unless the stage says otherwise), under a header that says what to change
and which contracts ``check`` will hold the result to. It takes its stages
from ``dezero_mini.contracts``: a stage with a module there can be started.
"""
import sys
import textwrap
from pathlib import Path

from dezero_mini import atomic, shadowing
from dezero_mini.cli.options import add_stage_argument, command_parser
from dezero_mini.contracts import contracts_at, get_stage
from dezero_mini.hints import command_line
from dezero_mini.memory.stages import stage_path


def _comment(text, width=78, indent=""):
    return textwrap.fill(" ".join(text.split()), width=width,
                         initial_indent="# " + indent, subsequent_indent="# " + indent)


def start_header(stage, source_name):
    """The comment that ``start`` puts on top of the starting file."""
    if stage.number == 1:
        origin = (f"This file is stage 01 of the course ({source_name}), the starting point. "
                  "check gives it its result and a line that says it is the course's own "
                  "file, which earns no grade (graders refuse it).")
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
        "# Then check your file (with .venv activated; or .venv/bin/dezero_mini ...):",
        f"#     {command_line('check', stage.number, stage.file_name)}",
        f"# (python -m {command_line('check', stage.number, stage.file_name)} is the same, but a",
        "# dezero_mini.py of your own in the current folder would stand in for it.)",
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
    problem = module_name_problem(stage.file_name)
    if problem is not None:  # never a stage's name: stage files are stepNN_<name>.py
        print(f"dezero_mini start: error: {problem}", file=sys.stderr)
        return 2
    exists = f"{target} exists already; not overwriting it. Move it away or give another folder."
    if target.exists():  # (said first: start never overwrites, writable or not)
        print(f"dezero_mini start: error: {exists}", file=sys.stderr)
        return 2
    problem = atomic.output_target_problem(target, (".py",))
    if problem is not None:
        print(f"dezero_mini start: error: DIR {str(folder)!r}: {problem}", file=sys.stderr)
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
    print(f"when it is done: {command_line('check', stage.number, target)}")
    if folder.resolve() != Path.cwd().resolve():  # the current folder's are named already
        warning = shadowing.shadowing_warning(str(folder))
        if warning is not None:
            print(f"dezero_mini start: {warning.replace('this folder', repr(str(folder)))}",
                  file=sys.stderr)
    return 0


def module_name_problem(file_name):
    """Why ``start`` must not write ``file_name``: a module of that name in
    the current folder would stand in for one the commands import (a
    ``dezero_mini.py`` for the package itself); None when it may."""
    module, _, suffix = file_name.rpartition(".")
    names = shadowing.modules_used() | set(getattr(sys, "stdlib_module_names", ()))
    if suffix == "py" and module in names | {shadowing.PACKAGE}:
        return (f"{file_name} has the name of a module dezero_mini imports ({module}): a script "
                "or python -m run from its folder would import it in place of that module")
    return None


def add_parser(commands):
    """Add ``start`` to the command line's ``commands``."""
    parser = command_parser(commands, "start", "write the file to start a stage from", (
        "Write stepNN_<name>.py, the starting point to rebuild stage N yourself: the\n"
        "file of the stage it builds on (the previous one unless the stage names\n"
        "another), with a header that says what to change and which contracts\n"
        "`check` will hold it to. Never overwrites a file.\n\n"
        "examples:\n"
        "  %(prog)s 3\n"
        "  %(prog)s 5 ~/course"))
    add_stage_argument(parser)
    parser.add_argument("dir", type=Path, nargs="?", default=Path("."), metavar="DIR",
                        help="the folder to write into (default: the current folder)")
    parser.set_defaults(run=run_start, parser=parser)


