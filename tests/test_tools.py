"""The tools of the trade in the lessons (dezero_mini.memory.tools).

The notebooks run the magics themselves (tests/test_notebooks.py executes
them); this module checks what they rely on: the command lines on a short
leaking script (``mprof run``'s output file, memray's leak report), the
one-line message instead of a traceback when a tool is missing (the import
is made to fail), the stand-ins for memory_profiler's magics where those
cannot load (Python 3.12+ has no ``distutils``; simulated here), the
parsers of what the tools print, and the book copying a page that a
notebook shows in an iframe (memray's flame graphs).
"""
import re
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

from dezero_mini.memory import load_stage, tools

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def leaking_script(tmp_path_factory):
    return tools.write_leaking_script(tmp_path_factory.mktemp("script"), stage=7, batches=30, batch_size=256)


# ---------------------------------------------------------- missing tools


@pytest.mark.parametrize("name", ["memray", "objgraph"])
def test_a_missing_tool_is_one_line_with_its_install_command(name, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, name, None)  # `import name` now fails as if not installed
    monkeypatch.setattr(sys, "platform", "linux")
    assert tools.optional_tool(name) is None
    out = capsys.readouterr().out
    assert out.count("\n") == 1 and f"pip install {name}" in out


def test_memray_on_windows_says_it_does_not_run_there(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "memray", None)
    monkeypatch.setattr(sys, "platform", "win32")
    assert tools.optional_tool("memray") is None
    out = capsys.readouterr().out
    assert out.count("\n") == 1 and "Windows" in out


@pytest.fixture
def shell():
    IPython = pytest.importorskip("IPython")  # noqa: N806
    from IPython.core.interactiveshell import InteractiveShell

    InteractiveShell.clear_instance()
    instance = InteractiveShell.instance()
    yield instance
    InteractiveShell.clear_instance()


def test_without_memray_the_flamegraph_cell_runs_unprofiled(shell, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "memray", None)
    monkeypatch.setattr(sys, "platform", "linux")
    assert tools.load_extension("memray", shell) is False
    assert "pip install memray" in capsys.readouterr().out
    result = shell.run_cell("%%memray_flamegraph\nanswer = 41 + 1\nanswer")
    assert result.error_in_exec is None and result.error_before_exec is None
    assert shell.user_ns["answer"] == 42
    assert "42" not in capsys.readouterr().out  # not displayed: memray's magic shows no value either


def test_memray_flamegraph_is_saved_under_the_notebooks_name(shell, monkeypatch, tmp_path):
    pytest.importorskip("memray")
    from IPython.utils.capture import capture_output

    monkeypatch.chdir(tmp_path)
    assert tools.load_extension("memray", shell) is True
    cell = "%%memray_flamegraph\nimport numpy as np\nblock = np.ones(2**20)\nprint('cell ran')"
    for session, folder in ((None, "flamegraph"), (str(tmp_path / "03_lesson.ipynb"), "03_lesson")):
        shell.user_ns["__session__"] = session
        for _ in range(2):  # a second run replaces the first
            with capture_output() as shown:
                result = shell.run_cell(cell)
            assert result.error_in_exec is None
            page = f"memray-results/{folder}/flamegraph.html"
            assert "cell ran" in shown.stdout and f"Results saved to {page}" in shown.stdout
            assert "tmp" not in shown.stdout, shown.stdout  # memray's random folder is not named
            (iframe,) = [o.data["text/html"] for o in shown.outputs if "text/html" in o.data]
            assert f'src="{page}"' in iframe
            assert "memray - flamegraph report" in Path(page).read_text()
    assert sorted(p.name for p in Path("memray-results").iterdir()) == ["03_lesson", "flamegraph"]
    assert tools.newest_flamegraph() == Path("memray-results/03_lesson/flamegraph.html")


def test_memory_profiler_magics_have_working_stand_ins_without_distutils(shell, monkeypatch, capsys, tmp_path):
    # Python 3.12 removed distutils, which memory_profiler 0.61's magics import.
    monkeypatch.setitem(sys.modules, "distutils", None)
    monkeypatch.setitem(sys.modules, "distutils.version", None)
    assert tools.load_extension("memory_profiler", shell) is False
    message = capsys.readouterr().out
    assert message.count("\n") == 1 and "distutils" in message and "%mprun" in message

    from dezero_mini.memory import Workload

    step = load_stage(3)
    shell.user_ns.update(step=step, workload=Workload(step, batch_size=16), out=tmp_path / "profile.txt")
    result = shell.run_cell("%mprun -T $out -f step.Variable.backward workload.train_step(0)")
    assert result.success
    profile = (tmp_path / "profile.txt").read_text()
    assert "gxs = f.backward(*gys)" in profile
    assert "gxs = f.backward" in tools.line_increments(profile, "gxs = f.backward")

    result = shell.run_cell("kept = %memit -o workload.train_step(1)")
    assert result.success
    assert "peak memory:" in capsys.readouterr().out
    kept = shell.user_ns["kept"]
    # RSS figures: the peak may even fall below the baseline when memory is
    # returned meanwhile, so only their being measured is asserted.
    assert kept.baseline > 0 and kept.mem_usage and min(kept.mem_usage) > 0


def test_the_real_memory_profiler_magics_load_where_distutils_exists(shell):
    pytest.importorskip("distutils.version")  # Python 3.10, 3.11, or setuptools' copy
    assert tools.load_extension("memory_profiler", shell) is True
    assert "mprun" in shell.magics_manager.magics["line"]


# ------------------------------------------------------- what the tools print


PROFILE = """\
Filename: steps/step03_weakref_outputs.py

Line #    Mem usage    Increment  Occurrences   Line Contents
=============================================================
    68    217.2 MiB    217.2 MiB           1       def backward(self):
    85    270.1 MiB     52.9 MiB           9               gxs = f.backward(*gys)
    89    270.1 MiB      0.0 MiB          16                   x.grad = gx if x.grad is None else x.grad + gx
"""


def test_line_increments_and_profile_lines_read_the_increment_column():
    assert tools.line_increments(PROFILE, "gxs = f.backward", "x.grad = gx") == {
        "gxs = f.backward": 52.9, "x.grad = gx": 0.0}
    assert tools.line_increments(PROFILE, "not a line") == {}
    lines = tools.profile_lines(PROFILE, "gxs = f.backward").splitlines()
    assert lines[0].startswith("Line #") and len(lines) == 2 and "52.9 MiB" in lines[1]


def test_read_mprof_reads_the_last_run_without_the_final_zero(tmp_path):
    path = tmp_path / "run.dat"
    path.write_text("CMDLINE python a.py\nMEM 5.0 100.0\nMEM 9.0 101.0\n"
                    "CMDLINE python b.py\nMEM 6.0 200.0\nMEM 8.0 200.5\nMEM 0.000000 200.6\n")
    assert tools.read_mprof(path) == ([0.0, 0.5], [6.0, 8.0])


# ------------------------------------------------------ the command lines


def test_mprof_run_samples_the_leaking_script(leaking_script, tmp_path):
    samples = tmp_path / "leak.dat"
    tools.run_command([sys.executable, "-m", "mprof", "run", "--interval", "0.01",
                       "--output", samples, leaking_script], show=False)
    text = samples.read_text()
    assert text.startswith("CMDLINE") and str(leaking_script) in text.splitlines()[0]
    seconds, mib = tools.read_mprof(samples)
    assert len(mib) >= 5 and seconds == sorted(seconds)
    # Thirty graphs of 454 KiB stay: the process ends well above where it began.
    assert max(mib) - mib[0] > 10


def test_the_leaking_script_leaks_a_graph_per_batch(leaking_script):
    done = tools.run_command([sys.executable, "-m", "dezero_mini", "leaks", leaking_script],
                             ok=(0, 1), show=False)
    assert done.returncode == 1, done.stdout
    assert "growth: 20.0 objects" in done.stdout and "history[" in done.stdout


def test_memray_leak_report_names_the_step_file(leaking_script, tmp_path):
    pytest.importorskip("memray")
    capture = tmp_path / "leak.bin"
    tools.run_command([sys.executable, "-m", "memray", "run", "--aggregate", "--force",
                       "--output", capture, leaking_script], env={"PYTHONMALLOC": "malloc"}, show=False)
    sites, (elsewhere, elsewhere_bytes) = tools.memray_leak_sites(capture, within="step07_user_held_graphs.py")
    assert sites[0][0].startswith("forward (step07_user_held_graphs.py:")
    # The activations of 30 batches: 30 x 454 KiB, minus the small arrays of the last layers.
    assert sum(nbytes for _, nbytes in sites) > 10 * 1024 * 1024
    assert elsewhere_bytes >= 0


def test_memray_peak_sites_see_the_gradients_that_stage_04_drops():
    pytest.importorskip("memray")
    from dezero_mini.memory import Workload

    peaks = {}
    for stage in (3, 4):
        workload = Workload(load_stage(stage), batch_size=512, hidden=256)
        workload.train_step(0)
        sites = tools.memray_peak_sites(workload.train_step, 1, within=f"step0{stage}_")
        peaks[stage] = sum(nbytes for _, nbytes in sites)
        # Each site is a line of the step file, whose source the lesson quotes.
        assert all(tools.site_source(site, workload.module) for site, _ in sites)
    assert peaks[4] < 0.9 * peaks[3], peaks


def test_run_command_in_a_folder_shows_and_passes_its_files_by_name(tmp_path, monkeypatch, capsys):
    # The lessons run their commands in a folder next to the notebook; what
    # they print must name the files as a learner types them there, never
    # a path that differs from one machine (or run) to the next.
    monkeypatch.chdir(tmp_path)
    folder, elsewhere = Path("runs") / "01_lesson", tmp_path / "other.txt"
    folder.mkdir(parents=True)
    (folder / "data.txt").write_text("inside")
    elsewhere.write_text("outside")
    echo = "import sys; print(open(sys.argv[1]).read(), open(sys.argv[2]).read())"
    done = tools.run_command([sys.executable, "-c", echo, folder / "data.txt", elsewhere], cwd=folder)
    shown = capsys.readouterr().out
    assert shown.startswith("$ python -c ") and shown.rstrip().endswith(f"data.txt {elsewhere}"), shown
    assert str(tmp_path / "runs") not in shown  # the folder's own files are named from inside it
    assert done.stdout.split() == ["inside", "outside"]  # the command found both files


def test_run_command_names_the_failing_command():
    with pytest.raises(RuntimeError, match="exit status 3"):
        tools.run_command([sys.executable, "-c", "import sys; sys.exit(3)"], show=False)


# ------------------------------------------------------------------ the book


def _build_book():
    pytest.importorskip("nbconvert")
    import build_book

    return build_book


# IPython's IFrame, as memray's magic displays it: a blank line inside the tag
# (which mdBook cannot keep); the page loads its scripts from a CDN.
IFRAME_HTML = ('\n        <iframe\n            width="100%"\n            height="600"\n'
               '            src="results/run1/flamegraph.html"\n            frameborder="0"\n'
               '            allowfullscreen\n            \n        ></iframe>\n        ')
FLAME_PAGE = ("<html><head><title>memray - flamegraph report</title>"
              "<script src='https://cdn.example.org/d3.min.js'></script></head><body>flame</body></html>")


def test_book_turns_the_iframe_of_a_local_page_into_a_link_to_its_copy(tmp_path):
    build_book = _build_book()
    (tmp_path / "notebooks" / "results" / "run1").mkdir(parents=True)
    (tmp_path / "notebooks" / "results" / "run1" / "flamegraph.html").write_text(FLAME_PAGE)
    links = build_book.LinkMapper(tmp_path, tmp_path / "src", {})
    html = links.rewrite_html(IFRAME_HTML + '<img src="results/run1/flamegraph.html">',
                              tmp_path / "notebooks", "nb")
    assert "<iframe" not in html
    paragraph = re.search(r"<p\b.*?</p>", html, re.DOTALL).group(0)
    assert "\n" not in paragraph  # one line: nothing that mdBook can cut in two
    link = re.search(r'<a href="([^"]+)" target="_blank"[^>]*>([^<]*)</a>', html)
    assert link.group(1) == "notebooks/results/run1/flamegraph.html"
    assert "memray - flamegraph report" in link.group(2)
    assert "new tab" in html and "network (cdn.example.org)" in html
    assert (tmp_path / "src" / link.group(1)).read_text() == FLAME_PAGE
    assert '<img src="notebooks/results/run1/flamegraph.html">' in html  # other tags: src rewritten only
    # An iframe of a web page stays an iframe.
    remote = IFRAME_HTML.replace("results/run1/flamegraph.html", "https://example.org/page.html")
    assert links.rewrite_html(remote, tmp_path / "notebooks", "nb").count("<iframe") == 1
    assert links.warnings == []
    # So does an iframe of a page that is not there, with one warning.
    missing = IFRAME_HTML.replace("run1", "run2")
    assert links.rewrite_html(missing, tmp_path / "notebooks", "nb").count("<iframe") == 1
    assert len(links.warnings) == 1 and "results/run2/flamegraph.html" in links.warnings[0]


def test_book_copies_a_page_that_a_notebook_shows_in_an_iframe(tmp_path):
    build_book = _build_book()

    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "README.md").write_text("# Test course\n")
    (repo / "book.toml").write_text((ROOT / "book.toml").read_text())
    nb = new_notebook(cells=[
        new_markdown_cell("# How we measure"),
        new_code_cell(
            "from pathlib import Path\nfrom IPython.display import IFrame, display\n"
            "Path('results/run1').mkdir(parents=True, exist_ok=True)\n"
            f"Path('results/run1/flamegraph.html').write_text({FLAME_PAGE!r})\n"
            "display(IFrame('results/run1/flamegraph.html', width='100%', height=300))"
        ),
    ])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    (repo / "notebooks").mkdir()
    nbformat.write(nb, repo / "notebooks" / "00_measure.ipynb")

    build_book.build(repo, run_mdbook=False)

    src = repo / "build" / "book" / "src"
    chapter = (src / "00_measure.md").read_text()
    assert '<a href="notebooks/results/run1/flamegraph.html" target="_blank"' in chapter
    assert "<iframe" not in chapter
    assert (src / "notebooks" / "results" / "run1" / "flamegraph.html").read_text() == FLAME_PAGE


def test_the_lab_extra_and_the_make_targets_name_the_tools():
    pyproject = (ROOT / "pyproject.toml").read_text()
    makefile = (ROOT / "Makefile").read_text()
    for extra in ("tools = [", "lab = ["):
        block = pyproject[pyproject.index(extra):].split("]", 1)[0]
        assert "memray" in block and "sys_platform != 'win32'" in block and "objgraph" in block
    # `make book` installs BOOK_EXTRAS, `make test` TEST_EXTRAS (BOOK_EXTRAS and the test tools)
    extras = dict(re.findall(r"^(BOOK|TEST)_EXTRAS := (.+)$", makefile, re.MULTILINE))
    assert "tools" in extras["BOOK"].split(",")
    assert {"book", "test", "tools"} <= set(extras["TEST"].replace("$(BOOK_EXTRAS)", extras["BOOK"]).split(","))
    assert re.search(r"jupyter lab .*notebooks/", makefile) and "ipykernel install" in makefile
    assert subprocess.run(["make", "-n", "lab"], cwd=ROOT, capture_output=True).returncode == 0
