"""Worked solutions of the exercises of lesson 05, "No graph for inference".

Run one with ``python solutions/05_no_grad.py N`` (all of them without N);
each function's body is what you would type into the lesson's cells.
"""


def exercise_1():
    """Evaluation under `no_grad()` gives exactly the same losses (it changes no parameter, and the arithmetic is the same) with a lower traced peak: the graph of a batch would hold every activation until the loss is read, while without it each activation is freed as soon as the next operation has used it. On the standard workload that is about three hidden activations of 64 KiB (0.51 against 0.32 MiB); the rest is the batch's own data."""
    import gc
    import tracemalloc

    import numpy as np

    from dezero_mini.memory import Workload, load_stage

    step = load_stage(5)
    held_out = range(1000, 1010)

    def evaluate(workload, no_grad):
        before = tracemalloc.get_traced_memory()[0]
        tracemalloc.reset_peak()
        if no_grad:
            with step.no_grad():
                losses = [float(workload.loss(i).data) for i in held_out]
        else:
            losses = [float(workload.loss(i).data) for i in held_out]
        return losses, tracemalloc.get_traced_memory()[1] - before

    gc.disable()
    tracemalloc.start()
    try:
        workload = Workload(step)
        peaks_with, peaks_without = [], []
        for i in range(100):
            workload.train_step(i)
            if (i + 1) % 20 == 0:
                losses_with, peak_with = evaluate(workload, no_grad=False)
                losses_without, peak_without = evaluate(workload, no_grad=True)
                assert losses_with == losses_without
                peaks_with.append(peak_with)
                peaks_without.append(peak_without)
                print(f"after {i + 1:3d} batches: evaluation loss {np.mean(losses_with):.4f}; "
                      f"peak {peak_with / 2**20:.2f} MiB with the graph, "
                      f"{peak_without / 2**20:.2f} MiB under no_grad()")
    finally:
        tracemalloc.stop()
        gc.enable()
    saved = (np.mean(peaks_with) - np.mean(peaks_without)) / (256 * 32 * 8)
    print(f"no_grad() saves {saved:.1f} hidden activations of 64 KiB")
    assert 2.5 < saved < 3.5
    assert abs(np.mean(peaks_with) / 2**20 - 0.51) < 0.03
    assert abs(np.mean(peaks_without) / 2**20 - 0.32) < 0.03


def exercise_2():
    """Keeping only the output's array (`out = y.data`) and deleting `y` frees the graph: about one activation (512 KiB, the output) is still held after the pass. But the peak is still about 25 activations, because the graph existed, whole, until the end of the pass. Letting go afterwards shortens how long memory is held; only `no_grad()` lowers how much is needed at once."""
    import gc
    import tracemalloc

    import numpy as np

    from dezero_mini.memory import load_stage

    step = load_stage(5)
    depth, width, batch = 8, 256, 256
    rng = np.random.RandomState(0)
    layers = [(step.Variable(rng.randn(width, width) / np.sqrt(width)), step.Variable(np.zeros(width)))
              for _ in range(depth)]
    x = step.Variable(rng.randn(batch, width))
    activation = batch * width * 8
    gc.disable()
    tracemalloc.start()
    try:
        baseline = tracemalloc.get_traced_memory()[0]
        tracemalloc.reset_peak()
        y = x
        for W, b in layers:
            y = step.sigmoid(step.add(step.matmul(y, W), b))
        out = y.data
        del y
        current, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
        gc.enable()
    held, peak = (current - baseline) / activation, (peak - baseline) / activation
    print(f"held after del y: {held:.2f} activations ({out.nbytes // 1024} KiB is the output); "
          f"peak {peak:.1f} activations")
    assert 0.9 < held < 1.2
    assert 24 < peak < 26


def exercise_3():
    """Without `try`/`finally`, the code after `yield` never runs when the block raises, so `Config.enable_backprop` stays False after the exception. Nothing fails afterwards: training builds no graph, `backward()` of a loss without a creator reaches no parameter, no parameter gets a gradient, and the loss never falls. A context manager that changes global state must restore it in `finally:`, as `using_config` does."""
    import contextlib

    import numpy as np

    from dezero_mini.memory import Workload, load_stage

    step = load_stage(5)

    @contextlib.contextmanager
    def bad_no_grad():
        old = step.Config.enable_backprop
        step.Config.enable_backprop = False
        yield
        step.Config.enable_backprop = old  # skipped when the block raises

    try:
        with bad_no_grad():
            raise RuntimeError("evaluation failed")
    except RuntimeError:
        pass
    try:
        print("after the exception, enable_backprop is", step.Config.enable_backprop)
        assert step.Config.enable_backprop is False
        workload = Workload(step)
        losses = [workload.train_step(i % 2) for i in range(10)]  # two batches, seen five times each
        grads = [p.grad for p in workload.parameters]
        print("gradients:", grads)
        print("losses:", np.round(losses, 4))
        assert all(g is None for g in grads)
        assert losses[::2] == [losses[0]] * 5  # batch 0 gives the same loss every time: no learning
    finally:
        step.Config.enable_backprop = True


if __name__ == "__main__":
    import sys

    from catalog import run

    sys.exit(run(globals()))
