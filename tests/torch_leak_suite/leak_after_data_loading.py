"""A data-loading loop of 200 rounds before the first training step, then total += loss."""
import torch
from suite_common import mse, small_model

torch.manual_seed(0)
data = []
for index in range(200):  # loading: no training step yet
    x = torch.randn(16, 4)
    data.append((x, x.sum(1, keepdim=True)))
model = small_model()
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
total = 0
for x, t in data:
    loss = mse(model(x), t)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    total = total + loss
