"""Adam: its state is made at the first step and then kept (warm-up, not a leak)."""
import torch
from suite_common import batches, mse, small_model

model = small_model()
optimizer = torch.optim.Adam(model.parameters(), lr=0.001)
for x, t in batches():
    loss = mse(model(x), t)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
