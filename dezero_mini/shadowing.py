"""A learner's file that has the name of a module the command line imports.

``python -m dezero_mini`` puts the current folder first on ``sys.path``
before it looks for ``dezero_mini``: a ``dezero_mini.py`` there (or a
``dezero_mini/`` folder that is not this package) is run in place of the
package, and nothing of the package ever runs. So that this cannot happen
silently, the installation puts one line into ``site-packages``
(``00-dezero_mini-guard.pth``, written by ``setup.py`` from :data:`PTH_LINE`):
``site`` runs it at every start of Python, before ``python -m`` adds the
current folder, and when the start is ``python -m dezero_mini`` it runs this
file, which refuses a stand-in in one line (:func:`refuse_a_stand_in`).
It costs one look at ``sys.orig_argv`` for every other start.

What it cannot cover: Python started without ``site`` (``python -S``), or a
package found through ``PYTHONPATH`` alone (no ``.pth`` of its folder is
read). The installed ``dezero_mini`` script, ``python -P -m dezero_mini``
(Python 3.11 and later) and ``python -I -m dezero_mini`` never look in the
current folder.

For the other modules the commands import (NumPy, Matplotlib, ``json``...),
the command line itself looks before and after its imports
(:func:`stand_in_problem`, :func:`learner_files_named_like`): ``python -m``
takes the current folder off ``sys.path``, so there such a file is only
named, in one warning line, since the learner's own scripts would import it.

The same guard makes Ctrl-C during the command's start one line and exit
130 (:func:`end_the_start_interrupted`), until the command line takes it
over; the package's first lines use the same handler where the guard did
not run.

This module imports only the standard library: it runs before the package.
"""
import os
import sys

#: The package's name, and the file the guard looks for in a folder named
#: so, which tells a copy of this package (a checkout) from a learner's folder.
PACKAGE = "dezero_mini"
MARKER = "shadowing.py"
#: The libraries the commands import, some only when used (Matplotlib when
#: plotting): a learner's file of one of these names is named too.
DEPENDENCIES = ("numpy", "matplotlib", "graphviz", "psutil", "tqdm", "memory_profiler",
                "torch")
#: The line of ``00-dezero_mini-guard.pth``. ``site`` executes a ``.pth`` line
#: that starts with ``import``; this one runs the present file by its path
#: (importing the package would import NumPy at every start, and the name
#: ``dezero_mini`` may be what stands in) only when ``dezero_mini`` is among
#: the first words of the command line. ``{guard}``: the file's path, an
#: expression (setup.py: where the wheel puts it beside the ``.pth``, from
#: ``sitedir``, the folder that ``site`` reads; the source for an editable install).
PTH_LINE = (
    "import os, sys; p = {guard}; 'dezero_mini' in str(getattr(sys, 'orig_argv', [])[1:5]) "
    "and os.path.isfile(p) and __import__('runpy').run_path(p, run_name='dezero_mini_guard')")
#: ``{guard}`` of a wheel: the package folder beside the ``.pth`` file.
GUARD_IN_WHEEL = "os.path.join(sitedir, 'dezero_mini', 'shadowing.py')"
PTH_NAME = "00-dezero_mini-guard.pth"  # first of its folder's .pth files: guards Ctrl-C sooner
EXIT_USAGE = 2


def start_words(orig_argv):
    """How the interpreter was started, from its own arguments (``sys.orig_argv``):
    ``(module, script, words)``: the module that ``python -m MODULE`` runs (or
    None), else the script it runs (or None: ``-c``, standard input, no
    argument), and the words that follow either. Options of the interpreter
    are passed over, grouped ones too (``-Im dezero_mini``, ``-X dev``)."""
    words = list(orig_argv)[1:]  # [0]: the interpreter
    index = 0
    while index < len(words):
        word = words[index]
        index += 1
        if word == "-" or not word.startswith("-"):
            return (None, None if word == "-" else word, words[index:])
        if word.startswith("--"):
            if word == "--check-hash-based-pycs":
                index += 1  # its value
            continue
        for position, letter in enumerate(word[1:], start=2):
            if letter in "mc":  # the module or the command: the rest of the word, or the next
                value = word[position:] or (words[index] if index < len(words) else None)
                rest = words[index:] if word[position:] else words[index + 1:]
                return (value, None, rest) if letter == "m" else (None, None, rest)
            if letter in "XW":  # an option with a value: the rest of the word, or the next
                if not word[position:]:
                    index += 1
                break
    return (None, None, [])


def module_run_with_m(orig_argv):
    """The module that ``python -m MODULE`` runs, from the interpreter's own
    arguments (``sys.orig_argv``), or None when the process was not started so."""
    return start_words(orig_argv)[0]


def adds_current_folder(flags=None):
    """Whether ``python -m`` puts the current folder on ``sys.path``: not
    under ``-I``, nor ``-P`` / ``PYTHONSAFEPATH`` (Python 3.11 and later)."""
    flags = sys.flags if flags is None else flags
    return not flags.isolated and not getattr(flags, "safe_path", False)


def is_this_package(folder):
    return os.path.isfile(os.path.join(folder, MARKER))


def stand_in_for_package(search_path):
    """What Python would import as ``dezero_mini`` from the folders of
    ``search_path`` (``sys.path`` as it will be) when that is not this
    package: the path of a ``dezero_mini.py`` (or compiled module), or of a
    ``dezero_mini/`` folder that is not a copy of this package; None when
    the package itself (or nothing: an editable install's finder comes after
    these folders) would be imported."""
    from importlib.machinery import PathFinder

    try:
        spec = PathFinder.find_spec(PACKAGE, list(search_path))
    except (OSError, ImportError, ValueError):
        return None
    if spec is None:
        return None
    if spec.origin and spec.origin not in ("namespace", "built-in"):
        found = spec.origin
        if os.path.basename(found).startswith("__init__."):
            found = os.path.dirname(found)
    else:  # a folder without __init__.py: a namespace package
        portions = list(spec.submodule_search_locations or [])
        if not portions:
            return None
        found = portions[0]
    if os.path.isdir(found) and is_this_package(found):
        return None  # the package, or a checkout of the course run from its root
    return found


def stand_in_message(found, program="python -m dezero_mini"):
    """The one line that refuses a stand-in at ``found``."""
    if program == PACKAGE:
        why = "its folder is on PYTHONPATH"
        fix = "rename it, or take its folder off PYTHONPATH"
    else:
        why = "python -m looks in the current folder first"
        fix = "rename it, or run the command as .venv/bin/dezero_mini (or from another folder)"
    return f"{program}: error: {found!r} stands in for the dezero_mini package ({why}); {fix}"


def search_path_at_start(orig_argv, flags=None, folder=None):
    """The folders where Python will look for ``dezero_mini`` when the
    process started with ``orig_argv`` runs it: ``sys.path`` (with
    ``PYTHONPATH``), after the current folder for ``python -m dezero_mini...``
    and after the script's folder for the installed script; None when the
    process does not run dezero_mini's command line."""
    module, script, _ = start_words(orig_argv)
    if module is not None:
        if module.split(".")[0] != PACKAGE:
            return None
        first = [folder or os.getcwd()] if adds_current_folder(flags) else []
    elif script is not None and os.path.basename(script) == PACKAGE:
        first = [os.path.dirname(os.path.abspath(script))]  # the script's folder
    else:
        return None
    return first + [entry for entry in sys.path if entry not in first]


def refuse_a_stand_in(orig_argv=None, flags=None):
    """Run by ``00-dezero_mini-guard.pth`` at Python's start: when the start is
    ``python -m dezero_mini...`` (or the installed script) and a stand-in
    would be imported in place of the package, say so in one line and end
    with exit 2 before Python imports it. ``os._exit``: a SystemExit while
    ``site`` runs would be a fatal error of Python's start, with a traceback."""
    orig_argv = getattr(sys, "orig_argv", []) if orig_argv is None else orig_argv
    try:
        search_path = search_path_at_start(orig_argv, flags)
    except OSError:
        return  # the current folder is gone: the package's start says so
    found = stand_in_for_package(search_path) if search_path is not None else None
    if found is not None:
        program = ("python -m dezero_mini" if module_run_with_m(orig_argv) is not None
                   else PACKAGE)
        try:
            print(stand_in_message(found, program), file=sys.stderr, flush=True)
        except (OSError, ValueError, AttributeError):
            pass
        os._exit(EXIT_USAGE)


def _module_name(entry, folder):
    """The module that the folder entry ``entry`` would be imported as, or None."""
    name = entry.name
    if name.endswith(".py") and entry.is_file():
        return name[:-3]
    if entry.is_dir() and os.path.isfile(os.path.join(folder, name, "__init__.py")):
        return name
    return None


def learner_files_named_like(folder, names):
    """The files (``numpy.py``) and packages (``json/``) in ``folder`` that
    have one of the module ``names``, sorted; empty when it cannot be read."""
    found = []
    try:
        with os.scandir(folder) as entries:
            for entry in entries:
                try:
                    name = _module_name(entry, folder)
                except OSError:
                    continue
                if name is not None and name in names:
                    found.append(entry.name)
    except OSError:
        return []
    return sorted(found)


def modules_used(modules=None):
    """The top-level names of the modules the command line imports: the
    package, :data:`DEPENDENCIES` (some are loaded only when used), and those
    loaded now that come with Python or its installed packages (built in, or
    from a file under the interpreter's prefixes). A module loaded from
    anywhere else (a stage file a test or a notebook imported, a learner's
    script) is the learner's own, not one the commands need."""
    modules = sys.modules if modules is None else modules
    names = {PACKAGE, *DEPENDENCIES}
    homes = _installation_folders()
    for name, module in list(modules.items()):
        top = name.partition(".")[0]
        if top in names:
            continue
        path = getattr(module, "__file__", None)
        if not isinstance(path, str) or os.path.normpath(path).startswith(homes):
            names.add(top)
    return names


def _installation_folders():
    """The folders Python and its packages are installed under (each with a
    trailing separator), as given and as their real paths."""
    prefixes = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix}
    folders = {os.path.normpath(p) for p in prefixes} | {os.path.realpath(p) for p in prefixes}
    return tuple(os.path.join(folder, "") for folder in folders)


def imported_from(folder, modules=None):
    """The modules already imported from a file in ``folder``: ``{name: path}``."""
    modules = sys.modules if modules is None else modules
    folder = os.path.realpath(folder)
    found = {}
    for name, module in list(modules.items()):
        path = getattr(module, "__file__", None)
        if "." in name or not isinstance(path, str):
            continue
        place = os.path.dirname(path)
        if os.path.basename(path).startswith("__init__."):
            place = os.path.dirname(place)
        if os.path.realpath(place) == folder and not (
                name == PACKAGE and is_this_package(os.path.dirname(path))):
            found[name] = path
    return found


def stand_in_problem(folder, modules=None):
    """Why the command cannot go on: a module it imported came from a
    learner's file in ``folder`` (the current folder on ``PYTHONPATH``), as
    one sentence with its fix; None when none did."""
    found = imported_from(folder, modules)
    if not found:
        return None
    name, path = sorted(found.items())[0]
    return (f"{path!r} was imported as the module {name!r} in place of the real one (its "
            "folder is on Python's search path, through PYTHONPATH or the current folder); "
            "rename the file, or take its folder off PYTHONPATH")


def shadowing_warning(folder, modules=None):
    """One line naming the learner's files in ``folder`` that have the name
    of a module the commands import (the command ignores them; a script run
    from that folder would import them instead); None when there are none."""
    names = modules_used(modules)
    names.discard("__main__")
    found = [name for name in learner_files_named_like(folder, names)
             if not (name == PACKAGE and is_this_package(os.path.join(folder, name)))]
    if not found:
        return None
    many = len(found) > 1
    return (f"warning: {', '.join(found)} in this folder {'have' if many else 'has'} the "
            f"name{'s' if many else ''} of {'modules' if many else 'a module'} that "
            "dezero_mini's commands import: this command ignores "
            f"{'them' if many else 'it'}, but python -m dezero_mini and your scripts run from "
            f"this folder would import {'them' if many else 'it'} instead; rename "
            f"{'them' if many else 'it'} (e.g. my_{found[0]})")


# --- Ctrl-C while the command starts ----------------------------------------------------
#: The exit status of a command stopped with Ctrl-C (128 + SIGINT), as shells report it.
EXIT_INTERRUPTED = 130
#: What marks :func:`end_the_start_interrupted`, in whichever copy of this file
#: it was defined: the one that ``00-dezero_mini-guard.pth`` runs by its path at
#: Python's start, or the package's module, imported later (two function objects).
START_HANDLER_MARK = "ends_the_start_of_dezero_mini"


def command_called(orig_argv=None):
    """How the command being started calls itself in its messages, from the
    interpreter's arguments: ``python -m dezero_mini train`` or
    ``dezero_mini train`` (the installed script); its first word only when
    that is no option (``dezero_mini --version``: ``dezero_mini``)."""
    orig_argv = getattr(sys, "orig_argv", []) if orig_argv is None else orig_argv
    module, _, words = start_words(orig_argv)
    program = f"python -m {PACKAGE}" if module is not None else PACKAGE
    return " ".join([program, *[word for word in words[:1] if not word.startswith("-")]])


def interrupted_line(command):
    """The one line of a command stopped with Ctrl-C, at any moment of its life."""
    return f"{command}: interrupted"


def end_the_start_interrupted(signum, frame):
    """SIGINT's handler from Python's start (set by the guard of
    ``00-dezero_mini-guard.pth``, else by the package's first lines) until
    the command line takes Ctrl-C over as a KeyboardInterrupt
    (:func:`hand_interrupts_back`): one line and exit 130, wherever the
    start is. ``os._exit``: inside ``site`` an exception is a fatal error of
    Python's start, in ``python -m``'s search for the package a traceback
    from runpy, in the package's imports a traceback from NumPy; and there
    is nothing to clean up yet."""
    try:
        if sys.stderr is not None:  # (none with 2>&-)
            print(f"\n{interrupted_line(command_called())}", file=sys.stderr, flush=True)
    except (OSError, ValueError):
        pass
    finally:
        os._exit(EXIT_INTERRUPTED)


setattr(end_the_start_interrupted, START_HANDLER_MARK, True)


def is_start_handler(handler):
    """Whether ``handler`` (``signal.getsignal(SIGINT)``) is
    :func:`end_the_start_interrupted`, from either copy of this file."""
    return getattr(handler, START_HANDLER_MARK, False) is True


def end_the_start_on_interrupt():
    """From now until :func:`hand_interrupts_back`, Ctrl-C ends the command's
    start with one line (:func:`end_the_start_interrupted`). Only where SIGINT
    has Python's own handler, in the main thread: a shell that starts the
    command in the background ignores SIGINT, and that stays so; a handler
    set already (by the guard at Python's start) stays too."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        return
    if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
        signal.signal(signal.SIGINT, end_the_start_interrupted)


def hand_interrupts_back():
    """Ctrl-C raises KeyboardInterrupt again, for the command line to handle
    (:func:`dezero_mini.cli.program.main`); a no-op unless the start's handler is set."""
    import signal
    import threading

    if (threading.current_thread() is threading.main_thread()
            and is_start_handler(signal.getsignal(signal.SIGINT))):
        signal.signal(signal.SIGINT, signal.default_int_handler)


def guard_at_start(orig_argv=None):
    """What ``00-dezero_mini-guard.pth`` runs when the process is dezero_mini's
    command line (``python -m dezero_mini``, the installed script): Ctrl-C
    ends its start in one line from here on (:func:`end_the_start_on_interrupt`);
    then :func:`refuse_a_stand_in`. (Any other start that names dezero_mini, such
    as ``python -m dezero_mini.contracts.worker``, is left as it is.)"""
    orig_argv = getattr(sys, "orig_argv", []) if orig_argv is None else orig_argv
    module, script, _ = start_words(orig_argv)
    if module == PACKAGE or (module is None and script is not None
                             and os.path.basename(script) == PACKAGE):
        end_the_start_on_interrupt()
    refuse_a_stand_in(orig_argv)


if __name__ == "dezero_mini_guard":  # run by 00-dezero_mini-guard.pth (PTH_LINE)
    guard_at_start()
