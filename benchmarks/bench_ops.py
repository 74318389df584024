"""How fast is dezero_mini per operation, next to PyTorch on the CPU?

Prints figures; it is not a test (timings depend on the machine). Run:

    .venv/bin/python benchmarks/bench_ops.py            # everything
    .venv/bin/python benchmarks/bench_ops.py --quick    # fewer repeats

PyTorch is optional (install it in .venv; a CPU-only build is enough);
without it only dezero_mini's figures are printed. Both frameworks compute in
float64 on one CPU thread, so that the comparison is about the framework, not
the arithmetic, and both compute the same gradients (``check_same_gradients``
compares them): the Variables that the code makes get one, the constants
written into the formulas (``y * 1.0001``) get none, in either framework.

1. graphs: forward + backward of graphs of 1,000 to 100,000 ops on
   10-element arrays, in microseconds per op, for three patterns:
   ``const`` (``y = y * 1.0001 + 0.0``: Python numbers in the formulas),
   ``mixed`` (Variable-Variable ops, element-wise functions and numbers) and
   ``chain`` (``y = sin(y * a + b)``: Variables only). The arrays are tiny on
   purpose: what is timed is the framework's own work per op (making
   Variables and Functions, linking the graph, walking it backward), not
   numpy's. dezero_mini runs with the cyclic collector on (the headline: as
   users run) and off (for comparison); the collector's share is the time
   its collections took (``gc.callbacks``) within the collector-on runs.
   PyTorch's graph is not made of Python objects: the collector does not
   scan it.
2. mlp: one training step (forward, backward, SGD update) of a 784-1000-10
   MLP with a sigmoid hidden layer on a batch of 100, in milliseconds. The
   batch is data, as users pass it (an array; a tensor without
   requires_grad), so neither framework computes its gradient. Here the
   matrix products dominate and both frameworks should be close.
3. scaling: backward time per function for chains of 1k, 10k and 100k
   functions: flat if backward is linear (or n log n with a tiny log term).

First it prints how many objects the cyclic collector tracks per op of each
pattern while the graph is alive (a count, not a time): what the
collector's full collections traverse.
"""
import argparse
import gc
import os
import statistics
import sys
import time

# One BLAS thread for numpy, as for torch below: read when numpy loads, so
# set before the import. (Without it numpy's matrix products use every core
# and the MLP comparison would be of thread counts, not of frameworks.)
for _variable in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_variable, "1")

import numpy as np  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import dezero_mini as dz  # noqa: E402
import dezero_mini.functions as F  # noqa: E402
from dezero_mini.memory import time_runs  # noqa: E402
from dezero_mini.machine import describe  # noqa: E402

try:
    import torch
except ImportError:  # optional: install a (CPU-only) PyTorch in .venv to compare
    torch = None
else:
    torch.set_num_threads(1)  # dezero_mini runs numpy on tiny arrays: one thread each, fair

N_ELEMENTS = 10


def timed(fns, repeats, warmup=2):
    """The wall times of each function of ``fns``, as ``(median, minimum)`` in
    seconds, after ``warmup`` untimed calls.

    The functions take turns, one call each per round, so that a change in
    the machine's load (another process, frequency scaling) falls on all of
    them alike and their ratio stays fair. The minimum is the steadier
    estimate of what the code itself costs on a shared machine (noise only
    ever adds time); the median is what a typical call takes. The cyclic
    collector is off while timing (as in ``timeit``): its pauses land at
    random in one repeat or another and say nothing about the op."""
    for fn in fns:
        for _ in range(warmup):
            fn()
    times = [[] for _ in fns]
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        for _ in range(repeats):
            for fn, fn_times in zip(fns, times):
                start = time.perf_counter()
                fn()
                fn_times.append(time.perf_counter() - start)
    finally:
        if gc_was_enabled:
            gc.enable()
    return [(statistics.median(t), min(t)) for t in times]


def print_comparison(timings, scale, unit):
    """dezero_mini's median and minimum, torch's when it ran, and the ratios.
    ``timings``: what timed() returned; ``scale``: seconds to ``unit``."""
    (ours_median, ours_min), *theirs = [(m * scale, lo * scale) for m, lo in timings]
    print(f"  dezero_mini {ours_median:8.2f} {unit} (median), {ours_min:8.2f} (minimum)")
    if not theirs:
        print("  torch       not installed")
        return
    theirs_median, theirs_min = theirs[0]
    print(f"  torch       {theirs_median:8.2f} {unit} (median), {theirs_min:8.2f} (minimum)")
    print(f"  ratio dezero_mini / torch: {ours_median / theirs_median:.2f} (medians), "
          f"{ours_min / theirs_min:.2f} (minima)")


# --- 1. graphs of 1,000 to 100,000 ops ---------------------------------------------------
def chain_inputs():
    """``a``, ``b`` and ``x`` of the patterns: one generator for both frameworks."""
    rng = np.random.RandomState(0)
    return rng.rand(N_ELEMENTS) * 0.5 + 0.5, rng.rand(N_ELEMENTS) * 0.1, rng.rand(N_ELEMENTS)


# Each pattern is one round of ops, written once for both frameworks: ``fn``
# is ``dezero_mini.functions`` or ``torch``, which share these names.
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


def dezero_graph(pattern, n_ops):
    """forward + backward of n_ops ops of ``pattern``; each call returns the
    Variables x, a, b (their gradients add up over calls)."""
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


def torch_graph(pattern, n_ops):
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


def check_same_gradients(n_ops=300):
    """Both frameworks compute the same gradients (or the comparison means nothing)."""
    for pattern in PATTERNS:
        ours = [v.grad for v in dezero_graph(pattern, n_ops)()]
        theirs = [v.grad for v in torch_graph(pattern, n_ops)()]
        for name, g_ours, g_theirs in zip("xab", ours, theirs):
            if g_theirs is None:  # a or b is not used by the pattern: no gradient in either
                assert g_ours is None, f"{pattern}: gradient of {name}"
                continue
            np.testing.assert_allclose(g_ours.data, g_theirs.numpy(), rtol=1e-10,
                                       err_msg=f"{pattern}: gradient of {name}")


def print_graph_table(pattern, sizes, repeats):
    """One row per graph size: dezero_mini with the collector on and off,
    PyTorch, and the ratios, in µs per op."""
    print(f"\n{pattern}: forward + backward, µs per op (minimum of {repeats}), "
          f"collector on as users run, off for comparison")
    print("      ops | on   (collector's share) | off   | torch | on / torch | off / torch")
    for n_ops in sizes:
        runs = [(dezero_graph(pattern, n_ops), "on"), (dezero_graph(pattern, n_ops), "off")]
        if torch is not None:
            runs.append((torch_graph(pattern, n_ops), "on"))
        for fn, _ in runs:
            fn()  # warm up (and the leaves' gradients are allocated once)
        timings = time_runs(runs, repeats)
        on, off = (t.seconds / n_ops * 1e6 for t in timings[:2])
        row = f"  {n_ops:>7,} | {on:5.2f} ({timings[0].collector_share:4.0%})           | {off:5.2f}"
        if torch is not None:
            theirs = timings[2].seconds / n_ops * 1e6
            row += f" | {theirs:5.2f} | {on / theirs:10.2f} | {off / theirs:11.2f}"
        print(row)


# --- 2. the MLP training step ------------------------------------------------------------
def dezero_mlp_step(batch=100, sizes=(784, 1000, 10), lr=0.01):
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


def torch_mlp_step(batch=100, sizes=(784, 1000, 10), lr=0.01):
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


# --- 3. backward scaling ------------------------------------------------------------------
def dezero_backward_only(n_funcs, repeats):
    """Median backward time of a chain of n_funcs functions (the forward is not timed)."""
    rng = np.random.RandomState(0)
    times = []
    for _ in range(repeats):
        x = dz.Variable(rng.rand(N_ELEMENTS))
        y = x
        for _ in range(n_funcs // 2):
            y = F.sin(y) * x  # 2 functions, and a fan-in at x: the heap has real work
        gc.disable()
        start = time.perf_counter()
        y.backward()
        times.append(time.perf_counter() - start)
        gc.enable()
        del x, y
    return statistics.median(times)


def tracked_objects_per_op(pattern, n_ops=3_000):
    """How many objects that the cyclic collector tracks (Variables,
    Functions, lists, tuples, weak references) a graph of ``pattern`` holds
    per op while it is alive: what each full collection traverses. Counted
    with ``gc.get_objects()`` before and after building it (no timing)."""
    one_round, ops_per_round = PATTERNS[pattern]
    a0, b0, x0 = chain_inputs()
    a, b = dz.Variable(a0), dz.Variable(b0)
    gc.collect()  # (also untracks the tuples that hold no container)
    before = len(gc.get_objects())
    y = dz.Variable(x0)
    rounds = n_ops // ops_per_round
    for _ in range(rounds):
        y = one_round(y, a, b, F)
    gc.collect()
    held = len(gc.get_objects()) - before
    del y
    return held / (rounds * ops_per_round)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repeats")
    parser.add_argument("--sizes", type=int, nargs="+", help="ops per graph (default 1000 10000 40000 100000)")
    args = parser.parse_args(argv)
    print(describe())  # where and when these figures were measured
    repeats = 5 if args.quick else 31

    print("PyTorch runs on 1 thread" if torch else "PyTorch is not installed: dezero_mini's figures only")
    if torch is not None:
        check_same_gradients()

    print("objects tracked by the cyclic collector, held per op: " + ", ".join(
        f"{pattern} {tracked_objects_per_op(pattern):.2f}" for pattern in PATTERNS))

    # 1. graphs
    sizes = (1_000, 10_000, 40_000, 100_000) if args.sizes is None else args.sizes
    for pattern in PATTERNS:
        print_graph_table(pattern, sizes, 2 if args.quick else 3)

    # 2. MLP
    mlp_repeats = 5 if args.quick else 15
    fns = [dezero_mlp_step()] + ([torch_mlp_step()] if torch is not None else [])
    print("\nMLP 784-1000-10, sigmoid, MSE, batch 100, one SGD step:")
    print_comparison(timed(fns, mlp_repeats), 1e3, "ms")

    # 3. scaling
    print("\nbackward of a chain of n functions (dezero_mini), µs per function:")
    for n_funcs, reps in ((1_000, 9), (10_000, 5), (100_000, 3 if not args.quick else 1)):
        t = dezero_backward_only(n_funcs, reps)
        print(f"  n = {n_funcs:>7,}: {t / n_funcs * 1e6:6.2f} µs/function  ({t * 1e3:8.1f} ms in all)")


if __name__ == "__main__":
    main()
