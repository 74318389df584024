"""Write a result file whole or not at all, to a place checked beforehand.

A grade file that is half-written when the grader is killed, or that turns
out unwritable after an hour of grading, loses work. ``writable_path`` is
called on the output path before any grading starts; ``write_atomically``
writes through :mod:`dezero_mini.atomic` (a temporary file beside the
target, renamed over it), so a reader sees either the old file or the new one.
"""
import os
import tempfile
from pathlib import Path

from dezero_mini import atomic


class OutputPathError(ValueError):
    """An output path that cannot be written; the message says why."""


def writable_path(path, what="output file"):
    """``path`` as a Path once it is sure that a file can be written there:
    its folder exists and takes new files, and ``path`` is not a folder.
    Otherwise an OutputPathError naming the path and the fix."""
    path = Path(path)
    if path.is_dir():
        raise OutputPathError(f"the {what} {str(path)!r} is a folder; give a file name in it")
    folder = path.parent
    if not folder.is_dir():
        raise OutputPathError(f"the folder of the {what} {str(path)!r} does not exist; "
                              "create it first")
    if path.exists() and not os.access(path, os.W_OK):
        raise OutputPathError(f"the {what} {str(path)!r} exists and cannot be written")
    try:  # the rename needs a new file in the same folder: try one
        probe, name = tempfile.mkstemp(dir=folder, prefix=f".{path.name}.", suffix=".probe")
        os.close(probe)
        os.unlink(name)
    except OSError as error:
        raise OutputPathError(f"cannot write the {what} {str(path)!r}: the folder "
                              f"{str(folder)!r} does not accept new files ({error.strerror})"
                              ) from None
    return path


def write_atomically(path, text):
    """Write ``text`` (UTF-8, line ends as they are) to ``path`` through
    :mod:`dezero_mini.atomic`: never a partial file at ``path``."""
    atomic.write_text(path, text, newline="")
