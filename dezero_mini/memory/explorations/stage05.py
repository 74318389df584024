"""Lesson 05: an inference pass with the graph and under no_grad()."""
from dezero_mini.memory.explore import Choice, Exploration, Slider, Toggle

EXPLORATION = Exploration(
    stage=5,
    controls={
        "stage": Choice("stage", (4, 5, 6, 7, 8), 5),
        "depth": Slider("layers", 2, 16, 8, step=2),
        "batch_size": Choice("batch size", (64, 128, 256, 512), 256),
        "no_grad": Toggle("graph: under no_grad()", True),
    },
    plot="inference",
)
