"""A finalizer per step that logs the batch's loss when the batch is freed:
weakref.finalize keeps its arguments (the loss, with its graph) alive until
the object it watches dies, and the batches of the dataset never do."""
import weakref

import torch
from suite_common import batches, mse, small_model


class Batch:
    def __init__(self, x, t):
        self.x, self.t = x, t


freed_losses = []  # numbers: not what keeps the graphs


def log_freed(loss):
    freed_losses.append(loss.item())


model = small_model()
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
dataset = [Batch(x, t) for x, t in batches()]  # every batch lives to the end
for batch in dataset:
    loss = mse(model(batch.x), batch.t)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    weakref.finalize(batch, log_freed, loss)
