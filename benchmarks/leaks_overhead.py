"""What `leaks` costs a PyTorch training loop: the time per step with and without it, per pattern.

    python benchmarks/leaks_overhead.py [--steps 300] [--rounds 3] [--pattern NAME ...]
                                        [--size small|larger ...]

Each pattern is a training loop of a two-layer MLP, in two sizes (small: 8
features, 32 hidden units, batches of 32; larger: 64 features, 512 hidden
units, batches of 128), written to a temporary folder: clean SGD, SGD
with momentum, Adam, a manual SGD loop without torch.optim, and leaks that
grow while they are watched (`total_loss += loss`, a list of losses, a list
of outputs under Adam). The script times its own steps (the process's CPU time,
which a loaded machine changes less than the wall clock, after 20 steps of
warm-up, so imports and the first steps are left out on both sides) and
prints the seconds per step; both runs have one intra-op thread
(OMP_NUM_THREADS=1), so that no CPU time is spent spinning. Each pattern runs the same way twice
in a new process: `python SCRIPT` and `python -m dezero_mini leaks --steps N
SCRIPT`, one right after the other (the order swapped every round), `--rounds`
times, the patterns interleaved within a round: a ratio is taken within each
round, from two runs a few seconds apart under the same load, and the median
of those ratios is printed (with their range), beside the medians per step.
Watching costs once besides (the first count, which freezes the
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
model = torch.nn.Sequential(torch.nn.Linear({features}, {hidden}), torch.nn.Tanh(),
                            torch.nn.Linear({hidden}, 1))
parameters = list(model.parameters())
optimizer = {optimizer}
data = [torch.randn({batch}, {features}) for _ in range(16)]
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

#: size -> (features, hidden units, batch)
SIZES = {"small": (8, 32, 32), "larger": (64, 512, 128)}


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
    parser.add_argument("--size", action="append", choices=list(SIZES),
                        help="only this model size (may be repeated)")
    args = parser.parse_args()
    cases = [(name, size) for size in (args.size or list(SIZES))
             for name in (args.pattern or list(PATTERNS))]
    print(describe())  # where and when these figures were measured
    print(f"{args.steps} steps (20 of warm-up not timed), {args.rounds} rounds, the patterns "
          "interleaved; CPU time per step (medians), the ratio per round (median, lowest-highest), "
          "wall time of the whole run (medians):", flush=True)
    alone = {case: [] for case in cases}
    watched = {case: [] for case in cases}
    ratios = {case: [] for case in cases}
    with tempfile.TemporaryDirectory() as folder:
        scripts = {}
        for index, (name, size) in enumerate(cases):
            optimizer, update, keep = PATTERNS[name]
            features, hidden, batch = SIZES[size]
            scripts[name, size] = Path(folder) / f"loop{index}.py"
            scripts[name, size].write_text(LOOP.format(
                optimizer=optimizer, update=update, keep=keep, steps=args.steps,
                features=features, hidden=hidden, batch=batch))
        for round_number in range(args.rounds):
            for case in cases:
                script = scripts[case]
                commands = [[sys.executable, str(script)],
                            [sys.executable, "-m", "dezero_mini", "leaks", "--steps",
                             str(args.steps + 1), str(script)]]
                if round_number % 2:  # half the rounds watched first: no side gains from order
                    commands.reverse()
                first, second = run(commands[0]), run(commands[1])
                one, other = (second, first) if round_number % 2 else (first, second)
                alone[case].append(one)
                watched[case].append(other)
                if one[0] and other[0]:
                    ratios[case].append(other[0] / one[0])
                    print(f"  round {round_number + 1}: {case[0]}, {case[1]}: "
                          f"{other[0] / one[0]:.2f}", flush=True)  # kept if the run is cut short
            print(f"  round {round_number + 1} of {args.rounds} done", flush=True)
    print(f"{'pattern':40} {'size':>6} {'alone ms':>9} {'leaks ms':>9} {'ratio':>6} "
          f"{'range':>11} {'wall alone s':>13} {'wall leaks s':>13}")
    for case in cases:
        name, size = case
        step_alone = statistics.median(item[0] for item in alone[case])
        timed = [item[0] for item in watched[case] if item[0] is not None]
        if not timed or not ratios[case]:
            print(f"{name:40} {size:>6} {step_alone * 1e3:9.3f} {'n/a':>9} {'n/a':>6}  (under "
                  "leaks the script was stopped before it printed its time)", flush=True)
            continue
        spread = f"{min(ratios[case]):.2f}-{max(ratios[case]):.2f}"
        print(f"{name:40} {size:>6} {step_alone * 1e3:9.3f} {statistics.median(timed) * 1e3:9.3f} "
              f"{statistics.median(ratios[case]):6.2f} {spread:>11} "
              f"{statistics.median(item[1] for item in alone[case]):13.2f} "
              f"{statistics.median(item[1] for item in watched[case]):13.2f}", flush=True)
    everything = [ratio for case in cases for ratio in ratios[case]]
    if everything:
        worst = max(cases, key=lambda case: statistics.median(ratios[case] or [0]))
        print(f"highest median ratio: {statistics.median(ratios[worst]):.2f} "
              f"({worst[0]}, {worst[1]}); the leak finder promises at most 1.5")


if __name__ == "__main__":
    main()
