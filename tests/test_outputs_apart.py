"""No command writes over what it reads (``atomic.input_overwrite_problem``,
``cli.options.refuse_to_overwrite_inputs``).

``grade 3 alice.py --csv alice.py`` once replaced the student's file with the
grades. Every command with an output is held to it, for every way of naming
the same file twice: the same name, another spelling, a symbolic link, a hard
link. The refusal is argparse's one line (exit 2), before any work, and the
input is byte for byte what it was.
"""
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from dezero_mini import atomic
from dezero_mini.datasets import MNIST, write_idx

ROOT = Path(__file__).resolve().parents[1]
STEP03 = "step03_weakref_outputs.py"
LEAKS_SCRIPT = "train_torch.py"

#: How the output names the input: (id, make(folder, input) -> the output's name).
ALIASES = [
    ("the same name", lambda folder, target: os.path.relpath(target, folder)),
    ("another spelling", lambda folder, target: f"./{os.path.relpath(target, folder)}"),
    ("a symbolic link", lambda folder, target: _link(folder, target, os.symlink)),
    ("a hard link", lambda folder, target: _link(folder, target, os.link)),
]


def _link(folder, target, make):
    name = folder / f"alias{target.suffix}"
    make(target, name)
    return name.name


def _alias_with_suffix(suffix):
    """The aliases whose name can carry the suffix an output option demands
    (``--csv`` takes any name; ``--out`` of memory takes .csv only through links)."""
    def make(folder, target, alias):
        name = alias(folder, target)
        if suffix and not name.endswith(suffix):
            link = folder / f"linked{suffix}"
            os.symlink(target, link)
            return link.name
        return name
    return make


def _stage_copy(folder):
    """The course's steps in ``folder``/steps, where DEZERO_MINI_STEPS points."""
    steps = folder / "steps"
    shutil.copytree(ROOT / "steps", steps, ignore=shutil.ignore_patterns("__pycache__"))
    return steps / STEP03


def _mnist(folder):
    images_name, labels_name = MNIST.files[True]
    write_idx(folder / images_name, np.zeros((4, 28, 28), np.uint8))
    write_idx(folder / labels_name, np.zeros(4, np.uint8))
    return folder / images_name


#: (id, make the input in the folder, the command with {out} for the output, the output's suffix)
COMMANDS = [
    ("grade --csv over a submission", lambda f: _submission(f),
     ["grade", "3", STEP03, "--csv", "{out}"], ""),
    ("grade --csv over a weights file", lambda f: _weights(f),
     ["grade", "3", "sub", "--weights", "w.toml", "--csv", "{out}"], ""),
    ("check --gradescope over the file", lambda f: _submission(f),
     ["check", "3", STEP03, "--gradescope", "{out}"], ""),
    ("check --gradescope over the weights", lambda f: _weights(f),
     ["check", "3", f"sub/{STEP03}", "--weights", "w.toml", "--gradescope", "{out}"], ""),
    ("memory --csv over a stage file", _stage_copy,
     ["memory", "--stage", "3", "--batches", "2", "--csv", "{out}", "--out", "m.png"], ".csv"),
    ("graph --out over the stage file", _stage_copy,
     ["graph", "--stage", "3", "--out", "{out}"], ".dot"),
    ("memory --out over a stage file", _stage_copy,
     ["memory", "--stage", "3", "--batches", "2", "--out", "{out}"], ".png"),
    ("train --save over a data file", _mnist,
     ["train", "--dataset", "mnist", "--data-dir", ".", "--save", "{out}"], ".npz"),
    # leaks reads the script and the modules of its folder that it imports (to
    # tell a PyTorch script); --plot once knew neither and drew over them.
    ("leaks --plot over the script", lambda f: _torch_script(f),
     ["leaks", "--plot", "{out}", LEAKS_SCRIPT], ".png"),
    ("leaks --plot over a module of the script", lambda f: _torch_script(f, "helper"),
     ["leaks", "--plot", "{out}", LEAKS_SCRIPT], ".svg"),
]


def _torch_script(folder, which="script"):
    """A PyTorch training script that imports a module of its folder; torch
    itself is not needed: the output is refused before the script runs."""
    (folder / "helper.py").write_text("import torch\n\nSTEPS = 40\n")
    (folder / LEAKS_SCRIPT).write_text("from helper import STEPS, torch\n\nlosses = []\n"
                                       "for step in range(STEPS):\n"
                                       "    losses.append(torch.ones(1, requires_grad=True) * 2)\n")
    return folder / (LEAKS_SCRIPT if which == "script" else "helper.py")


def _submission(folder):
    path = folder / STEP03
    shutil.copy(ROOT / "steps" / STEP03, path)
    return path


def _weights(folder):
    (folder / "sub").mkdir()
    shutil.copy(ROOT / "steps" / STEP03, folder / "sub" / STEP03)
    path = folder / "w.toml"
    path.write_text("new = 3\n")
    return path


@pytest.mark.parametrize("alias_id, alias", ALIASES, ids=[a for a, _ in ALIASES])
@pytest.mark.parametrize("command_id, make_input, argv, suffix", COMMANDS,
                         ids=[c for c, *_ in COMMANDS])
def test_an_output_aimed_at_an_input_is_refused_and_the_input_kept(
        tmp_path, command_id, make_input, argv, suffix, alias_id, alias):
    source = make_input(tmp_path)
    before = source.read_bytes()
    out = _alias_with_suffix(suffix)(tmp_path, source, alias)
    # A process of its own: a stage's module is loaded once per process, from DEZERO_MINI_STEPS.
    done = subprocess.run([sys.executable, "-m", "dezero_mini",
                           *[out if word == "{out}" else word for word in argv]],
                          cwd=tmp_path, capture_output=True, text=True, timeout=300,
                          env=dict(os.environ, DEZERO_MINI_STEPS=str(tmp_path / "steps")))
    assert done.returncode == 2, done.stderr
    # One line, and the most precise one: a link with the output's suffix to an
    # input (of another kind) is the command's input, not "a file of another kind".
    lines = done.stderr.strip().splitlines()
    assert "which this command reads" in lines[-1], done.stderr
    assert "another kind" not in done.stderr and "Traceback" not in done.stderr, done.stderr
    link = os.path.islink(tmp_path / out)
    assert (f"{out!r} is a link to " in lines[-1]) is link, lines[-1]
    assert source.read_bytes() == before


def _read_only(path):
    path.chmod(0o444)
    return path


#: An output that is an input, where another reason applies too: the input
#: is named, never the lesser reason (which the check once gave first).
#: (id, make the input, the command with {out}, the output's name, the lesser reason)
PRECEDENCE = [
    ("a read-only submission as grade --csv", lambda f: _read_only(_submission(f)),
     ["grade", "3", STEP03, "--csv", "{out}"], STEP03, "not writable"),
    ("a read-only file to check as check --gradescope", lambda f: _read_only(_submission(f)),
     ["check", "3", STEP03, "--gradescope", "{out}"], STEP03, "not writable"),
    ("the stage file as graph --out, without the suffix", _stage_copy,
     ["graph", "--stage", "3", "--out", "{out}"], f"steps/{STEP03}", "must end in"),
    ("the stage file as memory --csv, without the suffix", _stage_copy,
     ["memory", "--stage", "3", "--batches", "2", "--csv", "{out}"], f"steps/{STEP03}",
     "must end in"),
    ("a data file as train --save, without the suffix", _mnist,
     ["train", "--dataset", "mnist", "--data-dir", ".", "--save", "{out}"],
     MNIST.files[True][0], "must end in"),
    ("the script as leaks --plot, without the suffix", lambda f: _torch_script(f),
     ["leaks", "--plot", "{out}", LEAKS_SCRIPT], LEAKS_SCRIPT, "must end in"),
    ("a module of the script as leaks --plot, without the suffix",
     lambda f: _torch_script(f, "helper"), ["leaks", "--plot", "{out}", LEAKS_SCRIPT],
     "helper.py", "must end in"),
]


@pytest.mark.parametrize("case, make_input, argv, out, lesser", PRECEDENCE,
                         ids=[c for c, *_ in PRECEDENCE])
def test_an_input_named_as_the_output_is_said_to_be_the_input(
        tmp_path, case, make_input, argv, out, lesser):
    if lesser == "not writable" and os.geteuid() == 0:
        pytest.skip("root may write a read-only file")
    source = make_input(tmp_path)
    before = source.read_bytes()
    done = subprocess.run([sys.executable, "-m", "dezero_mini",
                           *[out if word == "{out}" else word for word in argv]],
                          cwd=tmp_path, capture_output=True, text=True, timeout=300,
                          env=dict(os.environ, DEZERO_MINI_STEPS=str(tmp_path / "steps")))
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert f"{out!r} is " in lines[-1] and "which this command reads" in lines[-1], done.stderr
    assert lesser not in done.stderr and "Traceback" not in done.stderr, done.stderr
    assert source.read_bytes() == before


def test_the_zip_is_not_written_over_a_file_it_packs(tmp_path):
    weights = tmp_path / "w.toml"
    weights.write_text("new = 3\n")
    out = tmp_path / "autograder.zip"
    os.symlink(weights, out)
    done = subprocess.run([sys.executable, str(ROOT / "tools" / "gradescope_zip.py"), "--stage", "3",
                           "--weights", str(weights), "--out", str(out)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 2, done.stderr
    assert "is a link to the weights file" in done.stderr, done.stderr
    assert "which this command reads" in done.stderr, done.stderr
    assert "another kind" not in done.stderr, done.stderr
    assert weights.read_text() == "new = 3\n"


@pytest.mark.parametrize("name", ["g.dot", "sub/g.dot"])
def test_an_output_apart_from_the_inputs_is_written(tmp_path, name):
    (tmp_path / "sub").mkdir()
    done = subprocess.run([sys.executable, "-m", "dezero_mini", "graph", "--stage", "3", "--out", name],
                          cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / name).exists()


def test_the_check_names_both_spellings_and_passes_missing_paths():
    assert atomic.input_overwrite_problem(__file__, [("x", None), ("y", "/no/such/file")]) is None
    problem = atomic.input_overwrite_problem(__file__, [("the test", Path(__file__))])
    assert "is the test" in problem and "which this command reads" in problem


@pytest.mark.parametrize("command, option, inputs", [
    ("train", "--save", "--data-dir"), ("memory", "--out", "stage"), ("memory", "--csv", "stage"),
    ("graph", "--out", "stage"), ("grade", "--csv", "submission"), ("check", "--gradescope", "FILE"),
    ("leaks", "--plot", "SCRIPT"),
])
def test_the_help_names_what_a_command_writes_and_that_no_input_is_one(command, option, inputs):
    """``--help`` lists every file a command writes, each saying what it never is."""
    done = subprocess.run([sys.executable, "-m", "dezero_mini", command, "--help"],
                          capture_output=True, text=True, timeout=600, env=dict(os.environ, COLUMNS="400"))
    line = next(line for line in done.stdout.splitlines() if line.strip().startswith(option + " "))
    assert "never" in line and inputs in line, line
