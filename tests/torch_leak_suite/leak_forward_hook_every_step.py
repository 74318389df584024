"""A forward hook registered at every step and never removed, each bound to that step's output."""
import torch
from suite_common import batches, mse, small_model

model = small_model()
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
for x, t in batches():
    out = model(x)
    # Meant to check the next step's activations against this one; the handle is dropped.
    model[1].register_forward_hook(lambda module, inputs, output, before=out: None)
    loss = mse(out, t)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
