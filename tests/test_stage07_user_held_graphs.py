"""Stage 07: the leaks that live in the training loop, and detach() / item().

The four loops of ``dezero_mini.memory.user_loops`` (the lesson runs the same
code): each leaking version keeps what its line reaches, batch after batch;
each fixed version is flat. Live objects are counted and tracemalloc bytes
traced with the cyclic collector disabled (the recorder's default).
"""
import gc

import numpy as np
import pytest

from conftest import load
from dezero_mini.memory import record_training, reference_graph
from dezero_mini.memory.user_loops import LOOPS, objects_per_forward, record_loop

STAGE = "step07_user_held_graphs"
BATCHES = 20
KIB = 1024

_records = {}


def recorded(name, fixed, stage=STAGE):
    key = (name, fixed, stage)
    if key not in _records:
        _records[key] = record_loop(name, load(stage), fixed=fixed, batches=BATCHES)
        gc.collect()
    return _records[key]


def objects_of_one_forward(stage=STAGE):
    return objects_per_forward(load(stage))


def one_activation_nbytes():
    loop = LOOPS["history"](load(STAGE), fixed=True)
    return loop.workload.activation_nbytes


# --- the leaking loops grow every batch ----------------------------------------------------
@pytest.mark.parametrize("name", ["total_loss", "history"])
def test_a_loop_that_never_runs_backward_keeps_one_whole_graph_per_batch(name):
    """Loops 1 and 3: backward never goes through the kept graphs, so stage
    06's freeing cannot help: every batch adds its whole forward graph."""
    record = recorded(name, fixed=False)
    growth = np.diff(record.live_objects)
    assert growth.min() >= objects_of_one_forward() > 15
    assert record.slope("traced_current") >= 6 * one_activation_nbytes()


def test_a_running_statistic_in_a_variable_keeps_every_input():
    """Loop 2: each update is a Sum and an Add that hold the batch's input
    (with the gradient backward left in it) and the previous sum."""
    record = recorded("running_sum", fixed=False)
    growth = np.diff(record.live_objects)
    assert growth.min() >= 4  # the input, its Sum, the Add, the new sum (and the Sum's output)
    assert record.slope("traced_current") >= 2 * one_activation_nbytes()  # x.data and x.grad


def test_a_cache_of_activations_keeps_one_per_batch():
    """Loop 4: backward has freed the graph behind each cached activation
    (stage 06), but the activation and its creator stay."""
    record = recorded("last_output", fixed=False)
    growth = np.diff(record.live_objects)
    assert growth.min() >= 2
    assert record.slope("traced_current") >= one_activation_nbytes()


def test_stage05_keeps_the_whole_graph_behind_a_cached_activation():
    """The same loop 4 on stage 05 (whose backward frees nothing) keeps more:
    stage 06 turned a graph per batch into an activation per batch."""
    on_05 = recorded("last_output", fixed=False, stage="step05_no_grad")
    on_07 = recorded("last_output", fixed=False)
    assert on_05.slope("live_objects") >= on_07.slope("live_objects") + 4
    assert on_05.slope("traced_current") >= on_07.slope("traced_current") + 3 * one_activation_nbytes()


# --- the fixed loops are flat ---------------------------------------------------------------
@pytest.mark.parametrize("name", list(LOOPS))
def test_the_fixed_loop_is_flat(name):
    record = recorded(name, fixed=True)
    assert np.all(record.live_objects == record.live_objects[0]), np.unique(record.live_objects)
    assert abs(record.slope("traced_current")) < KIB


def test_the_leak_of_total_loss_ends_with_the_epochs_backward():
    """Loop 1 keeps the graphs until total_loss.backward(): then they go."""
    loop = LOOPS["total_loss"](load(STAGE), epoch_batches=5)
    record = record_training(loop.module, 10, workload=loop.workload, step=loop.step, rss=False)
    assert record.live_objects[4] == record.live_objects[9] < record.live_objects[3]
    assert len(loop.epoch_losses) == 2


@pytest.mark.parametrize("name", list(LOOPS))
def test_the_reference_graph_names_who_keeps_the_graphs(name, gc_disabled):
    loop = LOOPS[name](load(STAGE), batch_size=4, in_features=3, hidden=3)
    for i in range(2):
        loop.step(i)
    graph = reference_graph(loop.roots())
    roots = [node for node in graph.nodes if node.kind == "name"]
    assert [node.title for node in roots] == list(loop.roots())
    from_root = [edge for edge in graph.edges if edge.src_id == roots[0].id]
    assert from_root and not graph.garbage
    assert sum(node.kind == "variable" for node in graph.nodes) >= 2


# --- detach() and item() --------------------------------------------------------------------
def test_detach_shares_the_array_and_has_no_graph():
    m = load(STAGE)
    x = m.Variable(np.array([1.0, 2.0]))
    y = m.exp(x)
    d = y.detach()
    assert d is not y and d.data is y.data and d.creator is None
    loss = m.sum(d * x)
    loss.backward()
    np.testing.assert_array_equal(x.grad, np.exp([1.0, 2.0]))  # nothing flowed through exp
    assert d.grad is not None and y.grad is None


def test_item_gives_a_python_number():
    m = load(STAGE)
    assert m.Variable(np.array(2.5)).item() == 2.5
    assert type(m.Variable(np.array([[3.0]])).item()) is float
    assert float(m.Variable(np.array([4.0]))) == 4.0
    assert type(m.Variable(np.array(3)).item()) is int
    with pytest.raises(ValueError, match=r"item: .* shape \(2,\)"):
        m.Variable(np.array([1.0, 2.0])).item()
