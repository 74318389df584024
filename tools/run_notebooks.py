"""Execute the course notebooks and report how long each one took.

    python tools/run_notebooks.py                          # every notebooks/NN_*.ipynb, in order
    python tools/run_notebooks.py notebooks/03_*.ipynb     # some of them

The kernel always runs on the interpreter that runs this script
(``sys.executable``, i.e. the project's ``.venv``), never on whatever a
``python3`` kernelspec found on the machine points to: a user may have one in
``~/.local/share/jupyter`` for another Python, where dezero_mini is not
installed. Each notebook runs with its own folder as the working directory,
as it does when a learner opens it in Jupyter.

Each run is kept in ``build/executed/`` (tools/notebook_cache.py): the tests
and the book builder take a notebook through :func:`executed`, which reuses
the kept run while none of its inputs has changed, so that ``make test`` and
``make book`` run each notebook once between them.
"""
from __future__ import annotations

import argparse
import concurrent.futures
import contextlib
import json
import multiprocessing
import os
import re
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import nbformat
from jupyter_client.kernelspec import KernelSpec, KernelSpecManager, NoSuchKernel
from jupyter_client.manager import AsyncKernelManager
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError, CellTimeoutError, DeadKernelError
from traitlets import default

sys.path.insert(0, str(Path(__file__).resolve().parent))
import notebook_cache  # noqa: E402  (tools/ is not a package)
from dezero_mini.progress import progress_bar  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOK_DIR = ROOT / "notebooks"
NOTEBOOK_GLOB = "[0-9][0-9]_*.ipynb"
KERNEL_NAME = "python3"
DEFAULT_TIMEOUT = 300  # seconds allowed to a single cell; far above what any cell needs

_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


class NotebookError(RuntimeError):
    """A notebook did not run to the end. The message names the notebook and the cell."""

    def __init__(self, path: Path, cell_index: int | None, cell_count: int, details: str):
        self.path = path
        self.cell_index = cell_index
        if cell_index is None:
            where = "before its first cell ran (while starting the kernel)"
        else:
            where = f"in cell {cell_index + 1} of {cell_count} (counting every cell from 1)"
        super().__init__(f"{_display(path)} failed {where}:\n{_ANSI.sub('', details).strip()}")


class _ThisInterpreterKernels(KernelSpecManager):
    """Knows one kernel, ``python3``, and starts it on ``sys.executable``.

    jupyter_client would otherwise search the Jupyter data directories, where a
    ``python3`` kernelspec of the user's (found before the virtualenv's own)
    can name a different Python.
    """

    def get_kernel_spec(self, kernel_name: str) -> KernelSpec:
        if kernel_name != KERNEL_NAME:
            raise NoSuchKernel(kernel_name)
        argv = [sys.executable]
        if sys.version_info >= (3, 11):
            # As ipykernel's own spec does: stops the debugger's warning about frozen modules.
            argv.append("-Xfrozen_modules=off")
        # log_level: keeps the kernel's start-up chatter (a warning about unencrypted
        # local TCP in ipykernel 7) out of the reports; its errors still show.
        argv += ["-m", "ipykernel_launcher", "-f", "{connection_file}", "--IPKernelApp.log_level=ERROR"]
        return KernelSpec(
            argv=argv,
            display_name=f"Python 3 ({sys.executable})",
            language="python",
            resource_dir="",
            # Plots must come back as cell outputs (they become the book's images),
            # even where the caller's environment sets MPLBACKEND=Agg, as CI often does.
            # DEZERO_MINI_STATIC: nobody turns a knob here, so each lesson's interactive
            # cell (dezero_mini.memory.explore) shows its static figure and says how to play.
            env={"MPLBACKEND": "module://matplotlib_inline.backend_inline", "DEZERO_MINI_STATIC": "1"},
        )

    def find_kernel_specs(self) -> dict[str, str]:
        return {KERNEL_NAME: ""}


class _ThisInterpreterKernelManager(AsyncKernelManager):
    """nbclient's usual kernel manager, asking :class:`_ThisInterpreterKernels` for the spec.

    Given as a class (not an instance), so that nbclient owns the manager and
    shuts the kernel down after each notebook, also when a cell fails.
    """

    @default("kernel_spec_manager")
    def _kernel_spec_manager_default(self) -> KernelSpecManager:
        return _ThisInterpreterKernels(parent=self)


def _display(path: Path) -> str:
    """The path relative to the current directory when it is below it."""
    try:
        return str(Path(path).resolve().relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def find_notebooks(folder: Path = NOTEBOOK_DIR) -> list[Path]:
    """The course notebooks ``NN_<name>.ipynb`` of ``folder``, in course order."""
    return sorted(Path(folder).glob(NOTEBOOK_GLOB))


@dataclass
class RunCost:
    """Where one notebook's run spent its time (filled in by :func:`execute_notebook`).

    ``kernel_cpu`` is the CPU time (user + system) of the kernel process and of
    the programs it ran and waited for (``dot``, ``mprof``, ...), read after the
    last cell: the figure that a busy machine hardly changes, unlike wall time.
    None where it cannot be read (no psutil)."""

    started: float = field(default_factory=time.perf_counter)
    kernel_start: float | None = None  # seconds from the start to the first cell
    cells: dict[int, float] = field(default_factory=dict)  # kernel CPU seconds by cell index
    kernel_cpu: float | None = None

    def slowest(self, count: int) -> list[tuple[int, float]]:
        """The ``count`` cells that took the most CPU: (index counted from 1, seconds), most first."""
        ranked = sorted(self.cells.items(), key=lambda item: -item[1])[:count]
        return [(index + 1, seconds) for index, seconds in ranked]


def _kernel_cpu_seconds(client: NotebookClient) -> float | None:
    """User + system CPU seconds of the kernel and of its waited-for children, or None."""
    try:
        import psutil

        times = psutil.Process(client.km.provisioner.pid).cpu_times()
    except Exception:  # no psutil, no kernel (any more): the figure is only a report
        return None
    return times.user + times.system + times.children_user + times.children_system


def execute_notebook(path, timeout: int = DEFAULT_TIMEOUT, cost: RunCost | None = None,
                     progress: bool = True) -> nbformat.NotebookNode:
    """Run every cell of the notebook at ``path``; return the notebook with its outputs.

    The file on disk is not changed. Raises :class:`NotebookError` (naming the
    notebook and the cell) when a cell raises, takes longer than ``timeout``
    seconds, or the kernel dies. ``cost``, when given, is filled in with where
    the time went (:class:`RunCost`). ``progress=False``: no bar of the cells
    (for runs side by side, whose bars would overwrite each other).
    """
    path = Path(path).resolve()
    nb = nbformat.read(path, as_version=4)
    running = {"index": None}
    cost = cost if cost is not None else RunCost()
    # On a terminal, a bar of the notebook's cells (standard error); nothing in a pipe or a log.
    bar = progress_bar(len(nb.cells), path.name, unit="cell", quiet=not progress)  # closed when the run ends

    def note_cell(cell, cell_index, **_):
        running["index"] = cell_index
        if cost.kernel_start is None:
            cost.kernel_start = time.perf_counter() - cost.started
        running["cpu_before"] = _kernel_cpu_seconds(client)
        bar.n = cell_index
        bar.refresh()

    def note_cell_done(cell, cell_index, **_):
        cost.kernel_cpu = _kernel_cpu_seconds(client)  # the kernel is still alive here
        if cost.kernel_cpu is not None and running.get("cpu_before") is not None:
            cost.cells[cell_index] = cost.kernel_cpu - running["cpu_before"]

    client = NotebookClient(
        nb,
        kernel_manager_class=_ThisInterpreterKernelManager,
        kernel_name=KERNEL_NAME,
        timeout=timeout,
        resources={"metadata": {"path": str(path.parent)}},
        on_cell_start=note_cell,
        on_cell_executed=note_cell_done,
    )
    try:
        # JPY_SESSION_NAME, as Jupyter's servers set it: the kernel's __session__ names the
        # notebook (dezero_mini's %%memray_flamegraph saves its page under that name).
        client.execute(env=dict(os.environ, JPY_SESSION_NAME=str(path)))
    except CellExecutionError as exc:
        raise NotebookError(path, running["index"], len(nb.cells), str(exc)) from None
    except CellTimeoutError as exc:
        raise NotebookError(
            path, running["index"], len(nb.cells), f"the cell ran longer than {timeout} s. {exc}"
        ) from None
    except DeadKernelError as exc:
        raise NotebookError(
            path, running["index"], len(nb.cells), f"the kernel died (out of memory?). {exc}"
        ) from None
    except Exception as exc:  # the kernel did not start, the connection broke, ...
        raise NotebookError(
            path, running["index"], len(nb.cells), f"{type(exc).__name__}: {exc}"
        ) from exc
    finally:
        bar.close()
    return nb


#: The notebooks this process has run or reused already, by resolved path (see ``executed``).
RUNS: dict[Path, nbformat.NotebookNode] = {}
#: For each of them: (seconds its run took, whether that run was kept from an earlier one).
RUN_TIMES: dict[Path, tuple[float, bool]] = {}


def executed(path, timeout: int = DEFAULT_TIMEOUT, wait: bool = True) -> nbformat.NotebookNode:
    """The executed notebook at ``path``, run at most once for the tests and the
    book together: kept in this process (``RUNS``) and in ``build/executed/``
    (tools/notebook_cache.py, which runs it again whenever any of its inputs
    changed or the kept copy fails a check). While another process runs it,
    wait for that run, or with ``wait=False`` raise ``notebook_cache.Busy``.
    Callers must not change what it returns (copy it first)."""
    path = Path(path).resolve()
    if path not in RUNS:
        nb, seconds, reused = notebook_cache.run_or_reuse(
            path, lambda notebook: execute_notebook(notebook, timeout=timeout), wait=wait)
        RUNS[path], RUN_TIMES[path] = nb, (seconds, reused)
    return RUNS[path]


def executed_all(paths, timeout: int = DEFAULT_TIMEOUT) -> list[nbformat.NotebookNode]:
    """:func:`executed` for each of ``paths``; but a notebook that another
    process is running now (the other test process under ``pytest -n``) is
    taken last, after this process has run or reused the others, rather than
    waited for while this process could run the next one."""
    for path in paths:
        with contextlib.suppress(notebook_cache.Busy):
            executed(path, timeout=timeout, wait=False)
    return [executed(path, timeout=timeout) for path in paths]  # the busy ones: wait now


def _run_kept(path: Path, timeout: int, fresh: bool, root: Path, cache_dir: Path) -> tuple:
    """In a worker process of :func:`run_side_by_side`: run or reuse one notebook, kept
    in ``cache_dir`` (the parent's notebook_cache.CACHE_DIR, keyed on the files under the
    parent's notebook_cache.ROOT); (seconds, reused, cost as a dict, None), or the
    error's text in place of None."""
    notebook_cache.ROOT, notebook_cache.CACHE_DIR = root, cache_dir
    cost = RunCost()
    start = time.perf_counter()
    try:
        _, seconds, reused = notebook_cache.run_or_reuse(
            path, lambda nb: execute_notebook(nb, timeout=timeout, cost=cost, progress=False), fresh=fresh)
    except NotebookError as exc:
        return time.perf_counter() - start, False, asdict(cost), str(exc)
    # A dict, not the RunCost: when run_notebooks.py is the main script, the worker's
    # class lives in a module ("__mp_main__") that the parent cannot import to unpickle it.
    return seconds, reused, asdict(cost), None


def _kept_seconds(path: Path) -> float | None:
    """How long the notebook's last kept run took (None when none is kept or its entry
    cannot be read), whether or not that run is still valid."""
    with contextlib.suppress(OSError, ValueError, TypeError, KeyError, AttributeError):
        return float(json.loads(notebook_cache._entry_path(path).read_text(encoding="utf-8"))["seconds"])
    return None


def _code_length(path: Path) -> int:
    """The characters of the notebook's code cells (0 when it cannot be read)."""
    with contextlib.suppress(OSError, ValueError, AttributeError):
        nb = nbformat.read(path, as_version=4)
        return sum(len(cell.source) for cell in nb.cells if cell.cell_type == "code")
    return 0


def longest_first(paths) -> list[Path]:
    """``paths`` resolved, in the order :func:`run_side_by_side` starts them, the
    longest first, so that the notebook that ends last is a short one and the
    workers finish together: by the seconds of their last kept runs when every one
    has one, else (a fresh clone) by the length of their code, a rough measure of
    what a lesson runs (on 2026-11-28 it put lesson 10, the longest, first and the
    two shortest, 00 and 05, last)."""
    paths = [Path(p).resolve() for p in paths]
    kept = {path: _kept_seconds(path) for path in paths}
    if all(seconds is not None for seconds in kept.values()):
        return sorted(paths, key=lambda p: (-kept[p], p.name))
    return sorted(paths, key=lambda p: (-_code_length(p), p.name))


def default_jobs() -> int:
    """Notebooks run side by side by default: one per core, at most four (a kernel
    and its lesson take a few hundred MiB)."""
    return max(1, min(os.cpu_count() or 1, 4))


def run_side_by_side(paths, jobs: int, timeout: int = DEFAULT_TIMEOUT, fresh: bool = False,
                     report=print) -> dict[Path, tuple[float, bool, RunCost, str | None]]:
    """Run (or, unless ``fresh``, reuse) the notebooks at ``paths``, ``jobs`` at a time,
    each in a worker process of its own, the longest first (:func:`longest_first`), so
    that the last to finish is a short one. Each run is kept in build/executed/ as
    :func:`executed` keeps it, and :func:`executed` then takes it from there; returns,
    by resolved path, (seconds, reused, cost, error text or None), and calls ``report``
    with a line for each notebook as it finishes.

    Worker processes, not threads: a kernel's client runs an event loop of its own, and
    each worker's CPU figures are then its notebook's alone. Started with "spawn": a
    fork of a process with running threads may deadlock."""
    paths = longest_first(paths)
    results = {}
    context = multiprocessing.get_context("spawn")
    with concurrent.futures.ProcessPoolExecutor(max_workers=max(1, jobs), mp_context=context) as pool:
        futures = {pool.submit(_run_kept, path, timeout, fresh, notebook_cache.ROOT, notebook_cache.CACHE_DIR): path
                   for path in paths}
        for future in concurrent.futures.as_completed(futures):
            path = futures[future]
            seconds, reused, cost, error = future.result()
            cost = RunCost(**{**cost, "cells": {int(k): v for k, v in cost["cells"].items()}})
            results[path] = seconds, reused, cost, error
            how = "FAILED" if error else ("kept  " if reused else "ran   ")
            report(f"{seconds:6.1f} s  {how} {_display(path)}"
                   + ("" if reused or error else f"  ({_cost_line(cost, 0)})"))
    return results


def executed_side_by_side(paths, jobs: int, timeout: int = DEFAULT_TIMEOUT, report=print) -> list[str]:
    """:func:`executed` for each of ``paths``, ``jobs`` notebooks at a time
    (:func:`run_side_by_side`): afterwards :func:`executed` returns each run at once,
    and ``RUN_TIMES`` holds the seconds of each and whether it was a kept one.
    Returns the error text of each notebook that failed (none: an empty list)."""
    paths = [Path(p).resolve() for p in paths]
    if os.environ.get(notebook_cache.FRESH_VARIABLE) != "1":
        # Runs kept and still valid are loaded here: no worker to start for them.
        for path in paths:
            found = path not in RUNS and notebook_cache.load(path, notebook_cache.inputs_key(path))
            if found:
                RUNS[path], RUN_TIMES[path] = found[0], (found[1], True)
        paths = [path for path in paths if path not in RUNS]
    results = run_side_by_side(paths, jobs, timeout=timeout, report=report) if paths else {}
    errors = []
    for path, (seconds, reused, _, error) in results.items():
        if error:
            errors.append(error)
            continue
        executed(path, timeout=timeout)  # the run just kept: checked and loaded
        RUN_TIMES[path] = (seconds, reused)
    return errors


def timed_execute(path, timeout: int = DEFAULT_TIMEOUT) -> tuple[nbformat.NotebookNode, float]:
    """:func:`execute_notebook` and the wall-clock seconds it took (kernel start included)."""
    start = time.perf_counter()
    nb = execute_notebook(path, timeout=timeout)
    return nb, time.perf_counter() - start


def _cost_line(cost: RunCost, cells: int) -> str:
    """The CPU seconds of a run, its kernel's start, and its ``cells`` slowest cells."""
    cpu = f"{cost.kernel_cpu:6.1f} s CPU" if cost.kernel_cpu is not None else "     ? s CPU"
    parts = [cpu, f"kernel start {cost.kernel_start or 0:.1f} s"]
    if cells:
        parts.append("cells: " + ", ".join(f"{index} {seconds:.1f} s"
                                                   for index, seconds in cost.slowest(cells)))
    return "; ".join(parts)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("paths", nargs="*", type=Path,
                        help=f"notebooks to run (default: {_display(NOTEBOOK_DIR)}/{NOTEBOOK_GLOB})")
    parser.add_argument("--timeout", type=int, default=DEFAULT_TIMEOUT,
                        help="seconds allowed to one cell (default: %(default)s)")
    parser.add_argument("--cells", type=int, default=3, metavar="N",
                        help="name the N cells of each notebook that took most CPU (default: %(default)s; 0: none)")
    parser.add_argument("--jobs", type=int, default=1, metavar="N",
                        help="run N notebooks side by side, as `make book` does (default: %(default)s, "
                             "one after another: each one's wall time is then its own)")
    args = parser.parse_args(argv)

    paths = args.paths or find_notebooks()
    if not paths:
        print(f"No notebooks found in {_display(NOTEBOOK_DIR)}.")
        return 0
    print(f"Executing {len(paths)} notebook(s) with {sys.executable}"
          + (f", {args.jobs} side by side" if args.jobs > 1 else ""))
    print("  wall time, then the kernel's CPU time (user + system, the programs it ran included),")
    print("  the seconds before its first cell, and the cells that took most CPU (counted from 1)")
    failed = []
    total = total_cpu = 0.0
    started = time.perf_counter()
    if args.jobs > 1:
        # always run (this is the timing tool), and kept for `make book` and the tests
        results = run_side_by_side(paths, args.jobs, timeout=args.timeout, fresh=True,
                                   report=lambda line: None)
        outcomes = [(path, *results[Path(path).resolve()]) for path in paths]
    else:
        outcomes = []
        for path in paths:
            start = time.perf_counter()
            cost, error = RunCost(), None
            try:  # always run (this is the timing tool), and kept for `make book` and the tests
                notebook_cache.run_or_reuse(
                    path, lambda nb: execute_notebook(nb, timeout=args.timeout, cost=cost), fresh=True)
            except NotebookError as exc:
                error = str(exc)
            outcomes.append((path, time.perf_counter() - start, False, cost, error))
    for path, seconds, _, cost, error in outcomes:
        if error:
            print(f"FAILED {_display(path)} after {seconds:.1f} s\n{error}\n", file=sys.stderr)
            failed.append(path)
        else:
            print(f"{seconds:6.1f} s  {_display(path)}\n         {_cost_line(cost, args.cells)}")
        total += seconds
        total_cpu += cost.kernel_cpu or 0.0
    wall = time.perf_counter() - started
    print(f"{total:6.1f} s  in all ({total_cpu:.1f} s CPU in the kernels"
          + (f"; {wall:.1f} s from the first start to the last end" if args.jobs > 1 else "")
          + f"); {len(paths) - len(failed)} ran, {len(failed)} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
