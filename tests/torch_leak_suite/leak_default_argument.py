"""A mutable default argument remembers every loss passed to it."""
import torch
from suite_common import batches, mse, small_model


def remember(loss, _seen=[]):
    _seen.append(loss)
    return len(_seen)


model = small_model()
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
for x, t in batches():
    loss = mse(model(x), t)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    remember(loss)
