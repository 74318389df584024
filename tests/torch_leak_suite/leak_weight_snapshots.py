"""Snapshots of the weights taken with clone() (not detach().clone()): each keeps a graph node."""
import torch
from suite_common import batches, mse, small_model

model = small_model()
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
snapshots = []
for x, t in batches():
    loss = mse(model(x), t)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    snapshots.append([p.clone() for p in model.parameters()])  # CloneBackward each
