"""Stage 06: backward frees the graph as it goes, unless retain_graph=True.

The stage's memory contract is defined once, in
``dezero_mini.contracts.stage06``: what a Function saved for its backward is
released while backward still runs (``frees_saved_inputs_during_backward``);
when backward returns, and at its peak, the standard workload holds less
than on stage 05, by at least the bytes of the batch's graph
(``holds_less_than_stage05_after_backward``, ``backward_peak_below_stage05``);
a second backward through a freed graph is a clear error that names
``retain_graph=True`` (``second_backward_is_a_clear_error``);
``retain_graph=True`` allows it, with the same gradients, and keeps the
activations (``retain_graph_allows_a_second_backward``,
``retain_graph_true_keeps_the_activations``); parameters keep their data and
gradients (``parameters_keep_data_and_gradients``); training is bit for bit
stage 05's (``gradients_bit_identical_to_stage05``).

``test_stage_memory.py`` runs those objects on every stage from 06 on
(``dezero_mini`` included), and ``python -m dezero_mini check 6 FILE`` on a
learner's file. Here: stage 05, which frees nothing during backward, fails
each contract about freeing, so that none of them can pass by accident.
"""
import pytest

from conftest import load
from dezero_mini.contracts import get_stage
from dezero_mini.contracts.stage06 import freed_during_backward, intermediates_alive_at_the_last_backward

CONTRACTS = {contract.name: contract for contract in get_stage(6).contracts}

#: The contracts that stage 05 keeps too: they say what freeing must not change.
KEPT_BY_STAGE05 = {"parameters_keep_data_and_gradients", "gradients_bit_identical_to_stage05"}


def test_stage05_keeps_the_intermediates_alive_until_backward_returns():
    alive, has_grad = intermediates_alive_at_the_last_backward(load("step05_no_grad"))
    assert alive == {"h": True, "s": True} and has_grad


def test_stage06_has_freed_them_when_the_first_ops_backward_runs():
    alive, has_grad = intermediates_alive_at_the_last_backward(load("step06_free_graph"))
    assert alive == {"h": False, "s": False} and has_grad


@pytest.mark.parametrize("name", sorted(set(CONTRACTS) - KEPT_BY_STAGE05))
def test_stage05_fails_every_contract_about_freeing(name):
    """Stage 05's backward has no retain_graph (a TypeError) and frees nothing."""
    contract = CONTRACTS[name]
    try:
        found = contract.check(load("step05_no_grad"))
    except TypeError as error:
        assert "retain_graph" in str(error)
    else:
        assert not found.passed, f"{name} passes on stage 05: {found.measured}"


@pytest.mark.parametrize("name", sorted(KEPT_BY_STAGE05))
def test_stage05_keeps_what_freeing_must_not_change(name):
    assert CONTRACTS[name].check(load("step05_no_grad")).passed


def test_the_bytes_freed_are_the_batch_activations():
    """What ``holds_less_than_stage05_after_backward`` subtracts: the arrays of
    one batch's graph but the parameters, the same on stages 05 and 06."""
    freed = freed_during_backward(load("step06_free_graph"))
    assert freed > 400 * 1024  # x, 2 x 3 hidden, output, target of a 256-sample batch
    assert freed == freed_during_backward(load("step05_no_grad"))
