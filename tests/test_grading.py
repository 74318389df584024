"""Stable scores, points and weights, ``--contract``, ``grade`` and ``progress``.

One class of stage-03 submissions is graded once (a module-scoped fixture,
the real ``python -m dezero_mini grade``) and read by several tests; the
other cases use files that fail to load, which ``check`` answers in a
moment, or argument errors, which stop before anything is graded.
"""
import csv
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import submissions
from dezero_mini import cli
from dezero_mini.contracts import contracts_at, get_stage, stages
from dezero_mini.contracts.scoring import (INHERITED_POINTS, NEW_POINTS, Weights, WeightsError,
                                           select_contracts)
from dezero_mini.grading.files import write_atomically

BATCHES = "20"
STAGE = submissions.STAGE
FILE_NAME = get_stage(STAGE).file_name
NAMES = [contract.name for contract in contracts_at(STAGE)]


def run(*argv, cwd=None):
    return subprocess.run([sys.executable, "-m", "dezero_mini", *argv], capture_output=True,
                          text=True, timeout=900, cwd=cwd)


def cli_exit(argv, capsys):
    """``cli.main(argv)``'s exit code and stderr, argparse's SystemExit included."""
    try:
        code = cli.main(argv)
    except SystemExit as stop:
        code = stop.code
    return code, capsys.readouterr().err


def write(folder, name, text):
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(text)
    return path


# --- Points ------------------------------------------------------------------------------
def test_new_contracts_weigh_more_than_inherited_ones():
    assert NEW_POINTS > INHERITED_POINTS > 0
    for stage in stages():
        points = Weights().points_at(stage.number)
        for contract in contracts_at(stage.number):
            expected = NEW_POINTS if contract.stage == stage.number else INHERITED_POINTS
            assert points[contract.name] == expected
    # the untouched stage-03 starter keeps only the inherited contracts: a third, not a half
    assert sum(Weights().points_at(STAGE).values()) == submissions.MAX_POINTS


def test_a_weights_file_sets_points_per_contract_and_per_stage(tmp_path):
    path = write(tmp_path, "weights.toml", (
        "new = 3\ninherited = 0.5\n[contracts]\ntraining_learns = 4\n"
        "[stages.3]\nlive_objects_constant = 10\n"))
    weights = Weights.from_file(path)
    at3, at4 = weights.points_at(3), weights.points_at(4)
    assert at3["live_objects_constant"] == 10 and at4["live_objects_constant"] == 0.5
    assert at3["training_learns"] == at4["training_learns"] == 4
    assert at3["traced_bytes_flat"] == 3 and at3["leaf_gradients_are_right"] == 0.5
    assert at4["drops_intermediate_gradients"] == 3
    same = write(tmp_path, "weights.json", json.dumps(weights.as_mapping()))
    assert Weights.from_file(same).points_at(3) == at3


# The hostile weights files: (name, content, what the error must say).
BAD_WEIGHTS = [
    ("weights.toml", "[contracts]\ntraining_learn = 2\n",
     "contracts: not a contract of the course: 'training_learn' (did you mean 'training_learns'?)"),
    ("weights.toml", "new = -1\n", "new must be a number from 0 to 1000, got -1"),
    ("weights.toml", "inherited = nan\n", "inherited must be a number from 0 to 1000, got nan"),
    ("weights.toml", "new = inf\n", "new must be a number from 0 to 1000, got inf"),
    ("weights.toml", "new = 1e9\n", "new must be a number from 0 to 1000"),
    ("weights.json", '{"new": NaN}', "not valid JSON (NaN is not a number JSON allows"),
    ("weights.toml", 'new = "2"\n', "new must be a number of points, got str '2'"),
    ("weights.json", '{"new": true}', "new must be a number of points, got bool True"),
    ("weights.json", '{"contracts": {"training_learns": [1]}}',
     "contracts.training_learns must be a number of points, got list"),
    ("weights.json", '[1, 2]', "expected a table of weights at the top level, got list"),
    ("weights.toml", "news = 2\n", "unknown key 'news' (did you mean 'new'?); a weights file has only new, inherited"),
    ("weights.toml", "contracts = 2\n", "contracts must be a table of contract names"),
    ("weights.toml", "stages = 3\n", "'stages' must be a table of stage numbers, got int"),
    ("weights.toml", "[stages.42]\ntraining_learns = 1\n", "stages.42 is not a stage with contracts"),
    ("weights.toml", "[stages.x]\ntraining_learns = 1\n", "stages.x is not a stage with contracts"),
    ("weights.toml", "[stages.3]\nkeeps_shapes_not_arrays = 1\n",
     "stages.3: not a contract of stage 03: 'keeps_shapes_not_arrays'"),
    ("weights.toml", "new = [\n", "not valid TOML"),
    # a whole number too long for Python to read (argparse said only "invalid value")
    ("weights.toml", "new = 1" + "0" * 5000 + "\n", "not valid TOML (Exceeds the limit"),
    ("weights.json", '{"new": 1' + "0" * 5000 + "}", "not valid JSON (Exceeds the limit"),
    ("weights.yaml", "new: 2\n", "the name must end in .toml or .json"),
    ("weights.toml", b"new = 2 # \xff\n", "not UTF-8 text"),
    ("weights.toml", "# " + "x" * 70000 + "\n", "is too large for a weights file"),
]


@pytest.mark.parametrize("name, content, message", BAD_WEIGHTS,
                         ids=[f"{i:02d}-{case[2][:30]}" for i, case in enumerate(BAD_WEIGHTS)])
def test_a_hostile_weights_file_is_a_clear_error(name, content, message, tmp_path):
    path = tmp_path / name
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    with pytest.raises(WeightsError) as error:
        Weights.from_file(path)
    assert message in str(error.value) and str(path) in str(error.value)


# What stands where a weights file should be (name, how to make it, words). A pipe, a
# link to /dev/zero or to nothing was "no such file"; reading a pipe would block.
NOT_WEIGHTS_FILES = [
    ("none.toml", lambda path: None, "does not exist"),
    ("folder.toml", Path.mkdir, "is a folder"),
    ("gone.toml", lambda path: path.symlink_to(path.parent / "nowhere.toml"),
     "is a link to nothing"),
    *([("pipe.toml", os.mkfifo, "is not a regular file (a pipe or a device)")]
      if hasattr(os, "mkfifo") else []),
    *([("zero.json", lambda path: path.symlink_to("/dev/zero"),
        "is not a regular file (a pipe or a device)")] if os.path.exists("/dev/zero") else []),
]


@pytest.mark.parametrize("name, make, words", NOT_WEIGHTS_FILES,
                         ids=[case[0] for case in NOT_WEIGHTS_FILES])
def test_what_stands_where_a_weights_file_should_be_is_named(tmp_path, name, make, words):
    path = tmp_path / name
    make(path)
    with pytest.raises(WeightsError) as raised:
        Weights.from_file(path)
    assert str(raised.value) == (f"weights file {str(path)!r} {words}; give a .toml or .json "
                                 "file of weights")


def test_weights_that_give_the_stage_no_points_are_refused(tmp_path):
    path = write(tmp_path, "weights.toml", "new = 0\ninherited = 0\n[stages.4]\ntraining_learns = 1\n")
    weights = Weights.from_file(path)
    assert sum(weights.points_at(4).values()) == 1
    with pytest.raises(WeightsError, match="stage 03 are worth 0 points in all"):
        weights.points_at(3)


@pytest.mark.parametrize("argv, message", [
    (["--weights", "{dir}/w.toml"], "argument --weights: weights file"),
    (["--weights", "{dir}/zero.toml"], "argument --weights: weights file"),
    (["--contract", "training_learn"], "argument --contract: stage 03 has no contract 'training_learn' "
                                       "(did you mean 'training_learns'?); its contracts: "
                                       + ", ".join(NAMES)),
    (["--contract", "keeps_shapes_not_arrays"], "stage 03 has no contract 'keeps_shapes_not_arrays'"),
])
def test_check_refuses_bad_weights_and_contract_names_with_exit_2(argv, message, tmp_path, capsys):
    write(tmp_path, "w.toml", "new = -2\n")
    write(tmp_path, "zero.toml", "new = 0\ninherited = 0\n")
    target = write(tmp_path, FILE_NAME, submissions.broken())
    argv = [part.format(dir=tmp_path) for part in argv]
    code, err = cli_exit(["check", str(STAGE), str(target), *argv], capsys)
    assert code == 2 and message in err and "Traceback" not in err, err


# --- Stable scores -----------------------------------------------------------------------
@pytest.mark.parametrize("kind", ["broken", "missing", "lacks_names"])
def test_every_contract_is_in_the_report_of_a_file_that_cannot_load(kind, tmp_path, capsys):
    if kind == "broken":
        path = write(tmp_path, FILE_NAME, submissions.broken())
    elif kind == "lacks_names":
        path = write(tmp_path, FILE_NAME, "import numpy as np\n")
    else:
        path = tmp_path / FILE_NAME
    code = cli.main(["check", str(STAGE), str(path), "--json", "--batches", BATCHES])
    report = json.loads(capsys.readouterr().out)
    assert code == report["exit_code"] == 2 and report["status"] == "error"
    assert [contract["name"] for contract in report["contracts"]] == NAMES
    assert report["total"] == len(NAMES) and report["passed"] == 0
    assert report["points"] == 0 and report["max_points"] == submissions.MAX_POINTS
    for contract in report["contracts"]:
        assert not contract["passed"] and contract["error"] == "not_loaded"
        assert contract["measured"] == f"the file could not be loaded: {report['message']}"
        assert contract["points"] == 0 and contract["max_points"] in (NEW_POINTS, INHERITED_POINTS)
    # the fields the JSON report had before points, still there
    assert {"status", "exit_code", "message", "passed", "total", "contracts", "output"} <= set(report)
    assert set(report["contracts"][0]) >= {"name", "from_stage", "until_stage", "summary",
                                           "passed", "expected", "measured", "hint", "seconds",
                                           "error"}


def test_weights_reach_the_report(tmp_path, capsys):
    weights = write(tmp_path, "weights.json", json.dumps(
        {"new": 5, "contracts": {"training_learns": 0.25}}))
    path = write(tmp_path, FILE_NAME, submissions.broken())
    cli.main(["check", str(STAGE), str(path), "--json", "--weights", str(weights)])
    report = json.loads(capsys.readouterr().out)
    points = {contract["name"]: contract["max_points"] for contract in report["contracts"]}
    assert points["training_learns"] == 0.25 and points["live_objects_constant"] == 5
    assert report["max_points"] == 3 * 5 + 0.25 + 2 * INHERITED_POINTS


def test_select_contracts_keeps_course_order_and_each_once():
    chosen = select_contracts(STAGE, ["collector_finds_nothing", "training_learns",
                                      "training_learns"])
    assert [contract.name for contract in chosen] == ["training_learns", "collector_finds_nothing"]


# --- One contract alone --------------------------------------------------------------------
def test_one_contract_runs_alone_with_its_points(tmp_path):
    path = write(tmp_path, FILE_NAME, submissions.passing())
    done = run("check", str(STAGE), str(path), "--contract", "collector_finds_nothing",
               "--json", "--batches", BATCHES, cwd=tmp_path)
    report = json.loads(done.stdout)
    assert [contract["name"] for contract in report["contracts"]] == ["collector_finds_nothing"]
    assert report["contracts"][0]["passed"], report["contracts"]
    assert (report["points"], report["max_points"], report["total"]) == (NEW_POINTS, NEW_POINTS, 1)
    assert done.returncode == 0


# --- grade: one class, graded once --------------------------------------------------------
HOSTILE_NAME = "=HYPERLINK(1)"


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    """A class of six graded by the real command with --jobs 2: its exit
    code, output, and the CSV as rows (dicts)."""
    root = tmp_path_factory.mktemp("class")
    folders = {
        "passing": write(root / "passing", FILE_NAME, submissions.passing()).parent,
        "failing": write(root / "failing", FILE_NAME, submissions.failing()).parent,
        HOSTILE_NAME: write(root / HOSTILE_NAME, FILE_NAME, submissions.broken()).parent,
        "missing": write(root / "missing", "my_stage03.py", submissions.passing()).parent,
    }
    loose = write(root / "loose", "dave_stage3.py", submissions.passing())
    arguments = [*map(str, folders.values()), str(loose)]
    out = root / "grades.csv"
    done = run("grade", str(STAGE), *arguments, "--jobs", "2", "--csv", str(out),
               "--batches", BATCHES, cwd=root)
    with open(out, newline="") as f:
        rows = list(csv.DictReader(f))
    return done, rows, out


@pytest.mark.xdist_group("graded-class")  # one test process grades the class once
def test_grade_writes_one_row_per_student_in_the_order_given(graded):
    done, rows, out = graded
    assert done.returncode == 0, done.stderr
    assert [row["student"] for row in rows] == ["passing", "failing", "'" + HOSTILE_NAME,
                                                "missing", "dave_stage3"]
    by_student = {row["student"]: row for row in rows}
    assert by_student["passing"]["status"] == "passed"
    assert by_student["failing"]["status"] == "failed"
    assert by_student["'" + HOSTILE_NAME]["status"] == "error"
    assert by_student["missing"]["status"] == "missing"
    assert "no step03_weakref_outputs.py in" in by_student["missing"]["message"]
    assert "my_stage03.py" in by_student["missing"]["message"]
    assert by_student["dave_stage3"]["status"] == "passed"
    assert f"wrote {out}" in done.stdout and "graded 5 submissions" in done.stdout


@pytest.mark.xdist_group("graded-class")  # one test process grades the class once
def test_grade_gives_every_student_the_same_total(graded):
    _, rows, _ = graded
    assert {row["max_points"] for row in rows} == {str(submissions.MAX_POINTS)}
    assert {row["total"] for row in rows} == {str(len(NAMES))}
    points = {row["student"]: int(row["points"]) for row in rows}
    assert points["passing"] == submissions.PASSING_POINTS
    assert points["failing"] == submissions.FAILING_POINTS
    for row in rows:  # the contract columns add up to the points
        assert sum(float(row[name]) for name in NAMES) == float(row["points"])
    failing = next(row for row in rows if row["student"] == "failing")
    for contract in contracts_at(STAGE):  # the starter keeps the inherited contracts only
        assert float(failing[contract.name]) == (0 if contract.stage == STAGE else INHERITED_POINTS)


@pytest.mark.xdist_group("graded-class")  # one test process grades the class once
def test_grade_prints_a_line_per_student_as_it_goes(graded):
    done, rows, _ = graded
    lines = [line for line in done.stderr.splitlines() if line.startswith("[")]
    assert len(lines) == len(rows) and lines[-1].startswith(f"[{len(rows)}/{len(rows)}]")
    assert float(rows[0]["seconds"]) > 0 and float(rows[3]["seconds"]) == 0


@pytest.mark.parametrize("extra, message", [
    (["--jobs", "0"], "argument --jobs: must be a whole number of at least 1, got '0'"),
    (["--csv", "{dir}"], "is a folder; give a file name inside it"),
    (["--csv", "{dir}/no/such/folder/grades.csv"], "does not exist; create it or choose another"),
    (["--csv", "{dir}/a_file/grades.csv"], "a_file' is a file, not a folder; choose another place"),
    (["--weights", "{dir}/zero.toml"], "are worth 0 points in all"),
    (["--contract", "nope"], "stage 03 has no contract 'nope'"),
    (["{dir}/nobody"], "no such file or folder"),
    (["{dir}/alice/"], "is given twice"),
])
def test_grade_refuses_bad_arguments_before_grading(extra, message, tmp_path, capsys):
    alice = write(tmp_path / "alice", FILE_NAME, submissions.broken()).parent
    write(tmp_path, "a_file", "")
    write(tmp_path, "zero.toml", "new = 0\ninherited = 0\n")
    extra = [part.format(dir=tmp_path) for part in extra]
    more_submissions = [] if extra[0].startswith("--") else extra
    options = extra if extra[0].startswith("--") else []
    argv = ["grade", str(STAGE), str(alice), *more_submissions,
            "--csv", str(tmp_path / "grades.csv"), *options]
    code, err = cli_exit(argv, capsys)
    assert code == 2 and message in err and "Traceback" not in err, err
    assert "[1/" not in err  # nothing was graded
    assert not (tmp_path / "grades.csv").exists()


@pytest.mark.skipif(sys.platform != "linux", reason="needs a folder that refuses new files")
def test_an_unwritable_csv_folder_is_refused_before_grading(tmp_path, capsys):
    alice = write(tmp_path / "alice", FILE_NAME, submissions.broken()).parent
    if os.geteuid() == 0:  # root writes anywhere on disk, but not into /proc
        folder, why = "/proc", "does not accept new files"
    else:
        folder, why = tmp_path / "locked", "is not writable by you"
        folder.mkdir(mode=0o500)
    code, err = cli_exit(["grade", str(STAGE), str(alice), "--csv", f"{folder}/grades.csv"],
                         capsys)
    assert code == 2 and why in err and "[1/" not in err, err


def test_write_atomically_keeps_the_old_file_when_the_write_fails(tmp_path, monkeypatch):
    path = write(tmp_path, "grades.csv", "the old grades\n")

    def fail(*args):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", fail)
    with pytest.raises(OSError):
        write_atomically(path, "half of the new grades")
    assert path.read_text() == "the old grades\n"
    assert [p.name for p in tmp_path.iterdir()] == ["grades.csv"]  # no temporary file left


# --- progress ------------------------------------------------------------------------------
def test_progress_prints_one_line_per_stage(tmp_path):
    write(tmp_path, FILE_NAME, submissions.passing())
    write(tmp_path, "step04_mine.py", submissions.passing())  # stage 03's file, as stage 04
    write(tmp_path, "step05_a.py", "")
    write(tmp_path, "step05_b.py", "")
    done = run("progress", str(tmp_path), "--batches", BATCHES, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == f"your stage files in {tmp_path}:"
    by_stage = dict(zip((stage.number for stage in stages()), lines[1:]))
    assert len(lines) == len(stages()) + 2
    assert by_stage[1].endswith("not started: dezero_mini start 1")
    assert by_stage[3].endswith(f"{len(NAMES)}/{len(NAMES)} contracts pass, 9/9 points; done")
    new_at_4 = [contract.name for contract in contracts_at(4) if contract.stage == 4]
    assert "(named step04_mine.py, not step04_retain_grad.py)" in by_stage[4]
    assert by_stage[4].endswith("fails: " + ", ".join(new_at_4)), by_stage[4]
    assert "2 files could be stage 05 (step05_a.py, step05_b.py)" in by_stage[5]
    assert lines[-1] == f"1 of {len(stages())} stages pass every contract; 2 have a file"


def test_progress_of_a_folder_that_does_not_exist(tmp_path, capsys):
    code, err = cli_exit(["progress", str(tmp_path / "nowhere")], capsys)
    assert code == 2 and "does not exist" in err



def test_grades_that_cannot_be_written_at_the_end_are_printed(tmp_path, monkeypatch, capsys):
    from dezero_mini.grading import batch

    nobody = tmp_path / "nobody"  # a folder without the stage file: graded without a check
    nobody.mkdir()

    def full_disk(path, text):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(batch, "write_atomically", full_disk)
    code = cli.main(["grade", str(STAGE), str(nobody), "--csv", str(tmp_path / "grades.csv")])
    out, err = capsys.readouterr()
    assert code == 2 and "No space left on device; the grades follow" in err
    rows = list(csv.DictReader(out.splitlines()))
    assert [(row["student"], row["status"], row["points"], row["max_points"]) for row in rows] == [
        ("nobody", "missing", "0", str(submissions.MAX_POINTS))]


@pytest.mark.skipif(sys.platform != "linux", reason="reads the process tree with psutil")
def test_sigterm_to_grade_ends_every_check_it_started(tmp_path):
    import signal
    import time

    import psutil

    hanging = write(tmp_path / "hanging", FILE_NAME, "while True:\n    pass\n").parent
    grade = subprocess.Popen([sys.executable, "-m", "dezero_mini", "grade", str(STAGE),
                              str(hanging), "--csv", str(tmp_path / "grades.csv"),
                              "--timeout", "300"], cwd=tmp_path,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        parent, descendants = psutil.Process(grade.pid), []
        deadline = time.monotonic() + 120
        # The check and its worker (grade's own trial run of the sandbox comes first)
        while time.monotonic() < deadline and not any(
                "dezero_mini.contracts.worker" in " ".join(_command_line(child))
                for child in descendants):
            time.sleep(0.2)
            descendants = parent.children(recursive=True)
        assert len(descendants) >= 2, "grade did not start a check and its worker"
        grade.send_signal(signal.SIGTERM)
        _, err = grade.communicate(timeout=300)  # (only ends a hang)
        assert grade.returncode == 128 + signal.SIGTERM, err.decode()[-3000:]
        assert "stopped by SIGTERM: every check it started was ended" in err.decode()
        gone, alive = psutil.wait_procs(descendants, timeout=60)
        assert not alive, f"still running after grade ended: {alive}"
        assert not (tmp_path / "grades.csv").exists()
    finally:
        if grade.poll() is None:
            grade.kill()


def _command_line(process):
    import psutil

    try:
        return process.cmdline()
    except psutil.Error:
        return []


# (what takes the stage file's name, the note progress gives)
TAKEN_NAMES = [
    ("folder", lambda path: path.mkdir(), "is a folder; move it away, then"),
    ("broken link", lambda path: path.symlink_to(path.parent / "gone.py"),
     "is a link to nothing; move it away, then"),
]


@pytest.mark.parametrize("what, make, note", TAKEN_NAMES, ids=[case[0] for case in TAKEN_NAMES])
def test_progress_names_what_takes_the_stage_files_name(tmp_path, what, make, note):
    """It said "not started: python -m dezero_mini start 3", and start then
    refused: the name exists."""
    from dezero_mini.grading.learner_progress import stage_file

    stage = next(stage for stage in stages() if stage.number == STAGE)
    make(tmp_path / stage.file_name)
    path, found = stage_file(tmp_path, stage)
    assert path is None and found == f"{stage.file_name} {note}"


# What stands at a stage file's path when it is no file (kind, how to make it,
# what check and grade must say). A folder or a pipe was "no such file" to
# check and "no step03_... in" to grade; a pipe would block a reader forever.
NOT_FILES = [
    ("folder", lambda path: path.mkdir(), "is a folder"),
    ("pipe", lambda path: os.mkfifo(path), "is not a regular file (a pipe or a device)"),
    ("broken link", lambda path: path.symlink_to(path.parent / "gone.py"), "is a link to nothing"),
]


@pytest.mark.parametrize("kind, make, words", NOT_FILES, ids=[case[0] for case in NOT_FILES])
def test_check_and_grade_say_what_stands_where_the_file_should_be(tmp_path, kind, make, words):
    from dezero_mini.contracts.runner import check_file
    from dezero_mini.grading.batch import find_submissions

    stage = get_stage(STAGE)
    folder = tmp_path / "alice"
    folder.mkdir()
    path = folder / stage.file_name
    make(path)
    report = check_file(STAGE, path)
    assert report.status == "error"
    assert report.message == f"{str(path)!r} {words}; give the path of your stage file"
    (submission,) = find_submissions(STAGE, [str(folder)])
    assert submission.file is None
    assert submission.problem == f"{stage.file_name} in {str(folder)!r} {words}"
