"""DeZero's ``cuda`` module for a CPU-only framework.

DeZero runs on NumPy or, when CuPy is installed, on a GPU; its code asks
``xp = dezero.cuda.get_array_module(x)`` and then calls ``xp.exp(...)``.
dezero_mini runs on NumPy only (the course measures host memory), so here
``xp`` is always NumPy: such code runs unchanged on the CPU. Moving data to
a GPU (``as_cupy``) is the one thing that cannot work, and says so.
"""
import numpy as np

from dezero_mini.core import Variable

#: Whether a GPU can be used: never, in dezero_mini.
gpu_enable = False


def _array(x):
    return x.data if isinstance(x, Variable) else x


def get_array_module(x):
    """The array module for ``x`` (a Variable or an array): always ``numpy``."""
    return np


def as_numpy(x):
    """``x`` (a Variable, an array or a scalar) as a ``numpy.ndarray``: the
    Variable's array, the array itself, or a 0-d array for a scalar."""
    x = _array(x)
    if np.isscalar(x):
        return np.array(x)
    return np.asarray(x)


def as_cupy(x):
    """Always raises: dezero_mini has no GPU arrays (CuPy is not used)."""
    raise RuntimeError(
        "as_cupy: dezero_mini runs on the CPU only (NumPy); it has no GPU arrays. "
        "Keep the data in NumPy (dezero_mini.cuda.as_numpy), or run the program with DeZero "
        "and CuPy for a GPU"
    )
