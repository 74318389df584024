"""Metrics grouped per epoch in a defaultdict(list), as numbers."""
import collections

import torch
from suite_common import batches, mse, small_model

model = small_model()
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
epoch_losses = collections.defaultdict(list)
for epoch in range(10):
    for x, t in batches(count=10, seed=epoch):
        loss = mse(model(x), t)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        epoch_losses[epoch].append(loss.item())
