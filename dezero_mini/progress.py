"""Progress bars for the long waits (``check``, ``grade``, ``train``, ``memory``, the
notebook runs), drawn by tqdm on a terminal only.

A bar is redrawn in place with carriage returns. In a pipe, a file or a CI log
those would pile every redraw onto one unreadable line, and a bar on standard
error beside a report piped elsewhere (``check ... | tee log``) would be cut by
the report's lines: so a bar is drawn only when both its own stream and the
stream of the command's report are terminals, and never with ``--json``.
Where no bar is drawn, a command that wants to be heard prints plain lines of
its own (``train``: one per epoch; ``memory``: one per quarter of the run).
"""
import sys


def is_terminal(stream):
    """Whether ``stream`` is a terminal (False for anything without ``isatty``)."""
    isatty = getattr(stream, "isatty", None)
    try:
        return bool(isatty and isatty())
    except ValueError:  # a closed file
        return False


def progress_bar(total, what, *, quiet=False, stream=None, report=None, unit="it", leave=False,
                 bar_format=None):
    """A tqdm bar of ``total`` steps named ``what`` on ``stream`` (standard error by
    default), drawn only when that stream and ``report`` (the stream the command's
    results go to: standard output by default) are terminals and not ``quiet``
    (``--json``). Where it is not drawn, ``bar.disable`` is True, ``update`` does
    nothing and ``bar.write`` prints plain lines. Use it as a context manager;
    ``update(1)`` per step, ``set_postfix_str`` for the step under way. ``leave``:
    the last state of the bar stays on the screen when it closes; ``bar_format``:
    tqdm's, for a bar that must leave room for a long postfix."""
    from tqdm import tqdm

    stream = sys.stderr if stream is None else stream
    report = sys.stdout if report is None else report
    drawn = not quiet and is_terminal(stream) and is_terminal(report)
    return tqdm(total=total, desc=what, file=stream, unit=unit, leave=leave, dynamic_ncols=True,
                bar_format=bar_format, disable=not drawn)
