"""When did the cyclic collector run? Read from a ``TrainingRecord``.

The collector starts a collection when enough container objects have been
allocated since the last one (the first of ``gc.get_threshold()``), so how
many batches lie between two collections depends on the Python version (its
thresholds, and how many objects the interpreter allocates per batch) and on
the workload. Lessons show the reader's own figure, measured here.
"""
import numpy as np


def collection_batches(record):
    """The batch numbers (counting from 1) after which at least one automatic
    collection ran, as a numpy array (empty when the collector never ran)."""
    return np.flatnonzero(np.asarray(record.signal("gc_collections")) > 0) + 1


def batches_between_collections(record):
    """The median number of batches between two automatic collections of a
    record, or None when fewer than two collections ran."""
    batches = collection_batches(record)
    if len(batches) < 2:
        return None
    return float(np.median(np.diff(batches)))
