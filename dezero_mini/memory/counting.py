"""Count the framework's objects that are alive: the deterministic signal.

Why Variables and Functions, and not arrays: ``gc.get_objects()`` lists only
the objects that the cyclic garbage collector tracks, i.e. containers that
could take part in a reference cycle. A numpy array holds no references to
Python objects, so numpy does not register it with the collector and it never
appears in that list. Every Variable and Function does (instances of Python
classes are always tracked), and each Variable owns its array, so counting
them counts the graph. The bytes of the arrays are measured separately, with
tracemalloc (numpy reports its buffers to it).

``gc.get_objects()`` works with the collector disabled: disabling only stops
automatic collections, the tracking lists are kept up to date.
"""
import array
import gc
from dezero_mini.validation import expect_stage_module

from dezero_mini.memory.true_types import subclass_ids


def framework_classes(module):
    """The two classes whose instances make a graph: ``(Variable, Function)``."""
    expect_stage_module(module, "framework_classes")
    return module.Variable, module.Function


def count_live_objects(module):
    """How many Variables and Functions of ``module`` are alive right now.

    Returns ``{"variables": int, "functions": int, "total": int}``. Instances
    of subclasses count too (``dezero_mini.Parameter`` is a Variable,
    ``Add`` a Function). Objects that are unreachable but not yet collected
    are alive: that is the point of measuring with the collector disabled.
    """
    expect_stage_module(module, "count_live_objects")
    variables, functions = _count_in(gc.get_objects(), framework_classes(module))
    return _figures(variables, functions)


def _figures(variables, functions):
    return {"variables": int(variables), "functions": int(functions), "total": int(variables + functions)}


def _count_in(objects, classes):
    """(Variables, Functions) among ``objects``; ``classes`` is ``framework_classes(module)``.

    By each object's real type and its classes' real bases
    (``true_types``): never ``isinstance``, which a learner's metaclass
    answers."""
    variable_ids = subclass_ids(classes[0])
    function_ids = subclass_ids(classes[1]) - variable_ids
    variables = functions = 0
    for obj in objects:
        kind = id(type(obj))
        if kind in variable_ids:
            variables += 1
        elif kind in function_ids:
            functions += 1
    return variables, functions


def _collections():
    """How many collections the collector has run in this process, of any generation."""
    return sum(generation["collections"] for generation in gc.get_stats())


def _tracked_in_old_generations():
    """How many objects the collector tracks in its generations 1 and 2 (each
    list that ``gc.get_objects`` builds is freed before the next is made)."""
    return len(gc.get_objects(1)) + len(gc.get_objects(2))


class LiveObjectCounter:
    """``count_live_objects(module)``, called again and again (once per batch
    of a training record), with the same figures at a fraction of the cost.

    A full count visits every object the collector tracks: a few hundred
    thousand in a test process, tens of milliseconds per count. But between
    two collections, objects do not move between generations: what was made
    since the last collection is in the youngest one, and the older ones can
    only lose members (an object dies; ``gc.freeze`` moves them all to the
    permanent generation, which ``gc.get_objects`` does not list either);
    only ``gc.unfreeze`` adds to them. So while no collection has run, the
    frozen count is unchanged and the older generations hold as many objects
    as when their Variables and Functions were counted, those are still the
    same objects: only the youngest generation is counted again. Otherwise
    (a collection ran, an old object died, ...) everything is counted, as
    ``count_live_objects`` does; and everything is always counted where the
    collector's generations do not add up to what ``gc.get_objects()`` lists
    (an interpreter without generations).

    Its state is an array of integers made in the constructor: counting allocates
    nothing that stays alive, so tracemalloc's figures of a batch measured
    after the constructor do not see the counter. ``full_counts`` says how
    many times it had to count everything.
    """

    _OLD_VARIABLES, _OLD_FUNCTIONS, _OLD_TRACKED, _COLLECTIONS, _FROZEN, _FULL_COUNTS = range(6)
    #: Counts begun again after a collection ran in the middle, before counting everything at once.
    _ATTEMPTS = 3

    def __init__(self, module):
        self.classes = framework_classes(module)
        self._state = array.array("q", bytes(6 * 8))
        self.generations_add_up = self._generations_add_up()
        if self.generations_add_up:
            self._count_old()

    @staticmethod
    def _generations_add_up():
        try:
            everything = len(gc.get_objects())
            return everything == len(gc.get_objects(0)) + _tracked_in_old_generations()
        except (TypeError, ValueError):  # gc.get_objects takes no generation here
            return False

    @property
    def full_counts(self):
        return int(self._state[self._FULL_COUNTS])

    def _count_old(self):
        state = self._state
        state[self._FULL_COUNTS] += 1
        state[self._COLLECTIONS] = _collections()
        state[self._FROZEN] = gc.get_freeze_count()
        variables, functions = _count_in(gc.get_objects(1), self.classes)
        more_variables, more_functions = _count_in(gc.get_objects(2), self.classes)
        state[self._OLD_VARIABLES] = variables + more_variables
        state[self._OLD_FUNCTIONS] = functions + more_functions
        state[self._OLD_TRACKED] = _tracked_in_old_generations()

    def _old_unchanged(self):
        state = self._state
        return (state[self._COLLECTIONS] == _collections() and state[self._FROZEN] == gc.get_freeze_count()
                and state[self._OLD_TRACKED] == _tracked_in_old_generations())

    def __call__(self):
        """The figures of ``count_live_objects(module)`` now."""
        if self.generations_add_up:
            for _ in range(self._ATTEMPTS):
                if not self._old_unchanged():
                    self._count_old()
                variables, functions = _count_in(gc.get_objects(0), self.classes)
                # A collection that ran meanwhile (the collector on: making a list can start
                # one) moved young objects out of the list just counted: count again.
                if self._state[self._COLLECTIONS] == _collections():
                    state = self._state
                    return _figures(state[self._OLD_VARIABLES] + variables, state[self._OLD_FUNCTIONS] + functions)
        # No generations, or collections all along (the collector on, with a low threshold).
        self._state[self._FULL_COUNTS] += 1
        return _figures(*_count_in(gc.get_objects(), self.classes))
