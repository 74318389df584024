"""Outputs kept in a WeakValueDictionary: an entry goes when its step's output goes."""
import weakref

import torch
from suite_common import batches, mse, small_model

model = small_model()
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
latest_outputs = weakref.WeakValueDictionary()
for step, (x, t) in enumerate(batches()):
    out = model(x)
    latest_outputs[step] = out
    loss = mse(out, t)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
