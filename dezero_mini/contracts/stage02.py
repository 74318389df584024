"""Stage 02, cycles: the registry is gone; only the reference cycles keep the graphs."""
from dezero_mini.contracts import Measurement, Stage
from dezero_mini.contracts.bench import bench
from dezero_mini.contracts.stage01 import grows_by_a_graph_per_batch

STAGE = Stage(
    number=2,
    name="cycles",
    title="cycles",
    idea=("The global registry is gone; only the Variable<->Function reference cycles "
          "remain. Reference counting cannot free a cycle; the cyclic collector can."),
    change=("Delete the global graph registry: it served a graph compiler that this "
            "framework does not have. Leave the references between Variables and "
            "Functions as they are: the cycles are this stage's subject."),
)


@STAGE.contract(reads_record=True, until=2, hint="""
    Stage 02 removes one leak, not both: with the collector off, the cycles between
    Variables and Functions should still keep every batch's graph alive.""")
def grows_with_collector_off(module):
    """With the collector off, live objects grow by one graph per batch; traced bytes by > 10 KiB."""
    return grows_by_a_graph_per_batch(module)


@STAGE.contract(reads_record=True, until=2, hint="""
    After gc.collect() nothing of the finished batches may be left alive: once the
    cycles are collected, no other reference may reach old Variables and Functions.
    Is something global still remembering every object that was made?""")
def collector_returns_to_floor(module):
    """gc.collect() frees every finished batch's graph and reports them as freed."""
    record, graph = bench(module).record, bench(module).graph_size
    floor = int(record.live_objects[0]) - graph  # before the first batch's graph
    least_freed = graph * (record.batches - 1)
    return Measurement(
        passed=record.final_collected >= least_freed and record.live_after_collect == floor,
        expected=f"{floor} live objects after gc.collect(), which frees >= {least_freed}",
        measured=f"{record.live_after_collect} live, {record.final_collected} freed")


@STAGE.contract(until=2, hint="""
    The cycles are this stage's subject: a Function still holds its outputs and each
    output its creator, so the garbage is cyclic and only the collector finds it.""")
def collector_frees_framework_objects(module):
    """The cyclic collector has Variables and Functions to free after 20 batches."""
    found = bench(module).framework_objects_found_by_collector()
    return Measurement(passed=found > 0, expected="> 0 Variables and Functions",
                       measured=f"{found}")
