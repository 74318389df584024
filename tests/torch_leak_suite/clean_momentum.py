"""SGD with momentum, and the last loss as a number (`.item()`: `float(loss)` of a
tensor that requires grad works too, but PyTorch warns that it may not be what is meant)."""
import torch
from suite_common import batches, mse, small_model

model = small_model()
optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
last = None
for x, t in batches():
    loss = mse(model(x), t)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    last = loss.item()
