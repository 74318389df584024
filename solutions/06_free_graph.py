"""Worked solutions of the exercises of lesson 06, "Freeing the graph during
backward".

Run one with ``python solutions/06_free_graph.py N`` (all of them without N);
each function's body is what you would type into the lesson's cells.
"""


def exercise_1():
    """After `backward()`, every Function of the graph has let go of its inputs (`loss.creator.inputs` is None), yet `x` keeps its gradient, `exp(1) * 2` in every element: the product rule, `d(e^x x)/dx = e^x x + e^x` at `x = 1`. Freeing the graph takes nothing that training reads: the leaves' gradients are written before their Functions let go."""
    import numpy as np

    from dezero_mini.memory import load_stage

    step = load_stage(6)
    x = step.Variable(np.ones(3))
    loss = step.sum(step.exp(x) * x)
    loss.backward()
    print("loss.creator.inputs:", loss.creator.inputs)
    print("x.grad:", x.grad)
    assert loss.creator.inputs is None
    assert np.allclose(x.grad, 2 * np.e)


def exercise_2():
    """Two losses that share `h` share its creator, the Exp: `a.backward()` frees it, so `b.backward()` raises a RuntimeError that names `Exp` and `retain_graph=True`. Either keep the graph for the first backward (`a.backward(retain_graph=True)`) or, better, run one backward of `a + b`, which visits the shared part once; both give `x.grad == 5 * e`."""
    import numpy as np

    from dezero_mini.memory import load_stage

    step = load_stage(6)
    x = step.Variable(np.ones(3))
    h = step.exp(x)
    a, b = step.sum(h * 2.0), step.sum(h * 3.0)
    a.backward()
    try:
        b.backward()
    except RuntimeError as error:
        message = str(error)
    else:
        raise AssertionError("the second backward through a freed graph did not raise")
    print("b.backward():", message)
    assert "Exp" in message

    ways = {}
    for way in ("retain_graph", "one backward"):
        x = step.Variable(np.ones(3))
        h = step.exp(x)
        a, b = step.sum(h * 2.0), step.sum(h * 3.0)
        if way == "retain_graph":
            a.backward(retain_graph=True)
            b.backward()
        else:
            (a + b).backward()
        ways[way] = x.grad
        print(f"{way}: x.grad = {x.grad}")
        assert np.allclose(x.grad, 5 * np.exp(1))
    assert np.allclose(ways["retain_graph"], ways["one backward"])


def exercise_3():
    """In stage 06, memory is highest at one of the first samples of backward (a Sigmoid): the whole forward graph is still there and the first gradients arrive, and from then on each Function frees what it saved. Stage 05 frees nothing during backward, so its highest sample is the last one. The peak of a training step is set by what forward saves, which is what stage 08 reduces."""
    import numpy as np

    from dezero_mini.memory import load_stage, record_step_timeline

    for stage in (6, 5):
        timeline = record_step_timeline(load_stage(stage), count_objects=False)
        highest = int(np.argmax(timeline.traced))
        first_backward = timeline.phases.index("backward")
        event = timeline.events[highest]
        print(f"stage {stage:02d}: highest sample {highest} ({event.phase}, {event.op}); "
              f"backward starts at {first_backward}, {len(timeline.events)} samples in all")
        if stage == 6:
            assert event.phase == "backward" and event.op == "Sigmoid"
            assert first_backward <= highest <= first_backward + 3
        else:
            assert highest == len(timeline.events) - 1


def exercise_4():
    """Stage 05 does not leak between batches (weak outputs free each graph when the loss goes), so with or without the write-up's cut the live objects are the same flat line. The highest peak within a batch is about the same too: the cut runs after backward, when the peak has passed, so it cannot lower it. Freeing during backward (stage 06) is what lowers what backward holds."""
    import numpy as np

    from dezero_mini.memory import Workload, load_stage, record_training
    from dezero_mini.memory.graph_cut import writeup_step

    keeps_graph = load_stage(5)
    # The run without the cut first: while `workload` exists, its six parameters are live too.
    without = record_training(keeps_graph, 20, rss=False, label="stage 05")
    workload = Workload(keeps_graph)
    with_cut = record_training(keeps_graph, 20, workload=workload, rss=False,
                               step=writeup_step(workload, cut=True), label="stage 05 + cut")
    for record in (with_cut, without):
        print(record.report())
    difference = abs(with_cut.traced_peak.max() - without.traced_peak.max()) / 1024
    print(f"highest peaks differ by {difference:.1f} KiB")
    for record in (with_cut, without):
        assert np.all(record.live_objects == record.live_objects[0])
    assert np.array_equal(with_cut.live_objects, without.live_objects)
    assert difference < 16  # a few KiB: far less than one activation (64 KiB)


if __name__ == "__main__":
    import sys

    from catalog import run

    sys.exit(run(globals()))
