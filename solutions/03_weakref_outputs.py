"""Worked solutions of the exercises of lesson 03, "Weak references for outputs".

Run one with ``python solutions/03_weakref_outputs.py N`` (all of them without
N); each function's body is what you would type into the lesson's cells.
"""


def exercise_1():
    """One strong reference back from a Function to its output (`keep`) is enough to bring stage 02's leak back: `y -> creator -> keep -> y` is a cycle, and a cycle keeps everything that it reaches. After `del y` nothing is freed (six grey objects); only `gc.collect()` frees them, 3 Variables and 3 Functions. A weak `outputs` works only if nothing else in the Function refers to its output strongly."""
    import gc

    import numpy as np

    from dezero_mini.memory import load_stage, reference_graph, watch

    step = load_stage(3)
    gc.disable()
    try:
        rng = np.random.RandomState(1)
        x = step.Variable(rng.randn(4, 3), name="x")
        W = step.Variable(rng.randn(3, 2), name="W")
        b = step.Variable(np.zeros(2), name="b")
        y = step.sigmoid(x @ W + b)
        y.creator.keep = y
        before = reference_graph({"x": x, "W": W, "b": b, "y": y}, title="with y.creator.keep = y")
        on_cycle = sorted({e.label for e in before.edges if e.on_cycle})
        print("edges on a cycle:", on_cycle)  # drawn red
        watched = watch(y)
        del y
        print(watched)
        after = reference_graph({"x": x, "W": W, "b": b}, watched, title="after del y")
        print("grey (garbage) objects:", len(after.garbage))
        assert on_cycle == ["creator", "keep"]
        assert watched.freed() == {"variables": 0, "functions": 0}
        assert len(after.garbage) == 6
        gc.collect()
        print(watched)
        assert watched.freed() == {"variables": 3, "functions": 3}
    finally:
        gc.enable()


def exercise_2():
    """A name for an intermediate result keeps that result and, through its `creator`, the Function that made it and that Function's inputs: `h` keeps the MatMul (and `x`, `W`). Everything above `h` goes at `del y`: `y`, the result of `+`, the Sigmoid and the Add, 2 Variables and 2 Functions. Weak outputs free what is no longer reachable, not everything that backward will not need."""
    import gc

    import numpy as np

    from dezero_mini.memory import load_stage, watch

    step = load_stage(3)
    gc.disable()
    try:
        rng = np.random.RandomState(1)
        x = step.Variable(rng.randn(4, 3), name="x")
        W = step.Variable(rng.randn(3, 2), name="W")
        b = step.Variable(np.zeros(2), name="b")
        h = x @ W
        y = step.sigmoid(h + b)
        watched = watch(y)
        del y
        print(watched)
        print("h's creator survives:", type(h.creator).__name__)
        assert watched.freed() == {"variables": 2, "functions": 2}
        assert type(h.creator).__name__ == "MatMul"
    finally:
        gc.enable()


def exercise_3():
    """With `DEBUG_SAVEALL` the collector hands us everything it would have freed. After 20 batches of stage 03 it finds no Variable or Function: reference counting has already freed every graph. Stage 02 gives it 400, the 20 objects of each of the 20 graphs that only the collector could free."""
    import gc

    from dezero_mini.memory import Workload, load_stage

    def framework_garbage(step, batches=20):
        gc.collect()
        gc.disable()
        try:
            workload = Workload(step)
            for i in range(batches):
                workload.train_step(i)
            gc.set_debug(gc.DEBUG_SAVEALL)
            gc.collect()
            return sum(isinstance(obj, (step.Variable, step.Function)) for obj in gc.garbage)
        finally:
            gc.set_debug(0)
            gc.garbage.clear()
            gc.enable()

    weak = framework_garbage(load_stage(3))
    cyclic = framework_garbage(load_stage(2))
    print(f"Variables and Functions that the collector found: stage 03 {weak}, stage 02 {cyclic}")
    assert weak == 0
    assert cyclic == 400


if __name__ == "__main__":
    import sys

    from catalog import run

    sys.exit(run(globals()))
