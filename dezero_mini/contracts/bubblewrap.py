"""The worker's sandbox on Linux: a bubblewrap (``bwrap``) command line.

``sandbox_command(argv, ...)`` wraps a worker's command so that it runs

* in new user (as an ordinary user), PID, mount, IPC, UTS and network
  namespaces: it sees no process of the machine's, no socket (a file-system
  socket needs its file, an abstract one its network namespace), no file
  but those bound below;
* on a file system of its own, read-only: the Python installation
  (``sys.base_prefix``, the virtual environment), the folder of the
  package ``dezero_mini`` (the package only, not the repository around it),
  the step files of the stages *before* the one graded (stage 04's contracts
  load stage 03's; the stage's own reference and later ones stay out of
  sight), the few files of ``/etc`` that the C library reads, and the
  learner's ONE file at its own path (tracebacks then name it as the
  learner knows it), nothing else of its folder; a fresh ``/proc`` and
  ``/dev``; a private, empty ``/tmp``, its working folder, ``HOME`` and
  ``TMPDIR``;
* as a throwaway user that owns nothing: as root, the command drops to
  ``throwaway_uid()`` (``setpriv``) before Python starts; as an ordinary
  user, its own uid maps into the user namespace, where it owns nothing of
  the machine's;
* unable to make a user namespace (``namespace_filter``, a seccomp filter
  that bwrap loads before the command starts; and ``--disable-userns`` where
  bwrap makes one itself): in a namespace of its own the throwaway user
  would have every capability again, and could mount, chroot or join
  another's namespace with them; the same filter refuses the kernel's
  keyrings, which no namespace covers (a key outlived its sandbox, for the
  next check to read), and io_uring;
* killed whole: bwrap's init is the PID namespace's pid 1 (the worker is its
  pid 2), and its death, or bwrap's (``--die-with-parent``), ends every
  process in the namespace.

``sandbox_problem()`` says why bubblewrap cannot run here (missing, or a
kernel that refuses namespaces), or None.
"""
import functools
import itertools
import os
import platform
import shutil
import struct
import subprocess
import sys
from pathlib import Path

#: Where the throwaway uids start: far above the uids that systems hand out
#: (at most 60,000 or so for people, 65,534 for nobody), below 2**31 (bwrap
#: writes its uid maps as signed integers). The pid of the checker is added,
#: so that two checks never share one: RLIMIT_NPROC then counts exactly one
#: worker's processes, and no worker can signal another's.
THROWAWAY_UID_BASE = 2_000_000_000
_PID_BITS = 22  # the kernel's largest pid_max is 2**22
_worker_numbers = itertools.count()

#: Inside the sandbox: the working folder, HOME and TMPDIR (a private tmpfs).
SANDBOX_HOME = "/tmp"
#: The files of /etc that the C library and Python read, where they exist.
ETC_FILES = ("/etc/ld.so.cache", "/etc/localtime")
#: The top folders of a usr-merged or classic system: symlinks are copied,
#: folders bound read-only.
SYSTEM_FOLDERS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")


def _program(name):
    """The program ``name`` on PATH or in /usr/bin, or None."""
    fallback = f"/usr/bin/{name}"
    return shutil.which(name) or (fallback if os.access(fallback, os.X_OK) else None)


def bwrap_path():
    """The ``bwrap`` program, or None."""
    return _program("bwrap")


@functools.lru_cache(maxsize=None)
def _bwrap_help():
    """What ``bwrap --help`` prints (its options differ between versions)."""
    try:
        done = subprocess.run([bwrap_path() or "bwrap", "--help"], capture_output=True, text=True,
                              timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return done.stdout + done.stderr


def setpriv_path():
    """util-linux's ``setpriv``, which drops root's rights in the sandbox, or None."""
    return _program("setpriv")


def throwaway_uid():
    """A uid that no file and no process of the machine has: the base, the
    checker's pid and a count of its workers (one runs at a time)."""
    worker = (os.getpid() << 4) | (next(_worker_numbers) & 15)
    return THROWAWAY_UID_BASE + worker % (1 << (_PID_BITS + 4))


def python_folders():
    """The folders of the running Python: its installation, the virtual
    environment, and the folder of the real executable."""
    folders = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix,
               str(Path(sys.executable).resolve().parent.parent)}
    resolved = {str(Path(folder).resolve()) for folder in folders if folder}
    return sorted(resolved - {"/"})  # (a Python in /bin would otherwise show the whole machine)


def visible_step_files(stage, steps_folder):
    """The course's step files that a check of ``stage`` may see: those of
    the stages before it (a later stage's reference is an answer key)."""
    from dezero_mini.memory.stages import _STEP_FILE

    found = []
    for path in sorted(Path(steps_folder).glob("step*_*.py")):
        match = _STEP_FILE.match(path.name)
        if match and int(match.group(1)) < stage:
            found.append(str(path.resolve()))
    return found


def _parents(path):
    """The folders above ``path``, from the top (``/a``, ``/a/b`` for ``/a/b/c``)."""
    parts = Path(path).parts[1:-1]
    return ["/" + "/".join(parts[:end]) for end in range(1, len(parts) + 1)]


def _within(path, folders):
    return any(path == folder or path.startswith(folder.rstrip("/") + "/") for folder in folders)


# --- No user namespace, no shared kernel state: a seccomp filter -------------------------
#: Per machine (``platform.machine()``): the kernel's audit number of its
#: system-call convention, and the numbers of ``clone``, ``unshare`` and
#: ``clone3``. Another machine gets no filter (``namespace_filter``).
_SYSCALLS = {"x86_64": (0xC000003E, 56, 272, 435), "aarch64": (0xC00000B7, 220, 97, 435)}
#: The calls refused outright, per machine: the kernel's keyrings
#: (``add_key``, ``request_key``, ``keyctl``), which belong to no namespace
#: that bwrap makes (a key that one sandbox's user leaves in its keyring
#: outlived the sandbox, and the next check read it), and ``io_uring``
#: (``io_uring_setup``, ``_enter``, ``_register``), a large surface of the
#: kernel that a check never needs. Docker's default profile refuses both.
_REFUSED = {"x86_64": (248, 249, 250, 425, 426, 427), "aarch64": (217, 218, 219, 425, 426, 427)}
_CLONE_NEWUSER = 0x10000000
_EPERM, _ENOSYS = 1, 38
_X32_SYSCALL_BIT = 0x40000000  # x86-64's x32 calls: another numbering, refused whole
# Classic BPF (linux/filter.h, linux/seccomp.h): the opcodes and returns used.
_LOAD_WORD, _JUMP_EQUAL, _JUMP_AT_LEAST, _JUMP_ANY_BIT, _RETURN = 0x20, 0x15, 0x35, 0x45, 0x06
_ALLOW, _ERRNO = 0x7FFF0000, 0x00050000
# struct seccomp_data: the call's number, its convention, then its arguments.
_NUMBER, _CONVENTION, _FIRST_ARGUMENT = 0, 4, 16


def namespace_filter(machine=None):
    """A seccomp program (``struct sock_filter``s, the bytes that bwrap's
    ``--seccomp`` reads) that refuses to make a user namespace: ``unshare``
    and ``clone`` with ``CLONE_NEWUSER`` fail with EPERM; ``clone3``, whose
    flags are in memory that a filter cannot read, with ENOSYS (the C
    library then makes its threads and processes with ``clone``); a call in
    another convention than the machine's (32-bit, x32) with ENOSYS; and the
    calls of ``_REFUSED`` (keyrings, io_uring) with EPERM. None on a machine
    without a table (``_SYSCALLS``).

    A user namespace is the one way left to the sandbox's user to get
    capabilities: it has none, no set-uid program gives it any (bwrap sets
    no_new_privs), and it sees no namespace of another process to join; in
    a namespace of its own it has them all (measured as root with bwrap 0.8:
    ``unshare -U -r`` then mount and chroot worked)."""
    machine = machine or platform.machine()
    table = _SYSCALLS.get(machine)
    if table is None:
        return None
    convention, clone, unshare, clone3 = table
    # Instructions with labels for their jumps ("jt if the test holds, jf if
    # not"), resolved below into the offsets that BPF counts from the next one.
    program = [
        (_LOAD_WORD, None, None, _CONVENTION),
        (_JUMP_EQUAL, "number", "missing", convention),
        ("number", _LOAD_WORD, None, None, _NUMBER),
        (_JUMP_AT_LEAST, "missing", None, _X32_SYSCALL_BIT),
        (_JUMP_EQUAL, "missing", None, clone3),
        *((_JUMP_EQUAL, "refuse", None, number) for number in _REFUSED[machine]),
        (_JUMP_EQUAL, "flags", None, unshare),
        (_JUMP_EQUAL, "flags", None, clone),
        (_RETURN, None, None, _ALLOW),
        ("flags", _LOAD_WORD, None, None, _FIRST_ARGUMENT),  # the flags (their low 32 bits)
        (_JUMP_ANY_BIT, "refuse", None, _CLONE_NEWUSER),
        (_RETURN, None, None, _ALLOW),
        ("missing", _RETURN, None, None, _ERRNO | _ENOSYS),
        ("refuse", _RETURN, None, None, _ERRNO | _EPERM),
    ]
    labels = {instruction[0]: at for at, instruction in enumerate(program)
              if isinstance(instruction[0], str)}
    code = b""
    for at, instruction in enumerate(program):
        opcode, jump_true, jump_false, value = (instruction[1:] if isinstance(instruction[0], str)
                                                else instruction)
        offsets = [0 if label is None else labels[label] - at - 1 for label in (jump_true, jump_false)]
        code += struct.pack("=HBBI", opcode, *offsets, value)
    return code


def namespace_filter_fd():
    """A descriptor to read ``namespace_filter()`` from (the read end of a
    pipe that holds it whole), for ``sandbox_command(seccomp_fd=...)``, or
    None where there is no filter. The caller passes it on and closes it."""
    program = namespace_filter()
    if program is None:
        return None
    read_end, write_end = os.pipe()
    try:
        os.write(write_end, program)  # (some hundred bytes: a pipe holds 64 KiB)
    finally:
        os.close(write_end)
    return read_end


def sandbox_command(argv, *, readable, uid=None, info_fd=None, tmp_bytes=None, as_root=None,
                    seccomp_fd=None):
    """``bwrap ... argv``: ``argv`` run in the sandbox the module's docstring
    describes. ``readable``: the files and folders bound read-only at their
    own paths (beyond the system's and Python's: the package, the step files,
    the learner's file). ``uid``: the throwaway uid that root drops to
    (default ``throwaway_uid()``; ignored for an ordinary user). ``info_fd``:
    a descriptor on which bwrap writes the pid of the namespace's init
    (``child-pid``).
    ``tmp_bytes``: the size of the private ``/tmp`` (memory, where no cgroup counts it).
    ``seccomp_fd``: a descriptor from ``namespace_filter_fd()`` (without it
    the file could make a user namespace, and have every capability in it).
    The command needs the descriptors that it names passed on (``pass_fds``)."""
    as_root = os.geteuid() == 0 if as_root is None else as_root
    command = [bwrap_path() or "bwrap", "--die-with-parent", "--new-session"]
    if as_root:  # root makes the namespaces itself; a user namespace would map the worker to root
        command += ["--unshare-ipc", "--unshare-pid", "--unshare-net", "--unshare-uts",
                    "--unshare-cgroup-try"]
    else:  # (a nested user namespace could remount what the worker sees: refused where bwrap can)
        command += ["--unshare-user", "--unshare-ipc", "--unshare-pid", "--unshare-net",
                    "--unshare-uts", "--unshare-cgroup-try"]
        if "--disable-userns" in _bwrap_help():
            command.append("--disable-userns")
    for folder in SYSTEM_FOLDERS:
        if os.path.islink(folder):
            command += ["--symlink", os.readlink(folder), folder]
        elif os.path.isdir(folder):
            command += ["--ro-bind", folder, folder]
    command += ["--proc", "/proc", "--dev", "/dev", "--perms", "1777"]
    if tmp_bytes:
        command += ["--size", str(tmp_bytes)]
    command += ["--tmpfs", SANDBOX_HOME]
    read_only = [folder for folder in SYSTEM_FOLDERS if os.path.isdir(folder)]
    made = {SANDBOX_HOME}
    for path in [*python_folders(), *(str(Path(p).resolve()) for p in readable),
                 *(file for file in ETC_FILES if os.path.exists(file))]:
        if _within(path, read_only):
            continue
        for parent in _parents(path):
            # bwrap makes a missing folder 0700 (root's): the throwaway user
            # could not pass through it
            if parent not in made and not _within(parent, read_only):
                command += ["--perms", "0755", "--dir", parent]
                made.add(parent)
        command += ["--ro-bind", path, path]
        if os.path.isdir(path):
            read_only.append(path)
    command += ["--chdir", SANDBOX_HOME]
    if info_fd is not None:
        command += ["--info-fd", str(info_fd)]
    if seccomp_fd is not None:
        command += ["--seccomp", str(seccomp_fd)]
    if as_root:
        uid = throwaway_uid() if uid is None else uid
        command += ["--", setpriv_path() or "setpriv", f"--reuid={uid}", f"--regid={uid}",
                    "--clear-groups", "--inh-caps=-all", "--bounding-set=-all"]
    else:
        command += ["--"]
    return command + list(argv)


@functools.lru_cache(maxsize=None)
def sandbox_problem():
    """Why the sandbox cannot run on this machine, in a few words, or None
    when it can (a trial run of ``true`` in it, once per process)."""
    if not sys.platform.startswith("linux"):
        return f"bubblewrap runs on Linux only (this is {sys.platform})"
    if bwrap_path() is None:
        return "bubblewrap (bwrap) is not installed (sudo apt-get install bubblewrap)"
    if os.geteuid() == 0 and setpriv_path() is None:
        return "setpriv (util-linux), which drops root's rights in the sandbox, is not installed"
    true = shutil.which("true") or "/bin/true"
    try:
        done = run_sandboxed([true], readable=[])
    except (OSError, subprocess.TimeoutExpired) as error:
        return f"bwrap could not be started ({error})"
    if done.returncode != 0:
        said = " ".join(done.stderr.decode("utf-8", "replace").split())[:200]
        said = said or f"exit code {done.returncode}"
        return f"the kernel refuses bwrap's namespaces here ({said})"
    return None


def run_sandboxed(argv, *, readable, timeout=30):
    """Run ``argv`` to its end in the sandbox (``sandbox_command``, with its
    ``namespace_filter``), its input empty; return the ``CompletedProcess``
    (its output and errors as bytes). Raises OSError or
    ``subprocess.TimeoutExpired`` as ``subprocess.run`` does."""
    seccomp_fd = namespace_filter_fd()
    try:
        return subprocess.run(sandbox_command(argv, readable=readable, seccomp_fd=seccomp_fd),
                              stdin=subprocess.DEVNULL, capture_output=True, timeout=timeout,
                              pass_fds=() if seccomp_fd is None else (seccomp_fd,))
    finally:
        if seccomp_fd is not None:
            os.close(seccomp_fd)
