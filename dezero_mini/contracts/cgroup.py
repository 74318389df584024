"""A memory cgroup for one worker's whole process tree, where the machine gives one.

RLIMIT_AS bounds each process; a tree of processes escapes it (three
processes held 3.6 GB under a 2 GiB limit). ``MemoryCgroup.create(limit)``
makes a child of the checker's own memory cgroup (cgroup v1's ``memory``
hierarchy, or the unified v2 one) with the limit, into which ``enter()``,
run in the child between fork and exec, moves the sandbox: every process it
starts is counted together, and the kernel's OOM killer ends the tree when
it goes beyond. ``usage()`` is the memory charged to it (what the limit is
compared with); ``processes()`` its pids. Where the checker may not make
one (an ordinary user without a delegated cgroup, macOS), ``create`` returns
None and each process keeps only its own limit.
"""
import os
import time
from pathlib import Path

ROOT = Path("/sys/fs/cgroup")


def _own_path(controller):
    """The checker's cgroup in the hierarchy of ``controller`` ("memory" or
    "cpu" for v1, a hierarchy that may hold others with it, such as
    "cpu,cpuacct"; "" for the unified v2 hierarchy), from /proc/self/cgroup,
    or None."""
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if controller in controllers.split(",") if controller else controllers == "":
            return path
    return None


#: The scheduler's period (microseconds) over which a cgroup's processor quota counts.
CPU_PERIOD_US = 100_000


def _cpu_max(processors):
    """cgroup v2's ``cpu.max`` for ``processors`` processors' worth of time."""
    return f"{int(processors * CPU_PERIOD_US)} {CPU_PERIOD_US}"


class MemoryCgroup:
    """One cgroup that holds one sandbox (see the module's docstring)."""

    def __init__(self, folder, version):
        self.folder, self.version = folder, version
        self._procs = str(folder / "cgroup.procs")

    @classmethod
    def create(cls, limit_bytes, name, processors=None):
        """A new cgroup named ``name`` under the checker's own, limited to
        ``limit_bytes`` of memory (swap included), or None where none can
        be made here. ``processors``: in cgroup v2, where the checker's
        cgroup hands its children the cpu controller, also at most so many
        processors' worth of time (v1 has a hierarchy of its own for that:
        ``CpuCgroup``)."""
        for version, top, controller in ((1, ROOT / "memory", "memory"), (2, ROOT, ""),
                                         (2, ROOT / "unified", "")):
            own = _own_path(controller)
            marker = "memory.limit_in_bytes" if version == 1 else "cgroup.controllers"
            if own is None or not (top / own.lstrip("/") / marker).exists():
                continue
            folder = top / own.lstrip("/") / name
            try:
                folder.mkdir()
            except OSError:
                continue
            made = cls(folder, version)
            try:
                if version == 1:
                    made._write("memory.limit_in_bytes", limit_bytes)
                    made._write("memory.memsw.limit_in_bytes", limit_bytes, missing_ok=True)
                else:
                    made._write("memory.max", limit_bytes)
                    made._write("memory.swap.max", 0, missing_ok=True)
                    if processors:
                        made._write("cpu.max", _cpu_max(processors), missing_ok=True)
            except OSError:
                made.remove()
                continue
            return made
        return None

    def _write(self, name, value, missing_ok=False):
        try:
            (self.folder / name).write_text(str(value))
        except FileNotFoundError:
            if not missing_ok:
                raise

    def _read(self, name):
        try:
            return (self.folder / name).read_text()
        except OSError:
            return ""

    def enter(self):
        """Move the calling process into the cgroup (run between fork and
        exec: plain system calls, no allocation of Python's that a lock held
        at the fork could block)."""
        fd = os.open(self._procs, os.O_WRONLY)
        try:
            os.write(fd, b"%d" % os.getpid())
        finally:
            os.close(fd)

    def usage(self):
        """Bytes of memory charged to the cgroup now, or None."""
        text = self._read("memory.usage_in_bytes" if self.version == 1 else "memory.current")
        return int(text) if text.strip().isdigit() else None

    def processes(self):
        """The pids in the cgroup."""
        return [int(pid) for pid in self._read("cgroup.procs").split() if pid.isdigit()]

    def memory_kills(self):
        """How many processes the kernel killed for the cgroup's limit."""
        text = self._read("memory.oom_control" if self.version == 1 else "memory.events")
        for line in text.splitlines():
            key, _, value = line.partition(" ")
            if key == "oom_kill" and value.strip().isdigit():
                return int(value)
        return 0

    def remove(self, wait=2.0):
        """Remove the cgroup once its processes are gone (they may take a
        moment to leave it after they are killed)."""
        deadline = time.monotonic() + wait
        while True:
            try:
                self.folder.rmdir()
                return
            except FileNotFoundError:
                return
            except OSError:
                if time.monotonic() > deadline:
                    return
                time.sleep(0.01)


class CpuCgroup:
    """One cgroup of cgroup v1's ``cpu`` hierarchy that holds one sandbox.

    The scheduler shares the processors between cgroups, and between the
    sessions of the cgroup at the top (its *autogroups*): without one, a
    submission that started 60 busy processes, each in a session of its
    own (``setsid``), held 60 shares against a classmate's check's one, and
    made it take four times as long under ``grade --jobs 2`` (until its time
    limit ran out, on a larger stage). In a cgroup of its own, the whole
    tree counts once, and gets at most ``processors`` processors' worth of
    time (a worker runs one thread of Python and NumPy's one of BLAS).
    """

    def __init__(self, folder):
        self.folder = folder

    @classmethod
    def create(cls, processors, name):
        """A new cgroup named ``name`` under the checker's own in the ``cpu``
        hierarchy, with a quota of ``processors`` processors, or None where
        none can be made here (no v1 ``cpu`` hierarchy: cgroup v2 sets it on
        the ``MemoryCgroup``; an ordinary user)."""
        own = _own_path("cpu")
        top = ROOT / "cpu"
        if own is None or not (top / own.lstrip("/") / "cpu.cfs_quota_us").exists():
            return None
        folder = top / own.lstrip("/") / name
        try:
            folder.mkdir()
        except OSError:
            return None
        made = cls(folder)
        try:
            (folder / "cpu.cfs_period_us").write_text(str(CPU_PERIOD_US))
            (folder / "cpu.cfs_quota_us").write_text(str(int(processors * CPU_PERIOD_US)))
        except OSError:
            made.remove()
            return None
        return made

    def enter(self):
        """Move the calling process into the cgroup (between fork and exec,
        as ``MemoryCgroup.enter``)."""
        fd = os.open(str(self.folder / "cgroup.procs"), os.O_WRONLY)
        try:
            os.write(fd, b"%d" % os.getpid())
        finally:
            os.close(fd)

    def processes(self):
        """The pids in the cgroup."""
        try:
            text = (self.folder / "cgroup.procs").read_text()
        except OSError:
            return []
        return [int(pid) for pid in text.split() if pid.isdigit()]

    remove = MemoryCgroup.remove
