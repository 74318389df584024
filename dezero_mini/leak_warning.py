"""The framework's leak warning: ``Config.warn_leaks = N``, or ``DEZERO_MINI_WARN_LEAKS=N``.

Off by default (0). With N (2 or more; 1 counts as 2), every
``Optimizer.update()`` marks the end of an iteration, and when the number of
live Variables and Functions has grown at N updates in a row, the framework
warns once, with a :class:`GraphLeakWarning` that says how much survives per
update and gives the chain of references from a name of your code to the
largest surviving graph (the report of ``dezero_mini.memory.find_leaks``).

Off, it costs the optimizer one attribute read per update: nothing is
imported, nothing is watched. On, every Variable and Function made from the
first update on is known from birth (about a microsecond each, see
``dezero_mini.memory.tracking``), until the warning has been given.

The environment variable is read with the other defaults of ``Config``, in
:mod:`dezero_mini.environment`.
"""
import sys
import warnings

from dezero_mini import core


class GraphLeakWarning(UserWarning):
    """The training loop keeps the graphs of past batches alive."""


_watch = None


def after_update(updates):
    """Called by ``Optimizer.update`` when ``Config.warn_leaks`` is on."""
    global _watch
    if _watch is None:
        _watch = _Watch()
    _watch.update(max(2, int(updates)))


def reset():
    """Stop watching and forget the streak (and that the warning was given)."""
    global _watch
    if _watch is not None:
        _watch.tracker.stop()
        _watch = None


class _Watch:
    def __init__(self):
        from dezero_mini.memory.tracking import Tracker

        self.tracker = Tracker(mark_on_backward=False).start([core.Variable, core.Function])
        self.streak = 0
        self.warned = False

    def update(self, updates):
        if self.warned:
            return
        tracker = self.tracker
        tracker.mark()
        counts = tracker.counts
        self.streak = self.streak + 1 if len(counts) > 1 and counts[-1] > counts[-2] else 0
        if self.streak < updates:
            return
        from dezero_mini.memory.leaks import report_between

        last = len(tracker.marks) - 1
        report = report_between(tracker, last - updates, last - 1, unit="optimizer update")
        if not report.leaking:
            self.streak = 0
            return
        self.warned = True
        tracker.stop()  # once: no more cost after the warning
        warnings.warn(
            f"live Variables and Functions have grown at each of the last {updates} optimizer "
            f"updates: the training loop keeps the graphs of past batches alive "
            f"(Config.warn_leaks={updates}; warned once)\n{report}",
            GraphLeakWarning, stacklevel=_stacklevel())


def _stacklevel():
    """The stack level of the first caller outside dezero_mini (the line of
    the learner's ``optimizer.update()``), for warnings.warn."""
    frame, level = sys._getframe(1), 1
    while frame is not None and frame.f_globals.get("__name__", "").startswith("dezero_mini"):
        frame, level = frame.f_back, level + 1
    return level
