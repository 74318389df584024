"""Lesson 08: Functions keep only what their backward reads."""
from dezero_mini.memory.explore import Choice, Exploration, Toggle

EXPLORATION = Exploration(
    stage=8,
    controls={
        "stage": Choice("stage", (7, 8), 8),
        "compare": Toggle("with the stage before", True),
        "batch_size": Choice("batch size", (32, 64, 128, 256, 512), 256),
        "backward": Toggle("graph: after backward"),
    },
    plot="timeline",
)
