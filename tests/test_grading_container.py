"""``grade --isolation container``, without a container engine.

A fake engine (a ``podman`` or ``docker`` script on PATH) logs what it is
asked; its ``run`` runs the command on this machine, with the mounted paths
put back, so that the rows of a class graded through the hook can be
compared with the rows of ``grade`` itself. The failures of a real engine
(none installed, one that cannot build or start a container) are its
answers, and each must be one line that names the engine, what failed and
the fix. The real engine's figures are in docs/classroom.md.
"""
import csv
import json
import sys
import tempfile

import pytest

import submissions
from dezero_mini import cli
from dezero_mini.contracts import get_stage
from dezero_mini.grading import batch, container

STAGE = submissions.STAGE
FILE_NAME = get_stage(STAGE).file_name
#: Contracts that a file answers quickly (the memory ones train for a while).
QUICK = ["leaf_gradients_are_right", "training_learns"]

FAKE_ENGINE = f"""#!{sys.executable}
import json, os, subprocess, sys, time
argv = sys.argv[1:]
with open(os.environ["FAKE_ENGINE_LOG"], "a") as log:
    log.write(json.dumps(argv) + "\\n")
step = "image inspect" if argv[:2] == ["image", "inspect"] else argv[0]
failure = json.loads(os.environ.get("FAKE_ENGINE_FAIL", "{{}}"))
if step in failure:
    print("Error: " + failure[step], file=sys.stderr)
    sys.exit(125)
if step == "image inspect":
    sys.exit(0 if os.environ.get("FAKE_ENGINE_HAS_IMAGE") else 1)
if step != "run":
    sys.exit(0)
if os.environ.get("FAKE_ENGINE_HANGS"):
    time.sleep(600)
mounts, rest = {{}}, argv[1:]
while rest[0].startswith("--"):
    option = rest.pop(0)
    if option in ("--rm", "--read-only"):
        continue
    value = rest.pop(0)
    if option == "--volume":
        host, inside, mode = value.rsplit(":", 2)
        assert mode == "ro", value
        mounts[inside] = host
image, command = rest[0], rest[1:]
assert command[0] == {container.PYTHON!r}, command
def outside(argument):
    for inside, host in mounts.items():
        if argument == inside or argument.startswith(inside + "/"):
            return host + argument[len(inside):]
    return argument
done = subprocess.run([sys.executable, *map(outside, command[1:])])
sys.exit(done.returncode)
"""


@pytest.fixture
def engine(tmp_path, monkeypatch):
    """A fake ``podman`` alone on PATH; returns the list of its calls (read on use)."""
    folder = tmp_path / "bin"
    folder.mkdir()
    log = tmp_path / "engine.log"
    log.touch()
    for name in container.ENGINES:
        script = folder / f"fake-{name}"
        script.write_text(FAKE_ENGINE)
        script.chmod(0o755)
    monkeypatch.setenv("PATH", str(folder))
    monkeypatch.setenv("FAKE_ENGINE_LOG", str(log))

    class Engine:
        def install(self, name="podman"):
            (folder / f"fake-{name}").rename(folder / name)
            return str(folder / name)

        def calls(self):
            return [json.loads(line) for line in log.read_text().splitlines()]

    return Engine()


def grade(argv, capsys):
    try:
        code = cli.main(["grade", str(STAGE), *argv])
    except SystemExit as stop:
        code = stop.code
    return code, capsys.readouterr().err


def write_class(folder):
    made = {"alice": submissions.passing(), "bob": submissions.failing(),
            "carol": submissions.broken()}
    for student, text in made.items():
        (folder / student).mkdir(parents=True)
        (folder / student / FILE_NAME).write_text(text)
    return [str(folder / student) for student in made]


def read_rows(path):
    with open(path, newline="") as file:
        return [{key: value for key, value in row.items() if key != "seconds"}
                for row in csv.DictReader(file)]


# --- The engine cannot grade here: one line, the engine, what failed, the fix ---------------
# (engine installed, --engine, the engine's failure per step, what the line must say)
ENGINE_FAILURES = [
    (None, None, {}, ["no container engine: looked for podman and docker on PATH",
                      "install Podman (apt-get install podman runc) or Docker"]),
    ("podman", "docker", {}, ["no container engine: looked for docker on PATH"]),
    ("podman", None, {"run": "crun: cgroups in hybrid mode not supported, drop all controllers "
                             "from cgroupv2: OCI runtime error"},
     ["podman could not start a container from localhost/dezero_mini-grader:",
      "cgroups in hybrid mode not supported", "install runc", 'runtime = "runc"']),
    ("podman", None, {"run": "crun: setrlimit `RLIMIT_NPROC`: Operation not permitted"},
     ["could not start a container", "lower its default_ulimits in containers.conf"]),
    ("podman", None, {"build": "creating build container: initializing source docker://python: "
                               "pinging container registry registry-1.docker.io: dial tcp"},
     ["podman could not build the grading image on docker.io/library/python:3.11-slim-bookworm",
      "no image registry is reachable", "--base-image"]),
    ("docker", None, {"image inspect": "Cannot connect to the Docker daemon at "
                                       "unix:///var/run/docker.sock. Is the docker daemon running?",
                      "build": "Cannot connect to the Docker daemon at "
                               "unix:///var/run/docker.sock. Is the docker daemon running?"},
     ["docker could not build the grading image", "systemctl start docker", "install Podman"]),
]


@pytest.mark.parametrize("installed, chosen, failure, words", ENGINE_FAILURES,
                         ids=["no-engine", "named-engine-missing", "crun-hybrid-cgroups",
                              "rlimit-refused", "registry-unreachable", "docker-daemon-down"])
def test_an_engine_that_cannot_grade_is_one_line(installed, chosen, failure, words, engine,
                                                 tmp_path, monkeypatch, capsys):
    if installed:
        engine.install(installed)
    monkeypatch.setenv("FAKE_ENGINE_FAIL", json.dumps(failure))
    out = tmp_path / "grades.csv"
    argv = [*write_class(tmp_path / "class"), "--isolation", "container", "--csv", str(out)]
    code, err = grade(argv + (["--engine", chosen] if chosen else []), capsys)
    assert code == 2 and not out.exists()
    # the error is the last line, and the only one (a build before it says so in a line)
    *before, error = err.strip().splitlines()
    assert "Traceback" not in err and not any("error" in line for line in before), err
    assert error.startswith("dezero_mini grade: error: --isolation container: "), err
    for word in words:
        assert word in error, (word, err)
    assert not any(call[0] == "run" and "check" in call for call in engine.calls())


def test_a_temporary_folder_that_cannot_be_mounted_is_one_line(engine, tmp_path, monkeypatch,
                                                               capsys):
    engine.install("podman")
    folder = tmp_path / "a:b"
    folder.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(folder))
    out = tmp_path / "grades.csv"
    code, err = grade([*write_class(tmp_path / "class"), "--isolation", "container",
                       "--csv", str(out)], capsys)
    assert code == 2 and not out.exists() and len(err.splitlines()) == 1, err
    assert f"the temporary folder {str(folder)!r} holds a ':'" in err and "set TMPDIR" in err
    assert engine.calls() == []


# --- The command line of each container ---------------------------------------------------
def test_each_check_runs_in_a_sealed_container_of_its_own(engine, tmp_path, monkeypatch,
                                                          capsys):
    engine.install("podman")
    monkeypatch.setenv("FAKE_ENGINE_HAS_IMAGE", "1")
    weights = tmp_path / "weights.toml"
    weights.write_text("new = 3\n")
    class_ = write_class(tmp_path / "class")
    out = tmp_path / "grades.csv"
    code, err = grade([*class_, "--isolation", "container", "--jobs", "2", "--batches", "2",
                       *sum((["--contract", name] for name in QUICK), []),
                       "--weights", str(weights), "--csv", str(out)], capsys)
    assert code == 0, err
    runs = [call for call in engine.calls() if call[0] == "run" and "check" in call]
    assert len(runs) == len(class_)  # one container per submission, none for the probe's check
    names = set()
    for call in runs:
        joined = " ".join(call)
        for seal in ("--rm", "--network none", "--read-only", "--user 65534:65534",
                     "--cap-drop all", "--security-opt no-new-privileges", "--memory 2560m",
                     "--memory-swap 2560m", "--pids-limit 256"):
            assert f" {seal} " in f" {joined} ", seal
        names.add(call[call.index("--name") + 1])
        volumes = [call[i + 1] for i, part in enumerate(call) if part == "--volume"]
        assert [volume.split(":")[1:] for volume in volumes] == [
            [container.SUBMISSION_FOLDER, "ro"], [container.WEIGHTS_PATH, "ro"]]
        # the copy alone, never the student's folder
        assert not any(str(tmp_path / "class") in volume for volume in volumes)
        command = call[call.index(container.PYTHON):]
        assert command[:6] == [container.PYTHON, "-I", "-m", "dezero_mini", "check", str(STAGE)]
        assert command[6] == f"{container.SUBMISSION_FOLDER}/{FILE_NAME}"
        assert command[command.index("--weights") + 1] == container.WEIGHTS_PATH
        assert "--json" in command
        assert call[call.index(container.PYTHON) - 1].startswith(container.IMAGE + ":")
    assert len(names) == len(class_)
    # The rows are those of grade without containers, for the same class.
    plain = tmp_path / "plain.csv"
    code, err = grade([*class_, "--jobs", "2", "--batches", "2",
                       *sum((["--contract", name] for name in QUICK), []),
                       "--weights", str(weights), "--csv", str(plain)], capsys)
    assert code == 0, err
    assert read_rows(out) == read_rows(plain)
    assert [row["status"] for row in read_rows(out)] == ["passed", "passed", "error"]


def test_a_container_whose_client_is_killed_is_removed(engine, tmp_path, monkeypatch):
    """A check over its time limit: the engine's client is ended, and the
    container, which Podman's conmon would keep running, is removed by name."""
    path = engine.install("podman")
    monkeypatch.setenv("FAKE_ENGINE_HANGS", "1")
    file = tmp_path / FILE_NAME
    file.write_text(submissions.passing())
    grading = batch.Grading(number=STAGE, names=QUICK)
    monkeypatch.setattr(batch.Grading, "check_limit", lambda self: 1.0)
    isolation = container.ContainerIsolation(path, container.IMAGE + ":test")
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    code, out, err = isolation.run_check(grading, file, batch._Running(), str(scratch))
    assert code != 0 and b"did not finish in 1 s" in err
    calls = engine.calls()
    run = next(call for call in calls if call[0] == "run")
    assert ["rm", "--force", run[run.index("--name") + 1]] in calls
    assert list(scratch.iterdir()) == []  # the submission's copy is gone too


def test_an_unreadable_submission_is_a_row_not_a_traceback(engine, tmp_path):
    path = engine.install("podman")
    grading = batch.Grading(number=STAGE, names=QUICK)
    isolation = container.ContainerIsolation(path, container.IMAGE + ":test")
    missing = tmp_path / "gone" / FILE_NAME
    code, out, err = isolation.run_check(grading, missing, batch._Running(), str(tmp_path))
    assert code == 2 and out == b"" and b"cannot read" in err and str(missing).encode() in err
    assert engine.calls() == []


# --- The image: built from the course, named by its files -------------------------------------
def course_copy(folder):
    root = container.course_checkout()
    for relative in [container.CONTAINERFILE, *container.course_files(root)]:
        target = folder / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes((root / relative).read_bytes())
    return folder


# (what changes in a copy of the course, whether the image's name must change)
COURSE_CHANGES = [
    ("dezero_mini/contracts/stage03.py", "\n# a hidden contract of the instructor's\n", True),
    ("steps/step03_weakref_outputs.py", "\n# the reference changed\n", True),
    ("graders/container/Containerfile", "\nRUN true\n", True),
    ("pyproject.toml", "\n# a dependency\n", True),
    ("dezero_mini/__pycache__/core.cpython-311.opt-9", "a cache folder", False),
    ("dezero_mini/core.pyc", "bytecode beside its source", False),
    ("dezero_mini.egg-info/PKG-INFO", "build product", False),
    ("tests/test_new.py", "not in the image", False),
]


@pytest.mark.parametrize("relative, text, changes", COURSE_CHANGES,
                         ids=[case[0].split("/")[-1] for case in COURSE_CHANGES])
def test_the_image_is_named_by_the_course_it_holds(relative, text, changes, tmp_path):
    root = course_copy(tmp_path / "course")
    before = container.image_name(root)
    path = root / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as file:
        file.write(text)
    assert (container.image_name(root) != before) == changes
    context = tmp_path / "context"
    context.mkdir()
    container.build_context(root, context)
    inside = {str(p.relative_to(context / "course")) for p in (context / "course").rglob("*")
              if p.is_file()}
    assert (relative in inside) == (changes and relative.startswith(("dezero_mini/", "steps/",
                                                                     "pyproject")))
    assert (context / "Containerfile").read_bytes() == (root / container.CONTAINERFILE).read_bytes()
