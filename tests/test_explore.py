"""The interactive cell of each lesson (dezero_mini.memory.explore).

Every lesson of a stage has one cell ``explore(N)``, driven by the data in
``dezero_mini/memory/explorations/stageNN.py``. Headless (the notebooks run by
the tests and the book) it shows its static figure and says how to play; in
Jupyter with ipywidgets, every change of a control redraws. The notebooks
themselves are executed by tests/test_notebooks.py; here are the parts that
run without a kernel.
"""
import re
import time
from pathlib import Path

import nbformat
import pytest

from dezero_mini.memory import explore as ex
from dezero_mini.memory.refgraph import ReferenceGraph

ROOT = Path(__file__).resolve().parents[1]
LESSONS = sorted(p for p in (ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb") if int(p.name[:2]) >= 1)
_EXPLORE_CALL = re.compile(r"^explore\((\d+)\b", re.MULTILINE)


def _explore_cells(path):
    nb = nbformat.read(path, as_version=4)
    return [(i, int(m.group(1))) for i, cell in enumerate(nb.cells) if cell.cell_type == "code"
            for m in [_EXPLORE_CALL.search(cell.source)] if m]


@pytest.mark.parametrize("path", LESSONS, ids=[p.name for p in LESSONS])
def test_each_lesson_has_one_explore_cell_for_its_stage(path):
    cells = _explore_cells(path)
    stage = int(path.name[:2])
    assert [n for _, n in cells] == [stage], (
        f"{path.name}: expected one cell calling explore({stage}) after the memory plot, found {cells}")
    assert stage in ex.explorations(), f"add dezero_mini/memory/explorations/stage{stage:02d}.py"


def test_every_exploration_is_sound():
    from dezero_mini.memory.stages import STAGES

    numbers = {n for n, _ in STAGES}
    for stage, exploration in ex.explorations().items():
        values = exploration.defaults()
        assert "stage" in values, f"stage {stage}: no stage to draw"
        for name, control in exploration.controls.items():
            if name == "stage":
                assert set(control.options) <= numbers | {"dezero_mini"}, (stage, control.options)
        assert exploration.what(), stage


def test_a_default_outside_its_options_is_refused():
    with pytest.raises(ValueError, match="default 5 is not one of"):
        ex.Choice("stage", (1, 2), 5)
    with pytest.raises(ValueError, match=r"not in \[10, 20\]"):
        ex.Slider("batches", 10, 20, 30)
    with pytest.raises(ValueError, match="plot 'histogram' is not one of"):
        ex.Exploration(stage=1, controls={}, plot="histogram")


def test_an_unknown_control_is_named():
    with pytest.raises(TypeError, match=r"no control named \['epochs'\]"):
        ex.explore(3, interactive=False, epochs=3)


def test_static_where_nobody_can_turn_a_knob(monkeypatch):
    monkeypatch.setenv(ex.STATIC_ENV, "1")
    assert ex._interactive_reason() == "static"
    monkeypatch.delenv(ex.STATIC_ENV)
    assert ex._interactive_reason() == "no kernel"  # pytest has no IPython kernel


def test_the_static_cell_shows_figure_graph_and_how_to_play(monkeypatch):
    import IPython.display
    import matplotlib.figure

    shown = []
    monkeypatch.setattr(IPython.display, "display", lambda obj: shown.append(obj))
    ex.explore(3, interactive=False, batches=10, batch_size=32)
    kinds = [type(obj) for obj in shown]
    assert kinds == [matplotlib.figure.Figure, ReferenceGraph, IPython.display.Markdown], kinds
    figure, graph, line = shown
    assert "10 batches of 32 samples, collector off" in figure._suptitle.get_text()
    labels = [line.get_label() for line in figure.axes[0].get_lines()]
    assert any("02" in label for label in labels) and any("03" in label for label in labels), labels
    assert "after del loss" in graph.title
    assert "make lab" in line.data and "batches" in line.data


def test_every_change_of_a_control_redraws_with_the_new_value(monkeypatch):
    pytest.importorskip("ipywidgets")
    drawn = []
    monkeypatch.setattr(ex, "_show", lambda exploration, values, display: drawn.append(dict(values)))
    box = ex.explorer(4)
    assert drawn and drawn[-1]["retain_grad"] is False and drawn[-1]["backward"] is True
    box.controls["retain_grad"].value = True
    assert drawn[-1]["retain_grad"] is True
    box.controls["stage"].value = 6
    assert drawn[-1]["stage"] == 6 and drawn[-1]["retain_grad"] is True
    assert len(drawn) == 3  # once at the start, once per change


def test_in_a_live_kernel_the_cell_is_a_widget():
    """A kernel where someone could turn the knobs (DEZERO_MINI_STATIC unset,
    ipywidgets installed) gets the widgets, not the static figure.

    The cell runs through jupyter_client itself, reading the kernel's output
    messages until it is idle: nbclient, which runs the notebooks, sometimes
    waits out its whole cell timeout (300 s) on a cell that opens widgets
    (jupyter/nbclient#312), although the kernel has long answered."""
    pytest.importorskip("ipywidgets")
    import queue

    import run_notebooks
    from jupyter_client import KernelManager

    manager = KernelManager(kernel_name=run_notebooks.KERNEL_NAME,
                            kernel_spec_manager=run_notebooks._ThisInterpreterKernels())
    manager.start_kernel()
    client = manager.client()
    try:
        client.start_channels()
        client.wait_for_ready(timeout=300)  # (only ends a hang: a busy machine starts it slowly)
        request = client.execute(f"import os\nos.environ.pop({ex.STATIC_ENV!r}, None)\n"
                                 "from dezero_mini.memory.explore import explore\nexplore(8)")
        kinds, inside, captured, deadline = [], [], False, time.monotonic() + 120
        while True:
            try:
                message = client.get_iopub_msg(timeout=max(0.1, deadline - time.monotonic()))
            except queue.Empty:
                raise AssertionError(f"the cell did not finish in 120 s; it showed {kinds}")
            if message["parent_header"].get("msg_id") != request:
                continue
            content = message["content"]
            if message["msg_type"] == "error":
                raise AssertionError("\n".join(content["traceback"]))
            state = content.get("data", {}).get("state", {})
            if message["msg_type"] in ("comm_open", "comm_msg") and "msg_id" in state:
                # An Output widget takes what is shown while its msg_id is this
                # request's (a front end, and nbclient, put it into the widget).
                captured = state["msg_id"] == request
            elif message["msg_type"] in ("display_data", "execute_result"):
                (inside if captured else kinds).extend(content["data"])
            if message["msg_type"] == "status" and content["execution_state"] == "idle":
                break
    finally:
        client.stop_channels()
        manager.shutdown_kernel(now=True)
    assert "application/vnd.jupyter.widget-view+json" in kinds, kinds
    assert "image/png" not in kinds and "text/markdown" not in kinds, kinds
    assert "image/png" in inside, inside  # the figure, drawn inside the widgets


def test_lesson_09_draws_the_chosen_plan_bold_and_where_it_puts_the_small_graph():
    from dezero_mini.memory.plans import PLANNERS, block_rows, plot_explored_plan, small_network
    from dezero_mini.memory.stages import load_stage

    values = {**ex.get_exploration(9).defaults(), "plan": "sharing only", "step": "inference"}
    top, bottom = plot_explored_plan(values).axes
    widths = {line.get_label().split(":")[0]: line.get_linewidth() for line in top.get_lines()}
    assert max(widths, key=widths.get) == "sharing only", widths
    assert "inference" in top.get_title()
    step = load_stage(9)
    plan = step.plan_memory(small_network(step).trace(step, False), **dict(PLANNERS)["sharing only"])
    assert len(bottom.get_yticks()) == block_rows(plan), bottom.get_title()


def test_lesson_10_graph_checkpoints_every_segment_but_the_last():
    from dezero_mini.memory.depth import checkpointed_graph, policy_segments

    def checkpoints(**values):
        graph = checkpointed_graph({"stage": 10, "graph_layers": 6, "policy": "every k layers",
                                    "every": 2, **values})
        return sum(node.title == "Checkpoint" for node in graph.nodes)

    assert checkpoints() == 2  # 3 segments of 2 layers, the last one plain
    assert checkpoints(every=6) == 0  # one segment: the last, never checkpointed
    assert checkpoints(policy="sqrt(n) segments") == 1  # round(sqrt(6)) = 2 segments
    assert checkpoints(policy="none") == 0
    assert checkpoints(backward=True) == 0  # backward frees the graph, Checkpoints too
    assert [policy_segments("every k layers", 128, k) for k in (1, 8, 100, 500)] == [128, 16, 2, 1]
    with pytest.raises(ValueError, match="policy must be one of"):
        policy_segments("every layer", 128)
