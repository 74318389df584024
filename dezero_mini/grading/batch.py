"""``grade``: many submissions against one stage, in parallel, into one CSV.

Each submission is checked by its own ``python -I -m dezero_mini check ...
--json`` process (the learner's code runs in that check's worker, in
bubblewrap's sandbox: ``--sandbox required`` unless the grader says
otherwise), ``jobs`` at a time, each from an empty folder of its own (never
the submission's, never another check's), in a process group of its own,
with the weights on its standard input (read once, before any submission
ran: no file that a submission could rewrite). The grader keeps the
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
from dezero_mini.contracts.bubblewrap import visible_step_files
from dezero_mini.contracts.runner import (DEFAULT_TIMEOUT, DEFAULT_TOTAL_TIMEOUT, NOT_COUNTED,
                                          changed_by_another_process, changed_files,
                                          files_named, installation_state)
from dezero_mini.contracts.scoring import Weights, display_points, select_contracts
from dezero_mini.grading.files import write_atomically
from dezero_mini.grading.gradescope import unchecked_report
from dezero_mini.printable import printable

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
    status: str = "missing"  # the row's status when there is a problem


def find_submissions(number, arguments):
    """The ``Submission`` of each argument: a stage file, or a folder that
    holds the stage's file (``stepNN_<name>.py``). A path that does not
    exist, or one given twice, is a SubmissionError; a folder without the
    stage file is a submission with a problem (it gets a row, with 0 points,
    status "missing"), and so is a symbolic link where the file or folder
    should be (status "error": it is never followed)."""
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
        link = next((each for each in (path, file) if each.is_symlink()), None)
        if link is not None:  # never followed: it could lead to a classmate's file
            # (named after the link, not after where it leads)
            student = (path.absolute().name if path.is_dir() else
                       path.absolute().parent.name if path.name == stage.file_name else path.stem)
            found.append(Submission(student, path, None, (
                f"{str(link)!r} is a link, not a file: a submission must be the file itself "
                "(a link could lead to another student's file)"), status="error"))
            continue
        found.append(Submission(student, path, file))
    return found


class _Running:
    """The check processes running now, to end them all when grading stops."""

    def __init__(self):
        self.lock, self.processes, self.stopping = threading.Lock(), set(), False

    def run(self, argv, cwd, timeout, given=b""):
        """Run ``argv`` with ``given`` on its standard input; ``(exit code,
        stdout, stderr)``, or None once stopping."""
        with self.lock:
            if self.stopping:
                return None
            # Its own process group: the check and whatever it started end together.
            process = subprocess.Popen(argv, cwd=cwd, stdin=subprocess.PIPE,
                                       stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                       start_new_session=True)
            self.processes.add(process)
        try:
            out, err = process.communicate(given, timeout=timeout)
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
    sandbox: str = "required"
    #: How one submission is checked: None, by a ``check`` process started
    #: here; otherwise an object whose ``run_check`` does it (the container
    #: of ``dezero_mini.grading.container``).
    isolation: object = None

    def check_argv(self, file):
        """The command of one check: isolated (``-I``: no module of the
        folder it starts in, no ``PYTHON*`` variable), its weights on
        standard input (``weights_input``), never in a file that a
        submission could rewrite."""
        argv = [sys.executable, "-I", "-m", "dezero_mini", "check", str(self.number),
                str(Path(file).resolve()), "--json", "--timeout", f"{self.timeout:g}",
                "--total-timeout", f"{self.total_timeout:g}", "--batches", str(self.batches),
                "--sandbox", self.sandbox]
        for name in self.names or ():
            argv += ["--contract", name]
        if self.weights is not None:
            argv += ["--weights", "-"]
        return argv

    def weights_input(self):
        """The weights, as read once before any submission ran, as JSON."""
        return b"" if self.weights is None else json.dumps(self.weights.as_mapping()).encode()

    def expected_points(self):
        """``{name: points}`` of the contracts every report must list, in order."""
        selected = select_contracts(self.number, self.names)
        return (self.weights or Weights()).points_at(self.number, selected)

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
    # Each check compares the installation before and after itself; this
    # look spans the run: a change that one check made is seen by the
    # checks that follow, and their rows cannot be trusted either.
    installation, changed, by_another_process = installation_state(), [], None
    previous = _stop_on_signals()
    executor = ThreadPoolExecutor(max_workers=grading.jobs)
    try:
        pending = {executor.submit(_grade_one, grading, submission, running): index
                   for index, submission in enumerate(submissions)}
        while pending:
            done, _ = wait(pending, return_when=FIRST_COMPLETED)
            for future in done:
                index = pending.pop(future)
                rows[index] = _row_of(future, grading, submissions[index])
                changed = changed or changed_files(installation, installation_state())
                if changed:
                    if by_another_process is None:  # (asked once: the first change decides)
                        by_another_process = _changed_by_another_process(grading, changed)
                    _not_counted(rows[index], changed, by_another_process)
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


def _row_of(future, grading, submission):
    """The row of a finished ``_grade_one``; an error row when grading that
    one submission raised (a process that could not be started, say): one
    student's problem never stops the class's grading."""
    try:
        return future.result()
    except Exception as error:  # (KeyboardInterrupt and GradingStopped go on up)
        report = unchecked_report(grading.number, submission.file or submission.path,
                                  f"the grader could not check it: {type(error).__name__}: "
                                  f"{error}", grading.weights, grading.names).as_dict()
        return _row(submission, report, 0.0)


def _changed_by_another_process(grading, changed):
    """Whether the installation's files ``changed`` during the run were surely
    changed by another process than a submission's: each submission ran in
    a container, which holds a course of its own, or in bubblewrap's
    sandbox (``--sandbox required``), where the installation is read-only
    (``runner.changed_by_another_process``)."""
    if grading.isolation is not None:
        return True
    from dezero_mini.memory.stages import steps_dir

    return changed_by_another_process(changed, grading.sandbox == "required",
                                      visible_step_files(grading.number, steps_dir()))


def _not_counted(row, changed, by_another_process):
    """Mark ``row`` as not counted: the installation changed during the run
    (``_changed_by_another_process``: whether surely not by a submission)."""
    row["status"], row["points"], row["passed"] = "error", 0, 0
    for name in row.keys() - {*_ROW_FIELDS, "message"}:  # the points of each contract
        row[name] = 0
    files = files_named(changed)
    if by_another_process:
        what = (f"the course's installation changed during this run (another process "
                f"reinstalled it?): {files}; no submission could have changed it (read-only "
                "in their sandbox, or out of their container); grade again once it is stable")
    else:
        what = (f"the grading installation changed during this run (by a submission or by "
                f"another process): {files}; reinstall the course if a submission may have "
                "changed it, and grade again")
    said = row["message"]
    if said.startswith(NOT_COUNTED):  # (the check saw the change too: said once)
        said = ""
    row["message"] = NOT_COUNTED + what + (f"; the check said: {said}" if said else "")


def _grade_one(grading, submission, running):
    started = time.monotonic()
    if submission.file is None:
        report = unchecked_report(grading.number, submission.path, submission.problem,
                                  grading.weights, grading.names).as_dict()
        report["status"] = submission.status
        return _row(submission, report, 0.0)
    # Each check starts in an empty folder of its own, shared with no other
    # submission's and removed afterwards.
    with tempfile.TemporaryDirectory(prefix="dezero_mini_grade_") as scratch:
        if grading.isolation is None:
            done = running.run(grading.check_argv(submission.file), scratch,
                               grading.check_limit(), grading.weights_input())
        else:
            done = grading.isolation.run_check(grading, submission.file, running, scratch)
    seconds = time.monotonic() - started
    if done is None:
        raise KeyboardInterrupt  # grading is being stopped
    code, out, err = done
    problem = report_problem(out, code, grading.expected_points())
    if problem is None:
        report = json.loads(out)
    else:
        message = " ".join(err.decode("utf-8", "replace").split())[-500:]
        report = unchecked_report(
            grading.number, submission.file,
            f"check ended with exit code {code}" + (f": {message}" if message else "")
            + f"; its report cannot be used: {problem}", grading.weights, grading.names).as_dict()
    return _row(submission, report, seconds)


_EXIT_CODES = {"passed": 0, "failed": 1, "error": 2}


def report_problem(out, code, expected_points):
    """Why the standard output ``out`` of a check that exited with ``code``
    is not a report that ``grade`` can take, or None when it is. What a
    check prints is the learner's reach (a worker that writes on its
    parent's output, then kills it): a report counts only when it is one
    JSON object with every field of the right type, its status and exit
    code agree with the check's own exit, and it lists the stage's contracts
    (``expected_points``: ``{name: points}``, in course order) each with
    those points, earned whole when it passed and not at all otherwise."""
    try:
        report = json.loads(out)
    except (ValueError, RecursionError):  # (UnicodeDecodeError is a ValueError)
        return "not JSON" if out.strip() else "it printed nothing"
    if type(report) is not dict:
        return "not a JSON object"
    kinds = {"status": str, "exit_code": int, "points": (int, float),
             "max_points": (int, float), "passed": int, "total": int, "contracts": list}
    for key, kind in kinds.items():
        if not isinstance(report.get(key), kind) or type(report[key]) is bool:
            return f"no {key} of the right type"
    if not isinstance(report.get("message"), (str, type(None))):
        return "its message is not text"
    if report["status"] not in _EXIT_CODES or report["exit_code"] != _EXIT_CODES[report["status"]]:
        return f"status {report['status']!r} with exit code {report['exit_code']!r}"
    if code != report["exit_code"]:
        return f"it says exit code {report['exit_code']}, the check exited with {code}"
    contracts = report["contracts"]
    if not all(type(entry) is dict for entry in contracts) or (
            [entry.get("name") for entry in contracts] != list(expected_points)):
        return "its contracts are not the stage's"
    for entry in contracts:
        wanted, passed = expected_points[entry["name"]], entry.get("passed")
        if type(passed) is not bool or entry.get("max_points") != wanted or (
                entry.get("points") != (wanted if passed else 0)):
            return f"the points of {entry['name']} do not add up"
    if (report["passed"] != sum(entry["passed"] for entry in contracts)
            or report["total"] != len(contracts)
            or abs(report["points"] - sum(entry["points"] for entry in contracts)) > 1e-6
            or abs(report["max_points"] - sum(expected_points.values())) > 1e-6):
        return "its totals do not add up"
    if (report["status"] == "passed") != (report["passed"] == len(contracts)) and (
            report["status"] != "error"):
        return f"status {report['status']!r} with {report['passed']} of {len(contracts)} passed"
    return None


#: The columns of a row before the points of each contract (and the message after them).
_ROW_FIELDS = ("student", "path", "status", "points", "max_points", "passed", "total", "seconds")


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
    return (f"[{done}/{total}] {printable(row['student'], newlines=False)}: "
            f"{display_points(row['points'])} of "
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
    columns = [*_ROW_FIELDS, *contracts, "message"]
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
