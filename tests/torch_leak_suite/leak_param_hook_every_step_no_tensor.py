"""A gradient hook registered on a weight at every step and never removed; it keeps no tensor,
but the weight's hooks pile up (and every backward runs all of them)."""
import torch
from suite_common import batches, mse, small_model

model = small_model()
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
for x, t in batches():
    out = model(x)
    loss = mse(out, t)
    model[0].weight.register_hook(lambda grad: grad.clamp(-1.0, 1.0))  # the handle is dropped
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
