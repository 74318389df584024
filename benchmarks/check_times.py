"""How long checking one learner's ten stages takes, and grading a class.

Prints figures, with the machine's load beside each; it is not a test
(timings depend on the machine). Run:

    .venv/bin/python benchmarks/check_times.py [--submissions 40] [--jobs 2] [--margins]

1. The ten stages' own files of ``steps/`` checked one after the other, each
   as ``python -m dezero_mini check N FILE --allow-reference`` (what a learner
   types ten times), with the default options (the sandbox where it runs):
   the wall time of each and their total.
2. The same ten files checked by one ``progress`` command (one process, the
   stages ``--jobs`` at a time, each in a worker and a sandbox of its own):
   its wall time at ``--jobs 1`` and at ``--jobs J``.
3. ``grade 3`` on ``--submissions`` students (half of them a student's
   stage 03 made from stage 02, half stage 02's file as it is) at ``--jobs
   J``, and the extrapolation to 200 students x 10 stages: the wall time per
   submission, times 10 stages weighed by part 1 (the ten stages' total
   against stage 03's), times 200. An estimate, not a measurement.
4. With ``--margins``: how sure the verdicts that read the training record
   are at fewer batches: the traced-bytes slope (KiB per batch) and whether
   the live objects stayed constant, on every reference stage and on a
   stage-03 file that keeps its graphs (a strong reference left in
   ``outputs``), at 10 to 200 batches; and the loss fall that
   ``training_learns`` reads, at 50 batches and at the 150 it once ran.
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from dezero_mini.contracts import stages
from dezero_mini.machine import describe
from dezero_mini.memory.stages import stage_path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
import submissions  # noqa: E402  (tests/submissions.py: the class of part 3)

CLASS_SIZE = 200
PYTHON = [sys.executable, "-m", "dezero_mini"]


def load():
    """The 1-minute load average, as text."""
    return f"load {os.getloadavg()[0]:.1f}"


def timed(argv, cwd):
    """Run ``argv`` in ``cwd``; (wall seconds, exit code)."""
    started = time.monotonic()
    code = subprocess.run(argv, cwd=cwd, stdout=subprocess.DEVNULL,
                          stderr=subprocess.DEVNULL).returncode
    return time.monotonic() - started, code


def ten_checks(scratch):
    """Part 1: {stage: wall seconds} of ten separate checks."""
    walls = {}
    print(f"1. ten separate checks ({load()} at the start)")
    for stage in stages():
        wall, code = timed([*PYTHON, "check", str(stage.number), str(stage_path(stage.number)),
                            "--allow-reference"], scratch)
        walls[stage.number] = wall
        print(f"   stage {stage.number:02d}: {wall:5.2f} s, exit {code} ({load()})", flush=True)
    print(f"   total {sum(walls.values()):.1f} s ({load()} at the end)")
    return walls


def progress_runs(scratch, jobs):
    """Part 2: ``progress`` over a folder of the ten reference files."""
    folder = Path(scratch) / "learner"
    folder.mkdir()
    for stage in stages():
        shutil.copy(stage_path(stage.number), folder / stage.file_name)
    print("2. one progress command over the ten files")
    for j in sorted({1, jobs}):
        before = load()
        wall, code = timed([*PYTHON, "progress", str(folder), "--jobs", str(j)], scratch)
        print(f"   --jobs {j}: {wall:5.2f} s, exit {code} ({before} at the start, {load()} at "
              "the end)", flush=True)


def grade_run(scratch, count, jobs, walls):
    """Part 3: grade ``count`` stage-03 submissions, and the extrapolation."""
    folders = []
    for i in range(count):
        folder = Path(scratch) / f"student{i:03d}"
        folder.mkdir()
        made = submissions.passing() if i % 2 == 0 else submissions.failing()
        (folder / "step03_weakref_outputs.py").write_text(made)
        folders.append(str(folder))
    before = load()
    wall, code = timed([*PYTHON, "grade", "3", *folders, "--jobs", str(jobs),
                        "--csv", str(Path(scratch) / "grades.csv")], scratch)
    each = wall / count
    print(f"3. grade 3, {count} submissions, --jobs {jobs}: {wall:.1f} s ({each:.2f} s a "
          f"submission), exit {code} ({before} at the start, {load()} at the end)")
    weight = sum(walls.values()) / walls[3]  # ten stages against stage 03
    total = CLASS_SIZE * each * weight
    print(f"   extrapolated: {CLASS_SIZE} students x {len(walls)} stages at --jobs {jobs}: "
          f"{total / 60:.0f} min ({total / 3600:.2f} h): {each:.2f} s a stage-03 submission, "
          f"x {weight:.2f} for the ten stages (part 1's total against its stage 03)")


def leaking_stage03():
    """A stage-03 file that keeps a strong reference to its outputs (test_checker's
    strong_reference_left_in_outputs): every batch's graph stays alive."""
    text = stage_path(3).read_text()
    return re.sub(r"^( *)(self\.outputs = \[weakref\.ref\(output\) for output in outputs\].*\n)",
                  r"\1\2\1self.output_variables = outputs  # for debugging\n", text, count=1,
                  flags=re.MULTILINE)


def margins(scratch):
    """Part 4: the record's verdicts at 10 to 200 batches."""
    import numpy as np

    from dezero_mini.contracts.bench import forget_graphs
    from dezero_mini.memory.recorder import record_training
    from dezero_mini.memory.stages import load_stage, load_stage_file
    from dezero_mini.memory.workload import Workload

    counts = (10, 20, 50, 100, 200)
    leaking = Path(scratch) / "step03_leaking.py"
    leaking.write_text(leaking_stage03())
    modules = [(f"stage {stage.number:02d}", load_stage(stage.number)) for stage in stages()]
    modules += [("dezero_mini", load_stage("dezero_mini")),
                ("stage 03, keeps its graphs", load_stage_file(leaking, "leaking_stage03"))]
    print("4. traced bytes per batch (KiB; the limit of a flat stage is 1 KiB) and live "
          "objects (c: constant, G: grow), by batches recorded")
    print("   " + " " * 28 + "".join(f"{n:>12}" for n in counts) + "    loss fall 50 / 150")
    for label, module in modules:
        record = record_training(module, batches=max(counts), gc_enabled=False, rss=False)
        forget_graphs(module)
        cells = []
        for n in counts:
            slope = np.polyfit(np.arange(n), record.traced_current[:n].astype(float), 1)[0]
            constant = bool(np.all(record.live_objects[:n] == record.live_objects[0]))
            cells.append(f"{slope / 1024:10.3f} {'c' if constant else 'G'}")
        workload = Workload(module)
        losses = [workload.train_step(i) for i in range(150)]
        forget_graphs(module)
        fall_50 = np.mean(losses[40:50]) / np.mean(losses[:10])
        fall_150 = np.mean(losses[-20:]) / np.mean(losses[:20])
        print(f"   {label:<28}" + "".join(cells) + f"    {fall_50:.2f} / {fall_150:.2f}",
              flush=True)
    print("   (training_learns passes below 0.80: at 50 batches the mean of the last 10 "
          "against the first 10; at 150, of the last 20 against the first 20)")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--submissions", type=int, default=10)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--margins", action="store_true", help="also print part 4")
    parser.add_argument("--skip", default="", help="parts to leave out, e.g. 3 or 1,2")
    args = parser.parse_args()
    skip = set(args.skip.split(","))
    print(describe())
    print(f"{os.cpu_count()} processors, {load()} at the start")
    with tempfile.TemporaryDirectory() as scratch:
        walls = ten_checks(scratch) if "1" not in skip else None
        if "2" not in skip:
            progress_runs(scratch, args.jobs)
        if "3" not in skip and walls:
            grade_run(scratch, args.submissions, args.jobs, walls)
        if args.margins:
            margins(scratch)
    print(f"{load()} at the end")


if __name__ == "__main__":
    main()
