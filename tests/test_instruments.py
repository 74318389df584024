"""Tests of the memory instruments themselves (dezero_mini.memory).

The stage tests trust these instruments; here each instrument is checked
against facts known in advance: objects made by hand, arrays of known size,
the interpreter state that must be restored.
"""
import csv
import gc
import sys
import tracemalloc

import numpy as np
import pytest

from conftest import STEP_NAMES, load
from dezero_mini.memory import (
    SIGNALS,
    STAGES,
    TrainingRecord,
    Workload,
    count_live_objects,
    disable_output_cache,
    grad_array,
    graph_gradients,
    load_stage,
    measure_inference,
    plot_timeline,
    plot_training,
    record_step_timeline,
    record_training,
    traced_left_by,
)

FEW = 4  # batches: enough for every per-batch property, cheap

# Each test's collections and counts visit what the test made, not the whole
# test process (conftest.made_before_frozen, which unfreezes everything after
# the test, so a test may freeze and unfreeze as it likes).
pytestmark = pytest.mark.usefixtures("made_before_frozen")


@pytest.fixture
def plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as pyplot

    yield pyplot
    pyplot.close("all")


# --- load_stage ---------------------------------------------------------------------------
@pytest.mark.parametrize("spec", [1, "1", "01", "step01", "leaking_graph", "step01_leaking_graph",
                                  " Step01_Leaking_Graph.py "])
def test_load_stage_accepts_every_spelling_and_shares_one_module(spec):
    module = load_stage(spec)
    assert module is sys.modules["step01_leaking_graph"]
    assert module is load("step01_leaking_graph")  # the tests' own import
    assert module.STAGE == "01"


def test_load_stage_dezero_mini_and_modules():
    import dezero_mini

    assert load_stage("dezero_mini") is dezero_mini
    assert load_stage(dezero_mini) is dezero_mini  # a module passes through


@pytest.mark.parametrize("bad", [0, 99, True, "cycle", "step99", "", None])
def test_load_stage_rejects_unknown_stages_listing_the_valid_ones(bad):
    with pytest.raises(ValueError) as info:
        load_stage(bad)
    message = str(info.value)
    assert "leaking_graph" in message and "dezero_mini" in message


def test_stages_lists_the_step_files_in_order():
    assert [f"step{n:02d}_{name}" for n, name in STAGES] == STEP_NAMES
    assert [n for n, _ in STAGES] == sorted(n for n, _ in STAGES)
    for number, name in STAGES:
        assert load_stage(number) is load_stage(name)


def test_load_stage_reads_the_steps_directory_from_the_environment(tmp_path, monkeypatch):
    (tmp_path / "step42_answer.py").write_text("STAGE = '42'\n")
    monkeypatch.setenv("DEZERO_MINI_STEPS", str(tmp_path))
    monkeypatch.delitem(sys.modules, "step42_answer", raising=False)
    try:
        module = load_stage(42)
        assert module.STAGE == "42" and load_stage("answer") is module
        assert sys.modules["step42_answer"] is module
        # Another file under a name already imported: refused, not silently mixed.
        other = tmp_path / "elsewhere"
        other.mkdir()
        (other / "step42_answer.py").write_text("STAGE = 'other'\n")
        monkeypatch.setenv("DEZERO_MINI_STEPS", str(other))
        with pytest.raises(ImportError):
            load_stage(42)
    finally:
        sys.modules.pop("step42_answer", None)


# --- count_live_objects ----------------------------------------------------------------
@pytest.mark.parametrize("stage", ["step03_weakref_outputs", "dezero_mini"])
def test_count_live_objects_counts_what_was_made(stage, gc_disabled):
    module = load(stage)
    before = count_live_objects(module)
    made = [module.Variable(np.zeros(3)) for _ in range(5)]
    functions = [module.Function() for _ in range(2)]
    subclassed = type("Probe", (module.Function,), {})()  # subclasses count too
    after = count_live_objects(module)
    assert after["variables"] - before["variables"] == 5
    assert after["functions"] - before["functions"] == 3
    assert after["total"] == after["variables"] + after["functions"]
    del made, functions, subclassed
    assert count_live_objects(module) == before  # no cycle: freed without the collector


def test_count_live_objects_sees_unreachable_cycles(gc_disabled):
    module = load("step02_cycles")
    before = count_live_objects(module)["total"]
    y = module.square(module.Variable(np.ones(2)))  # x, y and Square: y <-> Square is a cycle
    del y
    assert count_live_objects(module)["total"] - before == 3
    gc.collect()
    assert count_live_objects(module)["total"] == before


# --- LiveObjectCounter: count_live_objects at the cost of the youngest generation ---------------
def _made(module, held):
    held.append(module.Variable(np.zeros(2)))
    held.append(module.Function())


def _an_old_one_dies(module, held):
    held.pop(0)  # made before the last collection: it lives in an older generation


def _a_cycle_left_for_the_collector(module, held):
    box = [module.Variable(np.ones(2)), module.Function()]
    box.append(box)  # unreachable once deleted: alive until the collector runs
    del box


def _collected(module, held):
    gc.collect(1)  # the young generations into the oldest


def _young_collected_only(module, held):
    gc.collect(0)


def _frozen(module, held):
    gc.freeze()


def _unfrozen(module, held):
    gc.unfreeze()


# What happens between two counts (after what, before the counter is made), and
# whether the older generations' count may be reused after it (the youngest
# generation is always counted again).
COUNTER_CASES = [
    ("objects made", None, _made, True),
    ("an old object dies", None, _an_old_one_dies, False),
    ("an unreachable cycle stays", None, _a_cycle_left_for_the_collector, True),
    ("a collection", None, _collected, False),
    ("a collection of the youngest generation", None, _young_collected_only, False),
    ("gc.freeze", None, _frozen, False),
    ("gc.unfreeze", _frozen, _unfrozen, False),
]


@pytest.mark.parametrize("what, before, change, reused", COUNTER_CASES, ids=[c[0] for c in COUNTER_CASES])
def test_live_object_counter_agrees_with_a_full_count(what, before, change, reused):
    from dezero_mini.memory.counting import LiveObjectCounter, _tracked_in_old_generations

    module = load("dezero_mini")
    held = [module.Variable(np.zeros(2)) for _ in range(3)] + [module.Function() for _ in range(2)]
    # The collector off, without the full collections of gc_disabled (long in a test process).
    was_enabled = gc.isenabled()
    gc.disable()
    gc.collect(1)  # what `held` holds is old now (in generation 2)
    if before is not None:
        before(module, held)
    counter = LiveObjectCounter(module)
    assert counter.generations_add_up  # CPython: generations 0-2 are what gc.get_objects() lists
    try:
        assert counter() == count_live_objects(module)
        full_counts, old_tracked = counter.full_counts, _tracked_in_old_generations()
        change(module, held)
        # Anything old may die meanwhile (a cache entry of the interpreter's): then
        # counting the older generations again is right even where the case allows reuse.
        reused = reused and _tracked_in_old_generations() == old_tracked
        assert counter() == count_live_objects(module), what
        assert counter.full_counts == full_counts + (0 if reused else 1), what
        _made(module, held)
        assert counter() == count_live_objects(module), what
    finally:
        gc.unfreeze()
        if was_enabled:
            gc.enable()


def test_live_object_counter_counts_again_when_a_collection_runs_while_it_counts(monkeypatch):
    """With the collector on, making the list of the youngest generation can
    start a collection, which moves the young objects out of it before they are
    listed: here every such list starts one. The counter sees that a collection
    ran, and counts again (at last, everything at once) rather than miss them."""
    import types

    from dezero_mini.memory import counting

    module = load("dezero_mini")
    counter = counting.LiveObjectCounter(module)

    def get_objects(generation=None):
        if generation == 0:
            gc.collect(0)
        return gc.get_objects() if generation is None else gc.get_objects(generation)

    collecting = types.SimpleNamespace(**{name: getattr(gc, name) for name in dir(gc) if not name.startswith("_")})
    collecting.get_objects = get_objects
    monkeypatch.setattr(counting, "gc", collecting)
    held = [module.Variable(np.ones(2)) for _ in range(3)]  # young until counted
    assert counter() == count_live_objects(module)
    del held


def test_live_object_counter_agrees_with_the_collector_on():
    """A threshold of 1 (a collection of the youngest generation at almost every
    allocation, the counter's own too): its figures are still right, and it
    ends. (The older generations' thresholds are raised: their collections,
    of the whole test process, would only make this slow.)"""
    from dezero_mini.memory.counting import LiveObjectCounter

    module = load("step02_cycles")
    held = []
    counter = LiveObjectCounter(module)
    threshold = gc.get_threshold()
    try:
        for i in range(6):
            gc.set_threshold(1 if i % 2 else threshold[0], 10**6, 10**6)
            held.append(module.square(module.Variable(np.ones(2))))  # a cycle each
            if i % 3 == 0:
                held.pop(0)
            assert counter() == count_live_objects(module), i
    finally:
        gc.set_threshold(*threshold)


# --- Workload ---------------------------------------------------------------------------------
def test_workload_batches_are_deterministic_and_distinct():
    workload = Workload(load("step03_weakref_outputs"))
    x0, t0 = workload.batch(0)
    x0_again, t0_again = Workload(load("dezero_mini")).batch(0)
    x1, _ = workload.batch(1)
    np.testing.assert_array_equal(x0, x0_again)
    np.testing.assert_array_equal(t0, t0_again)
    assert not np.array_equal(x0, x1)
    assert x0.shape == (workload.batch_size, workload.in_features)
    assert t0.shape == (workload.batch_size, workload.out_features)


def test_workload_sizes():
    workload = Workload(load("step03_weakref_outputs"), batch_size=10, in_features=3, hidden=4)
    assert workload.activation_nbytes == 10 * 4 * 8
    assert workload.parameter_nbytes == 8 * (3 * 4 + 4 + 4 * 4 + 4 + 4 * 1 + 1)
    assert len(workload.parameters) == 6


def test_workload_train_step_returns_a_float_and_updates_the_parameters():
    workload = Workload(load("dezero_mini"))
    W = workload.parameters[0]
    before = W.data.copy()
    loss = workload.train_step(0)
    assert type(loss) is float and loss > 0
    assert not np.array_equal(W.data, before)


def test_grad_array_is_not_fooled_by_ndarray_data():
    g = np.arange(3.0)
    assert grad_array(g) is g  # ndarray.data is a memoryview: must not be taken
    v = load("dezero_mini").Variable(g)
    assert grad_array(v) is g


# --- record_training ----------------------------------------------------------------------------
def test_training_record_has_one_value_per_batch_and_csv_round_trips(tmp_path):
    record = record_training("step03_weakref_outputs", batches=FEW)
    for name in SIGNALS:
        assert len(getattr(record, name)) == FEW, name
    assert np.all(record.rss > 0)
    assert np.all(record.traced_peak >= record.traced_current)
    path = record.to_csv(tmp_path / "record.csv")
    with open(path, newline="") as f:
        rows = list(csv.reader(f))
    assert rows[0] == ["batch", *SIGNALS]
    assert len(rows) == FEW + 1
    again = TrainingRecord.from_csv(path)
    for name in SIGNALS:
        np.testing.assert_array_equal(getattr(again, name), getattr(record, name))
    assert set(record.summary()) >= {"objects_per_batch", "traced_bytes_per_batch", "final_collected"}
    assert record.label in repr(record)


def test_record_without_rss_writes_no_rss_column(tmp_path):
    record = record_training("step03_weakref_outputs", batches=2, rss=False)
    assert record.rss is None
    path = record.to_csv(tmp_path / "record.csv")
    assert "rss" not in open(path).readline()
    with pytest.raises(ValueError):
        record.slope("rss")


def test_rss_through_memory_profiler_every_batch():
    record = record_training("step03_weakref_outputs", batches=2, rss="memory_profiler")
    assert np.all(record.rss > 0)
    with pytest.raises(ValueError):
        record_training("step03_weakref_outputs", batches=1, rss="top")


def test_slope_is_the_least_squares_growth_per_batch():
    n = 10
    signals = {name: np.zeros(n, dtype=np.int64) for name in SIGNALS}
    signals["traced_current"] = 1000 + 250 * np.arange(n)
    record = TrainingRecord("synthetic", "00", signals)
    assert record.slope("traced_current") == pytest.approx(250)
    assert record.slope("live_objects") == pytest.approx(0)
    with pytest.raises(ValueError):
        record.slope("bytes")


def test_record_sees_a_cycle_leak_and_what_gc_collect_frees():
    module = load("step02_cycles")
    per_graph = 20  # 11 Variables (x, t, 9 results) + 9 Functions in the standard MLP step
    record = record_training(module, batches=FEW, rss=False)
    assert list(np.diff(record.live_objects)) == [per_graph] * (FEW - 1)
    assert np.all(np.diff(record.traced_current) > 500 * 1024)  # ~1 MiB of arrays a batch
    assert record.final_collected >= per_graph * FEW
    assert record.live_after_collect == record.live_objects[0] - per_graph


def test_record_of_a_flat_stage_is_flat_and_keeps_no_graph():
    module = load("step03_weakref_outputs")
    before = count_live_objects(module)
    record = record_training(module, batches=FEW)  # RSS too: its reader must make no garbage
    assert len(set(record.live_objects)) == 1
    assert record.final_collected == 0  # neither the stage nor the instruments made a cycle
    assert record.live_after_collect == record.live_objects[-1]
    assert count_live_objects(module) == before  # the record holds no Variable or Function


def test_gc_enabled_run_reports_automatic_collections():
    record = record_training("step02_cycles", batches=60, gc_enabled=True, rss=False)
    assert record.gc_collections.sum() >= 1
    assert record.gc_collected.sum() > 0
    assert record.live_objects.max() > record.live_objects.min()  # the sawtooth


@pytest.mark.parametrize("collector_on", [True, False])
@pytest.mark.parametrize("gc_enabled", [True, False])
def test_recorder_restores_the_collector_and_removes_its_callback(collector_on, gc_enabled):
    callbacks = list(gc.callbacks)
    was_enabled = gc.isenabled()
    (gc.enable if collector_on else gc.disable)()
    try:
        record_training("step03_weakref_outputs", batches=2, gc_enabled=gc_enabled, rss=False)
        assert gc.isenabled() is collector_on
        assert gc.callbacks == callbacks
        assert not tracemalloc.is_tracing()  # it started tracing, so it stops
    finally:
        (gc.enable if was_enabled else gc.disable)()


class _FailingWorkload(Workload):
    def train_step(self, i, **kwargs):
        if i == 1:
            raise RuntimeError("batch 1 fails")
        return super().train_step(i, **kwargs)


def test_recorder_restores_state_when_a_batch_fails():
    callbacks = list(gc.callbacks)
    was_enabled = gc.isenabled()
    gc.enable()
    try:
        workload = _FailingWorkload(load("step03_weakref_outputs"))
        with pytest.raises(RuntimeError, match="batch 1 fails"):
            record_training("step03_weakref_outputs", batches=3, workload=workload, rss=False)
        assert gc.isenabled()
        assert gc.callbacks == callbacks
        assert not tracemalloc.is_tracing()
    finally:
        (gc.enable if was_enabled else gc.disable)()


def test_traced_peak_is_the_peak_within_each_batch():
    tracemalloc.start()
    try:
        big = np.ones(8 * 1024 * 1024 // 8)  # 8 MiB, gone before the first batch
        del big
        record = record_training("step03_weakref_outputs", batches=2, rss=False)
    finally:
        tracemalloc.stop()
    graph = 500 * 1024  # one batch's graph: activations and gradients
    assert np.all(record.traced_peak - record.traced_current > graph)
    assert np.all(record.traced_peak - record.traced_current < 4 * 1024 * 1024)


def test_recorder_leaves_a_running_trace_running():
    tracemalloc.start()
    try:
        record_training("step03_weakref_outputs", batches=1, rss=False)
        assert tracemalloc.is_tracing()
    finally:
        tracemalloc.stop()


# --- record_step_timeline -----------------------------------------------------------------
def _methods(module):
    found = {}
    stack = [module.Function]
    while stack:
        cls = stack.pop()
        found[cls] = (cls.__dict__.get("__call__"), cls.__dict__.get("backward"))
        stack.extend(cls.__subclasses__())
    return found


@pytest.mark.parametrize("stage", ["step03_weakref_outputs", "dezero_mini"])
def test_timeline_samples_every_op_and_restores_the_methods(stage):
    module = load(stage)
    before = _methods(module)
    timeline = record_step_timeline(module)
    assert _methods(module) == before
    forward = [e.op for e in timeline.events if e.phase == "forward"]
    backward = [e.op for e in timeline.events if e.phase == "backward"]
    # 3 layers of MatMul + Add, 2 Sigmoids, the loss: 9 ops each way.
    assert forward[0] == "(start)" and len(forward) == 1 + 9
    assert backward[0] == "MeanSquaredError" and backward[-1] == "(end)" and len(backward) == 9 + 1
    assert sorted(forward[1:]) == sorted(backward[:-1])
    traced = timeline.traced
    assert traced[0] < 64 * 1024 and traced[9] > 200 * 1024  # the forward pass piles up activations
    assert timeline.backward_peak >= traced.max()
    assert timeline.forward_peak >= traced[1:10].max()
    assert all(e.live_objects > 0 for e in timeline.events)


def test_timeline_restores_the_methods_when_the_step_fails():
    module = load("step03_weakref_outputs")
    before = _methods(module)

    class Broken(Workload):
        def loss(self, i):
            self.module.sigmoid(self.module.Variable(np.ones(2)))  # one sampled op first
            raise RuntimeError("no loss today")

    with pytest.raises(RuntimeError, match="no loss today"):
        record_step_timeline(module, workload=Broken(module))
    assert _methods(module) == before


def test_timeline_passes_retain_grad_only_when_given():
    module = load("step03_weakref_outputs")  # its backward() takes no retain_grad
    record_step_timeline(module)
    with pytest.raises(TypeError):
        record_step_timeline(module, retain_grad=True)


# --- graph_gradients, traced_left_by ---------------------------------------------------------
LINES = 50  # of y = y * 1.0001 + 0.0: two constants each


def _constant_formula(module):
    x = module.Variable(np.ones(10), name="x")
    y = x
    for _ in range(LINES):
        y = y * 1.0001 + 0.0
    return x, y


@pytest.mark.parametrize("name", ["step02_cycles", "step04_retain_grad"])  # strong, weak outputs
def test_graph_gradients_finds_a_gradient_for_every_constant_up_to_stage_07(name):
    x, y = _constant_formula(load(name))
    y.backward()
    found = graph_gradients(y, held=[x])
    assert found.functions == 2 * LINES
    assert found.variables == 1 + 2 * LINES + 2 * LINES  # x, the constants, the results
    # Before retain_grad (stage 04), the results keep theirs too: 10 float64 numbers each,
    # y's included (y is the root, which the caller holds).
    results_keep = name < "step04_retain_grad"
    results = 2 * LINES - 1 if results_keep else 0
    assert found.unheld_gradients == 2 * LINES + results
    assert found.unheld_bytes == 2 * LINES * 8 + results * 80  # a float64 per constant
    assert found.gradient_bytes == found.unheld_bytes + 80 + 80 * results_keep  # + x's (+ y's)
    assert found.no_edge == 0
    # Without held, x's gradient is one that nobody reads too.
    assert graph_gradients(y).unheld_gradients == found.unheld_gradients + 1


def test_graph_gradients_counts_the_missing_edges_of_dezero_mini():
    import dezero_mini

    x, y = _constant_formula(dezero_mini)
    y.backward(retain_graph=True)
    found = graph_gradients(y, held=[x])
    assert (found.functions, found.variables, found.gradients) == (2 * LINES, 2, 1)
    assert (found.unheld_gradients, found.no_edge) == (0, 2 * LINES)
    assert found.gradient_bytes == 80
    # A Variable of the user's that needs no gradient has no edge either.
    w = dezero_mini.Variable(np.ones(10))
    w.requires_grad = False
    z = x * w
    z.backward(retain_graph=True)
    assert graph_gradients(z, held=[x, w]).no_edge == 1


def test_graph_gradients_keeps_no_reference_to_the_graph():
    module = load("step04_retain_grad")
    before = count_live_objects(module)
    x, y = _constant_formula(module)
    y.backward()
    found = graph_gradients(y, held=[x])  # noqa: F841  (kept on purpose)
    del y
    assert count_live_objects(module) == {"variables": before["variables"] + 1,  # x
                                          "functions": before["functions"],
                                          "total": before["total"] + 1}


def test_traced_left_by_counts_what_the_call_keeps_not_what_it_frees():
    kept = []
    assert traced_left_by(lambda: kept.append(np.ones(2**17))) >= 2**20  # 1 MiB kept
    assert abs(traced_left_by(lambda: np.ones(2**17).sum())) < 2**12  # made and freed
    assert not tracemalloc.is_tracing()  # stopped, as it was before


# --- measure_inference ------------------------------------------------------------------------
def test_measure_inference_reports_in_units_of_activations():
    small = dict(depth=4, width=64, batch=128)
    graph = measure_inference("step03_weakref_outputs", no_grad=True, **small)
    assert graph["no_grad"] is False  # stage 03 has no no_grad(): plain pass
    assert graph["activation_bytes"] == 64 * 128 * 8
    assert graph["parameter_bytes"] == 4 * (64 * 64 + 64) * 8
    assert graph["peak_in_activations"] == pytest.approx(graph["peak_bytes"] / graph["activation_bytes"])
    assert graph["retained_in_activations"] >= 4 * 3  # the whole graph stays with the output
    free = measure_inference("step05_no_grad", no_grad=True, **small)
    assert free["no_grad"] is True
    assert 1.5 <= free["peak_in_activations"] <= 3.5
    assert free["retained_in_activations"] < 1.5  # only the output


# --- notebook ----------------------------------------------------------------------------------
def test_disable_output_cache_outside_ipython_returns_false():
    assert disable_output_cache() is False


# --- plots -------------------------------------------------------------------------------------
def test_plot_training_has_titles_units_and_legends(plt):
    records = [record_training(stage, batches=3, rss=True) for stage in (2, 3)]
    fig = plot_training(records, signals=("live_objects", "traced_current", "traced_peak", "rss"))
    assert fig.get_suptitle()
    assert len(fig.axes) == 4
    for ax in fig.axes:
        assert ax.get_title()
        assert ax.get_xlabel() == "batch"
        assert "(MiB)" in ax.get_ylabel() or "(objects)" in ax.get_ylabel()
        legend = ax.get_legend()
        assert legend is not None
        assert [t.get_text() for t in legend.get_texts()] == [r.label for r in records]
        assert len(ax.get_lines()) == 2
    assert fig.get_size_inches()[0] <= 13.5  # readable at notebook width


def test_plot_training_rejects_unknown_signals(plt):
    record = record_training(3, batches=2, rss=False)
    with pytest.raises(ValueError):
        plot_training(record, signals=("bytes",))
    fig = plot_training(record, signals=("rss", "live_objects"), title="mine")
    assert fig.get_suptitle() == "mine"
    assert len(fig.axes[0].get_lines()) == 0  # no RSS recorded: nothing drawn


def test_plot_timeline_marks_phases_and_peaks(plt):
    timelines = [record_step_timeline("step03_weakref_outputs"), record_step_timeline("step04_retain_grad")]
    fig = plot_timeline(timelines)
    (ax,) = fig.axes
    assert ax.get_title()
    assert ax.get_xlabel() and "(MiB)" in ax.get_ylabel()
    texts = [t.get_text() for t in ax.get_legend().get_texts()]
    for timeline in timelines:
        assert timeline.label in texts
        assert any(timeline.label in t and "backward peak" in t for t in texts)
    assert any("forward" in t for t in texts) and any("backward" in t for t in texts)
    peaks = sorted(line.get_ydata()[0] for line in ax.get_lines() if line.get_linestyle() == "--")
    expected = sorted(t.backward_peak / 2**20 for t in timelines)
    assert peaks == pytest.approx(expected)


def test_plotting_does_not_import_matplotlib_on_package_import():
    code = "import sys, dezero_mini.memory; print('matplotlib' in sys.modules)"
    import subprocess

    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=str(__import__("pathlib").Path(__file__).resolve().parents[1]))
    assert out.stdout.strip() == "False"


def test_timeline_keeps_no_graph():
    module = load("step03_weakref_outputs")
    before = count_live_objects(module)
    timeline = record_step_timeline(module)  # noqa: F841  (kept alive on purpose)
    assert count_live_objects(module) == before


def test_report_puts_the_figures_of_a_run_in_words():
    leaking = record_training("step02_cycles", batches=10, rss=False)
    lines = leaking.report().splitlines()
    assert lines[0] == leaking.label
    per_graph = leaking.live_objects[1] - leaking.live_objects[0]
    assert f"+{per_graph:.1f} live objects per batch" in lines[1]
    assert "KiB traced per batch" in lines[2]
    freed = leaking.live_objects[-1] - leaking.live_after_collect
    assert freed > 0 and f"gc.collect() after the last batch: freed {freed} Variables" in lines[-1]
    assert not any("automatic collections" in line for line in lines)  # the collector was off

    flat = record_training("step03_weakref_outputs", batches=10, gc_enabled=True, rss=False)
    text = flat.report(label=False)
    assert flat.label not in text
    assert "+0.0 live objects per batch" in text and "automatic collections during the run" in text


def test_a_record_of_one_batch_reports_no_growth_rate():
    """``memory --batches 1`` printed "+nan live objects per batch": one
    batch has no slope, and the report says so instead."""
    record = record_training("dezero_mini", batches=1, rss=False)
    text = record.report()
    assert "nan" not in text
    assert "growth per batch needs 2 batches or more" in text
    assert "highest peak within a batch" in text


# A record's CSV spoiled in each way a file can be (name -> change of the good
# text, words the error must hold). Before, each one was an IndexError,
# TypeError, UnicodeDecodeError or int() error that named no file.
GOOD_CSV = "batch,live_objects,traced_current,loss\n0,12,100,2.5\n1,12,104,2.25\n"
SPOILED_CSVS = {
    "empty": (lambda text: "", "empty file"),
    "not a record": (lambda text: "hello\n", "line 1: header 'hello'"),
    "no loss": (lambda text: text.replace(",loss", "").replace(",2.5", "").replace(",2.25", ""),
                "loss among them"),
    "a column twice": (lambda text: text.replace("traced_current", "live_objects"), "each once"),
    "a short line": (lambda text: text.replace("1,12,104,2.25", "1,12"), "line 3: 2 values"),
    "a word for a count": (lambda text: text.replace("0,12,", "0,abc,"),
                           "line 2: live_objects is 'abc', not a whole number"),
    "a batch missing": (lambda text: text.replace("\n1,", "\n5,"),
                        "line 3: batch '5' where batch 1 belongs"),
    "not UTF-8": (lambda text: b"\xff\xfe" + text.encode(), "not UTF-8 text"),
}


@pytest.mark.parametrize("case", sorted(SPOILED_CSVS))
def test_a_spoiled_record_csv_is_a_clear_error(case, tmp_path):
    spoil, words = SPOILED_CSVS[case]
    path = tmp_path / "memory.csv"
    content = spoil(GOOD_CSV)
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    with pytest.raises(ValueError) as raised:
        TrainingRecord.from_csv(path)
    message = str(raised.value)
    assert message.startswith(f"TrainingRecord.from_csv: {path}")
    assert words in message and "to_csv" in message


def test_the_good_csv_of_the_table_reads(tmp_path):
    """The table's starting point is itself a valid record."""
    path = tmp_path / "memory.csv"
    path.write_text(GOOD_CSV)
    record = TrainingRecord.from_csv(path)
    assert record.batches == 2
    assert record.live_objects.tolist() == [12, 12] and record.loss.tolist() == [2.5, 2.25]
    assert record.rss is None
