"""DataLoader: a dataset in mini-batches of NumPy arrays, epoch by epoch."""
import math

import numpy as np

from dezero_mini.validation import describe, whole_number


class DataLoader:
    """Iterate over ``dataset`` in batches of ``batch_size`` samples.

    Each ``next()`` gives ``(x, t)``: the samples and the labels of one batch
    stacked into arrays (``t`` is None for a dataset without labels). An epoch
    has ``max_iter`` batches, the last one smaller when the size does not
    divide evenly; each sample appears exactly once per epoch. At the end of
    an epoch the loader raises StopIteration and resets itself, so that the
    next ``for`` loop is the next epoch (reshuffled when ``shuffle`` is True,
    with ``np.random.permutation``: reproducible under ``np.random.seed``).
    """

    def __init__(self, dataset, batch_size, shuffle=True, gpu=False):
        if gpu:
            raise NotImplementedError("DataLoader: dezero_mini runs on the CPU only (gpu=False)")
        whole_number(batch_size, "DataLoader", "batch_size", at_least=1)
        if not (hasattr(dataset, "__len__") and hasattr(dataset, "__getitem__")) or isinstance(dataset, str):
            raise TypeError("DataLoader: dataset must be a Dataset (something with len() and [i]), "
                            f"got {describe(dataset)}")
        self.dataset = dataset
        self.batch_size = batch_size
        self.shuffle = shuffle
        self.gpu = gpu
        self.data_size = len(dataset)
        self.max_iter = math.ceil(self.data_size / batch_size)
        self.reset()

    def reset(self):
        """Start a new epoch (with a new order when shuffling)."""
        self.iteration = 0
        if self.shuffle:
            self.index = np.random.permutation(self.data_size)
        else:
            self.index = np.arange(self.data_size)

    def __iter__(self):
        return self

    def __next__(self):
        if self.iteration >= self.max_iter:
            self.reset()
            raise StopIteration
        batch = [self.dataset[int(i)] for i in self._rows()]
        x = np.array([sample[0] for sample in batch])
        labels = [sample[1] for sample in batch]
        t = None if all(label is None for label in labels) else np.array(labels)
        self.iteration += 1
        return x, t

    def _rows(self):
        """The indices of the samples of the current batch."""
        start = self.iteration * self.batch_size
        return self.index[start : start + self.batch_size]

    def next(self):
        return self.__next__()

    def to_cpu(self):
        self.gpu = False

    def to_gpu(self):
        raise NotImplementedError("DataLoader: dezero_mini runs on the CPU only")


class SeqDataLoader(DataLoader):
    """Batches for truncated backpropagation through time: the dataset is cut
    into ``batch_size`` equal parts, and batch ``k`` holds the ``k``-th sample
    of each part, so that consecutive batches continue each sequence. Never
    shuffled; ``max_iter`` is ``len(dataset) // batch_size``."""

    def __init__(self, dataset, batch_size, gpu=False):
        super().__init__(dataset, batch_size, shuffle=False, gpu=gpu)
        if batch_size > self.data_size:  # parts of 0 samples: every row the same sample
            raise ValueError(f"SeqDataLoader: batch_size must be at most the dataset's "
                             f"{self.data_size} samples (one part of the sequence each), "
                             f"got {batch_size}")
        self.max_iter = self.data_size // batch_size

    def _rows(self):
        jump = self.data_size // self.batch_size
        return [(i * jump + self.iteration) % self.data_size for i in range(self.batch_size)]
