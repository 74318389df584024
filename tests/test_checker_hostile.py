"""``check`` against submissions written to get points they did not earn.

Each row of ``HOSTILE`` starts from the course's stage-02 file, which
honestly fails stage 03 (3 of its 6 contracts), adds one trick, and is
checked as stage 03. Before the checker was contained, every one of them
reported "6 of 6 contracts pass". Each row states the exit status and the
words that the report must now hold, and that it is not a pass.

Then the cases that need their own set-up: modules beside the file with
``check`` run from its folder, a grandchild that would outlive the check,
the stop signals, the installation changed by a submission.
"""
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass

import pytest

from conftest import ROOT, STEPS
from dezero_mini import cli
from dezero_mini.contracts import contracts_at, names_needed_at
from dezero_mini.contracts.runner import check_file
from dezero_mini.contracts import sandbox
from dezero_mini.contracts.sandbox import Limits

HONEST_FAILS = 3  # of stage 03's 6 contracts, by the stage-02 file
FILE_NAME = "step03_weakref_outputs.py"


def step_text(number):
    return next(STEPS.glob(f"step{number:02d}_*.py")).read_text()


def stage02_plus(trick):
    return lambda folder: step_text(2) + "\n\n# --- the trick ---\n" + trick


# --- The tricks ---------------------------------------------------------------------------
PATCH_CONTRACT_CHECK = """
from dezero_mini.contracts import Contract, Measurement
Contract.check = lambda self, module: Measurement(True, "anything", "as expected")
"""

PATCH_COLLECTOR = """
import gc
gc.get_objects = lambda *args, **kwargs: []
gc.collect = lambda *args, **kwargs: 0
"""

HIDE_BY_FREEZING = """
import gc
_backward = Variable.backward


def _backward_then_hide(self, *args, **kwargs):  # the graph of each batch out of sight
    _backward(self, *args, **kwargs)
    gc.freeze()


Variable.backward = _backward_then_hide
"""

FAKE_PROTOCOL = """
import gc, io, json, os, sys
_names = [a for a in sys.argv if a.isidentifier()]
_lines = [json.dumps({"event": "loaded"})]
for _name in _names:
    _lines.append(json.dumps({"event": "start", "name": _name}))
    _lines.append(json.dumps({"event": "result", "name": _name, "passed": True,
                              "expected": "x", "measured": "x", "error": None}))
_text = "\\n".join(_lines) + "\\n"
print(_text)
for _obj in gc.get_objects():  # every file object that the process holds
    if isinstance(_obj, io.IOBase):
        try:
            _obj.write(_text if isinstance(_obj, io.TextIOBase) else _text.encode())
            _obj.flush()
        except Exception:
            pass
for _fd in range(3, 256):  # and every descriptor
    try:
        os.write(_fd, _text.encode())
    except OSError:
        pass
"""

READ_TOKEN = """
import os
print("token:", os.environ.get("GRADER_TOKEN"), "home:", os.environ.get("HOME"))
print("environment:", sorted(os.environ))
"""

ALLOCATE_2_GIB = """
import numpy as _np
_big = _np.ones(2560 * 1024 * 1024 // 8)  # 2.5 GiB, touched
"""

LOOP_IN_BACKWARD = r"""
_backward = Variable.backward
def _endless(self, *args, **kwargs):
    while True:  # HANG HERE
        pass
Variable.backward = _endless
"""

IMPORT_FROM_PACKAGE = "from dezero_mini import " + ", ".join(names_needed_at(3)) + "\n"

LOAD_STAGE_3 = """
from dezero_mini.memory.stages import load_stage
globals().update({k: v for k, v in vars(load_stage(3)).items() if not k.startswith("__")})
"""


def reference_under_a_header(folder):
    """What ``start 4`` writes: the stage-03 reference, a header on top; and
    its docstrings reworded."""
    from dezero_mini.cli.start import start_header
    from dezero_mini.contracts import get_stage

    text = step_text(3).replace('"""', '"""Mine: ', 1)
    return start_header(get_stage(4), "step03_weakref_outputs.py") + text


def hidden_memory(folder):
    """The stage-03 reference, plus memory that tracemalloc cannot see
    (anonymous mmaps, 1 MiB per backward, the first 200): the traced bytes
    stay flat, the RSS grows."""
    text = step_text(3)
    text = text.replace("import weakref\n", "import mmap\nimport weakref\n_HIDDEN = []\n", 1)
    return re.sub(r"^(    def backward\(self.*\):\n)",
                  "\\1        if len(_HIDDEN) < 200:\n"
                  "            _HIDDEN.append(mmap.mmap(-1, 1 << 20))\n"
                  "            _HIDDEN[-1].write(b'x' * (1 << 20))\n",
                  text, count=1, flags=re.MULTILINE)


@dataclass
class Hostile:
    name: str
    write: object         # folder -> the file's text
    exit_code: int
    says: str             # a regular expression that the report must match
    argv: tuple = ("--batches", "5")


HOSTILE = [
    Hostile("patches_Contract_check", stage02_plus(PATCH_CONTRACT_CHECK), 2,
            r"tampering detected: loading .* replaced dezero_mini\.contracts\.Contract\.check"),
    Hostile("patches_the_collector", stage02_plus(PATCH_COLLECTOR), 2,
            r"tampering detected: loading .* replaced gc\.(get_objects|collect)"),
    Hostile("hides_its_graphs_with_gc_freeze", stage02_plus(HIDE_BY_FREEZING), 2,
            r"tampering detected: while \w+ ran, the file called gc\.freeze\(\) or "
            r"gc\.unfreeze\(\)"),
    Hostile("prints_fake_protocol_lines", stage02_plus(FAKE_PROTOCOL), 2,
            r"tampering detected: the result channel received a line that is not the checker's"),
    Hostile("reads_GRADER_TOKEN", stage02_plus(READ_TOKEN), 1, r"token: None home: /\S*dezero_mini_check_"),
    Hostile("allocates_2_5_GiB", stage02_plus(ALLOCATE_2_GIB), 2,
            rf"cannot load {FILE_NAME}: .*MemoryError.*the file used more than "
            rf"{Limits().memory_mib} MiB of memory"),
    Hostile("loops_in_backward", stage02_plus(LOOP_IN_BACKWARD), 1,
            r"timed out: the check's total time limit of 3 s ran out; the file was at "
            rf"{FILE_NAME} line (?P<line>\d+) \(in _endless\)",
            argv=("--batches", "5", "--total-timeout", "3")),
    Hostile("imports_the_classes_from_dezero_mini", stage02_plus(IMPORT_FROM_PACKAGE), 2,
            rf"{FILE_NAME} does not define Variable, .* itself \(Variable: the class comes from "
            r"\S*dezero_mini/core\.py\)"),
    Hostile("only_imports_from_dezero_mini", lambda folder: IMPORT_FROM_PACKAGE, 2,
            rf"{FILE_NAME} does not define Variable, .* itself \(Variable: it imports "
            r"dezero_mini\.Variable\)"),
    Hostile("load_stage_3_into_globals", stage02_plus(LOAD_STAGE_3), 2,
            rf"{FILE_NAME} does not define Variable, .* itself \(Variable: the class comes from "
            r"\S*steps/step03_weakref_outputs\.py\)"),
    Hostile("the_reference_verbatim", reference_under_a_header, 2,
            rf"{FILE_NAME} is the course's own step03_weakref_outputs\.py"),
    Hostile("hides_memory_from_tracemalloc", hidden_memory, 1,
            r"the worker reported -?\d+\.\d KiB per batch while its RSS grew (?P<mib>\d+) MiB",
            argv=("--batches", "20")),
]


def run_check(capsys, path, argv):
    started = time.monotonic()
    code = cli.main(["check", "3", str(path), "--json", *argv])
    out, err = capsys.readouterr()
    return code, json.loads(out), time.monotonic() - started


def report_text(report):
    return "\n".join([str(report["message"]), report["output"],
                      *(c["measured"] for c in report["contracts"])])


@pytest.mark.parametrize("case", HOSTILE, ids=lambda case: case.name)
def test_a_hostile_submission_is_not_a_pass(case, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("GRADER_TOKEN", "s3cret-grader-token")
    path = tmp_path / FILE_NAME
    path.write_text(case.write(tmp_path))
    code, report, _seconds = run_check(capsys, path, case.argv)
    text = report_text(report)
    assert code == report["exit_code"] == case.exit_code, text
    found = re.search(case.says, text)
    assert found, text
    assert report["status"] != "passed" and "s3cret-grader-token" not in json.dumps(report)
    if case.exit_code == 1:
        assert report["passed"] < len(contracts_at(3))
    if "line" in found.groupdict():  # the line of the endless loop, and the check kept its time
        lines = path.read_text().splitlines()
        assert "HANG HERE" in lines[int(found["line"]) - 1] or "pass" in lines[int(found["line"]) - 1]
        assert sum(c["measured"].startswith("not run") for c in report["contracts"]) >= 1
    if "mib" in found.groupdict():
        assert int(found["mib"]) >= 128


def test_the_stage02_file_alone_fails_honestly(tmp_path, capsys):
    """The base of every row: without a trick, 3 of 6 fail (exit 1)."""
    path = tmp_path / FILE_NAME
    path.write_text(step_text(2))
    code, report, _ = run_check(capsys, path, ("--batches", "5"))
    assert code == 1 and len(contracts_at(3)) - report["passed"] == HONEST_FAILS, report


def test_the_environment_is_reduced_to_the_whitelist(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("GRADER_TOKEN", "s3cret-grader-token")
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    path = tmp_path / FILE_NAME
    path.write_text(stage02_plus(READ_TOKEN)(tmp_path))
    _, report, _ = run_check(capsys, path, ("--batches", "5"))
    names = eval(re.search(r"environment: (\[.*?\])", report["output"]).group(1))
    assert set(names) <= {"PATH", "LANG", "LANGUAGE", "TZ", "HOME", "TMPDIR", "DEZERO_MINI_STEPS",
                          "LC_CTYPE"} | {n for n in names if n.startswith("LC_")}


REACH_A_SERVER = """
import ctypes, os, socket
for _pid in (os.getppid(), 1):  # first, back into the checker's network namespace (root could)
    try:
        _fd = os.open(f"/proc/{{_pid}}/ns/net", os.O_RDONLY)
        print("setns:", ctypes.CDLL(None, use_errno=True).setns(_fd, 0x40000000), ctypes.get_errno())
    except OSError as error:
        print("setns:", error)
try:  # a server of the grader's on this machine: if 127.0.0.1 is out of reach, so is the world
    socket.create_connection(("127.0.0.1", {port}), timeout=5).close()
    print("network: reached the server")
except OSError as error:
    print("network: no way out:", error)
"""


def test_the_worker_cannot_reach_the_network(tmp_path, capsys):
    """The worker has a network namespace of its own, with loopback down:
    even a server on the same machine, listening on 127.0.0.1, is out of its
    reach, and it cannot join the checker's namespace again (``setns``: a
    root worker lacks CAP_SYS_ADMIN). Where the kernel does not let this
    user do that, the test says so."""
    if not sandbox.network_can_be_cut():
        pytest.skip("this kernel does not let this user give a process a network namespace of "
                    "its own (a container without CAP_SYS_ADMIN, or user namespaces switched off): "
                    "the worker keeps the network here, as docs/classroom.md says")
    with socket.create_server(("127.0.0.1", 0)) as server:
        path = tmp_path / FILE_NAME
        path.write_text(stage02_plus(REACH_A_SERVER.format(port=server.getsockname()[1]))(tmp_path))
        _, report, _ = run_check(capsys, path, ("--batches", "5"))
        server.setblocking(False)
        with pytest.raises(BlockingIOError):  # nobody knocked
            server.accept()
    assert "network: no way out:" in report["output"], report["output"]
    assert report["exit_code"] == 1  # checked as usual: the stage-02 file fails honestly


def test_a_kernel_that_refuses_a_network_namespace_leaves_the_worker_as_it_was():
    """``unshare`` refused as root and as a user (what a container without
    the capability answers): the worker starts anyway, on the network."""
    calls = []

    def refuses(flags):
        calls.append(flags)
        return -1

    assert sandbox._leave_the_network((refuses, lambda: 0), os.getuid(), os.getgid()) is False
    assert calls == [sandbox._CLONE_NEWNET, sandbox._CLONE_NEWUSER | sandbox._CLONE_NEWNET]
    assert sandbox._leave_the_network(None, os.getuid(), os.getgid()) is False


# --- The other resource limits, made small ---------------------------------------------------
@pytest.mark.parametrize("limits, trick, says", [
    (Limits(cpu_seconds=1), "while True:\n    pass\n",
     r"the process ended \(exit code -\d+\) while importing it: the file used more than 1 s of "
     r"CPU time"),
    (Limits(file_size_mib=1), "with open('big.bin', 'wb') as _f:\n    _f.write(bytes(2 << 20))\n",
     r"File too large.*: the file wrote a file larger than 1 MiB"),
], ids=["cpu_seconds", "file_size"])
def test_a_resource_limit_met_is_named(limits, trick, says, tmp_path):
    path = tmp_path / FILE_NAME
    path.write_text(stage02_plus(trick)(tmp_path))
    report = check_file(3, path, batches=5, limits=limits)
    assert report.exit_code == 2 and re.search(says, report.message), report.message
    assert not (tmp_path / "big.bin").exists()  # written in the scratch folder, removed


# --- Modules beside the file, check run from its folder ------------------------------------
SHADOWS = {
    "json.py": "json", "gc.py": "gc", "numpy.py": "numpy",
    "dezero_mini/__init__.py": "dezero_mini", "sitecustomize.py": "sitecustomize",
}


def _shadowed_folder(tmp_path):
    """The stage-02 file with, beside it, a module of each name in ``SHADOWS``
    that, once imported, records it and makes every check pass (json.loads
    answers an all-pass report)."""
    folder = tmp_path / "submission"
    folder.mkdir()
    (folder / FILE_NAME).write_text(step_text(2))
    for file_name, name in SHADOWS.items():
        target = folder / file_name
        target.parent.mkdir(exist_ok=True)
        target.write_text(f"open({str(tmp_path / ('IMPORTED_' + name))!r}, 'w').close()\n"
                          "raise SystemExit(0)  # 'every contract passes'\n")
    return folder


@pytest.mark.parametrize("isolated", [False, True], ids=["python -m", "python -I -m"])
def test_modules_beside_the_file_change_nothing(isolated, tmp_path):
    folder = _shadowed_folder(tmp_path)
    command = [sys.executable, *(["-I"] if isolated else []), "-m", "dezero_mini", "check", "3",
               FILE_NAME, "--batches", "5", "--json"]
    env = dict(os.environ, PYTHONPATH=str(ROOT))  # (ignored by -I: the install is found)
    done = subprocess.run(command, cwd=folder, capture_output=True, text=True, timeout=300,
                          env=env)
    imported = sorted(p.name for p in tmp_path.glob("IMPORTED_*"))
    if not isolated:
        # A dezero_mini/ package in the current folder is what `python -m
        # dezero_mini` runs: nothing in the real package can stop that (the
        # lab chapter says to grade with `python -I -m`). The others change nothing.
        assert imported == ["IMPORTED_dezero_mini"] and done.returncode == 0
        return
    assert imported == [], done.stderr
    report = json.loads(done.stdout)
    assert done.returncode == report["exit_code"] == 1, done.stderr
    assert len(contracts_at(3)) - report["passed"] == HONEST_FAILS


def test_modules_other_than_the_package_beside_the_file_change_nothing_with_python_m(tmp_path):
    folder = _shadowed_folder(tmp_path)
    shutil.rmtree(folder / "dezero_mini")
    done = subprocess.run([sys.executable, "-m", "dezero_mini", "check", "3", FILE_NAME,
                           "--batches", "5", "--json"], cwd=folder, capture_output=True,
                          text=True, timeout=300)
    assert sorted(p.name for p in tmp_path.glob("IMPORTED_*")) == [], done.stderr
    report = json.loads(done.stdout)
    assert done.returncode == report["exit_code"] == 1
    assert len(contracts_at(3)) - report["passed"] == HONEST_FAILS


# --- Processes that would outlive the check -------------------------------------------------
ESCAPING_GRANDCHILD = """
import os, time
if os.fork() == 0:             # a child ...
    os.setsid()                # ... in a session of its own, out of the worker's group,
    if os.fork() == 0:         # whose child is orphaned at once
        with open({pid_file!r}, "w") as _file:
            _file.write(str(os.getpid()))
        while True:
            time.sleep(0.05)
    os._exit(0)
while not os.path.exists({pid_file!r}):
    time.sleep(0.01)
"""


def _alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc and subreapers: Linux")
def test_a_grandchild_that_leaves_the_group_dies_with_the_check(tmp_path, capsys):
    pid_file = tmp_path / "grandchild.pid"
    path = tmp_path / FILE_NAME
    path.write_text(stage02_plus(ESCAPING_GRANDCHILD.format(pid_file=str(pid_file)))(tmp_path))
    code, report, _ = run_check(capsys, path, ("--batches", "5"))
    assert code == 1, report_text(report)
    grandchild = int(pid_file.read_text())
    assert not _alive(grandchild)


WRITES_ITS_PID_THEN_LOOPS = """
import os
with open({pid_file!r}, "w") as _file:
    _file.write(str(os.getpid()))
while True:
    pass
"""


@pytest.mark.parametrize("signum, code", [(signal.SIGTERM, 143), (signal.SIGINT, 130),
                                          (signal.SIGHUP, 129)])
def test_a_stop_signal_kills_the_worker_and_says_so(signum, code, tmp_path):
    pid_file = tmp_path / "worker.pid"
    path = tmp_path / FILE_NAME
    path.write_text(stage02_plus(WRITES_ITS_PID_THEN_LOOPS.format(pid_file=str(pid_file)))(tmp_path))
    check = subprocess.Popen([sys.executable, "-m", "dezero_mini", "check", "3", str(path)],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while not (pid_file.exists() and pid_file.read_text()) and time.monotonic() < deadline:
        time.sleep(0.05)
    worker = int(pid_file.read_text())
    check.send_signal(signum)
    out, err = check.communicate(timeout=30)
    assert check.returncode == code, err
    assert err.strip() == (f"dezero_mini check: stopped by {signal.Signals(signum).name}: the "
                           "worker and its processes were killed; no result")
    assert not _alive(worker)


# --- The installation ------------------------------------------------------------------------
def test_a_submission_that_changes_the_installation_is_reported(tmp_path, capsys, monkeypatch):
    """A copy of steps/ stands in for the installation: the file touches one
    of its files (a later check would run a changed course)."""
    steps = tmp_path / "steps"
    shutil.copytree(STEPS, steps)
    monkeypatch.setenv("DEZERO_MINI_STEPS", str(steps))
    path = tmp_path / "mine" / FILE_NAME
    path.parent.mkdir()
    path.write_text(stage02_plus(
        "import os\nwith open(os.path.join(os.environ['DEZERO_MINI_STEPS'], "
        "'step01_leaking_graph.py'), 'a') as _f:\n    _f.write('# pass everything\\n')\n")(tmp_path))
    code, report, _ = run_check(capsys, path, ("--batches", "5"))
    assert code == 2 and report["status"] == "error"
    assert re.search(r"tampering detected: the check changed the grading installation: "
                     r"\S*step01_leaking_graph\.py", report["message"]), report["message"]


# --- What a determined submission can still do ------------------------------------------------
FORGE_WITH_THE_WORKERS_OWN_KEY = """
import gc, os, sys
_writer = next(o for o in gc.get_objects() if type(o).__name__ == "Writer")
_writer.send(event="loaded")
for _name in [a for a in sys.argv if a.isidentifier()]:
    _writer.send(event="start", name=_name)
    _writer.send(event="result", name=_name, passed=True, expected="x", measured="x", error=None)
os._exit(0)
"""


EXEC_THE_REFERENCE_AS_ITS_OWN = """
from dezero_mini.memory.stages import stage_path
exec(compile(stage_path(3).read_text(), __file__, "exec"))
"""


@pytest.mark.parametrize("trick", [FORGE_WITH_THE_WORKERS_OWN_KEY, EXEC_THE_REFERENCE_AS_ITS_OWN],
                         ids=["forges_with_the_workers_key", "runs_the_reference_as_its_own_code"])
def test_full_python_in_the_worker_can_still_forge_a_pass(trick, tmp_path, capsys):
    """The limits of tamper evidence in one process (the lab chapter says so):
    the secret is in the worker's memory, and the learner's code runs there;
    code compiled under the file's own name passes for the file's. If this
    test fails, the checker got stronger: update the chapter."""
    path = tmp_path / FILE_NAME
    path.write_text(stage02_plus(trick)(tmp_path))
    code, report, _ = run_check(capsys, path, ("--batches", "5"))
    assert code == 0 and report["passed"] == len(contracts_at(3))


def test_the_lab_chapter_states_the_checkers_defaults():
    """The threat model quotes the limits: it follows the code."""
    from dezero_mini.contracts.runner import (DEFAULT_TIMEOUT, DEFAULT_TOTAL_TIMEOUT,
                                              RSS_GROWTH_ALLOWED)
    from dezero_mini.contracts.sandbox import MIB

    text = " ".join((ROOT / "docs" / "classroom.md").read_text().split())
    section = text[text.index("## What a submission can and cannot do"):]
    limits = Limits()
    for words in (f"{limits.memory_mib} MiB of address space", f"{limits.cpu_seconds} s of CPU time",
                  f"files of at most {limits.file_size_mib} MiB",
                  f"{limits.extra_processes} more than the grading user runs",
                  f"{DEFAULT_TOTAL_TIMEOUT:g} s by default", f"(`--timeout`, {DEFAULT_TIMEOUT:g} s)",
                  f"the allowance is {RSS_GROWTH_ALLOWED // MIB} MiB",
                  f"more than {limits.memory_mib} MiB of memory"):
        assert words in section, words
