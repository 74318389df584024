"""The learner's loop of lesson 01 and README: ``start N``, ``check N`` and
``progress`` on the files that ``start`` writes, unchanged, work on the first
try; and the course's own files earn no grade on any path that grades.

Self-study checks any file and says when it is the course's own (lesson 01's
first step checks the file that ``start 1`` writes, which is exactly
``steps/step01_leaking_graph.py``); grading refuses such a file: ``check
--json`` (what ``grade`` and the GitHub Actions workflow read), ``check
--gradescope``, ``grade`` and the Gradescope autograder.
"""
import ast
import json
import subprocess
import sys

import pytest

from dezero_mini import cli
from dezero_mini.contracts import contracts_at, get_stage, names_needed_at, stages
from dezero_mini.grading import gradescope

BATCHES = "20"  # as test_checker: 20 batches show every leak; the lesson's own run uses 200
STAGES = [stage.number for stage in stages()]
NOTE = "note: this file is the course's own steps/step01_leaking_graph.py"
REFUSED = "is the course's own step01_leaking_graph.py"


def start(number, folder):
    """``start N FOLDER`` as the learner runs it; the path of the file written."""
    done = subprocess.run([sys.executable, "-m", "dezero_mini", "start", str(number), str(folder)],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    return folder / get_stage(number).file_name


@pytest.fixture(scope="module")
def started(tmp_path_factory):
    """A folder with the file of every stage, as ``start`` writes it."""
    folder = tmp_path_factory.mktemp("course")
    for number in STAGES:
        start(number, folder)
    return folder


def names_defined(path):
    """The names that the file defines at its top level."""
    tree = ast.parse(path.read_text())
    names = {node.name for node in tree.body
             if isinstance(node, (ast.ClassDef, ast.FunctionDef))}
    for node in tree.body:
        if isinstance(node, ast.Assign):
            names.update(n.id for target in node.targets for n in ast.walk(target)
                         if isinstance(n, ast.Name))
    return names


@pytest.mark.parametrize("number", STAGES)
def test_check_of_the_file_that_start_writes_gives_its_honest_verdict(number, started, capsys):
    """Stage 01's file is the course's starting point: every contract passes,
    and one line says it is the course's own. From stage 02 on it is the
    snapshot the stage builds on: exactly contracts new in the stage fail.
    Where the stage needs names that the snapshot lacks (stages 05, 09, 10),
    the inherited contracts run and score, and every new one fails as not
    run, naming what is missing and saying to define it (exit 1, not 2)."""
    path = started / get_stage(number).file_name
    code = cli.main(["check", str(number), str(path), "--batches", BATCHES])
    out, err = capsys.readouterr()
    assert "Traceback" not in err, err
    failing = {line.split()[1] for line in out.splitlines() if line.startswith("FAIL")}
    new = {contract.name for contract in contracts_at(number) if contract.stage == number}
    missing = [name for name in names_needed_at(number) if name not in names_defined(path)]
    if number == 1:
        assert code == 0 and not failing and not err, out + err
        assert out.splitlines()[-1].startswith(NOTE), out
    elif missing:
        assert code == 1 and failing == new and not err, out + err
        for line in out.splitlines():
            if line.startswith("FAIL"):
                assert f"not run: {path.name} lacks " in line and "define" in line, line
                assert all(name in line for name in missing), line
        passed = [line for line in out.splitlines() if line.startswith("pass")]
        assert len(passed) == len(contracts_at(number)) - len(new), out
    else:
        assert code == 1 and failing and failing <= new and not err, out + err
    assert "course's own" not in out + err or number == 1


def test_lesson_01s_first_step_passes_at_the_default_batches(tmp_path):
    """The lesson's words, run as it says: start 1, then check 1 in the same folder."""
    path = start(1, tmp_path)
    done = subprocess.run([sys.executable, "-m", "dezero_mini", "check", "1", path.name],
                          capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert lines[-2].startswith(f"{len(contracts_at(1))} of {len(contracts_at(1))} contracts pass")
    assert lines[-1].startswith(NOTE) and "earns no grade" in lines[-1]


def test_the_header_of_start_1_says_what_check_will_say(tmp_path):
    text = start(1, tmp_path).read_text()
    header = " ".join(line.lstrip("# ") for line in text.split("\n\n")[0].splitlines())
    assert "a line that says it is the course's own file, which earns no grade" in header


def test_progress_checks_the_files_that_start_writes(started):
    done = subprocess.run([sys.executable, "-m", "dezero_mini", "progress", str(started),
                           "--batches", BATCHES], capture_output=True, text=True, timeout=1800)
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    lines = dict(zip(STAGES, done.stdout.splitlines()[1:]))
    total = len(contracts_at(1))
    assert f"{total}/{total} contracts pass" in lines[1], lines[1]
    assert lines[1].endswith("(the course's own step01_leaking_graph.py: no grade); done")
    for number in STAGES[1:]:  # (the verdicts of the test above, one line each)
        assert "fails: " in lines[number], lines[number]
        assert "course's own" not in lines[number]


def test_an_interrupted_progress_ends_the_checks_of_its_other_threads(tmp_path):
    """Ctrl-C reaches the thread that prints; the checks that the other
    threads run (two files that loop while loading, under a 60 s limit)
    end at once, their workers killed, instead of running to their limit."""
    import threading

    from dezero_mini.contracts.runner import CheckStopped, check_file
    from dezero_mini.grading.learner_progress import progress

    for number in (3, 4):
        (tmp_path / get_stage(number).file_name).write_text("while True:\n    pass\n")
    stopped, loading, outcomes = threading.Event(), threading.Semaphore(0), []

    def check(number, path):
        try:
            outcomes.append(check_file(number, path, timeout=60, total_timeout=60, stop=stopped,
                                       on_step=lambda step: loading.release()))
        except CheckStopped as error:
            outcomes.append(error)
            raise

    def interrupt(item):  # once both files are loading, as a learner's Ctrl-C would
        if item.number == 2:
            loading.acquire()
            loading.acquire()
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        progress(tmp_path, check, on_stage=interrupt, jobs=2, stop=stopped.set)
    assert len(outcomes) == 2 and all(isinstance(o, CheckStopped) for o in outcomes), outcomes


# --- Grading refuses the course's own file ------------------------------------------------------
def _check_json(folder, path, capsys):
    code = cli.main(["check", "1", str(path), "--json"])
    report = json.loads(capsys.readouterr().out)
    return code, report["status"], report["message"], report["reference"]


def _check_gradescope(folder, path, capsys):
    target = folder / "results.json"
    code = cli.main(["check", "1", str(path), "--gradescope", str(target)])
    err = capsys.readouterr().err
    results = json.loads(target.read_text())
    assert "grading refuses it; without --json and --gradescope" in err
    return code, "error", results["output"], None


def _grade(folder, path, capsys):
    (folder / "alice").mkdir()
    path.rename(folder / "alice" / path.name)
    grades = folder / "grades.csv"
    code = cli.main(["grade", "1", str(folder / "alice"), "--csv", str(grades)])
    capsys.readouterr()
    import csv
    with open(grades, newline="") as f:
        row = next(csv.DictReader(f))
    return code, row["status"], row["message"], None


def _autograder(folder, path, capsys):
    (folder / "submission").mkdir()
    path.rename(folder / "submission" / path.name)
    report = gradescope.autograde(folder, 1)
    results = json.loads((folder / "results" / "results.json").read_text())
    assert results["score"] == 0
    return 0, report.status, report.message, report.reference


@pytest.mark.parametrize("grader, exit_code", [
    (_check_json, 2), (_check_gradescope, 2), (_grade, 0), (_autograder, 0),
], ids=["check --json", "check --gradescope", "grade", "Gradescope autograder"])
def test_every_grading_path_refuses_the_course_s_own_file(grader, exit_code, tmp_path, capsys):
    path = start(1, tmp_path)
    code, status, message, reference = grader(tmp_path, path, capsys)
    assert code == exit_code and status == "error", (code, status, message)
    assert REFUSED in message and "must be the learner's own work" in message
    assert reference in (None, "step01_leaking_graph.py")


def test_the_maintainers_allow_reference_checks_it_for_a_grader_too(tmp_path, capsys):
    path = start(1, tmp_path)
    code = cli.main(["check", "1", str(path), "--json", "--allow-reference",
                     "--contract", "leaf_gradients_are_right"])
    report = json.loads(capsys.readouterr().out)
    assert code == 0 and report["status"] == "passed", report
    assert report["reference"] == "step01_leaking_graph.py"
