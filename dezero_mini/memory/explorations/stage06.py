"""Lesson 06: backward frees the graph as it goes, unless retain_graph=True."""
from dezero_mini.memory.explore import Choice, Exploration, Toggle

EXPLORATION = Exploration(
    stage=6,
    controls={
        "stage": Choice("stage", (5, 6, 7, 8), 6),
        "compare": Toggle("with the stage before", True),
        "retain_graph": Toggle("retain_graph=True"),
        "batch_size": Choice("batch size", (32, 64, 128, 256, 512), 256),
    },
    fixed={"backward": True},
    plot="timeline",
)
