"""The package's settings read from the environment, and their checks.

* ``DEZERO_MINI_WARN_LEAKS=N``: ``Config.warn_leaks``, the leak warning
  after N optimizer updates of growth in a row (``dezero_mini.leak_warning``);
* ``DEZERO_MINI_CHECK_SAVED=1``: ``Config.check_saved``, the check that a
  Function keeps only what its backward reads (stage 08 of the course);
* ``DEZERO_MINI_DATA=DIR``: where downloaded data sets are kept
  (``dezero_mini.datasets``);
* ``DEZERO_MINI_SLOW_WRITE=SECONDS``: a test hook of ``dezero_mini.atomic``.

A value that cannot be used raises :class:`SettingError`, a ValueError that
names the variable, the value and what it takes; the command line checks them
all before it starts (:func:`check_settings`) and says so in one line.

Reading a variable needs nothing of the framework, so this module imports
nothing of dezero_mini: ``core`` reads its defaults here when it is loaded.
"""
import math
import os

WARN_LEAKS_VARIABLE = "DEZERO_MINI_WARN_LEAKS"
CHECK_SAVED_VARIABLE = "DEZERO_MINI_CHECK_SAVED"
DATA_VARIABLE = "DEZERO_MINI_DATA"
SLOW_WRITE_VARIABLE = "DEZERO_MINI_SLOW_WRITE"
# The leak warning's most updates in a row: more than a run's updates would
# only switch it off in a roundabout way (0 says so).
MAX_WARN_LEAKS = 1_000_000


class SettingError(ValueError):
    """A variable of the environment holds a value that cannot be used."""


def _read(name, environ):
    return (os.environ if environ is None else environ).get(name, "").strip()


def warn_leaks_setting(environ=None):
    """``Config.warn_leaks``'s default: the whole number in
    ``$DEZERO_MINI_WARN_LEAKS``, 0 (off) when it is unset or empty."""
    text = _read(WARN_LEAKS_VARIABLE, environ)
    if not text:
        return 0
    # (ASCII digits: str.isdecimal also takes other scripts' digits; and the
    # length first: int() of 5,000 digits is refused)
    digits = text.lstrip("0") or "0"
    if (not (text.isascii() and text.isdecimal()) or len(digits) > len(str(MAX_WARN_LEAKS))
            or int(digits) > MAX_WARN_LEAKS):
        raise SettingError(
            f"{WARN_LEAKS_VARIABLE}={text[:40]!r}: the leak warning takes a whole number of "
            f"optimizer updates from 1 to {MAX_WARN_LEAKS:,} (0 or empty: off), for example "
            f"{WARN_LEAKS_VARIABLE}=5")
    return int(text)


def check_saved_setting(environ=None):
    """``Config.check_saved``'s default: on when ``$DEZERO_MINI_CHECK_SAVED`` is
    ``1``, off when it is ``0``, empty or unset (anything else is refused,
    rather than read as off: ``yes`` meant on)."""
    text = _read(CHECK_SAVED_VARIABLE, environ)
    if text not in ("", "0", "1"):
        raise SettingError(f"{CHECK_SAVED_VARIABLE}={text!r}: takes 1 (on) or 0 (off), "
                           f"for example {CHECK_SAVED_VARIABLE}=1")
    return text == "1"


def slow_write_setting(environ=None):
    """The seconds of ``atomic``'s test hook: 0 (no pause) when unset or empty."""
    text = _read(SLOW_WRITE_VARIABLE, environ)
    if not text:
        return 0.0
    try:
        seconds = float(text)
    except ValueError:
        seconds = math.nan
    if not 0 <= seconds < math.inf:
        raise SettingError(f"{SLOW_WRITE_VARIABLE}={text!r}: takes a number of seconds, "
                           "0 or more (a test hook; unset it)")
    return seconds


def data_folder_setting(environ=None):
    """The folder in ``$DEZERO_MINI_DATA``, or None when unset; refused when
    it names something that exists and is not a folder."""
    text = (os.environ if environ is None else environ).get(DATA_VARIABLE, "")
    if not text:
        return None
    if os.path.exists(text) and not os.path.isdir(text):
        raise SettingError(f"{DATA_VARIABLE}={text!r} is a file, not a folder; set it to a "
                           "folder you can write to, or unset it to use ~/.dezero_mini")
    return text


def check_settings(environ=None):
    """Raise :class:`SettingError` for the first variable of the package
    whose value cannot be used."""
    for setting in (warn_leaks_setting, check_saved_setting, slow_write_setting,
                    data_folder_setting):
        setting(environ)


def import_matplotlib():
    """``matplotlib``, imported; a ``$MPLBACKEND`` that Matplotlib refuses
    (it reads the variable when it is imported) is a :class:`SettingError`
    that names it, not a ValueError from inside Matplotlib."""
    try:
        import matplotlib
    except ValueError as error:
        backend = os.environ.get("MPLBACKEND")
        if backend is None or "backend" not in str(error):
            raise
        raise SettingError(f"MPLBACKEND={backend!r} is not a backend of Matplotlib; unset it, "
                           "or name one such as MPLBACKEND=Agg (files only)") from None
    return matplotlib
