"""Add or update, in every lesson notebook, the cell that installs the course where it is missing.

    python tools/colab_cell.py                  # every notebooks/NN_*.ipynb
    python tools/colab_cell.py A.ipynb B.ipynb  # these notebooks
    python tools/colab_cell.py --check          # exit 1 if a notebook lacks the current cell

Colab (the book's "Open in Colab" button) and the in-browser preview (``make lite``)
start a lesson in a Python that does not have the course. The cell that this tool
puts before a notebook's first code cell installs it there, and says so:

* in the browser (Pyodide): NumPy and Matplotlib from Pyodide's CDN, then the
  course's wheel from the preview's own package index, without its dependencies
  (memory-profiler and psutil have no WebAssembly build);
* elsewhere (Colab): a clone of the repository configured in book.toml (the one
  the launch buttons use, ``tools/launch_buttons.py``), installed with pip.

Where the course is installed (a local install, Binder, ``make book``) the cell
does nothing and prints nothing; it is tagged ``remove-input``, so the book shows
nothing of it. Running the tool again replaces the cell with the current one
(found by its id), so it is safe to run after every change of the repository URL.
Each notebook is written to a temporary file and renamed over the old one.
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

import nbformat

sys.path.insert(0, str(Path(__file__).resolve().parent))
from launch_buttons import (  # noqa: E402  (tools/launch_buttons.py; needs the line above)
    HOW_TO_CONFIGURE,
    ROOT,
    ConfigError,
    Repository,
    repository,
)

CELL_ID = "install-course"
CELL_TAGS = ["remove-input"]  # the book shows the cell's output only, and it prints nothing there
NOTEBOOK_GLOB = "[0-9][0-9]_*.ipynb"
CLONE_FOLDER = "dezero_mini-course"

_HEAD = '''\
# Colab and the in-browser preview start without the course: this cell installs it
# when it is missing, and says so. Where the course is installed it does nothing.
import importlib.util
import sys

if importlib.util.find_spec("dezero_mini") is None:
    if sys.platform == "emscripten":  # the in-browser preview (Pyodide, in this tab)
        import piplite

        print("Installing the course in this browser tab: NumPy and Matplotlib from "
              "Pyodide's CDN (needs internet), then dezero_mini from the preview.")
        await piplite.install(["numpy", "matplotlib"])
        # Without its dependencies: memory-profiler and psutil have no WebAssembly build.
        await piplite.install("dezero_mini", deps=False)
'''

_CLONE = '''\
    else:  # Colab, or another Python without the course
        import os
        import subprocess

        course = os.path.abspath({folder!r})
        print("Installing the course from {url} (branch {branch}) into", course)
        if not os.path.isdir(course):
            subprocess.run(["git", "clone", "--quiet", "--depth", "1", "--branch", {branch!r},
                            {url!r}, course], check=True)
        subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", course], check=True)
        sys.path.insert(0, course)  # the clone, with its steps/ folder, before the installed copy
        os.chdir(os.path.join(course, "notebooks"))
    importlib.invalidate_caches()
    print("The course is installed.")
'''

_NO_REPOSITORY = '''\
    else:
        print("The course is not installed, and this notebook names no repository to install "
              "it from. Install it from its repository (pip install -e .) and run the notebook "
              "there, or ask its authors to {how}.")
'''


def cell_source(repo: Repository | None) -> str:
    """The source of the install cell for ``repo`` (None: no repository configured)."""
    if repo is None:
        tail = _NO_REPOSITORY.format(how=HOW_TO_CONFIGURE.replace('"', "'"))
    else:
        tail = _CLONE.format(folder=CLONE_FOLDER, url=repo.clone_url, branch=repo.branch)
    return _HEAD + tail


def with_install_cell(nb: nbformat.NotebookNode, source: str) -> nbformat.NotebookNode:
    """``nb`` with one install cell (id ``install-course``) before its first other
    code cell; an older install cell is removed first."""
    cells = [cell for cell in nb.cells if cell.get("id") != CELL_ID]
    cell = nbformat.v4.new_code_cell(source=source, metadata={"tags": list(CELL_TAGS)})
    cell["id"] = CELL_ID
    first_code = next((k for k, c in enumerate(cells) if c.cell_type == "code"), len(cells))
    nb.cells = cells[:first_code] + [cell] + cells[first_code:]
    return nb


def _write_atomically(path: Path, text: str) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def update(path: Path, source: str, write: bool = True) -> bool:
    """Give the notebook at ``path`` the install cell; True if it changed (written
    unless ``write`` is False). ValueError, naming the file, for a file that is not
    a notebook."""
    raw = path.read_text(encoding="utf-8")
    try:
        nb = nbformat.reads(raw, as_version=4)
    except Exception as exc:  # nbformat raises several kinds for a file that is not a notebook
        raise ValueError(f"{path}: not a Jupyter notebook ({exc.__class__.__name__}: {exc})") from None
    text = nbformat.writes(with_install_cell(nb, source)) + "\n"
    if text == raw:
        return False
    if write:
        _write_atomically(path, text)
    return True


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("notebooks", nargs="*", type=Path,
                        help=f"notebooks to update (default: notebooks/{NOTEBOOK_GLOB})")
    parser.add_argument("--check", action="store_true",
                        help="change nothing; exit 1 if a notebook lacks the current cell")
    parser.add_argument("--root", type=Path, default=ROOT,
                        help="the repository whose book.toml names the repository URL")
    args = parser.parse_args(argv)
    try:
        repo = repository(args.root)
    except ConfigError as exc:
        print(f"colab_cell: {exc}", file=sys.stderr)
        return 2
    if repo is None:
        print(f"colab_cell: no repository URL, so in Colab the cell can only say how to install "
              f"the course; to let it install: {HOW_TO_CONFIGURE}", file=sys.stderr)
    paths = args.notebooks or sorted((args.root / "notebooks").glob(NOTEBOOK_GLOB))
    source = cell_source(repo)
    changed, failed = [], False
    for path in paths:
        try:
            if update(path, source, write=not args.check):
                changed.append(path)
        except (OSError, ValueError) as exc:
            print(f"colab_cell: {exc}", file=sys.stderr)
            failed = True
    verb = "need the install cell updated" if args.check else "updated"
    print(f"{len(changed)} of {len(paths)} notebooks {verb}" +
          "".join(f"\n  {path}" for path in changed))
    return 2 if failed else (1 if args.check and changed else 0)


if __name__ == "__main__":
    sys.exit(main())
