"""The interactive cell of each lesson, as data: ``stageNN.py`` defines
``EXPLORATION``, an ``explore.Exploration`` (what the reader may change, what
is plotted, which graph is drawn). ``explore(N)`` finds it here; a new stage
gets its cell by adding its module and one cell ``explore(N)`` in its lesson,
right after the lesson's memory plot (tests/test_explore.py asks for both).

A stage whose figure is not one of ``explore.PLOTS`` passes its own, a
function of the values kept in the instrument module its lesson uses
(stage09.py: ``plans.plot_explored_plan``, and ``graph=None`` as its small
graph is drawn in that figure; stage10.py: ``depth.plot_explored_checkpoints``
and ``graph=depth.checkpointed_graph``, a function of the values that
returns a ReferenceGraph). Values that the reader does not change but the
functions read go in ``fixed``, for example ``fixed={"stage": 9}``.
"""
