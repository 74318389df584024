"""Where dezero_mini's time per operation goes: forward against backward, and
the Python bytecodes that each op runs, by function.

Prints figures; it is not a test. Run (PyTorch optional, for its split):

    .venv/bin/python benchmarks/op_costs.py [--ops 1000] [--calls 40]

``bench_ops.py`` says how dezero_mini compares with PyTorch as a whole; this
script says where the difference lies, for the same three patterns
(``bench_ops.PATTERNS``):

1. forward and backward timed apart, in microseconds per op: the minimum
   over ``--calls`` calls, each after a full collection, the collector off
   (so that the two halves are the path's own cost); PyTorch's beside them
   when it is installed.
2. the Python bytecodes executed per op, counted by a trace function that
   asks for one event per bytecode (``frame.f_trace_opcodes``): a count, not
   a time, so the same on any machine and under any load. The functions
   that run most of them are listed. Each bytecode costs some tens of
   machine instructions in CPython 3.11 (more for a call or an attribute the
   interpreter cannot specialise), so this is where a pure-Python framework
   pays for its features.
"""
import argparse
import collections
import gc
import os
import sys
import time

for _variable in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_variable, "1")  # one thread, as bench_ops.py

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from bench_ops import PATTERNS, chain_inputs  # noqa: E402
import dezero_mini as dz  # noqa: E402
import dezero_mini.functions as F  # noqa: E402
from dezero_mini.arguments import whole_number  # noqa: E402 (an argparse type)
from dezero_mini.machine import describe  # noqa: E402


def dezero_halves(pattern, n_ops):
    """``(forward, backward)``: two functions, the second running backward
    on what the first built."""
    one_round, ops_per_round = PATTERNS[pattern]
    a0, b0, x0 = chain_inputs()
    a, b = dz.Variable(a0), dz.Variable(b0)

    def forward():
        y = dz.Variable(x0)
        for _ in range(n_ops // ops_per_round):
            y = one_round(y, a, b, F)
        return y

    return forward, lambda y: y.backward()


def torch_halves(pattern, n_ops, torch):
    one_round, ops_per_round = PATTERNS[pattern]
    a0, b0, x0 = (torch.tensor(v) for v in chain_inputs())
    a, b = a0.requires_grad_(True), b0.requires_grad_(True)

    def forward():
        y = x0.clone().requires_grad_(True)
        for _ in range(n_ops // ops_per_round):
            y = one_round(y, a, b, torch)
        return y

    return forward, lambda y: y.backward(torch.ones_like(y))


def ops_made(pattern, n_ops):
    """The ops that a graph of ``n_ops`` of ``pattern`` has: whole rounds only."""
    return n_ops // PATTERNS[pattern][1] * PATTERNS[pattern][1]


def split_times(halves, ops, calls):
    """Minimum forward and backward times in µs per op over ``calls`` calls."""
    forward, backward = halves
    best_forward = best_backward = float("inf")
    was_enabled = gc.isenabled()
    try:
        for _ in range(calls):
            gc.collect()
            gc.disable()
            start = time.perf_counter()
            y = forward()
            middle = time.perf_counter()
            backward(y)
            end = time.perf_counter()
            del y
            best_forward = min(best_forward, middle - start)
            best_backward = min(best_backward, end - middle)
            gc.enable()
    finally:
        (gc.enable if was_enabled else gc.disable)()
    return best_forward / ops * 1e6, best_backward / ops * 1e6


def bytecodes_per_op(pattern, n_ops):
    """``(total, {function name: bytecodes})`` per op, for one forward and
    backward of ``pattern`` (after one untraced call, so that every cache the
    framework keeps is warm)."""
    forward, backward = dezero_halves(pattern, n_ops)
    backward(forward())
    counts = collections.Counter()

    def trace(frame, event, arg):
        frame.f_trace_opcodes = True
        if event == "opcode":
            counts[frame.f_code.co_name] += 1
        return trace

    sys.settrace(trace)
    try:
        backward(forward())
    finally:
        sys.settrace(None)
    ops = ops_made(pattern, n_ops)
    return sum(counts.values()) / ops, {name: count / ops for name, count in counts.items()}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ops", type=whole_number(100, 200_000), default=1_000,
                        help="ops per graph (100 to 200,000; default 1,000)")
    parser.add_argument("--calls", type=whole_number(1, 1_000), default=40,
                        help="calls per figure, the minimum is kept (default 40)")
    args = parser.parse_args(argv)
    try:
        import torch
    except ImportError:
        torch = None
    else:
        torch.set_num_threads(1)
    print(describe())
    print(f"\n1. forward and backward apart, µs per op, graphs of {args.ops:,} ops "
          f"(minimum of {args.calls} calls, collector off)")
    print("   pattern | dezero_mini forward  backward |" + ("  torch forward  backward |"
                                                             " forward / torch  backward / torch"
                                                             if torch else ""))
    for pattern in PATTERNS:
        ops = ops_made(pattern, args.ops)
        ours = split_times(dezero_halves(pattern, args.ops), ops, args.calls)
        row = f"   {pattern:>7} | {ours[0]:19.2f} {ours[1]:9.2f} |"
        if torch is not None:
            theirs = split_times(torch_halves(pattern, args.ops, torch), ops, args.calls)
            row += (f" {theirs[0]:14.2f} {theirs[1]:9.2f} | {ours[0] / theirs[0]:15.2f}"
                    f" {ours[1] / theirs[1]:17.2f}")
        print(row)
    print(f"\n2. Python bytecodes per op (one forward and backward of {min(args.ops, 2_000):,} ops)")
    for pattern in PATTERNS:
        total, by_function = bytecodes_per_op(pattern, min(args.ops, 2_000))
        top = sorted(by_function.items(), key=lambda item: -item[1])[:6]
        print(f"   {pattern:>7}: {total:5.0f} in all; "
              + ", ".join(f"{name} {count:.0f}" for name, count in top))
    print("   ('backward' is both Variable.backward's loop and the Functions' own backward "
          "methods; 'call' the built-in Functions' calls, _unary and _binary)")


if __name__ == "__main__":
    main()
