"""`losses.append(loss)`: a list for the learning curve keeps every step's graph."""
import torch

from common import mlp, options, regression_data

args = options(__doc__)
model = mlp()
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
losses = []
for step, (x, t) in zip(range(args.steps), regression_data()):
    loss = torch.nn.functional.mse_loss(model(x), t)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    losses.append(loss.item() if args.fixed else loss)
print(f"last loss {float(losses[-1]):.4f}")
