"""A running average of the loss computed from the loss tensor itself."""
import torch

from common import mlp, options, regression_data

args = options(__doc__)
model = mlp()
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
smoothed = None
for step, (x, t) in zip(range(args.steps), regression_data()):
    loss = torch.nn.functional.mse_loss(model(x), t)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    value = loss.item() if args.fixed else loss  # the tensor drags its graph along
    smoothed = value if smoothed is None else 0.9 * smoothed + 0.1 * value
print(f"smoothed loss {float(smoothed):.4f}")
