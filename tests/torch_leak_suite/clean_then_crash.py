"""A clean loop that fails after ten steps: its own error, and no leak."""
import torch
from suite_common import batches, mse, small_model

model = small_model()
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
for step, (x, t) in enumerate(batches()):
    loss = mse(model(x), t)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    if step == 9:
        raise RuntimeError("the data ran out (simulated)")
