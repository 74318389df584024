"""Class membership that a learner's classes cannot answer for themselves.

``isinstance(obj, Variable)`` asks ``Variable``'s metaclass
(``__instancecheck__``) and falls back on ``obj.__class__``, which a property
can fake; ``type(obj).__mro__`` is whatever the metaclass's ``mro()``
returned. A checker that counts a learner's objects through them counts what
the learner's code says. Here only ``type(obj)`` (the object's real type) and
the bases each class was made with (read through ``type``'s own descriptor,
which no metaclass overrides) are used, and classes are compared by identity.
"""

_TRUE_BASES = type.__dict__["__bases__"].__get__
_SUBCLASSES = type.__dict__["__subclasses__"]


def is_class(value):
    """Whether ``value`` really is a class (its real type derives from ``type``)."""
    return derives_from(type(value), (type,))


def derives_from(cls, bases):
    """Whether the class ``cls`` is one of ``bases`` (a tuple of classes) or
    derives from one, following the bases it was really made with."""
    wanted = {id(base) for base in bases}
    seen, stack = set(), [cls]
    while stack:
        current = stack.pop()
        if id(current) in wanted:
            return True
        if id(current) not in seen:
            seen.add(id(current))
            stack.extend(_TRUE_BASES(current))
    return False


def is_instance(obj, classes):
    """``isinstance(obj, classes)`` (a class or a tuple of them) without
    asking ``obj`` or the classes' metaclasses."""
    return derives_from(type(obj), classes if type(classes) is tuple else (classes,))


def subclass_ids(cls):
    """The ids of ``cls`` and of every class that really derives from it
    (Python's own list of each class's subclasses, kept from the bases each
    was made with): ``id(type(obj)) in subclass_ids(cls)`` is
    ``isinstance`` without asking anyone, as fast. TypeError when ``cls`` is
    not really a class (a name bound to an object that only claims to be one)."""
    if not is_class(cls):
        raise TypeError(f"{cls!r} is not a class: the framework's names must be classes")
    found, stack = set(), [cls]
    while stack:
        current = stack.pop()
        if id(current) not in found:
            found.add(id(current))
            stack.extend(_SUBCLASSES(current))
    return found
