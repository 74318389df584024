"""The memory contract of each stage, on the standard workload.

Deterministic signals only: counts of live Variables and Functions, and
tracemalloc bytes, with the cyclic collector disabled (the recorder disables
it). Each stage is recorded once for 200 batches and shared by its tests.
"""
import gc

import numpy as np
import pytest

from conftest import load, stages_from
from dezero_mini.memory import (
    Workload,
    measure_inference,
    record_step_timeline,
    record_training,
)

BATCHES = 200
KIB = 1024

_records = {}


def recorded(stage):
    """The 200-batch record of a stage (gc disabled), made once per session."""
    if stage not in _records:
        _records[stage] = record_training(load(stage), batches=BATCHES, gc_enabled=False)
        registry = getattr(load(stage), "REGISTRY", None)
        if registry is not None:
            registry.clear()  # the record keeps the figures, not the objects
        gc.collect()
    return _records[stage]


def objects_per_graph():
    """How many Variables and Functions one training batch makes: stage 01's
    registry sees every one of them."""
    module = load("step01_leaking_graph")
    workload = Workload(module)
    module.REGISTRY.clear()
    workload.train_step(0)
    made = len(module.REGISTRY.variables) + len(module.REGISTRY.functions)
    module.REGISTRY.clear()
    return made


def framework_objects_found_by_collector(stage, batches=20):
    """Run batches with the collector off, then let it collect once and return
    the Variables and Functions that it had to free (DEBUG_SAVEALL keeps them
    in gc.garbage so that we can look)."""
    module = load(stage)
    was_enabled = gc.isenabled()
    gc.collect()
    gc.disable()
    try:
        workload = Workload(module)
        for i in range(batches):
            workload.train_step(i)
        gc.set_debug(gc.DEBUG_SAVEALL)
        gc.collect()
        found = [o for o in gc.garbage if isinstance(o, (module.Variable, module.Function))]
        return len(found)
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        gc.collect()
        if was_enabled:
            gc.enable()


# --- stage 01: the registry and the cycles keep everything --------------------------
def test_stage01_keeps_at_least_one_graph_per_batch():
    record = recorded("step01_leaking_graph")
    growth = np.diff(record.live_objects)
    assert objects_per_graph() > 0
    assert growth.min() >= objects_per_graph()
    assert record.slope("traced_current") > 10 * KIB


def test_stage01_collector_does_not_bring_memory_down():
    record = recorded("step01_leaking_graph")
    assert record.live_after_collect >= record.live_objects[-1]


# --- stage 02: only the cycles keep it: the collector can free them ----------------------
def test_stage02_grows_with_the_collector_disabled():
    record = recorded("step02_cycles")
    growth = np.diff(record.live_objects)
    assert growth.min() >= objects_per_graph()
    assert record.slope("traced_current") > 10 * KIB


def test_stage02_gc_collect_returns_to_the_floor_and_reports_what_it_freed():
    record = recorded("step02_cycles")
    floor = record.live_objects[0] - objects_per_graph()  # before the first batch's graph
    assert record.final_collected >= objects_per_graph() * (BATCHES - 1)
    assert record.live_after_collect == floor


def test_stage02_collector_frees_framework_objects():
    """The positive control of the stage-03 test below."""
    assert framework_objects_found_by_collector("step02_cycles") > 0


# --- stage 03 and every later stage: flat ---------------------------------------------------
@pytest.mark.parametrize("stage", stages_from(3))
def test_live_objects_return_to_a_constant_after_each_batch(stage):
    record = recorded(stage)
    assert np.all(record.live_objects == record.live_objects[0]), np.unique(record.live_objects)


@pytest.mark.parametrize("stage", stages_from(3))
def test_traced_memory_grows_less_than_1_kib_per_batch(stage):
    assert abs(recorded(stage).slope("traced_current")) < KIB


@pytest.mark.parametrize("stage", stages_from(3))
def test_collector_finds_no_framework_object(stage):
    assert framework_objects_found_by_collector(stage) == 0


# --- stage 04: a lower peak within backward -------------------------------------------------
@pytest.mark.parametrize("stage", stages_from(4))
def test_backward_peak_is_lower_than_stage03(stage):
    before = record_step_timeline(load("step03_weakref_outputs"))
    after = record_step_timeline(load(stage))
    assert after.backward_peak < before.backward_peak


def test_retain_grad_true_gives_back_the_stage03_peak():
    """The saving comes from dropping intermediate gradients, nothing else."""
    dropped = record_step_timeline(load("step04_retain_grad"), retain_grad=False)
    kept = record_step_timeline(load("step04_retain_grad"), retain_grad=True)
    assert dropped.backward_peak < kept.backward_peak


# --- stage 05: inference holds about two activations ---------------------------------------
@pytest.mark.parametrize("stage", stages_from(5))
def test_no_grad_inference_peak_is_a_few_activations_plus_parameters(stage):
    free = measure_inference(load(stage), no_grad=True)
    graph = measure_inference(load(stage), no_grad=False)
    assert free["peak_in_activations"] <= 3.5, free
    assert graph["peak_in_activations"] >= 2 * free["peak_in_activations"], (free, graph)


@pytest.mark.parametrize("stage", stages_from(3))  # 01-02 share 03's arithmetic
def test_workload_learns(stage):
    """The standard workload is a real training run: the loss falls."""
    workload = Workload(load(stage))
    losses = [workload.train_step(i) for i in range(150)]
    assert np.mean(losses[-20:]) < 0.8 * np.mean(losses[:20])
