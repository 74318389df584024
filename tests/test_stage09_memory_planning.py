"""Stage 09: plan the memory of a static graph before allocating it.

The stage's contract (the eager bits, no block between unordered nodes, the
lower bound, half and a quarter of the naive total, allocate before running)
is defined once in ``dezero_mini.contracts.stage09`` and run by
``test_stage_memory.py``; the checker's wrong files are in
``test_checker.py``. Here: the same bits on every network of the lesson and
on every gradient case that the planner can lower, a training loop that
stays equal batch after batch, the parallel branches, where in-place
happens, random graphs (hypothesis), the instruments on plans that are wrong
on purpose, and the errors.
"""
import gc
import tracemalloc

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import load
from dezero_mini.memory.plans import (PLANNERS, ancestors, block_timeline, branches_network,
                                      chain_network, live_bytes, lower_bound, mlp_network,
                                      needed_bytes,
                                      naive_total, plan_table, residual_network,
                                      unordered_sharing, written_over)
from test_gradients import CASES

STAGE = "step09_memory_planning"


@pytest.fixture
def m():
    return load(STAGE)


def same_bits(planned, eager):
    return len(planned) == len(eager) and all(
        np.asarray(a).shape == np.asarray(b).shape and np.array_equal(a, b, equal_nan=True)
        for a, b in zip(planned, eager))


NETWORKS = {
    "mlp": lambda m: mlp_network(m),
    "mlp4": lambda m: mlp_network(m, hidden_layers=4),
    "chain100": lambda m: chain_network(m, depth=100),
    "branches": lambda m: branches_network(m),
    "residual": lambda m: residual_network(m, depth=4),
}


# --- the same bits as eager ------------------------------------------------------------------
@pytest.mark.parametrize("training", [True, False], ids=["training", "inference"])
@pytest.mark.parametrize("name", NETWORKS)
@pytest.mark.parametrize("label, kwargs", PLANNERS, ids=[label for label, _ in PLANNERS])
def test_every_planner_gives_the_eager_bits(m, name, training, label, kwargs):
    network = NETWORKS[name](m)
    graph = network.trace(m, training)
    plan = m.plan_memory(graph, **kwargs)
    assert same_bits(m.Executor(plan)(*network.feeds), network.eager(m, training))
    assert written_over(plan) == []
    assert lower_bound(graph) <= plan.total <= naive_total(graph)


def _lowerable(m, case):
    _, fn, shapes, positive = case
    rng = np.random.RandomState(0)
    arrays = [rng.rand(*s) + 0.5 if positive else rng.randn(*s) for s in shapes]
    weights = np.asarray(rng.randn(*np.shape(fn(m, *[m.Variable(a) for a in arrays]).data)))
    params = [m.Variable(a) for a in arrays]

    def loss(w):
        return m.sum(m.mul(fn(m, *params), w))

    try:
        graph = m.trace(loss, weights, wrt=params)
    except TypeError as error:
        assert "has no static form" in str(error)
        pytest.skip(str(error))
    return graph, loss, weights, params


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_planned_gradients_are_eager_bits_on_every_gradient_case(m, case):
    """The lowered backward of every Function that the planner knows, with
    broadcasting, constants and axes, gives eager backward's bits (and eager
    backward is checked against numerical gradients in test_gradients.py)."""
    graph, loss, weights, params = _lowerable(m, case)
    planned = m.Executor(m.plan_memory(graph))(weights)
    for p in params:
        p.cleargrad()
    result = loss(m.Variable(weights))
    result.backward()
    assert same_bits(planned, [result.data] + [p.grad for p in params])


def test_a_planned_training_loop_stays_equal_to_eager(m):
    """Parameters are bound by reference: SGD's in-place update is seen by the
    next planned run, and twenty batches later both loops hold the same bits."""
    eager, planned = (mlp_network(m, hidden_layers=3, seed=1) for _ in range(2))
    executor = m.Executor(m.plan_memory(planned.trace(m, True)))
    x, t = planned.feeds
    losses = []
    for _ in range(20):
        outputs = executor(x, t)
        losses.append(float(outputs[0]))
        for p, g in zip(planned.params, outputs[1:]):
            p.data -= 0.1 * g
        reference = eager.eager(m, True)
        for p in eager.params:
            p.data -= 0.1 * p.grad
        assert same_bits(outputs, reference)
    assert losses[-1] < losses[0]  # it learns


# --- parallel branches ---------------------------------------------------------------------------
def test_serial_sharing_ties_the_branches_and_colours_do_not(m):
    graph = branches_network(m).trace(m, False)
    serial = m.plan_memory(graph, parallel=False)
    pairs = unordered_sharing(serial)
    assert pairs, "the serial plan should share blocks between the two branches"
    names = {graph.nodes[n].name for pair in pairs for n in pair}
    assert {"tanh", "sigmoid"} & names  # one node of each branch
    assert unordered_sharing(m.plan_memory(graph)) == []
    # Blindness to parallelism saves memory: that is why it is tempting.
    assert serial.total < m.plan_memory(graph).total


def test_colours_are_paths(m):
    graph = chain_network(m, depth=5).trace(m, True)
    colour = m.colour_paths(graph)
    before = ancestors(graph)
    assert None not in colour
    for c in set(colour):
        nodes = [n for n, k in enumerate(colour) if k == c]
        for a, b in zip(nodes, nodes[1:]):  # one after another, each reads the one before
            assert before[b] >> a & 1
            assert graph.nodes[a].output in graph.nodes[b].inputs
    # The first colour is the longest path: the whole forward and backward spine.
    assert colour.count(0) == max(colour.count(c) for c in set(colour))


# --- in-place ---------------------------------------------------------------------------------
def test_in_place_only_where_the_kernel_allows_and_the_input_is_dead(m):
    for name in ("mlp4", "residual", "branches"):
        for training in (True, False):
            graph = NETWORKS[name](m).trace(m, training)
            plan = m.plan_memory(graph)
            readers = graph.readers()
            seen = []
            for n, node in enumerate(graph.nodes):
                for i, b in enumerate(node.inputs):
                    if plan.storage_of[b] is not None and \
                            plan.storage_of[b] == plan.storage_of[node.output]:
                        assert i in node.inplace, (name, node.name)
                        assert max(readers[b]) == n, (name, node.name)  # its last reader
                        seen.append(n)
            assert sorted(set(seen)) == sorted(plan.inplace_nodes)
            assert all(graph.nodes[n].name != "matmul" for n in plan.inplace_nodes)


def test_in_place_alone_on_a_chain_keeps_one_block_per_matmul(m):
    graph = chain_network(m, depth=10).trace(m, False)
    plan = m.plan_memory(graph, share=False)
    activation = 256 * 32 * 8
    # matmul cannot write over its input; add and tanh write over the matmul's result
    assert plan.total == pytest.approx(10 * activation, abs=activation)
    # add and tanh in each layer; the loss's sub, square and its mean (over the sum)
    assert len(plan.inplace_nodes) == 2 * 10 + 3


def test_the_residual_value_is_not_overwritten_at_its_first_reader(m):
    graph = residual_network(m, depth=2).trace(m, False)
    plan = m.plan_memory(graph)
    for n in plan.inplace_nodes:
        node = graph.nodes[n]
        overwritten = [b for b in node.inputs if plan.storage_of[b] == plan.storage_of[node.output]]
        assert all(max(graph.readers()[b]) == n for b in overwritten)


# --- random graphs --------------------------------------------------------------------------
OPS = ("add", "sub", "mul", "tanh", "sigmoid", "exp", "matmul", "bias")


@st.composite
def programs(draw):
    steps = draw(st.lists(st.tuples(st.sampled_from(OPS), st.integers(0, 10**6),
                                    st.integers(0, 10**6)), min_size=1, max_size=14))
    return steps, draw(st.integers(0, 2**16))


def run_program(m, steps, x0, x1, W, b):
    values = [x0, x1]
    for op, i, j in steps:
        a, c = values[i % len(values)], values[j % len(values)]
        if op in ("add", "sub", "mul"):
            values.append(getattr(m, op)(a, c))
        elif op == "matmul":
            values.append(m.matmul(a, W))
        elif op == "bias":
            values.append(m.add(a, b))
        elif op == "exp":
            values.append(m.exp(m.tanh(a)))  # bounded: no overflow
        else:
            values.append(getattr(m, op)(a))
    return m.sum(values[-1])


@settings(max_examples=60, deadline=None)
@given(programs())
def test_random_graphs(steps_and_seed):
    m = load(STAGE)
    steps, seed = steps_and_seed
    rng = np.random.RandomState(seed)
    feeds = (rng.randn(5, 3), rng.randn(5, 3))
    W, b = m.Variable(rng.randn(3, 3) / 2), m.Variable(rng.randn(3))

    def fn(x0, x1):
        return run_program(m, steps, x0, x1, W, b)

    for training in (True, False):
        try:
            graph = m.trace(fn, *feeds, wrt=(W, b) if training else ())
        except ValueError:  # W or b takes no part: nothing to differentiate
            continue
        W.cleargrad(), b.cleargrad()
        result = fn(*map(m.Variable, feeds))
        eager = [result.data]
        if training:
            result.backward()
            eager += [W.grad, b.grad]
        low, naive = lower_bound(graph), naive_total(graph)
        for label, kwargs in PLANNERS:
            plan = m.plan_memory(graph, **kwargs)
            assert low <= plan.total <= naive, label
            assert written_over(plan) == [], label
            assert same_bits(m.Executor(plan)(*feeds), eager), label
            if kwargs.get("parallel", True):
                assert unordered_sharing(plan) == [], label


# --- the instruments catch wrong plans ----------------------------------------------------------
def test_one_block_for_everything_is_caught(m):
    graph = branches_network(m).trace(m, False)
    plan = m.plan_memory(graph)
    plan.storage_of = [None if s is None else 0 for s in plan.storage_of]
    plan.sizes = [max(plan.sizes)]
    assert plan.total < lower_bound(graph)
    assert unordered_sharing(plan) and written_over(plan)


def test_lower_bound_and_timelines_by_hand(m):
    """x -> tanh -> tanh -> sum: after each node one buffer is alive, except
    the sum's 0-d result; while the sum runs, it reads the second tanh's
    (5, 3) result and writes its own 8 bytes, so the bound is 120 + 8."""
    graph = m.trace(lambda x: m.sum(m.tanh(m.tanh(x))), np.ones((5, 3)))
    assert [node.name for node in graph.nodes] == ["tanh", "tanh", "sum"]
    assert list(live_bytes(graph)) == [120, 120, 8]
    assert list(needed_bytes(graph)) == [120, 120, 128]
    assert lower_bound(graph) == 128 and naive_total(graph) == 248
    plan = m.plan_memory(graph)
    assert plan.total == 128 and plan.inplace_nodes == [1]
    assert list(block_timeline(plan)) == [120, 120, 128]


ACTIVATION = 256 * 32 * 8  # one activation of the lesson's networks: 64 KiB

#: What a node needs while it runs: its inputs and its output at once, unless it
#: may write over an input that dies there. Each bound was one activation (or 120
#: bytes) when only the buffers live after each node were counted.
NEEDED_AT_ONCE = [
    # a matmul reads its input while it writes its result: two activations
    ("mlp inference", lambda m: mlp_network(m).trace(m, False), 2 * ACTIVATION),
    ("mlp4 inference", lambda m: mlp_network(m, hidden_layers=4).trace(m, False), 2 * ACTIVATION),
    ("chain inference", lambda m: chain_network(m, depth=10).trace(m, False), 2 * ACTIVATION),
    # tanh writes over its dying input (counted once); the matmul after it needs two
    ("matmul after tanh", lambda m: m.trace(
        lambda x: m.sum(m.matmul(m.tanh(x), m.Variable(np.ones((3, 3))))), np.ones((5, 3))), 240),
    # a sum reads a (5, 3) array while it writes 8 bytes
    ("sum of tanh", lambda m: m.trace(lambda x: m.sum(m.tanh(x)), np.ones((5, 3))), 128),
]


@pytest.mark.parametrize("make, bound", [case[1:] for case in NEEDED_AT_ONCE],
                         ids=[case[0] for case in NEEDED_AT_ONCE])
def test_the_lower_bound_counts_a_node_s_inputs_and_output_together(m, make, bound):
    graph = make(m)
    assert lower_bound(graph) == bound
    assert lower_bound(graph) <= m.plan_memory(graph).total
    assert lower_bound(graph) <= m.plan_memory(graph, parallel=False).total


def test_the_lesson_table_meets_the_published_ratios_where_the_graph_allows(m):
    """MXNet's paper reports about 2x less memory for training and about 4x
    for prediction. The standard MLP's inference cannot reach 4x: a matmul
    needs its input and its output at once, two activations of the six."""
    table = plan_table(m, [mlp_network(m), mlp_network(m, hidden_layers=4)])
    standard = table["MLP, 2 hidden layers", "inference"]
    assert standard["naive"] / standard["both"] < 4
    assert standard["both"] == 2 * 256 * 32 * 8  # two activations
    deep = table["MLP, 4 hidden layers", "inference"]
    assert deep["naive"] / deep["both"] >= 4
    for kind in ("training", "inference"):
        for name in ("MLP, 2 hidden layers", "MLP, 4 hidden layers"):
            row = table[name, kind]
            assert row["lower bound"] <= row["both, serial"] <= row["both"] <= row["naive"]
        assert table["MLP, 2 hidden layers", "training"]["naive"] / \
            table["MLP, 2 hidden layers", "training"]["both"] >= 2


def test_the_executor_allocates_its_blocks_once(m):
    network = chain_network(m, depth=20)
    plan = m.plan_memory(network.trace(m, False))
    gc.collect()
    tracemalloc.start()
    try:
        executor = m.Executor(plan)
        made = tracemalloc.get_traced_memory()[0]
        for _ in range(3):
            executor(*network.feeds)
        held = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    assert plan.total <= made <= plan.total + 16 * 1024
    assert held - made < 4 * 1024


# --- errors -------------------------------------------------------------------------------------
def test_a_function_without_a_static_form_is_named(m):
    with pytest.raises(TypeError, match=r"trace: Div has no static form; the planner knows Add"):
        m.trace(lambda x: m.div(x, x), np.ones(3))


def test_a_parameter_outside_the_result_is_an_error(m):
    used, unused = m.Variable(np.ones(3)), m.Variable(np.ones(3))
    with pytest.raises(ValueError, match=r"trace: wrt\[1\] does not take part"):
        m.trace(lambda x: m.sum(m.mul(x, used)), np.ones(3), wrt=(used, unused))


def test_a_feed_of_another_shape_is_an_error(m):
    executor = m.Executor(m.plan_memory(m.trace(lambda x: m.tanh(x), np.ones((2, 3)))))
    with pytest.raises(ValueError, match=r"Executor: an input of shape \(3, 2\)"):
        executor(np.ones((3, 2)))


@pytest.mark.parametrize("feeds, error, message", [
    ((np.ones((2, 3)),), TypeError, r"Executor: 1 arrays given, the graph takes 2; input 2 is "
                                    r"missing \(traced as an array of shape \(2, 1\) and dtype "
                                    r"float64\)"),
    ((np.ones((2, 3)), np.ones((2, 1)), np.ones(3)), TypeError,
     r"Executor: 3 arrays given, the graph takes 2; input 3 and after are not inputs"),
    (([[1.0] * 3] * 2, np.ones((2, 1))), TypeError,
     r"Executor: input 1 must be a numpy array or a Variable, got list"),
    ((np.ones((2, 3)), np.ones((2, 1), np.float32)), ValueError,
     r"Executor: an input of shape \(2, 1\) and dtype float32; the plan was made for \(2, 1\) "
     r"float64"),
])
def test_a_missing_unknown_or_wrong_feed_is_named(m, feeds, error, message):
    """A feed too many is refused (zip would drop it silently); a missing one
    is named with the shape it was traced with (a kernel would fail on None).
    The checks are dezero_mini.planning.check_feeds, the package's Executor's."""
    executor = m.Executor(m.plan_memory(m.trace(lambda x, t: m.add(m.tanh(x), t),
                                                np.ones((2, 3)), np.ones((2, 1)))))
    with pytest.raises(error, match=message):
        executor(*feeds)


def test_a_variable_of_the_stage_is_fed_by_its_array(m):
    x, t = np.linspace(-1, 1, 6).reshape(2, 3), np.ones((2, 1))
    executor = m.Executor(m.plan_memory(m.trace(lambda x, t: m.add(m.tanh(x), t), x, t)))
    expected = np.array(executor(x, t)[0])
    assert same_bits(executor(m.Variable(x), t), [expected])


def test_tracing_leaves_no_tracer_behind(m):
    """trace wraps Function.__call__ while fn runs (stage 08's framework stays as
    it is); after a trace that fails, the eager call is stage 08's again."""
    call = m.Function.__call__
    with pytest.raises(TypeError):
        m.trace(lambda x: m.div(x, x), np.ones(3))
    assert m.Function.__call__ is call
    assert m.Config.enable_backprop is True
