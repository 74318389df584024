"""Predictions memoised with functools.lru_cache: each cached result keeps its graph."""
import functools

import torch
from suite_common import batches, mse, small_model

model = small_model()
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
probes = [torch.full((2, 4), float(index)) for index in range(200)]


@functools.lru_cache(maxsize=None)
def predict(index):
    return model(probes[index])  # with its graph: the cache keeps it


for step, (x, t) in enumerate(batches()):
    loss = mse(model(x), t) + 0.01 * predict(step).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
