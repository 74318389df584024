"""Lesson 02: cycles grow with the collector off, a sawtooth with it on."""
from dezero_mini.memory.explore import Choice, Exploration, Slider, Toggle

EXPLORATION = Exploration(
    stage=2,
    controls={
        "stage": Choice("stage", (1, 2, 3), 2),
        "batches": Slider("batches", 10, 200, 50, step=10),
        "batch_size": Choice("batch size", (32, 64, 128, 256, 512), 256),
        "gc_enabled": Toggle("collector on", True),
        "let_go": Toggle("graph: del loss", True),
    },
    plot="training",
)
