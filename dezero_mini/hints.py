"""How a message spells a command for the user to run: as the docs and lessons show it.

The course's pages write the installed command, ``dezero_mini start 3``
(with the environment activated); ``python -m dezero_mini ...`` is the same
program, but a ``dezero_mini.py`` of the learner's in the current folder
would stand in for it. Every hint that names a command (``progress``'s "not
started", ``start``'s "when it is done", the header of a stage file) is made
by :func:`command_line`, so that they all say what the docs say.

This module imports only the standard library: the checker's modules and the
command line both use it.
"""
import shlex

#: The installed command (``[project.scripts]`` of pyproject.toml).
COMMAND = "dezero_mini"


def command_line(*words):
    """The command line ``dezero_mini WORD...`` as a user types it: each word
    (a number, a path) made text, and quoted where a shell would split it
    (``dezero_mini check 3 'my files/step03.py'``)."""
    return " ".join([COMMAND, *(shlex.quote(str(word)) for word in words)])
