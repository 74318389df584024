"""Logging callbacks queued with functools.partial, each bound to the step's loss tensor."""
import functools

import torch
from suite_common import batches, mse, small_model


def log_loss(loss, step):
    return f"{step}: {loss.item():.4f}"


model = small_model()
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
pending_logs = []
for step, (x, t) in enumerate(batches()):
    loss = mse(model(x), t)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    pending_logs.append(functools.partial(log_loss, loss, step))  # flushed never
