"""The tools everyone uses, next to the course's own instruments.

The lessons show four tools that a learner will meet outside the course:
``memory_profiler`` (RSS line by line, ``%memit``, ``%mprun``, ``mprof``),
``memray`` (an allocation profiler: flame graphs of the peak and of leaks),
``tracemalloc`` snapshots (in the standard library) and ``objgraph`` (object
counts and back-reference graphs). This module holds what the lessons share
about them, so that the notebooks only call it:

* ``optional_tool(name)``: the module, or None after one line that says how
  to install it (memray: that it does not run on Windows);
* ``load_extension(name)``: ``%load_ext`` for ``memory_profiler`` and
  ``memray`` that never leaves a lesson with a traceback: where the real
  magics cannot load, it registers stand-ins and says so in one line;
  memray's ``%%memray_flamegraph`` saves its page under the notebook's name
  (``memray-results/<notebook>/flamegraph.html``) instead of a random
  temporary folder;
* ``write_leaking_script(folder, stage=...)``: a short script whose loop
  keeps every batch's graph (stage 01: the framework's registry; stage 07:
  the script's own log), for the command-line tools (``mprof run``,
  ``memray run``, ``python -m dezero_mini leaks``);
* ``run_command(args, cwd=folder)``: run one of those command lines in
  ``folder``, printing it first as a learner would type it there;
* ``read_mprof(path)``, ``line_increments(text)``, ``profile_lines(text)``,
  ``memray_peak_sites(fn)``, ``memray_leak_sites(path)``, ``site_source``,
  ``newest_flamegraph()``: the figures the lessons quote, read back from what
  the tools wrote.

memory_profiler has had no release since 2022. Two of its parts break: its
``tracemalloc`` backend raises ``RuntimeError`` (it looks for the source file
of a function it was never given), and its IPython magics import
``distutils``, which Python 3.12 removed (``pip install setuptools`` brings a
copy back). Its ``LineProfiler``, ``memory_usage`` and ``mprof`` still work
on every Python the course supports; the stand-in magics are made of them.
"""
import importlib
import os
import shlex
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

from dezero_mini import atomic

MIB = 1024 * 1024

# The pip package of each optional tool (the import name can differ).
INSTALL = {
    "memory_profiler": "memory_profiler",
    "memray": "memray",
    "objgraph": "objgraph",
}


def missing_message(name):
    """The one line a lesson prints when tool ``name`` cannot be imported."""
    if name == "memray" and sys.platform == "win32":
        return "memray runs on Linux and macOS only: the memray cells of this lesson do nothing on Windows."
    return f"{name} is not installed: pip install {INSTALL.get(name, name)}  (then restart the kernel)"


def optional_tool(name):
    """Import tool ``name``; if it is missing, print one line saying how to
    install it and return None (never a traceback)."""
    try:
        return importlib.import_module(name)
    except ImportError:
        print(missing_message(name))
        return None


# --------------------------------------------------------------- the magics


def _shell(shell):
    if shell is not None:
        return shell
    from IPython import get_ipython

    found = get_ipython()
    if found is None:
        raise RuntimeError("load_extension needs IPython: run it in a notebook or in ipython")
    return found


def load_extension(name, shell=None):
    """``%load_ext name`` for ``memory_profiler`` or ``memray``, as a lesson
    needs it: True when the tool's own magics are loaded.

    Where they cannot be, the lesson still runs: one line says why, and
    stand-ins are registered under the same names. memory_profiler's magics
    fail to load on Python 3.12+ (they import ``distutils``); its stand-ins
    ``%memit`` and ``%mprun`` are made of memory_profiler's own
    ``memory_usage`` and ``LineProfiler``. Without memray, ``%%memray_flamegraph``
    runs its cell unprofiled. With memray, ``%%memray_flamegraph`` is memray's
    own magic (same options, same output) whose page is moved from the
    random folder that memray makes to one named after the notebook
    (see ``flamegraph_folder``), so that a run shows, and the book links to,
    the same path every time.
    """
    if name not in ("memory_profiler", "memray"):
        raise ValueError(f"load_extension knows memory_profiler and memray, not {name!r}")
    shell = _shell(shell)
    if optional_tool(name) is None:  # printed how to install it
        if name == "memray":
            shell.register_magic_function(_unprofiled_cell, "cell", "memray_flamegraph")
        return False
    try:
        shell.run_line_magic("load_ext", name)
    except ImportError as error:  # memory_profiler's magics on Python 3.12+: distutils
        missing = (getattr(error, "name", None) or "distutils").split(".")[0]
    else:
        if name == "memray":
            _plain_progress()
            memray_magic = shell.magics_manager.magics["cell"]["memray_flamegraph"]
            shell.register_magic_function(_named_flamegraph(memray_magic, shell), "cell", "memray_flamegraph")
        return True
    print(f"%load_ext memory_profiler failed on Python {sys.version.split()[0]} (its magics import "
          f"{missing}, which Python 3.12 removed; pip install setuptools brings it back): "
          "using dezero_mini's %memit and %mprun, made of memory_profiler's memory_usage and LineProfiler.")
    shell.register_magic_function(_memit, "line", "memit")
    shell.register_magic_function(_mprun, "line", "mprun")
    return False


def _plain_progress():
    """memray reports progress through rich, which in a notebook draws it with
    a Jupyter widget; a notebook executed without a browser (the tests, the
    book) has no frontend for it and keeps an empty widget and an error line
    in its outputs. A plain console prints the same messages as text."""
    import rich

    rich.reconfigure(force_jupyter=False, force_terminal=False)


FLAMEGRAPHS = Path("memray-results")  # where memray's magic writes, relative to the notebook


def flamegraph_folder(user_ns):
    """The folder under ``memray-results/`` for the flame graphs of a notebook:
    the notebook's name where the kernel knows it (``__session__``, which
    Jupyter's servers and the course's notebook runner set, or VS Code's
    ``__vsc_ipynb_file__``), else ``flamegraph``."""
    for key in ("__session__", "__vsc_ipynb_file__"):
        stem = Path(str(user_ns.get(key) or "")).stem
        if stem:
            return FLAMEGRAPHS / stem
    return FLAMEGRAPHS / "flamegraph"


def _named_flamegraph(memray_magic, shell):
    """``%%memray_flamegraph`` that runs memray's own magic, then moves the
    folder it made (``memray-results/tmpXXXXXXXX/``) to the notebook's folder
    and shows memray's output with that path. Each run replaces the
    notebook's previous flame graph."""

    def memray_flamegraph(line, cell):
        from IPython.display import IFrame, display
        from IPython.utils.capture import capture_output

        before = set(FLAMEGRAPHS.glob("*/flamegraph.html"))
        with capture_output() as captured:  # the cell's own output too: shown again below
            memray_magic(line, cell)
        made = sorted(set(FLAMEGRAPHS.glob("*/flamegraph.html")) - before)
        temporary = named = None
        if made:  # else memray wrote no page (it said why): its output is shown as it was
            temporary, named = made[-1].parent, flamegraph_folder(shell.user_ns)
            shutil.rmtree(named, ignore_errors=True)
            shutil.move(str(temporary), str(named))

        def renamed(text):
            return text.replace(temporary.as_posix(), named.as_posix()) if temporary else text

        sys.stdout.write(renamed(captured.stdout))
        sys.stderr.write(renamed(captured.stderr))
        for output in captured.outputs:
            if temporary and temporary.as_posix() in output.data.get("text/html", ""):
                display(IFrame((named / "flamegraph.html").as_posix(), width="100%", height="600"))
            else:
                output.display()

    return memray_flamegraph


def _unprofiled_cell(line, cell):
    """Stand-in for ``%%memray_flamegraph`` without memray: the cell runs as
    memray would run it (inside a ``with`` block, so its last value is not
    displayed), without a profile."""
    from IPython import get_ipython

    get_ipython().run_cell(cell, silent=True)


def _memit(line):
    """Stand-in for memory_profiler's ``%memit [-o] STATEMENT``: the peak RSS
    while the statement runs, and its increment over the RSS before it
    (``-o``: return memory_profiler's MemitResult)."""
    from IPython import get_ipython
    from memory_profiler import MemitResult, memory_usage

    shell = get_ipython()
    keep = line.lstrip().startswith("-o ")
    statement = line.lstrip()[3:] if keep else line
    baseline = memory_usage(-1, interval=0)[0]
    peak = memory_usage((shell.ex, (statement,)), interval=0.01, max_usage=True)
    peak = max(peak) if isinstance(peak, list) else peak
    result = MemitResult([peak], baseline, 1, None, 0.01, False)
    print(result)
    return result if keep else None


def _mprun(line):
    """Stand-in for memory_profiler's ``%mprun [-T FILE] -f FUNC ... STATEMENT``."""
    import io

    from IPython import get_ipython
    from memory_profiler import LineProfiler, show_results

    shell = get_ipython()
    words, functions, text_file = shlex.split(line), [], None
    while words and words[0] in ("-f", "-T"):
        option, value = words.pop(0), words.pop(0)
        if option == "-f":
            functions.append(shell.ev(value))
        else:
            text_file = value
    profiler = LineProfiler()
    for function in functions:
        profiler(function)
    profiler.runctx(" ".join(words), shell.user_ns, shell.user_ns)
    out = io.StringIO()
    show_results(profiler, out)
    print(out.getvalue().rstrip())
    if text_file:
        atomic.write_text(text_file, out.getvalue())


def line_increments(profile_text, *fragments):
    """From a text profile of ``%mprun`` (or ``show_results``): the increment
    in MiB of the first line containing each fragment, as a dict."""
    found = {}
    for row in profile_text.splitlines():
        parts = row.split()
        for fragment in fragments:
            if fragment in row and fragment not in found and len(parts) > 4 and parts[2] == "MiB":
                found[fragment] = float(parts[3])
    return found


def profile_lines(profile_text, *fragments):
    """The rows of a text profile that contain one of ``fragments``, with the
    header: the lines a lesson quotes."""
    rows = profile_text.splitlines()
    header = [row for row in rows if row.startswith("Line #")][:1]
    return "\n".join(header + [row for row in rows if any(f in row for f in fragments)])


# ------------------------------------------------ a script for the commands

LEAKING_SCRIPT = '''\
"""{doc}"""
import sys

from dezero_mini.memory import Workload, load_stage

step = load_stage({stage})
history = []


def main():
    workload = Workload(step, batch_size={batch_size})
    for i in range({batches}):
        {line}
    print(f"{{len(history)}} losses logged")
    return 0


if __name__ == "__main__":
    sys.exit(main())
'''

# What the loop of the script does: on stages 01 and 02 the framework keeps
# each batch's graph by itself; from stage 03 on, the script's own log does.
_LOOP_LINES = {
    "framework": ("A training loop on a framework that keeps every graph by itself.",
                  "history.append(workload.train_step(i))  # a float: the framework leaks, not this line"),
    "user": ("An evaluation loop that logs its losses as Variables: every batch's graph\n"
             "stays alive in `history`.",
             "history.append(workload.loss(i))  # leaking: .item() would keep a number"),
}


def write_leaking_script(folder, *, stage=7, batches=40, batch_size=256):
    """Write ``leaking_loop.py`` into ``folder`` and return its path: a short
    script whose loop keeps each batch's graph, for ``mprof run``, ``memray
    run`` and ``python -m dezero_mini leaks``. On stages 01 and 02 it trains
    (the framework leaks); from stage 03 on it logs its losses as Variables
    (loop 3 of lesson 07: the script leaks). ``history`` is a global that
    is still alive when the script ends (it exits through ``sys.exit``), so
    memray's leak report sees what it holds."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    doc, line = _LOOP_LINES["framework" if stage in (1, 2) else "user"]
    path = folder / "leaking_loop.py"
    atomic.write_text(path, LEAKING_SCRIPT.format(doc=doc, stage=stage, batches=batches, batch_size=batch_size, line=line))
    return path


def _argument(arg, folder):
    """A command-line argument as the command sees it from ``folder``: a
    ``Path`` (a path of this process) relative to ``folder`` when it is
    inside it, else absolute; anything else as a string."""
    if folder is None or not isinstance(arg, Path):
        return str(arg)
    path = Path(os.path.abspath(arg))
    return str(path.relative_to(folder)) if path.is_relative_to(folder) else str(path)


def run_command(args, *, env=None, cwd=None, show=True, ok=(0,)):
    """Run a command line (a list) in the folder ``cwd`` (default: this
    process's), printing it first as a learner would type it there:
    ``python`` for this interpreter, and each ``Path`` argument relative to
    ``cwd`` (a file in it by its name), so that what a lesson prints is the
    same on every machine. Return its CompletedProcess; RuntimeError, with
    the command's output, when its exit status is not in ``ok``
    (``dezero_mini leaks`` exits with 1 when it finds a leak)."""
    folder = None if cwd is None else Path(os.path.abspath(cwd))
    args = [sys.executable if a == sys.executable else _argument(a, folder) for a in args]
    shown = ["python" if a == sys.executable else a for a in args]
    prefix = "".join(f"{k}={v} " for k, v in (env or {}).items())
    if show:
        print(f"$ {prefix}{shlex.join(shown)}")
    full_env = dict(os.environ, **(env or {}))
    # The command runs dezero_mini from the same place as this process does.
    here = str(Path(__file__).resolve().parents[2])
    full_env["PYTHONPATH"] = os.pathsep.join(p for p in (here, full_env.get("PYTHONPATH")) if p)
    done = subprocess.run(args, env=full_env, cwd=folder, capture_output=True, text=True)
    if done.returncode not in ok:
        raise RuntimeError(f"{shlex.join(shown)} failed (exit status {done.returncode}):\n"
                           + textwrap.indent((done.stdout + done.stderr)[-3000:], "    "))
    return done


def read_mprof(path):
    """The samples of the last run in an ``mprof run`` file (mprof appends to
    an existing file): (seconds from its start, MiB) as two lists, from its
    ``MEM <MiB> <timestamp>`` lines, without the 0 that mprof writes when the
    process has ended."""
    times, mib = [], []
    for row in Path(path).read_text().splitlines():
        if row.startswith("CMDLINE"):
            times, mib = [], []
        elif row.startswith("MEM ") and float(row.split()[1]) > 0:
            _, value, stamp = row.split()
            mib.append(float(value))
            times.append(float(stamp))
    if not times:
        raise ValueError(f"{path} has no MEM samples: did mprof run the script?")
    return [t - times[0] for t in times], mib


# ------------------------------------------------------------------- memray


def _frame_text(frame):
    function, filename, lineno = frame
    return f"{function} ({Path(filename).name}:{lineno})"


def _sites(records, within):
    """Bytes by the innermost frame in a file whose path contains ``within``
    (records whose stack never passes through such a file are left out)."""
    sites = {}
    for record in records:
        frame = next((f for f in record.stack_trace() if within in f[1]), None)
        if frame is not None:
            sites[_frame_text(frame)] = sites.get(_frame_text(frame), 0) + record.size
    return sorted(sites.items(), key=lambda item: -item[1])


def site_source(site, module):
    """The source line of a site that ``memray_peak_sites`` or
    ``memray_leak_sites`` returned (``"forward (step03_x.py:140)"``), read from
    ``module``'s file."""
    import linecache

    lineno = int(site.rsplit(":", 1)[1].rstrip(")"))
    return linecache.getline(module.__file__, lineno).strip()


def memray_peak_sites(fn, *args, within="step", dump=None):
    """Run ``fn(*args)`` under memray's Tracker and return, for the moment of
    its peak, the bytes by allocation site: [(site, bytes)], largest first,
    a site being the innermost frame in a file whose path contains ``within``.
    None (after one line) where memray is missing."""
    memray = optional_tool("memray")
    if memray is None:
        return None
    import tempfile

    with tempfile.TemporaryDirectory() as folder:
        path = Path(dump or Path(folder) / "peak.bin")
        with memray.Tracker(path, file_format=memray.FileFormat.AGGREGATED_ALLOCATIONS):
            fn(*args)
        with memray.FileReader(path) as reader:
            return _sites(reader.get_high_watermark_allocation_records(merge_threads=True), within)


def memray_leak_sites(dump, within):
    """From a ``memray run`` capture file: the memory still allocated when the
    run ended, [(site, bytes)] largest first, a site being the innermost frame
    in a file whose path contains ``within`` (the step file); and, apart, the
    allocations whose stack never passes through such a file, as
    (innermost frame of the largest of them, their bytes in all)."""
    import memray

    with memray.FileReader(dump) as reader:
        records = list(reader.get_leaked_allocation_records(merge_threads=True))
    inside, outside = [], []
    for record in records:
        passes = any(within in frame[1] for frame in record.stack_trace())
        (inside if passes else outside).append(record)
    largest = max(outside, key=lambda r: r.size) if outside else None
    elsewhere = (_frame_text(largest.stack_trace()[0]) if largest else None, sum(r.size for r in outside))
    return _sites(inside, within), elsewhere


def newest_flamegraph(folder="memray-results", keep=4):
    """The flame graph that ``%%memray_flamegraph`` wrote last (under
    ``memray-results/``, in a folder named after the notebook, or a new
    temporary one with memray's own magic), or None. Only the ``keep``
    newest folders are kept."""
    found = sorted(Path(folder).glob("*/flamegraph.html"), key=lambda p: p.stat().st_mtime)
    for old in found[:-keep]:
        shutil.rmtree(old.parent, ignore_errors=True)
    return found[-1] if found else None
