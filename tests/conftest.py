"""Shared fixtures: every stage of the course as an importable module.

A stage is a step module (``steps/stepNN_<name>.py``) or the finished package
``dezero_mini``. Tests that state a property "from stage N on" take the
``stage_from`` helper so that every later stage is checked too.
"""
import gc
import importlib
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
STEPS = ROOT / "steps"
if str(STEPS) not in sys.path:
    # The same module names that dezero_mini.memory.load_stage uses, so that
    # tests and instruments share one module object per stage.
    sys.path.insert(0, str(STEPS))

STEP_NAMES = sorted(p.stem for p in STEPS.glob("step[0-9][0-9]_*.py"))


def load(name):
    return importlib.import_module(name)


def stage_number(module):
    return 99 if module.STAGE == "dezero_mini" else int(module.STAGE)


ALL_STAGES = [*STEP_NAMES, "dezero_mini"]


def keeps_only_what_backward_reads(module):
    """Whether the module's Functions keep only what their backward reads and
    link the graph by Functions (stage 08 on): it has ``Config.check_saved``."""
    return hasattr(getattr(module, "Config", None), "check_saved")


def stages_from(first):
    """Names of the stages that carry stage ``first``'s framework, dezero_mini
    last: ``first`` and every later stage that builds on it (``Stage.builds_on``;
    stage 10 builds on 08, so it carries 08 but not 09)."""
    from dezero_mini.contracts import lineage

    return [n for n in ALL_STAGES if n == "dezero_mini" or first in lineage(int(n[4:6]))]


@pytest.fixture
def gc_disabled():
    """Leave freeing to reference counting alone; restore the collector after."""
    was_enabled = gc.isenabled()
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        gc.collect()
        if was_enabled:
            gc.enable()


@pytest.fixture(autouse=True)
def _clear_stage01_registry():
    """Stage 01 remembers every object ever made; forget them between tests so
    that one test's leak does not become the next test's floor."""
    yield
    module = sys.modules.get("step01_leaking_graph")
    if module is not None:
        module.REGISTRY.clear()
