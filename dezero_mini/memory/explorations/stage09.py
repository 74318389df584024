"""Lesson 09: each plan's storage node by node, and where it puts the buffers."""
from dezero_mini.memory.explore import Choice, Exploration, Slider
from dezero_mini.memory.plans import EXPLORED_NETWORKS, PLANNERS, plot_explored_plan

EXPLORATION = Exploration(
    stage=9,
    controls={
        "plan": Choice("plan", tuple(label for label, _ in PLANNERS), "both"),
        "network": Choice("network", tuple(EXPLORED_NETWORKS), "MLP"),
        "layers": Slider("layers", 1, 100, 2),
        "step": Choice("step", ("training", "inference"), "training"),
        "batch_size": Choice("batch size", (32, 64, 128, 256, 512), 256),
    },
    fixed={"stage": 9},  # the lesson's planner (stage 10 has none; dezero_mini's follows it)
    plot=plot_explored_plan,
    graph=None,  # the small computation's plan is drawn below the timelines, as blocks
)
