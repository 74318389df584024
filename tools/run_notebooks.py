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
import contextlib
import os
import re
import sys
import time
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


def execute_notebook(path, timeout: int = DEFAULT_TIMEOUT) -> nbformat.NotebookNode:
    """Run every cell of the notebook at ``path``; return the notebook with its outputs.

    The file on disk is not changed. Raises :class:`NotebookError` (naming the
    notebook and the cell) when a cell raises, takes longer than ``timeout``
    seconds, or the kernel dies.
    """
    path = Path(path).resolve()
    nb = nbformat.read(path, as_version=4)
    running = {"index": None}
    # On a terminal, a bar of the notebook's cells (standard error); nothing in a pipe or a log.
    bar = progress_bar(len(nb.cells), path.name, unit="cell")  # closed when the run ends

    def note_cell(cell, cell_index, **_):
        running["index"] = cell_index
        bar.n = cell_index
        bar.refresh()

    client = NotebookClient(
        nb,
        kernel_manager_class=_ThisInterpreterKernelManager,
        kernel_name=KERNEL_NAME,
        timeout=timeout,
        resources={"metadata": {"path": str(path.parent)}},
        on_cell_start=note_cell,
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


def timed_execute(path, timeout: int = DEFAULT_TIMEOUT) -> tuple[nbformat.NotebookNode, float]:
    """:func:`execute_notebook` and the wall-clock seconds it took (kernel start included)."""
    start = time.perf_counter()
    nb = execute_notebook(path, timeout=timeout)
    return nb, time.perf_counter() - start


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("paths", nargs="*", type=Path,
                        help=f"notebooks to run (default: {_display(NOTEBOOK_DIR)}/{NOTEBOOK_GLOB})")
    parser.add_argument("--timeout", type=int, default=DEFAULT_TIMEOUT,
                        help="seconds allowed to one cell (default: %(default)s)")
    args = parser.parse_args(argv)

    paths = args.paths or find_notebooks()
    if not paths:
        print(f"No notebooks found in {_display(NOTEBOOK_DIR)}.")
        return 0
    print(f"Executing {len(paths)} notebook(s) with {sys.executable}")
    failed = []
    total = 0.0
    for path in paths:
        start = time.perf_counter()
        try:  # always run (this is the timing tool), and kept for `make book` and the tests
            notebook_cache.run_or_reuse(path, lambda nb: execute_notebook(nb, timeout=args.timeout), fresh=True)
        except NotebookError as exc:
            seconds = time.perf_counter() - start
            print(f"FAILED {_display(path)} after {seconds:.1f} s\n{exc}\n", file=sys.stderr)
            failed.append(path)
        else:
            seconds = time.perf_counter() - start
            print(f"{seconds:6.1f} s  {_display(path)}")
        total += seconds
    print(f"{total:6.1f} s  in all; {len(paths) - len(failed)} ran, {len(failed)} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
