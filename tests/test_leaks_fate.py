"""``leaks`` reports the script's fate: a table of the ways a script can end.

The exit status is the script's own when it fails (``sys.exit(N)``: N; an
uncaught exception: 1, as ``python SCRIPT`` gives); a ``SystemExit`` message
is shown; a script that ends with ``os._exit`` is judged at that call, so a
leak report is never followed by exit 0. Every row runs a leaking and a
clean loop: the status is the script's when it is not 0, else the verdict's.
"""
import os
import subprocess
import sys
import textwrap

import pytest

from dezero_mini import cli

LOOP = """
import os, sys
import numpy as np
import dezero_mini as dm
import dezero_mini.functions as F
kept = []
for i in range(12):
    y = F.sum(dm.Variable(np.ones(3)) * 2)
    y.backward()
    {keep}
"""
LEAKING, CLEAN = "kept.append(y)", "pass"
VERDICT = "=== dezero_mini leaks"

# (the script's last line, its status, words its end shows on stderr)
ENDINGS = [
    ("", 0, []),
    ("sys.exit(0)", 0, []),
    ("sys.exit()", 0, []),
    ("sys.exit(1)", 1, ["train.py exited with status 1"]),
    ("sys.exit(3)", 3, ["train.py exited with status 3"]),
    ("sys.exit('fatal: the data is gone')", 1, ["fatal: the data is gone",
                                                 "exited with status 1"]),
    ("raise RuntimeError('broken batch')", 1, ["RuntimeError: broken batch",
                                               "stopped with an exception"]),
]


def write_script(tmp_path, keep, ending):
    path = tmp_path / "train.py"
    path.write_text(textwrap.dedent(LOOP).format(keep=keep) + ending + "\n")
    return path


@pytest.mark.parametrize("leaking", [True, False], ids=["leaking", "clean"])
@pytest.mark.parametrize("ending, status, words", ENDINGS, ids=[e[0] or "the end" for e in ENDINGS])
def test_the_exit_status_is_the_scripts_when_it_fails(capsys, tmp_path, leaking, ending, status,
                                                      words):
    path = write_script(tmp_path, LEAKING if leaking else CLEAN, ending)
    try:
        code = cli.main(["leaks", str(path)])
    except SystemExit as stop:  # the command itself must not end through the script's
        pytest.fail(f"the script's SystemExit({stop.code}) escaped the command")
    out, err = capsys.readouterr()
    verdict = 1 if leaking else 0
    assert code == (status or verdict), out + err
    for word in words:
        assert word in err
    if "raise" in ending:  # the script's traceback, not the command's
        assert 'train.py", line' in err and "leaks.py" not in err
    else:
        assert "Traceback" not in err
        assert VERDICT in out  # judged in every case where the script ran to its end


@pytest.mark.parametrize("leaking", [True, False], ids=["leaking", "clean"])
@pytest.mark.parametrize("status", [0, 4])
def test_a_script_ending_in_os_exit_is_judged_before_the_process_ends(tmp_path, leaking, status):
    path = write_script(tmp_path, LEAKING if leaking else CLEAN, f"os._exit({status})")
    done = subprocess.run([sys.executable, "-m", "dezero_mini", "leaks", str(path)],
                          capture_output=True, text=True, timeout=600)
    assert f"train.py called os._exit({status})" in done.stderr
    assert "Traceback" not in done.stderr
    assert VERDICT in done.stdout and "finished after 12 iterations" in done.stdout
    final = done.stdout.split("finished after 12 iterations")[1].splitlines()[1]
    assert final.startswith("leak:" if leaking else "no leak:"), done.stdout
    assert done.returncode == (status or (1 if leaking else 0))


def test_sigterm_during_the_script_ends_the_command_not_as_the_scripts_error(tmp_path):
    path = tmp_path / "train.py"
    path.write_text("import time\nprint('started', flush=True)\ntime.sleep(60)\n")
    process = subprocess.Popen([sys.executable, "-m", "dezero_mini", "leaks", str(path)],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert process.stdout.readline() == "started\n"
        process.terminate()
        _, err = process.communicate(timeout=300)  # (only ends a hang)
    finally:
        process.kill()
    assert process.returncode == 143
    assert "Traceback" not in err and "terminated" in err


def test_a_script_that_closes_its_stdout_is_not_blamed_for_leaks_flush(tmp_path, monkeypatch):
    """``sys.stdout.close()`` in the script: leaving the script's namespace
    flushed the closed stream and raised ValueError, which leaks reported as
    the script's own exception, with dezero_mini's frames."""
    import io

    from dezero_mini.memory.loop_marks import new_main_module, script_as_main

    path = tmp_path / "closes.py"
    path.write_text("pass\n")
    closed = io.TextIOWrapper(io.BytesIO())  # (a closed StringIO flushes without a word)
    monkeypatch.setattr(sys, "stdout", closed)
    with script_as_main(path, new_main_module(path), []):
        closed.close()


# --- What stands where the script should be -------------------------------------------------
# (the command line after ``leaks``, words of the one error line; exit 2 for each)
def bad_script_places(tmp_path):
    (tmp_path / "folder.py").mkdir()
    (tmp_path / "dangling.py").symlink_to(tmp_path / "nowhere.py")
    (tmp_path / "-train.py").write_text("print('ran')\n")
    table = [
        (["missing.py"], "the script 'missing.py' does not exist"),
        (["folder.py"], "the script 'folder.py' is a folder"),
        (["dangling.py"], "the script 'dangling.py' is a link to nothing"),
        (["-train.py"], "'-train.py' reads as an option; give a script whose name starts with "
                        "a dash with its folder: ./-train.py"),
        (["--consecutive", "3", "-train.py"], "with its folder: ./-train.py"),
        ([], "the following argument is required: SCRIPT (the Python script to run; "
             "ARGS for it may follow)"),
    ]
    if hasattr(os, "mkfifo"):  # reading a pipe nobody writes to would wait for ever
        os.mkfifo(tmp_path / "pipe.py")
        table.append((["pipe.py"], "the script 'pipe.py' is not a regular file (a pipe or a device)"))
    for device in ("/dev/null", "/dev/zero"):  # /dev/zero would be read until memory ends
        if os.path.exists(device):
            table.append(([device], f"the script '{device}' is not a regular file"))
    return table


def test_what_stands_where_the_script_should_be_is_named(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for argv, words in bad_script_places(tmp_path):
        try:
            code = cli.main(["leaks", *argv])
        except SystemExit as stop:  # argparse's own error
            code = stop.code
        out, err = capsys.readouterr()
        assert code == 2, (argv, err)
        assert out == "" and "Traceback" not in err
        assert len(err.strip().splitlines()) == 1 or err.startswith("usage:"), err
        assert words in err.strip().splitlines()[-1], (argv, err)
    assert os.listdir(tmp_path / "folder.py") == []


def test_an_unknown_option_is_still_argparses_error(capsys):
    with pytest.raises(SystemExit) as stop:
        cli.main(["leaks", "--bogus", "train.py"])
    assert stop.value.code == 2
    assert capsys.readouterr().err.strip().endswith("error: unrecognized arguments: --bogus")


# --- When the output of the reports goes away ----------------------------------------------
SWALLOWING = """
try:
{loop}
except Exception as error:  # a script that goes on whatever happens
    print('the script swallowed', repr(error), file=sys.stderr)
"""
# (name, how the script is made from LOOP, its last line)
OUTPUT_SCRIPTS = [
    ("plain", lambda loop: loop, ""),
    ("swallows exceptions", lambda loop: SWALLOWING.format(loop=textwrap.indent(loop, "    ")),
     ""),
    ("ends in os._exit", lambda loop: loop, "os._exit(0)"),
]
# (where stdout goes, exit status, the lines of stderr that are not the script's os._exit note)
OUTPUTS = [
    ("a closed pipe", 141, []),
    *([("/dev/full", 2, ["dezero_mini leaks: error: cannot write the output: "
                         "No space left on device"])] if os.path.exists("/dev/full") else []),
]


@pytest.mark.parametrize("where, status, lines", OUTPUTS, ids=[row[0] for row in OUTPUTS])
@pytest.mark.parametrize("name, make, ending", OUTPUT_SCRIPTS,
                         ids=[row[0] for row in OUTPUT_SCRIPTS])
def test_a_report_that_cannot_be_written_is_not_blamed_on_the_script(tmp_path, where, status,
                                                                     lines, name, make, ending):
    """``leaks train.py | head -1`` or ``> /dev/full``: the first report failed
    inside the script's frames and was shown as the script's exception (or
    swallowed by the script's own ``except Exception``)."""
    source = make(textwrap.dedent(LOOP).format(keep=LEAKING)) + ending + "\n"
    path = tmp_path / "train.py"
    path.write_text("import os, sys\n" + source)
    command = [sys.executable, "-m", "dezero_mini", "leaks", str(path)]
    if where == "a closed pipe":  # no reader at all: the first write fails, every time
        reader, writer = os.pipe()
        os.close(reader)
        try:
            done = subprocess.run(command, stdout=writer, stderr=subprocess.PIPE, text=True,
                                  timeout=600)
        finally:
            os.close(writer)
    else:
        with open(where, "w") as full:
            done = subprocess.run(command, stdout=full, stderr=subprocess.PIPE, text=True,
                                  timeout=600)
    err = [line for line in done.stderr.splitlines() if "called os._exit" not in line]
    assert done.returncode == status, done.stderr
    assert "Traceback" not in done.stderr and "swallowed" not in done.stderr
    assert "Exception ignored" not in done.stderr
    assert [line.replace("python -m dezero_mini", "dezero_mini") for line in err] == lines


def test_a_script_that_closes_stdout_still_gets_its_reports(tmp_path):
    """``sys.stdout.close()`` in the script: the reports were written to the
    closed stream, a ValueError blamed on the script, and main's last flush
    of stdout a traceback."""
    path = write_script(tmp_path, LEAKING, "")
    source = path.read_text().replace("kept = []", "kept = []\nsys.stdout.close()")
    path.write_text(source)
    done = subprocess.run([sys.executable, "-m", "dezero_mini", "leaks", str(path)],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 1, done.stderr  # the verdict: a leak
    assert done.stderr == ""
    assert VERDICT in done.stdout and "finished after 12 iterations" in done.stdout
