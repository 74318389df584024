"""Gradescope: ``check --gradescope`` and the autograder folder, run as Gradescope runs it.

``graders/gradescope/run_autograder`` is run (the real script, with bash)
against a temporary folder laid out as Gradescope's ``/autograder``
(``submission/`` and ``results/``), for a passing, a failing and a broken
stage-03 submission, and for a submission with no stage file at all.
"""
import json
import os
import re
import shutil
import subprocess
import sys
import zipfile

import pytest

import submissions
from conftest import ROOT
from dezero_mini import cli
from dezero_mini.contracts import contracts_at, get_stage
from dezero_mini.contracts.scoring import Weights
from dezero_mini.grading import gradescope

GRADER = ROOT / "graders" / "gradescope"
STAGE = submissions.STAGE
FILE_NAME = get_stage(STAGE).file_name
NAMES = [contract.name for contract in contracts_at(STAGE)]
TEST_FIELDS = {"name", "number", "score", "max_score", "status", "output", "tags", "visibility"}


def autograde(root, environment=None):
    """Run run_autograder with ``root`` standing in for /autograder; its
    exit code, output and the results it wrote."""
    env = {"PATH": os.environ["PATH"], "HOME": str(root), "DEZERO_MINI_STAGE": str(STAGE),
           "DEZERO_MINI_AUTOGRADER_ROOT": str(root), "DEZERO_MINI_PYTHON": sys.executable,
           "DEZERO_MINI_CHECK_OPTIONS": "--batches 20", **(environment or {})}
    done = subprocess.run(["bash", str(GRADER / "run_autograder")], env=env, cwd=root,
                          capture_output=True, text=True, timeout=900)
    return done, json.loads((root / "results" / "results.json").read_text())


def submission_root(tmp_path_factory, name, files):
    root = tmp_path_factory.mktemp(name)
    for relative, text in files.items():
        path = root / "submission" / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    """The autograder's results for each kind of submission."""
    kinds = {
        "passing": {FILE_NAME: submissions.passing()},
        # in a subfolder, as an uploaded folder or repository is; a json.py beside it
        "failing": {f"lab/{FILE_NAME}": submissions.failing(),
                    "lab/json.py": "raise SystemExit('imported the json.py of the submission')\n"},
        "broken": {FILE_NAME: submissions.broken()},
        "empty": {"notes.txt": "I will do it tomorrow\n"},
    }
    return {kind: autograde(submission_root(tmp_path_factory, kind, files))
            for kind, files in kinds.items()}


@pytest.mark.xdist_group("graded-gradescope")  # one test process grades the class once
def test_the_three_scores_with_their_denominators(graded):
    scores = {kind: (results["score"], sum(test["max_score"] for test in results["tests"]))
              for kind, (_, results) in graded.items()}
    assert scores == {"passing": (submissions.PASSING_POINTS, submissions.MAX_POINTS),
                      "failing": (submissions.FAILING_POINTS, submissions.MAX_POINTS),
                      "broken": (0, submissions.MAX_POINTS),
                      "empty": (0, submissions.MAX_POINTS)}
    for done, _ in graded.values():
        assert done.returncode == 0, done.stderr


@pytest.mark.xdist_group("graded-gradescope")  # one test process grades the class once
def test_results_have_the_fields_gradescope_reads(graded):
    for kind, (_, results) in graded.items():
        assert isinstance(results["score"], (int, float)) and isinstance(results["output"], str)
        assert isinstance(results["execution_time"], int) and results["execution_time"] >= 1
        assert [test["name"] for test in results["tests"]] == NAMES, kind
        for number, test in enumerate(results["tests"], 1):
            assert set(test) == TEST_FIELDS
            assert test["number"] == str(number) and test["visibility"] == "visible"
            assert test["status"] == ("passed" if test["score"] == test["max_score"] else "failed")
            assert test["tags"][1] in ("new", "inherited") and test["tags"][0].startswith("stage ")
        assert results["score"] == sum(test["score"] for test in results["tests"])


@pytest.mark.xdist_group("graded-gradescope")  # one test process grades the class once
def test_each_result_says_why(graded):
    _, failing = graded["failing"]
    failed = [test for test in failing["tests"] if test["status"] == "failed"]
    assert [test["name"] for test in failed] == [c.name for c in contracts_at(STAGE)
                                                 if c.stage == STAGE]
    for test in failed:
        contract = next(c for c in contracts_at(STAGE) if c.name == test["name"])
        assert "expected " in test["output"] and f"hint: {contract.hint}" in test["output"]
    assert "imported the json.py" not in json.dumps(failing)
    _, broken = graded["broken"]
    assert "SyntaxError" in broken["output"]
    assert all("not run: the file could not be loaded: cannot load" in test["output"]
               for test in broken["tests"])
    _, empty = graded["empty"]
    assert f"no {FILE_NAME} in the submission: upload {FILE_NAME}" in empty["output"]


def test_a_grader_that_cannot_run_still_writes_results(tmp_path):
    (tmp_path / "submission").mkdir()
    (tmp_path / "results").mkdir()
    (tmp_path / "results" / "results.json").write_text('{"score": 100}')  # an old run's
    done, results = autograde(tmp_path, {"DEZERO_MINI_STAGE": "42"})
    assert done.returncode == 0 and results["score"] == 0 and results["tests"] == []
    assert "tell your instructor" in results["output"] and "exit code 2" in results["output"]


# --- check --gradescope ---------------------------------------------------------------
def test_check_writes_the_same_results_atomically(tmp_path, capsys):
    path = tmp_path / FILE_NAME
    path.write_text(submissions.broken())
    out = tmp_path / "results" / "results.json"
    out.parent.mkdir()
    code = cli.main(["check", str(STAGE), str(path), "--json", "--gradescope", str(out)])
    report = json.loads(capsys.readouterr().out)
    results = json.loads(out.read_text())
    assert code == 2 and results["score"] == report["points"] == 0
    assert [test["max_score"] for test in results["tests"]] == [
        contract["max_points"] for contract in report["contracts"]]
    assert os.listdir(out.parent) == ["results.json"]  # no temporary file left beside it


@pytest.mark.parametrize("target, message", [
    ("{dir}", "is a folder; give a file name inside it"),
    ("{dir}/missing/results.json", "does not exist; create it or choose another place"),
])
def test_check_refuses_a_gradescope_path_it_cannot_write(target, message, tmp_path, capsys):
    path = tmp_path / FILE_NAME
    path.write_text(submissions.broken())
    with pytest.raises(SystemExit) as stop:
        cli.main(["check", str(STAGE), str(path), "--gradescope", target.format(dir=tmp_path)])
    err = capsys.readouterr().err
    assert stop.value.code == 2 and "argument --gradescope" in err and message in err


# --- The zip for Gradescope -----------------------------------------------------------
def test_the_zip_has_the_scripts_at_its_root_and_the_course(tmp_path):
    weights = tmp_path / "w.toml"
    weights.write_text("new = 3\n")
    out = tmp_path / "autograder.zip"
    done = subprocess.run([sys.executable, str(ROOT / "tools" / "gradescope_zip.py"),
                           "--stage", "3", "--weights", str(weights), "--out", str(out)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    with zipfile.ZipFile(out) as archive:
        names = set(archive.namelist())
        modes = {info.filename: info.external_attr >> 16 for info in archive.infolist()}
        assert archive.read("STAGE") == b"3\n" and archive.read("weights.toml") == b"new = 3\n"
    for script in ("setup.sh", "run_autograder"):
        assert script in names and modes[script] & 0o111
    assert {"course/pyproject.toml", "course/dezero_mini/contracts/runner.py"} <= names
    assert not any(name.startswith(("course/.venv/", "course/build/")) for name in names)


@pytest.mark.parametrize("out, message", [
    ("{tmp}", "the file name must end in .zip"),
    ("{tmp}/a.txt", "the file name must end in .zip, got"),
    ("{tmp}/no/such/folder/a.zip", "does not exist; create it or choose another place"),
    ("{tmp}/a.zip/", "which makes it the name of a folder"),
    # root may write into /proc's folder but /proc takes no new file; a user may not write there
    ("/proc/autograder.zip", "does not accept new files|is not writable by you"),
], ids=["a folder", "another suffix", "a missing folder", "a trailing slash", "/proc"])
def test_the_zip_refuses_a_target_it_cannot_write_in_one_line(out, message, tmp_path):
    done = subprocess.run([sys.executable, str(ROOT / "tools" / "gradescope_zip.py"), "--stage", "3",
                           "--out", out.format(tmp=tmp_path)], capture_output=True, text=True, timeout=600)
    assert done.returncode == 2 and re.search(message, done.stderr), done.stderr
    assert "Traceback" not in done.stderr and len(done.stderr.strip().splitlines()) == 2  # usage, error
    assert not list(tmp_path.rglob("*.zip*"))


def test_the_readme_states_the_stage_03_total_that_check_gives():
    readme = (GRADER / "README.md").read_text()
    stated = re.search(r"\((\d+) for stage 03 with the default weights", readme)
    assert stated and int(stated.group(1)) == sum(Weights().points_at(3).values())


# --- Finding the submission: the hostile layouts ---------------------------------------
def _layout_named_twice(folder):
    for sub in ("a", "b"):
        (folder / sub).mkdir()
        (folder / sub / FILE_NAME).write_text("x = 1\n")


def _layout_link(folder):
    (folder / FILE_NAME).symlink_to(ROOT / "steps" / "step03_weakref_outputs.py")


def _layout_too_large(folder):
    (folder / FILE_NAME).write_text("#" * (gradescope.MAX_SUBMISSION_BYTES + 1))


def _layout_other_name(folder):
    (folder / "mine.py").write_text("x = 1\n")


def _layout_two_other_names(folder):
    (folder / "a.py").write_text("x = 1\n")
    (folder / "b.py").write_text("x = 1\n")


def _layout_linked_folder(folder):
    (folder / "linked").symlink_to(ROOT / "steps", target_is_directory=True)


SUBMISSION_LAYOUTS = [  # (layout, the file graded or None, what the reason says)
    (_layout_named_twice, None, f"holds 2 files named {FILE_NAME}"),
    (_layout_link, None, "is a link, not a file"),
    (_layout_too_large, None, "more than a stage file can be"),
    (_layout_other_name, "mine.py", None),
    (_layout_two_other_names, None, "its Python files: a.py, b.py"),
    (_layout_linked_folder, None, f"no {FILE_NAME} in the submission: upload"),
]


@pytest.mark.parametrize("layout, graded_file, reason", SUBMISSION_LAYOUTS,
                         ids=[case[0].__name__[len("_layout_"):] for case in SUBMISSION_LAYOUTS])
def test_find_submission_in_hostile_layouts(layout, graded_file, reason, tmp_path):
    layout(tmp_path)
    path, why = gradescope.find_submission(tmp_path, get_stage(STAGE))
    if graded_file:
        assert path == tmp_path / graded_file and why is None
    else:
        assert path is None and reason in why, why


@pytest.mark.parametrize("script", ["setup.sh", "run_autograder"])
def test_the_scripts_are_executable_bash_that_parses(script):
    """setup.sh installs with apt and pip as root, so it is not run here: bash
    only parses it (run_autograder is run above)."""
    path = GRADER / script
    assert os.access(path, os.X_OK) and path.read_text().startswith("#!/usr/bin/env bash\n")
    done = subprocess.run(["bash", "-n", str(path)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
