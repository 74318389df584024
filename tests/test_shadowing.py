"""A learner's own module in the current folder that has a name the command
line imports (``dezero_mini/``, ``numpy.py``, ``json.py``): the command either
runs as if it were not there, or says in one line that it stands in for the
package. ``python -m`` puts the current folder first on ``sys.path``; the
installed ``dezero_mini`` script does not.
"""
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(sys.executable).with_name("dezero_mini")
ENTRIES = {"-m": [sys.executable, "-m", "dezero_mini"], "script": [str(SCRIPT)]}


def _package(folder):
    (folder / "dezero_mini").mkdir()
    (folder / "dezero_mini" / "__init__.py").write_text("x = 1\n")


def _plain_folder(folder):
    (folder / "dezero_mini").mkdir()
    (folder / "dezero_mini" / "helper.py").write_text("x = 1\n")


def _module(name):
    def make(folder):
        (folder / name).write_text("raise SystemExit('the learner\\'s own module ran')\n")
    return make


LAYOUTS = {
    "a dezero_mini package": _package,
    "a dezero_mini folder": _plain_folder,
    "numpy.py": _module("numpy.py"),
    "json.py": _module("json.py"),
    "argparse.py": _module("argparse.py"),
    "dezero_mini.py": _module("dezero_mini.py"),
}
#: (layout, entry): what the command does; "runs" or "refused".
EXPECTED = {
    ("a dezero_mini package", "-m"): "refused", ("a dezero_mini folder", "-m"): "refused",
}


@pytest.mark.parametrize("entry", ENTRIES)
@pytest.mark.parametrize("layout", LAYOUTS)
def test_a_module_of_the_learner_never_runs_silently_in_place_of_the_package(
        tmp_path, layout, entry):
    if entry == "script" and not SCRIPT.exists():
        pytest.skip("the dezero_mini script is not installed beside this Python")
    if (layout, entry) == ("dezero_mini.py", "-m"):
        pytest.xfail("python -m runs a dezero_mini.py of the current folder as its __main__ "
                     "before anything of the package: only the installed script avoids it")
    LAYOUTS[layout](tmp_path)
    done = subprocess.run([*ENTRIES[entry], "graph", "--dot"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=600)
    assert "Traceback" not in done.stderr and "learner's own module" not in done.stderr
    if EXPECTED.get((layout, entry)) == "refused":
        assert done.returncode == 2
        lines = done.stderr.strip().splitlines()
        assert len(lines) == 1 and "stands in for the dezero_mini package" in lines[0]
        assert str(tmp_path / "dezero_mini") in lines[0]
    else:
        assert done.returncode == 0, done.stderr
        assert done.stdout.startswith("digraph"), done.stdout[:200]
