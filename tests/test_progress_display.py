"""Progress for the long waits (dezero_mini.progress.progress_bar, on tqdm): drawn on a
terminal, nothing in a pipe or with --json; and the one-line summary of ``progress``."""
import io
from types import SimpleNamespace

import pytest

from dezero_mini.grading.learner_progress import progress_summary
from dezero_mini.progress import progress_bar


class Terminal(io.StringIO):
    def isatty(self):
        return True


@pytest.mark.parametrize("stream, quiet, drawn", [
    (Terminal(), False, True),
    (Terminal(), True, False),     # --json: the report alone
    (io.StringIO(), False, False),  # a pipe, a file, a CI log
], ids=["terminal", "terminal-json", "pipe"])
def test_a_bar_is_drawn_on_a_terminal_only(stream, quiet, drawn):
    with progress_bar(3, "checking stage 3", quiet=quiet, stream=stream, unit="contract") as bar:
        bar.set_postfix_str("leaf_gradients_are_right")
        bar.update(1)
        bar.write("a line of its own", file=stream)
    text = stream.getvalue()
    assert ("checking stage 3" in text and "leaf_gradients_are_right" in text) is drawn
    assert ("\r" in text) is drawn
    assert "a line of its own\n" in text  # what is printed beside the bar is printed everywhere


@pytest.mark.parametrize("files, done, expected", [
    (0, 0, "0 of 3 stages pass every contract; 0 have a file"),
    (1, 0, "0 of 3 stages pass every contract; 1 has a file"),
    (2, 1, "1 of 3 stages pass every contract; 2 have a file"),
], ids=["none", "one", "two"])
def test_the_progress_summary_agrees_with_its_count(files, done, expected):
    items = [SimpleNamespace(file="f.py" if index < files else None, done=index < done)
             for index in range(3)]
    assert progress_summary(items) == expected


def test_check_hears_each_step_as_it_starts():
    """The cue of check's bar: loading the file, then every contract of the stage in order."""
    from dezero_mini.contracts import contracts_at
    from dezero_mini.contracts.runner import check_file
    from dezero_mini.memory.stages import stage_path

    heard = []
    report = check_file(3, stage_path(3), allow_reference=True, batches=20, on_step=heard.append)
    assert report.status == "passed"
    assert heard == ["loading the file", *(contract.name for contract in contracts_at(3))]
