"""The framework's settings read from the environment: the defaults of ``Config``.

* ``DEZERO_MINI_WARN_LEAKS=N``: ``Config.warn_leaks``, the leak warning
  after N optimizer updates of growth in a row (``dezero_mini.leak_warning``);
* ``DEZERO_MINI_CHECK_SAVED=1``: ``Config.check_saved``, the check that a
  Function keeps only what its backward reads (stage 08 of the course).

Reading a variable needs nothing of the framework, so this module imports
nothing of dezero_mini: ``core`` reads its defaults here when it is loaded.
"""
import os

WARN_LEAKS_VARIABLE = "DEZERO_MINI_WARN_LEAKS"
CHECK_SAVED_VARIABLE = "DEZERO_MINI_CHECK_SAVED"


def warn_leaks_setting(environ=None):
    """``Config.warn_leaks``'s default: the whole number in
    ``$DEZERO_MINI_WARN_LEAKS``, 0 (off) when it is unset or empty."""
    text = (os.environ if environ is None else environ).get(WARN_LEAKS_VARIABLE, "").strip()
    if not text:
        return 0
    if not text.isdecimal():
        raise ValueError(
            f"{WARN_LEAKS_VARIABLE}={text!r}: the leak warning takes a whole number of optimizer "
            f"updates (0 or empty: off), for example {WARN_LEAKS_VARIABLE}=5")
    return int(text)


def check_saved_setting(environ=None):
    """``Config.check_saved``'s default: on when ``$DEZERO_MINI_CHECK_SAVED`` is ``1``."""
    return (os.environ if environ is None else environ).get(CHECK_SAVED_VARIABLE) == "1"
