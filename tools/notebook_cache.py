"""Executed notebooks kept under ``build/executed/``, verified before each reuse.

The test suite and the book build need the same thing: every notebook, run
once. ``make test`` runs them (several test processes at once, with
pytest-xdist) and ``make book`` builds from the same runs instead of running
each notebook again. A kept run is never trusted as it is found:

* its **key** is a SHA-256 of everything the run depends on: the notebook's
  bytes, every file of the package and of the stage files (``INPUT_FOLDERS``),
  the runner's own source, the interpreter, the version of every installed
  distribution that a lesson can import (what dezero_mini with the book's
  extras requires, directly or not: the test tools that ``make test`` adds
  after ``make book`` are not among them), and the ``DEZERO*`` environment
  variables. Any change, and the notebook runs again;
* the file carries a **digest** of its own content: a file cut short, edited
  or damaged fails it, and the notebook runs again;
* the **files the run wrote** beside the notebook (memray's flame graphs,
  which the book links to) are listed with their SHA-256: one missing or
  changed, and the notebook runs again;
* the notebook must still parse, validate, and hold no error output.

Entries are written to a temporary file and renamed, so a reader never sees
half an entry; a lock per notebook (POSIX) makes a second process that wants
the same notebook wait for the first run and then reuse it, rather than run it
a second time.

Why not jupyter-cache (measured 2026-11-28, jupyter-cache 1.0.1): it keys a
notebook on its code cells and its kernelspec only, so a change to dezero_mini,
to a stage file or to an installed package would reuse a stale run; keeping
that key ourselves would leave this module most of its work (the key, the digest,
the files a run wrote), while it would add 31 MiB to .venv (SQLAlchemy, click,
tabulate, ...) for its store.
"""
from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
import sys
import sysconfig
import tempfile
import time
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parents[1]
CACHE_DIR = ROOT / "build" / "executed"
#: What a lesson imports: the package and the stage files (and whatever data they ship).
INPUT_FOLDERS = ("dezero_mini", "steps")
#: Bump when the layout of an entry changes: older entries then miss.
FORMAT = 1
#: Set to 1 to run every notebook again (entries are still written).
FRESH_VARIABLE = "DEZERO_MINI_FRESH_NOTEBOOKS"
#: The id of one test run (tests/conftest.py sets it): with FRESH_VARIABLE=1, a run kept
#: by this same test run, in another of its processes, is reused (each notebook runs once).
RUN_VARIABLE = "DEZERO_MINI_NOTEBOOK_RUN"
_SKIPPED_PARTS = {"__pycache__", ".ipynb_checkpoints"}
_RUNNER = Path(__file__).resolve().parent / "run_notebooks.py"


def _sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _input_files(root: Path) -> list[Path]:
    files = []
    for folder in INPUT_FOLDERS:
        for path in (root / folder).rglob("*"):
            if path.is_file() and not _SKIPPED_PARTS.intersection(path.parts) and path.suffix != ".pyc":
                files.append(path)
    return sorted(files)


#: The extras that a lesson's kernel runs with: the Makefile's BOOK_EXTRAS (a test checks
#: that they agree). What ``make test`` adds (pytest, hypothesis, ipywidgets: the notebooks
#: run with DEZERO_MINI_STATIC=1, so no widget is drawn) cannot change a lesson's run.
LESSON_EXTRAS = ("book", "data", "tools")


@functools.lru_cache(maxsize=None)  # one installation per process: read it once
def lesson_distributions() -> tuple[str, ...] | None:
    """``name==version`` of every installed distribution that ``dezero_mini``
    with LESSON_EXTRAS requires, directly or through another: what a lesson's
    run can import. None where that cannot be worked out (dezero_mini not
    installed, or no ``packaging`` to read requirements with)."""
    from importlib import metadata

    try:
        from packaging.requirements import InvalidRequirement, Requirement
        from packaging.utils import canonicalize_name
    except ImportError:
        return None
    found, visited = {}, set()
    waiting = [("dezero_mini", frozenset(LESSON_EXTRAS))]
    while waiting:
        name, extras = waiting.pop()
        if (canonicalize_name(name), extras) in visited:
            continue
        visited.add((canonicalize_name(name), extras))
        try:
            distribution = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            if name == "dezero_mini":
                return None
            continue  # an optional requirement that is not installed
        found[canonicalize_name(name)] = f"{canonicalize_name(name)}=={distribution.version}"
        for text in distribution.requires or []:
            try:
                requirement = Requirement(text)
            except InvalidRequirement:
                continue
            marker = requirement.marker
            if marker is not None and not any(marker.evaluate({"extra": extra})
                                              for extra in (extras or {""})):
                continue  # for another platform, Python or extra
            waiting.append((requirement.name, frozenset(requirement.extras)))
    return tuple(sorted(found.values()))


def _installed_distributions() -> list[str]:
    """The installed distributions, as their metadata folders name them
    (``numpy-2.1.0.dist-info``): a name and a version each, read without
    opening a file. (The key's fallback where lesson_distributions cannot
    tell.)"""
    names = set()
    # The interpreter's package folders, not sys.path: that differs between the test
    # processes and the book build (the current folder, tools/) for the same installation.
    for folder in {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}:
        with contextlib.suppress(OSError):
            names.update(name for name in os.listdir(folder) if name.endswith((".dist-info", ".egg-info")))
    return sorted(names)


def inputs_key(notebook: Path, root: Path | None = None) -> str:
    """The SHA-256 of everything the run of ``notebook`` depends on (see the module docstring)."""
    root = Path(root or ROOT)
    digest = hashlib.sha256()

    def add(label: str, value: str) -> None:
        digest.update(f"{label}\0{value}\0".encode("utf-8", "surrogateescape"))

    add("format", str(FORMAT))
    # Its place too: a notebook runs in its own folder.
    add("notebook", str(Path(notebook).resolve()) + ":" + _sha256_file(Path(notebook)))
    for path in [*_input_files(root), _RUNNER]:
        add("file", path.relative_to(root).as_posix() if path.is_relative_to(root) else path.name)
        add("sha256", _sha256_file(path))
    add("python", f"{sys.version} {os.path.normpath(sys.prefix)}")  # sys.executable may read ../.venv/...
    for name in lesson_distributions() or _installed_distributions():
        add("distribution", name)
    for name in sorted(os.environ):
        if name.startswith("DEZERO") and name not in (FRESH_VARIABLE, RUN_VARIABLE):
            add("environment", f"{name}={os.environ[name]}")
    return digest.hexdigest()


def _entry_path(notebook: Path) -> Path:
    return CACHE_DIR / f"{Path(notebook).stem}.json"


def _content_digest(entry: dict) -> str:
    body = {k: v for k, v in entry.items() if k != "digest"}
    return hashlib.sha256(json.dumps(body, sort_keys=True).encode("utf-8")).hexdigest()


def _written_since(notebook: Path, since_ns: int) -> dict[str, str]:
    """The files beside ``notebook`` (notebooks aside) changed since ``since_ns``, with
    their SHA-256; not those in a folder named after another notebook (memray-results/
    and tool-output/ have one per notebook), which a notebook run at the same time wrote."""
    folder = notebook.parent
    others = {path.stem for path in folder.glob("*.ipynb")} - {notebook.stem}
    written = {}
    for path in folder.rglob("*"):
        if (path.is_file() and path.suffix != ".ipynb" and not _SKIPPED_PARTS.intersection(path.parts)
                and not others.intersection(path.relative_to(folder).parts[:-1])
                and path.stat().st_mtime_ns >= since_ns):
            written[path.relative_to(folder).as_posix()] = _sha256_file(path)
    return written


def load(notebook: Path, key: str) -> tuple[nbformat.NotebookNode, float, str | None] | None:
    """The kept run of ``notebook``, the seconds it took and the test run that made it
    (``RUN_VARIABLE``), or None when there is none or it fails any check (key, digest,
    written files, notebook validity)."""
    notebook = Path(notebook).resolve()
    try:
        entry = json.loads(_entry_path(notebook).read_text(encoding="utf-8"))
        if not (isinstance(entry, dict) and entry.get("format") == FORMAT and entry.get("key") == key
                and entry.get("digest") == _content_digest(entry)):
            return None
        for relative, sha in entry["written"].items():
            path = notebook.parent / relative
            if not path.resolve().is_relative_to(notebook.parent) or not path.is_file() \
                    or _sha256_file(path) != sha:
                return None
        nb = nbformat.from_dict(entry["notebook"])
        nbformat.validate(nb)
        if any(output.get("output_type") == "error"
               for cell in nb.cells if cell.cell_type == "code" for output in cell.get("outputs", [])):
            return None
        return nb, float(entry["seconds"]), entry.get("run")
    except (OSError, ValueError, KeyError, TypeError, AttributeError, nbformat.ValidationError):
        return None  # missing, cut short, damaged: run the notebook again


def store(notebook: Path, key: str, nb: nbformat.NotebookNode, seconds: float, written: dict[str, str]) -> None:
    """Keep the run of ``notebook`` (written whole or not at all)."""
    entry = {"format": FORMAT, "key": key, "notebook_name": Path(notebook).name, "seconds": seconds,
             "written": written, "run": os.environ.get(RUN_VARIABLE) or None, "notebook": nb}
    entry["digest"] = _content_digest(json.loads(json.dumps(entry)))
    CACHE_DIR.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=CACHE_DIR, prefix=".entry-", suffix=".tmp")
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            json.dump(entry, out)
        os.replace(temporary, _entry_path(notebook))
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise


class Busy(Exception):
    """Another process holds the notebook's lock (it is running the notebook now)."""


@contextlib.contextmanager
def locked(notebook: Path, wait: bool = True):
    """Hold the lock of ``notebook``'s entry (a no-op where ``fcntl`` is missing).
    With ``wait=False``, raise :class:`Busy` at once when another process holds it."""
    try:
        import fcntl
    except ImportError:  # Windows: two processes may both run it; each result is still right
        yield
        return
    CACHE_DIR.mkdir(parents=True, exist_ok=True)
    with open(CACHE_DIR / f"{Path(notebook).stem}.lock", "a") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX if wait else fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise Busy(notebook) from None
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def run_or_reuse(notebook: Path, execute, fresh: bool = False,
                 wait: bool = True) -> tuple[nbformat.NotebookNode, float, bool]:
    """The executed ``notebook``: its kept run when that passes every check (and
    neither ``fresh`` nor ``DEZERO_MINI_FRESH_NOTEBOOKS=1`` asks for a new run, unless
    this test run made it: ``RUN_VARIABLE``),
    else ``execute(notebook)``, kept for next time. Returns (notebook, seconds the run
    took, whether it was reused). While another process runs it, wait for that run
    (then reuse it), or with ``wait=False`` raise :class:`Busy`."""
    notebook = Path(notebook).resolve()
    with locked(notebook, wait=wait):
        key = inputs_key(notebook)
        found = load(notebook, key)
        this_run = os.environ.get(RUN_VARIABLE) or None
        if found is not None and (not (fresh or os.environ.get(FRESH_VARIABLE) == "1")
                                  or (this_run is not None and found[2] == this_run)):
            return found[0], found[1], True
        # A file's time stamp comes from a coarser clock than time_ns(): a margin, so
        # that nothing the run wrote is missed (a file listed wrongly only costs a rerun).
        started_ns = time.time_ns() - 2_000_000_000
        start = time.perf_counter()
        nb = execute(notebook)  # raises NotebookError: nothing is kept
        seconds = time.perf_counter() - start
        store(notebook, key, nb, seconds, _written_since(notebook, started_ns))
        return nb, seconds, False
