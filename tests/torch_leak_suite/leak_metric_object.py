"""A metric object that adds up loss tensors on an attribute."""
import torch
from suite_common import batches, mse, small_model


class Mean:
    def __init__(self):
        self.total, self.count = 0, 0

    def update(self, value):
        self.total = self.total + value
        self.count += 1


model = small_model()
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
meter = Mean()
for x, t in batches():
    loss = mse(model(x), t)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    meter.update(loss)
