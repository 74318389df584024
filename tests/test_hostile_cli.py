"""The command line under hostile input: every case one clear line, no traceback.

One table per family of bad input, each row: the command line, the exit
status, and words that the error must contain (the option and the value, or
what went wrong). Output targets are checked when the arguments are read,
before any training; sizes that cannot fit are refused with an estimate; a
closed stdout, SIGTERM and a MemoryError end the command in one line.
Files must not appear when a command refuses to run.
"""
import argparse
import os
import subprocess
import sys
import warnings

import pytest

from dezero_mini import cli
from dezero_mini.cli import guard
from dezero_mini.cli import memory as memory_command
from dezero_mini.cli import train as train_command

GB = 10**9


def run(capsys, *argv):
    """``cli.main(argv)``: (exit code, stdout, stderr), also when argparse exits."""
    try:
        code = cli.main([str(arg) for arg in argv])
    except SystemExit as stop:
        code = stop.code
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def place(tmp_path, monkeypatch):
    """A working folder with a folder named like each output file (``dir.npz``,
    ``dir.png``, ...), a plain file ``file``, a machine of 8 GB, and no
    training: the cases are refused before it."""
    monkeypatch.chdir(tmp_path)
    for name in ("dir.npz", "dir.png", "dir.svg", "dir.csv", "dir.dot", "graph.svg"):
        (tmp_path / name).mkdir()
    (tmp_path / "file").write_text("a file, not a folder\n")
    # what a write cannot replace, and a link is judged by what it points to
    (tmp_path / "full.npz").symlink_to("/dev/full" if os.path.exists("/dev/full") else os.devnull)
    (tmp_path / "dangling.npz").symlink_to(tmp_path / "nowhere" / "w.npz")
    (tmp_path / "looping.svg").symlink_to("looping.svg")
    (tmp_path / "to_a_folder.npz").symlink_to("dir.npz")
    # a link with the output's suffix to a file of another kind: the learner's step file
    (tmp_path / "my_step.py").write_text("# the learner's work\n")
    for name in ("to_my_step.svg", "to_my_step.npz", "to_my_step.csv", "to_my_step.png"):
        (tmp_path / name).symlink_to("my_step.py")
    if hasattr(os, "mkfifo"):
        os.mkfifo(tmp_path / "pipe.npz")
        os.mkfifo(tmp_path / "pipe.csv")
    monkeypatch.setattr(train_command, "machine_memory", lambda: 8 * GB)
    monkeypatch.setattr(memory_command, "machine_memory", lambda: 8 * GB)

    def no_run(*args, **kwargs):  # a case that is not refused must not train for hours
        raise AssertionError("the command started its work instead of refusing the input")

    monkeypatch.setattr(train_command, "train", no_run)
    monkeypatch.setattr(memory_command, "record_training", no_run)
    return tmp_path


TRAIN = ["train", "--dataset", "spiral", "--epochs", "1"]
MEMORY = ["memory", "--stage", "dezero_mini", "--batches", "2"]

# (command line, exit status, words the error must contain)
BAD_TARGETS = [
    ([*TRAIN, "--save", "dir.npz"], 2, ["--save", "'dir.npz' is a folder"]),
    ([*TRAIN, "--save", "file/w.npz"], 2, ["--save", "'file' is a file, not a folder"]),
    ([*TRAIN, "--save", "missing/w.npz"], 2, ["--save", "'missing' does not exist"]),
    ([*TRAIN, "--save", "w.pkl"], 2, ["--save", ".npz", "'w.pkl'"]),
    ([*TRAIN, "--save", ""], 2, ["--save", "must end in .npz, got ''"]),
    ([*TRAIN, "--save", ".npz"], 2, ["--save", "needs a name before .npz"]),
    # a name longer than the folder takes (255 bytes on most file systems), or a path
    # longer than the system takes at all
    ([*TRAIN, "--save", "a" * 300 + ".npz"], 2,
     ["--save", "the file name is 304 bytes; this folder takes at most 255"]),
    ([*TRAIN, "--save", "é" * 130 + ".npz"], 2, ["--save", "the file name is 264 bytes"]),
    ([*MEMORY, "--csv", "b" * 300 + ".csv"], 2, ["--csv", "the file name is 304 bytes"]),
    (["graph", "--out", "c" * 300 + ".svg"], 2, ["--out", "the file name is 304 bytes"]),
    ([*TRAIN, "--save", "d" * 5000 + "/w.npz"], 2,
     ["--save", "cannot be used as a file name (File name too long)"]),
    # a name ending in a separator names a folder, though the folder does not exist
    ([*TRAIN, "--save", "w.npz/"], 2, ["--save", "'w.npz/' ends in '/'", "like 'w.npz'"]),
    ([*MEMORY, "--out", "m.png/"], 2, ["--out", "'m.png/' ends in '/'"]),
    (["grade", "3", "x.py", "--csv", "out/"], 2, ["--csv", "'out/' ends in '/'"]),
    (["check", "3", "x.py", "--gradescope", "r.json/"], 2, ["--gradescope", "ends in '/'"]),
    # links: judged by what they point to, before the run (the write goes through them)
    ([*TRAIN, "--save", "full.npz"], 2,
     ["--save", "'full.npz' is a link to", "not a regular file (a pipe or a device)"]),
    ([*TRAIN, "--save", "dangling.npz"], 2, ["--save", "'dangling.npz' is a link to nothing"]),
    (["graph", "--out", "looping.svg"], 2, ["--out", "'looping.svg' is a link to nothing"]),
    ([*TRAIN, "--save", "to_a_folder.npz"], 2, ["--save", "'to_a_folder.npz' is a folder"]),
    (["graph", "--out", "to_my_step.svg"], 2, ["--out", "my_step.py", "a file of another kind"]),
    ([*TRAIN, "--save", "to_my_step.npz"], 2, ["--save", "my_step.py", "a file of another kind"]),
    ([*MEMORY, "--csv", "to_my_step.csv"], 2, ["--csv", "my_step.py", "a file of another kind"]),
    ([*MEMORY, "--out", "to_my_step.png"], 2, ["--out", "my_step.py", "a file of another kind"]),
    # a pipe or a device named directly
    *([([*TRAIN, "--save", "pipe.npz"], 2,
        ["--save", "'pipe.npz' is not a regular file (a pipe or a device)"]),
       ([*MEMORY, "--csv", "pipe.csv"], 2, ["--csv", "'pipe.csv' is not a regular file"])]
      if hasattr(os, "mkfifo") else []),
    ([*MEMORY, "--out", "dir.png"], 2, ["--out", "'dir.png' is a folder"]),
    ([*MEMORY, "--out", "file/m.png"], 2, ["--out", "'file' is a file"]),
    ([*MEMORY, "--csv", "dir.csv"], 2, ["--csv", "'dir.csv' is a folder"]),
    ([*MEMORY, "--csv", "missing/m.csv"], 2, ["--csv", "'missing' does not exist"]),
    # the CSV name made from --out: checked before the run as well
    ([*MEMORY, "--out", "dir.svg"], 2, ["--out", "'dir.svg' is a folder"]),
    ([*MEMORY, "--out", "ok.png", "--csv", "dir.csv"], 2, ["--csv", "folder"]),
    (["graph", "--out", "dir.svg"], 2, ["--out", "'dir.svg' is a folder"]),
    (["graph", "--out", "dir.dot"], 2, ["--out", "'dir.dot' is a folder"]),
    (["graph", "--out", "missing/g.dot"], 2, ["--out", "'missing' does not exist"]),
    (["graph"], 2, ["argument --out: 'graph.svg' is a folder"]),  # the default, checked too
    # leaks --plot (a type of its own once, which knew no input: test_outputs_apart)
    (["leaks", "--plot", "dir.png", "x.py"], 2, ["--plot", "'dir.png' is a folder"]),
    (["leaks", "--plot", "missing/p.svg", "x.py"], 2, ["--plot", "'missing' does not exist"]),
    (["leaks", "--plot", "p.png/", "x.py"], 2, ["--plot", "'p.png/' ends in '/'"]),
    (["leaks", "--plot", "p.txt", "x.py"], 2, ["--plot", "must end in .png or .svg or .pdf"]),
    (["start", "3", "file"], 2, ["DIR 'file'", "is a file, not a folder"]),
    (["start", "3", "missing"], 2, ["DIR 'missing'", "does not exist"]),
    # the grading commands' targets: the same check (any name; no suffix asked)
    (["grade", "3", "x.py", "--csv", "dir.csv"], 2, ["--csv", "'dir.csv' is a folder"]),
    (["grade", "3", "x.py", "--csv", "file/g.csv"], 2, ["--csv", "'file' is a file"]),
    (["check", "3", "x.py", "--gradescope", "missing/r.json"], 2,
     ["--gradescope", "'missing' does not exist"]),
    # a folder that takes no new file, even for root (/proc)
    *([([*TRAIN, "--save", "/proc/w.npz"], 2, ["--save", "'/proc'", "a folder you can write to"])]
      if sys.platform == "linux" else []),
]

BAD_NUMBERS = [
    (["check", "3", "x.py", "--timeout", "1e300"], 2, ["--timeout", "at most", "'1e300'"]),
    (["check", "3", "x.py", "--timeout", "inf"], 2, ["--timeout", "'inf'"]),
    (["check", "3", "x.py", "--timeout", "-1"], 2, ["--timeout", "'-1'"]),
    (["train", "--lr", "1e400"], 2, ["--lr", "'1e400'"]),
    (["train", "--epochs", "9" * 5000], 2, ["--epochs", "whole number"]),
    ([*TRAIN, "--hidden", "100000,100000"], 2,
     ["--hidden 100000,100000 needs about 280 GB", "has 8 GB", "fits in that layer"]),
    ([*TRAIN, "--hidden", "1000000,1000"], 2, ["--hidden 1000000,1000 needs about 29 GB", "at most"]),
    ([*MEMORY[:-2], "--batches", 10**12], 2,
     ["--batches 1000000000000 needs about 80 TB", "at most 100,000,000 batches fit"]),
]


@pytest.mark.parametrize("argv, status, words", BAD_TARGETS + BAD_NUMBERS,
                         ids=lambda value: " ".join(map(str, value))[:60]
                         if isinstance(value, list) else None)
def test_bad_input_is_one_clear_line_before_any_work(capsys, place, argv, status, words):
    before = sorted(os.listdir(place))
    code, out, err = run(capsys, *argv)
    assert code == status, err
    assert "Traceback" not in err
    last = err.strip().splitlines()[-1]
    for word in words:
        assert word in last, last
    assert out == ""  # refused before anything ran
    assert sorted(os.listdir(place)) == before  # and nothing written


# --- Every numeric option of every command ------------------------------------------------
#: (command line before the option, option, what a huge value gets): "range" when
#: the range refuses it, else the words of the check that does (an estimate of the
#: memory, the checker's limit), "clamped" when it is taken down with a note (the
#: tests below), "accepted" where a huge value is harmless (leaks --steps stops the
#: script after N steps: a script ends on its own first) or stopped later in one line
#: that names it (--lr: the first loss that is not finite, DIVERGING below).
NUMERIC_OPTIONS = [
    (["train"], "--epochs", "range"),
    (["train"], "--batch-size", "clamped"),
    (["train"], "--lr", "accepted"),
    (["train"], "--seed", "range"),
    (["train"], "--hidden", "needs about"),
    (["memory", "--stage", "dezero_mini"], "--batches", "needs about"),
    (["leaks", "{}", "x.py"], "--consecutive", "range"),  # (the script's own options follow it)
    (["leaks", "{}", "x.py"], "--steps", "accepted"),
    *[(argv, option, "range") for argv in (["check", "3", "x.py"], ["grade", "3", "x.py",
                                                                     "--csv", "g.csv"],
                                            ["progress", "."])
      for option in ("--timeout", "--total-timeout")],
    *[(argv, "--batches", "give at most") for argv in (["check", "3", "x.py"],
                                                       ["grade", "3", "x.py", "--csv", "g.csv"],
                                                       ["progress", "."])],
    (["grade", "3", "x.py", "--csv", "g.csv"], "--jobs", "clamped"),
    (["progress", "."], "--jobs", "clamped"),
]
#: The values every numeric option refuses (nothing here is a whole number
#: of at least 1 or a number above 0, the least any of them takes); "2.5" is
#: no whole number, and where a fraction is a number, "1e-400" stands for it (0 once read).
BAD_VALUES = ["0", "-1", "2.5", "nan", "inf", "-inf", "ten", ""]
HUGE = {"--timeout": "1e300", "--total-timeout": "1e300",
        "--seed": str(2**32), "--epochs": "100001", "--hidden": "1000000,1000",
        "--batches": str(10**12), "--consecutive": str(10**12)}


def _with(argv, *words):
    """``argv`` with ``words`` where its ``{}`` is, else at its end."""
    if "{}" not in argv:
        return [*argv, *words]
    at = argv.index("{}")
    return [*argv[:at], *words, *argv[at + 1:]]


def _option_type_words(argv, option):
    """What the option's type says it accepts (``.accepts`` of arguments' number types)."""
    parser = cli.build_parser()
    commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    action = next(a for a in commands.choices[argv[0]]._actions if option in a.option_strings)
    return getattr(action.type, "accepts", None)


@pytest.mark.parametrize("value", BAD_VALUES)
@pytest.mark.parametrize("argv, option, huge", NUMERIC_OPTIONS,
                         ids=[f"{argv[0]} {option}" for argv, option, _ in NUMERIC_OPTIONS])
def test_a_number_out_of_range_is_one_line_naming_option_value_and_range(
        capsys, place, argv, option, huge, value):
    if option == "--seed" and value == "0":
        value = "-5"  # 0 is a seed
    if value == "2.5" and not (_option_type_words(argv, option) or "whole").count("whole"):
        value = "1e-400"
    code, out, err = run(capsys, *_with(argv, f"{option}={value}"))
    assert code == 2 and "Traceback" not in err, err
    lines = err.strip().splitlines()
    assert [line for line in lines if "error" in line] == lines[-1:], err  # (after the usage)
    accepts = _option_type_words(argv, option) or "widths above 0"
    assert f"argument {option}: must be {accepts}, got {value!r}" in lines[-1] or (
        option == "--hidden" and accepts in lines[-1] and repr(value) in lines[-1]), lines[-1]


@pytest.mark.parametrize("argv, option, huge", [row for row in NUMERIC_OPTIONS
                                                if row[2] not in ("clamped", "accepted")],
                         ids=[f"{argv[0]} {option}" for argv, option, huge in NUMERIC_OPTIONS
                              if huge not in ("clamped", "accepted")])
def test_a_huge_number_is_refused_in_one_line(capsys, place, argv, option, huge):
    code, out, err = run(capsys, *_with(argv, option, HUGE[option]))
    assert code == 2 and "Traceback" not in err, err
    last = err.strip().splitlines()[-1]
    assert option in last and HUGE[option].split(",")[0] in last.replace(",", ""), last
    words = f"must be {_option_type_words(argv, option)}" if huge == "range" else huge
    assert words in last, last


def test_the_table_of_numeric_options_is_complete():
    """A new numeric option joins the table (and so its refusals)."""
    parser = cli.build_parser()
    commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    found = {(name, option) for name, command in commands.choices.items()
             for action in command._actions
             if hasattr(action.type, "accepts") or action.type is train_command.layer_sizes
             for option in action.option_strings if option.startswith("--")}
    assert found == {(argv[0], option) for argv, option, _ in NUMERIC_OPTIONS}


@pytest.mark.parametrize("value", [*BAD_VALUES, "99", "1e300", "3.0"])
@pytest.mark.parametrize("argv", [["start", "{}", "."], ["check", "{}", "x.py"],
                                  ["grade", "{}", "x.py", "--csv", "g.csv"]],
                         ids=lambda argv: argv[0])
def test_a_stage_number_out_of_range_is_one_line_with_the_stages(capsys, place, argv, value):
    """The positional N of start, check and grade: the same family."""
    from dezero_mini.arguments import known_stage_numbers

    code, out, err = run(capsys, *_with(argv, "--", value) if value.startswith("-")
                         else _with(argv, value))
    assert code == 2 and "Traceback" not in err, err
    last = err.strip().splitlines()[-1]
    assert (f"argument N: must be the number of a stage of the course "
            f"({known_stage_numbers()}), got {value!r}") in last, last


@pytest.mark.parametrize("value", ["1e300", "inf", "0", "-1", "nan"])
def test_the_autograders_timeout_is_held_to_the_same_range(capsys, tmp_path, value):
    """Gradescope's entry point took --timeout 1e300 (a number above 0 was all
    it asked), which the clock's arithmetic cannot add."""
    from dezero_mini.arguments import seconds
    from dezero_mini.grading import gradescope

    with pytest.raises(SystemExit) as stop:
        gradescope.main(["--root", str(tmp_path), "--stage", "3", "--timeout", value])
    assert stop.value.code == 2
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert f"argument --timeout: must be {seconds.accepts}, got {value!r}" in last, last


@pytest.mark.parametrize("argv", [["grade", "3", "x.py", "--csv", "g.csv"], ["progress", "."]])
def test_more_jobs_than_processors_are_the_processors_with_a_note(capsys, monkeypatch, argv):
    from dezero_mini.grading import batch

    monkeypatch.setattr(batch, "default_jobs", lambda: 2)
    args = cli.build_parser().parse_args([*argv, "--jobs", "100000"])
    assert args.jobs == 2
    err = capsys.readouterr().err.strip()
    assert err.endswith("note: --jobs 100000 is more than the 2 processors this process may "
                        "use; running 2 at a time") and "\n" not in err, err
    assert cli.build_parser().parse_args([*argv, "--jobs", "2"]).jobs == 2
    assert capsys.readouterr().err == ""


def test_a_batch_larger_than_the_training_set_is_the_set_with_a_note(capsys, place, monkeypatch):
    taken = {}
    monkeypatch.setattr(train_command, "train", lambda *a, **options: taken.update(options))
    code, out, err = run(capsys, *TRAIN, "--batch-size", str(10**30))
    assert code in (0, None), err
    assert taken["batch_size"] == 300  # spiral: 300 points
    assert err.strip().endswith(f"note: --batch-size {10**30} is more than the 300 training "
                                "samples; one batch of 300 per epoch"), err


def test_a_folder_the_user_cannot_write_to_is_refused(capsys, place, monkeypatch):
    # (the tests may run as root, who can write everywhere: ask os.access)
    locked = place / "locked"
    locked.mkdir()
    real_access = os.access
    monkeypatch.setattr(os, "access",
                        lambda path, mode: False if os.fspath(path) == "locked"
                        else real_access(path, mode))
    for argv, option in [([*TRAIN, "--save", "locked/w.npz"], "--save"),
                         ([*MEMORY, "--out", "locked/m.png"], "--out"),
                         (["graph", "--out", "locked/g.svg"], "--out"),
                         (["start", "3", "locked"], "DIR")]:
        code, out, err = run(capsys, *argv)
        assert code == 2 and "Traceback" not in err
        assert option in err and "'locked' is not writable" in err, err
    assert os.listdir(locked) == []


def test_a_file_the_user_cannot_write_is_not_replaced(capsys, place, monkeypatch):
    # (a write replaces the file by a rename, which its own permissions do not stop)
    kept = place / "kept.npz"
    kept.write_bytes(b"the user's weights")
    real_access = os.access
    monkeypatch.setattr(os, "access",
                        lambda path, mode: False if os.fspath(path) == "kept.npz"
                        else real_access(path, mode))
    code, out, err = run(capsys, *TRAIN, "--save", "kept.npz")
    assert code == 2 and "Traceback" not in err
    assert "--save" in err and "'kept.npz' exists and is not writable by you" in err, err
    assert kept.read_bytes() == b"the user's weights"


@pytest.mark.parametrize("argv, option", [
    (["check", "3", "step03_weakref_outputs.py", "--gradescope", "step03_weakref_outputs.py"],
     "--gradescope"),
    (["grade", "3", "step03_weakref_outputs.py", "--csv", "step03_weakref_outputs.py"], "--csv"),
])
def test_an_input_the_user_cannot_write_is_named_as_the_input(capsys, place, monkeypatch,
                                                              argv, option):
    """Of the two reasons, the more precise: the file is what the command
    reads (once, "exists and is not writable" came first)."""
    submission = place / "step03_weakref_outputs.py"
    submission.write_text("# the learner's work\n")
    real_access = os.access
    monkeypatch.setattr(os, "access",
                        lambda path, mode: False if os.fspath(path) == submission.name
                        else real_access(path, mode))
    code, out, err = run(capsys, *argv)
    assert code == 2 and "Traceback" not in err, err
    last = err.strip().splitlines()[-1]
    assert f"argument {option}: 'step03_weakref_outputs.py' is " in last, err
    assert "which this command reads" in last and "not writable" not in err, err
    assert submission.read_text() == "# the learner's work\n"


#: Every option that names a file to write: its type is arguments.output_file,
#: and its command checks it with the command's inputs before the work
#: (cli.options.refuse_to_overwrite_inputs). A new one joins this table and
#: the rows above that aim it at a folder, a link, an input.
OUTPUT_OPTIONS = {("check", "--gradescope"), ("grade", "--csv"), ("graph", "--out"),
                  ("memory", "--csv"), ("memory", "--out"), ("train", "--save"),
                  ("leaks", "--plot")}


def test_the_table_of_output_options_is_complete():
    parser = cli.build_parser()
    commands = next(action for action in parser._actions
                    if isinstance(action, argparse._SubParsersAction))
    found = {(name, option) for name, command in commands.choices.items()
             for action in command._actions if hasattr(action.type, "output_suffixes")
             for option in action.option_strings if option.startswith("--")}
    assert found == OUTPUT_OPTIONS


def test_graph_dot_writes_nothing_so_its_default_file_is_not_checked(capsys, place):
    code, out, err = run(capsys, "graph", "--dot")  # graph.svg is a folder here
    assert code == 0, err
    assert out.startswith("digraph")


def test_the_size_estimate_is_what_the_message_says():
    task = train_command.TASKS["spiral"]
    # 2 -> 100000 -> 100000 -> 3: the weights and biases, 28 bytes each with adam
    weights = 2 * 100_000 + 100_000 + 100_000 * 100_000 + 100_000 + 100_000 * 3 + 3
    activations = 30 * (100_000 + 100_000 + 3) * 4 * 4
    assert train_command.training_bytes(task, (100_000, 100_000), "adam", 30, 300) == (
        weights * 28 + activations)
    message = train_command.too_big_message(task, (100_000, 100_000), "adam", 30, 300, 8 * GB)
    fits = int(message.rsplit("at most ", 1)[1].split()[0].replace(",", ""))
    # the width said to fit does fit, and one more does not
    assert train_command.training_bytes(task, (fits, 100_000), "adam", 30, 300) <= 8 * GB
    assert train_command.training_bytes(task, (fits + 1, 100_000), "adam", 30, 300) > 8 * GB
    assert train_command.too_big_message(task, (30, 30), "adam", 30, 300, 8 * GB) is None


# --- How a command ends --------------------------------------------------------------------
def test_a_memory_error_anywhere_is_one_line_and_exit_1(capsys, place, monkeypatch):
    def train(*args, **kwargs):
        raise MemoryError()

    monkeypatch.setattr(train_command, "train", train)
    code, out, err = run(capsys, *TRAIN)
    assert code == 1
    assert "Traceback" not in err
    assert err.strip() == ("dezero_mini train: error: out of memory; try smaller sizes "
                           "(--hidden, --batch-size, --batches) or free memory for it")


def test_an_os_error_on_a_users_file_is_one_line(capsys, place, monkeypatch):
    def full_disk(*args, **kwargs):
        raise OSError(28, "No space left on device", "w.npz")

    monkeypatch.setattr(train_command, "train", full_disk)
    code, _, err = run(capsys, *TRAIN, "--save", "w.npz")
    assert code == 1 and "Traceback" not in err
    assert err.strip() == "dezero_mini train: error: No space left on device: w.npz"


def test_a_closed_stdout_ends_quietly_like_a_unix_tool(tmp_path):
    """``train | head -2``: head closes the pipe after two lines. train prints a line
    an epoch; with 1,000 of them it is still writing when head has gone, however
    slowly head is scheduled (it ends at its next line, so they cost nothing)."""
    command = [sys.executable, "-m", "dezero_mini", "train", "--dataset", "spiral",
               "--epochs", "1000"]
    train = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             cwd=tmp_path)
    head = subprocess.run(["head", "-2"], stdin=train.stdout, capture_output=True, timeout=600)
    train.stdout.close()  # only head holds the pipe's reading end now
    err = train.stderr.read().decode()
    code = train.wait(timeout=600)
    assert head.stdout.decode().startswith("training an MLP")
    assert code == guard.EXIT_SIGPIPE, err
    assert err == ""  # no BrokenPipeError, no "Exception ignored"


# --- An output that cannot be written ------------------------------------------------------
# (the command after ``dezero_mini``, run with its standard output on /dev/full)
FULL_DISK_OUTPUTS = [
    [*TRAIN],
    ["memory", "--stage", "1", "--batches", "2", "--out", "m.png"],
    ["graph", "--dot"],
    ["start", "3", "."],
    ["check", "3", "missing.py", "--json"],
]
THE_SCRIPT = os.path.join(os.path.dirname(sys.executable), "dezero_mini")


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full (Linux)")
@pytest.mark.parametrize("launcher", ["python -m", "script"])
@pytest.mark.parametrize("argv", FULL_DISK_OUTPUTS, ids=lambda argv: " ".join(argv[:2]))
def test_a_full_disk_under_stdout_is_one_line_and_an_error_status(tmp_path, launcher, argv):
    """``... > /dev/full``: every write fails with ENOSPC, at the first print
    or at the last flush: one line that says so, no traceback, exit 1, or 2
    for check, whose 1 would read as the verdict "failed"."""
    if launcher == "script" and not os.path.exists(THE_SCRIPT):
        pytest.skip("the dezero_mini script is not installed next to this Python")
    command = ([sys.executable, "-m", "dezero_mini"] if launcher == "python -m"
               else [THE_SCRIPT])
    with open("/dev/full", "w") as full:
        ended = subprocess.run(command + argv, stdout=full, stderr=subprocess.PIPE,
                               cwd=tmp_path, timeout=300)
    err = ended.stderr.decode()
    assert ended.returncode == (2 if argv[0] == "check" else 1), err
    assert "Traceback" not in err and "Exception ignored" not in err
    assert err.strip().splitlines() == [
        f"{'python -m dezero_mini' if launcher == 'python -m' else 'dezero_mini'} {argv[0]}: "
        "error: cannot write the output: No space left on device"]


def test_an_output_error_found_at_the_last_flush_is_one_line(capsys, place, monkeypatch):
    """A short output stays in stdout's buffer until the command returns: the
    full disk is found by the flush, which main does itself (not Python at exit)."""
    monkeypatch.setattr(train_command, "train", lambda *args, **kwargs: None)

    class FullStdout:
        def write(self, text):
            return len(text)

        def flush(self):
            raise OSError(28, "No space left on device")

        def fileno(self):
            return -1  # not the process's real stdout: nothing to silence

    monkeypatch.setattr(sys, "stdout", FullStdout())
    code, _, err = run(capsys, *TRAIN)
    assert code == 1, err
    assert err.strip() == "dezero_mini train: error: cannot write the output: No space left on device"


# --- A learning rate that sends the loss out of the numbers ---------------------------------
# (options after train --epochs 1, the words of the error)
DIVERGING = [
    (["--dataset", "spiral", "--lr", "1e300"],
     "the loss became nan at epoch 1, batch 2 (--lr 1e+300): the learning rate is too large; "
     "try the default (0.01 for adam)"),
    (["--dataset", "spiral", "--optimizer", "sgd", "--lr", "1e300"],
     "(--lr 1e+300): the learning rate is too large; try the default (0.3 for sgd)"),
    (["--dataset", "spiral", "--optimizer", "momentum", "--lr", "1e30"],
     "the learning rate is too large; try the default (0.1 for momentum)"),
    (["--dataset", "sincurve", "--lr", "1e300"], "the loss became nan at epoch 1"),
]


@pytest.mark.parametrize("options, words", DIVERGING, ids=lambda v: " ".join(v)
                         if isinstance(v, list) else None)
def test_a_loss_that_is_not_finite_stops_the_run(capsys, tmp_path, monkeypatch, options, words):
    """It ended with exit 0, "loss nan" and a saved file of nan weights, after
    NumPy warnings that pointed at lines of the framework."""
    monkeypatch.chdir(tmp_path)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a RuntimeWarning of NumPy's fails the test
        code, out, err = run(capsys, "train", "--epochs", "1", *options, "--save", "w.npz")
    assert code == 1, err
    assert "Traceback" not in err
    assert len(err.strip().splitlines()) == 1
    assert err.startswith("dezero_mini train: error: the loss became ")
    assert words in err and err.strip().endswith("; no weights were saved")
    assert "nan" not in out  # stopped at the first batch whose loss is not a number
    assert os.listdir(tmp_path) == []


def test_a_loss_that_becomes_nan_at_the_last_update_stops_before_the_save(capsys, tmp_path,
                                                                         monkeypatch):
    """Every batch's loss was finite, but the last update sent the weights out
    of range: the model measured after training gives nan."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(train_command, "evaluate", lambda *args: (float("nan"), 0.333))
    code, out, err = run(capsys, *TRAIN, "--lr", "5", "--save", "w.npz")
    assert code == 1 and "Traceback" not in err
    assert err.strip() == ("dezero_mini train: error: the loss became nan on the training set "
                           "after the last batch (--lr 5): the learning rate is too large; try "
                           "the default (0.01 for adam); no weights were saved")
    assert "training set:" not in out and os.listdir(tmp_path) == []


def test_a_default_learning_rate_that_diverges_asks_for_a_smaller_one():
    diverged = train_command.TrainingDiverged(float("inf"), "at epoch 3, batch 7", 0.01)
    args = argparse.Namespace(optimizer="adam", lr=None, save=None)
    assert train_command.diverged_message(diverged, args) == (
        "the loss became inf at epoch 3, batch 7 (lr 0.01, adam): try a smaller --lr, "
        "or another --optimizer")
