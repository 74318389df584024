"""time_runs: the collector's cost in time, on, off and after gc.freeze()."""
import gc

import pytest

from dezero_mini.memory import time_runs


def _allocate_containers(n=20_000):
    kept = [[i] for i in range(n)]  # container objects, alive until the end: collections run
    return len(kept)


def test_collections_run_when_on_and_not_when_off():
    on, off, frozen = time_runs([(_allocate_containers, "on"), (_allocate_containers, "off"),
                                 (_allocate_containers, "frozen")], repeats=1)
    assert on.collections > 0 and frozen.collections > 0
    assert off.collections == 0 and off.collector_seconds == 0.0
    assert 0 < on.collector_share < 1
    assert on.collected == 0  # lists without cycles: nothing to free


def test_the_collectors_state_is_restored():
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        time_runs([(_allocate_containers, "on"), (_allocate_containers, "frozen")], repeats=1)
        assert not gc.isenabled()
        assert gc.get_freeze_count() == 0
    finally:
        (gc.enable if was_enabled else gc.disable)()


def test_a_mode_that_does_not_exist_is_an_error():
    with pytest.raises(ValueError, match="time_runs: mode must be one of"):
        time_runs([(_allocate_containers, "paused")])


def test_the_clock_is_the_one_given():
    """A clock that counts its calls: each run reads it once before and once
    after, and each collection once at its start and once at its end."""
    ticks = iter(range(10**6))
    on, off = time_runs([(_allocate_containers, "on"), (_allocate_containers, "off")],
                        repeats=1, clock=lambda: next(ticks))
    assert off.seconds == 1 and off.collector_seconds == 0
    assert on.seconds == 1 + 2 * on.collections and on.collector_seconds == on.collections
