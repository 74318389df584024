"""A deque without maxlen used as a replay of outputs."""
import collections

import torch
from suite_common import batches, mse, small_model

model = small_model()
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
replay = collections.deque()
for x, t in batches():
    out = model(x)
    loss = mse(out, t)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    replay.append(out)
