"""Lesson 04: the peak within one batch, with and without retain_grad."""
from dezero_mini.memory.explore import Choice, Exploration, Toggle

EXPLORATION = Exploration(
    stage=4,
    controls={
        "stage": Choice("stage", (3, 4, 5, 6), 4),
        "compare": Toggle("with the stage before", True),
        "retain_grad": Toggle("retain_grad=True"),
        "batch_size": Choice("batch size", (32, 64, 128, 256, 512), 256),
    },
    fixed={"backward": True},
    plot="timeline",
)
