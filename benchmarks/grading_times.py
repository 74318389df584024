"""How long grading a class takes: ``check`` per stage, and ``grade`` on a small batch.

Prints figures; it is not a test (timings depend on the machine). Run:

    .venv/bin/python benchmarks/grading_times.py [--students 6] [--jobs 2]

1. Each stage's own file of ``steps/`` checked once, as ``python -m
   dezero_mini check N FILE --allow-reference`` with the default options: the wall time, and
   the CPU time of the check and its worker (user + system, from
   ``getrusage(RUSAGE_CHILDREN)``). On a busy machine the wall time grows
   with the load and the CPU time does not: the CPU time is what a check
   costs an idle core.
2. ``grade 3`` on a small class (half of them a student's stage 03 made
   from stage 02, half of them stage 02's file) with ``--jobs J``: wall and CPU time.
3. The cost of 200 students x every stage, extrapolated from 1. as CPU
   time divided by the jobs, at ``--jobs 2`` on 2 cores and ``--jobs 16`` on
   16 cores: an estimate that assumes one check keeps one core busy and
   nothing else runs, not a measurement.
"""
import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from dezero_mini.contracts import stages
from dezero_mini.memory.stages import stage_path

# The class of part 2 is made as the tests make their submissions (a student's
# stage 03, and stage 02 as it is): the course's own stage-03 file is refused.
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
import submissions  # noqa: E402  (tests/submissions.py)
from dezero_mini.machine import describe  # noqa: E402

CLASS_SIZE = 200


def children_cpu():
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def timed(argv, cwd):
    """Run ``argv``; (wall seconds, CPU seconds of it and its children, exit code)."""
    cpu, started = children_cpu(), time.monotonic()
    code = subprocess.run(argv, cwd=cwd, stdout=subprocess.DEVNULL,
                          stderr=subprocess.DEVNULL).returncode
    return time.monotonic() - started, children_cpu() - cpu, code


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--students", type=int, default=6)
    parser.add_argument("--jobs", type=int, default=2)
    args = parser.parse_args()
    print(describe())  # where and when these figures were measured
    python = [sys.executable, "-m", "dezero_mini"]
    print(f"{os.cpu_count()} processors, load average {os.getloadavg()[0]:.1f} at the start")
    cpu_per_stage = {}
    with tempfile.TemporaryDirectory() as scratch:
        print("stage  wall s   CPU s  exit")
        for stage in stages():
            wall, cpu, code = timed([*python, "check", str(stage.number),
                                     str(stage_path(stage.number)), "--allow-reference"],
                                    scratch)
            cpu_per_stage[stage.number] = cpu
            print(f"{stage.number:>5}  {wall:6.1f}  {cpu:6.1f}  {code:>4}")
        students = []
        for i in range(args.students):
            folder = Path(scratch) / f"student{i:02d}"
            folder.mkdir()
            made = submissions.passing() if i % 2 == 0 else submissions.failing()
            (folder / "step03_weakref_outputs.py").write_text(made)
            students.append(str(folder))
        wall, cpu, code = timed([*python, "grade", "3", *students, "--jobs", str(args.jobs),
                                 "--csv", str(Path(scratch) / "grades.csv")], scratch)
        print(f"grade 3, {args.students} students, --jobs {args.jobs}: {wall:.1f} s wall "
              f"({wall / args.students:.1f} s per student), {cpu:.1f} s CPU "
              f"({cpu / args.students:.1f} s per student), exit {code}")
    total_cpu = sum(cpu_per_stage.values())
    print(f"one student, every stage: {total_cpu:.1f} s CPU "
          f"(stages from {min(cpu_per_stage.values()):.1f} to {max(cpu_per_stage.values()):.1f} s)")
    for jobs in (2, 16):
        hours = CLASS_SIZE * total_cpu / jobs / 3600
        print(f"extrapolated: {CLASS_SIZE} students x {len(cpu_per_stage)} stages at --jobs "
              f"{jobs} on {jobs} idle cores: {hours * 60:.0f} min ({hours:.2f} h)")
    print(f"load average {os.getloadavg()[0]:.1f} at the end")


if __name__ == "__main__":
    main()
