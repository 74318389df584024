"""Write a result file whole or not at all, to a place checked beforehand.

A grade file that is half-written when the grader is killed, or that turns
out unwritable after an hour of grading, loses work. Its path is checked
before any grading starts (:func:`dezero_mini.atomic.output_target_problem`,
the check of every output file of dezero_mini); ``write_atomically`` writes
through :mod:`dezero_mini.atomic` (a temporary file beside the target,
renamed over it), so a reader sees either the old file or the new one.
"""
from dezero_mini import atomic


class OutputPathError(ValueError):
    """An output path that cannot be written; the message says why."""


def write_atomically(path, text):
    """Write ``text`` (UTF-8, line ends as they are) to ``path`` through
    :mod:`dezero_mini.atomic`: never a partial file at ``path``."""
    atomic.write_text(path, text, newline="")
