"""Where a lesson can be run without installing anything: the launch buttons of the book.

Every lesson page of the book starts with the buttons that this build can honour,
each saying what it needs (a button that would lead nowhere is not shown):

* Binder: the repository's ``binder/`` folder on mybinder.org (runs on a free
  server, needs internet);
* Colab: the notebook on Google Colab (needs internet and a Google account); its
  first cell installs the course when it is missing (``tools/colab_cell.py``);
* the in-browser preview: the JupyterLite site of ``make lite``, published in the
  book's ``lite/`` folder (runs in your browser, needs internet for NumPy).

and one line under them: the lesson's byte figures were measured on 64-bit CPython
and differ in the browser (``dezero_mini.browser.BYTES_NOTE``).

The preview's button works whichever of ``make lite`` and ``make book`` runs first:
each lesson page carries a marker where the button goes (``preview_marker``); the
book fills it when the preview is built already, and ``make lite`` fills it in the
pages of a book built before it (``fill_preview_buttons``).

The repository is configured in ONE place, book.toml's ``[output.html]
git-repository-url`` (mdBook shows it as a link on every page too). A GitHub URL,
``https://github.com/OWNER/REPO``, launches the branch ``main``;
``https://github.com/OWNER/REPO/tree/BRANCH`` launches BRANCH. Without one (a local
build), there is no Binder or Colab button.
"""
from __future__ import annotations

import os
import re
import tempfile
from dataclasses import dataclass
from html import escape
from pathlib import Path
from urllib.parse import quote

ROOT = Path(__file__).resolve().parents[1]
CONFIG_FILE = "book.toml"
CONFIG_TABLE = "output.html"
CONFIG_KEY = "git-repository-url"
DEFAULT_BRANCH = "main"
#: Where ``make lite`` builds the preview, relative to the repository root.
LITE_BUILD = "build/lite"
#: Where the book publishes it, relative to the book's HTML folder.
LITE_FOLDER = "lite"
#: The preview's page that the buttons open (tools/build_lite.py writes it last).
START_PAGE = "start.html"
#: The folder of the notebooks, in the repository and in the preview's files.
NOTEBOOKS_FOLDER = "notebooks"

_GITHUB = re.compile(r"^https://github\.com/(?P<owner>[A-Za-z0-9][A-Za-z0-9-]*)/"
                     r"(?P<repo>[A-Za-z0-9._-]+?)(?:\.git)?(?:/tree/(?P<branch>[^?#\s]+?))?/?$")
_TABLE = re.compile(r"^\s*\[\s*([^\]]+?)\s*\]\s*(?:#.*)?$")
_KEY = re.compile(r'^\s*' + re.escape(CONFIG_KEY) + r'\s*=\s*"([^"]*)"\s*(?:#.*)?$')

HOW_TO_CONFIGURE = (f'set {CONFIG_KEY} = "https://github.com/OWNER/REPO" (or .../tree/BRANCH) '
                    f"under [{CONFIG_TABLE}] in {CONFIG_FILE} and build the book again")


class ConfigError(ValueError):
    """The repository URL of book.toml is set but cannot be used; the message says why."""


@dataclass(frozen=True)
class Repository:
    """A GitHub repository and the branch that the buttons launch."""

    owner: str
    name: str
    branch: str

    @property
    def clone_url(self) -> str:
        return f"https://github.com/{self.owner}/{self.name}"


def configured_url(root: Path = ROOT) -> str | None:
    """The ``git-repository-url`` of ``[output.html]`` in book.toml, or None.

    Read line by line (the one key this needs; no TOML library on Python 3.10)."""
    path = Path(root) / CONFIG_FILE
    if not path.is_file():
        return None
    table = None
    for line in path.read_text(encoding="utf-8").splitlines():
        header = _TABLE.match(line)
        if header:
            table = header.group(1)
            continue
        value = _KEY.match(line)
        if value and table == CONFIG_TABLE:
            return value.group(1).strip() or None
    return None


def parse_repository(url: str) -> Repository:
    """``https://github.com/OWNER/REPO[/tree/BRANCH]`` -> Repository; ConfigError otherwise."""
    match = _GITHUB.match(url.strip())
    if not match:
        raise ConfigError(f"{CONFIG_FILE}: {CONFIG_KEY} = {url!r} is not a GitHub repository URL "
                          "(Binder and Colab launch from GitHub): "
                          "use https://github.com/OWNER/REPO or https://github.com/OWNER/REPO/tree/BRANCH")
    return Repository(match.group("owner"), match.group("repo"), match.group("branch") or DEFAULT_BRANCH)


def repository(root: Path = ROOT) -> Repository | None:
    """The configured repository, None when none is configured (ConfigError when
    the URL is set but unusable)."""
    url = configured_url(root)
    return parse_repository(url) if url else None


def preview_built(root: Path = ROOT) -> bool:
    """Whether ``make lite`` has built the preview (its start page, written last) under ``root``."""
    return (Path(root) / LITE_BUILD / START_PAGE).is_file()


def binder_url(repo: Repository, stem: str) -> str:
    """mybinder.org, JupyterLab opened on ``notebooks/<stem>.ipynb`` of the branch."""
    path = quote(f"{NOTEBOOKS_FOLDER}/{stem}.ipynb", safe="")
    return (f"https://mybinder.org/v2/gh/{repo.owner}/{repo.name}/{quote(repo.branch, safe='')}"
            f"?labpath={path}")


def colab_url(repo: Repository, stem: str) -> str:
    """Google Colab, opening the notebook straight from GitHub."""
    return (f"https://colab.research.google.com/github/{repo.owner}/{repo.name}/blob/"
            f"{quote(repo.branch, safe='/')}/{NOTEBOOKS_FOLDER}/{quote(stem)}.ipynb")


def preview_url(stem: str) -> str:
    """The lesson in the in-browser preview, relative to a chapter page of the book: the
    preview's start page, which opens it once Pyodide's CDN answers, and says that it
    needs internet when it does not."""
    return f"{LITE_FOLDER}/{START_PAGE}?path={quote(f'{NOTEBOOKS_FOLDER}/{stem}.ipynb', safe='/')}"


def _button(label: str, needs: str, url: str) -> str:
    return (f'<a class="launch-button" href="{escape(url)}" target="_blank" rel="noopener">'
            f'{escape(label)} <small>({escape(needs)})</small></a>')


def preview_button(stem: str) -> str:
    """The button that opens lesson ``stem`` in the in-browser preview."""
    return _button("Run in your browser", "in your browser, needs internet for NumPy", preview_url(stem))


def preview_marker(stem: str) -> str:
    """Where the preview's button goes in lesson ``stem``'s page while the preview is not built
    (an HTML comment: the reader sees nothing, and mdBook passes it through)."""
    return f"<!-- preview-button {stem} -->"


_MARKER = re.compile(r"<!-- preview-button ([0-9A-Za-z_.-]+) -->")


def fill_preview_buttons(html_dir: Path) -> int:
    """Put the preview's button where the book's pages left its marker (``make lite`` after
    ``make book``); return how many pages changed. Each page is rewritten whole or not at all."""
    changed = 0
    for page in sorted(Path(html_dir).glob("*.html")):
        text = page.read_text(encoding="utf-8")
        filled = _MARKER.sub(lambda found: preview_button(found.group(1)), text)
        if filled != text:
            # A temporary file renamed over the page, as dezero_mini.atomic does: make lite runs
            # in .venv-lite, which has neither the course nor NumPy to import it from.
            handle, temporary = tempfile.mkstemp(dir=page.parent, prefix=f".{page.name}.", suffix=".tmp")
            try:
                with os.fdopen(handle, "w", encoding="utf-8") as out:
                    out.write(filled)
                os.chmod(temporary, page.stat().st_mode & 0o777)
                os.replace(temporary, page)
            except BaseException:
                Path(temporary).unlink(missing_ok=True)
                raise
            changed += 1
    return changed


def launch_block(stem: str, repo: Repository | None, preview_built: bool, bytes_note: str) -> str:
    """The HTML block at the top of a lesson page: the buttons this build can honour (Binder and
    Colab with a repository, the preview's or its marker), then ``bytes_note``."""
    buttons = []
    if repo is not None:
        buttons += [_button("Open in Binder", "runs on a free server, needs internet", binder_url(repo, stem)),
                    _button("Open in Colab", "needs internet and a Google account", colab_url(repo, stem))]
    buttons.append(preview_button(stem) if preview_built else preview_marker(stem))
    # No white space between the buttons and the block's ends: a block whose only content is
    # the marker is :empty for CSS, and takes no room on the page.
    return ('<div class="launch-buttons">' + "".join(buttons) + "</div>\n\n"
            f'<p class="bytes-note">{escape(bytes_note)}</p>\n')


def add_launch_buttons(body: str, block: str) -> str:
    """``body`` (a lesson's Markdown) with ``block`` after its first heading (at
    the top when it has none). Idempotent: a body that has the block already is
    returned unchanged."""
    if block in body:
        return body
    lines = body.splitlines(keepends=True)
    in_code = False
    for k, line in enumerate(lines):
        if re.match(r"^\s*(```|~~~)", line):
            in_code = not in_code
        elif not in_code and re.match(r"^\s{0,3}#{1,6}\s", line):
            return "".join(lines[:k + 1]) + "\n" + block + "\n" + "".join(lines[k + 1:])
    return block + "\n" + body
