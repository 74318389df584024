"""The checker's own limits are not blamed on the student: a ``--batches``
that a correct file cannot run within the worker's memory limit is refused
before anything runs (``contracts.bench.batches_problem``), as ``memory``
refuses sizes the machine cannot hold. ``check 1 --batches 1000000000``
failed a correct file for "using more than 2048 MiB".
"""
import subprocess
import sys

import pytest

from dezero_mini.contracts import bench
from dezero_mini.memory import load_stage, record_training

ROOT = bench.__file__.rsplit("/dezero_mini/", 1)[0]


@pytest.mark.parametrize("argv", [
    ["check", "1", "x.py", "--batches", "1000000000"],
    ["check", "1", "x.py", "--batches", "2500"],
    ["check", "2", "x.py", "--batches", "5000"],
    ["check", "3", "x.py", "--batches", "100000000"],
    ["grade", "1", "x.py", "--csv", "g.csv", "--batches", "3000"],
    ["grade", "5", "x.py", "--csv", "g.csv", "--batches", "1000000000"],
    ["progress", ".", "--batches", "1000000000"],
], ids=["check 01 1e9", "check 01 2500", "check 02", "check 03", "grade 01", "grade 05",
        "progress"])
def test_batches_the_checker_cannot_run_are_refused_up_front(tmp_path, argv):
    (tmp_path / "x.py").write_text("")
    done = subprocess.run([sys.executable, "-m", "dezero_mini", *argv], cwd=tmp_path,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 2, done.stderr
    last = done.stderr.strip().splitlines()[-1]
    assert "argument --batches" in last and "more than the checker can run" in last, done.stderr
    assert "give at most" in last and "Traceback" not in done.stderr
    assert not (tmp_path / "g.csv").exists()


def test_the_limit_is_the_workers_memory_over_what_a_batch_keeps():
    assert bench.largest_batches(3) > 1_000_000  # a record's figures only
    assert 1_000 < bench.largest_batches(1) < 3_000  # and the leaking stage's graphs
    assert bench.batches_problem(1, bench.largest_batches(1)) is None
    assert bench.batches_problem(3, bench.BATCHES) is None


@pytest.mark.parametrize("number", range(1, 11))
def test_the_leak_per_batch_the_limit_counts_is_each_reference_stages(number):
    """The figure of LEAKED_BYTES_PER_BATCH against a measurement: traced
    bytes that each batch leaves, collector off, as the record runs."""
    record = record_training(load_stage(number), 40, rss=False)
    module = load_stage(number)
    bench.forget_graphs(module)
    grown = (record.traced_current[-1] - record.traced_current[9]) / 30
    stated = bench.LEAKED_BYTES_PER_BATCH.get(number, 0)
    assert grown <= stated + 1024, (number, grown, stated)
    if stated:
        assert grown >= 0.95 * stated, (number, grown, stated)
