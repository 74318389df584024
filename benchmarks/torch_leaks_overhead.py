"""What watching a PyTorch loop costs: time and memory per step, with and without `leaks`.

    python benchmarks/torch_leaks_overhead.py [--steps 300] [--rounds 3]

Runs examples/pytorch/total_loss.py --fixed (a two-layer MLP, batches of 32)
for the same number of steps, alternately as plain Python would (the script
executed as __main__) and under dezero_mini.memory.torch_leaks.watch_script
(a snapshot of every name's autograd graph after each optimizer step), in
one process, and prints the median time per step of each and their ratio,
and the resident memory each run added (psutil). Collector on, as users run.
"""
import argparse
import runpy
import statistics
import sys
import time
from pathlib import Path

import psutil
from dezero_mini.machine import describe

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "examples" / "pytorch" / "total_loss.py"


def plain(steps):
    sys.argv = [str(SCRIPT), "--fixed", "--steps", str(steps)]
    sys.path.insert(0, str(SCRIPT.parent))
    try:
        runpy.run_path(str(SCRIPT), run_name="__main__")
    finally:
        sys.path.remove(str(SCRIPT.parent))


def watched(steps):
    from dezero_mini.memory.torch_leaks import watch_script

    run = watch_script(SCRIPT, script_args=["--fixed", "--steps", str(steps)], steps=steps + 1)
    assert run.error is None and not run.stopped


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    print(describe())  # where and when these figures were measured
    import torch  # noqa: F401  (imported before timing: its import is not a step)

    process = psutil.Process()
    times = {"plain": [], "watched": []}
    grown = {"plain": [], "watched": []}
    for _ in range(args.rounds):
        for name, run in (("plain", plain), ("watched", watched)):
            before, started = process.memory_info().rss, time.perf_counter()
            run(args.steps)
            times[name].append((time.perf_counter() - started) / args.steps)
            grown[name].append(process.memory_info().rss - before)
    plain_step, watched_step = (statistics.median(times[name]) for name in ("plain", "watched"))
    print(f"{args.steps} steps x {args.rounds} rounds, median per step:")
    print(f"  plain   {plain_step * 1e3:8.3f} ms   resident memory added: "
          f"{max(grown['plain']) / 2**20:.1f} MiB at most")
    print(f"  watched {watched_step * 1e3:8.3f} ms   resident memory added: "
          f"{max(grown['watched']) / 2**20:.1f} MiB at most")
    print(f"  ratio watched/plain: {watched_step / plain_step:.2f}")


if __name__ == "__main__":
    main()
