"""Gradescope: its ``results.json`` from a check report, and the autograder's entry point.

``results(report)`` turns a ``CheckReport`` into the dictionary that
Gradescope's autograder harness reads from ``/autograder/results/results.json``
(its "autograder specifications"): ``score``, ``execution_time``, ``output``
and one test per contract with ``name``, ``number``, ``score``,
``max_score``, ``status``, ``output``, ``tags`` and ``visibility``. ``check
--gradescope PATH`` writes it; so does the autograder
(``graders/gradescope/run_autograder`` runs ``python -m
dezero_mini.grading.gradescope``), which also finds the submission and
writes a results file even when there is none or it cannot be graded.
"""
import argparse
import json
import sys
import time
from pathlib import Path

from dezero_mini.arguments import add_sandbox_option, at_least_two, seconds, stage_number
from dezero_mini.atomic import output_target_problem
from dezero_mini.contracts import get_stage
from dezero_mini.contracts.provenance import MAX_SUBMISSION_BYTES
from dezero_mini.contracts.scoring import Weights, WeightsError, display_points, select_contracts
from dezero_mini.grading.files import OutputPathError, write_atomically



def results(report):
    """Gradescope's results for ``report``, from the same results as ``check``."""
    tests = []
    for number, result in enumerate(report.results, 1):
        lines = [f"{result.summary}."]
        if result.error == "not_loaded":  # nothing was measured: no hint applies
            lines.append(f"not run: {result.measured}")
        else:
            lines.append(f"expected {result.expected}; measured {result.measured}")
            if not result.passed:
                lines.append(f"hint: {result.hint}")
        tests.append({
            "name": result.name,
            "number": str(number),
            "score": result.points,
            "max_score": result.max_points,
            "status": "passed" if result.passed else "failed",
            "output": "\n".join(lines),
            "tags": [f"stage {result.from_stage:02d}",
                     "new" if result.from_stage == report.stage else "inherited"],
            "visibility": "visible",
        })
    return {
        "score": report.points,
        "execution_time": max(1, round(report.seconds)),  # whole seconds
        "output": summary(report),
        "visibility": "visible",
        "stdout_visibility": "hidden",  # the grader's own log, for the instructor
        "tests": tests,
    }


def summary(report):
    """The text above the tests: the stage, the score, why a file could not
    be checked, and the beginning of what it printed."""
    passed = sum(result.passed for result in report.results)
    lines = [f"{Path(report.file).name} against stage {report.stage:02d} "
             f"({report.stage_title}): {passed} of {len(report.results)} contracts pass, "
             f"{display_points(report.points)} of {display_points(report.max_points)} points."]
    if report.status == "error":
        lines.append(f"The file could not be checked: {report.message}")
    if report.output.strip():
        lines.append("What the file printed" + (" (the beginning)" if report.output_truncated
                                                else "") + ":")
        lines.append(report.output.rstrip())
    return "\n".join(lines)


def write_results(report, path):
    """Write ``results(report)`` to ``path``, whole or not at all."""
    write_atomically(path, json.dumps(results(report), indent=2) + "\n")


# --- The autograder -----------------------------------------------------------------
def find_submission(folder, stage):
    """The stage file in Gradescope's submission folder: ``(path, None)``, or
    ``(None, why)`` when there is none that can be graded.

    The file named as the stage's (``stepNN_<name>.py``) at the top or in a
    subfolder (an uploaded folder or repository), else the only ``.py`` file
    of the submission. Links are never followed (a submission could point
    one at the grader's own files), and a file over ``MAX_SUBMISSION_BYTES``
    is refused.
    """
    folder = Path(folder)
    expected = stage.file_name
    if not folder.is_dir():
        return None, f"no submission folder {str(folder)!r}: upload {expected}"
    python_files = sorted(path for path in _walk(folder) if path.suffix == ".py")
    named = [path for path in python_files if path.name == expected]
    if len(named) > 1:
        return None, (f"the submission holds {len(named)} files named {expected} ("
                      + ", ".join(str(path.relative_to(folder)) for path in named)
                      + "): upload one")
    chosen = named or (python_files if len(python_files) == 1 else [])
    if not chosen:
        found = ", ".join(str(path.relative_to(folder)) for path in python_files[:10])
        return None, (f"no {expected} in the submission"
                      + (f" (its Python files: {found}); upload the stage file under "
                         "that name" if found else f": upload {expected}"))
    path = chosen[0]
    if path.is_symlink():
        return None, f"{path.relative_to(folder)} is a link, not a file: upload the file itself"
    size = path.stat().st_size
    if size > MAX_SUBMISSION_BYTES:
        return None, (f"{path.relative_to(folder)} is {size} bytes, more than a stage file "
                      f"can be (at most {MAX_SUBMISSION_BYTES})")
    return path, None


def _walk(folder):
    """Every file under ``folder``, without entering linked folders."""
    for entry in sorted(folder.iterdir()):
        if entry.is_symlink() or entry.is_file():
            yield entry
        elif entry.is_dir():
            yield from _walk(entry)


def unchecked_report(number, file, message, weights=None, names=None):
    """The report of a submission that could not even be given to ``check``:
    every contract failed with ``message``, worth its points."""
    from dezero_mini.contracts.runner import CheckReport

    stage = get_stage(number)
    selected = select_contracts(number, names)
    report = CheckReport(stage=stage.number, stage_name=stage.name, stage_title=stage.title,
                         file=str(file), status="error", message=message)
    return report.settle(selected, (weights or Weights()).points_at(number, selected))


def autograde(root, number, *, weights=None, timeout=None, batches=None, sandbox="required"):
    """Grade ``root/submission`` as stage ``number``; write
    ``root/results/results.json``, after the check has ended (a results file
    that was there before, which a submission could have written, is
    removed first). ``sandbox``: as for ``check_file`` (required by default:
    without bubblewrap the report says why nothing was checked). Returns
    the report."""
    from dezero_mini.contracts.runner import check_file

    root = Path(root)
    stage = get_stage(number)
    started = time.monotonic()
    target = root / "results" / "results.json"
    try:
        target.unlink()
    except FileNotFoundError:
        pass
    try:
        path, why = find_submission(root / "submission", stage)
    except (OSError, RecursionError) as error:  # unreadable, or folders nested without end
        path, why = None, f"the submission could not be read ({type(error).__name__}: {error})"
    if path is None:
        report = unchecked_report(number, stage.file_name, why, weights)
    else:
        options = {key: value for key, value in (("timeout", timeout), ("batches", batches))
                   if value is not None}
        report = check_file(number, path, weights=weights, sandbox=sandbox, **options)
    report.seconds = round(time.monotonic() - started, 2)
    target.parent.mkdir(parents=True, exist_ok=True)
    problem = output_target_problem(target)
    if problem is not None:
        raise OutputPathError(f"cannot write the results file: {problem}")
    write_results(report, target)
    return report


def main(argv=None):
    """``python -m dezero_mini.grading.gradescope --root /autograder --stage N``.

    Exit 0 when ``results.json`` is written (whatever the score), 2 when it
    cannot be (bad arguments, a results folder that cannot be written).
    """
    parser = argparse.ArgumentParser(
        prog="python -m dezero_mini.grading.gradescope",
        description="Grade a Gradescope submission against a stage of the course.")
    parser.add_argument("--root", type=Path, default=Path("/autograder"), help=(
        "the folder that holds submission/ and results/ (default: %(default)s)"))
    parser.add_argument("--stage", type=stage_number, required=True, metavar="N")
    parser.add_argument("--weights", type=Path, metavar="FILE")
    parser.add_argument("--timeout", type=seconds, metavar="SECONDS")
    parser.add_argument("--batches", type=at_least_two, metavar="N")
    add_sandbox_option(parser, "required", grading=True)
    args = parser.parse_args(argv)
    try:
        weights = Weights.from_file(args.weights) if args.weights else None
        if weights:
            weights.points_at(args.stage)
        report = autograde(args.root, args.stage, weights=weights, timeout=args.timeout,
                           batches=args.batches, sandbox=args.sandbox)
    except (WeightsError, OutputPathError, OSError) as error:
        print(f"autograder: error: {error}", file=sys.stderr)
        return 2
    print(summary(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
