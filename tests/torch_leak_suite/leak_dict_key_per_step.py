"""Predictions stored in a dict that gains one key per step (no single entry grows)."""
import torch
from suite_common import batches, mse, small_model

model = small_model()
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
predictions_by_step = {}
for step, (x, t) in enumerate(batches()):
    out = model(x)
    loss = mse(out, t)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    predictions_by_step[f"step{step}"] = out
