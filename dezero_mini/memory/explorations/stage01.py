"""Lesson 01: the registry keeps every batch, with the collector off or on."""
from dezero_mini.memory.explore import Choice, Exploration, Slider, Toggle

EXPLORATION = Exploration(
    stage=1,
    controls={
        "stage": Choice("stage", (1, 2, 3), 1),
        "batches": Slider("batches", 10, 200, 30, step=10),
        "batch_size": Choice("batch size", (32, 64, 128, 256, 512), 256),
        "gc_enabled": Toggle("collector on"),
        "let_go": Toggle("graph: del loss", True),
    },
    plot="training",
)
