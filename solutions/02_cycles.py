"""Worked solutions of the exercises of lesson 02, "Cycles".

Run one with ``python solutions/02_cycles.py N`` (all of them without N); each
function's body is what you would type into the lesson's cells.
"""


def exercise_1():
    """A first threshold of 100 instead of the default makes the collector run several times as often: a few batches between collections instead of dozens, so fewer dead graphs wait at any moment and the teeth of the sawtooth, and the highest traced peak, are lower. The price is more collections, each a scan of the young objects: the thresholds trade memory for time."""
    import gc

    from dezero_mini.memory import load_stage, plot_training, record_training
    from dezero_mini.memory.gcstats import batches_between_collections

    step = load_stage(2)
    # count_objects=False: only the collector's figures are needed, and counting is slow.
    cycles_gc_on = record_training(step, 200, gc_enabled=True, rss=False, count_objects=False)
    old = gc.get_threshold()
    gc.set_threshold(100, 10, 10)
    try:
        frequent = record_training(step, 200, gc_enabled=True, rss=False, count_objects=False,
                                   label="stage 02, gc on, threshold (100, 10, 10)")
    finally:
        gc.set_threshold(*old)
    plot_training([cycles_gc_on, frequent], signals=("traced_current", "traced_peak"), title="Stage 02 with the collector on: two thresholds")

    default, small = cycles_gc_on.summary(), frequent.summary()
    spacing_default = batches_between_collections(cycles_gc_on)
    spacing_small = batches_between_collections(frequent)
    print(f"thresholds {old}: a collection every {spacing_default:.0f} batches, "
          f"{default['gc_collections']} collections, highest peak {default['traced_peak_max'] / 2**20:.1f} MiB")
    print(f"thresholds (100, 10, 10): every {spacing_small:.0f} batches, "
          f"{small['gc_collections']} collections, highest peak {small['traced_peak_max'] / 2**20:.1f} MiB")
    assert spacing_small * 3 <= spacing_default
    assert small["gc_collections"] > 3 * default["gc_collections"]
    assert small["traced_peak_max"] < 0.8 * default["traced_peak_max"]
    assert gc.get_threshold() == old


def exercise_2():
    """The callback sees every collection: the `gc.collect()` that `record_training` makes before the first batch and after the last (generation 2), and between them the automatic ones. Generation 0 does almost all the work; a collection of generation 1 comes only when generation 0 has been collected more than `gc.get_threshold()[1]` times, so exactly threshold + 1 (11) young collections come before the first one of generation 1."""
    import gc

    from dezero_mini.memory import load_stage, record_training
    from dezero_mini.memory.gcstats import batches_between_collections

    step = load_stage(2)
    measured = record_training(step, 200, gc_enabled=True, rss=False, count_objects=False)
    spacing = batches_between_collections(measured)
    generations = []

    def cb(phase, info):
        if phase == "stop":
            generations.append(info["generation"])

    # (threshold + 2) * spacing would end just before the first collection of
    # generation 1: one spacing more makes sure that it is in.
    batches = int((gc.get_threshold()[1] + 3) * spacing)
    gc.callbacks.append(cb)
    try:
        record_training(step, batches, gc_enabled=True, rss=False, count_objects=False)
    finally:
        gc.callbacks.remove(cb)
    print(f"{batches} batches; the generations collected, in order:", generations)
    first_gen1 = generations.index(1)
    print(f"{first_gen1 - 1} collections of generation 0 before the first of generation 1")
    assert generations[0] == 2 and generations[-1] == 2
    assert 1 in generations[1:-1]
    assert generations[1:first_gen1] == [0] * (gc.get_threshold()[1] + 1)


def exercise_3():
    """`h` (the result of `Add`) has a referrer for each thing that holds it: the Sigmoid's `inputs` list, the Add's `outputs` list, and whatever holds your name `h` (in the notebook, its namespace dict). The Add's outputs close the cycle: `h` holds the Add as its `creator` and the Add holds `h` back, so `h` survives `del y` until the collector runs."""
    import gc

    import numpy as np

    from dezero_mini.memory import load_stage

    step = load_stage(2)
    gc.disable()
    try:
        rng = np.random.RandomState(1)
        x = step.Variable(rng.randn(4, 3), name="x")
        W = step.Variable(rng.randn(3, 2), name="W")
        b = step.Variable(np.zeros(2), name="b")
        y = step.sigmoid(x @ W + b)
        sig = y.creator
        h = sig.inputs[0]
        del y
        refs = gc.get_referrers(h)
        print("referrers of h:", [type(r).__name__ for r in refs])
        by_sigmoid = any(r is sig.inputs for r in refs)
        by_add = any(r is h.creator.outputs for r in refs)
        print("the Sigmoid's inputs:", by_sigmoid, "; the Add's outputs:", by_add)
        assert by_sigmoid and by_add
        # The cycle: h -> creator (Add) -> outputs -> h.
        assert any(out is h for out in h.creator.outputs)
        del refs  # a reference too
    finally:
        gc.enable()


def exercise_4():
    """With a first threshold of 50,000 the collector runs once for every 50,000 container objects allocated instead of once for every few hundred: the same 20,000-op forward and backward pass sees a handful of young collections instead of a hundred or more, no full one, and the collector's share of the time falls to a fraction of what it was. The graph has no cycle since stage 03, so those collections never found anything to free; a higher threshold only costs memory where there are cycles to wait for."""
    import gc

    import numpy as np

    import dezero_mini as dz
    import dezero_mini.functions as F
    from dezero_mini.memory import time_runs

    n_ops = 20_000
    rng = np.random.RandomState(0)
    a, b = dz.Variable(rng.rand(10)), dz.Variable(rng.rand(10))
    x0 = rng.rand(10)

    def forward_backward():
        y = dz.Variable(x0)
        for _ in range(n_ops // 4):  # four operations a round, as in the lesson
            y = F.tanh(y * a + b) * 0.5
        y.backward()

    forward_backward()
    (default,) = time_runs([(forward_backward, "on")])
    old = gc.get_threshold()
    gc.set_threshold(50_000, old[1], old[2])
    try:
        (raised,) = time_runs([(forward_backward, "on")])
    finally:
        gc.set_threshold(*old)
    for name, t in (("default thresholds", default), ("first threshold 50,000", raised)):
        print(f"{name:24}: {t.collections:4d} collections ({t.full_collections} full), "
              f"{t.collector_share:5.1%} of the time in the collector")
    assert raised.collections < default.collections / 5
    assert raised.full_collections == 0
    assert raised.collector_share < default.collector_share


if __name__ == "__main__":
    import sys

    from catalog import run

    sys.exit(run(globals()))
