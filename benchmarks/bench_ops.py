"""How fast is dezero_mini per operation, next to PyTorch on the CPU?

Prints figures; it is not a test (timings depend on the machine). Run:

    .venv/bin/python benchmarks/bench_ops.py            # everything (a few minutes)
    .venv/bin/python benchmarks/bench_ops.py --quick    # a shorter time per figure
    .venv/bin/python benchmarks/bench_ops.py --sizes 1000 10000 --patterns chain --json run.json

PyTorch is optional (install it in .venv; a CPU-only build is enough);
without it only dezero_mini's figures are printed. Both frameworks compute in
float64 on one CPU thread, so that the comparison is about the framework, not
the arithmetic, and both compute the same gradients (checked first): the
Variables that the code makes get one, the constants written into the
formulas (``y * 1.0001``) get none, in either framework.

How it measures. Each framework runs in a worker process of its own, started
once: dezero_mini's never imports torch, torch's never imports dezero_mini.
(In one process, torch's ~145,000 objects would be traversed by every full
collection of dezero_mini's collector, and the figures would be those of a
process no user runs.) The parent asks the workers for one timed call at a
time, in rounds (dezero_mini with the collector on, then off, then PyTorch;
again...), so that a change of the machine's load falls on all of them
alike, and it keeps going until the figure's time budget is spent (and for
at least a few rounds). Every call starts from a collected heap, so that it
pays nothing for the garbage of the one before and every call meets the
collector in the same state. The calls are timed in each worker's CPU
time (``--clock wall``: the wall time). The estimate is the minimum (noise
only ever adds time); the spread printed next to it says how sure it is.

1. graphs: forward + backward of graphs of 1,000 to 100,000 ops on
   10-element arrays, in microseconds per op, for three patterns:
   ``const`` (``y = y * 1.0001 + 0.0``: Python numbers in the formulas),
   ``mixed`` (Variable-Variable ops, element-wise functions and numbers) and
   ``chain`` (``y = sin(y * a + b)``: Variables only). The arrays are tiny on
   purpose: what is timed is the framework's own work per op (making
   Variables and Functions, linking the graph, walking it backward), not
   numpy's. dezero_mini runs with the cyclic collector on (the headline: as
   users run) and off (for comparison); the collector's share is the time
   its collections took (``gc.callbacks``) within the fastest collector-on
   call. PyTorch runs with its collector on, as users run; its graph is not
   made of Python objects, so the collector does not scan it. Each row says
   whether the target of issue 36 is met (see ``target_for``).
2. mlp: one training step (forward, backward, SGD update) of a 784-1000-10
   MLP with a sigmoid hidden layer on a batch of 100, in milliseconds. The
   batch is data, as users pass it (an array; a tensor without
   requires_grad), so neither framework computes its gradient. Here the
   matrix products dominate and both frameworks should be close.
3. scaling: backward time per function of dezero_mini for chains of the
   graph sizes: flat if backward is linear (or n log n with a tiny log term).

First it prints how many objects the cyclic collector tracks per op of each
pattern while the graph is alive (a count, not a time): what the
collector's full collections traverse.
"""
import argparse
import gc
import json
import os
import statistics
import subprocess
import sys
import time

# One BLAS thread for numpy, as for torch below: read when numpy loads, so
# set before the import (the workers inherit it). Without it numpy's matrix
# products use every core and the MLP comparison would be of thread counts.
for _variable in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_variable, "1")

import numpy as np  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

N_ELEMENTS = 10
DEFAULT_SIZES = (1_000, 10_000, 40_000, 100_000)
#: The graph sizes the command takes: below 100 ops a mixed graph has a
#: dozen rounds and the figure is the call's overhead; the memory grows with
#: the size (a mixed graph of 200,000 ops peaked at 120 MB in dezero_mini's
#: worker and 570 MB in PyTorch's, 2026-11-28) and the targets stop at 100,000.
SIZE_RANGE = (100, 200_000)
#: Wall seconds per figure (all its runs and the collections between calls
#: together), and the least number of rounds, for a full run and for --quick.
BUDGET = {"full": (6.0, 5), "quick": (2.0, 3)}
#: Rounds go on after the budget until each run's minimum over the odd rounds
#: and over the even rounds agree within 5 % (``settled``), for at most
#: PATIENCE times the budget in all.
SETTLED = 0.05
PATIENCE = 3


# --- The targets of issue 36 ----------------------------------------------------------------
TARGET_RULE = ("target (issue 36): dezero_mini, collector on, at most 0.50x PyTorch's time "
               "per op up to 10,000 ops and 0.75x at 100,000; a size between them "
               "(40,000) is held to 0.75x, the bound of the next point (the issue sets none "
               "of its own); no target above 100,000")


def target_for(n_ops):
    """The largest ratio dezero_mini / PyTorch that issue 36 accepts at
    ``n_ops`` ops, or None where it sets no target."""
    if n_ops <= 10_000:
        return 0.50
    if n_ops <= 100_000:
        return 0.75
    return None


def verdict(ratio, halves, target):
    """``met`` or ``not met`` for ``ratio`` against ``target``, with
    ``(unsure)`` when the two halves of the rounds fall on either side of
    it; ``no target`` where there is none. The figures are judged as they
    are printed (two decimals), so that the words agree with what is read:
    0.7503 is 0.75, which meets 0.75."""
    if target is None or ratio is None:
        return "no target"
    ratio, low, high = (round(value, 2) for value in (ratio, min(halves), max(halves)))
    words = "met" if ratio <= target else "not met"
    if low <= target < high:
        words += " (unsure)"
    return words


# --- The patterns, written once for both frameworks -------------------------------------------
def chain_inputs():
    """``a``, ``b`` and ``x`` of the patterns: one generator for both frameworks."""
    rng = np.random.RandomState(0)
    return rng.rand(N_ELEMENTS) * 0.5 + 0.5, rng.rand(N_ELEMENTS) * 0.1, rng.rand(N_ELEMENTS)


# Each pattern is one round of ops: ``fn`` is ``dezero_mini.functions`` or
# ``torch``, which share these names.
def const_round(y, a, b, fn):
    return y * 1.0001 + 0.0


def mixed_round(y, a, b, fn):
    return fn.sin(y * a + 1.0) * 0.5 + fn.tanh(y) * b


def chain_round(y, a, b, fn):
    return fn.sin(y * a + b)


PATTERNS = {  # name: (one round, ops in a round)
    "const": (const_round, 2),
    "mixed": (mixed_round, 7),
    "chain": (chain_round, 3),
}


def ops_made(pattern, n_ops):
    """How many ops a graph of ``pattern`` asked for ``n_ops`` really has
    (whole rounds only): what the times are divided by."""
    ops_per_round = PATTERNS[pattern][1]
    return n_ops // ops_per_round * ops_per_round


# --- The worker: one framework, one process -----------------------------------------------------
class DezeroCases:
    """What the dezero_mini worker runs. Imports dezero_mini, never torch."""

    name = "dezero_mini"

    def __init__(self):
        sys.path.insert(0, ROOT)
        import dezero_mini as dz
        import dezero_mini.functions as F
        from dezero_mini.memory.gctime import CollectionTimer

        self.dz, self.F, self.collections = dz, F, CollectionTimer

    def graph(self, pattern, n_ops):
        """forward + backward of n_ops ops of ``pattern``; each call returns
        the Variables x, a, b (their gradients add up over calls)."""
        dz, F = self.dz, self.F
        one_round, ops_per_round = PATTERNS[pattern]
        a0, b0, x0 = chain_inputs()
        a, b = dz.Variable(a0), dz.Variable(b0)

        def run():
            x = dz.Variable(x0)
            y = x
            for _ in range(n_ops // ops_per_round):
                y = one_round(y, a, b, F)
            y.backward()
            return x, a, b

        return run

    def gradients(self, pattern, n_ops):
        """The gradients of x, a and b after one call, as lists (None: no gradient)."""
        return [None if v.grad is None else v.grad.data.tolist()
                for v in self.graph(pattern, n_ops)()]

    def mlp(self, batch=100, sizes=(784, 1000, 10), lr=0.01):
        dz, F = self.dz, self.F
        rng = np.random.RandomState(0)
        W1 = dz.Variable(rng.randn(sizes[0], sizes[1]) * 0.01)
        b1 = dz.Variable(np.zeros(sizes[1]))
        W2 = dz.Variable(rng.randn(sizes[1], sizes[2]) * 0.01)
        b2 = dz.Variable(np.zeros(sizes[2]))
        params = [W1, b1, W2, b2]
        # The batch and its targets as users pass them: arrays, constants that
        # get no gradient (so the first layer skips the product that x's would cost).
        x, t = rng.rand(batch, sizes[0]), rng.rand(batch, sizes[2])

        def step():
            for v in params:
                v.cleargrad()
            h = F.sigmoid(F.linear(x, W1, b1))
            y = F.linear(h, W2, b2)
            loss = F.mean_squared_error(y, t)
            loss.backward()
            for p in params:
                p.data -= lr * p.grad.data
            return loss

        return step

    def tracked_per_op(self, pattern, n_ops=3_000):
        """How many objects that the cyclic collector tracks (Variables,
        Functions, lists, tuples, weak references) a graph of ``pattern``
        holds per op while it is alive: what each full collection traverses.
        Counted with ``gc.get_objects()`` before and after building it."""
        one_round, ops_per_round = PATTERNS[pattern]
        a0, b0, x0 = chain_inputs()
        a, b = self.dz.Variable(a0), self.dz.Variable(b0)
        gc.collect()  # (also untracks the tuples that hold no container)
        before = len(gc.get_objects())
        y = self.dz.Variable(x0)
        for _ in range(n_ops // ops_per_round):
            y = one_round(y, a, b, self.F)
        gc.collect()
        held = len(gc.get_objects()) - before
        del y
        return held / ops_made(pattern, n_ops)

    def backward_seconds(self, n_funcs, repeats, clock):
        """Median backward time of a chain of n_funcs functions (the forward
        is not timed), collector off, on ``clock`` (a key of ``CLOCKS``)."""
        clock = CLOCKS[clock]
        rng = np.random.RandomState(0)
        times = []
        for _ in range(repeats):
            x = self.dz.Variable(rng.rand(N_ELEMENTS))
            y = x
            for _ in range(n_funcs // 2):
                y = self.F.sin(y) * x  # 2 functions, and a fan-in at x: the heap has real work
            gc.disable()
            start = clock()
            y.backward()
            times.append(clock() - start)
            gc.enable()
            del x, y
        return statistics.median(times)


class TorchCases:
    """What the PyTorch worker runs. Imports torch, never dezero_mini."""

    name = "torch"

    def __init__(self):
        import torch

        torch.set_num_threads(1)  # dezero_mini runs numpy on tiny arrays: one thread each, fair
        self.torch, self.collections = torch, None  # (its collections are not timed)

    def graph(self, pattern, n_ops):
        torch = self.torch
        one_round, ops_per_round = PATTERNS[pattern]
        a0, b0, x0 = (torch.tensor(v) for v in chain_inputs())
        a, b = a0.requires_grad_(True), b0.requires_grad_(True)

        def run():
            x = x0.clone().requires_grad_(True)
            y = x
            for _ in range(n_ops // ops_per_round):
                y = one_round(y, a, b, torch)
            y.backward(torch.ones_like(y))
            return x, a, b

        return run

    def gradients(self, pattern, n_ops):
        return [None if v.grad is None else v.grad.numpy().tolist()
                for v in self.graph(pattern, n_ops)()]

    def mlp(self, batch=100, sizes=(784, 1000, 10), lr=0.01):
        torch = self.torch
        rng = np.random.RandomState(0)
        W1 = torch.tensor(rng.randn(sizes[0], sizes[1]) * 0.01, requires_grad=True)
        b1 = torch.zeros(sizes[1], dtype=torch.float64, requires_grad=True)
        W2 = torch.tensor(rng.randn(sizes[1], sizes[2]) * 0.01, requires_grad=True)
        b2 = torch.zeros(sizes[2], dtype=torch.float64, requires_grad=True)
        params = [W1, b1, W2, b2]
        x, t = torch.tensor(rng.rand(batch, sizes[0])), torch.tensor(rng.rand(batch, sizes[2]))

        def step():
            for v in params:
                v.grad = None
            h = torch.sigmoid(x @ W1 + b1)
            y = h @ W2 + b2
            loss = torch.mean((y - t) ** 2)
            loss.backward()
            with torch.no_grad():
                for p in params:
                    p -= lr * p.grad
            return loss

        return step


WORKERS = {"dezero": DezeroCases, "torch": TorchCases}


#: What a call's time is read from: ``cpu``, the CPU time of the worker
#: (``time.process_time``), which leaves out the time the call waits while
#: other processes run (a single-threaded call spends its wall time on the
#: CPU, or waiting for it; the others still slow it through the caches they
#: share, and on a virtual machine through the host), or ``wall``
#: (``time.perf_counter``), what a user waits.
CLOCKS = {"cpu": time.process_time, "wall": time.perf_counter}


def time_one_call(run, collector, clock, collections=None):
    """Time one call of ``run`` with the cyclic collector ``"on"`` or
    ``"off"``, from a collected heap, on ``clock`` (a key of ``CLOCKS``).
    Returns its seconds and, when ``collections`` (``gctime.CollectionTimer``)
    is given, the seconds that the collections took and how many were full ones."""
    clock = CLOCKS[clock]
    gc.collect()
    (gc.enable if collector == "on" else gc.disable)()
    timer = collections(clock) if collections is not None else None
    if timer is not None:
        gc.callbacks.append(timer)
    try:
        start = clock()
        run()
        seconds = clock() - start
    finally:
        gc.enable()
        if timer is not None:
            gc.callbacks.remove(timer)
    if timer is None:
        return {"seconds": seconds}
    return {"seconds": seconds, "collector_seconds": timer.seconds,
            "full_collections": timer.full_collections}


def serve(framework):
    """The worker's loop: one JSON request a line on standard input, one
    JSON answer a line on standard output, until ``stop`` or the end of the
    input. Its first line says whether the framework could be imported."""
    answers = os.fdopen(os.dup(sys.stdout.fileno()), "w")
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())  # a stray print cannot break the protocol

    def answer(value):
        answers.write(json.dumps(value) + "\n")
        answers.flush()

    try:
        cases = WORKERS[framework]()
    except Exception as error:  # not installed, or a broken installation: say why, once
        answer({"ready": False, "why": f"{type(error).__name__}: {error}"})
        return
    answer({"ready": True})
    built, current = None, None  # the case last asked for, built (and warmed up) once
    for line in sys.stdin:
        request = json.loads(line)
        what = request["do"]
        if what == "time":
            case = (request["case"], request.get("pattern"), request.get("ops"))
            if case != built:
                current = (cases.mlp() if case[0] == "mlp" else cases.graph(case[1], case[2]))
                current()  # warm up (and the leaves' gradients are allocated once)
                built = case
            answer(time_one_call(current, request["collector"], request["clock"],
                                 cases.collections))
        elif what == "gradients":
            answer(cases.gradients(request["pattern"], request["ops"]))
        elif what == "tracked_per_op":
            answer(cases.tracked_per_op(request["pattern"]))
        elif what == "backward_seconds":
            answer(cases.backward_seconds(request["ops"], request["repeats"], request["clock"]))
        elif what == "stop":
            # Which of the two frameworks this process imported: its own only.
            answer(sorted(name for name in ("dezero_mini", "torch") if name in sys.modules))
            return
        else:
            raise ValueError(f"unknown request {what!r}")


class WorkerStopped(Exception):
    """A worker ended before it answered (its error is on standard error)."""


class Worker:
    """The parent's side of one worker process."""

    def __init__(self, framework):
        self.framework = framework
        self.process = subprocess.Popen(
            [sys.executable, os.path.abspath(__file__), "--worker", framework],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=ROOT)
        hello = self._read()
        self.ready, self.why = hello["ready"], hello.get("why")

    def ask(self, request):
        """Send one request (a dict), return the worker's answer."""
        try:
            self.process.stdin.write(json.dumps(request) + "\n")
            self.process.stdin.flush()
        except BrokenPipeError:
            pass  # the worker is gone: _read says so
        return self._read()

    def _read(self):
        line = self.process.stdout.readline()
        if not line:
            code = self.process.wait()
            raise WorkerStopped(f"the {self.framework} worker stopped (exit status {code}) "
                                "before it answered; its error is above")
        return json.loads(line)

    def stop(self):
        """Ask the worker to stop; returns the frameworks it had imported."""
        imported = self.ask({"do": "stop"}) if self.ready else []
        self.process.wait(timeout=30)
        return imported

    def kill(self):
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()


# --- Rounds, and what the parent makes of them ---------------------------------------------------
def rounds(runs, budget, least_rounds):
    """Ask each of ``runs`` (``(label, worker, request)``) for one timed call
    in turn, round after round, until ``budget`` wall seconds have passed,
    at least ``least_rounds`` rounds are done and the figures have settled
    (``settled``), or ``PATIENCE`` times the budget has passed. Returns, per
    label, the list of answers (one a round)."""
    answers = {label: [] for label, _, _ in runs}
    start = time.perf_counter()
    while True:
        for label, worker, request in runs:
            answers[label].append(worker.ask(request))
        elapsed = time.perf_counter() - start
        if len(answers[runs[0][0]]) >= least_rounds and elapsed >= budget:
            if elapsed >= PATIENCE * budget or settled(answers):
                return answers


def settled(answers):
    """Whether each run's minimum over the odd rounds and over the even
    rounds agree within ``SETTLED``: then one more round would hardly move
    the estimate (on a busy machine, a run whose calls were all slowed down
    in one half of the rounds does not agree until it had a quiet call there too)."""
    for calls in answers.values():
        times = seconds_of(calls)
        low, high = sorted((min(times[0::2]), min(times[1::2])))
        if high > low * (1 + SETTLED):
            return False
    return True


def seconds_of(answers):
    return [a["seconds"] for a in answers]


def ratio_figures(ours, theirs):
    """dezero_mini's time over PyTorch's from the calls of the same rounds:
    ``min`` (the estimate: minimum over minimum), ``median`` (the median of
    the rounds' own ratios: each compares two calls made a moment apart, on
    the same load) and ``halves`` (the estimate from the odd rounds and from
    the even rounds alone: how far it moves with the calls that happened to
    be timed)."""
    halves = [min(ours[start::2]) / min(theirs[start::2]) for start in (0, 1)
              if ours[start::2]]
    return {"min": min(ours) / min(theirs),
            "median": statistics.median(o / t for o, t in zip(ours, theirs)),
            "halves": [min(halves), max(halves)]}


def spread_words(figures):
    """``0.52 (median 0.55, halves 0.51-0.53)``."""
    low, high = figures["halves"]
    return (f"{figures['min']:.2f} (median {figures['median']:.2f}, "
            f"halves {low:.2f}-{high:.2f})")


def measure_graph(pattern, n_ops, workers, clock, budget, least_rounds):
    """One cell: the rounds of the three runs, and every figure made of them."""
    request = {"do": "time", "case": "graph", "pattern": pattern, "ops": n_ops, "clock": clock}
    runs = [("dezero_on", workers["dezero"], {**request, "collector": "on"}),
            ("dezero_off", workers["dezero"], {**request, "collector": "off"})]
    if "torch" in workers:
        runs.append(("torch", workers["torch"], {**request, "collector": "on"}))
    answers = rounds(runs, budget, least_rounds)
    made = ops_made(pattern, n_ops)
    cell = {"pattern": pattern, "ops": n_ops, "ops_made": made,
            "rounds": len(answers["dezero_on"]), "settled": settled(answers), "calls": answers,
            "us_per_op": {}}
    for label, calls in answers.items():
        times = seconds_of(calls)
        cell["us_per_op"][label] = {"min": min(times) / made * 1e6,
                                    "median": statistics.median(times) / made * 1e6}
    fastest_on = min(answers["dezero_on"], key=lambda a: a["seconds"])
    cell["collector_share"] = fastest_on["collector_seconds"] / fastest_on["seconds"]
    cell["target"] = target_for(n_ops)
    if "torch" in answers:
        theirs = seconds_of(answers["torch"])
        cell["ratio_on"] = ratio_figures(seconds_of(answers["dezero_on"]), theirs)
        cell["ratio_off"] = ratio_figures(seconds_of(answers["dezero_off"]), theirs)
        cell["verdict"] = verdict(cell["ratio_on"]["min"], cell["ratio_on"]["halves"],
                                  cell["target"])
    return cell


def print_graph_header(pattern, with_torch, clock):
    print(f"\n{pattern}: forward + backward, µs per op ({clock} time, minimum over the rounds), "
          "collector on as users run (its share of the fastest call), off for comparison")
    head = "      ops | rounds |   on  (share) |   off"
    if with_torch:
        head += " | torch | on / torch: min (median, halves)   | off / torch | target"
    print(head)


def print_graph_row(cell):
    us = cell["us_per_op"]
    rounds = f"{cell['rounds']}{'' if cell['settled'] else '*'}"
    row = (f"  {cell['ops']:>7,} | {rounds:>6} | {us['dezero_on']['min']:5.2f} "
           f"({cell['collector_share']:4.0%}) | {us['dezero_off']['min']:5.2f}")
    if "torch" in us:
        target = cell["target"]
        bound = "no target" if target is None else f"<= {target:.2f}: {cell['verdict']}"
        row += (f" | {us['torch']['min']:5.2f} | {spread_words(cell['ratio_on']):<34} | "
                f"{cell['ratio_off']['min']:11.2f} | {bound}")
    print(row)


def print_targets_summary(cells):
    """Which cells meet the target, in words made from the figures."""
    judged = [c for c in cells if "verdict" in c and c["target"] is not None]
    if not judged:
        return
    missed = [c for c in judged if c["verdict"].startswith("not met")]
    unsure = [c for c in judged if "unsure" in c["verdict"]]
    print(f"\n{TARGET_RULE}.")
    print(f"  met in {len(judged) - len(missed)} of {len(judged)} cells (ratio of the minima)"
          + ("; not met: " + ", ".join(f"{c['pattern']} {c['ops']:,} ({c['ratio_on']['min']:.2f}"
                                         f" > {c['target']:.2f})" for c in missed)
             if missed else ""))
    if unsure:
        print("  unsure (the two halves of the rounds fall on either side of the bound): "
              + ", ".join(f"{c['pattern']} {c['ops']:,}" for c in unsure))


def check_same_gradients(workers, patterns, n_ops=300):
    """Both frameworks compute the same gradients (or the comparison means
    nothing): each worker sends its gradients of x, a and b as lists.
    Returns None, or the sentence that says which differ."""
    for pattern in patterns:
        request = {"do": "gradients", "pattern": pattern, "ops": n_ops}
        ours, theirs = (workers[name].ask(request) for name in ("dezero", "torch"))
        for name, g_ours, g_theirs in zip("xab", ours, theirs):
            if g_ours is None or g_theirs is None:  # a or b unused by the pattern: none in either
                if g_ours is not g_theirs:
                    return f"{pattern}: only one framework computes a gradient of {name}"
                continue
            if not np.allclose(g_ours, g_theirs, rtol=1e-10, atol=0):
                return f"{pattern}: the gradients of {name} differ between the frameworks"
    return None


def measure_mlp(workers, clock, budget, least_rounds):
    request = {"do": "time", "case": "mlp", "collector": "off", "clock": clock}
    runs = [(name, worker, request) for name, worker in workers.items()]
    answers = rounds(runs, budget, least_rounds)
    mlp = {"rounds": len(answers["dezero"]), "settled": settled(answers), "calls": answers,
           "ms": {name: {"min": min(seconds_of(calls)) * 1e3,
                         "median": statistics.median(seconds_of(calls)) * 1e3}
                  for name, calls in answers.items()}}
    print(f"\nMLP 784-1000-10, sigmoid, MSE, batch 100, one SGD step "
          f"({clock} time, collector off, {mlp['rounds']} rounds):")
    for name, label in (("dezero", "dezero_mini"), ("torch", "torch")):
        if name in mlp["ms"]:
            ms = mlp["ms"][name]
            print(f"  {label:<11} {ms['min']:8.2f} ms (minimum), {ms['median']:8.2f} (median)")
    if "torch" in answers:
        mlp["ratio"] = ratio_figures(seconds_of(answers["dezero"]), seconds_of(answers["torch"]))
        print(f"  ratio dezero_mini / torch: {spread_words(mlp['ratio'])}")
    return mlp


def measure_scaling(dezero, sizes, clock, quick):
    print(f"\nbackward of a chain of n functions (dezero_mini, {clock} time, collector off, "
          "median), µs per function:")
    scaling = []
    for n_funcs in sizes:
        repeats = 9 if n_funcs <= 1_000 else 5 if n_funcs <= 10_000 else 1 if quick else 3
        seconds = dezero.ask({"do": "backward_seconds", "ops": n_funcs, "repeats": repeats,
                               "clock": clock})
        scaling.append({"functions": n_funcs, "repeats": repeats, "seconds": seconds})
        print(f"  n = {n_funcs:>7,}: {seconds / n_funcs * 1e6:6.2f} µs/function  "
              f"({seconds * 1e3:8.1f} ms in all)")
    return scaling


# --- The command ------------------------------------------------------------------------------------
def parse_arguments(argv):
    sys.path.insert(0, ROOT)
    from dezero_mini.arguments import output_file, whole_number
    from dezero_mini.atomic import output_target_problem

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true",
                        help=f"a shorter time per figure ({BUDGET['quick'][0]:g} s and at least "
                             f"{BUDGET['quick'][1]} rounds instead of {BUDGET['full'][0]:g} s "
                             f"and {BUDGET['full'][1]})")
    parser.add_argument("--clock", choices=list(CLOCKS), default="cpu", help=(
        "what the calls are timed with: cpu, each worker's CPU time, which leaves out the "
        "time the worker waits while other processes run (the default), or wall, the "
        "time a user waits (the same on an idle machine)"))
    parser.add_argument("--sizes", type=whole_number(*SIZE_RANGE), nargs="+", metavar="OPS",
                        help="ops per graph (default: %s)" % " ".join(map(str, DEFAULT_SIZES)))
    parser.add_argument("--patterns", nargs="+", choices=list(PATTERNS), metavar="PATTERN",
                        help=f"which patterns ({', '.join(PATTERNS)}; default: all)")
    parser.add_argument("--json", type=output_file(".json"), metavar="PATH",
                        help="also write every figure (and every call's time) to this file")
    parser.add_argument("--worker", choices=list(WORKERS), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.json is not None:  # the one check of an output, with what this command reads
        problem = output_target_problem(args.json, (".json",),
                                        [("this benchmark script", os.path.abspath(__file__))])
        if problem is not None:
            parser.error(f"argument --json: {problem}")
    args.sizes = list(dict.fromkeys(args.sizes or DEFAULT_SIZES))  # in order, once each
    args.patterns = list(dict.fromkeys(args.patterns or PATTERNS))
    return args


def main(argv=None):
    if argv is None and sys.argv[1:3] and sys.argv[1] == "--worker":
        return serve(sys.argv[2])  # (the parent's arguments are not the worker's business)
    args = parse_arguments(argv)
    from dezero_mini.atomic import write_text
    from dezero_mini.machine import describe

    started = time.perf_counter()
    budget, least_rounds = BUDGET["quick" if args.quick else "full"]
    report = {"schema": 1, "command": sys.argv, "machine": describe(),
              "load_before": os.getloadavg(), "quick": args.quick,
              "clock": args.clock, "budget_seconds": budget, "least_rounds": least_rounds,
              "sizes": args.sizes, "patterns": args.patterns, "target_rule": TARGET_RULE}
    print(report["machine"])  # where and when these figures were measured
    workers = {}
    try:
        workers["dezero"] = Worker("dezero")
        torch_worker = Worker("torch")
        if torch_worker.ready:
            workers["torch"] = torch_worker
            print("each framework in a worker process of its own; PyTorch on 1 thread")
        else:
            torch_worker.stop()
            print(f"PyTorch cannot be imported ({torch_worker.why}): dezero_mini's figures only")

        if "torch" in workers:
            problem = check_same_gradients(workers, args.patterns)
            if problem is not None:
                print(f"bench_ops: {problem}; the timings would compare different work",
                      file=sys.stderr)
                return 1
        report["gradients"] = "same" if "torch" in workers else "not compared"

        report["tracked_per_op"] = {p: workers["dezero"].ask({"do": "tracked_per_op",
                                                               "pattern": p})
                                    for p in args.patterns}
        print("objects tracked by the cyclic collector, held per op: " + ", ".join(
            f"{p} {n:.2f}" for p, n in report["tracked_per_op"].items()))

        # 1. graphs
        report["graphs"] = []
        for pattern in args.patterns:
            print_graph_header(pattern, "torch" in workers, args.clock)
            for n_ops in args.sizes:
                cell = measure_graph(pattern, n_ops, workers, args.clock, budget, least_rounds)
                print_graph_row(cell)
                report["graphs"].append(cell)
        unsettled = [c for c in report["graphs"] if not c["settled"]]
        if unsettled:
            print(f"\n* not settled: a run's minima over the odd and the even rounds still "
                  f"differed by more than {SETTLED:.0%} after {PATIENCE} times the budget "
                  "(a busy machine): " + ", ".join(f"{c['pattern']} {c['ops']:,}"
                                                   for c in unsettled))
        print_targets_summary(report["graphs"])
        # 2. MLP, 3. scaling
        report["mlp"] = measure_mlp(workers, args.clock, budget, least_rounds)
        report["scaling"] = measure_scaling(workers["dezero"], args.sizes, args.clock, args.quick)
        report["imported"] = {name: worker.stop() for name, worker in workers.items()}
    except WorkerStopped as error:
        print(f"bench_ops: {error}", file=sys.stderr)
        return 1
    finally:
        for worker in workers.values():
            worker.kill()

    report["load_after"] = os.getloadavg()
    report["duration_seconds"] = time.perf_counter() - started
    print(f"\n{report['duration_seconds']:.0f} s in all; load average "
          f"{report['load_before'][0]:.1f} before, {report['load_after'][0]:.1f} after")
    if args.json is not None:
        write_text(args.json, json.dumps(report, indent=1) + "\n")
        print(f"every figure written to {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
