"""Backward from several threads into one shared Parameter loses nothing:
each backward adds its leaves' gradients under one lock (before it, two of
six threads read the same old ``grad`` and one sum was lost: 742 of 12,000
contributions in one run)."""
import sys
import threading

import numpy as np
import pytest

import dezero_mini.functions as F
from dezero_mini import Parameter, Variable


def test_threads_backward_into_one_parameter_lose_nothing():
    threads, steps = 6, 1000
    shared = Parameter(np.zeros(4))
    start = threading.Barrier(threads)
    switch = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # switch threads as often as possible: races show at once

    def work(k):
        own = Variable(np.full(4, float(k)))  # each thread also has a leaf of its own
        start.wait()
        for _ in range(steps):
            F.sum(shared * 1.0 + own * shared).backward()  # shared gets 1 + k per step

    try:
        workers = [threading.Thread(target=work, args=(k,)) for k in range(threads)]
        for w in workers:
            w.start()
        for w in workers:
            w.join()
    finally:
        sys.setswitchinterval(switch)
    expected = steps * sum(1.0 + k for k in range(threads))  # exact in float64
    np.testing.assert_array_equal(shared.grad.data, np.full(4, expected))


# Every way of switching graph building off in one thread, and the ops that
# take the short way (_unary, _binary: they skip reading Config while no
# thread has switched it off) or the long way (Function.__call__).
SWITCHES_OFF = {
    "no_grad()": lambda: __import__("dezero_mini").no_grad(),
    "using_config": lambda: __import__("dezero_mini").using_config("enable_backprop", False),
    "assignment": lambda: _assigned_off(),
}
OPS = {
    "unary F.sin": lambda x: F.sin(x),
    "Variable * number": lambda x: x * 2.0,
    "Variable + Variable": lambda x: x + x,
    "F.sum (Function.__call__)": lambda x: F.sum(x),
}


class _assigned_off:
    """``Config.enable_backprop = False`` by assignment, restored by ``del``."""

    def __enter__(self):
        from dezero_mini import Config
        Config.enable_backprop = False

    def __exit__(self, *exc):
        from dezero_mini import Config
        del Config.enable_backprop  # back to the class's default


@pytest.mark.parametrize("switch", SWITCHES_OFF)
@pytest.mark.parametrize("op", OPS)
def test_graph_off_in_one_thread_only(switch, op):
    """While one thread has graph building off, its ops make no graph and the
    ops of another thread do; afterwards every thread builds graphs again."""
    x = Variable(np.arange(3.0))
    switched, release = threading.Event(), threading.Event()
    made = {}

    def without_graph():
        with SWITCHES_OFF[switch]():
            switched.set()
            release.wait(5)
            made["off"] = OPS[op](x)

    worker = threading.Thread(target=without_graph)
    worker.start()
    try:
        assert switched.wait(5)
        made["other thread"] = OPS[op](x)  # while the worker's switch is off
    finally:
        release.set()
        worker.join(5)
    made["after"] = OPS[op](x)
    assert made["off"].creator is None and made["off"].made_without_graph
    assert made["other thread"].creator is not None
    assert made["after"].creator is not None
