"""Where the course runs without a local Python: in a browser (Pyodide, JupyterLite).

The in-browser preview of the book runs the lessons on Pyodide, CPython compiled
to WebAssembly. The course works there with three differences, each decided
here once so that the instruments, the reference graph, ``check`` and the book
say the same thing:

* no process can be started (``check`` runs a stage file in a child process;
  Graphviz's ``dot`` is a program): ``processes_unavailable()`` says why;
* no psutil, so no RSS (the recorder reads None instead);
* the byte figures differ from the lessons' (``BYTES_NOTE``).
"""
import sys

#: ``sys.platform`` of CPython compiled to WebAssembly: Pyodide (JupyterLite) and WASI.
WEBASSEMBLY_PLATFORMS = ("emscripten", "wasi")

#: The one line that goes with every lesson's byte figures (the book puts it on each
#: lesson page; ``dezero_mini.memory`` prints it once when imported in a browser).
BYTES_NOTE = (
    "The byte figures of this lesson were measured on 64-bit CPython; in the browser "
    "(WebAssembly) they differ: pointers take 4 bytes instead of 8, and the heap never "
    "shrinks, so freed memory is not given back."
)


def in_browser():
    """True when this Python is CPython compiled to WebAssembly (Pyodide in a
    browser, or WASI)."""
    return sys.platform in WEBASSEMBLY_PLATFORMS


def processes_unavailable():
    """None when this Python can start a process; else one sentence that says
    why it cannot (a browser's Python, or no ``subprocess`` module)."""
    if in_browser():
        return f"this Python runs in a browser ({sys.platform}), where no process can be started"
    try:
        import subprocess  # noqa: F401  (only whether it exists)
    except ImportError:
        return "this Python has no subprocess module, so no process can be started"
    return None


def print_bytes_note_once(file=None):
    """Print ``BYTES_NOTE`` in a browser, once per session; return True if printed."""
    if not in_browser() or _NOTE_PRINTED:
        return False
    _NOTE_PRINTED.append(True)
    print(BYTES_NOTE, file=file if file is not None else sys.stdout)
    return True


_NOTE_PRINTED = []  # holds True once the note has been printed
