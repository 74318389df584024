"""DeZero's ``core_simple`` names, for the book's steps 23-32.

DeZero keeps two cores: ``core_simple`` (the first one its book builds) and
``core`` (the finished one). dezero_mini has one core with every memory fix;
this module gives it the simple core's names, so that
``from dezero.core_simple import Variable`` runs with dezero_mini.

One thing differs in DeZero's simple core, and programs written for it read
it: a gradient is a plain numpy array, not a Variable (the simple core cannot
differentiate a gradient again). The book's steps 28 and 29 update a value
with ``x.data -= lr * x.grad``, which needs an array. So ``Variable`` here is
the core's Variable whose ``grad`` reads as an array; everything else (its
graph, its memory, its operators) is the core's.
"""
import numpy as np

from dezero_mini import core
from dezero_mini.core import (  # noqa: F401  (the names of DeZero's core_simple)
    Add,
    Config,
    Div,
    Function,
    Mul,
    Neg,
    Pow,
    Sub,
    add,
    as_array,
    as_variable,
    div,
    mul,
    neg,
    no_grad,
    pow,
    rdiv,
    rsub,
    setup_variable,
    sub,
    using_config,
)

# The core keeps a Variable's gradient in this slot (a Variable, or None).
_GRADIENT_SLOT = core.Variable.grad


class Variable(core.Variable):
    """The core's Variable, whose gradient reads as a numpy array, as in
    DeZero's simple core (``x.data -= lr * x.grad``).

    Only the Variables you make are of this class: the results of operations
    are the core's Variables, as the core makes them. The gradient is kept as
    the core keeps it, so backward, ``cleargrad`` and the accumulation of
    gradients work unchanged.
    """

    __slots__ = ()  # no __dict__: the core's slots are all it needs

    @property
    def grad(self):
        """The gradient as a numpy array, or None before backward."""
        gradient = _GRADIENT_SLOT.__get__(self)
        return None if gradient is None else gradient.data

    @grad.setter
    def grad(self, value):
        if value is not None and not isinstance(value, core.Variable):
            value = core.Variable(np.asarray(value))
        _GRADIENT_SLOT.__set__(self, value)
