"""What one object of the graph weighs by itself, with and without ``__slots__``.

``object_footprint(make)`` makes many objects with ``make()`` and reports the
bytes per object two ways: ``sys.getsizeof`` (the object, plus its
``__dict__`` when it has one) and tracemalloc (everything allocated to make
it, the cyclic collector off). ``dict_twin(obj)`` copies an object's
attributes onto an object of a plain class, the same attributes in a
``__dict__``: the pair shows what the slots save per graph node.

On Python 3.11 and later an object's ``__dict__`` is not made until someone
asks for it (from 3.13 its values live inside the object itself): ``traced`` is then
smaller than ``traced_with_dict``, which counts the dictionary made on demand
(by ``vars(obj)``, ``obj.__dict__``, a debugger or an instrument).
"""
import sys
import tracemalloc
from dataclasses import dataclass

from dezero_mini.memory.probes import collector
from dezero_mini.memory.refgraph import _attributes
from dezero_mini.validation import expect_callable, whole_number


@dataclass(frozen=True)
class Footprint:
    """Bytes per object: ``getsizeof`` (object + ``__dict__``), ``traced``
    (tracemalloc, dict not asked for) and ``traced_with_dict`` (after
    ``obj.__dict__`` was read once; equal to ``traced`` without a dict)."""

    getsizeof: int
    traced: float
    traced_with_dict: float
    has_dict: bool


def _traced_per_object(make, n):
    with collector(False):
        was_tracing = tracemalloc.is_tracing()
        if not was_tracing:
            tracemalloc.start()
        try:
            before = tracemalloc.get_traced_memory()[0]
            kept = [make() for _ in range(n)]
            per_object = (tracemalloc.get_traced_memory()[0] - before) / n
        finally:
            if not was_tracing:
                tracemalloc.stop()
        del kept
    return per_object


def object_footprint(make, n=2000):
    """The ``Footprint`` of the objects that ``make()`` returns (``n`` of them
    are made and kept at once, so that the allocator's per-object cost shows)."""
    expect_callable(make, "object_footprint", "make", "a function that makes one object")
    whole_number(n, "object_footprint", "n", at_least=1)
    sample = make()
    has_dict = hasattr(sample, "__dict__")
    size = sys.getsizeof(sample) + (sys.getsizeof(sample.__dict__) if has_dict else 0)

    def make_with_dict():
        obj = make()
        getattr(obj, "__dict__", None)  # made on demand (Python 3.11+)
        return obj

    return Footprint(getsizeof=size, traced=_traced_per_object(make, n),
                     traced_with_dict=_traced_per_object(make_with_dict, n), has_dict=has_dict)


_twin_classes = {}


def dict_twin(obj):
    """A new object of a plain class (named after ``obj``'s class, made once
    per class) holding the same attribute values as ``obj``, in a ``__dict__``."""
    cls = type(obj)
    if cls not in _twin_classes:
        _twin_classes[cls] = type(f"{cls.__name__}WithDict", (), {})
    twin = _twin_classes[cls]()
    for name, value in _attributes(obj):
        setattr(twin, name, value)
    return twin
