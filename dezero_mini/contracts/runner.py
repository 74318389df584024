"""Run a stage's contracts on a learner's file, safely: ``check_file``.

The learner's code runs in a child process (``dezero_mini.contracts.worker``)
so that a file that raises, loops forever, exits or prints without end
cannot take the checker down:

* each contract (and the loading of the file) has a time limit; when it
  runs out the child is killed, the contract is reported as failed, and a
  fresh child goes on with the contracts that are left;
* a child that dies in the middle of a contract fails that contract the
  same way;
* what the file prints is captured, and only its beginning is kept.
"""
import json
import os
import selectors
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from dezero_mini.contracts import get_stage
from dezero_mini.contracts.bench import BATCHES
from dezero_mini.contracts.scoring import Weights, select_contracts

#: Seconds that loading the file, and then each contract, may take.
DEFAULT_TIMEOUT = 60.0
#: Characters of the learner's output that the report keeps.
OUTPUT_LIMIT = 2000


@dataclass
class ContractResult:
    """One contract on the learner's file. ``error`` is None when the
    measurement ran; "raised", "timeout" or "crashed" when it could not,
    "not_loaded" when the file could not be loaded (``CheckReport.settle``).
    ``points``: what it earned, out of ``max_points``."""

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
        the same for every file checked, whether it loaded or not. A
        contract that did not run (the file could not be loaded) fails with
        the reason. Returns the report."""
        ran = {result.name: result for result in self.results}
        self.results = [ran.get(contract.name) or _result(
            contract, passed=False, expected=contract.summary,
            measured=f"the file could not be loaded: {self.message}", seconds=0,
            error="not_loaded") for contract in contracts]
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


class _Child:
    """One worker process and the events it has sent."""

    def __init__(self, path, number, batches, names, output):
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "dezero_mini.contracts.worker", str(path), str(number),
             str(batches), *names],
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
        self.output = output
        self.selector = selectors.DefaultSelector()
        for stream in (self.process.stdout, self.process.stderr):
            os.set_blocking(stream.fileno(), False)
            self.selector.register(stream, selectors.EVENT_READ)
        self.pending = b""
        self.open_streams = 2

    def next_event(self, deadline):
        """The next event, or "timeout" when ``deadline`` passes first, or
        None when the child has closed its channel (it ended)."""
        while True:
            line, newline, rest = self.pending.partition(b"\n")
            if newline:
                self.pending = rest
                return json.loads(line)
            if self.open_streams == 0:
                return None
            left = deadline - time.monotonic()
            if left <= 0:
                return "timeout"
            for key, _ in self.selector.select(timeout=left):
                data = os.read(key.fileobj.fileno(), 65536)
                if not data:
                    self.selector.unregister(key.fileobj)
                    self.open_streams -= 1
                elif key.fileobj is self.process.stdout:
                    self.pending += data
                else:
                    self.output.add(data)

    def finish(self, kill=False):
        """Stop the child (killed when ``kill``) and return its exit code."""
        if kill and self.process.poll() is None:
            self.process.kill()
        # Drain what is left so that the child is not blocked on a full pipe.
        deadline = time.monotonic() + 5
        while self.open_streams and time.monotonic() < deadline:
            if self.next_event(deadline) is None:
                break
        self.selector.close()
        self.process.stdout.close()
        self.process.stderr.close()
        try:
            return self.process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.process.kill()
            return self.process.wait()


def _result(contract, *, passed, expected, measured, seconds, error=None):
    return ContractResult(
        name=contract.name, from_stage=contract.stage, until_stage=contract.until,
        summary=contract.summary, passed=passed, expected=expected, measured=measured,
        hint=contract.hint, seconds=round(seconds, 3), error=error)


def check_file(number, path, *, timeout=DEFAULT_TIMEOUT, batches=BATCHES, names=None,
               weights=None):
    """Hold the file ``path`` to every contract of stage ``number`` (or only
    to those named in ``names``: ValueError for a name the stage lacks).

    Returns a ``CheckReport`` that lists every one of these contracts, with
    its points (``weights``: a ``scoring.Weights``, default new 2, inherited 1).
    ``timeout``: seconds for loading the file and for each contract.
    ``batches``: batches of the training record that several contracts read
    (the tests of the course use 200).
    """
    started = time.monotonic()
    stage = get_stage(number)  # ValueError for a stage without contracts
    selected = select_contracts(number, names)
    points = (weights or Weights()).points_at(number, selected)
    report = _check(stage, Path(path), selected, timeout=timeout, batches=batches)
    report.settle(selected, points)
    report.seconds = round(time.monotonic() - started, 2)
    return report


def _check(stage, path, selected, *, timeout, batches):
    """Run the contracts ``selected`` on ``path`` in worker processes."""
    number = stage.number
    report = CheckReport(stage=stage.number, stage_name=stage.name, stage_title=stage.title,
                         file=str(path), status="passed")
    if not path.is_file():
        report.status, report.message = "error", f"no such file: {str(path)!r}"
        return report
    contracts = {contract.name: contract for contract in selected}
    left = list(contracts)
    output = _Output(OUTPUT_LIMIT)
    while left and report.status != "error":
        child = _Child(path.resolve(), number, batches, left, output)
        kill, current, began = False, None, time.monotonic()
        try:
            while True:
                event = child.next_event(began + timeout)
                if event == "timeout" or event is None:
                    kill = event == "timeout"
                    what = (f"timed out after {timeout:g} s" if kill else
                            "the process ended (exit code {code}) while measuring")
                    break
                if event["event"] == "error":
                    report.status, report.message = "error", event["message"]
                    break
                if event["event"] == "start":
                    current, began = event["name"], time.monotonic()
                elif event["event"] == "result":
                    contract = contracts[event["name"]]
                    report.results.append(_result(
                        contract, passed=event["passed"], expected=event["expected"],
                        measured=event["measured"], seconds=time.monotonic() - began,
                        error=event["error"]))
                    left.remove(event["name"])
                    current, began = None, time.monotonic()
                    if not left:
                        break
        finally:
            code = child.finish(kill=kill or bool(left))
        if report.status == "error" or not left:
            break
        what = what.format(code=code)
        if current is None:  # the file itself: loading it hung or killed the process
            report.status = "error"
            report.message = (f"cannot load {path.name}: " + (
                f"importing it took longer than {timeout:g} s (a loop at the top level?)"
                if kill else f"the process ended (exit code {code}) while importing it"))
            break
        contract = contracts[current]
        report.results.append(_result(contract, passed=False, expected=contract.summary,
                                      measured=what, seconds=time.monotonic() - began,
                                      error="timeout" if kill else "crashed"))
        left.remove(current)
    if report.status != "error" and not all(result.passed for result in report.results):
        report.status = "failed"
    report.output, report.output_truncated = output.text, bool(output.dropped)
    return report
