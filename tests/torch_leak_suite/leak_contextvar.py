"""A ContextVar that carries the run's recent losses: each set() keeps a longer tuple of tensors."""
import contextvars

import torch
from suite_common import batches, mse, small_model

recent_losses = contextvars.ContextVar("recent_losses", default=())
model = small_model()
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
for x, t in batches():
    loss = mse(model(x), t)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    recent_losses.set(recent_losses.get() + (loss,))
