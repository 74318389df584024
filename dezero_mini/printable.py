"""Text from a submission, made safe to print on a terminal.

What a learner's file prints, the messages of its exceptions, its file and
folder names all reach the text reports of ``check`` and ``grade``. A
terminal obeys the control characters among them: an escape sequence can
move the cursor, clear the screen and redraw the report with other figures;
a carriage return overwrites a line. ``printable`` shows each of them as an
escape instead (``\\x1b``); the JSON reports keep the text exact.
"""
import re

# C0 controls but tab and newline, DEL, C1 controls (0x9b opens a sequence
# like ESC [ does), and the bidirectional overrides that reorder a line.
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def printable(text, *, newlines=True):
    """``text`` with each control character shown as a visible escape
    (``\\x1b``, ``\\u202e``); newlines kept unless ``newlines`` is False."""
    text = _CONTROL.sub(_escape, str(text))
    return text if newlines else text.replace("\n", "\\n")


def first_of(items, shown=3):
    """``items`` (strings) named in a line: the first ``shown`` of them, and
    how many more (``"a.py, b.py, c.py and 4 more"``), for the reports that
    list what a check found."""
    items = list(items)
    more = f" and {len(items) - shown} more" if len(items) > shown else ""
    return ", ".join(items[:shown]) + more


def _escape(match):
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"
