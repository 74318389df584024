"""The red team's attacks that need more than one ``check`` of a stage file.

The rows that are one stage file checked as stage 03 are in the families'
tables (``tests/test_checker_hostile.py``, ``HOSTILE``: the collector run by
the file itself, a graph of classes that the checker does not count, a flood
of the result channel). Here: the course's modules that a later stage's
contracts measure against, planted or changed by the file (checked as stage
04, whose contracts load stage 03); what reaches the learner's terminal
through ``progress``, which printed the learner's file names and what the
file raised as they were.
"""
import json
import re

import pytest

from conftest import STEPS
from dezero_mini import cli
from dezero_mini.contracts import bubblewrap

def check_stage_file_with(trick, number, file_name, tmp_path, capsys, base=None):
    """``check NUMBER`` (``--json``, 5 batches) of the course's step file of
    stage ``base`` (default: the stage before ``number``) with ``trick`` at
    its end, saved as ``file_name``: (exit code, report)."""
    base = number - 1 if base is None else base
    path = tmp_path / file_name
    path.write_text(next(STEPS.glob(f"step{base:02d}_*.py")).read_text()
                    + "\n# --- the trick ---\n" + trick)
    code = cli.main(["check", str(number), str(path), "--json", "--batches", "5"])
    return code, json.loads(capsys.readouterr().out)


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


# --- A stage measured against an earlier one: that one's module, planted --------------------
PLANT_A_HEAVIER_STAGE_03 = """
import importlib.util as _util, os as _os, sys as _sys
import numpy as _np

_real = _os.path.join(_os.environ["DEZERO_MINI_STEPS"], "step03_weakref_outputs.py")
_spec = _util.spec_from_file_location("step03_weakref_outputs", _real)
_fake = _util.module_from_spec(_spec)
_spec.loader.exec_module(_fake)  # stage 03 as the checker loads it, then made heavier
_backward = _fake.Variable.backward


def _backward_with_ballast(self, *args, **kwargs):
    _ballast = _np.ones(4 << 20)  # 32 MiB held through backward: stage 03's peak looks high
    return _backward(self, *args, **kwargs)


_fake.Variable.backward = _backward_with_ballast
_sys.modules["step03_weakref_outputs"] = _fake  # what the contracts' load_stage(3) finds
"""

MAKE_THE_LOADED_STAGE_03_HEAVIER = """
import sys as _sys
import numpy as _np

_stage03 = _sys.modules.get("step03_weakref_outputs")
if _stage03 is not None:  # (loaded by the checker before this file)
    _backward = _stage03.Variable.backward

    def _backward_with_ballast(self, *args, **kwargs):
        _ballast = _np.ones(4 << 20)
        return _backward(self, *args, **kwargs)

    _stage03.Variable.backward = _backward_with_ballast
"""


@pytest.mark.parametrize("trick, says", [
    # Without the fix: backward_peak_below_stage03 passed ("< 29.6 MiB (90% of stage 03's
    # 32.9 MiB)"): 6 of 9, 2 points unearned.
    (PLANT_A_HEAVIER_STAGE_03, r"tampering detected: loading step04_retain_grad\.py replaced "
                               r"sys\.modules\['step03_weakref_outputs'\]"),
    (MAKE_THE_LOADED_STAGE_03_HEAVIER, r"tampering detected: loading step04_retain_grad\.py "
                                       r"replaced step03_weakref_outputs\.Variable\.backward"),
], ids=["plants_a_heavier_stage_03_in_sys_modules", "makes_the_loaded_stage_03_heavier"])
def test_the_stage_measured_against_is_the_courses(trick, says, tmp_path, capsys):
    """Stage 03's own framework handed in as stage 04 (with the trick, it is
    not the reference verbatim): it fails backward_peak_below_stage03
    honestly, unless the stage 03 that the contract loads is the file's."""
    code, report = check_stage_file_with(trick, 4, "step04_retain_grad.py", tmp_path, capsys)
    assert code == report["exit_code"] == 2, report
    assert re.search(says, report["message"]), report["message"]


# --- Code of the file's run inside a measurement: figures rewritten after they were taken ------
REWRITE_THE_RECORD_FROM_REGISTRY_CLEAR = """
import sys as _sys


class _Registry:  # forget_graphs() calls REGISTRY.clear() after the record, before it is read
    def clear(self):
        frame = _sys._getframe(1)
        while frame is not None:
            record = frame.f_locals.get("record")
            if getattr(record, "traced_current", None) is not None:
                record.traced_current[:] = record.traced_current[0]
            frame = frame.f_back


REGISTRY = _Registry()
"""


def test_a_record_rewritten_after_its_figures_were_taken_is_tampering(tmp_path, capsys):
    """The checker calls the file's ``REGISTRY.clear()`` between the record
    and the contract's reading it, and the record's arrays are within reach
    of the stack. Without the fix, the stage-02 file (915 KiB a batch) had
    the worker report "0.0 KiB per batch", and passed traced_bytes_flat
    unless the RSS read from outside contradicted it. Now each batch's
    figures leave the worker as they are taken (``contracts.figures``), and
    a result whose record differs from them is tampering. (The other members
    of the family, from the file's backward, a thread, a finalizer and
    ``gc.get_objects()``: test_checker_hostile.py, ``rewrites_*``.)"""
    code, report = check_stage_file_with(REWRITE_THE_RECORD_FROM_REGISTRY_CLEAR, 3,
                                         "step03_weakref_outputs.py", tmp_path, capsys)
    assert code == report["exit_code"] == 2, report
    assert report["message"] == (
        "tampering detected: live_objects_constant read a record whose traced_current differs "
        "from the figures streamed as they were taken (rewritten after it was measured)"), report


# --- Values of the file's that answer a comparison for themselves -----------------------------
A_SWITCH_THAT_EQUALS_ANYTHING = """
import contextlib as _contextlib


class _Liar:  # a switch that says it equals whatever it is compared with
    def __init__(self, value):
        self.value = value

    def __bool__(self):
        return self.value

    def __eq__(self, other):
        return True

    __hash__ = None

    def __repr__(self):
        return repr(self.value)


@_contextlib.contextmanager
def using_config(name, value):
    setattr(Config, name, _Liar(value))
    try:
        yield
    finally:
        setattr(Config, name, _Liar(True))  # a fixed value, not the one it found: no nesting


@_contextlib.contextmanager
def no_grad():
    Config.enable_backprop = False
    try:
        yield
    finally:
        Config.enable_backprop = True
"""


def test_a_value_that_equals_anything_does_not_pass_a_comparison(tmp_path, capsys):
    """Stage 05's file with a ``using_config`` that restores a fixed value
    (blocks do not nest) and wraps the switch in an object whose ``__eq__``
    says yes. Without the fix, ``seen == [True, False, True]`` asked the
    object, and using_config_nests passed while it measured "outer True"
    (13 of 13). Stage 10's checkpoint contract compares its modes the same
    way (``contracts.plainly_equal``)."""
    _, report = check_stage_file_with(A_SWITCH_THAT_EQUALS_ANYTHING, 5, "step05_no_grad.py",
                                      tmp_path, capsys, base=5)
    nests = next(c for c in report["contracts"] if c["name"] == "using_config_nests")
    assert not nests["passed"] and nests["measured"] == "inner True, outer True, after True", nests
    assert report["passed"] == report["total"] - 1, report


def test_plainly_equal_asks_no_value_of_the_file():
    from dezero_mini.contracts import plainly_equal

    class Liar:
        def __eq__(self, other):
            return True

    assert plainly_equal([True, False], [True, False]) and plainly_equal([1, 0], [True, False])
    assert not plainly_equal([Liar(), Liar()], [True, False])
    assert not plainly_equal((True, False), [True, False]) and not plainly_equal([True], [True, 1.5])

    class Truthy(int):  # a subclass of a plain type answers for itself too
        def __eq__(self, other):
            return True

    assert not plainly_equal([Truthy(1)], [False])


def test_the_contracts_count_a_graph_of_twin_classes_too(tmp_path):
    """The second look at a graph of twin classes (copies of Variable and
    Function, which the worker now refuses at load: HOSTILE's
    ``builds_its_graphs_from_classes_the_checker_does_not_count``): stage
    03's contracts, run on such a module, see it stay alive and in cycles
    whatever its classes. Without the fix both passed."""
    from test_checker_hostile import TWIN_CLASSES

    from dezero_mini.contracts import get_stage
    from dezero_mini.contracts.bench import configure, BATCHES
    from dezero_mini.memory.stages import load_stage_file

    path = tmp_path / "twins.py"
    path.write_text(next(STEPS.glob("step02_*.py")).read_text() + TWIN_CLASSES)
    module = load_stage_file(path, "learner_twins_of_the_red_team")
    by_name = {contract.name: contract for contract in get_stage(3).contracts}
    configure(batches=5)
    try:
        constant = by_name["live_objects_constant"].check(module)
        nothing = by_name["collector_finds_nothing"].check(module)
    finally:
        configure(batches=BATCHES)
    assert not constant.passed and re.search(
        r"after every batch; but the objects that the collector tracks \(of any class\) grew by "
        r"[1-9]", constant.measured), constant
    assert not nothing.passed and re.search(r"^0; and it found \d+ objects \(.*_Leaf: \d+",
                                            nothing.measured), nothing


# --- Memory that no process's resident size shows ---------------------------------------------
def files_in_the_sandboxs_tmp(text):
    """The stage-03 reference (flat traced bytes), plus 1 MiB a backward (the
    first 200) written to a file of the sandbox's private ``/tmp``: a tmpfs,
    memory that no process's RSS counts."""
    from test_checker_hostile import with_backward_prologue

    return with_backward_prologue(
        text.replace("import weakref\n", "import weakref\n_HIDDEN = [0]\n", 1),
        "        if _HIDDEN[0] < 200:\n"
        "            _HIDDEN[0] += 1\n"
        "            with open(f'/tmp/hidden_{_HIDDEN[0]}', 'wb') as _file:\n"
        "                _file.write(b'x' * (1 << 20))\n")


@pytest.mark.skipif(bool(bubblewrap.sandbox_problem()),
                    reason=f"no sandbox here: {bubblewrap.sandbox_problem()}")
def test_memory_kept_in_files_of_the_sandboxs_tmp_is_the_trees(tmp_path, capsys):
    """Without the fix: 6 of 6 at the default 50 batches, the traced bytes
    flat and the RSS too, with some 60 MiB in /tmp (the allowance: 28.5)."""
    path = tmp_path / "step03_weakref_outputs.py"
    path.write_text(files_in_the_sandboxs_tmp(next(STEPS.glob("step03_*.py")).read_text()))
    code = cli.main(["check", "3", str(path), "--json"])
    report = json.loads(capsys.readouterr().out)
    flat = next(c for c in report["contracts"] if c["name"] == "traced_bytes_flat")
    assert code == 1 and not flat["passed"] and flat["error"] == "contradiction", flat
    assert re.search(r"while its RSS (grew|reached) \d+ MiB", flat["measured"]), flat
