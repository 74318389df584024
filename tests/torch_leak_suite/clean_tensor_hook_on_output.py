"""A gradient hook registered at every step on that step's output: it goes with the output."""
import torch
from suite_common import batches, mse, small_model

model = small_model()
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
grad_norms = []
for x, t in batches():
    out = model(x)
    out.register_hook(lambda grad: grad_norms.append(grad.norm().item()))
    loss = mse(out, t)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
