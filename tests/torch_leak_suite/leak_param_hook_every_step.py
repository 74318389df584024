"""A gradient hook registered on a weight at every step and never removed."""
import torch
from suite_common import batches, mse, small_model

model = small_model()
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
for x, t in batches():
    out = model(x)
    loss = mse(out, t)
    # The lambda keeps this step's output (and its graph); the hook stays on the weight.
    model[0].weight.register_hook(lambda grad, out=out: grad + 0 * out.sum().detach())
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
