"""Running a lesson with nothing installed: the launch buttons of the book
(tools/launch_buttons.py, added by tools/build_book.py), the install cell of the
notebooks (tools/colab_cell.py) and the in-browser preview (`make lite`,
tools/build_lite.py; its build and its page in Chromium run when their tools are here)."""
import ast
import json
import re
import shutil
import subprocess
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[1]
import build_book  # noqa: E402
import check_site  # noqa: E402
import colab_cell  # noqa: E402
import launch_buttons  # noqa: E402
from launch_buttons import (  # noqa: E402
    ConfigError,
    Repository,
    binder_url,
    colab_url,
    configured_url,
    parse_repository,
    preview_url,
)

from dezero_mini.browser import BYTES_NOTE  # noqa: E402

LITE_PYTHON = ROOT / ".venv-lite" / "bin" / "python"
REPO = Repository("ada", "dezero-course", "main")
SAMPLE_CHAPTER = "# 01 The leaking graph\n\nSome text.\n\n```python\n# not a heading\n```\n"


def write_config(root, url):
    text = "[book]\ntitle = \"t\"\n\n[output.html]\nno-section-label = true\n"
    if url is not None:
        text += f'git-repository-url = "{url}"  # the launch buttons\n'
    (root / "book.toml").write_text(text)


# --- the repository URL, configured once ------------------------------------------------------
@pytest.mark.parametrize("url, expected", [
    ("https://github.com/ada/dezero-course", REPO),
    ("https://github.com/ada/dezero-course/", REPO),
    ("https://github.com/ada/dezero-course.git", REPO),
    ("https://github.com/ada/dezero-course/tree/lessons-v2", Repository("ada", "dezero-course", "lessons-v2")),
    ("https://github.com/ada/dezero-course/tree/feature/lite", Repository("ada", "dezero-course", "feature/lite")),
])
def test_repository_urls_that_launch(url, expected):
    assert parse_repository(url) == expected


@pytest.mark.parametrize("url", [
    "https://gitlab.com/ada/dezero-course",   # Colab opens GitHub only
    "http://github.com/ada/dezero-course",    # not https
    "https://github.com/ada",                 # no repository
    "https://github.com/ada/dezero-course/blob/main/README.md",
    "github.com/ada/dezero-course",
    "https://github.com/ada/dezero course",
])
def test_repository_urls_that_do_not(url):
    with pytest.raises(ConfigError, match="git-repository-url"):
        parse_repository(url)


def test_the_url_is_read_from_output_html_only(tmp_path):
    write_config(tmp_path, "https://github.com/ada/dezero-course")
    assert configured_url(tmp_path) == "https://github.com/ada/dezero-course"
    (tmp_path / "book.toml").write_text('[other]\ngit-repository-url = "https://github.com/x/y"\n')
    assert configured_url(tmp_path) is None
    write_config(tmp_path, None)
    assert configured_url(tmp_path) is None
    assert configured_url(tmp_path / "nowhere") is None


# --- the buttons --------------------------------------------------------------------------------
def test_button_urls_are_exact():
    stem = "01_leaking_graph"
    assert binder_url(REPO, stem) == ("https://mybinder.org/v2/gh/ada/dezero-course/main"
                                      "?labpath=notebooks%2F01_leaking_graph.ipynb")
    assert colab_url(REPO, stem) == ("https://colab.research.google.com/github/ada/dezero-course/"
                                     "blob/main/notebooks/01_leaking_graph.ipynb")
    assert preview_url(stem) == "lite/start.html?path=notebooks/01_leaking_graph.ipynb"
    branch = Repository("ada", "dezero-course", "feature/lite")
    assert binder_url(branch, stem).startswith("https://mybinder.org/v2/gh/ada/dezero-course/feature%2Flite?")
    assert "/blob/feature/lite/notebooks/" in colab_url(branch, stem)


def test_build_book_adds_the_buttons_to_a_lesson_chapter(tmp_path):
    write_config(tmp_path, "https://github.com/ada/dezero-course")
    (tmp_path / "build" / "lite").mkdir(parents=True)
    (tmp_path / "build" / "lite" / "start.html").write_text("<html></html>")
    add = build_book.launch_buttons_adder(tmp_path)
    page = add(SAMPLE_CHAPTER, "01_leaking_graph")
    title, rest = page.split("\n", 1)
    assert title == "# 01 The leaking graph"  # the buttons come under the title
    hrefs = re.findall(r'href="([^"]+)"', rest)
    assert hrefs == [
        "https://mybinder.org/v2/gh/ada/dezero-course/main?labpath=notebooks%2F01_leaking_graph.ipynb",
        "https://colab.research.google.com/github/ada/dezero-course/blob/main/notebooks/01_leaking_graph.ipynb",
        "lite/start.html?path=notebooks/01_leaking_graph.ipynb",
    ]
    for label in ("runs on a free server", "needs internet", "in your browser, needs internet for NumPy"):
        assert label in rest
    assert rest.count(BYTES_NOTE) == 1  # said once per lesson
    assert rest.index("Some text.") > rest.index(BYTES_NOTE)
    assert add(page, "01_leaking_graph") == page  # adding twice changes nothing


@pytest.mark.parametrize("url, preview, buttons", [
    (None, False, []),
    (None, True, ["Run in your browser"]),
    ("https://github.com/ada/dezero-course", False, ["Open in Binder", "Open in Colab"]),
    ("https://github.com/ada/dezero-course", True, ["Open in Binder", "Open in Colab", "Run in your browser"]),
], ids=["local-build", "local-with-preview", "repository", "repository-with-preview"])
def test_only_the_buttons_that_work_are_shown(tmp_path, url, preview, buttons):
    write_config(tmp_path, url)
    if preview:
        (tmp_path / "build" / "lite").mkdir(parents=True)
        (tmp_path / "build" / "lite" / "start.html").write_text("<html></html>")
    page = build_book.launch_buttons_adder(tmp_path)(SAMPLE_CHAPTER, "01_leaking_graph")
    assert re.findall(r'class="launch-button"[^>]*>([^<]+) <small>', page) == buttons
    assert "git-repository-url" not in page and "make lite" not in page  # nothing for maintainers
    assert (launch_buttons.preview_marker("01_leaking_graph") in page) is not preview
    assert BYTES_NOTE in page


@pytest.mark.parametrize("url", [None, "https://github.com/ada/dezero-course"], ids=["local", "repository"])
def test_make_lite_after_make_book_gives_the_pages_of_the_other_order(tmp_path, url):
    """make book, then make lite (fill_preview_buttons on the built pages), gives the
    page that make lite, then make book gives; a page without a marker is left alone."""
    write_config(tmp_path, url)
    book_first = build_book.launch_buttons_adder(tmp_path)(SAMPLE_CHAPTER, "01_leaking_graph")
    (tmp_path / "build" / "lite").mkdir(parents=True)
    (tmp_path / "build" / "lite" / "start.html").write_text("<html></html>")
    lite_first = build_book.launch_buttons_adder(tmp_path)(SAMPLE_CHAPTER, "01_leaking_graph")
    html = tmp_path / "html"
    html.mkdir()
    (html / "01_leaking_graph.html").write_text(book_first)
    (html / "index.html").write_text("<p>no lesson here</p>")
    assert launch_buttons.fill_preview_buttons(html) == 1
    assert (html / "01_leaking_graph.html").read_text() == lite_first
    assert (html / "index.html").read_text() == "<p>no lesson here</p>"
    assert launch_buttons.fill_preview_buttons(html) == 0  # done once: nothing left to fill


def test_a_block_without_buttons_is_empty_for_css(tmp_path):
    block = launch_buttons.launch_block("01_x", None, False, BYTES_NOTE)
    inside = re.search(r'<div class="launch-buttons">(.*?)</div>', block).group(1)
    assert re.fullmatch(r"<!--[^>]*-->", inside)  # only a comment: :empty hides the block
    assert ".launch-buttons:empty { display: none; }" in (ROOT / "docs" / "course.css").read_text()


def test_a_wrong_repository_url_stops_the_book(tmp_path):
    write_config(tmp_path, "https://gitlab.com/ada/dezero-course")
    with pytest.raises(build_book.BookError, match="not a GitHub repository URL"):
        build_book.launch_buttons_adder(tmp_path)


def test_a_chapter_without_a_heading_gets_the_buttons_first():
    block = launch_buttons.launch_block("00_x", None, False, BYTES_NOTE)
    assert launch_buttons.add_launch_buttons("```\n# code\n```\n", block).startswith(block)


# --- the install cell ---------------------------------------------------------------------------
def lesson_copy(tmp_path, name="01_leaking_graph.ipynb"):
    path = tmp_path / name
    shutil.copy(ROOT / "notebooks" / name, path)
    return path


def test_the_install_cell_is_added_once_before_the_first_code_cell(tmp_path):
    write_config(tmp_path, "https://github.com/ada/dezero-course/tree/lessons-v2")
    path = lesson_copy(tmp_path)
    before = nbformat.read(path, as_version=4)
    # the lessons carry the cell already: take it out to see it added
    before.cells = [cell for cell in before.cells if cell.get("id") != colab_cell.CELL_ID]
    nbformat.write(before, path)
    assert colab_cell.main(["--root", str(tmp_path), str(path)]) == 0
    after = nbformat.read(path, as_version=4)
    install = [cell for cell in after.cells if cell.get("id") == colab_cell.CELL_ID]
    assert len(install) == 1 and len(after.cells) == len(before.cells) + 1
    first_code = next(k for k, c in enumerate(after.cells) if c.cell_type == "code")
    assert after.cells[first_code].get("id") == colab_cell.CELL_ID
    assert after.cells[first_code].metadata["tags"] == ["remove-input"]
    source = install[0].source
    assert "'https://github.com/ada/dezero-course'" in source and "'lessons-v2'" in source
    assert "deps=False" in source and "needs internet" in source
    assert [c for c in after.cells if c.get("id") != colab_cell.CELL_ID] == before.cells
    # idempotent: the same bytes again, and --check agrees
    written = path.read_bytes()
    assert colab_cell.main(["--root", str(tmp_path), str(path)]) == 0
    assert path.read_bytes() == written
    assert colab_cell.main(["--root", str(tmp_path), "--check", str(path)]) == 0
    # a new repository URL updates the one cell
    write_config(tmp_path, "https://github.com/ada/other")
    assert colab_cell.main(["--root", str(tmp_path), "--check", str(path)]) == 1
    assert path.read_bytes() == written  # --check writes nothing
    assert colab_cell.main(["--root", str(tmp_path), str(path)]) == 0
    updated = nbformat.read(path, as_version=4)
    assert [c.get("id") for c in updated.cells].count(colab_cell.CELL_ID) == 1
    assert "ada/other" in next(c for c in updated.cells if c.get("id") == colab_cell.CELL_ID).source


@pytest.mark.parametrize("url", [None, "https://github.com/ada/dezero-course"])
def test_the_install_cell_is_valid_python_and_silent_where_the_course_is_installed(url, capsys):
    source = colab_cell.cell_source(parse_repository(url) if url else None)
    compile(source, "cell", "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
    from IPython.core.interactiveshell import InteractiveShell

    shell = InteractiveShell.instance()
    try:
        result = shell.run_cell(source)
    finally:
        InteractiveShell.clear_instance()
    assert result.success, result.error_in_exec or result.error_before_exec
    assert capsys.readouterr().out == ""  # the course is installed here: nothing to say


def test_a_file_that_is_not_a_notebook_is_named_and_left_alone(tmp_path, capsys):
    write_config(tmp_path, None)
    bad = tmp_path / "broken.ipynb"
    bad.write_text("{ not json")
    good = lesson_copy(tmp_path)
    assert colab_cell.main(["--root", str(tmp_path), str(bad), str(good)]) == 2
    err = capsys.readouterr().err
    assert "broken.ipynb: not a Jupyter notebook" in err
    assert bad.read_text() == "{ not json"
    assert any(c.get("id") == colab_cell.CELL_ID for c in nbformat.read(good, as_version=4).cells)
    assert not list(tmp_path.glob(".*.tmp"))  # no temporary file left behind


# --- make lite ----------------------------------------------------------------------------------
def test_make_has_a_lite_target_that_runs_the_build():
    done = subprocess.run(["make", "-n", "lite"], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "tools/build_lite.py" in done.stdout
    import build_lite

    assert build_lite.LITE_BUILD_OPTIONS == ("--no-sourcemaps", "--no-unused-shared-packages",
                                             "--apps", "lab", "--apps", "repl", "--apps", "notebooks")


needs_lite_tools = pytest.mark.skipif(not (ROOT / ".venv-lite" / "bin" / "jupyter").is_file(),
                                      reason="the JupyterLite tools are not installed (make lite installs them)")


@pytest.fixture(scope="module")
def built_preview(tmp_path_factory):
    """The preview, built by tools/build_lite.py from a copy of the repository."""
    root = tmp_path_factory.mktemp("repo")
    for name in ("pyproject.toml", "README.md", "LICENSE", "book.toml"):
        shutil.copy(ROOT / name, root / name)
    ignore = shutil.ignore_patterns("__pycache__", "*.egg-info")
    for name in ("dezero_mini", "steps", "notebooks"):
        shutil.copytree(ROOT / name, root / name, ignore=ignore)
    code = ("import sys; from pathlib import Path; sys.path.insert(0, 'tools'); import build_lite; "
            f"build_lite.build(Path({str(root)!r}))")
    done = subprocess.run([str(LITE_PYTHON), "-c", code], cwd=ROOT, capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return root / "build" / "lite"


@needs_lite_tools
def test_lite_flags_exist_in_the_installed_jupyterlite():
    import build_lite

    done = subprocess.run([str(ROOT / ".venv-lite" / "bin" / "jupyter"), "lite", "build", "--help"],
                          capture_output=True, text=True, timeout=600)
    for flag in build_lite.LITE_BUILD_OPTIONS:
        if flag.startswith("--"):
            assert flag in done.stdout, flag


@needs_lite_tools
def test_the_preview_has_the_notebooks_the_steps_and_the_wheel(built_preview):
    import build_lite

    assert (built_preview / "notebooks" / "index.html").is_file()
    start = (built_preview / "start.html").read_text()
    assert '"https://cdn.jsdelivr.net/pyodide/' in start and "needs internet" in start
    wheels = list((built_preview / "pypi").glob("dezero_mini-*.whl"))
    assert len(wheels) == 1
    lessons = sorted(p.name for p in (ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
    assert sorted(p.name for p in (built_preview / "files" / "notebooks").glob("*.ipynb")) == lessons
    assert (built_preview / "files" / "steps" / "step01_leaking_graph.py").is_file()
    nb = nbformat.read(built_preview / "files" / "notebooks" / lessons[0], as_version=4)
    assert any(c.get("id") == colab_cell.CELL_ID for c in nb.cells)
    assert build_lite.folder_size(built_preview) < 40e6  # about 20 MB when written


@pytest.fixture
def chromium_page(built_preview):
    """``open(cdn_up)``: a page of Chromium on the served preview, in which a request
    off the local server (Pyodide's CDN) is answered with an empty 200 when
    ``cdn_up``, else refused: the network is never used. Returns (page, base URL,
    the URLs asked for off the server)."""
    from site_browser import REFUSE, Browser, Reply, find_chromium

    chromium, why = find_chromium()
    if chromium is None:
        pytest.skip(why)
    with check_site.serve(built_preview) as url, Browser(chromium) as browser:

        def open_page(cdn_up):
            asked = []

            def answer(request_url):
                if request_url.startswith(url):
                    return None  # the preview itself, from the local server
                asked.append(request_url)
                return Reply(200) if cdn_up else REFUSE

            return browser.new_page(intercept=answer), url, asked

        yield open_page


def _where_the_page_is(page, ending, timeout):
    """Wait until the page's address ends with ``ending``."""
    page.wait_for(f"location.href.endsWith({json.dumps(ending)})", timeout=timeout,
                  what=f"the address to end with {ending!r}")


@needs_lite_tools
@pytest.mark.slow  # starts a browser: make test-quick leaves it out
def test_without_internet_the_preview_says_it_needs_it(chromium_page):
    page, url, asked = chromium_page(cdn_up=False)
    page.goto(url + preview_url("01_leaking_graph").split("/", 1)[1])
    message = page.wait_for("document.querySelector('#no-internet')?.innerText", timeout=120,
                            what="the #no-internet message")
    assert "needs internet" in message and "cdn.jsdelivr.net" in message
    assert any("pyodide" in u for u in asked), asked


@needs_lite_tools
@pytest.mark.slow  # starts a browser: make test-quick leaves it out
def test_with_internet_the_preview_opens_the_lesson(chromium_page):
    page, url, asked = chromium_page(cdn_up=True)
    page.goto(url + preview_url("01_leaking_graph").split("/", 1)[1])
    _where_the_page_is(page, "/notebooks/index.html?path=notebooks/01_leaking_graph.ipynb", timeout=120)
    title = build_book.chapter_title(nbformat.read(ROOT / "notebooks" / "01_leaking_graph.ipynb", 4), "")
    # the lesson is open: its title is in the page (its cell, its table of contents)
    page.wait_for(f"document.body.textContent.includes({json.dumps(title)})", timeout=300,
                  what=f"the lesson's title {title!r}")
    page.wait_for("!!document.querySelector('.jp-Notebook .jp-Cell')", timeout=120, what="a notebook cell")


@needs_lite_tools
@pytest.mark.slow  # starts a browser: make test-quick leaves it out
def test_a_start_page_path_off_the_notebooks_is_not_followed(chromium_page):
    page, url, _ = chromium_page(cdn_up=True)
    page.goto(url + "start.html?path=https://example.org/x.ipynb")
    _where_the_page_is(page, "/notebooks/index.html", timeout=120)
    assert page.url == url + "notebooks/index.html"


def test_every_lesson_carries_the_install_cell_as_the_tool_writes_it():
    """tools/colab_cell.py has been run on the lessons, with the repository
    URL that book.toml names now (--check writes nothing, and says 1 if a
    lesson lacks the cell or carries an old one)."""
    lessons = sorted(str(path) for path in (ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
    assert colab_cell.main(["--check", *lessons]) == 0


@pytest.mark.parametrize("message, shown", [
    ("install libarchive-c for better performance when working with archives: No module named 'libarchive'", False),
    ("[lite] [translation] install `jupyterlab_server` to load translations: No module named 'jupyterlab_server'",
     False),
    ("[lite] [contents] a notebook could not be read", True),  # any other warning still shows
], ids=["libarchive", "translations", "other"])
def test_the_previews_harmless_warnings_are_not_shown(message, shown):
    import sys

    import build_lite

    code = f"import warnings; warnings.warn({message!r}, UserWarning)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env={"PYTHONWARNINGS": ",".join(build_lite.QUIET_WARNINGS)})
    assert (message in done.stderr) is shown, done.stderr
