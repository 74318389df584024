"""Predictions on a check batch under torch.no_grad(), kept in a list."""
import torch
from suite_common import batches, mse, small_model

model = small_model()
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
x_check = torch.randn(16, 4)
checks = []
for x, t in batches():
    loss = mse(model(x), t)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    with torch.no_grad():
        checks.append(model(x_check))
