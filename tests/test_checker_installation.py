"""The course's installation changing during a check: who can have changed it.

The checker compares the bytes of the installation's files before and after
each check (``runner.installation_state``), and ``grade`` over its whole run.
A change is never counted; the report says who may have made it. In
bubblewrap's sandbox the installation is read-only (or out of sight), so a
change there is another process's (a pip reinstall, an editable install
rewriting its ``.pth``, an instructor upgrading the course mid-grade):
never "tampering". Without the sandbox nobody can tell the file from
another process, and the report says so.

A tiny installation stands in for the real one (``runner._installation_sources``
is pointed at it): a copy of two step files, which the sandbox of a stage-03
check shows read-only, and a ``site-packages`` folder with a ``.pth`` file
that it does not show at all. Nothing of the real ``.venv`` is touched.
"""
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass

import pytest

from conftest import STEPS
from dezero_mini.contracts import bubblewrap, runner, sandbox
from dezero_mini.contracts.runner import check_file

FILE_NAME = "step03_weakref_outputs.py"
CONTRACT = "leaf_gradients_are_right"  # one contract that the stage-02 file passes at stage 03
NO_SANDBOX = bubblewrap.sandbox_problem()
needs_sandbox = pytest.mark.skipif(bool(NO_SANDBOX), reason=f"no sandbox here: {NO_SANDBOX}")


@pytest.fixture
def installation(tmp_path, monkeypatch):
    """The stand-in installation: ``{"step": a step file the sandbox shows
    read-only, "pth": a .pth file it does not show}``."""
    steps = tmp_path / "course" / "steps"
    steps.mkdir(parents=True)
    for number in (1, 2):
        shutil.copy(next(STEPS.glob(f"step{number:02d}_*.py")), steps)
    site = tmp_path / "course" / "site-packages"
    site.mkdir()
    (site / "__editable__.dezero_mini.pth").write_text("/work/course\n")
    monkeypatch.setenv("DEZERO_MINI_STEPS", str(steps))
    monkeypatch.setattr(runner, "_installation_sources",
                        lambda: sorted([*steps.glob("*.py"), *site.glob("*.pth")]))
    return {"step": next(steps.glob("step01_*.py")), "pth": site / "__editable__.dezero_mini.pth"}


def another_process(action, target):
    """Run ``action`` on ``target`` in a process of its own, as pip would."""
    program = {
        "appends to": "open(sys.argv[1], 'a').write('# upgraded\\n')",
        "removes": "os.remove(sys.argv[1])",
        # what pip does when it installs the same course again: a new file
        # with the same bytes (a new inode, times 5 s later), and its
        # bytecode compiled anew (the same code, a header with the new time)
        "reinstalls the same": (
            "info = os.stat(sys.argv[1]); data = open(sys.argv[1], 'rb').read(); "
            "os.remove(sys.argv[1]); open(sys.argv[1], 'wb').write(data); "
            "os.utime(sys.argv[1], (info.st_atime + 5, info.st_mtime + 5)); "
            "sys.argv[1].endswith('.py') and py_compile.compile(sys.argv[1], doraise=True)"),
    }[action]
    subprocess.run([sys.executable, "-c", f"import os, py_compile, sys; {program}", str(target)],
                   check=True)


WRITE_INTO_THE_INSTALLATION = """
try:
    with open(TARGET, "a") as _file:
        _file.write("# pass everything\\n")
    print("wrote into the installation")
except OSError as error:
    print("cannot write into the installation:", error)
"""

ANOTHER = (r"^not counted: the course's installation changed while checking \(another process "
           r"reinstalled it\?\): .*; the file could not have changed it \(read-only in its "
           r"sandbox\); check again once it is stable$")
EITHER = (r"^not counted: the installation changed during the check \(by the file or by another "
          r"process\): .*; reinstall the course if the file may have changed it, and check again "
          r"once it is stable$")


@dataclass
class Case:
    name: str
    sandboxed: bool
    during: object  # (action, "step" or "pth"): another process's, while the check runs; or None
    trick: object   # "step" or "pth": the file writes into that one; or None
    status: str
    message: object  # a regular expression, or None (no message)


CASES = [
    # Another process changes the installation while a sandboxed check runs.
    Case("sandboxed_another_process_changes_a_step_file", True, ("appends to", "step"), None,
         "error", ANOTHER),
    Case("sandboxed_another_process_changes_a_pth_file", True, ("appends to", "pth"), None,
         "error", ANOTHER),
    Case("sandboxed_another_process_removes_a_file", True, ("removes", "pth"), None,
         "error", ANOTHER),
    # The same without the sandbox: nobody can tell who it was.
    Case("unsandboxed_another_process_changes_a_step_file", False, ("appends to", "step"), None,
         "error", EITHER),
    Case("unsandboxed_another_process_changes_a_pth_file", False, ("appends to", "pth"), None,
         "error", EITHER),
    # A file written again as it was runs the same, and so does its bytecode
    # compiled again (the same code, a new time in its header): nothing changed.
    Case("sandboxed_another_process_reinstalls_the_same_pth", True,
         ("reinstalls the same", "pth"), None, "passed", None),
    Case("unsandboxed_another_process_reinstalls_the_same_step_file", False,
         ("reinstalls the same", "step"), None, "passed", None),
    Case("sandboxed_another_process_reinstalls_the_same_step_file", True,
         ("reinstalls the same", "step"), None, "passed", None),
    # The file itself writes into the installation.
    Case("unsandboxed_the_file_writes_a_step_file", False, None, "step", "error", EITHER),
    Case("unsandboxed_the_file_writes_a_pth_file", False, None, "pth", "error", EITHER),
    Case("sandboxed_the_file_cannot_write_a_step_file", True, None, "step", "passed", None),
    Case("sandboxed_the_file_cannot_write_a_pth_file", True, None, "pth", "passed", None),
]


@pytest.mark.parametrize("case", CASES, ids=lambda case: case.name)
def test_a_change_of_the_installation_names_who_can_have_made_it(case, installation, tmp_path):
    if case.sandboxed and NO_SANDBOX:
        pytest.skip(f"no sandbox here: {NO_SANDBOX}")
    before = {name: path.read_bytes() for name, path in installation.items()}
    path = tmp_path / "mine" / FILE_NAME
    path.parent.mkdir()
    trick = (WRITE_INTO_THE_INSTALLATION.replace("TARGET", repr(str(installation[case.trick])))
             if case.trick else "")
    path.write_text(next(STEPS.glob("step02_*.py")).read_text() + "\n\n" + trick)
    done = []

    def on_step(step):  # (in the checker's process, while the check runs)
        if case.during and not done:
            action, target = case.during
            another_process(action, installation[target])
            done.append(step)

    report = check_file(3, path, names=[CONTRACT], batches=5,
                        sandbox="required" if case.sandboxed else "off", on_step=on_step)
    assert report.sandboxed is case.sandboxed
    exit_code = {"passed": 0, "error": 2}[case.status]  # (2: not checked, as in docs/classroom.md)
    assert (report.status, report.exit_code) == (case.status, exit_code)
    if case.message is None:
        assert report.message is None and report.points == report.max_points > 0, report.message
    else:
        assert re.match(case.message, report.message), report.message
        assert report.points == 0 and report.results[0].error == "not_loaded"
        assert report.results[0].measured == report.message  # (said once, not "not counted" twice)
    assert "tamper" not in str(report.message)
    if case.trick and case.sandboxed:  # it could not: the check scored what the file earns
        assert "cannot write into the installation" in report.output, report.output
        assert installation[case.trick].read_bytes() == before[case.trick]
    if case.during or case.trick:
        changed = [name for name, file in installation.items()
                   if not file.exists() or file.read_bytes() != before[name]]
        named = [name for name in installation if str(installation[name]) in str(report.message)]
        assert named == (changed if report.status == "error" else []), report.message


# --- What the sandbox could write ------------------------------------------------------------
@needs_sandbox
def test_the_sandbox_can_write_no_file_of_the_installation(installation, tmp_path):
    """A file bound read-only, one out of sight, one that does not exist:
    none of them can be written from the sandbox."""
    paths = [installation["step"], installation["pth"], installation["pth"].with_name("new.pth")]
    assert sandbox.writable_in_sandbox(paths, [str(installation["step"])]) == []


@needs_sandbox
def test_a_sandbox_that_could_write_there_cannot_clear_the_file(installation, tmp_path,
                                                                 monkeypatch):
    """Were the installation's folder bound writable in the sandbox, the file
    could have changed it: the report then does not blame another process."""
    folder = str(installation["pth"].parent)
    command = bubblewrap.sandbox_command

    def writable_command(argv, **options):
        built = command(argv, **options)
        at = built.index("--chdir")
        parents = [word for parent in bubblewrap._parents(folder + "/x")
                   if parent.startswith("/tmp/") for word in ("--perms", "0755", "--dir", parent)]
        return built[:at] + parents + ["--bind", folder, folder] + built[at:]

    monkeypatch.setattr(bubblewrap, "sandbox_command", writable_command)
    assert sandbox.writable_in_sandbox([installation["pth"]], []) == [str(installation["pth"])]
    created = installation["pth"].with_name("planted.pth")  # a file made there counts too
    assert sandbox.writable_in_sandbox([created], []) == [str(created)]
    assert runner.changed_by_another_process([str(installation["pth"])], True) is False
    assert runner.changed_by_another_process([str(installation["step"])], True) is True


def test_where_the_sandbox_cannot_say_nobody_can_tell(monkeypatch):
    def fails(*args, **kwargs):
        raise OSError("bwrap is gone")

    monkeypatch.setattr(bubblewrap, "run_sandboxed", fails)
    assert sandbox.writable_in_sandbox(["/x"], []) is None
    assert runner.changed_by_another_process(["/x"], True) is False


# --- What the checker itself writes ----------------------------------------------------------
def test_the_checker_writes_missing_or_stale_bytecode_before_its_first_look(installation):
    """Python writes a module's bytecode at its first import: the checker
    writes it first, so its own imports (and the worker's) change nothing."""
    step = installation["step"]
    cached = runner._bytecode_of([step])[0]
    cached.unlink()
    first = runner.installation_state()
    assert str(cached) in first
    subprocess.run([sys.executable, "-c", "import importlib.util, sys; "
                    "spec = importlib.util.spec_from_file_location('m', sys.argv[1]); "
                    "spec.loader.exec_module(importlib.util.module_from_spec(spec))", str(step)],
                   check=True, capture_output=True)
    assert runner.changed_files(first, runner.installation_state()) == []


# --- grade: the installation over the whole run ----------------------------------------------
@pytest.mark.parametrize("mode", ["required", "off"])
def test_grade_says_who_can_have_changed_the_installation(mode, installation, tmp_path):
    """Another process changes the installation after the first check: the
    rows after it are not counted, and say who can have made the change."""
    from dezero_mini.grading import batch

    if mode == "required" and NO_SANDBOX:
        pytest.skip(f"no sandbox here: {NO_SANDBOX}")
    for student in ("alice", "bob"):
        (tmp_path / student).mkdir()
        shutil.copy(next(STEPS.glob("step02_*.py")), tmp_path / student / FILE_NAME)
    grading = batch.Grading(number=3, jobs=1, batches=5, sandbox=mode, names=[CONTRACT])
    heard = []

    def report_line(line):  # (after each row: the change falls between the two checks)
        if not heard:
            another_process("appends to", installation["pth"])
        heard.append(line)

    rows = batch.grade_all(grading, batch.find_submissions(
        3, [str(tmp_path / "alice"), str(tmp_path / "bob")]), report_line)
    assert [(row["student"], row["status"]) for row in rows] == [
        ("alice", "passed"), ("bob", "error")]
    assert rows[1]["points"] == rows[1][CONTRACT] == 0
    if mode == "required":
        expected = (r"^not counted: the course's installation changed during this run \(another "
                    r"process reinstalled it\?\): \S+__editable__\.dezero_mini\.pth; no submission "
                    r"could have changed it \(read-only in their sandbox, or out of their "
                    r"container\); grade again once it is stable$")
    else:
        expected = (r"^not counted: the grading installation changed during this run \(by a "
                    r"submission or by another process\): \S+__editable__\.dezero_mini\.pth; "
                    r"reinstall the course if a submission may have changed it, and grade again$")
    assert re.match(expected, rows[1]["message"]), rows[1]["message"]
