"""The command line: ``python -m dezero_mini train | memory | graph``.

Most tests call ``cli.main`` in this process (fast); one runs the real
``python -m dezero_mini`` in a subprocess.
"""
import csv
import gc
import io
import re
import shutil
import subprocess
import sys

import numpy as np
import pytest

import dezero_mini
from dezero_mini import cli, datasets
from dezero_mini.cli.train import TASKS, load_datasets, train
from dezero_mini.datasets import MNIST, write_idx
from dezero_mini.memory import count_live_objects
from dezero_mini.models import MLP


def run(capsys, *argv):
    """``cli.main(argv)``: (exit code, stdout, stderr), also when argparse exits."""
    try:
        code = cli.main(list(argv))
    except SystemExit as stop:
        code = stop.code
    out, err = capsys.readouterr()
    return code, out, err


def training_set_accuracy(out):
    """The accuracy of the trained model on the training set, from the summary."""
    match = re.search(r"^training set: loss [0-9.]+, accuracy ([0-9.]+)%", out, re.MULTILINE)
    assert match, out
    return float(match.group(1)) / 100


def read_csv(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


# --- The program and its help -----------------------------------------------------------
def test_python_dash_m_prints_help_in_a_subprocess():
    done = subprocess.run([sys.executable, "-m", "dezero_mini", "--help"],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("usage: python -m dezero_mini")
    for command in ("train", "memory", "graph"):
        assert re.search(rf"^\s+{command}\s+\w", done.stdout, re.MULTILINE), done.stdout


def test_version(capsys):
    code, out, _ = run(capsys, "--version")
    assert code == 0
    assert out.strip() == f"dezero_mini {dezero_mini.__version__}"


def test_no_command_prints_help_and_exits_2(capsys):
    code, out, err = run(capsys)
    assert code == 2
    assert out == ""
    assert "usage:" in err and "choose a command" in err


@pytest.mark.parametrize("command, option", [
    ("train", "--optimizer"), ("memory", "--batches"), ("graph", "--after-del")])
def test_every_command_has_help(capsys, command, option):
    code, out, _ = run(capsys, command, "--help")
    assert code == 0
    assert out.startswith(f"usage: dezero_mini {command}")
    assert option in out


@pytest.mark.parametrize("argv, option", [
    (["train", "--epochs", "0"], "--epochs"),
    (["train", "--epochs", "ten"], "--epochs"),
    (["train", "--batch-size", "-5"], "--batch-size"),
    (["train", "--hidden", "30,x"], "--hidden"),
    (["train", "--hidden", "0"], "--hidden"),
    (["train", "--lr", "0"], "--lr"),
    (["train", "--lr", "nan"], "--lr"),
    (["train", "--seed", "-1"], "--seed"),
    (["train", "--optimizer", "rmsprop"], "--optimizer"),
    (["train", "--activation", "gelu"], "--activation"),
    (["train", "--dataset", "cifar"], "--dataset"),
    (["train", "--save", "weights.pkl"], "--save"),
    (["train", "--save", "no/such/folder/w.npz"], "--save"),
    (["train", "--dataset", "mnist"], "--data-dir"),
    (["train", "--data-dir", "."], "--data-dir"),
    (["memory", "--stage", "42"], "--stage"),
    (["memory", "--stage", "1,nonsense"], "--stage"),
    (["memory", "--batches", "0"], "--batches"),
    (["memory", "--out", "plot.jpg"], "--out"),
    (["memory", "--csv", "figures.txt"], "--csv"),
    (["graph", "--stage", "1,2"], "--stage"),
    (["graph", "--out", "graph.txt"], "--out"),
])
def test_bad_arguments_exit_2_naming_the_option(capsys, argv, option):
    code, out, err = run(capsys, *argv)
    assert code == 2
    assert option in err.splitlines()[-1], err  # the error line itself names it
    assert "Traceback" not in err
    assert out == ""


# --- train -------------------------------------------------------------------------------
def test_train_reaches_95_percent_on_the_spiral(capsys):
    # The live count is of the whole process: objects that earlier tests left
    # for the collector would be counted too, so start from what is there.
    gc.collect()
    before = count_live_objects(dezero_mini)["total"]
    code, out, _ = run(capsys, "train", "--dataset", "spiral")
    assert code == 0
    assert training_set_accuracy(out) >= 0.95
    epoch_lines = [line for line in out.splitlines() if line.startswith("epoch")]
    # Not a terminal: one plain line per epoch, never a carriage return.
    assert len(epoch_lines) == 100 and epoch_lines[-1].startswith("epoch 100/100")
    assert "\r" not in out
    # The graph of each batch is freed: the live count is the same every epoch.
    live = {re.search(r"live (\d+)", line).group(1) for line in epoch_lines}
    assert live == {str(before + 12)}  # 6 Parameters and their 6 gradients
    assert re.search(r"peak [0-9.]+ (B|KiB|MiB) traced \(tracemalloc\)", out)


class Terminal(io.StringIO):
    def isatty(self):
        return True


def test_train_on_a_terminal_draws_one_bar_and_no_epoch_lines():
    screen = Terminal()
    task = TASKS["spiral"]
    results = train(task, *load_datasets(task), epochs=3, stream=screen)
    text = screen.getvalue()
    header, progress, *summary = text.split("\n")[1:]
    # One line of the screen, redrawn in place; its last state is left on the screen.
    assert progress.startswith("\repoch 1/3") and progress.count("\r") >= 2, progress
    assert re.match(r"epoch 3/3 \|[█#]{8}\| 00:00 left, loss [0-9.]+ acc +[0-9.]+% live \d+ traced ",
                    progress.rsplit("\r", 1)[-1]), progress
    assert summary[0].startswith("finished 3 epochs (30 batches)")
    assert results["batches"] == 30 and 0 < results["accuracy"] <= 1


def test_train_is_deterministic_for_a_seed(capsys):
    def results(seed):
        code, out, _ = run(capsys, "train", "--dataset", "spiral", "--epochs", "3", "--seed", seed)
        assert code == 0
        # The traced bytes may differ by a few hundred: Python's own caches.
        return [line.partition("  live")[0] for line in out.splitlines()
                if line.startswith(("epoch", "training set"))]

    assert results("7") == results("7")
    assert results("7") != results("8")


def test_train_sincurve_is_a_regression(capsys):
    code, out, _ = run(capsys, "train", "--dataset", "sincurve", "--epochs", "2",
                       "--hidden", "10", "--optimizer", "sgd")
    assert code == 0
    assert "MLP 10-1" in out
    assert re.search(r"^training set: loss [0-9.]+ \(", out, re.MULTILINE)
    assert "accuracy" not in out and " acc " not in out


def test_train_saves_weights_that_load_into_an_mlp(capsys, tmp_path):
    path = tmp_path / "spiral.npz"
    code, out, _ = run(capsys, "train", "--dataset", "spiral", "--epochs", "2", "--hidden", "8",
                       "--save", str(path))
    assert code == 0 and f"saved the weights to {path}" in out
    model = MLP((8, 3))
    model.load_weights(path)
    assert model.l0.W.shape == (2, 8) and model.l1.W.shape == (8, 3)


@pytest.fixture
def mnist_folder(tmp_path, monkeypatch):
    """Small MNIST files that a network can learn (a bright row at the
    label's height), the training pair only; the network is switched off."""
    def no_network(*args, **kwargs):
        raise AssertionError("the train command must not download anything")

    monkeypatch.setattr(datasets, "_urlopen", no_network)
    rng = np.random.default_rng(0)
    labels = rng.integers(0, 10, 200).astype(np.uint8)
    images = (rng.random((200, 28, 28)) * 50).astype(np.uint8)
    images[np.arange(200), labels * 2, :] = 255
    images_name, labels_name = MNIST.files[True]
    write_idx(tmp_path / images_name, images)  # gzip-compressed, as published
    write_idx(tmp_path / labels_name.removesuffix(".gz"), labels)  # unpacked
    return tmp_path


def test_train_mnist_reads_a_folder_and_never_downloads(capsys, mnist_folder):
    code, out, err = run(capsys, "train", "--dataset", "mnist", "--data-dir", str(mnist_folder),
                         "--epochs", "2")
    assert code == 0, err
    assert "on mnist: 200 samples, 2 batches" in out
    assert "no test set" in out
    assert training_set_accuracy(out) > 0.5


def test_train_mnist_refuses_missing_or_broken_files(capsys, mnist_folder):
    images_name, labels_name = MNIST.files[True]
    (mnist_folder / labels_name.removesuffix(".gz")).write_bytes(b"\x00\x00\x08\x01\x00")
    code, _, err = run(capsys, "train", "--dataset", "mnist", "--data-dir", str(mnist_folder))
    assert code == 2 and "--data-dir" in err and "truncated" in err
    (mnist_folder / images_name).unlink()
    code, _, err = run(capsys, "train", "--dataset", "mnist", "--data-dir", str(mnist_folder))
    assert code == 2 and images_name in err and "Traceback" not in err


# --- memory ------------------------------------------------------------------------------
def test_memory_writes_a_plot_and_one_csv_per_stage(capsys, tmp_path):
    out_png = tmp_path / "memory.png"
    code, out, err = run(capsys, "memory", "--stage", "1", "--stage", "dezero_mini",
                         "--batches", "20", "--out", str(out_png))
    assert code == 0, err
    assert out_png.read_bytes().startswith(b"\x89PNG")
    leaking = read_csv(tmp_path / "memory_step01_leaking_graph.csv")
    finished = read_csv(tmp_path / "memory_dezero_mini.csv")
    for rows in (leaking, finished):
        assert [int(row["batch"]) for row in rows] == list(range(20))
    live_leaking = [int(row["live_objects"]) for row in leaking]
    live_finished = [int(row["live_objects"]) for row in finished]
    assert all(b > a for a, b in zip(live_leaking, live_leaking[1:]))  # grows every batch
    assert len(set(live_finished)) == 1  # flat
    assert "stage 01 (leaking graph)" in out and "dezero_mini" in out
    assert re.search(r"\+\d+\.\d live objects per batch", out)
    for path in (out_png, tmp_path / "memory_dezero_mini.csv"):
        assert f"wrote {path}" in out


def test_memory_with_one_stage_writes_the_csv_that_was_named(capsys, tmp_path):
    figures = tmp_path / "figures.csv"
    # "3,03" is one stage, named twice.
    code, out, err = run(capsys, "memory", "--stage", "3,03", "--batches", "5",
                         "--out", str(tmp_path / "plot.svg"), "--csv", str(figures))
    assert code == 0, err
    assert len(read_csv(figures)) == 5
    assert sorted(p.name for p in tmp_path.iterdir()) == ["figures.csv", "plot.svg"]
    assert out.count("recording") == 1


# --- graph -------------------------------------------------------------------------------
def test_graph_dot_prints_the_reference_graph(capsys):
    code, out, _ = run(capsys, "graph", "--stage", "2", "--dot")
    assert code == 0
    assert out.startswith("digraph refgraph {") and out.rstrip().endswith("}")
    assert "Variable 'y'" in out and "Sigmoid" in out and "MatMul" in out
    assert re.search(r"v\d+ -> f\d+ \[label=creator", out)  # y.creator
    assert "reference cycles: 3" in out  # stage 02 keeps outputs strongly
    assert "garbage: unreachable" not in out  # every object is still named


def test_graph_after_del_shows_garbage_or_nothing(capsys):
    code, out, _ = run(capsys, "graph", "--stage", "cycles", "--after-del", "--dot")
    assert code == 0 and "after del y" in out
    assert "garbage: unreachable" in out and "Variable 'y'" in out  # the cycle keeps y
    code, out, _ = run(capsys, "graph", "--stage", "dezero_mini", "--after-del", "--dot")
    assert code == 0
    assert "Variable 'y'" not in out and "Sigmoid" not in out
    # From stage 08 on the graph holds no Variable between its Functions: when
    # watch() runs, only y of the three results is still alive.
    assert "freed since watch(): 1 Variables, 3 Functions" in out
    code, out, _ = run(capsys, "graph", "--stage", "1", "--after-del", "--dot")
    assert "REGISTRY" in out and "garbage: unreachable" not in out  # the registry holds all


def test_graph_writes_dot_text_without_graphviz(capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))  # an empty folder: no `dot` here
    path = tmp_path / "graph.dot"
    code, out, _ = run(capsys, "graph", "--out", str(path))
    assert code == 0 and f"wrote {path}" in out
    assert path.read_text().startswith("digraph refgraph {")


@pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz `dot` is not installed")
def test_graph_renders_svg(capsys, tmp_path):
    path = tmp_path / "stage03.svg"
    code, out, err = run(capsys, "graph", "--stage", "3", "--after-del", "--out", str(path))
    assert code == 0, err
    assert "<svg" in path.read_text()
    assert f"wrote {path}" in out and "freed since watch()" in out


def test_graph_without_graphviz_says_how_to_install_it(capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))  # an empty folder: no `dot` here
    path = tmp_path / "graph.svg"
    code, out, err = run(capsys, "graph", "--out", str(path))
    assert code == 1
    assert "apt-get install graphviz" in err and "--dot" in err
    assert "Traceback" not in err
    assert not path.exists()


# --- train on the MNIST sample (the default) ---------------------------------------------
def test_train_defaults_to_the_mnist_sample_and_learns_it(capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("DEZERO_MINI_DATA", str(tmp_path))  # nothing may be written there
    code, out, err = run(capsys, "train", "--epochs", "1")
    assert code == 0, err
    assert "on mnist-sample: 4000 samples, 40 batches of up to 100 per epoch" in out
    match = re.search(r"^test set: +loss [0-9.]+, accuracy ([0-9.]+)% \(1000 samples", out, re.M)
    assert match and float(match.group(1)) > 75  # one epoch; the default 5 reach about 90%
    assert training_set_accuracy(out) > 0.75
    assert "live 12" in out  # the graph of each batch is freed
    assert list(tmp_path.iterdir()) == []  # the digits ship with the package: no cache


# --- memory shows its progress -------------------------------------------------------------
def test_memory_prints_progress_while_it_records(capsys, tmp_path):
    code, out, err = run(capsys, "memory", "--stage", "dezero_mini", "--batches", "8",
                         "--out", str(tmp_path / "m.png"))
    assert code == 0, err
    lines = out.splitlines()
    start = lines.index("recording dezero_mini: 8 batches ...")
    # Not a terminal: a plain line at each quarter of the run, before the report.
    assert lines[start + 1:start + 5] == ["  batch 2/8", "  batch 4/8", "  batch 6/8",
                                          "  batch 8/8"]


def test_memory_progress_moves_a_bar_on_a_terminal():
    from dezero_mini.cli.memory import batch_progress
    from dezero_mini.progress import progress_bar

    screen = Terminal()
    with progress_bar(5, "  dezero_mini", stream=screen, report=screen, unit="batch") as bar:
        on_batch = batch_progress(bar, stream=screen)
        for done in range(1, 6):
            on_batch(done, 5)
        assert bar.n == 5
    text = screen.getvalue()
    # A bar redrawn in place (tqdm redraws at most ten times a second), no plain
    # quarter lines, and rubbed out when the stage's report comes.
    assert text.startswith("\r  dezero_mini:") and "\n" not in text and "batch 5/5" not in text
    assert text.endswith("\r") and not text.rsplit("\r", 2)[-2].strip()


def test_record_training_calls_on_batch_after_each_batch():
    from dezero_mini.memory import record_training

    calls = []
    record = record_training("dezero_mini", 3, rss=False,
                             on_batch=lambda done, total: calls.append((done, total)))
    assert calls == [(1, 3), (2, 3), (3, 3)]
    assert record.batches == 3


# --- Hints that name a command: as the docs show it ------------------------------------------
def _hints(tmp_path, capsys):
    """Each hint of the command line that names a command to run, as the user sees it:
    (where it is shown, its text, the command it should name)."""
    from dezero_mini.cli import check as check_command
    from dezero_mini.cli.start import start_header
    from dezero_mini.contracts import get_stage
    from dezero_mini.grading.learner_progress import StageProgress, progress_line

    stage = get_stage(3)
    target = tmp_path / "my files" / stage.file_name
    target.parent.mkdir()
    code, out, err = run(capsys, "start", "3", str(target.parent))
    assert code == 0, err
    original = check_command.processes_unavailable
    check_command.processes_unavailable = lambda: "this Python cannot start processes"
    try:
        code, _, unavailable = run(capsys, "check", "3", str(target))
    finally:
        check_command.processes_unavailable = original
    return [
        ("progress: a stage not started", progress_line(StageProgress(3, "weakref", stage.file_name)),
         ["start", "3"]),
        ("start: when it is done", out, ["check", "3", str(target)]),
        ("the header of a stage file", start_header(stage, "step02.py"),
         ["check", "3", stage.file_name]),
        ("check where no process can start", unavailable, ["check", "N", "FILE"]),
    ]


def test_every_hint_names_the_command_as_the_docs_do(tmp_path, capsys):
    """``progress`` said ``python -m dezero_mini start 1`` where the docs and the
    lessons show ``dezero_mini start 1``: every hint is made by hints.command_line."""
    from dezero_mini.hints import command_line

    for where, text, words in _hints(tmp_path, capsys):
        assert command_line(*words) in text, (where, text)
        assert "python -m dezero_mini" not in text.replace(f"python -m {command_line(*words)} is "
                                                           "the same", ""), (where, text)
    assert command_line("check", 3, "my files/x.py") == "dezero_mini check 3 'my files/x.py'"


def test_no_message_spells_python_dash_m_for_a_command():
    """The family: no text of the package (docstrings and comments aside) spells
    ``python -m dezero_mini COMMAND``; a hint comes from hints.command_line."""
    import ast
    from pathlib import Path

    commands = ("train", "memory", "graph", "leaks", "start", "check", "grade", "progress")
    pattern = re.compile(r"python -m dezero_mini (%s)\b" % "|".join(commands))
    found = []
    for path in sorted(Path(dezero_mini.__file__).parent.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                      if isinstance(node, (ast.Module, ast.FunctionDef, ast.ClassDef,
                                           ast.AsyncFunctionDef))
                      and node.body and isinstance(node.body[0], ast.Expr)
                      and isinstance(node.body[0].value, ast.Constant)}
        for node in ast.walk(tree):
            if (isinstance(node, ast.Constant) and isinstance(node.value, str)
                    and id(node) not in docstrings and pattern.search(node.value)):
                found.append(f"{path.name}:{node.lineno}: {node.value.strip()[:70]}")
    assert found == []
