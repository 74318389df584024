"""The leak finder: find_leaks, the ``leaks`` command and the warning mode.

Each leaking loop keeps the graph of every batch through a different kind
of holder; the finder must say how much survives per iteration and name the
holder. Signals are counts of live framework objects, with the cyclic
collector disabled: deterministic.
"""
import builtins
import subprocess
import sys
import textwrap
import warnings

import numpy as np
import pytest

import dezero_mini
from dezero_mini import cli, environment, leak_warning
from dezero_mini.memory import find_leaks, load_stage
from dezero_mini.memory.leaks import LeakReport
from dezero_mini.memory.tracking import ACTIVE

from conftest import collector_disabled, keeps_only_what_backward_reads, stage_number, stages_that_change

# The leak finder walks gc.get_referrers back from the graphs: over what the test made,
# not the whole test process (conftest.made_before_frozen).
pytestmark = pytest.mark.usefixtures("made_before_frozen")

# Stage 03 on (its outputs are weak references: a graph is kept only by what a loop
# holds), on the stages that change the framework these tests use: stage 10's step
# file only adds checkpoint() to stage 08's, so its graphs are stage 08's
# (conftest.stages_that_change; it checks that from the step files).
STAGES = stages_that_change(3)
# The loops of lesson 07 on stage 07 and the stages after it that change them (as above).
LOOP_STAGES = stages_that_change(7)


def held_by_inputs(path, start):
    """Whether ``path`` goes from ``start`` (``"total_loss.creator."``) into the
    Function's inputs: ``inputs[``, or from stage 08 on, where the graph links
    Functions, ``next_functions[``."""
    return path.startswith(start + "inputs[") or path.startswith(start + "next_functions[")


class Net:
    """A one-layer regression built from a stage's API: ``loss(i)`` builds
    the graph of batch ``i``, ``step(i)`` trains on it and returns the loss."""

    def __init__(self, module):
        self.m = module
        rng = np.random.RandomState(0)
        self.W = module.Variable(rng.randn(3, 2))
        self.b = module.Variable(np.zeros(2))

    def forward(self, x):
        m = self.m
        return m.sigmoid(m.add(m.matmul(x, self.W), self.b))

    def loss(self, i):
        rng = np.random.RandomState(i)
        x, t = self.m.Variable(rng.randn(4, 3)), self.m.Variable(rng.randn(4, 2))
        return self.m.mean_squared_error(self.forward(x), t)

    def step(self, i):
        loss = self.loss(i)
        self.W.cleargrad()
        self.b.cleargrad()
        loss.backward()
        for p in (self.W, self.b):
            g = p.grad if isinstance(p.grad, np.ndarray) else p.grad.data
            p.data -= 0.1 * g
        return loss


def graph_size(net):
    """Variables and Functions in the graph that one training step builds
    and its backward adds (gradients of the inputs, in dezero_mini)."""
    with find_leaks() as finder:
        kept = [net.step(i) for i in range(4)]
    size = finder.report.objects_per_iteration
    del kept
    return size


@pytest.fixture
def collector_off():
    """The collector off during the test, as ``gc_disabled`` does, without its
    collection before: the leak finder counts only the objects born in the
    loop it watches (dezero_mini.memory.tracking), so what earlier tests left
    does not count, and a full collection of a test process's heap is the
    longest part of most of these tests. What the test made is collected after."""
    with collector_disabled(collect_first=False):
        yield


@pytest.fixture(params=STAGES)
def net(request, collector_off):
    return Net(load_stage(request.param if request.param != "dezero_mini" else "dezero_mini"))


# --- The four loops of the lesson, and a clean one ----------------------------------------
def test_total_loss_plus_equals_loss(net):
    total_loss = 0
    with find_leaks() as finder:
        for i in range(8):
            loss = net.step(i)
            total_loss += loss
    report = finder.report
    assert report.leaking
    assert report.iterations == 6  # 8 backward() calls: the first starts, the last may keep
    assert report.largest.root.name == "total_loss"
    assert report.largest.root.kind == "local"
    assert held_by_inputs(report.largest.path, "total_loss.creator.")
    assert "test_total_loss_plus_equals_loss()" in report.largest.root.where
    # Every batch leaves its whole graph and the Add that joined it to the total
    # (from stage 08 on the Add holds the loss's creator, not the loss: one
    # object of the graph for one Add).
    joined = 0 if keeps_only_what_backward_reads(net.m) else 2
    assert report.objects_per_iteration >= graph_size(net) + joined
    assert "total_loss" in str(report)


def test_in_place_update_of_a_variable_in_the_graph(net):
    """Seed 003's ``val += x``: no backward at all, so the iterations are
    marked by hand."""
    m = net.m
    rng = np.random.RandomState(0)
    val = m.Variable(np.zeros(1))
    with find_leaks() as finder:
        for _ in range(6):
            val += m.Variable(rng.rand(1))
            finder.step()
    report = finder.report
    assert report.leaking
    assert report.unit == "step"
    assert report.largest.root.name == "val"
    assert held_by_inputs(report.largest.path, "val.creator.")
    if not keeps_only_what_backward_reads(m):
        assert report.objects_per_iteration == 3  # one Add, its input and its output
        assert report.bytes_per_iteration == 16  # two float64 arrays of one element
    else:  # the Add keeps shapes: its leaf input stays, the old sum goes
        assert report.objects_per_iteration == 2
        assert report.bytes_per_iteration == 8


def test_a_graph_held_through_the_third_input_of_a_function(collector_off):
    """dezero_mini's Function keeps the edges of its inputs in slots of its
    own, those after the second in one flat tuple (core.Function): the chain
    through a third input is still the one link the lesson names,
    ``next_functions[2][0]``, and so are the first two."""
    x = dezero_mini.Variable(np.ones((2, 3)))
    W = dezero_mini.Variable(np.ones((3, 2)))
    acc = dezero_mini.Variable(np.zeros((2, 2)))
    with find_leaks() as finder:
        for _ in range(6):
            acc = dezero_mini.functions.linear(x, W, acc)  # the old sum is the bias: input 2
            finder.step()
    report = finder.report
    assert report.leaking
    assert report.largest.path == "acc.creator.next_functions[2][0]"
    assert "._more_edges" not in "\n".join(report.largest.describe())
    first = dezero_mini.Variable(np.zeros((2, 2)))
    with find_leaks() as finder:
        for _ in range(6):
            first = first * 2.0  # the old product is input 0
            finder.step()
    assert finder.report.largest.path == "first.creator.next_functions[0][0]"


def test_losses_kept_in_a_dict_of_lists_for_logging(net):
    class Trainer:
        def __init__(self):
            self.history = {"loss": []}

    trainer = Trainer()
    with find_leaks() as finder:
        for i in range(6):
            trainer.history["loss"].append(net.step(i))
    report = finder.report
    assert report.leaking
    # One graph per judged batch (1 to 4: the first mark starts the count,
    # the last batch may keep its graph), each held separately.
    paths = sorted(graph.path for graph in report.graphs)
    assert paths == [f"trainer.history['loss'][{i}]" for i in range(1, 5)]
    assert all(graph.root.name == "trainer" for graph in report.graphs)
    assert report.objects == 4 * report.graphs[0].objects


def test_outputs_kept_by_an_attribute_cache_keyed_by_batch(net):
    class Model:
        def __init__(self, net):
            self.net = net
            self.cache = {}

        def __call__(self, i, x):
            y = self.net.forward(x)
            self.cache[f"batch{i}"] = y  # "for the plots": every output stays
            return y

    model = Model(net)
    with find_leaks() as finder:
        for i in range(5):
            y = model(i, net.m.Variable(np.ones((4, 3))))
            net.m.sum(y).backward()
    report = finder.report
    assert report.leaking
    assert {graph.path for graph in report.graphs} == {f"model.cache['batch{i}']" for i in (1, 2, 3)}


def test_last_output_kept_by_a_closure(net):
    def make_logger():
        outputs = []

        def log(y):
            outputs.append(y)

        return log

    log = make_logger()
    with find_leaks() as finder:
        for i in range(5):
            log(net.step(i))
    report = finder.report
    assert report.leaking
    largest = report.largest
    assert largest.root.name == "log"
    assert largest.path.startswith("log.__closure__[0].cell_contents[")
    assert any("closure variable 'outputs'" in note for note in largest.notes)


def test_a_clean_loop_reports_nothing(net):
    total_loss = 0.0
    with find_leaks() as finder:
        for i in range(8):
            loss = net.step(i)
            total_loss += float(loss.data)  # a number: the graph goes with the next batch
    report = finder.report
    assert not report.leaking
    assert report.objects == 0 and report.graphs == []
    assert len(set(report.counts[1:])) == 1  # the same count at every backward()
    assert str(report).startswith("no leak")


# --- The loops of lesson 07 (dezero_mini.memory.user_loops) -------------------------------------
LESSON07_ROOTS = {  # the loop object is named ``loop``; the leak is one of its attributes
    "total_loss": "loop.total_loss.creator.",
    "running_sum": "loop.input_sum.creator.",
    "history": "loop.history[",
    "last_output": "loop.model.cache[",
}


@pytest.mark.parametrize("stage", LOOP_STAGES)
@pytest.mark.parametrize("name", list(LESSON07_ROOTS))
def test_find_leaks_names_the_root_of_each_lesson07_loop(name, stage, collector_off):
    """Iterations marked by hand: loops 1 and 3 never call backward() per batch."""
    from dezero_mini.memory.user_loops import LOOPS

    for fixed in (False, True):
        loop = LOOPS[name](load_stage(stage), fixed=fixed, batch_size=16)
        with find_leaks() as finder:
            for i in range(6):
                loop.step(i)
                finder.step()
        report = finder.report
        assert report.leaking is not fixed, str(report)
        if not fixed:
            assert report.largest.root.name == "loop"
            root = LESSON07_ROOTS[name]
            assert (held_by_inputs(report.largest.path, root) if root.endswith(".creator.")
                    else report.largest.path.startswith(root)), report.largest.path
        del loop, finder, report


LESSON07_SCRIPT = """
    from dezero_mini.memory.user_loops import LOOPS

    # Loop 1 as the lesson writes it: backward once, at the end of each epoch.
    loop = LOOPS[{name!r}]({stage!r}, fixed={fixed}, batch_size=16,
                           **({{"epoch_batches": 8}} if {name!r} == "total_loss" else {{}}))
    for epoch in range(2):
        for i in range(8):
            loop.step(i)
"""


@pytest.mark.parametrize("fixed", [False, True])
@pytest.mark.parametrize("stage", LOOP_STAGES)
@pytest.mark.parametrize("name", list(LESSON07_ROOTS))
def test_leaks_on_the_lesson07_loops(capsys, tmp_path, name, stage, fixed):
    """Every shape: one backward per batch (2, 4), one per epoch (1), none (3)."""
    path = script(tmp_path, LESSON07_SCRIPT.format(name=name, stage=stage, fixed=fixed))
    out = run_leaks_expecting(capsys, path, fixed)
    if not fixed:
        assert "after iteration 6 of the loop at train.py:8, live Variables and Functions " \
               "have grown at each of the last 5" in out
        assert f"held by {LESSON07_ROOTS[name]}" in out
        assert f"(loop: a global of {path.name})" in out


# --- Shapes that the lesson does not show ----------------------------------------------------
def log_with_default(y, seen=[]):  # noqa: B006 (the leak under test)
    seen.append(y)


class Memo:
    by_batch = {}  # a class attribute: shared by every instance, lives as long as the class


def batch_keeper():
    kept = []
    while True:
        kept.append((yield))


@pytest.mark.holder_made_before  # a global of this module
def test_a_default_argument_keeps_the_graphs(net):
    with find_leaks() as finder:
        for i in range(5):
            log_with_default(net.step(i))
    largest = finder.report.largest
    assert largest.root.name == "log_with_default" and largest.root.kind == "global"
    assert largest.path.startswith("log_with_default.__defaults__[0][")
    assert any("default value of the parameter 'seen'" in note for note in largest.notes)
    log_with_default.__defaults__[0].clear()


@pytest.mark.holder_made_before  # a global of this module
def test_a_class_attribute_keeps_the_graphs(net):
    def one_batch():
        Memo.by_batch[len(Memo.by_batch)] = net.step(len(Memo.by_batch))

    try:
        report = find_leaks(one_batch, repeat=4)
    finally:
        Memo.by_batch.clear()
    assert report.leaking and report.unit == "call"
    assert report.largest.path.startswith("Memo.by_batch[")
    assert any("class attribute Memo.by_batch" in note for note in report.largest.notes)


def test_a_suspended_generator_keeps_the_graphs(net):
    keeper = batch_keeper()
    next(keeper)
    with find_leaks() as finder:
        for i in range(5):
            keeper.send(net.step(i))
    largest = finder.report.largest
    assert largest.root.name == "keeper"
    assert largest.path.startswith("keeper.gi_frame.f_locals['kept'][")
    assert any("suspended generator batch_keeper()" in note for note in largest.notes)
    keeper.close()


running_total = None


def record(loss):
    global running_total
    running_total = loss if running_total is None else running_total + loss


def test_a_global_rebound_inside_a_helper_function(net):
    global running_total
    with find_leaks() as finder:
        for i in range(5):
            record(net.step(i))
    largest = finder.report.largest
    running_total = None
    assert largest.root == ("global", "running_total", __name__)
    assert held_by_inputs(largest.path, "running_total.creator.")


# --- What the finder is not fooled by ----------------------------------------------------------
def test_one_graph_kept_on_purpose_is_not_growth(net):
    best = None
    with find_leaks() as finder:
        for i in range(6):
            loss = net.step(i)
            if i == 2:
                best = loss  # one graph, kept once
    report = finder.report
    assert report.objects > 0 and not report.leaking
    assert report.largest.root.name == "best"
    assert str(report).startswith("no growth, but kept")
    del best


def test_parameters_made_on_the_first_batch_do_not_count(collector_off):
    """dezero_mini's Linear makes its weights on its first call."""
    from dezero_mini import layers, optimizers

    F = dezero_mini.functions
    model = layers.Linear(2)  # in_size unknown until the first batch
    optimizer = optimizers.SGD(lr=0.1).setup(model)
    x, t = np.ones((4, 3)), np.zeros((4, 2))
    with find_leaks() as finder:
        for _ in range(5):
            loss = F.mean_squared_error(model(x), t)
            model.cleargrads()
            loss.backward()
            optimizer.update()
    assert not finder.report.leaking


def test_too_few_iterations_are_not_judged(net):
    kept = []
    with find_leaks() as finder:
        for i in range(2):
            kept.append(net.step(i))
    report = finder.report
    assert not report.leaking and report.iterations == 0
    assert "too few iterations" in str(report)


def test_a_clean_function_called_several_times(net):
    report = find_leaks(lambda: net.step(0), repeat=4)
    assert isinstance(report, LeakReport)
    assert not report.leaking and report.iterations == 3


def test_bad_arguments_are_named():
    with pytest.raises(TypeError, match="find_leaks: fn must be callable"):
        find_leaks(42)
    with pytest.raises(ValueError, match="find_leaks: repeat"):
        find_leaks(lambda: None, repeat=1)
    with pytest.raises(ValueError, match="find_leaks: slack"):
        find_leaks(slack=-1)


# --- The hooks come off ----------------------------------------------------------------------
def test_the_framework_classes_are_left_as_they_were(collector_off):
    m = load_stage(5)
    before = {cls: dict(vars(cls)) for cls in (m.Variable, m.Function, m.Pow,
                                               dezero_mini.Variable, dezero_mini.Function)}
    build_class = builtins.__build_class__
    with find_leaks() as finder:
        class Twice(m.Function):  # defined inside the block: its objects count too
            def __init__(self, k):
                self.k = k  # no super().__init__()

            def forward(self, x):
                return x * self.k

            def backward(self, gy):
                return gy * self.k

        kept = []
        for _ in range(4):
            kept.append(Twice(2)(m.Variable(np.ones(1))))
            finder.step()
    assert finder.report.objects_per_iteration == 3  # the Function, its input, its output
    assert not ACTIVE
    assert builtins.__build_class__ is build_class
    for cls, namespace in before.items():
        assert dict(vars(cls)) == namespace, cls
    assert m.Variable(np.ones(1)).data.shape == (1,)  # constructors still work


def test_the_report_draws_the_chain_with_a_root_box(net):
    losses = []
    with find_leaks() as finder:
        for i in range(4):
            losses.append(net.step(i))
    graph = finder.report.graph()
    root = next(node for node in graph.nodes if node.kind == "name")
    assert root.title == finder.report.largest.path
    assert root.title in graph.highlight
    assert '#d4f2dc' in graph.source  # the filled green box of the root
    drawn = sum(node.kind in ("variable", "function") for node in graph.nodes)
    # The surviving graph, and the parameters it reaches (alive before the
    # loop; with gradients that are Variables, those too). From stage 06 on,
    # backward has freed what each kept loss reached: the loss and its
    # creator survive, and reach no parameter any more.
    frees = stage_number(net.m) >= 6
    assert drawn - finder.report.largest.objects in ((0,) if frees else (2, 4))
    assert not graph.garbage


# --- The command line --------------------------------------------------------------------------
def run_cli(capsys, *argv):
    try:
        code = cli.main(["leaks", *map(str, argv)])
    except SystemExit as stop:
        code = stop.code
    out, err = capsys.readouterr()
    return code, out, err


def run_leaks_expecting(capsys, path, fixed):
    """Run ``leaks`` on path; a fixed loop exits 0 with "no leak", a leaking
    one 1. Returns what it printed."""
    code, out, err = run_cli(capsys, path)
    if fixed:
        assert code == 0, out + err
        assert "no leak" in out and "held by" not in out
    else:
        assert code == 1, out + err
    return out


def script(tmp_path, body, name="train.py"):
    path = tmp_path / name
    path.write_text(textwrap.dedent(body))
    return path


TRAINING = """
    import numpy as np
    import dezero_mini.functions as F
    from dezero_mini import models, optimizers

    np.random.seed(0)
    x = np.random.rand(50, 1)
    y = np.sin(2 * np.pi * x)
    model = models.MLP((10, 1))
    optimizer = optimizers.SGD(lr=0.2).setup(model)
"""


def training_script(tmp_path, before, keep, batches=12, after=""):
    """A script that trains a small MLP for ``batches`` batches; the line
    ``keep`` ends each batch (with ``loss`` in hand)."""
    return script(tmp_path, TRAINING + f"""
    {before}
    for i in range({batches}):
        loss = F.mean_squared_error(model(x), y)
        model.cleargrads()
        loss.backward()
        optimizer.update()
        {keep}
    {after}
    """)


def test_leaks_finds_total_loss_and_exits_1(capsys, tmp_path):
    path = training_script(tmp_path, "total_loss = 0", "total_loss += loss",
                           after='print("trained")')
    code, out, err = run_cli(capsys, path)
    assert code == 1, err
    assert "trained" in out
    # Reported during the run (after 5 growing iterations) and at the end.
    assert out.count("=== dezero_mini leaks") == 2
    assert "live Variables and Functions have grown at each of the last 5" in out
    assert "held by total_loss.creator.next_functions[" in out
    # One link a Function: not the list of edges and the edge in between.
    assert "      .next_functions[0][0]  Add" in out and "tuple of 2" not in out
    assert "the graph links Functions, not the Variables between them" in out
    assert "(total_loss: a global of train.py)" in out
    assert "objects and" in out and "per iteration" in out


@pytest.mark.parametrize("before, keep, path", [
    ("total_loss = 0", "total_loss += loss", "total_loss.creator.next_functions["),
    ("val = dezero_mini.Variable(np.zeros(()))", "val += loss", "val.creator.next_functions["),
    ("history = {'loss': []}", "history['loss'].append(loss)", "history['loss']["),
    ("outputs = {}", "outputs[f'batch{i}'] = model(x)", "outputs['batch"),
    ("class Recorder:\n        kept = []", "Recorder.kept.append(loss)", "Recorder.kept["),
    ("def log(y, seen=[]):\n        seen.append(y)", "log(loss)", "log.__defaults__[0]["),
])
def test_leaks_names_the_root_of_each_shape(capsys, tmp_path, before, keep, path):
    script_path = training_script(tmp_path, "import dezero_mini\n    " + before, keep, batches=8)
    code, out, err = run_cli(capsys, script_path)
    assert code == 1, out + err
    assert f"held by {path}" in out


def test_leaks_finds_a_list_in_a_function_of_a_stage_module(capsys, tmp_path):
    path = script(tmp_path, """
    import numpy as np
    from dezero_mini.memory import load_stage

    m = load_stage(4)

    def train(batches):
        W = m.Variable(np.ones((3, 1)))
        history = []
        for i in range(batches):
            loss = m.sum(m.matmul(m.Variable(np.ones((2, 3))), W))
            W.cleargrad()
            loss.backward()
            history.append(loss)  # kept "for the plot"
        return len(history)

    train(8)
    """)
    code, out, _ = run_cli(capsys, "--consecutive", 3, path)
    assert code == 1
    assert "held by history[" in out
    assert "(history: a local variable of train() at train.py:" in out


def test_leaks_says_nothing_grows_for_a_clean_loop_and_exits_0(capsys, tmp_path):
    path = training_script(tmp_path, "total_loss = 0.0", "total_loss += float(loss.data)")
    code, out, err = run_cli(capsys, path)
    assert code == 0, out + err
    assert "finished after 12 iterations" in out
    assert "no leak" in out and "held by" not in out


# --- Loops that never call backward() once per batch, in the script's own shapes ----------------
MODEL = """
    import numpy as np
    import dezero_mini.functions as F
    from dezero_mini import Variable, models

    np.random.seed(0)
    x = np.random.rand(50, 1)
    y = np.sin(2 * np.pi * x)
    model = models.MLP((10, 1))
"""
SHAPES = {  # name: (body after MODEL, the line of the loop, the fixed line, what names the root)
    # The write-up's bare loop: a running value updated with a Variable of the graph.
    "val += x": ("""
    W = Variable(np.random.rand(3, 3))
    val = Variable(np.array(0.0))
    for i in range(10):
        x = F.sum(F.matmul(Variable(np.ones((1, 3)) * i), W))
        val += x
    """, "val += x", "val.data += x.data", "held by val.creator.next_functions["),
    "an evaluation loop keeping losses in a dict": ("""
    history = {"loss": []}
    for i in range(10):
        loss = F.mean_squared_error(model(x), y)
        history["loss"].append(loss)
    """, 'history["loss"].append(loss)', 'history["loss"].append(loss.item())',
        "held by history['loss']["),
    "a loop inside a function of the script": ("""
    def evaluate(batches):
        losses = []
        for i in range(batches):
            losses.append(F.mean_squared_error(model(x), y))
        return len(losses)

    evaluate(10)
    """, "losses.append(F.mean_squared_error(model(x), y))",
        "losses.append(float(F.mean_squared_error(model(x), y)))",
        "(losses: a local variable of evaluate() at train.py:"),
    "a while loop": ("""
    total_loss, step = 0, 0
    while step < 10:
        loss = F.mean_squared_error(model(x), y)
        total_loss += loss
        step += 1
    """, "total_loss += loss", "total_loss += loss.item()", "held by total_loss.creator.next_functions["),
}


@pytest.mark.parametrize("fixed", [False, True])
@pytest.mark.parametrize("shape", list(SHAPES))
def test_leaks_finds_loops_without_backward(capsys, tmp_path, shape, fixed):
    body, leaking_line, fixed_line, says = SHAPES[shape]
    assert leaking_line in body
    if fixed:
        body = body.replace(leaking_line, fixed_line)
    out = run_leaks_expecting(capsys, script(tmp_path, MODEL + body), fixed)
    if not fixed:
        assert out.count("=== dezero_mini leaks") == 2  # during the run and at the end
        assert says in out


def test_leaks_judges_each_nested_loop_on_its_own(capsys, tmp_path):
    """An epoch loop around a batch loop: the batch loop grows within each
    epoch, and the epoch's end frees it all (the lesson's loop 1)."""
    path = script(tmp_path, MODEL + """
    for epoch in range(3):
        total_loss = 0
        for i in range(7):
            total_loss += F.mean_squared_error(model(x), y)
        model.cleargrads()
        total_loss.backward()
    """)
    code, out, err = run_cli(capsys, path)
    assert code == 1, out + err
    assert "after iteration 6 of the loop at train.py:13" in out  # the batch loop
    # At the end, nothing of it is left: the epoch's backward let it go.
    assert "no leak: nothing made during" in out
    assert "but the growth reported above was real: 1 report during the run" in out
    assert "held by total_loss.creator.next_functions[" in out


def test_leaks_falls_back_to_backward_where_the_loop_is_in_another_module(capsys, tmp_path):
    script(tmp_path, """
    import numpy as np
    import dezero_mini

    def train(batches):
        W = dezero_mini.Variable(np.ones((3, 1)))
        history = []
        for i in range(batches):
            loss = dezero_mini.functions.sum(
                dezero_mini.functions.matmul(dezero_mini.Variable(np.ones((2, 3))), W))
            W.cleargrad()
            loss.backward()
            history.append(loss)
        return len(history)
    """, name="my_trainer.py")
    path = script(tmp_path, "import my_trainer\nmy_trainer.train(8)\n", name="run.py")
    code, out, err = run_cli(capsys, "--consecutive", 3, path)
    sys.modules.pop("my_trainer", None)
    assert code == 1, out + err
    assert "of the backward() calls" in out
    assert "(history: a local variable of train() at my_trainer.py:" in out


def test_a_loop_that_makes_no_framework_object_is_not_compared(capsys, tmp_path):
    path = script(tmp_path, """
    total = 0
    for i in range(100_000):
        total += i
    """)
    code, out, err = run_cli(capsys, path)
    assert code == 0, out + err
    assert "its loops went round at most 100000 times, and it never called backward()" in out


def test_only_loop_statements_are_marked_not_comprehensions():
    from dezero_mini.cli.leaks import compile_with_loop_marks

    _, loops = compile_with_loop_marks(textwrap.dedent("""
        squares = [i * i for i in range(3)]
        for i in range(2):
            pass
        def f():
            n = 0
            while n < 3:
                n += sum(j for j in range(n))
        async def g(xs):
            async for x in xs:
                pass
    """), "train.py")
    assert sorted(loop.line for loop in loops) == [3, 7, 10]
    assert [loop.depth for loop in loops] == [0, 0, 0]  # a function's loop is in no other


def test_the_scripts_tracebacks_keep_their_line_numbers(capsys, tmp_path):
    path = script(tmp_path, """
    for i in range(3):
        if i == 2:
            raise RuntimeError('broken batch')
    """)
    code, _, err = run_cli(capsys, path)
    assert code == 1  # Python's own status for an uncaught exception
    assert 'train.py", line 4' in err and "RuntimeError: broken batch" in err


def test_leaks_passes_the_arguments_to_the_script(capsys, tmp_path):
    path = script(tmp_path, """
    import sys
    print("argv:", sys.argv[1:], __name__)
    """)
    code, out, _ = run_cli(capsys, path, "--epochs", 3)
    assert code == 0
    assert "argv: ['--epochs', '3'] __main__" in out
    assert "no loop of train.py went round, and it never called backward()" in out


@pytest.mark.parametrize("body, message, status", [
    ("x = 1 +\n", "SyntaxError", 2),  # cannot be run at all
    ("def main():\n    raise RuntimeError('broken batch')\nmain()\n",
     "RuntimeError: broken batch", 1),  # ran and failed: Python's status
])
def test_leaks_shows_the_scripts_own_traceback(capsys, tmp_path, body, message, status):
    path = script(tmp_path, body)
    code, _, err = run_cli(capsys, path)
    assert code == status
    assert message in err
    assert "train.py" in err
    assert "leaks.py" not in err  # the script's traceback, not ours


@pytest.mark.parametrize("argv, message", [
    (["no_such_script.py"], "the script 'no_such_script.py' does not exist"),
    (["--consecutive", "0", "x.py"], "--consecutive"),
    (["--consecutive", "1", "x.py"], "from 2 to 1000"),
    # No upper bound once (a streak no loop reaches); --steps below what can be
    # judged (it ran the script and said "not judged: too few steps").
    (["--consecutive", "1001", "x.py"], "must be a whole number from 2 to 1000, got '1001'"),
    (["--consecutive", str(10**30), "x.py"], "from 2 to 1000"),
    (["--steps", "5", "x.py"], "--steps: must be a whole number of at least 6, got '5'"),
    (["--steps", "1", "x.py"], "at least 6"),
    ([], "SCRIPT"),
])
def test_leaks_exits_2_for_a_bad_command_line(capsys, tmp_path, argv, message):
    code, _, err = run_cli(capsys, *argv)
    assert code == 2
    assert message in err


def test_leaks_has_help(capsys):
    code, out, _ = run_cli(capsys, "--help")
    assert code == 0
    assert out.startswith("usage: dezero_mini leaks")
    assert "--consecutive" in out and "exit status" in out


def test_python_dash_m_dezero_mini_leaks_in_a_subprocess(tmp_path):
    path = training_script(tmp_path, "losses = {}", "losses[i] = loss", batches=8)
    done = subprocess.run([sys.executable, "-m", "dezero_mini", "leaks", str(path)],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 1, done.stderr
    assert "held by losses[" in done.stdout


# --- The warning mode --------------------------------------------------------------------------
@pytest.fixture
def warn_leaks(collector_off):
    """Config.warn_leaks is restored, and the watch reset, after the test."""
    leak_warning.reset()
    old = dezero_mini.Config.warn_leaks
    yield
    dezero_mini.Config.warn_leaks = old
    leak_warning.reset()


def train(batches, keep):
    from dezero_mini import models, optimizers

    F = dezero_mini.functions
    np.random.seed(0)
    x, y = np.random.rand(20, 1), np.random.rand(20, 1)
    model = models.MLP((5, 1))
    optimizer = optimizers.Adam().setup(model)
    for _ in range(batches):
        loss = F.mean_squared_error(model(x), y)
        model.cleargrads()
        loss.backward()
        optimizer.update()
        keep(loss)


def test_the_warning_mode_warns_once_with_the_chain(warn_leaks):
    dezero_mini.Config.warn_leaks = 3
    history = []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        train(12, history.append)
    leaks = [w for w in caught if issubclass(w.category, leak_warning.GraphLeakWarning)]
    assert len(leaks) == 1
    message = str(leaks[0].message)
    assert "grown at each of the last 3 optimizer updates" in message
    assert "held by history[" in message
    assert leaks[0].filename == __file__  # the learner's line, not the optimizer's
    assert not ACTIVE  # after warning, nothing is watched any more


def test_the_warning_mode_is_silent_on_a_clean_loop(warn_leaks):
    dezero_mini.Config.warn_leaks = 3
    numbers = []
    with warnings.catch_warnings():
        warnings.simplefilter("error", leak_warning.GraphLeakWarning)
        train(12, lambda loss: numbers.append(float(loss.data)))


def test_the_warning_mode_is_off_by_default_and_then_watches_nothing(warn_leaks):
    assert environment.warn_leaks_setting({}) == 0
    dezero_mini.Config.warn_leaks = 0
    history = []
    with warnings.catch_warnings():
        warnings.simplefilter("error", leak_warning.GraphLeakWarning)
        train(12, history.append)
    assert leak_warning._watch is None and not ACTIVE
    assert "__init__" in vars(dezero_mini.Variable)  # the class's own, not wrapped
    assert not hasattr(vars(dezero_mini.Variable)["__init__"], "__wrapped__")


def test_the_environment_variable_sets_the_default():
    assert environment.warn_leaks_setting({"DEZERO_MINI_WARN_LEAKS": " 4 "}) == 4
    assert environment.warn_leaks_setting({"DEZERO_MINI_WARN_LEAKS": ""}) == 0
    with pytest.raises(ValueError, match="DEZERO_MINI_WARN_LEAKS='often'"):
        environment.warn_leaks_setting({"DEZERO_MINI_WARN_LEAKS": "often"})


def test_the_environment_variable_turns_the_warning_on_in_a_new_process(tmp_path):
    path = script(tmp_path, """
    import dezero_mini
    from test_leaks import train
    print("warn_leaks =", dezero_mini.Config.warn_leaks)
    kept = []
    train(10, kept.append)
    """)
    env = {**__import__("os").environ, "DEZERO_MINI_WARN_LEAKS": "4",
           "PYTHONPATH": str(__import__("pathlib").Path(__file__).parent)}
    done = subprocess.run([sys.executable, str(path)], capture_output=True, text=True,
                          timeout=600, env=env)
    assert done.returncode == 0, done.stderr
    assert "warn_leaks = 4" in done.stdout
    assert done.stderr.count("GraphLeakWarning") == 1
    assert "held by kept[" in done.stderr


def test_plot_for_a_script_without_torch_says_nothing_is_drawn(capsys, tmp_path):
    """--plot draws the steps of a PyTorch script; given for a dezero_mini
    one, it was silently ignored (the learner looked for the file)."""
    path = tmp_path / "train.py"
    path.write_text("print('no loop')\n")
    code, _, err = run_cli(capsys, "--plot", str(tmp_path / "memory.png"), path)
    assert code == 0, err
    assert err.strip().endswith("note: --plot draws the counts of a PyTorch script; train.py "
                                "does not import torch, so nothing is drawn"), err
    assert not (tmp_path / "memory.png").exists()
