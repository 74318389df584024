"""Gradients accumulated over four batches, an optimizer step every fourth."""
import torch
from suite_common import batches, mse, small_model

model = small_model()
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
for index, (x, t) in enumerate(batches(count=80)):
    loss = mse(model(x), t) / 4
    loss.backward()
    if index % 4 == 3:
        optimizer.step()
        optimizer.zero_grad()
