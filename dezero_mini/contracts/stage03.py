"""Stage 03, weakref_outputs: no cycle, so a graph dies the moment the user lets go."""
import numpy as np

from dezero_mini.contracts import Measurement, Stage
from dezero_mini.contracts.bench import KIB, bench

STAGE = Stage(
    number=3,
    name="weakref_outputs",
    title="weakref outputs",
    idea=("Function.outputs hold weak references: there is no cycle left, so reference "
          "counting frees a graph the moment the user lets go of it."),
    change=("Break the Variable<->Function cycle: keep the strong reference that "
            "backward needs to walk the graph, and let the other direction no longer "
            "keep its object alive (Python's weakref module)."),
)


@STAGE.contract(reads_record=True, hint="""
    When a batch is done and the user has let go of its loss, reference counting
    alone must free the whole graph: nothing may keep a Variable or Function of a
    finished batch, neither a reference cycle nor anything global.""")
def live_objects_constant(module):
    """With the collector off, live Variables and Functions are the same after every batch."""
    record = bench(module).record
    live, tracked = record.live_objects, record.tracked_objects
    values = np.unique(live)
    measured = (f"{int(live[0])} after every batch" if len(values) == 1
                else f"{int(live[0])} after the first, {int(live[-1])} after the last")
    # The same question of every object that the collector tracks, whatever its
    # class: a graph made of classes other than Variable and Function (twins of
    # them, say) is not counted above, and still stays alive.
    if np.any(tracked != tracked[0]):
        measured += (f"; but the objects that the collector tracks (of any class) grew by "
                     f"{int(tracked[-1] - tracked[0])} from the first batch to the last")
    return Measurement(
        passed=bool(np.all(live == live[0]) and np.all(tracked == tracked[0])),
        expected=f"as many live objects after each of {len(live)} batches as after the first",
        measured=measured)


@STAGE.contract(reads_record=True, hint="""
    The arrays of finished batches are still alive: something keeps each graph. Look
    at which references between a Function and its outputs are strong, and which of
    them backward really needs.""")
def traced_bytes_flat(module):
    """With the collector off, traced memory grows less than 1 KiB per batch."""
    slope = bench(module).record.slope("traced_current")
    return Measurement(passed=abs(slope) < KIB, expected="|slope| < 1.0 KiB per batch",
                       measured=f"{slope / KIB:.1f} KiB per batch")


@STAGE.contract(hint="""
    The cyclic collector still finds Variables or Functions to free: the graph has a
    reference cycle. Of the two directions of the Variable<->Function link, which one
    must be strong for backward to work?""")
def collector_finds_nothing(module):
    """After 20 batches with the collector off, it finds no framework object to free."""
    found, others = bench(module).found_by_collector()
    measured = f"{found}"
    if others:  # a cycle of the file's objects of other classes is a cycle all the same
        kinds = ", ".join(f"{name}: {count}" for name, count in
                          sorted(others.items(), key=lambda item: -item[1])[:4])
        measured += f"; and it found {sum(others.values())} objects ({kinds})"
    return Measurement(passed=found == 0 and not others,
                       expected="0 Variables and Functions, nor any other object",
                       measured=measured)
