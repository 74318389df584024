"""Writes that an interrupt cannot destroy (``dezero_mini.atomic``).

The in-process cases raise inside the write; the process cases run the real
command, wait until its temporary file exists, and send a real SIGINT or
SIGTERM while the write is in progress. The test hook
``DEZERO_MINI_SLOW_WRITE`` (seconds) makes every write sleep between the data
and the rename, so the signal lands in the middle of the write every time.
After each: the old file is byte for byte what it was, and no temporary file
is left.
"""
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from dezero_mini import atomic
from dezero_mini.cli import guard
from dezero_mini.cli.guard import EXIT_SIGTERM, Terminated

OLD = b"the old file, which must survive\n"


def temporaries(folder):
    return sorted(name for name in os.listdir(folder) if name.endswith(atomic.TEMPORARY_SUFFIX))


# --- In this process ------------------------------------------------------------------------
@pytest.mark.parametrize("error", [KeyboardInterrupt, RuntimeError, MemoryError])
def test_an_exception_in_the_middle_keeps_the_old_file(tmp_path, error):
    target = tmp_path / "w.npz"
    target.write_bytes(OLD)
    with pytest.raises(error):
        with atomic.atomic_write(target) as file:
            file.write(b"half of the new")
            raise error()
    assert target.read_bytes() == OLD
    assert temporaries(tmp_path) == []


def test_a_complete_write_replaces_the_file_and_keeps_its_permissions(tmp_path):
    target = tmp_path / "notes.txt"
    target.write_bytes(OLD)
    target.chmod(0o640)
    atomic.write_text(target, "new text\n")
    assert target.read_text() == "new text\n"
    assert target.stat().st_mode & 0o777 == 0o640
    assert temporaries(tmp_path) == []


def test_a_new_file_gets_the_permissions_of_a_plain_open(tmp_path):
    atomic.write_bytes(tmp_path / "new.bin", b"x")
    with open(tmp_path / "plain.bin", "wb") as file:
        file.write(b"x")
    assert (tmp_path / "new.bin").stat().st_mode == (tmp_path / "plain.bin").stat().st_mode


def test_without_overwrite_an_existing_file_is_never_replaced(tmp_path):
    target = tmp_path / "step03.py"
    target.write_bytes(OLD)
    with pytest.raises(FileExistsError):
        atomic.write_text(target, "new", overwrite=False)
    assert target.read_bytes() == OLD
    assert temporaries(tmp_path) == []


@pytest.mark.parametrize("stop", [KeyboardInterrupt, Terminated])
def test_a_stop_that_a_finalizer_swallowed_still_keeps_the_old_file(tmp_path, stop):
    """A signal whose exception is raised inside a finalizer (matplotlib's
    weak-reference callbacks run while it draws) cannot leave it: Python
    prints "Exception ignored" and goes on. The command line remembers the
    stop; the writer obeys it before the rename (a SIGTERM during `memory`
    once ended with exit 0 and the old SVG replaced)."""
    target = tmp_path / "w.npz"
    target.write_bytes(OLD)

    class RaisesWhenFinalized:
        def __del__(self):
            raise stop()

    with pytest.raises(stop):
        with guard.sigterm_raises():
            RaisesWhenFinalized()  # freed at once: its exception can only be reported
            atomic.write_bytes(target, b"new")
    assert target.read_bytes() == OLD
    assert temporaries(tmp_path) == []


def test_a_stop_that_the_code_catches_is_its_own(tmp_path):
    """A script's own ``except KeyboardInterrupt`` (stop training, then save)
    is obeyed as written: nothing is remembered."""
    target = tmp_path / "w.npz"
    with guard.sigterm_raises():
        try:
            raise KeyboardInterrupt
        except KeyboardInterrupt:
            pass
        atomic.write_bytes(target, b"new")
    assert target.read_bytes() == b"new"


# --- Real processes, real signals -------------------------------------------------------------
MEMORY = ["memory", "--stage", "dezero_mini", "--batches", "2"]
# (command after `python -m dezero_mini`, the file whose write is interrupted,
#  the files that exist before, the signal, the exit status)
INTERRUPTS = [
    (["train", "--dataset", "spiral", "--epochs", "1", "--save", "w.npz"], "w.npz",
     ["w.npz"], signal.SIGINT, 130),
    (["train", "--dataset", "spiral", "--epochs", "1", "--save", "w.npz"], "w.npz",
     ["w.npz"], signal.SIGTERM, EXIT_SIGTERM),
    ([*MEMORY, "--out", "m.svg"], "m.csv", ["m.csv", "m.svg"], signal.SIGINT, 130),
    ([*MEMORY, "--out", "m.svg"], "m.csv", ["m.csv", "m.svg"], signal.SIGTERM, EXIT_SIGTERM),
    ([*MEMORY, "--out", "m.svg"], "m.svg", ["m.csv", "m.svg"], signal.SIGTERM, EXIT_SIGTERM),
    (["graph", "--out", "g.dot"], "g.dot", ["g.dot"], signal.SIGINT, 130),
    (["graph", "--out", "g.dot"], "g.dot", ["g.dot"], signal.SIGTERM, EXIT_SIGTERM),
    (["start", "3", "."], "step03_weakref_outputs.py", [], signal.SIGTERM, EXIT_SIGTERM),
]


def hear_sigint():
    """In the child, before it runs: SIGINT back to its default. A shell that
    starts the tests in the background (``make test &``) ignores SIGINT, the
    child would inherit that, and Python then installs no KeyboardInterrupt
    handler: the command would rightly go on, as ``nohup`` asks, and the
    interrupt under test would never happen."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def wait_for_temporary(folder, name, process, seconds=600):
    """Wait until the write of ``name`` has begun (its temporary file exists). The
    bound only ends a hang: ``memory`` took over 90 s to reach its first write under
    nice 10 beside two busy loops on a loaded 2-core machine."""
    prefix = atomic.temporary_prefix(name)
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if any(found.startswith(prefix) for found in temporaries(folder)):
            return
        if process.poll() is not None:
            raise AssertionError(f"the command ended ({process.returncode}) before writing "
                                 f"{name}: {process.stderr.read()}")
        time.sleep(0.01)
    raise AssertionError(f"no temporary file for {name} within {seconds} s")


@pytest.mark.parametrize("argv, interrupted, existing, signum, status", INTERRUPTS,
                         ids=lambda value: value.name if isinstance(value, signal.Signals)
                         else None)
def test_a_signal_in_the_middle_of_a_write_loses_no_file(tmp_path, argv, interrupted,
                                                         existing, signum, status):
    old = {name: OLD + name.encode() for name in existing}
    for name, content in old.items():
        (tmp_path / name).write_bytes(content)
    # The pause is the window in which the signal must land, and this process must see
    # the temporary file within it: 10 s, so that a busy machine (this poller not run
    # for a second or two) cannot miss it. The signal ends the pause: only the writes
    # before the interrupted one (m.csv before m.svg) wait it out.
    slow = {**os.environ, atomic.SLOW_WRITE_ENV: "10"}
    process = subprocess.Popen([sys.executable, "-m", "dezero_mini", *argv], cwd=tmp_path,
                               env=slow, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True, preexec_fn=hear_sigint)
    try:
        wait_for_temporary(tmp_path, interrupted, process)
        process.send_signal(signum)
        out, err = process.communicate(timeout=300)  # (only ends a hang)
    finally:
        process.kill()
    assert process.returncode == status, err
    assert "Traceback" not in err
    assert ("terminated" if signum == signal.SIGTERM else "interrupted") in err
    assert temporaries(tmp_path) == []
    assert (tmp_path / interrupted).exists() == (interrupted in old)
    for name, content in old.items():
        found = (tmp_path / name).read_bytes()
        if name == interrupted:
            assert found == content, name
        else:  # written before the signal: the old file, or the whole new one
            assert found == content or complete_csv(found, batches=2), name


def complete_csv(content, batches):
    """Whether ``content`` is the whole CSV of a record of ``batches`` batches."""
    lines = content.decode().splitlines()
    return (lines[0].startswith("batch,") and len(lines) == 1 + batches
            and content.endswith(b"\n"))


@pytest.mark.skipif(not Path("/proc/self").is_dir(), reason="needs /proc, which takes no new file")
def test_a_folder_that_takes_no_new_file_is_named_with_the_target(tmp_path):
    """The error names the file the user asked for, not the temporary beside it."""
    with pytest.raises(OSError) as raised:
        atomic.write_text(Path("/proc/dezero_mini_out.txt"), "text")
    assert raised.value.filename == "/proc/dezero_mini_out.txt"
    assert not list(Path("/proc").glob(".dezero_mini_out.txt.*"))


# --- Targets that are odd but valid, and disks that fill up ------------------------------------
def _write_fails_on_sync(monkeypatch):
    """The disk fills up at the end of the write: fsync fails as a full disk
    does, with an OSError that names no file."""
    def full(fd):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(atomic.os, "fsync", full)


# (how the target is made in the folder, the name written to, what must hold after)
ODD_TARGETS = [
    # a name of 255 bytes is valid; its temporary (name + 22) must be valid too
    ("long name", lambda folder: None, "a" * 251 + ".npz"),
    ("long unicode name", lambda folder: None, "权" * 83 + ".npz"),  # 249 bytes in UTF-8
    ("symbolic link", lambda folder: ((folder / "real.npz").write_bytes(OLD),
                                      (folder / "link.npz").symlink_to("real.npz")), "link.npz"),
]


@pytest.mark.parametrize("case, make, name", ODD_TARGETS, ids=[case[0] for case in ODD_TARGETS])
def test_an_odd_but_valid_target_is_written(tmp_path, case, make, name):
    make(tmp_path)
    atomic.write_bytes(tmp_path / name, b"new")
    assert (tmp_path / name).read_bytes() == b"new"
    assert temporaries(tmp_path) == []
    if case == "symbolic link":  # written through the link, as open() does: the link stays
        assert (tmp_path / name).is_symlink()
        assert (tmp_path / "real.npz").read_bytes() == b"new"


@pytest.mark.parametrize("overwrite", [True, False])
def test_a_name_ending_in_a_separator_is_a_folder_as_for_open(tmp_path, overwrite):
    """``w.npz/`` wrote the file ``w.npz`` (a Path drops the trailing slash);
    open() refuses it as a folder's name."""
    given = str(tmp_path / "w.npz") + os.sep
    with pytest.raises(IsADirectoryError) as raised:
        atomic.write_bytes(given, b"new", overwrite=overwrite)
    assert raised.value.filename == given
    assert os.listdir(tmp_path) == []


def test_a_link_to_a_device_is_refused_not_replaced_by_a_file(tmp_path):
    """``w.npz -> /dev/full``: renaming over the link would make a regular
    file with /dev/full's permissions (rw for everyone); it is refused."""
    (tmp_path / "w.npz").symlink_to("/dev/full")
    with pytest.raises(OSError, match="not a regular file") as raised:
        atomic.write_bytes(tmp_path / "w.npz", b"new")
    assert raised.value.filename == "/dev/full"
    assert (tmp_path / "w.npz").is_symlink()
    assert temporaries(tmp_path) == []


def test_a_full_disk_names_the_target_and_keeps_the_old_file(tmp_path, monkeypatch):
    """The command line prints an OSError that names a file as one line;
    one that names none would reach the user as a traceback."""
    target = tmp_path / "w.npz"
    target.write_bytes(OLD)
    _write_fails_on_sync(monkeypatch)
    with pytest.raises(OSError) as raised:
        atomic.write_bytes(target, b"new")
    assert raised.value.errno == 28 and raised.value.filename == str(target)
    assert target.read_bytes() == OLD
    assert temporaries(tmp_path) == []


def test_a_folder_in_the_way_is_named_not_the_temporary(tmp_path):
    """``save_weights("d.npz")`` where d.npz is a folder said
    ``Is a directory: '.d.npz.<random>.tmp' -> 'd.npz'``."""
    (tmp_path / "d.npz").mkdir()
    with pytest.raises(IsADirectoryError) as raised:
        atomic.write_bytes(tmp_path / "d.npz", b"new")
    assert raised.value.filename == str(tmp_path / "d.npz")
    assert raised.value.filename2 is None
    assert temporaries(tmp_path) == []


def test_without_overwrite_a_link_to_nothing_is_a_taken_name(tmp_path):
    """``start`` over a broken link must not create the file it points to
    (a link to /nonexistent made a file /nonexistent)."""
    gone = tmp_path / "elsewhere" / "gone.py"
    gone.parent.mkdir()
    (tmp_path / "step03.py").symlink_to(gone)
    with pytest.raises(FileExistsError):
        atomic.write_text(tmp_path / "step03.py", "new", overwrite=False)
    assert not gone.exists()
    assert temporaries(tmp_path) == []
