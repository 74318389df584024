"""A learner's own module in the current folder that has a name the command
line imports (``dezero_mini.py``, a ``dezero_mini/`` folder, ``numpy.py``,
``json.py``...): the command never runs it in silence. Either it runs as if
the file were not there and names the file in one warning line (its own
scripts would import it), or it refuses in one line, before the file runs.

``python -m`` puts the current folder first on ``sys.path``, so a
``dezero_mini.py`` there would run as ``__main__`` before any code of the
package: the ``.pth`` line that the installation puts into ``site-packages``
(dezero_mini/shadowing.py, setup.py) refuses it at Python's start. The
installed ``dezero_mini`` script, ``-P`` (3.11 and later) and ``-I`` do not
look in the current folder at all. Through ``PYTHONPATH`` the folder does
come before the libraries: the command refuses before importing them.
"""
import os
import py_compile
import subprocess
import sys
from pathlib import Path

import pytest

from dezero_mini import shadowing
from dezero_mini.cli.start import module_name_problem
from dezero_mini.contracts import get_stage
from dezero_mini.memory.stages import STAGES

STAGE_NUMBERS = [number for number, _ in STAGES]
SCRIPT = Path(sys.executable).with_name("dezero_mini")
ENTRIES = {"-m": ["-m"], "script": [], "-P -m": ["-P", "-m"], "-I -m": ["-I", "-m"],
           "PYTHONPATH=. script": [], "PYTHONPATH=. -m": ["-m"]}
LEARNER = "raise SystemExit('the learner\\'s own module ran')\n"


def _package(folder):
    (folder / "dezero_mini").mkdir()
    (folder / "dezero_mini" / "__init__.py").write_text(LEARNER)


def _plain_folder(folder):
    (folder / "dezero_mini").mkdir()
    (folder / "dezero_mini" / "helper.py").write_text(LEARNER)


def _compiled(folder):
    (folder / "src.py").write_text(LEARNER)
    py_compile.compile(str(folder / "src.py"), cfile=str(folder / "dezero_mini.pyc"))
    (folder / "src.py").unlink()


def _module(name):
    def make(folder):
        (folder / name).write_text(LEARNER)
    return make


def _a_package_named(name):
    def make(folder):
        (folder / name).mkdir()
        (folder / name / "__init__.py").write_text(LEARNER)
    return make


LAYOUTS = {
    "dezero_mini.py": _module("dezero_mini.py"),
    "dezero_mini.pyc": _compiled,
    "a dezero_mini package": _package,
    "a dezero_mini folder": _plain_folder,
    "numpy.py": _module("numpy.py"),
    "matplotlib.py": _module("matplotlib.py"),
    "json.py": _module("json.py"),
    "argparse.py": _module("argparse.py"),
    "random.py": _module("random.py"),
    "a json package": _a_package_named("json"),
    "helpers.py (no module's name)": _module("helpers.py"),
}
#: The layouts that would stand in for the package itself under python -m.
STAND_INS = {"dezero_mini.py", "dezero_mini.pyc", "a dezero_mini package", "a dezero_mini folder"}
#: What the warning line names for a layout (None: no warning).
NAMED = {"dezero_mini.py": "dezero_mini.py", "a dezero_mini package": "dezero_mini",
         "numpy.py": "numpy.py", "matplotlib.py": "matplotlib.py", "json.py": "json.py",
         "argparse.py": "argparse.py", "random.py": "random.py", "a json package": "json"}


def expected(layout, entry):
    """"refused" (exit 2, one line saying what stands in), or "runs" (exit 0)."""
    if layout in STAND_INS and entry in ("-m", "PYTHONPATH=. -m", "PYTHONPATH=. script"):
        return "refused"
    if entry.startswith("PYTHONPATH") and layout in NAMED:
        return "refused"
    return "runs"


@pytest.mark.parametrize("entry", ENTRIES)
@pytest.mark.parametrize("layout", LAYOUTS)
def test_a_module_of_the_learner_never_runs_silently_in_place_of_the_package(
        tmp_path, layout, entry):
    if entry.endswith("script") and not SCRIPT.exists():
        pytest.skip("the dezero_mini script is not installed beside this Python")
    if entry.startswith("-P") and sys.version_info < (3, 11):
        pytest.skip("-P exists from Python 3.11")
    LAYOUTS[layout](tmp_path)
    environ = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    if entry.startswith("PYTHONPATH"):
        environ["PYTHONPATH"] = "."
    command = ([str(SCRIPT)] if entry.endswith("script")
               else [sys.executable, *ENTRIES[entry], "dezero_mini"])
    done = subprocess.run([*command, "graph", "--dot"], cwd=tmp_path, env=environ,
                          capture_output=True, text=True, timeout=600)
    assert "Traceback" not in done.stderr and "learner's own module" not in done.stderr, \
        done.stderr
    lines = done.stderr.strip().splitlines()
    if expected(layout, entry) == "refused":
        assert done.returncode == 2, (done.returncode, done.stderr)
        assert len(lines) == 1 and "error:" in lines[0], done.stderr
        assert "stands in for the dezero_mini package" in lines[0] \
            or "would be imported as the module" in lines[0] \
            or "was imported as the module" in lines[0], lines[0]
        assert "rename" in lines[0] and str(tmp_path) in lines[0]
    else:
        assert done.returncode == 0, done.stderr
        assert done.stdout.startswith("digraph"), done.stdout[:200]
        if layout in NAMED:
            assert len(lines) == 1 and "warning:" in lines[0] and "rename" in lines[0], lines
            assert NAMED[layout] in lines[0]
        else:
            assert lines == [], lines


def test_a_checkout_of_the_course_in_the_current_folder_is_not_a_stand_in(tmp_path):
    """Run from the course's own folder, ``dezero_mini/`` is the package itself
    (it has shadowing.py): no refusal, no warning."""
    package = Path(shadowing.__file__).parent
    assert shadowing.stand_in_for_package([str(package.parent)]) is None
    assert shadowing.shadowing_warning(str(package.parent)) is None
    (tmp_path / "dezero_mini").mkdir()
    (tmp_path / "dezero_mini" / "__init__.py").write_text("")
    assert shadowing.stand_in_for_package([str(tmp_path)]) == str(tmp_path / "dezero_mini")
    (tmp_path / "dezero_mini" / shadowing.MARKER).write_text("")
    assert shadowing.stand_in_for_package([str(tmp_path)]) is None


def test_the_installation_carries_the_guard_line():
    """``make venv`` installs the package with setup.py's .pth file, whose line
    is shadowing.PTH_LINE (were it missing, python -m would run a dezero_mini.py)."""
    folders = [Path(p) for p in sys.path if p.endswith("site-packages")]
    lines = [(folder / shadowing.PTH_NAME).read_text().strip()
             for folder in folders if (folder / shadowing.PTH_NAME).exists()]
    guard = repr(str(Path(shadowing.__file__).resolve()))  # an editable install: the source
    assert lines and lines[0] in (shadowing.PTH_LINE.format(guard=guard),
                                  shadowing.PTH_LINE.format(guard=shadowing.GUARD_IN_WHEEL))


@pytest.mark.parametrize("argv, runs_guard", [
    (["python", "-m", "dezero_mini", "check"], True),
    (["python", "-mdezero_mini"], True),
    (["python", "-X", "dev", "-m", "dezero_mini.cli"], True),
    (["python", "-m", "dezero_mini_extra"], False),
    (["python", "script.py", "-m", "dezero_mini"], False),
    (["python", "-c", "pass", "-m", "dezero_mini"], False),
    (["python", "-m", "numpy"], False),
])
def test_the_guard_acts_only_on_python_m_dezero_mini(tmp_path, monkeypatch, argv, runs_guard):
    (tmp_path / "dezero_mini.py").write_text(LEARNER)
    monkeypatch.chdir(tmp_path)
    exits = []
    monkeypatch.setattr(shadowing.os, "_exit", exits.append)
    shadowing.refuse_a_stand_in(argv, flags=sys.flags)
    assert exits == ([2] if runs_guard else [])


@pytest.mark.parametrize("file_name, refused", [
    ("dezero_mini.py", True), ("numpy.py", True), ("json.py", True), ("random.py", True),
    ("matplotlib.py", True), ("step03_weakref_outputs.py", False), ("my_numpy.py", False),
    ("numpy.txt", False),
])
def test_start_never_writes_a_file_named_like_a_module(file_name, refused):
    assert (module_name_problem(file_name) is not None) is refused


@pytest.mark.parametrize("number", STAGE_NUMBERS)
def test_no_stage_file_has_the_name_of_a_module(number):
    assert module_name_problem(get_stage(number).file_name) is None


def test_start_names_the_modules_of_the_learner_in_the_folder_it_writes_into(tmp_path):
    target = tmp_path / "course"
    target.mkdir()
    (target / "numpy.py").write_text(LEARNER)
    (target / "dezero_mini.py").write_text(LEARNER)
    done = subprocess.run([sys.executable, "-m", "dezero_mini", "start", "3", str(target)],
                          cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "warning: dezero_mini.py, numpy.py in" in lines[0]
    assert str(target) in lines[0] and "rename" in lines[0]
    assert "dezero_mini check 3" in done.stdout


@pytest.mark.parametrize("argv, handles", [
    (["python", "-m", "dezero_mini", "train"], True),
    (["python", ".venv/bin/dezero_mini", "check", "3", "f.py"], True),  # the script
    (["python", "-m", "dezero_mini.contracts.worker"], False),
    (["python", "/home/me/dezero_mini/step01.py"], False),
])
def test_ctrl_c_before_the_package_is_one_line_only_for_the_command_line(
        tmp_path, monkeypatch, argv, handles):
    """The guard runs inside ``site``, where a KeyboardInterrupt is a fatal
    error of Python's start: for the command line it sets the start's one
    handler, from its own copy of shadowing.py (run by its path, as the .pth
    line does); the package's start keeps that handler (the same definition,
    another function object), and the command line hands Ctrl-C back."""
    import runpy
    import signal

    from dezero_mini import startup

    monkeypatch.chdir(tmp_path)
    guard = runpy.run_path(shadowing.__file__, run_name="a copy, as the .pth runs it")
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        guard["guard_at_start"](argv)
        handler = signal.getsignal(signal.SIGINT)
        assert (handler is guard["end_the_start_interrupted"]) is handles
        assert handler is not shadowing.end_the_start_interrupted
        startup.stop_quietly_on_interrupt()  # the package's first lines
        expected = handler if handles else shadowing.end_the_start_interrupted
        assert signal.getsignal(signal.SIGINT) is expected
        startup.interrupts_raise()  # the command line takes over
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    finally:
        signal.signal(signal.SIGINT, previous)


@pytest.mark.parametrize("orig_argv, called", [
    (["python", "-m", "dezero_mini", "train", "--epochs", "2"], "python -m dezero_mini train"),
    (["python", "-Im", "dezero_mini", "check", "3", "f.py"], "python -m dezero_mini check"),
    (["python", "-X", "dev", "-mdezero_mini", "graph"], "python -m dezero_mini graph"),
    (["python", "-m", "dezero_mini", "--version"], "python -m dezero_mini"),
    (["python", "-m", "dezero_mini"], "python -m dezero_mini"),
    (["/v/bin/python", "/v/bin/dezero_mini", "start", "1"], "dezero_mini start"),
    (["/v/bin/python", "-I", "/v/bin/dezero_mini", "leaks", "t.py"], "dezero_mini leaks"),
    (["/v/bin/python", "/v/bin/dezero_mini", "-h"], "dezero_mini"),
])
def test_the_command_calls_itself_as_it_was_started(orig_argv, called):
    """One name in every message of the start, the Ctrl-C line included."""
    assert shadowing.command_called(orig_argv) == called


def test_modules_loaded_from_outside_the_installation_are_not_the_commands_modules(tmp_path):
    """What the process has imported from elsewhere (a stage file that a test,
    a notebook or ``progress`` loaded; a learner's script) is not a module the
    commands need: ``start`` must still write a stage file of that name, and a
    learner's file of that name is not warned about."""
    own = tmp_path / "step10_checkpointing.py"
    own.write_text("X = 1\n")
    fake_module = type(sys)("step10_checkpointing")
    fake_module.__file__ = str(own)
    loaded = dict(sys.modules, step10_checkpointing=fake_module)
    assert "step10_checkpointing" not in shadowing.modules_used(loaded)
    assert {"json", "numpy", "dezero_mini", "gc"} <= shadowing.modules_used(loaded)
    sys.modules["step10_checkpointing"] = fake_module
    try:
        assert module_name_problem("step10_checkpointing.py") is None
        assert module_name_problem("numpy.py") is not None
    finally:
        del sys.modules["step10_checkpointing"]


def test_the_second_line_of_defence_says_the_guards_own_line(tmp_path):
    """``__main__.py`` run against a stand-in (a ``dezero_mini`` that is not
    this package, already imported) refuses with the guard's own line
    (``shadowing.stand_in_message``), said once, not a copy of its own."""
    main_file = Path(shadowing.__file__).with_name("__main__.py")
    stand_in = tmp_path / "dezero_mini"
    stand_in.mkdir()
    program = ("import runpy, sys, types\n"
               f"fake = types.ModuleType('dezero_mini'); fake.__path__ = [{str(stand_in)!r}]\n"
               "sys.modules['dezero_mini'] = fake\n"
               f"runpy.run_path({str(main_file)!r}, run_name='__main__')\n")
    done = subprocess.run([sys.executable, "-c", program], cwd=tmp_path, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == shadowing.EXIT_USAGE, done.stderr
    assert done.stderr.strip().splitlines() == [shadowing.stand_in_message(str(stand_in))], \
        done.stderr
