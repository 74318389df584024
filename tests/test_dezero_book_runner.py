"""tools/run_dezero_book.py: DeZero's book programs and unit tests, run with
dezero_mini as ``dezero``. The real ones are DeZero's and need a clone of its
repository, so most of these tests use programs and tests written here in the
same form. Given a clone (``DEZERO_MINI_DEZERO_CLONE=path/to/clone``), the
last ones run DeZero's own: every book program from step 23 to 58 that needs
no network runs to its end, and every unit test passes but the ones that the
table of differences in docs/differences.md names.
"""
import os
import subprocess
import sys
from pathlib import Path

import pytest

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
INTEGERS = HEADER + """from dezero import Variable
x = Variable(np.array([[1, 2, 3], [4, 5, 6]]))  # integers, as the book's steps 37-40
y = x + x
y.backward()
assert x.grad.dtype == np.float64 and (x.grad.data == 2).all(), x.grad
"""
FAILS = HEADER + """from dezero import Variable
import dezero.functions as F
F.sum_to(Variable(np.ones((2, 3))), (2,))  # a shape that sums cannot reach
"""


def run(*args, seconds=120):
    return subprocess.run([sys.executable, str(RUNNER), *map(str, args)],
                          capture_output=True, text=True, timeout=seconds)


def test_each_program_gets_a_row_and_a_failure_sets_the_status(tmp_path):
    steps = tmp_path / "steps"
    steps.mkdir()
    (steps / "step28.py").write_text(RUNS)
    (steps / "step37.py").write_text(INTEGERS)
    (steps / "step38.py").write_text(FAILS)
    (steps / "step61.py").write_text("raise SystemExit(3)\n")  # outside --last: not run
    (tmp_path / "dezero").mkdir()  # DeZero's own package, which must never be imported
    (tmp_path / "dezero" / "__init__.py").write_text("raise ImportError('the real DeZero')\n")
    done = run(tmp_path, "--first", "23", "--last", "60")
    assert done.returncode == 1, done.stderr
    machine, *lines = done.stdout.splitlines()
    assert machine.startswith("measured ") and "numpy" in machine, machine  # where and when
    assert lines[0].startswith("step28  ran"), lines
    assert lines[1].startswith("step37  ran"), lines
    assert lines[2].startswith("step38  exit 1") and "ValueError: SumTo" in lines[2], lines
    assert lines[-1] == "2 of 3 ran to their end"


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


# DeZero's tests, in their form: unittest classes that import dezero (and
# chainer, to compare with) at the top.
UNIT_TESTS = {
    "test_passes.py": """import unittest
import numpy as np
from dezero import Variable
import dezero.functions as F
from dezero.utils import gradient_check


class TestPasses(unittest.TestCase):
    def test_integers(self):
        x = np.array([[1, 2, 3], [4, 5, 6]])  # gradient_check on integers, as DeZero's tests do
        self.assertTrue(gradient_check(F.transpose, x))
""",
    "test_compares.py": """import unittest
import numpy as np
import dezero.functions as F
import chainer.functions as CF


class TestCompares(unittest.TestCase):
    def test_with_chainer(self):
        self.assertTrue(np.allclose(F.relu(np.ones(2)).data, CF.relu(np.ones(2)).data))
""",
    "test_fails.py": """import unittest
import numpy as np
from dezero import Variable
import dezero.functions as F


class TestFails(unittest.TestCase):
    def test_sum_to(self):
        F.sum_to(Variable(np.ones((2, 3))), (2,))
""",
    "test_vgg16.py": "raise SystemExit('left out: needs the network')\n",
}


def test_the_unit_tests_give_a_line_per_test_that_does_not_pass_and_the_counts(tmp_path):
    (tmp_path / "tests").mkdir()
    for name, text in UNIT_TESTS.items():
        (tmp_path / "tests" / name).write_text(text)
    (tmp_path / "dezero").mkdir()  # DeZero's own package, which must never be imported
    (tmp_path / "dezero" / "__init__.py").write_text("raise ImportError('the real DeZero')\n")
    done = run(tmp_path, "--tests")
    assert done.returncode == 1, done.stderr
    lines = done.stdout.splitlines()
    assert any(line.startswith("failed   tests/test_fails.py::TestFails::test_sum_to")
               and "ValueError" in line for line in lines), lines
    assert any(line.startswith("skipped  tests/test_compares.py::TestCompares::test_with_chainer")
               and "compares with Chainer" in line for line in lines), lines
    assert lines[-1].startswith("1 passed, 1 failed of 2 that ran; 1 skipped; left out"), lines
    assert not (tmp_path / "tests" / ".pytest_cache").exists()  # nothing written into the clone


def test_the_unit_tests_need_a_tests_folder(tmp_path):
    done = run(tmp_path, "--tests")
    assert done.returncode != 0 and "Traceback" not in done.stderr
    assert "has no tests/ folder" in done.stderr


# DeZero's own repository, when a clone is given: its book programs and tests.
CLONE = os.environ.get("DEZERO_MINI_DEZERO_CLONE")
needs_clone = pytest.mark.skipif(not CLONE, reason="set DEZERO_MINI_DEZERO_CLONE to a clone of "
                                 "github.com/oreilly-japan/deep-learning-from-scratch-3")
# The book's programs that need the network (MNIST's files, VGG16's weights).
NEEDS_NETWORK = {51, 52, 53, 58}
# DeZero's tests that fail here on purpose: each is a row of the table of
# differences in docs/differences.md (sum_to to a shape that sums cannot reach).
DIFFERENCES = {"tests/test_sum.py::TestSumTo::test_backward3"}


@needs_clone
def test_every_book_program_from_23_to_58_that_needs_no_network_runs():
    done = run(CLONE, "--first", "23", "--last", "58", "--timeout", "1200", seconds=36 * 1200)
    stopped = [line for line in done.stdout.splitlines()
               if line.startswith("step") and " ran " not in line
               and int(line[4:6]) not in NEEDS_NETWORK]
    assert not stopped, done.stdout


@needs_clone
def test_dezero_unit_tests_pass_but_the_documented_differences():
    done = run(CLONE, "--tests", "--timeout", "3600", seconds=3700)
    failed = {line.split()[1] for line in done.stdout.splitlines() if line.startswith("failed")}
    assert failed == DIFFERENCES, done.stdout
