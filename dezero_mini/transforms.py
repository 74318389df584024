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
    """``(x - mean) / std``. ``mean`` and ``std`` are scalars, or one value per
    channel (a sequence, for a sample of shape (C, H, W): applied along the
    first axis, as in DeZero), or arrays that broadcast against the sample."""

    def __init__(self, mean=0, std=1):
        self.mean = mean
        self.std = std

    def __call__(self, array):
        return (array - _per_channel(self.mean, array)) / _per_channel(self.std, array)


def _per_channel(value, array):
    """A 1-D ``value`` laid along the first axis of a multi-axis ``array``."""
    if np.isscalar(value):
        return value
    value = np.asarray(value)
    if value.ndim == 1 and array.ndim > 1:
        return value.reshape((-1,) + (1,) * (array.ndim - 1))
    return value
