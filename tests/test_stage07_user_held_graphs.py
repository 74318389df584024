"""Stage 07: the leaks that live in the training loop, and detach() / item().

The four loops of ``dezero_mini.memory.user_loops`` (the lesson runs the same
code), on stage 07 and on ``dezero_mini``: each leaking version keeps what
its line reaches, batch after batch; each fixed version is flat. Live
objects are counted and tracemalloc bytes traced with the cyclic collector
disabled (the recorder's default).

The framework's contract of the stage, ``detach()`` and ``item()`` as in
PyTorch, is defined once in ``dezero_mini.contracts.stage07`` and run on
stage 07 and ``dezero_mini`` by ``test_stage_memory.py`` (with stage 06's,
which hold here too); below, that stage 06 fails it, and what ``dezero_mini``
adds to it.
"""
import gc

import numpy as np
import pytest

import dezero_mini
from conftest import keeps_only_what_backward_reads, load, stages_that_change
from dezero_mini.contracts import get_stage
from dezero_mini.memory import find_leaks, record_training, reference_graph
from dezero_mini.memory.user_loops import LOOPS, objects_per_forward, record_loop

# The records, collections and the leak finder's gc.get_referrers walks visit what
# each test made, not the whole test process (conftest.made_before_frozen).
pytestmark = pytest.mark.usefixtures("made_before_frozen")

STAGE = "step07_user_held_graphs"
# Stage 07, where the loops are taught; 08, whose graph is made of Functions that keep
# only what backward reads (other counts); and dezero_mini, the framework learners use.
# Not stages 09 and 10: their step files only add the planner and checkpoint() to
# stage 08's, so the loops would run stage 08's code again (stages_that_change checks
# that from the step files).
LOOP_STAGES = stages_that_change(7)
# The tests that read a stage's records (``recorded``, made once per process) run in
# one test process under `pytest -n`, so that none is made twice.
RECORDED_STAGES = [pytest.param(stage, id=stage, marks=pytest.mark.xdist_group(f"loops-{stage}"))
                   for stage in LOOP_STAGES]
BATCHES = 20
KIB = 1024

_records = {}


def recorded(name, fixed, stage=STAGE):
    key = (name, fixed, stage)
    if key not in _records:
        _records[key] = record_loop(name, load(stage), fixed=fixed, batches=BATCHES)
        gc.collect()
    return _records[key]


def before_stage08(stage):
    """Whether the stage's Functions still keep their input Variables (stage 08
    keeps only what backward reads, and links the graph by Functions)."""
    return not keeps_only_what_backward_reads(load(stage))


def objects_of_one_forward(stage=STAGE):
    return objects_per_forward(load(stage))


def one_activation_nbytes(stage=STAGE):
    loop = LOOPS["history"](load(stage), fixed=True)
    return loop.workload.activation_nbytes


# --- the leaking loops grow every batch ----------------------------------------------------
@pytest.mark.parametrize("stage", RECORDED_STAGES)
@pytest.mark.parametrize("name", ["total_loss", "history"])
def test_a_loop_that_never_runs_backward_keeps_one_whole_graph_per_batch(name, stage):
    """Loops 1 and 3: backward never goes through the kept graphs, so stage
    06's freeing cannot help: every batch adds its whole forward graph."""
    record = recorded(name, fixed=False, stage=stage)
    growth = np.diff(record.live_objects)
    # From stage 08 on the graph holds Functions, not the Variables between them.
    assert growth.min() >= objects_of_one_forward(stage) > (15 if before_stage08(stage) else 10)
    # the activations kept: six arrays, or three saved for backward from stage 08 on
    kept = 6 if before_stage08(stage) else 3
    assert record.slope("traced_current") >= kept * one_activation_nbytes(stage)


@pytest.mark.parametrize("stage", RECORDED_STAGES)
def test_a_running_statistic_in_a_variable_keeps_every_input(stage):
    """Loop 2: each update is a Sum and an Add that hold the batch's input
    (with the gradient backward left in it) and the previous sum."""
    record = recorded("running_sum", fixed=False, stage=stage)
    growth = np.diff(record.live_objects)
    # The input, its Sum, the Add, the new sum (and the Sum's output); from stage
    # 08 on the Add holds the Sum, not the sum between them.
    assert growth.min() >= (4 if before_stage08(stage) else 3)
    assert record.slope("traced_current") >= 2 * one_activation_nbytes(stage)  # x.data, x.grad


@pytest.mark.parametrize("stage", RECORDED_STAGES)
def test_a_cache_of_activations_keeps_one_per_batch(stage):
    """Loop 4: backward has freed the graph behind each cached activation
    (stage 06), but the activation and its creator stay."""
    record = recorded("last_output", fixed=False, stage=stage)
    growth = np.diff(record.live_objects)
    assert growth.min() >= 2
    assert record.slope("traced_current") >= one_activation_nbytes(stage)


@pytest.mark.xdist_group("loops-step07_user_held_graphs")
def test_stage05_keeps_the_whole_graph_behind_a_cached_activation():
    """The same loop 4 on stage 05 (whose backward frees nothing) keeps more:
    stage 06 turned a graph per batch into an activation per batch."""
    on_05 = recorded("last_output", fixed=False, stage="step05_no_grad")
    on_07 = recorded("last_output", fixed=False)
    assert on_05.slope("live_objects") >= on_07.slope("live_objects") + 4
    assert on_05.slope("traced_current") >= on_07.slope("traced_current") + 3 * one_activation_nbytes()


# --- the fixed loops are flat ---------------------------------------------------------------
@pytest.mark.parametrize("stage", RECORDED_STAGES)
@pytest.mark.parametrize("name", list(LOOPS))
def test_the_fixed_loop_is_flat(name, stage):
    record = recorded(name, fixed=True, stage=stage)
    assert np.all(record.live_objects == record.live_objects[0]), np.unique(record.live_objects)
    assert abs(record.slope("traced_current")) < KIB


@pytest.mark.parametrize("stage", LOOP_STAGES)
def test_the_leak_of_total_loss_ends_with_the_epochs_backward(stage):
    """Loop 1 keeps the graphs until total_loss.backward(): then they go."""
    loop = LOOPS["total_loss"](load(stage), epoch_batches=5)
    record = record_training(loop.module, 10, workload=loop.workload, step=loop.step, rss=False)
    assert record.live_objects[4] == record.live_objects[9] < record.live_objects[3]
    assert len(loop.epoch_losses) == 2


@pytest.mark.parametrize("stage", LOOP_STAGES)
@pytest.mark.parametrize("name", list(LOOPS))
def test_the_reference_graph_names_who_keeps_the_graphs(name, stage, gc_disabled):
    loop = LOOPS[name](load(stage), batch_size=4, in_features=3, hidden=3)
    for i in range(2):
        loop.step(i)
    graph = reference_graph(loop.roots())
    roots = [node for node in graph.nodes if node.kind == "name"]
    assert [node.title for node in roots] == list(loop.roots())
    from_root = [edge for edge in graph.edges if edge.src_id == roots[0].id]
    assert from_root and not graph.garbage
    assert sum(node.kind == "variable" for node in graph.nodes) >= 2


# --- detach() and item() --------------------------------------------------------------------
@pytest.mark.parametrize("contract", get_stage(7).contracts, ids=lambda c: c.name)
def test_stage06_has_neither_detach_nor_item(contract):
    """Stage 07's contracts cannot pass by accident: stage 06's Variable lacks both."""
    with pytest.raises(AttributeError, match=r"detach|item"):
        contract.check(load("step06_free_graph"))


def test_dezero_mini_detach_of_a_parameter_is_a_plain_variable():
    """As PyTorch's detach() of a parameter: the value, not another parameter
    that an optimizer or a Model would pick up."""
    p = dezero_mini.Parameter(np.array([1.0, 2.0]), name="W")
    d = p.detach()
    assert type(d) is dezero_mini.Variable and d.data is p.data and d.name == "W"
    assert d.creator is None and d.grad is None


def test_dezero_mini_item_and_float_of_a_loss():
    F = dezero_mini.functions
    x = dezero_mini.Variable(np.array([[1.0, 2.0]]))
    loss = F.mean_squared_error(x, np.array([[1.0, 4.0]]))
    assert loss.item() == float(loss) == 2.0 and type(loss.item()) is float
    assert type(dezero_mini.Variable(np.array([7], dtype=np.int64)).item()) is int
    with pytest.raises(ValueError, match=r"item: .* shape \(1, 2\)"):
        x.item()
    with pytest.raises(ValueError, match=r"item: .* shape None"):
        dezero_mini.Variable(None).item()


def test_dezero_mini_total_of_items_keeps_no_graph(gc_disabled):
    """The fix of loop 1 in DeZero-style code: ``total_loss += loss.item()``
    keeps a float; ``+= loss`` keeps every batch's graph."""
    F, L = dezero_mini.functions, dezero_mini.layers
    layer = L.Linear(3)
    x, t = np.ones((4, 2)), np.zeros((4, 3))
    for keep, leaking in ((lambda loss: loss.item(), False), (lambda loss: loss, True)):
        total_loss = 0
        with find_leaks() as finder:
            for _ in range(6):
                loss = F.mean_squared_error(layer(x), t)
                layer.cleargrads()
                loss.backward()
                total_loss += keep(loss)
        assert finder.report.leaking is leaking
        assert isinstance(total_loss, dezero_mini.Variable) is leaking
