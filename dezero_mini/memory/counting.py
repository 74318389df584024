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
import gc


def framework_classes(module):
    """The two classes whose instances make a graph: ``(Variable, Function)``."""
    return module.Variable, module.Function


def count_live_objects(module):
    """How many Variables and Functions of ``module`` are alive right now.

    Returns ``{"variables": int, "functions": int, "total": int}``. Instances
    of subclasses count too (``dezero_mini.Parameter`` is a Variable,
    ``Add`` a Function). Objects that are unreachable but not yet collected
    are alive: that is the point of measuring with the collector disabled.
    """
    variable_cls, function_cls = framework_classes(module)
    objects = gc.get_objects()
    variables = functions = 0
    for obj in objects:
        if isinstance(obj, variable_cls):
            variables += 1
        elif isinstance(obj, function_cls):
            functions += 1
    del objects  # the list holds a reference to every object in the process
    return {"variables": variables, "functions": functions, "total": variables + functions}
