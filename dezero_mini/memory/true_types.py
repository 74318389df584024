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


class KindCache:
    """Which of a few classes each real type of a sweep of objects derives
    from, worked out once per type: ``kind(obj)`` is the index in
    ``classes`` of the first that ``type(obj)`` derives from, or -1.
    Classes that are not really classes raise TypeError (a name bound to
    an object that only claims to be one)."""

    def __init__(self, classes):
        for cls in classes:
            if not is_class(cls):
                raise TypeError(f"{cls!r} is not a class: the framework's names must be classes")
        self.classes, self._kinds = tuple(classes), {}

    def kind(self, obj):
        cls = type(obj)
        found = self._kinds.get(id(cls))
        if found is None:
            found = next((index for index, base in enumerate(self.classes)
                          if derives_from(cls, (base,))), -1)
            self._kinds[id(cls)] = found
        return found
