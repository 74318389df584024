"""benchmarks/bench_ops.py, the per-op comparison with PyTorch, as an instrument.

It is run for real on graphs of 200 ops with the short budget (--quick):
what is checked is what it prints and writes (the tables, the target's
verdicts, a JSON file with every figure, each framework in a process of its
own), never a timing. PyTorch is optional: the run is made without it (a
``torch`` package that fails to import is put first on the path) and, where
PyTorch is installed, with it. Hostile options end in one line and exit 2
before anything is timed.
"""
import hashlib
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

from unittest import mock

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "benchmarks" / "bench_ops.py"
PATTERNS = ("const", "mixed", "chain")


def run_bench(*arguments, env_path=None, timeout=600):
    """The script's completed process; ``env_path``: a folder put first on PYTHONPATH."""
    env = None if env_path is None else {**os.environ, "PYTHONPATH": str(env_path)}
    return subprocess.run([sys.executable, str(SCRIPT), *map(str, arguments)], cwd=ROOT,
                          capture_output=True, text=True, timeout=timeout, env=env)


@pytest.fixture(scope="module")
def without_torch(tmp_path_factory):
    """A folder whose ``torch`` fails to import, as where PyTorch is not installed."""
    folder = tmp_path_factory.mktemp("no_torch")
    (folder / "torch").mkdir()
    (folder / "torch" / "__init__.py").write_text(
        "raise ImportError('No module named torch (hidden by the test)')\n")
    return folder


def torch_installed():
    return importlib.util.find_spec("torch") is not None


@pytest.mark.parametrize("with_torch", [False, True], ids=["without torch", "with torch"])
def test_a_tiny_run_prints_the_tables_and_writes_every_figure(with_torch, without_torch,
                                                              tmp_path):
    if with_torch and not torch_installed():
        pytest.skip("PyTorch is not installed (it is optional)")
    out_file = tmp_path / "figures.json"
    done = run_bench("--sizes", 200, "--quick", "--json", out_file,
                     env_path=None if with_torch else without_torch)
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    report = json.loads(out_file.read_text())

    # The tables: one per pattern, a row for 200 ops in each.
    for pattern in PATTERNS:
        assert f"\n{pattern}: forward + backward, µs per op" in done.stdout
    rows = [line for line in done.stdout.splitlines() if line.strip().startswith("200 |")]
    assert len(rows) == len(PATTERNS)
    assert "objects tracked by the cyclic collector, held per op: const" in done.stdout
    assert "MLP 784-1000-10" in done.stdout and "n =     200:" in done.stdout

    # Every figure in the file, and each run at least the rounds of --quick.
    assert report["quick"] is True and report["sizes"] == [200]
    assert [cell["pattern"] for cell in report["graphs"]] == list(PATTERNS)
    runs = ["dezero_on", "dezero_off"] + (["torch"] if with_torch else [])
    for cell in report["graphs"]:
        assert cell["ops"] == 200 and 0 < cell["ops_made"] <= 200
        assert sorted(cell["calls"]) == sorted(runs)
        assert all(len(calls) == cell["rounds"] >= report["least_rounds"]
                   for calls in cell["calls"].values())
        assert sorted(cell["us_per_op"]) == sorted(runs)
        assert 0 <= cell["collector_share"] <= 1
        assert cell["target"] == 0.5
    assert set(report["tracked_per_op"]) == set(PATTERNS)
    assert [row["functions"] for row in report["scaling"]] == [200]

    # Each framework in its own process: neither worker imported the other.
    assert report["imported"]["dezero"] == ["dezero_mini"]
    if with_torch:
        assert report["imported"]["torch"] == ["torch"]
        assert report["gradients"] == "same"
        for cell in report["graphs"]:
            ratio = cell["ratio_on"]
            assert ratio["halves"][0] <= ratio["halves"][1]
            # The words follow the figure.
            expected = "met" if round(ratio["min"], 2) <= cell["target"] else "not met"
            assert cell["verdict"].split(" (")[0] == expected
        assert "target (issue 36)" in done.stdout and "ratio dezero_mini / torch" in done.stdout
    else:
        assert "PyTorch cannot be imported (ImportError: No module named torch" in done.stdout
        assert "torch" not in report["imported"] and report["gradients"] == "not compared"
        assert all("ratio_on" not in cell for cell in report["graphs"])


def folder(path):
    path.mkdir()
    return path


@pytest.fixture(scope="module")
def bench():
    """The script as a module (its environment settings undone afterwards)."""
    with mock.patch.dict(os.environ):
        spec = importlib.util.spec_from_file_location("bench_ops", SCRIPT)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("n_ops, bound", [(100, 0.50), (10_000, 0.50), (10_001, 0.75),
                                          (40_000, 0.75), (100_000, 0.75), (100_001, None)])
def test_the_target_at_each_size(bench, n_ops, bound):
    assert bench.target_for(n_ops) == bound


# (ratio, halves, bound, words): the words follow the figures.
VERDICTS = [
    (0.49, [0.48, 0.49], 0.50, "met"),
    (0.50, [0.50, 0.50], 0.50, "met"),
    (0.49, [0.49, 0.53], 0.50, "met (unsure)"),
    (0.51, [0.51, 0.52], 0.50, "not met"),
    (0.51, [0.46, 0.51], 0.50, "not met (unsure)"),
    (0.70, [0.70, 0.74], 0.75, "met"),
    (0.7503, [0.7, 0.7503], 0.75, "met"),  # as printed: 0.75
    (0.7551, [0.7, 0.7551], 0.75, "not met (unsure)"),  # as printed: 0.76
    (0.80, [0.80, 0.90], None, "no target"),
]


@pytest.mark.parametrize("ratio, halves, bound, words", VERDICTS)
def test_the_verdict_is_made_from_the_figures(bench, ratio, halves, bound, words):
    assert bench.verdict(ratio, halves, bound) == words


def test_the_ratio_its_median_and_its_halves(bench):
    ours, theirs = [5.0, 4.0, 6.0, 4.4], [10.0, 9.0, 8.0, 8.0]
    figures = bench.ratio_figures(ours, theirs)
    assert figures["min"] == pytest.approx(4.0 / 8.0)
    assert figures["median"] == pytest.approx((0.5 + 4.4 / 8.0) / 2)  # of 0.5, 0.44, 0.75, 0.55
    # odd rounds (5.0, 6.0 over 10.0, 8.0) and even rounds (4.0, 4.4 over 9.0, 8.0)
    assert figures["halves"] == pytest.approx([4.0 / 8.0, 5.0 / 8.0])


def calls(*seconds):
    return [{"seconds": s} for s in seconds]


@pytest.mark.parametrize("answers, expected", [
    ({"a": calls(1.0, 1.02, 1.5), "b": calls(2.0, 2.0, 2.1)}, True),
    ({"a": calls(1.0, 1.2, 1.5, 1.3), "b": calls(2.0, 2.0)}, False),  # a's halves 1.0 and 1.2
    ({"a": calls(1.3, 1.0, 1.5, 1.2)}, False),
])
def test_rounds_go_on_until_the_halves_agree(bench, answers, expected):
    assert bench.settled(answers) is expected


# Hostile options: (arguments, what the one line must say). A callable
# argument is given the test's temporary folder.
HOSTILE = [
    (["--sizes", "0"], "argument --sizes: must be a whole number from 100 to 200000, got '0'"),
    (["--sizes", "-5"], "got '-5'"),
    (["--sizes", str(10**9)], "got '1000000000'"),
    (["--sizes", "1000", "2.5"], "got '2.5'"),
    (["--sizes", "nan"], "got 'nan'"),
    (["--sizes"], "argument --sizes: expected at least one argument"),
    (["--patterns", "conv"], "argument --patterns: invalid choice: 'conv'"),
    (["--clock", "sundial"], "argument --clock: invalid choice: 'sundial'"),
    (["--json", lambda tmp: tmp], "must end in .json"),
    (["--json", lambda tmp: folder(tmp / "figures.json")], "is a folder"),
    (["--json", lambda tmp: SCRIPT], "is this benchmark script"),
    (["--json", lambda tmp: tmp / "figures.txt"], "must end in .json"),
    (["--json", lambda tmp: tmp / "nowhere" / "figures.json"], "does not exist"),
    (["--json", lambda tmp: str(tmp) + "/figures.json/"], "name of a folder"),
]


@pytest.mark.parametrize("arguments, words", HOSTILE,
                         ids=[" ".join(a if isinstance(a, str) else "PATH" for a in arguments)
                              for arguments, _ in HOSTILE])
def test_a_hostile_option_is_one_line_and_exit_2(arguments, words, tmp_path):
    script_before = hashlib.sha256(SCRIPT.read_bytes()).hexdigest()
    arguments = [a(tmp_path) if callable(a) else a for a in arguments]
    done = run_bench(*arguments, timeout=120)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "Traceback" not in done.stderr
    error_lines = [line for line in done.stderr.splitlines() if "error:" in line]
    assert len(error_lines) == 1 and words in error_lines[0], done.stderr
    assert done.stdout == ""  # refused before anything was measured
    assert hashlib.sha256(SCRIPT.read_bytes()).hexdigest() == script_before


# --- benchmarks/op_costs.py: where the time per op goes ------------------------------------
OP_COSTS = ROOT / "benchmarks" / "op_costs.py"


@pytest.mark.parametrize("with_torch", [False, True], ids=["without torch", "with torch"])
def test_op_costs_prints_the_split_and_the_bytecodes(with_torch, without_torch):
    """A tiny run prints forward and backward apart for every pattern (and
    PyTorch's beside them where it is installed), and the bytecodes per op:
    a count, which names the framework's own functions."""
    if with_torch and not torch_installed():
        pytest.skip("PyTorch is not installed (it is optional)")
    env = {**os.environ, "PYTHONPATH": str(without_torch)} if not with_torch else None
    done = subprocess.run([sys.executable, str(OP_COSTS), "--ops", "200", "--calls", "2"],
                          cwd=ROOT, capture_output=True, text=True, timeout=300, env=env)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    for pattern in PATTERNS:
        split = next(line for line in lines if line.strip().startswith(f"{pattern} |"))
        figures = [float(word) for word in split.replace("|", " ").split()[1:]]
        assert len(figures) == (6 if with_torch else 2) and all(f > 0 for f in figures)
        counts = next(line for line in lines if line.strip().startswith(f"{pattern}:"))
        total = float(counts.split(":")[1].split()[0])
        assert 50 < total < 5_000, counts  # bytecodes per op: hundreds, for a Python framework
        assert "backward" in counts and "_graph_outputs" in counts


@pytest.mark.parametrize("option, value", [("--ops", "0"), ("--ops", "10**9"), ("--calls", "-1"),
                                           ("--calls", "2.5")])
def test_op_costs_refuses_a_bad_option_in_one_line(option, value):
    done = subprocess.run([sys.executable, str(OP_COSTS), option, value], cwd=ROOT,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert f"argument {option}: must be a whole number from" in done.stderr.strip().splitlines()[-1]
    assert done.stdout == ""
