"""Plain SGD without torch.optim, losses logged as numbers."""
import torch
from suite_common import batches, mse, small_model

model = small_model()
parameters = list(model.parameters())
losses = []
for x, t in batches():
    loss = mse(model(x), t)
    loss.backward()
    with torch.no_grad():
        for w in parameters:
            w -= 0.01 * w.grad
            w.grad.zero_()
    losses.append(loss.item())
