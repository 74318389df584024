"""Train the standard Workload on dezero_mini for many batches and show that
memory stays flat: live Variables/Functions and tracemalloc's current bytes
at the start and the end, and the slope of the bytes per batch.

    .venv/bin/python benchmarks/soak.py [--batches 10000]

Exit status 0 when memory stayed flat: as many live framework objects at the
end as after the first batch, and a slope under ``MAX_SLOPE`` bytes per
batch (a leaked graph is kilobytes a batch; the smallest Python object that
a batch could leave behind, 16 bytes); 1 otherwise (``make test-deep`` fails
on it).
"""
import argparse
import gc
import sys
import tracemalloc

import numpy as np

import dezero_mini
from dezero_mini.memory import Workload
from dezero_mini.memory.counting import count_live_objects

#: Bytes per batch above which the traced memory is not flat.
MAX_SLOPE = 1.0


def main(argv=None):
    parser = argparse.ArgumentParser()
    parser.add_argument("--batches", type=int, default=10_000)
    args = parser.parse_args(argv)
    workload = Workload(dezero_mini)
    every = max(1, args.batches // 100)
    marks = sorted(set(range(0, args.batches, every)) | {args.batches - 1})
    # Allocated before tracing starts: a list that grew during the run would
    # be counted by tracemalloc as if the framework had leaked it.
    traced = np.zeros(len(marks), dtype=np.int64)
    gc.collect()
    gc.disable()  # reference counting alone must free every graph
    tracemalloc.start()
    try:
        k = 0
        for i in range(args.batches):
            loss = workload.train_step(i)
            if i == marks[k]:
                traced[k] = tracemalloc.get_traced_memory()[0]
                k += 1
                if i == 0:
                    live_start = count_live_objects(dezero_mini)["total"]
        live_end = count_live_objects(dezero_mini)["total"]
    finally:
        tracemalloc.stop()
        gc.enable()
    steps, nbytes = np.array(marks), traced
    slope = np.polyfit(steps, nbytes, 1)[0]
    print(f"{args.batches} batches, last loss {loss:.4f}")
    print(f"live framework objects: start {live_start}, end {live_end}")
    print(f"tracemalloc current:    start {nbytes[0] / 1024:.1f} KiB, end {nbytes[-1] / 1024:.1f} KiB")
    print(f"slope: {slope:.4f} bytes per batch")
    flat = live_end == live_start and abs(slope) < MAX_SLOPE
    print("flat" if flat else f"NOT flat: the live objects must not change and the slope must "
          f"stay under {MAX_SLOPE:g} byte per batch")
    return 0 if flat else 1


if __name__ == "__main__":
    sys.exit(main())
