"""Make the zip that Gradescope's "Configure Autograder" page takes, for one stage.

    python tools/gradescope_zip.py --stage 3 [--weights weights.toml] [--out PATH]
    make gradescope-zip STAGE=3 [WEIGHTS=weights.toml]

The zip holds, at its root (Gradescope looks there): ``setup.sh`` and
``run_autograder`` from ``graders/gradescope/``, ``STAGE`` (the stage's
number), the weights file if one is given (as ``weights.toml`` or
``weights.json``, checked first), and ``course/``: the files of this
repository that git tracks (as the student edition lists them: where git
cannot, every file but build products, environments and caches, and it says
why), which ``setup.sh`` installs. The zip is written to a temporary file and
renamed, so a failed or interrupted run leaves no half-made zip.
"""
import argparse
import os
import stat
import sys
import zipfile
from pathlib import Path

REPOSITORY = Path(__file__).resolve().parent.parent
GRADER = REPOSITORY / "graders" / "gradescope"
EXECUTABLE = ("setup.sh", "run_autograder")
sys.path.insert(0, str(REPOSITORY))  # dezero_mini, before it is installed

from dezero_mini import atomic  # noqa: E402
from student_edition import tracked_files  # noqa: E402  (this folder: the course's files, listed once)


def _tell_the_walk(repository):
    def tell(why):
        print(f"gradescope_zip: note: git could not list the files it tracks in {repository} "
              f"({why}); the zip holds every file below it but build products, environments "
              "and caches", file=sys.stderr)
    return tell


def _add(archive, path, name, executable=False):
    info = zipfile.ZipInfo.from_file(path, name)
    mode = 0o755 if executable else 0o644
    info.external_attr = (stat.S_IFREG | mode) << 16
    info.compress_type = zipfile.ZIP_DEFLATED
    archive.writestr(info, path.read_bytes())


class CannotWriteThere(ValueError):
    """The zip cannot be written at its path: one of the files it packs is
    there (or a link there leads to one), or the path cannot be written."""


def make_zip(number, out, weights=None, repository=REPOSITORY):
    """Write the autograder zip of stage ``number`` to ``out`` (through a
    temporary file: the old zip stays until the new one is whole)."""
    out = Path(out)
    files = tracked_files(repository, tell=_tell_the_walk(repository))
    problem = atomic.output_target_problem(out, (".zip",), [  # the one check, with the inputs
        ("the weights file", weights), *(("a file it packs", GRADER / name) for name in EXECUTABLE),
        *(("a file of the course it packs", repository / relative) for relative in files)])
    if problem is not None:
        raise CannotWriteThere(problem)
    with atomic.atomic_write(out) as file, zipfile.ZipFile(file, "w") as archive:
        for name in EXECUTABLE:
            _add(archive, GRADER / name, name, executable=True)
        archive.writestr("STAGE", f"{number}\n")
        if weights is not None:
            _add(archive, Path(weights), "weights" + Path(weights).suffix.lower())
        for relative in files:
            path = repository / relative
            if path.is_file():  # a tracked file deleted in the work tree is left out
                _add(archive, path, f"course/{relative}", executable=os.access(path, os.X_OK))
    return out


def main(argv=None):
    from dezero_mini.arguments import stage_number
    from dezero_mini.contracts.scoring import Weights, WeightsError

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--stage", type=stage_number, required=True, metavar="N")
    parser.add_argument("--weights", type=Path, metavar="FILE",
                        help="a weights file (.toml or .json) for the points")
    parser.add_argument("--out", metavar="PATH",  # as typed: Path would drop a trailing "/"
                        help="the zip (default: build/gradescope/autograder_stageNN.zip)")
    args = parser.parse_args(argv)
    if args.weights is not None:
        try:
            Weights.from_file(args.weights).points_at(args.stage)
        except WeightsError as error:
            parser.error(f"argument --weights: {error}")
    if args.out is None:
        args.out = REPOSITORY / "build" / "gradescope" / f"autograder_stage{args.stage:02d}.zip"
        args.out.parent.mkdir(parents=True, exist_ok=True)
    problem = atomic.output_target_problem(args.out, (".zip",))
    if problem and not atomic.leads_to_a_file(args.out):  # else make_zip judges it with its inputs
        parser.error(f"argument --out: {problem}")
    args.out = Path(args.out)
    try:
        make_zip(args.stage, args.out, args.weights)
    except CannotWriteThere as error:
        parser.error(f"argument --out: {error}")
    except KeyboardInterrupt:
        print("gradescope_zip: interrupted; no zip written", file=sys.stderr)
        return 130
    except OSError as error:  # a course file that cannot be read, a disk that fills up
        print(f"gradescope_zip: error: cannot write {args.out}: "
              f"{error.strerror or error}{f' ({error.filename})' if error.filename else ''}",
              file=sys.stderr)
        return 1
    print(f"wrote {args.out}: upload it on the assignment's Configure Autograder page")
    return 0


if __name__ == "__main__":
    sys.exit(main())
