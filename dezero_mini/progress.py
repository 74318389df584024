"""A progress line for long loops, readable both on a terminal and in a log.

On a terminal the line is redrawn in place (a carriage return, no new line),
so a run of a hundred epochs takes one line of the screen. When the output
goes to a file, a pipe or a CI log, a carriage return would pile every
redraw onto one unreadable line, so there the line is printed only when the
caller marks a step as done (once per epoch), each time as a plain line.
"""
import shutil
import sys
import time


class ProgressLine:
    """One line of progress written to ``stream`` (default: ``sys.stdout``).

    interactive: redraw in place; by default, when ``stream`` is a terminal.
    min_interval: the least time, in seconds, between two in-place redraws
        (``update``), so that a fast loop does not spend its time drawing.
    """

    def __init__(self, stream=None, interactive=None, min_interval=0.1):
        self.stream = stream if stream is not None else sys.stdout
        if interactive is None:
            isatty = getattr(self.stream, "isatty", None)
            interactive = bool(isatty and isatty())
        self.interactive = interactive
        self.min_interval = min_interval
        self._last_draw = float("-inf")
        self._drawn_width = 0  # characters on the terminal line now

    def update(self, make_text):
        """Redraw the line with ``make_text()`` while a step is running.

        Only on a terminal, and at most once every ``min_interval`` seconds:
        ``make_text`` is called only when the line is really redrawn, so it
        may measure things that cost a little (counting live objects).
        """
        if not self.interactive:
            return
        now = time.monotonic()
        if now - self._last_draw < self.min_interval:
            return
        self._draw(make_text())

    def step_done(self, text):
        """Show ``text`` for a finished step: redrawn in place on a terminal,
        printed as a line of its own elsewhere."""
        if self.interactive:
            self._draw(text)
        else:
            print(text, file=self.stream, flush=True)

    def close(self):
        """End the in-place line, so that what is printed next starts on a
        new line and the last progress stays visible."""
        if self.interactive and self._drawn_width:
            print(file=self.stream, flush=True)
            self._drawn_width = 0

    def _draw(self, text):
        # A line longer than the terminal wraps, and a carriage return then
        # goes back only to the start of the last screen row: cut it instead.
        width = shutil.get_terminal_size().columns - 1
        text = text[:width]
        padding = " " * max(0, self._drawn_width - len(text))  # rub out a longer old line
        self.stream.write("\r" + text + padding)
        self.stream.flush()
        self._drawn_width = len(text)
        self._last_draw = time.monotonic()


def progress_bar(total, what, *, quiet=False, stream=None, unit="it"):
    """A tqdm bar of ``total`` steps named ``what`` on ``stream`` (standard error by
    default), drawn only when that stream is a terminal and not ``quiet`` (``--json``):
    in a pipe, a file or a CI log it draws nothing, and its ``write`` prints plain lines.
    Use it as a context manager; ``update(1)`` per step, ``set_postfix_str`` for the step
    under way."""
    from tqdm import tqdm

    stream = sys.stderr if stream is None else stream
    isatty = getattr(stream, "isatty", None)
    return tqdm(total=total, desc=what, file=stream, unit=unit, leave=False, dynamic_ncols=True,
                disable=quiet or not (isatty and isatty()))
