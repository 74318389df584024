"""Check the built book as a reader meets it.

    python tools/check_site.py                      # build/book/html, after `make book`
    python tools/check_site.py --screenshots DIR    # also save what the browser showed

Two kinds of checks (``tests/test_site.py`` runs both on the book that the
test suite builds):

* ``static_problems(html_dir)``, no browser: every internal link leads to a
  page that exists and, when it names an anchor, to an element with that id;
  every image, SVG, script and style sheet a page refers to exists and is not
  empty.
* ``browser_problems(html_dir)``: every page opened in a real headless
  Chromium (the system's, driven by Selenium through the system's
  chromedriver: tools/site_browser.py) over a local HTTP server: no console error, no
  failed request, every image that the reader can see loaded and drawn at a
  size above 0x0 and no wider than the text column, and the search box
  finding a word of the course (on the first page of each folder: what search
  loads depends only on a page's way back to the root, and loading its index
  takes a second per page).

Each returns a list of problems in words (empty: all is well).
``find_chromium()`` says where the browser is, or why there is none.
"""
from __future__ import annotations

import argparse
import functools
import http.server
import json
import re
import sys
import threading
from contextlib import contextmanager
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

sys.path.insert(0, str(Path(__file__).resolve().parent))  # tools/ is not a package
from site_browser import Browser, BrowserError, BrowserTimeout, find_chromium  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
HTML_DIR = ROOT / "build" / "book" / "html"
# mdBook's print.html repeats every chapter (its links are checked statically) and
# asks the browser to print; 404.html is written for the site's root URL; toc.html
# is the sidebar for browsers without JavaScript, shown inside the other pages.
NOT_OPENED = {"print.html", "404.html", "toc.html"}
# A word that only a chapter of the course has: the search must find it.
SEARCH_WORD = "weakref"
SEARCH_RESULT_PAGE = "03_"
#: Seconds to wait for search results: mdBook loads its index first, which takes
#: seconds on a busy machine; the wait ends as soon as they are there, so this only
#: bounds a search that finds nothing.
SEARCH_WAIT = 60


# ------------------------------------------------------------------ no browser


class _Page(HTMLParser):
    """The ids of one page, and every reference it makes (tag, attribute, value)."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.ids: set[str] = set()
        self.refs: list[tuple[str, str, str]] = []

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        for name in ("id",) + (("name",) if tag == "a" else ()):
            if attrs.get(name):
                self.ids.add(attrs[name])
        for name in {"a": ("href",), "link": ("href",), "img": ("src",), "script": ("src",),
                     "iframe": ("src",), "object": ("data",), "source": ("src",)}.get(tag, ()):
            if attrs.get(name) is not None:
                self.refs.append((tag, name, attrs[name]))


def _parse(path: Path) -> _Page:
    page = _Page()
    page.feed(path.read_text(encoding="utf-8", errors="replace"))
    return page


def _is_external(url: str) -> bool:
    parts = urlsplit(url)
    return bool(parts.scheme) or url.startswith("//")


def static_problems(html_dir: Path = HTML_DIR) -> list[str]:
    """Broken internal links and anchors, missing or empty images/SVGs/scripts/styles."""
    html_dir = Path(html_dir).resolve()
    pages = sorted(p for p in html_dir.rglob("*.html") if p.name != "404.html")
    if not pages:
        return [f"{html_dir} has no HTML page: build the book first (make book)"]
    parsed = {path: _parse(path) for path in pages}
    problems = []
    for path, page in parsed.items():
        where = path.relative_to(html_dir).as_posix()
        for tag, attribute, url in page.refs:
            if _is_external(url) or url.startswith(("mailto:", "javascript:")):
                continue
            parts = urlsplit(url)
            target = path if not parts.path else (path.parent / unquote(parts.path)).resolve()
            if parts.path.endswith("/"):
                target = target / "index.html"
            shown = f"{where}: <{tag} {attribute}=\"{url}\">"
            if html_dir not in target.parents and target != html_dir:
                problems.append(f"{shown} points outside the site")
                continue
            if not target.is_file():
                problems.append(f"{shown}: {target.relative_to(html_dir).as_posix()} does not exist")
                continue
            if tag != "a" and target.stat().st_size == 0:
                problems.append(f"{shown}: the file is empty")
            if target.suffix == ".svg" and b"<svg" not in target.read_bytes()[:4096]:
                problems.append(f"{shown}: the file is not an SVG image")
            fragment = unquote(parts.fragment)
            if tag == "a" and fragment and target.suffix == ".html":
                ids = parsed[target].ids if target in parsed else _parse(target).ids
                if fragment not in ids:
                    problems.append(f"{shown}: {target.name} has no element with id {fragment!r}")
    return problems


# ------------------------------------------------------------------ the browser


class _QuietServer(http.server.ThreadingHTTPServer):
    def handle_error(self, request, client_address):
        """A browser that hangs up in the middle of an answer (its page was closed) is no
        problem of the site; anything else is printed as usual."""
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


@contextmanager
def serve(html_dir: Path):
    """The site over HTTP on localhost (as a reader's browser gets it; search
    loads its index with a request that file:// pages may not make)."""
    handler = functools.partial(_QuietHandler, directory=str(html_dir))
    server = _QuietServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()


# Run in the page: every image the reader can see (not inside a closed
# <details>), its natural and drawn size, and the width of the text column.
_IMAGES_JS = """(() => {
  const column = document.querySelector('main') || document.body;
  const box = column.getBoundingClientRect();
  const style = getComputedStyle(column);
  const left = box.left + parseFloat(style.paddingLeft), right = box.right - parseFloat(style.paddingRight);
  const seen = [];
  for (const el of column.querySelectorAll('img, svg')) {
    if (el.tagName.toLowerCase() === 'svg' && el.closest('svg') !== el) continue;
    if (el.tagName.toLowerCase() === 'svg' && el.closest('button, a.header, .buttons')) continue;
    // Hidden on purpose (a closed <details>, the zoomed copy of an image that mdBook
    // shows only on a click): the reader does not see it, so its size says nothing.
    if (!el.checkVisibility({visibilityProperty: true})) continue;
    const r = el.getBoundingClientRect();
    seen.push({tag: el.tagName.toLowerCase(), src: el.getAttribute('src') || '(inline svg)',
               complete: el.tagName.toLowerCase() === 'img' ? el.complete : true,
               natural: el.tagName.toLowerCase() === 'img' ? el.naturalWidth : 1,
               width: r.width, height: r.height, left: r.left, right: r.right});
  }
  return {left, right, images: seen};
})()"""


_TOGGLES = "#mdbook-search-toggle, #search-toggle"
_SEARCH_BAR = "#mdbook-searchbar, #searchbar"
_RESULT_LINKS = "#mdbook-searchresults a, #searchresults a"


def _search_problems(page, where):
    """Open the search box, type a word of the course, expect a result that leads to its chapter."""
    opened = page.evaluate(f"""(() => {{
      const toggle = document.querySelector({json.dumps(_TOGGLES)});
      if (!toggle) return 'no search button';
      toggle.click();
      const bar = document.querySelector({json.dumps(_SEARCH_BAR)});
      if (!bar) return 'no search bar after a click on the search button';
      bar.focus();
      return '';
    }})()""")
    if opened:
        return [f"{where}: {opened}"]
    page.type(SEARCH_WORD)  # mdBook searches on keyup
    try:
        hrefs = page.wait_for(f"""(() => {{
          const links = [...document.querySelectorAll({json.dumps(_RESULT_LINKS)})];
          return links.length && links.map(a => a.getAttribute('href') || '');
        }})()""", timeout=SEARCH_WAIT, what=f"search results for {SEARCH_WORD!r}")
    except BrowserTimeout:
        return [f"{where}: searching for {SEARCH_WORD!r} found nothing"]
    if not any(SEARCH_RESULT_PAGE in href for href in hrefs):
        return [f"{where}: searching for {SEARCH_WORD!r} found no page {SEARCH_RESULT_PAGE}*: {hrefs[:5]}"]
    return []


def is_book_page(path: Path) -> bool:
    """Whether ``path`` is a page that mdBook wrote (it links mdBook's own style
    sheets). The other HTML files of the site are reports that a lesson's tools
    wrote (memray's flame graphs), which load their scripts from the network
    and say so: their links and files are checked, but they are not opened."""
    return re.search(r"""id=["']mdbook-""", path.read_text(errors="replace")) is not None


def browser_problems(html_dir: Path = HTML_DIR, *, chromium: str | None = None,
                     pages: list[str] | None = None, search: bool = True,
                     screenshots: Path | None = None, shoot: tuple[str, ...] = ()) -> list[str]:
    """Open every page (or ``pages``, paths relative to ``html_dir``) in headless
    Chromium (``chromium``, or the one find_chromium finds: BrowserError when there
    is none, or when it fails); return what went wrong. ``screenshots``: a folder where the pages
    named in ``shoot`` are saved as PNG (the whole page)."""
    html_dir = Path(html_dir).resolve()
    if pages is None:
        pages = sorted(p.relative_to(html_dir).as_posix() for p in html_dir.rglob("*.html")
                       if p.name not in NOT_OPENED and is_book_page(p))
    problems = []
    searched = set()  # folders whose first page has tried the search
    with serve(html_dir) as base, Browser(chromium) as browser:
        for name in pages:
            page = browser.new_page(width=1280, height=900, isolated=False)  # one reader, many tabs
            page.goto(base + name)  # waits for the load event: every image and script loaded or failed
            layout = page.evaluate(_IMAGES_JS)
            for image in layout["images"]:
                shown = f"{name}: <{image['tag']}> {image['src']}"
                if not image["complete"] or image["natural"] == 0:
                    problems.append(f"{shown} did not load")
                elif image["width"] < 1 or image["height"] < 1:
                    problems.append(f"{shown} is drawn at {image['width']:.0f}x{image['height']:.0f}")
                elif image["right"] > layout["right"] + 1 or image["left"] < layout["left"] - 1:
                    problems.append(f"{shown} is {image['width']:.0f} px wide, wider than the text "
                                    f"column ({layout['right'] - layout['left']:.0f} px)")
            if screenshots is not None and name in shoot:
                screenshots.mkdir(parents=True, exist_ok=True)
                page.screenshot(screenshots / (Path(name).stem + ".png"), full_page=True)
            folder = str(Path(name).parent)
            if search and folder not in searched:
                searched.add(folder)
                problems += _search_problems(page, name)
            page.close()
            # console errors, uncaught errors, failed requests and HTTP errors, in the order heard
            problems += [f"{name}: {text}" for text in page.problems]
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("html_dir", nargs="?", type=Path, default=HTML_DIR)
    parser.add_argument("--screenshots", type=Path, help="save the first page and the first lesson here")
    parser.add_argument("--no-browser", action="store_true", help="only the checks without a browser")
    args = parser.parse_args(argv)
    problems = static_problems(args.html_dir)
    if not args.no_browser:
        chromium, why = find_chromium()
        if chromium is None:
            print(f"browser checks skipped: {why}")
        else:
            try:
                problems += browser_problems(args.html_dir, chromium=chromium, screenshots=args.screenshots,
                                             shoot=("index.html", "01_leaking_graph.html"))
            except BrowserError as exc:
                print(f"check_site: the browser checks could not run: {exc}", file=sys.stderr)
                return 2
    for problem in problems:
        print(problem)
    print(f"{len(problems)} problem(s) in {args.html_dir}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
