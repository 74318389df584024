"""Writes that an interrupt cannot destroy: every file dezero_mini writes goes through here.

``with atomic_write(path) as f: ...`` gives a file object opened on a new
temporary file in ``path``'s own folder (so that the final rename stays on one
file system). Only when the block ends without an exception is the file
flushed, synced to disk and renamed over ``path`` (``os.replace``: one step,
readers see the old file or the new one, never half of one). When the block
raises anything, KeyboardInterrupt and the exception that the command line
turns SIGTERM into included, the temporary file is removed and ``path`` is
left exactly as it was.

Before a long run, :func:`output_target_problem` says whether a file can be
written at a path at all, so that a command refuses a bad target when it
reads its arguments instead of failing after the work.

What it cannot protect against is SIGKILL or a power cut between the write
and the rename: then a ``.NAME.*.tmp`` file may stay behind next to the
target, which is still intact.

Test hook: when the environment variable ``DEZERO_MINI_SLOW_WRITE`` holds a
number of seconds, every write sleeps that long after the data is written and
before the rename, so that a test can send a real signal to a real process in
the middle of a write and find out what is left on disk.
"""
import contextlib
import errno
import os
import secrets
import signal
import tempfile
import threading
import time
from pathlib import Path

from dezero_mini import stopping
from dezero_mini.environment import SLOW_WRITE_VARIABLE, slow_write_setting

#: The environment variable of the test hook (seconds to sleep before the rename).
SLOW_WRITE_ENV = SLOW_WRITE_VARIABLE
TEMPORARY_SUFFIX = ".tmp"


#: The longest file name that most file systems take (ext4, XFS, APFS, NTFS).
NAME_MAX = 255
#: What a temporary name adds to its prefix: 16 random hex digits and ``.tmp``.
_RANDOM_PART = 16 + len(TEMPORARY_SUFFIX)


def temporary_prefix(path):
    """How the temporary files of a write to ``path`` begin (``.w.npz.``).

    The target's name is cut short when it is long, so that the temporary
    name stays within NAME_MAX: a target of 240 characters is a valid name,
    and its temporary must be one too."""
    name = Path(path).name
    room = NAME_MAX - _RANDOM_PART - 2  # the two dots
    encoded = os.fsencode(name)  # as the file system takes it: bytes that are not UTF-8 too
    if len(encoded) > room:
        name = os.fsdecode(encoded[:room].decode(errors="ignore").encode())
    return f".{name}."


def output_target_problem(path, suffixes=(), inputs=()):
    """Why no file can be written at ``path``, as a sentence that names the
    path and the fix; None when one can: the one check of a command's output.
    With ``suffixes`` (``".npz"``, ...) the name must end in one of them;
    ``inputs`` are the ``(what, path)`` pairs of the files the same command
    reads (``("the submission", path)``; a path of None is left out).

    The most precise reason is given, in this order: the output is, or is a
    link to, one of the inputs (:func:`input_overwrite_problem`: "... which
    this command reads"); then the families of bad targets: no name before
    the suffix, another suffix, a name that ends in a separator (``w.npz/``
    names a folder), a name longer than the folder takes, a folder, a
    symbolic link to nothing, to something no write can replace or (with
    ``suffixes``) to an existing file of another kind (the write goes
    through a link, so the link's target is what is judged), a pipe or a
    device, a folder that does not exist or is a file, a file that exists
    and may not be written, a folder that the user may not write to or that
    takes no new file (a read-only file system, ``/proc``: a file is made
    there and removed, as :func:`atomic_write` will need to).
    """
    given = os.fspath(path)
    problem = input_overwrite_problem(given, inputs)
    if problem is not None:
        return problem
    try:
        return _target_problem(given, Path(given), suffixes)
    except OSError as error:  # a path the system refuses to look at (too long, ...)
        return (f"{given!r} cannot be used as a file name ({error.strerror or error}); "
                "choose another name")


def leads_to_a_file(path):
    """Whether ``path`` names an existing regular file, itself or through a
    link: what might be one of a command's inputs, so that only the check
    that knows them (:func:`output_target_problem` with ``inputs``) can say
    the most precise thing about it."""
    try:
        return os.path.isfile(path) and not _names_a_folder(os.fspath(path))
    except (OSError, ValueError):
        return False


def input_overwrite_problem(target, inputs):
    """Why writing ``target`` would replace a file that the same command
    reads, as a sentence that names both and the fix; None when it would not.

    ``inputs`` are ``(what, path)`` pairs (``("the submission", path)``).
    The same file is the same file on disk (device and inode, as
    ``os.path.samefile`` sees it): a different spelling of the path, a
    symbolic link on either side and a hard link are all found. A path that
    does not exist yet cannot be an input, nor can None (an option not given)."""
    for what, path in inputs:
        if path is None:
            continue
        try:
            same = os.path.samefile(target, path)
        except (OSError, ValueError):  # either one missing, or a name the system refuses
            same = False
        if same:
            alias = "" if os.fspath(target) == os.fspath(path) else f", {str(path)!r}"
            link = "a link to " if os.path.islink(target) else ""
            return (f"{str(target)!r} is {link}{what}{alias}, which this command reads; "
                    "writing there would replace it: choose another name")
    return None


def _target_problem(given, path, suffixes):
    """:func:`output_target_problem` without its guard against OSError."""
    if suffixes and path.name.lower() in suffixes:  # ".npz" alone: a hidden file, no extension
        return f"the file needs a name before {path.name}, like {'out' + path.name!r}"
    if suffixes and path.suffix.lower() not in suffixes:
        return f"the file name must end in {' or '.join(suffixes)}, got {given!r}"
    too_long = _name_too_long(path)
    if too_long:
        return too_long
    if path.is_dir():
        suffix = path.suffix.lower() or (suffixes[0] if suffixes else "")
        example = f", like {str(path / ('out' + suffix))!r}" if suffix else ""
        return f"{given!r} is a folder; give a file name inside it{example}"
    if _names_a_folder(given):
        return (f"{given!r} ends in {given[-1]!r}, which makes it the name of a folder; "
                f"give the file name without it, like {str(path)!r}")
    if os.path.islink(path):  # the write goes through the link: judge what it points to
        real = Path(os.path.realpath(path))
        what = not_a_file(path)
        if what == "is a link to nothing":
            return (f"{given!r} {what}; remove the link or give the name of a file to write")
        if what is not None:
            return (f"{given!r} is a link to {str(real)!r}, which {what}; give the name of "
                    "a file to write")
        if suffixes and real.exists() and real.suffix.lower() not in suffixes:
            # graph --out g.svg, a link to the learner's step file, replaced the step file
            return (f"{given!r} is a link to {str(real)!r}, a file of another kind (not "
                    f"{' or '.join(suffixes)}), which the write would replace; remove the "
                    "link or give another name")
        path = real
    elif os.path.lexists(path):
        what = not_a_file(path)
        if what is not None:
            return f"{given!r} {what}; give the name of a file to write"
    folder = path.parent
    if not folder.is_dir():
        if folder.exists():
            return f"the folder {str(folder)!r} is a file, not a folder; choose another place"
        return f"the folder {str(folder)!r} does not exist; create it or choose another place"
    if path.exists() and not os.access(path, os.W_OK):
        return (f"{given!r} exists and is not writable by you; make it writable or choose "
                "another name")
    if not os.access(folder, os.W_OK | os.X_OK):
        return (f"the folder {str(folder)!r} is not writable by you; choose a folder you can "
                "write to")
    try:  # the write renames a new file of the same folder: make one
        probe, name = tempfile.mkstemp(dir=folder, prefix=temporary_prefix(path),
                                       suffix=".probe")
        os.close(probe)
        os.unlink(name)
    except OSError as error:
        return (f"the folder {str(folder)!r} does not accept new files ({error.strerror}); "
                "choose a folder you can write to")
    return None


def _names_a_folder(given):
    """Whether the name as given ends in a separator (``w.npz/``): a folder's
    name, which ``Path`` would quietly turn into the file ``w.npz``."""
    separators = tuple(filter(None, (os.sep, os.altsep)))
    return isinstance(given, str) and given.endswith(separators)


def _name_too_long(path):
    """The sentence for a file name longer than its folder takes, or None.
    (Only where the folder exists: otherwise that is the problem to name.)"""
    folder = path.parent
    if not folder.is_dir():
        return None
    try:
        name_max = os.pathconf(folder, "PC_NAME_MAX")
    except (OSError, ValueError, AttributeError):  # no pathconf (Windows), or no answer
        name_max = NAME_MAX
    if name_max is None or name_max <= 0:  # no limit said
        name_max = NAME_MAX
    size = len(os.fsencode(path.name))
    if size <= name_max:
        return None
    return (f"the file name is {size} bytes; this folder takes at most {name_max}: "
            "choose a shorter name")


@contextlib.contextmanager
def atomic_write(path, mode="wb", *, overwrite=True, encoding=None, newline=None):
    """Open a temporary file that becomes ``path`` when the block succeeds.

    mode: ``"wb"`` (bytes) or ``"w"`` (text, with ``encoding`` and ``newline``
        as for ``open``).
    overwrite: when False, an existing ``path`` is never replaced (the rename
        is a hard link that fails if the name exists): FileExistsError.
    """
    if mode not in ("w", "wb"):
        raise ValueError(f"atomic_write: mode must be 'w' or 'wb', got {mode!r}")
    if _names_a_folder(os.fspath(path)):  # as open("w.npz/", "w") refuses (a Path drops the "/")
        raise IsADirectoryError(errno.EISDIR, "a name ending in a separator is a folder's name",
                                os.fspath(path))
    # A link is written through, as open() does; but a write that must not
    # replace anything stops at the link itself, as open(path, "x") does:
    # the name is taken, even by a link to nothing.
    target = _real_target(Path(path)) if overwrite else Path(path)
    folder = target.parent
    # The name is chosen before the file is made, so that an interrupt that
    # lands while it is being made still knows what to remove (with mkstemp,
    # a signal between the creation and the return would leave it behind).
    temporary = None
    try:
        while temporary is None:
            name = temporary_prefix(target) + secrets.token_hex(8) + TEMPORARY_SUFFIX
            temporary = candidate = folder / name
            try:  # 0o666 less the umask, as a plain open() gives
                fd = os.open(candidate, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
            except FileExistsError:  # another write's name (1 in 2**64): not ours to remove
                temporary = None
            except OSError as error:  # the folder takes no new file: say which file was wanted
                temporary = None
                raise OSError(error.errno, error.strerror, str(target)) from None
        _keep_permissions_of(target, fd)
        try:
            with os.fdopen(fd, mode, encoding=encoding, newline=newline) as file:
                yield file
                file.flush()
                os.fsync(file.fileno())
            _sleep_for_tests()
            # A Ctrl-C or SIGTERM whose exception a finalizer swallowed: the
            # user asked to stop, so the old file stays (the temporary goes).
            stopping.obey()
            if overwrite:
                os.replace(temporary, target)
            else:
                _rename_unless_taken(temporary, target)
        except OSError as error:
            if error.errno is None or error.filename not in (None, os.fspath(temporary)):
                raise
            # A full disk or a failing device found while writing or closing
            # the temporary, or a rename refused (the target is a folder): say
            # which file could not be written, not the temporary's name.
            raise OSError(error.errno, error.strerror, str(path)) from None
    except BaseException:
        if temporary is not None:
            with contextlib.suppress(OSError):
                os.remove(temporary)
        raise
    _sync_folder(folder)


def not_a_file(path):
    """What ``path`` is when it is no regular file, for a message that says
    why it cannot be read or written: "does not exist", "is a folder", "is a
    link to nothing", "is not a regular file (a pipe or a device)"; None for
    a regular file (or a link to one)."""
    path = Path(path)
    if path.is_file():
        return None
    if path.is_dir():
        return "is a folder"
    if path.is_symlink() and not path.exists():
        return "is a link to nothing"
    if os.path.lexists(path):
        return "is not a regular file (a pipe or a device)"
    return "does not exist"


def _real_target(target):
    """The file that a write to ``target`` replaces: where ``target`` is a
    symbolic link, the file it points to (as a plain ``open`` writes through
    the link; renaming over the link itself would turn it into a file, with
    the permissions of whatever it pointed to). A target that exists but is
    no regular file (a device such as /dev/full, a pipe) cannot be replaced
    by renaming: OSError naming it."""
    if os.path.islink(target):
        target = Path(os.path.realpath(target))
    if not_a_file(target) == "is not a regular file (a pipe or a device)":
        raise OSError(errno.EINVAL, "not a regular file (a device or a pipe): give the name "
                      "of a file to write", str(target))
    return target


def _rename_unless_taken(temporary, target):
    """Give ``temporary`` the name ``target`` unless a file has it: a hard
    link fails when the name exists (no window between the check and the
    rename); where the file system has no hard links, check, then rename."""
    try:
        os.link(temporary, target)
    except FileExistsError:
        raise
    except OSError:  # no hard links here (some network and FAT file systems)
        if os.path.lexists(target):
            raise FileExistsError(errno.EEXIST, "File exists", os.fspath(target)) from None
        os.replace(temporary, target)
    else:
        os.remove(temporary)


def write_bytes(path, data, **options):
    """Write ``data`` (bytes) to ``path`` atomically; returns ``path``."""
    with atomic_write(path, "wb", **options) as file:
        file.write(data)
    return path


def write_text(path, text, encoding="utf-8", **options):
    """Write ``text`` to ``path`` atomically; returns ``path``."""
    with atomic_write(path, "w", encoding=encoding, **options) as file:
        file.write(text)
    return path


@contextlib.contextmanager
def deferred_signals(signals=(signal.SIGINT, signal.SIGTERM)):
    """Hold SIGINT and SIGTERM back during the block; one that arrived is
    delivered as soon as it ends. For short work in memory that an interrupt
    would leave in a state that raises a second, misleading error (NumPy's
    ``savez`` turns a KeyboardInterrupt in its zip writer into a ValueError).
    Only in the main thread on POSIX; elsewhere nothing is held back."""
    can_mask = (hasattr(signal, "pthread_sigmask")
                and threading.current_thread() is threading.main_thread())
    if not can_mask:
        yield
        return
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, signals)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


def _keep_permissions_of(target, fd):
    """Give the new file the permissions of the file it replaces (a new
    name keeps those of a plain ``open``)."""
    with contextlib.suppress(OSError, AttributeError):  # fchmod: not on Windows
        os.fchmod(fd, os.stat(target).st_mode & 0o7777)


def _sleep_for_tests():
    seconds = slow_write_setting()
    if seconds:
        time.sleep(seconds)


def _sync_folder(folder):
    """Make the rename itself durable (POSIX: sync the folder's entry)."""
    with contextlib.suppress(OSError, AttributeError):
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
