"""A callback stored on the module, each one a functools.partial wrapping the one before."""
import functools

import torch
from suite_common import batches, mse, small_model


def report(loss, previous=None):
    if previous is not None:
        previous()
    return float(loss)


model = small_model()
model.on_epoch_end = None
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
for x, t in batches():
    loss = mse(model(x), t)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    model.on_epoch_end = functools.partial(report, loss, previous=model.on_epoch_end)
