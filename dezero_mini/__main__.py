"""``python -m dezero_mini``: the command line of dezero_mini.cli.

``python -m`` looks for ``dezero_mini`` in the current folder first. A
``dezero_mini/`` folder there (a package, or a plain folder, which an
editable install's finder lets through) is imported in place of this
package, and then this file runs against it: the command line cannot start,
so it says why in one line instead of an ImportError from inside. (A
``dezero_mini.py`` file there would run instead of this file, before any
code of the package: the line that the installation puts into
``site-packages`` refuses it at Python's start, see
:mod:`dezero_mini.shadowing`; this file is the second line of defence, for
a folder, where that line is not read.) The line it prints is the guard's own
(:func:`dezero_mini.shadowing.stand_in_message`), taken from the
``shadowing.py`` beside this file by its path: ``import dezero_mini.shadowing``
would import it from the stand-in.
"""
import os
import sys


def shadowing_package():
    """Where the ``dezero_mini`` that Python imported lives, when it is not
    the package of this file; None when it is."""
    here = os.path.dirname(os.path.abspath(__file__))
    package = sys.modules.get("dezero_mini")
    locations = [os.path.dirname(package.__file__)] if getattr(package, "__file__", None) \
        else list(getattr(package, "__path__", []))
    if any(os.path.abspath(location) == here for location in locations):
        return None
    return locations[0] if locations else "an unknown place"


def the_guard():
    """The names of the ``shadowing.py`` beside this file (it imports only the
    standard library), run by its path: the guard's message and exit status."""
    import runpy

    return runpy.run_path(os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                       "shadowing.py"), run_name="dezero_mini_main_guard")


if __name__ == "__main__":
    shadow = shadowing_package()
    if shadow is not None:
        guard = the_guard()
        print(guard["stand_in_message"](shadow), file=sys.stderr)
        sys.exit(guard["EXIT_USAGE"])
    from dezero_mini.cli import main

    sys.exit(main(prog="python -m dezero_mini"))
