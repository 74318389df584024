"""Transforms for dataset samples (``Dataset(transform=...)``): small
callables on one NumPy array each."""
import numpy as np


class Compose:
    """Apply ``transforms`` one after another."""

    def __init__(self, transforms=()):
        self.transforms = list(transforms)

    def __call__(self, x):
        for t in self.transforms:
            x = t(x)
        return x


class Flatten:
    """Make a sample one-dimensional (a 1x28x28 image becomes 784 values)."""

    def __call__(self, array):
        return array.reshape(-1)


class AsType:
    """Convert to ``dtype``."""

    def __init__(self, dtype=np.float32):
        self.dtype = dtype

    def __call__(self, array):
        return array.astype(self.dtype)


ToFloat = AsType


class ToInt(AsType):
    def __init__(self, dtype=int):
        super().__init__(dtype)


class Normalize:
    """``(x - mean) / std``; scalars or arrays that broadcast against x."""

    def __init__(self, mean=0, std=1):
        self.mean = mean
        self.std = std

    def __call__(self, array):
        return (array - self.mean) / self.std
