"""Truncated backpropagation: the hidden state detached at each step."""
import torch
from suite_common import batches, mse

torch.manual_seed(0)
cell = torch.nn.RNNCell(4, 8)
readout = torch.nn.Linear(8, 1)
optimizer = torch.optim.SGD([*cell.parameters(), *readout.parameters()], lr=0.01)
hidden = torch.zeros(16, 8)
for x, t in batches():
    hidden = cell(x, hidden.detach())
    loss = mse(readout(hidden), t)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
