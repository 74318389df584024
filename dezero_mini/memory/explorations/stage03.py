"""Lesson 03: weak outputs, no cycle, flat memory with the collector off."""
from dezero_mini.memory.explore import Choice, Exploration, Slider, Toggle

EXPLORATION = Exploration(
    stage=3,
    controls={
        "stage": Choice("stage", (2, 3, 4), 3),
        "compare": Toggle("with the stage before", True),
        "batches": Slider("batches", 10, 200, 30, step=10),
        "batch_size": Choice("batch size", (32, 64, 128, 256, 512), 256),
        "gc_enabled": Toggle("collector on"),
        "let_go": Toggle("graph: del loss", True),
    },
    plot="training",
)
