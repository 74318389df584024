"""retain_graph=True to silence 'backward through the graph a second time': every graph stays.

A smoothed loss carried from step to step is backpropagated at each step;
the second backward fails without retain_graph=True, and with it each
step's graph stays reachable from the next one.
"""
import torch
from suite_common import batches, mse

torch.manual_seed(0)
model = torch.nn.Linear(4, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.001)
smoothed_loss = torch.zeros(())
for x, t in batches():
    smoothed_loss = 0.9 * smoothed_loss + mse(model(x), t)
    optimizer.zero_grad()
    smoothed_loss.backward(retain_graph=True)
    optimizer.step()
