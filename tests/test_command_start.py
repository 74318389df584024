"""How a command starts and ends whatever the process around it is like
(``dezero_mini.startup``, ``dezero_mini.cli.guard``): a standard output closed
outright, a Ctrl-C while the package is still importing, settings of the
environment that cannot be used, a current folder removed under the process,
a terminal that cannot show a file's name. Each is one line and an exit
status, never a traceback. Real processes, as a learner starts them.
"""
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from dezero_mini import environment, startup

SCRIPT = Path(sys.executable).with_name("dezero_mini")  # the installed entry point
ENTRIES = {"-m": [sys.executable, "-m", "dezero_mini"], "script": [str(SCRIPT)]}


def hear_sigint():
    """In the child: SIGINT back to its default (a shell that starts the tests in
    the background ignores it, and Python then leaves it ignored)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def run(argv, cwd, entry="-m", env=None, **options):
    options = {"stdout": subprocess.PIPE, "stderr": subprocess.PIPE, **options}
    return subprocess.run([*ENTRIES[entry], *argv], cwd=cwd, text=True,
                          env=dict(os.environ, **(env or {})), timeout=300, **options)


def one_line_error(result, *words):
    """The command failed with one line on stderr that holds every word, and no traceback."""
    assert result.returncode != 0, result.stderr
    assert "Traceback" not in result.stderr, result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert lines and "error" in lines[-1], result.stderr
    for word in words:
        assert word in lines[-1], result.stderr


# --- Standard output closed outright (cmd >&-) ------------------------------------------
CLOSED_OUTPUT = [
    ["train", "--epochs", "1"],
    ["memory", "--batches", "2", "--stage", "3", "--out", "m.png"],
    ["graph", "--dot"],
    ["start", "1", "."],
    ["check", "1", "missing.py"],
    ["grade", "1", "missing.py", "--csv", "g.csv"],
    ["leaks", "missing.py"],
    ["progress", "."],
]


@pytest.mark.parametrize("entry", ENTRIES)
@pytest.mark.parametrize("argv", CLOSED_OUTPUT, ids=lambda argv: argv[0])
def test_a_closed_standard_output_is_refused_in_one_line(tmp_path, argv, entry):
    if entry == "script" and not SCRIPT.exists():
        pytest.skip("the dezero_mini script is not installed beside this Python")
    result = run(argv, tmp_path, entry, stdout=None, preexec_fn=lambda: os.close(1))
    one_line_error(result, "standard output is closed")
    assert not (tmp_path / "m.png").exists() and not (tmp_path / "g.csv").exists()


def test_help_and_version_still_answer_with_the_output_closed(tmp_path):
    """argparse writes them on stderr when stdout is None: nothing to refuse."""
    result = run(["--version"], tmp_path, stdout=None, preexec_fn=lambda: os.close(1))
    assert result.returncode == 0 and "Traceback" not in result.stderr


# --- Ctrl-C while the package is still importing ---------------------------------------
SLOW_NUMPY = ('import sys, time\nsys.stderr.write("importing numpy\\n")\nsys.stderr.flush()\n'
              'time.sleep(120)\n')


@pytest.mark.parametrize("entry", ENTRIES)
@pytest.mark.parametrize("command", ["train", "check", "leaks", "memory", "graph", "start"])
def test_ctrl_c_during_the_imports_ends_with_one_line(tmp_path, command, entry):
    """A stand-in numpy that says it is importing and then sleeps: the real
    SIGINT surely lands during the package's imports, every time."""
    if entry == "script" and not SCRIPT.exists():
        pytest.skip("the dezero_mini script is not installed beside this Python")
    slow = tmp_path / "slow"
    slow.mkdir()
    (slow / "numpy.py").write_text(SLOW_NUMPY)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [str(slow), *filter(None, [os.environ.get("PYTHONPATH")])]))
    rest = interrupted_once_it_says([*ENTRIES[entry], command, "--help"], tmp_path, env,
                                    "importing numpy\n")
    assert [line for line in rest.splitlines() if line] == [f"{_name(entry)} {command}: interrupted"]


def interrupted_once_it_says(argv, cwd, env, line):
    """Start ``argv``, send SIGINT once its stderr says ``line``: what it said
    after, once it ended with exit 130 and without a traceback."""
    process = subprocess.Popen(argv, cwd=cwd, env=env, stdout=subprocess.DEVNULL,
                               stderr=subprocess.PIPE, text=True, preexec_fn=hear_sigint)
    try:
        assert process.stderr.readline() == line
        process.send_signal(signal.SIGINT)
        rest = process.stderr.read()
        assert process.wait(timeout=300) == 130  # (the bound only ends a hang)
    finally:
        process.kill()
        process.wait()
    assert "Traceback" not in rest and "KeyboardInterrupt" not in rest, rest
    return rest


def _name(entry):
    return "python -m dezero_mini" if entry == "-m" else "dezero_mini"


# --- Ctrl-C at each stage of the start, and after ------------------------------------------
#: A sitecustomize.py (found on PYTHONPATH, imported at the end of ``site``)
#: that says "paused" on stderr and sleeps at one moment of the start, where
#: the test's SIGINT then lands. ``{when}`` picks the moment.
PAUSE = """import argparse, sys, time

def pause():
    sys.stderr.write("paused\\n")
    sys.stderr.flush()
    time.sleep(120)

class PauseAt:
    \"\"\"Pauses when the module NAME is first looked for.\"\"\"
    def __init__(self, name):
        self.name = name
    def find_spec(self, name, path=None, target=None):
        if name == self.name:
            sys.meta_path.remove(self)
            pause()
        return None

when = {when!r}
if when == "site":
    pause()
elif when == "arguments":
    read = argparse.ArgumentParser.parse_known_args
    def paused(self, *args, **kwargs):
        argparse.ArgumentParser.parse_known_args = read
        pause()
        return read(self, *args, **kwargs)
    argparse.ArgumentParser.parse_known_args = paused
else:
    sys.meta_path.insert(0, PauseAt(when))
"""
#: (the moment, what pauses there): from the guard's .pth in ``site`` to the work.
START_STAGES = [
    ("inside site, after the installation's guard", "site"),
    ("python -m looking for the package", "dezero_mini"),
    ("the package importing NumPy", "numpy"),
    ("the command line reading its arguments", "arguments"),
    ("the command at work (Matplotlib imported for the plot)", "matplotlib"),
]


@pytest.mark.parametrize("entry", ENTRIES)
@pytest.mark.parametrize("stage, when", START_STAGES, ids=[s for s, _ in START_STAGES])
def test_ctrl_c_at_each_stage_of_the_start_is_one_line_and_130(tmp_path, stage, when, entry):
    """Two handlers once ended the start (the guard's, then the package's,
    which knew the first by its function's name) with two different lines:
    one definition now, and the command line's own except after it."""
    if entry == "script" and not SCRIPT.exists():
        pytest.skip("the dezero_mini script is not installed beside this Python")
    hooks = tmp_path / "hooks"
    hooks.mkdir()
    (hooks / "sitecustomize.py").write_text(PAUSE.format(when=when))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [str(hooks), *filter(None, [os.environ.get("PYTHONPATH")])]), MPLBACKEND="agg")
    argv = ["memory", "--stage", "3", "--batches", "2", "--out", "m.png"]
    rest = interrupted_once_it_says([*ENTRIES[entry], *argv], tmp_path, env, "paused\n")
    assert [line for line in rest.splitlines() if line] == [f"{_name(entry)} memory: interrupted"]
    assert not (tmp_path / "m.png").exists()


def test_ctrl_c_where_the_guard_did_not_run_is_the_same_line(tmp_path):
    """``python -S``: no ``site``, so no guard of the installation; the
    package's first lines set the same handler, and the line is the same."""
    import sysconfig

    import dezero_mini

    slow = tmp_path / "slow"
    slow.mkdir()
    (slow / "numpy.py").write_text(SLOW_NUMPY)
    root = Path(dezero_mini.__file__).resolve().parents[1]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [str(slow), str(root), sysconfig.get_paths()["purelib"]]))
    rest = interrupted_once_it_says([sys.executable, "-S", "-m", "dezero_mini", "graph", "--dot"],
                                    tmp_path, env, "importing numpy\n")
    assert [line for line in rest.splitlines() if line] == [
        "python -m dezero_mini graph: interrupted"]


# --- The environment, the current folder --------------------------------------------------
SETTINGS = [
    ({"DEZERO_MINI_WARN_LEAKS": "often"}, ["train", "--epochs", "1"], "DEZERO_MINI_WARN_LEAKS"),
    ({"DEZERO_MINI_WARN_LEAKS": "-3"}, ["graph", "--dot"], "DEZERO_MINI_WARN_LEAKS"),
    ({"DEZERO_MINI_WARN_LEAKS": "9" * 30}, ["graph", "--dot"], "DEZERO_MINI_WARN_LEAKS"),
    ({"DEZERO_MINI_WARN_LEAKS": "\u0663"}, ["graph", "--dot"], "DEZERO_MINI_WARN_LEAKS"),
    ({"DEZERO_MINI_CHECK_SAVED": "yes"}, ["graph", "--dot"], "DEZERO_MINI_CHECK_SAVED"),
    ({"DEZERO_MINI_SLOW_WRITE": "soon"}, ["graph", "--out", "g.dot"], "DEZERO_MINI_SLOW_WRITE"),
    ({"DEZERO_MINI_SLOW_WRITE": "nan"}, ["graph", "--out", "g.dot"], "DEZERO_MINI_SLOW_WRITE"),
    ({"DEZERO_MINI_DATA": os.devnull}, ["train", "--epochs", "1"], "DEZERO_MINI_DATA"),
    ({"MPLBACKEND": "nonsense"}, ["memory", "--batches", "2", "--stage", "3", "--out", "m.png"],
     "MPLBACKEND"),
]


@pytest.mark.parametrize("env, argv, variable", SETTINGS,
                         ids=[f"{next(iter(env))}={next(iter(env.values()))}"
                              for env, _, _ in SETTINGS])
def test_a_setting_that_cannot_be_used_is_one_line_naming_it(tmp_path, env, argv, variable):
    result = run(argv, tmp_path, env=env)
    one_line_error(result, variable)
    assert result.returncode == 2
    assert not (tmp_path / "g.dot").exists()


@pytest.mark.parametrize("env", [{"DEZERO_MINI_CHECK_SAVED": "0"}, {"DEZERO_MINI_WARN_LEAKS": ""},
                                 {"DEZERO_MINI_SLOW_WRITE": "0"}, {"MPLBACKEND": "agg"}])
def test_a_usable_setting_still_runs(tmp_path, env):
    result = run(["graph", "--out", "g.dot"], tmp_path, env=env)
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "g.dot").exists()


def test_the_library_raises_a_value_error_naming_the_variable():
    with pytest.raises(ValueError, match="DEZERO_MINI_CHECK_SAVED='on'"):
        environment.check_settings({"DEZERO_MINI_CHECK_SAVED": "on"})


@pytest.mark.parametrize("entry", ENTRIES)
@pytest.mark.parametrize("argv", [["--version"], ["train", "--epochs", "1"], ["start", "1"],
                                  ["graph", "--dot"]], ids=lambda argv: argv[0])
def test_a_removed_current_folder_is_one_line(tmp_path, argv, entry):
    if entry == "script" and not SCRIPT.exists():
        pytest.skip("the dezero_mini script is not installed beside this Python")
    gone = tmp_path / "gone"
    gone.mkdir()
    result = run(argv, gone, entry, preexec_fn=lambda: os.rmdir(gone))
    one_line_error(result, "current folder no longer exists")


# --- A terminal that cannot show a file's name ------------------------------------------
NAMES = ["d\u00e9j\u00e0.npz", os.fsdecode(b"w\xff.npz")]
TERMINALS = [{"PYTHONIOENCODING": "ascii"}, {"LC_ALL": "C", "LANG": "C"}, {}]


@pytest.mark.parametrize("terminal", TERMINALS, ids=["ascii", "C", "utf-8"])
@pytest.mark.parametrize("name", NAMES, ids=["accents", "not-utf-8"])
def test_a_file_name_the_terminal_cannot_show_is_escaped(tmp_path, name, terminal):
    result = subprocess.run([sys.executable, "-m", "dezero_mini", "train", "--epochs", "1",
                             "--save", name], cwd=tmp_path, capture_output=True,
                            env=dict(os.environ, **terminal), timeout=300)
    assert result.returncode == 0, result.stderr
    assert b"Traceback" not in result.stderr
    assert b"saved the weights to" in result.stdout
    assert os.path.exists(tmp_path / name)


def test_the_command_is_told_from_a_library_import():
    assert startup.started_as_command(["-m"], orig_argv=["python", "-m", "dezero_mini", "x"])
    assert startup.started_as_command(["-m"], orig_argv=["python", "-X", "dev", "-mdezero_mini"])
    assert not startup.started_as_command(
        ["-m"], orig_argv=["python", "-m", "dezero_mini.contracts.worker"])
    assert not startup.started_as_command(["script.py"], main_module=sys.modules[__name__])
