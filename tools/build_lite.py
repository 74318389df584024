"""Build the in-browser preview of the course: a JupyterLite site (what `make lite` runs).

    .venv-lite/bin/python tools/build_lite.py

The site (build/lite) runs the lessons on Pyodide, CPython compiled to WebAssembly, in
the reader's browser tab. It holds:

* the notebooks (``notebooks/``), each with the install cell of ``tools/colab_cell.py``
  before its first code cell, and the step files (``steps/``) that they load;
* the course's wheel (``pip wheel --no-deps .``) in the site's own package index, which
  the install cell installs without its dependencies (memory-profiler and psutil have
  no WebAssembly build; the course reads no RSS there);
* JupyterLab, the notebook app and the REPL with the Pyodide kernel.

NumPy and Matplotlib are not in it: the install cell loads them from Pyodide's CDN at
run time, as the kernel itself, so the preview needs the network. When the book has
been built (build/book/html), the site is copied into its ``lite/`` folder, where the
lesson pages' "Run in your browser" buttons point (``make book`` copies it too).

Prints the site's size and the build's time. Needs jupyterlite-core and
jupyterlite-pyodide-kernel (``make lite`` installs them in .venv-lite).
"""
from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import colab_cell  # noqa: E402  (tools/colab_cell.py; needs the line above)
from launch_buttons import LITE_BUILD, LITE_FOLDER, NOTEBOOKS_FOLDER, ROOT, preview_built  # noqa: E402

#: ``jupyter lite build`` options: no source maps and only the apps used, for a small site.
LITE_BUILD_OPTIONS = ("--no-sourcemaps", "--no-unused-shared-packages",
                      "--apps", "lab", "--apps", "repl", "--apps", "notebooks")
STAGING = "build/lite-staging"


class LiteError(RuntimeError):
    """The preview cannot be built; the message says why."""


def _run(command: list[str], cwd: Path, what: str) -> None:
    result = subprocess.run(command, cwd=cwd)
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
    if not preview_built(root):
        raise LiteError(f"jupyter lite build ran but made no {output / 'notebooks' / 'index.html'}")
    book = root / "build" / "book" / "html"
    if (book / "index.html").is_file():
        shutil.copytree(output, book / LITE_FOLDER, dirs_exist_ok=True)
        print(f"Copied into the book: {book / LITE_FOLDER}")
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
          "Serve it over HTTP (python -m http.server -d build/lite) and open notebooks/index.html;\n"
          "its kernel and NumPy come from Pyodide's CDN, so the browser needs internet.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
