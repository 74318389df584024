"""Stage 08: a Function keeps only what its backward reads; the check mode.

The stage's contract (shapes not arrays, outputs not inputs, the check on
built-in and careless Functions, reads_sometimes, fewer bytes at the start
of backward than stage 07, ``__slots__``) is defined once in
``dezero_mini.contracts.stage08`` and run by ``test_stage_memory.py``. Here:
every gradient case of ``test_gradients.py`` with the check mode on, the
check's messages, the environment variable, both workloads of the lesson,
and what ``__slots__`` saves per Function.
"""
import copy
import os
import subprocess
import sys

import numpy as np
import pytest

from conftest import STEPS, load
from dezero_mini.contracts import get_stage
from dezero_mini.memory import (ResidualStack, Workload, dict_twin, object_footprint,
                                record_step_timeline)
from test_gradients import CASES, check_gradients

STAGE = "step08_saved_tensors"
KIB = 1024


@pytest.fixture
def m():
    module = load(STAGE)
    with module.using_config("check_saved", True):
        yield module


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_every_function_passes_the_check_and_the_numerical_gradient(m, case):
    _, fn, shapes, positive = case
    check_gradients(m, fn, shapes, positive)


def test_training_passes_the_check(m):
    workload = ResidualStack(m, depth=4)
    losses = [workload.train_step(i) for i in range(30)]
    assert losses[-1] < losses[0]


def test_stage07_fails_the_checks_that_are_about_what_it_keeps():
    module = load("step07_user_held_graphs")
    failed = {c.name for c in get_stage(8).contracts if not c.check(module).passed}
    assert failed == {c.name for c in get_stage(8).contracts}


# --- the check's messages -------------------------------------------------------------------
def _error(run):
    with pytest.raises(RuntimeError) as info:
        run()
    return str(info.value)


def test_a_dezero_style_function_that_never_reads_its_inputs_is_named(m):
    class Scale(m.Function):  # DeZero's way: no saves, so it keeps self.inputs
        def forward(self, x, s):
            return x * 3.0

        def backward(self, gy):
            return gy * 3.0, np.zeros(())

    x = m.Variable(np.ones(3))
    message = _error(lambda: m.sum(Scale()(x, np.array(1.0))).backward())
    assert message.startswith("check_saved: Scale holds inputs[0], inputs[1] that its "
                              "backward never reads")
    assert "reads_sometimes" in message


def test_an_input_read_for_its_shape_only_is_named(m):
    class ShapeAdd(m.Function):
        def forward(self, x0, x1):
            return x0 + x1

        def backward(self, gy):
            x0, x1 = self.inputs
            return m.reduce_to_shape(gy, x0.shape), m.reduce_to_shape(gy, x1.shape)

    a, b = m.Variable(np.ones((2, 3))), m.Variable(np.ones(3))
    message = _error(lambda: m.sum(ShapeAdd()(a, b)).backward())
    assert ("ShapeAdd holds the arrays of inputs[0], inputs[1] but its backward reads only "
            "their shapes") in message


def test_a_dezero_style_function_that_reads_its_inputs_passes(m):
    class Cube(m.Function):
        def forward(self, x):
            return x**3

        def backward(self, gy):
            x = self.inputs[0].data
            return 3 * x**2 * gy

    x = m.Variable(np.array([1.0, 2.0]))
    m.sum(Cube()(x)).backward()
    np.testing.assert_array_equal(x.grad, [3.0, 12.0])


def test_a_saved_value_read_through_a_method_counts_as_read(m):
    class Double(m.Function):
        saves = ("factor",)

        def forward(self, x):
            self.factor = np.full_like(x, 2.0)
            return 2.0 * x

        def scale(self, gy):
            return gy * self.factor

        def backward(self, gy):
            return self.scale(gy)

    x = m.Variable(np.ones(2))
    m.sum(Double()(x)).backward()
    np.testing.assert_array_equal(x.grad, [2.0, 2.0])


def test_the_check_is_off_by_default_and_on_with_the_environment_variable():
    code = ("import sys; sys.path.insert(0, sys.argv[1]); "
            "import step08_saved_tensors as s; print(s.Config.check_saved)")
    seen = {}
    for value in ("", "1"):
        env = {**os.environ, "DEZERO_MINI_CHECK_SAVED": value}
        done = subprocess.run([sys.executable, "-c", code, str(STEPS)], env=env,
                              capture_output=True, text=True, check=True)
        seen[value] = done.stdout.strip()
    assert seen == {"": "False", "1": "True"}


# --- memory ----------------------------------------------------------------------------------
def _at_backward_start(stage, make):
    module = load(stage)
    record_step_timeline(module, workload=make(module), count_objects=False)  # first-time caches
    return record_step_timeline(module, workload=make(module),
                                count_objects=False).at_backward_start


@pytest.mark.parametrize("make, at_least", [
    (Workload, 2.0),                              # 461 KiB against 200 KiB
    (lambda m: ResidualStack(m, depth=32), 2.5),  # 6.5 MiB against 2.3 MiB
], ids=["standard", "residual-stack"])
def test_the_graph_holds_fewer_bytes_at_the_start_of_backward(make, at_least):
    before = _at_backward_start("step07_user_held_graphs", make)
    after = _at_backward_start(STAGE, make)
    assert before >= at_least * after, (before, after)


def test_the_residual_stack_keeps_one_array_per_block_instead_of_three():
    per_block = {}
    for stage in ("step07_user_held_graphs", STAGE):
        shallow = _at_backward_start(stage, lambda m: ResidualStack(m, depth=8))
        deep = _at_backward_start(stage, lambda m: ResidualStack(m, depth=24))
        per_block[stage] = (deep - shallow) / 16
    activation = Workload(load(STAGE)).activation_nbytes  # 64 KiB
    assert per_block[STAGE] == pytest.approx(activation, rel=0.05)
    assert per_block["step07_user_held_graphs"] == pytest.approx(3 * activation, rel=0.05)


def test_slots_functions_have_no_dict_and_weigh_less():
    module = load(STAGE)
    slotted = [cls for cls in vars(module).values()
               if isinstance(cls, type) and issubclass(cls, module.Function)
               and cls is not module.Function]
    assert len(slotted) >= 17
    for cls in slotted:
        assert "__slots__" in vars(cls), cls.__name__
    assert not hasattr(module.Add(), "__dict__")

    x = module.Variable(np.ones((256, 32)))
    b = module.Variable(np.zeros(32))
    add = module.add(x, b).creator  # a graph node: generation, next_functions, outputs, shapes
    slots = object_footprint(lambda: copy.copy(add))
    plain = object_footprint(lambda: dict_twin(add))
    assert not slots.has_dict and plain.has_dict
    assert slots.getsizeof < plain.getsizeof
    assert slots.traced < plain.traced < plain.traced_with_dict
    # Asking a slotted object for its __dict__ makes nothing: the same bytes per
    # object, to within what the allocator's own bookkeeping adds now and then
    # (under 1 byte per object over 2,000; a dictionary would add 48 or more).
    assert abs(slots.traced - slots.traced_with_dict) < 1
