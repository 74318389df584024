"""The lab chapter's recipes, as written in docs/classroom.md, run for real.

* the student edition (``tools/student_edition.py``): what it holds and what
  it leaves out, and that ``start`` works in it;
* the GitHub Actions workflow (``graders/github-actions/check-stage.yml``),
  read as YAML;
* the Binder folder (``binder/``), and repo2docker's build plan for it when
  repo2docker is installed;
* nbgrader's ``autograde`` and Otter-Grader's runner on real submissions,
  each skipped with a reason when the grader is not installed
  (``make test-graders`` installs them);
* ``make lab`` as root passes ``--allow-root`` to Jupyter; one Ctrl-C stops it (``answer_yes``).
"""
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import submissions  # tests/submissions.py: a student's stage 03, and stage 02 as it is
from dezero_mini.contracts import get_stage, stages

ROOT = Path(__file__).resolve().parents[1]
import student_edition  # noqa: E402  (tools/student_edition.py)

WORKFLOW = ROOT / "graders" / "github-actions" / "check-stage.yml"
BINDER = ROOT / "binder"
STAGE03_FILE = "step03_weakref_outputs.py"


def _checker():
    """The ``dezero_mini`` command that pip installed beside this Python."""
    found = Path(sys.executable).with_name("dezero_mini")
    if not found.exists():
        pytest.skip("the dezero_mini command is not installed beside this Python")
    return found


# --- the student edition ------------------------------------------------------------------
@pytest.fixture(scope="module")
def edition(tmp_path_factory):
    out = tmp_path_factory.mktemp("edition") / "course"
    student_edition.write_edition(3, out)
    return out


def test_the_edition_holds_stages_up_to_n_and_nothing_later(edition):
    files = {path.relative_to(edition).as_posix() for path in edition.rglob("*") if path.is_file()}
    staged = {name: student_edition.stage_of(name) for name in files}
    assert max(stage for stage in staged.values() if stage is not None) == 3
    for folder, pattern in (("steps", "step{:02d}_"), ("notebooks", "{:02d}_"),
                            ("solutions", "{:02d}_")):
        for number in range(1, 4):
            assert any(name.startswith(f"{folder}/" + pattern.format(number)) for name in files), \
                f"stage {number:02d} is missing from {folder}/"
    assert not any(name.startswith(student_edition.INSTRUCTOR_ONLY) for name in files)
    assert "STUDENT_EDITION.md" in files
    assert "stage 04" in (edition / "STUDENT_EDITION.md").read_text()
    # Every contract module stays: check must know every stage.
    assert {f"dezero_mini/contracts/stage{stage.number:02d}.py" for stage in stages()} <= files


def test_the_lab_chapter_names_what_the_edition_ships_of_the_later_stages(edition):
    """docs/classroom.md says which modules of the finished framework an edition cannot
    leave out (they hold the later stages' fixes): each one it names is in the edition."""
    chapter = (ROOT / "docs" / "classroom.md").read_text()
    paragraph = chapter.split("What the edition cannot leave out", 1)[1].split("\n\n", 1)[0]
    named = re.findall(r"`(dezero_mini/[\w/]+\.py)`", paragraph)
    assert len(named) >= 5, paragraph
    files = {path.relative_to(edition).as_posix() for path in edition.rglob("*") if path.is_file()}
    assert [name for name in named if name not in files] == []


def test_start_works_in_the_edition_up_to_the_next_stage_only(edition, tmp_path):
    env = dict(os.environ, PYTHONPATH=str(edition))
    env.pop("DEZERO_MINI_STEPS", None)

    def start(number):
        return subprocess.run([sys.executable, "-m", "dezero_mini", "start", str(number),
                               str(tmp_path)], cwd=tmp_path, env=env, capture_output=True,
                              text=True, timeout=600)

    done = start(4)
    assert done.returncode == 0, done.stderr
    written = (tmp_path / get_stage(4).file_name).read_text()
    assert written.endswith((edition / "steps" / "step03_weakref_outputs.py").read_text())
    later = start(5)  # builds on stage 04, which the edition does not hold
    assert later.returncode == 2 and "Traceback" not in later.stderr
    assert not (tmp_path / get_stage(5).file_name).exists()


def test_an_edition_replaces_an_older_one_whole(tmp_path):
    out = tmp_path / "course"
    student_edition.write_edition(5, out)
    assert (out / "steps" / "step05_no_grad.py").exists()
    student_edition.write_edition(2, out)
    assert not (out / "steps" / "step03_weakref_outputs.py").exists()
    assert [path.name for path in tmp_path.iterdir()] == ["course"]  # no temporary left


def test_without_git_the_course_files_are_found_by_their_folders(tmp_path):
    """Where git cannot list the files (a copy without .git, no git, a checkout
    that another user owns: git refuses it as "dubious ownership"), the walk
    finds the same files, and leaves out what tools and installs leave there."""
    course = tmp_path / "course"
    tracked = student_edition.tracked_files(ROOT)
    for name in tracked:
        if (ROOT / name).is_file():
            (course / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, course / name)
    for junk in (".venv/lib/site.py", "build/book/index.html", "dezero_mini/__pycache__/core.pyc",
                 "dezero_mini.egg-info/PKG-INFO", ".cache/matplotlib/fontlist.json",
                 ".config/chromium/settings.dat", ".ipython/profile_default/history.sqlite",
                 ".pytest_cache/v/cache/nodeids", ".hypothesis/examples/x"):
        (course / junk).parent.mkdir(parents=True, exist_ok=True)
        (course / junk).write_text("not the course's")
    told = []
    assert student_edition.tracked_files(course, tell=told.append) == sorted(
        name for name in tracked if (ROOT / name).is_file())
    assert len(told) == 1 and told[0]  # why git could not say


@pytest.mark.parametrize("argv, message", [
    (["eleven"], "must be the last stage the class has finished"),
    (["-1"], "must be the last stage the class has finished"),
    (["3", str(ROOT / "steps")], "inside the course's own files"),
])
def test_the_edition_refuses_bad_arguments(argv, message, capsys):
    with pytest.raises(SystemExit) as stopped:
        student_edition.main(argv)
    assert stopped.value.code == 2 and message in capsys.readouterr().err


# --- GitHub Actions -----------------------------------------------------------------------
def test_the_github_workflow_checks_the_stage_it_names():
    yaml = pytest.importorskip("yaml")
    workflow = yaml.safe_load(WORKFLOW.read_text())
    triggers = workflow.get("on", workflow.get(True))  # YAML 1.1 reads a bare `on` as True
    assert "push" in triggers
    env = workflow["env"]
    assert env["STAGE_FILE"] == get_stage(int(env["STAGE"])).file_name
    steps = workflow["jobs"]["check"]["steps"]
    paths = [step["with"]["path"] for step in steps if step.get("uses", "").startswith(
        "actions/checkout")]
    assert "submission" in paths and ".course" in paths and "dezero_mini" not in paths
    install = next(step["run"] for step in steps if "pip install" in step.get("run", ""))
    assert "--editable ./.course" in install and "graphviz" in install
    check = next(step for step in steps if "dezero_mini check" in step.get("run", ""))
    assert check["working-directory"] == "submission"
    assert 'dezero_mini check "$STAGE" "$STAGE_FILE" --json' in check["run"]
    assert 'exit "${status:-0}"' in check["run"]  # a failing contract fails the push


# --- Binder and repo2docker ---------------------------------------------------------------
def test_the_binder_folder_installs_graphviz_the_course_and_the_kernel():
    assert "graphviz" in (BINDER / "apt.txt").read_text().split()
    runtime = (BINDER / "runtime.txt").read_text().strip()
    major, minor = map(int, re.fullmatch(r"python-(\d+)\.(\d+)", runtime).groups())
    required = re.search(r'requires-python = ">=(\d+)\.(\d+)"',
                         (ROOT / "pyproject.toml").read_text()).groups()
    assert (major, minor) >= tuple(map(int, required))
    lines = [line.split("#")[0].strip()
             for line in (BINDER / "requirements.txt").read_text().splitlines()]
    course = [line for line in lines if line.startswith("--editable .[")]
    assert len(course) == 1
    extras = course[0][len("--editable .["):-1].split(",")
    declared = (ROOT / "pyproject.toml").read_text()
    for extra in extras:
        assert re.search(rf"^{re.escape(extra)} = \[", declared, re.M), extra
    post_build = BINDER / "postBuild"
    assert os.access(post_build, os.X_OK)
    assert "ipykernel install --sys-prefix --name python3" in post_build.read_text()
    # The notebooks are stored with that kernel name.
    notebook = json.loads(next((ROOT / "notebooks").glob("00_*.ipynb")).read_text())
    assert notebook["metadata"]["kernelspec"]["name"] == "python3"


def test_repo2docker_plans_graphviz_and_the_course(tmp_path):
    repo2docker = shutil.which("repo2docker") or shutil.which(
        "jupyter-repo2docker", path=str(Path(sys.executable).parent))
    if repo2docker is None:
        pytest.skip("repo2docker is not installed (make test-graders installs it)")
    copy = tmp_path / "course"
    shutil.copytree(ROOT, copy, ignore=shutil.ignore_patterns(
        ".git", ".venv", ".venvs", "build", "__pycache__", "*.egg-info"))
    done = subprocess.run([repo2docker, "--no-build", "--debug", str(copy)],
                          capture_output=True, text=True, timeout=300)
    plan = done.stdout + done.stderr
    assert done.returncode == 0, plan[-2000:]
    assert re.search(r"apt-get install .*graphviz", plan)
    # The course is installed after the repository is copied in (it installs from it).
    copied = plan.index("COPY --chown=0:0 src/ ")
    assert plan.index('-r "binder/requirements.txt"') > copied
    assert plan.index("./binder/postBuild") > copied


# --- make lab as root ---------------------------------------------------------------------
def test_make_lab_passes_allow_root_only_to_root(tmp_path):
    if shutil.which("make") is None or shutil.which("dot") is None:
        pytest.skip("needs make and Graphviz's dot")
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    said = tmp_path / "jupyter-args"
    fake = venv / "bin" / "jupyter"
    fake.write_text(f"#!/bin/sh\necho \"$@\" > {said}\n")
    fake.chmod(0o755)
    (venv / "bin" / "python").symlink_to(sys.executable)
    for stamp in ("installed", "lab"):
        (venv / stamp).touch()
    done = subprocess.run(
        ["make", "-C", str(ROOT), "lab", f"VENV={venv}", f"BOOK_STAMP={venv / 'installed'}",
         f"LAB_STAMP={venv / 'lab'}"], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    arguments = said.read_text().split()
    assert arguments[0] == "lab" and arguments[-1] == "notebooks/"
    assert ("--allow-root" in arguments) == (os.geteuid() == 0)
    assert "--ServerApp.answer_yes=True" in arguments  # one Ctrl-C stops it, without a question


# --- nbgrader ------------------------------------------------------------------------------
NBGRADER_CELL = textwrap.dedent('''\
    import json, shutil, subprocess
    checker = shutil.which("dezero_mini")          # the command pip installs with the course
    done = subprocess.run([checker, "check", "3", "step03_weakref_outputs.py", "--json"],
                          capture_output=True, text=True)
    report = json.loads(done.stdout)
    for contract in report["contracts"]:
        print("pass" if contract["passed"] else "FAIL", contract["name"], contract["measured"])
    print(report["message"] or f"{report['points']:g} of {report['max_points']:g} points")
    round(10 * report["points"] / report["max_points"], 2)
''')


def _recipe_block(after):
    """The first ```python block of docs/classroom.md after the line ``after``."""
    text = (ROOT / "docs" / "classroom.md").read_text()
    start = text.index(after)
    block = re.search(r"```python\n(.*?)```", text[start:], re.S)
    return block.group(1)


def test_the_chapter_gives_the_cells_that_these_tests_run():
    assert _recipe_block("## nbgrader") == NBGRADER_CELL
    assert _recipe_block("## Otter-Grader") == OTTER_TEST


def _nbgrader_assignment(source, starting_file):
    import nbformat

    notebook = nbformat.v4.new_notebook()
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3",
                                       "language": "python"}
    prose = nbformat.v4.new_markdown_cell("Rebuild stage 03 in `step03_weakref_outputs.py`.")
    check = nbformat.v4.new_code_cell(NBGRADER_CELL)
    check.metadata["nbgrader"] = {"grade": True, "grade_id": "stage03_contracts",
                                  "locked": True, "points": 10, "schema_version": 3,
                                  "solution": False, "task": False}
    notebook.cells = [prose, check]
    source.mkdir(parents=True)
    nbformat.write(notebook, source / "stage03.ipynb")
    (source / STAGE03_FILE).write_text(starting_file)


def _nbgrader_scores(course, exclude):
    config = ["c = get_config()", "c.CourseDirectory.course_id = 'memory'",
              "c.Exchange.root = 'exchange'", "c.ExecutePreprocessor.timeout = 600"]
    if exclude:
        config.append(f"c.Autograde.exclude_overwriting = {{'stage03': ['{STAGE03_FILE}']}}")
    (course / "nbgrader_config.py").write_text("\n".join(config) + "\n")
    shutil.rmtree(course / "autograded", ignore_errors=True)
    (course / "gradebook.db").unlink(missing_ok=True)
    nbgrader = Path(sys.executable).with_name("nbgrader")
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    for command in (["generate_assignment", "stage03", "--force"],
                    ["db", "student", "add", "alice"], ["db", "student", "add", "bob"],
                    ["autograde", "stage03", "--force"]):
        done = subprocess.run([str(nbgrader), *command], cwd=course, env=env,
                              capture_output=True, text=True, timeout=900)
        assert done.returncode == 0, f"nbgrader {' '.join(command)}:\n{done.stderr[-3000:]}"
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gradebook:
        return {student: gradebook.find_submission("stage03", student).score
                for student in ("alice", "bob")}


def test_nbgrader_grades_the_students_file_with_exclude_overwriting(tmp_path):
    if importlib.util.find_spec("nbgrader") is None:
        pytest.skip("nbgrader is not installed (make test-graders installs it)")
    _checker()
    starting = (ROOT / "steps" / "step02_cycles.py").read_text()
    course = tmp_path / "course"
    _nbgrader_assignment(course / "source" / "stage03", starting)
    for student, stage_file in (("alice", submissions.passing()), ("bob", starting)):
        folder = course / "submitted" / student / "stage03"
        folder.mkdir(parents=True)
        shutil.copy(course / "source" / "stage03" / "stage03.ipynb", folder)
        (folder / STAGE03_FILE).write_text(stage_file)
    with_line = _nbgrader_scores(course, exclude=True)
    without_line = _nbgrader_scores(course, exclude=False)
    assert with_line["alice"] == 10
    # The starting file keeps the inherited contracts: their share of the points.
    share = submissions.FAILING_POINTS / submissions.MAX_POINTS
    assert with_line["bob"] == round(10 * share, 2)
    # Without the line, autograde puts the starting file back: alice scores what bob does.
    assert without_line["alice"] == without_line["bob"] == with_line["bob"]


# --- Otter-Grader --------------------------------------------------------------------------
OTTER_TEST = textwrap.dedent('''\
    import json, shutil, subprocess
    from otter.test_files import test_case

    OK_FORMAT = False
    name = "stage03"
    points = 10

    @test_case(points=10)
    def test_stage03_contracts(env):
        checker = shutil.which("dezero_mini")
        done = subprocess.run([checker, "check", "3", "step03_weakref_outputs.py", "--json"],
                              capture_output=True, text=True)
        report = json.loads(done.stdout)
        failed = [c["name"] for c in report["contracts"] if not c["passed"]]
        assert report["exit_code"] == 0, report["message"] or f"failed: {', '.join(failed)}"
''')


def test_otter_runs_the_test_file_on_a_passing_and_a_failing_file(tmp_path):
    otter = Path(sys.executable).with_name("otter")
    if not otter.exists():
        pytest.skip("Otter-Grader is not installed (make test-graders installs it)")
    _checker()
    starting = (ROOT / "steps" / "step02_cycles.py").read_text()
    env = dict(os.environ, PATH=f"{otter.parent}{os.pathsep}{os.environ['PATH']}")
    said = {}
    for student, stage_file in (("alice", submissions.passing()), ("bob", starting)):
        folder = tmp_path / student
        (folder / "tests").mkdir(parents=True)
        (folder / "tests" / "stage03.py").write_text(OTTER_TEST)
        (folder / STAGE03_FILE).write_text(stage_file)
        # What otter check runs first: the assignment's own file (here only a comment).
        (folder / "stage03.py").write_text(f"# Stage 03 is graded on {STAGE03_FILE}.\n")
        done = subprocess.run([str(otter), "check", "stage03.py", "-t", "tests"], cwd=folder,
                              env=env, capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, done.stderr[-2000:]
        said[student] = done.stdout
    assert "All tests passed!" in said["alice"]
    assert "Test case failed" in said["bob"] and "AssertionError: failed: " in said["bob"]
    assert "live_objects_constant" in said["bob"]
