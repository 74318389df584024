"""Make the zip that Gradescope's "Configure Autograder" page takes, for one stage.

    python tools/gradescope_zip.py --stage 3 [--weights weights.toml] [--out PATH]
    make gradescope-zip STAGE=3 [WEIGHTS=weights.toml]

The zip holds, at its root (Gradescope looks there): ``setup.sh`` and
``run_autograder`` from ``graders/gradescope/``, ``STAGE`` (the stage's
number), the weights file if one is given (as ``weights.toml`` or
``weights.json``, checked first), and ``course/``: the files of this
repository that git tracks, which ``setup.sh`` installs. The zip is written
to a temporary file and renamed, so a failed run leaves no half-made zip.
"""
import argparse
import os
import stat
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

REPOSITORY = Path(__file__).resolve().parent.parent
GRADER = REPOSITORY / "graders" / "gradescope"
EXECUTABLE = ("setup.sh", "run_autograder")


def tracked_files(repository=REPOSITORY):
    """The files that git tracks in ``repository`` (never .venv, build or caches)."""
    listed = subprocess.run(["git", "ls-files", "-z"], cwd=repository, capture_output=True,
                            check=True).stdout
    return [repository / name for name in listed.decode().split("\0") if name]


def _add(archive, path, name, executable=False):
    info = zipfile.ZipInfo.from_file(path, name)
    mode = 0o755 if executable else 0o644
    info.external_attr = (stat.S_IFREG | mode) << 16
    info.compress_type = zipfile.ZIP_DEFLATED
    archive.writestr(info, path.read_bytes())


def make_zip(number, out, weights=None, repository=REPOSITORY):
    """Write the autograder zip of stage ``number`` to ``out``."""
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    fd, temporary = tempfile.mkstemp(dir=out.parent, prefix=f".{out.name}.", suffix=".part")
    os.close(fd)
    try:
        with zipfile.ZipFile(temporary, "w") as archive:
            for name in EXECUTABLE:
                _add(archive, GRADER / name, name, executable=True)
            archive.writestr("STAGE", f"{number}\n")
            if weights is not None:
                _add(archive, Path(weights), "weights" + Path(weights).suffix.lower())
            for path in tracked_files(repository):
                if path.is_file():  # a tracked file deleted in the work tree is left out
                    relative = path.relative_to(repository).as_posix()
                    _add(archive, path, f"course/{relative}",
                         executable=os.access(path, os.X_OK))
        os.chmod(temporary, 0o644)
        os.replace(temporary, out)
    finally:
        if os.path.exists(temporary):
            os.unlink(temporary)
    return out


def main(argv=None):
    sys.path.insert(0, str(REPOSITORY))
    from dezero_mini.arguments import stage_number
    from dezero_mini.contracts.scoring import Weights, WeightsError

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--stage", type=stage_number, required=True, metavar="N")
    parser.add_argument("--weights", type=Path, metavar="FILE",
                        help="a weights file (.toml or .json) for the points")
    parser.add_argument("--out", type=Path, metavar="PATH",
                        help="the zip (default: build/gradescope/autograder_stageNN.zip)")
    args = parser.parse_args(argv)
    if args.weights is not None:
        try:
            Weights.from_file(args.weights).points_at(args.stage)
        except WeightsError as error:
            parser.error(f"argument --weights: {error}")
    out = args.out or REPOSITORY / "build" / "gradescope" / f"autograder_stage{args.stage:02d}.zip"
    make_zip(args.stage, out, args.weights)
    print(f"wrote {out}: upload it on the assignment's Configure Autograder page")
    return 0


if __name__ == "__main__":
    sys.exit(main())
