"""Grading with the stage contracts: points for a class, not only for one learner.

* ``files``: results written whole or not at all, to places checked before
  the long run starts;
* ``gradescope``: Gradescope's ``results.json`` from a check report, and the
  autograder's entry point (``python -m dezero_mini.grading.gradescope``);
* ``batch``: ``grade``, many submissions in parallel into one CSV;
* ``container``: ``grade --isolation container``, each check in a Podman or
  Docker container of its own;
* ``learner_progress``: ``progress``, a learner's own stage files, stage by stage.

Each takes its contracts and points from ``dezero_mini.contracts`` (through
``check``), never from a list of its own.
"""
