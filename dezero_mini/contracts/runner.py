"""Run a stage's contracts on a learner's file, safely: ``check_file``.

The learner's code runs in a contained child process
(``dezero_mini.contracts.worker``, started by ``sandbox.start_worker``: in
bubblewrap's sandbox where it can run, see ``bubblewrap``; isolated, in a
scratch folder, with a whitelisted environment and resource limits, killed
whole with its descendants), so that a file that raises,
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

* before any of its code runs, a file that is the course's own reference,
  or that imports the stage's names, is refused (``provenance``: the worker
  reads the file's syntax, under its limits, and sends the parent a digest;
  the parent itself never parses a submission, and takes none over 1 MiB);
* results come on a channel of their own, each line signed with a secret of
  the run (``channel``): an unsigned or out-of-order line is tampering, as
  is a change to the instruments the worker sealed;
* the training record's figures come on that channel batch by batch, as
  they are taken (``figures``): a figures line out of order, twice or after
  the record's end is tampering, and so is a result whose record differs
  from the figures streamed (rewritten by the file's code after they were taken);
* a flat-memory pass is held against the resident memory of the worker's
  whole process tree, which the parent reads from /proc (its rise from the
  lowest point, and its peak against the stage's budget); the bytes of the
  installation's files are compared before and after the check: a change
  is never counted, and it is laid at another process's door when the file
  ran in the sandbox, where the installation is read-only
  (``changed_by_another_process``).
"""
import hashlib
import json
import os
import re
import select
import selectors
import signal
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from dezero_mini.atomic import not_a_file
from dezero_mini.contracts import get_stage
from dezero_mini.contracts.bench import BATCHES
from dezero_mini.contracts.channel import Reader, Tampered, new_key
from dezero_mini.contracts.figures import FigureStream, Forged
from dezero_mini.contracts.provenance import MAX_SUBMISSION_BYTES, reference_of, too_large
from dezero_mini.contracts.scoring import Weights, select_contracts
from dezero_mini.contracts import bubblewrap
from dezero_mini.contracts.sandbox import (MIB, Limits, describe_limit, end_worker, start_worker,
                                           writable_in_sandbox)
from dezero_mini.memory.stages import steps_dir
from dezero_mini.printable import first_of

#: Seconds that loading the file, and then each contract, may take.
DEFAULT_TIMEOUT = 60.0
#: Seconds that a whole check may take: 6 times the slowest reference stage
#: (stage 10: 20 s at the default batches, on a 2-core machine under a load of 12).
DEFAULT_TOTAL_TIMEOUT = 120.0
#: The contracts whose pass says that memory stays flat over the training
#: record: the parent holds them against the worker's RSS growth.
FLAT_MEMORY_CONTRACTS = frozenset({"traced_bytes_flat"})
#: The RSS growth (bytes, the rise above the lowest point since the file
#: loaded, up to the end of such a contract) beyond which a flat-memory pass
#: contradicts what /proc shows, at most (``rss_growth_allowed``). The
#: reference stages 03-10 grow by at most 26 MiB over their whole check.
RSS_GROWTH_ALLOWED = 128 * MIB
#: The allowance below that cap: a floor, and so much per batch of the
#: record. A file that hides memory from tracemalloc hides it batch after
#: batch: what it may hide without a contradiction follows the batches run,
#: and a shorter record is as sure. The reference stages 03-10 grow by at most
#: 7 MiB up to the end of ``traced_bytes_flat``, at 50 batches as at 200
#: (2026-11-28): the floor leaves twice that.
RSS_GROWTH_FLOOR = 16 * MIB
RSS_GROWTH_PER_BATCH = MIB // 4


def rss_growth_allowed(batches):
    """The RSS growth (bytes) that a flat-memory pass over a record of
    ``batches`` batches stands with: ``RSS_GROWTH_FLOOR`` and
    ``RSS_GROWTH_PER_BATCH`` a batch, at most ``RSS_GROWTH_ALLOWED`` (16 +
    12.5 = 28.5 MiB at the default 50 batches, 66 MiB at 200)."""
    return min(RSS_GROWTH_ALLOWED, RSS_GROWTH_FLOOR + batches * RSS_GROWTH_PER_BATCH)
#: How ``check_file`` may run the learner's file: in bubblewrap's sandbox
#: where it can run, only there, or never (see its docstring).
SANDBOX_MODES = ("auto", "required", "off")
#: The highest RSS (MiB) of the worker over the whole check of each stage's
#: own file (``check N steps/stepNN_*.py --allow-reference``, 200 batches, more than
#: the default;
#: the larger of two runs, Python 3.11, NumPy 2.4, Linux x86-64).
REFERENCE_PEAK_MIB = {1: 229, 2: 229, 3: 50, 4: 50, 5: 65, 6: 66, 7: 66, 8: 59, 9: 59, 10: 68}
#: How far above its stage's reference peak the worker's RSS may go before a
#: flat-memory pass is a contradiction. A file could hold a ballast from
#: loading and free it as its graphs grow (its RSS then stays flat): this
#: caps what it can hide that way at the growth allowance.
PEAK_MARGIN = RSS_GROWTH_ALLOWED


def memory_budget(number):
    """The highest RSS (bytes) that a flat-memory pass of stage ``number``
    stands with: the stage's reference peak and ``PEAK_MARGIN``."""
    peak = REFERENCE_PEAK_MIB.get(number, max(REFERENCE_PEAK_MIB.values()))
    return peak * MIB + PEAK_MARGIN
#: Characters of the learner's output that the report keeps.
OUTPUT_LIMIT = 2000


@dataclass
class ContractResult:
    """One contract on the learner's file. ``error`` is None when the
    measurement ran; "raised", "timeout", "crashed" or "contradiction" when it
    could not or was contradicted from outside; "missing" when the file lacks
    a name that the contract's stage needs (it was not run: those of earlier
    stages were); "not_loaded" when the file could not be checked
    (``CheckReport.settle``). ``points``: what it
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
    says why). ``reference``: the name of the course's own step file that
    the file is (``provenance.reference_of``), or None; refused unless the
    check allowed it, and never a learner's work to grade."""

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
    sandboxed: bool = False
    reference: object = None

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
            measured = (self.message if str(self.message).startswith(NOT_COUNTED)
                        else f"{reason}: {self.message}")
            self.results = [_result(
                contract, passed=False, expected=contract.summary,
                measured=measured, seconds=0, error="not_loaded")
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


#: How a report that the checker could not trust from outside the file
#: begins (its contracts' lines say only this).
NOT_COUNTED = "not counted: "


#: The errors that reading a value of an unforeseen shape raises (a JSON
#: that does not parse, a number where a string was due, a missing key).
_UNFORESEEN_SHAPES = (ValueError, TypeError, LookupError, AttributeError, ArithmeticError)


class CheckStopped(Exception):
    """The ``stop`` event of ``check_file`` was set: the worker and its
    processes were killed, and there is no report."""


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


def where_it_hung(stack_text, path):
    """``"step03.py line 87 (in backward)"``: the innermost frame of the
    learner's file in a ``faulthandler`` dump, or None. Read line by line
    (``  File "NAME", line N in FUNCTION``), each once: the dump comes from a
    pipe that the learner's code can write too, and a regular expression
    over frames that never end (``File "`` repeated, 60,000 bytes) took the
    grading process 15 s, growing with the square of their length."""
    for line in stack_text.splitlines():
        line = line.strip()
        if not line.startswith('File "'):
            continue
        name, found, rest = line[len('File "'):].rpartition('", line ')
        number, _, function = rest.partition(" in ")
        if not found or not number.isdigit() or not function or " " in function:
            continue
        # The name as the worker was given it (the resolved path): compared as
        # a string, never looked up, since the dump may say anything (a name
        # with a NUL byte made Path.resolve raise in the grading process).
        if name == str(path):
            return f"{path.name} line {number} (in {function})"
    return None


class _Child:
    """One contained worker (``sandbox.start_worker``: in bubblewrap's
    sandbox when ``sandboxed``), the events it has sent on its authenticated
    channel, and the memory of its whole process tree as the kernel shows
    it (``rss``, ``rss_peak``, ``rss_loaded``, ``rss_growth``; the name
    stays RSS: a cgroup's charge where there is one, else the sum of the
    processes' resident sizes)."""

    RSS_EVERY = 0.05  # seconds between two readings of the worker's memory

    def __init__(self, path, number, batches, names, output, limits, sandboxed, readable):
        self.path, self.output, self.limits, self.batches = path, output, limits, batches
        read_end, write_end = os.pipe()
        self.stack_read, stack_write = os.pipe()  # faulthandler's dump: never a file
        key = new_key()
        try:
            self.worker = start_worker(
                "dezero_mini.contracts.worker",
                [str(path), str(number), str(batches), str(write_end), str(stack_write), *names],
                limits=limits, pass_fds=(write_end, stack_write), sandboxed=sandboxed,
                readable=readable)
        except BaseException:
            os.close(read_end)
            os.close(self.stack_read)
            raise
        finally:
            os.close(write_end)
            os.close(stack_write)
        self.process = self.worker.process
        os.set_blocking(self.stack_read, False)
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
        self.memory_killed = False
        self.rss = self.rss_peak = self.rss_loaded = self.rss_low = None
        self.rss_rise = 0
        self._rss_read_at = 0.0
        self.figures = FigureStream(batches)  # the training record, as it was taken

    def _sample_rss(self):
        now = time.monotonic()
        if now - self._rss_read_at >= self.RSS_EVERY:
            self._rss_read_at = now
            rss = self.worker.memory()
            if rss is not None:
                self.rss = rss
                self.rss_peak = max(rss, self.rss_peak or 0)
                if self.rss_low is not None:  # loaded: the rise above the lowest point so far
                    self.rss_low = min(self.rss_low, rss)
                    self.rss_rise = max(self.rss_rise, rss - self.rss_low)

    def mark_loaded(self):
        """Start the RSS cross-check from here (the file and NumPy are in)."""
        self._rss_read_at = 0.0
        self._sample_rss()
        self.rss_loaded = self.rss_peak = self.rss_low = self.rss
        self.rss_rise = 0

    @property
    def rss_growth(self):
        """How much the worker's RSS rose since it was loaded (bytes), from
        the lowest point before each reading rather than from its size once
        loaded: memory held while loading and freed later (a ballast) hides
        no growth."""
        return self.rss_rise if self.rss_low is not None else 0

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

    def next_event(self, deadline, stop=None):
        """The next event, or "timeout" when ``deadline`` passes first, or
        None when the worker has ended. Raises ``Tampered`` for a line on
        the channel that the worker's checker did not sign, ``CheckStopped``
        once ``stop`` (a ``threading.Event``) is set."""
        while True:
            line, newline, rest = self.pending.partition(b"\n")
            if newline:
                self.pending = rest
                return self.reader.read(line)
            self.reader.check_pending(self.pending)
            if stop is not None and stop.is_set():
                raise CheckStopped("the check was stopped")
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
        """Ask the worker for its stack (SIGUSR1: ``faulthandler`` writes it
        on a pipe of the checker's) and return where the learner's file
        was, or None. Reads for at most a second, at most 100,000 bytes."""
        pid = self.worker.pid
        if pid is None:
            return None
        self._drain_stack_pipe()  # what was there before the question is not the answer
        try:
            os.kill(pid, signal.SIGUSR1)
        except (ProcessLookupError, PermissionError):
            return None
        deadline, dump, quiet_since = time.monotonic() + 1.0, b"", None
        while time.monotonic() < deadline and len(dump) < 100_000:
            ready, _, _ = select.select([self.stack_read], [], [], 0.05)
            data = b""
            if ready:
                try:
                    data = os.read(self.stack_read, 100_000 - len(dump))
                except BlockingIOError:
                    pass
            if data:
                dump, quiet_since = dump + data, None
            elif dump:
                quiet_since = quiet_since or time.monotonic()
                if time.monotonic() - quiet_since >= 0.1:
                    break
        return where_it_hung(dump.decode("utf-8", "replace"), self.path) if dump else None

    def _drain_stack_pipe(self):
        """Read and drop what the stack dump's pipe holds now: only
        ``faulthandler`` writes there honestly, and only when asked."""
        for _ in range(64):  # (at most 4 MiB: the pipe holds 64 KiB unless the file refills it)
            try:
                if not os.read(self.stack_read, 65536):
                    return
            except (BlockingIOError, OSError):
                return

    def printed(self):
        """What this worker printed (the part the report keeps)."""
        return self.output.kept[self.output_start:].decode("utf-8", "replace")

    def finish(self, grace=0.0):
        """Kill the worker and every process it started (after ``grace``
        seconds for it to end on its own), drain its output; return its exit
        code (None if unknown)."""
        code = end_worker(self.worker, grace)
        self.memory_killed = self.worker.memory_killed()
        try:
            self._read(0)
        except OSError:
            pass
        self.selector.close()
        self.channel.close()
        self.process.stdout.close()
        os.close(self.stack_read)
        return code


def _result(contract, *, passed, expected, measured, seconds, error=None):
    return ContractResult(
        name=contract.name, from_stage=contract.stage, until_stage=contract.until,
        summary=contract.summary, passed=passed, expected=expected, measured=measured,
        hint=contract.hint, seconds=round(seconds, 3), error=error)


def _installation_sources():
    """The source files of the course's installation that a later check
    would run: the package and the step files, and in ``site-packages`` the
    ``.pth`` files, the modules they import (an editable install's finder)
    and ``*customize.py``."""
    from dezero_mini.memory.stages import steps_dir

    sources = [*Path(__file__).resolve().parents[1].rglob("*.py"), *steps_dir().glob("*.py")]
    for entry in sys.path:
        if entry and os.path.isdir(entry) and "site-packages" in entry:
            folder = Path(entry)
            sources += [*folder.glob("*.pth"), *folder.glob("*customize.py"),
                        *folder.glob("__editable__*.py")]
            for pth in folder.glob("*.pth"):
                sources += _imported_by_pth(pth, entry)
    return sorted(set(sources))


def _imported_by_pth(pth, folder):
    """The source files of the modules that the ``import`` lines of the
    ``.pth`` file ``pth`` import (``site`` runs those lines at every start)."""
    from importlib.machinery import PathFinder

    try:
        lines = pth.read_text(errors="replace").splitlines()
    except OSError:
        return []
    found = []
    for line in lines:
        if re.match(r"import[ \t]", line):
            for name in re.findall(r"(?:import|,)\s*([A-Za-z_][\w.]*)", line):
                spec = PathFinder.find_spec(name.split(".")[0], [folder])
                if spec is not None and spec.origin and spec.origin.endswith(".py"):
                    found.append(Path(spec.origin))
    return found


def _bytecode_of(sources):
    """The bytecode file of each ``.py`` source (``__pycache__``: Python runs a
    ``.pyc`` whose header matches its source without reading the source
    again), written first where it is missing or stale: then only a
    submission changes it during a check, not the first import of a module."""
    import importlib.util
    import py_compile

    files = []
    for source in sources:
        if source.suffix != ".py":
            continue
        cached = Path(importlib.util.cache_from_source(str(source)))
        files.append(cached)
        try:
            info = source.stat()
            with open(cached, "rb") as pyc:
                header = pyc.read(16)
            current = header == (importlib.util.MAGIC_NUMBER + bytes(4)
                                 + (int(info.st_mtime) & 0xFFFFFFFF).to_bytes(4, "little")
                                 + (info.st_size & 0xFFFFFFFF).to_bytes(4, "little"))
        except OSError:
            current = False
        writable = os.access(cached.parent if cached.parent.exists() else source.parent, os.W_OK)
        if not current and writable:  # (where nobody may write it, no import writes it either)
            try:
                py_compile.compile(str(source), cfile=str(cached), doraise=True,
                                   invalidation_mode=py_compile.PycInvalidationMode.TIMESTAMP)
            except (OSError, py_compile.PyCompileError):
                pass  # a source that does not compile: no import writes its bytecode either
    return files


#: (path, size, mtime, ctime, inode) -> sha256 of the file's bytes, for the
#: files read already in this process (the state is taken before and after a check).
_digests = {}


def installation_state():
    """``{path: sha256 of its bytes}`` of each file of the course's
    installation that a later check would run (``_installation_sources``,
    and their bytecode: ``_bytecode_of``). The bytes, not the times nor the
    inode: what runs is the bytes, and a file written again as it was (pip
    reinstalling the same course, another check writing the same bytecode,
    an editable install rewriting its ``.pth``) changes nothing."""
    sources = _installation_sources()
    state = {}
    for file in [*sources, *_bytecode_of(sources)]:
        try:
            info = file.stat()
            key = (str(file), info.st_size, info.st_mtime_ns, info.st_ctime_ns, info.st_ino)
            if key not in _digests:
                _digests[key] = _digest(file.read_bytes(), bytecode=file.suffix == ".pyc")
        except OSError:
            continue
        state[str(file)] = _digests[key]
    return state


def _digest(data, bytecode=False):
    """The sha256 of a file's bytes; of a bytecode file validated by its
    source's time and size (flags 0 in its header), the bytes without those
    two fields: a ``.pyc`` written again for a source written again as it
    was (pip reinstalling the course compiles its finder anew) runs the same
    code, while one whose code differs is a change. (Such a ``.pyc`` runs
    only while the fields match its source: else Python compiles the source,
    whose bytes are looked at too; every one was written fresh before the
    first look, ``_bytecode_of``.)"""
    if bytecode and len(data) >= 16 and data[4:8] == bytes(4):
        data = data[:8] + data[16:]
    return hashlib.sha256(data).hexdigest()


def changed_files(before, after):
    """The files whose state differs between two ``installation_state``s
    (changed, made or removed), sorted."""
    return sorted(name for name in before.keys() | after.keys() if before.get(name) != after.get(name))


def changed_by_another_process(changed, sandboxed, readable=()):
    """Whether the installation's files ``changed`` while the learner's code
    ran were surely changed by another process than the file's: it ran in
    bubblewrap's sandbox (``sandboxed``; it saw ``readable``) and could write
    none of them there (``sandbox.writable_in_sandbox``: read-only, or out of
    its sight). False without the sandbox, or where the sandbox could not
    say: then nobody can tell. Either way the result is not counted: it was
    measured against a course that changed under it."""
    return sandboxed and writable_in_sandbox(changed, readable) == []


def files_named(changed):
    """The first three of the files ``changed``, and how many more."""
    return first_of(changed)


def installation_changed_message(changed, by_another_process):
    """The report's message when the installation's files ``changed``
    during a check (``changed_by_another_process``: whether surely by
    another process than the file's)."""
    if by_another_process:
        return (f"{NOT_COUNTED}the course's installation changed while checking (another "
                f"process reinstalled it?): {files_named(changed)}; the file could not have "
                "changed it (read-only in its sandbox); check again once it is stable")
    return (f"{NOT_COUNTED}the installation changed during the check (by the file or by another "
            f"process): {files_named(changed)}; reinstall the course if the file may have "
            "changed it, and check again once it is stable")


def _refuse_before_running(report, path):
    """What the parent refuses without reading the file: a name that does
    not end in ``.py`` (Python would not import it), a size over
    ``MAX_SUBMISSION_BYTES`` (the worker reads no more either). Sets the
    report's error and returns True when the file is refused. (Its syntax
    is read in the worker, before any of its code runs: ``_refused_read``.)"""
    if path.suffix != ".py":  # (``path`` is resolved: a link's target counts)
        report.status, report.message = "error", (
            f"cannot be checked: {path.name} is not a Python file (its name does not end in "
            ".py): give the path of your stage file, stepNN_<name>.py")
        return True
    try:
        size = path.stat().st_size
    except OSError as error:
        report.status, report.message = "error", (
            f"cannot be checked: cannot read {path.name}: {error.strerror or error}")
        return True
    if size > MAX_SUBMISSION_BYTES:
        report.status, report.message = "error", f"cannot be checked: {too_large(path)}"
        return True
    return False


def _refused_read(report, event, path, number, allow_reference):
    """Why the file is refused, from the worker's ``read`` event (the
    fingerprint of its syntax tree): the course's own reference, unless
    ``allow_reference``; or None. A reference is named in
    ``report.reference`` either way."""
    reference = reference_of(event.get("fingerprint"), number)
    if reference is None:
        return None
    report.reference = reference.name
    if allow_reference:
        return None
    return (f"{path.name} is the course's own {reference.name} (comments, docstrings and "
            "layout aside): a submission must be the learner's own work")


def _limit_text(limits, code, text, memory_killed=False):
    reason = describe_limit(limits, code, text, memory_killed)
    return f": {reason}" if reason else ""


def check_file(number, path, *, timeout=DEFAULT_TIMEOUT, total_timeout=DEFAULT_TOTAL_TIMEOUT,
               batches=BATCHES, limits=Limits(), allow_reference=False, names=None,
               weights=None, sandbox="auto", on_step=None, stop=None):
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
    own ``steps/`` (refused by default, as grading must: it is not a
    learner's work; self-study checks it, and ``report.reference`` names it).
    ``sandbox``: "auto" runs the file in bubblewrap's sandbox where it can
    run (``bubblewrap.sandbox_problem``) and contained without it elsewhere,
    "required" refuses to check without it (an error report), "off" never
    uses it; ``report.sandboxed`` says which it was.
    ``on_step(what)``, when given, hears each step as it starts: "loading the file",
    then each contract's name (a progress display's cue; it must not raise).
    ``stop``: a ``threading.Event`` that another thread sets to end the check
    at once (within ``_Child.RSS_EVERY``): the worker is killed and
    ``CheckStopped`` raised (``progress`` stops its other checks so on Ctrl-C).
    """
    if sandbox not in SANDBOX_MODES:
        raise ValueError(f"sandbox must be one of {', '.join(SANDBOX_MODES)}, not {sandbox!r}")
    started = time.monotonic()
    stage = get_stage(number)  # ValueError for a stage without contracts
    selected = select_contracts(number, names)
    points = (weights or Weights()).points_at(number, selected)
    report = _check(stage, Path(path), selected, timeout=timeout, total_timeout=total_timeout,
                    batches=batches, limits=limits, allow_reference=allow_reference,
                    total_deadline=started + total_timeout, sandbox=sandbox,
                    on_step=on_step or (lambda what: None), stop=stop)
    report.settle(selected, points)
    report.seconds = round(time.monotonic() - started, 2)
    return report


def _check(stage, path, selected, *, timeout, total_timeout, batches, limits, allow_reference,
           total_deadline, sandbox, on_step, stop=None):
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
    if _refuse_before_running(report, path):
        return report
    problem = bubblewrap.sandbox_problem() if sandbox != "off" else None
    if sandbox == "required" and problem:
        report.status, report.message = "error", (
            f"cannot check {path.name} in its sandbox: {problem} (a grader who accepts the "
            "risk grades without it with --sandbox auto)")
        return report
    report.sandboxed = sandbox != "off" and problem is None
    readable = [str(path), *bubblewrap.visible_step_files(number, steps_dir())]
    contracts = {contract.name: contract for contract in selected}
    left = list(contracts)
    output = _Output(OUTPUT_LIMIT)
    installation = installation_state()
    try:
        while left and report.status != "error":
            on_step("loading the file")
            child = _Child(path, number, batches, left, output, limits, report.sandboxed, readable)
            timed_out, current, began, location = None, None, time.monotonic(), None
            try:
                while True:
                    deadline = min(began + timeout, total_deadline)
                    try:
                        event = child.next_event(deadline, stop)
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
                        report.message = (event["message"]
                                          + _limit_text(limits, None, event["message"]))
                        break
                    if kind == "tampered":
                        report.status, report.message = (
                            "error", f"tampering detected: {event['message']}")
                        break
                    if kind == "read":
                        refusal = _refused_read(report, event, path, number, allow_reference)
                        if refusal:
                            report.status, report.message = "error", refusal
                            break
                    elif kind == "loaded":
                        child.mark_loaded()
                    elif kind == "start" and event.get("name") in left:
                        current, began = event["name"], time.monotonic()
                        on_step(current)
                    elif kind in ("figures", "figures_end") and current is not None:
                        try:
                            child.figures.receive(event, current)
                        except Forged as error:
                            report.status, report.message = "error", (
                                f"tampering detected: while {current} ran, the worker streamed "
                                f"{error}")
                            break
                    elif kind == "result" and event.get("name") == current:
                        try:
                            child.figures.check(
                                event.get("records"), current,
                                required=(contracts[current].reads_record
                                          and event.get("error") is None))
                        except Forged as error:
                            report.status, report.message = "error", f"tampering detected: {error}"
                            break
                        report.results.append(_checked_result(contracts[current], event, child,
                                                              limits, time.monotonic() - began,
                                                              number))
                        left.remove(current)
                        current, began = None, time.monotonic()
                        if not left:
                            break
                    else:
                        report.status, report.message = "error", (
                            f"tampering detected: the worker sent an event out of order: {event!r}")
                        break
            finally:  # a worker that closed its channel is ending: bwrap then says how
                code = child.finish(grace=0.0 if child.channel_open else 1.0)
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
                                      + _limit_text(limits, code, child.printed(),
                                                    child.memory_killed))
                break
            if timed_out == "contract":
                what = f"timed out after {timeout:g} s{where}"
            elif timed_out == "total":
                what = (f"timed out: the check's total time limit of {total_timeout:g} s ran "
                        f"out{where}")
            else:
                what = (f"the process ended (exit code {code}) while measuring"
                        + _limit_text(limits, code, child.printed(), child.memory_killed))
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
    except _UNFORESEEN_SHAPES as error:
        # What the worker sends (its signed events, its stack dump) comes from
        # a process that runs the learner's file: a shape the checker did not
        # foresee must end this check in a report, never in a traceback that
        # skips the comparison of the installation below. (The errors that
        # reading data of the wrong shape raises; not the checker's own
        # control flow: CheckStopped, the command's Interrupted on a signal.)
        report.status, report.message = "error", (
            f"cannot trust this check: reading what the worker sent raised "
            f"{type(error).__name__}: {str(error)[:200]} (a file that writes on the checker's "
            "channel or stack pipe?)")
    changed = changed_files(installation, installation_state())
    if changed:  # (whatever the check said: it measured a course that changed under it)
        said = f"; the check said before: {report.message}" if report.status == "error" else ""
        report.status, report.message = "error", installation_changed_message(
            changed, changed_by_another_process(changed, report.sandboxed, readable)) + said
    if report.status != "error" and not all(result.passed for result in report.results):
        report.status = "failed"
    report.output, report.output_truncated = output.text, bool(output.dropped)
    return report


def _checked_result(contract, event, child, limits, seconds, number):
    """The ``ContractResult`` of a result event, cross-checked from outside:
    a flat-memory claim against the worker's RSS (read from /proc: its rise
    since loading, and its peak against the stage's ``memory_budget``), a
    raised MemoryError against the memory limit."""
    passed, measured, error = bool(event.get("passed")), str(event.get("measured")), event.get("error")
    if error == "raised":
        measured += _limit_text(limits, None, measured)
    if passed and contract.name in FLAT_MEMORY_CONTRACTS:
        growth, peak, budget = child.rss_growth, child.rss_peak or 0, memory_budget(number)
        if growth > rss_growth_allowed(child.batches):
            passed, error = False, "contradiction"
            measured = (f"the worker reported {measured} while its RSS grew "
                        f"{growth / MIB:.0f} MiB, more than the "
                        f"{rss_growth_allowed(child.batches) / MIB:g} MiB allowed over "
                        f"{child.batches} batches (read from /proc by the checker)")
        elif peak > budget:
            passed, error = False, "contradiction"
            measured = (f"the worker reported {measured} while its RSS reached {peak / MIB:.0f} "
                        f"MiB, above the {budget / MIB:.0f} MiB that stage {number:02d} needs "
                        f"at most (its reference's peak and {PEAK_MARGIN // MIB} MiB; read "
                        "from /proc by the checker)")
    return _result(contract, passed=passed, expected=str(event.get("expected")),
                   measured=measured, seconds=seconds, error=error)
