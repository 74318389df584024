"""Backward from several threads into one shared Parameter loses nothing:
each backward adds its leaves' gradients under one lock (before it, two of
six threads read the same old ``grad`` and one sum was lost: 742 of 12,000
contributions in one run)."""
import sys
import threading

import numpy as np

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
