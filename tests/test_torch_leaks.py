"""``leaks`` on PyTorch scripts: the six leaking loops of examples/pytorch/ and their fixes.

PyTorch is optional (it is not installed by make book or make test: its
default Linux wheel is a multi-gigabyte CUDA build), so these tests are
skipped without it; ``make test-torch`` installs a CPU build and runs them.
The message for a missing torch is tested either way.
"""
import re
import sys
import textwrap
from pathlib import Path

import pytest

from dezero_mini.cli import main

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples" / "pytorch"

#: (example, the name that keeps the graph, what its fix must say, saved tensors kept per step)
PATTERNS = [
    ("total_loss.py", "total_loss", "total_loss += loss.item()", False),
    ("losses_list.py", "losses", "`.item()`", False),
    ("outputs_list.py", "predictions", "torch.no_grad()", True),
    ("hidden_state.py", "h_val", "h_val = h_val.detach()", True),
    ("running_metric.py", "smoothed", "smoothed = smoothed.detach()", True),
    ("activation_cache.py", "model.seen", "`.detach()`", False),
]


def leaks(capsys, *argv):
    code = main(["leaks", *argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.fixture(scope="module")
def torch():
    return pytest.importorskip("torch", reason="PyTorch is not installed (make test-torch)")


@pytest.mark.parametrize("example, name, fix, saves", PATTERNS,
                         ids=[pattern[0] for pattern in PATTERNS])
def test_each_leaking_loop_is_reported_with_its_name_and_fix(torch, capsys, example, name,
                                                             fix, saves):
    code, out, err = leaks(capsys, "--every-step", "--steps", "12", str(EXAMPLES / example))
    assert code == 1, out + err
    reported = [line for line in out.splitlines() if " keeps the graphs of earlier steps" in line]
    assert len(reported) == 1 and reported[0].startswith(f"{name} (a global of {example})")
    growth = next(line for line in out.splitlines() if line.startswith("growth per step: +"))
    assert (", +0 B (cpu) saved for backward" not in growth) == saves, growth
    assert fix in out and "Traceback" not in err


@pytest.mark.parametrize("example", [pattern[0] for pattern in PATTERNS])
def test_each_fixed_loop_is_clean(torch, capsys, example):
    code, out, err = leaks(capsys, "--every-step", "--steps", "12", str(EXAMPLES / example),
                           "--fixed")
    assert code == 0, out + err
    assert "no graph outlives its step" in out or "nothing outlives its step" in out


def test_a_correct_loop_of_1000_steps_is_clean(torch, capsys):
    code, out, _ = leaks(capsys, "--steps", "1001", str(EXAMPLES / "total_loss.py"),
                         "--fixed", "--steps", "1000")
    assert code == 0
    assert "finished after 1000 of the optimizer's steps" in out


def test_the_graph_is_measured_in_nodes_per_step(torch, capsys):
    """total_loss += loss adds the loss's graph (7 nodes of a 2-layer MLP's
    loss, the parameters' AccumulateGrad nodes shared) at every step."""
    code, out, _ = leaks(capsys, "--every-step", "--steps", "10", str(EXAMPLES / "total_loss.py"))
    growth = next(line for line in out.splitlines() if line.startswith("growth per step"))
    assert code == 1 and growth.startswith("growth per step: +7 autograd nodes"), out


def write(tmp_path, text):
    script = tmp_path / "script.py"
    script.write_text(textwrap.dedent(text))
    return script


LOOP = textwrap.dedent("""
    import torch
    w = torch.zeros(3, requires_grad=True)
    optimizer = torch.optim.SGD([w], lr=0.1)
    kept = []
    for step in range(50):
        loss = (w * torch.ones(3)).sum() ** 2
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        kept.append(loss)
""")


@pytest.mark.parametrize("ending, code, said", [
    ("raise ValueError('bad data')", 1, "ValueError: bad data"),
    ("import sys; sys.exit(3)", 3, "ended with sys.exit(3)"),
    ("import sys; sys.exit('fatal: no data')", 1, "fatal: no data"),
    ("import os; os._exit(0)", 1, "ended itself with os._exit(0); the steps it made are judged"),
])
def test_the_scripts_fate_is_its_exit_status(torch, capsys, tmp_path, ending, code, said):
    """A script that fails or cuts itself off is never judged clean: its
    own failure is the exit status, and os._exit(0) after a leak is a leak."""
    script = write(tmp_path, LOOP.replace("range(50)", "range(8)") + ending + "\n")
    status, out, err = leaks(capsys, "--every-step", str(script))
    assert status == code and said in err
    assert "kept (a global of script.py) keeps the graphs of earlier steps" in out, out


def test_a_loop_without_an_optimizer_is_followed_by_its_rounds(torch, capsys, tmp_path):
    script = write(tmp_path, """
        import torch
        w = torch.ones(4, requires_grad=True)
        history = []
        for step in range(20):
            history.append((w * step).sum())   # an evaluation that builds graphs
    """)
    code, out, _ = leaks(capsys, str(script))
    assert code == 1 and "the rounds of the loop at script.py:5" in out
    assert out.count("history (a global of script.py)") == 1


def test_a_local_of_a_running_function_is_named(torch, capsys, tmp_path):
    body = textwrap.indent(LOOP.replace("import torch\n", ""), "    ")
    script = write(tmp_path, "import torch\n\n\ndef train():" + body + "\n\ntrain()\n")
    code, out, err = leaks(capsys, str(script))
    assert code == 1, err
    assert "kept (a local of train() at script.py:" in out


def test_without_torch_the_message_says_how_to_install_it(capsys, tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "torch", None)  # import torch now fails
    script = write(tmp_path, LOOP)
    code, _, err = leaks(capsys, str(script))
    assert code == 2 and "imports torch, which is not installed here" in err
    assert "Traceback" not in err


def test_the_memory_plot_of_a_leaking_and_a_fixed_loop(torch):
    from dezero_mini.memory.torch_leaks import plot_torch_runs, record_torch_script

    script = EXAMPLES / "outputs_list.py"
    leaking = record_torch_script(script, steps=15, label="predictions kept with their graph")
    fixed = record_torch_script(script, "--fixed", steps=15, label="under torch.no_grad()")
    assert len(leaking.nodes) == len(fixed.nodes) == 15
    assert all(b > a for a, b in zip(leaking.nodes, leaking.nodes[1:]))
    assert len(set(fixed.nodes)) == 1
    assert leaking.saved_bytes[-1] > leaking.saved_bytes[0] and len(set(fixed.saved_bytes[2:])) == 1  # after the warm-up
    figure = plot_torch_runs([leaking, fixed])
    for axis in figure.axes:
        assert axis.get_title() and axis.get_xlabel() and axis.get_ylabel()
        legend = [text.get_text() for text in axis.get_legend().get_texts()]
        assert any(leaking.label in text for text in legend)
        assert any(fixed.label in text for text in legend)


def test_the_stored_example_of_lesson_07_shows_the_leak_and_its_fix():
    """What lesson 07 shows where PyTorch is missing (tools/store_torch_example.py
    writes it): a dated run whose report names the leak, and whose records
    show the leaking loop's graph growing and the fixed loop's staying."""
    import datetime
    import json

    from dezero_mini.memory.torch_leaks import EXAMPLE_LABELS, TorchRecord

    stored = json.loads((ROOT / "notebooks" / "stored" / "07_pytorch_leaks.json").read_text())
    datetime.date.fromisoformat(stored["date"])
    assert stored["report"].splitlines()[1].startswith("predictions (a global of outputs_list.py)")
    leaking, fixed = (TorchRecord(**record) for record in stored["records"])
    assert (leaking.label, fixed.label) == EXAMPLE_LABELS
    assert all(b > a for a, b in zip(leaking.nodes, leaking.nodes[1:]))
    assert len(set(fixed.nodes)) == 1 and len(set(fixed.saved_bytes[2:])) == 1  # after the warm-up


def _counts(old_nodes, plain=None):
    from dezero_mini.memory.torch_census import StepCount

    plain = plain or [0] * len(old_nodes)
    return [StepCount(step=index + 1, graph_tensors=1, old_graph_tensors=0, graph_bytes=4,
                      plain_tensors=cached, plain_bytes=64 * cached, nodes=10 + old,
                      old_nodes=old, rss=None, device=None)
            for index, (old, cached) in enumerate(zip(old_nodes, plain))]


@pytest.mark.parametrize("old_nodes, leaking", [
    ([0, 0, 7, 14, 21, 28, 35, 42], True),  # total_loss += loss
    ([0, 0, 7, 14, 14, 21, 28, 35], True),  # one step without growth: still persistent
    ([0, 9, 18, 27, 27, 27, 27, 27], False),  # grew in the warm-up, then flat (a bounded deque)
    ([0, 0, 5, 0, 5, 0, 5, 0], False),  # a graph kept one step at a time
    ([0, 0, 0, 0, 0, 0, 0, 0], False),
    ([0, 0, 0, 0, 0, 3, 6, 9], False),  # three rises in five: not yet persistent
])
def test_a_leak_is_growth_of_old_nodes_that_persists(torch, old_nodes, leaking):
    from dezero_mini.memory.torch_leaks import judge

    assert judge(_counts(old_nodes)).leaking is leaking


def test_a_growing_cache_of_detached_tensors_is_no_leak_of_graphs(torch):
    from dezero_mini.memory.torch_leaks import judge

    growth = judge(_counts([0] * 8, plain=list(range(8))))
    assert not growth.leaking and growth.detached_cache and growth.plain_bytes == 64


def test_too_few_steps_are_not_judged(torch):
    from dezero_mini.memory.torch_leaks import judge

    assert judge(_counts([0, 0, 7, 14])) is None


def test_no_tensor_is_turned_into_text_while_a_loop_is_watched(torch, capsys, tmp_path,
                                                              monkeypatch):
    """optimizer.state is keyed by the parameters: a walk that names keys by
    their repr built every parameter's text at every step (13.9x with Adam)."""
    made = []
    real_repr = torch.Tensor.__repr__

    def counting_repr(tensor, *args, **kwargs):
        made.append(1)
        return real_repr(tensor, *args, **kwargs)

    monkeypatch.setattr(torch.Tensor, "__repr__", counting_repr)
    script = write(tmp_path, LOOP.replace("torch.optim.SGD([w], lr=0.1)",
                                          "torch.optim.Adam([w], lr=0.1)"))
    code, out, _ = leaks(capsys, "--every-step", "--steps", "12", str(script))
    assert code == 1 and "kept (a global of script.py)" in out
    assert made == []


def test_the_plot_command_writes_the_counts_whole(torch, capsys, tmp_path):
    picture = tmp_path / "memory.svg"
    code, out, _ = leaks(capsys, "--every-step", "--steps", "8", "--plot", str(picture),
                         str(EXAMPLES / "activation_cache.py"))
    text = picture.read_text()
    assert code == 1 and f"memory plot written to {picture}" in out
    for title in ("what outlives its step (graphs kept)", "training step", "KiB", "MiB",
                  "without (detached caches)"):
        assert title in text
    assert [path.name for path in tmp_path.iterdir()] == ["memory.svg"]  # no temporary left


@pytest.mark.parametrize("name", ["memory.txt", "missing-folder/memory.png"])
def test_a_bad_plot_file_is_refused_before_the_run(capsys, tmp_path, name):
    with pytest.raises(SystemExit) as ended:
        main(["leaks", "--plot", str(tmp_path / name), str(EXAMPLES / "total_loss.py")])
    err = capsys.readouterr().err
    assert ended.value.code == 2 and "--plot" in err and "Traceback" not in err


#: (script, what the growth line says of the bytes kept per step)
BYTES = [
    # predictions of a 2-layer MLP kept without backward: the holder keeps the
    # 32x1 outputs; their graphs saved the 32x32 hidden activations besides.
    (EXAMPLES / "outputs_list.py", "+128 B (cpu) of tensors with a graph that the holder keeps, "
                                   "+4.0 KiB (cpu) saved for backward by their graphs besides,"),
    # backward ran through the kept losses: what their nodes saved is freed.
    (EXAMPLES / "total_loss.py", "+0 B (cpu) saved for backward by their graphs besides "
                                 "(backward freed what "),
    # the holder keeps the hidden activations too: counted once, on its side.
    ("""
        import torch
        torch.manual_seed(0)
        first, second = torch.nn.Linear(8, 32), torch.nn.Linear(32, 1)
        optimizer = torch.optim.SGD([*first.parameters(), *second.parameters()], lr=0.01)
        kept = []
        for step in range(40):
            x = torch.randn(32, 8)
            hidden = torch.tanh(first(x))
            out = second(hidden)
            loss = out.pow(2).mean()
            optimizer.zero_grad()
            loss.backward(retain_graph=True)
            optimizer.step()
            kept.append((hidden, out))
    """, "+4.1 KiB (cpu) of tensors with a graph that the holder keeps, +1.0 KiB (cpu) saved for "
         "backward by their graphs besides,"),
]


@pytest.mark.parametrize("script, said", BYTES, ids=["outputs", "freed", "hidden kept"])
def test_the_bytes_per_step_are_what_the_holder_keeps_and_what_its_graphs_saved(
        torch, capsys, tmp_path, script, said):
    """Once per storage, per step, by device: the tensors that the holder
    keeps, and what their graphs saved for backward besides them (the x of
    the third case: 32x8 floats)."""
    if isinstance(script, str):
        script = write(tmp_path, script)
    code, out, _ = leaks(capsys, "--every-step", "--steps", "12", str(script))
    growth = next(line for line in out.splitlines() if line.startswith("growth per step"))
    assert code == 1 and said in growth, growth


def test_the_device_line_reads_cuda_memory_and_says_it_is_untested(torch, capsys, tmp_path,
                                                                  monkeypatch):
    """No GPU runs these tests: torch.cuda is faked, so that the code path
    that reads torch.cuda.memory_allocated at each step runs, and the line
    it prints says that it was never run on a GPU."""
    allocated = iter(range(1 << 20, 1 << 30, 1 << 16))  # 1 MiB, then +64 KiB per read
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "memory_allocated", lambda *args: next(allocated))
    code, out, _ = leaks(capsys, "--every-step", "--steps", "8", str(write(tmp_path, LOOP)))
    device = next(line for line in out.splitlines() if line.startswith("device memory"))
    assert code == 1 and "UNTESTED: no GPU has run leaks' tests" in device, out
    assert "1.0 MiB at the first step" in device and "1.4 MiB at the last" in device, device


# --- the holder walk, by family, on objects built here (no script is run)

#: (path as the walk writes it, the holder a report names)
CONTAINER_PATHS = [
    ("snapshots[5][2]", "snapshots"),
    ("pending_logs[3].args", "pending_logs"),
    ("step_of_output.<a key>", "step_of_output"),
    ("predictions_by_step['step1']", "predictions_by_step"),
    ("optimizer.param_groups[0]['loss_history'][3]", "optimizer.param_groups[0]['loss_history']"),
    ("trainer.args", "trainer.args"),  # a user's attribute named args stays
]


@pytest.mark.parametrize("path, holder", CONTAINER_PATHS)
def test_a_holder_is_the_container_not_its_item(path, holder):
    from dezero_mini.memory.torch_holders import container_of

    assert container_of(path) == holder


def _named(torch, leaked, module):
    """(path, kind, chain) of the first chain from ``module``'s globals to ``leaked``."""
    from dezero_mini.memory.torch_holders import holder_chains, holder_kind, holder_path

    chains = holder_chains(leaked, module)
    assert chains, "no holder found"
    kind = holder_kind(chains[0])
    return holder_path(chains[0], kind), kind, chains[0]


def _script_module(tmp_path, **names):
    import types

    module = types.ModuleType("__main__")
    module.__file__ = str(tmp_path / "train.py")
    module.__dict__.update(names)
    return module


def test_an_lru_cache_is_named_as_the_cache_of_its_function(torch, tmp_path):
    import functools

    weight = torch.ones(3, requires_grad=True)

    @functools.lru_cache(maxsize=None)
    def predict(index):
        return weight * index

    results = [predict(index) for index in range(4)]
    module = _script_module(tmp_path, predict=predict)
    path, kind, _ = _named(torch, results[:1], module)
    assert (path, kind) == ("the lru_cache of predict()", "cache")


def test_a_suspended_generator_is_named_by_its_local_and_its_holder(torch, tmp_path):
    def running_mean():
        total = 0
        while True:
            loss = yield total
            total = total + loss

    tracker = running_mean()
    next(tracker)
    tracker.send(torch.ones((), requires_grad=True) * 2)
    module = _script_module(tmp_path, tracker=tracker)
    frame = tracker.gi_frame
    path, kind, chain = _named(torch, [frame.f_locals["total"]], module)
    del frame
    assert (path, kind) == ("total", "name")
    assert chain.root.startswith("a local of the suspended generator running_mean()")
    assert chain.held_by == "tracker, a global of train.py"


def test_a_hook_registered_again_and_again_is_named_by_its_hook_dict(torch, tmp_path):
    model = torch.nn.Sequential(torch.nn.Linear(2, 2))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(3):
        output = model(torch.ones(1, 2))
        model[0].weight.register_hook(lambda grad, kept=output: grad)
    leaked = [output]
    del output
    module = _script_module(tmp_path, optimizer=optimizer, model=model)  # optimizer first
    path, kind, _ = _named(torch, leaked, module)
    assert (path, kind) == ("model[0].weight._backward_hooks", "hook")


def test_a_custom_functions_ctx_kept_in_a_list_is_a_holder(torch, tmp_path):
    class Double(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * 2

        @staticmethod
        def backward(ctx, grad):
            return grad * 2

    contexts = []
    for _ in range(2):
        contexts.append(Double.apply(torch.ones(2, requires_grad=True) * 3).grad_fn)
    module = _script_module(tmp_path, contexts=contexts)
    path, kind, _ = _named(torch, contexts[:1], module)
    assert (path, kind) == ("contexts", "node")


def test_a_dict_of_hooks_no_python_object_refers_to_is_named_as_kept_from_cpp(torch, tmp_path):
    anchor = (torch.ones(2, requires_grad=True) * 2).sum()
    kept = torch.ones(2, requires_grad=True) * 3
    anchor.grad_fn.register_hook(lambda grad_inputs, grad_outputs, kept=kept: None)
    module = _script_module(tmp_path, anchor=anchor)
    leaked = [kept]
    del kept
    path, kind, chain = _named(torch, leaked, module)
    assert (path, kind) == ("<a dict of 1 hooks kept from C++>", "cpp")
    assert "no Python object refers to it" in chain.root


def test_an_unnamed_leak_says_what_holds_it_and_is_never_clean(torch):
    from dezero_mini.cli.leaks_torch import report_lines
    from dezero_mini.memory.torch_census import StepCount
    from dezero_mini.memory.torch_leaks import Finding, Growth, StepSeries

    series = StepSeries("the optimizer's steps", "step", counts=[
        StepCount(step, 1, 1, 64 * step, 6, 384, 5 * step, 5 * step, None, None)
        for step in range(2, 12)])
    series.steps = 12
    finding = Finding(series=series, growth=Growth(leaking=True, steps=5, nodes=5.0),
                      tensors=9, nodes=35, unnamed="no Python object refers to them: "
                      "PyTorch keeps them from C++")
    lines, verdict = report_lines(finding, "train.py", "finished")
    assert verdict == 1
    assert "no Python name holds the growing graph: 9 tensors with a graph reach 35 " \
           "autograd nodes of earlier steps; no Python object refers to them" in lines[1]
    assert lines[2].startswith("growth per step: +5 autograd nodes")


#: Leaking scripts of the suite whose holder's path goes through a hook dict
#: (keyed by the id of each hook's handle, a count of every hook the process
#: ever registered), or whose holder line gives a count of the process's
#: registrations (finalizers, atexit).
SAME_REPORT_TWICE = ["leak_forward_hook_closure.py", "leak_param_hook_every_step.py",
                     "leak_global_forward_hook.py", "leak_node_hook_from_cpp.py",
                     "leak_weakref_finalize.py", "leak_atexit_register.py"]


@pytest.mark.parametrize("script", SAME_REPORT_TWICE)
def test_the_same_script_gets_the_same_holder_lines_twice(torch, capsys, script):
    """Two runs of the same leaking script in one process name its holder
    the same way: a hook by its function, not by its handle's id
    (``model[1]._forward_hooks[7]`` one run, ``[19]`` the next)."""
    from torch.nn.modules import module

    suite = ROOT / "tests" / "torch_leak_suite"
    hooks_before = {name: dict(value) for name, value in vars(module).items()
                    if name.startswith("_global_") and isinstance(value, dict)}
    holders = []
    for _ in range(2):
        try:
            code, out, err = leaks(capsys, "--steps", "12", str(suite / script))
        finally:  # (leak_global_forward_hook.py registers global hooks: gone before the next)
            for name, before in hooks_before.items():
                current = getattr(module, name)
                for key in [key for key in current if key not in before]:
                    del current[key]
        assert code == 1, out + err
        holders.append([line for line in out.splitlines()
                        if " keeps the graphs of earlier steps: " in line])
    assert holders[0] and holders[0] == holders[1], holders
    assert not re.search(r"hooks\[\d+\]", holders[0][0]), holders[0]


#: (--steps, --consecutive or None, the steps in a row compared, the note's words or None)
CONSECUTIVE_WITHIN_STEPS = [
    ("10", "9", 6, "note: --consecutive 9 is more than the 6 steps in a row that --steps 10 "
                   "leaves to compare"),
    ("30", "1000", 26, "comparing 26 (--steps 1004 would compare 1000)"),
    ("6", None, 2, None),  # the default, taken down in silence
    ("10", "6", 6, None),
]


@pytest.mark.parametrize("steps, consecutive, compared, note", CONSECUTIVE_WITHIN_STEPS)
def test_consecutive_beyond_what_the_steps_compare_is_taken_down_with_a_note(
        torch, capsys, monkeypatch, steps, consecutive, compared, note):
    """``--consecutive`` above the steps in a row that ``--steps`` leaves after
    the warm-up was silently cut by the judgement; it is taken as those, with a
    note (as ``--jobs`` above the processors is)."""
    from dezero_mini.memory import torch_leaks

    given = {}
    real_judge = torch_leaks.judge
    monkeypatch.setattr(torch_leaks, "judge", lambda counts, consecutive=5: (
        given.setdefault("consecutive", consecutive), real_judge(counts, consecutive))[1])
    argv = ["--steps", steps, *(["--consecutive", consecutive] if consecutive else []),
            str(EXAMPLES / "total_loss.py")]
    code, out, err = leaks(capsys, *argv)
    assert code == 1 and given["consecutive"] == compared, (given, out, err)
    notes = [line for line in err.splitlines() if "note:" in line]
    assert notes == ([] if note is None else notes[:1]) and len(notes) <= 1, err
    if note is not None:
        assert note in notes[0], err


def test_every_holder_kind_has_a_fix_of_its_own():
    """Each kind that ``holder_kind`` can name has its entry in the one FIXES
    table: a new kind (finalize, atexit and signal were named, then given the
    generic container or C++ text) cannot fall back on another kind's fix."""
    import ast
    import inspect

    from dezero_mini.cli.leaks_torch import FIXES
    from dezero_mini.memory import torch_holders

    tree = ast.parse(inspect.getsource(torch_holders.holder_kind))
    kinds = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Return) and node.value is not None:
            kinds.update(constant.value for constant in ast.walk(node.value)
                         if isinstance(constant, ast.Constant) and isinstance(constant.value, str))
    assert {"finalize", "atexit", "signal", "hook", "cpp"} <= kinds  # (the walk finds them)
    assert kinds - set(FIXES) == set()
