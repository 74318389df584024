"""A running mean kept by a generator, given numbers: its frame holds floats."""
import torch
from suite_common import batches, mse, small_model


def running_mean():
    total, count = 0.0, 0
    mean = None
    while True:
        loss = yield mean
        total += loss
        count += 1
        mean = total / count


model = small_model()
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
tracker = running_mean()
next(tracker)
for x, t in batches():
    loss = mse(model(x), t)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    tracker.send(loss.item())
