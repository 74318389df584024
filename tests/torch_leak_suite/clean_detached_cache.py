"""Outputs kept detached for a plot: a cache that grows on purpose, without graphs."""
import torch
from suite_common import batches, mse, small_model

model = small_model()
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
outputs_kept = []
for x, t in batches():
    out = model(x)
    loss = mse(out, t)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    outputs_kept.append(out.detach())
