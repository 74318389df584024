"""The notebooks as tests: each is stored clean and runs from top to bottom.

A notebook is the lesson of a stage, so it must keep working as the code
changes. Each one is checked as it is stored in git (no outputs, no execution
counts, the ``python3`` kernel), then executed the way ``make book`` does it
(tools/run_notebooks.py: the kernel runs on this interpreter, in the notebook's
folder).

The tools that run the notebooks and build the book are tested here too, on
notebooks that the tests write, so this module has tests to run even before
the course has any notebook.
"""
import json
import re
import shutil
import sys
from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

ROOT = Path(__file__).resolve().parents[1]
import notebook_cache  # noqa: E402  (tools/ is not a package)
import run_notebooks  # noqa: E402

NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
NOTEBOOK_PARAMS = [pytest.param(p, id=p.name) for p in NOTEBOOKS] or [
    pytest.param(None, id="no-notebooks", marks=pytest.mark.skip(reason="notebooks/ has no notebook yet"))
]

# The course aims at a minute per notebook; wall time depends on the machine and on
# its load, so no test asserts it: each run's time is printed (and `make notebooks`
# reports them all).


def _write_notebook(path: Path, cells) -> Path:
    nb = new_notebook(cells=cells)
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, path)
    return path


# ------------------------------------------------------ the course notebooks


@pytest.mark.parametrize("path", NOTEBOOK_PARAMS)
def test_notebook_is_stored_clean(path):
    nb = nbformat.read(path, as_version=4)
    nbformat.validate(nb)
    assert re.fullmatch(r"\d\d_[a-z0-9_]+\.ipynb", path.name), (
        f"{path.name}: name it NN_<name>.ipynb, like its step file, or the book leaves it out"
    )
    assert nb.metadata.get("kernelspec", {}).get("name") == "python3", (
        f"{path.name}: the kernelspec must be python3 (Kernel > Change kernel in Jupyter)"
    )
    dirty = [
        i + 1
        for i, cell in enumerate(nb.cells)
        if cell.cell_type == "code" and (cell.outputs or cell.execution_count is not None)
    ]
    assert not dirty, (
        f"{path.name}: cells {dirty} are stored with outputs or execution counts; clear them "
        f"(e.g. jupyter nbconvert --clear-output --inplace {path.relative_to(ROOT)})"
    )


# Each notebook runs once for the whole test run and the book (run_notebooks.executed:
# kept in this process and in build/executed/, reused only while the notebook, the
# package, the stage files and the installed tools are what they were when it ran;
# DEZERO_MINI_FRESH_NOTEBOOKS=1 runs them all again). The checks of their figures
# below and the site build of tests/test_site.py take the same runs.
_executed = run_notebooks.executed


@pytest.mark.parametrize("path", NOTEBOOK_PARAMS)
def test_notebook_runs(path, progress_line):
    nb = _executed(path)  # raises NotebookError naming the cell
    seconds, reused = run_notebooks.RUN_TIMES[path.resolve()]
    progress_line(f"{path.name} ran in {seconds:.1f} s{' (kept from an earlier run)' if reused else ''}")
    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs if o.output_type == "error"]
    assert not errors


# ------------------------------------- figures that the prose states, checked

# Most figures of the lessons are rendered by the cell that measures them. The
# few that stay in the prose (summaries, a sentence about a printed figure) are
# listed here: the words as the lesson states them, the figure as the executed
# notebook prints it (a regular expression with one group), and the range that
# the words allow. Edit a sentence and this table together.
PROSE_FIGURES = [
    ("00_how_we_measure.ipynb", "`del big` removed our name, but IPython's output cache still held the object",
     r"after del big, the object is alive: (True|False)", "True"),
    ("00_how_we_measure.ipynb", "`disable_output_cache()` empties the cache",
     r"after disable_output_cache\(\), the object is alive: (True|False)", "False"),
    ("02_cycles.ipynb", "The collector freed the three intermediate Variables and the three Functions",
     r"freed ([1-9]\d*) Variables, \d+ Functions", (3, 3)),
    ("02_cycles.ipynb", "The collector freed the three intermediate Variables and the three Functions",
     r"freed [1-9]\d* Variables, (\d+) Functions", (3, 3)),
    ("03_weakref_outputs.ipynb", "the three intermediate Variables (the results of",
     r"freed (\d+) Variables, \d+ Functions", (3, 3)),
    ("03_weakref_outputs.ipynb", "and the three Functions are gone",
     r"freed \d+ Variables, (\d+) Functions", (3, 3)),
    ("04_retain_grad.ipynb", "the backward peak of a batch falls by about a fifth",
     r"lowers the backward peak by (\d+)%", (15, 25)),
    ("04_retain_grad.ipynb", "the memory held when backward returns by about 40 %",
     r"what backward leaves behind by (\d+)%", (35, 47)),
    ("05_no_grad.ipynb", "a peak of about 25 activations with the graph",
     r"with the graph: peak [\d.]+ MiB = ([\d.]+) activations", (24, 26)),
    ("05_no_grad.ipynb", "3 under `no_grad()`",
     r"under no_grad\(\): peak [\d.]+ MiB = ([\d.]+) activations", (2.5, 3.5)),
    ("05_no_grad.ipynb", "seven objects, and each of the two intermediate arrays",
     r"watch\(y\) finds (\d+) objects", (7, 7)),
    ("05_no_grad.ipynb", "intermediate arrays (78 KiB each here)",
     r"with intermediate arrays of (\d+) KiB", (78, 78)),
    ("08_saved_tensors.ipynb", "the graph holds less than half the bytes of stage 07",
     r"KiB on stage 08, ([\d.]+) times less", (2.0, 3.0)),
    ("08_saved_tensors.ipynb", "on a stack of additions and element-wise functions, about a third",
     r"MiB against [\d.]+ MiB, ([\d.]+) times less", (2.5, 3.2)),
    # 9 bytes on 3.12, 17 on 3.13, 25 on 3.11, 62 on 3.10 (the dict made with the object)
    ("08_saved_tensors.ipynb", "`__slots__` saves from about ten to a few tens of bytes per graph node",
     r"the slots save (\d+)(?: to \d+)? bytes", (8, 99)),
    ("09_memory_planning.ipynb", "need about 2.7 times less memory than one array per buffer for training",
     r"the standard MLP needs ([\d.]+)x less for training", (2.5, 2.9)),
    ("09_memory_planning.ipynb", "and about 3 times less for inference",
     r"less for training and ([\d.]+)x less for inference", (2.8, 3.3)),
    ("09_memory_planning.ipynb", "a chain of 100 layers about 150 times for inference",
     r"instead of [\d,]+ KiB \(([\d.]+)x\)", (140, 160)),
]


def _prose(nb):
    """The Markdown cells, with every run of white space made one space."""
    return " ".join(" ".join(c.source.split()) for c in nb.cells if c.cell_type == "markdown")


def _printed(nb):
    """Everything the code cells printed or displayed as text."""
    parts = []
    for cell in nb.cells:
        for output in cell.get("outputs", []):
            if output.output_type == "stream":
                parts.append(output.text)
            for mime in ("text/plain", "text/markdown"):
                if mime in output.get("data", {}):
                    parts.append(output.data[mime])
    return "\n".join(parts)


@pytest.mark.parametrize("name, words, pattern, allowed", PROSE_FIGURES,
                         ids=[f"{n[:2]}-{w[:30]}" for n, w, _, _ in PROSE_FIGURES])
def test_prose_figure_agrees_with_the_run(name, words, pattern, allowed):
    path = ROOT / "notebooks" / name
    stored = nbformat.read(path, as_version=4)
    assert words in _prose(stored), f"{name} no longer says {words!r}: update PROSE_FIGURES with it"
    found = re.findall(pattern, _printed(_executed(path)))
    assert len(found) == 1, f"{name} printed {len(found)} matches of {pattern!r}, expected one"
    if isinstance(allowed, str):
        assert found[0] == allowed, f"{name} says {words!r}, but the run printed {found[0]}"
    else:
        low, high = allowed
        assert low <= float(found[0]) <= high, (
            f"{name} says {words!r}, but the run printed {found[0]} (allowed {low} to {high})"
        )


# ------------------------------------------- the tools that run the notebooks


def test_kernel_runs_on_this_interpreter_in_the_notebook_folder(tmp_path, monkeypatch):
    # A `python3` kernelspec that jupyter_client would find first, naming a
    # Python that does not exist: the runner must not use it.
    spec_dir = tmp_path / "jupyter" / "kernels" / "python3"
    spec_dir.mkdir(parents=True)
    (spec_dir / "kernel.json").write_text(
        '{"argv": ["/nonexistent/python3", "-m", "ipykernel_launcher", "-f", "{connection_file}"],'
        ' "display_name": "Some other Python", "language": "python"}'
    )
    monkeypatch.setenv("JUPYTER_PATH", str(tmp_path / "jupyter"))
    folder = tmp_path / "lessons"
    path = _write_notebook(folder / "probe.ipynb", [
        new_code_cell("import os, sys\nprint(sys.prefix)\nprint(os.getcwd())"),
    ])

    nb = run_notebooks.execute_notebook(path)

    prefix, cwd = nb.cells[0].outputs[0].text.splitlines()
    assert prefix == sys.prefix
    assert Path(cwd).resolve() == folder.resolve()
    # The stored file is left as it was.
    assert nbformat.read(path, as_version=4).cells[0].outputs == []


def test_a_failing_cell_is_named(tmp_path):
    path = _write_notebook(tmp_path / "07_broken.ipynb", [
        new_markdown_cell("# Broken"),
        new_code_cell("x = 1"),
        new_code_cell("x / 0"),
        new_code_cell("print('not reached')"),
    ])
    with pytest.raises(run_notebooks.NotebookError) as info:
        run_notebooks.execute_notebook(path)
    message = str(info.value)
    assert "07_broken.ipynb" in message
    assert "cell 3 of 4" in message
    assert "ZeroDivisionError" in message
    assert info.value.cell_index == 2


def test_notebooks_run_side_by_side_longest_first_and_are_kept(tmp_path, monkeypatch):
    """`make book` runs the notebooks in worker processes, two or more at a time
    (run_notebooks.run_side_by_side): the one whose last run took longest starts
    first, a failure is reported with its notebook and cell, a success is kept in
    the cache (the next call reuses it), and each run says its kernel's CPU time."""
    repo = tmp_path / "repo"
    (repo / "dezero_mini").mkdir(parents=True)
    (repo / "steps").mkdir()
    fine = _write_notebook(repo / "notebooks" / "01_fine.ipynb", [new_code_cell("print(sum(range(10)))")])
    broken = _write_notebook(repo / "notebooks" / "02_broken.ipynb",  # the longer code
                             [new_code_cell("numbers = list(range(1000))\ntotal = sum(numbers)"),
                              new_code_cell("total / 0")])
    cache = repo / "build" / "executed"
    monkeypatch.setattr(notebook_cache, "ROOT", repo)
    monkeypatch.setattr(notebook_cache, "CACHE_DIR", cache)
    monkeypatch.delenv(notebook_cache.FRESH_VARIABLE, raising=False)
    # Without kept runs (a fresh clone), the longer code first; with them, the longer run.
    assert run_notebooks.longest_first([fine, broken]) == [broken.resolve(), fine.resolve()]
    cache.mkdir(parents=True)
    (cache / "01_fine.json").write_text('{"seconds": 99.0}')
    assert run_notebooks.longest_first([fine, broken]) == [broken.resolve(), fine.resolve()]  # 02 has none
    (cache / "02_broken.json").write_text('{"seconds": 1.5}')
    assert run_notebooks.longest_first([fine, broken]) == [fine.resolve(), broken.resolve()]

    lines = []
    results = run_notebooks.run_side_by_side([fine, broken], jobs=2, report=lines.append)

    seconds, reused, cost, error = results[fine.resolve()]
    assert error is None and not reused and seconds > 0
    assert cost.kernel_cpu is not None and cost.kernel_cpu > 0 and set(cost.cells) == {0}
    _, _, _, error = results[broken.resolve()]
    assert "02_broken.ipynb" in error and "cell 2 of 2" in error and "ZeroDivisionError" in error
    assert sorted(line.split()[2] for line in lines) == ["FAILED", "ran"]
    assert notebook_cache.load(fine, notebook_cache.inputs_key(fine)) is not None
    # The second time, the kept run is taken, not run again.
    again = run_notebooks.run_side_by_side([fine], jobs=2, report=lines.append)
    assert again[fine.resolve()][1] is True


# ------------------------------------------------------------- the book build


def _copy_book_settings(repo):
    """book.toml and the style sheet it names, into a repository made by a test."""
    shutil.copy(ROOT / "book.toml", repo / "book.toml")
    (repo / "docs").mkdir(parents=True, exist_ok=True)
    shutil.copy(ROOT / "docs" / "course.css", repo / "docs" / "course.css")


def test_book_from_a_small_repository(tmp_path, monkeypatch, capsys):
    pytest.importorskip("nbconvert")
    import build_book

    # As on a CI machine that sets it: plots must still reach the book.
    monkeypatch.setenv("MPLBACKEND", "Agg")

    repo = tmp_path / "repo"
    (repo / "steps").mkdir(parents=True)
    (repo / "steps" / "step01_first.py").write_text("STAGE = '01'\nx = 1\n")
    (repo / "steps" / "step02_second.py").write_text("STAGE = '02'\nx = 2\n")
    _copy_book_settings(repo)
    (repo / "README.md").write_text(
        "# Test course\n\n![figure](notebooks/figures/saved.png)\n\n"
        "See [the first lesson](notebooks/01_first.ipynb).\n"
    )
    (repo / "docs" / "sources.md").write_text(
        "# Sources\n\nBack to [the first lesson](../notebooks/01_first.ipynb).\n"
    )
    # A chapter with no step file: no diff, and no warning about it.
    _write_notebook(repo / "notebooks" / "00_measure.ipynb", [
        new_markdown_cell("# How we measure\n\nSee [the sources](../docs/sources.md)."),
    ])
    _write_notebook(repo / "notebooks" / "01_first.ipynb", [
        new_markdown_cell("Intro text.\n\n# Stage 01: first [test]"),
        new_code_cell(
            "import os\nimport matplotlib.pyplot as plt\n"
            "fig, ax = plt.subplots()\nax.plot([0, 1], [1, 0])\n"
            "os.makedirs('figures', exist_ok=True)\nfig.savefig('figures/saved.png')\nplt.show()"
        ),
    ])
    svg = ('<svg xmlns="http://www.w3.org/2000/svg" width="20" height="20">'
           '<circle cx="10" cy="10" r="8"/></svg>')
    rendered = new_code_cell(
        "from IPython.display import Markdown, display\n"
        "display(Markdown(f'Measured {2 + 2} units; see [stage 01](01_first.ipynb).'))"
    )
    rendered.metadata["tags"] = ["remove-input"]
    _write_notebook(repo / "notebooks" / "02_second.ipynb", [
        new_markdown_cell("# Stage 02: second\n\nBack to [stage 01](01_first.ipynb)."),
        new_code_cell(f"from IPython.display import SVG\nSVG({svg!r})"),
        rendered,
    ])

    run_mdbook = True
    try:
        build_book.find_mdbook()
    except build_book.BookError:
        run_mdbook = False  # only the test extra is installed: check the Markdown side
    index = build_book.build(repo, run_mdbook=run_mdbook)
    assert "no steps/step00" not in capsys.readouterr().err

    src = repo / "build" / "book" / "src"
    assert (src / "SUMMARY.md").read_text().splitlines()[2:] == [
        "[Introduction](introduction.md)",
        "",
        "- [How we measure](00_measure.md)",
        r"- [Stage 01: first \[test\]](01_first.md)",
        "- [Stage 02: second](02_second.md)",
        "- [Sources](sources.md)",
    ]
    measure = (src / "00_measure.md").read_text()
    assert "What changed in the code" not in measure and "[the sources](sources.md)" in measure
    assert "[the first lesson](01_first.md)" in (src / "sources.md").read_text()
    first = (src / "01_first.md").read_text()
    second = (src / "02_second.md").read_text()
    assert "## What changed in the code" in first and "x = 1" in first
    assert "```diff\n--- steps/step01_first.py\n+++ steps/step02_second.py" in second
    assert "\n-x = 1\n" in second and "\n+x = 2\n" in second
    assert "[stage 01](01_first.md)" in second
    # A paragraph rendered from a figure: its output only, with its link rewritten.
    assert "Measured 4 units; see [stage 01](01_first.md)." in second
    assert "display(Markdown" not in second
    pngs = list((src / "01_first_files").glob("*.png"))
    svgs = list((src / "02_second_files").glob("*.svg"))
    assert len(pngs) == 1 and len(svgs) == 1
    assert (src / "notebooks" / "figures" / "saved.png").is_file()
    intro = (src / "introduction.md").read_text()
    assert "](01_first.md)" in intro and "](notebooks/figures/saved.png)" in intro

    if run_mdbook:
        html = repo / "build" / "book" / "html"
        assert index == html / "index.html" and index.is_file()
        assert f'src="01_first_files/{pngs[0].name}"' in (html / "01_first.html").read_text()
        assert f'src="02_second_files/{svgs[0].name}"' in (html / "02_second.html").read_text()
        assert (html / "02_second_files" / svgs[0].name).is_file()
        assert 'src="notebooks/figures/saved.png"' in (html / "introduction.html").read_text()
        assert (html / "notebooks" / "figures" / "saved.png").is_file()


def test_book_folds_each_solution_under_its_exercise(tmp_path):
    pytest.importorskip("nbconvert")
    import build_book

    repo = tmp_path / "repo"
    (repo / "solutions").mkdir(parents=True)
    _copy_book_settings(repo)
    (repo / "README.md").write_text("# Test course\n")
    exercises = (
        "## Exercises\n\n"
        "1. **Add.** Compute `1 + 1`.\n   *What you should see:* 2.\n"
        "2. **Multiply.** Compute `2 * 3`.\n   *What you should see:* 6.\n\n"
        "## Further reading\n\n* A book.\n"
    )
    _write_notebook(repo / "notebooks" / "01_first.ipynb", [
        new_markdown_cell("# Stage 01: first"),
        new_code_cell("x = 1"),
        new_markdown_cell(exercises),
    ])
    solutions = repo / "solutions" / "01_first.py"
    solutions.write_text(
        'def exercise_1():\n    """Addition adds."""\n    assert 1 + 1 == 2\n\n\n'
        'def exercise_2():\n    """Multiplication multiplies."""\n    product = 2 * 3\n    assert product == 6\n'
    )
    run_mdbook = True
    try:
        build_book.find_mdbook()
    except build_book.BookError:
        run_mdbook = False
    build_book.build(repo, run_mdbook=run_mdbook)

    chapter = (repo / "build" / "book" / "src" / "01_first.md").read_text()
    assert chapter.count("<details><summary>Solution</summary>") == 2
    first, second = chapter.index("Addition adds."), chapter.index("Multiplication multiplies.")
    assert chapter.index("*What you should see:* 2.") < first < chapter.index("2. **Multiply.**") < second
    assert "   ```python\n   product = 2 * 3\n   assert product == 6\n   ```" in chapter
    assert "Run it: `python solutions/01_first.py 2`" in chapter
    assert second < chapter.index("## Further reading")
    if run_mdbook:
        html = (repo / "build" / "book" / "html" / "01_first.html").read_text()
        assert html.count("<details><summary>Solution</summary>") == 2
        # The solution's code is highlighted code inside the folded block, not text.
        folded = html[html.index("<details>"):html.index("</details>")]
        assert "<code class=\"language-python\">" in folded and "Addition adds." in folded

    # An exercise without a solution stops the build, before any notebook runs.
    solutions.write_text('def exercise_1():\n    """Addition adds."""\n    assert 1 + 1 == 2\n')
    with pytest.raises(build_book.BookError, match=r"exercise\(s\) \[2\] have no solution"):
        build_book.build(repo, run_mdbook=False)
    # So does a solutions file without a lesson.
    solutions.rename(repo / "solutions" / "02_gone.py")
    with pytest.raises(build_book.BookError, match="02_gone.py has no lesson"):
        build_book.build(repo, run_mdbook=False)


# ------------------------------------------ the kept runs: reused only when still true


def _counting_runner(written=None):
    """An ``execute`` for notebook_cache.run_or_reuse that needs no kernel: it
    gives the notebook an output naming the call, writes ``written`` (name:
    text) beside it, as memray's magic does, and counts its calls."""
    calls = []

    def execute(path):
        calls.append(path)
        nb = nbformat.read(path, as_version=4)
        for cell in nb.cells:
            if cell.cell_type == "code":
                cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text=f"run {len(calls)}\n")]
        for name, text in (written or {}).items():
            (path.parent / name).parent.mkdir(parents=True, exist_ok=True)
            (path.parent / name).write_text(text)
        return nb

    return execute, calls


def _entry(cache):
    return next(cache.glob("*.json"))


def _break_digest(cache):
    entry = _entry(cache)
    entry.write_text(entry.read_text().replace("run 1", "run 9"))


def _cut_short(cache):
    entry = _entry(cache)
    entry.write_bytes(entry.read_bytes()[:-40])


def _add_an_error_output(cache):
    """A kept run whose notebook holds an error output, with a digest that matches."""
    entry = json.loads(_entry(cache).read_text())
    entry["notebook"]["cells"][0]["outputs"] = [
        {"output_type": "error", "ename": "E", "evalue": "", "traceback": []}]
    entry["digest"] = notebook_cache._content_digest(entry)
    _entry(cache).write_text(json.dumps(entry))


# (what changes after the first run, whether the second call must run the notebook again)
CACHE_CASES = [
    ("nothing", lambda repo, cache, env: None, False),
    ("the notebook", lambda repo, cache, env: _write_notebook(
        repo / "notebooks" / "01_kept.ipynb", [new_code_cell("print(2)")]), True),
    ("a package file", lambda repo, cache, env: (repo / "dezero_mini" / "core.py").write_text("x = 2\n"), True),
    ("a new package file", lambda repo, cache, env: (repo / "dezero_mini" / "data.npz").write_bytes(b"1"), True),
    ("a stage file", lambda repo, cache, env: (repo / "steps" / "step01_a.py").write_text("y = 2\n"), True),
    ("a DEZERO variable", lambda repo, cache, env: env.setenv("DEZERO_MINI_CHECK_SAVED", "1"), True),
    ("the fresh switch, outside a test run", lambda repo, cache, env: (
        env.setenv(notebook_cache.FRESH_VARIABLE, "1"), env.delenv(notebook_cache.RUN_VARIABLE)), True),
    ("the fresh switch, in another test run", lambda repo, cache, env: (
        env.setenv(notebook_cache.FRESH_VARIABLE, "1"), env.setenv(notebook_cache.RUN_VARIABLE, "run-b")), True),
    # make test-deep: the other test process of the same run has run it again already
    ("the fresh switch, in the test run that kept it", lambda repo, cache, env: env.setenv(
        notebook_cache.FRESH_VARIABLE, "1"), False),
    ("another test run", lambda repo, cache, env: env.setenv(notebook_cache.RUN_VARIABLE, "run-b"), False),
    ("a written file removed", lambda repo, cache, env: (
        repo / "notebooks" / "memray-results" / "01_kept" / "flamegraph.html").unlink(), True),
    ("a written file changed", lambda repo, cache, env: (
        repo / "notebooks" / "memray-results" / "01_kept" / "flamegraph.html").write_text("other"), True),
    ("the entry edited", lambda repo, cache, env: _break_digest(cache), True),
    ("the entry cut short", lambda repo, cache, env: _cut_short(cache), True),
    ("the entry removed", lambda repo, cache, env: _entry(cache).unlink(), True),
    ("an error output kept", lambda repo, cache, env: _add_an_error_output(cache), True),
    ("an unrelated file", lambda repo, cache, env: (repo / "README.md").write_text("# new\n"), False),
    ("a lesson's package upgraded", lambda repo, cache, env: env.setattr(
        notebook_cache, "lesson_distributions",
        lambda installed=notebook_cache.lesson_distributions(): (*installed, "numpy==0.0.1")),
     True),
    ("a package no lesson imports installed", lambda repo, cache, env: env.setattr(
        notebook_cache, "_installed_distributions",
        lambda: ["pytest_newer-99.dist-info"]), False),
]


@pytest.mark.parametrize("change, runs_again", [(c[1], c[2]) for c in CACHE_CASES],
                         ids=[c[0] for c in CACHE_CASES])
def test_a_kept_run_is_reused_only_while_it_is_still_true(tmp_path, monkeypatch, change, runs_again):
    repo = tmp_path / "repo"
    (repo / "dezero_mini").mkdir(parents=True)
    (repo / "dezero_mini" / "core.py").write_text("x = 1\n")
    (repo / "steps").mkdir()
    (repo / "steps" / "step01_a.py").write_text("y = 1\n")
    (repo / "README.md").write_text("# repo\n")
    path = _write_notebook(repo / "notebooks" / "01_kept.ipynb", [new_code_cell("print(1)")])
    cache = repo / "build" / "executed"
    monkeypatch.setattr(notebook_cache, "ROOT", repo)
    monkeypatch.setattr(notebook_cache, "CACHE_DIR", cache)
    monkeypatch.delenv(notebook_cache.FRESH_VARIABLE, raising=False)
    monkeypatch.setenv(notebook_cache.RUN_VARIABLE, "run-a")
    monkeypatch.delenv("DEZERO_MINI_CHECK_SAVED", raising=False)
    execute, calls = _counting_runner({"memray-results/01_kept/flamegraph.html": "<html>graph</html>"})

    first, _, reused = notebook_cache.run_or_reuse(path, execute)
    assert not reused and len(calls) == 1
    change(repo, cache, monkeypatch)
    second, _, reused = notebook_cache.run_or_reuse(path, execute)

    assert reused is not runs_again
    assert len(calls) == (2 if runs_again else 1)
    if not runs_again:
        assert second == first
    # A failed run keeps nothing: the next call runs the notebook again.
    def fail(_):
        raise run_notebooks.NotebookError(path, 0, 1, "boom")
    _entry(cache).unlink()
    with pytest.raises(run_notebooks.NotebookError):
        notebook_cache.run_or_reuse(path, fail)
    assert list(cache.glob("*.json")) == []


def test_a_notebook_that_another_process_runs_is_taken_last(tmp_path, monkeypatch):
    """executed_all (the site's build under `pytest -n`): while the other test
    process holds notebook 01's lock (it is running it), this one runs 02 first
    instead of waiting, then takes 01 once the lock is free."""
    import threading

    repo = tmp_path / "repo"
    (repo / "dezero_mini").mkdir(parents=True)
    (repo / "steps").mkdir()
    paths = [_write_notebook(repo / "notebooks" / f"0{n}_nb.ipynb", [new_code_cell(f"print({n})")])
             for n in (1, 2)]
    monkeypatch.setattr(notebook_cache, "ROOT", repo)
    monkeypatch.setattr(notebook_cache, "CACHE_DIR", repo / "build" / "executed")
    monkeypatch.delenv(notebook_cache.FRESH_VARIABLE, raising=False)
    for path in paths:
        monkeypatch.delitem(run_notebooks.RUNS, path.resolve(), raising=False)
    order = []
    second_ran = threading.Event()

    def execute(path, timeout):
        order.append(path.name)
        if path.name.startswith("02"):
            second_ran.set()
        return nbformat.read(path, as_version=4)

    monkeypatch.setattr(run_notebooks, "execute_notebook", execute)
    with notebook_cache.locked(paths[0]):  # a lock file opened apart: busy for everyone else
        with pytest.raises(notebook_cache.Busy):
            run_notebooks.executed(paths[0], wait=False)
        worker = threading.Thread(target=run_notebooks.executed_all, args=(paths,))
        worker.start()
        # (the bounds only end a hang: the cache keys hash the package, slow on a busy machine)
        assert second_ran.wait(300), "executed_all waited for the busy notebook instead of running the next"
    worker.join(300)
    assert not worker.is_alive()
    assert order == ["02_nb.ipynb", "01_nb.ipynb"]
    for path in paths:
        run_notebooks.RUNS.pop(path.resolve(), None)
        run_notebooks.RUN_TIMES.pop(path.resolve(), None)


def test_the_lesson_distributions_are_the_books_and_not_the_test_tools():
    """``make test`` adds its tools after ``make book``: they are not part of a
    lesson's key, so the notebooks that ``make book`` ran are reused; the
    book's own packages are (an upgrade runs them again)."""
    names = {entry.split("==")[0] for entry in notebook_cache.lesson_distributions()}
    assert {"dezero-mini", "numpy", "matplotlib", "ipykernel", "nbclient", "objgraph"} <= names
    assert not names & {"pytest", "pytest-xdist", "hypothesis", "ipywidgets", "execnet"}
    makefile = (ROOT / "Makefile").read_text()
    book_extras = re.search(r"^BOOK_EXTRAS :?= *(\S+)", makefile, re.M).group(1).split(",")
    assert tuple(book_extras) == notebook_cache.LESSON_EXTRAS
