"""The families of attacks that the bubblewrap sandbox removes, one submission each.

Each row of ``FAMILIES`` is the course's stage-02 file with one trick added,
checked as stage 03 by a ``check --json`` process of its own (a trick may
kill the process that ran it). It is run twice: with ``--sandbox required``
the attack fails and the check reports as usual; with ``--sandbox off`` (the
contained worker of a machine without bubblewrap) the same attack works,
which shows that the row tests the sandbox and nothing else.

Then what needs more than one check: the memory of a process tree (a
cgroup), a stopped process, a class graded together (``grade --jobs 2``),
and Gradescope's results file.
"""
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from conftest import STEPS
from dezero_mini.contracts import bubblewrap, contracts_at, sandbox
from dezero_mini.contracts.cgroup import MemoryCgroup
from dezero_mini.contracts.runner import check_file
from dezero_mini.contracts.sandbox import Limits, package_folder

FILE_NAME = "step03_weakref_outputs.py"
TOKEN = "s3cret-grader-token"

needs_sandbox = pytest.mark.skipif(
    bool(bubblewrap.sandbox_problem()), reason=f"no sandbox here: {bubblewrap.sandbox_problem()}")


def stage02_plus(trick):
    return next(STEPS.glob("step02_*.py")).read_text() + "\n\n# --- the trick ---\n" + trick


def run_check(path, mode, *argv, timeout=180):
    """``check 3 path --json`` as a process of its own: (exit code, stdout,
    stderr), or None when it hangs: when it is stopped (SIGSTOP: it would wait
    forever), or did not end within ``timeout`` seconds (a bound that only ends
    a hang). It is killed then."""
    command = [sys.executable, "-I", "-m", "dezero_mini", "check", "3", str(path), "--json",
               "--batches", "5", "--sandbox", mode, *argv]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True, env=dict(os.environ, GRADER_TOKEN=TOKEN),
                               start_new_session=True)
    deadline = time.monotonic() + timeout
    while True:
        try:
            out, err = process.communicate(timeout=0.5)  # (retrying loses no output)
            return process.returncode, out, err
        except subprocess.TimeoutExpired:
            if _stopped(process.pid) or time.monotonic() > deadline:
                break
    os.killpg(process.pid, signal.SIGCONT)
    os.killpg(process.pid, signal.SIGKILL)
    process.communicate()
    return None


def _stopped(pid):
    """Whether process ``pid`` is stopped by a signal (state T in /proc)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] == "T"
    except OSError:
        return False


# --- The tricks: each names what it reaches, and prints whether it did ---------------------
FORGE_AND_KILL_THE_PARENT = """
import json, os, signal
try:  # a report that says "all pass", on the check's own standard output ...
    with open(f"/proc/{os.getppid()}/fd/1", "w") as _out:
        _out.write(json.dumps({"status": "passed", "exit_code": 0, "forged": True}))
    os.kill(os.getppid(), signal.SIGKILL)  # ... and the check dies before it prints its own
except OSError as error:
    print("no parent to forge for:", error)
"""

READ_THE_PARENTS_ENVIRONMENT = """
import os
try:
    print("environ:", open(f"/proc/{os.getppid()}/environ", "rb").read())
except OSError as error:
    print("no environ:", error)
"""

STOP_THE_PARENT = """
import os, signal
try:
    os.kill(os.getppid(), signal.SIGSTOP)
except OSError as error:
    print("cannot stop:", error)
"""

REACH_A_UNIX_SOCKET = """
import socket
try:
    socket.socket(socket.AF_UNIX).connect(SOCKET_PATH)
    print("connected to the grader's socket")
except OSError as error:
    print("no socket:", error)
"""

WRITE_INTO_THE_INSTALLATION = """
for _target in TARGETS:
    try:
        with open(_target, "w") as _file:
            _file.write("# graded as the attacker wishes")
        print("wrote", _target)
    except OSError as error:
        print("cannot write:", error)
"""

# The sandbox's user has no capability; in a user namespace of its own it
# would have them all (then mount, chroot...). WAY: how it tries to get one:
# "unshare" or "clone" a user namespace, "mount" or "chroot" in one, "setns"
# into one that its child made. Each says "regained capabilities" when it worked.
REGAIN_CAPABILITIES = """
import ctypes, os, platform, time

_libc = ctypes.CDLL(None, use_errno=True)
_NEWUSER, _NEWNS, _SIGCHLD = 0x10000000, 0x00020000, 17
_CLONE = {"x86_64": 56, "aarch64": 220}.get(platform.machine(), -1)


def _capabilities():
    with open("/proc/self/status") as _status:
        return next(int(line.split()[1], 16) for line in _status if line.startswith("CapEff:"))


def _say(way, done):  # (the words are joined here: a traceback would quote them)
    print(way, "re" + "gained capabilities" if done else "refused", flush=True)


def _attempt(way):
    if way == "unshare":
        _say(way, _libc.unshare(_NEWUSER) == 0 and _capabilities() != 0)
    elif way == "clone":
        pid = _libc.syscall(_CLONE, _NEWUSER | _SIGCHLD, 0, 0, 0, 0)
        if pid == 0:
            _say(way, _capabilities() != 0)
            os._exit(0)
        if pid < 0:
            _say(way, False)
        else:
            os.waitpid(pid, 0)
    elif way == "mount":
        _say(way, _libc.unshare(_NEWUSER | _NEWNS) == 0
             and _libc.mount(b"none", b"/tmp", b"tmpfs", 0, None) == 0)
    elif way == "chroot":
        _say(way, _libc.unshare(_NEWUSER) == 0 and _libc.chroot(b"/tmp") == 0)
    elif way == "setns":  # a child makes the namespace; this process joins it
        ready_read, ready_write = os.pipe()
        child = os.fork()
        if child == 0:
            os.write(ready_write, b"y" if _libc.unshare(_NEWUSER) == 0 else b"n")
            time.sleep(5)
            os._exit(0)
        os.read(ready_read, 1)
        try:
            fd = os.open(f"/proc/{child}/ns/user", os.O_RDONLY)
            _say(way, _libc.setns(fd, _NEWUSER) == 0 and _capabilities() != 0)
        except OSError as error:
            print(way, "refused:", error, flush=True)
        os.kill(child, 9)
        os.waitpid(child, 0)


_child = os.fork()  # (a process of one thread: the kernel's condition for a user namespace)
if _child == 0:
    try:
        _attempt(WAY)
    finally:
        os._exit(0)
os.waitpid(_child, 0)
"""
REGAIN_WAYS = ("unshare", "clone", "mount", "chroot", "setns")

# State of the kernel that no namespace of bwrap's covers. WAY: "keyring" (a
# key left in the user's keyring outlived its sandbox, and the next check,
# another throwaway user, read it: found by the red team), "io_uring" (a
# large surface of the kernel). Each says "reached the kernel" when it did.
REACH_SHARED_KERNEL_STATE = """
import ctypes, platform

_libc = ctypes.CDLL(None, use_errno=True)
_ADD_KEY, _KEYCTL, _IO_URING_SETUP = {"x86_64": (248, 250, 425),
                                      "aarch64": (217, 219, 425)}.get(platform.machine(), (-1,) * 3)
_KEYCTL_INVALIDATE, _USER_KEYRING = 21, -4


def _say(way, done):  # (the words are joined here: a traceback would quote them)
    print(way, "re" + "ached the kernel" if done else "refused", flush=True)


if WAY == "keyring":
    _payload = b"left by one submission for whoever looks next"
    _key = _libc.syscall(_ADD_KEY, b"user", b"dezero_probe", _payload, len(_payload), _USER_KEYRING)
    if _key >= 0:
        _libc.syscall(_KEYCTL, _KEYCTL_INVALIDATE, _key)  # (the test leaves no key behind)
    _say(WAY, _key >= 0)
else:
    _say(WAY, _libc.syscall(_IO_URING_SETUP, 4, ctypes.create_string_buffer(120)) >= 0)
"""
SHARED_KERNEL_STATE = ("keyring", "io_uring")


@dataclass
class Family:
    name: str
    trick: str
    worked: object  # (outcome, context) -> whether the attack did what it wanted


def _forged(outcome, context):
    return outcome is not None and '"forged": true' in outcome[1]


def _token_read(outcome, context):
    return outcome is not None and TOKEN in outcome[1]


def _check_hung(outcome, context):
    return outcome is None


def _socket_reached(outcome, context):
    return context["knocked"].is_set()


def _installation_written(outcome, context):
    return any(Path(target).exists() for target in context["targets"])


def _capabilities_regained(outcome, context):
    return outcome is not None and "regained capabilities" in outcome[1]


def _kernel_reached(outcome, context):
    return outcome is not None and "reached the kernel" in outcome[1]


FAMILIES = [
    Family("forges_a_report_and_kills_its_check", FORGE_AND_KILL_THE_PARENT, _forged),
    Family("reads_the_checks_environment", READ_THE_PARENTS_ENVIRONMENT, _token_read),
    Family("stops_its_check", STOP_THE_PARENT, _check_hung),
    Family("reaches_a_unix_socket_of_the_grader", REACH_A_UNIX_SOCKET, _socket_reached),
    Family("writes_bytecode_into_the_installation", WRITE_INTO_THE_INSTALLATION,
           _installation_written),
    *(Family(f"regains_capabilities_by_{way}", REGAIN_CAPABILITIES.replace("WAY", repr(way)),
             _capabilities_regained) for way in REGAIN_WAYS),
    *(Family(f"reaches_shared_kernel_state_by_{way}",
             REACH_SHARED_KERNEL_STATE.replace("WAY", repr(way)), _kernel_reached)
      for way in SHARED_KERNEL_STATE),
]


@pytest.fixture
def context(tmp_path):
    """What the tricks aim at: a Unix socket that the grader listens on (in
    the file's own folder), and files in the installation's ``__pycache__``
    and site-packages (probe names, removed afterwards)."""
    server = socket.socket(socket.AF_UNIX)
    socket_path = str(tmp_path / "grader.sock")
    server.bind(socket_path)
    server.listen()
    knocked = threading.Event()

    def listen():
        try:
            server.accept()[0].close()
            knocked.set()
        except OSError:
            pass

    threading.Thread(target=listen, daemon=True).start()
    site = next(p for p in sys.path if p.endswith("site-packages"))
    probe = f"dezero_probe_{os.getpid()}_{tmp_path.name}"
    targets = [str(Path(package_folder()) / "__pycache__" / f"{probe}.pyc"),
               str(Path(site) / f"{probe}.txt")]
    yield {"socket_path": socket_path, "knocked": knocked, "targets": targets}
    server.close()
    for target in targets:
        Path(target).unlink(missing_ok=True)


@pytest.mark.parametrize("mode", ["required", "off"])
@pytest.mark.parametrize("family", FAMILIES, ids=lambda family: family.name)
def test_each_family_is_stopped_by_the_sandbox_and_only_by_it(family, mode, context, tmp_path):
    if mode == "required" and bubblewrap.sandbox_problem():
        pytest.skip(f"no sandbox here: {bubblewrap.sandbox_problem()}")
    path = tmp_path / FILE_NAME
    trick = family.trick.replace("SOCKET_PATH", repr(context["socket_path"]))
    path.write_text(stage02_plus(trick.replace("TARGETS", repr(context["targets"]))))
    outcome = run_check(path, mode)
    if mode == "off":  # the attack works without the sandbox: the row tests the sandbox
        assert family.worked(outcome, context), outcome
        return
    assert not family.worked(outcome, context), outcome
    code, out, err = outcome
    report = json.loads(out)
    assert report["sandboxed"] is True and code == report["exit_code"] == 1, err
    assert len(contracts_at(3)) - report["passed"] == 3  # the stage-02 file fails honestly
    assert TOKEN not in out


# --- A stopped or frozen process in the sandbox ----------------------------------------------
STOP_ITSELF = """
import os, signal
if os.fork() == 0:
    os.kill(os.getpid(), signal.SIGSTOP)  # a stopped child, never reaped
os.kill(os.getpid(), signal.SIGSTOP)      # and the worker itself
"""


@pytest.mark.parametrize("mode", ["required", "off"])
def test_a_stopped_worker_ends_at_the_total_time_limit_with_a_report(mode, tmp_path):
    if mode == "required" and bubblewrap.sandbox_problem():
        pytest.skip(f"no sandbox here: {bubblewrap.sandbox_problem()}")
    path = tmp_path / FILE_NAME
    path.write_text(stage02_plus(STOP_ITSELF))
    code, out, _ = run_check(path, mode, "--total-timeout", "5")
    report = json.loads(out)
    assert code == 2 and "importing it took longer than 5 s" in report["message"], report


# --- The processors of a process tree -----------------------------------------------------------
SPIN_IN_SESSIONS_OF_ITS_OWN = """
import os, time
for _ in range(3):  # busy processes, each in a session (a scheduler's autogroup) of its own
    if os.fork() == 0:
        os.setsid()
        while True:
            pass
time.sleep(60)
"""


def _cpu_cgroup_of(pid):
    """The folder of process ``pid``'s cgroup in the v1 ``cpu`` hierarchy, or None."""
    from dezero_mini.contracts.cgroup import ROOT

    try:
        lines = Path(f"/proc/{pid}/cgroup").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if "cpu" in controllers.split(","):
            return ROOT / "cpu" / path.lstrip("/")
    return None


@needs_sandbox
def test_a_workers_processes_take_one_processor_whatever_their_sessions(tmp_path):
    """Without a cgroup of its own, each process that a worker started in a
    session of its own took a share of the processors as large as a
    classmate's whole check: 60 of them made the check of the stage-02 file
    graded beside them (``grade --jobs 2``) take 17.4 s instead of 3.8 s
    (2026-11-28, a 2-core machine). Every process of the tree is now in one
    cgroup, with a quota of ``Limits().processors`` processor."""
    from dezero_mini.contracts.cgroup import CpuCgroup

    probe = CpuCgroup.create(1, f"dezero_mini_probe_{os.getpid()}")
    if probe is None:
        pytest.skip("no cgroup v1 cpu hierarchy that this user may write here")
    probe.remove()
    path = tmp_path / FILE_NAME
    path.write_text(stage02_plus(SPIN_IN_SESSIONS_OF_ITS_OWN))
    stop = threading.Event()
    worker = threading.Thread(target=lambda: _stopped_check(path, stop), daemon=True)
    worker.start()
    try:
        deadline, tree = time.monotonic() + 60, []
        while len(tree) < 4 and time.monotonic() < deadline:  # the worker and its 3 children
            time.sleep(0.1)
            tree = _sandboxed_processes_of(path)
        assert len(tree) >= 4, tree
        folders = {_cpu_cgroup_of(pid) for pid in tree}
        assert len(folders) == 1 and None not in folders, folders
        folder = folders.pop()
        assert folder != _cpu_cgroup_of(os.getpid())
        quota = int((folder / "cpu.cfs_quota_us").read_text())
        period = int((folder / "cpu.cfs_period_us").read_text())
        assert quota == Limits().processors * period, (quota, period)
    finally:
        stop.set()
        worker.join(60)
    assert not folder.exists()  # removed with the sandbox


def _stopped_check(path, stop):
    from dezero_mini.contracts.runner import CheckStopped

    try:
        check_file(3, path, batches=5, total_timeout=60, stop=stop)
    except CheckStopped:
        pass


def _sandboxed_processes_of(path):
    """The pids of the processes that run as a throwaway user of the sandbox
    and whose command line names ``path`` (its worker, and what it forked)."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                status = Path(f"/proc/{entry}/status").read_text()
                command = Path(f"/proc/{entry}/cmdline").read_bytes()
            except OSError:
                continue
            uid = int(re.search(r"^Uid:\s+(\d+)", status, re.MULTILINE).group(1))
            if uid >= bubblewrap.THROWAWAY_UID_BASE and str(path).encode() in command:
                found.append(int(entry))
    return found


# --- The memory of a process tree ------------------------------------------------------------
FORK_AND_FILL = """
import os, select, signal, time
_ready, _filled = os.pipe()
_children = []
for _ in range(4):  # four processes of 100 MiB each: each under the limit, the tree over
    _pid = os.fork()
    if _pid == 0:
        os.close(_ready)
        _block = bytearray(100 << 20)
        for _i in range(0, len(_block), 4096):
            _block[_i] = 1
        os.write(_filled, b"+")  # this one holds its 100 MiB now
        time.sleep(120)
        os._exit(0)
    _children.append(_pid)
os.close(_filled)
if EXPECT_A_KILL:  # in the sandbox: until the kernel kills one (SIGALRM ends a hang: 45 s)
    signal.alarm(45)
    _dead = {os.waitpid(-1, 0)[0]}
    signal.alarm(0)
else:  # until every child holds its 100 MiB (a child that dies ends the wait too)
    _done, _dead = 0, set()
    while _done < len(_children) and not _dead:
        if select.select([_ready], [], [], 0.1)[0]:
            _done += len(os.read(_ready, 16))
        _dead |= {_pid for _pid in _children if os.waitpid(_pid, os.WNOHANG)[0] == _pid}
print("children alive after filling:", len(_children) - len(_dead))
"""


@needs_sandbox
@pytest.mark.parametrize("mode", ["required", "off"])
def test_the_memory_of_the_whole_tree_is_bounded(mode, tmp_path):
    """Four processes of 100 MiB, each under a per-process limit of 400 MiB:
    the cgroup counts them together and the kernel kills for its limit;
    without the sandbox each process keeps only its own limit."""
    # (The message for a worker killed this way is held in test_describe_limit_names_the_tree.)
    probe = MemoryCgroup.create(1 << 30, f"dezero_mini_probe_{os.getpid()}")
    if probe is None:
        pytest.skip("no memory cgroup can be made here: each process keeps only its own limit "
                    "(docs/classroom.md says so)")
    probe.remove()
    path = tmp_path / FILE_NAME
    path.write_text(stage02_plus(FORK_AND_FILL.replace("EXPECT_A_KILL", str(mode == "required"))))
    report = check_file(3, path, batches=5, limits=Limits(memory_mib=400), sandbox=mode)
    if mode == "off":
        assert "children alive after filling: 4" in report.output, report.output
        return
    # The kernel killed a process of the tree (a child here; the worker when it
    # is the one that goes beyond, and the report then names the limit).
    assert re.search(r"children alive after filling: [0-3]\b", report.output) or (
        "the file's processes used more than 400 MiB of memory together" in report.message), report


class _CgroupThatForgets:
    """A cgroup whose kernel killed a process for its limit, and whose files
    are gone once it is removed (as a real one's folder is)."""

    def __init__(self):
        self.removed = False

    def memory_kills(self):
        return 0 if self.removed else 1

    def processes(self):
        return []

    def remove(self):
        self.removed = True


def test_the_kernels_memory_kill_is_read_before_the_cgroup_is_removed():
    """``end_worker`` removes the worker's cgroup; the report asks afterwards
    whether the kernel killed for its limit, which only the cgroup's own files
    say: read then, it was always "no" (the message named no limit)."""
    process = subprocess.Popen([sys.executable, "-c", "pass"], stdin=subprocess.PIPE,
                               stdout=subprocess.PIPE, start_new_session=True)
    worker = sandbox.Worker(process, process.pid, sandboxed=True, cgroup=_CgroupThatForgets())
    sandbox.end_worker(worker)
    process.stdin.close()
    process.stdout.close()
    assert worker.cgroup.removed and worker.memory_killed()


# --- Gradescope's results file ------------------------------------------------------------------
FORGE_RESULTS_THEN_KILL = """
import json, os, signal
from pathlib import Path
_results = Path(__file__).resolve().parents[1] / "results" / "results.json"
try:
    _results.write_text(json.dumps({"score": 99, "tests": [], "output": "forged"}))
    print("wrote the results")
except OSError as error:
    print("no results file:", error)
try:
    os.kill(os.getppid(), signal.SIGKILL)
except OSError as error:
    print("cannot kill:", error)
"""


@pytest.mark.parametrize("mode", ["required", "off"])
def test_gradescope_never_keeps_results_that_the_submission_wrote(mode, tmp_path):
    if mode == "required" and bubblewrap.sandbox_problem():
        pytest.skip(f"no sandbox here: {bubblewrap.sandbox_problem()}")
    root = tmp_path / "autograder"
    (root / "submission").mkdir(parents=True)
    (root / "submission" / FILE_NAME).write_text(stage02_plus(FORGE_RESULTS_THEN_KILL))
    script = Path(__file__).resolve().parents[1] / "graders" / "gradescope" / "run_autograder"
    env = dict(os.environ, DEZERO_MINI_AUTOGRADER_ROOT=str(root), DEZERO_MINI_STAGE="3",
               DEZERO_MINI_PYTHON=sys.executable,
               DEZERO_MINI_CHECK_OPTIONS=f"--batches 5 --sandbox {mode}")
    subprocess.run(["bash", str(script)], env=env, capture_output=True, timeout=300, check=True)
    results = json.loads((root / "results" / "results.json").read_text())
    assert results["score"] != 99 and results.get("output") != "forged", results
    if mode == "required":  # the grader's own report: the stage-02 file fails honestly
        assert [test["status"] for test in results["tests"]].count("failed") == 3, results


# --- A class graded together --------------------------------------------------------------------
ATTACK_THE_CLASSMATES = """
import os, signal, time
_me = os.getpid()
for _round in range(20):  # for a while, at every process it can see
    for _entry in os.listdir("/proc"):
        if not _entry.isdigit() or int(_entry) == _me:
            continue
        try:
            _command = open(f"/proc/{_entry}/cmdline", "rb").read()
        except OSError:
            continue
        if CLASS_FOLDER.encode() not in _command:  # (never a process outside this test)
            continue
        for _fd in range(3, 12):  # write into its pipes, the result channel among them
            try:
                with open(f"/proc/{_entry}/fd/{_fd}", "wb") as _pipe:
                    _pipe.write(b"0 forged {}\\n")
            except OSError:
                pass
        for _signal in (signal.SIGSTOP, signal.SIGKILL):
            try:
                os.kill(int(_entry), _signal)
            except OSError:
                pass
    time.sleep(0.2)
"""

FORK_MANY = """
import os, time
for _ in range(200):  # beyond its process limit
    try:
        if os.fork() == 0:
            time.sleep(60)
            os._exit(0)
    except OSError:
        break
"""


@needs_sandbox
def test_a_class_graded_together_gives_every_honest_file_its_own_row(tmp_path):
    """Honest files (the stage-02 file, which fails 3 contracts) and hostile
    ones (signalling, writing into and stopping every process of the class
    it can find, forking without end, forging a report) graded with
    ``--jobs 2``: every honest row is what it is when graded alone."""
    from dezero_mini import cli

    honest, hostile = ["alice", "bob", "carol"], {
        "mallory": ATTACK_THE_CLASSMATES.replace("CLASS_FOLDER", repr(str(tmp_path))),
        "trudy": FORK_MANY, "oscar": FORGE_AND_KILL_THE_PARENT}
    folders = []
    for student in ["mallory", "alice", "trudy", "bob", "oscar", "carol"]:
        folder = tmp_path / "class" / student
        folder.mkdir(parents=True)
        (folder / FILE_NAME).write_text(stage02_plus(hostile.get(student, "")))
        folders.append(str(folder))

    def grade(submissions, csv_name):
        csv_path = tmp_path / csv_name
        assert cli.main(["grade", "3", *submissions, "--csv", str(csv_path), "--batches", "5",
                         "--jobs", "2"]) == 0
        import csv
        with open(csv_path) as rows:
            return {row["student"]: row for row in csv.DictReader(rows)}

    together = grade(folders, "together.csv")
    alone = grade([folders[1]], "alone.csv")["alice"]
    kept = [key for key in alone if key not in ("student", "path", "seconds")]
    for student in honest:
        assert {key: together[student][key] for key in kept} == {key: alone[key] for key in kept}, (
            student, together[student], alone)
    assert alone["status"] == "failed" and alone["passed"] == str(len(contracts_at(3)) - 3)
    assert together["oscar"]["status"] != "passed"


def test_describe_limit_names_the_tree():
    from dezero_mini.contracts.sandbox import describe_limit

    assert describe_limit(Limits(memory_mib=400), -9, "", memory_killed=True) == (
        "the file's processes used more than 400 MiB of memory together (the limit of the "
        "whole sandbox)")
    assert describe_limit(Limits(memory_mib=400), -9, "") is None


# --- grade: a folder and weights that no submission can reach ---------------------------------
PLANT_A_PACKAGE_FOR_THE_NEXT_CHECKS = """
import glob, json, os, tempfile
_forged = {"status": "passed", "points": 99, "max_points": 99, "passed": 6, "total": 6,
           "contracts": [], "message": ""}
_folders = glob.glob(os.path.join(tempfile.gettempdir(), "dezero_mini_grade_*"))
for _folder in _folders + [os.getcwd()]:
    try:
        os.makedirs(os.path.join(_folder, "dezero_mini"), exist_ok=True)
        with open(os.path.join(_folder, "dezero_mini", "__init__.py"), "w") as _init:
            _init.write("print(%r)\\nraise SystemExit(0)\\n" % json.dumps(_forged))
        with open(os.path.join(_folder, "dezero_mini", "__main__.py"), "w") as _main:
            _main.write("")
        with open(os.path.join(_folder, "weights.json"), "w") as _weights:
            _weights.write(json.dumps({"new": 99, "inherited": 99}))
    except OSError:
        pass
"""


def test_grade_starts_each_check_where_no_submission_wrote(tmp_path):
    """Without the sandbox too (``--sandbox off``): a submission plants a
    ``dezero_mini/`` package and a weights file in every folder of grade's
    it can find, for the checks after it. Each check starts with ``python -I``
    from an empty folder of its own and reads its weights on standard input:
    the next student's row is theirs."""
    from dezero_mini import cli

    folders = []
    for student, trick in (("mallory", PLANT_A_PACKAGE_FOR_THE_NEXT_CHECKS), ("alice", "")):
        folder = tmp_path / student
        folder.mkdir()
        (folder / FILE_NAME).write_text(stage02_plus(trick))
        folders.append(str(folder))
    weights = tmp_path / "weights.json"
    weights.write_text(json.dumps({"new": 2, "inherited": 1}))
    csv_path = tmp_path / "grades.csv"
    assert cli.main(["grade", "3", *folders, "--csv", str(csv_path), "--batches", "5",
                     "--jobs", "1", "--sandbox", "off", "--weights", str(weights)]) == 0
    import csv
    with open(csv_path) as rows:
        alice = {row["student"]: row for row in csv.DictReader(rows)}["alice"]
    assert alice["status"] == "failed" and alice["max_points"] == "9", alice


def test_grade_gives_the_weights_on_standard_input_only():
    from dezero_mini.contracts.scoring import Weights
    from dezero_mini.grading.batch import Grading

    grading = Grading(number=3, weights=Weights.from_mapping({"new": 5}))
    argv = grading.check_argv("x.py")
    assert argv[1] == "-I" and argv[argv.index("--weights") + 1] == "-"
    assert json.loads(grading.weights_input())["new"] == 5


# --- Where the sandbox cannot run ------------------------------------------------------------
@pytest.fixture
def no_bwrap(monkeypatch):
    missing = "bubblewrap (bwrap) is not installed (sudo apt-get install bubblewrap)"
    monkeypatch.setattr(bubblewrap, "sandbox_problem", lambda: missing)


def test_check_says_so_in_one_line_and_runs_the_file(no_bwrap, tmp_path, capsys):
    from dezero_mini import cli

    path = tmp_path / FILE_NAME
    path.write_text(stage02_plus(""))
    assert cli.main(["check", "3", str(path), "--json", "--batches", "5"]) == 1
    out, err = capsys.readouterr()
    assert err.splitlines() == [
        "dezero_mini check: note: running the file without its sandbox: bubblewrap (bwrap) is "
        "not installed (sudo apt-get install bubblewrap)"]
    assert json.loads(out)["sandboxed"] is False


def test_grading_refuses_without_the_sandbox_unless_told(no_bwrap, tmp_path, capsys):
    from dezero_mini import cli

    path = tmp_path / FILE_NAME
    path.write_text(stage02_plus(""))
    csv_path = tmp_path / "grades.csv"
    assert cli.main(["grade", "3", str(path), "--csv", str(csv_path)]) == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and "--sandbox auto" in err and not csv_path.exists()
    results = tmp_path / "results.json"
    assert cli.main(["check", "3", str(path), "--gradescope", str(results), "--json"]) == 2
    assert "cannot check step03_weakref_outputs.py in its sandbox: bubblewrap (bwrap) is not " \
           "installed" in json.loads(results.read_text())["output"]


# --- The command line of the sandbox -----------------------------------------------------------
def test_the_sandbox_shows_the_learners_file_and_the_earlier_stages_only(tmp_path):
    learner = tmp_path / "class" / "alice" / FILE_NAME
    steps = bubblewrap.visible_step_files(4, STEPS)
    assert [Path(step).name[:6] for step in steps] == ["step01", "step02", "step03"]
    for as_root in (True, False):
        command = bubblewrap.sandbox_command(["python"], readable=[str(learner), *steps],
                                             as_root=as_root)
        binds = [command[i + 1] for i, word in enumerate(command) if word == "--ro-bind"]
        assert str(learner) in binds and str(learner.parent) not in binds
        assert not any("step04" in bind or bind == str(STEPS) for bind in binds)
        assert "--die-with-parent" in command and command[-1] == "python"
        with_filter = bubblewrap.sandbox_command(["python"], readable=[], as_root=as_root,
                                                 seccomp_fd=9)
        assert with_filter[with_filter.index("--seccomp") + 1] == "9" and "--seccomp" not in command
        if as_root:  # a uid of its own, no capability, before Python starts
            reuid = next(word for word in command if word.startswith("--reuid="))
            assert int(reuid.split("=")[1]) >= bubblewrap.THROWAWAY_UID_BASE
            assert "--bounding-set=-all" in command
        else:
            assert "--unshare-user" in command and "--unshare-pid" in command


def test_the_namespace_filter_is_a_program_of_the_machines_calls():
    """Its instructions are whole (8 bytes each: bwrap refuses anything
    else), and a machine without a table gets none rather than a wrong one."""
    for machine in ("x86_64", "aarch64"):
        program = bubblewrap.namespace_filter(machine)
        assert len(program) % 8 == 0 and len(program) // 8 == 19
    assert bubblewrap.namespace_filter("sparc64") is None
    assert bubblewrap.namespace_filter("x86_64") != bubblewrap.namespace_filter("aarch64")


# --- The stack dump: a pipe, not a file the submission could replace --------------------------
FIFO_THEN_LOOP = """
import os
for _name in (".checker_stack.txt", "stack.txt"):  # where a dump file was once, and might be
    try:
        os.mkfifo(_name)
    except OSError:
        pass
while True:  # HANG HERE
    pass
"""


@pytest.mark.parametrize("mode", ["required", "off"])
def test_a_fifo_where_the_stack_dump_was_does_not_hang_the_check(mode, tmp_path):
    """The worker's stack comes back on a pipe of the checker's: a FIFO in
    the worker's folder, which once stood in for the dump file and hung the
    check, is read by nobody; the check ends at its limit and says where."""
    if mode == "required" and bubblewrap.sandbox_problem():
        pytest.skip(f"no sandbox here: {bubblewrap.sandbox_problem()}")
    path = tmp_path / FILE_NAME
    path.write_text(stage02_plus(FIFO_THEN_LOOP))
    outcome = run_check(path, mode, "--total-timeout", "8")
    assert outcome is not None
    report = json.loads(outcome[1])
    assert "importing it took longer than 8 s" in report["message"], report
    assert "step03_weakref_outputs.py line" in report["message"], report


# --- The memory of the tree, read by the checker ---------------------------------------------
def memory_in_a_child(folder):
    """The stage-03 reference, plus a child process forked at the first
    backward that fills 200 MiB: the worker's own memory and its traced
    bytes stay flat; the tree's grows. The worker waits until the child has
    filled it, and a moment more (the checker reads the tree's memory every
    0.05 s): else the 20 batches could end before the checker sees it (it
    did, now and then)."""
    text = next(STEPS.glob("step03_*.py")).read_text()
    text = text.replace("import weakref\n", "import os as _os, time as _time\nimport weakref\n"
                        "_FORKED = []\n", 1)
    return re.sub(r"^(    def backward\(self.*\):\n)",
                  "\\1        if not _FORKED:\n"
                  "            _ready_read, _ready_write = _os.pipe()\n"
                  "            _FORKED.append(_os.fork())\n"
                  "            if _FORKED[0] == 0:\n"
                  "                _block = bytearray(200 << 20)\n"
                  "                for _i in range(0, len(_block), 4096):\n"
                  "                    _block[_i] = 1\n"
                  "                _os.write(_ready_write, b'y')\n"
                  "                _time.sleep(120)\n"
                  "                _os._exit(0)\n"
                  "            _os.read(_ready_read, 1)\n"
                  "            _time.sleep(0.5)\n",
                  text, count=1, flags=re.MULTILINE)


@pytest.mark.parametrize("reading", ["the tree", "the worker alone"])
def test_the_memory_cross_check_reads_the_whole_tree(reading, tmp_path, monkeypatch):
    from dezero_mini.contracts import sandbox

    if reading == "the worker alone":  # as the checker read it before: one process
        monkeypatch.setattr(sandbox.Worker, "memory",
                            lambda self: sandbox.resident_bytes(self.pid) if self.pid else None)
    path = tmp_path / FILE_NAME
    path.write_text(memory_in_a_child(tmp_path))
    report = check_file(3, path, batches=20, names=["traced_bytes_flat"])
    (result,) = report.results
    if reading == "the worker alone":
        assert result.passed, result
        return
    assert not result.passed and result.error == "contradiction", result
    # Either contradiction: the rise above its lowest point, or the stage's budget
    # (which of the two the checker meets first depends on when it samples).
    assert re.search(r"while its RSS (grew|reached) (\d+) MiB", result.measured), result.measured
