"""The red team's attacks that need more than one ``check`` of a stage file.

The rows that are one stage file checked as stage 03 are in the families'
tables (``tests/test_checker_hostile.py``, ``HOSTILE``: the collector run by
the file itself, a graph of classes that the checker does not count, a flood
of the result channel). Here: what reaches the learner's terminal through
``progress``, which printed the learner's file names and what the file raised
as they were.
"""
import re

from conftest import STEPS
from dezero_mini import cli

CLEAR_AND_LIE = "\x1b[2J\x1b[H10 of 10 stages pass every contract\r\x9b1m"


def test_progress_shows_escapes_in_names_and_messages_not_obeys_them(tmp_path, capsys):
    """A stage file under a name of control characters, raising them while
    it loads. Without the fix, ``progress`` printed both raw (a terminal
    cleared itself and showed the lie)."""
    folder = tmp_path / "course\x1b[8m"
    folder.mkdir()
    name = "step03_\x1b[2J\x1b[Hmine.py"  # the only stage-03 file: progress takes it
    (folder / name).write_text(next(STEPS.glob("step02_*.py")).read_text()
                               + f"\nraise ValueError({CLEAR_AND_LIE!r})\n")
    code = cli.main(["progress", str(folder), "--batches", "5", "--jobs", "1"])
    out = capsys.readouterr().out
    assert code == 0
    assert not re.search("[\x00-\x08\x0b-\x1f\x7f-\x9f]", out), repr(out)
    line = next(line for line in out.splitlines() if line.startswith("stage 03"))
    assert "(named step03_\\x1b[2J\\x1b[Hmine.py, not step03_weakref_outputs.py)" in line, line
    assert "ValueError: \\x1b[2J\\x1b[H10 of 10 stages" in line, line
    assert "course\\x1b[8m" in out
