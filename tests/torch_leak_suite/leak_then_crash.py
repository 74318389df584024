"""Losses kept with their graphs, then the script fails (as a real leak often ends)."""
import torch
from suite_common import batches, mse, small_model

model = small_model()
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
kept_losses = []
for step, (x, t) in enumerate(batches()):
    loss = mse(model(x), t)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    kept_losses.append(loss)
    if step == 9:
        raise RuntimeError("CUDA out of memory (simulated)")
