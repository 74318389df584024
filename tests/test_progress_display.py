"""Progress for the long waits (dezero_mini.progress.progress_bar, on tqdm): drawn on a
terminal, nothing in a pipe or with --json; and the one-line summary of ``progress``.
The commands are run for real on a pseudo-terminal and on pipes too."""
import io
import os
import re
import select
import subprocess
import sys
import time
from types import SimpleNamespace

import pytest

from dezero_mini.grading.learner_progress import progress_summary
from dezero_mini.progress import progress_bar


class Terminal(io.StringIO):
    def isatty(self):
        return True


@pytest.mark.parametrize("stream, report, quiet, drawn", [
    (Terminal(), "same", False, True),
    (Terminal(), "same", True, False),     # --json: the report alone
    (io.StringIO(), "same", False, False),  # a pipe, a file, a CI log
    (Terminal(), io.StringIO(), False, False),  # the report piped on (check | tee log)
], ids=["terminal", "terminal-json", "pipe", "report-piped"])
def test_a_bar_is_drawn_on_a_terminal_only(stream, report, quiet, drawn):
    report = stream if report == "same" else report
    with progress_bar(3, "checking stage 3", quiet=quiet, stream=stream, report=report,
                      unit="contract") as bar:
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


# --- The commands, run on a terminal and on pipes ---------------------------------------------
# (argv, what the bar's first draw shows, the plain lines printed where no bar is drawn)
LONG_WAITS = {
    "train": (["train", "--dataset", "spiral", "--epochs", "2"], "epoch 1/2 |",
              ["epoch 1/2  batch 10/10", "epoch 2/2  batch 10/10"]),
    "memory": (["memory", "--stage", "dezero_mini", "--batches", "8", "--out", "m.png"],
               "  dezero_mini:", ["  batch 2/8", "  batch 4/8", "  batch 6/8", "  batch 8/8"]),
}
COMMAND = [sys.executable, "-m", "dezero_mini"]
HANG = 300  # seconds: only bounds a command that hangs; they take a few


def on_a_terminal(argv, cwd):
    """(exit code, everything written) of ``python -m dezero_mini *argv`` with its
    standard output and error on a pseudo-terminal of 80 columns."""
    import fcntl
    import pty
    import struct
    import termios

    controller, terminal = pty.openpty()
    fcntl.ioctl(terminal, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 80, 0, 0))
    process = subprocess.Popen([*COMMAND, *argv], cwd=cwd, stdin=subprocess.DEVNULL,
                               stdout=terminal, stderr=terminal, close_fds=True)
    os.close(terminal)  # the child holds it now: reading ends when the child ends
    chunks, deadline = [], time.monotonic() + HANG
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([controller], [], [], 1.0)
            if not ready:
                continue
            try:
                chunk = os.read(controller, 65536)
            except OSError:  # EIO: every holder of the terminal closed it
                break
            if not chunk:
                break
            chunks.append(chunk)
        code = process.wait(timeout=HANG)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        os.close(controller)
    return code, b"".join(chunks).decode(errors="replace")


@pytest.mark.parametrize("command", LONG_WAITS)
def test_a_long_wait_draws_a_bar_on_a_terminal(command, tmp_path):
    argv, bar, plain = LONG_WAITS[command]
    code, text = on_a_terminal(argv, tmp_path)
    assert code == 0, text
    assert f"\r{bar}" in text and "\r\n" in text, text  # tqdm's bar, redrawn in place
    assert not any(line in text for line in plain), text  # no log lines on a terminal


@pytest.mark.parametrize("command", LONG_WAITS)
def test_a_long_wait_prints_plain_lines_in_a_pipe(command, tmp_path):
    argv, bar, plain = LONG_WAITS[command]
    done = subprocess.run([*COMMAND, *argv], cwd=tmp_path, capture_output=True, text=True,
                          timeout=HANG)
    assert done.returncode == 0, done.stderr
    assert "\r" not in done.stdout + done.stderr and "|" not in done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert [line for line in lines if line.startswith(tuple(plain))] == [
        next(line for line in lines if line.startswith(start)) for start in plain]


# --- make test: a line for each long unit, printed where the terminal is ------------------------
SAMPLE_CONFTEST = '''
import importlib.util

_spec = importlib.util.spec_from_file_location("course_conftest", {conftest!r})
_course = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_course)
pytest_configure, progress_line = _course.pytest_configure, _course.progress_line
'''
SAMPLE_TESTS = '''
import pytest

@pytest.mark.parametrize("n", [1, 2, 3])
def test_a_long_unit(n, progress_line):
    progress_line(f"unit {n} ran")
    assert n != 3, "the third fails, and its line is printed all the same"

def test_a_short_one():
    pass
'''


@pytest.mark.parametrize("jobs", ["2", "0"], ids=["xdist", "one-process"])
def test_each_long_unit_gets_a_numbered_line_on_the_terminal(jobs, tmp_path):
    """Under pytest-xdist too, where the test processes have no terminal: the
    controller prints the line that each test recorded as it ends."""
    conftest = os.path.join(os.path.dirname(__file__), "conftest.py")
    (tmp_path / "conftest.py").write_text(SAMPLE_CONFTEST.format(conftest=conftest))
    (tmp_path / "test_sample.py").write_text(SAMPLE_TESTS)
    done = subprocess.run([sys.executable, "-m", "pytest", "-n", jobs, "-p", "no:randomly",
                           "-p", "no:cacheprovider", "test_sample.py"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=HANG)
    assert done.returncode == 1, done.stdout + done.stderr  # (the third unit fails)
    # Each on a line of its own, counted in the order they end (any order of the units).
    printed = re.findall(r"^    \[(\d)/3\] unit (\d) ran$", done.stdout, re.MULTILINE)
    assert [count for count, _ in printed] == ["1", "2", "3"], done.stdout
    assert sorted(unit for _, unit in printed) == ["1", "2", "3"], done.stdout
