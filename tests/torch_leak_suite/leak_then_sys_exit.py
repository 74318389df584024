"""Losses kept with their graphs, then sys.exit(4) after ten steps."""
import sys

import torch
from suite_common import batches, mse, small_model

model = small_model()
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
seen_losses = []
for step, (x, t) in enumerate(batches()):
    loss = mse(model(x), t)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    seen_losses.append(loss)
    if step == 9:
        sys.exit(4)
