"""Draw the README's picture: memory per training batch, stages 01 to 05.

    python tools/make_readme_figure.py            (writes notebooks/figures/memory_stages.png)
    python tools/make_readme_figure.py --batches 100 --out /tmp/stages.png

Each stage trains the standard workload (``dezero_mini.memory.Workload``)
with the cyclic garbage collector disabled, as in the lessons, and the figure
shows two of the course's signals for every stage: live Variables and
Functions, and tracemalloc's current traced memory, after each batch. With
the collector off, stages 01 and 02 give the same growing line, and stages
03 to 05 the same flat one, so the lines are drawn in different styles to
keep the ones underneath visible.

Runs in about 15 seconds. The data is deterministic (seeded), and the PNG is
saved without a software-version stamp, so re-running it on the same
versions of the libraries gives the same picture.
"""
from __future__ import annotations

import argparse
import gc
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # a file, never a window

ROOT = Path(__file__).resolve().parents[1]
try:
    import dezero_mini  # noqa: F401  (installed, as `make` does it)
except ImportError:  # run from a checkout without `pip install -e .`
    sys.path.insert(0, str(ROOT))

import matplotlib.pyplot as plt  # noqa: E402

from dezero_mini.atomic import atomic_write  # noqa: E402
from dezero_mini.memory import STAGES, load_stage, plot_training, record_training  # noqa: E402

DEFAULT_OUT = ROOT / "notebooks" / "figures" / "memory_stages.png"
MAX_BYTES = 200 * 1024  # the README picture must stay small

# One style per stage, in course order: the growing pair (01, 02) and the flat
# triple (03, 04, 05) overlap exactly, so each later line is thinner and dashed.
_STYLES = [
    dict(linewidth=4.0, linestyle="-", alpha=0.55),
    dict(linewidth=1.8, linestyle="--"),
    dict(linewidth=4.0, linestyle="-", alpha=0.55),
    dict(linewidth=1.8, linestyle="--"),
    dict(linewidth=1.4, linestyle=":"),
]


def record_stages(batches: int):
    """One TrainingRecord per stage of steps/ (01..05), collector off."""
    records = []
    for number, _name in STAGES:
        module = load_stage(number)
        print(f"recording stage {number:02d} ({batches} batches) ...", flush=True)
        records.append(record_training(module, batches=batches, gc_enabled=False, rss=False))
        registry = getattr(module, "REGISTRY", None)
        if registry is not None:
            registry.clear()  # stage 01 remembers everything: forget it before the next stage
        gc.collect()
    return records


def draw(records, batches: int):
    fig = plot_training(
        records,
        signals=("live_objects", "traced_current"),
        title=f"Memory after each of {batches} training batches, stages 01-05 "
              "(cyclic garbage collector off)",
    )
    fig.set_size_inches(11, 4.2)
    for ax in fig.axes:
        for line, style in zip(ax.get_lines(), _STYLES):
            line.set(**style)
        top = ax.get_ylim()[1]
        ax.set_ylim(-0.03 * top, top)  # a little below zero: the flat lines stay visible
        ax.legend(fontsize=8, loc="upper left")
    fig.text(0.5, 0.005, "01 and 02 grow alike (registry and cycles, or cycles alone, with no collector); "
             "03, 04 and 05 stay flat on the floor.", ha="center", va="bottom", fontsize=8, color="#444444")
    fig.get_layout_engine().set(rect=(0, 0.04, 1, 0.96))
    return fig


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--batches", type=int, default=200, help="batches per stage (default: %(default)s)")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="PNG to write (default: %(default)s)")
    parser.add_argument("--dpi", type=int, default=100, help="resolution (default: %(default)s)")
    args = parser.parse_args(argv)

    was_enabled = gc.isenabled()
    try:
        records = record_stages(args.batches)
    finally:
        if was_enabled:
            gc.enable()
    fig = draw(records, args.batches)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with atomic_write(args.out) as file:
        fig.savefig(file, format=args.out.suffix.lstrip(".").lower() or "png", dpi=args.dpi, metadata={"Software": None})
    plt.close(fig)
    size = args.out.stat().st_size
    print(f"wrote {args.out} ({size / 1024:.0f} KiB)")
    if size > MAX_BYTES:
        print(f"warning: larger than {MAX_BYTES // 1024} KiB; lower --dpi", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
