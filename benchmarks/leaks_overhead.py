"""What `leaks` costs a PyTorch training loop: the time per step with and without it, per pattern.

    python benchmarks/leaks_overhead.py [--steps 300] [--rounds 3] [--pattern NAME ...]

Each pattern is a small training loop (a two-layer MLP, 8 features, 32
hidden units, batches of 32) written to a temporary folder: clean SGD, SGD
with momentum, Adam, a manual SGD loop without torch.optim, and leaks that
grow while they are watched (`total_loss += loss`, a list of losses, a list
of outputs under Adam). The script times its own steps (the process's CPU time,
which a loaded machine changes less than the wall clock, after 20 steps of
warm-up, so imports and the first steps are left out on both sides) and
prints the seconds per step; both runs have one intra-op thread
(OMP_NUM_THREADS=1), so that no CPU time is spent spinning. Each pattern runs the same way twice
in a new process: `python SCRIPT` and `python -m dezero_mini leaks --steps N
SCRIPT`, alternately, `--rounds` times; the medians per step and their ratio
are printed. Watching costs once besides (the first count, which freezes the
program's objects, and the search for holders at the end): the whole run's
wall time of each is printed too. Timings depend on the machine and its
load; the ratio is what the leak finder promises (at most 1.5).
"""
import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from dezero_mini.machine import describe

ROOT = Path(__file__).resolve().parents[1]

LOOP = """
import time
import torch

torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(8, 32), torch.nn.Tanh(), torch.nn.Linear(32, 1))
parameters = list(model.parameters())
optimizer = {optimizer}
data = [torch.randn(32, 8) for _ in range(16)]
kept, total = [], 0.0
steps = {steps}
for step in range(steps):
    if step == 20:
        started = time.process_time()
    x = data[step % 16]
    out = model(x)
    loss = (out - x.sum(1, keepdim=True)).pow(2).mean()
{update}
{keep}
print("SECONDS_PER_STEP", (time.process_time() - started) / (steps - 20), flush=True)
"""

OPTIMIZER_UPDATE = """    optimizer.zero_grad()
    loss.backward()
    optimizer.step()"""
MANUAL_UPDATE = """    loss.backward()
    with torch.no_grad():
        for w in parameters:
            w -= 0.01 * w.grad
            w.grad = None"""

#: name -> (optimizer, update, what the loop keeps)
PATTERNS = {
    "sgd, clean": ("torch.optim.SGD(parameters, lr=0.01)", OPTIMIZER_UPDATE,
                   "    total += loss.item()"),
    "sgd momentum, clean": ("torch.optim.SGD(parameters, lr=0.01, momentum=0.9)",
                            OPTIMIZER_UPDATE, "    total += loss.item()"),
    "adam, clean": ("torch.optim.Adam(parameters, lr=0.001)", OPTIMIZER_UPDATE,
                    "    total += loss.item()"),
    "manual sgd, clean": ("None", MANUAL_UPDATE, "    total += loss.item()"),
    "sgd, total_loss += loss (leak)": ("torch.optim.SGD(parameters, lr=0.01)", OPTIMIZER_UPDATE,
                                       "    total = total + loss"),
    "sgd momentum, list of losses (leak)": (
        "torch.optim.SGD(parameters, lr=0.01, momentum=0.9)", OPTIMIZER_UPDATE,
        "    kept.append(loss)"),
    "adam, list of outputs (leak)": ("torch.optim.Adam(parameters, lr=0.001)", OPTIMIZER_UPDATE,
                                     "    kept.append(out)"),
}


def run(command):
    """(seconds per step the script measured, wall seconds of the whole run)."""
    started = time.perf_counter()
    environment = {**os.environ, "OMP_NUM_THREADS": "1"}
    done = subprocess.run(command, capture_output=True, text=True, cwd=ROOT, timeout=1800,
                          env=environment)
    wall = time.perf_counter() - started
    for line in done.stdout.splitlines():
        if line.startswith("SECONDS_PER_STEP"):
            return float(line.split()[1]), wall
    return None, wall  # stopped before its end (a step budget reached by another loop)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--pattern", action="append", choices=list(PATTERNS),
                        help="only this pattern (may be repeated)")
    args = parser.parse_args()
    names = args.pattern or list(PATTERNS)
    print(describe())  # where and when these figures were measured
    print(f"{args.steps} steps (20 of warm-up not timed), {args.rounds} rounds, medians "
          "(CPU time per step; wall time of the whole run):")
    print(f"{'pattern':40} {'alone ms/step':>14} {'leaks ms/step':>14} {'ratio':>6} "
          f"{'wall alone s':>13} {'wall leaks s':>13}")
    with tempfile.TemporaryDirectory() as folder:
        for name in names:
            optimizer, update, keep = PATTERNS[name]
            script = Path(folder) / "loop.py"
            script.write_text(LOOP.format(optimizer=optimizer, update=update, keep=keep,
                                          steps=args.steps))
            alone, watched = [], []
            for _ in range(args.rounds):
                alone.append(run([sys.executable, str(script)]))
                watched.append(run([sys.executable, "-m", "dezero_mini", "leaks", "--steps",
                                    str(args.steps + 1), str(script)]))
            step_alone = statistics.median(item[0] for item in alone)
            timed = [item[0] for item in watched if item[0] is not None]
            if not timed:
                print(f"{name:40} {step_alone * 1e3:14.3f} {'n/a':>14} {'n/a':>6}  (under leaks "
                      "the script was stopped before it printed its time)", flush=True)
                continue
            step_watched = statistics.median(timed)
            print(f"{name:40} {step_alone * 1e3:14.3f} {step_watched * 1e3:14.3f} "
                  f"{step_watched / step_alone:6.2f} "
                  f"{statistics.median(item[1] for item in alone):13.2f} "
                  f"{statistics.median(item[1] for item in watched):13.2f}", flush=True)


if __name__ == "__main__":
    main()
