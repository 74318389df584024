"""Lesson 07: the loops that keep graphs alive, leaking or fixed."""
from dezero_mini.memory.explore import Choice, Exploration, Slider, Toggle
from dezero_mini.memory.user_loops import LOOPS

EXPLORATION = Exploration(
    stage=7,
    controls={
        "loop": Choice("loop", tuple(LOOPS), next(iter(LOOPS))),
        "fixed": Toggle("fixed"),
        "batches": Slider("batches", 10, 60, 20, step=5),
        "stage": Choice("stage", (5, 6, 7, 8), 7),
    },
    fixed={"backward": True},
    plot="loop",
)
