"""Warnings recorded for a summary, each made with the loss tensor: the record keeps it."""
import warnings

import torch
from suite_common import batches, mse, small_model


class LossSpike(UserWarning):
    """A loss above the threshold (its argument: the loss)."""


model = small_model()
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    for x, t in batches():
        loss = mse(model(x), t)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if loss > 0.0:  # every step, here
            warnings.warn(LossSpike(loss))
print(len(caught), "warnings")
