"""Shared fixtures: every stage of the course as an importable module.

A stage is a step module (``steps/stepNN_<name>.py``) or the finished package
``dezero_mini``. Tests that state a property "from stage N on" take the
``stage_from`` helper so that every later stage is checked too.
"""
import ast
import contextlib
import functools
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

TOOLS = ROOT / "tools"
if str(TOOLS) not in sys.path:
    # The course's tools (check_site, site_browser, student_edition, ...) are
    # scripts, not a package: their tests import them from here.
    sys.path.insert(0, str(TOOLS))

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


@functools.lru_cache(maxsize=None)
def _statements(name):
    """The top-level statements of step file ``name``, as AST dumps, and the
    names they bind; its docstring, STAGE, STAGE_TITLE and its
    ``if __name__ == "__main__":`` demonstration left out (they describe the
    stage; no code of the framework reads them)."""
    tree = ast.parse((STEPS / f"{name}.py").read_text(encoding="utf-8"))
    kept = []
    for node in tree.body:
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            continue  # a docstring
        if isinstance(node, ast.Assign) and [ast.unparse(t) for t in node.targets] in (["STAGE"], ["STAGE_TITLE"]):
            continue
        if isinstance(node, ast.If) and ast.unparse(node.test) in ('__name__ == "__main__"', "__name__ == '__main__'"):
            continue
        kept.append(node)
    return tuple(kept)


def _binds(node):
    """The names a top-level statement binds, or None when it may do more than
    bind new names (a call, an assignment to an attribute, ...)."""
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return {node.name}
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        return {(alias.asname or alias.name).split(".")[0] for alias in node.names}
    if isinstance(node, (ast.Assign, ast.AnnAssign)):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        if all(isinstance(t, ast.Name) for t in targets):
            return {t.id for t in targets}
    return None


def only_adds_to(name, base):
    """Whether step file ``name`` holds every top-level statement of step file
    ``base`` unchanged and adds nothing but definitions of names that ``base``
    does not bind (functions, classes, imports, plain assignments). Then code
    that calls only ``base``'s names (a training loop, a contract of ``base``'s
    stage or earlier) runs the very same code on both, and measuring it on
    ``name`` again adds nothing."""
    base_statements = _statements(base)
    dumps = {ast.dump(node) for node in base_statements}
    base_names = set().union(*(_binds(node) or set() for node in base_statements))
    for node in _statements(name):
        if ast.dump(node) in dumps:
            dumps.discard(ast.dump(node))
            continue
        binds = _binds(node)
        if binds is None or binds & base_names:
            return False
    return not dumps


def _step_name(number):
    return next((n for n in STEP_NAMES if n.startswith(f"step{number:02d}_")), None)


@functools.lru_cache(maxsize=None)
def stages_that_change(first):
    """``stages_from(first)`` without the step modules that only add to the
    stage they build on (``only_adds_to``: stage 09 adds the planner to 08,
    stage 10 adds ``checkpoint`` to 08, each leaving 08's framework as it is).
    ``first`` itself and ``dezero_mini`` (the framework learners use) are
    always kept. For the measurements that use only what stage ``first``
    has: the stages left out would run them on the same code again."""
    from dezero_mini.contracts import get_stage

    kept = []
    for name in stages_from(first):
        if name != "dezero_mini" and name[4:6] != f"{int(first):02d}":
            base = _step_name(get_stage(int(name[4:6])).builds_on)
            if base is not None and only_adds_to(name, base):
                continue
        kept.append(name)
    return tuple(kept)


@contextlib.contextmanager
def collector_disabled(collect_first=True):
    """The cyclic collector off inside the block (after a collection, unless
    ``collect_first`` is False); what the block left is collected after it,
    and the collector restored."""
    was_enabled = gc.isenabled()
    if collect_first:
        gc.collect()
    gc.disable()
    try:
        yield
    finally:
        gc.collect()
        if was_enabled:
            gc.enable()


@pytest.fixture
def gc_disabled():
    """Leave freeing to reference counting alone; restore the collector after."""
    with collector_disabled():
        yield


@pytest.fixture(scope="module", autouse=True)
def _earlier_modules_frozen():
    """What the test process holds when a test module starts (pytest, NumPy,
    matplotlib, every test module, what earlier modules' tests kept: hundreds of
    thousands of objects) frozen out of the collector's generations
    (``gc.freeze``), after one collection. Each ``gc.collect()``, live-object
    count and ``gc.get_referrers`` walk of a test then visits what this module's
    tests made, as in a smaller process, not everything the run has loaded (it
    made the in-process measurements 2-3 times slower in a full run than alone).
    Nothing is unfrozen after: the next module freezes what this one left.
    A test whose leak is held by an object made before the module started (a
    global of the test module) is marked ``holder_made_before``: the
    ``made_before_frozen`` fixture unfreezes the process for it."""
    gc.collect()
    gc.freeze()
    yield


@pytest.fixture
def made_before_frozen(request):
    """What the test process holds when the test starts frozen out of the
    collector's generations for the test (``gc.freeze``, no collection first:
    both moves cost nothing), and put back after it. The collections, counts
    and ``gc.get_referrers`` walks of the test then visit what the test made.
    ``gc.get_referrers`` does not see a frozen referrer: a test whose leak is
    held by an object made before it (a global of the test module) is marked
    ``holder_made_before`` and runs unfrozen."""
    if request.node.get_closest_marker("holder_made_before"):
        gc.unfreeze()  # _earlier_modules_frozen froze the module's globals
        try:
            yield
        finally:
            gc.freeze()
        return
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


@pytest.fixture(autouse=True)
def _clear_stage01_registry():
    """Stage 01 remembers every object ever made; forget them between tests so
    that one test's leak does not become the next test's floor."""
    yield
    module = sys.modules.get("step01_leaking_graph")
    if module is not None:
        module.REGISTRY.clear()


# ---------------------------------------------------------------- hypothesis' profiles
# `make test` runs the property tests with the examples each asks for (hypothesis'
# default profile, or the max_examples of its @settings); `make test-deep` passes
# --hypothesis-profile=deep: DEEP_FACTOR times as many examples for every one of them.
DEEP_FACTOR = 10

try:
    from hypothesis import settings as _hypothesis_settings
except ImportError:  # hypothesis comes with the test extra; the book's venv lacks it
    _hypothesis_settings = None
else:
    _hypothesis_settings.register_profile(
        "deep", max_examples=DEEP_FACTOR * _hypothesis_settings.default.max_examples, deadline=None)


# ------------------------------------------------------------------- the slow tests
# What `make test-quick` (-m "not slow") leaves out, by file and test name (a prefix of
# the name, parameters aside; "" for every test of the file), with why. Listed here,
# in one place, rather than as a mark in each file.
SLOW = {
    "test_notebooks.py": ("test_notebook_runs", "test_prose_figure", "test_kernel_runs",
                          "test_a_failing_cell", "test_book_"),  # a Jupyter kernel, nbconvert, mdBook
    "test_site.py": ("test_site_", "test_landing_page", "test_browser_checks"),  # the book, Chromium
    "test_solutions.py": ("test_solution_runs", "test_the_command_line_runs"),  # a Python process per exercise
    # the checker on whole stage files, each in child processes that record trainings
    "test_checker.py": ("test_checker_on_a_learner_file", "test_steps_themselves_pass",
                        "test_an_endless_loop", "test_a_file_that_exits"),
    "test_cli.py": ("test_train_reaches", "test_train_defaults", "test_memory_writes"),  # real trainings
    "test_instruments.py": ("test_gc_enabled_run", "test_plot_timeline", "test_timeline_passes",
                            "test_report_puts"),  # long recordings and plots
    "test_stage08_saved_tensors.py": ("test_stage07_fails_the_checks",),  # the checker on stage 07
    "test_explore.py": ("test_in_a_live_kernel", "test_the_static_cell"),  # a Jupyter kernel, figures
    "test_stage_memory.py": ("test_contract_holds", "test_records_have", "test_graph_size"),  # 200-batch records
    "test_stage07_user_held_graphs.py": ("test_a_loop", "test_a_running", "test_a_cache", "test_stage05",
                                         "test_the_fixed_loop", "test_the_leak"),  # 20-batch records
    # the learner's loop: the real checker on every stage's starting file, grade, progress
    "test_learner_paths.py": ("test_check_of_the_file", "test_lesson_01s", "test_progress_checks",
                              "test_every_grading_path"),
    # DeZero's book programs and unit tests, when a clone of its repository is given
    "test_dezero_book_runner.py": ("test_every_book_program", "test_dezero_unit_tests"),
    # a command in a child process, stopped by a real signal in the middle of a slowed write
    "test_interrupted_writes.py": ("test_a_signal_in_the_middle_of_a_write",),
    # train and memory run for real on a pseudo-terminal and on pipes
    "test_progress_display.py": ("test_a_long_wait_", "test_each_long_unit_"),
}


def _mark_slow(items, whole_files):
    """Mark the items that SLOW names; a name in SLOW that matches no test of
    its file is an error when whole files were collected (no ``file::test``
    argument), so that the table cannot go stale."""
    unmatched = {(file, prefix) for file, prefixes in SLOW.items() for prefix in prefixes}
    files = set()
    for item in items:
        file = Path(str(item.fspath)).name
        files.add(file)
        for prefix in SLOW.get(file, ()):
            if getattr(item, "originalname", item.name).startswith(prefix):
                item.add_marker(pytest.mark.slow)
                unmatched.discard((file, prefix))
    stale = sorted(f"{file}: {prefix}" for file, prefix in unmatched if file in files)
    if stale and whole_files:
        raise pytest.UsageError(f"conftest.SLOW names tests that do not exist: {', '.join(stale)}")


# ------------------------------------------------------------ one run of the notebooks
def pytest_configure(config):
    """Name this test run for tools/notebook_cache.py (its RUN_VARIABLE), before
    pytest-xdist starts the test processes, which inherit it: under
    DEZERO_MINI_FRESH_NOTEBOOKS=1 (make test-deep), a notebook that one test process
    has run again is then reused by the other, not run a third time. And, in the
    process that draws the terminal, print the tests' progress lines (``ProgressLines``)."""
    import os
    import uuid

    if not hasattr(config, "workerinput"):  # the main process (a worker inherits the name)
        os.environ.setdefault("DEZERO_MINI_NOTEBOOK_RUN", uuid.uuid4().hex)
        config.pluginmanager.register(ProgressLines(config), "dezero-mini-progress-lines")


# ------------------------------------------------------- a line for each long unit
# Under pytest-xdist a test's own prints go nowhere (its process has no terminal) and
# the terminal shows dots. A test that takes long (a notebook's run, the book's build,
# a solution's process) records one line with its time through ``progress_line``; the
# process that draws the terminal (xdist's controller, or the only process) prints it
# as that test ends, with how many of its kind are done: the first minutes of
# `make test` (the notebooks) then say what ran and how far along the run is.
PROGRESS = "progress"  # the user property (record_property) that carries the line


@pytest.fixture
def progress_line(record_property):
    """``progress_line(text)``: print ``text`` on the terminal when the test ends (its
    time, what it reused), under pytest-xdist too. Call it before the asserts: a test
    that fails says how long it took as well."""
    return lambda text: record_property(PROGRESS, text)


class ProgressLines:
    """Prints the ``progress_line`` of each finished test, numbered among the tests of
    the same function (``[3/11]``), and one line before the first notebook runs."""

    NOTEBOOKS = "tests/test_notebooks.py::test_notebook_runs"

    def __init__(self, config):
        self.config = config
        self.collected = None  # test function (node id without parameters) -> how many
        self.done = {}
        self.announced = False

    def _count(self, nodeids):
        if self.collected is None:  # (each xdist worker collects the same tests)
            self.collected = {}
            for nodeid in nodeids:
                function = nodeid.partition("[")[0]
                self.collected[function] = self.collected.get(function, 0) + 1

    def _write(self, text):
        if self.config.pluginmanager.get_plugin("terminalreporter") is None:
            return  # (-p no:terminal)
        writer = self.config.get_terminal_writer()
        if writer.width_of_current_line:  # after the dots of the tests done so far
            writer.line()
        writer.line(f"    {text}")

    def pytest_collection_finish(self, session):
        self._count(item.nodeid for item in session.items)

    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_node_collection_finished(self, node, ids):
        self._count(ids)

    def pytest_runtest_logstart(self, nodeid, location):
        if not self.announced and nodeid.startswith(self.NOTEBOOKS + "["):
            self.announced = True
            count = (self.collected or {}).get(self.NOTEBOOKS, 0)
            self._write(f"running the {count} notebooks first, each in a Jupyter kernel "
                        "(seconds to a minute each): a line as each one ends")

    def pytest_runtest_logreport(self, report):
        text = dict(report.user_properties).get(PROGRESS)
        if report.when != "call" or text is None:
            return
        function = report.nodeid.partition("[")[0]
        self.done[function] = self.done.get(function, 0) + 1
        total = (self.collected or {}).get(function, 0)
        self._write(f"[{self.done[function]}/{total}] {text}" if total > 1 else text)


# ------------------------------------------------------------ the order of the run
# `make test` runs two test processes (pytest-xdist, --dist loadgroup) that take the
# next unit of work (a test, or every test of one xdist_group) as they finish one, in
# the order of the collection (--no-loadscope-reorder). The run ends with its last
# unit, so the long units go first and the short tests fill the end:
# 1. each notebook's run (a kernel, 2-15 s each), on both processes at once; the book
#    that the site group builds reuses these runs (tools/notebook_cache.py);
# 2. the stage contracts, one group per stage (each stage's training record);
# 3. the built site (the book, then Chromium), once the notebooks have run;
# 4. the loops of stage 07 on each stage (their records);
# 5. the other tests marked slow (child processes, trainings), then the rest.
FIRST = (
    ("test_notebooks.py", "test_notebook_runs"),
    ("group", "bench-"),
    ("group", "site"),
    ("group", "loops-"),
)


def _xdist_group(item):
    marker = item.get_closest_marker("xdist_group")
    if marker is None:
        return None
    return marker.kwargs.get("name", marker.args[0] if marker.args else "")


def _schedule_rank(item):
    """Where ``item`` goes in the run (``FIRST``; then the slow tests; then the rest)."""
    group = _xdist_group(item)
    for rank, (where, prefix) in enumerate(FIRST):
        if where == "group":
            if group is not None and group.startswith(prefix):
                return rank
        elif Path(str(item.fspath)).name == where and getattr(item, "originalname", item.name).startswith(prefix):
            return rank
    return len(FIRST) + (0 if item.get_closest_marker("slow") else 1)


@pytest.hookimpl(tryfirst=True)  # before -k and -m deselect anything
def pytest_collection_modifyitems(config, items):
    """Mark the slow tests (``SLOW``) and put the long ones first (``FIRST``).
    Under hypothesis' deep profile, give the property tests that name their
    own ``max_examples`` DEEP_FACTOR times as many too (a profile alone
    leaves them as they are)."""
    _mark_slow(items, whole_files=not any("::" in arg for arg in config.args))
    items.sort(key=_schedule_rank)  # stable: the collection's order within a rank
    if _hypothesis_settings is None or config.getoption("hypothesis_profile", None) != "deep":
        return
    scaled = set()
    for item in items:
        test = getattr(getattr(item, "obj", None), "__func__", getattr(item, "obj", None))
        if not getattr(test, "is_hypothesis_test", False) or id(test) in scaled:
            continue
        current = getattr(test, "_hypothesis_internal_use_settings", None)
        if current is None:  # where hypothesis keeps a test's settings has moved: say so
            raise pytest.UsageError(f"{item.nodeid}: cannot scale its hypothesis settings for the deep profile")
        if current.max_examples < DEEP_FACTOR * _hypothesis_settings.default.max_examples:
            test._hypothesis_internal_use_settings = _hypothesis_settings(
                current, max_examples=DEEP_FACTOR * current.max_examples)
        scaled.add(id(test))

