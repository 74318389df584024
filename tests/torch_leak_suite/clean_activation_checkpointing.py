"""Activation checkpointing (torch.utils.checkpoint) used as meant: the
block's activations are recomputed during backward instead of being saved,
and nothing of a step is kept after it."""
import torch
from suite_common import batches, mse
from torch.utils.checkpoint import checkpoint

torch.manual_seed(0)
block = torch.nn.Sequential(torch.nn.Linear(4, 16), torch.nn.Tanh(), torch.nn.Linear(16, 16),
                            torch.nn.Tanh())
head = torch.nn.Linear(16, 1)
optimizer = torch.optim.SGD([*block.parameters(), *head.parameters()], lr=0.01)
total = 0.0
for x, t in batches():
    hidden = checkpoint(block, x, use_reentrant=False)
    loss = mse(head(hidden), t)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    total += loss.item()
