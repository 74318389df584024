"""A module that caches its activations on an attribute (for a plot, a probe)."""
import torch

from common import options, regression_data

args = options(__doc__)


class ProbedMLP(torch.nn.Module):
    """An MLP that keeps its hidden activations of every call in `self.seen`."""

    def __init__(self, fixed):
        super().__init__()
        torch.manual_seed(0)
        self.hidden = torch.nn.Linear(8, 32)
        self.out = torch.nn.Linear(32, 1)
        self.fixed = fixed
        self.seen = []

    def forward(self, x):
        h = torch.tanh(self.hidden(x))
        self.seen.append(h.detach() if self.fixed else h)  # detached: values, no graph
        return self.out(h)


model = ProbedMLP(args.fixed)
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
for step, (x, t) in zip(range(args.steps), regression_data()):
    loss = torch.nn.functional.mse_loss(model(x), t)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
print(f"{len(model.seen)} activations seen")
