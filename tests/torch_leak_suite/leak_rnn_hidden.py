"""A recurrent state carried across batches without detach while the readout is fine-tuned
(retain_graph=True, to make the second backward run)."""
import torch
from suite_common import batches, mse

torch.manual_seed(0)
cell = torch.nn.RNNCell(4, 8)  # pretrained: not in the optimizer, still requires grad
readout = torch.nn.Linear(8, 1)
optimizer = torch.optim.SGD(readout.parameters(), lr=0.01)
hidden = torch.zeros(16, 8)
for x, t in batches():
    hidden = cell(x, hidden)
    loss = mse(readout(hidden), t)
    optimizer.zero_grad()
    loss.backward(retain_graph=True)
    optimizer.step()
