"""A global forward hook (for every module) registered at every step, each bound to that step's loss."""
import torch
from suite_common import batches, mse, small_model

model = small_model()
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
for x, t in batches():
    loss = mse(model(x), t)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    # Meant to compare the next forward with this loss; the handle is dropped.
    torch.nn.modules.module.register_module_forward_hook(
        lambda module, inputs, output, before=loss: None)
