"""Worked solutions of the exercises of lesson 09, "Plan the memory before allocating it".

Run one with ``python solutions/09_memory_planning.py N`` (all of them without
N); each function's body is what you would type into the lesson's cells.
"""


def exercise_1():
    """Inference needs only the activations around the current layer, so its plan does not grow with depth: two activations, whatever the number of layers. Training keeps, for backward, what each layer's backward reads, so its plan grows by about the same amount per layer, and four times the depth costs about four times the memory."""
    from dezero_mini.memory import load_stage
    from dezero_mini.memory.plans import chain_network

    step = load_stage(9)
    activation = 256 * 32 * 8
    totals = {}
    for depth in (10, 20, 40):
        network = chain_network(step, depth=depth)
        totals[depth] = {kind: step.plan_memory(network.trace(step, kind == "training")).total
                         for kind in ("inference", "training")}
        print(f"depth {depth:2d}: inference {totals[depth]['inference'] / 1024:5.0f} KiB, "
              f"training {totals[depth]['training'] / 1024:6.0f} KiB")
    assert all(t["inference"] == 2 * activation for t in totals.values())
    growth = totals[40]["training"] / totals[10]["training"]
    print(f"training at depth 40 / depth 10: {growth:.2f}")
    assert 3.5 <= growth <= 4.5


def exercise_2():
    """The serial planner hands a dead buffer's block to whichever node comes next, on either branch: it needs less memory, but it ties nodes of the two branches together, so they could no longer run at the same time. The coloured planner keeps each block on one path and pays for it in memory."""
    from dezero_mini.memory import load_stage
    from dezero_mini.memory.plans import branches_network, unordered_sharing

    step = load_stage(9)
    graph = branches_network(step).trace(step, True)
    serial = step.plan_memory(graph, parallel=False)
    safe = step.plan_memory(graph)
    pairs = unordered_sharing(serial)
    print(f"serial: {serial.total / 1024:.0f} KiB, {len(pairs)} pairs of unordered nodes on "
          f"one block; coloured: {safe.total / 1024:.0f} KiB, "
          f"{len(unordered_sharing(safe))} pairs")
    assert serial.total < safe.total
    assert pairs and not unordered_sharing(safe)


def exercise_3():
    """A Function joins the planner with a rule: a forward that writes its result into the array it is given, and a backward made of such nodes. Because the kernel does the same numpy operation as Neg's forward and backward, the planned results are the same bits, and since negation is element-wise, the planner may run it in place."""
    import numpy as np

    from dezero_mini.memory import load_stage

    step = load_stage(9)
    try:
        step.trace(lambda x: step.sum(step.neg(x)), np.ones(3))
    except TypeError as error:
        print("before:", error)

    def forward(g, f, xs, shape):
        return g.op("neg", step.elementwise(np.negative), xs, shape, inplace=(0,)), None

    def backward(g, f, xs, y, saved, gy):
        return [g.op("neg_grad", step.elementwise(np.negative), [gy], g.shape(gy), inplace=(0,))]

    step.LOWERING[step.Neg] = (forward, backward)
    try:
        rng = np.random.RandomState(0)
        x, w = rng.randn(4, 3), step.Variable(rng.randn(4, 3))

        def fn(x):
            return step.sum(step.mul(step.neg(step.tanh(x)), w))

        graph = step.trace(fn, x, wrt=(w,))
        plan = step.plan_memory(graph)
        loss, w_grad = step.Executor(plan)(x)
        w.cleargrad()
        eager = fn(step.Variable(x))
        eager.backward()
        neg = [n for n, node in enumerate(graph.nodes) if node.name == "neg"]
        print(f"planned loss {float(loss):.6f}, eager {float(eager.data):.6f}; the neg node "
              f"{neg} runs in place: {set(neg) <= set(plan.inplace_nodes)}")
        assert np.array_equal(loss, eager.data) and np.array_equal(w_grad, w.grad)
        assert neg and set(neg) <= set(plan.inplace_nodes)
    finally:
        del step.LOWERING[step.Neg]


if __name__ == "__main__":
    import sys

    from catalog import run

    sys.exit(run(globals()))
