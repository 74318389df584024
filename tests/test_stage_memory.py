"""Every stage's contract, on the course's own step files and on dezero_mini.

The contracts are defined once, in ``dezero_mini.contracts`` (one module per
stage): ``python -m dezero_mini check`` holds a learner's file to the same
objects. Here each contract runs on every stage module where it holds: the
stage that introduces it and every later one that builds on it
(``Stage.builds_on``; ``dezero_mini`` counts as the last stage and carries
them all), up to its ``until`` stage for the leaks that a later stage fixes
on purpose.

Deterministic signals only: counts of live Variables and Functions, and
tracemalloc bytes, with the cyclic collector disabled. Each stage's
50-batch training record is made once and shared by its contracts
(``dezero_mini.contracts.bench``). That the contracts can fail is shown by
``test_checker.py``, which runs them on subtly wrong files.
"""
import pytest

from conftest import ALL_STAGES, load, stages_that_change
from dezero_mini.contracts import FINISHED, all_contracts, missing_names
from dezero_mini.contracts import bench as bench_module
from dezero_mini.contracts.bench import BATCHES, bench
from dezero_mini.memory import Workload

# The contracts collect and count again and again: they visit what they made, not
# the whole test process (conftest._earlier_modules_frozen; none looks for a referrer).


def number_of(stage_name):
    return FINISHED if stage_name == "dezero_mini" else int(stage_name[4:6])


# Each contract runs on the stage that introduces it, on every later stage that
# changes the framework it measures, and on dezero_mini (stages_that_change: a
# stage whose step file only adds new names to the stage it builds on, as stage
# 09 adds the planner and stage 10 checkpoint() to stage 08, would run the very
# same code again).
# The cases of one stage share its bench (its training record, made once per
# process): xdist_group keeps them in one test process under `pytest -n`.
CASES = [pytest.param(contract, stage, id=f"{contract.name}-{stage}",
                      marks=pytest.mark.xdist_group(f"bench-{stage}"))
         for contract in all_contracts() for stage in ALL_STAGES
         if contract.holds_at(number_of(stage)) and stage in stages_that_change(contract.stage)]


def test_dezero_mini_has_the_api_of_every_stage():
    """The finished package carries every stage's contracts, so it needs every
    name that a stage asks of a learner's file (stage 09's trace, plan_memory
    and Executor; stage 10's checkpoint): the checker would refuse it otherwise."""
    assert missing_names(load("dezero_mini"), FINISHED) == []


@pytest.mark.parametrize("contract, stage", CASES)
def test_contract_holds(contract, stage):
    module = load(stage)
    found = contract.check(module)
    if not found.passed and _only_the_process_count_moved(module):
        # The count of the objects that the collector tracks is the whole
        # process's (gc.get_count()), and under pytest -n the process is
        # shared: xdist's receiving thread keeps the next tests' messages
        # while a record is taken (once "grew by 3" in 50 batches). A graph
        # that a stage keeps moves the count in every record, a message in
        # one: the record is taken again, once.
        bench_module._benches.pop(module, None)
        found = contract.check(module)
    assert found.passed, f"{contract.name} on {stage}: expected {found.expected}; " \
                         f"measured {found.measured}"


def _only_the_process_count_moved(module):
    """The stage's record counted as many Variables and Functions after every
    batch, and only the process-wide count of tracked objects moved."""
    record = bench(module).record
    live, tracked = record.live_objects, record.tracked_objects
    return bool((live == live[0]).all() and (tracked != tracked[0]).any())


def test_every_contract_is_held_by_some_stage():
    held = {contract.name for contract, _ in (case.values for case in CASES)}
    assert held == {contract.name for contract in all_contracts()}


@pytest.mark.xdist_group("bench-step03_weakref_outputs")
def test_records_have_the_batches_of_the_course():
    assert bench(load("step03_weakref_outputs")).record.batches == BATCHES == 50


@pytest.mark.xdist_group("bench-step01_leaking_graph")
def test_graph_size_is_what_the_stage01_registry_sees():
    """The bench counts one batch's graph without a registry; stage 01's
    registry, which sees every Variable and Function made, agrees."""
    module = load("step01_leaking_graph")
    workload = Workload(module)
    module.REGISTRY.clear()
    workload.train_step(0)
    made = len(module.REGISTRY.variables) + len(module.REGISTRY.functions)
    module.REGISTRY.clear()
    assert made > 0
    assert bench(module).graph_size == made
