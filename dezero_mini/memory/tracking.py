"""Know every framework object as it is born, and mark the iterations of a loop.

The leak finder must tell the graph of the batch being trained (alive, and
rightly so) from the graphs of earlier batches that something still holds.
That needs two facts that the objects themselves do not carry: when each
object was made, and where one iteration of the user's loop ends. This
module provides both, at a cost paid only while someone is looking:

* every Variable and Function made while a :class:`Tracker` is active gets a
  serial number (its birth order) and a weak reference with a callback, so
  the number alive is ``len(tracker.live)``, O(1), without scanning the heap;
* a *mark* records the serial number and the live count at the end of an
  iteration: when each ``backward()`` call returns (the one call that every
  training iteration makes once), or each time a caller says so.

The hooks are attributes set on the framework's classes: an ``__init__``
that reports each new instance, and a ``backward`` that marks when it
returns. They are shared by every active tracker and removed when the last one
stops. Classes defined later (a step module that the learner's script
imports) are caught with a wrapper around ``builtins.__build_class__``,
which only runs when a ``class`` statement runs, never per operation.
"""
import builtins
import functools
import sys
import weakref

#: The trackers receiving births and marks, in the order they started.
ACTIVE = []
_PATCHED = {}  # class -> {attribute: the value it had in the class's own __dict__, or _ABSENT}
_ABSENT = object()
_KINDS = {"Variable": "variable", "Function": "function"}
_original_build_class = None


def framework_classes_in_use():
    """The (Variable, Function) classes of every framework module imported:
    ``dezero_mini`` and any stage module of the course. Read from the module
    dicts (never through ``getattr``, which a module could answer by
    importing something)."""
    found = []
    for module in list(sys.modules.values()):
        namespace = getattr(module, "__dict__", None)
        if not isinstance(namespace, dict):
            continue
        variable, function = namespace.get("Variable"), namespace.get("Function")
        if _looks_like_framework(variable) and _looks_like_framework(function):
            for cls in (variable, function):
                if cls not in found:
                    found.append(cls)
    return found


def _looks_like_framework(cls):
    """A class named Variable or Function with a ``backward`` method (not,
    say, tkinter's Variable)."""
    return isinstance(cls, type) and callable(getattr(cls, "backward", None))


class _Birth(weakref.ref):
    """A weak reference to a tracked object, with its id and birth number."""

    __slots__ = ("key", "serial")


class Tracker:
    """Serial numbers of the framework objects born while active, and marks.

    ``live``: {id: weak reference} of the tracked objects still alive.
    ``marks``: the serial number at each mark; ``counts``: the live count at
    each mark. ``on_mark(tracker)`` is called after each mark.
    """

    def __init__(self, *, mark_on_backward=True, on_mark=None):
        self.live = {}
        self.serial = 0
        self.marks = []
        self.counts = []
        self.mark_on_backward = mark_on_backward
        self.on_mark = on_mark
        self._forget = self._died  # one bound method for every weak reference

    # --- events --------------------------------------------------------------------
    def born(self, obj):
        known = self.live.get(id(obj))
        if known is not None and known() is obj:
            return  # reported again by a super().__init__ chain
        self.serial += 1
        try:
            ref = _Birth(obj, self._forget)
        except TypeError:  # a class without weak references cannot be tracked
            return
        ref.key, ref.serial = id(obj), self.serial
        self.live[ref.key] = ref

    def _died(self, ref):
        if self.live.get(ref.key) is ref:
            del self.live[ref.key]

    def mark(self):
        """End of an iteration: remember where the serial numbers stand."""
        self.marks.append(self.serial)
        self.counts.append(len(self.live))
        if self.on_mark is not None:
            self.on_mark(self)

    # --- queries -------------------------------------------------------------------
    def alive_born_between(self, after, up_to):
        """The tracked objects still alive whose serial number is in
        ``(after, up_to]``, oldest first (strong references: drop the list
        when done)."""
        refs = sorted((r for r in list(self.live.values()) if after < r.serial <= up_to),
                      key=lambda r: r.serial)
        return [obj for obj in (r() for r in refs) if obj is not None]

    def serial_of(self, obj):
        ref = self.live.get(id(obj))
        return ref.serial if ref is not None and ref() is obj else 0

    # --- switching on and off --------------------------------------------------------
    def start(self, classes=None):
        """Start receiving births (and backward marks) from ``classes`` (by
        default every framework class in use, and those defined later)."""
        for cls in classes if classes is not None else framework_classes_in_use():
            _patch(cls)
        _watch_new_classes()
        ACTIVE.append(self)
        return self

    def stop(self):
        if self in ACTIVE:
            ACTIVE.remove(self)
        if not ACTIVE:
            _unpatch_all()


# --- The hooks ----------------------------------------------------------------------
# Births are reported by ``__init__``, not ``__new__``: CPython cannot put a
# class's ``__new__`` slot back once it has been replaced (the class keeps a
# slot that passes the constructor's arguments on to ``object.__new__``, which
# then refuses them), while an ``__init__`` set and removed again leaves the
# class exactly as it was. Every class of the tree that defines its own
# ``__init__`` gets its own wrapper (a Function subclass such as ``Pow(c)``
# need not call ``super().__init__``); an object reported twice (through a
# ``super().__init__`` chain) is counted once.
def _kind_of_class(cls):
    for base in cls.__mro__:
        if base.__name__ in _KINDS:
            return _KINDS[base.__name__]
    return None


def _root_of(cls):
    """The class named Variable or Function highest in cls's hierarchy."""
    return [base for base in cls.__mro__ if base.__name__ in _KINDS][-1]


def subclasses(cls):
    """Every class that derives from ``cls``, however indirectly (not
    ``cls`` itself), each once, read anew (a script may define one)."""
    found, stack = [], [cls]
    while stack:
        for sub in stack.pop().__subclasses__():
            if sub not in found:
                found.append(sub)
                stack.append(sub)
    return found


def _report_births(original):
    @functools.wraps(original)
    def __init__(self, *args, **kwargs):
        original(self, *args, **kwargs)
        for tracker in ACTIVE:
            tracker.born(self)
    return __init__


def _patch(cls):
    """Give the tree of cls (a Variable or Function class) the hooks, once."""
    if _kind_of_class(cls) is None:
        return
    root = _root_of(cls)
    for klass in (root, *subclasses(root)):
        _patch_one(klass, root)


def _patch_one(klass, root):
    if klass in _PATCHED:
        return
    own_init = klass.__dict__.get("__init__", _ABSENT)
    if own_init is _ABSENT and klass is not root:
        return  # it inherits a wrapped __init__
    saved = {"__init__": own_init}
    if own_init is _ABSENT:
        inherited = super(root, root).__init__
        if inherited is object.__init__:
            def inherited(self, *args, **kwargs):  # noqa: F811 (object.__init__ takes nothing)
                object.__init__(self)
        own_init = inherited
    klass.__init__ = _report_births(own_init)
    if klass is root and _KINDS[root.__name__] == "variable" and "backward" in klass.__dict__:
        original_backward = klass.__dict__["backward"]

        @functools.wraps(original_backward)
        def backward(self, *args, **kwargs):
            result = original_backward(self, *args, **kwargs)
            # After, not before: the gradients that backward makes belong to
            # the same iteration as the graph they were computed from.
            for tracker in ACTIVE:
                if tracker.mark_on_backward:
                    tracker.mark()
            return result

        saved["backward"] = original_backward
        klass.backward = backward
    _PATCHED[klass] = saved


def _unpatch_all():
    global _original_build_class
    for cls, saved in _PATCHED.items():
        for name, value in saved.items():
            if value is _ABSENT:
                delattr(cls, name)
            else:
                setattr(cls, name, value)
    _PATCHED.clear()
    if _original_build_class is not None:
        builtins.__build_class__ = _original_build_class
        _original_build_class = None


def _watch_new_classes():
    """Patch the Variable and Function classes (and their subclasses) that
    are defined from now on."""
    global _original_build_class
    if _original_build_class is not None:
        return
    original = _original_build_class = builtins.__build_class__

    def __build_class__(func, name, *bases, **kwargs):
        cls = original(func, name, *bases, **kwargs)
        if ACTIVE and isinstance(cls, type) and _kind_of_class(cls) is not None:
            root = _root_of(cls)
            if root in _PATCHED:
                _patch_one(cls, root)
            elif _looks_like_framework(root):
                _patch(root)
        return cls

    builtins.__build_class__ = __build_class__
