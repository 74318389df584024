"""Find and import the stages of the course: one module object per stage.

A stage is a step file ``steps/stepNN_<name>.py`` (a full snapshot of the
framework at that point of the course) or the finished package
``dezero_mini``. Each step file is imported as a top-level module named after
the file (``step01_leaking_graph``) and registered in ``sys.modules``: the
tests (which put ``steps/`` on ``sys.path``), the notebooks and the
instruments then all share ONE module object per stage. That matters for
memory: two copies of a stage would have two ``Variable`` classes, and an
instrument counting one class would not see the other's objects.
"""
import importlib
import importlib.util
import os
import re
import sys
import types
from pathlib import Path
from dezero_mini.validation import expect_stage_module

_STEP_FILE = re.compile(r"^step(\d\d)_(\w+)\.py$")


def steps_dir():
    """The directory of the step files: ``$DEZERO_MINI_STEPS`` if set, else
    ``steps/`` at the root of the repository that holds this package (an
    editable install), else the first ``steps/`` in the working directory or
    one of its parents (a notebook runs in ``notebooks/``)."""
    override = os.environ.get("DEZERO_MINI_STEPS")
    if override:
        return Path(override).resolve()
    beside_package = Path(__file__).resolve().parents[2] / "steps"
    if beside_package.is_dir():
        return beside_package
    cwd = Path.cwd().resolve()
    for folder in (cwd, *cwd.parents):
        if (folder / "steps").is_dir():
            return folder / "steps"
    return beside_package  # absent: the error messages name where we looked


def _discover():
    """Every step file as (number, name, path), in course order."""
    directory = steps_dir()
    if not directory.is_dir():
        return []
    found = []
    for path in directory.glob("step*_*.py"):
        match = _STEP_FILE.match(path.name)
        if match:
            found.append((int(match.group(1)), match.group(2), path))
    return sorted(found)


#: The stages present in ``steps/``: an ordered list of (number, name),
#: e.g. ``[(1, "leaking_graph"), (2, "cycles"), ...]``.
STAGES = [(number, name) for number, name, _ in _discover()]


def _valid_stages_text(found):
    listed = ", ".join(f"{n} / {name!r}" for n, name, _ in found) or "(no step files found)"
    return f"valid stages: {listed}, or 'dezero_mini' (steps directory: {steps_dir()})"


def _match(stage, found):
    """The (number, name, path) that ``stage`` designates, or None."""
    if isinstance(stage, bool):  # True is an int; it is not a stage number
        return None
    if isinstance(stage, int):
        return next((f for f in found if f[0] == stage), None)
    text = str(stage).strip().lower()
    if text.endswith(".py"):
        text = text[:-3]
    for number, name, path in found:
        module_name = f"step{number:02d}_{name}"
        aliases = {module_name, f"step{number:02d}", f"{number:02d}", str(number), name}
        if text in aliases:
            return number, name, path
    return None


def _import_step(module_name, path):
    """Import a step file under ``module_name``, or reuse the module already
    imported under that name (by ``import`` with ``steps/`` on sys.path, or
    by an earlier call)."""
    existing = sys.modules.get(module_name)
    if existing is not None:
        existing_file = getattr(existing, "__file__", None)
        if existing_file and Path(existing_file).resolve() != path.resolve():
            raise ImportError(
                f"{module_name} is already imported from {existing_file}, not from {path}: "
                "two copies of a stage would have two Variable classes"
            )
        return existing
    spec = importlib.util.spec_from_file_location(module_name, path)
    module = importlib.util.module_from_spec(spec)
    # Registered before it runs, as the import system does, so that a step
    # importing itself (or a second load_stage call) finds this same object.
    sys.modules[module_name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[module_name]
        raise
    return module


def load_stage(stage):
    """Return the module of a stage of the course.

    ``stage`` may be a number (``1`` ... ``5``), a string naming it in any of
    the forms ``"01"``, ``"step01"``, ``"leaking_graph"``,
    ``"step01_leaking_graph"``, or ``"dezero_mini"`` for the finished
    package. A module is returned unchanged, so every instrument can take a
    stage or a module. Raises ValueError, listing the valid stages, for
    anything else.
    """
    if isinstance(stage, types.ModuleType):
        return stage
    if isinstance(stage, str) and stage.strip().lower() == "dezero_mini":
        return importlib.import_module("dezero_mini")
    found = _discover()
    match = _match(stage, found)
    if match is None:
        raise ValueError(f"unknown stage {stage!r}; {_valid_stages_text(found)}")
    number, name, path = match
    return _import_step(f"step{number:02d}_{name}", path)


def stage_label(module):
    """A short human label for a stage module, e.g. ``"stage 03 (weakref outputs)"``."""
    expect_stage_module(module, "stage_label")
    stage = getattr(module, "STAGE", None)
    title = getattr(module, "STAGE_TITLE", None)
    if stage is None:
        return module.__name__
    if stage == "dezero_mini":
        return "dezero_mini"
    return f"stage {stage} ({title})" if title else f"stage {stage}"


def stage_path(stage):
    """The step file of a stage of the course (a number or a name, as for
    ``load_stage``), without importing it. Raises ValueError, listing the
    valid stages, for a stage that has no step file."""
    found = _discover()
    match = _match(stage, found)
    if match is None:
        raise ValueError(f"unknown stage {stage!r}; {_valid_stages_text(found)}")
    return match[2]


def load_stage_file(path, module_name=None):
    """Import any Python file as a stage module (a learner's own
    ``step04_retain_grad.py``, say) and return it.

    The module is registered in ``sys.modules`` under ``module_name``
    (default: the file's name without ``.py``), like a step of ``steps/``,
    so that it has one ``Variable`` class however often it is looked up. A
    name already taken by another file raises ImportError: pass another
    ``module_name``. FileNotFoundError for a file that does not exist;
    whatever the file raises while it runs comes out unchanged.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"load_stage_file: no such file: {str(path)!r}")
    if module_name is None:
        module_name = path.stem
    if not module_name.isidentifier():
        raise ValueError(f"load_stage_file: {module_name!r} is not a valid module name; "
                         "pass module_name=")
    return _import_step(module_name, path)
