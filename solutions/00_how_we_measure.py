"""Worked solutions of the exercises of lesson 00, "How we measure".

Run one with ``python solutions/00_how_we_measure.py N`` (all of them without
N); each function's body is what you would type into the lesson's cells.
"""


def exercise_1():
    """IPython keeps the value of a cell that ends in an expression under `_N` and `Out[N]`, and for a while under `_`, `__` and `___`, the last three values shown. A cell that ends in `gc.collect()` shows a number, which pushes the object from `_` to `__`: so after `del big` and `gc.collect()` it is still alive, held by `__`, `_N` and `Out[N]`. The cache is reachable, so nothing in it is garbage; two more cells that show a value move it out of `__` and `___`, and only `disable_output_cache()` (or `del Out[N]`, `_N`) lets it go. Outside a notebook, an InteractiveShell runs the cells as a fresh kernel would."""
    from IPython.core.interactiveshell import InteractiveShell

    shell = InteractiveShell.instance()  # a fresh kernel, with the output cache on
    cells = [
        "import gc, weakref\nimport numpy as np\n"
        "class Big:\n    def __init__(self):\n        self.data = np.zeros(1_000_000)\n",
        "big = Big()\nalive = weakref.ref(big)",
        "big",  # the cell that ends in big: its value goes into the cache
        "del big\ngc.collect()",  # as a reader writes it: the number it returns is shown, and cached
        "holders = [name for name, value in globals().items() if value is alive()]",
    ]
    for cell in cells:
        result = shell.run_cell(cell, store_history=True)
        result.raise_error()
    cached_cell = shell.execution_count - 3  # the number N of the cell "big"
    ns = shell.user_ns
    alive = ns["alive"]
    print("alive after del big and gc.collect():", alive() is not None)
    print("names that hold it:", ns["holders"])
    print(f"Out[{cached_cell}] is it:", ns["Out"][cached_cell] is alive())
    print("_ is what gc.collect() returned:", repr(ns["_"]))
    assert alive() is not None
    assert set(ns["holders"]) == {"__", f"_{cached_cell}"}
    assert ns["Out"][cached_cell] is alive()
    assert isinstance(ns["_"], int)

    for _ in range(2):  # two more cells that show a value: out of __, then out of ___
        shell.run_cell("1 + 1", store_history=True).raise_error()
    last_three = [name for name in ("_", "__", "___") if ns[name] is alive()]
    print("after two more values shown, held by _, __ or ___:", last_three or "none of them")
    assert not last_three and alive() is not None  # _N and Out[N] still keep it

    shell.run_cell("from dezero_mini.memory import disable_output_cache\n"
                   "disable_output_cache()\nfound = gc.collect()", store_history=True).raise_error()
    print("after disable_output_cache():", "alive" if alive() is not None else "freed")
    assert alive() is None


def exercise_2():
    """The ten batches of stage 01 leave about 9 MiB traced, and the line that allocated most of it, with two more of the top four, is in `steps/step01_leaking_graph.py`: `MatMul`'s forward and backward and `Add`'s forward, which make the activations and the gradients. The fourth is inside numpy (`_methods.py`, the sum that a Function calls), so follow a numpy line to the framework's caller with `snapshot.statistics("traceback")`."""
    import gc
    import tracemalloc

    from dezero_mini.memory import Workload, load_stage

    step = load_stage(1)
    gc.disable()
    try:
        workload = Workload(step)
        tracemalloc.start()
        for i in range(10):
            workload.train_step(i)
        snapshot = tracemalloc.take_snapshot()
        tracemalloc.stop()
    finally:
        gc.enable()
    top = snapshot.statistics("lineno")[:4]
    for stat in top:
        print(stat)
    total = sum(s.size for s in snapshot.statistics("lineno"))
    print(f"all statistics together: {total / 2**20:.2f} MiB for 10 batches")
    in_step = [s.traceback[0].filename.endswith("step01_leaking_graph.py") for s in top]
    assert in_step[0] and sum(in_step) >= 3, in_step
    assert 8.5 * 2**20 < total < 10 * 2**20, total
    step.REGISTRY.clear()  # the leaked graphs go with the registry and the cycles
    gc.collect()


def exercise_3():
    """A 256 MiB array is far above glibc's mmap threshold, so it gets its own mapping: RSS rises by 256 MiB as `np.ones` writes its pages and falls by as much at `del a`, with no trim (`np.zeros` would leave the pages untouched, and out of RSS, until written). Small objects are different: they come from pymalloc's arenas and glibc's heap, which keep freed memory for reuse, and that is why the lessons' RSS panels are noisy."""
    import numpy as np
    import psutil

    process = psutil.Process()
    mib = 2**20
    before = process.memory_info().rss
    a = np.ones(2**25)  # 2**25 float64 numbers, 256 MiB, every page written
    with_a = process.memory_info().rss
    del a
    after = process.memory_info().rss
    print(f"RSS before {before / mib:.0f} MiB, with a {with_a / mib:.0f} MiB, "
          f"after del a {after / mib:.0f} MiB")
    up, down = (with_a - before) / mib, (with_a - after) / mib
    print(f"up by {up:.0f} MiB, down by {down:.0f} MiB")
    assert 240 < up < 272 and 240 < down < 272, (up, down)


if __name__ == "__main__":
    import sys

    from catalog import run

    sys.exit(run(globals()))
