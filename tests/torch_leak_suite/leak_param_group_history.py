"""Losses kept in the optimizer's param group (a scheduler reads them): the group keeps them all."""
import torch
from suite_common import batches, mse, small_model

model = small_model()
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
for x, t in batches():
    loss = mse(model(x), t)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    optimizer.param_groups[0].setdefault("loss_history", []).append(loss)
