"""SGD with momentum, and a gradient-penalty-like term summed across steps."""
import torch
from suite_common import batches, mse, small_model

model = small_model()
optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
penalty_sum = torch.zeros(())
for x, t in batches():
    out = model(x)
    loss = mse(out, t)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    penalty_sum = penalty_sum + out.pow(2).mean()
