"""The site, built and opened as a reader meets it.

``make test`` builds the book (tools/build_book.py) from the notebooks that
tests/test_notebooks.py has executed already (run_notebooks.executed: in this
process, or in another test process through build/executed/; nothing runs
twice), then checks it with tools/check_site.py: links, anchors and images
without a browser, and every page in the system's headless Chromium (skipped,
with the reason, where there is none). The checks themselves are first shown
to fail on small sites made to be wrong.
"""
import re
import time
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[1]
import check_site  # noqa: E402  (tools/ is not a package)
import site_browser  # noqa: E402
import run_notebooks  # noqa: E402

LESSONS = sorted(p for p in (ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb") if int(p.name[:2]) >= 1)
SCREENSHOTS = ROOT / "build" / "book" / "screenshots"
_MEASURE_LINK = re.compile(r"\[[^\]]+\]\(00_how_we_measure\.ipynb(#[^)]*)?\)")


@pytest.mark.parametrize("path", LESSONS, ids=[p.name for p in LESSONS])
def test_every_lesson_links_to_how_we_measure(path):
    nb = nbformat.read(path, as_version=4)
    sentences = [line for cell in nb.cells if cell.cell_type == "markdown"
                 for line in cell.source.split("\n\n") if _MEASURE_LINK.search(line)]
    assert any(len(s.split()) >= 6 for s in sentences), (
        f"{path.name}: link to the chapter in a sentence of the prose, "
        "e.g. '[How we measure](00_how_we_measure.ipynb) says why.'")


def _browser_or_skip():
    """The system's Chromium, or a skip that says in one line what is missing."""
    chromium, why = check_site.find_chromium()
    if chromium is None:
        pytest.skip(why)
    return chromium


# --------------------------------------------------- the checks can fail


def _page(path, body, head="", book=True):
    """A page as mdBook writes it (it links a style sheet of mdBook's), or,
    with ``book=False``, a report that a tool wrote."""
    path.parent.mkdir(parents=True, exist_ok=True)
    head = ("<link rel='stylesheet' id='mdbook-highlight-css' href='data:text/css,'>"
            if book else "") + head
    path.write_text(f"<!DOCTYPE html><html><head><meta charset='utf-8'>{head}</head>"
                    f"<body><main style='width:600px;margin:0 auto'>{body}</main></body></html>")


PNG_1x1 = bytes.fromhex(
    "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
    "1f15c4890000000d49444154789c6360f8cf00000301010018dd8db00000000049454e44ae426082")


def test_static_checks_find_broken_links_anchors_and_images(tmp_path):
    (tmp_path / "empty.png").write_bytes(b"")
    (tmp_path / "fake.svg").write_text("not a picture")
    (tmp_path / "dot.png").write_bytes(PNG_1x1)
    _page(tmp_path / "b.html", "<h2 id='here'>Here</h2><img src='dot.png'>")
    _page(tmp_path / "a.html",
          "<a href='b.html#here'>fine</a> <a href='b.html#gone'>no anchor</a> "
          "<a href='missing.html'>no page</a> <a href='#top'>own anchor</a> "
          "<a href='https://example.org/'>outside</a> "
          "<img src='empty.png'> <img src='nowhere.svg'> <img src='fake.svg'>")
    problems = "\n".join(check_site.static_problems(tmp_path))
    assert "b.html has no element with id 'gone'" in problems
    assert "missing.html does not exist" in problems
    assert "a.html has no element with id 'top'" in problems
    assert "empty.png\">: the file is empty" in problems
    assert "nowhere.svg does not exist" in problems
    assert "fake.svg\">: the file is not an SVG image" in problems
    assert "example.org" not in problems and "#here" not in problems
    assert len(problems.splitlines()) == 6, problems
    (tmp_path / "a.html").unlink()
    assert check_site.static_problems(tmp_path) == []


def test_browser_checks_find_errors_empty_and_too_wide_images(tmp_path):
    chromium = _browser_or_skip()
    (tmp_path / "dot.png").write_bytes(PNG_1x1)
    _page(tmp_path / "good.html", "<p>fine</p><img src='dot.png' style='width:300px'>"
          "<details><summary>s</summary><img src='dot.png' style='width:300px'></details>")
    _page(tmp_path / "bad.html",
          "<img src='dot.png' style='width:0;height:0'>"
          "<img src='dot.png' style='width:900px;max-width:none'>"
          "<img src='missing.png'>",
          head="<script>console.error('boom')</script>")
    # A tool's report (memray's flame graph loads its scripts from the network)
    # is not a page of the book: not opened, so its failed request is no problem.
    _page(tmp_path / "figures" / "flamegraph.html", "<p>report</p>",
          head="<script src='https://cdn.invalid/plot.js'></script>", book=False)
    problems = check_site.browser_problems(tmp_path, chromium=chromium, search=False)
    text = "\n".join(problems)
    assert all(p.startswith("bad.html: ") for p in problems), text
    assert "console error: boom" in text
    assert "is drawn at 0x0" in text
    assert "900 px wide, wider than the text column (600 px)" in text
    assert "missing.png did not load" in text
    assert "HTTP 404" in text


SEARCH_BOX = ("<button id='search-toggle' onclick=\"document.getElementById('searchbar').hidden = false\">"
              "search</button><input id='searchbar' hidden><div id='searchresults'></div>")
# On each keyup, as mdBook's search does: a result that leads to `target` once the word is typed.
SEARCH_SCRIPT = ("<script>document.getElementById('searchbar').addEventListener('keyup', e => {{"
                 "  if (e.target.value === {word!r}) document.getElementById('searchresults').innerHTML ="
                 "    \"<a href='{target}'>found</a>\"; }});</script>")


def test_browser_checks_type_into_the_search_and_read_its_results(tmp_path, monkeypatch):
    chromium = _browser_or_skip()
    # These pages answer at once: "silent" waits the whole limit for its result.
    monkeypatch.setattr(check_site, "SEARCH_WAIT", 10)
    word = check_site.SEARCH_WORD
    cases = {  # folder: (page body, the problem expected, or None)
        "finds": (SEARCH_BOX + SEARCH_SCRIPT.format(word=word, target="03_weakref.html#x"), None),
        "elsewhere": (SEARCH_BOX + SEARCH_SCRIPT.format(word=word, target="04_other.html"),
                      f"searching for {word!r} found no page 03_*: ['04_other.html']"),
        "silent": (SEARCH_BOX, f"searching for {word!r} found nothing"),
        "no_box": ("<p>no search here</p>", "no search button"),
    }
    for folder, (body, _) in cases.items():
        _page(tmp_path / folder / "page.html", body)
    problems = check_site.browser_problems(tmp_path, chromium=chromium)
    for folder, (_, expected) in cases.items():
        mine = [p for p in problems if p.startswith(f"{folder}/page.html: ")]
        assert [p.split(": ", 1)[1] for p in mine] == ([expected] if expected else []), problems


def test_check_site_says_in_one_line_when_the_browser_cannot_run(tmp_path, monkeypatch, capsys):
    _page(tmp_path / "a.html", "<p>fine</p>")
    broken = tmp_path / "broken-chromium"
    broken.write_text("#!/bin/sh\necho 'cannot start: no display' >&2\nexit 5\n")
    broken.chmod(0o755)
    if site_browser.find_chromedriver()[0] is None:
        pytest.skip(site_browser.find_chromedriver()[1])
    monkeypatch.setenv(site_browser.CHROMIUM_ENV, str(broken))
    assert check_site.main([str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"check_site: the browser checks could not run: cannot start {broken} with ")
    assert len(err.splitlines()) == 1 and "Traceback" not in err
    monkeypatch.setenv(site_browser.CHROMIUM_ENV, str(tmp_path / "nowhere"))
    assert check_site.main([str(tmp_path)]) == 0  # no browser: the static checks, and why not the others
    assert "browser checks skipped" in capsys.readouterr().out


# --------------------------------------------------- the course's site


SECONDS = {}  # what the site's checks take, printed by the tests that made them


# The tests of the built site share one build of build/book (the module's fixture):
# xdist_group keeps them in one test process, so that two never write it at once.
@pytest.fixture(scope="module")
def site():
    pytest.importorskip("nbconvert")
    import build_book

    try:
        build_book.find_mdbook()
    except build_book.BookError as exc:
        pytest.skip(str(exc))
    start = time.perf_counter()
    # tests/test_notebooks.py has run them, in this test process or in the other (which
    # this one does not wait for while it can run another notebook itself).
    notebooks = run_notebooks.find_notebooks()
    done_before = set(run_notebooks.RUNS)
    run_notebooks.executed_all(notebooks)
    run_here = [path for path in notebooks
                if path.resolve() not in done_before and not run_notebooks.RUN_TIMES[path.resolve()][1]]
    reused = len(notebooks) - len(run_here)
    index = build_book.build(ROOT, executed=run_notebooks.executed)
    SECONDS["build"] = (time.perf_counter() - start, reused)
    return index.parent


@pytest.mark.xdist_group("site")
def test_site_links_anchors_and_images(site, progress_line):
    start = time.perf_counter()
    problems = check_site.static_problems(site)
    seconds, reused = SECONDS["build"]
    progress_line(f"book built in {seconds:.1f} s ({reused} notebook runs reused), "
                  f"links checked in {time.perf_counter() - start:.1f} s")
    assert not problems, "\n".join(problems)


@pytest.mark.xdist_group("site")
def test_landing_page_shows_every_stage_with_its_figure(site):
    landing = (site / "index.html").read_text(encoding="utf-8")
    for path in LESSONS:
        card = re.search(rf'<a class="stage-card" href="{path.stem}\.html"><img src="([^"]+)"', landing)
        assert card, f"the landing page has no card with a figure for {path.stem}"
        assert (site / card.group(1)).stat().st_size > 1000
    assert 'href="classroom.html"' in landing and 'href="00_how_we_measure.html"' in landing


@pytest.mark.xdist_group("site")
def test_site_in_a_browser(site, progress_line):
    chromium = _browser_or_skip()
    start = time.perf_counter()
    problems = check_site.browser_problems(site, chromium=chromium, screenshots=SCREENSHOTS,
                                           shoot=("index.html", "03_weakref_outputs.html"))
    progress_line(f"every page opened in Chromium in {time.perf_counter() - start:.1f} s")
    assert not problems, "\n".join(problems)


def test_a_new_stage_gets_its_card_from_its_notebook(tmp_path):
    """Stages 41 and 42 of a small course: no code names them, yet the landing
    page shows each, with the figure of its explore cell (not its first image)
    and, as no contract module describes them, the first paragraph of its lesson."""
    pytest.importorskip("nbconvert")
    import base64
    import shutil

    import build_book
    from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook, new_output

    repo = tmp_path / "repo"
    (repo / "docs").mkdir(parents=True)
    (repo / "notebooks").mkdir()
    shutil.copy(ROOT / "book.toml", repo / "book.toml")
    shutil.copy(ROOT / "docs" / "course.css", repo / "docs" / "course.css")
    (repo / "README.md").write_text("# The repository\n")
    (repo / "docs" / "landing.md").write_text("# A course\n\n## The stages\n\n<!-- stages -->\n\nThe end.\n")
    runs = {}  # what the notebooks would show when executed, made here without a kernel
    for number in (41, 42):
        stored = new_notebook(cells=[
            new_markdown_cell(f"# Stage {number}: new\n\nStage {number} frees <everything>."),
            new_code_cell("_ = explore(0)"),  # the first image, not the card's
            new_code_cell(f"explore({number})"),
        ])
        stored.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
        path = repo / "notebooks" / f"{number}_new.ipynb"
        nbformat.write(stored, path)
        run = nbformat.from_dict(stored)
        for cell, image in zip(run.cells[1:], (PNG_1x1, PNG_1x1 + bytes([number]))):
            cell.outputs = [new_output("display_data", data={"image/png": base64.b64encode(image).decode()})]
        runs[path.resolve()] = run
    build_book.build(repo, run_mdbook=False, executed=lambda path: runs[path.resolve()])

    src = repo / "build" / "book" / "src"
    landing = (src / "introduction.md").read_text()
    assert landing.startswith("# A course") and "The end." in landing and "<!-- stages -->" not in landing
    for number in (41, 42):
        assert f'<a class="stage-card" href="{number}_new.html"><img src="landing/{number}_new.png"' in landing
        assert f"Stage {number} frees &lt;everything&gt;." in landing
        assert (src / "landing" / f"{number}_new.png").read_bytes() == PNG_1x1 + bytes([number])
    summary = (src / "SUMMARY.md").read_text()
    assert "[A course](introduction.md)" in summary and "- [The repository's README](repository.md)" in summary

    (repo / "docs" / "landing.md").write_text("# A course\n")
    with pytest.raises(build_book.BookError, match="no <!-- stages --> line"):
        build_book.build(repo, run_mdbook=False, executed=lambda path: runs[path.resolve()])
