"""Make the student edition of the course for a lab: ``make student-edition UPTO=N``.

    python tools/student_edition.py N [OUT]      (default OUT: build/student-edition-NN)

A class that has finished stage N gets the stage files of the course up to
stage N and none beyond it: the step files (``steps/``), the lessons
(``notebooks/``), their worked solutions (``solutions/``, folded into the book
under each exercise) and the interactive cells
(``dezero_mini/memory/explorations/``) of stages 00 to N. The later stages'
files are the answer keys of the stages still to be graded, so they stay on
the instructor's machine, and so do the course's own tests, benchmarks, CI
script and grader folders, which hold every stage. The package
``dezero_mini`` goes whole, since the lessons, ``start`` and ``check`` import
it: it is the finished framework, with the fixes of every stage (its
``core``, ``planning`` and ``checkpointing`` modules), so an edition
withholds the later stages' files, not their ideas (docs/classroom.md says
what that means for grading).

What the edition keeps of every stage is what ``start`` and ``check`` need to
work: each stage's contract module (``dezero_mini/contracts/``: the idea,
what to change, the hints; no code of the stage), so that a student can run
``python -m dezero_mini start N+1`` (it writes the stage-N file the next
stage builds on) and ``check N+1`` on the result. A stage that builds on a
stage beyond N (stage 10 builds on 08) cannot be started in an edition
without that stage; ``start`` says so.

The edition is a folder, written whole or not at all: it is built in a
temporary folder beside OUT and renamed over OUT at the end, so an
interrupted run leaves any earlier edition as it was. It has its own
``STUDENT_EDITION.md`` that says which stages it holds. Files are taken from
what git tracks (a checkout's untracked and ignored files, such as ``.venv``
or ``build/``, never leave the machine); outside a git checkout, from the
folder as it is, without ``.venv``, ``build``, ``.git`` and caches.
"""
from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

#: Paths (relative to the root, POSIX) that carry a stage number and belong to
#: that stage: the edition keeps them for stages 00..N only.
STAGED = (
    re.compile(r"^steps/step(\d\d)_[^/]+\.py$"),
    re.compile(r"^notebooks/(\d\d)_[^/]+\.ipynb$"),
    re.compile(r"^solutions/(\d\d)_[^/]+\.py$"),
    re.compile(r"^dezero_mini/memory/explorations/stage(\d\d)\.py$"),
)
#: Folders and files that hold every stage (the course's tests of its own step
#: files, the benchmarks, CI, the grading machine's folders): never in an edition.
INSTRUCTOR_ONLY = ("tests/", "benchmarks/", ".ci/", "graders/", ".github/")
#: Never copied when the files are not taken from git.
NOT_SOURCE = {".git", ".venv", ".venvs", "build", "__pycache__", ".pytest_cache",
              ".hypothesis", "tool-output", "memray-results"}
#: The hidden folders that hold course files; others (.cache, .config, .ipython:
#: what tools leave where HOME is the checkout) are not the course's.
HIDDEN_SOURCE = {".ci"}


def _is_source(relative):
    """Whether the file at ``relative`` (a path below the checkout) is one of
    the course's, judged by its folders when git cannot say."""
    *folders, _ = relative.parts
    return not NOT_SOURCE.intersection(relative.parts) and not any(
        folder.endswith(".egg-info") or (folder.startswith(".") and folder not in HIDDEN_SOURCE)
        for folder in folders)

NOTE = """# Student edition: stages 00 to {upto:02d}

This copy of the course holds the lessons, step files and worked solutions of
stages 00 to {upto:02d}, the stages your class has finished. The next stage,
{next_label}, is yours to build:

```sh
make book                                   # set up .venv and build the book of stages 00-{upto:02d}
source .venv/bin/activate                   # so that `python` finds dezero_mini
python -m dezero_mini start {next}                  # writes the file the stage starts from
python -m dezero_mini check {next} {next_file}
```

Its lesson comes with the next edition, after the stage is graded.
"""


def tracked_files(root, tell=None):
    """The files of the course (names relative to ``root``): what git tracks
    in ``root``, or, where git cannot say (outside a checkout, no git, a
    checkout that another user owns), every file below it but build products,
    virtual environments and caches. ``tell(why)`` hears why git could not say."""
    try:
        listed = subprocess.run(["git", "-C", str(root), "ls-files", "-z"], check=True,
                                capture_output=True).stdout
        return sorted(name for name in listed.decode().split("\0") if name)
    except (OSError, subprocess.CalledProcessError) as error:
        if tell is not None:
            said = getattr(error, "stderr", None) or b""
            lines = [line.strip() for line in said.decode(errors="replace").splitlines() if line.strip()]
            tell(" ".join(lines) if lines else (getattr(error, "strerror", None) or str(error)))
        found = []
        for path in sorted(root.rglob("*")):
            relative = path.relative_to(root)
            if path.is_file() and _is_source(relative):
                found.append(relative.as_posix())
        return found


def stage_of(name):
    """The stage that the file ``name`` belongs to, or None for a file of every stage."""
    for pattern in STAGED:
        match = pattern.match(name)
        if match:
            return int(match.group(1))
    return None


def edition_files(names, upto):
    """The files of ``names`` that a student edition for stages 00..``upto`` holds."""
    kept = []
    for name in names:
        if name.startswith(INSTRUCTOR_ONLY):
            continue
        stage = stage_of(name)
        if stage is None or stage <= upto:
            kept.append(name)
    return kept


def next_stage(upto):
    """(number, label, file name) of the stage after ``upto``, or None after the last."""
    sys.path.insert(0, str(ROOT))
    from dezero_mini.contracts import stages

    later = [stage for stage in stages() if stage.number > upto]
    if not later:
        return None
    stage = later[0]
    return stage.number, stage.label, stage.file_name


def write_edition(upto, out, root=ROOT):
    """Write the edition for stages 00..``upto`` into the folder ``out``
    (replacing an earlier one whole); returns the number of files written."""
    files = edition_files(tracked_files(root), upto)
    out.parent.mkdir(parents=True, exist_ok=True)
    building = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    try:
        for name in files:
            source = root / name
            if not source.is_file():  # tracked but deleted in the working tree
                continue
            target = building / name
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target)
        following = next_stage(upto)
        if following:
            number, label, file_name = following
            note = NOTE.format(upto=upto, next=number, next_label=label, next_file=file_name)
        else:
            note = NOTE.split("The next stage")[0].format(upto=upto)
        (building / "STUDENT_EDITION.md").write_text(note)
        if out.exists():
            old = out.with_name(f".{out.name}.old")
            shutil.rmtree(old, ignore_errors=True)
            out.rename(old)
            building.rename(out)
            shutil.rmtree(old, ignore_errors=True)
        else:
            building.rename(out)
    except BaseException:
        shutil.rmtree(building, ignore_errors=True)
        raise
    return len(files) + 1


def stage_argument(text):
    try:
        value = int(text)
    except ValueError:
        value = -1
    if not 0 <= value <= 99:
        raise argparse.ArgumentTypeError(
            f"must be the last stage the class has finished, a whole number from 0 to 99, "
            f"got {text!r}")
    return value


def main(argv=None):
    parser = argparse.ArgumentParser(
        prog="student_edition.py", description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("upto", type=stage_argument, metavar="N",
                        help="the last stage the class has finished (0 for none)")
    parser.add_argument("out", type=Path, nargs="?", metavar="OUT",
                        help="the folder to write (default: build/student-edition-NN)")
    args = parser.parse_args(argv)
    out = args.out or ROOT / "build" / f"student-edition-{args.upto:02d}"
    if out.resolve() == ROOT or ROOT in out.resolve().parents and \
            out.resolve().relative_to(ROOT).parts[0] != "build":
        parser.error(f"OUT {str(out)!r} is inside the course's own files; give a folder "
                     "under build/ or outside the checkout")
    if out.exists() and not out.is_dir():
        parser.error(f"OUT {str(out)!r} exists and is not a folder")
    try:
        count = write_edition(args.upto, out)
    except KeyboardInterrupt:
        print("student_edition: interrupted; nothing written", file=sys.stderr)
        return 130
    except OSError as error:
        print(f"student_edition: error: cannot write {out}: {error.strerror or error}",
              file=sys.stderr)
        return 1
    print(f"wrote the student edition of stages 00-{args.upto:02d} to {out} ({count} files)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
