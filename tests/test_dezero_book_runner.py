"""tools/run_dezero_book.py: DeZero's book programs, run with dezero_mini as
``dezero``. The real programs are DeZero's and need a clone of its repository,
so these programs are written here in the same form: one that imports
``dezero`` and its modules the book's way and runs, one that fails."""
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RUNNER = ROOT / "tools" / "run_dezero_book.py"

# The book's form: add the repository's root to sys.path, then import dezero.
HEADER = """if '__file__' in globals():
    import os, sys
    sys.path.append(os.path.join(os.path.dirname(__file__), '..'))
import numpy as np
"""
RUNS = HEADER + """import dezero
from dezero import Variable
import dezero.functions as F
from dezero.core_simple import Variable as SimpleVariable
assert dezero.__name__ == "dezero_mini", dezero.__name__
x = SimpleVariable(np.array(2.0))
y = F.sin(x) * x
y.backward()
x.data -= 0.1 * x.grad  # an ndarray, as in DeZero's simple core
"""
FAILS = HEADER + """from dezero import Variable
Variable(np.array([1, 2, 3])).backward()  # integers carry no gradient
"""


def run(*args):
    return subprocess.run([sys.executable, str(RUNNER), *map(str, args)],
                          capture_output=True, text=True, timeout=120)


def test_each_program_gets_a_row_and_a_failure_sets_the_status(tmp_path):
    steps = tmp_path / "steps"
    steps.mkdir()
    (steps / "step28.py").write_text(RUNS)
    (steps / "step37.py").write_text(FAILS)
    (steps / "step61.py").write_text("raise SystemExit(3)\n")  # outside --last: not run
    (tmp_path / "dezero").mkdir()  # DeZero's own package, which must never be imported
    (tmp_path / "dezero" / "__init__.py").write_text("raise ImportError('the real DeZero')\n")
    done = run(tmp_path, "--first", "23", "--last", "60")
    assert done.returncode == 1, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("step28  ran"), lines
    assert lines[1].startswith("step37  exit 1") and "RuntimeError: backward" in lines[1], lines
    assert lines[-1] == "1 of 2 ran to their end"


def test_every_program_ran_gives_status_0(tmp_path):
    (tmp_path / "steps").mkdir()
    (tmp_path / "steps" / "step28.py").write_text(RUNS)
    done = run(tmp_path)
    assert done.returncode == 0 and done.stdout.splitlines()[-1] == "1 of 1 ran to their end"


def test_a_folder_without_the_programs_is_one_line(tmp_path):
    done = run(tmp_path)
    assert done.returncode != 0 and "Traceback" not in done.stderr
    assert "has no steps/ folder" in done.stderr and "deep-learning-from-scratch-3" in done.stderr
    (tmp_path / "steps").mkdir()
    done = run(tmp_path, "--timeout", "1e300")
    assert done.returncode == 2 and "--timeout" in done.stderr and "Traceback" not in done.stderr
