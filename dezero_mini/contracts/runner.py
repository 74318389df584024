"""Run a stage's contracts on a learner's file, safely: ``check_file``.

The learner's code runs in a contained child process
(``dezero_mini.contracts.worker``, started by ``sandbox.start_worker``:
isolated, in a scratch folder, with a whitelisted environment and resource
limits, killed whole with its descendants), so that a file that raises,
loops forever, exits, forks or prints without end cannot take the checker
down nor outlive it:

* the check has one deadline (``total_timeout``), and each contract (and
  the loading of the file) its own within it; when one runs out the child
  is asked where the learner's file was (a ``faulthandler`` dump), killed,
  the contract is reported as failed with that place, and a fresh child
  goes on with the contracts that are left (none when the total ran out);
* a child that dies in the middle of a contract fails that contract the
  same way, naming the resource limit it met if it met one;
* what the file prints is captured, and only its beginning is kept.

And so that a file cannot make the report say what it did not measure:

* before it runs, a file that is the course's own reference, or that
  imports the stage's names, is refused (``provenance``);
* results come on a channel of their own, each line signed with a secret of
  the run (``channel``): an unsigned or out-of-order line is tampering, as
  is a change to the instruments the worker sealed;
* a flat-memory pass is held against the worker's RSS, which the parent
  reads from /proc; the files of the installation are compared before and
  after the check.
"""
import json
import os
import re
import selectors
import signal
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from dezero_mini.atomic import not_a_file
from dezero_mini.contracts import get_stage, names_needed_at
from dezero_mini.contracts.bench import BATCHES
from dezero_mini.contracts.channel import Reader, Tampered, new_key
from dezero_mini.contracts.provenance import imported_names, reference_of
from dezero_mini.contracts.scoring import Weights, select_contracts
from dezero_mini.contracts.sandbox import (MIB, Limits, describe_limit, end_worker, make_scratch,
                                           remove_scratch, start_worker)

#: Seconds that loading the file, and then each contract, may take.
DEFAULT_TIMEOUT = 60.0
#: Seconds that a whole check may take: 6 times the slowest reference stage
#: (stage 10: 20 s at the default batches, on a 2-core machine under a load of 12).
DEFAULT_TOTAL_TIMEOUT = 120.0
#: The contracts whose pass says that memory stays flat over the training
#: record: the parent holds them against the worker's RSS growth.
FLAT_MEMORY_CONTRACTS = frozenset({"traced_bytes_flat"})
#: The RSS growth (bytes, from the file loaded to the end of such a contract)
#: beyond which a flat-memory pass contradicts what /proc shows. The reference
#: stages 03-10 grow by at most 26 MiB over their whole check.
RSS_GROWTH_ALLOWED = 128 * MIB
#: Characters of the learner's output that the report keeps.
OUTPUT_LIMIT = 2000


@dataclass
class ContractResult:
    """One contract on the learner's file. ``error`` is None when the
    measurement ran; "raised", "timeout", "crashed" or "contradiction" when it
    could not or was contradicted from outside; "not_loaded" when the file
    could not be checked (``CheckReport.settle``). ``points``: what it
    earned, out of ``max_points``."""

    name: str
    from_stage: int
    until_stage: object
    summary: str
    passed: bool
    expected: str
    measured: str
    hint: str
    seconds: float
    error: object = None
    points: float = 0
    max_points: float = 0


@dataclass
class CheckReport:
    """The outcome of ``check_file``. ``status``: "passed", "failed" (a
    contract fails) or "error" (the file could not be checked: ``message``
    says why)."""

    stage: int
    stage_name: str
    stage_title: str
    file: str
    status: str
    message: object = None
    results: list = field(default_factory=list)
    output: str = ""
    output_truncated: bool = False
    seconds: float = 0.0

    @property
    def exit_code(self):
        """0 all pass, 1 a contract fails, 2 the file could not be checked."""
        return {"passed": 0, "failed": 1}.get(self.status, 2)

    def as_dict(self):
        data = asdict(self)
        data["contracts"] = data.pop("results")
        data["exit_code"] = self.exit_code
        data["passed"] = sum(result.passed for result in self.results)
        data["total"] = len(self.results)
        data["points"] = self.points
        data["max_points"] = self.max_points
        return data

    def settle(self, contracts, points):
        """Give every contract of ``contracts`` its place in the report, in
        course order, with its points (``{name: points}``): the total is then
        the same for every file checked, whether it loaded or not. When the
        file could not be checked (status "error": it does not load, it is
        not the learner's own, it tampered with the check), every contract
        fails with the reason and earns nothing, even one that had passed
        before the check was stopped. Returns the report."""
        ran = {result.name: result for result in self.results}
        if self.status == "error":
            reason = ("the file could not be loaded" if not ran else "not counted")
            self.results = [_result(
                contract, passed=False, expected=contract.summary,
                measured=f"{reason}: {self.message}", seconds=0, error="not_loaded")
                for contract in contracts]
        else:
            self.results = [ran[contract.name] for contract in contracts]
        for result in self.results:
            result.max_points = points[result.name]
            result.points = result.max_points if result.passed else 0
        return self

    @property
    def points(self):
        """The points earned (rounded: weights such as 0.1 add up inexactly)."""
        return round(sum(result.points for result in self.results), 6)

    @property
    def max_points(self):
        return round(sum(result.max_points for result in self.results), 6)

    def to_json(self):
        return json.dumps(self.as_dict(), indent=2)


class _Output:
    """The beginning of what the child printed; the rest is counted, not kept."""

    def __init__(self, limit):
        self.limit, self.kept, self.dropped = limit, bytearray(), 0

    def add(self, data):
        room = max(self.limit - len(self.kept), 0)
        self.kept += data[:room]
        self.dropped += max(len(data) - room, 0)

    @property
    def text(self):
        text = self.kept.decode("utf-8", "replace")
        if self.dropped:
            text += f"\n... ({self.dropped} more bytes not shown)"
        return text


def _rss_bytes(pid):
    """The resident memory of process ``pid`` (``VmRSS`` in /proc), or None."""
    try:
        with open(f"/proc/{pid}/status") as status:
            for line in status:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def where_it_hung(stack_text, path):
    """``"step03.py line 87 (in backward)"``: the innermost frame of the
    learner's file in a ``faulthandler`` dump, or None."""
    for match in re.finditer(r'File "(.*)", line (\d+) in (\S+)', stack_text):
        if Path(match.group(1)).resolve() == path:
            return f"{path.name} line {match.group(2)} (in {match.group(3)})"
    return None


class _Child:
    """One contained worker process (``sandbox.start_worker``), the events it
    has sent on its authenticated channel, and its RSS as /proc shows it."""

    RSS_EVERY = 0.05  # seconds between two readings of the worker's RSS

    def __init__(self, path, number, batches, names, output, limits):
        self.path, self.output, self.limits = path, output, limits
        self.scratch = make_scratch()
        self.stack_file = os.path.join(self.scratch, ".checker_stack.txt")
        read_end, write_end = os.pipe()
        key = new_key()
        try:
            self.process = start_worker(
                "dezero_mini.contracts.worker",
                [str(path), str(number), str(batches), str(write_end), self.stack_file, *names],
                scratch=self.scratch, limits=limits, pass_fds=(write_end,))
        except BaseException:
            os.close(read_end)
            remove_scratch(self.scratch)
            raise
        finally:
            os.close(write_end)
        self.reader = Reader(key)
        try:
            self.process.stdin.write(key.hex().encode() + b"\n")
            self.process.stdin.close()
        except OSError:  # it died already: its exit code says why
            pass
        self.channel = os.fdopen(read_end, "rb", buffering=0)
        self.selector = selectors.DefaultSelector()
        for stream in (self.channel, self.process.stdout):
            os.set_blocking(stream.fileno(), False)
            self.selector.register(stream, selectors.EVENT_READ)
        self.pending, self.channel_open = b"", True
        self.output_start = len(output.kept)
        self.rss = self.rss_peak = self.rss_loaded = None
        self._rss_read_at = 0.0

    def _sample_rss(self):
        now = time.monotonic()
        if now - self._rss_read_at >= self.RSS_EVERY:
            self._rss_read_at = now
            rss = _rss_bytes(self.process.pid)
            if rss is not None:
                self.rss = rss
                self.rss_peak = max(rss, self.rss_peak or 0)

    def mark_loaded(self):
        """Start the RSS cross-check from here (the file and NumPy are in)."""
        self._rss_read_at = 0.0
        self._sample_rss()
        self.rss_loaded, self.rss_peak = self.rss, self.rss

    @property
    def rss_growth(self):
        """How much the worker's RSS grew above its size once loaded (bytes)."""
        if self.rss_loaded is None or self.rss_peak is None:
            return 0
        return self.rss_peak - self.rss_loaded

    def _read(self, timeout):
        for key, _ in self.selector.select(timeout=timeout):
            try:
                data = os.read(key.fileobj.fileno(), 65536)
            except BlockingIOError:
                continue
            if key.fileobj is self.channel:
                if data:
                    self.pending += data
                else:
                    self.selector.unregister(self.channel)
                    self.channel_open = False
            elif data:
                self.output.add(data)
            else:
                self.selector.unregister(self.process.stdout)

    def next_event(self, deadline):
        """The next event, or "timeout" when ``deadline`` passes first, or
        None when the worker has ended. Raises ``Tampered`` for a line on
        the channel that the worker's checker did not sign."""
        while True:
            line, newline, rest = self.pending.partition(b"\n")
            if newline:
                self.pending = rest
                return self.reader.read(line)
            self._sample_rss()
            if not self.channel_open or self.process.poll() is not None:
                self._read(0)  # what it wrote just before it ended
                if b"\n" in self.pending:
                    continue
                return None
            left = deadline - time.monotonic()
            if left <= 0:
                return "timeout"
            self._read(min(left, self.RSS_EVERY))

    def where_it_hangs(self):
        """Ask the worker for its stack (SIGUSR1: ``faulthandler``) and
        return where the learner's file was, or None."""
        try:
            os.kill(self.process.pid, signal.SIGUSR1)
        except ProcessLookupError:
            return None
        deadline, size = time.monotonic() + 1.0, -1
        while time.monotonic() < deadline:
            time.sleep(0.05)
            try:
                now = os.path.getsize(self.stack_file)
            except OSError:
                return None
            if now and now == size:
                break
            size = now
        try:
            with open(self.stack_file, errors="replace") as dump:
                return where_it_hung(dump.read(100_000), self.path)
        except OSError:
            return None

    def printed(self):
        """What this worker printed (the part the report keeps)."""
        return self.output.kept[self.output_start:].decode("utf-8", "replace")

    def finish(self):
        """Kill the worker, its group and its descendants, drain its output,
        remove its scratch folder; return its exit code (None if unknown)."""
        code = end_worker(self.process)
        try:
            self._read(0)
        except OSError:
            pass
        self.selector.close()
        self.channel.close()
        self.process.stdout.close()
        remove_scratch(self.scratch)
        return code


def _result(contract, *, passed, expected, measured, seconds, error=None):
    return ContractResult(
        name=contract.name, from_stage=contract.stage, until_stage=contract.until,
        summary=contract.summary, passed=passed, expected=expected, measured=measured,
        hint=contract.hint, seconds=round(seconds, 3), error=error)


def _installation_state():
    """Size and change time of each file of the course's installation that
    a later check would run (the package, the step files, ``.pth`` files and
    ``*customize.py`` on ``sys.path``): a submission must not change them."""
    from dezero_mini.memory.stages import steps_dir

    files = [*Path(__file__).resolve().parents[1].rglob("*.py"), *steps_dir().glob("*.py")]
    for entry in sys.path:
        if entry and os.path.isdir(entry) and "site-packages" in entry:
            files += [*Path(entry).glob("*.pth"), *Path(entry).glob("*customize.py")]
    state = {}
    for file in files:
        try:
            info = file.stat()
        except OSError:
            continue
        state[str(file)] = (info.st_size, info.st_mtime_ns, info.st_ctime_ns)
    return state


def _changed_files(before, after):
    return sorted(name for name in before.keys() | after.keys() if before.get(name) != after.get(name))


def _refuse_before_running(report, path, number, allow_reference):
    """The checks that need no run (``provenance``): the course's own
    reference, or a needed name that the file does not define. Sets the
    report's error and returns True when the file is refused."""
    if not allow_reference:
        reference = reference_of(path, number)
        if reference is not None:
            report.status, report.message = "error", (
                f"{path.name} is the course's own {reference.name} (comments, docstrings and "
                "layout aside): a submission must be the learner's own work")
            return True
    imported = imported_names(path, names_needed_at(number))
    if imported:
        name, origin = next(iter(imported.items()))
        report.status, report.message = "error", (
            f"{path.name} does not define {', '.join(imported)} itself ({name}: it imports "
            f"{origin}): a submission must define the stage's classes and functions in the file")
        return True
    return False


def _limit_text(limits, code, text):
    reason = describe_limit(limits, code, text)
    return f": {reason}" if reason else ""


def check_file(number, path, *, timeout=DEFAULT_TIMEOUT, total_timeout=DEFAULT_TOTAL_TIMEOUT,
               batches=BATCHES, limits=Limits(), allow_reference=False, names=None,
               weights=None, on_step=None):
    """Hold the file ``path`` to every contract of stage ``number`` (or only
    to those named in ``names``: ValueError for a name the stage lacks).

    Returns a ``CheckReport`` that lists every one of these contracts, with
    its points (``weights``: a ``scoring.Weights``, default new 2, inherited
    1), whether the file could be checked or not. ``timeout``: seconds for loading the file and
    for each contract; ``total_timeout``: seconds for the whole check (the
    contracts that it leaves are reported as not run). ``batches``: batches
    of the training record that several contracts read (the tests of the
    course use 200). ``limits``: the worker's resource limits
    (``sandbox.Limits``). ``allow_reference``: check a file of the course's
    own ``steps/`` (refused by default: it is not a learner's work).
    ``on_step(what)``, when given, hears each step as it starts: "loading the file",
    then each contract's name (a progress display's cue; it must not raise).
    """
    started = time.monotonic()
    stage = get_stage(number)  # ValueError for a stage without contracts
    selected = select_contracts(number, names)
    points = (weights or Weights()).points_at(number, selected)
    report = _check(stage, Path(path), selected, timeout=timeout, total_timeout=total_timeout,
                    batches=batches, limits=limits, allow_reference=allow_reference,
                    total_deadline=started + total_timeout, on_step=on_step or (lambda what: None))
    report.settle(selected, points)
    report.seconds = round(time.monotonic() - started, 2)
    return report


def _check(stage, path, selected, *, timeout, total_timeout, batches, limits, allow_reference,
           total_deadline, on_step):
    """Run the contracts ``selected`` on ``path`` in contained worker processes."""
    number = stage.number
    report = CheckReport(stage=stage.number, stage_name=stage.name, stage_title=stage.title,
                         file=str(path), status="passed")
    what = not_a_file(path)
    if what is not None:  # (a folder or a pipe was "no such file"; a pipe would hang the read)
        report.status, report.message = "error", (
            "no such file: " + repr(str(path)) if what == "does not exist"
            else f"{str(path)!r} {what}; give the path of your stage file")
        return report
    path = path.resolve()
    if _refuse_before_running(report, path, number, allow_reference):
        return report
    contracts = {contract.name: contract for contract in selected}
    left = list(contracts)
    output = _Output(OUTPUT_LIMIT)
    installation = _installation_state()
    while left and report.status != "error":
        on_step("loading the file")
        child = _Child(path, number, batches, left, output, limits)
        timed_out, current, began, location = None, None, time.monotonic(), None
        try:
            while True:
                deadline = min(began + timeout, total_deadline)
                try:
                    event = child.next_event(deadline)
                except Tampered as error:
                    report.status, report.message = "error", (
                        f"tampering detected: the result channel received {error}")
                    break
                if event == "timeout":
                    timed_out = "total" if deadline == total_deadline else "contract"
                    location = child.where_it_hangs()
                    break
                if event is None:
                    break
                kind = event.get("event")
                if kind == "error":
                    report.status = "error"
                    report.message = event["message"] + _limit_text(limits, None, event["message"])
                    break
                if kind == "tampered":
                    report.status, report.message = "error", f"tampering detected: {event['message']}"
                    break
                if kind == "loaded":
                    child.mark_loaded()
                elif kind == "start" and event.get("name") in left:
                    current, began = event["name"], time.monotonic()
                    on_step(current)
                elif kind == "result" and event.get("name") == current:
                    report.results.append(_checked_result(contracts[current], event, child,
                                                          limits, time.monotonic() - began))
                    left.remove(current)
                    current, began = None, time.monotonic()
                    if not left:
                        break
                else:
                    report.status, report.message = "error", (
                        f"tampering detected: the worker sent an event out of order: {event!r}")
                    break
        finally:
            code = child.finish()
        if report.status == "error" or not left:
            break
        where = f"; the file was at {location}" if location else ""
        if current is None:  # the file itself: loading it hung or killed the process
            report.status = "error"
            if timed_out:
                limit = total_timeout if timed_out == "total" else timeout
                report.message = (f"cannot load {path.name}: importing it took longer than "
                                  f"{limit:g} s (a loop at the top level?){where}")
            else:
                report.message = (f"cannot load {path.name}: the process ended (exit code "
                                  f"{code}) while importing it"
                                  + _limit_text(limits, code, child.printed()))
            break
        if timed_out == "contract":
            what = f"timed out after {timeout:g} s{where}"
        elif timed_out == "total":
            what = f"timed out: the check's total time limit of {total_timeout:g} s ran out{where}"
        else:
            what = (f"the process ended (exit code {code}) while measuring"
                    + _limit_text(limits, code, child.printed()))
        contract = contracts[current]
        report.results.append(_result(contract, passed=False, expected=contract.summary,
                                      measured=what, seconds=time.monotonic() - began,
                                      error="timeout" if timed_out else "crashed"))
        left.remove(current)
        if timed_out == "total":
            for name in left:
                report.results.append(_result(
                    contracts[name], passed=False, expected=contracts[name].summary,
                    measured=f"not run: the check's total time limit of {total_timeout:g} s "
                             "ran out", seconds=0.0, error="timeout"))
            left.clear()
    changed = _changed_files(installation, _installation_state())
    if changed:
        report.status, report.message = "error", (
            f"tampering detected: the check changed the grading installation: "
            f"{', '.join(changed[:3])}")
    if report.status != "error" and not all(result.passed for result in report.results):
        report.status = "failed"
    report.output, report.output_truncated = output.text, bool(output.dropped)
    return report


def _checked_result(contract, event, child, limits, seconds):
    """The ``ContractResult`` of a result event, cross-checked from outside:
    a flat-memory claim against the worker's RSS growth (read from /proc),
    a raised MemoryError against the memory limit."""
    passed, measured, error = bool(event.get("passed")), str(event.get("measured")), event.get("error")
    if error == "raised":
        measured += _limit_text(limits, None, measured)
    growth = child.rss_growth
    if passed and contract.name in FLAT_MEMORY_CONTRACTS and growth > RSS_GROWTH_ALLOWED:
        passed, error = False, "contradiction"
        measured = (f"the worker reported {measured} while its RSS grew "
                    f"{growth / MIB:.0f} MiB (read from /proc by the checker)")
    return _result(contract, passed=passed, expected=str(event.get("expected")),
                   measured=measured, seconds=seconds, error=error)
