"""``check`` against submissions written to get points they did not earn.

Each row of ``HOSTILE`` starts from the course's stage-02 file, which
honestly fails stage 03 (3 of its 6 contracts), adds one trick, and is
checked as stage 03. Before the checker was contained, every one of them
reported "6 of 6 contracts pass". Each row states the exit status and the
words that the report must now hold, and that it is not a pass.

Then the cases that need their own set-up: modules beside the file with
``check`` run from its folder, a grandchild that would outlive the check,
the stop signals, the installation changed by a submission.
"""
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from dataclasses import dataclass

import pytest

from conftest import ROOT, STEPS
from dezero_mini import cli
from dezero_mini.contracts import contracts_at, names_needed_at
from dezero_mini.contracts.bench import BATCHES
from dezero_mini.contracts.runner import check_file, memory_budget, rss_growth_allowed
from dezero_mini.contracts import bubblewrap as sandbox_tool
from dezero_mini.contracts import sandbox
from dezero_mini.contracts.sandbox import MIB, Limits

HONEST_FAILS = 3  # of stage 03's 6 contracts, by the stage-02 file
FILE_NAME = "step03_weakref_outputs.py"


def step_text(number):
    return next(STEPS.glob(f"step{number:02d}_*.py")).read_text()


def stage02_plus(trick):
    return lambda folder: step_text(2) + "\n\n# --- the trick ---\n" + trick


# --- The tricks ---------------------------------------------------------------------------
PATCH_CONTRACT_CHECK = """
from dezero_mini.contracts import Contract, Measurement
Contract.check = lambda self, module: Measurement(True, "anything", "as expected")
"""

PATCH_COLLECTOR = """
import gc
gc.get_objects = lambda *args, **kwargs: []
gc.collect = lambda *args, **kwargs: 0
"""

HIDE_BY_FREEZING = """
import gc
_backward = Variable.backward


def _backward_then_hide(self, *args, **kwargs):  # the graph of each batch out of sight
    _backward(self, *args, **kwargs)
    gc.freeze()


Variable.backward = _backward_then_hide
"""

FAKE_PROTOCOL = """
import gc, io, json, os, sys
_names = [a for a in sys.argv if a.isidentifier()]
_lines = [json.dumps({"event": "loaded"})]
for _name in _names:
    _lines.append(json.dumps({"event": "start", "name": _name}))
    _lines.append(json.dumps({"event": "result", "name": _name, "passed": True,
                              "expected": "x", "measured": "x", "error": None}))
_text = "\\n".join(_lines) + "\\n"
print(_text)
for _obj in gc.get_objects():  # every file object that the process holds
    if isinstance(_obj, io.IOBase):
        try:
            _obj.write(_text if isinstance(_obj, io.TextIOBase) else _text.encode())
            _obj.flush()
        except Exception:
            pass
for _fd in range(3, 256):  # and every descriptor
    try:
        os.write(_fd, _text.encode())
    except OSError:
        pass
"""

READ_TOKEN = """
import os
print("token:", os.environ.get("GRADER_TOKEN"), "home:", os.environ.get("HOME"))
print("environment:", sorted(os.environ))
"""

ALLOCATE_2_GIB = """
import numpy as _np
_big = _np.ones(2560 * 1024 * 1024 // 8)  # 2.5 GiB, touched
"""

LOOP_IN_BACKWARD = r"""
_backward = Variable.backward
def _endless(self, *args, **kwargs):
    while True:  # HANG HERE
        pass
Variable.backward = _endless
"""

IMPORT_FROM_PACKAGE = "from dezero_mini import " + ", ".join(names_needed_at(3)) + "\n"

LOAD_STAGE_3 = """
from dezero_mini.memory.stages import load_stage
globals().update({k: v for k, v in vars(load_stage(3)).items() if not k.startswith("__")})
"""


def reference_under_a_header(folder):
    """What ``start 4`` writes: the stage-03 reference, a header on top; and
    its docstrings reworded."""
    from dezero_mini.cli.start import start_header
    from dezero_mini.contracts import get_stage

    text = step_text(3).replace('"""', '"""Mine: ', 1)
    return start_header(get_stage(4), "step03_weakref_outputs.py") + text


def with_backward_prologue(text, prologue):
    """``text`` (a stage file) with the lines ``prologue`` (indented for a
    method's body) first in its ``Variable.backward``."""
    return re.sub(r"^(    def backward\(self.*\):\n)", lambda found: found.group(1) + prologue,
                  text, count=1, flags=re.MULTILINE)


def hidden_memory(folder):
    """The stage-03 reference, plus memory that tracemalloc cannot see
    (anonymous mmaps, 1 MiB per backward, the first 200): the traced bytes
    stay flat, the RSS grows."""
    text = step_text(3)
    text = text.replace("import weakref\n", "import mmap\nimport weakref\n_HIDDEN = []\n", 1)
    return re.sub(r"^(    def backward\(self.*\):\n)",
                  "\\1        if len(_HIDDEN) < 200:\n"
                  "            _HIDDEN.append(mmap.mmap(-1, 1 << 20))\n"
                  "            _HIDDEN[-1].write(b'x' * (1 << 20))\n",
                  text, count=1, flags=re.MULTILINE)


@dataclass
class Hostile:
    name: str
    write: object         # folder -> the file's text
    exit_code: int
    says: str             # a regular expression that the report must match
    argv: tuple = ("--batches", "5")
    passes: object = None  # how many contracts pass, when the trick must change nothing


HOSTILE = [
    Hostile("patches_Contract_check", stage02_plus(PATCH_CONTRACT_CHECK), 2,
            r"tampering detected: loading .* replaced dezero_mini\.contracts\.Contract\.check"),
    Hostile("patches_the_collector", stage02_plus(PATCH_COLLECTOR), 2,
            r"tampering detected: loading .* replaced gc\.(get_objects|collect)"),
    Hostile("hides_its_graphs_with_gc_freeze", stage02_plus(HIDE_BY_FREEZING), 2,
            r"tampering detected: while \w+ ran, the file called gc\.freeze\(\) or "
            r"gc\.unfreeze\(\)"),
    Hostile("prints_fake_protocol_lines", stage02_plus(FAKE_PROTOCOL), 2,
            r"tampering detected: the result channel received a line that is not the checker's"),
    Hostile("reads_GRADER_TOKEN", stage02_plus(READ_TOKEN), 1,
            r"token: None home: (/tmp|/\S*dezero_mini_check_)"),
    Hostile("allocates_2_5_GiB", stage02_plus(ALLOCATE_2_GIB), 2,
            rf"cannot load {FILE_NAME}: .*MemoryError.*the file used more than "
            rf"{Limits().memory_mib} MiB of memory"),
    Hostile("loops_in_backward", stage02_plus(LOOP_IN_BACKWARD), 1,
            r"timed out: the check's total time limit of 10 s ran out; the file was at "
            rf"{FILE_NAME} line (?P<line>\d+) \(in _endless\)",
            # (the limit bounds loading the file too: 3-4 s on a busy machine)
            argv=("--batches", "5", "--total-timeout", "10")),
    Hostile("imports_the_classes_from_dezero_mini", stage02_plus(IMPORT_FROM_PACKAGE), 2,
            rf"{FILE_NAME} does not define Variable, .* itself \(Variable: the class comes from "
            r"\S*dezero_mini/core\.py\)"),
    Hostile("only_imports_from_dezero_mini", lambda folder: IMPORT_FROM_PACKAGE, 2,
            rf"{FILE_NAME} does not define Variable, .* itself \(Variable: it imports "
            r"dezero_mini\.Variable\)"),
    # In the sandbox stage 03's reference is out of sight; without, it is refused as borrowed.
    Hostile("load_stage_3_into_globals", stage02_plus(LOAD_STAGE_3), 2,
            rf"({FILE_NAME} does not define Variable, .* itself \(Variable: the class comes from "
            r"\S*steps/step03_weakref_outputs\.py\)|cannot load .*unknown stage 3; valid stages: "
            r"1 / 'leaking_graph', 2 / 'cycles', or)"),
    Hostile("the_reference_verbatim", reference_under_a_header, 2,
            rf"{FILE_NAME} is the course's own step03_weakref_outputs\.py"),
    Hostile("hides_memory_from_tracemalloc", hidden_memory, 1,
            r"the worker reported -?\d+\.\d KiB per batch while its RSS (grew|reached) (?P<mib>\d+) MiB",
            argv=("--batches", "20")),
    # At the default batches (50) it hides about 100 MiB by the end of traced_bytes_flat:
    # under a fixed allowance of 128 MiB, over the 28.5 MiB allowed for 50 batches.
    Hostile("hides_memory_from_tracemalloc_at_the_default_batches", hidden_memory, 1,
            r"the worker reported -?\d+\.\d KiB per batch while its RSS (grew|reached) (?P<mib>\d+) MiB",
            argv=()),
]


# --- Issue 35: the parent parses under limits; lies that replace nothing sealed ----------------
def deep_expression(folder):
    """5,000 terms in one expression: deeper than the parent's walk of the tree goes."""
    return step_text(2) + "\n_x = " + "+".join(["1"] * 5000) + "\n"


def too_large(folder):
    """The stage-02 file padded past Gradescope's 1 MiB with a comment."""
    return step_text(2) + "\n#" + "x" * (1 << 20) + "\n"


LIE_TO_ISINSTANCE = """
import sys


class _Liar(type):
    def __instancecheck__(cls, obj):  # "none of these is mine", to the checker's code
        if sys._getframe(1).f_globals.get("__name__", "").startswith("dezero_mini"):
            return False
        return type.__instancecheck__(cls, obj)


class Variable(Variable, metaclass=_Liar):  # what the checker counts by
    def __new__(cls, *args, **kwargs):
        return object.__new__(_Made)  # (an exact instance would be counted without asking)


class _Made(Variable):  # what the framework makes
    pass


class Function(Function, metaclass=_Liar):
    pass
"""

CLEAR_TRACES_WITH_A_BALLAST = """
import tracemalloc
_BALLAST = [b"x" * (1 << 20) for _ in range(240)]  # 240 MiB, touched, held while loading
_backward = Variable.backward


def _backward_then_forget(self, *args, **kwargs):
    _BALLAST.clear()  # the RSS falls by what the graphs will take
    _backward(self, *args, **kwargs)
    tracemalloc.clear_traces()  # and the traced bytes of every batch start again from 0


Variable.backward = _backward_then_forget
"""

EMPTY_GC_GARBAGE_FROM_A_CALLBACK = """
import gc


def _empty_the_garbage(phase, info):
    if phase == "stop":
        gc.garbage.clear()


gc.callbacks.append(_empty_the_garbage)
"""

EMPTY_GC_GARBAGE_FROM_A_PASSING_CALLBACK = """
import gc
_backward = Variable.backward


def _empty_the_garbage_once(phase, info):  # gone again before the contract ends
    if phase == "stop":
        gc.garbage.clear()
        gc.callbacks.remove(_empty_the_garbage_once)


def _backward_then_arm(self, *args, **kwargs):
    _backward(self, *args, **kwargs)
    if _empty_the_garbage_once not in gc.callbacks:
        gc.callbacks.append(_empty_the_garbage_once)


Variable.backward = _backward_then_arm
"""

SET_A_PROFILE_HOOK = """
import sys
sys.setprofile(lambda frame, event, arg: None)  # sees every call of the checker's
"""

REPLACE_A_SEALED_MODULE = """
import sys, types
_fake = types.ModuleType("dezero_mini.contracts.bench")
_fake.__dict__.update(sys.modules["dezero_mini.contracts.bench"].__dict__)
_fake.forget_graphs = lambda module: None
sys.modules["dezero_mini.contracts.bench"] = _fake  # what a later import finds
"""

def ballast_traded_for_hidden_memory(folder):
    """The stage-03 reference (flat traced bytes), plus 300 MiB of ballast
    held from loading, traded 1 MiB at a time for memory that tracemalloc
    cannot see (anonymous mmaps, one per backward): the RSS stays flat, at
    300 MiB above what the stage needs."""
    text = step_text(3).replace(
        "import weakref\n",
        "import mmap\nimport weakref\n_BALLAST = [b'x' * (1 << 20) for _ in range(300)]\n"
        "_HIDDEN = []\n", 1)
    return re.sub(r"^(    def backward\(self.*\):\n)",
                  "\\1        if _BALLAST:\n"
                  "            _BALLAST.pop()\n"
                  "            _HIDDEN.append(mmap.mmap(-1, 1 << 20))\n"
                  "            _HIDDEN[-1].write(b'x' * (1 << 20))\n",
                  text, count=1, flags=re.MULTILINE)


HOSTILE += [
    Hostile("nests_an_expression_5000_deep", deep_expression, 2,
            rf"cannot be checked: {FILE_NAME} is too complex to parse \(RecursionError"),
    Hostile("is_larger_than_1_MiB", too_large, 2,
            rf"cannot be checked: {FILE_NAME} is more than 1048576 bytes"),
    Hostile("lies_to_isinstance_with_a_metaclass", stage02_plus(LIE_TO_ISINSTANCE), 1,
            r"(?s)^(?!.*\b0 live objects)", passes=len(contracts_at(3)) - HONEST_FAILS),
    Hostile("clears_tracemallocs_traces_behind_a_ballast", stage02_plus(CLEAR_TRACES_WITH_A_BALLAST),
            2, r"tampering detected: while \w+ ran, tracemalloc's traces were cleared"),
    Hostile("empties_gc_garbage_from_a_callback", stage02_plus(EMPTY_GC_GARBAGE_FROM_A_CALLBACK), 2,
            r"tampering detected: loading .* replaced gc\.callbacks \(its entries\)"),
    Hostile("empties_gc_garbage_from_a_callback_it_removes",
            stage02_plus(EMPTY_GC_GARBAGE_FROM_A_PASSING_CALLBACK), 1,
            r"(?m)^[1-9]\d+(;|$)",  # the Variables and Functions the collector found (then the others)
            passes=len(contracts_at(3)) - HONEST_FAILS),
    Hostile("sets_a_profile_hook", stage02_plus(SET_A_PROFILE_HOOK), 2,
            r"tampering detected: loading .* replaced the profile function \(sys\.setprofile\)"),
    Hostile("replaces_a_sealed_module_in_sys_modules", stage02_plus(REPLACE_A_SEALED_MODULE), 2,
            r"tampering detected: loading .* replaced sys\.modules\['dezero_mini\.contracts\.bench'\]"),
    Hostile("trades_a_ballast_for_memory_hidden_from_tracemalloc",
            ballast_traded_for_hidden_memory, 1,
            r"the worker reported -?\d+\.\d KiB per batch while its RSS reached (?P<peak>\d+) MiB, "
            r"above the \d+ MiB", argv=("--batches", "20")),
]


# --- The red team's rows (2026-11-28): each worked before its fix ------------------------------
COLLECT_IN_BACKWARD = """
import gc as _gc
_backward = Variable.backward


def _backward_then_collect(self, *args, **kwargs):  # the collector frees the cycles, not refcounting
    _backward(self, *args, **kwargs)
    _gc.collect()


Variable.backward = _backward_then_collect
"""

COLLECT_FROM_A_THREAD = """
import gc as _gc, threading as _threading, time as _time


def _collect_forever():  # while the measurement has the collector off
    while True:
        _gc.collect()
        _time.sleep(0.001)


_threading.Thread(target=_collect_forever, daemon=True).start()
"""

TWIN_CLASSES = """
import types as _types
import weakref as _weakref


def as_variable(obj):
    return obj if isinstance(obj, (Variable, _VTwin)) else Variable(as_array(obj))


def _twin(cls, bases=()):  # the same class, but not the one that the checker counts
    space = {k: v for k, v in vars(cls).items() if k not in ("__dict__", "__weakref__")}
    return type(cls.__name__, bases, space)


_VTwin, _FTwin = _twin(Variable), _twin(Function)
_twin_call = _types.FunctionType(Function.__call__.__code__,
                                 dict(globals(), Variable=_VTwin, as_variable=as_variable))


class _Leaf(_VTwin):  # stands for a real Variable in the graph, holding it weakly
    def __init__(self, real):
        self._real = _weakref.ref(real)
        _VTwin.__init__(self, real.data)

    @property
    def grad(self):
        real = self._real()
        return None if real is None else real.grad

    @grad.setter
    def grad(self, value):
        if self._real() is not None:
            self._real().grad = value


_FTwin.__call__ = lambda self, *inputs: _twin_call(
    self, *[_Leaf(x) if type(x) is Variable else x for x in inputs])
for _name, _obj in list(globals().items()):
    if isinstance(_obj, type) and issubclass(_obj, Function) and _obj is not Function:
        globals()[_name] = _twin(_obj, (_FTwin,))
"""

WRAP_THE_PACKAGE = '''"""My stage 03."""
import dezero_mini as _d


class Variable(_d.Variable):
    pass


class Function(_d.Function):
    pass


def add(a, b):
    return _d.add(a, b)


def mul(a, b):
    return _d.mul(a, b)


def matmul(a, b):
    return _d.matmul(a, b)


def sigmoid(x):
    return _d.sigmoid(x)


def sum(x, axis=None, keepdims=False):
    return _d.sum(x, axis, keepdims)


def mean_squared_error(a, b):
    return _d.mean_squared_error(a, b)
'''

FLOOD_THE_RESULT_CHANNEL = """
import os, sys
_chunk = b"x" * (1 << 20)
for _ in range(1500):  # 1.5 GiB on the result channel, without a newline
    try:
        os.write(int(sys.argv[4]), _chunk)
    except OSError:
        break
"""

FRAMES_THAT_NEVER_END = """
import os, sys
os.write(int(sys.argv[5]), b'File "' * 10000)  # on the pipe of the stack dump, before it is asked
while True:  # HANG HERE
    pass
"""

A_FORGED_STACK_DUMP = """
import os, signal, sys
signal.signal(signal.SIGUSR1, signal.SIG_IGN)  # faulthandler writes nothing ...
os.write(int(sys.argv[5]), b'Thread 0x1 (most recent call first):\\n  File "' + sys.argv[1].encode()
         + b'", line 1 in the_checker_hung_not_me\\n')  # ... and this is said in its place
while True:
    pass
"""

# The worker's signing object, found with full Python (the red team's way): it
# signs what the file wants, and the parent must still end in a report. MODE:
# a line that is not JSON, JSON that is not an event, an error whose message is
# a number (the parent's reading raised, skipping the installation's check).
SIGNS_A_LINE_OF_THE_WRONG_SHAPE = """
import gc as _gc, os as _os
_writer = next(o for o in _gc.get_objects() if type(o).__name__ == "Writer")
if MODE == "error_of_a_number":
    _writer.send(event="error", message=123)
else:
    _payload = b"not json" if MODE == "not_json" else b"[1, 2]"
    _os.write(_writer._fd, b"%d %s %s\\n" % (_writer._sequence, _writer._mac(
        _writer._key, _writer._sequence, _payload).encode(), _payload))
_os._exit(0)
"""

# A frame whose name has a NUL byte, on the pipe of the stack dump when the
# checker asks: the parent looked the name up (Path.resolve) and raised.
A_STACK_DUMP_NAME_WITH_A_NUL = """
import os, signal, sys
signal.signal(signal.SIGUSR1, lambda *_: os.write(int(sys.argv[5]), b'  File "/x\\x00/'
              + os.path.basename(__file__).encode() + b'", line 1 in f\\n'))
while True:
    pass
"""

# The package (which the worker imports, so the sandbox shows it) is a whole
# framework: its core and functions compiled under the file's own name, with
# backward keeping the gradients of stage 03. Found by a red team.
THE_PACKAGE_COMPILED_UNDER_THE_FILES_NAME = """
import ast as _ast
import dezero_mini as _package
from pathlib import Path as _Path

for _name in ("core.py", "functions.py"):
    _tree = _ast.parse((_Path(_package.__file__).parent / _name).read_text())
    _tree.body = [_node for _node in _tree.body if not (
        isinstance(_node, _ast.ImportFrom) and _node.module == "dezero_mini.core")]
    exec(compile(_tree, __file__, "exec"), globals())
_backward = Variable.backward
Variable.backward = lambda self, *a, retain_grad=True, **k: _backward(self, *a, retain_grad=retain_grad, **k)
"""

# Another function's code given the file's name: the package's backward as the
# file's own (co_filename is what borrowed_names reads).
ANOTHER_CODE_UNDER_THE_FILES_NAME = """
import types as _types
import dezero_mini.core as _core
Variable.unchain = _types.FunctionType(
    _core.Variable.unchain.__code__.replace(co_filename=__file__), globals())
"""

HOSTILE += [
    # Without the fix: 6 of 6, 9 of 9 points, exit 0 (the first); the second
    # changes nothing to the score but is another's code under the file's name.
    Hostile("compiles_the_package_under_its_own_name",
            lambda folder: THE_PACKAGE_COMPILED_UNDER_THE_FILES_NAME, 2,
            r"are not its own text \(.*is not compiled from the file's text; exec of another "
            r"text under the file's name\?\)"),
    Hostile("gives_another_functions_code_its_name", stage02_plus(ANOTHER_CODE_UNDER_THE_FILES_NAME),
            2, r"Variable is not its own text \(Variable: Variable\.unchain, said to be at line "
               r"\d+, is not compiled from the file's text"),
    # Without the fix (each): a traceback of the grading process, exit 1, and the
    # installation's comparison skipped (found by a red team).
    *(Hostile(f"signs_a_line_of_the_wrong_shape_{mode}",
              stage02_plus(SIGNS_A_LINE_OF_THE_WRONG_SHAPE.replace("MODE", repr(mode))), 2,
              r"(tampering detected: the result channel received a signed line that is not "
              r"(JSON|an event)|cannot trust this check: reading what the worker sent raised "
              r"TypeError)") for mode in ("not_json", "a_list", "error_of_a_number")),
    Hostile("writes_a_stack_dump_name_with_a_nul_byte", stage02_plus(A_STACK_DUMP_NAME_WITH_A_NUL),
            2, rf"(?m)^cannot load {FILE_NAME}: importing it took longer than 10 s \(a loop at "
               r"the top level\?\)$", argv=("--batches", "5", "--total-timeout", "10")),
    # Without the fix: 5 of 6 (live_objects_constant and traced_bytes_flat passed).
    Hostile("runs_the_collector_itself_in_backward", stage02_plus(COLLECT_IN_BACKWARD), 2,
            r"tampering detected: while \w+ ran, the file ran the cyclic collector itself "
            r"\(gc\.collect\(\)\) while the measurement had it off"),
    # Without the fix: 6 of 6 most runs (the thread freed the cycles before each count).
    Hostile("runs_the_collector_from_a_thread", stage02_plus(COLLECT_FROM_A_THREAD), 2,
            r"tampering detected: while \w+ ran, the file ran the cyclic collector itself"),
    # Without the fix: 5 of 6 (live_objects_constant and collector_finds_nothing passed).
    # (The contracts' own look at such a graph: test_checker_redteam.py.)
    Hostile("builds_its_graphs_from_classes_the_checker_does_not_count",
            stage02_plus(TWIN_CLASSES), 2,
            rf"{FILE_NAME}'s matmul, .* return objects of another class than its own Variable "
            r"\(matmul: a learner_step03_weakref_outputs\.Variable, a class of the same name\)"),
    # Without the fix: 5 of 6, the package's framework under the file's names.
    Hostile("subclasses_the_packages_classes_and_wraps_its_functions",
            lambda folder: WRAP_THE_PACKAGE, 2,
            rf"{FILE_NAME} does not define Variable, Function itself \(Variable: the class derives "
            r"from Variable, whose code is in \S*dezero_mini/core\.py\)"),
    # Without the fix: the checker spent its whole time limit copying the line (CPU and
    # memory of the grader's), then blamed "a loop at the top level".
    Hostile("floods_the_result_channel_without_a_newline", stage02_plus(FLOOD_THE_RESULT_CHANNEL),
            2, r"tampering detected: the result channel received a line longer than 1048576 "
               r"bytes", argv=("--batches", "5", "--total-timeout", "60")),
    # Without the fix: the checker's search of the dump took 15 s of the grading process
    # (60,000 bytes; quadratic), past the check's time limit, on each hang (the bound:
    # test_the_search_of_a_stack_dump_reads_each_line_once).
    Hostile("writes_frames_that_never_end_where_the_stack_dump_goes",
            stage02_plus(FRAMES_THAT_NEVER_END), 2,
            rf"(?m)^cannot load {FILE_NAME}: importing it took longer than 10 s \(a loop at the "
            rf"top level\?\); the file was at {FILE_NAME} line (?P<line>\d+) \(in <module>\)$",
            argv=("--batches", "5", "--total-timeout", "10")),
    # Without the fix: "the file was at step03_weakref_outputs.py line 1 (in
    # the_checker_hung_not_me)", where the file never was.
    Hostile("forges_the_stack_dump", stage02_plus(A_FORGED_STACK_DUMP), 2,
            rf"(?m)^cannot load {FILE_NAME}: importing it took longer than 10 s \(a loop at the "
            r"top level\?\)$", argv=("--batches", "5", "--total-timeout", "10")),
]


# --- Code of the file's that runs inside a measurement, rewriting figures already taken ---------
# Each rewrites the traced bytes of the training record after they were measured, so
# that the stage-02 file's 915 KiB a batch reads as flat. Without the fix, each had the
# worker report "0.0 KiB per batch" (traced_bytes_flat passed unless the RSS read from
# outside contradicted it). Now the figures leave the worker as they are taken, and a
# record that differs from them is tampering. (The red team's REGISTRY.clear() row:
# test_checker_redteam.py.)
FIND_THE_RECORDERS_ARRAYS = """
import sys as _sys

_FRESH = {}  # batch -> its traced bytes, as the recorder measured them


def _recorder_in(frame):
    # The recorder's figures and the batch it runs, from the stack: (traced, i) or None.
    while frame is not None:
        found = frame.f_locals
        signals, batch = found.get("signals"), found.get("i")
        if isinstance(signals, dict) and "traced_current" in signals and type(batch) is int:
            return signals["traced_current"], batch
        frame = frame.f_back
    return None


def _flatten_taken(frame):
    # During batch k: batches < k rewritten to what batch k will measure.
    found = _recorder_in(frame)
    if found is None or found[1] < 1:
        return
    traced, k = found
    _FRESH[k - 1] = int(traced[k - 1])
    if k - 2 in _FRESH:
        traced[:k] = _FRESH[k - 1] + (_FRESH[k - 1] - _FRESH[k - 2])
"""


def rewrites_from_its_backward(folder):
    """Batch k's backward rewrites the figures of batches < k."""
    return with_backward_prologue(step_text(2) + FIND_THE_RECORDERS_ARRAYS,
                                  "        _flatten_taken(_sys._getframe(1))\n")


def rewrites_from_a_thread(folder):
    """Batch k's backward wakes a thread of the file's, which finds the main
    thread's stack (``sys._current_frames()``) and rewrites batches < k."""
    thread = """
import threading as _threading

_GO, _DONE, _MAIN = _threading.Event(), _threading.Event(), _threading.get_ident()


def _rewrite_when_woken():
    while True:
        _GO.wait()
        _GO.clear()
        try:
            _flatten_taken(_sys._current_frames()[_MAIN])
        finally:
            _DONE.set()


_threading.Thread(target=_rewrite_when_woken, daemon=True).start()
"""
    return with_backward_prologue(step_text(2) + FIND_THE_RECORDERS_ARRAYS + thread,
                                  "        if _recorder_in(_sys._getframe(1)) is not None:\n"
                                  "            _DONE.clear()\n"
                                  "            _GO.set()\n"
                                  "            _DONE.wait(5)\n")


def rewrites_from_a_finalizer(folder):
    """Each backward leaves a cycle whose ``__del__`` flattens the record:
    the record's final ``gc.collect()`` runs them, after the last batch."""
    finalizer = """
import sys as _sys


class _Rewriter:
    def __del__(self):
        frame = _sys._getframe(1)
        while frame is not None:
            signals = frame.f_locals.get("signals")
            if isinstance(signals, dict) and "traced_current" in signals:
                signals["traced_current"][:] = signals["traced_current"][0]
                return
            frame = frame.f_back
"""
    return with_backward_prologue(step_text(2) + finalizer,
                                  "        _cycle = _Rewriter()\n"
                                  "        _cycle.me = _cycle\n")


def rewrites_what_gc_get_objects_finds(folder):
    """Each backward leaves a cycle with a weak reference whose callback (run
    when a collection frees the cycle) looks through ``gc.get_objects()`` for
    every ``TrainingRecord`` and flattens it, and leaves another such cycle
    for the next collection (the checker's ``forget_graphs``, after the record)."""
    callback = """
import gc as _gc
import weakref as _weakref

_REFS = []


class _Marker:
    pass


def _rewrite_every_record(_ref):
    for found in _gc.get_objects():
        if type(found).__name__ == "TrainingRecord":
            try:
                found.traced_current[:] = found.traced_current[0]
            except Exception:  # (a record that cannot be written: the checker's copies)
                pass
    _arm()  # for the next collection: the record may not exist yet


def _arm():
    _marker = _Marker()
    _marker.me = _marker
    _REFS.append(_weakref.ref(_marker, _rewrite_every_record))
"""
    return with_backward_prologue(step_text(2) + callback, "        _arm()\n")


REWRITTEN = (r"tampering detected: live_objects_constant read a record whose traced_current "
             r"differs from the figures streamed as they were taken")

HOSTILE += [
    Hostile("rewrites_earlier_batches_figures_from_its_backward", rewrites_from_its_backward, 2,
            REWRITTEN),
    Hostile("rewrites_earlier_batches_figures_from_a_thread", rewrites_from_a_thread, 2,
            REWRITTEN),
    Hostile("rewrites_the_figures_from_a_finalizer", rewrites_from_a_finalizer, 2, REWRITTEN),
    Hostile("rewrites_the_figures_that_gc_get_objects_finds", rewrites_what_gc_get_objects_finds,
            2, REWRITTEN),
]


def test_the_contracts_that_read_the_record_say_so():
    """The parent requires a record's digest in the result of each contract
    marked ``reads_record`` (a forged result without one is tampering): the
    mark must be on exactly the contracts whose measurement reads
    ``bench(module).record``. Each contract of every stage, run in this
    process on its stage's reference with a stream configured, as the
    worker runs it."""
    from dezero_mini.contracts import stages
    from dezero_mini.contracts.bench import configure, records_read
    from dezero_mini.memory.stages import load_stage

    configure(batches=3, stream=lambda **event: None)
    try:
        for stage in stages():
            module = load_stage(stage.number)
            for contract in stage.contracts:
                records_read()
                contract.check(module)
                assert bool(records_read()) == contract.reads_record, contract.name
    finally:
        configure(batches=BATCHES)


def test_a_figures_stream_is_taken_only_in_order():
    """What the parent refuses of the figures lines (the file can write
    on the channel with the worker's own writer): each with the words it says."""
    from dezero_mini.contracts.figures import FigureStream, Forged

    def line(batch, **changes):
        return {"event": "figures", "batch": batch, "traced_current": 1, "traced_peak": 2,
                "live_objects": 3, "tracked_objects": 0, **changes}

    end = {"event": "figures_end", "final_collected": 0, "live_after_collect": 3}
    cases = [
        ([line(1)], "figures of batch 1 where batch 0 was due"),
        ([line(0), line(0)], "figures of batch 0 where batch 1 was due"),
        ([line(0), line(1), line(2)], "figures of batch 2 where batch 2 was due \\(of 2\\)"),
        ([line(0), line(1), end, line(0)], "a figures line after the record had ended"),
        ([line(0), line(1), end, end], "a figures_end line after the record had ended"),
        ([line(0), end], "the record's end after 1 of its 2 batches"),
        ([line(0, traced_current=1.5)], "traced_current is 1.5, not a whole number"),
        ([line(0, traced_current=True)], "traced_current is True, not a whole number"),
        ([line(0, extra=1)], "fields that the record does not send: extra"),
    ]
    for events, says in cases:
        stream = FigureStream(2)
        with pytest.raises(Forged, match=says):
            for event in events:
                stream.receive(event, "live_objects_constant")
    stream = FigureStream(2)  # a record that raised in one contract is taken anew in the next
    stream.receive(line(0), "live_objects_constant")
    for event in (line(0), line(1), end):
        stream.receive(event, "traced_bytes_flat")
    with pytest.raises(Forged, match="without the record that its verdict reads"):
        stream.check([], "traced_bytes_flat", required=True)
    stream.check([], "training_learns")


def run_check(capsys, path, argv):
    started = time.monotonic()
    code = cli.main(["check", "3", str(path), "--json", *argv])
    out, err = capsys.readouterr()
    return code, json.loads(out), time.monotonic() - started


def report_text(report):
    return "\n".join([str(report["message"]), report["output"],
                      *(c["measured"] for c in report["contracts"])])


@pytest.mark.parametrize("case", HOSTILE, ids=lambda case: case.name)
def test_a_hostile_submission_is_not_a_pass(case, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("GRADER_TOKEN", "s3cret-grader-token")
    path = tmp_path / FILE_NAME
    path.write_text(case.write(tmp_path))
    code, report, _seconds = run_check(capsys, path, case.argv)
    text = report_text(report)
    assert code == report["exit_code"] == case.exit_code, text
    found = re.search(case.says, text)
    assert found, text
    assert report["status"] != "passed" and "s3cret-grader-token" not in json.dumps(report)
    if case.exit_code == 1:
        assert report["passed"] < len(contracts_at(3))
    if case.passes is not None:
        assert report["passed"] == case.passes, text
    if "line" in found.groupdict():  # the line of the endless loop, and the check kept its time
        lines = path.read_text().splitlines()
        assert "HANG HERE" in lines[int(found["line"]) - 1] or "pass" in lines[int(found["line"]) - 1]
        if report["status"] != "error":  # (a contract hung: those after it were not run)
            assert sum(c["measured"].startswith("not run") for c in report["contracts"]) >= 1
    if "mib" in found.groupdict():
        batches = int(case.argv[case.argv.index("--batches") + 1]) if "--batches" in case.argv \
            else BATCHES
        assert int(found["mib"]) * MIB > rss_growth_allowed(batches)
    if "peak" in found.groupdict():
        assert int(found["peak"]) * MIB > memory_budget(3)


def test_the_search_of_a_stack_dump_reads_each_line_once(tmp_path):
    """What the worker wrote where the stack dump goes is the file's: 1 MB of
    frames that never end took the checker's regular expression time that
    grows with the square of their length (60,000 bytes: 15 s; this, most of
    an hour). Searched line by line, it is done at once; the bound below
    only ends a hang."""
    code = ("from pathlib import Path\n"
            "from dezero_mini.contracts.runner import where_it_hung\n"
            "print(where_it_hung('File \"' * 170_000, Path('/x/step03.py')))\n"
            "print(where_it_hung('Thread 0x1:\\n  File \"/x/step03.py\", line 7 in loop\\n', "
            "Path('/x/step03.py')))\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60)
    assert done.stdout.split("\n")[:2] == ["None", "step03.py line 7 (in loop)"], done.stderr


def test_the_stage02_file_alone_fails_honestly(tmp_path, capsys):
    """The base of every row: without a trick, 3 of 6 fail (exit 1)."""
    path = tmp_path / FILE_NAME
    path.write_text(step_text(2))
    code, report, _ = run_check(capsys, path, ("--batches", "5"))
    assert code == 1 and len(contracts_at(3)) - report["passed"] == HONEST_FAILS, report


def test_the_environment_is_reduced_to_the_whitelist(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("GRADER_TOKEN", "s3cret-grader-token")
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    path = tmp_path / FILE_NAME
    path.write_text(stage02_plus(READ_TOKEN)(tmp_path))
    _, report, _ = run_check(capsys, path, ("--batches", "5"))
    names = eval(re.search(r"environment: (\[.*?\])", report["output"]).group(1))
    assert set(names) <= {"PATH", "LANG", "LANGUAGE", "TZ", "HOME", "TMPDIR", "DEZERO_MINI_STEPS",
                          "LC_CTYPE", "PWD"} | {n for n in names if n.startswith("LC_")} | set(
        sandbox.SINGLE_THREADED_BLAS)


REACH_A_SERVER = """
import ctypes, os, socket
for _pid in (os.getppid(), 1):  # first, back into the checker's network namespace (root could)
    try:
        _fd = os.open(f"/proc/{{_pid}}/ns/net", os.O_RDONLY)
        print("setns:", ctypes.CDLL(None, use_errno=True).setns(_fd, 0x40000000), ctypes.get_errno())
    except OSError as error:
        print("setns:", error)
try:  # a server of the grader's on this machine: if 127.0.0.1 is out of reach, so is the world
    socket.create_connection(("127.0.0.1", {port}), timeout=5).close()
    print("network: reached the server")
except OSError as error:
    print("network: no way out:", error)
"""


def test_the_worker_cannot_reach_the_network(tmp_path, capsys):
    """The worker has a network namespace of its own, with loopback down:
    even a server on the same machine, listening on 127.0.0.1, is out of its
    reach, and it cannot join the checker's namespace again (``setns``: a
    root worker lacks CAP_SYS_ADMIN). Where the kernel does not let this
    user do that, the test says so."""
    if not sandbox.network_can_be_cut():
        pytest.skip("this kernel does not let this user give a process a network namespace of "
                    "its own (a container without CAP_SYS_ADMIN, or user namespaces switched off): "
                    "the worker keeps the network here, as docs/classroom.md says")
    with socket.create_server(("127.0.0.1", 0)) as server:
        path = tmp_path / FILE_NAME
        path.write_text(stage02_plus(REACH_A_SERVER.format(port=server.getsockname()[1]))(tmp_path))
        _, report, _ = run_check(capsys, path, ("--batches", "5"))
        server.setblocking(False)
        with pytest.raises(BlockingIOError):  # nobody knocked
            server.accept()
    assert "network: no way out:" in report["output"], report["output"]
    assert report["exit_code"] == 1  # checked as usual: the stage-02 file fails honestly


def test_a_kernel_that_refuses_a_network_namespace_leaves_the_worker_as_it_was():
    """``unshare`` refused as root and as a user (what a container without
    the capability answers): the worker starts anyway, on the network."""
    calls = []

    def refuses(flags):
        calls.append(flags)
        return -1

    assert sandbox._leave_the_network((refuses, lambda: 0), os.getuid(), os.getgid()) is False
    assert calls == [sandbox._CLONE_NEWNET, sandbox._CLONE_NEWUSER | sandbox._CLONE_NEWNET]
    assert sandbox._leave_the_network(None, os.getuid(), os.getgid()) is False


# --- The other resource limits, made small ---------------------------------------------------
@pytest.mark.parametrize("limits, trick, says", [
    (Limits(cpu_seconds=1), "while True:\n    pass\n",
     r"the process ended \(exit code -\d+\) while importing it: the file used more than 1 s of "
     r"CPU time"),
    (Limits(file_size_mib=1), "with open('big.bin', 'wb') as _f:\n    _f.write(bytes(2 << 20))\n",
     r"File too large.*: the file wrote a file larger than 1 MiB"),
], ids=["cpu_seconds", "file_size"])
def test_a_resource_limit_met_is_named(limits, trick, says, tmp_path):
    path = tmp_path / FILE_NAME
    path.write_text(stage02_plus(trick)(tmp_path))
    report = check_file(3, path, batches=5, limits=limits)
    assert report.exit_code == 2 and re.search(says, report.message), report.message
    assert not (tmp_path / "big.bin").exists()  # written in the scratch folder, removed


# --- Modules beside the file, check run from its folder ------------------------------------
SHADOWS = {
    "json.py": "json", "gc.py": "gc", "numpy.py": "numpy",
    "dezero_mini/__init__.py": "dezero_mini", "sitecustomize.py": "sitecustomize",
}


def _shadowed_folder(tmp_path):
    """The stage-02 file with, beside it, a module of each name in ``SHADOWS``
    that, once imported, records it and makes every check pass (json.loads
    answers an all-pass report)."""
    folder = tmp_path / "submission"
    folder.mkdir()
    (folder / FILE_NAME).write_text(step_text(2))
    for file_name, name in SHADOWS.items():
        target = folder / file_name
        target.parent.mkdir(exist_ok=True)
        target.write_text(f"open({str(tmp_path / ('IMPORTED_' + name))!r}, 'w').close()\n"
                          "raise SystemExit(0)  # 'every contract passes'\n")
    return folder


@pytest.mark.parametrize("isolated", [False, True], ids=["python -m", "python -I -m"])
def test_modules_beside_the_file_change_nothing(isolated, tmp_path):
    folder = _shadowed_folder(tmp_path)
    command = [sys.executable, *(["-I"] if isolated else []), "-m", "dezero_mini", "check", "3",
               FILE_NAME, "--batches", "5", "--json"]
    env = dict(os.environ, PYTHONPATH=str(ROOT))  # (ignored by -I: the install is found)
    done = subprocess.run(command, cwd=folder, capture_output=True, text=True, timeout=300,
                          env=env)
    imported = sorted(p.name for p in tmp_path.glob("IMPORTED_*"))
    if not isolated:
        # A dezero_mini/ package in the current folder is what `python -m
        # dezero_mini` would run: the installation's guard (dezero_mini/shadowing.py,
        # run from a .pth line before python -m adds the folder) refuses it in one
        # line, and nothing of the folder is imported. Graders still run `python -I -m`.
        assert imported == [] and done.returncode == 2, done.stderr
        assert "stands in for the dezero_mini package" in done.stderr, done.stderr
        return
    assert imported == [], done.stderr
    report = json.loads(done.stdout)
    assert done.returncode == report["exit_code"] == 1, done.stderr
    assert len(contracts_at(3)) - report["passed"] == HONEST_FAILS


def test_modules_other_than_the_package_beside_the_file_change_nothing_with_python_m(tmp_path):
    folder = _shadowed_folder(tmp_path)
    shutil.rmtree(folder / "dezero_mini")
    done = subprocess.run([sys.executable, "-m", "dezero_mini", "check", "3", FILE_NAME,
                           "--batches", "5", "--json"], cwd=folder, capture_output=True,
                          text=True, timeout=300)
    assert sorted(p.name for p in tmp_path.glob("IMPORTED_*")) == [], done.stderr
    report = json.loads(done.stdout)
    assert done.returncode == report["exit_code"] == 1
    assert len(contracts_at(3)) - report["passed"] == HONEST_FAILS


# --- Processes that would outlive the check -------------------------------------------------
@pytest.fixture
def unsandboxed(monkeypatch):
    """Run the checks as if bubblewrap could not run here (the contained
    worker of a machine without it)."""
    monkeypatch.setattr(sandbox_tool, "sandbox_problem", lambda: "switched off by the test")


@pytest.fixture(params=["sandboxed", "unsandboxed"])
def either_way(request):
    """Each defence that holds with and without the sandbox, tried both ways."""
    if request.param == "unsandboxed":
        request.getfixturevalue("unsandboxed")
    elif sandbox_tool.sandbox_problem():
        pytest.skip(f"no sandbox here: {sandbox_tool.sandbox_problem()}")
    return request.param


ESCAPING_GRANDCHILD = """
import os, time
if os.fork() == 0:             # a child ...
    os.setsid()                # ... in a session of its own, out of the worker's group,
    if os.fork() == 0:         # whose child is orphaned at once
        with open("grandchild.pid", "w") as _file:
            _file.write(str(os.getpid()))
        while True:
            time.sleep(0.05)
    os._exit(0)
while not os.path.exists("grandchild.pid"):
    time.sleep(0.01)
print("the grandchild runs")
"""


def processes_of(path):
    """The pids of the processes whose command line names ``path`` (a
    worker of its check, and whatever the worker forked), as /proc shows
    them, zombies left out."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/cmdline", "rb") as cmdline:
                    if str(path).encode() in cmdline.read() and _alive(int(entry)):
                        found.append(int(entry))
            except OSError:
                pass
    return found


def gone_soon(find, seconds=30):
    """Whether ``find()`` (the pids of processes still running) comes back empty
    within ``seconds``. A SIGKILLed process takes a moment to finish exiting, a
    long one on a busy machine: the bound only ends the wait for one that escaped."""
    deadline = time.monotonic() + seconds
    while find():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def _alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc and subreapers: Linux")
def test_a_grandchild_that_leaves_the_group_dies_with_the_check(either_way, tmp_path, capsys):
    path = tmp_path / FILE_NAME
    path.write_text(stage02_plus(ESCAPING_GRANDCHILD)(tmp_path))
    code, report, _ = run_check(capsys, path, ("--batches", "5"))
    assert code == 1 and "the grandchild runs" in report["output"], report_text(report)
    assert gone_soon(lambda: processes_of(path)), processes_of(path)


LOOPS_AT_THE_TOP = """
print("looping", flush=True)
while True:
    pass
"""


@pytest.mark.parametrize("signum, code", [(signal.SIGTERM, 143), (signal.SIGINT, 130),
                                          (signal.SIGHUP, 129)])
def test_a_stop_signal_kills_the_worker_and_says_so(signum, code, tmp_path):
    path = tmp_path / FILE_NAME
    path.write_text(stage02_plus(LOOPS_AT_THE_TOP)(tmp_path))
    check = subprocess.Popen([sys.executable, "-m", "dezero_mini", "check", "3", str(path)],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline, workers = time.monotonic() + 120, []
    while not workers and time.monotonic() < deadline:
        time.sleep(0.05)
        workers = [pid for pid in processes_of(path) if pid != check.pid]
    assert workers
    time.sleep(0.5)  # (the worker loads the file)
    check.send_signal(signum)
    out, err = check.communicate(timeout=300)  # (only ends a hang)
    assert check.returncode == code, err
    assert err.strip().splitlines()[-1] == (
        f"dezero_mini check: stopped by {signal.Signals(signum).name}: the worker and its "
        "processes were killed; no result")
    assert gone_soon(lambda: [pid for pid in workers if _alive(pid)])


# --- The installation ------------------------------------------------------------------------
def test_a_submission_that_changes_the_installation_is_reported(unsandboxed, tmp_path, capsys,
                                                               monkeypatch):
    """A copy of steps/ stands in for the installation: the file touches one
    of its files (a later check would run a changed course). Without the
    sandbox the change is found afterwards, and not counted; who made it
    cannot be told (another process could have: tests/test_checker_installation.py)."""
    code, report = _touch_the_installation(tmp_path, capsys, monkeypatch)
    assert code == 2 and report["status"] == "error" and report["points"] == 0
    assert re.search(r"^not counted: the installation changed during the check \(by the file or "
                     r"by another process\): .*\S*step01_leaking_graph\.py\b", report["message"]), (
        report["message"])


def test_the_sandbox_keeps_the_installation_read_only(tmp_path, capsys, monkeypatch):
    """In the sandbox the same write is refused: the file cannot load."""
    if sandbox_tool.sandbox_problem():
        pytest.skip(f"no sandbox here: {sandbox_tool.sandbox_problem()}")
    before = (STEPS / "step01_leaking_graph.py").read_text()
    code, report = _touch_the_installation(tmp_path, capsys, monkeypatch)
    assert code == 2 and re.search("Read-only file system|Permission denied", report["message"])
    assert (tmp_path / "steps" / "step01_leaking_graph.py").read_text() == before


def _touch_the_installation(tmp_path, capsys, monkeypatch):
    steps = tmp_path / "steps"
    shutil.copytree(STEPS, steps)
    monkeypatch.setenv("DEZERO_MINI_STEPS", str(steps))
    path = tmp_path / "mine" / FILE_NAME
    path.parent.mkdir()
    path.write_text(stage02_plus(
        "import os\nwith open(os.path.join(os.environ['DEZERO_MINI_STEPS'], "
        "'step01_leaking_graph.py'), 'a') as _f:\n    _f.write('# pass everything\\n')\n")(tmp_path))
    code, report, _ = run_check(capsys, path, ("--batches", "5"))
    return code, report


# --- What a determined submission can still do ------------------------------------------------
FORGE_WITH_THE_WORKERS_OWN_KEY = """
import gc, os, sys, types
from dezero_mini.contracts import all_contracts
from dezero_mini.contracts.figures import digest_of

_writer = next(o for o in gc.get_objects() if type(o).__name__ == "Writer")
_batches = int(sys.argv[3])
_readers = {contract.name for contract in all_contracts() if contract.reads_record}
_flat = dict(traced_current=0, traced_peak=0, live_objects=6, tracked_objects=0)
_final = dict(final_collected=0, live_after_collect=6)
_record = types.SimpleNamespace(**{k: [v] * _batches for k, v in _flat.items()}, **_final)
_writer.send(event="loaded")
_streamed = False
for _name in [a for a in sys.argv if a.isidentifier()]:
    _writer.send(event="start", name=_name)
    if _name in _readers and not _streamed:  # a flat record, streamed batch by batch
        for _batch in range(_batches):
            _writer.send(event="figures", batch=_batch, **_flat)
        _writer.send(event="figures_end", **_final)
        _streamed = True
    _writer.send(event="result", name=_name, passed=True, expected="x", measured="x", error=None,
                 records=[digest_of(_record)] if _name in _readers else [])
os._exit(0)
"""


EXEC_THE_REFERENCE_AS_ITS_OWN = """
from dezero_mini.memory.stages import stage_path
exec(compile(stage_path(3).read_text(), __file__, "exec"))
"""


def test_full_python_in_the_worker_can_still_forge_a_pass(unsandboxed, tmp_path, capsys):
    """The limits of tamper evidence in one process (the lab chapter says so):
    the secret is in the worker's memory, and the learner's code runs there.
    If this test fails, the checker got stronger: update the chapter."""
    path = tmp_path / FILE_NAME
    path.write_text(stage02_plus(FORGE_WITH_THE_WORKERS_OWN_KEY)(tmp_path))
    code, report, _ = run_check(capsys, path, ("--batches", "5"))
    assert code == 0 and report["passed"] == len(contracts_at(3))


def test_the_reference_compiled_under_the_files_name_is_not_its_own(unsandboxed, tmp_path,
                                                                     capsys):
    """Without the sandbox the reference is in sight: compiled under the
    file's own name, its classes once passed for the file's (6 of 6)."""
    path = tmp_path / FILE_NAME
    path.write_text(stage02_plus(EXEC_THE_REFERENCE_AS_ITS_OWN)(tmp_path))
    code, report, _ = run_check(capsys, path, ("--batches", "5"))
    assert code == 2 and report["passed"] == 0
    assert "not its own text" in report["message"], report["message"]


def test_in_the_sandbox_the_stage_reference_is_out_of_sight(tmp_path, capsys):
    """The sandbox shows the step files of the earlier stages only: the
    reference of the stage graded cannot be run as the file's own."""
    if sandbox_tool.sandbox_problem():
        pytest.skip(f"no sandbox here: {sandbox_tool.sandbox_problem()}")
    path = tmp_path / FILE_NAME
    path.write_text(stage02_plus(EXEC_THE_REFERENCE_AS_ITS_OWN)(tmp_path))
    code, report, _ = run_check(capsys, path, ("--batches", "5"))
    assert code == 2 and "unknown stage 3" in report["message"], report["message"]


def test_the_lab_chapter_states_the_checkers_defaults():
    """The threat model quotes the limits: it follows the code."""
    from dezero_mini.contracts.runner import (DEFAULT_TIMEOUT, DEFAULT_TOTAL_TIMEOUT,
                                              REFERENCE_PEAK_MIB, RSS_GROWTH_ALLOWED,
                                              RSS_GROWTH_FLOOR, RSS_GROWTH_PER_BATCH)
    from dezero_mini.contracts.sandbox import MIB

    text = " ".join((ROOT / "docs" / "classroom.md").read_text().split())
    section = text[text.index("## What a submission can and cannot do"):]
    limits = Limits()
    for words in (f"{limits.memory_mib} MiB of address space", f"{limits.cpu_seconds} s of CPU time",
                  f"files of at most {limits.file_size_mib} MiB",
                  f"{limits.extra_processes} more than the grading user runs",
                  f"{DEFAULT_TOTAL_TIMEOUT:g} s by default", f"(`--timeout`, {DEFAULT_TIMEOUT:g} s)",
                  f"the allowance is {RSS_GROWTH_FLOOR // MIB} MiB and "
                  f"{RSS_GROWTH_PER_BATCH // 1024} KiB per batch of the record, at most "
                  f"{RSS_GROWTH_ALLOWED // MIB} MiB",
                  f"{rss_growth_allowed(BATCHES) / MIB:g} MiB allowed over {BATCHES} batches",
                  f"({REFERENCE_PEAK_MIB[3]} MiB at stage 03, {REFERENCE_PEAK_MIB[10]} MiB at stage 10)",
                  f"above the {memory_budget(3) // MIB} MiB that stage 03 needs at most",
                  f"more than {limits.memory_mib} MiB of memory"):
        assert words in section, words


# --- What the parent reads: bytecode, reports, links, terminals -------------------------------
def test_bytecode_written_into_the_installation_is_reported(tmp_path, capsys, monkeypatch):
    """Python runs a ``__pycache__`` file whose header matches its source
    without reading the source: a submission that writes one changes every
    later check, with the sources untouched (their size and times too)."""
    steps = tmp_path / "steps"
    shutil.copytree(STEPS, steps, ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.setenv("DEZERO_MINI_STEPS", str(steps))
    path = tmp_path / "mine" / FILE_NAME
    path.parent.mkdir()
    path.write_text(stage02_plus(
        "import importlib.util, os\n"
        "_source = os.path.join(os.environ['DEZERO_MINI_STEPS'], 'step01_leaking_graph.py')\n"
        "with open(importlib.util.cache_from_source(_source), 'r+b') as _pyc:\n"
        "    _pyc.seek(0, 2)\n"
        "    _pyc.write(b'\\0')  # any bytes of the attacker's, its header kept\n")(tmp_path))
    # Without the sandbox (in it the installation is read-only: the write fails).
    code, report, _ = run_check(capsys, path, ("--batches", "5", "--sandbox", "off"))
    assert code == 2 and re.search(r"^not counted: the installation changed during the check "
                                   r"\(by the file or by another process\): "
                                   r"\S*__pycache__/step01_leaking_graph\.\S+\.pyc",
                                   report["message"]), report["message"]


def test_the_modules_that_pth_files_import_are_watched(tmp_path):
    """An editable install's finder is a module that a ``.pth`` file imports
    at every start of Python: its bytes are part of the installation."""
    from dezero_mini.contracts.runner import _imported_by_pth

    (tmp_path / "__editable__.course.pth").write_text("import __editable___course_finder; "
                                                      "__editable___course_finder.install()\n")
    (tmp_path / "__editable___course_finder.py").write_text("def install(): pass\n")
    (tmp_path / "plain.pth").write_text("/some/folder\n")
    found = _imported_by_pth(tmp_path / "__editable__.course.pth", str(tmp_path))
    assert found == [tmp_path / "__editable___course_finder.py"]
    assert _imported_by_pth(tmp_path / "plain.pth", str(tmp_path)) == []


def test_a_file_whose_name_does_not_end_in_py_is_refused_in_one_line(tmp_path):
    target = tmp_path / "notes.txt"
    target.write_text(step_text(2))
    (tmp_path / "mine").symlink_to(target)
    for path in (target, tmp_path / "mine"):
        report = check_file(3, path, batches=5)
        assert report.status == "error" and report.message == (
            "cannot be checked: notes.txt is not a Python file (its name does not end in .py): "
            "give the path of your stage file, stepNN_<name>.py"), report.message


def _report(**changes):
    """A check's report of stage 03 with every contract passed, changed by ``changes``."""
    from dezero_mini.contracts.scoring import Weights

    points = Weights().points_at(3)
    report = {"status": "passed", "exit_code": 0, "points": sum(points.values()),
              "max_points": sum(points.values()), "passed": len(points), "total": len(points),
              "message": None, "contracts": [
                  {"name": name, "passed": True, "points": value, "max_points": value}
                  for name, value in points.items()]}
    report.update(changes)
    return report


def _forged(**changes):
    return json.dumps(_report(**changes)).encode()


@pytest.mark.parametrize("out, code, says", [
    (_forged(), 0, None),  # a real pass
    (_forged(), -9, "it says exit code 0, the check exited with -9"),  # written, then its parent killed
    (b'{"contracts": []}', 1, "no status of the right type"),  # (KeyError: 'status' once)
    (b"", 1, "it printed nothing"),
    (b"[1, 2]", 0, "not a JSON object"),
    (b"[" * 100_000 + b"]" * 100_000, 1, "not JSON"),  # (RecursionError)
    (b"\xff\xfe", 1, "not JSON"),
    (_forged(points="9"), 0, "no points of the right type"),
    (_forged(passed=True), 0, "no passed of the right type"),
    (_forged(status="excellent"), 0, "status 'excellent' with exit code 0"),
    (_forged(status="failed", exit_code=1), 1, "status 'failed' with 6 of 6 passed"),
    (_forged(contracts=[]), 0, "its contracts are not the stage's"),
    (_forged(message=["x"]), 0, "its message is not text"),
    (_forged(points=100, max_points=100), 0, "its totals do not add up"),
    (json.dumps(_report(contracts=[dict(c, points=50) for c in _report()["contracts"]])).encode(),
     0, "the points of leaf_gradients_are_right do not add up"),
], ids=["a_real_pass", "exit_code_disagrees", "no_status", "nothing", "a_list", "deep_json",
        "not_utf8", "points_as_text", "passed_as_bool", "unknown_status", "failed_all_passed",
        "no_contracts", "message_not_text", "totals", "contract_points"])
def test_grade_takes_only_a_report_that_holds_together(out, code, says):
    from dezero_mini.contracts.scoring import Weights
    from dezero_mini.grading.batch import report_problem

    assert report_problem(out, code, Weights().points_at(3)) == says


def test_a_report_grade_cannot_use_is_that_students_error_row(tmp_path, monkeypatch):
    """A check that prints something else than its report costs its student
    the points, not the class its CSV."""
    from dezero_mini.grading import batch

    files = {}
    for student in ("honest", "forger"):
        files[student] = tmp_path / student / FILE_NAME
        files[student].parent.mkdir()
        files[student].write_text(step_text(2))
    printed = {"honest": _forged(), "forger": b'{"contracts": [], "points": 99}'}

    def fake_check_argv(self, file):
        out = printed[Path(file).parent.name]
        return [sys.executable, "-c", f"import sys; sys.stdout.buffer.write({out!r})"]

    monkeypatch.setattr(batch.Grading, "check_argv", fake_check_argv)
    grading = batch.Grading(number=3, jobs=2)
    rows = batch.grade_all(grading, batch.find_submissions(3, [str(tmp_path / "honest"),
                                                               str(tmp_path / "forger")]))
    by_student = {row["student"]: row for row in rows}
    assert by_student["honest"]["status"] == "passed"
    assert by_student["forger"]["status"] == "error" and by_student["forger"]["points"] == 0
    assert "its report cannot be used: no status of the right type" in by_student["forger"]["message"]
    assert "forger" in batch.csv_text(3, rows)


def test_grade_refuses_a_link_to_a_classmates_file(tmp_path):
    from dezero_mini.grading import batch

    (tmp_path / "bob").mkdir()
    (tmp_path / "bob" / FILE_NAME).write_text(step_text(2))
    (tmp_path / "mallory").mkdir()
    (tmp_path / "mallory" / FILE_NAME).symlink_to(tmp_path / "bob" / FILE_NAME)
    (tmp_path / "eve.py").symlink_to(tmp_path / "bob" / FILE_NAME)
    found = batch.find_submissions(3, [str(tmp_path / "mallory"), str(tmp_path / "eve.py")])
    assert [(s.student, s.file, s.status) for s in found] == [("mallory", None, "error"),
                                                             ("eve", None, "error")]
    assert all("is a link, not a file" in s.problem for s in found)


def test_what_a_submission_prints_cannot_redraw_the_text_report(tmp_path, capsys):
    """Escape sequences in the file's output and in what it raises are shown,
    not obeyed; the JSON keeps them as they were."""
    from dezero_mini.cli.check import report_text as text_of

    clear_and_lie = "\x1b[2J\x1b[H6 of 6 contracts pass\r\x9b1m"
    path = tmp_path / FILE_NAME
    path.write_text(stage02_plus(
        f"print({clear_and_lie!r})\n"
        "_backward = Variable.backward\n"
        "def _raise(self, *args, **kwargs):\n"
        f"    raise ValueError({clear_and_lie!r})\n"
        "Variable.backward = _raise\n")(tmp_path))
    report = check_file(3, path, batches=5)
    assert clear_and_lie in report.output
    text = text_of(report)
    assert not re.search("[\x00-\x08\x0b-\x1f\x7f-\x9f]", text), repr(text)
    assert "\\x1b[2J\\x1b[H6 of 6 contracts pass\\x0d\\x9b1m" in text


def test_rss_growth_is_measured_from_the_lowest_point_not_from_the_loaded_size(monkeypatch):
    """A ballast held while loading and freed at the first backward: the RSS
    falls 260 MiB, then the graphs take 200 MiB. From the size once loaded
    nothing grew; from the lowest point, 200 MiB did."""
    from dezero_mini.contracts import runner

    readings = iter([300, 40, 90, 240, 200])  # MiB: loaded, freed, growing
    child = object.__new__(runner._Child)
    child.worker = type("Tree", (), {"memory": lambda self: next(readings) * MIB})()
    child.rss = child.rss_peak = child.rss_loaded = child.rss_low = None
    child.rss_rise, child._rss_read_at = 0, 0.0
    child.mark_loaded()
    for _ in range(4):
        child._rss_read_at = 0.0
        child._sample_rss()
    assert child.rss_loaded == 300 * MIB and child.rss_growth == 200 * MIB


def test_rows_graded_after_the_installation_changed_are_not_counted(tmp_path, monkeypatch):
    """The first check of the run changes the installation (a copy of
    ``steps/`` stands in for it): its own check reports the change, and
    the honest file graded after it, on a changed course, is not counted."""
    from dezero_mini.grading import batch

    steps = tmp_path / "steps"
    shutil.copytree(STEPS, steps, ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.setenv("DEZERO_MINI_STEPS", str(steps))
    for student, text in (("mallory", stage02_plus(
            "import os\nwith open(os.path.join(os.environ['DEZERO_MINI_STEPS'], "
            "'step01_leaking_graph.py'), 'a') as _f:\n    _f.write('# pass everything\\n')\n")),
                          ("bob", stage02_plus(""))):
        (tmp_path / student).mkdir()
        (tmp_path / student / FILE_NAME).write_text(text(tmp_path))
    # Without the sandbox (in it the installation is read-only: the write fails).
    grading = batch.Grading(number=3, jobs=1, batches=5, sandbox="off")
    rows = batch.grade_all(grading, batch.find_submissions(
        3, [str(tmp_path / "mallory"), str(tmp_path / "bob")]))
    assert [(row["student"], row["status"], row["points"]) for row in rows] == [
        ("mallory", "error", 0), ("bob", "error", 0)]
    assert all(row["message"].startswith("not counted: the grading installation changed during "
                                          "this run (by a submission or by another process): ")
               for row in rows), rows


def test_a_check_that_cannot_start_is_that_students_error_row(tmp_path, monkeypatch):
    from dezero_mini.grading import batch

    for student in ("alice", "bob"):
        (tmp_path / student).mkdir()
        (tmp_path / student / FILE_NAME).write_text(step_text(2))
    started = batch._Running.run

    def run(self, argv, cwd, timeout, given=b""):
        if "alice" in " ".join(argv):
            raise OSError(24, "Too many open files")
        return started(self, argv, cwd, timeout, given)

    monkeypatch.setattr(batch._Running, "run", run)
    rows = batch.grade_all(batch.Grading(number=3, jobs=2, batches=5), batch.find_submissions(
        3, [str(tmp_path / "alice"), str(tmp_path / "bob")]))
    assert [(row["student"], row["status"]) for row in rows] == [("alice", "error"),
                                                                ("bob", "failed")]
    assert rows[0]["message"].endswith("the grader could not check it: OSError: [Errno 24] Too "
                                       "many open files"), rows[0]["message"]
