"""Run the programs of DeZero's book with dezero_mini standing in for DeZero.

DeZero's public repository (https://github.com/oreilly-japan/deep-learning-from-scratch-3)
has one program per step of its book in ``steps/``. Each runs here in its own
process, with the ``dezero`` package and its modules made to be dezero_mini's
(nothing in the programs is edited), matplotlib drawing to no window, and a
time limit; the table says how each ended::

    git clone https://github.com/oreilly-japan/deep-learning-from-scratch-3 dezero-book
    .venv/bin/python tools/run_dezero_book.py dezero-book --first 23 --last 60

``--tests`` runs DeZero's unit tests (its ``tests/``) the same way instead,
with pytest, in one process: one line per test that does not pass, then the
counts. A test that compares with Chainer (which does not install on NumPy
2) is skipped where it first calls Chainer, and the files that need the
network (pretrained VGG16 and ResNet weights) or a GPU are left out::

    .venv/bin/python tools/run_dezero_book.py dezero-book --tests

This repository cannot ship the programs (they are DeZero's, under its MIT
licence, and its tests must not need the network), so the tests check the
same behaviour with programs written here, in ``tests/test_dezero_api.py``.
Exit status: 0 when every program ran to its end (with ``--tests``: when no
test failed), 1 otherwise, 2 on a wrong argument.
"""
import argparse
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

from dezero_mini.machine import describe

# The modules of DeZero that its programs import, each stood in for by
# dezero_mini's module of the same name (the package itself for ``dezero``).
DEZERO_MODULES = ("core", "core_simple", "functions", "functions_conv", "layers", "models",
                  "optimizers", "utils", "cuda", "datasets", "dataloaders", "transforms")

# Run in the child first: register dezero_mini under DeZero's names. A
# program or a test that appends DeZero's own folder to sys.path still gets
# these: sys.modules is looked in first, so DeZero's code is never imported.
REGISTER = """
import importlib, sys
import dezero_mini
sys.modules["dezero"] = dezero_mini
for name in {modules!r}:
    sys.modules["dezero." + name] = importlib.import_module("dezero_mini." + name)
"""

# Then, for a book program: run it as __main__.
STAND_IN = REGISTER + """
import runpy
sys.argv = [{program!r}]
runpy.run_path({program!r}, run_name="__main__")
"""

# DeZero's test files that need what this machine may not have: pretrained
# weights from the network, or CuPy and a GPU (the folder gpu/).
TESTS_LEFT_OUT = {"test_vgg16.py": "the network (VGG16's weights)",
                  "test_resnet.py": "the network (ResNet's weights)",
                  "gpu": "CuPy and a GPU"}

# Run in the child for --tests: the same stand-in, a ``chainer`` whose first
# use skips the test, then pytest on DeZero's tests/ (no plugin of this
# environment, no cache written into the clone), with a plugin that prints
# one line per test: its outcome, its name, and why when it did not pass.
# (Chainer 7, the last, does not install on NumPy 2; the tests import it at
# the top and call it only to compute a value to compare with.)
UNIT_TESTS = REGISTER + """
import types, unittest
import pytest

class Chainer(types.ModuleType):
    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        raise unittest.SkipTest("compares with Chainer")

for name in ("chainer", "chainer.functions", "chainer.links"):
    sys.modules[name] = Chainer(name)
    if "." in name:  # (``import chainer.functions as CF`` reads it as an attribute)
        setattr(sys.modules["chainer"], name.split(".")[1], sys.modules[name])

def last_line(report):
    lines = [line for line in str(report.longrepr).splitlines() if line.strip()]
    return lines[-1].strip()[:200] if lines else ""

class Rows:
    def pytest_collectreport(self, report):
        if report.failed:
            print("failed", report.nodeid, last_line(report), sep="\t", flush=True)

    def pytest_runtest_logreport(self, report):
        if report.when == "call" or report.outcome != "passed":
            why = report.longrepr[2] if report.skipped else last_line(report)
            print(report.outcome, report.nodeid, why if report.outcome != "passed" else "",
                  sep="\t", flush=True)

pytest.main(["-p", "no:terminal", "-p", "no:cacheprovider", "-o", "addopts=", "--rootdir=..",
             *["--ignore=" + name for name in {left_out!r}], "."], plugins=[Rows()])
"""


def step_programs(repository, first, last):
    """The programs ``steps/stepNN.py`` of the DeZero checkout, NN in [first, last]."""
    folder = Path(repository) / "steps"
    if not folder.is_dir():
        raise SystemExit(f"run_dezero_book: {repository} has no steps/ folder; give the folder "
                         "of a clone of github.com/oreilly-japan/deep-learning-from-scratch-3")
    found = []
    for path in sorted(folder.glob("step[0-9][0-9].py")):
        number = int(path.stem[4:])
        if first <= number <= last:
            found.append((number, path))
    return found


def run_program(path, seconds):
    """Run one program as DeZero's book does (from its own folder); give
    (status, seconds taken, the last line it wrote to stderr)."""
    code = STAND_IN.format(modules=DEZERO_MODULES, program=str(path))
    env = {**os.environ, "MPLBACKEND": "Agg"}  # plots drawn to no window
    start = time.monotonic()
    try:
        done = subprocess.run([sys.executable, "-c", code], cwd=path.parent, env=env,
                              stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE, text=True, timeout=seconds)
    except subprocess.TimeoutExpired:
        return "time limit", seconds, f"still running after {seconds} s"
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    status = "ran" if done.returncode == 0 else f"exit {done.returncode}"
    return status, time.monotonic() - start, lines[-1] if lines and done.returncode else ""


def run_unit_tests(repository, seconds):
    """Run DeZero's ``tests/`` (but ``TESTS_LEFT_OUT``) with dezero_mini as
    ``dezero``, printing each test that does not pass as it ends; give
    ``{outcome: [(test, why), ...]}`` for "passed", "failed" and "skipped"
    (a run that the time limit stops, or in which no test ran, is a failure
    of its own)."""
    folder = Path(repository) / "tests"
    if not folder.is_dir():
        raise SystemExit(f"run_dezero_book: {repository} has no tests/ folder; give the folder "
                         "of a clone of github.com/oreilly-japan/deep-learning-from-scratch-3")
    code = UNIT_TESTS.format(modules=DEZERO_MODULES, left_out=sorted(TESTS_LEFT_OUT))
    # No plugin of this environment (xdist, randomly, ...): DeZero's tests as they are.
    env = {**os.environ, "MPLBACKEND": "Agg", "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}
    outcomes, other = {"passed": [], "failed": [], "skipped": []}, ""
    process = subprocess.Popen([sys.executable, "-c", code], cwd=folder, env=env,
                               stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True, errors="replace")
    stopped = threading.Event()
    timer = threading.Timer(seconds, lambda: (stopped.set(), process.kill()))
    timer.start()
    try:
        for row in process.stdout:
            outcome, _, rest = row.rstrip("\n").partition("\t")
            if outcome not in outcomes:
                other = row.strip() or other  # (what else it printed: the last line tells)
                continue
            test, _, why = rest.partition("\t")
            outcomes[outcome].append((test, why))
            if outcome != "passed":
                print(f"{outcome:<8} {test}  {why}", flush=True)
        process.wait()
    finally:
        timer.cancel()
        process.kill()
        process.stdout.close()
    if stopped.is_set() or not any(outcomes.values()):
        why = f"still running after {seconds:g} s" if stopped.is_set() else other or "no test ran"
        outcomes["failed"].append(("(the run)", why))
        print(f"{'failed':<8} (the run)  {why}", flush=True)
    return outcomes


def print_counts(outcomes):
    """The counts of the unit tests, and what was left out; the exit status."""
    passed, failed, skipped = (len(outcomes[key]) for key in ("passed", "failed", "skipped"))
    left_out = "; ".join(f"{name} ({why})" for name, why in TESTS_LEFT_OUT.items())
    print(f"{passed} passed, {failed} failed of {passed + failed} that ran; {skipped} skipped; "
          f"left out, as they need what may not be here: {left_out}")
    return 1 if failed else 0


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("repository", help="a clone of DeZero's repository")
    parser.add_argument("--first", type=int, default=23, help="first step (default 23)")
    parser.add_argument("--last", type=int, default=60, help="last step (default 60)")
    parser.add_argument("--timeout", type=float, default=None, help=(
        "seconds a program may run (default 300); with --tests, the whole run "
        "(default 3600: test_linear's numerical gradient of 20,000 elements alone "
        "takes minutes)"))
    parser.add_argument("--tests", action="store_true", help=(
        "run DeZero's unit tests (its tests/) instead of the book's programs"))
    args = parser.parse_args(argv)
    if args.timeout is None:
        args.timeout = 3600.0 if args.tests else 300.0
    print(describe())  # where and when these figures were measured
    if args.timeout <= 0 or args.timeout > 86400:
        parser.error(f"--timeout {args.timeout}: give seconds between 0 and 86400")
    if args.tests:
        return print_counts(run_unit_tests(args.repository, args.timeout))
    programs = step_programs(args.repository, args.first, args.last)
    if not programs:
        parser.error(f"no steps/stepNN.py with NN from {args.first} to {args.last}")
    failed = 0
    for number, path in programs:
        status, seconds, last_line = run_program(path, args.timeout)
        failed += status != "ran"
        print(f"step{number:02d}  {status:<10} {seconds:6.1f} s  {last_line}", flush=True)
    print(f"{len(programs) - failed} of {len(programs)} ran to their end")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
