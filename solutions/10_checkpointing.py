"""Worked solutions of the exercises of lesson 10, "Keep some activations, recompute the rest".

Run one with ``python solutions/10_checkpointing.py N`` (all of them without
N); each function's body is what you would type into the lesson's cells.
"""


def exercise_1():
    """The peak of a 256-layer chain against the number of segments is a U. With few segments, backward holds one long segment's activations while it recomputes it; with many, the graph holds many segment inputs. Each layer keeps two activations and each segment one input, so the bottom is near sqrt(2 x 256), about 23 segments: 16 and 32 are on either side of it."""
    from dezero_mini.memory import DeepChain, load_stage, step_peak

    step = load_stage(10)
    counts = (2, 4, 8, 16, 32, 64, 128)
    peaks = {s: step_peak(DeepChain(step, depth=256, segments=s)) for s in counts}
    for s, peak in peaks.items():
        print(f"{s:3d} segments: peak {peak / 2**20:5.2f} MiB")
    best = min(peaks, key=peaks.get)
    print("the smallest peak:", best, "segments")
    assert best in (16, 32)
    assert peaks[best] < peaks[2] / 2 and peaks[best] < peaks[128] / 2


def exercise_2():
    """Every layer outside the last segment runs twice: once under `no_grad()` in the forward pass, once with the graph when backward reaches its segment. The last segment is never recomputed (its backward comes first), so one segment means no recomputation at all, and s equal segments recompute (s - 1)/s of the chain: the extra time tends to one forward pass as s grows."""
    from dezero_mini.memory import DeepChain, load_stage

    step = load_stage(10)
    original = step.tanh
    calls = []

    def counting_tanh(x):
        calls.append(1)
        return original(x)

    counts = {}
    step.tanh = counting_tanh
    try:
        for s in (1, 2, 4, 8):
            chain = DeepChain(step, depth=64, segments=s)
            calls.clear()
            chain.train_step(0)
            counts[s] = len(calls)
    finally:
        step.tanh = original
    print("tanh calls in one training step, by number of segments:", counts)
    for s, count in counts.items():
        assert count == 64 + 64 * (s - 1) // s, (s, count)


def exercise_3():
    """A checkpointed segment runs twice, so it must compute the same thing both times. Dropout drawn inside draws a new mask when backward recomputes the segment: the gradient then follows the second mask, not the one that made the output, and it is wrong. Drawn once outside and passed in as an input, the mask is the same in both runs, and the gradients equal the plain ones."""
    import numpy as np

    from dezero_mini.memory import load_stage

    step = load_stage(10)
    rng = np.random.RandomState(0)
    x_data = np.linspace(-1, 1, 50)

    def dropout_inside(h):
        mask = (rng.rand(*h.shape) < 0.5).astype(h.dtype)
        return step.tanh(h) * step.Variable(mask)

    def mask_as_input(h, mask):
        return step.tanh(h) * mask

    def gradient(function, checkpointed, *extra):
        x = step.Variable(x_data.copy())
        y = step.checkpoint(function, x, *extra) if checkpointed else function(x, *extra)
        step.sum(y).backward()
        return x.grad

    rng.seed(1)
    plain = gradient(dropout_inside, False)
    rng.seed(1)  # the same mask for the forward pass, a new one for the recomputation
    checkpointed = gradient(dropout_inside, True)
    print("mask drawn inside: equal gradients?", np.array_equal(plain, checkpointed))
    assert not np.array_equal(plain, checkpointed)

    mask = step.Variable((np.random.RandomState(2).rand(50) < 0.5).astype(float))
    plain = gradient(mask_as_input, False, mask)
    checkpointed = gradient(mask_as_input, True, mask)
    print("mask passed in:     equal gradients?", np.array_equal(plain, checkpointed))
    assert np.array_equal(plain, checkpointed)


if __name__ == "__main__":
    import sys

    from catalog import run

    sys.exit(run(globals()))
