"""The process sandbox of the checker: start a worker contained, end it whole.

A learner's file runs in a worker process that the checker must be able to
stop, whatever the file does. ``start_worker(..., sandboxed=True)`` starts
it in bubblewrap's sandbox (``bubblewrap.sandbox_command``: namespaces of
its own, a read-only file system, a throwaway uid), its whole process tree
in a memory cgroup where one can be made (``cgroup.MemoryCgroup``), and one
of the processor's (``cgroup.CpuCgroup``: one share, one processor at most), under
the limits below; ``end_worker`` kills the sandbox's PID namespace. Where
bubblewrap cannot run, ``start_worker`` starts it

* in Python's isolated mode (``-I``: neither the current folder nor any
  ``PYTHON*`` variable reaches ``sys.path``); the folder that holds the
  package ``dezero_mini`` is passed explicitly (``bootstrap_code``), never the
  submission's folder;
* in a fresh scratch folder (its working folder, ``HOME`` and ``TMPDIR``),
  removed afterwards;
* with an environment reduced to a whitelist (``worker_environment``): no
  variable of the grader's (a token, a password) reaches the learner's code;
* in a session of its own, so that ``end_worker`` can kill its whole process
  group, and then every descendant that left the group (found through
  ``/proc``: the checker is made a *child subreaper*, so that an orphaned
  grandchild is reparented to it rather than to init);
* under resource limits (``Limits``: address space, CPU seconds, file size,
  processes), whose breach ``describe_limit`` puts in words;
* cut off from the network (Linux): in a network namespace of its own, whose
  only interface, loopback, is down, where the kernel allows it
  (``_leave_the_network``; ``network_can_be_cut`` says whether it does here).
"""
import ctypes
import itertools
import json
import os
import resource
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

MIB = 1024 * 1024

#: Environment variables that reach the worker unchanged (``LC_*`` too).
#: Nothing else of the grader's environment does.
ENVIRONMENT_WHITELIST = ("PATH", "LANG", "LANGUAGE", "TZ")
#: Set in the worker's environment: NumPy's BLAS on one thread. The contracts'
#: products are small (256 x 32 x 32 in the standard workload, 256 x 256 x 256
#: at most), too small to share; OpenBLAS's extra threads spin while they wait
#: for work, and took 3 times the CPU of one thread over stage 05's inference
#: contract (0.33 against 0.11 s, 2026-11-28, load 22); two checks at once
#: (``progress``, ``grade --jobs 2``) would each have them spin on the other's core.
SINGLE_THREADED_BLAS = {"OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1",
                        "MKL_NUM_THREADS": "1"}


@dataclass(frozen=True)
class Limits:
    """Resource limits of one worker process (``resource.setrlimit``).

    The defaults are far above what the course's own stages reach (their
    measured peaks are in docs/classroom.md): a correct stage never meets them.
    """

    #: Address space (virtual memory) in MiB. The worker of a reference stage
    #: peaks at 372 MiB of address space (stages 01-02, whose graphs leak;
    #: 193-210 MiB from stage 03 on) and 237 MiB resident, at the default batches.
    memory_mib: int = 2048
    #: CPU seconds of the worker (all its threads): a backstop behind the
    #: wall-clock deadline, which a busy multi-threaded loop could outrun.
    cpu_seconds: int = 600
    #: The largest file the worker may write, in MiB.
    file_size_mib: int = 64
    #: Processes and threads that the worker may start beyond those its user
    #: already runs. RLIMIT_NPROC counts all the tasks of a user, and the
    #: kernel does not apply it to root (measured: root forks under a limit of
    #: 1): grade as an ordinary user for it to hold.
    extra_processes: int = 64
    #: Processors' worth of time that the worker's whole tree may take, in
    #: the sandbox where a cgroup can be made (``cgroup.CpuCgroup``): the worker
    #: runs one thread (BLAS on one too), and a tree of busy processes cannot
    #: take the processors of a classmate's check graded beside it.
    processors: float = 1.0


def _user_task_count():
    """How many tasks (processes and threads) the current user runs: what
    RLIMIT_NPROC compares with. 0 where /proc is not readable."""
    uid, count = os.getuid(), 0
    try:
        entries = os.listdir("/proc")
    except OSError:
        return 0
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/status") as status:
                fields = dict(line.split(":", 1) for line in status if ":" in line)
        except (OSError, ValueError):
            continue
        if int(fields.get("Uid", "-1").split()[0]) == uid:
            count += int(fields.get("Threads", "1"))
    return count


def _set_limits(limits, processes):
    """Run in the child between fork and exec (``preexec_fn``)."""
    def cap(which, soft, hard=None):
        hard = soft if hard is None else hard
        _, current_hard = resource.getrlimit(which)
        if current_hard != resource.RLIM_INFINITY:
            soft, hard = min(soft, current_hard), min(hard, current_hard)
        resource.setrlimit(which, (soft, hard))

    cap(resource.RLIMIT_AS, limits.memory_mib * MIB)
    # SIGXCPU at the soft limit (the report names it), SIGKILL 5 s later.
    cap(resource.RLIMIT_CPU, limits.cpu_seconds, limits.cpu_seconds + 5)
    cap(resource.RLIMIT_FSIZE, limits.file_size_mib * MIB)
    cap(resource.RLIMIT_CORE, 0)
    if processes:
        cap(resource.RLIMIT_NPROC, processes)


# --- Cutting the worker off the network ---------------------------------------------------
_CLONE_NEWUSER, _CLONE_NEWNET = 0x10000000, 0x40000000  # unshare(2)'s flags
_PR_CAPBSET_DROP, _CAP_SYS_ADMIN = 24, 21  # prctl(2)'s operation, and the capability


def _namespace_calls():
    """``(unshare, drop_admin)`` through libc, or None where there is none:
    ``unshare(flags)``, and ``drop_admin()``, which takes ``CAP_SYS_ADMIN``
    out of the bounding set (root after exec then lacks it, and cannot join
    the machine's network namespace again with ``setns``). Looked up here in
    the checker: loading a library in a child between fork and exec could
    deadlock on a lock that another thread held at the fork."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        unshare, prctl = libc.unshare, libc.prctl
    except (OSError, AttributeError):
        return None
    unshare.argtypes, unshare.restype = [ctypes.c_int], ctypes.c_int
    prctl.restype = ctypes.c_int
    return unshare, lambda: prctl(_PR_CAPBSET_DROP, _CAP_SYS_ADMIN, 0, 0, 0)


def _write_proc(path, text):
    fd = os.open(path, os.O_WRONLY)
    try:
        os.write(fd, text.encode())
    finally:
        os.close(fd)


def _leave_the_network(calls, uid, gid):
    """Run in the child between fork and exec: move it into a network
    namespace of its own, which has one interface, loopback, and that one
    down, so that no address, remote or local (127.0.0.1), can be reached.
    Root does it directly, then drops ``CAP_SYS_ADMIN``; an ordinary user
    (or a root that cannot drop it) does it in a user namespace of
    its own that maps its user and group to themselves, so that the worker
    stays who it was for its files and its limits (it gains no power outside
    the namespace). Returns whether the network is cut: a kernel that refuses
    both (a container without the capability, user namespaces switched off)
    leaves the worker on the network, as without this."""
    if calls is None:  # ``_namespace_calls()``: (unshare, drop_admin)
        return False
    unshare, drop_admin = calls
    if unshare(_CLONE_NEWNET) == 0 and drop_admin() == 0:
        return True
    if unshare(_CLONE_NEWUSER | _CLONE_NEWNET) != 0:  # a namespace that setns cannot leave
        return False
    try:  # without the maps the worker would see itself as nobody (65534)
        _write_proc("/proc/self/setgroups", "deny")  # the kernel asks it before gid_map
        _write_proc("/proc/self/uid_map", f"{uid} {uid} 1")
        _write_proc("/proc/self/gid_map", f"{gid} {gid} 1")
    except OSError:
        pass
    return True


def network_can_be_cut():
    """Whether the checker can cut a worker off the network on this machine,
    as this user: a child is started the way a worker is, and says whether its
    network namespace is another than the checker's."""
    calls = _namespace_calls()
    try:
        mine = os.readlink("/proc/self/ns/net")
    except OSError:
        return False
    uid, gid = os.getuid(), os.getgid()
    done = subprocess.run(
        [sys.executable, "-I", "-c", "import os, sys; sys.exit(os.readlink('/proc/self/ns/net') == sys.argv[1])",
         mine], preexec_fn=lambda: _leave_the_network(calls, uid, gid), capture_output=True)
    return done.returncode == 0


def describe_limit(limits, return_code=None, text="", memory_killed=False):
    """The limit that a worker met, in words, or None. ``return_code``: the
    worker's (``-signal`` when a signal killed it); ``text``: what it printed
    or raised (a MemoryError when it could not get memory); ``memory_killed``:
    the kernel killed a process of its cgroup for the memory limit."""
    if memory_killed:
        return (f"the file's processes used more than {limits.memory_mib} MiB of memory "
                "together (the limit of the whole sandbox)")
    if return_code == -signal.SIGXCPU or (return_code == -signal.SIGKILL and "SIGXCPU" in text):
        return f"the file used more than {limits.cpu_seconds} s of CPU time (the limit)"
    # (Python ignores SIGXFSZ: the write raises OSError EFBIG instead.)
    if return_code == -signal.SIGXFSZ or "File too large" in text:
        return f"the file wrote a file larger than {limits.file_size_mib} MiB (the limit)"
    if "MemoryError" in text or "Unable to allocate" in text:
        return (f"the file used more than {limits.memory_mib} MiB of memory "
                "(the limit of the checker's address space)")
    if "can't start new thread" in text or "Resource temporarily unavailable" in text:
        return f"the file started more than {limits.extra_processes} processes or threads (the limit)"
    return None


def package_parent():
    """The folder that holds the package ``dezero_mini`` (the worker imports
    it from there, and from nowhere the submission could reach)."""
    return str(Path(__file__).resolve().parents[2])


def bootstrap_code(module):
    """The ``-c`` program of an isolated worker: put the package's folder
    first on ``sys.path`` (``sys.argv[1]``), then run ``module``'s ``main``
    on the remaining arguments."""
    return ("import sys; sys.path.insert(0, sys.argv.pop(1)); "
            f"from {module} import main; sys.exit(main(sys.argv[1:]))")


def worker_environment(scratch):
    """The worker's environment: the whitelisted variables, ``LC_*``,
    ``HOME``/``TMPDIR`` in the scratch folder, and ``SINGLE_THREADED_BLAS``.
    The folder of the course's step files is passed resolved (stage 04's
    contracts load stage 03)."""
    from dezero_mini.memory.stages import steps_dir

    env = {name: value for name, value in os.environ.items()
           if name in ENVIRONMENT_WHITELIST or name.startswith("LC_")}
    env.setdefault("PATH", os.defpath)
    env.update(HOME=scratch, TMPDIR=scratch, DEZERO_MINI_STEPS=str(steps_dir()))
    env.update(SINGLE_THREADED_BLAS)
    return env


# --- Killing a worker whole --------------------------------------------------------------
_PR_SET_CHILD_SUBREAPER = 36
_live_workers = set()  # pids of workers that a check still runs (several threads may grade)
_lock = threading.Lock()


def _become_subreaper():
    """Make this process the reaper of its orphaned descendants (Linux), so
    that a grandchild whose parent exits is reparented here, where
    ``end_worker`` finds it, instead of to init. Returns whether it worked."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


_subreaper = []  # [whether it worked], once the first worker starts


def _process_table():
    """{pid: (parent pid, process group, state)} of every process, from /proc."""
    table = {}
    try:
        entries = os.listdir("/proc")
    except OSError:
        return table
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as stat:
                text = stat.read()
        except OSError:
            continue
        # "pid (command) state ppid pgrp ...": the command may hold spaces and ")"
        fields = text[text.rfind(")") + 2:].split()
        table[int(entry)] = (int(fields[1]), int(fields[2]), fields[0])
    return table


def _worker_processes(root, table):
    """The worker ``root``, its descendants, and our orphaned children that
    left our process group (descendants of a worker that escaped its group
    and whose parent died: only a worker's descendants get there)."""
    me, my_group = os.getpid(), os.getpgrp()
    with _lock:
        others = _live_workers - {root}
    found = {root} if root in table else set()
    found |= {pid for pid, (parent, group, _) in table.items()
              if parent == me and group != my_group and pid not in others}
    children = {}
    for pid, (parent, _, _) in table.items():
        children.setdefault(parent, []).append(pid)
    stack = list(found)
    while stack:
        for child in children.get(stack.pop(), ()):
            if child not in found and child not in others:
                found.add(child)
                stack.append(child)
    return found


def _kill(pid):
    try:
        os.kill(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _reap(pid):
    """Collect a dead child of ours (an orphan reparented to us)."""
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        pass


class Worker:
    """A started worker: ``process`` (the ``Popen`` that this checker
    waits for: bwrap in the sandbox, the worker itself without), ``pid``
    (the worker's, for SIGUSR1), ``sandboxed``, ``cgroup`` (a
    ``MemoryCgroup`` or None), ``cpu_cgroup`` (a ``CpuCgroup`` or None:
    cgroup v1's processor share) and ``scratch`` (its folder on the machine,
    without the sandbox; in it, a private /tmp). In the sandbox, ``root``
    is the PID namespace's init (bwrap's), whose death ends every process
    of the namespace, and the worker is the namespace's pid 2. ``stdin``
    and ``stdout`` are the process's pipes."""

    #: Seconds between two searches of /proc for the tree's processes (without a cgroup).
    TREE_EVERY = 1.0

    def __init__(self, process, root, *, sandboxed, cgroup=None, scratch=None, cpu_cgroup=None):
        self.process, self.root, self.sandboxed = process, root, sandboxed
        self.cgroup, self.scratch, self.cpu_cgroup = cgroup, scratch, cpu_cgroup
        self.stdin, self.stdout = process.stdin, process.stdout
        self._pid = None if sandboxed else root
        self._tree, self._tree_read_at = {root}, 0.0
        self._memory_kills = None  # read from the cgroup before it is removed

    @property
    def pid(self):
        """The worker's pid as this checker sees it, or None (not yet
        started, or ended)."""
        if self._pid is None:
            for pid in sorted(self.processes(force=True)):
                if _namespace_pid(pid) == 2:  # bwrap's init forks the command first
                    self._pid = pid
                    break
        return self._pid

    def processes(self, force=False):
        """The pids of the worker's tree: the cgroup's, else the tree's root
        and its descendants as /proc showed them at most ``TREE_EVERY`` ago
        (``force``: now)."""
        if self.cgroup is not None:
            return self.cgroup.processes()
        now = time.monotonic()
        if force or now - self._tree_read_at >= self.TREE_EVERY:
            self._tree_read_at = now
            table = _process_table()
            self._tree = _worker_processes(self.root, table) if self.root in table else set()
        return self._tree

    def memory(self):
        """The memory of the whole tree, in bytes, or None: the sum of its
        processes' resident sizes, and in the sandbox the bytes of the files
        in its private ``/tmp``, which is memory (a tmpfs) that no process's
        resident size shows: a file that kept 1 MiB a batch there passed the
        flat-memory cross-check. (Not the cgroup's charge, which bounds the
        tree but also counts the page cache of every file it reads: the
        stages' memory budgets are resident sizes.)"""
        pids = self.cgroup.processes() if self.cgroup is not None else self.processes()
        sizes = [size for size in map(resident_bytes, pids) if size is not None]
        if not sizes:
            return None
        return sum(sizes) + (self.scratch_memory() or 0)

    def scratch_memory(self):
        """The bytes used in the sandbox's private ``/tmp`` (a tmpfs), read
        through the sandbox's root as ``/proc`` shows it; None without the
        sandbox (its scratch folder is on a disk) or once it has ended."""
        if not self.sandboxed:
            return None
        from dezero_mini.contracts.bubblewrap import SANDBOX_HOME

        try:
            usage = os.statvfs(f"/proc/{self.root}/root{SANDBOX_HOME}")
        except OSError:
            return None
        return (usage.f_blocks - usage.f_bfree) * usage.f_frsize

    def memory_killed(self):
        """Whether the kernel killed a process of the tree for its cgroup's limit
        (as the cgroup said when ``end_worker`` removed it, once it has)."""
        if self._memory_kills is not None:
            return self._memory_kills > 0
        return self.cgroup is not None and self.cgroup.memory_kills() > 0


def _status_field(pid, name):
    """The words of the field ``name`` (``"VmRSS"``) of ``/proc/PID/status``,
    or None where the process or the field is gone."""
    try:
        with open(f"/proc/{pid}/status") as status:
            for line in status:
                if line.startswith(name + ":"):
                    return line.split()[1:]
    except OSError:
        pass
    return None


def resident_bytes(pid):
    """The resident memory of process ``pid`` (``VmRSS`` in /proc), or None."""
    words = _status_field(pid, "VmRSS")
    return int(words[0]) * 1024 if words and words[0].isdigit() else None


def _namespace_pid(pid):
    """The pid that process ``pid`` has in its own PID namespace (the last
    field of ``NSpid`` in /proc), or None."""
    words = _status_field(pid, "NSpid")
    return int(words[-1]) if words and words[-1].isdigit() else None


def end_worker(worker, grace=0.0):
    """Kill ``worker`` (a ``Worker``) and every process it started, and
    return its exit code (``-signal`` when a signal ended it; None when it
    could not be known). In the sandbox that is killing the PID namespace's
    init: the kernel ends every process of the namespace with it; ``grace``:
    seconds that the worker is given to end on its own first (bwrap then
    says how it ended). Without the sandbox, its process group and every
    descendant found in /proc, at once."""
    if not worker.sandboxed:
        code = _end_unsandboxed(worker.process)
    else:
        process = worker.process
        if grace and process.poll() is None:
            try:
                process.wait(timeout=grace)
            except subprocess.TimeoutExpired:
                pass
        _kill(worker.root)  # the namespace's init: every process in it dies with it
        try:
            os.killpg(process.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        for each in (worker.cgroup, worker.cpu_cgroup):
            for pid in each.processes() if each is not None else ():
                _kill(pid)
        try:
            code = process.wait(timeout=10)
        except subprocess.TimeoutExpired:  # unkillable (a process in the kernel): give up on it
            code = None
        if code is not None and code > 128:  # bwrap's exit code for a worker a signal killed
            code = 128 - code
    if worker.cgroup is not None:
        worker._memory_kills = worker.cgroup.memory_kills()  # (its files go with it)
        worker.cgroup.remove()
    if worker.cpu_cgroup is not None:
        worker.cpu_cgroup.remove()
    if worker.scratch is not None:
        remove_scratch(worker.scratch)
    return code


def _end_unsandboxed(process):
    """Kill the worker ``process`` (a ``Popen``), its process group and every
    descendant, reap those that were reparented to us, and return its exit
    code. Rounds repeat until a round finds no process left: a process that
    forks while it is killed leaves children that the next round finds."""
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    me = os.getpid()
    for _ in range(100):
        table = _process_table()
        found = _worker_processes(process.pid, table) - {process.pid}
        alive = [pid for pid in found if table[pid][2] != "Z"]
        for pid in found:
            _kill(pid)
            if table[pid][0] == me:
                _reap(pid)
        if not alive:
            break
        time.sleep(0.01)
    with _lock:
        _live_workers.discard(process.pid)
    try:
        return process.wait(timeout=10)
    except subprocess.TimeoutExpired:  # unkillable (a process in the kernel): give up on it
        return None


def start_worker(module, arguments, *, limits, pass_fds=(), sandboxed=False, readable=()):
    """Start ``python -I -c <bootstrap> PACKAGE_PARENT ARGUMENTS`` contained
    and return its ``Worker``: standard input a pipe, standard output and
    error one pipe. ``sandboxed``: in bubblewrap's sandbox
    (``bubblewrap.sandbox_command``), which sees only ``readable`` (the files
    it may read beyond Python and the package), with its memory counted in a
    cgroup where one can be made; else contained as the module's docstring
    says, in a scratch folder of its own."""
    worker_argv = [sys.executable, "-I", "-u", "-X", "faulthandler", "-c", bootstrap_code(module),
                   package_parent(), *arguments]
    if sandboxed:
        return _start_sandboxed(worker_argv, limits, pass_fds, readable)
    scratch = make_scratch()
    processes = _user_task_count() + limits.extra_processes if limits.extra_processes else 0
    calls, uid, gid = _namespace_calls(), os.getuid(), os.getgid()

    def contain():  # in the child, between fork and exec
        _leave_the_network(calls, uid, gid)
        _set_limits(limits, processes)

    try:
        with _lock:
            if not _subreaper:
                _subreaper.append(sys.platform.startswith("linux") and _become_subreaper())
            process = subprocess.Popen(
                worker_argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT, cwd=scratch, env=worker_environment(scratch),
                start_new_session=True, pass_fds=pass_fds, preexec_fn=contain)
            _live_workers.add(process.pid)
    except BaseException:
        remove_scratch(scratch)
        raise
    return Worker(process, process.pid, sandboxed=False, scratch=scratch)


#: Seconds that bwrap may take to set the sandbox up and name the worker.
SANDBOX_START_TIMEOUT = 30.0


def _start_sandboxed(worker_argv, limits, pass_fds, readable):
    from dezero_mini.contracts.bubblewrap import SANDBOX_HOME, namespace_filter_fd, sandbox_command
    from dezero_mini.contracts.cgroup import CpuCgroup, MemoryCgroup

    as_root = os.geteuid() == 0
    # Root's worker runs as a uid of its own: RLIMIT_NPROC counts its tasks only.
    processes = limits.extra_processes if as_root else (
        _user_task_count() + limits.extra_processes if limits.extra_processes else 0)
    name = f"dezero_mini_worker_{os.getpid()}_{next(_cgroup_numbers)}"
    cgroup = MemoryCgroup.create(limits.memory_mib * MIB, name, processors=limits.processors)
    cpu_cgroup = CpuCgroup.create(limits.processors, name)
    info_read, info_write = os.pipe()
    seccomp_fd = namespace_filter_fd()
    command = sandbox_command(worker_argv, readable=sandbox_readable(readable),
                              info_fd=info_write, as_root=as_root, seccomp_fd=seccomp_fd,
                              tmp_bytes=None if cgroup else limits.file_size_mib * MIB * 4)
    sent = (info_write,) if seccomp_fd is None else (info_write, seccomp_fd)

    def contain():  # in the child, between fork and exec
        for each in (cgroup, cpu_cgroup):
            if each is not None:
                each.enter()
        _set_limits(limits, processes)

    try:
        process = subprocess.Popen(
            command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            cwd="/", env=worker_environment(SANDBOX_HOME), start_new_session=True,
            pass_fds=(*pass_fds, *sent), preexec_fn=contain)
    except BaseException:
        os.close(info_read)
        for each in (cgroup, cpu_cgroup):
            if each is not None:
                each.remove()
        raise
    finally:
        for fd in sent:
            os.close(fd)
    # Without a pid (bwrap failed before it made the namespace; what it said
    # is the output), the tree's root is bwrap itself.
    return Worker(process, _namespace_init_pid(info_read) or process.pid, sandboxed=True,
                  cgroup=cgroup, cpu_cgroup=cpu_cgroup)


_cgroup_numbers = itertools.count()


def _namespace_init_pid(info_read):
    """The pid (outside the sandbox) of the PID namespace's init, from
    bwrap's ``--info-fd`` (JSON, ``child-pid``), or None when bwrap ended
    without one."""
    text, deadline = b"", time.monotonic() + SANDBOX_START_TIMEOUT
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([info_read], [], [], deadline - time.monotonic())
            if not ready:
                break
            data = os.read(info_read, 4096)
            if not data:
                break
            text += data
            try:
                return int(json.loads(text)["child-pid"])
            except (ValueError, KeyError, TypeError):
                continue
    finally:
        os.close(info_read)
    return None


#: Run in the sandbox by ``writable_in_sandbox``: for each path of its
#: arguments, the place that stands for it there (the path, else its nearest
#: folder that exists there), that place's device and inode, and whether its
#: mount is read-only (a place that cannot be read is as good as read-only).
_WRITABLE_PROBE = """
import json, os, sys
found = []
for path in sys.argv[1:]:
    place = path
    while not os.path.lexists(place) and place != os.path.dirname(place):
        place = os.path.dirname(place)
    try:
        info, mount = os.stat(place), os.statvfs(place)
        found.append([path, place, info.st_dev, info.st_ino, bool(mount.f_flag & os.ST_RDONLY)])
    except OSError:
        found.append([path, place, None, None, True])
print(json.dumps(found))
"""


def writable_in_sandbox(paths, readable):
    """Those of ``paths`` (files of the machine) that a worker in bubblewrap's
    sandbox that sees ``readable`` (``start_worker``) could write or create:
    the ones whose place in the sandbox (the path, else its nearest folder
    that exists there) is the machine's own file (the same device and inode)
    on a mount that is not read-only. A path the sandbox does not show leads
    to its private ``/tmp`` or its root, never to the machine. ``[]`` when
    it can write none of them; None when the sandbox could not say (it did
    not run: then nobody knows).

    Asked of a sandbox built as the worker's was, after the check: only when
    the installation changed, so a check costs nothing more otherwise."""
    from dezero_mini.contracts.bubblewrap import run_sandboxed

    paths = [str(path) for path in paths]
    try:
        done = run_sandboxed([sys.executable, "-I", "-S", "-c", _WRITABLE_PROBE, *paths],
                             readable=sandbox_readable(readable))
        found = json.loads(done.stdout) if done.returncode == 0 else None
    except (OSError, subprocess.TimeoutExpired, ValueError):
        return None
    if not isinstance(found, list) or [row[0] for row in found] != paths:
        return None
    writable = []
    for path, place, device, inode, read_only in found:
        try:
            here = os.stat(place)
        except OSError:
            continue  # (no such place on the machine: the sandbox's own)
        if not read_only and (here.st_dev, here.st_ino) == (device, inode):
            writable.append(path)
    return writable


def sandbox_readable(readable):
    """What a sandboxed worker sees beyond the system and Python: the
    package's folder and ``readable`` (``bubblewrap.sandbox_command``)."""
    return [package_folder(), *readable]


def package_folder():
    """The folder of the package ``dezero_mini`` itself."""
    return str(Path(__file__).resolve().parents[1])


def make_scratch():
    """A fresh private folder for one worker: its working folder, HOME, TMPDIR."""
    return tempfile.mkdtemp(prefix="dezero_mini_check_")


def remove_scratch(folder):
    shutil.rmtree(folder, ignore_errors=True)
