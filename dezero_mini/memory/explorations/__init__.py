"""The interactive cell of each lesson, as data: ``stageNN.py`` defines
``EXPLORATION``, an ``explore.Exploration`` (what the reader may change, what
is plotted, which graph is drawn). ``explore(N)`` finds it here; a new stage
gets its cell by adding its module, and nothing else."""
