"""The interactive cell of each lesson, as data: ``stageNN.py`` defines
``EXPLORATION``, an ``explore.Exploration`` (what the reader may change, what
is plotted, which graph is drawn). ``explore(N)`` finds it here; a new stage
gets its cell by adding its module and one cell ``explore(N)`` in its lesson,
right after the lesson's memory plot (tests/test_explore.py asks for both).

A stage whose figure is not one of ``explore.PLOTS`` names its own
instrument, for example::

    from dezero_mini.memory.explore import Choice, Exploration, Slider
    from dezero_mini.memory.planning import plot_planned_peak  # (a name made up for the example)

    EXPLORATION = Exploration(
        stage=9,
        controls={"stage": Choice("stage", (8, 9), 9),
                  "depth": Slider("layers", 2, 32, 8, step=2)},
        plot=lambda values: plot_planned_peak(depth=values["depth"]),
        graph=None,  # or small_graph, or a function of the values that returns a ReferenceGraph
    )
"""
