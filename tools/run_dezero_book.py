"""Run the programs of DeZero's book with dezero_mini standing in for DeZero.

DeZero's public repository (https://github.com/oreilly-japan/deep-learning-from-scratch-3)
has one program per step of its book in ``steps/``. Each runs here in its own
process, with the ``dezero`` package and its modules made to be dezero_mini's
(nothing in the programs is edited), matplotlib drawing to no window, and a
time limit; the table says how each ended::

    git clone https://github.com/oreilly-japan/deep-learning-from-scratch-3 dezero-book
    .venv/bin/python tools/run_dezero_book.py dezero-book --first 23 --last 60

This repository cannot ship the programs (they are DeZero's, under its MIT
licence, and its tests must not need the network), so the tests check the
same behaviour with programs written here, in ``tests/test_dezero_api.py``.
Exit status: 0 when every program ran to its end, 1 otherwise, 2 on a wrong
argument.
"""
import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

from dezero_mini.machine import describe

# The modules of DeZero that its programs import, each stood in for by
# dezero_mini's module of the same name (the package itself for ``dezero``).
DEZERO_MODULES = ("core", "core_simple", "functions", "functions_conv", "layers", "models",
                  "optimizers", "utils", "cuda", "datasets", "dataloaders", "transforms")

# Run in the child: register dezero_mini under DeZero's names, then the program
# as __main__. The program appends DeZero's own folder to sys.path, but
# sys.modules is looked in first, so DeZero's code is never imported.
STAND_IN = """
import importlib, runpy, sys
import dezero_mini
sys.modules["dezero"] = dezero_mini
for name in {modules!r}:
    sys.modules["dezero." + name] = importlib.import_module("dezero_mini." + name)
sys.argv = [{program!r}]
runpy.run_path({program!r}, run_name="__main__")
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


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("repository", help="a clone of DeZero's repository")
    parser.add_argument("--first", type=int, default=23, help="first step (default 23)")
    parser.add_argument("--last", type=int, default=60, help="last step (default 60)")
    parser.add_argument("--timeout", type=float, default=300.0,
                        help="seconds a program may run (default 300)")
    args = parser.parse_args(argv)
    print(describe())  # where and when these figures were measured
    if args.timeout <= 0 or args.timeout > 86400:
        parser.error(f"--timeout {args.timeout}: give seconds between 0 and 86400")
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
