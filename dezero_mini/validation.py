"""The checks at the boundary of the public API: what a caller gave, against
what the function wanted, in the caller's words.

A public function that gets the wrong kind of argument should not answer
with an AttributeError from three calls down (``'NoneType' object has no
attribute 'data'``), nor train on a learning rate of nan. Each check here
raises TypeError (the wrong kind) or ValueError (the right kind, a value
that cannot be used) with one sentence that names the function, the
argument, what was given and its type, and what was wanted::

    plan_memory: graph must be a Graph (what trace() returns), got str 'abc'
    SGD: lr must be a finite number of at least 0, got float nan

:class:`Number` is the same check as a descriptor, for the settings of an
object that a caller may also change later (``optimizer.lr = ...``).

This module imports nothing of dezero_mini but NumPy, so every module can use it.
"""
import math
import numbers

import numpy as np


def describe(value):
    """``float nan``, ``str 'abc'``, ``ndarray of shape (3,)``: what was given, short."""
    kind = type(value).__name__
    if isinstance(value, np.ndarray):
        return f"ndarray of shape {value.shape} and dtype {value.dtype}"
    text = repr(value)
    if len(text) > 40:
        text = text[:37] + "..."
    return kind if value is None else f"{kind} {text}"


def expect(value, kinds, function, argument, wanted):
    """``value`` when it is an instance of ``kinds``, else TypeError:
    ``"{function}: {argument} must be {wanted}, got ..."``."""
    if not isinstance(value, kinds):
        raise TypeError(f"{function}: {argument} must be {wanted}, got {describe(value)}")
    return value


def expect_each(values, kinds, function, argument, wanted):
    """``values`` as a list when it is a list or tuple of ``kinds`` (one
    instance alone is taken as a list of one), else TypeError naming the
    first item that is not."""
    if isinstance(values, kinds):
        return [values]
    if not isinstance(values, (list, tuple)):
        raise TypeError(f"{function}: {argument} must be {wanted} or a list of them, "
                        f"got {describe(values)}")
    for position, value in enumerate(values):
        if not isinstance(value, kinds):
            raise TypeError(f"{function}: {argument}[{position}] must be {wanted}, "
                            f"got {describe(value)}")
    return list(values)


def _range_words(at_least, above, below, at_most):
    words = []
    if above is not None:
        words.append(f"above {above:g}")
    if at_least is not None:
        words.append(f"of at least {at_least:g}")
    if below is not None:
        words.append(f"below {below:g}")
    if at_most is not None:
        words.append(f"of at most {at_most:g}")
    return " and ".join(words)


def number(value, function, argument, *, at_least=None, above=None, below=None, at_most=None):
    """``value`` as a float when it is a finite real number in the range,
    else TypeError (not a number: None, a str, a bool, an array) or
    ValueError (nan, inf, out of the range)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{function}: {argument} must be a number, got {describe(value)}")
    result = float(value)
    inside = math.isfinite(result) and not (
        (at_least is not None and result < at_least) or (above is not None and result <= above)
        or (below is not None and result >= below) or (at_most is not None and result > at_most))
    if not inside:
        limits = _range_words(at_least, above, below, at_most)
        raise ValueError(f"{function}: {argument} must be a finite number"
                         f"{' ' + limits if limits else ''}, got {describe(value)}")
    return result


def whole_number(value, function, argument, *, at_least=None):
    """``value`` as an int when it is a whole number (a Python or NumPy
    integer, not a bool) of at least ``at_least``, else TypeError or ValueError."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{function}: {argument} must be a whole number, got {describe(value)}")
    if at_least is not None and value < at_least:
        raise ValueError(f"{function}: {argument} must be a whole number of at least "
                         f"{at_least}, got {describe(value)}")
    return int(value)


class Number:
    """A setting of an object that must stay a finite number in a range
    (:func:`number`), checked when it is set, in ``__init__`` and after::

        class SGD:
            lr = Number(at_least=0)

    The error names the class and the setting."""

    def __init__(self, **limits):
        self.limits = limits

    def __set_name__(self, owner, name):
        self.name = name
        self.slot = "_" + name

    def __get__(self, instance, owner=None):
        if instance is None:
            return self
        return getattr(instance, self.slot)

    def __set__(self, instance, value):
        number(value, type(instance).__name__, self.name, **self.limits)
        setattr(instance, self.slot, value)


def expect_callable(value, function, argument, wanted="a function"):
    """``value`` when it can be called, else TypeError."""
    if not callable(value):
        raise TypeError(f"{function}: {argument} must be {wanted}, got {describe(value)}")
    return value


def expect_stage_module(module, function, argument="module"):
    """``module`` when it is a stage of the course (a module with the
    framework's ``Variable`` and ``Function`` classes: ``load_stage(3)``, or
    ``dezero_mini`` itself), else TypeError that says how to get one."""
    if not (isinstance(getattr(module, "Variable", None), type)
            and isinstance(getattr(module, "Function", None), type)):
        hint = " (load_stage(...) turns a number or a name into one)" \
            if isinstance(module, (str, int)) else ""
        raise TypeError(f"{function}: {argument} must be a stage module such as load_stage(3) "
                        f"or dezero_mini, got {describe(module)}{hint}")
    return module


def expect_variable(value, function, argument):
    """``value`` when it is a Variable of any stage (it has ``data`` and
    ``creator``), else TypeError."""
    if not (hasattr(value, "creator") and hasattr(value, "data")) or isinstance(value, type):
        raise TypeError(f"{function}: {argument} must be a Variable, got {describe(value)}")
    return value


def expect_flag(value, function, argument):
    """``value`` when it is True or False (a NumPy bool too), else TypeError:
    a flag given a string ("no") or an array would be read by its truth."""
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{function}: {argument} must be True or False, got {describe(value)}")
    return bool(value)
