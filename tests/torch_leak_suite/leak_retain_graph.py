"""retain_graph=True to silence 'backward through the graph a second time': every graph stays."""
import torch
from suite_common import batches, mse, small_model

model = small_model()
optimizer = torch.optim.SGD(model.parameters(), lr=0.001)
running = torch.zeros(())
for x, t in batches():
    running = 0.9 * running + mse(model(x), t)
    optimizer.zero_grad()
    running.backward(retain_graph=True)
    optimizer.step()
