"""A recurrent net whose input sequence grows by one each step, on purpose; the state starts anew."""
import torch

torch.manual_seed(0)
cell = torch.nn.RNNCell(4, 8)
readout = torch.nn.Linear(8, 1)
optimizer = torch.optim.SGD([*cell.parameters(), *readout.parameters()], lr=0.01)
for length in range(1, 41):
    sequence = torch.randn(length, 2, 4)
    h = torch.zeros(2, 8)
    for x in sequence:
        h = cell(x, h)
    loss = readout(h).pow(2).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
