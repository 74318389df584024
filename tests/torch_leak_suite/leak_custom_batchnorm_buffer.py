"""A mean-only batch norm whose running mean buffer is updated with its graph (PyTorch issue 20275)."""
import torch
from suite_common import batches, mse


class MeanOnlyBatchNorm(torch.nn.Module):
    def __init__(self, features, momentum=0.1):
        super().__init__()
        self.momentum = momentum
        self.bias = torch.nn.Parameter(torch.zeros(features))
        self.register_buffer("running_mean", torch.zeros(features))

    def forward(self, x):
        mean = x.mean(0)
        self.running_mean.mul_(1 - self.momentum).add_(self.momentum * mean)  # no no_grad()
        return x - mean + self.bias


torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(4, 8), MeanOnlyBatchNorm(8), torch.nn.Linear(8, 1))
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
for x, t in batches():
    loss = mse(model(x), t)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
