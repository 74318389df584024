"""When the cyclic collector ran, read from a record (dezero_mini.memory.gcstats)."""
import numpy as np

from dezero_mini.memory import SIGNALS, TrainingRecord
from dezero_mini.memory.gcstats import batches_between_collections, collection_batches


def _record(collections):
    signals = {name: np.zeros(len(collections), dtype=np.int64) for name in SIGNALS}
    signals["gc_collections"] = np.array(collections, dtype=np.int64)
    return TrainingRecord("test", "02", signals)


def test_collection_batches_count_from_one():
    record = _record([0, 0, 1, 0, 0, 2, 0, 0, 0, 1])
    assert collection_batches(record).tolist() == [3, 6, 10]


def test_spacing_is_the_median_gap():
    record = _record([1, 0, 0, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0, 1])
    assert batches_between_collections(record) == 3.0


def test_spacing_needs_two_collections():
    assert batches_between_collections(_record([0, 0, 0])) is None
    assert batches_between_collections(_record([0, 1, 0])) is None
