"""Lesson 10: the peak of a deep chain with no checkpoint, every k layers, or sqrt(n) segments."""
from dezero_mini.memory.depth import POLICIES, checkpointed_graph, plot_explored_checkpoints
from dezero_mini.memory.explore import Choice, Exploration, Slider, Toggle

EXPLORATION = Exploration(
    stage=10,
    controls={
        "policy": Choice("checkpoints", POLICIES, "sqrt(n) segments"),
        "every": Slider("k (every k layers)", 1, 64, 8),
        "depth": Choice("layers", (16, 32, 64, 128, 256, 512, 1024), 128),
        "graph_layers": Slider("graph: layers", 2, 8, 4),
        "backward": Toggle("graph: after backward"),
    },
    fixed={"stage": 10},
    plot=plot_explored_checkpoints,
    graph=checkpointed_graph,
)
