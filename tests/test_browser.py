"""The course in a Python that cannot do everything a local one does (the in-browser
preview, Pyodide): no psutil, no process to start, no ``dot``. Each missing piece is
simulated on CPython: psutil hidden from ``import``, ``sys.platform`` set to
"emscripten", Graphviz's ``pipe()`` raising the OSError of a process that cannot start.

| missing piece                   | what the course does instead                          |
|---------------------------------|-------------------------------------------------------|
| psutil (and memory_profiler)    | RSS reads None; the record has no RSS and says why;   |
|                                 | the plot's RSS panel says "not recorded" and why      |
| processes (``pipe()`` OSError)  | the reference graph: GraphvizNotFound naming why, the |
|                                 | DOT text still shown                                  |
| a browser (emscripten)          | the reference graph: HTML drawing it with Graphviz    |
|                                 | for WebAssembly, which says that it needs internet    |
| a browser (emscripten)          | ``check``: one line, needs a local install, exit 2    |
| a browser (emscripten)          | ``dezero_mini.memory``: the bytes note, printed once  |
"""
import importlib
import json
import re
import sys
from pathlib import Path

import numpy as np
import pytest

from dezero_mini import browser, cli
from dezero_mini.memory import plot_training, probes, record_training, reference_graph
from dezero_mini.memory import refgraph as refgraph_module
from dezero_mini.memory.refgraph import GraphvizNotFound, WASM_GRAPHVIZ_URL


@pytest.fixture
def plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as pyplot

    yield pyplot
    pyplot.close("all")


@pytest.fixture
def no_psutil(monkeypatch):
    """``import psutil`` (and memory_profiler, which needs it) raise ImportError."""
    for name in ("psutil", "memory_profiler"):
        monkeypatch.setitem(sys.modules, name, None)  # None in sys.modules: ImportError on import
    with pytest.raises(ImportError):
        import psutil  # noqa: F401
    yield


@pytest.fixture
def in_a_browser(monkeypatch):
    monkeypatch.setattr(sys, "platform", "emscripten")
    yield


def a_graph(name="y"):
    import dezero_mini as dz

    x = dz.Variable(np.ones((2, 3)), name="x")
    y = dz.functions.sigmoid(x * 2.0)
    return reference_graph({"x": x, name: y})


# --- RSS without psutil ---------------------------------------------------------------------
def test_rss_reader_reads_none_without_psutil(no_psutil):
    read = probes.rss_reader(True)
    assert read is not None and read() is None
    assert read.available is False and "psutil" in read.missing
    assert probes.rss_reader("memory_profiler")() is None
    assert probes.rss_reader(False) is None
    with pytest.raises(ValueError):
        probes.rss_reader("top")


def test_rss_reader_with_psutil_reads_bytes():
    read = probes.rss_reader(True)
    assert getattr(read, "available", True) and read() > 0


def test_record_training_with_rss_runs_without_psutil(no_psutil, tmp_path):
    record = record_training("step03_weakref_outputs", batches=3, rss=True)
    assert record.rss is None and "psutil" in record.rss_missing
    assert record.batches == 3 and np.all(record.traced_peak > 0)
    assert "rss_growth" not in record.summary()
    assert record.report()  # the words need no RSS
    assert "rss" not in record.to_csv(tmp_path / "r.csv").read_text().splitlines()[0]


def test_record_training_with_psutil_has_no_rss_missing():
    record = record_training("step03_weakref_outputs", batches=2, rss=True)
    assert record.rss is not None and record.rss_missing is None


def test_plot_says_why_rss_is_missing(no_psutil, plt):
    record = record_training(3, batches=2, rss=True)
    fig = plot_training(record)  # the default signals include "rss"
    rss_panel = fig.axes[2]
    assert len(rss_panel.get_lines()) == 0
    assert any("not recorded" in t.get_text() and "psutil" in t.get_text() for t in rss_panel.texts)


# --- the reference graph where `dot` cannot be started --------------------------------------
def test_refgraph_when_no_process_can_be_started(monkeypatch, tmp_path):
    graphviz = pytest.importorskip("graphviz")

    def no_process(*args, **kwargs):
        raise OSError(38, "Function not implemented")  # Pyodide's subprocess, or a sandbox

    monkeypatch.setattr(graphviz.Source, "pipe", no_process)
    g = a_graph()
    with pytest.raises(GraphvizNotFound) as info:
        g.svg()
    assert "could not be started" in str(info.value) and ".source" in str(info.value)
    with pytest.raises(GraphvizNotFound):
        g.save(tmp_path / "g.svg")
    bundle = g._repr_mimebundle_()  # a notebook cell does not fail
    assert "image/svg+xml" not in bundle and "digraph" in bundle["text/plain"]
    assert g.save(tmp_path / "g.dot").read_text() == g.source


def test_refgraph_in_a_browser_draws_with_wasm_graphviz(monkeypatch, in_a_browser):
    graphviz = pytest.importorskip("graphviz")
    monkeypatch.setattr(graphviz.Source, "pipe", lambda *a, **k: pytest.fail("pipe() was called"))
    g = a_graph()
    bundle = g._repr_mimebundle_()
    page = bundle["text/html"]
    assert WASM_GRAPHVIZ_URL in page and "Graphviz.load()" in page
    assert "needs internet" in page and "connect to the internet" in page
    assert "digraph" in bundle["text/plain"]
    dot = re.search(r"const dot = (\".*\");\n", page).group(1)
    assert json.loads(dot) == g.source  # the very DOT text, as a JavaScript string
    with pytest.raises(GraphvizNotFound) as info:
        g.svg()  # no SVG on the Python side in a browser
    assert "browser" in str(info.value)


def test_refgraph_html_cannot_be_broken_out_of_by_a_name(in_a_browser):
    hostile = "</script><script>alert(1)</script>"
    page = a_graph(name=hostile).wasm_html()
    assert page.count("</script>") == 1 and page.rstrip().endswith("</script>")
    assert "<script>alert" not in page
    ids = re.findall(r'id="([^"]+)"', page)
    assert len(ids) == 1 and ids[0] != re.findall(r'id="([^"]+)"', a_graph().wasm_html())[0]


def test_refgraph_without_dot_keeps_its_hint_on_cpython():
    assert browser.processes_unavailable() is None
    assert "apt-get install graphviz" in refgraph_module.INSTALL_HINT


# --- check ----------------------------------------------------------------------------------
def test_check_in_a_browser_says_it_needs_a_local_install(in_a_browser, tmp_path, capsys):
    path = tmp_path / "step03_weakref_outputs.py"
    path.write_text("x = 1\n")
    code = cli.main(["check", "3", str(path)])
    out, err = capsys.readouterr()
    assert code == 2 and out == ""
    assert len(err.strip().splitlines()) == 1
    assert "browser" in err and "local install" in err


def test_check_without_subprocess_says_so(monkeypatch, tmp_path, capsys):
    monkeypatch.setitem(sys.modules, "subprocess", None)
    assert "subprocess" in browser.processes_unavailable()
    code = cli.main(["check", "3", str(tmp_path / "mine.py")])
    assert code == 2 and "local install" in capsys.readouterr().err


# --- the note on byte figures ---------------------------------------------------------------
def test_bytes_note_is_printed_once_in_a_browser(monkeypatch, in_a_browser, capsys):
    monkeypatch.setattr(browser, "_NOTE_PRINTED", [])
    importlib.reload(importlib.import_module("dezero_mini.memory"))
    importlib.reload(importlib.import_module("dezero_mini.memory"))
    out = capsys.readouterr().out
    assert out.count(browser.BYTES_NOTE) == 1
    assert "64-bit CPython" in browser.BYTES_NOTE and "never" in browser.BYTES_NOTE


def test_bytes_note_is_not_printed_on_cpython(monkeypatch, capsys):
    monkeypatch.setattr(browser, "_NOTE_PRINTED", [])
    assert browser.print_bytes_note_once() is False
    assert capsys.readouterr().out == ""


# --- the WebAssembly drawing, run in Chromium (the network replaced by answers of the test) ---
@pytest.mark.slow  # starts a browser: make test-quick leaves it out
@pytest.mark.parametrize("cdn_up", [True, False], ids=["cdn-answers", "no-internet"])
def test_wasm_html_draws_or_says_it_needs_internet_in_chromium(cdn_up):
    from site_browser import REFUSE, Browser, Reply, find_chromium

    chromium, why = find_chromium()
    if chromium is None:
        pytest.skip(why)
    page_html = "<!doctype html><body>" + a_graph().wasm_html() + "</body>"
    # A stand-in for @hpcc-js/wasm-graphviz: draws the DOT text's first line into an <svg>.
    fake_module = ('export const Graphviz = { load: async () => ({ layout: (dot, format, engine) => '
                   '`<svg id="drawn" data-engine="${engine}" data-format="${format}">'
                   '<text>${dot.split("\\n")[0]}</text></svg>` }) };')

    def answer(url):
        if url == "https://course.test/page.html":
            return Reply(200, page_html, {"Content-Type": "text/html"})
        if url == WASM_GRAPHVIZ_URL and cdn_up:
            return Reply(200, fake_module, {"Content-Type": "text/javascript",
                                            "Access-Control-Allow-Origin": "*"})
        return REFUSE

    with Browser(chromium) as browser:
        page = browser.new_page(intercept=answer)
        page.goto("https://course.test/page.html")
        if cdn_up:
            drawn = page.wait_for("""(() => { const svg = document.querySelector('svg#drawn');
                return svg && {engine: svg.dataset.engine, format: svg.dataset.format,
                               text: svg.textContent}; })()""", timeout=120, what="the drawn <svg>")
            assert drawn["engine"] == "dot"
            assert drawn["format"] == "svg"
            assert drawn["text"].startswith("digraph refgraph")
        else:
            page.wait_for("document.body.innerText.includes('connect to the internet')", timeout=120)
            text = page.evaluate("document.body.innerText")
            assert "digraph refgraph" in text  # the DOT text stays on the page
