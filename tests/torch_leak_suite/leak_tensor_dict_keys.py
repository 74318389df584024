"""Outputs used as dict keys (a tensor hashes by identity): each key keeps its graph."""
import torch
from suite_common import batches, mse, small_model

model = small_model()
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
step_of_output = {}
for step, (x, t) in enumerate(batches()):
    out = model(x)
    step_of_output[out] = step  # meant to look the step up later
    loss = mse(out, t)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
