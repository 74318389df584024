"""Stage-03 submissions that the grading tests share, written from ``steps/`` at test time.

None is a verbatim copy of a file of ``steps/`` (a checker may refuse those):
the passing one applies stage 03's change to stage 02's file in its own way
(``weakref.proxy`` instead of ``weakref.ref``), the failing one is stage 02's
file with a local variable renamed, the broken one does not parse.
"""
from test_checker import patched, step_text

#: What ``check 3`` gives each with the default weights (2 points per contract
#: new in stage 03, 1 per inherited one); the tests assert these.
STAGE = 3
PASSING_POINTS, FAILING_POINTS, MAX_POINTS = 9, 3, 9


def passing():
    """Stage 02 made stage 03: its Functions hold their outputs through weak proxies."""
    return patched(step_text(2),
                   (r"^import itertools\n", "import itertools\nimport weakref\n", 1),
                   (r"^( *)self\.outputs = outputs .*\n",
                    r"\1self.outputs = [weakref.proxy(output) for output in outputs]  # no cycle\n",
                    1))


def failing():
    """Stage 02 as it is (the cycles remain), a local variable renamed."""
    return patched(step_text(2), (r"\bgys\b", "output_grads", 3))


def broken():
    return step_text(2).replace("def backward(self", "def backward(self,,", 1)
