"""Worked solutions of the exercises of lesson 07, "Graphs that the user holds".

Run one with ``python solutions/07_user_held_graphs.py N`` (all of them
without N); each function's body is what you would type into the lesson's
cells.
"""


def exercise_1():
    """A running mean kept as a Variable chains every batch to the next: each new meter's creator holds the old meter and the batch's loss, and the loss holds its creator. Because backward has already freed each loss's graph, that is a handful of objects per batch, not a whole graph, but it still grows without end. With `loss.item()` the meter is a number and the slope is 0."""
    from dezero_mini.memory import Workload, load_stage, record_training
    from dezero_mini.memory.user_loops import objects_per_forward

    step = load_stage(7)

    def meter_loop(fixed):
        workload = Workload(step)
        meter = 0.0

        def one_batch(i):
            nonlocal meter
            workload.cleargrads()
            loss = workload.loss(i)
            loss.backward()
            workload.update()
            meter = meter * 0.9 + (loss.item() if fixed else loss) * 0.1
            return loss.item()

        return record_training(step, 20, workload=workload, step=one_batch, rss=False,
                               label="meter = meter * 0.9 + " + ("loss.item()" if fixed else "loss") + " * 0.1")

    leaking, fixed = meter_loop(fixed=False), meter_loop(fixed=True)
    graph = objects_per_forward(step)
    for record in (leaking, fixed):
        print(record.report())
    print(f"one forward pass makes {graph} objects")
    assert 0 < leaking.slope("live_objects") < graph
    assert abs(fixed.slope("live_objects")) < 1e-9


def exercise_2():
    """Under `no_grad()` a Function keeps nothing, so a logged loss Variable is only itself and its array: the loop still grows by one Variable per list entry per batch (the loss and the mean, 2), but by no Function and almost no bytes (the arrays are a single number each). That is the difference between a leak of a graph and a leak of a log; `item()` removes even that."""
    from dezero_mini.memory import Workload, load_stage, record_training

    step = load_stage(7)
    workload = Workload(step)
    history = {"loss": [], "mean_prediction": []}

    def one_batch(i):
        with step.no_grad():
            x, t = workload.batch(i)
            y = workload.forward(step.Variable(x))
            loss = step.mean_squared_error(y, step.Variable(t))
            history["loss"].append(loss)
            history["mean_prediction"].append(step.sum(y) / len(y))
        return float(loss.data)

    record = record_training(step, 16, workload=workload, step=one_batch, rss=False,
                             label="history under no_grad()")
    print(record.report())
    print(f"{record.slope('live_objects'):.2f} objects and "
          f"{record.slope('traced_current'):.0f} bytes per batch")
    assert abs(record.slope("live_objects") - 2) < 1e-9
    assert record.slope("live_functions") == 0
    assert record.slope("traced_current") < 1024


def exercise_3():
    """A cache bounded to the last five batches, of detached arrays, holds at most five activations and no graph: live objects rise for five batches and then stay flat, because each new entry pushes out the oldest. Keeping what you need (detached, bounded) instead of everything is the fix when a number is not enough."""
    import numpy as np

    from dezero_mini.memory import Workload, load_stage, record_training

    step = load_stage(7)
    workload = Workload(step)
    cache = {}

    def one_batch(i):
        workload.cleargrads()
        x, t = workload.batch(i)
        hidden = []
        y = workload.forward(step.Variable(x), hidden=hidden)
        loss = step.mean_squared_error(y, step.Variable(t))
        loss.backward()
        workload.update()
        cache[i] = hidden[0].detach()
        cache.pop(i - 5, None)
        return float(loss.data)

    record = record_training(step, 16, workload=workload, step=one_batch, rss=False,
                             label="a cache of the last five activations, detached")
    print("live objects after each batch:", record.live_objects.tolist())
    assert np.all(np.diff(record.live_objects)[:4] > 0)  # rises for five batches
    assert np.all(np.diff(record.live_objects)[6:] == 0)  # then flat
    assert len(cache) == 5


def exercise_4():
    """`total_loss += loss` keeps every batch's graph only until the epoch's `total_loss.backward()`: live objects climb for ten batches, fall back to the parameters when the epoch ends (backward frees the graphs, and the sum is replaced by 0), and climb again. A leak that an epoch resets is a peak that grows with the epoch's length, which is why the blog post's run ran out of memory sooner with more batches per epoch."""
    from dezero_mini.memory import load_stage
    from dezero_mini.memory.user_loops import record_loop

    step = load_stage(7)
    record = record_loop("total_loss", step, batches=20, epoch_batches=10)
    live = record.live_objects
    print("live objects after each batch:", live.tolist())
    assert live[9] == live[19] < live[8]
    assert all(a < b for a, b in zip(live[:9], live[1:9]))  # climbs within the epoch


def exercise_5():
    """The fixed loop 3 keeps numbers, so between batches objgraph finds no Variable, no Function and no weak reference more (at most an object of Python's own, made once): everything that a batch made was freed when the batch ended. The leaking loop, on the same three batches, grows by three graphs' worth (14 Variables a batch: 11 of the forward pass and 3 of the logged mean). objgraph can tell a leaking loop from a fixed one without knowing anything of the framework; what it cannot tell is who holds the objects."""
    import gc

    from dezero_mini.memory import load_stage, tools
    from dezero_mini.memory.user_loops import LOOPS

    objgraph = tools.optional_tool("objgraph")
    if objgraph is None:
        return  # the line above says how to install it
    step = load_stage(7)
    was_enabled = gc.isenabled()
    gc.disable()  # the counts then change only through the loop's own references
    try:
        grew = {}
        for fixed in (True, False):
            loop = LOOPS["history"](step, fixed=fixed)
            loop.step(0)
            objgraph.growth()  # the baseline
            for i in range(1, 4):
                loop.step(i)
            grew[fixed] = {name: delta for name, _, delta in objgraph.growth(limit=None)}
            print(f"{loop.label}: {grew[fixed] or 'nothing grew'}")
            del loop
    finally:
        if was_enabled:
            gc.enable()
    assert not {"Variable", "Sigmoid", "MatMul", "ReferenceType"} & set(grew[True])
    assert grew[False]["Variable"] == 3 * 14


if __name__ == "__main__":
    import sys

    from catalog import run

    sys.exit(run(globals()))
