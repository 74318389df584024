"""``grade``: many submissions against one stage, in parallel, into one CSV.

Each submission is checked by its own ``python -m dezero_mini check ...
--json`` process (the learner's code runs in that check's worker, as it
does for a learner), ``jobs`` at a time, from a scratch folder (never the
submission's), each in a process group of its own. The grader keeps the
checks it started and ends each one's group when it is interrupted (Ctrl-C,
SIGTERM, SIGHUP) or a check overruns its limit, so a stopped grading run
leaves nothing running.

One row per student: the student, the path, the status ("passed",
"failed", "error": the file could not be checked, "missing": no stage file
to check), points and max_points, contracts passed and total, seconds, the
points of each contract of the stage, and the message of an error.
"""
import csv
import io
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from dezero_mini.atomic import not_a_file
from dezero_mini.contracts import get_stage
from dezero_mini.contracts.runner import DEFAULT_TIMEOUT, DEFAULT_TOTAL_TIMEOUT
from dezero_mini.contracts.scoring import display_points, select_contracts
from dezero_mini.grading.files import write_atomically
from dezero_mini.grading.gradescope import unchecked_report

#: Seconds a check may take beyond its per-contract limits before the
#: grader gives up on it (starting Python, loading the file).
SLACK = 60.0


class SubmissionError(ValueError):
    """A submission argument that cannot be graded at all (a typo, most
    often): reported before any grading starts."""


@dataclass
class Submission:
    """One student's submission: ``file`` is the stage file to check, or
    None when the folder has none (``problem`` says so)."""

    student: str
    path: Path
    file: Optional[Path]
    problem: Optional[str] = None


def find_submissions(number, arguments):
    """The ``Submission`` of each argument: a stage file, or a folder that
    holds the stage's file (``stepNN_<name>.py``). A path that does not
    exist, or one given twice, is a SubmissionError; a folder without the
    stage file is a submission with a problem (it gets a row, with 0 points)."""
    stage = get_stage(number)
    found, seen = [], {}
    for argument in arguments:
        path = Path(argument)
        if not path.exists():
            raise SubmissionError(f"no such file or folder: {str(path)!r} (give each "
                                  f"student's {stage.file_name}, or a folder that holds it)")
        key = path.resolve()
        if key in seen:
            raise SubmissionError(f"{str(path)!r} is given twice (also as {str(seen[key])!r})")
        seen[key] = path
        if path.is_dir():
            file = path / stage.file_name
            student = key.name
            what = not_a_file(file)
            if what is not None:
                others = sorted(child.name for child in path.glob("*.py"))[:5]
                if what == "does not exist":
                    problem = f"no {stage.file_name} in {str(path)!r}" + (
                        f" (its Python files: {', '.join(others)})" if others else "")
                else:  # (a folder or a pipe by that name was "no ... in")
                    problem = f"{stage.file_name} in {str(path)!r} {what}"
                found.append(Submission(student, path, None, problem))
                continue
        elif path.is_file():
            file = path
            student = key.parent.name if path.name == stage.file_name else path.stem
        else:
            raise SubmissionError(f"{str(path)!r} is neither a file nor a folder")
        found.append(Submission(student, path, file))
    return found


class _Running:
    """The check processes running now, to end them all when grading stops."""

    def __init__(self):
        self.lock, self.processes, self.stopping = threading.Lock(), set(), False

    def run(self, argv, cwd, timeout):
        """Run ``argv``; ``(exit code, stdout, stderr)``, or None once stopping."""
        with self.lock:
            if self.stopping:
                return None
            # Its own process group: the check and whatever it started end together.
            process = subprocess.Popen(argv, cwd=cwd, stdin=subprocess.DEVNULL,
                                       stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                       start_new_session=True)
            self.processes.add(process)
        try:
            out, err = process.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            _signal_group(process, signal.SIGTERM)
            out, err = _reap(process)
            err += f"\ncheck did not finish in {timeout:g} s".encode()
        finally:
            with self.lock:
                self.processes.discard(process)
        _signal_group(process, signal.SIGKILL)  # anything the learner's code left running
        return process.returncode, out, err

    def stop(self):
        """End every running check and its processes (SIGTERM to each one's
        group, then SIGKILL to those still there after 5 s)."""
        with self.lock:
            self.stopping = True
            processes = list(self.processes)
        for process in processes:
            _signal_group(process, signal.SIGTERM)
        for process in processes:
            # Only wait: the thread that started the check is reading its pipes
            # (a second communicate() on the same process would race it).
            try:
                process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass
            _signal_group(process, signal.SIGKILL)


def _signal_group(process, number):
    """Send ``number`` to the process group that ``process`` leads (the check
    and its worker), if any of it is left."""
    try:
        os.killpg(process.pid, number)
    except (ProcessLookupError, PermissionError):
        pass


def _reap(process):
    """Wait for a check that was told to stop; SIGKILL its group after 5 s."""
    try:
        out, err = process.communicate(timeout=5)
    except subprocess.TimeoutExpired:
        out, err = b"", b""
    _signal_group(process, signal.SIGKILL)  # a worker left behind by its check, if any
    if process.returncode is None:
        out, err = process.communicate()
    return out, err


@dataclass
class Grading:
    """The settings of one ``grade`` run (the same for every student)."""

    number: int
    names: Optional[list] = None
    weights: object = None
    timeout: float = DEFAULT_TIMEOUT
    total_timeout: float = DEFAULT_TOTAL_TIMEOUT
    batches: int = 200
    jobs: int = 2
    #: How one submission is checked: None, by a ``check`` process started
    #: here; otherwise an object whose ``run_check`` does it (the container
    #: of ``dezero_mini.grading.container``).
    isolation: object = None

    def check_argv(self, file, weights_file):
        argv = [sys.executable, "-m", "dezero_mini", "check", str(self.number),
                str(Path(file).resolve()), "--json", "--timeout", f"{self.timeout:g}",
                "--total-timeout", f"{self.total_timeout:g}", "--batches", str(self.batches)]
        for name in self.names or ():
            argv += ["--contract", name]
        if weights_file is not None:
            argv += ["--weights", str(weights_file)]
        return argv

    def check_limit(self):
        """The seconds after which a check is given up: every contract's
        limit and the loading's, at most the check's total, and the slack."""
        each = (len(select_contracts(self.number, self.names)) + 1) * self.timeout
        return min(each, self.total_timeout) + SLACK


def grade_all(grading, submissions, report_line=None):
    """Grade ``submissions`` (from ``find_submissions``), ``grading.jobs`` at a
    time; returns one row (a dict) per submission, in the order given.
    ``report_line(text)`` hears of each one as it is done."""
    running = _Running()
    rows = [None] * len(submissions)
    with tempfile.TemporaryDirectory(prefix="dezero_mini_grade_") as scratch:
        weights_file = None
        if grading.weights is not None:  # the checked weights, as read once, for every check
            weights_file = Path(scratch) / "weights.json"
            weights_file.write_text(json.dumps(grading.weights.as_mapping()))
        previous = _stop_on_signals()
        executor = ThreadPoolExecutor(max_workers=grading.jobs)
        try:
            pending = {executor.submit(_grade_one, grading, submission, running, scratch,
                                       weights_file): index
                       for index, submission in enumerate(submissions)}
            while pending:
                done, _ = wait(pending, return_when=FIRST_COMPLETED)
                for future in done:
                    index = pending.pop(future)
                    rows[index] = future.result()
                    if report_line:
                        report_line(_progress_line(rows[index], len(submissions) - len(pending),
                                                   len(submissions)))
        except BaseException:
            running.stop()
            raise
        finally:
            executor.shutdown(wait=True, cancel_futures=True)
            _restore_signals(previous)
    return rows


def _grade_one(grading, submission, running, scratch, weights_file):
    started = time.monotonic()
    if submission.file is None:
        report = unchecked_report(grading.number, submission.path, submission.problem,
                                  grading.weights, grading.names).as_dict()
        report["status"] = "missing"
        return _row(submission, report, 0.0)
    if grading.isolation is None:
        done = running.run(grading.check_argv(submission.file, weights_file), scratch,
                           grading.check_limit())
    else:
        done = grading.isolation.run_check(grading, submission.file, running, scratch,
                                           weights_file)
    seconds = time.monotonic() - started
    if done is None:
        raise KeyboardInterrupt  # grading is being stopped
    code, out, err = done
    try:
        report = json.loads(out)
        if not isinstance(report, dict) or "contracts" not in report:
            raise ValueError("not a report")
    except ValueError:
        message = " ".join(err.decode("utf-8", "replace").split())[-500:]
        report = unchecked_report(grading.number, submission.file,
                                  f"check ended with exit code {code}: {message}",
                                  grading.weights, grading.names).as_dict()
    return _row(submission, report, seconds)


def _row(submission, report, seconds):
    row = {"student": submission.student, "path": str(submission.path),
           "status": report["status"], "points": report["points"],
           "max_points": report["max_points"], "passed": report["passed"],
           "total": report["total"], "seconds": round(seconds, 2)}
    for contract in report["contracts"]:
        row[contract["name"]] = contract["points"]
    row["message"] = report.get("message") or ""
    return row


def _progress_line(row, done, total):
    return (f"[{done}/{total}] {row['student']}: {display_points(row['points'])} of "
            f"{display_points(row['max_points'])} points ({row['status']}, "
            f"{row['seconds']:.1f} s)")


class GradingStopped(BaseException):
    """SIGTERM or SIGHUP arrived while grading (``signum``); the running
    checks have been ended. (Ctrl-C is KeyboardInterrupt, as anywhere.)"""

    def __init__(self, signum):
        super().__init__(signum)
        self.signum = signum


def _stop_on_signals():
    """Turn SIGTERM and SIGHUP into GradingStopped while grading, so that the
    running checks are ended; returns the old handlers."""
    if threading.current_thread() is not threading.main_thread():
        return {}

    def interrupt(signum, frame):
        raise GradingStopped(signum)

    previous = {}
    for name in ("SIGTERM", "SIGHUP"):
        number = getattr(signal, name, None)
        if number is not None:
            previous[number] = signal.signal(number, interrupt)
    return previous


def _restore_signals(previous):
    for number, handler in previous.items():
        signal.signal(number, handler)


# --- The CSV -----------------------------------------------------------------------------
#: A cell that starts with one of these is a formula to a spreadsheet: a
#: folder named "=HYPERLINK(...)" must stay text.
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def _cell(value):
    if isinstance(value, str) and value.startswith(_FORMULA_START):
        return "'" + value
    if isinstance(value, float):
        return display_points(value)
    return value


def csv_text(number, rows, names=None):
    """The grades as CSV text: a header, then one row per student."""
    contracts = [contract.name for contract in select_contracts(number, names)]
    columns = ["student", "path", "status", "points", "max_points", "passed", "total",
               "seconds", *contracts, "message"]
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=columns, lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow({column: _cell(row.get(column, "")) for column in columns})
    return out.getvalue()


def write_csv(path, number, rows, names=None):
    """Write the grades to ``path``, whole or not at all."""
    write_atomically(path, csv_text(number, rows, names))


def summary(rows, seconds, jobs):
    """One sentence on the whole run: counts per status, time."""
    counts = {}
    for row in rows:
        counts[row["status"]] = counts.get(row["status"], 0) + 1
    parts = ", ".join(f"{count} {status}" for status, count in sorted(counts.items()))
    return (f"graded {len(rows)} submission{'s' if len(rows) != 1 else ''} in "
            f"{seconds:.1f} s with --jobs {jobs}" + (f": {parts}" if parts else ""))


def default_jobs():
    """The processors this process may use."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)
