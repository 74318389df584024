"""A stop that the user asked for (Ctrl-C, SIGTERM), remembered until it is obeyed.

A signal handler's exception is raised in whatever code runs when the signal
arrives. When that code is a finalizer (a weak reference's callback, a
``__del__``: matplotlib runs them while it draws), the exception cannot leave
it: Python prints "Exception ignored in ..." and goes on, and the stop is
lost: the command then finished its work, replaced the file the user wanted
kept, and exited 0. So the command line records such a swallowed stop here
(through ``sys.unraisablehook``), and the two places that must not go on after
a stop look at it: the one writer (:mod:`dezero_mini.atomic`), before it
renames a new file into place, and the command line, when the command returns.
"""


class Terminated(BaseException):
    """SIGTERM arrived: raised in the main thread so that the command unwinds
    (temporary files removed, old files intact) and exits 143. A
    BaseException, like KeyboardInterrupt, so that ``except Exception`` in
    the middle of the work does not swallow it."""


_REQUESTED = []  # the exception of a stop asked for and not yet obeyed (one at most)


def request(exception_class):
    """Remember that a stop (``KeyboardInterrupt`` or :class:`Terminated`) was asked for."""
    _REQUESTED[:] = [exception_class]


def forget():
    """Forget a stop asked for earlier (a new command starts)."""
    _REQUESTED.clear()


def obey():
    """Raise the stop asked for, if one was and it has not been obeyed
    (its exception was swallowed by a finalizer); else nothing."""
    if _REQUESTED:
        raise _REQUESTED[0]()
