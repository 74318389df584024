"""The child process of the checker: load a learner's file, run contracts.

Started by ``dezero_mini.contracts.runner`` through
``dezero_mini.contracts.sandbox`` (isolated, in a scratch folder), as
``worker FILE STAGE BATCHES CHANNEL_FD STACK_FD NAME...``, with the
run's secret key (hex) as the first line of its standard input.

It sends its events on the result channel (``CHANNEL_FD``, a pipe of its
own, each line signed: ``dezero_mini.contracts.channel``); what the learner's
file prints goes to standard output and error, which the parent captures and
truncates. Events, in order:

* ``{"event": "read", "fingerprint": ...}`` (the digest of the file's
  syntax tree, read before any of its code runs), or an error when it is
  too large or complex to read or imports a name the stage needs;
* ``{"event": "loaded"}``, or ``{"event": "error", "message": ...}`` when
  the file cannot be imported, lacks a name that the stage needs or did not
  define it itself, or ``{"event": "tampered", "message": ...}``;
* per contract ``{"event": "start", "name": ...}``; while the contract
  takes the training record, one ``{"event": "figures", "batch": i, ...}``
  per batch as its figures are taken and ``{"event": "figures_end", ...}``
  after the final collection (``dezero_mini.contracts.figures``); then
  ``{"event": "result", "name", "passed", "expected", "measured", "error",
  "records"}`` (``error``: None, or what went wrong when the measurement raised, or
  "missing" for a contract not run because the file lacks a name that
  the contract's stage needs: those of earlier stages still run;
  ``records``: the digests of the records the contract read, which the
  parent holds against the figures streamed), or
  ``tampered`` when the measurement's instruments were changed.

Everything the measurement relies on is bound before the learner's file is
imported: the channel, the contracts and ``Contract.check``, and a
``Seal`` of the modules that the measurement reads (the collector, the
tracer, the clock, NumPy, the course's own modules), checked after the file
loads and after each contract. The parent enforces the time limits; on a
hang it sends SIGUSR1, on which ``faulthandler`` writes every thread's stack
to STACK_FD, a pipe that the parent reads (a file that the learner's code
could replace, by a FIFO say, would hang the parent).
"""
import faulthandler
import os
import re
import signal
import sys
import traceback
from pathlib import Path

# Imported here, before the learner's file, so that the Seal covers them.
import gc, hashlib, hmac, json, time, tracemalloc  # noqa: E401, F401

MESSAGE_LIMIT = 500

#: The modules whose functions and classes the measurement reads (with
#: their submodules): replacing one of their attributes is tampering.
SEALED_MODULES = ("builtins", "gc", "tracemalloc", "_tracemalloc", "time", "json", "hmac",
                  "hashlib", "os", "weakref", "functools", "numpy", "dezero_mini")
_PLAIN_VALUES = (bool, int, float, str, bytes, type(None))


def _short(text, limit=MESSAGE_LIMIT):
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def where_in(error, path):
    """``" (line 87 of step04.py)"``: the last line of ``path`` in the
    traceback of ``error``, or an empty string."""
    frames = [frame for frame in traceback.extract_tb(error.__traceback__)
              if Path(frame.filename).resolve() == path]
    return f" (line {frames[-1].lineno} of {path.name})" if frames else ""


def describe(error, path):
    """An exception in one line, with where the learner's file raised it."""
    name = type(error).__name__
    text = f"{name}: {error}" if str(error) else name
    return _short(text) + where_in(error, path)


def learner_module_name(path):
    """A module name for the learner's file that cannot clash with the
    course's own ``stepNN_<name>`` modules (stage 04's contracts load stage 03)."""
    return "learner_" + re.sub(r"\W", "_", path.stem)


FROZEN = ("the file called gc.freeze() or gc.unfreeze(), which moves objects out of the "
          "counts of live objects and out of the collector's reach")


class Seal:
    """What the sealed modules (``SEALED_MODULES``) hold, by identity: each
    attribute of each module, each attribute of each class defined there,
    and the code of each function; and the interpreter's state that the
    measurement relies on (``_interpreter_state``). ``broken()`` names what
    changed since.
    A class's plain values (``Config.enable_backprop``) may change: the
    measurements toggle them."""

    def __init__(self, prefixes=SEALED_MODULES):
        self._prefixes = prefixes
        self._entries = self._take()
        self._state = _interpreter_state()
        # Looked up again by a later import (Contract.check imports lazily):
        # a module put in a sealed one's place would be what it finds.
        self._imported = self._modules()

    def _modules(self):
        return [(name, module) for name, module in list(sys.modules.items())
                if module is not None and name.split(".")[0] in self._prefixes]

    def _take(self):
        """(label, namespace, attribute, identity) for every sealed attribute."""
        entries = []
        for name, module in self._modules():
            for attribute, value in list(vars(module).items()):
                if name == "builtins" and attribute == "_":  # the REPL's last result
                    continue
                entries.append((name, vars(module), attribute, _identity(value)))
                if isinstance(value, type) and value.__module__ == name:
                    for member, inner in list(vars(value).items()):
                        if not isinstance(inner, _PLAIN_VALUES):
                            entries.append((f"{name}.{attribute}", vars(value), member,
                                            _identity(inner)))
        return entries

    def broken(self):
        """The first sealed attribute that changed (``"gc.get_objects"``), or None.

        Called after every contract on some 13,000 entries: the code is read
        only of the values that had code when sealed (functions, methods), the
        only ones whose behaviour a new ``__code__`` changes; every other
        entry costs one lookup and one identity test."""
        missing = object()
        for label, namespace, attribute, (value, code) in self._entries:
            if namespace.get(attribute, missing) is not value or (
                    code is not None and getattr(value, "__code__", None) is not code):
                return f"{label}.{attribute}"
        for name, module in self._imported:
            if sys.modules.get(name) is not module:
                return f"sys.modules[{name!r}]"
        now = _interpreter_state()
        return next((what for what, sealed in self._state.items() if now.get(what) != sealed),
                    None)


def _interpreter_state():
    """{what: its state} for the parts of the interpreter that the
    measurement relies on and that no module attribute holds: the
    collector's callbacks, saved garbage, debug flags, thresholds and
    switch, the trace and profile hooks, the import machinery, NumPy's
    allocator. Compared by identity and
    contents: appending to ``gc.callbacks`` replaces no attribute, yet a
    callback can empty ``gc.garbage`` before a measurement reads it."""
    import threading

    state = {
        "gc.callbacks (its entries)": [id(entry) for entry in gc.callbacks],
        "gc.garbage (its entries)": [id(entry) for entry in gc.garbage],
        "the collector's debug flags (gc.set_debug)": gc.get_debug(),
        "the collector's thresholds (gc.set_threshold)": gc.get_threshold(),
        "the collector's switch (gc.enable or gc.disable)": gc.isenabled(),
        "the trace function (sys.settrace)": id(sys.gettrace()),
        "the profile function (sys.setprofile)": id(sys.getprofile()),
        "the threads' trace function (threading.settrace)": id(threading.gettrace()),
        "the threads' profile function (threading.setprofile)": id(threading.getprofile()),
        "the import machinery (sys.meta_path)": [id(entry) for entry in sys.meta_path],
        "the import machinery (sys.path_hooks)": [id(entry) for entry in sys.path_hooks],
    }
    monitoring = getattr(sys, "monitoring", None)  # Python 3.12 and later
    if monitoring is not None:
        state["the monitoring tools (sys.monitoring)"] = [
            monitoring.get_tool(tool) for tool in range(6)]
    numpy_core = sys.modules.get("numpy._core.multiarray") or sys.modules.get(
        "numpy.core.multiarray")
    if numpy_core is not None and hasattr(numpy_core, "get_handler_name"):
        state["NumPy's memory allocator"] = numpy_core.get_handler_name()
    return state


def _identity(value):
    """The value and its code (None for a value without), held: an id could
    be reused once its object is freed."""
    return value, getattr(value, "__code__", None)


def _read(path, needed):
    """``(refusal, fingerprint)``: why the file is refused before any of its
    code runs (too large or too complex to read, or it imports a name that
    the stage needs instead of defining it), or None; and the digest of its
    syntax tree (``provenance``). Read here, not in the grading parent: the
    worker's time and memory limits bound what a hostile file costs."""
    from dezero_mini.contracts.provenance import CannotCheck, read_submission

    try:
        fingerprint, imported = read_submission(path, needed)
    except CannotCheck as error:
        return f"cannot be checked: {error}", None
    except OSError as error:
        return f"cannot be checked: cannot read {path.name}: {error.strerror or error}", None
    if imported:
        name, origin = next(iter(imported.items()))
        return (f"{path.name} does not define {', '.join(imported)} itself ({name}: it imports "
                f"{origin}): a submission must define the stage's classes and functions in "
                "the file"), fingerprint
    return None, fingerprint


#: Seconds that the look at what the file's functions return may take: a file
#: whose code hangs on that small graph hangs in the contracts too, where the
#: report says where (a loop on one shape must not become a hang of loading).
FOREIGN_CHECK_SECONDS = 2.0


class _OutOfTime(Exception):
    """Raised by ``_within``'s timer in the code it bounds."""


def _within(seconds, function, *arguments):
    """``function(*arguments)``, or ``{}`` when it raises or takes more than
    ``seconds`` (a timer's signal interrupts the file's Python code)."""
    def out_of_time(signum, frame):
        raise _OutOfTime

    previous = signal.signal(signal.SIGALRM, out_of_time)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        return function(*arguments)
    except BaseException:  # (whatever the file's code raised: the contracts will say it)
        return {}
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def load_earlier_stages(number):
    """Load the course's step files of the stages before ``number`` (those
    that the sandbox shows) and return their module names. A contract that
    measures against an earlier stage (stage 04's backward peak against
    stage 03's) finds it in ``sys.modules`` by its name: loaded here, before
    the learner's file, and sealed, it cannot be a module that the file put
    there (a stage 03 made heavier passed stage 04's comparison)."""
    from dezero_mini.contracts.bubblewrap import visible_step_files
    from dezero_mini.memory.stages import load_stage, steps_dir

    names = []
    for path in visible_step_files(number, steps_dir()):
        try:
            names.append(load_stage(Path(path).stem).__name__)
        except Exception:  # (a contract that needs it fails on its own, with the reason)
            continue
    return tuple(names)


def main(argv):
    path, number, batches = Path(argv[0]).resolve(), int(argv[1]), int(argv[2])
    channel_fd, stack_fd, names = int(argv[3]), int(argv[4]), argv[5:]
    # The secret comes first, before anything of the learner's runs; then
    # standard input is closed to the learner's code.
    key = bytes.fromhex(sys.stdin.readline().strip())
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)

    from dezero_mini.contracts import Contract, contracts_at, missing_names, names_needed_at
    from dezero_mini.contracts.bench import CollectorRun, configure, records_read
    from dezero_mini.contracts.channel import Writer
    from dezero_mini.contracts.provenance import (borrowed_names, code_from_elsewhere,
                                                  foreign_results, own_code)
    from dezero_mini.memory.probes import TracesCleared
    from dezero_mini.memory.stages import load_stage_file
    from dezero_mini.printable import first_of
    import dezero_mini.memory  # noqa: F401  (every instrument, imported before the file)

    needed = names_needed_at(number)
    refusal, fingerprint = _read(path, needed)
    earlier_stages = load_earlier_stages(number)

    # Everything alive now is the checker's modules (the instruments, NumPy,
    # the course's modules): moved out of the collector's generations, it is
    # no longer traversed by each of the measurements' gc.collect() calls
    # (40 or so per check), which then cost what the learner's objects cost.
    # None of the learner's objects exists yet, so every Variable and Function
    # that the contracts count or the collector frees is still in the
    # generations (counting.py allows for a permanent generation). Frozen
    # before the channel's writer is made: what the learner's code can find
    # with gc.get_objects() stays what it was (the lab chapter's threat model).
    gc.collect()
    gc.freeze()
    frozen_seen = [gc.get_freeze_count()]  # as low as it has been: see broken()
    send = Writer(channel_fd, key).send
    del key
    configure(batches=batches, stream=send)
    by_name = {contract.name: contract for contract in contracts_at(number)}
    check = Contract.check  # the function itself: a patched class attribute does not reach it
    needed = names_needed_at(number)
    faulthandler.register(signal.SIGUSR1, file=stack_fd, all_threads=True)
    seal = Seal(SEALED_MODULES + earlier_stages)

    def broken():
        # A file that freezes its objects (gc.freeze) takes them out of every
        # count of live objects and out of the collector's reach, without
        # replacing anything the seal holds: its leaks would pass unseen. The
        # frozen count only falls on its own (a frozen object of the
        # checker's dies); it rises when something is frozen, and drops to
        # nothing when everything is unfrozen (which a file would do to undo
        # its freeze before this look).
        now = gc.get_freeze_count()
        if now > frozen_seen[0] or (now == 0 and frozen_seen[0] > 0):
            return FROZEN
        frozen_seen[0] = now
        return seal.broken()

    if refusal:
        send(event="error", message=refusal)
        return 2
    send(event="read", fingerprint=fingerprint)  # the parent knows the course's own files
    own = own_code(path)  # (before any of its code runs: what its text can define)

    # The learner's folder last: its own helper modules load, but none of
    # them can stand in for a module of the standard library or of the course.
    sys.path.append(str(path.parent))
    try:
        module = load_stage_file(path, learner_module_name(path))
    except BaseException as error:  # SyntaxError, SystemExit, anything the file raises
        send(event="error", message=f"cannot load {path.name}: {describe(error, path)}")
        return 2
    changed = broken()
    if changed == FROZEN:
        send(event="tampered", message=f"loading {path.name}, {FROZEN}")
        return 2
    if changed:
        send(event="tampered", message=f"loading {path.name} replaced {changed}, which the "
                                       "checker measures with")
        return 2
    missing = missing_names(module, number)
    lacks = (f"{path.name} lacks {', '.join(missing)}, which stage {number:02d} needs: define "
             f"{'it' if len(missing) == 1 else 'them'} at the top level")
    # A contract of an earlier stage needs only that stage's names: the file that
    # ``start`` writes (the previous stage's framework) earns those, and fails the
    # contracts that need what it lacks, with the reason. Nothing to run: an error.
    blocked = {name for name in names
               if set(names_needed_at(by_name[name].stage)) & set(missing)}
    if missing and blocked >= set(names):
        send(event="error", message=lacks)
        return 2
    borrowed = borrowed_names(module, path, needed)
    if borrowed:
        name, where = next(iter(borrowed.items()))
        send(event="error", message=(
            f"{path.name} does not define {', '.join(borrowed)} itself ({name}: {where}): "
            "a submission must define the stage's classes and functions in the file"))
        return 2
    elsewhere = code_from_elsewhere(module, path, own)
    if elsewhere:
        name, what = next(iter(elsewhere.items()))
        send(event="error", message=(
            f"{path.name}'s {first_of(elsewhere)} {'is' if len(elsewhere) == 1 else 'are'} not "
            f"its own text ({name}: {what}; exec of another text under the file's name?): a "
            "submission must define the stage's classes and functions in the file"))
        return 2
    foreign = {} if missing else _within(FOREIGN_CHECK_SECONDS, foreign_results, module)
    if broken():
        foreign = {}  # (said below, after the first contract, as tampering)
    if foreign:
        name, kind = next(iter(foreign.items()))
        send(event="error", message=(
            f"{path.name}'s {', '.join(foreign)} return{'s' if len(foreign) == 1 else ''} "
            f"objects of another class than its own Variable ({name}: a {kind}): a submission "
            "must compute with the classes it defines"))
        return 2
    send(event="loaded")

    for name in names:
        send(event="start", name=name)
        if name in blocked:
            send(event="result", name=name, passed=False, expected=by_name[name].summary,
                 measured=f"not run: {lacks}", error="missing", records=[])
            continue
        try:
            found = check(by_name[name], module)
            result = dict(passed=bool(found.passed), expected=str(found.expected),
                          measured=str(found.measured), error=None)
        except BaseException as error:  # the learner's code may raise anything, even SystemExit
            if type(error) in (TracesCleared, CollectorRun):  # (its real type: a class of the file's cannot pass)
                send(event="tampered", message=f"while {name} ran, {error}")
                return 2
            result = dict(passed=False, expected=by_name[name].summary,
                          measured=f"raised {describe(error, path)}", error="raised")
        changed = broken()
        if changed == FROZEN:
            send(event="tampered", message=f"while {name} ran, {FROZEN}")
            return 2
        if changed:
            send(event="tampered", message=f"while {name} ran, {changed} was replaced (it is "
                                           "one of the checker's instruments)")
            return 2
        # What each record that the contract read held when it was read: the
        # parent holds it against the figures streamed as they were taken.
        send(event="result", name=name, records=records_read(), **result)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
