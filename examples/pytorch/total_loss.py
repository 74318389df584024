"""`total_loss += loss`: the sum keeps every step's graph (PyTorch's FAQ, first answer)."""
import torch

from common import mlp, options, regression_data

args = options(__doc__)
model = mlp()
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
total_loss = 0.0
for step, (x, t) in zip(range(args.steps), regression_data()):
    loss = torch.nn.functional.mse_loss(model(x), t)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    if args.fixed:
        total_loss += loss.item()  # a Python number: no graph
    else:
        total_loss += loss  # a tensor whose graph holds every loss so far
print(f"mean loss {float(total_loss) / args.steps:.4f}")
