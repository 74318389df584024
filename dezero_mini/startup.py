"""How the command line starts, before the package's heavy imports.

``python -m dezero_mini`` and the installed ``dezero_mini`` script import the
whole package (NumPy, the framework, the instruments) before the command line
(:mod:`dezero_mini.cli`) can guard anything. This module, which imports only
the standard library, is what ``dezero_mini/__init__.py`` runs first when the
process is the command line (:func:`started_as_command`):

* a Ctrl-C during those imports ends the command with one line and exit
  130, as later (:func:`stop_quietly_on_interrupt`), not with a traceback
  from inside NumPy;
* the current folder removed under the process, and a setting of the
  environment that cannot be used, are one line each and exit 2
  (:func:`startup_problem`), not a traceback from an import;
* ``python -m`` puts the current folder first on ``sys.path``, where a
  ``numpy.py`` of the learner's would stand in for NumPy: it is taken off.

A library import (``import dezero_mini`` in a script or a notebook) is left
alone: there Python's own behaviour is what the caller expects.
"""
import os
import sys

from dezero_mini import shadowing
from dezero_mini.environment import SettingError, check_settings

#: The exit status of a command stopped with Ctrl-C (128 + SIGINT), as shells report it.
EXIT_INTERRUPTED = shadowing.EXIT_INTERRUPTED
#: The exit status of a command that cannot start with what it was given.
EXIT_USAGE = 2
#: The name the installed script has (``[project.scripts]`` of pyproject.toml).
SCRIPT_NAME = "dezero_mini"


def module_run_with_m(orig_argv=None):
    """The module that ``python -m MODULE`` runs, from the interpreter's own
    arguments (``sys.orig_argv``), or None when the process was not started so."""
    return shadowing.module_run_with_m(sys.orig_argv if orig_argv is None else orig_argv)


def started_as_command(argv=None, main_module=None, orig_argv=None):
    """Whether this process is dezero_mini's command line: ``python -m
    dezero_mini`` (while runpy imports the package, ``sys.argv[0]`` is
    ``"-m"``) or the installed ``dezero_mini`` script (its ``__main__``).
    Not ``python -m dezero_mini.contracts.worker`` and the like."""
    argv = sys.argv if argv is None else argv
    if argv[:1] == ["-m"]:
        return module_run_with_m(orig_argv) == "dezero_mini"
    main_module = sys.modules.get("__main__") if main_module is None else main_module
    script = getattr(main_module, "__file__", None)
    return (bool(argv) and script is not None and os.path.basename(script) == SCRIPT_NAME
            and os.path.basename(argv[0]) == SCRIPT_NAME)


def command_name():
    """``python -m dezero_mini train`` or ``dezero_mini train``: how the
    command being started calls itself in its messages (:func:`shadowing.command_called`)."""
    return shadowing.command_called()


def say(line):
    """Print ``line`` on stderr when there is one (``2>&-`` leaves none)."""
    if sys.stderr is not None:
        try:
            print(line, file=sys.stderr, flush=True)
        except (OSError, ValueError):
            pass


def stop_quietly_on_interrupt():
    """Until the command line takes over (:func:`interrupts_raise`), a Ctrl-C
    ends the process with one line and exit 130: the handler that the
    installation's guard set at Python's start, or, where it did not run
    (``python -S``, a package found through ``PYTHONPATH``), the same one set
    now (:func:`dezero_mini.shadowing.end_the_start_on_interrupt`)."""
    shadowing.end_the_start_on_interrupt()


def interrupts_raise():
    """Hand Ctrl-C back to Python (KeyboardInterrupt) once the command line
    can handle it; a no-op unless the start's handler is set."""
    shadowing.hand_interrupts_back()


def current_folder():
    """The current folder, or None when it was removed under the process
    (``os.getcwd()`` raises FileNotFoundError then)."""
    try:
        return os.getcwd()
    except FileNotFoundError:
        return None


def startup_problem(environ=None):
    """Why the command cannot start, as one sentence with its fix; None when it can."""
    if current_folder() is None:
        return ("the current folder no longer exists (it was removed or renamed after the "
                "shell entered it); cd to a folder that exists and run the command again")
    try:
        check_settings(environ)
    except SettingError as error:
        return str(error)
    return None


def leave_out_current_folder():
    """``python -m`` put the current folder first on ``sys.path``, so that a
    ``json.py`` or ``numpy.py`` there (a submission's folder, for ``check``)
    would stand in for the real module in this very process. The command
    line never imports a module from that folder. (``python -I`` or ``-P``
    does not add it.)"""
    if sys.argv[:1] == ["-m"] and sys.path and not sys.flags.isolated:
        if sys.path[0] in ("", current_folder()):
            del sys.path[0]


def prepare_command():
    """Everything :mod:`dezero_mini` does first when the process is its command line."""
    stop_quietly_on_interrupt()
    problem = startup_problem() or stand_in_before_import()
    if problem is not None:
        say(f"{command_name()}: error: {problem}")
        raise SystemExit(EXIT_USAGE)


def stand_in_before_import(folder=None):
    """Why the command cannot start: a learner's file in the current folder
    (``numpy.py``, ``json.py``, ``dezero_mini.py``) would be imported in place
    of a module the command needs, its folder being on ``sys.path`` (through
    ``PYTHONPATH``: ``python -m`` loses the current folder above); said
    before the import, so that the file never runs. None when none would."""
    folder = current_folder() if folder is None else folder
    if folder is None:
        return None
    names = set(getattr(sys, "stdlib_module_names", ())) | set(shadowing.DEPENDENCIES)
    names.add(shadowing.PACKAGE)
    from importlib.machinery import PathFinder

    for entry in shadowing.learner_files_named_like(folder, names):
        name = entry[:-3] if entry.endswith(".py") else entry
        try:
            spec = PathFinder.find_spec(name)
        except (ImportError, OSError, ValueError):
            continue
        origin = getattr(spec, "origin", None) or ""
        if origin and os.path.realpath(os.path.dirname(origin)) in (
                os.path.realpath(folder), os.path.realpath(os.path.join(folder, name))):
            if name == shadowing.PACKAGE and shadowing.is_this_package(os.path.dirname(origin)):
                continue
            return (f"{os.path.join(folder, entry)!r} would be imported as the module {name!r} "
                    "in place of the real one (this folder is on Python's search path, through "
                    "PYTHONPATH); rename the file, or take the folder off PYTHONPATH")
    return shadowing.stand_in_problem(folder)
