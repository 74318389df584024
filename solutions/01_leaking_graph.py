"""Worked solutions of the exercises of lesson 01, "A leaking graph".

Run one with ``python solutions/01_leaking_graph.py N`` (all of them without
N); each function's body is what you would type into the lesson's cells.
"""


def exercise_1():
    """Emptying the registry after every batch removes only the first leak: with the collector off, every graph is still kept, now by its Variable <-> Function cycles (20 objects per batch, as before). But those graphs are garbage: the final `gc.collect()` brings the count down to the 6 parameters, where the unfixed run stays at thousands. With the collector on the line is a sawtooth, the picture of stage 02."""
    import gc

    from dezero_mini.memory import Workload, load_stage, plot_training, record_training

    step = load_stage(1)

    class RegistryClearing(Workload):
        def train_step(self, i, **kwargs):
            loss = super().train_step(i, **kwargs)
            step.REGISTRY.clear()
            return loss  # the record stores what train_step returns

    # Objects counted once, at the end: counting after every batch of a growing heap is slow.
    leak_gc_off = record_training(step, 200, gc_enabled=False, rss=False, count_objects=False)
    step.REGISTRY.clear()
    gc.collect()
    cleared_off = record_training(step, 200, gc_enabled=False, rss=False,
                                  workload=RegistryClearing(step), label="registry cleared, gc off")
    cleared_on = record_training(step, 200, gc_enabled=True, rss=False,
                                 workload=RegistryClearing(step), label="registry cleared, gc on")
    step.REGISTRY.clear()
    for record in (leak_gc_off, cleared_off, cleared_on):
        print(record.report())
    plot_training([cleared_off, cleared_on], signals=("live_objects", "traced_current"),
                  title="Stage 01 with the registry cleared after every batch")

    assert cleared_off.summary()["objects_per_batch"] == 20.0
    assert cleared_off.live_objects[-1] == leak_gc_off.live_after_collect == 6 + 200 * 20
    assert cleared_off.live_after_collect == 6
    # The sawtooth: the collector ran, and the count fell between batches.
    assert cleared_on.summary()["gc_collections"] > 0
    assert (cleared_on.live_objects[1:] < cleared_on.live_objects[:-1]).any()
    assert cleared_on.live_objects.max() < leak_gc_off.live_after_collect


def exercise_2():
    """One batch leaves 11 Variables in the registry (the input, the target, eight results and the loss) holding 908 KiB of data and gradients, within 2 % of the traced growth per batch of the leaking run: the rest is the Python objects themselves. Emptied before the workload is made, the registry also lists the 6 parameters (and the 11 batch Variables: 17 in all): their arrays and gradients are the 33.5 KiB more."""
    import gc

    from dezero_mini.memory import Workload, load_stage, record_training

    step = load_stage(1)
    gc.disable()

    def registry_bytes():
        variables = step.REGISTRY.variables
        nbytes = sum(v.data.nbytes + (v.grad.nbytes if v.grad is not None else 0) for v in variables)
        return len(variables), nbytes

    try:
        workload = Workload(step)
        step.REGISTRY.clear()
        workload.train_step(0)
        batch_count, batch_bytes = registry_bytes()
        step.REGISTRY.clear()

        step.REGISTRY.clear()
        workload = Workload(step)
        workload.train_step(0)
        all_count, all_bytes = registry_bytes()
        step.REGISTRY.clear()
        del workload

        growth = record_training(step, 20, rss=False).summary()["traced_bytes_per_batch"]
        step.REGISTRY.clear()
    finally:
        gc.enable()
        gc.collect()
    print(f"one batch: {batch_count} Variables, {batch_bytes / 1024:.1f} KiB; "
          f"traced growth per batch {growth / 1024:.1f} KiB")
    print(f"with the workload's own: {all_count} Variables, "
          f"{(all_bytes - batch_bytes) / 1024:.1f} KiB more (the six parameters)")
    assert batch_count == 11
    assert abs(batch_bytes / 1024 - 908) < 1
    assert abs(batch_bytes / growth - 1) < 0.02
    assert all_count == 17
    assert abs((all_bytes - batch_bytes) / 1024 - 33.5) < 0.1


def exercise_3():
    """Cutting each Function's `inputs` and `outputs` and each Variable's `creator`, breadth first from the loss, breaks every cycle, so reference counting frees the whole graph the moment the registry lets go. The count stays at 7 after every batch, the six parameters and the loss that our name still holds, with the collector off and never called."""
    import gc
    from collections import deque

    from dezero_mini.memory import Workload, count_live_objects, load_stage

    step = load_stage(1)

    def cut_graph(loss):
        queue = deque([loss])
        while queue:
            variable = queue.popleft()
            creator = variable.creator
            if creator is None:  # a parameter or an input: the walk stops here
                continue
            queue.extend(creator.inputs)
            creator.inputs, creator.outputs = [], []
            variable.creator = None

    gc.collect()
    gc.disable()
    try:
        workload = Workload(step)
        counts = []
        for i in range(20):
            workload.cleargrads()
            loss = workload.loss(i)
            loss.backward()
            workload.update()
            cut_graph(loss)
            step.REGISTRY.clear()
            counts.append(count_live_objects(step)["total"])
        print("live objects after each batch:", counts)
        assert counts == [7] * 20
    finally:
        gc.enable()


if __name__ == "__main__":
    import sys

    from catalog import run

    sys.exit(run(globals()))
