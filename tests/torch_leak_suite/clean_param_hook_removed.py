"""A gradient hook registered at every step and removed after backward: nothing stays."""
import torch
from suite_common import batches, mse, small_model

model = small_model()
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
grad_norms = []
for x, t in batches():
    out = model(x)
    loss = mse(out, t)
    handle = model[0].weight.register_hook(lambda grad: grad_norms.append(grad.norm().item()))
    optimizer.zero_grad()
    loss.backward()
    handle.remove()
    optimizer.step()
