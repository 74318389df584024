"""Build the in-browser preview of the course: a JupyterLite site (what `make lite` runs).

    .venv-lite/bin/python tools/build_lite.py

The site (build/lite) runs the lessons on Pyodide, CPython compiled to WebAssembly, in
the reader's browser tab. It holds:

* the notebooks (``notebooks/``), each with the install cell of ``tools/colab_cell.py``
  before its first code cell, and the step files (``steps/``) that they load;
* the course's wheel (``pip wheel --no-deps .``) in the site's own package index, which
  the install cell installs without its dependencies (memory-profiler and psutil have
  no WebAssembly build; the course reads no RSS there);
* JupyterLab, the notebook app and the REPL with the Pyodide kernel;
* ``start.html``, where the book's buttons point: it opens the lesson once Pyodide's
  CDN answers, and otherwise says that the preview needs internet (JupyterLite's own
  page would wait for a kernel that never starts, without a word).

NumPy and Matplotlib are not in it: the install cell loads them from Pyodide's CDN at
run time, as the kernel itself, so the preview needs the network. When the book has
been built (build/book/html), the site is copied into its ``lite/`` folder and the
lesson pages get their "Run in your browser" button (``make book`` copies it too, and
shows the button from the start when the preview is built first).

Prints the site's size and the build's time. Needs jupyterlite-core and
jupyterlite-pyodide-kernel (``make lite`` installs them in .venv-lite).
"""
from __future__ import annotations

import argparse
import html
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import colab_cell  # noqa: E402  (tools/colab_cell.py; needs the line above)
from launch_buttons import (LITE_BUILD, LITE_FOLDER, NOTEBOOKS_FOLDER, ROOT, START_PAGE,  # noqa: E402
                            fill_preview_buttons)

#: ``jupyter lite build`` options: no source maps and only the apps used, for a small site.
LITE_BUILD_OPTIONS = ("--no-sourcemaps", "--no-unused-shared-packages",
                      "--apps", "lab", "--apps", "repl", "--apps", "notebooks")
STAGING = "build/lite-staging"
_KERNEL_SCHEMA = ("share/jupyter/labextensions/@jupyterlite/pyodide-kernel-extension/"
                  "static/schema/kernel.v0.schema.json")

# The start page checks that Pyodide's CDN answers before it opens the lesson: without
# the network the kernel would never start, and JupyterLite would not say why.
_START_HTML = r"""<!doctype html>
<html lang="en">
<head><meta charset="utf-8"><title>Opening the lesson in your browser</title>
<meta name="viewport" content="width=device-width, initial-scale=1"></head>
<body style="font-family: sans-serif; max-width: 40em; margin: 2em auto; line-height: 1.5">
<p id="status">Opening the lesson in your browser. It runs Python, NumPy and Matplotlib
from Pyodide's CDN (__HOST__), so it needs internet: checking that it can be reached...</p>
<script>
(() => {
  const pyodide = __PYODIDE__;
  const status = document.getElementById("status");
  const path = new URLSearchParams(location.search).get("path") || "";
  const lesson = /^notebooks\/[A-Za-z0-9_.-]+\.ipynb$/.test(path) ? path : "";
  const target = "notebooks/index.html" + (lesson ? "?path=" + lesson : "");
  const stop = new AbortController();
  const timer = setTimeout(() => stop.abort(), 15000);
  fetch(pyodide, { method: "HEAD", mode: "no-cors", cache: "no-store", signal: stop.signal })
    .then(() => { clearTimeout(timer); location.replace(target); })
    .catch((error) => {
      clearTimeout(timer);
      status.textContent = "The in-browser preview needs internet: it loads Python (Pyodide), " +
        "NumPy and Matplotlib from " + new URL(pyodide).host + ", which cannot be reached (" +
        error + "). Connect to the internet and reload this page, or read the lesson in the book.";
      status.id = "no-internet";
    });
})();
</script>
</body>
</html>
"""


class LiteError(RuntimeError):
    """The preview cannot be built; the message says why."""


# Two notes of jupyterlite-core that look like failures and are none: an optional faster
# archive library (libarchive-c), and translations, which the preview does not ship.
QUIET_WARNINGS = ("ignore:install libarchive-c:UserWarning",
                  "ignore:[lite] [translation] install `jupyterlab_server`:UserWarning")


def _run(command: list[str], cwd: Path, what: str) -> None:
    filters = ",".join(filter(None, (os.environ.get("PYTHONWARNINGS"), *QUIET_WARNINGS)))
    result = subprocess.run(command, cwd=cwd, env={**os.environ, "PYTHONWARNINGS": filters})
    if result.returncode != 0:
        raise LiteError(f"{what} failed (exit status {result.returncode}): {' '.join(command)}")


def stage_files(root: Path, staging: Path) -> Path:
    """The preview's files under ``staging/files``: the notebooks, each with the
    install cell, and the step files. Returns the folder."""
    files = staging / "files"
    notebooks = sorted((root / NOTEBOOKS_FOLDER).glob(colab_cell.NOTEBOOK_GLOB))
    if not notebooks:
        raise LiteError(f"no notebooks in {root / NOTEBOOKS_FOLDER}: nothing to preview")
    (files / NOTEBOOKS_FOLDER).mkdir(parents=True)
    source = colab_cell.cell_source(colab_cell.repository(root))
    for notebook in notebooks:
        copy = files / NOTEBOOKS_FOLDER / notebook.name
        shutil.copy2(notebook, copy)
        colab_cell.update(copy, source)
    shutil.copytree(root / "steps", files / "steps", ignore=shutil.ignore_patterns("__pycache__"))
    return files


def build_wheel(root: Path, staging: Path) -> Path:
    """The course's wheel, without its dependencies, in ``staging/wheels``."""
    wheels = staging / "wheels"
    _run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--wheel-dir", str(wheels), str(root)],
         root, "building the course's wheel")
    found = sorted(wheels.glob("dezero_mini-*.whl"))
    if len(found) != 1:
        raise LiteError(f"expected one dezero_mini wheel in {wheels}, found {[p.name for p in found]}")
    return found[0]


def folder_size(path: Path) -> int:
    """Bytes of every file under ``path``."""
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def pyodide_url() -> str:
    """Where the Pyodide kernel loads Pyodide from: the default of the installed
    jupyterlite-pyodide-kernel (its kernel settings schema)."""
    schema = Path(sys.prefix) / _KERNEL_SCHEMA
    try:
        url = json.loads(schema.read_text(encoding="utf-8"))["properties"]["pyodideUrl"]["default"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise LiteError(f"cannot read Pyodide's URL from {schema} ({exc}): "
                        "is jupyterlite-pyodide-kernel installed here?") from None
    if not isinstance(url, str) or not url.startswith("https://"):
        raise LiteError(f"{schema}: pyodideUrl {url!r} is not an https URL")
    return url


def start_page(pyodide: str) -> str:
    """The HTML of the start page for Pyodide at ``pyodide``."""
    host = pyodide.split("/")[2]
    # json.dumps with "<" escaped: a JavaScript string that cannot end the script.
    return (_START_HTML.replace("__PYODIDE__", json.dumps(pyodide).replace("<", "\\u003c"))
            .replace("__HOST__", html.escape(host)))


def build(root: Path = ROOT) -> Path:
    """Build the preview into ``root/build/lite``; return that folder."""
    root = root.resolve()
    staging, output = root / STAGING, root / LITE_BUILD
    for folder in (staging, output):
        if folder.exists():
            shutil.rmtree(folder)
    staging.mkdir(parents=True)
    jupyter = Path(sys.executable).parent / "jupyter"
    if not jupyter.is_file():
        raise LiteError(f"no jupyter next to {sys.executable}: install jupyterlite-core and "
                        "jupyterlite-pyodide-kernel into this environment (make lite does)")
    files = stage_files(root, staging)
    wheel = build_wheel(root, staging)
    _run([str(jupyter), "lite", "build", *LITE_BUILD_OPTIONS,
          "--contents", str(files), "--piplite-wheels", str(wheel), "--output-dir", str(output)],
         staging, "jupyter lite build")
    if not (output / "notebooks" / "index.html").is_file():
        raise LiteError(f"jupyter lite build ran but made no {output / 'notebooks' / 'index.html'}")
    (output / START_PAGE).write_text(start_page(pyodide_url()), encoding="utf-8")
    book = root / "build" / "book" / "html"
    if (book / "index.html").is_file():
        shutil.copytree(output, book / LITE_FOLDER, dirs_exist_ok=True)
        pages = fill_preview_buttons(book)  # a book built before the preview: its buttons now
        print(f"Copied into the book: {book / LITE_FOLDER} (the button added to {pages} pages)")
    shutil.rmtree(staging)
    return output


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.parse_args(argv)
    started = time.perf_counter()
    try:
        output = build(ROOT)
    except LiteError as exc:
        print(f"\nThe preview was not built.\n{exc}", file=sys.stderr)
        return 1
    seconds = time.perf_counter() - started
    print(f"\nThe preview is built in {output}: {folder_size(output) / 1e6:.1f} MB in {seconds:.0f} s.\n"
          "Serve it over HTTP (python -m http.server -d build/lite) and open start.html;\n"
          "its kernel and NumPy come from Pyodide's CDN, so the browser needs internet.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
